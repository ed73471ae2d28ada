//! The workload player: what each task does when the scheduler runs it.
//!
//! A task walks its spec steps; each op's execution is in the file named
//! after it (one `match` in `Player::start_op` dispatches them). An op
//! that takes time (a touch, a kvstore, a stream, a read or write, a
//! compute) becomes the task's `Activity`, run access by access until it
//! ends or the slice does: after each access the player asks the slice
//! (`crate::sched::rq::Slice::check`) whether it ends there.

mod compute;
mod drop_caches;
mod file_io;
mod fork;
mod fsync;
mod guest;
mod kvstore;
mod madvise;
mod mmap;
mod munmap;
mod phase;
mod reclaim;
mod repeat;
mod set;
mod sleep;
mod stream;
mod swap;
mod thread;
mod touch;
mod wait;

use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};
use crate::vmstat::VmStat;
use crate::SimError;
use mmsim_spec::output::KvResult;
use mmsim_spec::{Op, Spec, Step};
use std::collections::HashMap;

/// One task instance being run.
pub struct TaskRun<'s> {
    pub name: String,
    pub cgroup: String,
    pub ktask: usize,
    pub instance: u32,
    /// When the task started and when it exited.
    pub start: u64,
    pub end: u64,
    frames: Vec<Frame<'s>>,
    regions: HashMap<String, u32>,
    /// The op in progress, if it takes more than one step.
    activity: Option<Activity<'s>>,
    /// The client statistics of the task's finished kvstore steps.
    pub kv_stats: Option<KvResult>,
    /// Each region's key-value server data, kept between kvstore steps.
    kv_dbs: HashMap<String, mmsim_spec::kv::KvDb>,
    /// Started by a `spawn` step (its run time goes to the histogram), and
    /// how many this task has spawned.
    spawned: bool,
    nspawns: u32,
    pub phases: Vec<PhaseRun>,
    open_phase: Option<usize>,
    /// The task that forked this one, its children still running, and
    /// every child it forked, in order (for the output's order).
    pub parent: Option<usize>,
    live_children: u32,
    pub forks: Vec<usize>,
    /// A thread of its creator's process (`parent`), sharing its mm.
    thread: bool,
    /// `thread` steps this task has run (names its threads thread0, …).
    nthreads: u32,
    /// Mappings its threads made and left to the process at their exit:
    /// they go when the process exits.
    thread_vmas: Vec<u32>,
    /// The VMM of guest N (`Player::guests`): once its steps have mapped
    /// the guest's RAM, it runs the guest.
    pub vmm: Option<usize>,
    /// The I/O thread of guest N's VMM: once started, it makes the
    /// guest's block requests on the host files backing its devices.
    pub vmm_io: Option<usize>,
}

/// What a task is doing across accesses and slices.
enum Activity<'s> {
    Touch(touch::TouchRun<'s>),
    KvStore(kvstore::KvRun<'s>),
    Stream(stream::StreamRun),
    FileIo(file_io::FileIoRun),
    /// CPU time left of a `compute` step.
    Compute(u64),
}

struct Frame<'s> {
    steps: &'s [Step],
    next: usize,
    /// Further passes over `steps` after this one (repeat).
    again: u64,
}

pub struct PhaseRun {
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub vm_start: VmStat,
    pub vm_delta: VmStat,
    pub kv: Option<KvResult>,
    /// Requests replayed by the phase's `trace` steps.
    pub trace_requests: u64,
    /// The multi-gen LRU's generations at the phase's end.
    pub lru_gen: Vec<mmsim_spec::output::LruGenLruvec>,
    /// /proc/pressure as read at the phase's start; the phase's pressure
    /// (its stall totals, the averages at its end).
    pub psi_start: mmsim_spec::output::Pressure,
    pub pressure: mmsim_spec::output::Pressure,
}

/// Every task's workload, and what the steps need of the spec.
pub struct Player<'s> {
    pub tasks: Vec<TaskRun<'s>>,
    swap_devs: &'s [mmsim_spec::SwapDevice],
    /// Page operations done so far (`mmsim_spec::work`): a touch's,
    /// stream's, read's, write's or kvstore's accesses and a compute's
    /// slices as they run, any other step's count when it starts (each
    /// op's `start` adds it: what munmap, madvise, fork, swapoff, fsync,
    /// drop_caches and a checked phase mark walk, 1 for the others).
    done_work: u64,
    /// Page frames of the machine: what a phase mark's check walks.
    frames: u64,
    /// Pages of each file, for what fsync and drop_caches count.
    file_pages: Vec<u64>,
    /// Run the invariant checker at every phase mark.
    pub check: bool,
    /// The guests the VMM tasks run (vm.rs), each out of its slot while
    /// its VMM's slice runs it.
    pub guests: Vec<Option<Box<crate::vm::Guest<'s>>>>,
    /// Each guest's block requests for its VMM's I/O thread.
    pub vm_io: Vec<crate::vm::VmIo>,
}

impl<'s> TaskRun<'s> {
    fn new(name: String, cgroup: String, ktask: usize, instance: u32, steps: &'s [Step]) -> Self {
        TaskRun {
            name,
            cgroup,
            ktask,
            instance,
            start: 0,
            end: 0,
            frames: vec![Frame {
                steps,
                next: 0,
                again: 0,
            }],
            regions: HashMap::new(),
            activity: None,
            kv_stats: None,
            kv_dbs: HashMap::new(),
            spawned: false,
            nspawns: 0,
            phases: Vec::new(),
            open_phase: None,
            parent: None,
            live_children: 0,
            forks: Vec::new(),
            thread: false,
            nthreads: 0,
            vmm: None,
            vmm_io: None,
            thread_vmas: Vec::new(),
        }
    }
}

/// Kernel-side state of a new task in mm `mm` and cgroup `memcg`; `tgid`
/// is its process's first task (its own index for a new process).
fn new_ktask(mm: u32, memcg: u16, oom_score_adj: i16, tgid: usize) -> crate::kernel::KTask {
    crate::kernel::KTask {
        mm,
        memcg,
        nr_pages_over_high: 0,
        ti_work: 0,
        sigkill_at: 0,
        fault_start: None,
        fault_read: false,
        fault_waited: false,
        fault_attempts: 0,
        oom_score_adj,
        tgid,
        exited: false,
        oom_wait: None,
        psi: crate::sched::psi::PsiTask {
            group: memcg,
            ..Default::default()
        },
    }
}

impl<'s> Player<'s> {
    /// The spec's tasks, each instance a process with its own mm.
    pub fn new(spec: &'s Spec, k: &mut Kernel) -> Self {
        let mut tasks = Vec::new();
        for t in &spec.tasks {
            let memcg = t.cgroup.map_or(0, |c| (c + 1) as u16);
            let cgroup = t
                .cgroup
                .map_or(String::new(), |c| spec.cgroups[c].name.clone());
            for i in 0..t.instances {
                let mm = k.mm_alloc(memcg);
                k.khugepaged_exec(mm);
                k.tasks
                    .push(new_ktask(mm, memcg, t.oom_score_adj, k.tasks.len()));
                let name = if t.instances == 1 {
                    t.name.clone()
                } else {
                    format!("{}#{i}", t.name)
                };
                let ktask = k.tasks.len() - 1;
                tasks.push(TaskRun::new(name, cgroup.clone(), ktask, i, &t.steps));
            }
        }
        Player {
            tasks,
            swap_devs: &spec.swap,
            done_work: 0,
            frames: spec.machine.memory / 4096,
            file_pages: spec.files.iter().map(|f| f.size / 4096).collect(),
            check: false,
            guests: Vec::new(),
            vm_io: Vec::new(),
        }
    }

    /// Page operations done so far.
    pub fn done_work(&self) -> u64 {
        self.done_work
    }

    /// Runs task `i` until its slice ends; how it ended.
    pub fn run_slice(
        &mut self,
        i: usize,
        k: &mut Kernel,
        slice: &mut Slice,
    ) -> Result<SliceEnd, SimError> {
        let ktask = self.tasks[i].ktask;
        loop {
            if k.tasks[ktask].sigkill() {
                self.die(i, k);
                return Ok(SliceEnd::Killed);
            }
            let end = match self.step_task(i, k, slice) {
                // The OOM killer chose this task: its fault or syscall
                // failed, and it exits on its way back to user space.
                Err(SimError::Oom) if k.tasks[ktask].sigkill() => Some(SliceEnd::Killed),
                r => r?,
            };
            if let Some(end) = end {
                if k.tasks[ktask].sigkill() {
                    self.die(i, k);
                    return Ok(SliceEnd::Killed);
                }
                return Ok(end);
            }
            // A step (MADV_HUGEPAGE, fork) may have woken khugepaged.
            slice.wake_khugepaged(k);
            // Back in user space after a syscall: the slice ends here if
            // its time is up (a fork or thread may have shortened it),
            // so a run of syscalls does not outrun the other CPUs.
            if k.now() >= slice.end() {
                return Ok(SliceEnd::Preempted);
            }
        }
    }

    /// Advances a task by one step (or a run of accesses). Some(_) ends the slice.
    fn step_task(
        &mut self,
        i: usize,
        k: &mut Kernel,
        slice: &mut Slice,
    ) -> Result<Option<SliceEnd>, SimError> {
        if let Some(a) = self.tasks[i].activity.take() {
            return self.continue_activity(i, k, slice, a);
        }
        let t = &mut self.tasks[i];
        let Some(frame) = t.frames.last_mut() else {
            if let Some(g) = t.vmm {
                if self.guests[g].as_ref().is_some_and(|g| !g.done) {
                    return guest::run(self, i, k, slice, g);
                }
            }
            if let Some(g) = t.vmm_io {
                if let Some(end) = guest::run_io(self, i, k, slice, g)? {
                    return Ok(Some(end));
                }
            }
            let t = &mut self.tasks[i];
            if t.live_children > 0 {
                // A task's end waits for its children (so all report).
                return Ok(Some(SliceEnd::Wait));
            }
            close_phase(t, k);
            return Ok(Some(SliceEnd::Done));
        };
        if frame.next == frame.steps.len() {
            if frame.again > 0 {
                frame.again -= 1;
                frame.next = 0;
            } else {
                t.frames.pop();
            }
            return Ok(None);
        }
        let step = &frame.steps[frame.next];
        frame.next += 1;
        self.start_op(i, k, step, slice)
    }

    /// The next part of the op in progress; it stays in progress unless
    /// it ended (Ok(None)).
    fn continue_activity(
        &mut self,
        i: usize,
        k: &mut Kernel,
        slice: &mut Slice,
        a: Activity<'s>,
    ) -> Result<Option<SliceEnd>, SimError> {
        match a {
            Activity::Touch(tr) => touch::run(self, i, k, slice, tr),
            Activity::KvStore(kr) => kvstore::run(self, i, k, slice, kr),
            Activity::Stream(sr) => stream::run(self, i, k, slice, sr),
            Activity::FileIo(io) => file_io::run(self, i, k, slice, io),
            Activity::Compute(left) => Ok(compute::run(self, i, k, slice, left)),
        }
    }

    /// Starts step `step` of task `i`: the one place each op is told
    /// apart (an op's execution is in its own file).
    fn start_op(
        &mut self,
        i: usize,
        k: &mut Kernel,
        step: &'s Step,
        slice: &mut Slice,
    ) -> Result<Option<SliceEnd>, SimError> {
        match &step.op {
            Op::Mmap { .. } => mmap::start(self, i, k, step),
            Op::Munmap { region } => munmap::start(self, i, k, step, region),
            Op::Touch(touch) => touch::start(self, i, k, step, touch),
            Op::Sleep { ns } => Ok(sleep::start(self, k, *ns)),
            Op::Compute { ns } => Ok(compute::start(self, i, *ns)),
            Op::Phase { name } => phase::start(self, i, k, name),
            Op::Fork { steps } => fork::start(self, i, k, slice, steps, false),
            Op::Spawn { steps } => fork::start(self, i, k, slice, steps, true),
            Op::Thread { steps } => thread::start(self, i, k, slice, steps),
            Op::Wait => Ok(wait::start(self, i)),
            Op::Swapoff { device } => swap::swapoff(self, k, step, *device),
            Op::Swapon { device } => swap::swapon(self, k, step, *device),
            Op::Set(setting) => set::start(self, k, step, setting),
            Op::Madvise { .. } => madvise::start(self, i, k, step),
            Op::FileIo { .. } => Ok(file_io::start(self, i, k, step)),
            Op::Fsync { file } => Ok(fsync::start(self, k, *file)),
            Op::Stream { .. } => Ok(stream::start(self, i, step)),
            Op::DropCaches => Ok(drop_caches::start(self, k)),
            Op::Reclaim {
                cgroup,
                pages,
                swappiness,
            } => reclaim::start(self, k, step, (cgroup, *pages, *swappiness)),
            Op::KvStore(kv) => kvstore::start(self, i, k, step, kv),
            Op::Repeat { times, steps } => Ok(repeat::start(self, i, *times, steps)),
        }
    }

    /// exit_mmap: every mapping goes (a thread's exit leaves them to its
    /// process; an OOM victim killed in a syscall lost them at the kill). The parent to wake from
    /// wait(2), if this was its last child.
    pub fn exit_task(&mut self, i: usize, k: &mut Kernel) -> Option<usize> {
        let ktask = self.tasks[i].ktask;
        k.tasks[ktask].exited = true;
        if self.tasks[i].thread {
            return self.exit_thread(i, k);
        }
        let t = &mut self.tasks[i];
        t.regions.clear();
        t.thread_vmas.clear();
        let mm = k.tasks[ktask].mm;
        if !k.mms[mm as usize].exited {
            k.exit_mmap(mm);
        }
        t.end = k.now();
        if t.spawned {
            k.hist.spawn_runtime_ns.record(t.end - t.start);
        }
        let p = t.parent?;
        let parent = &mut self.tasks[p];
        parent.live_children -= 1;
        (parent.live_children == 0).then_some(p)
    }

    /// SIGKILL: the task stops what it was doing; a phase it had opened
    /// never ends (it is left out, as the real task's report is).
    /// Task `i` exits on its SIGKILL. Sent from a CPU whose slice ran
    /// ahead of this one (the CPUs keep in step only within a quantum),
    /// the signal reaches it at its sending time: until then the task ran
    /// user code the model does not replay (microseconds at most), so it
    /// never exits before it was killed.
    fn die(&mut self, i: usize, k: &mut Kernel) {
        let (at, now) = (k.tasks[self.tasks[i].ktask].sigkill_at, k.now());
        if now < at {
            k.charge_wall(crate::cost_model::Fn::User, at - now);
        }
        self.kill(i);
    }

    pub fn kill(&mut self, i: usize) {
        let t = &mut self.tasks[i];
        t.activity = None;
        t.frames.clear();
        if let Some(p) = t.open_phase.take() {
            t.phases.truncate(p);
        }
    }

    /// A thread's exit: the mm stays with its process, which takes over
    /// the mappings the thread made (the creator's own are shared, and the
    /// spec check keeps the thread from unmapping them).
    fn exit_thread(&mut self, i: usize, k: &Kernel) -> Option<usize> {
        let p = self.tasks[i].parent.expect("a thread has a creator");
        let t = &mut self.tasks[i];
        t.end = k.now();
        let mut own: Vec<u32> = t.regions.drain().map(|(_, v)| v).collect();
        own.append(&mut t.thread_vmas);
        let parent = &mut self.tasks[p];
        own.retain(|v| !parent.regions.values().any(|pv| pv == v));
        parent.thread_vmas.append(&mut own);
        parent.live_children -= 1;
        (parent.live_children == 0).then_some(p)
    }

    /// Task indices in output order: each task followed by its forks,
    /// depth first.
    pub fn output_order(&self) -> Vec<usize> {
        fn visit(s: &Player, i: usize, out: &mut Vec<usize>) {
            out.push(i);
            for &c in &s.tasks[i].forks {
                visit(s, c, out);
            }
        }
        let mut out = Vec::new();
        for i in 0..self.tasks.len() {
            if self.tasks[i].parent.is_none() {
                visit(self, i, &mut out);
            }
        }
        out
    }

    /// An out-of-memory end of task `i` that the OOM killer could not
    /// resolve, told as what Linux does then; any other error of the
    /// spec's not yet tied to a line gets the line of the step the task
    /// was running.
    pub fn locate(&self, i: usize, k: &Kernel, e: SimError) -> SimError {
        let t = &self.tasks[i];
        let step = t
            .frames
            .last()
            .and_then(|f| f.steps.get(f.next.saturating_sub(1)));
        if e != SimError::Oom {
            return match (e, step) {
                (e @ (SimError::Unmodelled(_) | SimError::Spec(_)), Some(s)) => at_step(s, e),
                (e, _) => e,
            };
        }
        let message = match (&k.unmodelled, t.cgroup.is_empty()) {
            // The global OOM killer found nothing to kill: a panic.
            (Some(why), _) => format!("task {}: {why}", t.name),
            (None, true) => format!(
                "task {} ran out of memory (VM_FAULT_OOM) outside any cgroup and the OOM killer chose no task: Linux would retry the fault forever; expected a workload that fits or a task the OOM killer may kill",
                t.name
            ),
            (None, false) => format!(
                "task {} could not charge cgroup {} and its OOM killer found no task to kill (every task in it has oom_score_adj = -1000): Linux retries the fault forever (pagefault_out_of_memory); expected a task the OOM killer may kill, a larger `cgroup.{}.memory_max` or more `[[swap]]`",
                t.name, t.cgroup, t.cgroup
            ),
        };
        match step {
            Some(s) => at_step(s, SimError::Unmodelled(message)),
            None => SimError::Unmodelled(message),
        }
    }

    /// The VMA of region `region` of task `i`.
    fn region(&self, i: usize, step: &Step, region: &str) -> Result<u32, SimError> {
        self.tasks[i]
            .regions
            .get(region)
            .copied()
            .ok_or_else(|| unknown_region(step, region))
    }

    /// One access of a user page, counted as done unless its fault must
    /// wait (the op makes the access again when the task wakes) or went
    /// back to user space without mapping the page (the op makes it
    /// again after `after_access`).
    #[inline]
    fn play_access(
        &mut self,
        k: &mut Kernel,
        vma: u32,
        page: usize,
        write: bool,
    ) -> Result<Access, SimError> {
        k.user_access(vma, page, write)?;
        if let Some(until) = k.fault.take_blocked_until() {
            return Ok(Access::Sleep(until));
        }
        if k.fault.take_again() {
            return Ok(Access::Again);
        }
        self.done_work += 1;
        Ok(Access::Done)
    }

    /// The pages of a region of task `i`, 0 if it has none of that name.
    fn region_pages(&self, i: usize, k: &Kernel, region: &str) -> u64 {
        self.tasks[i]
            .regions
            .get(region)
            .map_or(0, |&v| k.vmas[v as usize].pages)
    }
}

/// How a user access ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Done,
    /// Its fault must wait until then; the access is made again after.
    Sleep(u64),
    /// Its fault returned without mapping the page: back in user space
    /// (`after_access`), the access is made again.
    Again,
}

/// Back in user space after an access: the work the return to user space
/// has (`exit_to_user_mode_loop`), then ask the slice whether it ends here.
#[inline]
fn after_access(k: &mut Kernel, ktask: usize, slice: &mut Slice) -> Option<SliceEnd> {
    if k.tasks[ktask].ti_work != 0 {
        if let Some(end) = exit_to_user_mode_work(k, ktask) {
            return Some(end);
        }
    }
    slice.check(k)
}

/// A fatal signal ends the task; memory.high debt is settled
/// (`mem_cgroup_handle_over_high`, whose sleep ends the slice).
#[cold]
fn exit_to_user_mode_work(k: &mut Kernel, ktask: usize) -> Option<SliceEnd> {
    use crate::kernel::{TIF_NOTIFY_RESUME, TIF_SIGPENDING};
    let t = &mut k.tasks[ktask];
    if t.ti_work & TIF_SIGPENDING != 0 {
        return Some(SliceEnd::Killed);
    }
    t.ti_work &= !TIF_NOTIFY_RESUME;
    let debt = std::mem::take(&mut t.nr_pages_over_high);
    let memcg = t.memcg;
    let sleep = k.mem_cgroup_handle_over_high(memcg, debt);
    if sleep == 0 {
        return None;
    }
    // The throttling sleep is a memory stall until the task runs again.
    k.psi_memstall_sleep();
    Some(SliceEnd::Sleep(k.now().saturating_add(sleep)))
}

fn close_phase(t: &mut TaskRun, k: &mut Kernel) {
    if let Some(p) = t.open_phase.take() {
        let psi = k.psi_show(0);
        let ph = &mut t.phases[p];
        ph.end = k.now();
        ph.vm_delta = k.vm.delta(&ph.vm_start);
        ph.lru_gen = k.lru_gen_snapshot();
        ph.pressure = psi.since(&ph.psi_start);
    }
}

fn unknown_region(step: &Step, region: &str) -> SimError {
    at_step(
        step,
        SimError::Spec(format!(
            "found region \"{region}\", which is not mapped at this point; expected a region an earlier step mapped"
        )),
    )
}

/// `e`, told as an error of `step` (file:line: key `…`: …).
fn at_step(step: &Step, e: SimError) -> SimError {
    SimError::at(step.line, step.key.as_str(), e)
}

//! Tasks on simulated CPUs and the event clock.
//!
//! Every task and kswapd has its own clock. The scheduler always advances
//! the entity that is ready earliest, on the CPU that frees up first, for
//! at most one time slice; with more runnable entities than CPUs they take
//! turns, slice by slice. A woken kswapd runs at once on an idle CPU, or
//! preempts its waker if CFS's wakeup rule says so (`wakeup_preempts`).
//! khugepaged runs at nice 19: it never preempts, and takes an idle CPU or
//! its turn. Simplification: under contention for the CPUs it gets a full
//! turn where CFS would give it about 1.5% of a CPU (weight 15 against
//! 1024); its scans are short bursts seconds apart.
//! Everything is deterministic: ties go to the lower entity number (tasks
//! in spec order, then kswapd, then khugepaged).

use crate::cost;
use crate::kernel::Kernel;
use crate::mm::khugepaged::KhugepagedNext;
use crate::mm::memory::FaultError;
use crate::mm::vmscan::KswapdNext;
use crate::vmstat::VmStat;
use crate::SimError;
use mmsim_spec::output::KvResult;
use mmsim_spec::stream::{access_is_write, access_page, TouchStream};
use mmsim_spec::{Op, Spec, Step};
use std::collections::HashMap;

/// `last_on_cpu`'s mark for khugepaged (kswapd's is usize::MAX).
const KHUGEPAGED_ON_CPU: usize = usize::MAX - 1;

/// Accesses generated per batch from a touch stream.
const BATCH: usize = 4096;

/// One task instance being run.
pub struct TaskRun<'s> {
    pub name: String,
    pub cgroup: String,
    pub ktask: usize,
    pub instance: u32,
    pub clock: u64,
    pub start: u64,
    pub state: TaskState,
    frames: Vec<Frame<'s>>,
    regions: HashMap<String, u32>,
    touch: Option<TouchRun<'s>>,
    kv: Option<KvRun<'s>>,
    stream: Option<StreamRun>,
    file_io: Option<FileIoRun>,
    /// CPU time left of a `compute` step.
    compute_left: u64,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Ready,
    /// Sleeping until the given time.
    Sleeping(u64),
    /// In wait(2) for its children (or about to exit, waiting for them).
    Waiting,
    Done,
}

struct Frame<'s> {
    steps: &'s [Step],
    next: usize,
    /// Further passes over `steps` after this one (repeat).
    again: u64,
}

/// A `kvstore` step in progress: its request stream, the current
/// request's accesses, and the client's statistics.
struct KvRun<'s> {
    stream: mmsim_spec::kv::KvStream,
    db: mmsim_spec::kv::KvDb,
    region: String,
    /// The kvstore step, for messages.
    step: &'s Step,
    vma: u32,
    buf: Vec<u64>,
    pos: usize,
    cur: Option<mmsim_spec::kv::KvRequest>,
    pipeline: u64,
    in_batch: u64,
    batch_start: u64,
    started: u64,
    stats: KvResult,
}

impl KvRun<'_> {
    fn finish(&mut self, r: mmsim_spec::kv::KvRequest, now: u64) {
        self.stats.record(r.set, r.hit, r.bytes);
        self.in_batch += 1;
        if self.in_batch == self.pipeline {
            self.close_batch(now);
        }
    }

    /// The batch's replies are out: each of its requests waited from the
    /// batch's start until now.
    fn close_batch(&mut self, now: u64) {
        self.stats.latency_sum_ns += self.in_batch * (now - self.batch_start);
        self.in_batch = 0;
        self.batch_start = now;
    }
}

/// A `stream` step in progress: the window mapped now, the next access in
/// it, and where the next window starts.
struct StreamRun {
    inode: u32,
    /// User CPU time per page read (the hashing).
    work: u64,
    next: u64,
    end: u64,
    window: u64,
    vma: Option<u32>,
    pos: u64,
    pages: u64,
}

/// A `read` or `write` step in progress: the next page, the end of the
/// current call, and the open file's readahead state.
struct FileIoRun {
    inode: u32,
    shmem: bool,
    write: bool,
    next: u64,
    end: u64,
    chunk: u64,
    call_end: u64,
    ra: crate::mm::readahead::FileRa,
}

struct TouchRun<'s> {
    stream: TouchStream,
    /// The touch or trace step, for a trace that fails mid-replay.
    step: &'s Step,
    vma: u32,
    buf: Vec<u64>,
    pos: usize,
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
}

/// What one slice of a task ended with.
enum SliceEnd {
    /// Used its slice, or yielded to a woken kswapd.
    Preempted,
    Sleep(u64),
    /// wait(2) for the task's children.
    Wait,
    Done,
}

pub struct Scheduler<'s> {
    pub tasks: Vec<TaskRun<'s>>,
    swap_devs: &'s [mmsim_spec::SwapDevice],
    cpu_free_at: Vec<u64>,
    /// The entity each CPU ran last (kswapd: usize::MAX; None: idle), to
    /// tell a context switch from a task running on.
    last_on_cpu: Vec<Option<usize>>,
    /// The jiffy each task was last switched in.
    switched_in: Vec<u64>,
    kswapd_ready: Option<u64>,
    khugepaged_ready: Option<u64>,
    /// Called after each slice with the run's progress.
    pub on_progress: Option<Box<dyn FnMut(crate::Progress) + 's>>,
    /// The page operations the spec asks for (`mmsim_spec::work`), set by
    /// the caller with `on_progress`.
    pub total_work: u64,
    /// Those done so far: a touch's, stream's, read's, write's or
    /// kvstore's accesses and a compute's slices as they run, any other
    /// step's count when it starts (`dispatch_work`).
    done_work: u64,
    /// Page frames of the machine: what a phase mark's check walks.
    frames: u64,
    /// Pages of each file, for what fsync and drop_caches count.
    file_pages: Vec<u64>,
    /// Run the invariant checker at every phase mark.
    pub check: bool,
    /// CFS virtual runtime of each task and of kswapd (all at nice 0, so
    /// CPU time), and the run queue's min_vruntime.
    vruntime: Vec<u64>,
    kswapd_vruntime: u64,
    min_vruntime: u64,
    /// The running entity's CPU and the start of its slice.
    cur_cpu: usize,
    cur_start: u64,
}

impl<'s> Scheduler<'s> {
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
                k.tasks.push(crate::kernel::KTask {
                    mm,
                    memcg,
                    nr_pages_over_high: 0,
                    fault_start: None,
                    fault_read: false,
                    fault_waited: false,
                    fault_attempts: 0,
                });
                let name = if t.instances == 1 {
                    t.name.clone()
                } else {
                    format!("{}#{i}", t.name)
                };
                tasks.push(TaskRun {
                    name,
                    cgroup: cgroup.clone(),
                    ktask: k.tasks.len() - 1,
                    instance: i,
                    clock: 0,
                    start: 0,
                    state: TaskState::Ready,
                    frames: vec![Frame {
                        steps: &t.steps,
                        next: 0,
                        again: 0,
                    }],
                    regions: HashMap::new(),
                    touch: None,
                    kv: None,
                    stream: None,
                    compute_left: 0,
                    file_io: None,
                    kv_stats: None,
                    kv_dbs: HashMap::new(),
                    spawned: false,
                    nspawns: 0,
                    phases: Vec::new(),
                    open_phase: None,
                    parent: None,
                    live_children: 0,
                    forks: Vec::new(),
                });
            }
        }
        Scheduler {
            tasks,
            swap_devs: &spec.swap,
            cpu_free_at: vec![0; spec.machine.cpus as usize],
            last_on_cpu: vec![None; spec.machine.cpus as usize],
            switched_in: Vec::new(),
            kswapd_ready: None,
            // A process's start may have registered its mm (7.3): the
            // thread's first sleep ends then.
            khugepaged_ready: k.khugepaged_wake_at.take(),
            on_progress: None,
            total_work: 0,
            done_work: 0,
            frames: spec.machine.memory / 4096,
            file_pages: spec.files.iter().map(|f| f.size / 4096).collect(),
            check: false,
            vruntime: Vec::new(),
            kswapd_vruntime: 0,
            min_vruntime: 0,
            cur_cpu: 0,
            cur_start: 0,
        }
    }

    /// Runs every task to completion. `at_end` is called once when the
    /// last task has finished its steps, before it exits.
    pub fn run(
        &mut self,
        k: &mut Kernel,
        mut at_end: impl FnMut(&mut Kernel),
    ) -> Result<u64, SimError> {
        let mut last_end = 0;
        self.vruntime = vec![0; self.tasks.len()];
        while let Some((entity, ready)) = self.pick() {
            let cpu = (0..self.cpu_free_at.len())
                .min_by_key(|&c| (self.cpu_free_at[c], c))
                .unwrap();
            let start = ready.max(self.cpu_free_at[cpu]);
            self.cur_cpu = cpu;
            self.cur_start = start;
            k.cur_cpu = cpu;
            k.prof.reset_to_root();
            // Work items queued for other CPUs have run by now.
            for c in 0..self.cpu_free_at.len() {
                k.run_pending_stock_drain(c);
            }
            k.clock_base = start;
            k.pending_ns = 0;
            k.process_io_completions(start);
            // context_switch → lru_gen_use_mm: another entity (or idle)
            // ran on this CPU before.
            let switched = self.last_on_cpu[cpu] != Some(entity) || start > self.cpu_free_at[cpu];
            let end = if entity < self.tasks.len() {
                k.cur_task = Some(self.tasks[entity].ktask);
                self.lru_gen_use_mm(k, entity, start, switched);
                // Tasks the slice may fork come after these.
                let before = self.tasks.len();
                let slice_end = self.slice_end(entity, cpu, start);
                let end = self
                    .run_task_slice(entity, k, slice_end)
                    .map_err(|e| self.locate(entity, k, e))?;
                self.last_on_cpu[cpu] = match self.tasks[entity].state {
                    TaskState::Ready => Some(entity),
                    _ => None,
                };
                self.vruntime[entity] += end.saturating_sub(start);
                if self.tasks[entity].state == TaskState::Done {
                    // The last task of those before the slice ends (no
                    // other task ends during this one's slice).
                    let last = self.tasks[..before]
                        .iter()
                        .enumerate()
                        .all(|(j, t)| j == entity || t.state == TaskState::Done);
                    if last {
                        at_end(k);
                    }
                    self.exit_task(entity, k);
                }
                end.max(k.now())
            } else if entity == self.khugepaged_entity() {
                k.cur_task = None;
                let slice_end = self.slice_end(entity, cpu, start);
                self.khugepaged_ready = loop {
                    match k.khugepaged_step() {
                        KhugepagedNext::Run if k.now() < slice_end => continue,
                        KhugepagedNext::Run => break Some(k.now()),
                        KhugepagedNext::SleepUntil(t) => break Some(t),
                        KhugepagedNext::Sleep => break None,
                    }
                };
                self.last_on_cpu[cpu] = Some(KHUGEPAGED_ON_CPU);
                if let Some(why) = k.unmodelled.take() {
                    return Err(SimError::Unmodelled(why));
                }
                k.now()
            } else {
                k.cur_task = None;
                // kswapd keeps its CPU for its slice, pass after pass,
                // until it naps or sleeps.
                let slice_end = self.slice_end(entity, cpu, start);
                self.kswapd_ready = loop {
                    match k.kswapd_step() {
                        KswapdNext::Run if k.now() < slice_end => continue,
                        KswapdNext::Run => break Some(k.now()),
                        KswapdNext::NapUntil(t) => break Some(t),
                        KswapdNext::Sleep => break None,
                    }
                };
                self.last_on_cpu[cpu] = Some(usize::MAX);
                if let Some(why) = k.unmodelled.take() {
                    return Err(SimError::Unmodelled(why));
                }
                self.kswapd_vruntime += k.now() - start;
                k.now()
            };
            if let Some(t) = k.kswapd_wake_at.take() {
                self.place_woken_kswapd(t);
            }
            if let Some(t) = k.khugepaged_wake_at.take() {
                self.khugepaged_ready = Some(t);
            }
            self.update_min_vruntime();
            // A task sleeping (memory.high throttle, sleep op) frees its CPU.
            self.cpu_free_at[cpu] = k.now().max(start);
            last_end = last_end.max(end);
            if let Some(cb) = self.on_progress.as_mut() {
                cb(crate::Progress {
                    done: self.done_work,
                    total: self.total_work,
                    sim_ns: last_end,
                });
            }
        }
        Ok(last_end)
    }

    /// `context_switch` → `lru_gen_use_mm`: the multi-gen LRU's walk
    /// looks at an mm only if a task of it was switched in since the last
    /// walk. A task switches in after another entity or idle ran on its
    /// CPU; besides, a real system's kernel workers (vmstat_update, RCU,
    /// writeback: not modelled) preempt a running task every few
    /// milliseconds, so mmsim counts a task that keeps its CPU as switched
    /// in once per jiffy. Measured against 6.1 under QEMU
    /// (fidelity/mglru_walk_anon_zipf): any period from 1 to 100 ms gives
    /// the real kernel's counters within 1%, no period (switches only)
    /// misses pgactivate by 48%.
    fn lru_gen_use_mm(&mut self, k: &mut Kernel, entity: usize, start: u64, switched: bool) {
        const JIFFY_NS: u64 = 1_000_000_000 / crate::mm::memcontrol::HZ;
        if self.switched_in.len() < self.tasks.len() {
            self.switched_in.resize(self.tasks.len(), u64::MAX);
        }
        let jiffy = start / JIFFY_NS;
        if switched || self.switched_in[entity] != jiffy {
            self.switched_in[entity] = jiffy;
            let mm = k.tasks[self.tasks[entity].ktask].mm;
            k.mms[mm as usize].lru_gen_used = true;
        }
    }

    /// khugepaged's entity number: after the tasks and kswapd.
    fn khugepaged_entity(&self) -> usize {
        self.tasks.len() + 1
    }

    /// The entity ready earliest: tasks, then kswapd, then khugepaged.
    /// None when all tasks are done (the kernel threads' remaining work
    /// does not outlive the workload).
    fn pick(&self) -> Option<(usize, u64)> {
        let mut best: Option<(usize, u64)> = None;
        for (i, t) in self.tasks.iter().enumerate() {
            let ready = match t.state {
                TaskState::Ready => t.clock,
                TaskState::Sleeping(until) => until,
                TaskState::Waiting | TaskState::Done => continue,
            };
            if best.is_none_or(|(_, b)| ready < b) {
                best = Some((i, ready));
            }
        }
        best?;
        if let Some(kr) = self.kswapd_ready {
            if best.is_some_and(|(_, b)| kr < b) {
                best = Some((self.tasks.len(), kr));
            }
        }
        if let Some(hr) = self.khugepaged_ready {
            if best.is_some_and(|(_, b)| hr < b) {
                best = Some((self.khugepaged_entity(), hr));
            }
        }
        best
    }

    /// `place_entity` for a woken kswapd: a sleeper's vruntime is pulled up
    /// to at most half a latency period behind min_vruntime.
    fn place_woken_kswapd(&mut self, at: u64) {
        let half_latency = cost::SCHED_LATENCY_NS * self.sched_factor() / 2;
        self.kswapd_vruntime = self
            .kswapd_vruntime
            .max(self.min_vruntime.saturating_sub(half_latency));
        self.kswapd_ready = Some(at);
    }

    /// `check_preempt_wakeup`: the woken kswapd takes the waker's CPU at
    /// once only if the waker has run more than the wakeup granularity
    /// beyond it, and no other CPU is idle for it.
    fn wakeup_preempts(&self, i: usize, now: u64) -> bool {
        let idle_elsewhere =
            (0..self.cpu_free_at.len()).any(|c| c != self.cur_cpu && self.cpu_free_at[c] <= now);
        if idle_elsewhere {
            return false;
        }
        let curr = self.vruntime[i] + now.saturating_sub(self.cur_start);
        curr > self.kswapd_vruntime + cost::SCHED_WAKEUP_GRANULARITY_NS * self.sched_factor()
    }

    /// 1 + log2(cpus): the kernel's default scaling of its CFS tunables.
    fn sched_factor(&self) -> u64 {
        let ncpu = self.cpu_free_at.len() as u64;
        1 + (63 - ncpu.leading_zeros() as u64)
    }

    /// min_vruntime only moves forward, to the smallest vruntime of the
    /// runnable entities.
    fn update_min_vruntime(&mut self) {
        let tasks = self
            .tasks
            .iter()
            .zip(&self.vruntime)
            .filter(|(t, _)| t.state == TaskState::Ready)
            .map(|(_, &v)| v);
        let kswapd = self.kswapd_ready.map(|_| self.kswapd_vruntime);
        if let Some(m) = tasks.chain(kswapd).min() {
            self.min_vruntime = self.min_vruntime.max(m);
        }
    }

    /// When an entity that starts at `start` on `cpu` must give way. An
    /// entity ready to run on another, idle CPU runs beside it, so the two
    /// stay in step to within `QUANTUM_NS`; entities competing for CPUs
    /// share them in CFS slices: sched_latency over the runnable count per
    /// CPU, at least min_granularity (both scaled by 1 + log2(cpus), as the
    /// kernel's default tunable scaling does).
    fn slice_end(&self, me: usize, cpu: usize, start: u64) -> u64 {
        let ncpu = self.cpu_free_at.len() as u64;
        let factor = self.sched_factor();
        let latency = cost::SCHED_LATENCY_NS * factor;
        let min_gran = cost::SCHED_MIN_GRANULARITY_NS * factor;
        let mut end = u64::MAX;
        let mut competing: u64 = 1;
        // Another CPU is idle at time t iff the earliest-free other CPU is.
        let other_free = (0..self.cpu_free_at.len())
            .filter(|&c| c != cpu)
            .map(|c| self.cpu_free_at[c])
            .min()
            .unwrap_or(u64::MAX);
        for r in self.ready_times_except(me) {
            let other_cpu_idle = other_free <= r.max(start);
            if other_cpu_idle {
                end = end.min(r.max(start).saturating_add(cost::QUANTUM_NS));
            } else if r <= start {
                competing += 1;
            }
        }
        let per_cpu = competing.div_ceil(ncpu).max(1);
        end.min(start.saturating_add((latency / per_cpu).max(min_gran)))
    }

    /// Ready times of every entity but `me` that will want a CPU.
    fn ready_times_except(&self, me: usize) -> impl Iterator<Item = u64> + '_ {
        let tasks = self
            .tasks
            .iter()
            .enumerate()
            .filter(move |&(i, _)| i != me)
            .filter_map(|(_, t)| match t.state {
                TaskState::Ready => Some(t.clock),
                TaskState::Sleeping(until) => Some(until),
                TaskState::Waiting | TaskState::Done => None,
            });
        let kswapd = if me == self.tasks.len() {
            None
        } else {
            self.kswapd_ready
        };
        let khugepaged = if me == self.khugepaged_entity() {
            None
        } else {
            self.khugepaged_ready
        };
        tasks.chain(kswapd).chain(khugepaged)
    }

    fn run_task_slice(
        &mut self,
        i: usize,
        k: &mut Kernel,
        slice_end: u64,
    ) -> Result<u64, SimError> {
        let t = &mut self.tasks[i];
        if let TaskState::Sleeping(_) = t.state {
            t.state = TaskState::Ready;
        }
        let mut slice_end = slice_end;
        let end = loop {
            match self.step_task(i, k, slice_end)? {
                Some(SliceEnd::Preempted) => break k.now(),
                Some(SliceEnd::Sleep(until)) => {
                    self.tasks[i].state = TaskState::Sleeping(until);
                    break k.now();
                }
                Some(SliceEnd::Done) => {
                    self.tasks[i].state = TaskState::Done;
                    break k.now();
                }
                Some(SliceEnd::Wait) => {
                    self.tasks[i].state = TaskState::Waiting;
                    break k.now();
                }
                None => {
                    // A step (MADV_HUGEPAGE, fork) may have woken khugepaged.
                    if self.wake_khugepaged(i, k, &mut slice_end) && k.now() >= slice_end {
                        break k.now();
                    }
                }
            }
        };
        let t = &mut self.tasks[i];
        t.clock = match t.state {
            TaskState::Sleeping(until) => until,
            _ => end,
        };
        Ok(end)
    }

    /// Advances a task by one step (or a run of accesses). Some(_) ends the slice.
    fn step_task(
        &mut self,
        i: usize,
        k: &mut Kernel,
        slice_end: u64,
    ) -> Result<Option<SliceEnd>, SimError> {
        if self.tasks[i].touch.is_some() {
            return self.run_touch(i, k, slice_end);
        }
        if self.tasks[i].kv.is_some() {
            return self.run_kv(i, k, slice_end);
        }
        if self.tasks[i].stream.is_some() {
            return self.run_stream(i, k, slice_end);
        }
        if self.tasks[i].file_io.is_some() {
            return self.run_file_io(i, k, slice_end);
        }
        if self.tasks[i].compute_left > 0 {
            return Ok(self.run_compute(i, k, slice_end));
        }
        let t = &mut self.tasks[i];
        let Some(frame) = t.frames.last_mut() else {
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
        let phase_work = if self.check { self.frames } else { 1 };
        self.done_work += dispatch_work(
            &step.op,
            &t.regions,
            k,
            phase_work,
            &self.file_pages,
            self.swap_devs,
        );
        let ktask = t.ktask;
        let mm = k.tasks[ktask].mm;
        match &step.op {
            Op::Mmap {
                name,
                pages,
                kind,
                file,
                offset,
                exec,
            } => {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                let vma = match kind {
                    mmsim_spec::MapKind::Anon => k.mmap_anon(mm, *pages),
                    mmsim_spec::MapKind::Shmem => {
                        k.mmap_shmem(mm, file.expect("validated") as u32, *offset, *pages)
                    }
                    mmsim_spec::MapKind::SharedAnon => {
                        let huge = k.shm_mnt_huge();
                        let inode = k.shmem_inode_create(*pages, true, huge);
                        k.mmap_shmem(mm, inode, 0, *pages)
                    }
                    mmsim_spec::MapKind::File | mmsim_spec::MapKind::FilePrivate => k.mmap_file(
                        mm,
                        file.expect("validated") as u32,
                        *offset,
                        *pages,
                        *kind == mmsim_spec::MapKind::File,
                        *exec,
                    ),
                };
                t.regions.insert(name.clone(), vma);
            }
            Op::Munmap { region } => {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                let vma = t
                    .regions
                    .remove(region)
                    .ok_or_else(|| unknown_region(step, region))?;
                t.kv_dbs.remove(region);
                k.munmap(vma);
            }
            Op::Touch(touch) => {
                let vma = *t
                    .regions
                    .get(&touch.region)
                    .ok_or_else(|| unknown_region(step, &touch.region))?;
                let pages = k.vmas[vma as usize].pages;
                let n = touch.length.unwrap_or(pages - touch.offset);
                let stream = TouchStream::new(touch, touch.offset, n, t.instance)
                    .map_err(|e| at_step(step, SimError::Spec(e.to_string())))?;
                t.touch = Some(TouchRun {
                    stream,
                    step,
                    vma,
                    buf: Vec::with_capacity(BATCH),
                    pos: 0,
                });
            }
            Op::Sleep { ns } => return Ok(Some(SliceEnd::Sleep(k.now().saturating_add(*ns)))),
            Op::Compute { ns } => t.compute_left = *ns,
            Op::Phase { name } => {
                if self.check {
                    crate::check::check_all(k)?;
                    k.integrity.invariant_checks += 1;
                }
                let t = &mut self.tasks[i];
                close_phase(t, k);
                t.phases.push(PhaseRun {
                    name: name.clone(),
                    start: k.now(),
                    end: 0,
                    vm_start: k.vm.clone(),
                    vm_delta: VmStat::default(),
                    kv: None,
                    trace_requests: 0,
                    lru_gen: Vec::new(),
                });
                t.open_phase = Some(t.phases.len() - 1);
            }
            Op::Fork { steps } => {
                self.fork(i, steps, k, false)?;
            }
            Op::Spawn { steps } => {
                self.fork(i, steps, k, true)?;
            }
            Op::Wait => {
                if self.tasks[i].live_children > 0 {
                    return Ok(Some(SliceEnd::Wait));
                }
            }
            Op::Swapoff { device } => {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                let rotational = self.swap_devs[*device].rotational();
                k.swapoff(*device, rotational)
                    .map_err(|e| swap_error(step, "swapoff", *device, e))?;
            }
            Op::Set(setting) => {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                k.write_setting(setting).map_err(|e| at_step(step, e))?;
            }
            Op::Swapon { device } => {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                k.swapon(*device, &self.swap_devs[*device])
                    .map_err(|e| swap_error(step, "swapon", *device, e))?;
            }
            Op::Madvise {
                region,
                advice,
                offset,
                length,
            } => {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                let vma = *t
                    .regions
                    .get(region)
                    .ok_or_else(|| unknown_region(step, region))?;
                let pages = k.vmas[vma as usize].pages;
                let n = length.unwrap_or(pages - offset);
                k.madvise(vma, *offset as usize, n as usize, *advice)
                    .map_err(|e| at_step(step, SimError::Spec(format!("madvise: {e}"))))?;
            }
            Op::FileIo {
                write,
                file,
                offset,
                length,
                chunk,
            } => {
                let inode = *file as u32;
                let i = &k.inodes[inode as usize];
                let ra_pages = i.disk.map_or(0, |d| k.disks[d as usize].ra_pages);
                t.file_io = Some(FileIoRun {
                    inode,
                    shmem: i.is_shmem(),
                    write: *write,
                    next: *offset,
                    end: offset + length,
                    chunk: *chunk,
                    call_end: *offset,
                    ra: crate::mm::readahead::FileRa::new(ra_pages),
                });
            }
            Op::Fsync { file } => {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                // tmpfs has noop_fsync; a regular file waits for its pages.
                if !k.inodes[*file].is_shmem() {
                    if let Some(done) = k.filemap_fsync(*file as u32) {
                        if done > k.now() {
                            return Ok(Some(SliceEnd::Sleep(done)));
                        }
                    }
                }
            }
            Op::Stream {
                file,
                offset,
                length,
                window,
                work,
            } => {
                t.stream = Some(StreamRun {
                    inode: *file as u32,
                    next: *offset,
                    end: offset + length,
                    window: *window,
                    work: *work,
                    vma: None,
                    pos: 0,
                    pages: 0,
                });
            }
            Op::DropCaches => {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                k.drop_caches();
                k.drop_slab();
            }
            Op::KvStore(kv) => {
                let vma = *t
                    .regions
                    .get(&kv.region)
                    .ok_or_else(|| unknown_region(step, &kv.region))?;
                let now = k.now();
                let db = t
                    .kv_dbs
                    .remove(&kv.region)
                    .unwrap_or_else(|| mmsim_spec::kv::KvDb::new(kv));
                if !db.matches(kv) {
                    return Err(at_step(
                        step,
                        SimError::Spec(format!(
                            "found a kvstore on region \"{}\" with other keys or value_size than the server an earlier kvstore step started there; expected the same keys and value_size",
                            kv.region
                        )),
                    ));
                }
                t.kv = Some(KvRun {
                    stream: mmsim_spec::kv::KvStream::new(kv, t.instance),
                    db,
                    region: kv.region.clone(),
                    step,
                    vma,
                    buf: Vec::with_capacity(8),
                    pos: 0,
                    cur: None,
                    pipeline: kv.pipeline,
                    in_batch: 0,
                    batch_start: now,
                    started: now,
                    stats: KvResult::default(),
                });
            }
            // A repeat of nothing is skipped, not looped over
            // (mmsim_spec::work counts it as no work).
            Op::Repeat { steps, .. } if mmsim_spec::work::does_nothing(steps) => {}
            Op::Repeat { times, steps } => {
                t.frames.push(Frame {
                    steps,
                    next: 0,
                    again: times - 1,
                });
            }
        }
        Ok(None)
    }

    /// Runs accesses of the current touch until the slice ends.
    fn run_touch(
        &mut self,
        i: usize,
        k: &mut Kernel,
        slice_end: u64,
    ) -> Result<Option<SliceEnd>, SimError> {
        let mut tr = self.tasks[i].touch.take().expect("touch in progress");
        let result = self.touch_loop(i, k, slice_end, &mut tr);
        if !matches!(result, Ok(None)) {
            self.tasks[i].touch = Some(tr);
        }
        result
    }

    /// Accesses until the touch ends (Ok(None)) or the slice does.
    fn touch_loop(
        &mut self,
        i: usize,
        k: &mut Kernel,
        mut slice_end: u64,
        tr: &mut TouchRun,
    ) -> Result<Option<SliceEnd>, SimError> {
        loop {
            if tr.pos == tr.buf.len() {
                tr.buf.clear();
                tr.pos = 0;
                let got = tr
                    .stream
                    .next_batch(&mut tr.buf, BATCH)
                    .map_err(|e| at_step(tr.step, SimError::Spec(e.to_string())))?;
                if got == 0 {
                    return Ok(None);
                }
                if tr.stream.is_trace() {
                    let t = &mut self.tasks[i];
                    if let Some(p) = t.open_phase {
                        t.phases[p].trace_requests += got as u64;
                    }
                }
            }
            if let Some(end) = self.resident_run(i, k, slice_end, tr) {
                return Ok(Some(end));
            }
            if tr.pos == tr.buf.len() {
                continue;
            }
            let a = tr.buf[tr.pos];
            tr.pos += 1;
            self.done_work += 1;
            k.user_access(tr.vma, access_page(a) as usize, access_is_write(a))?;
            if let Some(until) = k.blocked_until.take() {
                // The fault waits for I/O; the access runs again after.
                tr.pos -= 1;
                self.done_work -= 1;
                return Ok(Some(SliceEnd::Sleep(until)));
            }
            if let Some(end) = self.after_access(i, k, &mut slice_end) {
                return Ok(Some(end));
            }
        }
    }

    /// The accesses from `tr.pos` that hit resident pages, made in one
    /// call (`Kernel::access_resident_run`). After a hit, `after_access`
    /// has nothing to do but end the slice when its time is up, as long as
    /// no memory.high debt, kswapd or khugepaged wakeup is pending (only a
    /// fault makes those); so the run stops at the access where that check
    /// would end the slice, and the slice ends the same.
    fn resident_run(
        &mut self,
        i: usize,
        k: &mut Kernel,
        slice_end: u64,
        tr: &mut TouchRun,
    ) -> Option<SliceEnd> {
        let ktask = self.tasks[i].ktask;
        if k.kswapd_wake_at.is_some()
            || k.khugepaged_wake_at.is_some()
            || k.tasks[ktask].nr_pages_over_high != 0
        {
            return None;
        }
        // The accesses after which now() >= slice_end: after_access's end.
        let now = k.now();
        let touch = k.costs.touch;
        let max = if now >= slice_end {
            1
        } else if touch == 0 {
            usize::MAX
        } else {
            usize::try_from((slice_end - now).div_ceil(touch)).unwrap_or(usize::MAX)
        };
        let n = k.access_resident_run(tr.vma, &tr.buf[tr.pos..], max);
        tr.pos += n;
        self.done_work += n as u64;
        (n > 0 && n == max).then_some(SliceEnd::Preempted)
    }

    /// Back in user space after an access: settle memory.high debt, let a
    /// woken kswapd in, end the slice when it is used up.
    /// A `compute` step's CPU time, up to the end of the slice.
    fn run_compute(&mut self, i: usize, k: &mut Kernel, slice_end: u64) -> Option<SliceEnd> {
        let t = &mut self.tasks[i];
        let run = t.compute_left.min(slice_end.saturating_sub(k.now()));
        k.charge_user(run);
        // mmsim_spec::work counts a compute's 10 µs slices.
        let ops_before = t.compute_left / mmsim_spec::work::NS_PER_OP;
        t.compute_left -= run;
        self.done_work += ops_before - t.compute_left / mmsim_spec::work::NS_PER_OP;
        (t.compute_left > 0).then_some(SliceEnd::Preempted)
    }

    fn after_access(&mut self, i: usize, k: &mut Kernel, slice_end: &mut u64) -> Option<SliceEnd> {
        let ktask = self.tasks[i].ktask;
        let debt = std::mem::take(&mut k.tasks[ktask].nr_pages_over_high);
        if debt > 0 {
            let memcg = k.tasks[ktask].memcg;
            let sleep = k.mem_cgroup_handle_over_high(memcg, debt);
            if sleep > 0 {
                return Some(SliceEnd::Sleep(k.now().saturating_add(sleep)));
            }
        }
        if let Some(w) = k.kswapd_wake_at.take() {
            self.place_woken_kswapd(w);
            if self.wakeup_preempts(i, k.now()) {
                return Some(SliceEnd::Preempted);
            }
            // kswapd waits for this CPU, or runs beside us on an idle one.
            *slice_end = (*slice_end).min(self.slice_end(i, self.cur_cpu, self.cur_start));
        }
        if k.khugepaged_wake_at.is_some() {
            self.wake_khugepaged(i, k, slice_end);
        }
        (k.now() >= *slice_end).then_some(SliceEnd::Preempted)
    }

    /// A registration woke khugepaged: at nice 19 it does not preempt;
    /// it runs beside this task on an idle CPU, or waits its turn.
    fn wake_khugepaged(&mut self, i: usize, k: &mut Kernel, slice_end: &mut u64) -> bool {
        let Some(w) = k.khugepaged_wake_at.take() else {
            return false;
        };
        self.khugepaged_ready = Some(w);
        *slice_end = (*slice_end).min(self.slice_end(i, self.cur_cpu, self.cur_start));
        true
    }

    /// Runs requests of the current kvstore until the slice ends.
    fn run_kv(
        &mut self,
        i: usize,
        k: &mut Kernel,
        slice_end: u64,
    ) -> Result<Option<SliceEnd>, SimError> {
        let mut kr = self.tasks[i].kv.take().expect("kvstore in progress");
        let result = self.kv_loop(i, k, slice_end, &mut kr);
        if matches!(result, Ok(None)) {
            // The last, partial batch's replies.
            kr.close_batch(k.now());
            kr.stats.elapsed_ns += k.now() - kr.started;
            let t = &mut self.tasks[i];
            t.kv_stats
                .get_or_insert_with(Default::default)
                .add(&kr.stats);
            if let Some(p) = t.open_phase {
                t.phases[p]
                    .kv
                    .get_or_insert_with(Default::default)
                    .add(&kr.stats);
            }
            t.kv_dbs.insert(kr.region, kr.db);
        } else {
            self.tasks[i].kv = Some(kr);
        }
        result
    }

    /// Windows of the current stream until it ends or the slice does.
    fn run_stream(
        &mut self,
        i: usize,
        k: &mut Kernel,
        mut slice_end: u64,
    ) -> Result<Option<SliceEnd>, SimError> {
        let mut sr = self.tasks[i].stream.take().expect("stream in progress");
        let mm = k.tasks[self.tasks[i].ktask].mm;
        loop {
            if sr.vma.is_none() || sr.pos == sr.pages {
                if let Some(v) = sr.vma.take() {
                    k.charge_cost(cost::Fn::User, k.costs.syscall);
                    k.munmap(v);
                }
                if sr.next >= sr.end {
                    return Ok(None);
                }
                let n = sr.window.min(sr.end - sr.next);
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                sr.vma = Some(k.mmap_file(mm, sr.inode, sr.next, n, true, false));
                (sr.pos, sr.pages) = (0, n);
                sr.next += n;
            }
            let vma = sr.vma.expect("a window is mapped");
            self.done_work += 1;
            k.user_access(vma, sr.pos as usize, false)?;
            if let Some(until) = k.blocked_until.take() {
                self.done_work -= 1;
                self.tasks[i].stream = Some(sr);
                return Ok(Some(SliceEnd::Sleep(until)));
            }
            sr.pos += 1;
            k.charge_user(sr.work);
            self.done_work += sr.work / mmsim_spec::work::NS_PER_OP;
            if let Some(end) = self.after_access(i, k, &mut slice_end) {
                self.tasks[i].stream = Some(sr);
                return Ok(Some(end));
            }
        }
    }

    /// Pages of the current read or write step until it ends or the slice
    /// does; a page that must wait for I/O puts the task to sleep and is
    /// tried again when it wakes.
    fn run_file_io(
        &mut self,
        i: usize,
        k: &mut Kernel,
        mut slice_end: u64,
    ) -> Result<Option<SliceEnd>, SimError> {
        let mut io = self.tasks[i].file_io.take().expect("file I/O in progress");
        let memcg = k.tasks[self.tasks[i].ktask].memcg;
        while io.next < io.end {
            if io.next == io.call_end {
                k.charge_cost(cost::Fn::User, k.costs.syscall);
                io.call_end = (io.next + io.chunk).min(io.end);
            }
            k.process_io_completions(k.now());
            let r = if io.shmem {
                k.shmem_file_io_page(io.inode, io.next, io.write, memcg)
            } else if io.write {
                k.filemap_write_page(io.inode, io.next, memcg)
            } else {
                k.filemap_read_page(io.inode, io.next, io.call_end, &mut io.ra, memcg)
            };
            match r {
                Ok(()) => io.next += 1,
                Err(FaultError::Wait(t) | FaultError::Retry(t)) => {
                    self.tasks[i].file_io = Some(io);
                    return Ok(Some(SliceEnd::Sleep(t.max(k.now()))));
                }
                Err(e) => return Err(e.into()),
            }
            self.done_work += 1;
            if let Some(end) = self.after_access(i, k, &mut slice_end) {
                self.tasks[i].file_io = Some(io);
                return Ok(Some(end));
            }
        }
        Ok(None)
    }

    /// Requests until the kvstore ends (Ok(None)) or the slice does.
    fn kv_loop(
        &mut self,
        i: usize,
        k: &mut Kernel,
        mut slice_end: u64,
        kr: &mut KvRun,
    ) -> Result<Option<SliceEnd>, SimError> {
        loop {
            if kr.pos == kr.buf.len() {
                if let Some(req) = kr.cur.take() {
                    // The server's work on the request beyond its page
                    // accesses: parsing, lookup, reply.
                    k.charge_user(k.costs.kv_request);
                    kr.finish(req, k.now());
                }
                kr.buf.clear();
                kr.pos = 0;
                match kr.stream.next_request(&mut kr.db, &mut kr.buf) {
                    None => return Ok(None),
                    Some(req) => kr.cur = Some(req),
                }
                if kr.db.pages_used() > k.vmas[kr.vma as usize].pages {
                    return Err(at_step(kr.step, SimError::Spec(format!(
                        "kvstore: the server's heap ({} keys set) outgrew region \"{}\" of {} pages; expected a larger region or fewer keys",
                        kr.db.live_keys(),
                        kr.region,
                        k.vmas[kr.vma as usize].pages
                    ))));
                }
            }
            let a = kr.buf[kr.pos];
            kr.pos += 1;
            self.done_work += 1;
            k.user_access(kr.vma, access_page(a) as usize, access_is_write(a))?;
            if let Some(until) = k.blocked_until.take() {
                kr.pos -= 1;
                self.done_work -= 1;
                return Ok(Some(SliceEnd::Sleep(until)));
            }
            if let Some(end) = self.after_access(i, k, &mut slice_end) {
                return Ok(Some(end));
            }
        }
    }

    /// fork(2): a child task with a copy-on-write copy of the address
    /// space, runnable at once, running `steps`.
    fn fork(
        &mut self,
        i: usize,
        steps: &'s [Step],
        k: &mut Kernel,
        spawn: bool,
    ) -> Result<(), SimError> {
        k.charge_cost(cost::Fn::User, k.costs.syscall);
        let parent_ktask = self.tasks[i].ktask;
        let (mm, memcg) = (k.tasks[parent_ktask].mm, k.tasks[parent_ktask].memcg);
        let (child_mm, pairs) = if spawn {
            // fork, then exec: the new program's address space is fresh.
            k.charge_cost(cost::Fn::CopyPageRange, k.costs.fork + k.costs.exec);
            let mm = k.mm_alloc(memcg);
            k.khugepaged_exec(mm);
            (mm, Vec::new())
        } else {
            k.dup_mm(mm, memcg)?
        };
        k.tasks.push(crate::kernel::KTask {
            mm: child_mm,
            memcg,
            nr_pages_over_high: 0,
            fault_start: None,
            fault_read: false,
            fault_waited: false,
            fault_attempts: 0,
        });
        let p = &self.tasks[i];
        let regions = if spawn {
            HashMap::new()
        } else {
            p.regions
                .iter()
                .map(|(name, v)| {
                    let child = pairs.iter().find(|(pv, _)| pv == v).expect("copied VMA").1;
                    (name.clone(), child)
                })
                .collect()
        };
        let (kind, nth) = if spawn {
            ("spawn", p.nspawns)
        } else {
            ("fork", p.forks.len() as u32 - p.nspawns)
        };
        let child = TaskRun {
            name: format!("{}/{kind}{nth}", p.name),
            cgroup: p.cgroup.clone(),
            ktask: k.tasks.len() - 1,
            instance: p.instance,
            clock: k.now(),
            start: k.now(),
            state: TaskState::Ready,
            frames: vec![Frame {
                steps,
                next: 0,
                again: 0,
            }],
            regions,
            touch: None,
            kv: None,
            stream: None,
            compute_left: 0,
            file_io: None,
            kv_stats: None,
            kv_dbs: if spawn {
                HashMap::new()
            } else {
                p.kv_dbs.clone()
            },
            spawned: spawn,
            nspawns: 0,
            phases: Vec::new(),
            open_phase: None,
            parent: Some(i),
            live_children: 0,
            forks: Vec::new(),
        };
        let id = self.tasks.len();
        self.tasks.push(child);
        // A new entity starts at the queue's min_vruntime (place_entity).
        self.vruntime.push(self.min_vruntime);
        self.tasks[i].forks.push(id);
        self.tasks[i].nspawns += spawn as u32;
        self.tasks[i].live_children += 1;
        Ok(())
    }

    /// exit_mmap: every mapping goes; a parent in wait(2) for its last
    /// child wakes.
    fn exit_task(&mut self, i: usize, k: &mut Kernel) {
        let t = &mut self.tasks[i];
        let mut vmas: Vec<u32> = t.regions.drain().map(|(_, v)| v).collect();
        vmas.sort_unstable();
        // __mmput: khugepaged_exit, then exit_mmap.
        k.khugepaged_exit(k.tasks[t.ktask].mm);
        for v in vmas {
            k.munmap(v);
        }
        let mm = k.tasks[t.ktask].mm;
        k.lru_gen_del_mm(mm);
        t.clock = k.now();
        if t.spawned {
            k.hist.spawn_runtime_ns.record(t.clock - t.start);
        }
        if let Some(p) = t.parent {
            let now = k.now();
            let parent = &mut self.tasks[p];
            parent.live_children -= 1;
            if parent.live_children == 0 && parent.state == TaskState::Waiting {
                parent.state = TaskState::Ready;
                parent.clock = parent.clock.max(now);
            }
        }
    }

    /// Task indices in output order: each task followed by its forks,
    /// depth first.
    pub fn output_order(&self) -> Vec<usize> {
        fn visit(s: &Scheduler, i: usize, out: &mut Vec<usize>) {
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
}

fn close_phase(t: &mut TaskRun, k: &Kernel) {
    if let Some(p) = t.open_phase.take() {
        let ph = &mut t.phases[p];
        ph.end = k.now();
        ph.vm_delta = k.vm.delta(&ph.vm_start);
        ph.lru_gen = k.lru_gen_snapshot();
    }
}

fn swap_error(
    step: &Step,
    op: &str,
    device: usize,
    e: crate::mm::swapfile::SwapoffError,
) -> SimError {
    use crate::mm::swapfile::SwapoffError;
    match e {
        SwapoffError::NotOn if op == "swapon" => at_step(
            step,
            SimError::Spec(format!(
                "found a swapon of swap device {device}, which is already on (EBUSY); expected a swapoff of it before"
            )),
        ),
        SwapoffError::NotOn => at_step(
            step,
            SimError::Spec(format!(
                "found a swapoff of swap device {device}, which is not on (EINVAL); expected a swapon of it before"
            )),
        ),
        SwapoffError::NoMemory => SimError::Oom,
        SwapoffError::NoProgress(passes) => at_step(
            step,
            SimError::Unmodelled(format!(
                "swapoff of swap device {device} freed no slot in {passes} passes over every mm: the memory cgroup's reclaim sends each page swapoff brings in back to the slot it came from (a page another process still maps keeps its swap entry), so the kernel would go round until swapoff is killed; expected more memory for the cgroup (memory_max) while swapoff runs"
            )),
        ),
    }
}

impl Scheduler<'_> {
    /// An out-of-memory end of task `i`, told as what it is: the kernel
    /// would run its OOM killer (the memcg's, or the global one), which
    /// mmsim does not model, so the run cannot go on as the kernel's would.
    /// Any other error of the spec's not yet tied to a line gets the line
    /// of the step the task was running.
    fn locate(&self, i: usize, k: &Kernel, e: SimError) -> SimError {
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
        let usable = k.zones.iter().map(|z| z.managed).sum::<u64>() >> 8;
        let swap = k.total_swap_pages >> 8;
        let message = if t.cgroup.is_empty() {
            format!(
                "task {} ran out of memory (VM_FAULT_OOM) outside any cgroup: the kernel would invoke the global OOM killer, which mmsim does not model; found {usable} MiB of managed memory and {swap} MiB of swap on; expected a workload that fits (a larger `machine.memory`, more `[[swap]]`, or smaller regions)",
                t.name
            )
        } else {
            format!(
                "task {} ran out of memory (VM_FAULT_OOM) in cgroup {}: the kernel would invoke the memcg OOM killer, which mmsim does not model; found {swap} MiB of swap on; expected a workload that fits (a larger `cgroup.{}.memory_max`, more `[[swap]]`, or smaller regions)",
                t.name, t.cgroup, t.cgroup
            )
        };
        match step {
            Some(s) => at_step(s, SimError::Unmodelled(message)),
            None => SimError::Unmodelled(message),
        }
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

/// The page operations (`mmsim_spec::work`) a step counts when it
/// starts: what munmap, madvise, fork, swapoff, fsync, drop_caches and a
/// checked phase mark walk, 1 for any other step; none for the steps whose
/// accesses or slices are counted as they run, or a repeat (its body's
/// steps count).
fn dispatch_work(
    op: &Op,
    regions: &HashMap<String, u32>,
    k: &Kernel,
    phase: u64,
    file_pages: &[u64],
    swap: &[mmsim_spec::SwapDevice],
) -> u64 {
    let pages = |r: &str| regions.get(r).map_or(0, |&v| k.vmas[v as usize].pages);
    match op {
        Op::Touch(_)
        | Op::Stream { .. }
        | Op::FileIo { .. }
        | Op::KvStore(_)
        | Op::Compute { .. }
        | Op::Repeat { .. } => 0,
        Op::Munmap { region } => pages(region).max(1),
        Op::Madvise {
            region,
            offset,
            length,
            ..
        } => length
            .unwrap_or(pages(region).saturating_sub(*offset))
            .max(1),
        Op::Fork { .. } => regions.keys().map(|r| pages(r)).sum::<u64>().max(1),
        Op::Swapoff { device } => swap.get(*device).map_or(1, |d| (d.size / 4096).max(1)),
        Op::Fsync { file } => file_pages.get(*file).copied().unwrap_or(0).max(1),
        Op::DropCaches => file_pages.iter().sum::<u64>().max(1),
        Op::Phase { .. } => phase,
        _ => 1,
    }
}

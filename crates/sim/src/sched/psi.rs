//! Pressure stall information, as 6.1's kernel/sched/psi.c keeps it.
//!
//! Each task carries psi flags (`TSK_IOWAIT`, `TSK_MEMSTALL`,
//! `TSK_RUNNING`, `TSK_MEMSTALL_RUNNING`, `TSK_ONCPU`) counted on the CPU
//! it is queued on, in its cgroup and every ancestor up to the machine
//! (the root cgroup's group is the system's). From the counts each CPU of
//! a group is, at any moment, in some of the states `test_state` defines
//! (memory some: a task is in a memory stall; memory full: every runnable
//! task of the group on that CPU is, or the one on the CPU is reclaiming;
//! io some/full likewise for I/O waits; cpu some: a runnable task waits
//! for the CPU); `record_times` adds up each state's time per CPU, and
//! `collect_percpu_times` folds the CPUs into one figure, each weighed by
//! its non-idle time in whole jiffies. The totals (µs in the pressure
//! files) are those folds; the averages are the kernel's fixed-point
//! decays of each 2-second period's share (`update_averages`), run by the
//! group's `psi_avgs_work` and by each read.
//!
//! mmsim's tasks run out of step across CPUs (each entity's slice is run
//! whole before the next is picked), so a change is queued with its time
//! and applied once no entity can still produce an earlier one: the
//! scheduler calls `advance` with the time of each pick, which is never
//! earlier than the last (sched/mod.rs). A read at a phase's end applies
//! what is queued up to then; a change another CPU makes later for an
//! earlier moment (at most the scheduler's quantum earlier) is counted
//! from the read on.
//!
//! 5.10 (`release.psi_memstall_running` off) judges memory full as it did
//! before 5.12-5.13: only with no runnable task in the group on the CPU, a reclaiming
//! CPU being sampled full at each scheduler tick instead
//! (`psi_memstall_tick`: the time from the last change to the last tick),
//! and it has no cpu full (its files print no such line: mmsim gives 0).
//!
//! Simplifications, none of which changes a total or average by more than
//! rounding: the averaging worker is not a task (its own few µs of running
//! are not counted) and it stops after a period in which no CPU of the
//! group was non-idle (the kernel keeps it on while its own CPU has more
//! than one task counted, which only the worker's CPU can see); times are
//! u64 (the kernel's u32 per-CPU times wrap after 4.3 s, which its
//! 2-second worker never lets matter); IRQ pressure (CONFIG_IRQ_TIME_
//! ACCOUNTING) is not modelled.

use mmsim_spec::output::{Pressure, PressureLine, PressureResource};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

// enum psi_task_count and the task flags.
const NR_IOWAIT: usize = 0;
const NR_MEMSTALL: usize = 1;
const NR_RUNNING: usize = 2;
const NR_MEMSTALL_RUNNING: usize = 3;
const NR_PSI_TASK_COUNTS: usize = 4;
pub const TSK_IOWAIT: u8 = 1 << NR_IOWAIT;
pub const TSK_MEMSTALL: u8 = 1 << NR_MEMSTALL;
pub const TSK_RUNNING: u8 = 1 << NR_RUNNING;
pub const TSK_MEMSTALL_RUNNING: u8 = 1 << NR_MEMSTALL_RUNNING;
pub const TSK_ONCPU: u8 = 1 << NR_PSI_TASK_COUNTS;

// enum psi_states (without PSI_IRQ_FULL).
const PSI_IO_SOME: usize = 0;
const PSI_IO_FULL: usize = 1;
const PSI_MEM_SOME: usize = 2;
const PSI_MEM_FULL: usize = 3;
const PSI_CPU_SOME: usize = 4;
const PSI_CPU_FULL: usize = 5;
const PSI_NONIDLE: usize = 6;
const NR_PSI_STATES: usize = 7;
/// The state mask's bit for TSK_ONCPU.
const PSI_ONCPU: u8 = 1 << NR_PSI_STATES;

/// Fixed-point load averages (include/linux/sched/loadavg.h).
const FSHIFT: u32 = 11;
const FIXED_1: u64 = 1 << FSHIFT;
/// 1/exp(2s/10s), 1/exp(2s/60s), 1/exp(2s/300s) in fixed point.
const EXP_10S: u64 = 1677;
const EXP_60S: u64 = 1981;
const EXP_300S: u64 = 2034;

const JIFFY_NS: u64 = 1_000_000_000 / crate::mm::memcontrol::HZ;
/// PSI_FREQ: 2 * HZ + 1 jiffies, the averaging period.
pub const PSI_PERIOD_NS: u64 = (2 * crate::mm::memcontrol::HZ + 1) * JIFFY_NS;

/// What `task_struct` carries for psi.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PsiTask {
    /// `psi_flags`: what the task is counted as, where it is counted.
    pub flags: u8,
    pub in_memstall: bool,
    pub in_iowait: bool,
    /// A memory stall that lasts until the task runs again (a wait on a
    /// workingset folio's read, memory.high's throttling sleep).
    pub leave_on_run: bool,
    /// The CPU its counts are on (`task_cpu`).
    pub cpu: u16,
    /// Its cgroup's group (the memcg index; 0 is the machine).
    pub group: u16,
    /// The time of its last change: a task's changes never go back in
    /// time (a sleep may be found over before it began: the wakeup is
    /// then at once).
    pub last_at: u64,
}

impl PsiTask {
    /// TSK_MEMSTALL_RUNNING if it is in a memory stall: what its running
    /// adds beside TSK_RUNNING.
    fn memstall_running(&self) -> u8 {
        if self.in_memstall {
            TSK_MEMSTALL_RUNNING
        } else {
            0
        }
    }
}

/// One CPU of a group (`psi_group_cpu`).
#[derive(Clone, Copy, Debug, Default)]
struct GroupCpu {
    tasks: [u32; NR_PSI_TASK_COUNTS],
    state_mask: u8,
    state_start: u64,
    times: [u64; NR_PSI_STATES],
    times_prev: [u64; NR_PSI_STATES],
}

/// `psi_group`: a cgroup's or the machine's.
#[derive(Clone, Debug)]
struct Group {
    parent: Option<u16>,
    cpus: Vec<GroupCpu>,
    total: [u64; NR_PSI_STATES - 1],
    avg_total: [u64; NR_PSI_STATES - 1],
    avg: [[u64; 3]; NR_PSI_STATES - 1],
    avg_last_update: u64,
    avg_next_update: u64,
    /// When the pending `psi_avgs_work` runs (None: not pending).
    work_at: Option<u64>,
}

impl Group {
    /// `group_init` at boot (every cgroup exists from boot in mmsim).
    fn new(parent: Option<u16>, cpus: usize) -> Self {
        Group {
            parent,
            cpus: vec![GroupCpu::default(); cpus],
            total: [0; NR_PSI_STATES - 1],
            avg_total: [0; NR_PSI_STATES - 1],
            avg: [[0; 3]; NR_PSI_STATES - 1],
            avg_last_update: 0,
            avg_next_update: PSI_PERIOD_NS,
            work_at: None,
        }
    }
}

/// A task's change of flags on a CPU, queued until no earlier change can
/// come (`Psi::advance`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Change {
    at: u64,
    /// The order of queueing, which keeps a task's own changes in order.
    seq: u64,
    cpu: u16,
    group: u16,
    clear: u8,
    set: u8,
    /// `cpu_curr(cpu)->in_memstall` after the change: 0 unchanged, 1 no,
    /// 2 yes.
    curr: u8,
}

/// Who runs now, for `current`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsiWho {
    Task(usize),
    /// kswapd (0) or khugepaged (1).
    Kthread(usize),
}

/// The machine's and the cgroups' pressure.
#[derive(Clone, Debug)]
pub struct Psi {
    groups: Vec<Group>,
    queue: BinaryHeap<Reverse<Change>>,
    seq: u64,
    /// Per CPU: whether the task on it is in a memory stall.
    curr_memstall: Vec<bool>,
    /// 5.12-5.13's rules (TSK_MEMSTALL_RUNNING, full judged at each
    /// change, cpu full); off: 5.10's (see the module's comment).
    memstall_running: bool,
    /// kswapd's and khugepaged's flags (tasks keep theirs in KTask).
    pub kthreads: [PsiTask; 2],
    /// The entity on the CPU the kernel is running for.
    pub current: Option<PsiWho>,
    /// The latest time the groups' times were collected at.
    collected_to: u64,
}

impl Psi {
    /// The machine's group and one per cgroup (`parents[i]`: cgroup i's
    /// parent; index 0 is the root, the machine).
    pub fn new(parents: &[Option<u16>], cpus: usize, memstall_running: bool) -> Self {
        Psi {
            groups: parents.iter().map(|&p| Group::new(p, cpus)).collect(),
            queue: BinaryHeap::new(),
            seq: 0,
            curr_memstall: vec![false; cpus],
            memstall_running,
            kthreads: [PsiTask::default(); 2],
            current: None,
            collected_to: 0,
        }
    }

    /// Queues `psi_task_change` of a task at `at`: its flags change now,
    /// the groups' counts when the queue reaches `at`.
    pub fn task_change(&mut self, t: &mut PsiTask, clear: u8, set: u8, at: u64) {
        let at = at.max(t.last_at);
        t.last_at = at;
        t.flags = (t.flags & !clear) | set;
        let curr = if set & TSK_ONCPU != 0 || (clear & TSK_ONCPU == 0 && t.flags & TSK_ONCPU != 0) {
            1 + t.in_memstall as u8
        } else if clear & TSK_ONCPU != 0 {
            1
        } else {
            0
        };
        self.seq += 1;
        self.queue.push(Reverse(Change {
            at,
            seq: self.seq,
            cpu: t.cpu,
            group: t.group,
            clear,
            set,
            curr,
        }));
    }

    /// Applies every change queued up to `to` and runs the averaging
    /// work due by then, in time order.
    pub fn advance(&mut self, to: u64) {
        loop {
            let next = self.queue.peek().map(|c| c.0.at).filter(|&at| at <= to);
            let work = self
                .groups
                .iter()
                .enumerate()
                .filter_map(|(g, gr)| gr.work_at.map(|w| (w, g)))
                .min()
                .filter(|&(w, _)| w <= next.unwrap_or(to));
            if let Some((w, g)) = work {
                self.avgs_work(g, w);
                continue;
            }
            let Some(Reverse(c)) = next.and_then(|_| self.queue.pop()) else {
                break;
            };
            self.apply(c);
        }
    }

    /// A queued change on every group from the task's up to the machine.
    fn apply(&mut self, c: Change) {
        let cpu = c.cpu as usize;
        let rules = Rules {
            memstall_running: self.memstall_running,
            // 5.10's ticks sample what ran until this change.
            ticked_memstall: !self.memstall_running && self.curr_memstall[cpu],
        };
        if c.curr != 0 {
            self.curr_memstall[cpu] = c.curr == 2;
        }
        let curr_memstall = self.curr_memstall[cpu];
        // A change another CPU's entity made for a moment a read has
        // already collected counts from that read on.
        let at = c.at.max(self.collected_to);
        let mut g = Some(c.group);
        while let Some(i) = g {
            let group = &mut self.groups[i as usize];
            group_change(group, cpu, (c.clear, c.set), at, curr_memstall, rules);
            g = group.parent;
        }
    }

    /// A collection's time: never before an earlier one's (a read at a
    /// phase's end comes at its task's time, which another CPU's task
    /// may have passed).
    fn collection_time(&mut self, now: u64) -> u64 {
        self.collected_to = self.collected_to.max(now);
        self.collected_to
    }

    /// `psi_avgs_work` of group `g` at `now`.
    fn avgs_work(&mut self, g: usize, now: u64) {
        let now = self.collection_time(now);
        let ticked = !self.memstall_running;
        let group = &mut self.groups[g];
        let nonidle = collect_percpu_times(group, now, ticked, &self.curr_memstall);
        if now >= group.avg_next_update {
            group.avg_next_update = update_averages(group, now);
        }
        group.work_at = nonidle.then(|| {
            let jiffies = group.avg_next_update.saturating_sub(now) / JIFFY_NS + 1;
            now.saturating_add(jiffies * JIFFY_NS)
        });
    }

    /// `psi_show` of group `g` (0: /proc/pressure; else the cgroup's
    /// pressure files) at `now`: totals since boot, averages as of now.
    pub fn show(&mut self, g: u16, now: u64) -> Pressure {
        self.advance(now);
        let now = self.collection_time(now);
        let ticked = !self.memstall_running;
        let group = &mut self.groups[g as usize];
        collect_percpu_times(group, now, ticked, &self.curr_memstall);
        if now >= group.avg_next_update {
            group.avg_next_update = update_averages(group, now);
        }
        let line = |s: usize| PressureLine {
            avg10: load_percent(group.avg[s][0]),
            avg60: load_percent(group.avg[s][1]),
            avg300: load_percent(group.avg[s][2]),
            total_us: group.total[s] / 1000,
        };
        let res = |some, full| PressureResource {
            some: line(some),
            full: line(full),
        };
        let mut p = Pressure {
            memory: res(PSI_MEM_SOME, PSI_MEM_FULL),
            io: res(PSI_IO_SOME, PSI_IO_FULL),
            cpu: res(PSI_CPU_SOME, PSI_CPU_FULL),
        };
        if g == 0 || !self.memstall_running {
            // "CPU FULL is undefined at the system level"; 5.10 has none.
            p.cpu.full = PressureLine::default();
        }
        p
    }
}

/// Which release's rules a change is judged by, and whether 5.10's ticks
/// sampled the interval up to it (the CPU's current task was in a memory
/// stall until the change).
#[derive(Clone, Copy)]
struct Rules {
    memstall_running: bool,
    ticked_memstall: bool,
}

/// The kernel's side: where tasks enter and leave stalls, and the
/// scheduler's switches.
impl crate::kernel::Kernel {
    fn psi_task(&self, who: PsiWho) -> PsiTask {
        match who {
            PsiWho::Task(t) => self.tasks[t].psi,
            PsiWho::Kthread(k) => self.psi.kthreads[k],
        }
    }

    fn psi_set_task(&mut self, who: PsiWho, t: PsiTask) {
        match who {
            PsiWho::Task(i) => self.tasks[i].psi = t,
            PsiWho::Kthread(k) => self.psi.kthreads[k] = t,
        }
    }

    fn psi_change(&mut self, who: PsiWho, t: &mut PsiTask, clear: u8, set: u8, at: u64) {
        self.psi.task_change(t, clear, set, at);
        self.psi_set_task(who, *t);
    }

    /// `psi_memstall_enter` for the running entity: what to give
    /// `psi_memstall_leave` (true: it was in a stall already).
    pub fn psi_memstall_enter(&mut self) -> bool {
        let Some(who) = self.psi.current else {
            return true;
        };
        let mut t = self.psi_task(who);
        if t.in_memstall {
            return true;
        }
        t.in_memstall = true;
        let now = self.now();
        self.psi_change(who, &mut t, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, now);
        if self.cpus.len() > 1 {
            self.cpus[self.cur_cpu].memstall_since = Some(now);
        }
        false
    }

    /// `psi_memstall_leave`.
    pub fn psi_memstall_leave(&mut self, was_in: bool) {
        let Some(who) = self.psi.current.filter(|_| !was_in) else {
            return;
        };
        let mut t = self.psi_task(who);
        t.in_memstall = false;
        let now = self.now();
        self.psi_change(who, &mut t, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0, now);
        self.memstall_span_end(now);
    }

    /// The current CPU's running stall, if one is open, ends at `at`: a
    /// span an IPI may have interrupted (mm/tlb.rs).
    fn memstall_span_end(&mut self, at: u64) {
        let c = &mut self.cpus[self.cur_cpu];
        if let Some(since) = c.memstall_since.take() {
            c.memstall_spans.push((since, at));
        }
    }

    /// The running task is about to sleep waiting for folio `pfn`'s I/O
    /// (`folio_wait_bit_common` through `io_schedule`): an I/O wait, and a
    /// memory stall too while a workingset folio is read back in
    /// (thrashing), which ends when the task runs again.
    pub fn psi_folio_wait(&mut self, pfn: crate::mm::folio::Pfn) {
        use crate::mm::folio::{PG_UPTODATE, PG_WORKINGSET};
        if self.psi.current.is_none() {
            return;
        }
        let f = self.folios.get(pfn);
        if !f.test(PG_UPTODATE) && f.test(PG_WORKINGSET) {
            self.psi_memstall_sleep();
        }
        self.psi_io_schedule();
    }

    /// The running task sleeps in `io_schedule` (an O_DIRECT wait):
    /// iowait until it runs again.
    pub fn psi_io_schedule(&mut self) {
        let Some(who) = self.psi.current else { return };
        let mut t = self.psi_task(who);
        t.in_iowait = true;
        self.psi_set_task(who, t);
    }

    /// The running task sleeps in a memory stall (memory.high's
    /// throttling) that ends when it runs again.
    pub fn psi_memstall_sleep(&mut self) {
        let Some(who) = self.psi.current else { return };
        if !self.psi_memstall_enter() {
            // A stall slept through, not run: the CPU's IPIs meanwhile
            // interrupt whatever runs there instead.
            self.cpus[self.cur_cpu].memstall_since = None;
            let mut t = self.psi_task(who);
            t.leave_on_run = true;
            self.psi_set_task(who, t);
        }
    }

    /// `io_schedule` inside a syscall from now to `until`: the CPU goes
    /// idle for psi (mmsim keeps it for the task), the task waits on I/O.
    pub fn psi_io_wait(&mut self, until: u64) {
        let Some(who) = self.psi.current else { return };
        let mut t = self.psi_task(who);
        let ms = t.memstall_running();
        let now = self.now();
        let on = TSK_ONCPU | TSK_RUNNING | ms;
        self.psi_change(who, &mut t, on, TSK_IOWAIT, now);
        self.psi_change(who, &mut t, TSK_IOWAIT, on, until);
        // A folio wait that `psi_folio_wait` began ends here.
        t.in_iowait = false;
        if std::mem::take(&mut t.leave_on_run) {
            t.in_memstall = false;
            self.psi_change(who, &mut t, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0, until);
        }
        self.psi_set_task(who, t);
    }

    /// The scheduler puts `who` on `cpu` at `start`, ready since `ready`:
    /// its wakeup (`psi_enqueue`, after `psi_ttwu_dequeue` if it moves),
    /// or its migration while runnable, at `ready`; then TSK_ONCPU; a
    /// stall that lasted until it ran ends.
    pub fn psi_switch_in(&mut self, who: PsiWho, cpu: usize, ready: u64, start: u64) {
        let mut t = self.psi_task(who);
        let cpu = cpu as u16;
        let ms = t.memstall_running();
        if t.flags & TSK_RUNNING == 0 {
            if t.cpu != cpu && t.flags != 0 {
                let f = t.flags;
                self.psi_change(who, &mut t, f, 0, ready);
            }
            let requeue = if t.flags == 0 && t.in_memstall {
                TSK_MEMSTALL
            } else {
                0
            };
            t.cpu = cpu;
            let io = t.flags & TSK_IOWAIT;
            self.psi_change(who, &mut t, io, TSK_RUNNING | ms | requeue, ready);
            t.in_iowait = false;
        } else if t.cpu != cpu {
            let f = t.flags;
            self.psi_change(who, &mut t, f, 0, ready);
            t.cpu = cpu;
            self.psi_change(who, &mut t, 0, f, ready);
        }
        self.psi_change(who, &mut t, 0, TSK_ONCPU, start);
        self.psi.current = Some(who);
        // A stall it runs in (left at its last switch-out) is this CPU's
        // from now; a slept one ends just below.
        if self.cpus.len() > 1 && t.in_memstall && !t.leave_on_run {
            self.cpus[cpu as usize].memstall_since = Some(start);
        }
        if t.leave_on_run {
            t.leave_on_run = false;
            self.psi_set_task(who, t);
            self.psi_memstall_leave(false);
        }
    }

    /// `who` leaves its CPU at `at`: preempted (still runnable), asleep
    /// (an I/O wait if it waits in `io_schedule`), or exiting.
    pub fn psi_switch_out(&mut self, who: PsiWho, at: u64, how: PsiOut) {
        let mut t = self.psi_task(who);
        let (clear, set) = match how {
            PsiOut::Preempted => (TSK_ONCPU, 0),
            PsiOut::Sleep => {
                let io = if t.in_iowait { TSK_IOWAIT } else { 0 };
                (TSK_ONCPU | TSK_RUNNING | t.memstall_running(), io)
            }
            PsiOut::Exit => {
                t.in_memstall = false;
                t.in_iowait = false;
                t.leave_on_run = false;
                (t.flags, 0)
            }
        };
        self.psi_change(who, &mut t, clear, set, at);
        self.psi.current = None;
        // A running stall (kswapd's balance_pgdat spans its slices) stops
        // being this CPU's when the entity leaves it.
        self.memstall_span_end(at);
    }

    /// The pressure files of the machine (`memcg` 0) or a cgroup now.
    pub fn psi_show(&mut self, memcg: u16) -> Pressure {
        let now = self.now();
        self.psi.show(memcg, now)
    }
}

/// How an entity leaves its CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsiOut {
    Preempted,
    Sleep,
    Exit,
}

/// `test_state`.
fn test_state(tasks: &[u32; NR_PSI_TASK_COUNTS], state: usize, oncpu: bool, r: Rules) -> bool {
    // 5.10: no task is counted as running in a memory stall.
    let memstall_running = if r.memstall_running {
        tasks[NR_MEMSTALL_RUNNING]
    } else {
        0
    };
    match state {
        PSI_IO_SOME => tasks[NR_IOWAIT] > 0,
        PSI_IO_FULL => tasks[NR_IOWAIT] > 0 && tasks[NR_RUNNING] == 0,
        PSI_MEM_SOME => tasks[NR_MEMSTALL] > 0,
        PSI_MEM_FULL => tasks[NR_MEMSTALL] > 0 && tasks[NR_RUNNING] == memstall_running,
        PSI_CPU_SOME => tasks[NR_RUNNING] > oncpu as u32,
        PSI_CPU_FULL => r.memstall_running && tasks[NR_RUNNING] > 0 && !oncpu,
        PSI_NONIDLE => tasks[NR_IOWAIT] > 0 || tasks[NR_MEMSTALL] > 0 || tasks[NR_RUNNING] > 0,
        _ => false,
    }
}

/// `record_times`: the time since the last change goes to the states the
/// CPU was in; on 5.10, with its current task reclaiming (`ticked`), a
/// memory stall that was not full is full up to the last tick
/// (`psi_memstall_tick`).
fn record_times(gc: &mut GroupCpu, now: u64, ticked: bool) {
    let delta = now - gc.state_start;
    gc.times[PSI_MEM_FULL] += ticked_full(gc, now, ticked);
    gc.state_start = now;
    for s in 0..NR_PSI_STATES {
        if gc.state_mask & (1 << s) != 0 {
            gc.times[s] += delta;
        }
    }
}

/// 5.10's `psi_memstall_tick` samples from the last change to `now`: each
/// tick (every CPU's, at each jiffy) that finds the CPU's current task of
/// the group reclaiming records min(time since the last record, a
/// jiffy) as full, so a stall is full from its start to its last tick.
fn ticked_full(gc: &GroupCpu, now: u64, ticked: bool) -> u64 {
    let sampled = ticked
        && gc.state_mask & PSI_ONCPU != 0
        && gc.state_mask & (1 << PSI_MEM_SOME) != 0
        && gc.state_mask & (1 << PSI_MEM_FULL) == 0;
    if !sampled {
        return 0;
    }
    let last_tick = now / JIFFY_NS * JIFFY_NS;
    last_tick.saturating_sub(gc.state_start)
}

/// `psi_group_change` of one group on one CPU at `now`.
fn group_change(
    g: &mut Group,
    cpu: usize,
    (clear, set): (u8, u8),
    now: u64,
    curr_memstall: bool,
    r: Rules,
) {
    let gc = &mut g.cpus[cpu];
    // A change made later for an earlier moment (see the module's
    // comment) counts from the last one on.
    let now = now.max(gc.state_start);
    let mut state_mask = if clear & TSK_ONCPU != 0 {
        0
    } else if set & TSK_ONCPU != 0 {
        PSI_ONCPU
    } else {
        gc.state_mask & PSI_ONCPU
    };
    for t in 0..NR_PSI_TASK_COUNTS {
        if clear & (1 << t) != 0 {
            debug_assert!(gc.tasks[t] > 0, "psi: task underflow cpu={cpu} t={t}");
            gc.tasks[t] = gc.tasks[t].saturating_sub(1);
        }
        if set & (1 << t) != 0 {
            gc.tasks[t] += 1;
        }
    }
    let oncpu = state_mask & PSI_ONCPU != 0;
    for s in 0..NR_PSI_STATES {
        if test_state(&gc.tasks, s, oncpu, r) {
            state_mask |= 1 << s;
        }
    }
    // A CPU reclaiming for the group could run nothing productive even if
    // something were runnable: that is full (5.12; 5.10 samples it at
    // ticks instead).
    if r.memstall_running && oncpu && curr_memstall {
        state_mask |= 1 << PSI_MEM_FULL;
    }
    record_times(gc, now, r.ticked_memstall);
    gc.state_mask = state_mask;
    if g.work_at.is_none() {
        g.work_at = Some(now.saturating_add(PSI_PERIOD_NS));
    }
}

/// `collect_percpu_times` for the averages' aggregator: each state's time
/// since the last collection on each CPU (the current state's included),
/// weighed by the CPU's non-idle jiffies, into the group's totals.
/// Whether any CPU was non-idle since.
fn collect_percpu_times(g: &mut Group, now: u64, ticked: bool, curr_memstall: &[bool]) -> bool {
    let mut deltas = [0u128; NR_PSI_STATES - 1];
    let mut nonidle_total: u64 = 0;
    let mut changed = false;
    for (gc, &reclaiming) in g.cpus.iter_mut().zip(curr_memstall) {
        let mut times = gc.times;
        // 5.10: the ticks since the last change have recorded their full.
        times[PSI_MEM_FULL] += ticked_full(gc, now, ticked && reclaiming);
        let mut d = [0u64; NR_PSI_STATES];
        for s in 0..NR_PSI_STATES {
            if gc.state_mask & (1 << s) != 0 {
                times[s] += now.saturating_sub(gc.state_start);
            }
            // (Never negative: changes are applied at or after the last
            // collection, `Psi::apply`.)
            d[s] = times[s].saturating_sub(gc.times_prev[s]);
            gc.times_prev[s] = gc.times_prev[s].max(times[s]);
        }
        changed |= d[PSI_NONIDLE] > 0;
        let nonidle = d[PSI_NONIDLE] / JIFFY_NS;
        nonidle_total += nonidle;
        for (acc, &ds) in deltas.iter_mut().zip(&d) {
            *acc += ds as u128 * nonidle as u128;
        }
    }
    for (total, acc) in g.total.iter_mut().zip(deltas) {
        *total += (acc / nonidle_total.max(1) as u128) as u64;
    }
    changed
}

/// `update_averages`: the period's share of each state, folded into the
/// decaying averages (missed periods decay them towards zero). The next
/// update's time.
fn update_averages(g: &mut Group, now: u64) -> u64 {
    let expires = g.avg_next_update;
    let missed = if now - expires >= PSI_PERIOD_NS {
        (now - expires) / PSI_PERIOD_NS
    } else {
        0
    };
    let next = expires.saturating_add((1 + missed) * PSI_PERIOD_NS);
    let period = now - (g.avg_last_update + missed * PSI_PERIOD_NS);
    g.avg_last_update = now;
    for s in 0..NR_PSI_STATES - 1 {
        // Time that slipped past a period counts in the next one.
        let sample = (g.total[s] - g.avg_total[s]).min(period);
        g.avg_total[s] += sample;
        calc_avgs(&mut g.avg[s], missed, sample, period);
    }
    next
}

/// `calc_avgs`.
fn calc_avgs(avg: &mut [u64; 3], missed_periods: u64, time: u64, period: u64) {
    const EXP: [u64; 3] = [EXP_10S, EXP_60S, EXP_300S];
    if missed_periods > 0 {
        for (a, e) in avg.iter_mut().zip(EXP) {
            *a = calc_load_n(*a, e, 0, missed_periods);
        }
    }
    let pct = time * 100 / period.max(1) * FIXED_1;
    for (a, e) in avg.iter_mut().zip(EXP) {
        *a = calc_load(*a, e, pct);
    }
}

/// `calc_load`: one step of an exponentially decaying average.
fn calc_load(load: u64, exp: u64, active: u64) -> u64 {
    let mut newload = load * exp + active * (FIXED_1 - exp);
    if active >= load {
        newload += FIXED_1 - 1;
    }
    newload / FIXED_1
}

/// `calc_load_n`: n steps at once.
fn calc_load_n(load: u64, exp: u64, active: u64, n: u64) -> u64 {
    calc_load(load, fixed_power_int(exp, FSHIFT, n), active)
}

/// `fixed_power_int`: x^n in fixed point with `frac_bits` fraction bits.
fn fixed_power_int(mut x: u64, frac_bits: u32, mut n: u64) -> u64 {
    let mut result = 1u64 << frac_bits;
    while n > 0 {
        if n & 1 != 0 {
            result = (result * x + (1 << (frac_bits - 1))) >> frac_bits;
        }
        n >>= 1;
        if n == 0 {
            break;
        }
        x = (x * x + (1 << (frac_bits - 1))) >> frac_bits;
    }
    result
}

/// An average as psi_show prints it: LOAD_INT.LOAD_FRAC, two decimals.
fn load_percent(avg: u64) -> f64 {
    let int = avg >> FSHIFT;
    let frac = ((avg & (FIXED_1 - 1)) * 100) >> FSHIFT;
    int as f64 + frac as f64 / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fully stalled group: every 2 s period is 100 %. avg10 after n
    /// periods is 100 × (1 − (1677/2048)^n), in the kernel's rounding.
    #[test]
    fn averages_decay_with_psi_c_constants() {
        let mut a = [0u64; 3];
        calc_avgs(&mut a, 0, 2_000, 2_000);
        // 100 % × (2048 − 1677) / 2048, rounded up (active ≥ load).
        assert_eq!(
            a[0],
            (100 * FIXED_1 * (FIXED_1 - EXP_10S)).div_ceil(FIXED_1)
        );
        assert_eq!(load_percent(a[0]), 18.11);
        assert_eq!(load_percent(a[1]), 3.27);
        assert_eq!(load_percent(a[2]), 0.68);
        for _ in 0..99 {
            calc_avgs(&mut a, 0, 2_000, 2_000);
        }
        // 200 s of full stall: avg10 is 100 %, avg300 1 − (2034/2048)^100
        // (the truncated constant decays faster than e^(−200/300), 48.7).
        assert_eq!(load_percent(a[0]), 100.0);
        let want = 100.0 * (1.0 - (2034.0f64 / 2048.0).powi(100));
        assert!((load_percent(a[2]) - want).abs() < 0.1, "{a:?} {want}");
    }

    #[test]
    fn missed_periods_decay_as_many_steps() {
        let mut one = [100 * FIXED_1; 3];
        let mut steps = one;
        calc_avgs(&mut one, 3, 0, 2_000);
        for _ in 0..4 {
            calc_avgs(&mut steps, 0, 0, 2_000);
        }
        for i in 0..3 {
            // fixed_power_int rounds each squaring, the single steps
            // truncate: within three hundredths of a per cent.
            assert!(
                one[i].abs_diff(steps[i]) <= FIXED_1 * 3 / 100,
                "{one:?} {steps:?}"
            );
        }
        assert_eq!(fixed_power_int(EXP_10S, FSHIFT, 0), FIXED_1);
        assert_eq!(fixed_power_int(EXP_10S, FSHIFT, 1), EXP_10S);
        assert_eq!(
            fixed_power_int(EXP_10S, FSHIFT, 2),
            (1677 * 1677 + 1024) >> 11
        );
    }

    fn task(cpu: u16, group: u16) -> PsiTask {
        PsiTask {
            cpu,
            group,
            ..Default::default()
        }
    }

    /// One task on CPU 0 of two: runs 1 ms, reclaims 3 ms (memstall on
    /// the CPU: some and full), waits 2 ms for a workingset read (io and
    /// memory, both full), runs 1 ms. CPU 1 idles and weighs nothing.
    #[test]
    fn a_lone_task_stalls_some_and_full() {
        let mut p = Psi::new(&[None, Some(0)], 2, true);
        let mut t = task(0, 1);
        let ms = 1_000_000;
        p.task_change(&mut t, 0, TSK_RUNNING | TSK_ONCPU, 0);
        t.in_memstall = true;
        p.task_change(&mut t, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, ms);
        t.in_memstall = false;
        p.task_change(&mut t, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0, 4 * ms);
        t.in_memstall = true;
        p.task_change(&mut t, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 4 * ms);
        t.in_iowait = true;
        p.task_change(
            &mut t,
            TSK_ONCPU | TSK_RUNNING | TSK_MEMSTALL_RUNNING,
            TSK_IOWAIT,
            4 * ms,
        );
        p.task_change(
            &mut t,
            TSK_IOWAIT,
            TSK_RUNNING | TSK_MEMSTALL_RUNNING,
            6 * ms,
        );
        p.task_change(&mut t, 0, TSK_ONCPU, 6 * ms);
        t.in_memstall = false;
        p.task_change(&mut t, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0, 6 * ms);
        p.task_change(&mut t, TSK_RUNNING | TSK_ONCPU, 0, 7 * ms);
        for g in [0, 1] {
            let s = p.show(g, 8 * ms);
            assert_eq!(s.memory.some.total_us, 5_000, "group {g}");
            assert_eq!(s.memory.full.total_us, 5_000);
            assert_eq!(s.io.some.total_us, 2_000);
            assert_eq!(s.io.full.total_us, 2_000);
            assert_eq!(s.cpu.some.total_us, 0);
        }
    }

    /// Two tasks of a group on one CPU: one waits for the CPU (cpu some;
    /// full only where nothing of the group is on it), the other
    /// reclaims: memory some, and full since the one on the CPU reclaims.
    #[test]
    fn a_reclaimer_on_the_cpu_is_full_with_a_runnable_task_beside() {
        let mut p = Psi::new(&[None, Some(0)], 1, true);
        let (mut a, mut b) = (task(0, 1), task(0, 1));
        // Tens of ms: a CPU weighs its whole non-idle jiffies only.
        let ms = 10_000_000;
        p.task_change(&mut a, 0, TSK_RUNNING | TSK_ONCPU, 0);
        p.task_change(&mut b, 0, TSK_RUNNING, 0);
        a.in_memstall = true;
        p.task_change(&mut a, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0);
        a.in_memstall = false;
        p.task_change(&mut a, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0, 2 * ms);
        // a still runs 1 ms productively with b waiting: not full.
        p.task_change(&mut a, TSK_RUNNING | TSK_ONCPU, 0, 3 * ms);
        p.task_change(&mut b, TSK_RUNNING, 0, 3 * ms);
        let s = p.show(1, 4 * ms);
        assert_eq!(s.memory.some.total_us, 20_000);
        assert_eq!(s.memory.full.total_us, 20_000);
        assert_eq!(s.cpu.some.total_us, 30_000);
        assert_eq!(s.cpu.full.total_us, 0);
        // The machine's cpu full reads zero, as the kernel prints it.
        assert_eq!(p.show(0, 4 * ms).cpu.full, PressureLine::default());
    }

    /// 5.10: a task reclaiming on its CPU is full only up to the last
    /// scheduler tick of its stall (ticks every 4 ms, HZ = 250), and not
    /// at all for a stall between two ticks; a stall with nothing of the
    /// group runnable (a folio wait) is full throughout; no cpu full.
    #[test]
    fn v5_10_samples_a_reclaimer_full_at_ticks() {
        let mut p = Psi::new(&[None, Some(0)], 1, false);
        let mut t = task(0, 1);
        let us = 1_000;
        p.task_change(&mut t, 0, TSK_RUNNING | TSK_ONCPU, 0);
        // Reclaim from 1.5 ms to 9.5 ms: ticks at 4 and 8 ms.
        t.in_memstall = true;
        p.task_change(&mut t, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 1_500 * us);
        t.in_memstall = false;
        p.task_change(&mut t, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0, 9_500 * us);
        // Reclaim from 12.5 ms to 15.5 ms: no tick.
        t.in_memstall = true;
        p.task_change(&mut t, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 12_500 * us);
        t.in_memstall = false;
        p.task_change(&mut t, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0, 15_500 * us);
        // A 2 ms folio wait off the CPU, in a memory stall.
        t.in_memstall = true;
        p.task_change(&mut t, TSK_RUNNING | TSK_ONCPU, TSK_MEMSTALL, 17_000 * us);
        t.in_memstall = false;
        p.task_change(&mut t, TSK_MEMSTALL, TSK_RUNNING | TSK_ONCPU, 19_000 * us);
        p.task_change(&mut t, TSK_RUNNING | TSK_ONCPU, 0, 24_000 * us);
        let s = p.show(1, 40_000 * us);
        assert_eq!(s.memory.some.total_us, 8_000 + 3_000 + 2_000);
        assert_eq!(s.memory.full.total_us, 6_500 + 2_000);
        assert_eq!(s.cpu.full, PressureLine::default());
        // The same on 6.1: the reclaimer is full throughout.
        let mut p = Psi::new(&[None, Some(0)], 1, true);
        let mut t = task(0, 1);
        p.task_change(&mut t, 0, TSK_RUNNING | TSK_ONCPU, 0);
        t.in_memstall = true;
        p.task_change(&mut t, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 1_500 * us);
        t.in_memstall = false;
        p.task_change(&mut t, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0, 9_500 * us);
        p.task_change(&mut t, TSK_RUNNING | TSK_ONCPU, 0, 24_000 * us);
        assert_eq!(p.show(1, 40_000 * us).memory.full.total_us, 8_000);
    }

    /// 5.10, a reclaimer with another task of its group runnable beside
    /// it: memory full comes from the ticks alone (6.1: throughout), and a
    /// read between ticks counts what the last tick recorded.
    #[test]
    fn v5_10_full_beside_a_runnable_task_is_ticks_only() {
        let mut p = Psi::new(&[None, Some(0)], 1, false);
        let (mut a, mut b) = (task(0, 1), task(0, 1));
        let ms = 1_000_000;
        p.task_change(&mut a, 0, TSK_RUNNING | TSK_ONCPU, 0);
        p.task_change(&mut b, 0, TSK_RUNNING, 0);
        a.in_memstall = true;
        p.task_change(&mut a, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, ms);
        // Read at 30 ms, the stall going on: ticks at 4 .. 28 ms.
        let s = p.show(1, 30 * ms);
        assert_eq!(s.memory.some.total_us, 29_000);
        assert_eq!(s.memory.full.total_us, 27_000);
        assert_eq!(s.cpu.some.total_us, 30_000);
        assert_eq!(s.cpu.full, PressureLine::default());
    }

    /// Two CPUs, one stalled throughout and one running throughout: the
    /// machine's some is half the time (each CPU weighed by its non-idle
    /// time), where a union of the tasks' stalls would say all of it.
    #[test]
    fn cpus_are_weighed_by_their_non_idle_time() {
        let mut p = Psi::new(&[None], 2, true);
        let (mut a, mut b) = (task(0, 0), task(1, 0));
        let ms = 1_000_000;
        a.in_memstall = true;
        p.task_change(&mut a, 0, TSK_RUNNING | TSK_ONCPU, 0);
        p.task_change(&mut a, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0);
        p.task_change(&mut b, 0, TSK_RUNNING | TSK_ONCPU, 0);
        let s = p.show(0, 100 * ms);
        assert_eq!(s.memory.some.total_us, 50_000);
        assert_eq!(s.memory.full.total_us, 50_000);
    }

    /// The averaging work runs every period while the group is busy: a
    /// read 10 s into a full stall sees avg10 near 1 − e^(−1).
    #[test]
    fn the_worker_feeds_the_averages_while_stalled() {
        let mut p = Psi::new(&[None], 1, true);
        let mut a = task(0, 0);
        a.in_memstall = true;
        p.task_change(&mut a, 0, TSK_RUNNING | TSK_ONCPU, 0);
        p.task_change(&mut a, 0, TSK_MEMSTALL | TSK_MEMSTALL_RUNNING, 0);
        let s = p.show(0, 10_100_000_000);
        assert_eq!(s.memory.some.total_us, 10_100_000);
        let want = 100.0 * (1.0 - (-1.0f64).exp());
        assert!((s.memory.some.avg10 - want).abs() < 3.0, "{s:?}");
        assert!(s.memory.some.avg300 < 4.0);
    }

    /// Changes queued out of order (another CPU's slice ran first) are
    /// applied in time order.
    #[test]
    fn queued_changes_apply_in_time_order() {
        let mut p = Psi::new(&[None], 2, true);
        let (mut a, mut b) = (task(0, 0), task(1, 0));
        let ms = 1_000_000;
        // CPU 1's whole slice is simulated first, then CPU 0's.
        p.task_change(&mut b, 0, TSK_RUNNING | TSK_ONCPU, 0);
        p.task_change(&mut b, TSK_RUNNING | TSK_ONCPU, 0, 10 * ms);
        a.in_iowait = true;
        p.task_change(&mut a, 0, TSK_IOWAIT, ms);
        p.task_change(&mut a, TSK_IOWAIT, 0, 5 * ms);
        let s = p.show(0, 10 * ms);
        // CPU 0 non-idle 4 ms (1 jiffy), all io full (nothing runs
        // there); CPU 1 non-idle 10 ms (2 jiffies), no stall: 4 ms × 1/3.
        assert_eq!(s.io.some.total_us, 4_000 / 3);
        assert_eq!(s.io.full.total_us, 4_000 / 3);
    }
}

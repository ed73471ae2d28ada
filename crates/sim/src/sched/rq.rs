//! The run queue: the CPUs and the entities competing for them (tasks,
//! kswapd, khugepaged), CFS's picking, wakeup preemption and slice
//! lengths, and `Slice`, the running task's view of its slice, which is
//! all the workload player sees of the scheduler.

use crate::cost_model;
use crate::kernel::Kernel;
use crate::mm::khugepaged::KhugepagedNext;
use crate::mm::vmscan::KswapdNext;
use crate::sched::psi::{PsiOut, PsiWho};
use crate::SimError;

/// `last_on_cpu`'s mark for khugepaged (kswapd's is usize::MAX).
const KHUGEPAGED_ON_CPU: usize = usize::MAX - 1;

/// `sd->imbalance_pct` of a scheduling domain above the SMT level
/// (`sd_init`): how much busier than another group the forking CPU's may
/// be before `find_idlest_group` sends a new task away.
const FORK_IMBALANCE_PCT: u64 = 117;

/// Where and when `place` would start an entity, and whether it
/// preempts the entity holding that CPU.
pub(super) struct Placed {
    pub(super) start: u64,
    pub(super) cpu: usize,
    pub(super) preempts: bool,
}

/// The next slice `pick` chose.
pub(super) struct Pick {
    pub(super) entity: usize,
    pub(super) ready: u64,
    pub(super) start: u64,
    pub(super) cpu: usize,
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

/// What one slice of a task ended with.
pub enum SliceEnd {
    /// Used its slice, or yielded to a woken kswapd.
    Preempted,
    Sleep(u64),
    /// wait(2) for the task's children.
    Wait,
    Done,
    /// SIGKILL (an OOM victim): it exits now.
    Killed,
}

/// What the scheduler keeps of a task: its clock, state and CFS virtual
/// runtime (all at nice 0, so CPU time).
pub(super) struct Entity {
    pub(super) clock: u64,
    pub(super) state: TaskState,
    pub(super) vruntime: u64,
    /// The jiffy the task was last switched in.
    pub(super) switched_in: u64,
    /// The CPU it last ran on (`task_cpu`), where a wakeup looks first.
    pub(super) last_cpu: Option<usize>,
    pub(super) rq: OnRq,
}

/// An entity's place on the per-CPU run queues.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct OnRq {
    /// Runnable and queued on its `last_cpu`'s run queue: preempted, or
    /// a new task that `wake_up_new_task` placed. A task that sleeps
    /// leaves the queue; where it wakes is chosen when it does
    /// (`select_task_rq_fair`), and until then it is on none.
    pub(super) queued: bool,
    /// Its last slice was ended by mmsim's bookkeeping (the lockstep
    /// bound that keeps the CPUs' clocks together, a busy SMT sibling),
    /// not by the scheduler: in the kernel it is still running, so it
    /// keeps its CPU ahead of the tasks queued behind it.
    pub(super) holds_cpu: bool,
    /// When it was last switched in: CFS's slice (`sched_slice`) counts
    /// from there, across the pieces mmsim cuts it into.
    pub(super) exec_start: u64,
}

impl Entity {
    pub(super) fn new(clock: u64, vruntime: u64) -> Self {
        Entity {
            clock,
            state: TaskState::Ready,
            vruntime,
            switched_in: u64::MAX,
            last_cpu: None,
            rq: OnRq::default(),
        }
    }

    /// When the task will want a CPU (None: it will not by itself).
    pub(super) fn ready(&self) -> Option<u64> {
        match self.state {
            TaskState::Ready => Some(self.clock),
            TaskState::Sleeping(until) => Some(until),
            TaskState::Waiting | TaskState::Done => None,
        }
    }

    /// Its entries in `RunQueue::ready` and `ready_vruntime`.
    fn ready_entries(&self) -> (u64, u64) {
        let vruntime = match self.state {
            TaskState::Ready => self.vruntime,
            _ => u64::MAX,
        };
        (self.ready().unwrap_or(u64::MAX), vruntime)
    }
}

/// The CPUs and the entities competing for them.
pub(super) struct RunQueue {
    /// The tasks, in the player's order; kswapd and khugepaged follow them
    /// as entities `tasks.len()` and `tasks.len() + 1`.
    pub(super) tasks: Vec<Entity>,
    /// Each task's `ready()` (u64::MAX: not runnable, or asleep for ever), kept beside the
    /// tasks so the per-slice scans (`pick`, `slice_end`) read 8 bytes a
    /// task: with seed 003's 96 tasks they were a quarter of its time.
    /// Every change of a task's state or clock goes through `sync`.
    pub(super) ready: Vec<u64>,
    /// Each task's vruntime while it is `Ready` (u64::MAX otherwise), for
    /// `update_min_vruntime`'s scan; kept by `sync` too. (A vruntime of
    /// u64::MAX cannot occur: it is CPU time run.)
    pub(super) ready_vruntime: Vec<u64>,
    pub(super) cpu_free_at: Vec<u64>,
    /// The latest end of the slice being run (`Scheduler::step`'s cap;
    /// u64::MAX but in a guest).
    pub(super) cap: u64,
    /// The entity each CPU ran last (kswapd: usize::MAX; None: idle), to
    /// tell a context switch from a task running on.
    pub(super) last_on_cpu: Vec<Option<usize>>,
    pub(super) kswapd_ready: Option<u64>,
    pub(super) khugepaged_ready: Option<u64>,
    /// kswapd's CFS virtual runtime, and the run queue's min_vruntime.
    pub(super) kswapd_vruntime: u64,
    pub(super) min_vruntime: u64,
    /// The running entity, its CPU and the start of its slice.
    pub(super) cur_entity: usize,
    pub(super) cur_cpu: usize,
    pub(super) cur_start: u64,
    /// Sockets, cores and SMT threads of the CPUs.
    pub(super) topology: mmsim_spec::Topology,
    /// The CPU kswapd and khugepaged last ran on.
    pub(super) kthread_cpu: [Option<usize>; 2],
    /// Their places on the run queues.
    pub(super) kthread_rq: [OnRq; 2],
    /// The CPU that woke each (its waker's: `wake_affine`'s target).
    pub(super) kthread_waker: [Option<usize>; 2],
    /// The tasks queued on each CPU (kswapd and khugepaged are in
    /// `kthread_rq`), and each task's CPU (u32::MAX: none), kept together
    /// by `set_queue`: which CPUs idle is asked at every pick.
    pub(super) queued_on: Vec<Vec<u32>>,
    pub(super) queued_cpu: Vec<u32>,
    /// Each CPU's periodic load balancing (`rebalance_domains`), and the
    /// earliest of their next times (u64::MAX: none).
    pub(super) balance: Vec<Balance>,
    pub(super) balance_next: u64,
}

/// One CPU's periodic load balancing in its LLC's scheduling domain.
#[derive(Debug, Clone, Copy)]
pub(super) struct Balance {
    /// When it next runs (`sd->last_balance + interval`).
    pub(super) next: u64,
    /// `sd->balance_interval`, in ms: min_interval (the domain's weight)
    /// after an imbalance, doubled up to max_interval when balanced.
    pub(super) interval_ms: u64,
    /// `sd->nr_balance_failed`.
    pub(super) failed: u32,
}

impl Balance {
    /// Every CPU's balancing, first due one busy interval in (none on one
    /// CPU). The domain is the CPU's LLC: `sd_init` sets min_interval and
    /// balance_interval to its weight in ms, busy_factor 16.
    pub(super) fn domain(topology: mmsim_spec::Topology, cpus: usize) -> Vec<Balance> {
        if cpus < 2 {
            return Vec::new();
        }
        let weight = (cpus / topology.sockets.max(1) as usize).max(1) as u64;
        vec![
            Balance {
                next: weight * 16 * 1_000_000,
                interval_ms: weight,
                failed: 0,
            };
            cpus
        ]
    }
}

/// The running task's slice, as the player sees it: when it ends, and
/// the scheduler events (a kswapd or khugepaged wakeup, a fork) that may
/// end it sooner.
pub struct Slice<'a> {
    pub(super) rq: &'a mut RunQueue,
    pub(super) me: usize,
    pub(super) end: u64,
    /// When CFS would preempt the task (`end` may come sooner: the CPUs'
    /// lockstep, a busy SMT sibling).
    pub(super) deadline: u64,
    /// It yielded its CPU to a woken kswapd (`check_preempt_wakeup`).
    pub(super) yielded: bool,
}

impl Slice<'_> {
    /// When the slice ends unless something ends it sooner.
    #[inline]
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Back in user space after an access: let a woken kswapd in, end
    /// the slice when it is used up.
    #[inline]
    pub fn check(&mut self, k: &mut Kernel) -> Option<SliceEnd> {
        if let Some(w) = k.kswapd_wake_at.take() {
            self.rq.place_woken_kswapd(w);
            if self.rq.wakeup_preempts(self.me, k.now()) {
                self.yielded = true;
                return Some(SliceEnd::Preempted);
            }
            // kswapd waits for this CPU, or runs beside us on an idle one.
            self.recompute();
        }
        if k.khugepaged.wakeup_pending() {
            self.wake_khugepaged(k);
        }
        // A guest's access its host must handle stops the vCPU there
        // (kernel.rs `FrameLog`): the slice ends for the VMM to handle it.
        let exit = || k.frame_log.as_ref().is_some_and(|l| l.exit);
        (k.now() >= self.end || exit()).then_some(SliceEnd::Preempted)
    }

    /// A registration woke khugepaged: at nice 19 it does not preempt;
    /// it runs beside this task on an idle CPU, or waits its turn.
    pub fn wake_khugepaged(&mut self, k: &mut Kernel) -> bool {
        let Some(w) = k.khugepaged.take_wakeup() else {
            return false;
        };
        self.rq.wake_khugepaged(w);
        self.recompute();
        true
    }

    /// The slice's end and CFS deadline after a wakeup or fork added a
    /// competitor.
    fn recompute(&mut self) {
        let (end, deadline) = self.rq.slice_end_now(self.me);
        self.end = self.end.min(end);
        self.deadline = self.deadline.min(deadline);
    }

    /// Whether the task, preempted now, still holds its CPU: its slice
    /// ended before CFS's, and not for kswapd.
    pub(super) fn holds_cpu(&self) -> bool {
        !self.yielded && self.end < self.deadline
    }

    /// A task forked now: runnable at once, at the queue's min_vruntime
    /// (place_entity), queued where `wake_up_new_task` puts it
    /// (`fork_cpu`): on an idle CPU it runs beside its parent at once (the
    /// slice ends where the two would part by more than the scheduler's
    /// quantum); on a busy one it waits its turn. Its number is the next
    /// after the existing tasks' (kswapd's and khugepaged's move up one).
    /// Task `i`, waiting for an event (`SliceEnd::Wait`), is woken at
    /// `now` (a VMM's I/O thread, given work).
    pub fn wake(&mut self, i: usize, now: u64) {
        self.rq.children_exited(i, now);
        self.recompute();
    }

    pub fn fork(&mut self, now: u64) {
        let vruntime = self.rq.min_vruntime;
        let cpu = self.rq.fork_cpu(now);
        let n = self.rq.tasks.len();
        self.rq.tasks.push(Entity::new(now, vruntime));
        self.rq.ready.push(now);
        self.rq.ready_vruntime.push(vruntime);
        self.rq.queued_cpu.push(u32::MAX);
        self.rq.set_queue(n, Some(cpu));
        self.recompute();
    }
}

impl RunQueue {
    /// Task `i`'s entry in `ready`, after a change of its state or clock.
    #[inline]
    pub(super) fn sync(&mut self, i: usize) {
        (self.ready[i], self.ready_vruntime[i]) = self.tasks[i].ready_entries();
    }

    /// Task `i` has no more children: out of wait(2) if it was in it.
    pub(super) fn children_exited(&mut self, i: usize, now: u64) {
        let t = &mut self.tasks[i];
        if t.state == TaskState::Waiting {
            t.state = TaskState::Ready;
            t.clock = t.clock.max(now);
            self.sync(i);
        }
    }

    /// khugepaged's entity number: after the tasks and kswapd.
    pub(super) fn khugepaged_entity(&self) -> usize {
        self.tasks.len() + 1
    }

    /// khugepaged's slice: scans until it sleeps or the slice ends.
    pub(super) fn run_khugepaged(&mut self, k: &mut Kernel, start: u64) -> Result<u64, SimError> {
        k.cur_task = None;
        k.enter_lazy_tlb(self.cur_cpu);
        let me = self.khugepaged_entity();
        let (slice_end, cfs) = self.slice_end(me, self.cur_cpu, start);
        let (ready, how) = loop {
            match k.khugepaged_step() {
                KhugepagedNext::Run if k.now() < slice_end => continue,
                KhugepagedNext::Run => break (Some(k.now()), PsiOut::Preempted),
                KhugepagedNext::SleepUntil(t) => break (Some(t), PsiOut::Sleep),
                KhugepagedNext::Sleep => break (None, PsiOut::Sleep),
            }
        };
        self.khugepaged_ready = ready;
        let queued = how == PsiOut::Preempted;
        self.end_slice(me, queued, slice_end < cfs);
        k.psi_switch_out(PsiWho::Kthread(1), k.now(), how);
        self.last_on_cpu[self.cur_cpu] = Some(KHUGEPAGED_ON_CPU);
        if let Some(why) = k.unmodelled.take() {
            return Err(SimError::Unmodelled(why));
        }
        Ok(k.now())
    }

    /// kswapd keeps its CPU for its slice, pass after pass, until it naps
    /// or sleeps.
    pub(super) fn run_kswapd(&mut self, k: &mut Kernel, start: u64) -> Result<u64, SimError> {
        k.cur_task = None;
        k.enter_lazy_tlb(self.cur_cpu);
        let me = self.tasks.len();
        let (slice_end, cfs) = self.slice_end(me, self.cur_cpu, start);
        let (ready, how) = loop {
            match k.kswapd_step() {
                KswapdNext::Run if k.now() < slice_end => continue,
                KswapdNext::Run => break (Some(k.now()), PsiOut::Preempted),
                KswapdNext::NapUntil(t) => break (Some(t), PsiOut::Sleep),
                KswapdNext::Sleep => break (None, PsiOut::Sleep),
            }
        };
        self.kswapd_ready = ready;
        let queued = how == PsiOut::Preempted;
        self.end_slice(me, queued, slice_end < cfs);
        k.psi_switch_out(PsiWho::Kthread(0), k.now(), how);
        self.last_on_cpu[self.cur_cpu] = Some(usize::MAX);
        if let Some(why) = k.unmodelled.take() {
            return Err(SimError::Unmodelled(why));
        }
        self.kswapd_vruntime += k.now() - start;
        Ok(k.now())
    }

    /// The next slice: the entity that can start earliest, and the CPU it
    /// starts on (`place`); among equal starts the one that holds its CPU,
    /// then the one ready earliest, then the lowest entity number (tasks
    /// in spec order, kswapd, khugepaged). None when all tasks are done
    /// (the kernel threads' remaining work does not outlive the workload).
    /// With one CPU every start is max(ready, the CPU's free time) and
    /// nothing holds it past a slice, so this is the earliest ready.
    pub(super) fn pick(&mut self) -> Option<Pick> {
        debug_assert!(
            (0..self.tasks.len())
                .all(|i| self.tasks[i].ready_entries() == (self.ready[i], self.ready_vruntime[i])),
            "rq: a task's state, clock or vruntime changed without sync"
        );
        let (mut best, any_task) = self.pick_from_queues();
        // u64::MAX is also a sleep's end that never comes (a task asleep
        // that long is still picked, last); the kernel threads' work does
        // not outlive the tasks.
        let forever = (!any_task)
            .then(|| self.tasks.iter().position(|t| t.ready() == Some(u64::MAX)))
            .flatten();
        if !any_task && forever.is_none() {
            return None;
        }
        // Periodic load balancing due before that start runs first; it
        // may move a waiting entity, so the pick is made again.
        while let Some(((start, ..), _)) = best {
            if self.balance_next > start {
                break;
            }
            let Some(c) = self.balance_due(start) else {
                break;
            };
            if self.load_balance(c) {
                best = self.pick_from_queues().0;
            }
        }
        let ((start, _, ready, entity), cpu) = match (best, forever) {
            (Some(b), _) => b,
            (None, Some(i)) => {
                let p = self.place(i, u64::MAX);
                ((p.start, true, u64::MAX, i), p.cpu)
            }
            (None, None) => return None,
        };
        Some(Pick {
            entity,
            ready,
            start,
            cpu,
        })
    }

    /// The earliest start of the entities that want a CPU (see `pick`).
    #[allow(clippy::type_complexity)]
    fn pick_from_queues(&self) -> (Option<((u64, bool, u64, usize), usize)>, bool) {
        let n = self.tasks.len();
        let kthreads = [(n, self.kswapd_ready), (n + 1, self.khugepaged_ready)];
        // The earliest ready first (a tight scan: with seed 003's 96 tasks
        // this runs at every slice): its start bounds which others can
        // start before it.
        let (mut e0, mut r0, mut ties) = (usize::MAX, u64::MAX, 0);
        for (i, &r) in self.ready.iter().enumerate() {
            if r < r0 {
                (e0, r0, ties) = (i, r, 0);
            } else if r == r0 {
                ties += 1;
            }
        }
        let any_task = r0 != u64::MAX;
        for (e, r) in kthreads {
            match r {
                Some(r) if r < r0 => (e0, r0, ties) = (e, r, 0),
                Some(r) if r == r0 => ties += 1,
                _ => {}
            }
        }
        if e0 == usize::MAX || r0 == u64::MAX {
            return (None, any_task);
        }
        let key_of = |e: usize, r: u64| {
            let p = self.place(e, r);
            (
                (p.start, !(self.on_rq(e).holds_cpu || p.preempts), r, e),
                p.cpu,
            )
        };
        let mut best = key_of(e0, r0);
        // Nothing else can start at its ready time or before.
        if best.0 .0 == r0 && ties == 0 {
            return (Some(best), any_task);
        }
        let consider = |e: usize, r: u64, best: &mut ((u64, bool, u64, usize), usize)| {
            let ((s, not_held, ..), _) = *best;
            // A start is never before the ready time; at an equal start
            // only one that holds its CPU or preempts comes before one
            // that does not (the earliest came first).
            if e == e0 || r > s {
                return;
            }
            let st = self.on_rq(e);
            if r == s && (!not_held || (st.queued && !st.holds_cpu)) {
                return;
            }
            let k = key_of(e, r);
            if k.0 < best.0 {
                *best = k;
            }
        };
        for (i, &r) in self.ready.iter().enumerate() {
            if r <= best.0 .0 {
                consider(i, r, &mut best);
            }
        }
        for (e, r) in kthreads {
            if let Some(r) = r {
                consider(e, r, &mut best);
            }
        }
        (Some(best), any_task)
    }

    /// The CPU whose periodic balancing is due by `t`, the earliest (the
    /// lowest CPU among equals); None on one CPU.
    fn balance_due(&self, t: u64) -> Option<usize> {
        (0..self.balance.len())
            .filter(|&c| self.balance[c].next <= t)
            .min_by_key(|&c| (self.balance[c].next, c))
    }

    /// The number of runnable entities on each CPU at `t`, the running
    /// one included.
    fn nr_running(&self, t: u64) -> Vec<u64> {
        let mut nr: Vec<u64> = self.cpu_free_at.iter().map(|&f| (f > t) as u64).collect();
        for e in 0..self.tasks.len() + 2 {
            if self.on_rq(e).queued && self.ready_time(e).is_some_and(|r| r <= t) {
                if let Some(c) = self.last_cpu_of(e) {
                    nr[c] += 1;
                }
            }
        }
        nr
    }

    /// `load_balance` run by busy CPU `c` at its balancing time: within
    /// its LLC, the CPU with the most runnable entities gives it one that
    /// waits there (`detach_tasks`: the one waiting longest; never the
    /// running one) when `calculate_imbalance` allows: the local CPU below
    /// the domain's average, and a task's load (halved for each failed
    /// attempt, `shr_bound`) no more than min(busiest − average, average
    /// − local). A failed attempt counts in `nr_balance_failed`; the
    /// interval is min_interval after an imbalance and doubles to
    /// max_interval when balanced. An idle CPU does not wait for this: it
    /// pulls at once (`newidle_balance`, in `place`). True if it moved one.
    /// Simplifications: loads are runnable counts (every task at nice 0,
    /// long-running, so PELT's averages stand in the same ratio); one
    /// domain, the LLC (SMT pairs and cross-socket balancing are not
    /// modelled apart); `task_hot`'s cache-hot refusal is not modelled.
    fn load_balance(&mut self, c: usize) -> bool {
        let t = self.balance[c].next;
        let topo = self.topology;
        let llc: Vec<usize> = (0..self.cpu_free_at.len())
            .filter(|&x| topo.socket_of(x) == topo.socket_of(c))
            .collect();
        let weight = llc.len() as u64;
        let busy_factor = 16;
        let nr = self.nr_running(t);
        let local = nr[c];
        let mut moved = false;
        let mut imbalanced = false;
        if local > 0 {
            let loads: Vec<(usize, u64)> = llc.iter().map(|&x| (x, nr[x])).collect();
            let total: u64 = loads.iter().map(|&(_, l)| l).sum();
            let (busiest, most) = loads
                .iter()
                .copied()
                .filter(|&(x, _)| x != c)
                .max_by_key(|&(x, l)| (l, std::cmp::Reverse(x)))
                .unwrap_or((c, 0));
            // In units of 1/weight of a task: local·w against the total.
            if most >= 2 && most > local && local * weight < total {
                imbalanced = true;
                let imbalance = (most * weight - total).min(total - local * weight);
                let load = weight >> self.balance[c].failed.min(63);
                if load <= imbalance {
                    moved = self.migrate_one(busiest, c, t);
                }
            }
        }
        let b = &mut self.balance[c];
        if moved {
            b.failed = 0;
        } else if imbalanced {
            b.failed += 1;
        }
        b.interval_ms = match imbalanced {
            true => weight,
            false => (b.interval_ms * 2).min(2 * weight),
        };
        let max_ms = self.cpu_free_at.len() as u64 * 100;
        let ms = match local > 0 {
            true => (b.interval_ms * busy_factor).min(max_ms),
            false => b.interval_ms,
        };
        b.next = t + ms * 1_000_000;
        self.balance_next = self
            .balance
            .iter()
            .map(|b| b.next)
            .min()
            .unwrap_or(u64::MAX);
        moved
    }

    /// Moves the entity that has waited longest on CPU `from` (queued,
    /// not holding it) to `to`'s queue.
    fn migrate_one(&mut self, from: usize, to: usize, t: u64) -> bool {
        let waiting = (0..self.tasks.len() + 2)
            .filter(|&e| {
                let st = self.on_rq(e);
                st.queued && !st.holds_cpu && self.last_cpu_of(e) == Some(from)
            })
            .filter_map(|e| Some((self.ready_time(e).filter(|&r| r <= t)?, e)))
            .min();
        let Some((_, e)) = waiting else {
            return false;
        };
        match e.checked_sub(self.tasks.len()) {
            None => self.set_queue(e, Some(to)),
            Some(k) => self.kthread_cpu[k] = Some(to),
        }
        true
    }

    /// Task `i` is queued on `cpu`, which becomes its `last_cpu` (None: on
    /// no run queue).
    pub(super) fn set_queue(&mut self, i: usize, cpu: Option<usize>) {
        let old = self.queued_cpu[i];
        let new = cpu.map_or(u32::MAX, |c| c as u32);
        if old != new {
            if let Some(l) = self.queued_on.get_mut(old as usize) {
                if let Some(p) = l.iter().position(|&x| x as usize == i) {
                    l.swap_remove(p);
                }
            }
            if let Some(l) = self.queued_on.get_mut(new as usize) {
                l.push(i as u32);
            }
            self.queued_cpu[i] = new;
        }
        let t = &mut self.tasks[i];
        t.rq.queued = cpu.is_some();
        if cpu.is_some() {
            t.last_cpu = cpu;
        }
    }

    /// CPU `c` is idle at `t` for entity `e`: free, and no other entity
    /// queued there is ready by then.
    fn idle_at(&self, c: usize, t: u64, e: usize) -> bool {
        if self.cpu_free_at[c] > t {
            return false;
        }
        let ready = &self.ready;
        if self.queued_on[c]
            .iter()
            .any(|&i| i as usize != e && ready[i as usize] <= t)
        {
            return false;
        }
        let n = self.tasks.len();
        let kthreads = [self.kswapd_ready, self.khugepaged_ready];
        !(0..2).any(|k| {
            n + k != e
                && self.kthread_rq[k].queued
                && self.kthread_cpu[k] == Some(c)
                && kthreads[k].is_some_and(|r| r <= t)
        })
    }

    /// When and where entity `e`, ready at `r`, can start. A queued entity
    /// waits for its CPU; one that holds its CPU runs on there. A waking
    /// one is placed by `select_idle`, else queued on its `wake_target`,
    /// whose running entity it may preempt (`wakeup_preempts_on`). Either
    /// way, another CPU that goes idle before then pulls a waiting entity
    /// (`newidle_balance`); busy CPUs balance in `load_balance`.
    fn place(&self, e: usize, r: u64) -> Placed {
        let st = self.on_rq(e);
        let (home, preempts) = match st.queued {
            true => (self.last_cpu_of(e).unwrap_or(0), false),
            false => match self.select_idle(e, r) {
                Some(c) => {
                    return Placed {
                        start: r,
                        cpu: c,
                        preempts: false,
                    }
                }
                None => {
                    let c = self.wake_target(e);
                    (c, self.wakeup_preempts_on(c, e))
                }
            },
        };
        let mut best = Placed {
            start: r.max(self.cpu_free_at[home]),
            cpu: home,
            preempts,
        };
        // Nothing starts before it is ready.
        if st.holds_cpu || best.start == r || self.cpu_free_at.len() == 1 {
            return best;
        }
        for c in 0..self.cpu_free_at.len() {
            let t = r.max(self.cpu_free_at[c]);
            if c != home && t < best.start && self.idle_at(c, t, e) {
                best = Placed {
                    start: t,
                    cpu: c,
                    preempts: false,
                };
            }
        }
        best
    }

    /// The entity running on CPU `c` that holds it across mmsim's slice
    /// pieces, if any.
    fn holder_of(&self, c: usize) -> Option<usize> {
        let n = self.tasks.len();
        let h = match self.last_on_cpu[c]? {
            usize::MAX => n,
            KHUGEPAGED_ON_CPU => n + 1,
            i => i,
        };
        (self.on_rq(h).holds_cpu && self.last_cpu_of(h) == Some(c)).then_some(h)
    }

    /// `check_preempt_wakeup` on CPU `c` for entity `e` waking onto it:
    /// the running entity gives way if its vruntime is ahead of the
    /// wakee's, placed as a sleeper (`place_entity`: at most half a
    /// latency period behind min_vruntime), by more than the wakeup
    /// granularity. khugepaged (nice 19) always gives way to a nice-0
    /// wakee and never preempts one. With one CPU a slice is never held
    /// across pieces, so nothing is preempted here. Simplification: there
    /// a task woken while another runs waits for the running slice's end
    /// (only kswapd's wakeup preempts, in `Slice::check`).
    fn wakeup_preempts_on(&self, c: usize, e: usize) -> bool {
        let Some(h) = self.holder_of(c) else {
            return false;
        };
        let n = self.tasks.len();
        let factor = self.sched_factor();
        let half_latency = cost_model::SCHED_LATENCY_NS * factor / 2;
        let vruntime = |x: usize| match x.checked_sub(n) {
            None => Some(self.tasks[x].vruntime),
            Some(0) => Some(self.kswapd_vruntime),
            Some(_) => None,
        };
        match (vruntime(h), vruntime(e)) {
            (None, Some(_)) => true,
            (_, None) => false,
            (Some(curr), Some(wakee)) => {
                let placed = wakee.max(self.min_vruntime.saturating_sub(half_latency));
                curr > placed + cost_model::SCHED_WAKEUP_GRANULARITY_NS * factor
            }
        }
    }

    /// Where a waking entity is queued when no CPU is idle for it:
    /// `select_idle_sibling`'s target. That is its previous CPU for a
    /// task (woken by a timer there, or by its children: simplification,
    /// `wake_affine`'s pull to a sync waker's CPU is not modelled) and its
    /// waker's CPU for kswapd and khugepaged (`wake_affine` with equal
    /// loads); an entity that never ran waits for the CPU free first.
    fn wake_target(&self, e: usize) -> usize {
        let n = self.tasks.len();
        let target = match e.checked_sub(n) {
            None => self.tasks[e].last_cpu,
            Some(k) => self.kthread_waker[k].or(self.kthread_cpu[k]),
        };
        target.unwrap_or_else(|| {
            (0..self.cpu_free_at.len())
                .min_by_key(|&c| (self.cpu_free_at[c], c))
                .expect("at least one CPU")
        })
    }

    /// The entity's place on the run queues.
    pub(super) fn on_rq(&self, e: usize) -> &OnRq {
        match e.checked_sub(self.tasks.len()) {
            None => &self.tasks[e].rq,
            Some(k) => &self.kthread_rq[k],
        }
    }

    fn on_rq_mut(&mut self, e: usize) -> &mut OnRq {
        match e.checked_sub(self.tasks.len()) {
            None => &mut self.tasks[e].rq,
            Some(k) => &mut self.kthread_rq[k],
        }
    }

    /// The picked entity starts its slice at `start` on `cpu`; whatever
    /// held the CPU before was preempted.
    pub(super) fn start_slice(&mut self, e: usize, cpu: usize, start: u64) {
        if let Some(h) = self.holder_of(cpu).filter(|&h| h != e) {
            self.on_rq_mut(h).holds_cpu = false;
        }
        match e.checked_sub(self.tasks.len()) {
            None => self.set_queue(e, Some(cpu)),
            Some(k) => {
                self.kthread_cpu[k] = Some(cpu);
                self.kthread_rq[k].queued = true;
            }
        }
        let st = self.on_rq_mut(e);
        if !st.holds_cpu {
            st.exec_start = start;
        }
        st.holds_cpu = false;
    }

    /// Its slice ended: still runnable (`queued`), and if so whether the
    /// scheduler would have let it run on (`holds_cpu`).
    pub(super) fn end_slice(&mut self, e: usize, queued: bool, holds_cpu: bool) {
        match e.checked_sub(self.tasks.len()) {
            None if !queued => self.set_queue(e, None),
            None => {}
            Some(k) => self.kthread_rq[k].queued = queued,
        }
        self.on_rq_mut(e).holds_cpu = queued && holds_cpu;
    }

    /// khugepaged woke at `at`, from the running entity's CPU.
    pub(super) fn wake_khugepaged(&mut self, at: u64) {
        if !self.kthread_rq[1].queued {
            self.kthread_waker[1] = Some(self.cur_cpu);
        }
        self.khugepaged_ready = Some(at);
    }

    /// `place_entity` for a woken kswapd: a sleeper's vruntime is pulled up
    /// to at most half a latency period behind min_vruntime.
    pub(super) fn place_woken_kswapd(&mut self, at: u64) {
        if !self.kthread_rq[0].queued {
            self.kthread_waker[0] = Some(self.cur_cpu);
        }
        let half_latency = cost_model::SCHED_LATENCY_NS * self.sched_factor() / 2;
        self.kswapd_vruntime = self
            .kswapd_vruntime
            .max(self.min_vruntime.saturating_sub(half_latency));
        self.kswapd_ready = Some(at);
    }

    /// `check_preempt_wakeup`: the woken kswapd takes the waker's CPU at
    /// once only if the waker has run more than the wakeup granularity
    /// beyond it, and no other CPU is idle for it.
    pub(super) fn wakeup_preempts(&self, i: usize, now: u64) -> bool {
        let kswapd = self.tasks.len();
        let idle_elsewhere =
            (0..self.cpu_free_at.len()).any(|c| c != self.cur_cpu && self.idle_at(c, now, kswapd));
        if idle_elsewhere {
            return false;
        }
        let curr = self.tasks[i].vruntime + now.saturating_sub(self.cur_start);
        curr > self.kswapd_vruntime + cost_model::SCHED_WAKEUP_GRANULARITY_NS * self.sched_factor()
    }

    /// 1 + log2(cpus): the kernel's default scaling of its CFS tunables.
    pub(super) fn sched_factor(&self) -> u64 {
        let ncpu = self.cpu_free_at.len() as u64;
        1 + (63 - ncpu.leading_zeros() as u64)
    }

    /// min_vruntime only moves forward, to the smallest vruntime of the
    /// runnable entities.
    pub(super) fn update_min_vruntime(&mut self) {
        let tasks = self
            .ready_vruntime
            .iter()
            .copied()
            .min()
            .unwrap_or(u64::MAX);
        let tasks = (tasks != u64::MAX).then_some(tasks);
        let kswapd = self.kswapd_ready.map(|_| self.kswapd_vruntime);
        if let Some(m) = tasks.into_iter().chain(kswapd).min() {
            self.min_vruntime = self.min_vruntime.max(m);
        }
    }

    /// `slice_end` of the running entity, recomputed for what woke since
    /// its slice started.
    pub(super) fn slice_end_now(&self, me: usize) -> (u64, u64) {
        self.slice_end(me, self.cur_cpu, self.cur_start)
    }

    /// When an entity that starts at `start` on `cpu` must give way, and
    /// when CFS would preempt it (its slice, `sched_slice`, counted from
    /// its switch-in). An entity ready to run on another CPU runs beside
    /// it from when that CPU is free (at once if it idles), so the two
    /// stay in step to within `QUANTUM_NS` from then on: what one CPU does
    /// never runs ahead of what the other does to the same memory (an end
    /// mmsim's bookkeeping sets: the entity holds its CPU across it).
    /// Entities queued on one CPU share it in CFS slices: sched_latency
    /// over their number, at least min_granularity (both scaled by
    /// 1 + log2(cpus), as the kernel's default tunable scaling does).
    pub(super) fn slice_end(&self, me: usize, cpu: usize, start: u64) -> (u64, u64) {
        let factor = self.sched_factor();
        let latency = cost_model::SCHED_LATENCY_NS * factor;
        let min_gran = cost_model::SCHED_MIN_GRANULARITY_NS * factor;
        let mut end = u64::MAX;
        let mut competing: u64 = 1;
        // Another CPU is free at time t iff the earliest-free other CPU is.
        let other_free = (0..self.cpu_free_at.len())
            .filter(|&c| c != cpu)
            .map(|c| self.cpu_free_at[c])
            .min()
            .unwrap_or(u64::MAX);
        // Each other ready entity may start on another CPU when one frees
        // up (at once if one is idle), and from then on the two run side
        // by side: the earliest of them bounds the slice. Those ready by
        // `start` and queued here compete for this CPU unless another CPU
        // idles and pulls them.
        // Tight scans of the flat arrays: they run at every slice. The
        // earliest first (a plain minimum, `u64::MAX` for the not ready);
        // only if it is by `start` can any be waiting here.
        let others = |v: &[u64]| v.iter().copied().min().unwrap_or(u64::MAX);
        let mut first = match me < self.ready.len() {
            true => others(&self.ready[..me]).min(others(&self.ready[me + 1..])),
            false => others(&self.ready),
        };
        let mut waiting = 0;
        if first <= start {
            for (i, (&r, &q)) in self.ready.iter().zip(&self.queued_cpu).enumerate() {
                if r > start || i == me {
                    continue;
                }
                let home = if q != u32::MAX {
                    q as usize
                } else {
                    self.wake_target(i)
                };
                waiting += (home == cpu) as u64;
            }
        }
        let n = self.tasks.len();
        let kthreads = [(n, self.kswapd_ready), (n + 1, self.khugepaged_ready)];
        for (e, r) in kthreads {
            if let Some(r) = r.filter(|_| e != me) {
                first = first.min(r);
                waiting += (r <= start && self.home(e) == cpu) as u64;
            }
        }
        if first != u64::MAX {
            let beside = first.max(start).max(other_free);
            end = beside.saturating_add(cost_model::QUANTUM_NS);
        }
        let other_idle =
            || (0..self.cpu_free_at.len()).any(|c| c != cpu && self.idle_at(c, start, me));
        if waiting > 0 && !other_idle() {
            competing += waiting;
        }
        // A slice beside a busy SMT sibling runs slower; it ends where the
        // sibling's known work does, so the next one sees if it idles.
        if let Some(busy) = self.sibling_busy_until(cpu, start) {
            end = end.min(busy.max(start.saturating_add(cost_model::QUANTUM_NS)));
        }
        let exec_start = self.on_rq(me).exec_start;
        let cfs = exec_start.saturating_add((latency / competing).max(min_gran));
        // A guest's slice ends by its VMM's host slice (vm.rs).
        (end.min(cfs).min(self.cap.max(start.saturating_add(1))), cfs)
    }

    /// The CPU whose queue entity `e` is on, or will join when it wakes
    /// with no CPU idle.
    fn home(&self, e: usize) -> usize {
        match self.queued_cpu.get(e) {
            Some(&c) if c != u32::MAX => c as usize,
            Some(_) => self.wake_target(e),
            None => match self.on_rq(e).queued {
                true => self.last_cpu_of(e).unwrap_or(0),
                false => self.wake_target(e),
            },
        }
    }

    /// `select_task_rq_fair` for an entity waking at `ready`, when a CPU is
    /// idle for it then: its previous CPU (cache-hot;
    /// `select_idle_sibling`'s first choice), else an idle CPU whose whole
    /// core idles, in the previous CPU's socket first (the LLC the search
    /// covers), then any idle CPU there, then elsewhere (idle balancing
    /// pulls it at once). Ties go to the lower CPU. A task that never ran
    /// starts on the idlest (`find_idlest_cpu`: an idle core first).
    /// None: no CPU is idle (`wake_target` queues it).
    /// Simplification: the wakee is never pulled to its waker's CPU
    /// (`wake_affine`); with an idle CPU in the LLC the kernel picks one
    /// too, and mmsim's wakers (kswapd, children) have no cache to share.
    pub(super) fn select_idle(&self, entity: usize, ready: u64) -> Option<usize> {
        let idle = |c: usize| self.idle_at(c, ready, entity);
        let prev = self.last_cpu_of(entity);
        if let Some(p) = prev.filter(|&p| idle(p)) {
            return Some(p);
        }
        let topo = &self.topology;
        let core_idle = |c: usize| idle(c) && topo.siblings(c).all(idle);
        let socket = prev.map(|p| topo.socket_of(p));
        let in_llc = |c: usize| socket.is_none_or(|s| topo.socket_of(c) == s);
        let ncpu = self.cpu_free_at.len();
        (0..ncpu)
            .find(|&c| in_llc(c) && core_idle(c))
            .or_else(|| (0..ncpu).find(|&c| in_llc(c) && idle(c)))
            .or_else(|| (0..ncpu).find(|&c| core_idle(c)))
            .or_else(|| (0..ncpu).find(|&c| idle(c)))
    }

    /// `wake_up_new_task`'s CPU for a task forked at `now` by the running
    /// entity: `find_idlest_cpu`. An idle CPU if there is one (an idle
    /// core first); else the least loaded, unless the forking CPU is
    /// within the domain's imbalance_pct (117 %) of it, where the child
    /// stays (`find_idlest_group` returns NULL for the local group).
    /// Load is the number of runnable tasks, the running one included;
    /// the kernel compares PELT averages, which a task's runnable time
    /// drives to the same ratio.
    pub(super) fn fork_cpu(&self, now: u64) -> usize {
        let ncpu = self.cpu_free_at.len();
        let local = self.cur_cpu;
        if ncpu == 1 {
            return local;
        }
        // The forking entity is queued on its CPU, ready since its slice
        // began, so `nr_running` counts it there.
        let nr = self.nr_running(now);
        let idle = |c: usize| c != local && nr[c] == 0;
        let topo = &self.topology;
        let core_idle = |c: usize| idle(c) && topo.siblings(c).all(|s| s == local || idle(s));
        if let Some(c) = (0..ncpu)
            .find(|&c| core_idle(c))
            .or_else(|| (0..ncpu).find(|&c| idle(c)))
        {
            return c;
        }
        let (idlest, least) = (0..ncpu)
            .filter(|&c| c != local)
            .map(|c| (c, nr[c]))
            .min_by_key(|&(c, l)| (l, c))
            .expect("two CPUs at least");
        if 100 * nr[local] <= FORK_IMBALANCE_PCT * least {
            local
        } else {
            idlest
        }
    }

    /// When entity `e` will want a CPU.
    fn ready_time(&self, e: usize) -> Option<u64> {
        match e.checked_sub(self.tasks.len()) {
            None => (self.ready[e] != u64::MAX).then_some(self.ready[e]),
            Some(0) => self.kswapd_ready,
            Some(_) => self.khugepaged_ready,
        }
    }

    /// The CPU an entity last ran on.
    fn last_cpu_of(&self, entity: usize) -> Option<usize> {
        match entity.checked_sub(self.tasks.len()) {
            None => self.tasks[entity].last_cpu,
            Some(k) => self.kthread_cpu[k],
        }
    }

    /// The other CPUs of `cpu`'s socket busy at `start` (membw.rs): as
    /// `sibling_busy_until` finds a busy sibling.
    pub(super) fn busy_in_socket(
        &self,
        cpu: usize,
        start: u64,
    ) -> impl Iterator<Item = usize> + '_ {
        let (me, topo) = (self.cur_entity, self.topology);
        let socket = topo.socket_of(cpu);
        (0..self.cpu_free_at.len()).filter(move |&c| {
            c != cpu && topo.socket_of(c) == socket && !self.idle_at(c, start, me)
        })
    }

    /// Until when an SMT sibling of `cpu` is known to be busy after
    /// `start` (None: all idle then). The simulator has run the sibling's
    /// last slice up to its end, so it is busy up to there at least; one
    /// whose slice ended by then but has an entity queued and ready (its
    /// runner holding it, say) is busy from `start` on, for a length not
    /// known yet.
    pub(super) fn sibling_busy_until(&self, cpu: usize, start: u64) -> Option<u64> {
        let me = self.cur_entity;
        self.topology
            .siblings(cpu)
            .filter_map(|c| match self.cpu_free_at[c] {
                t if t > start => Some(t),
                _ if !self.idle_at(c, start, me) => Some(start),
                _ => None,
            })
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmsim_spec::Topology;

    /// `n` tasks last run on `last`, CPUs free at `free`.
    fn rq(topology: Topology, free: &[u64], last: &[Option<usize>]) -> RunQueue {
        RunQueue {
            tasks: last
                .iter()
                .map(|&c| Entity {
                    last_cpu: c,
                    ..Entity::new(0, 0)
                })
                .collect(),
            ready: vec![0; last.len()],
            ready_vruntime: vec![0; last.len()],
            cpu_free_at: free.to_vec(),
            cap: u64::MAX,
            last_on_cpu: vec![None; free.len()],
            kswapd_ready: None,
            khugepaged_ready: None,
            kswapd_vruntime: 0,
            min_vruntime: 0,
            cur_entity: 0,
            cur_cpu: 0,
            cur_start: 0,
            topology,
            kthread_cpu: [None; 2],
            kthread_rq: Default::default(),
            kthread_waker: [None; 2],
            queued_on: vec![Vec::new(); free.len()],
            queued_cpu: vec![u32::MAX; last.len()],
            balance: Vec::new(),
            balance_next: u64::MAX,
        }
    }

    const SMT_2X2: Topology = Topology {
        sockets: 2,
        cores_per_socket: 2,
        threads_per_core: 2,
    };

    #[test]
    fn a_wakeup_takes_its_previous_cpu_when_idle() {
        let q = rq(SMT_2X2, &[0, 0, 0, 0, 0, 0, 0, 0], &[Some(6)]);
        assert_eq!(q.select_idle(0, 10), Some(6));
    }

    #[test]
    fn else_an_idle_core_of_its_socket_then_an_idle_thread_there() {
        // CPU 6 (socket 1, core 3) busy until 50: core 2 (CPUs 4, 5)
        // idles whole, so CPU 4 rather than 7, 6's idle sibling.
        let q = rq(SMT_2X2, &[0, 0, 0, 0, 0, 0, 50, 0], &[Some(6)]);
        assert_eq!(q.select_idle(0, 10), Some(4));
        // Core 2 half busy too: no idle core in socket 1, so its first
        // idle thread, 5 (the LLC's search), before socket 0's idle cores.
        let q = rq(SMT_2X2, &[0, 0, 0, 0, 50, 0, 50, 0], &[Some(6)]);
        assert_eq!(q.select_idle(0, 10), Some(5));
    }

    #[test]
    fn then_another_socket_then_its_previous_cpus_queue() {
        let q = rq(SMT_2X2, &[0, 0, 0, 0, 50, 50, 50, 50], &[Some(6)]);
        assert_eq!(q.select_idle(0, 10), Some(0));
        // None idle: it queues on its previous CPU.
        let q = rq(SMT_2X2, &[90, 40, 90, 90, 50, 50, 60, 50], &[Some(6)]);
        assert_eq!(q.select_idle(0, 10), None);
        assert_eq!(q.wake_target(0), 6);
    }

    #[test]
    fn a_new_task_starts_on_an_idle_core() {
        // CPU 0 busy: its sibling 1 is idle but core 1 (CPUs 2, 3) idles
        // whole.
        let q = rq(SMT_2X2, &[50, 0, 0, 0, 0, 0, 0, 0], &[None]);
        assert_eq!(q.select_idle(0, 10), Some(2));
    }

    #[test]
    fn a_slice_beside_a_busy_sibling_ends_where_the_sibling_is_known_busy() {
        let q = rq(SMT_2X2, &[0, 500_000, 0, 0, 0, 0, 0, 0], &[Some(0)]);
        assert_eq!(q.sibling_busy_until(0, 10), Some(500_000));
        assert_eq!(q.slice_end(0, 0, 10).0, 500_000);
        // No SMT: nothing to wait for.
        let q = rq(Topology::flat(2), &[0, 500_000], &[Some(0)]);
        assert_eq!(q.sibling_busy_until(0, 10), None);
    }

    /// Task `i` queued on `cpu`, ready at `r` (holding it if `holds`).
    fn queue(q: &mut RunQueue, i: usize, cpu: usize, r: u64, holds: bool) {
        q.set_queue(i, Some(cpu));
        let t = &mut q.tasks[i];
        t.clock = r;
        t.rq.holds_cpu = holds;
        q.sync(i);
        if holds {
            q.last_on_cpu[cpu] = Some(i);
        }
    }

    #[test]
    fn a_fork_with_every_cpu_busy_stays_on_the_forking_cpu_when_loads_are_equal() {
        // Task 0 forks on CPU 0; task 1 runs on CPU 1.
        let mut q = rq(Topology::flat(2), &[0, 100], &[Some(0), Some(1)]);
        queue(&mut q, 0, 0, 0, false);
        queue(&mut q, 1, 1, 100, false);
        q.cur_entity = 0;
        q.cur_cpu = 0;
        assert_eq!(q.fork_cpu(50), 0);
        // A child already waits on CPU 0: 2 against 1 is past 117 %.
        q.tasks.push(Entity::new(50, 0));
        q.ready.push(50);
        q.ready_vruntime.push(0);
        q.queued_cpu.push(u32::MAX);
        queue(&mut q, 2, 0, 50, false);
        assert_eq!(q.fork_cpu(60), 1);
    }

    #[test]
    fn a_fork_takes_an_idle_cpu() {
        let mut q = rq(Topology::flat(2), &[0, 0], &[Some(0)]);
        queue(&mut q, 0, 0, 0, false);
        q.cur_cpu = 0;
        assert_eq!(q.fork_cpu(50), 1);
    }

    #[test]
    fn an_entity_holding_its_cpu_runs_on_before_one_queued_behind_it() {
        // Task 0 holds CPU 0 from 100; task 1, queued there since 10,
        // waits although it has been ready longer; CPU 1 is busy with
        // task 2 until 500.
        let mut q = rq(Topology::flat(2), &[100, 500], &[Some(0), Some(0), Some(1)]);
        queue(&mut q, 0, 0, 100, true);
        queue(&mut q, 1, 0, 10, false);
        queue(&mut q, 2, 1, 500, true);
        let p = q.pick().expect("a pick");
        assert_eq!((p.entity, p.cpu, p.start), (0, 0, 100));
        // Its slice used up, the waiting one goes first.
        q.tasks[0].rq.holds_cpu = false;
        let p = q.pick().expect("a pick");
        assert_eq!((p.entity, p.cpu, p.start), (1, 0, 100));
    }

    #[test]
    fn a_cpu_that_idles_pulls_a_waiting_entity() {
        // Task 1 waits on CPU 0 behind task 0; CPU 1 frees at 300 with
        // nothing of its own.
        let mut q = rq(Topology::flat(2), &[1000, 300], &[Some(0), Some(0)]);
        queue(&mut q, 0, 0, 1000, true);
        queue(&mut q, 1, 0, 10, false);
        let p = q.pick().expect("a pick");
        assert_eq!((p.entity, p.cpu, p.start), (1, 1, 300));
    }

    #[test]
    fn a_sleeper_waking_onto_a_busy_cpu_preempts_a_runner_well_ahead_of_it() {
        // Task 1 wakes (not queued) with CPU 0, its previous, held by task
        // 0, and CPU 1 held by task 2.
        let mut q = rq(Topology::flat(2), &[100, 100], &[Some(0), Some(0), Some(1)]);
        queue(&mut q, 0, 0, 100, true);
        queue(&mut q, 2, 1, 100, true);
        q.tasks[1].clock = 50;
        q.sync(1);
        let gran = cost_model::SCHED_WAKEUP_GRANULARITY_NS * q.sched_factor();
        // Equal vruntimes: no preemption; it waits.
        assert!(!q.wakeup_preempts_on(0, 1));
        // The runner ahead by more than the granularity: preempted.
        q.tasks[0].vruntime = gran + 1;
        q.sync(0);
        assert!(q.wakeup_preempts_on(0, 1));
        let p = q.pick().expect("a pick");
        assert_eq!((p.entity, p.cpu, p.start), (1, 0, 100));
        q.start_slice(1, 0, 100);
        assert!(
            !q.tasks[0].rq.holds_cpu,
            "the preempted runner no longer holds CPU 0"
        );
    }

    #[test]
    fn periodic_balancing_moves_a_waiting_task_on_its_second_try_at_two_against_one() {
        let mut q = rq(
            Topology::flat(2),
            &[u64::MAX / 2, u64::MAX / 2],
            &[Some(0), Some(0), Some(1)],
        );
        q.balance = Balance::domain(Topology::flat(2), 2);
        q.balance_next = 32_000_000;
        queue(&mut q, 0, 0, u64::MAX / 2, false);
        queue(&mut q, 1, 0, 10, false);
        queue(&mut q, 2, 1, u64::MAX / 2, false);
        // CPU 1 balances at 32 ms (2 ms × 16): 2 against 1, a task's load
        // (2 halves) above the imbalance (1 half): fails.
        assert_eq!(q.balance[1].next, 32_000_000);
        assert!(!q.load_balance(1));
        assert_eq!(q.balance[1].failed, 1);
        assert_eq!(q.balance[1].next, 64_000_000);
        // The second try halves the load: task 1 moves.
        assert!(q.load_balance(1));
        assert_eq!(q.tasks[1].last_cpu, Some(1));
        assert_eq!(q.balance[1].failed, 0);
        // CPU 0, now at one against two, fails its first try in turn.
        assert!(!q.load_balance(0));
    }
}

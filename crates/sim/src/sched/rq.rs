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
}

impl Entity {
    pub(super) fn new(clock: u64, vruntime: u64) -> Self {
        Entity {
            clock,
            state: TaskState::Ready,
            vruntime,
            switched_in: u64::MAX,
            last_cpu: None,
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
    /// The entity each CPU ran last (kswapd: usize::MAX; None: idle), to
    /// tell a context switch from a task running on.
    pub(super) last_on_cpu: Vec<Option<usize>>,
    pub(super) kswapd_ready: Option<u64>,
    pub(super) khugepaged_ready: Option<u64>,
    /// kswapd's CFS virtual runtime, and the run queue's min_vruntime.
    pub(super) kswapd_vruntime: u64,
    pub(super) min_vruntime: u64,
    /// The running entity's CPU and the start of its slice.
    pub(super) cur_cpu: usize,
    pub(super) cur_start: u64,
    /// Sockets, cores and SMT threads of the CPUs.
    pub(super) topology: mmsim_spec::Topology,
    /// The CPU kswapd and khugepaged last ran on.
    pub(super) kthread_cpu: [Option<usize>; 2],
}

/// The running task's slice, as the player sees it: when it ends, and
/// the scheduler events (a kswapd or khugepaged wakeup, a fork) that may
/// end it sooner.
pub struct Slice<'a> {
    pub(super) rq: &'a mut RunQueue,
    pub(super) me: usize,
    pub(super) end: u64,
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
                return Some(SliceEnd::Preempted);
            }
            // kswapd waits for this CPU, or runs beside us on an idle one.
            self.end = self.end.min(self.rq.slice_end_now(self.me));
        }
        if k.khugepaged.wakeup_pending() {
            self.wake_khugepaged(k);
        }
        (k.now() >= self.end).then_some(SliceEnd::Preempted)
    }

    /// A registration woke khugepaged: at nice 19 it does not preempt;
    /// it runs beside this task on an idle CPU, or waits its turn.
    pub fn wake_khugepaged(&mut self, k: &mut Kernel) -> bool {
        let Some(w) = k.khugepaged.take_wakeup() else {
            return false;
        };
        self.rq.khugepaged_ready = Some(w);
        self.end = self.end.min(self.rq.slice_end_now(self.me));
        true
    }

    /// A task forked now: runnable at once, at the queue's min_vruntime
    /// (place_entity), and `wake_up_new_task` puts it on an idle CPU at
    /// once, where it runs beside its parent (the slice ends where the two
    /// would part by more than the scheduler's quantum). Its number is the
    /// next after the existing tasks'.
    pub fn fork(&mut self, now: u64) {
        let vruntime = self.rq.min_vruntime;
        self.rq.tasks.push(Entity::new(now, vruntime));
        self.rq.ready.push(now);
        self.rq.ready_vruntime.push(vruntime);
        self.end = self.end.min(self.rq.slice_end_now(self.me));
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
        let slice_end = self.slice_end(self.khugepaged_entity(), self.cur_cpu, start);
        let (ready, how) = loop {
            match k.khugepaged_step() {
                KhugepagedNext::Run if k.now() < slice_end => continue,
                KhugepagedNext::Run => break (Some(k.now()), PsiOut::Preempted),
                KhugepagedNext::SleepUntil(t) => break (Some(t), PsiOut::Sleep),
                KhugepagedNext::Sleep => break (None, PsiOut::Sleep),
            }
        };
        self.khugepaged_ready = ready;
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
        let slice_end = self.slice_end(self.tasks.len(), self.cur_cpu, start);
        let (ready, how) = loop {
            match k.kswapd_step() {
                KswapdNext::Run if k.now() < slice_end => continue,
                KswapdNext::Run => break (Some(k.now()), PsiOut::Preempted),
                KswapdNext::NapUntil(t) => break (Some(t), PsiOut::Sleep),
                KswapdNext::Sleep => break (None, PsiOut::Sleep),
            }
        };
        self.kswapd_ready = ready;
        k.psi_switch_out(PsiWho::Kthread(0), k.now(), how);
        self.last_on_cpu[self.cur_cpu] = Some(usize::MAX);
        if let Some(why) = k.unmodelled.take() {
            return Err(SimError::Unmodelled(why));
        }
        self.kswapd_vruntime += k.now() - start;
        Ok(k.now())
    }

    /// The entity ready earliest: tasks, then kswapd, then khugepaged.
    /// None when all tasks are done (the kernel threads' remaining work
    /// does not outlive the workload).
    pub(super) fn pick(&self) -> Option<(usize, u64)> {
        debug_assert!(
            (0..self.tasks.len())
                .all(|i| self.tasks[i].ready_entries() == (self.ready[i], self.ready_vruntime[i])),
            "rq: a task's state, clock or vruntime changed without sync"
        );
        // The earliest, the lowest index among equals.
        let (mut best_i, mut best_r) = (usize::MAX, u64::MAX);
        for (i, &r) in self.ready.iter().enumerate() {
            if r < best_r {
                (best_i, best_r) = (i, r);
            }
        }
        // u64::MAX is also a sleep's end that never comes (a task asleep
        // that long is still picked, last).
        let mut best = match best_r {
            u64::MAX => self
                .tasks
                .iter()
                .position(|t| t.ready() == Some(u64::MAX))
                .map(|i| (i, u64::MAX)),
            r => Some((best_i, r)),
        };
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
    pub(super) fn place_woken_kswapd(&mut self, at: u64) {
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
        let idle_elsewhere =
            (0..self.cpu_free_at.len()).any(|c| c != self.cur_cpu && self.cpu_free_at[c] <= now);
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
    pub(super) fn slice_end_now(&self, me: usize) -> u64 {
        self.slice_end(me, self.cur_cpu, self.cur_start)
    }

    /// When an entity that starts at `start` on `cpu` must give way. An
    /// entity ready to run on another CPU runs beside it from when that
    /// CPU is free (at once if it idles), so the two stay in step to
    /// within `QUANTUM_NS` from then on: what one CPU does never runs
    /// ahead of what the other does to the same memory. Entities
    /// competing for CPUs share them in CFS slices: sched_latency over the
    /// runnable count per CPU, at least min_granularity (both scaled by
    /// 1 + log2(cpus), as the kernel's default tunable scaling does).
    pub(super) fn slice_end(&self, me: usize, cpu: usize, start: u64) -> u64 {
        let ncpu = self.cpu_free_at.len() as u64;
        let factor = self.sched_factor();
        let latency = cost_model::SCHED_LATENCY_NS * factor;
        let min_gran = cost_model::SCHED_MIN_GRANULARITY_NS * factor;
        let mut end = u64::MAX;
        let mut competing: u64 = 1;
        // Another CPU is idle at time t iff the earliest-free other CPU is.
        let other_free = (0..self.cpu_free_at.len())
            .filter(|&c| c != cpu)
            .map(|c| self.cpu_free_at[c])
            .min()
            .unwrap_or(u64::MAX);
        // Each other ready entity starts on another CPU when one frees up
        // (at once if one is idle), and from then on the two run side by
        // side: the earliest of them bounds the slice. Those ready by
        // `start` compete for the CPUs if no other CPU is free for them.
        let (mut first, mut waiting) = (u64::MAX, 0);
        for r in self.ready_times_except(me) {
            first = first.min(r);
            waiting += (r <= start) as u64;
        }
        if first != u64::MAX {
            let beside = first.max(start).max(other_free);
            end = beside.saturating_add(cost_model::QUANTUM_NS);
        }
        if other_free > start {
            competing += waiting;
        }
        let per_cpu = competing.div_ceil(ncpu).max(1);
        // A slice beside a busy SMT sibling runs slower; it ends where the
        // sibling's known work does, so the next one sees if it idles.
        if let Some(busy) = self.sibling_busy_until(cpu, start) {
            end = end.min(busy.max(start.saturating_add(cost_model::QUANTUM_NS)));
        }
        end.min(start.saturating_add((latency / per_cpu).max(min_gran)))
    }

    /// `select_task_rq_fair` for an entity ready at `ready`: its previous
    /// CPU if idle then (cache-hot; `select_idle_sibling`'s first
    /// choice), else an idle CPU whose whole core idles, in the previous
    /// CPU's socket first (the LLC the search covers), then any idle CPU
    /// there, then elsewhere (idle balancing pulls it at once); with none
    /// idle, the CPU that frees up first. Ties go to the lower CPU. A new
    /// task has no previous CPU and starts on the idlest
    /// (`find_idlest_cpu`: an idle core first).
    /// Simplification: the wakee is never pulled to its waker's CPU
    /// (`wake_affine`); with an idle CPU in the LLC the kernel picks one
    /// too, and mmsim's wakers (kswapd, children) have no cache to share.
    pub(super) fn select_cpu(&self, entity: usize, ready: u64) -> usize {
        let idle = |c: usize| self.cpu_free_at[c] <= ready;
        let prev = self.last_cpu_of(entity);
        if let Some(p) = prev.filter(|&p| idle(p)) {
            return p;
        }
        let topo = &self.topology;
        let core_idle = |c: usize| idle(c) && topo.siblings(c).all(idle);
        let socket = prev.map(|p| topo.socket_of(p));
        let in_llc = |c: usize| socket.is_none_or(|s| topo.socket_of(c) == s);
        let ncpu = self.cpu_free_at.len();
        let pick = (0..ncpu)
            .find(|&c| in_llc(c) && core_idle(c))
            .or_else(|| (0..ncpu).find(|&c| in_llc(c) && idle(c)))
            .or_else(|| (0..ncpu).find(|&c| core_idle(c)))
            .or_else(|| (0..ncpu).find(|&c| idle(c)));
        pick.unwrap_or_else(|| {
            (0..ncpu)
                .min_by_key(|&c| (self.cpu_free_at[c], c))
                .expect("at least one CPU")
        })
    }

    /// The CPU an entity last ran on.
    fn last_cpu_of(&self, entity: usize) -> Option<usize> {
        match entity.checked_sub(self.tasks.len()) {
            None => self.tasks[entity].last_cpu,
            Some(k) => self.kthread_cpu[k],
        }
    }

    /// Notes where an entity runs.
    pub(super) fn set_last_cpu(&mut self, entity: usize, cpu: usize) {
        match entity.checked_sub(self.tasks.len()) {
            None => self.tasks[entity].last_cpu = Some(cpu),
            Some(k) => self.kthread_cpu[k] = Some(cpu),
        }
    }

    /// Until when an SMT sibling of `cpu` is known to be busy after
    /// `start` (None: all idle then). The simulator has run the sibling's
    /// last slice up to its end, so it is busy up to there at least.
    pub(super) fn sibling_busy_until(&self, cpu: usize, start: u64) -> Option<u64> {
        self.topology
            .siblings(cpu)
            .map(|c| self.cpu_free_at[c])
            .filter(|&t| t > start)
            .max()
    }

    /// Ready times of every entity but `me` that will want a CPU.
    pub(super) fn ready_times_except(&self, me: usize) -> impl Iterator<Item = u64> + '_ {
        let tasks = self
            .ready
            .iter()
            .enumerate()
            .filter(move |&(i, &r)| i != me && r != u64::MAX)
            .map(|(_, &r)| r);
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
            last_on_cpu: vec![None; free.len()],
            kswapd_ready: None,
            khugepaged_ready: None,
            kswapd_vruntime: 0,
            min_vruntime: 0,
            cur_cpu: 0,
            cur_start: 0,
            topology,
            kthread_cpu: [None; 2],
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
        assert_eq!(q.select_cpu(0, 10), 6);
    }

    #[test]
    fn else_an_idle_core_of_its_socket_then_an_idle_thread_there() {
        // CPU 6 (socket 1, core 3) busy until 50: core 2 (CPUs 4, 5)
        // idles whole, so CPU 4 rather than 7, 6's idle sibling.
        let q = rq(SMT_2X2, &[0, 0, 0, 0, 0, 0, 50, 0], &[Some(6)]);
        assert_eq!(q.select_cpu(0, 10), 4);
        // Core 2 half busy too: no idle core in socket 1, so its first
        // idle thread, 5 (the LLC's search), before socket 0's idle cores.
        let q = rq(SMT_2X2, &[0, 0, 0, 0, 50, 0, 50, 0], &[Some(6)]);
        assert_eq!(q.select_cpu(0, 10), 5);
    }

    #[test]
    fn then_another_socket_then_the_cpu_free_first() {
        let q = rq(SMT_2X2, &[0, 0, 0, 0, 50, 50, 50, 50], &[Some(6)]);
        assert_eq!(q.select_cpu(0, 10), 0);
        let q = rq(SMT_2X2, &[90, 40, 90, 90, 50, 50, 60, 50], &[Some(6)]);
        assert_eq!(q.select_cpu(0, 10), 1);
    }

    #[test]
    fn a_new_task_starts_on_an_idle_core() {
        // CPU 0 busy: its sibling 1 is idle but core 1 (CPUs 2, 3) idles
        // whole.
        let q = rq(SMT_2X2, &[50, 0, 0, 0, 0, 0, 0, 0], &[None]);
        assert_eq!(q.select_cpu(0, 10), 2);
    }

    #[test]
    fn a_slice_beside_a_busy_sibling_ends_where_the_sibling_is_known_busy() {
        let q = rq(SMT_2X2, &[0, 500_000, 0, 0, 0, 0, 0, 0], &[Some(0)]);
        assert_eq!(q.sibling_busy_until(0, 10), Some(500_000));
        assert_eq!(q.slice_end(0, 0, 10), 500_000);
        // No SMT: nothing to wait for.
        let q = rq(Topology::flat(2), &[0, 500_000], &[Some(0)]);
        assert_eq!(q.sibling_busy_until(0, 10), None);
    }
}

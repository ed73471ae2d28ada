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
//!
//! What a task does within its slice is the workload player's
//! (`crate::player`); the two meet at `Slice`: the player asks it after
//! each access whether the slice ends there, and tells it of forks.

use crate::cost_model;
use crate::kernel::Kernel;
use crate::mm::khugepaged::KhugepagedNext;
use crate::mm::vmscan::KswapdNext;
use crate::player::Player;
use crate::SimError;
use mmsim_spec::Spec;

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
}

/// What the scheduler keeps of a task: its clock, state and CFS virtual
/// runtime (all at nice 0, so CPU time).
struct Entity {
    clock: u64,
    state: TaskState,
    vruntime: u64,
    /// The jiffy the task was last switched in.
    switched_in: u64,
}

impl Entity {
    fn new(clock: u64, vruntime: u64) -> Self {
        Entity {
            clock,
            state: TaskState::Ready,
            vruntime,
            switched_in: u64::MAX,
        }
    }

    /// When the task will want a CPU (None: it will not by itself).
    fn ready(&self) -> Option<u64> {
        match self.state {
            TaskState::Ready => Some(self.clock),
            TaskState::Sleeping(until) => Some(until),
            TaskState::Waiting | TaskState::Done => None,
        }
    }
}

/// The CPUs and the entities competing for them.
struct RunQueue {
    /// The tasks, in the player's order; kswapd and khugepaged follow them
    /// as entities `tasks.len()` and `tasks.len() + 1`.
    tasks: Vec<Entity>,
    cpu_free_at: Vec<u64>,
    /// The entity each CPU ran last (kswapd: usize::MAX; None: idle), to
    /// tell a context switch from a task running on.
    last_on_cpu: Vec<Option<usize>>,
    kswapd_ready: Option<u64>,
    khugepaged_ready: Option<u64>,
    /// kswapd's CFS virtual runtime, and the run queue's min_vruntime.
    kswapd_vruntime: u64,
    min_vruntime: u64,
    /// The running entity's CPU and the start of its slice.
    cur_cpu: usize,
    cur_start: u64,
}

pub struct Scheduler<'s> {
    /// The tasks' workload: what each does when it runs.
    pub player: Player<'s>,
    rq: RunQueue,
    /// Called after each slice with the run's progress.
    pub on_progress: Option<Box<dyn FnMut(crate::Progress) + 's>>,
    /// The page operations the spec asks for (`mmsim_spec::work`), set by
    /// the caller with `on_progress`.
    pub total_work: u64,
}

/// The running task's slice, as the player sees it: when it ends, and
/// the scheduler events (a kswapd or khugepaged wakeup, a fork) that may
/// end it sooner.
pub struct Slice<'a> {
    rq: &'a mut RunQueue,
    me: usize,
    end: u64,
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
    /// (place_entity). Its number is the next after the existing tasks'.
    pub fn fork(&mut self, now: u64) {
        let vruntime = self.rq.min_vruntime;
        self.rq.tasks.push(Entity::new(now, vruntime));
    }
}

impl<'s> Scheduler<'s> {
    pub fn new(spec: &'s Spec, k: &mut Kernel) -> Self {
        let player = Player::new(spec, k);
        let cpus = spec.machine.cpus as usize;
        let rq = RunQueue {
            tasks: (0..player.tasks.len()).map(|_| Entity::new(0, 0)).collect(),
            cpu_free_at: vec![0; cpus],
            last_on_cpu: vec![None; cpus],
            kswapd_ready: None,
            // A process's start may have registered its mm (7.3): the
            // thread's first sleep ends then.
            khugepaged_ready: k.khugepaged.take_wakeup(),
            kswapd_vruntime: 0,
            min_vruntime: 0,
            cur_cpu: 0,
            cur_start: 0,
        };
        Scheduler {
            player,
            rq,
            on_progress: None,
            total_work: 0,
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
        while let Some((entity, ready)) = self.rq.pick() {
            let cpu = (0..self.rq.cpu_free_at.len())
                .min_by_key(|&c| (self.rq.cpu_free_at[c], c))
                .unwrap();
            let start = ready.max(self.rq.cpu_free_at[cpu]);
            self.rq.cur_cpu = cpu;
            self.rq.cur_start = start;
            k.cur_cpu = cpu;
            k.call_paths.reset_to_root();
            // Work items queued for other CPUs have run by now.
            for c in 0..self.rq.cpu_free_at.len() {
                k.run_pending_stock_drain(c);
            }
            k.clock_base = start;
            k.pending_ns = 0;
            k.process_io_completions(start);
            // context_switch → lru_gen_use_mm: another entity (or idle)
            // ran on this CPU before.
            let switched =
                self.rq.last_on_cpu[cpu] != Some(entity) || start > self.rq.cpu_free_at[cpu];
            let end = if entity < self.rq.tasks.len() {
                self.run_task(entity, k, start, switched, &mut at_end)?
            } else if entity == self.rq.khugepaged_entity() {
                self.rq.run_khugepaged(k, start)?
            } else {
                self.rq.run_kswapd(k, start)?
            };
            if let Some(t) = k.kswapd_wake_at.take() {
                self.rq.place_woken_kswapd(t);
            }
            if let Some(t) = k.khugepaged.take_wakeup() {
                self.rq.khugepaged_ready = Some(t);
            }
            self.rq.update_min_vruntime();
            // A task sleeping (memory.high throttle, sleep op) frees its CPU.
            self.rq.cpu_free_at[cpu] = k.now().max(start);
            last_end = last_end.max(end);
            if let Some(cb) = self.on_progress.as_mut() {
                cb(crate::Progress {
                    done: self.player.done_work(),
                    total: self.total_work,
                    sim_ns: last_end,
                });
            }
        }
        Ok(last_end)
    }

    /// One slice of task `entity`, from `start`; its exit if it ends.
    fn run_task(
        &mut self,
        entity: usize,
        k: &mut Kernel,
        start: u64,
        switched: bool,
        at_end: &mut impl FnMut(&mut Kernel),
    ) -> Result<u64, SimError> {
        let cpu = self.rq.cur_cpu;
        k.cur_task = Some(self.player.tasks[entity].ktask);
        self.lru_gen_use_mm(k, entity, start, switched);
        // Tasks the slice may fork come after these.
        let before = self.rq.tasks.len();
        let end = self
            .run_task_slice(entity, k, start)
            .map_err(|e| self.player.locate(entity, k, e))?;
        self.rq.last_on_cpu[cpu] = match self.rq.tasks[entity].state {
            TaskState::Ready => Some(entity),
            _ => None,
        };
        self.rq.tasks[entity].vruntime += end.saturating_sub(start);
        if self.rq.tasks[entity].state == TaskState::Done {
            // The last task of those before the slice ends (no other task
            // ends during this one's slice).
            let last = self.rq.tasks[..before]
                .iter()
                .enumerate()
                .all(|(j, t)| j == entity || t.state == TaskState::Done);
            if last {
                at_end(k);
            }
            if let Some(p) = self.player.exit_task(entity, k) {
                self.rq.children_exited(p, k.now());
            }
        }
        Ok(end.max(k.now()))
    }

    fn run_task_slice(&mut self, i: usize, k: &mut Kernel, start: u64) -> Result<u64, SimError> {
        let end = self.rq.slice_end(i, self.rq.cur_cpu, start);
        let t = &mut self.rq.tasks[i];
        if let TaskState::Sleeping(_) = t.state {
            t.state = TaskState::Ready;
        }
        let mut slice = Slice {
            rq: &mut self.rq,
            me: i,
            end,
        };
        let how = self.player.run_slice(i, k, &mut slice)?;
        let end = k.now();
        let t = &mut self.rq.tasks[i];
        t.state = match how {
            SliceEnd::Preempted => TaskState::Ready,
            SliceEnd::Sleep(until) => TaskState::Sleeping(until),
            SliceEnd::Wait => TaskState::Waiting,
            SliceEnd::Done => TaskState::Done,
        };
        t.clock = match t.state {
            TaskState::Sleeping(until) => until,
            _ => end,
        };
        Ok(end)
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
        let jiffy = start / JIFFY_NS;
        let e = &mut self.rq.tasks[entity];
        if switched || e.switched_in != jiffy {
            e.switched_in = jiffy;
            let mm = k.tasks[self.player.tasks[entity].ktask].mm;
            k.mms[mm as usize].lru_gen_used = true;
        }
    }
}

impl RunQueue {
    /// Task `i` has no more children: out of wait(2) if it was in it.
    fn children_exited(&mut self, i: usize, now: u64) {
        let t = &mut self.tasks[i];
        if t.state == TaskState::Waiting {
            t.state = TaskState::Ready;
            t.clock = t.clock.max(now);
        }
    }

    /// khugepaged's entity number: after the tasks and kswapd.
    fn khugepaged_entity(&self) -> usize {
        self.tasks.len() + 1
    }

    /// khugepaged's slice: scans until it sleeps or the slice ends.
    fn run_khugepaged(&mut self, k: &mut Kernel, start: u64) -> Result<u64, SimError> {
        k.cur_task = None;
        let slice_end = self.slice_end(self.khugepaged_entity(), self.cur_cpu, start);
        self.khugepaged_ready = loop {
            match k.khugepaged_step() {
                KhugepagedNext::Run if k.now() < slice_end => continue,
                KhugepagedNext::Run => break Some(k.now()),
                KhugepagedNext::SleepUntil(t) => break Some(t),
                KhugepagedNext::Sleep => break None,
            }
        };
        self.last_on_cpu[self.cur_cpu] = Some(KHUGEPAGED_ON_CPU);
        if let Some(why) = k.unmodelled.take() {
            return Err(SimError::Unmodelled(why));
        }
        Ok(k.now())
    }

    /// kswapd keeps its CPU for its slice, pass after pass, until it naps
    /// or sleeps.
    fn run_kswapd(&mut self, k: &mut Kernel, start: u64) -> Result<u64, SimError> {
        k.cur_task = None;
        let slice_end = self.slice_end(self.tasks.len(), self.cur_cpu, start);
        self.kswapd_ready = loop {
            match k.kswapd_step() {
                KswapdNext::Run if k.now() < slice_end => continue,
                KswapdNext::Run => break Some(k.now()),
                KswapdNext::NapUntil(t) => break Some(t),
                KswapdNext::Sleep => break None,
            }
        };
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
    fn pick(&self) -> Option<(usize, u64)> {
        let mut best: Option<(usize, u64)> = None;
        for (i, t) in self.tasks.iter().enumerate() {
            let Some(ready) = t.ready() else { continue };
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
        let half_latency = cost_model::SCHED_LATENCY_NS * self.sched_factor() / 2;
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
        let curr = self.tasks[i].vruntime + now.saturating_sub(self.cur_start);
        curr > self.kswapd_vruntime + cost_model::SCHED_WAKEUP_GRANULARITY_NS * self.sched_factor()
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
            .filter(|t| t.state == TaskState::Ready)
            .map(|t| t.vruntime);
        let kswapd = self.kswapd_ready.map(|_| self.kswapd_vruntime);
        if let Some(m) = tasks.chain(kswapd).min() {
            self.min_vruntime = self.min_vruntime.max(m);
        }
    }

    /// `slice_end` of the running entity, recomputed for what woke since
    /// its slice started.
    fn slice_end_now(&self, me: usize) -> u64 {
        self.slice_end(me, self.cur_cpu, self.cur_start)
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
        for r in self.ready_times_except(me) {
            let other_cpu_idle = other_free <= r.max(start);
            if other_cpu_idle {
                end = end.min(r.max(start).saturating_add(cost_model::QUANTUM_NS));
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
            .filter_map(|(_, t)| t.ready());
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

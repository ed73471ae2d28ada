//! Tasks on simulated CPUs and the event clock.
//!
//! Every task and kswapd has its own clock, and each CPU a run queue. The
//! scheduler always advances the entity that can start earliest on the
//! CPU it is queued on (or that pulls it: `RunQueue::pick`), for at most
//! one time slice; entities queued on one CPU take turns, slice by slice,
//! and the load balancer moves waiting ones between CPUs. A woken kswapd
//! runs at once on an idle CPU, or preempts its waker if CFS's wakeup rule
//! says so (`wakeup_preempts`).
//! khugepaged runs at nice 19: it never preempts, and takes an idle CPU or
//! its turn. Simplification: under contention for the CPUs it gets a full
//! turn where CFS would give it about 1.5% of a CPU (weight 15 against
//! 1024); its scans are short bursts seconds apart.
//! Everything is deterministic: ties go to the lower entity number (tasks
//! in spec order, then kswapd, then khugepaged).
//!
//! What a task does within its slice is the workload player's
//! (`crate::player`); the two meet at `Slice` (`rq.rs`): the player asks
//! it after each access whether the slice ends there, and tells it of
//! forks. This file is the event loop; `rq.rs` the run queue.

pub mod psi;
pub mod rq;

use crate::kernel::Kernel;
use crate::player::Player;
use crate::SimError;
use mmsim_spec::Spec;
use psi::{PsiOut, PsiWho};
use rq::{Entity, Pick, RunQueue, Slice, SliceEnd, TaskState};

pub struct Scheduler<'s> {
    /// The tasks' workload: what each does when it runs.
    pub player: Player<'s>,
    rq: RunQueue,
    /// Called after each slice with the run's progress.
    pub on_progress: Option<Box<dyn FnMut(crate::Progress) + 's>>,
    /// The page operations the spec asks for (`mmsim_spec::work`), set by
    /// the caller with `on_progress`.
    pub total_work: u64,
    /// `RunOptions::max_sim_ns` (u64::MAX: no bound).
    pub max_sim_ns: u64,
    /// The latest end of a slice so far.
    last_end: u64,
}

/// What one `Scheduler::step` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stepped {
    /// Ran a slice from `start` to `end`.
    Ran { start: u64, end: u64 },
    /// Ran nothing: the earliest entity starts then, at or after the cap.
    Idle(u64),
    /// Every task has exited.
    Done,
}

impl<'s> Scheduler<'s> {
    pub fn new(spec: &'s Spec, k: &mut Kernel) -> Self {
        let player = Player::new(spec, k);
        let cpus = spec.machine.cpus as usize;
        let balance = rq::Balance::domain(spec.machine.topology, cpus);
        let rq = RunQueue {
            tasks: (0..player.tasks.len()).map(|_| Entity::new(0, 0)).collect(),
            ready: vec![0; player.tasks.len()],
            ready_vruntime: vec![0; player.tasks.len()],
            cpu_free_at: vec![0; cpus],
            last_on_cpu: vec![None; cpus],
            kswapd_ready: None,
            // A process's start may have registered its mm (7.3): the
            // thread's first sleep ends then.
            khugepaged_ready: k.khugepaged.take_wakeup(),
            kswapd_vruntime: 0,
            min_vruntime: 0,
            cur_entity: 0,
            cur_cpu: 0,
            cur_start: 0,
            topology: spec.machine.topology,
            kthread_cpu: [None; 2],
            kthread_rq: Default::default(),
            kthread_waker: [None; 2],
            queued_on: vec![Vec::new(); cpus],
            queued_cpu: vec![u32::MAX; player.tasks.len()],
            balance_next: balance.iter().map(|b| b.next).min().unwrap_or(u64::MAX),
            cap: u64::MAX,
            balance,
        };
        Scheduler {
            player,
            rq,
            on_progress: None,
            total_work: 0,
            max_sim_ns: u64::MAX,
            last_end: 0,
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
        while let Stepped::Ran { end, .. } = self.step(k, u64::MAX, &mut at_end)? {
            last_end = last_end.max(end);
            if last_end > self.max_sim_ns {
                return Err(SimError::Limit(format!(
                    "found a run still going at {:.3} ms of simulated time, expected it to end within {:.3} ms: the time limit (raise it with --max-time)",
                    last_end as f64 / 1e6,
                    self.max_sim_ns as f64 / 1e6
                )));
            }
        }
        Ok(last_end)
    }

    /// No entity starts on any CPU before `t` (a guest's vCPU was held in
    /// its host until then: vm.rs).
    pub fn hold_cpus_until(&mut self, t: u64) {
        for f in &mut self.rq.cpu_free_at {
            *f = (*f).max(t);
        }
    }

    /// One slice: of the entity that can start earliest, if it starts
    /// before `cap` (and the slice then ends by `cap`, where it can);
    /// `u64::MAX`: no cap.
    pub fn step(
        &mut self,
        k: &mut Kernel,
        cap: u64,
        at_end: &mut impl FnMut(&mut Kernel),
    ) -> Result<Stepped, SimError> {
        self.step_by(k, cap, cap, at_end)
    }

    /// One slice as `step`, of an entity that starts before `start_by`
    /// (at most `cap`; `u64::MAX`: no bound), else `Idle` with its start:
    /// a guest's vCPU runs what is ready by the end of its halt polling
    /// (player/guest.rs).
    pub fn step_by(
        &mut self,
        k: &mut Kernel,
        start_by: u64,
        cap: u64,
        at_end: &mut impl FnMut(&mut Kernel),
    ) -> Result<Stepped, SimError> {
        debug_assert!(start_by <= cap);
        let Some(Pick {
            entity,
            ready,
            start,
            cpu,
        }) = self.rq.pick()
        else {
            return Ok(Stepped::Done);
        };
        // u64::MAX is no cap: a sleep that long still runs, last.
        if start_by != u64::MAX && start >= start_by {
            return Ok(Stepped::Idle(start));
        }
        self.rq.cap = cap;
        {
            // No entity can change its pressure state before `ready` any
            // more (picks come in order of their starts, and no start is
            // before its ready time).
            k.psi.advance(ready);
            let prev_end = self.rq.cpu_free_at[cpu];
            self.rq.cur_entity = entity;
            self.rq.cur_cpu = cpu;
            self.rq.cur_start = start;
            // context_switch → lru_gen_use_mm: another entity (or idle)
            // ran on this CPU before.
            let switched =
                self.rq.last_on_cpu[cpu] != Some(entity) || start > self.rq.cpu_free_at[cpu];
            self.rq.start_slice(entity, cpu, start);
            k.cur_cpu = cpu;
            k.set_sibling_busy(self.rq.sibling_busy_until(cpu, start).is_some());
            k.membw.begin_slice(cpu, self.rq.busy_in_socket(cpu, start));
            k.call_paths.reset_to_root();
            // No clock is before this slice's start any more.
            k.uncharge_list.retire(start);
            k.mmap_locks.retire(start);
            k.lines.horizon = start;
            // Work items queued for other CPUs have run by now.
            k.run_pending_stock_drains();
            k.clock_base = start;
            k.pending_ns = 0;
            // zswap's shrink worker writes back and may reclaim: its time
            // is this CPU's, before the slice's entity.
            k.run_pending_zswap_shrink();
            k.run_stats_flush_dwork(start);
            k.process_io_completions(start);
            k.run_pending_ipis(cpu, prev_end, start);
            let end = if entity < self.rq.tasks.len() {
                self.run_task(entity, k, (ready, start), switched, at_end)?
            } else if entity == self.rq.khugepaged_entity() {
                k.psi_switch_in(PsiWho::Kthread(1), cpu, ready, start);
                k.charge_stalled_ipis(cpu);
                self.rq.run_khugepaged(k, start)?
            } else {
                k.psi_switch_in(PsiWho::Kthread(0), cpu, ready, start);
                k.charge_stalled_ipis(cpu);
                self.rq.run_kswapd(k, start)?
            };
            self.wake_oom_victims(k);
            self.wake_oom_waiters(k);
            if let Some(t) = k.kswapd_wake_at.take() {
                self.rq.place_woken_kswapd(t);
            }
            if let Some(t) = k.khugepaged.take_wakeup() {
                self.rq.wake_khugepaged(t);
            }
            self.rq.update_min_vruntime();
            // A task sleeping (memory.high throttle, sleep op) frees its CPU.
            self.rq.cpu_free_at[cpu] = k.now().max(start);
            k.membw.end_slice(cpu, k.now().saturating_sub(start));
            self.last_end = self.last_end.max(end);
            if let Some(cb) = self.on_progress.as_mut() {
                cb(crate::Progress {
                    done: self.player.done_work(),
                    total: self.total_work,
                    sim_ns: self.last_end,
                });
            }
            Ok(Stepped::Ran { start, end })
        }
    }

    /// One slice of task `entity`, ready since `ready`, from `start`; its
    /// exit if it ends.
    fn run_task(
        &mut self,
        entity: usize,
        k: &mut Kernel,
        (ready, start): (u64, u64),
        switched: bool,
        at_end: &mut impl FnMut(&mut Kernel),
    ) -> Result<u64, SimError> {
        let cpu = self.rq.cur_cpu;
        // A task that moved here left its last CPU idle.
        for c in 0..self.rq.last_on_cpu.len() {
            if c != cpu && self.rq.last_on_cpu[c] == Some(entity) {
                k.enter_lazy_tlb(c);
            }
        }
        let ktask = self.player.tasks[entity].ktask;
        k.cur_task = Some(ktask);
        k.psi_switch_in(PsiWho::Task(ktask), cpu, ready, start);
        k.charge_stalled_ipis(cpu);
        k.switch_mm(cpu, k.tasks[self.player.tasks[entity].ktask].mm);
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
        let how = match self.rq.tasks[entity].state {
            TaskState::Ready => PsiOut::Preempted,
            TaskState::Sleeping(_) | TaskState::Waiting => PsiOut::Sleep,
            TaskState::Done => PsiOut::Exit,
        };
        k.psi_switch_out(PsiWho::Task(ktask), k.now(), how);
        if self.rq.last_on_cpu[cpu].is_none() {
            // The CPU goes idle: the idle task borrows the mm.
            k.enter_lazy_tlb(cpu);
        }
        self.rq.tasks[entity].vruntime += end.saturating_sub(start);
        self.rq.sync(entity);
        if self.rq.tasks[entity].state == TaskState::Done {
            // The last task of those before the slice ends (no other task
            // ends during this one's slice).
            let last = self.rq.tasks[..before]
                .iter()
                .enumerate()
                .all(|(j, t)| j == entity || t.state == TaskState::Done);
            // The end is read as the last task finishes its steps, before
            // it exits; an OOM victim never finishes them: after it exits.
            let killed = k.tasks[self.player.tasks[entity].ktask].sigkill();
            if last && !killed {
                at_end(k);
            }
            if let Some(p) = self.player.exit_task(entity, k) {
                self.rq.children_exited(p, k.now());
            }
            if last && killed {
                at_end(k);
            }
        }
        Ok(end.max(k.now()))
    }

    /// SIGKILL wakes the OOM killer's victims (from a sleep or wait(2)):
    /// each runs at once and exits in its own slice.
    fn wake_oom_victims(&mut self, k: &mut Kernel) {
        for kt in k.oom.take_pending() {
            let Some(i) = self.player.tasks.iter().position(|t| t.ktask == kt) else {
                continue;
            };
            let at = k.oom_kill_of(kt).map_or(0, |x| x.at);
            let t = &mut self.rq.tasks[i];
            if matches!(t.state, TaskState::Sleeping(_) | TaskState::Waiting) {
                t.state = TaskState::Ready;
                t.clock = at;
                self.rq.sync(i);
            }
        }
    }

    /// Once every OOM victim has exited, the faults that slept waiting
    /// for them are retried.
    fn wake_oom_waiters(&mut self, k: &mut Kernel) {
        // No kill yet (nearly every run): nobody waits; no scan per slice.
        if k.oom.kills.is_empty()
            || !k.tasks.iter().any(|t| t.oom_wait.is_some())
            || k.tasks.iter().any(|t| t.sigkill() && !t.exited)
        {
            return;
        }
        let now = k.now();
        for i in 0..self.player.tasks.len() {
            let kt = &mut k.tasks[self.player.tasks[i].ktask];
            let Some(since) = kt.oom_wait.take() else {
                continue;
            };
            let t = &mut self.rq.tasks[i];
            if let TaskState::Sleeping(_) = t.state {
                t.state = TaskState::Ready;
                t.clock = now.max(since);
                self.rq.sync(i);
            }
        }
    }

    fn run_task_slice(&mut self, i: usize, k: &mut Kernel, start: u64) -> Result<u64, SimError> {
        let (end, deadline) = self.rq.slice_end(i, self.rq.cur_cpu, start);
        let t = &mut self.rq.tasks[i];
        if let TaskState::Sleeping(_) = t.state {
            t.state = TaskState::Ready;
            self.rq.sync(i);
        }
        let mut slice = Slice {
            rq: &mut self.rq,
            me: i,
            end,
            deadline,
            yielded: false,
        };
        let how = self.player.run_slice(i, k, &mut slice)?;
        let holds_cpu = slice.holds_cpu();
        let end = k.now();
        let t = &mut self.rq.tasks[i];
        t.state = match how {
            SliceEnd::Preempted => TaskState::Ready,
            SliceEnd::Sleep(until) => TaskState::Sleeping(until),
            SliceEnd::Wait => TaskState::Waiting,
            SliceEnd::Done | SliceEnd::Killed => TaskState::Done,
        };
        t.clock = match t.state {
            TaskState::Sleeping(until) => until,
            _ => end,
        };
        let queued = t.state == TaskState::Ready;
        self.rq.sync(i);
        self.rq.end_slice(i, queued, holds_cpu);
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

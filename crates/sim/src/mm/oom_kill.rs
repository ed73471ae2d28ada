//! The OOM killer (mm/oom_kill.c): when reclaim cannot meet an
//! allocation (the global OOM) or a memcg's memory.max (the memcg OOM),
//! the task whose memory is largest, weighted by its oom_score_adj, is
//! sent SIGKILL, with every process that shares its mm; with
//! memory.oom.group set on the victim's memcg (or an ancestor below the
//! OOM domain) every task in that memcg goes too.
//!
//! When the victim's memory is freed: on Linux the signal wakes the
//! victim, which runs exit_mmap on its own CPU when it is scheduled (the
//! oom_reaper reaps its anonymous memory 2 s later if it has not), while
//! the killer goes on retrying its charge or allocation. So it is here
//! for a kill made in a page fault: the victims wake and exit in their
//! own slices, and the killer's fault, after one more round of retries
//! finds the victim still there, sleeps and is retried once they have run
//! (Linux's killer spins instead, for as long as the victim takes to get
//! a CPU: more rounds of reclaim and `oom` events than mmsim counts). A
//! kill made in a syscall (a memory.max write, fork, read/write, madvise)
//! or by kswapd frees an off-CPU victim's memory at once, by the killer:
//! a syscall cannot sleep and be retried here. Inside swapoff's walk of
//! the mms nothing is freed until it is done, and a charge that would wait
//! fails it (ENOMEM). A victim sharing the current task's mm exits on its
//! return to user space (`TIF_SIGPENDING`).

use crate::kernel::Kernel;
use crate::vmstat::Vm;
use crate::SimError;

/// OOM_SCORE_ADJ_MIN: never the victim.
pub const OOM_SCORE_ADJ_MIN: i16 = -1000;

/// Where the OOM happened: the domain the victim is chosen from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// CONSTRAINT_NONE: the whole machine (tasks of every memcg).
    None,
    /// CONSTRAINT_MEMCG: a memcg at its memory.max.
    Memcg(u16),
}

/// One OOM kill: the task `__oom_kill_process` signalled and what its mm
/// held then (the counters of the kernel's "Killed process" line).
#[derive(Clone, Debug)]
pub struct OomKill {
    pub ktask: usize,
    pub at: u64,
    pub constraint: Constraint,
    /// MM_ANONPAGES, MM_FILEPAGES, MM_SHMEMPAGES and the page-table
    /// pages, in pages.
    pub anon_rss: u64,
    pub file_rss: u64,
    pub shmem_rss: u64,
    pub pgtables: u64,
    pub oom_score_adj: i16,
}

/// The OOM killer's state.
#[derive(Default)]
pub struct OomState {
    /// Every kill so far, in order (the output's `oom_kill` of each task).
    pub kills: Vec<OomKill>,
    /// Tasks killed since the scheduler last looked: it wakes them.
    pending: Vec<usize>,
    /// Inside a path that walks other processes' mms (swapoff): a
    /// victim's memory is freed at its exit, not at the kill.
    pub defer_reap: u32,
    /// The last charge or allocation that failed did so waiting for a
    /// victim to exit (taken by the fault, which then sleeps and retries).
    waiting: bool,
}

/// What `out_of_memory` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oom {
    /// A victim was killed (or the current task is dying): the caller
    /// retries.
    Progress,
    /// A victim of an earlier kill still holds its memory: the kernel
    /// retries until it has exited; the caller gives up (a fault sleeps
    /// and is retried).
    Waiting,
    /// No task may be killed.
    Nothing,
}

impl OomState {
    /// The tasks killed since the last call.
    pub fn take_pending(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.pending)
    }

    /// Whether the failure just seen was a wait for a victim's exit.
    pub fn take_waiting(&mut self) -> bool {
        std::mem::take(&mut self.waiting)
    }

    /// A charge or allocation gives up waiting for a victim's exit.
    pub fn set_waiting(&mut self) {
        self.waiting = true;
    }
}

/// `oc->chosen` after `select_bad_process`.
enum Chosen {
    Nothing,
    /// A victim of an earlier kill still holds its memory (`abort`).
    Abort,
    Task(usize),
}

impl Kernel {
    /// `oom_badness`: the pages the task's mm holds (RSS, swap entries,
    /// page tables), plus oom_score_adj thousandths of `totalpages`; None
    /// for a task that cannot be chosen (oom_score_adj -1000, no mm left).
    pub fn oom_badness(&self, t: usize, totalpages: u64) -> Option<i64> {
        let task = &self.tasks[t];
        let mm = &self.mms[task.mm as usize];
        if task.oom_score_adj == OOM_SCORE_ADJ_MIN || mm.exited {
            return None;
        }
        let points =
            mm.rss_anon + mm.rss_file + mm.rss_shmem + mm.swapents + self.mm_pgtables(task.mm);
        let adj = task.oom_score_adj as i64 * (totalpages / 1000) as i64;
        Some(points as i64 + adj)
    }

    /// `mm_pgtables_bytes / PAGE_SIZE`: the PTE and PMD tables of the mm.
    fn mm_pgtables(&self, mm: u32) -> u64 {
        self.mms[mm as usize]
            .vmas
            .iter()
            .map(|&v| {
                let v = &self.vmas[v as usize];
                v.pte_tables
                    .iter()
                    .chain(&v.pmd_tables)
                    .filter(|&&p| p != crate::mm::folio::NIL)
                    .count() as u64
            })
            .sum()
    }

    /// `oc->totalpages`: the memcg's memory.max plus the swap it may use
    /// (`mem_cgroup_get_max`, cgroup v2 with swappiness: its own
    /// memory.swap.max or all swap, whichever is less), or all RAM and
    /// swap (`constrained_alloc`).
    fn oom_totalpages(&self, c: Constraint) -> u64 {
        let swap = self.swapfile.total_swap_pages().max(0) as u64;
        match c {
            Constraint::None => self.zones.iter().map(|z| z.managed).sum::<u64>() + swap,
            Constraint::Memcg(m) => {
                let memcg = &self.memcgs[m as usize];
                let max = memcg.memory.max.unwrap_or(u64::MAX);
                let with_swap = if self.sysctl.swappiness > 0 {
                    max.saturating_add(swap.min(memcg.swap.max.unwrap_or(u64::MAX)))
                } else {
                    max
                };
                with_swap.max(1)
            }
        }
    }

    /// The processes `select_bad_process` visits, in its order: every
    /// thread-group leader by creation (`for_each_process`), or those of
    /// the memcg's subtree (`mem_cgroup_scan_tasks`; with one level of
    /// cgroups, in the order they joined it, which is creation order).
    fn oom_candidates(&self, c: Constraint) -> impl Iterator<Item = usize> + '_ {
        (0..self.tasks.len()).filter(move |&t| {
            let task = &self.tasks[t];
            task.tgid == t
                && !task.exited
                && match c {
                    Constraint::None => true,
                    Constraint::Memcg(m) => self.is_descendant(task.memcg, m),
                }
        })
    }

    /// `select_bad_process` with `oom_evaluate_task`: the highest badness
    /// wins, a later task on a tie; a victim still exiting stops the
    /// search (the kernel waits for it rather than kill a second task).
    fn select_bad_process(&self, c: Constraint) -> Chosen {
        let totalpages = self.oom_totalpages(c);
        let mut chosen = Chosen::Nothing;
        let mut chosen_points = i64::MIN;
        for t in self.oom_candidates(c) {
            if self.tasks[t].sigkill() {
                return Chosen::Abort;
            }
            let Some(points) = self.oom_badness(t, totalpages) else {
                continue;
            };
            if points < chosen_points {
                continue;
            }
            chosen = Chosen::Task(t);
            chosen_points = points;
        }
        chosen
    }

    /// The kill that ended task `t` (its process's, if a thread), if any.
    pub fn oom_kill_of(&self, t: usize) -> Option<&OomKill> {
        let mm = self.tasks[t].mm;
        self.oom.kills.iter().find(|x| self.tasks[x.ktask].mm == mm)
    }

    /// `task_is_dying`: the current task has been sent SIGKILL.
    pub fn current_is_dying(&self) -> bool {
        self.cur_task.is_some_and(|t| self.tasks[t].sigkill())
    }

    /// `out_of_memory`. Err when the whole machine is out of memory with
    /// nothing left to kill: Linux panics there.
    pub fn out_of_memory(&mut self, c: Constraint) -> Result<Oom, SimError> {
        // task_will_free_mem(current): a dying task is let through.
        if self.current_is_dying() {
            return Ok(Oom::Progress);
        }
        match self.select_bad_process(c) {
            Chosen::Abort => Ok(Oom::Waiting),
            Chosen::Task(victim) => {
                self.oom_kill_process(victim, c);
                Ok(Oom::Progress)
            }
            Chosen::Nothing if c == Constraint::None => Err(SimError::Unmodelled(
                "out of memory and no killable processes (every task's oom_score_adj is -1000): Linux panics here (\"System is deadlocked on memory\"); expected a task the OOM killer may choose, or more memory or swap".into(),
            )),
            Chosen::Nothing => Ok(Oom::Nothing),
        }
    }

    /// `oom_kill_process`: the victim, then with memory.oom.group every
    /// other task of its group.
    fn oom_kill_process(&mut self, victim: usize, c: Constraint) {
        let oom_group = self.mem_cgroup_get_oom_group(victim, c);
        self.__oom_kill_process(victim, c);
        if let Some(g) = oom_group {
            self.memcg_memory_event(g, MemcgEvent::OomGroupKill);
            // mem_cgroup_scan_tasks(oom_group, oom_kill_memcg_member): the
            // victim is visited again and counted again, as on Linux (its
            // mm is still there: it has not run since the signal).
            let members: Vec<usize> = self
                .oom_candidates(Constraint::Memcg(g))
                .filter(|&t| self.tasks[t].oom_score_adj != OOM_SCORE_ADJ_MIN)
                .collect();
            for t in members {
                self.__oom_kill_process(t, c);
            }
        }
        self.oom_reap_pending();
    }

    /// `mem_cgroup_get_oom_group`: the highest memcg with memory.oom.group
    /// set from the victim's up to the OOM domain (the root for a global
    /// OOM); none for a task of the root.
    fn mem_cgroup_get_oom_group(&self, victim: usize, c: Constraint) -> Option<u16> {
        let domain = match c {
            Constraint::None => crate::mm::memcontrol::ROOT_MEMCG,
            Constraint::Memcg(m) => m,
        };
        let mut memcg = self.tasks[victim].memcg;
        if self.is_root(memcg) {
            return None;
        }
        let mut group = None;
        loop {
            if self.memcgs[memcg as usize].oom_group {
                group = Some(memcg);
            }
            match self.memcgs[memcg as usize].parent {
                Some(p) if memcg != domain => memcg = p,
                _ => return group,
            }
        }
    }

    /// `__oom_kill_process`: the OOM_KILL events, then SIGKILL to the
    /// victim's thread group and to every other process sharing its mm.
    fn __oom_kill_process(&mut self, victim: usize, c: Constraint) {
        let mm = self.tasks[victim].mm;
        if self.mms[mm as usize].exited {
            return;
        }
        self.vm.inc(Vm::OomKill);
        let memcg = self.mms[mm as usize].memcg;
        self.memcg_memory_event(memcg, MemcgEvent::OomKill);
        let m = &self.mms[mm as usize];
        let kill = OomKill {
            ktask: victim,
            at: self.now(),
            constraint: c,
            anon_rss: m.rss_anon,
            file_rss: m.rss_file,
            shmem_rss: m.rss_shmem,
            pgtables: self.mm_pgtables(mm),
            oom_score_adj: self.tasks[victim].oom_score_adj,
        };
        self.oom.kills.push(kill);
        let now = self.now();
        for t in 0..self.tasks.len() {
            let task = &mut self.tasks[t];
            if task.mm == mm && !task.exited && !task.sigkill() {
                task.ti_work |= crate::kernel::TIF_SIGPENDING;
                task.sigkill_at = now;
                self.oom.pending.push(t);
            }
        }
    }

    /// In a syscall or kswapd, frees the memory of the victims not sharing
    /// the current task's mm now (see the module comment); the others keep
    /// it until they exit.
    fn oom_reap_pending(&mut self) {
        if self.oom.defer_reap > 0 || self.fault.in_fault() {
            return;
        }
        let cur_mm = self.cur_task.map(|t| self.tasks[t].mm);
        let mut mms: Vec<u32> = self
            .oom
            .pending
            .iter()
            .map(|&t| self.tasks[t].mm)
            .filter(|&mm| Some(mm) != cur_mm && !self.mms[mm as usize].exited)
            .collect();
        mms.sort_unstable();
        mms.dedup();
        for mm in mms {
            self.exit_mmap(mm);
            for t in &mut self.tasks {
                if t.mm == mm {
                    t.exited = true;
                }
            }
        }
    }
}

/// The memory.events a memcg counts (`enum memcg_memory_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemcgEvent {
    Low,
    High,
    Max,
    Oom,
    OomKill,
    OomGroupKill,
    /// memory.swap.events max and fail.
    SwapMax,
    SwapFail,
}

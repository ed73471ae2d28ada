//! `mm->mmap_lock` between CPUs (include/linux/mmap_lock.h,
//! kernel/locking/rwsem.c): what a page fault on one CPU waits for while
//! another CPU holds its mm's lock for writing (fork's `dup_mmap`,
//! khugepaged's collapse).
//!
//! The scheduler runs one CPU's slice at a time, each op of a slice at
//! once, the CPUs in step to within `QUANTUM_NS` (sched/rq.rs). A write
//! hold is therefore known whole when it ends: it is kept as an interval
//! of simulated time, and a fault on another CPU whose time falls in it
//! sleeps until its end (`rwsem_down_read_slowpath`) and is retried, as
//! the kernel's is. With one CPU no other task can hold the lock when a
//! task runs (an op never spans a context switch), so nothing here runs.
//!
//! From 6.4 a fault takes its VMA's lock instead (`lock_vma_under_rcu`)
//! and waits only when a writer has locked that VMA (`vma_start_write`:
//! fork every VMA of the mm, a collapse the VMA it changes).
//!
//! mmap, munmap (which downgrades to read before it zaps) and madvise's
//! write-locked advice hold the lock for writing for microseconds and
//! keep no hold here: against a fault's own microseconds that cannot
//! move a phase's time.
//!
//! Simplifications, each worth at most a fault's length (µs) against
//! holds of milliseconds: read holds are not kept, so a writer never
//! waits for a fault in progress on another CPU; and a fault that ran up
//! to `QUANTUM_NS` ahead of a writer's op start on another CPU is not
//! undone. A writer that finds another writer's hold spins on it, as a
//! rwsem writer spins on a running owner (`rwsem_optimistic_spin`).

use super::folio::NIL;
use crate::cost_model::Fn;
use crate::kernel::Kernel;

/// One write hold of an mm's mmap_lock, from its taking to its release.
#[derive(Clone, Copy, Debug)]
struct WriteHold {
    mm: u32,
    /// The VMA it write-locked for 6.4+'s per-VMA locks, `NIL` for every
    /// VMA of the mm (and for every fault before 6.4).
    vma: u32,
    /// The kernel task holding it: its own faults never wait for it.
    task: usize,
    start: u64,
    end: u64,
}

/// The write holds of every mm still able to make a fault wait, and those
/// open now.
#[derive(Debug, Default)]
pub struct MmapLocks {
    holds: Vec<WriteHold>,
    open: Vec<WriteHold>,
}

impl MmapLocks {
    /// Forgets the holds that ended before `t`: no fault can come before
    /// it any more (the scheduler's slice start, the earliest clock).
    pub fn retire(&mut self, t: u64) {
        self.holds.retain(|h| h.end > t);
    }
}

impl Kernel {
    /// `mmap_write_lock(mm)` by the current task, write-locking `vma`
    /// (`NIL`: every VMA, as fork does): it first waits out another
    /// task's hold covering now, spinning.
    pub fn mmap_write_lock(&mut self, mm: u32, vma: u32) {
        if self.cpus.len() == 1 {
            return;
        }
        let task = self.cur_task.unwrap_or(usize::MAX);
        if let Some(end) = self.mmap_lock_held_until(mm, NIL, task) {
            let now = self.now();
            // Spinning on the running owner until its release: elapsed
            // time, not stretched by a busy SMT sibling.
            self.charge_wall(Fn::RwsemDownWriteSlowpath, end - now);
        }
        let start = self.now();
        self.mmap_locks.open.push(WriteHold {
            mm,
            vma,
            task,
            start,
            end: start,
        });
    }

    /// `mmap_write_unlock(mm)` (or `mmap_write_downgrade`): the hold ends
    /// now.
    pub fn mmap_write_unlock(&mut self, mm: u32) {
        if self.cpus.len() == 1 {
            return;
        }
        let (task, end) = (self.cur_task.unwrap_or(usize::MAX), self.now());
        let locks = &mut self.mmap_locks;
        if let Some(i) = locks
            .open
            .iter()
            .rposition(|h| h.mm == mm && h.task == task)
        {
            let mut h = locks.open.swap_remove(i);
            h.end = end;
            if h.end > h.start {
                locks.holds.push(h);
            }
        }
    }

    /// A fault of the current task on `vma` of `mm` now: when another
    /// task holds the lock it needs for writing, the time the fault may
    /// go on (it sleeps until then and retries).
    #[inline]
    pub fn mmap_read_lock_wait(&self, mm: u32, vma: u32) -> Option<u64> {
        if self.mmap_locks.holds.is_empty() {
            return None;
        }
        let task = self.cur_task.unwrap_or(usize::MAX);
        let vma = if self.release.per_vma_locks { vma } else { NIL };
        self.mmap_lock_held_until(mm, vma, task)
    }

    /// The end of the chain of other tasks' write holds on `mm` covering
    /// now (those that lock `vma`, or any when `vma` is `NIL`).
    fn mmap_lock_held_until(&self, mm: u32, vma: u32, task: usize) -> Option<u64> {
        let mut t = self.now();
        let mut waited = false;
        while let Some(h) = self.mmap_locks.holds.iter().find(|h| {
            h.mm == mm
                && h.task != task
                && (vma == NIL || h.vma == NIL || h.vma == vma)
                && h.start <= t
                && t < h.end
        }) {
            t = h.end;
            waited = true;
        }
        waited.then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kernel::test_kernel as kernel;

    /// Task 0 holds mm 0's lock for writing from 1,000 to 5,000 ns,
    /// locking `vma`; then task 1 runs at 3,000 ns.
    fn held_by_task_0(k: &mut Kernel, vma: u32) {
        k.cur_task = Some(0);
        k.clock_base = 1_000;
        k.mmap_write_lock(0, vma);
        k.charge_cost(Fn::CopyPageRange, 4_000);
        k.mmap_write_unlock(0);
        k.cur_task = Some(1);
        k.clock_base = 3_000;
        k.pending_ns = 0;
    }

    #[test]
    fn a_fault_on_another_cpu_sleeps_until_the_writer_unlocks() {
        let mut k = kernel(2, "6.1");
        held_by_task_0(&mut k, NIL);
        assert_eq!(k.mmap_read_lock_wait(0, 7), Some(5_000));
        // Another mm's fault, and the holder's own, go on.
        assert_eq!(k.mmap_read_lock_wait(1, 7), None);
        k.cur_task = Some(0);
        assert_eq!(k.mmap_read_lock_wait(0, 7), None);
        // After the hold, and once retired, nothing waits.
        k.cur_task = Some(1);
        k.clock_base = 5_000;
        assert_eq!(k.mmap_read_lock_wait(0, 7), None);
        k.mmap_locks.retire(5_000);
        assert!(k.mmap_locks.holds.is_empty());
    }

    #[test]
    fn a_writer_on_another_cpu_spins_until_the_holder_unlocks() {
        let mut k = kernel(2, "6.1");
        held_by_task_0(&mut k, NIL);
        k.mmap_write_lock(0, NIL);
        assert_eq!(k.now(), 5_000);
        k.mmap_write_unlock(0);
        assert_eq!(k.mmap_locks.holds.len(), 1, "an empty hold is not kept");
    }

    #[test]
    fn from_6_4_a_fault_waits_only_for_a_writer_of_its_vma() {
        // A collapse of VMA 7 write-locks it alone.
        let mut k = kernel(2, "6.12");
        held_by_task_0(&mut k, 7);
        assert_eq!(k.mmap_read_lock_wait(0, 7), Some(5_000));
        assert_eq!(k.mmap_read_lock_wait(0, 8), None);
        let mut k = kernel(2, "6.12");
        held_by_task_0(&mut k, NIL);
        assert_eq!(
            k.mmap_read_lock_wait(0, 8),
            Some(5_000),
            "fork locks them all"
        );
        // Before 6.4 any write hold makes every fault of the mm wait.
        let mut k = kernel(2, "6.1");
        held_by_task_0(&mut k, 8);
        assert_eq!(k.mmap_read_lock_wait(0, 7), Some(5_000));
    }

    #[test]
    fn one_cpu_keeps_no_holds() {
        let mut k = kernel(1, "6.1");
        held_by_task_0(&mut k, NIL);
        assert!(k.mmap_locks.holds.is_empty());
        assert_eq!(k.mmap_read_lock_wait(0, 7), None);
    }
}

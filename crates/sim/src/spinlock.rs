//! Spinlocks between CPUs (kernel/locking/qspinlock.c): a CPU that takes
//! a lock another CPU holds spins until the holder releases it
//! (`native_queued_spin_lock_slowpath`). A hold lasts as long as the
//! simulated work done under it: the time charged between `spin_lock`
//! and `spin_unlock`. Contention so follows from the work the model
//! prices inside each section, not from a factor; a section whose work
//! the model prices outside it (in a calibrated bundle of the path
//! around it) holds its lock for no time and makes no one wait, though
//! it still waits for others and still moves the lock's line
//! (`lock_handoff`, cacheline.rs).
//!
//! The scheduler runs one CPU's slice at a time, each op of a slice at
//! once, the CPUs in step to within `QUANTUM_NS` (sched/rq.rs), so the
//! holds of a slice are known whole when the next CPU's slice runs over
//! the same stretch of time. A lock taken inside another CPU's hold
//! waits until that hold's end (and any hold that follows on from it).
//! A hold that another CPU took inside this one's while its slice ran
//! first, not seeing this one's hold yet, owed a wait until this hold's
//! end: this CPU pays it at its release instead.
//!
//! Waiters are served in the order they came (the MCS queue: first come,
//! first served). Each hold keeps when its CPU queued, so a CPU whose
//! slice runs later waits only for the holds of CPUs that queued before
//! it; a hold granted to a CPU that queued after it (its slice ran
//! first, not seeing this one) is one this CPU goes ahead of: it takes
//! the lock where that hold began, and the delay it causes that hold is
//! owed and paid at its release, as above. At two CPUs it happens when a
//! CPU releases the lock and takes it again while the other waits: the
//! waiter goes first (qspinlock's fast path fails while a waiter is
//! queued or pending).
//!
//! Simplifications: an owed wait lands on the CPU whose slice runs
//! second, whichever came first, so which CPU pays may not be the
//! kernel's; and it is owed for the holds this one overlaps, not for
//! those after them that the kernel's queue would shift as well, so with
//! many CPUs in a chain of holds the total falls short of the kernel's.
//!
//! With one CPU no other CPU can hold a lock, so nothing here runs: one
//! CPU's outputs do not depend on this file.

use crate::cacheline::Line;
use crate::cost_model::Fn;
use crate::kernel::Kernel;

/// One hold of a lock by a CPU, from its taking to its release.
#[derive(Clone, Copy, Debug)]
pub struct Hold {
    cpu: u32,
    /// When the CPU queued: its place in the lock's queue.
    queued: u64,
    start: u64,
    end: u64,
}

/// A lock's recent holds, with bounds that spare most takings and
/// releases a scan: a query past every hold's end (start) finds none.
/// Holds that ended by the scheduler's horizon can make no one wait and
/// are retired, once per horizon.
#[derive(Clone, Debug, Default)]
pub struct Holds {
    v: Vec<Hold>,
    /// No hold in `v` ends (starts) later.
    max_end: u64,
    max_start: u64,
    /// No hold in `v` queued later.
    max_queued: u64,
    /// The horizon `v` was last retired at.
    retired: u64,
}

impl Holds {
    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    fn retire(&mut self, horizon: u64) {
        if self.retired == horizon {
            return;
        }
        self.retired = horizon;
        match self.max_end <= horizon {
            true => self.v.clear(),
            false => self.v.retain(|h| h.end > horizon),
        }
    }

    /// The end of the chain of holds covering `t` by other CPUs that
    /// queued by `queued` (`t` if none).
    fn until(&self, cpu: u32, queued: u64, t: u64) -> u64 {
        match self.max_end <= t {
            true => t,
            false => held_until(&self.v, cpu, queued, t),
        }
    }

    /// The waits other CPUs owed for `g`'s hold, from its start to `end`:
    /// for their holds taken inside it, and for those it went ahead of
    /// (granted by its start to a CPU that queued after it, and not over).
    fn owed(&self, cpu: u32, g: &SpinGuard, end: u64) -> u64 {
        let start = g.start;
        if self.max_start <= start && self.max_queued <= g.queued {
            return 0;
        }
        let ahead = |h: &Hold| h.queued > g.queued && start < h.end;
        self.v
            .iter()
            .filter(|h| h.cpu != cpu && h.start < end && (start < h.start || ahead(h)))
            .map(|h| end - h.start.max(start))
            .sum()
    }

    fn push(&mut self, h: Hold) {
        self.max_end = self.max_end.max(h.end);
        self.max_start = self.max_start.max(h.start);
        self.max_queued = self.max_queued.max(h.queued);
        self.v.push(h);
    }
}

/// A lock this CPU holds: what `spin_unlock` (a rwsem's `up_write`,
/// rwsem.rs) releases.
#[must_use = "a lock taken is released with spin_unlock or up_write"]
#[derive(Debug)]
pub struct SpinGuard {
    pub(crate) line: Line,
    /// When this CPU queued, and when it got the lock.
    queued: u64,
    start: u64,
    /// Where a wait for another CPU's hold is charged:
    /// `native_queued_spin_lock_slowpath`, `rwsem_down_write_slowpath`.
    slow: Fn,
}

impl Kernel {
    /// `spin_lock(lock)`: its line comes over from the CPU that last
    /// wrote it, then the CPU spins through any other CPU's hold covering
    /// now. None with one CPU (checked inline: one CPU's paths pay a
    /// compare).
    #[inline]
    pub fn spin_lock(&mut self, line: Line) -> Option<SpinGuard> {
        if self.cpus.len() == 1 {
            return None;
        }
        Some(self.spin_lock_smp(line))
    }

    /// `spin_lock` and `spin_unlock` around work priced outside the
    /// section (an empty hold): the line comes over, and another CPU's
    /// hold is waited out, but no one waits for this one.
    #[inline]
    pub fn spin_lock_empty(&mut self, line: Line) {
        let lock = self.spin_lock(line);
        self.spin_unlock(lock);
    }

    /// Keeps `held` if it is `line`'s lock, else releases it and takes
    /// `line`'s: a batch taking the lock of each item's owner in turn
    /// (`folio_lruvec_relock_irq`, `swap_info_get_cont`).
    #[inline]
    pub fn spin_lock_switch(&mut self, held: &mut Option<SpinGuard>, line: Line) {
        if held.as_ref().is_some_and(|g| g.line == line) {
            return;
        }
        self.spin_unlock(held.take());
        *held = self.spin_lock(line);
    }

    /// `spin_lock` again right after this CPU released `line` to do work
    /// the kernel does outside the lock (or after its section): the
    /// line is still in this CPU's cache.
    #[inline]
    pub fn spin_relock(&mut self, line: Line) -> Option<SpinGuard> {
        if self.cpus.len() == 1 {
            return None;
        }
        Some(self.wait_holds(line, Fn::QueuedSpinLockSlowpath))
    }

    #[inline(never)]
    fn spin_lock_smp(&mut self, line: Line) -> SpinGuard {
        self.write_shared_line(line, Fn::RawSpinLock, self.costs.lock_handoff);
        self.wait_holds(line, Fn::QueuedSpinLockSlowpath)
    }

    /// Queues now and spins through the holds covering now of CPUs that
    /// queued before, charged to `slow`; the hold starts at their end.
    pub(crate) fn wait_holds(&mut self, line: Line, slow: Fn) -> SpinGuard {
        let now = self.now();
        let until = self.held_until(line, now);
        if until > now {
            // Spinning until the holder's release: elapsed time, which a
            // busy SMT sibling does not stretch (charge_wall).
            self.charge_wall(slow, until - now);
        }
        SpinGuard {
            line,
            queued: now,
            start: self.now(),
            slow,
        }
    }

    /// The end of the chain of other CPUs' holds of `line` covering now
    /// (now if none), whenever they queued: what a trylock or a reader,
    /// which keeps no place in the queue here, meets.
    pub(crate) fn held_by_others_until(&mut self, line: Line) -> u64 {
        self.held_until(line, u64::MAX)
    }

    /// The end of the chain of holds of `line` covering now by other CPUs
    /// that queued by `queued`, the holds no clock can meet any more
    /// retired first.
    fn held_until(&mut self, line: Line, queued: u64) -> u64 {
        let (cpu, now) = (self.cur_cpu as u32, self.now());
        let horizon = self.lines.horizon;
        let holds = &mut self.lines.get(line).holds;
        holds.retire(horizon);
        holds.until(cpu, queued, now)
    }

    /// `spin_unlock(lock)`: the hold ends now. Holds other CPUs took
    /// inside it (their slices ran first) owed a wait until now: it is
    /// paid here.
    #[inline]
    pub fn spin_unlock(&mut self, guard: Option<SpinGuard>) {
        if let Some(g) = guard {
            self.release_hold(g);
        }
    }

    /// The hold ends now: kept for the CPUs whose slices run after this
    /// one's, and the waits owed for holds taken inside it paid.
    #[inline(never)]
    pub(crate) fn release_hold(&mut self, g: SpinGuard) {
        let (cpu, end) = (self.cur_cpu as u32, self.now());
        if end == g.start {
            return;
        }
        let holds = &mut self.lines.get(g.line).holds;
        let owed = holds.owed(cpu, &g, end);
        holds.push(Hold {
            cpu,
            queued: g.queued,
            start: g.start,
            end,
        });
        if owed > 0 {
            self.charge_wall(g.slow, owed);
        }
    }
}

/// The end of the chain of holds covering `t` by other CPUs that queued
/// by `queued` (`t` if none).
fn held_until(holds: &[Hold], cpu: u32, queued: u64, mut t: u64) -> u64 {
    while let Some(h) = holds
        .iter()
        .find(|h| h.cpu != cpu && h.queued <= queued && h.start <= t && t < h.end)
    {
        t = h.end;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kernel::{test_at as at, test_kernel as kernel};

    const LOCK: Line = Line::LruLock(1);

    /// CPU `cpu` at `t` holds LOCK for `ns` of work.
    fn hold(k: &mut Kernel, cpu: usize, t: u64, ns: u64) {
        at(k, cpu, t);
        let g = k.spin_lock(LOCK);
        k.charge_cost(Fn::ShrinkInactiveList, ns);
        k.spin_unlock(g);
    }

    #[test]
    fn a_cpu_taking_a_lock_inside_another_cpus_hold_spins_to_its_end() {
        let mut k = kernel(2, "6.1");
        k.costs.lock_handoff = 0;
        hold(&mut k, 0, 1_000, 3_000);
        hold(&mut k, 1, 2_000, 500);
        // Waited 1,000 to 4,000 (2,000 ns), then held it 500.
        assert_eq!(k.now(), 4_500);
        // Chained: CPU 0 again inside CPU 1's hold (4,000..4,500).
        hold(&mut k, 0, 4_200, 100);
        assert_eq!(k.now(), 4_600);
    }

    #[test]
    fn a_hold_taken_inside_this_one_by_a_cpu_that_ran_first_is_paid_at_release() {
        let mut k = kernel(2, "6.1");
        k.costs.lock_handoff = 0;
        // CPU 0's slice ran first: it took the lock at 2,000 for 500.
        hold(&mut k, 0, 2_000, 500);
        // CPU 1 came first in time (1,000) and held it to 4,000: CPU 0
        // owed a wait of 2,000, paid by CPU 1 at its release.
        hold(&mut k, 1, 1_000, 3_000);
        assert_eq!(k.now(), 6_000);
    }

    #[test]
    fn waiters_are_served_in_the_order_they_queued() {
        let mut k = kernel(3, "6.1");
        k.costs.lock_handoff = 0;
        hold(&mut k, 0, 1_000, 10_000);
        // CPU 2 queued at 3,000: it waits for CPU 0 (to 11,000), holds
        // to 13,000.
        hold(&mut k, 2, 3_000, 2_000);
        assert_eq!(k.now(), 13_000);
        // CPU 1 queued first (2,000) but its slice runs last: it gets
        // the lock at CPU 0's release, ahead of CPU 2, holds it to 12,000
        // and pays the 1,000 it delayed CPU 2 by. Without the queue's
        // order it would wait for CPU 2 too and end at 14,000.
        hold(&mut k, 1, 2_000, 1_000);
        assert_eq!(k.now(), 13_000);
        let h = k.lines.get(LOCK).holds.v.last().copied().unwrap();
        assert_eq!(
            (h.cpu, h.queued, h.start, h.end),
            (1, 2_000, 11_000, 12_000)
        );
    }

    #[test]
    fn a_cpu_that_releases_and_takes_again_queues_behind_a_waiter() {
        let mut k = kernel(2, "6.1");
        k.costs.lock_handoff = 0;
        // CPU 0 holds 1,000..4,000, releases and takes it again at once
        // to 5,000 (qspinlock: its fast path fails while a waiter queues).
        hold(&mut k, 0, 1_000, 3_000);
        hold(&mut k, 0, 4_000, 1_000);
        // CPU 1, queued at 2,000, gets it at 4,000, and pays the 500 by
        // which CPU 0's second hold waited for it.
        hold(&mut k, 1, 2_000, 500);
        assert_eq!(k.now(), 5_000);
        // Queued again at 4,500, CPU 1 waits for CPU 0's second hold as
        // it was kept (to 5,000): the owed wait moved who pays, not it.
        hold(&mut k, 1, 4_500, 100);
        assert_eq!(k.now(), 5_100);
    }

    #[test]
    fn a_busy_smt_sibling_stretches_the_work_not_the_wait() {
        let mut k = kernel(2, "6.1");
        k.costs.lock_handoff = 0;
        hold(&mut k, 0, 1_000, 3_000);
        // CPU 1's sibling is busy: its work takes 2 / smt_throughput as
        // long, but its spin ends at CPU 0's release, 4,000.
        at(&mut k, 1, 2_000);
        k.set_sibling_busy(true);
        let g = k.spin_lock(LOCK);
        assert_eq!(k.now(), 4_000);
        k.charge_cost(Fn::ShrinkInactiveList, 1_300);
        let stretched = 1_300 * 2_000 / k.costs.smt_throughput;
        assert!((k.now() - 4_000).abs_diff(stretched) <= 1, "{}", k.now());
        k.spin_unlock(g);
    }

    #[test]
    fn its_own_holds_and_holds_before_the_horizon_make_no_one_wait() {
        let mut k = kernel(2, "6.1");
        k.costs.lock_handoff = 0;
        hold(&mut k, 0, 1_000, 3_000);
        hold(&mut k, 0, 2_000, 100);
        assert_eq!(k.now(), 2_100, "a CPU does not wait for itself");
        // Once no clock can be before 5,000, the holds are retired.
        k.lines.horizon = 5_000;
        hold(&mut k, 1, 5_000, 100);
        assert_eq!(k.lines.get(LOCK).holds.len(), 1);
        // Another lock is free.
        at(&mut k, 1, 1_500);
        let g = k.spin_lock(Line::LruLock(2));
        assert_eq!(k.now(), 1_500);
        k.spin_unlock(g);
    }

    #[test]
    fn a_batch_keeps_the_lock_it_holds_and_switches_at_another() {
        let mut k = kernel(2, "6.1");
        k.costs.lock_handoff = 0;
        hold(&mut k, 1, 1_000, 3_000);
        at(&mut k, 0, 5_000);
        let mut held = None;
        k.spin_lock_switch(&mut held, Line::LruLock(2));
        k.charge_cost(Fn::ShrinkInactiveList, 100);
        k.spin_lock_switch(&mut held, Line::LruLock(2));
        assert_eq!(held.as_ref().map(|g| g.start), Some(5_000), "kept");
        // Switching releases LruLock(2) at 5,100 and takes LOCK, whose
        // hold by CPU 1 ended at 4,000.
        k.spin_lock_switch(&mut held, LOCK);
        assert_eq!(
            held.as_ref().map(|g| (g.line, g.start)),
            Some((LOCK, 5_100))
        );
        k.spin_unlock(held);
        assert_eq!(k.lines.get(Line::LruLock(2)).holds.len(), 1);
    }

    #[test]
    fn one_cpu_takes_no_locks() {
        let mut k = kernel(1, "6.1");
        hold(&mut k, 0, 1_000, 3_000);
        assert!(k.spin_lock(LOCK).is_none());
        assert!(k.lines.get(LOCK).holds.is_empty());
    }
}

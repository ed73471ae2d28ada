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
//! end: this CPU pays it at its release instead. Simplification: the
//! wait lands on the CPU whose slice runs second whichever came first,
//! so at two CPUs the pair's total wait is the kernel's but which of the
//! two pays it may not be; with more than two waiters the queue's order
//! (MCS: first come, first served) is not kept, each waits for the holds
//! it meets.
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

    /// The end of the chain of other CPUs' holds covering `t` (`t` if
    /// none).
    fn until(&self, cpu: u32, t: u64) -> u64 {
        match self.max_end <= t {
            true => t,
            false => held_until(&self.v, cpu, t),
        }
    }

    /// The waits other CPUs owed for their holds taken inside `cpu`'s
    /// from `start` to `end`.
    fn owed(&self, cpu: u32, start: u64, end: u64) -> u64 {
        if self.max_start <= start {
            return 0;
        }
        self.v
            .iter()
            .filter(|h| h.cpu != cpu && start < h.start && h.start < end)
            .map(|h| end - h.start)
            .sum()
    }

    fn push(&mut self, h: Hold) {
        self.max_end = self.max_end.max(h.end);
        self.max_start = self.max_start.max(h.start);
        self.v.push(h);
    }
}

/// A lock this CPU holds: what `spin_unlock` (a rwsem's `up_write`,
/// rwsem.rs) releases.
#[must_use = "a lock taken is released with spin_unlock or up_write"]
#[derive(Debug)]
pub struct SpinGuard {
    pub(crate) line: Line,
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

    /// Spins through another CPU's holds covering now, charged to `slow`;
    /// the hold starts at their end.
    pub(crate) fn wait_holds(&mut self, line: Line, slow: Fn) -> SpinGuard {
        let (now, until) = (self.now(), self.held_by_others_until(line));
        if until > now {
            // Spinning until the holder's release: elapsed time, which a
            // busy SMT sibling does not stretch (charge_wall).
            self.charge_wall(slow, until - now);
        }
        SpinGuard {
            line,
            start: self.now(),
            slow,
        }
    }

    /// The end of the chain of other CPUs' holds of `line` covering now
    /// (now if none), the holds no clock can meet any more retired first.
    pub(crate) fn held_by_others_until(&mut self, line: Line) -> u64 {
        let (cpu, now) = (self.cur_cpu as u32, self.now());
        let horizon = self.lines.horizon;
        let holds = &mut self.lines.get(line).holds;
        holds.retire(horizon);
        holds.until(cpu, now)
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
        let owed = holds.owed(cpu, g.start, end);
        holds.push(Hold {
            cpu,
            start: g.start,
            end,
        });
        if owed > 0 {
            self.charge_wall(g.slow, owed);
        }
    }
}

/// The end of the chain of other CPUs' holds covering `t` (`t` if none).
fn held_until(holds: &[Hold], cpu: u32, mut t: u64) -> u64 {
    while let Some(h) = holds
        .iter()
        .find(|h| h.cpu != cpu && h.start <= t && t < h.end)
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

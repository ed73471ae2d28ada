//! Read-write semaphores between CPUs (kernel/locking/rwsem.c): the
//! anon_vma and i_mmap rwsems, which rmap walks take for read and a THP
//! split, a collapse, fork, munmap and mmap take for write (mm/rmap.rs).
//! mm->mmap_lock, whose readers are faults that sleep and retry, keeps
//! its own holds (mm/mmap_lock.rs).
//!
//! A write hold is kept as a spinlock's (spinlock.rs): from its taking to
//! its release, its length the simulated work done under it, on the
//! rwsem's cache line, which every taking and release writes (the count).
//! A writer that finds another CPU's write hold spins on the running
//! owner until its release (`rwsem_optimistic_spin`). A reader's
//! `down_read_trylock` fails inside another CPU's write hold: reclaim's
//! `folio_referenced` then gives up the walk (`rwc->contended`) and the
//! folio is kept. `down_read` sleeps until the hold ends
//! (`rwsem_down_read_slowpath`): time passes, charged as a sleep.
//!
//! Simplifications, only with more than one CPU. Read holds are not kept:
//! a walk holds the rwsem for one folio's PTEs (under a microsecond), so
//! a writer never waits for a reader in progress, and a trylock fails
//! only for a writer's hold, not for writers queued behind readers. As
//! with spinlocks, the CPU whose slice runs second sees the other's hold:
//! a reader whose slice ran first inside a writer's later hold succeeded.
//! The sleeping reader keeps its CPU (a split's microseconds).
//!
//! With one CPU no other CPU can hold a rwsem, so nothing here runs.

use crate::cacheline::Line;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::spinlock::SpinGuard;

impl Kernel {
    /// `down_write`: the count's line comes over, then the CPU spins
    /// through another CPU's write hold covering now.
    #[inline]
    pub fn down_write(&mut self, line: Line) -> Option<SpinGuard> {
        if self.cpus.len() == 1 {
            return None;
        }
        self.write_shared_line(line, Fn::DownWrite, self.costs.cacheline_transfer);
        Some(self.wait_holds(line, Fn::RwsemDownWriteSlowpath))
    }

    /// `up_write`: the count written again, the hold kept.
    #[inline]
    pub fn up_write(&mut self, guard: Option<SpinGuard>) {
        if let Some(g) = guard {
            self.write_shared_line(g.line, Fn::UpWrite, self.costs.cacheline_transfer);
            self.release_hold(g);
        }
    }

    /// `down_write` and `up_write` around work priced outside (in a
    /// bundle of the path around it): waits out another CPU's write hold
    /// and moves the line; no one waits for it.
    #[inline]
    pub fn down_write_empty(&mut self, line: Line) {
        let g = self.down_write(line);
        self.up_write(g);
    }

    /// `down_read_trylock`, its count's line written (charged to `f`):
    /// false inside another CPU's write hold.
    #[inline]
    pub fn down_read_trylock(&mut self, line: Line, f: Fn) -> bool {
        if self.cpus.len() == 1 {
            return true;
        }
        self.read_count(line, f) == self.now()
    }

    /// `down_read`, its count's line written (charged to `f`): asleep
    /// until another CPU's write hold covering now ends.
    #[inline]
    pub fn down_read(&mut self, line: Line, f: Fn) {
        if self.cpus.len() == 1 {
            return;
        }
        let until = self.read_count(line, f);
        let now = self.now();
        if until > now {
            self.charge_wall(Fn::RwsemDownReadSlowpath, until - now);
        }
    }

    /// A reader's write of the count's line (charged to `f`), then the
    /// end of the chain of other CPUs' write holds covering now (now if
    /// none).
    fn read_count(&mut self, line: Line, f: Fn) -> u64 {
        self.write_shared_line(line, f, self.costs.cacheline_transfer);
        self.held_by_others_until(line)
    }
}

#[cfg(test)]
mod tests {
    use crate::cacheline::Line;
    use crate::cost_model::Fn;
    use crate::kernel::{test_at as at, test_kernel as kernel, Kernel};

    const SEM: Line = Line::AnonVma(3);

    /// CPU `cpu` at `t` holds SEM for writing for `ns` of work.
    fn write_hold(k: &mut Kernel, cpu: usize, t: u64, ns: u64) {
        at(k, cpu, t);
        let g = k.down_write(SEM);
        k.charge_cost(Fn::SplitHugePage, ns);
        k.up_write(g);
    }

    #[test]
    fn a_trylock_inside_another_cpus_write_hold_fails() {
        let mut k = kernel(2, "6.1");
        k.costs.cacheline_transfer = 0;
        write_hold(&mut k, 0, 1_000, 3_000);
        at(&mut k, 1, 2_000);
        assert!(!k.down_read_trylock(SEM, Fn::DownReadTrylock));
        assert_eq!(k.now(), 2_000, "a failed trylock does not wait");
        at(&mut k, 1, 4_000);
        assert!(k.down_read_trylock(SEM, Fn::DownReadTrylock));
        // The writer's own reads are not blocked by its hold.
        at(&mut k, 0, 2_000);
        assert!(k.down_read_trylock(SEM, Fn::DownReadTrylock));
    }

    #[test]
    fn a_reader_sleeps_and_a_writer_spins_until_the_write_hold_ends() {
        let mut k = kernel(2, "6.1");
        k.costs.cacheline_transfer = 0;
        write_hold(&mut k, 0, 1_000, 3_000);
        at(&mut k, 1, 2_500);
        k.down_read(SEM, Fn::DownRead);
        assert_eq!(k.now(), 4_000);
        assert_eq!(k.fn_time_ns[Fn::RwsemDownReadSlowpath as usize], 1_500);
        // A writer waits, then holds it: a third CPU's write waits for both.
        write_hold(&mut k, 1, 3_000, 500);
        assert_eq!(k.now(), 4_500);
        assert_eq!(k.fn_time_ns[Fn::RwsemDownWriteSlowpath as usize], 1_000);
        // A reader inside CPU 1's hold (4,000..4,500) sleeps to its end.
        at(&mut k, 0, 4_200);
        k.down_read(SEM, Fn::DownRead);
        assert_eq!(k.now(), 4_500);
    }

    #[test]
    fn an_empty_write_hold_moves_the_line_and_makes_no_one_wait() {
        let mut k = kernel(2, "6.1");
        let ns = k.costs.cacheline_transfer;
        write_hold(&mut k, 0, 1_000, 0);
        at(&mut k, 1, 1_000);
        assert!(k.down_read_trylock(SEM, Fn::DownReadTrylock));
        assert_eq!(k.now(), 1_000 + ns, "the count's line came over");
    }

    #[test]
    fn one_cpu_never_waits_or_fails() {
        let mut k = kernel(1, "6.1");
        write_hold(&mut k, 0, 1_000, 3_000);
        at(&mut k, 0, 2_000);
        assert!(k.down_read_trylock(SEM, Fn::DownReadTrylock));
        k.down_read(SEM, Fn::DownRead);
        assert_eq!(k.now(), 2_000);
        assert!(k.lines.get(SEM).holds.is_empty());
    }
}

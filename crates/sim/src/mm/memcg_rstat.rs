//! The memcg statistics' rstat flush, as 6.1 has it (mm/memcontrol.c:
//! `memcg_rstat_updated`, `__mem_cgroup_flush_stats`,
//! `mem_cgroup_flush_stats{,_delayed}`, `flush_memcg_stats_dwork`,
//! `mem_cgroup_css_rstat_flush`).
//!
//! A memcg counter update (`__mod_memcg_state`, `__mod_memcg_lruvec_state`,
//! `__count_memcg_events`) changes only the updating CPU's own counter and
//! puts the memcg on that CPU's rstat "updated" tree. The memcg's
//! hierarchical counters, which `lruvec_page_state` and `memcg_page_state`
//! read (reclaim's inactive/active balance, its refault test, the
//! workingset's size, memory.stat), change only when a flush folds every
//! CPU's deltas up the tree. A flush comes
//! - from a reader that finds `stats_flush_threshold` above the number of
//!   CPUs (`mem_cgroup_flush_stats`: prepare_scan_count at each
//!   shrink_node, memory.stat): each CPU adds one to the threshold per
//!   64 pages or events it updated (`MEMCG_CHARGE_BATCH`);
//! - from workingset_refault only when, in addition, 4 s passed since the
//!   last flush (`mem_cgroup_flush_stats_delayed`);
//! - every 2 s from a deferrable work item (`flush_memcg_stats_dwork`),
//!   whatever the threshold;
//! - for one memcg's subtree from zswap's memory.zswap.max test
//!   (`cgroup_rstat_flush`), which leaves the ancestors' share pending and
//!   the threshold as it was.
//!
//! So reclaim reads counters up to 64 × (CPUs + 1) updates old: a few
//! passes at one CPU, whole rounds of reclaim at 96.
//!
//! The model keeps each memcg's own exact counters (`Memcg::stat`, the
//! sum of the kernel's per-CPU counters) and, here, what a flush leaves:
//! `prev` (the own counters the last flush of the memcg saw), `pending`
//! (its children's deltas not yet folded into it) and `state` (the
//! flushed hierarchical counters). Folding a memcg is then
//! `delta = pending + own − prev`, added to its state and to its
//! parent's pending, as `mem_cgroup_css_rstat_flush` does per CPU.
//!
//! Simplifications (each moves when a flush comes, never what it folds):
//! - the kernel's memcg updates the model does not make (slab objects'
//!   `mod_objcg_state`, kernel stacks, sockets, percpu, and the
//!   MEMCG_KMEM of zswap's page charges through the object stock; the
//!   root's page tables, charged to no memcg, are right) advance no
//!   threshold here: a flush may come a little later than the kernel's;
//! - `stats_flush_lock` is taken with a trylock: a CPU that finds another
//!   flushing skips its flush. The scheduler runs one CPU's slice at a
//!   time, so a flush is never found in progress;
//! - the periodic work starts with the run (the run's counters are
//!   flushed at its start, as `StatDiffs` are folded): its phase against
//!   the uptime of a real machine is unknowable; it moves only the
//!   2-second flushes.
//!
//! Releases: this is 6.1's mechanism (`Release::memcg_rstat_global_threshold`).
//! 5.10 (per-CPU batches of 32 per counter into atomics) and 6.12/7.3
//! (a threshold per memcg, ratelimited flushes) lag differently; with the
//! behaviour off, readers see the exact counters, as before.

use crate::kernel::Kernel;
use crate::vmstat::{Mc, MemcgStat, MC_NAMES, NR_MC_ITEMS};

/// `MEMCG_CHARGE_BATCH`.
const MEMCG_CHARGE_BATCH: u32 = 64;
/// `FLUSH_TIME`: 2 s (2 × HZ).
pub const FLUSH_TIME_NS: u64 = 2_000_000_000;

/// A CPU's `stats_updates`, and the memcg whose place on the CPU's
/// updated tree was checked last (NO_MEMCG: none since the last flush).
#[derive(Clone, Copy)]
struct RstatCpu {
    stats_updates: u32,
    last: u32,
}

const NO_MEMCG: u32 = u32::MAX;

/// The rstat side of every memcg's statistics.
#[derive(Default)]
pub struct MemcgRstat {
    /// Per CPU: `stats_updates`, and the memcg it last put on its tree
    /// (the updates that follow are mostly the same memcg's). Empty where
    /// the release has no such flush (`on`).
    pcpu: Vec<RstatCpu>,
    /// `stats_flush_threshold`.
    threshold: u32,
    /// `flush_next_time` (ns).
    flush_next_time: u64,
    /// When the periodic flush runs next.
    next_dwork: u64,
    /// Per memcg: the own counters its last flush folded.
    prev: Vec<MemcgStat>,
    /// Per memcg: its children's folded deltas, not yet its own.
    pending: Vec<MemcgStat>,
    /// Per memcg: the flushed hierarchical counters.
    pub state: Vec<MemcgStat>,
    /// Per CPU × memcg: on that CPU's updated tree.
    updated: Vec<bool>,
    /// Per memcg: on some CPU's tree.
    any_updated: Vec<bool>,
    /// The memcgs, children before parents (the flush's order).
    postorder: Vec<u16>,
    /// Bit per memory.stat item: a model update of it is a kernel update
    /// (`updates`).
    counts: u64,
}

impl MemcgRstat {
    /// The release flushes as 6.1 does; else nothing here runs and
    /// readers see exact counters.
    #[inline]
    pub fn on(&self) -> bool {
        !self.pcpu.is_empty()
    }
}

/// Which of the model's memory.stat items the release updates as memcg
/// counters: not pgscan and pgsteal, which 6.1's memory.stat prints as
/// the kswapd and direct sums, nor the items the release does not have
/// (the model counts 7.3's pswpin, say, on every preset and hides it).
fn updates(preset: mmsim_spec::Preset) -> u64 {
    const _: () = assert!(NR_MC_ITEMS <= 64, "one bit per item");
    let absent = crate::vmstat::memory_stat_absent(preset);
    let derived = [Mc::Pgscan, Mc::Pgsteal].map(|m| MC_NAMES[m as usize]);
    (MC_NAMES.iter().enumerate())
        .filter(|(_, n)| !absent.contains(n) && !derived.contains(n))
        .fold(0, |bits, (i, _)| bits | 1 << i)
}

impl Kernel {
    /// Sets rstat up for the booted memcgs and CPUs, everything flushed:
    /// boot's updates are not the run's.
    pub(crate) fn memcg_rstat_init(&mut self) {
        if !self.release.memcg_rstat_global_threshold {
            return; // nothing here runs: readers see exact counters
        }
        let n = self.memcgs.len();
        let depth = |mut m: u16| {
            let mut d = 0;
            while let Some(p) = self.memcgs[m as usize].parent {
                d += 1;
                m = p;
            }
            d
        };
        let mut postorder: Vec<u16> = (0..n as u16).collect();
        postorder.sort_by_key(|&m| std::cmp::Reverse(depth(m)));
        let mut state = vec![MemcgStat::default(); n];
        for &m in &postorder {
            state[m as usize].add_all(&self.memcgs[m as usize].stat);
            if let Some(p) = self.memcgs[m as usize].parent {
                let s = state[m as usize].clone();
                state[p as usize].add_all(&s);
            }
        }
        let r = &mut self.rstat;
        let idle = RstatCpu {
            stats_updates: 0,
            last: NO_MEMCG,
        };
        r.pcpu = vec![idle; self.cpus.len()];
        r.prev = self.memcgs.iter().map(|m| m.stat.clone()).collect();
        r.pending = vec![MemcgStat::default(); n];
        r.state = state;
        r.updated = vec![false; n * self.cpus.len()];
        r.any_updated = vec![false; n];
        r.postorder = postorder;
        r.counts = updates(self.preset);
        r.next_dwork = FLUSH_TIME_NS;
    }

    /// `memcg_rstat_updated` for a memory.stat update of `item` by `val`.
    #[inline(always)]
    pub(crate) fn memcg_stat_updated(&mut self, memcg: u16, item: Mc, val: i64) {
        if self.rstat.counts >> item as usize & 1 != 0 {
            self.memcg_rstat_updated(memcg, val);
        }
    }

    /// `memcg_rstat_updated`: the memcg (and its ancestors) on this CPU's
    /// updated tree; one more to the threshold per 64 of |val|. On every
    /// memcg counter update: inlined whole, the rare parts out of line.
    #[inline(always)]
    pub(crate) fn memcg_rstat_updated(&mut self, memcg: u16, val: i64) {
        let Some(c) = self.rstat.pcpu.get_mut(self.cur_cpu) else {
            return; // boot, or a release without it
        };
        c.stats_updates += val.unsigned_abs() as u32;
        let crossed = c.stats_updates > MEMCG_CHARGE_BATCH;
        if c.last != memcg as u32 {
            c.last = memcg as u32;
            self.cgroup_rstat_updated(memcg);
        }
        if crossed {
            self.stats_flush_threshold_add();
        }
    }

    /// The CPU's `stats_updates` passed MEMCG_CHARGE_BATCH: its share
    /// goes to `stats_flush_threshold` unless that is already past the
    /// CPUs.
    #[inline(never)]
    fn stats_flush_threshold_add(&mut self) {
        let r = &mut self.rstat;
        let x = std::mem::take(&mut r.pcpu[self.cur_cpu].stats_updates);
        if r.threshold <= r.pcpu.len() as u32 {
            r.threshold += x / MEMCG_CHARGE_BATCH;
            self.stats_flush_threshold_line();
        }
    }

    /// The atomic write of `stats_flush_threshold`: its line moves when
    /// another CPU wrote it last (nothing with one CPU).
    #[inline]
    fn stats_flush_threshold_line(&mut self) {
        let ns = self.costs.cacheline_transfer;
        let f = crate::cost_model::Fn::MemcgFlushStats;
        self.write_line(crate::cacheline::Line::StatsFlushThreshold, f, ns);
    }

    /// `cgroup_rstat_updated`: the memcg and every ancestor not yet there
    /// join this CPU's tree.
    #[inline(never)]
    fn cgroup_rstat_updated(&mut self, memcg: u16) {
        let n = self.memcgs.len();
        let mut cur = Some(memcg);
        while let Some(m) = cur {
            let slot = self.cur_cpu * n + m as usize;
            if self.rstat.updated[slot] {
                break;
            }
            self.rstat.updated[slot] = true;
            self.rstat.any_updated[m as usize] = true;
            cur = self.memcgs[m as usize].parent;
        }
    }

    /// `mem_cgroup_charge_statistics` (PGPGIN) or `memcg_account_kmem`
    /// of a charge: one update.
    #[inline]
    pub(crate) fn mem_cgroup_charge_statistics(&mut self, memcg: u16) {
        self.memcg_rstat_updated(memcg, 1);
    }

    /// `mem_cgroup_flush_stats`.
    pub fn mem_cgroup_flush_stats(&mut self) {
        if self.rstat.on() && self.rstat.threshold > self.cpus.len() as u32 {
            let pairs = self.mem_cgroup_flush_stats_locked();
            self.charge_rstat_flush(pairs);
        }
    }

    /// `mem_cgroup_flush_stats_delayed` (workingset_refault).
    pub(crate) fn mem_cgroup_flush_stats_delayed(&mut self) {
        if self.rstat.on() && self.now() > self.rstat.flush_next_time {
            self.mem_cgroup_flush_stats();
        }
    }

    /// `flush_memcg_stats_dwork`, when its time has come by `now` (a
    /// slice's start): it flushes whatever the threshold and queues itself
    /// 2 s on. A deferrable timer on an idle machine waits for a CPU to
    /// wake; then it runs at once.
    pub(crate) fn run_stats_flush_dwork(&mut self, now: u64) {
        if !self.rstat.on() || now < self.rstat.next_dwork {
            return;
        }
        let due = self.rstat.next_dwork;
        // A kworker's time on an unbound workqueue: not the tasks'.
        self.mem_cgroup_flush_stats_locked();
        // A clock at its end (a task asleep for ever) saturates.
        let next = due.saturating_add(FLUSH_TIME_NS);
        self.rstat.next_dwork = match next > now {
            true => next,
            false => now.saturating_add(FLUSH_TIME_NS),
        };
    }

    /// `__mem_cgroup_flush_stats`: the whole tree, and the threshold reset.
    fn mem_cgroup_flush_stats_locked(&mut self) -> u64 {
        self.rstat.flush_next_time = self.now().saturating_add(2 * FLUSH_TIME_NS);
        let pairs = self.cgroup_rstat_flush(None);
        self.rstat.threshold = 0;
        self.stats_flush_threshold_line();
        pairs
    }

    /// `cgroup_rstat_flush` of the whole tree (None) or of one memcg's
    /// subtree: every updated memcg in it folded, children first. The
    /// (memcg, CPU) pairs it folded.
    pub(crate) fn cgroup_rstat_flush(&mut self, root: Option<u16>) -> u64 {
        let n = self.memcgs.len();
        let cpus = self.cpus.len();
        let mut pairs = 0u64;
        for i in 0..n {
            let m = self.rstat.postorder[i];
            if !self.rstat.any_updated[m as usize]
                || root.is_some_and(|r| !self.is_descendant(m, r))
            {
                continue;
            }
            for c in 0..cpus {
                pairs += std::mem::take(&mut self.rstat.updated[c * n + m as usize]) as u64;
            }
            self.rstat.any_updated[m as usize] = false;
            self.mem_cgroup_css_rstat_flush(m);
        }
        // The trees lost memcgs: each CPU checks its next update's again.
        self.rstat.pcpu.iter_mut().for_each(|c| c.last = NO_MEMCG);
        pairs
    }

    /// `mem_cgroup_css_rstat_flush` of one memcg, all CPUs at once.
    fn mem_cgroup_css_rstat_flush(&mut self, m: u16) {
        let own = &self.memcgs[m as usize].stat;
        let r = &mut self.rstat;
        let mut delta = own.delta(&r.prev[m as usize]);
        delta.add_all(&r.pending[m as usize]);
        r.prev[m as usize] = own.clone();
        r.pending[m as usize] = MemcgStat::default();
        r.state[m as usize].add_all(&delta);
        if let Some(p) = self.memcgs[m as usize].parent {
            self.rstat.pending[p as usize].add_all(&delta);
        }
    }

    /// The flush's time: one fold per memcg and CPU it found updated.
    pub(crate) fn charge_rstat_flush(&mut self, pairs: u64) {
        let ns = pairs * self.costs.memcg_rstat_flush;
        self.charge_cost(crate::cost_model::Fn::MemcgFlushStats, ns);
    }

    /// `memcg_page_state`: a memcg's hierarchical counter as the last
    /// flush left it (exact without rstat).
    pub fn memcg_page_state(&self, memcg: u16, item: Mc) -> i64 {
        if self.rstat.on() {
            return self.rstat.state[memcg as usize].get(item);
        }
        self.memory_stat(memcg).get(item)
    }

    /// memory.stat as the run's end reads it: flushed. The kernel's
    /// reader flushes only past the threshold, but the runner's own work
    /// before its read (reaping the tasks, reading /proc, writing its
    /// report) makes memcg updates the model does not, and the recorded
    /// runs read exact counts (memory_high_throttle's anon is the same to
    /// the page in all three boots, 20 pages above what the threshold
    /// alone would have flushed). The flush is the reader's time, not the
    /// workload's.
    pub fn memory_stat_show(&mut self, memcg: u16) -> MemcgStat {
        if !self.rstat.on() {
            return self.memory_stat(memcg);
        }
        self.cgroup_rstat_flush(None);
        self.rstat.state[memcg as usize].clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{test_at as at, test_kernel, test_kernel_of};

    /// A 6.1 machine with one cgroup `g` (memcg 1).
    fn with_cgroup(cpus: u32, preset: &str) -> Kernel {
        test_kernel_of(&format!(
            "[machine]\nmemory = \"256M\"\ncpus = {cpus}\nkernel = \"{preset}\"\n\
             [cgroup.g]\n[task.t]\ncgroup = \"g\"\nsteps = []\n"
        ))
    }

    #[test]
    fn readers_see_the_last_flush_until_the_threshold_passes_the_cpus() {
        let mut k = with_cgroup(1, "6.1");
        at(&mut k, 0, 0);
        // 65 pages onto g's inactive anon list: one update of 65 passes
        // MEMCG_CHARGE_BATCH once (threshold 1, not above 1 CPU).
        k.memcg_stat(1, Mc::InactiveAnon, 65);
        assert_eq!(k.rstat.threshold, 1);
        k.mem_cgroup_flush_stats();
        assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 0, "not flushed");
        assert_eq!(k.memcg_page_state(0, Mc::InactiveAnon), 0);
        // 64 more one at a time: the threshold's second step is at the
        // 65th update after the reset of the per-CPU count.
        (0..64).for_each(|_| k.memcg_stat(1, Mc::InactiveAnon, 1));
        assert_eq!(k.rstat.threshold, 1);
        k.memcg_stat(1, Mc::InactiveAnon, 1);
        assert_eq!(k.rstat.threshold, 2);
        k.mem_cgroup_flush_stats();
        assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 130);
        assert_eq!(
            k.memcg_page_state(0, Mc::InactiveAnon),
            130,
            "the root sums its children"
        );
        assert_eq!(k.rstat.threshold, 0);
    }

    #[test]
    fn the_threshold_scales_with_the_cpus() {
        let mut k = with_cgroup(4, "6.1");
        for cpu in 0..4 {
            at(&mut k, cpu, 0);
            k.memcg_stat(1, Mc::Pgfault, 65);
        }
        k.mem_cgroup_flush_stats();
        assert_eq!(
            k.memcg_page_state(1, Mc::Pgfault),
            0,
            "4 steps: not above 4 CPUs"
        );
        k.memcg_stat(1, Mc::Pgfault, 65);
        k.mem_cgroup_flush_stats();
        assert_eq!(k.memcg_page_state(1, Mc::Pgfault), 325);
    }

    #[test]
    fn derived_counters_are_no_updates() {
        let mut k = with_cgroup(1, "6.1");
        k.memcg_stat(1, Mc::Pgscan, 1000);
        assert_eq!(k.rstat.threshold, 0);
        // 6.1 has no per-memcg pswpin (7.3's, hidden before).
        k.memcg_stat(1, Mc::Pswpin, 1000);
        assert_eq!(k.rstat.threshold, 0);
        k.memcg_stat(1, Mc::PgscanKswapd, 1000);
        assert_eq!(k.rstat.threshold, 15);
    }

    #[test]
    fn the_periodic_flush_runs_every_two_seconds_whatever_the_threshold() {
        let mut k = with_cgroup(1, "6.1");
        at(&mut k, 0, 0);
        k.memcg_stat(1, Mc::Anon, 3);
        k.run_stats_flush_dwork(FLUSH_TIME_NS - 1);
        assert_eq!(k.memcg_page_state(1, Mc::Anon), 0);
        k.run_stats_flush_dwork(FLUSH_TIME_NS);
        assert_eq!(k.memcg_page_state(1, Mc::Anon), 3);
        k.memcg_stat(1, Mc::Anon, 3);
        // Idle past two periods: one flush when a CPU wakes, the next 2 s on.
        k.run_stats_flush_dwork(5 * FLUSH_TIME_NS + 7);
        assert_eq!(k.memcg_page_state(1, Mc::Anon), 6);
        assert_eq!(k.rstat.next_dwork, 6 * FLUSH_TIME_NS + 7);
    }

    #[test]
    fn a_subtree_flush_leaves_the_ancestors_pending() {
        let mut k = with_cgroup(1, "6.1");
        k.memcg_stat(1, Mc::Zswap, 100);
        k.cgroup_rstat_flush(Some(1));
        assert_eq!(k.memcg_page_state(1, Mc::Zswap), 100);
        assert_eq!(
            k.memcg_page_state(0, Mc::Zswap),
            0,
            "the root's share waits"
        );
        assert_eq!(k.rstat.threshold, 1, "and so does the threshold");
        k.cgroup_rstat_flush(None);
        assert_eq!(k.memcg_page_state(0, Mc::Zswap), 100);
    }

    #[test]
    fn the_flush_costs_one_fold_per_memcg_and_cpu_updated() {
        let mut k = with_cgroup(2, "6.1");
        k.costs.memcg_rstat_flush = 1000;
        for cpu in 0..2 {
            at(&mut k, cpu, 0);
            k.memcg_stat(1, Mc::Pgfault, 100);
        }
        at(&mut k, 0, 0);
        k.memcg_stat(1, Mc::Pgfault, 100);
        assert_eq!(k.rstat.threshold, 3);
        let spent = |k: &Kernel| k.fn_time_ns[crate::cost_model::Fn::MemcgFlushStats as usize];
        let before = spent(&k);
        assert!(before > 0, "the threshold's line moved between the CPUs");
        k.mem_cgroup_flush_stats();
        // g and the root on both CPUs' trees; CPU 0 wrote the line last.
        assert_eq!(spent(&k) - before, 4000);
    }

    #[test]
    fn other_releases_read_exact_counters() {
        for preset in ["5.10", "6.12", "7.3"] {
            let mut k = test_kernel(1, preset);
            assert!(!k.rstat.on());
            k.memcg_stat(0, Mc::Anon, 5);
            assert_eq!(k.memcg_page_state(0, Mc::Anon), 5, "{preset}");
        }
    }
}

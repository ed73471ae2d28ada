//! The memcg statistics' rstat flush, as 6.1 has it (mm/memcontrol.c:
//! `memcg_rstat_updated`, `__mem_cgroup_flush_stats`,
//! `mem_cgroup_flush_stats{,_delayed}`, `flush_memcg_stats_dwork`,
//! `mem_cgroup_css_rstat_flush`), and as 6.8 changed it (6.12, 7.3).
//!
//! A memcg counter update (`__mod_memcg_state`, `__mod_memcg_lruvec_state`,
//! `__count_memcg_events`) changes only the updating CPU's own counter and
//! puts the memcg on that CPU's rstat "updated" tree. The memcg's
//! hierarchical counters, which `lruvec_page_state` and `memcg_page_state`
//! read (reclaim's inactive/active balance, its refault test, the
//! workingset's size, memory.stat), change only when a flush folds every
//! CPU's deltas up the tree. In 6.1 a flush comes
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
//! So 6.1's reclaim reads counters up to 64 × (CPUs + 1) updates old: a
//! few passes at one CPU, whole rounds of reclaim at 96.
//!
//! 6.8 (`features.memcg_rstat_per_memcg`: 6.12, 7.3) keeps the count per
//! memcg: an update adds |val| to a per-CPU count of the memcg and of
//! each ancestor, and a per-CPU count that reaches 64 moves into the
//! memcg's atomic `vmstats->stats_updates` unless that is already past
//! 64 × CPUs (7.3 stops the walk at the first such memcg). A reader's
//! `mem_cgroup_flush_stats(memcg)` flushes the memcg's subtree only past
//! that, and a flush zeroes the counts of every memcg it folds. Reclaim
//! (prepare_scan_count) and the refault flush through
//! `mem_cgroup_flush_stats_ratelimited`: only when the last flush of the
//! root is 4 s old, which the 2-second worker never lets happen on a busy
//! machine. So 6.12's reclaim reads counters as the worker last left
//! them: up to 2 s old whatever the number of CPUs. Byte counters (zswap)
//! update in pages (`memcg_state_val_in_pages`).
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
//! - 6.1's `stats_flush_lock` is a trylock: a CPU that finds another
//!   flushing skips its flush. No hold is kept for it: a flush here folds
//!   and resets the threshold at its start, so a CPU whose slice runs
//!   later at a time inside it finds the threshold reset and skips, as
//!   the trylock makes it skip (one flush either way; only the skipping
//!   CPU's reads see the fold a little early). 6.8's flushers wait on
//!   `cgroup_rstat_lock` instead; the second then finds nothing updated
//!   and costs nothing here, its wait for the first's remainder not
//!   charged: that time is missing only where two flushes overlap, which
//!   from 6.8 only the worker, a reader of memory.stat and reclaim behind
//!   a late worker make;
//! - the periodic work starts with the run (the run's counters are
//!   flushed at its start, as `StatDiffs` are folded): its phase against
//!   the uptime of a real machine is unknowable; it moves only the
//!   2-second flushes.
//!
//! Releases: 5.10 batches each counter per CPU into atomics (32 pages a
//! CPU per counter), which is not modelled: without `release.
//! memcg_rstat_flush` (and the feature) readers see the exact counters.

use crate::cacheline::Line;
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
    /// Per CPU: `stats_updates` (6.1's), and the memcg it last put on its
    /// tree (the updates that follow are mostly the same memcg's). Empty
    /// where the release has no such flush (`on`).
    pcpu: Vec<RstatCpu>,
    /// `stats_flush_threshold` (6.1).
    threshold: u32,
    /// 6.8+: per CPU × memcg, the memcg's `vmstats_percpu->stats_updates`.
    memcg_pcpu_updates: Vec<u32>,
    /// 6.8+: per memcg, its `vmstats->stats_updates`.
    memcg_updates: Vec<u64>,
    /// When a ratelimited reader may flush again (ns): 6.1's
    /// `flush_next_time`, 4 s after any flush; 6.8's
    /// `flush_last_time` + 2 × FLUSH_TIME, 4 s after the root's.
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
    /// 5.10's per-CPU batches instead (mm/memcg_batch.rs): `state` holds
    /// the atomics, `residue` per CPU × memcg × item what each CPU holds
    /// back.
    pub(crate) batch: bool,
    pub(crate) residue: Vec<i32>,
}

impl MemcgRstat {
    /// The release flushes as 6.1 or 6.8 does; else nothing here runs and
    /// readers see exact counters.
    #[inline]
    pub fn on(&self) -> bool {
        !self.pcpu.is_empty()
    }

    /// Readers see `state` rather than the exact counters: a flush's
    /// (5.15 on) or 5.10's batches'.
    #[inline]
    pub fn lags(&self) -> bool {
        self.on() || self.batch
    }
}

/// Which of the model's memory.stat items the release updates as memcg
/// counters: not pgscan and pgsteal, which 6.1's memory.stat prints as
/// the kswapd and direct sums, nor the items the release does not have
/// (the model counts 7.3's pswpin, say, on every preset and hides it).
/// 5.10's batches (`batch`) keep those it does not print too: its
/// pgscan and pgsteal are the sums of the kswapd and direct events.
fn updates(preset: mmsim_spec::Preset, batch: bool) -> u64 {
    const _: () = assert!(NR_MC_ITEMS <= 64, "one bit per item");
    let absent = match batch {
        true => &[][..],
        false => crate::vmstat::memory_stat_absent(preset),
    };
    let derived = [Mc::Pgscan, Mc::Pgsteal].map(|m| MC_NAMES[m as usize]);
    (MC_NAMES.iter().enumerate())
        .filter(|(_, n)| !absent.contains(n) && !derived.contains(n))
        .fold(0, |bits, (i, _)| bits | 1 << i)
}

/// 6.8+'s `memcg_state_val_in_pages` of a byte counter's update: whole
/// pages, at least one. (6.12 rounds a negative one up instead, which
/// differs only past a page: a zswap entry is always less.)
fn memcg_state_val_in_pages(val: i64) -> i64 {
    let res = (val.unsigned_abs() / mmsim_spec::units::PAGE_SIZE).max(1) as i64;
    match val {
        0 => 0,
        v if v < 0 => -res,
        _ => res,
    }
}

impl Kernel {
    /// Sets rstat up for the booted memcgs and CPUs, everything flushed:
    /// boot's updates are not the run's.
    pub(crate) fn memcg_rstat_init(&mut self) {
        let per_memcg = self.features.memcg_rstat_per_memcg;
        let batch = self.release.memcg_stat_percpu_batch;
        if !self.release.memcg_rstat_flush && !per_memcg && !batch {
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
        if !self.release.memcg_rstat_flush && !per_memcg {
            self.rstat.counts = updates(self.preset, true);
            self.rstat.state = state;
            return self.memcg_batch_init();
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
        r.counts = updates(self.preset, false);
        // The worker's last run was `phase` before the workload's start.
        let phase = self.stats_flush_phase;
        r.next_dwork = FLUSH_TIME_NS - phase;
        if per_memcg {
            r.memcg_pcpu_updates = vec![0; n * self.cpus.len()];
            r.memcg_updates = vec![0; n];
            // That flush of the root was its last (flush_last_time).
            r.flush_next_time = 2 * FLUSH_TIME_NS - phase;
        }
    }

    /// `memcg_rstat_updated` for a memory.stat update of `item` by `val`.
    /// 6.1's inline; 5.10's and 6.8's out of line.
    #[inline(always)]
    pub(crate) fn memcg_stat_updated(&mut self, memcg: u16, item: Mc, val: i64) {
        if self.rstat.counts >> item as usize & 1 != 0 {
            match self.rstat.batch || self.features.memcg_rstat_per_memcg {
                false => self.memcg_rstat_updated(memcg, val),
                true => self.memcg_stat_updated_other(memcg, item, val),
            }
        }
    }

    /// 5.10's batches, or 6.8's rstat with a byte counter in pages (6.1
    /// counts its bytes).
    #[inline(never)]
    fn memcg_stat_updated_other(&mut self, memcg: u16, item: Mc, val: i64) {
        if self.rstat.batch {
            return self.memcg_stat_batched(memcg, item, val);
        }
        let val = match item == Mc::Zswap {
            true => memcg_state_val_in_pages(val),
            false => val,
        };
        self.memcg_rstat_updated(memcg, val);
    }

    /// `memcg_rstat_updated`: the memcg (and its ancestors) on this CPU's
    /// updated tree; one more to the threshold per 64 of |val|. On every
    /// memcg counter update: inlined whole, the rare parts out of line.
    #[inline(always)]
    pub(crate) fn memcg_rstat_updated(&mut self, memcg: u16, val: i64) {
        let per_memcg = self.features.memcg_rstat_per_memcg;
        let Some(c) = self.rstat.pcpu.get_mut(self.cur_cpu) else {
            return; // boot, or a release without it
        };
        let val = u32::try_from(val.unsigned_abs()).unwrap_or(u32::MAX);
        // 6.1's per-CPU count (6.8 keeps one per memcg instead, and this
        // one, never reset there, saturates unread).
        c.stats_updates = c.stats_updates.saturating_add(val);
        let crossed = c.stats_updates > MEMCG_CHARGE_BATCH;
        if c.last != memcg as u32 {
            c.last = memcg as u32;
            self.cgroup_rstat_updated(memcg);
        }
        if per_memcg {
            self.memcg_stats_updates_add(memcg, val);
        } else if crossed {
            self.stats_flush_threshold_add();
        }
    }

    /// 6.8's part of `memcg_rstat_updated`: |val| to this CPU's count of
    /// the memcg and of each ancestor; a count that reaches 64 moves into
    /// the memcg's `stats_updates` unless that is past its threshold
    /// already (7.3 stops there: the ancestors are past theirs too).
    #[inline(never)]
    fn memcg_stats_updates_add(&mut self, memcg: u16, val: u32) {
        let n = self.memcgs.len();
        let mut cur = Some(memcg);
        while let Some(m) = cur {
            let flushable = self.memcg_vmstats_needs_flush(m);
            if flushable && self.release.memcg_rstat_updated_stops_when_flushable {
                break;
            }
            let slot = &mut self.rstat.memcg_pcpu_updates[self.cur_cpu * n + m as usize];
            *slot = slot.saturating_add(val);
            if *slot >= MEMCG_CHARGE_BATCH {
                let x = std::mem::take(slot) as u64;
                if !flushable {
                    self.rstat.memcg_updates[m as usize] += x;
                    self.rstat_count_line(Line::MemcgStatsUpdates(m));
                }
            }
            cur = self.memcgs[m as usize].parent;
        }
    }

    /// `memcg_vmstats_needs_flush`: the memcg's count past 64 × CPUs.
    fn memcg_vmstats_needs_flush(&self, memcg: u16) -> bool {
        let limit = MEMCG_CHARGE_BATCH as u64 * self.cpus.len() as u64;
        self.rstat.memcg_updates[memcg as usize] > limit
    }

    /// An atomic write of a flush count (6.1's `stats_flush_threshold`,
    /// a memcg's 6.8 `stats_updates`): its line moves when another CPU
    /// wrote it last (nothing with one CPU).
    #[inline]
    fn rstat_count_line(&mut self, line: Line) {
        let ns = self.costs.cacheline_transfer;
        self.write_line(line, crate::cost_model::Fn::MemcgFlushStats, ns);
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
            self.rstat_count_line(Line::StatsFlushThreshold);
        }
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

    /// `mem_cgroup_flush_stats`: 6.1's flushes the whole tree once the
    /// global threshold passes the CPUs (it takes no memcg); 6.8's
    /// flushes `memcg`'s subtree once that memcg's count passes its
    /// threshold.
    pub fn mem_cgroup_flush_stats(&mut self, memcg: u16) {
        if !self.rstat.on() {
            return;
        }
        let pairs = match self.features.memcg_rstat_per_memcg {
            true if self.memcg_vmstats_needs_flush(memcg) => self.do_flush_stats(memcg),
            false if self.rstat.threshold > self.cpus.len() as u32 => {
                self.mem_cgroup_flush_stats_locked()
            }
            _ => return,
        };
        self.charge_rstat_flush(pairs);
    }

    /// `mem_cgroup_flush_stats_ratelimited` (6.1's
    /// `mem_cgroup_flush_stats_delayed`): a flush only 4 s after the last
    /// (6.1: any flush; 6.8: the root's).
    pub(crate) fn mem_cgroup_flush_stats_ratelimited(&mut self, memcg: u16) {
        if self.rstat.on() && self.now() > self.rstat.flush_next_time {
            self.mem_cgroup_flush_stats(memcg);
        }
    }

    /// 6.8's `do_flush_stats`: `memcg`'s subtree, whatever its count; a
    /// flush of the root sets `flush_last_time`.
    fn do_flush_stats(&mut self, memcg: u16) -> u64 {
        if memcg == crate::mm::memcontrol::ROOT_MEMCG {
            self.rstat.flush_next_time = self.now().saturating_add(2 * FLUSH_TIME_NS);
            return self.cgroup_rstat_flush(None);
        }
        self.cgroup_rstat_flush(Some(memcg))
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
        match self.features.memcg_rstat_per_memcg {
            true => self.do_flush_stats(crate::mm::memcontrol::ROOT_MEMCG),
            false => self.mem_cgroup_flush_stats_locked(),
        };
        // It ran at `now`, whichever CPU's clock the kernel's is at.
        self.rstat.flush_next_time = now.saturating_add(2 * FLUSH_TIME_NS);
        // A clock at its end (a task asleep for ever) saturates.
        let next = due.saturating_add(FLUSH_TIME_NS);
        self.rstat.next_dwork = match next > now {
            true => next,
            false => now.saturating_add(FLUSH_TIME_NS),
        };
    }

    /// 6.1's `__mem_cgroup_flush_stats`: the whole tree, and the
    /// threshold reset.
    fn mem_cgroup_flush_stats_locked(&mut self) -> u64 {
        self.rstat.flush_next_time = self.now().saturating_add(2 * FLUSH_TIME_NS);
        let pairs = self.cgroup_rstat_flush(None);
        self.rstat.threshold = 0;
        self.rstat_count_line(Line::StatsFlushThreshold);
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
                let on_tree = std::mem::take(&mut self.rstat.updated[c * n + m as usize]);
                if on_tree && self.features.memcg_rstat_per_memcg {
                    // 6.8: the fold on this CPU zeroes its count of m.
                    self.rstat.memcg_pcpu_updates[c * n + m as usize] = 0;
                }
                pairs += on_tree as u64;
            }
            self.rstat.any_updated[m as usize] = false;
            if let Some(u) = self.rstat.memcg_updates.get_mut(m as usize) {
                *u = 0; // 6.8: and the memcg's
            }
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
        if self.rstat.lags() {
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
        if self.rstat.batch {
            return self.memory_stat_batched(memcg); // 5.10: the atomics
        }
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
        k.mem_cgroup_flush_stats(0);
        assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 0, "not flushed");
        assert_eq!(k.memcg_page_state(0, Mc::InactiveAnon), 0);
        // 64 more one at a time: the threshold's second step is at the
        // 65th update after the reset of the per-CPU count.
        (0..64).for_each(|_| k.memcg_stat(1, Mc::InactiveAnon, 1));
        assert_eq!(k.rstat.threshold, 1);
        k.memcg_stat(1, Mc::InactiveAnon, 1);
        assert_eq!(k.rstat.threshold, 2);
        k.mem_cgroup_flush_stats(0);
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
        k.mem_cgroup_flush_stats(0);
        assert_eq!(
            k.memcg_page_state(1, Mc::Pgfault),
            0,
            "4 steps: not above 4 CPUs"
        );
        k.memcg_stat(1, Mc::Pgfault, 65);
        k.mem_cgroup_flush_stats(0);
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
    fn the_workers_phase_brings_its_first_flush_forward() {
        // machine.stats_flush_phase: the worker last ran that long before
        // the workload's start, so its first flush is that much earlier;
        // 6.8's ratelimit counts from that flush too.
        for (preset, per_memcg) in [("6.1", false), ("6.12", true)] {
            let mut k = test_kernel_of(&format!(
                "[machine]\nmemory = \"256M\"\nkernel = \"{preset}\"\nstats_flush_phase = \"1500ms\"\n\
                 [cgroup.g]\n[task.t]\ncgroup = \"g\"\nsteps = []\n"
            ));
            assert_eq!(k.rstat.next_dwork, FLUSH_TIME_NS / 4, "{preset}");
            if per_memcg {
                assert_eq!(k.rstat.flush_next_time, 2 * FLUSH_TIME_NS - 1_500_000_000);
            }
            at(&mut k, 0, 0);
            k.memcg_stat(1, Mc::Anon, 3);
            k.run_stats_flush_dwork(FLUSH_TIME_NS / 4 - 1);
            assert_eq!(k.memcg_page_state(1, Mc::Anon), 0, "{preset}");
            k.run_stats_flush_dwork(FLUSH_TIME_NS / 4);
            assert_eq!(k.memcg_page_state(1, Mc::Anon), 3, "{preset}");
        }
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
        k.mem_cgroup_flush_stats(0);
        // g and the root on both CPUs' trees; CPU 0 wrote the line last.
        assert_eq!(spent(&k) - before, 4000);
    }

    #[test]
    fn five_ten_never_flushes() {
        let k = test_kernel(1, "5.10");
        assert!(!k.rstat.on() && k.rstat.lags(), "5.10 batches instead");
    }

    /// A machine of `preset` with two sibling cgroups, a (1) and b (2).
    fn with_siblings(cpus: u32, preset: &str) -> Kernel {
        let mut k = test_kernel_of(&format!(
            "[machine]\nmemory = \"256M\"\ncpus = {cpus}\nkernel = \"{preset}\"\n\
             [cgroup.a]\n[cgroup.b]\n[task.t]\ncgroup = \"a\"\nsteps = []\n"
        ));
        at(&mut k, 0, 0);
        k
    }

    #[test]
    fn from_6_8_a_memcg_flushes_past_its_own_threshold_only() {
        for preset in ["6.12", "7.3"] {
            let mut k = with_siblings(2, preset);
            assert!(k.rstat.on() && k.features.memcg_rstat_per_memcg);
            // 65 pages: CPU 0's count of a and of the root reach 64 and
            // move on; 65 is not past 64 × 2 CPUs.
            k.memcg_stat(1, Mc::InactiveAnon, 65);
            assert_eq!(k.rstat.memcg_updates, [65, 65, 0], "{preset}");
            k.mem_cgroup_flush_stats(1);
            assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 0, "{preset}");
            // 63 on CPU 1 stay in its own count; 64 more on CPU 0 pass.
            at(&mut k, 1, 0);
            k.memcg_stat(1, Mc::InactiveAnon, 63);
            at(&mut k, 0, 0);
            k.memcg_stat(1, Mc::InactiveAnon, 64);
            assert_eq!(k.rstat.memcg_updates, [129, 129, 0], "{preset}");
            // b's reader flushes nothing: its own count is 0.
            k.mem_cgroup_flush_stats(2);
            assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 0, "{preset}");
            // a's flushes a's subtree (CPU 1's 63 included), not the root.
            k.mem_cgroup_flush_stats(1);
            assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 192, "{preset}");
            assert_eq!(k.memcg_page_state(0, Mc::InactiveAnon), 0, "{preset}");
            assert_eq!(k.rstat.memcg_updates, [129, 0, 0], "{preset}");
            // Each CPU's count of a was zeroed by its fold; the root's not.
            assert_eq!(k.rstat.memcg_pcpu_updates, [0, 0, 0, 63, 0, 0], "{preset}");
            k.mem_cgroup_flush_stats(0);
            assert_eq!(k.memcg_page_state(0, Mc::InactiveAnon), 192, "{preset}");
            assert_eq!(k.rstat.memcg_updates, [0, 0, 0], "{preset}");
        }
    }

    #[test]
    fn from_6_8_reclaim_and_refaults_flush_only_when_the_worker_is_late() {
        let mut k = with_siblings(1, "6.12");
        k.memcg_stat(1, Mc::Anon, 100);
        assert!(k.memcg_vmstats_needs_flush(0));
        // Boot flushed the root at 0: nothing before 4 s.
        at(&mut k, 0, 2 * FLUSH_TIME_NS);
        k.mem_cgroup_flush_stats_ratelimited(0);
        assert_eq!(k.memcg_page_state(1, Mc::Anon), 0);
        // The worker flushes at 2 s whatever the counts, and restarts the
        // 4 s.
        k.run_stats_flush_dwork(FLUSH_TIME_NS);
        assert_eq!(k.memcg_page_state(1, Mc::Anon), 100);
        k.memcg_stat(1, Mc::Anon, 100);
        at(&mut k, 0, 2 * FLUSH_TIME_NS + 1);
        k.mem_cgroup_flush_stats_ratelimited(0);
        assert_eq!(k.memcg_page_state(1, Mc::Anon), 100, "4 s after 2 s");
        at(&mut k, 0, 3 * FLUSH_TIME_NS + 1);
        k.mem_cgroup_flush_stats_ratelimited(1);
        assert_eq!(k.memcg_page_state(1, Mc::Anon), 200);
        // A flush of a alone does not restart the 4 s: the root's does.
        k.memcg_stat(1, Mc::Anon, 100);
        k.mem_cgroup_flush_stats_ratelimited(0);
        assert_eq!(k.memcg_page_state(0, Mc::Anon), 300);
        k.memcg_stat(1, Mc::Anon, 100);
        k.mem_cgroup_flush_stats_ratelimited(0);
        assert_eq!(
            k.memcg_page_state(0, Mc::Anon),
            300,
            "the root's flush restarted it"
        );
    }

    #[test]
    fn seven_three_stops_at_a_memcg_past_its_threshold() {
        for (preset, pcpu_a) in [("6.12", 10), ("7.3", 0)] {
            let mut k = with_siblings(1, preset);
            k.memcg_stat(1, Mc::Anon, 70);
            assert!(k.memcg_vmstats_needs_flush(1));
            k.memcg_stat(1, Mc::Anon, 10);
            assert_eq!(k.rstat.memcg_pcpu_updates[1], pcpu_a, "{preset}");
            assert_eq!(k.rstat.memcg_updates, [70, 70, 0], "{preset}");
        }
    }

    #[test]
    fn from_6_8_byte_counters_update_in_pages() {
        let mut k = with_siblings(1, "6.12");
        k.memcg_stat(1, Mc::Zswap, 2000);
        k.memcg_stat(1, Mc::Zswap, -2000);
        assert_eq!(k.rstat.memcg_pcpu_updates[1], 2, "a page each way");
        let mut k = with_siblings(1, "6.1");
        k.memcg_stat(1, Mc::Zswap, 2000);
        assert_eq!(k.rstat.threshold, 31, "6.1 counts the bytes");
        assert_eq!(memcg_state_val_in_pages(-9000), -2);
        assert_eq!(memcg_state_val_in_pages(0), 0);
    }
}

//! vmstat.c's per-CPU differentials. A node or zone gauge (nr_mapped, an
//! LRU list's size, nr_free_pages, ...) changes first in the updating
//! CPU's own `s8` differential, and reaches the shared counters only when
//! the differential passes the CPU's `stat_threshold`: then the whole
//! differential is added to the node's (or zone's) `vm_stat` and to the
//! global `vm_node_stat` (`vm_zone_stat`), two atomics on cache lines
//! every CPU writes (`__mod_node_page_state`, `__mod_zone_page_state`).
//! Such a fold moves both lines when another CPU folded into them last
//! (cacheline.rs).
//!
//! The model's counters (`Kernel::vm`) stay exact: /proc/vmstat's reader
//! sees them as the kernel's would after every differential was folded,
//! and the oracle reads them after the workload ends. Only the folds'
//! cache-line transfers are new, and one CPU never moves a line, so the
//! differentials are kept only with more than one CPU.
//!
//! Every update the model makes is of the `mod` kind in 6.1
//! (`__mod_lruvec_state`, `__lruvec_stat_mod_folio`, `mod_node_page_state`,
//! `__mod_zone_page_state`): a fold empties the differential. The
//! `inc`/`dec` kind's overstep (the differential left at -t/2) is for
//! counters the model does not keep (NR_ZSPAGES among them).
//!
//! Not modelled: `vmstat_update`'s fold of a CPU's differentials once a
//! second and `quiet_vmstat`'s when it goes idle (each empties them, so
//! the next fold at the threshold comes later; they write the same lines
//! a few times a second); the memcg side of an lruvec update
//! (`memcg_rstat_updated`'s `stats_flush_threshold`, written once per 64
//! updates of a CPU until a flush); the item layout of releases other
//! than 6.1 (which items share a line: a few move by one place).

use super::page_alloc::{WMARK_LOW, WMARK_MIN};
use crate::cacheline::Line;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::vmstat::Vm;

/// `NR_VM_NODE_STAT_ITEMS` in Debian's 6.1 (CONFIG_NUMA_BALANCING adds
/// two after NR_SWAPCACHE; CONFIG_SHADOW_CALL_STACK is off on x86).
const NR_NODE_ITEMS: usize = 43;
/// `NR_VM_ZONE_STAT_ITEMS` (with CONFIG_ZSMALLOC).
const NR_ZONE_ITEMS: usize = 11;
/// `atomic_long_t`s per 64-byte line.
const PER_LINE: u16 = 8;
/// The THP gauges the model keeps in THPs count pages in the kernel.
const HPAGE_PMD_NR: i64 = 512;

/// The model's gauge as 6.1's `enum node_stat_item` (its index), or None.
fn node_item(item: Vm) -> Option<u16> {
    Some(match item {
        Vm::NrInactiveAnon => 0,
        Vm::NrActiveAnon => 1,
        Vm::NrInactiveFile => 2,
        Vm::NrActiveFile => 3,
        Vm::NrUnevictable => 4,
        Vm::NrIsolatedAnon => 7,
        Vm::NrIsolatedFile => 8,
        Vm::WorkingsetRefaultAnon => 10,
        Vm::WorkingsetRefaultFile => 11,
        Vm::WorkingsetActivateAnon => 12,
        Vm::WorkingsetActivateFile => 13,
        Vm::WorkingsetRestoreAnon => 14,
        Vm::WorkingsetRestoreFile => 15,
        Vm::NrAnonPages => 17,
        Vm::NrMapped => 18,
        Vm::NrFilePages => 19,
        Vm::NrDirty => 20,
        Vm::NrWriteback => 21,
        Vm::NrShmem => 23,
        Vm::NrShmemHugepages => 24,
        Vm::NrShmemPmdmapped => 25,
        Vm::NrAnonTransparentHugepages => 28,
        Vm::NrVmscanWrite => 29,
        Vm::NrVmscanImmediate => 30,
        Vm::NrDirtied => 31,
        Vm::NrWritten => 32,
        Vm::NrPageTablePages => 38,
        Vm::NrSwapcached => 40,
        _ => return None,
    })
}

/// The model's gauge as 6.1's `enum zone_stat_item`, or None.
fn zone_item(item: Vm) -> Option<u16> {
    Some(match item {
        Vm::NrFreePages => 0,
        Vm::NrZoneInactiveAnon => 1,
        Vm::NrZoneActiveAnon => 2,
        Vm::NrZoneInactiveFile => 3,
        Vm::NrZoneActiveFile => 4,
        Vm::NrZoneUnevictable => 5,
        _ => return None,
    })
}

/// Pages per unit of the model's gauge.
fn pages_per_unit(item: Vm) -> i64 {
    match item {
        Vm::NrShmemHugepages | Vm::NrShmemPmdmapped | Vm::NrAnonTransparentHugepages => {
            HPAGE_PMD_NR
        }
        _ => 1,
    }
}

/// Every CPU's differentials and thresholds (`per_cpu_nodestats`,
/// `per_cpu_zonestats`).
#[derive(Debug, Default)]
pub struct StatDiffs {
    /// Per CPU, per node item.
    node: Vec<[i8; NR_NODE_ITEMS]>,
    /// Per CPU and zone (`cpu * nr_zones + zone`), per zone item.
    zone: Vec<[i8; NR_ZONE_ITEMS]>,
    nr_zones: usize,
    /// The node's `stat_threshold`: its largest zone's normal threshold.
    node_threshold: i64,
    /// Each zone's `stat_threshold` now.
    zone_threshold: Vec<i64>,
    /// Each zone's normal threshold, and whether the drift its CPUs may
    /// hold could hide a breach of the min watermark
    /// (`percpu_drift_mark` set: kswapd then lowers its threshold).
    zone_normal: Vec<(i64, bool)>,
    /// kswapd has lowered the thresholds (it is awake).
    pressure: bool,
}

/// `calculate_normal_threshold`: 2 × fls(CPUs) × (1 + fls(managed in
/// 128 MiB units)), at most 125.
fn normal_threshold(cpus: usize, managed: u64) -> i64 {
    let fls = |x: u64| (u64::BITS - x.leading_zeros()) as i64;
    (2 * fls(cpus as u64) * (1 + fls(managed >> (27 - 12)))).min(125)
}

impl Kernel {
    /// `refresh_zone_stat_thresholds`, at boot (init_per_zone_wmark_min)
    /// with the watermarks and managed pages of then.
    pub(crate) fn refresh_zone_stat_thresholds(&mut self) {
        let cpus = self.cpus.len();
        if cpus == 1 {
            return;
        }
        let zone_normal: Vec<(i64, bool)> = (self.zones.iter())
            .map(|z| {
                let t = normal_threshold(cpus, z.managed);
                let tolerate = z.watermark[WMARK_LOW].saturating_sub(z.watermark[WMARK_MIN]);
                (t, z.managed > 0 && cpus as u64 * t as u64 > tolerate)
            })
            .collect();
        let nr_zones = zone_normal.len();
        let d = &mut self.stat_diffs;
        d.node_threshold = (self.zones.iter().zip(&zone_normal))
            .filter(|(z, _)| z.managed > 0)
            .map(|(_, &(t, _))| t)
            .max()
            .unwrap_or(0);
        d.zone_threshold = zone_normal.iter().map(|&(t, _)| t).collect();
        d.zone_normal = zone_normal;
        d.nr_zones = nr_zones;
        d.node = vec![[0; NR_NODE_ITEMS]; cpus];
        d.zone = vec![[0; NR_ZONE_ITEMS]; cpus * nr_zones];
    }

    /// `set_pgdat_percpu_threshold`: kswapd lowers the threshold of each
    /// zone with a drift mark to `calculate_pressure_threshold` when it
    /// wakes from a full sleep, and restores it before the next.
    pub(crate) fn set_pgdat_percpu_threshold(&mut self, pressure: bool) {
        let cpus = self.cpus.len() as u64;
        if cpus == 1 || self.stat_diffs.pressure == pressure {
            return;
        }
        self.stat_diffs.pressure = pressure;
        for (zi, z) in self.zones.iter().enumerate() {
            let (normal, drift_mark) = self.stat_diffs.zone_normal[zi];
            if !drift_mark {
                continue;
            }
            let distance = z.watermark[WMARK_LOW].saturating_sub(z.watermark[WMARK_MIN]);
            self.stat_diffs.zone_threshold[zi] = match pressure {
                true => ((distance / cpus).max(1) as i64).min(125),
                false => normal,
            };
        }
    }

    /// `__mod_node_page_state` (through `__mod_lruvec_state` and its
    /// kin): the node gauge `item` changes by `n`.
    #[inline]
    pub fn mod_node_page_state(&mut self, item: Vm, n: i64) {
        self.vm.add(item, n);
        self.node_stat_update(item, n);
    }

    /// The per-CPU side of `__mod_node_page_state` alone, for a caller
    /// that keeps the gauge itself (`update_lru_size`).
    #[inline]
    pub(crate) fn node_stat_update(&mut self, item: Vm, n: i64) {
        if self.cpus.len() > 1 {
            self.node_stat_diff(item, n);
        }
    }

    /// `__mod_zone_page_state`: zone `zi`'s gauge `item` changes by `n`.
    #[inline]
    pub fn mod_zone_page_state(&mut self, zi: usize, item: Vm, n: i64) {
        self.vm.add(item, n);
        self.zone_stat_update(zi, item, n);
    }

    /// The per-CPU side of `__mod_zone_page_state` alone, for a gauge the
    /// model keeps exact where the kernel updates it in a batch (the pcp
    /// refill's NR_FREE_PAGES: once per `rmqueue_bulk`).
    #[inline]
    pub(crate) fn zone_stat_update(&mut self, zi: usize, item: Vm, n: i64) {
        if self.cpus.len() > 1 {
            self.zone_stat_diff(zi, item, n);
        }
    }

    /// Empties every differential: the run starts with them folded (boot's
    /// updates are not the workload's).
    pub(crate) fn zero_stat_diffs(&mut self) {
        let d = &mut self.stat_diffs;
        d.node.iter_mut().for_each(|x| *x = [0; NR_NODE_ITEMS]);
        d.zone.iter_mut().for_each(|x| *x = [0; NR_ZONE_ITEMS]);
    }

    #[inline(never)]
    fn node_stat_diff(&mut self, item: Vm, n: i64) {
        let i = node_item(item).expect("a node gauge") as usize;
        let d = &mut self.stat_diffs;
        let Some(p) = d.node.get_mut(self.cur_cpu) else {
            return; // boot, before the thresholds
        };
        if fold(&mut p[i], n * pages_per_unit(item), d.node_threshold).is_some() {
            // node_page_state_add: the node's vm_stat (after its
            // per_cpu_nodestats pointer on the line) and vm_node_stat.
            let f = Fn::ModNodePageState;
            let ns = self.costs.cacheline_transfer;
            self.write_line(Line::NodeStat((i as u16 + 1) / PER_LINE), f, ns);
            self.write_line(Line::VmNodeStat(i as u16 / PER_LINE), f, ns);
        }
    }

    #[inline(never)]
    fn zone_stat_diff(&mut self, zi: usize, item: Vm, n: i64) {
        let i = zone_item(item).expect("a zone gauge") as usize;
        let d = &mut self.stat_diffs;
        let Some(p) = d.zone.get_mut(self.cur_cpu * d.nr_zones + zi) else {
            return; // boot, before the thresholds
        };
        if fold(&mut p[i], n, d.zone_threshold[zi]).is_some() {
            // zone_page_state_add: the zone's vm_stat (cache-line aligned)
            // and vm_zone_stat.
            let f = Fn::ModZonePageState;
            let ns = self.costs.cacheline_transfer;
            let line = i as u16 / PER_LINE;
            self.write_line(
                Line::ZoneStat {
                    zone: zi as u8,
                    line,
                },
                f,
                ns,
            );
            self.write_line(Line::VmZoneStat(line), f, ns);
        }
    }
}

/// Adds `n` to a differential with threshold `t`: the amount folded into
/// the shared counters when it passes `t` (the differential is then 0).
fn fold(p: &mut i8, n: i64, t: i64) -> Option<i64> {
    let x = *p as i64 + n;
    if x.abs() > t {
        *p = 0;
        Some(x)
    } else {
        *p = x as i8;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_follow_calculate_normal_threshold() {
        // Rows of mm/vmstat.c's sample table (zone size in pages; the
        // table's 4-CPU 2-4 GB and 64-CPU rows disagree with its own
        // formula and are left out).
        let gib = 1 << 18;
        assert_eq!(normal_threshold(1, gib - 1), 8);
        assert_eq!(normal_threshold(2, gib - 1), 16);
        assert_eq!(normal_threshold(2, 2 * gib - 1), 20);
        assert_eq!(normal_threshold(2, 4 * gib - 1), 24);
        assert_eq!(normal_threshold(2, 16 * gib - 1), 32);
        assert_eq!(normal_threshold(4, 16 * gib - 1), 48);
        assert_eq!(normal_threshold(16, 900 << 8), 40);
        // Seed 003's machine: 96 CPUs and 16 GiB reach the cap.
        assert_eq!(normal_threshold(96, 16 * gib), 125);
    }

    use crate::kernel::{test_at as at, test_kernel};

    #[test]
    fn a_fold_moves_the_counters_lines_from_the_cpu_that_folded_last() {
        // 256 MiB, 2 CPUs: DMA32's threshold 2 × fls(2) × (1 + fls(1)) = 8
        // is the node's.
        let mut k = test_kernel(2, "6.1");
        assert_eq!(k.stat_diffs.node_threshold, 8);
        let waited = |k: &Kernel| k.fn_time_ns[Fn::ModNodePageState as usize];
        at(&mut k, 0, 0);
        (0..9).for_each(|_| k.mod_node_page_state(Vm::NrMapped, 1));
        assert_eq!(k.vm.get(Vm::NrMapped), 9, "the gauge stays exact");
        assert_eq!(waited(&k), 0, "the first fold finds the lines nowhere else");
        at(&mut k, 1, 1_000);
        (0..8).for_each(|_| k.mod_node_page_state(Vm::NrMapped, -1));
        assert_eq!(waited(&k), 0, "inside the threshold: no fold");
        k.mod_node_page_state(Vm::NrMapped, -1);
        // The node's vm_stat line and vm_node_stat's come from CPU 0.
        assert_eq!(waited(&k), 2 * k.costs.cacheline_transfer);
        assert_eq!(k.vm.get(Vm::NrMapped), 0);
    }

    #[test]
    fn one_cpu_keeps_no_differentials() {
        let mut k = test_kernel(1, "6.1");
        (0..1000).for_each(|_| k.mod_node_page_state(Vm::NrMapped, 1));
        k.mod_zone_page_state(1, Vm::NrFreePages, -1000);
        assert!(k.stat_diffs.node.is_empty() && k.stat_diffs.zone.is_empty());
        assert_eq!(k.fn_time_ns[Fn::ModNodePageState as usize], 0);
    }

    #[test]
    fn a_thp_gauge_counts_pages() {
        let mut k = test_kernel(2, "6.1");
        k.mod_node_page_state(Vm::NrAnonTransparentHugepages, 1);
        assert_eq!(k.vm.get(Vm::NrAnonTransparentHugepages), 1);
        // 512 pages pass any threshold: folded at once.
        assert_eq!(k.stat_diffs.node[0][28], 0);
        k.mod_node_page_state(Vm::NrAnonPages, 3);
        assert_eq!(k.stat_diffs.node[0][17], 3);
    }

    #[test]
    fn kswapd_awake_lowers_the_thresholds_of_zones_with_a_drift_mark() {
        // 64 CPUs of 256 MiB: 64 × DMA32's 28 pages of drift exceed the
        // distance between its low and min watermarks.
        let mut k = test_kernel(64, "6.1");
        let zi = (0..k.zones.len())
            .max_by_key(|&i| k.zones[i].managed)
            .unwrap();
        let (normal, drift_mark) = k.stat_diffs.zone_normal[zi];
        assert_eq!(normal, 28);
        assert!(drift_mark);
        let z = &k.zones[zi];
        let pressure = ((z.watermark[WMARK_LOW] - z.watermark[WMARK_MIN]) / 64).max(1) as i64;
        k.set_pgdat_percpu_threshold(true);
        assert_eq!(k.stat_diffs.zone_threshold[zi], pressure);
        assert!(pressure < normal);
        assert_eq!(k.stat_diffs.node_threshold, 28, "node thresholds stay");
        k.set_pgdat_percpu_threshold(false);
        assert_eq!(k.stat_diffs.zone_threshold[zi], normal);
    }

    #[test]
    fn a_differential_folds_whole_once_past_the_threshold() {
        let mut p = 0i8;
        let folds: Vec<_> = (0..12).filter_map(|_| fold(&mut p, 1, 4)).collect();
        // 5 passes 4: folded at the 5th and the 10th update, 2 left.
        assert_eq!(folds, [5, 5]);
        assert_eq!(p, 2);
        assert_eq!(fold(&mut p, -7, 4), Some(-5));
        assert_eq!(fold(&mut p, 512, 125), Some(512), "a THP's worth at once");
    }
}

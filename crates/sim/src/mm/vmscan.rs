//! mm/vmscan.c: page reclaim with the classic two-list LRU (MGLRU is off
//! in Debian's 6.1): memcg-limit reclaim, global direct reclaim, kswapd.
//!
//! Not modelled, each with no effect on the workloads the spec can express
//! today: memory.min/low protection (no spec keys), zone skipping in
//! isolate_lru_folios (user pages may use every zone), compaction and
//! high-order reclaim (order-0 only), throttling on congestion or too many
//! isolated folios (no asynchronous writeback exists yet), slab shrinking
//! (the simulated kernel has no slab caches to shrink).

use super::folio::*;
use super::huge_anon::{PG_DEFERRED_SPLIT, PG_PARTIALLY_MAPPED};
use super::memcontrol::ROOT_MEMCG;
use super::page_alloc::WMARK_HIGH;
use super::swapfile::{swp_offset, swp_type};
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

pub const DEF_PRIORITY: i32 = 12;
pub const SWAP_CLUSTER_MAX: u64 = 32;
const DEACTIVATE_ANON: u8 = 1;
const DEACTIVATE_FILE: u8 = 2;

#[derive(Default, Clone)]
pub struct ScanControl {
    pub nr_to_reclaim: u64,
    pub priority: i32,
    pub may_writepage: bool,
    pub may_unmap: bool,
    pub may_swap: bool,
    /// Some(memcg) for cgroup reclaim; None for global reclaim.
    pub target: Option<u16>,
    /// MADV_PAGEOUT's reclaim_pages from 6.12: shrink_folio_list skips
    /// the reference checks.
    pub ignore_references: bool,
    /// memory.reclaim's `swappiness=` (`sc_swappiness`), in place of
    /// vm.swappiness.
    pub proactive_swappiness: Option<u32>,
    /// A memcg within its memory.low was skipped; the retry reclaims such
    /// memcgs too (`memcg_low_skipped`, `memcg_low_reclaim`).
    pub memcg_low_skipped: bool,
    pub memcg_low_reclaim: bool,
    pub nr_scanned: u64,
    pub nr_reclaimed: u64,
    anon_cost: u64,
    file_cost: u64,
    may_deactivate: u8,
    force_deactivate: bool,
    skipped_deactivate: bool,
    cache_trim_mode: bool,
    file_is_tiny: bool,
    /// The multi-gen LRU's: kswapd's aging is due (lru_gen_age_node), and
    /// what had been reclaimed when it last ran.
    pub memcgs_need_aging: bool,
    pub last_reclaimed: u64,
}

impl ScanControl {
    pub(crate) fn cgroup_reclaim(&self) -> bool {
        self.target.is_some()
    }
    pub(crate) fn target_memcg(&self) -> u16 {
        self.target.unwrap_or(ROOT_MEMCG)
    }
}

/// NR_ISOLATED_ANON + file.
fn isolated_item(file: bool) -> Vm {
    if file {
        Vm::NrIsolatedFile
    } else {
        Vm::NrIsolatedAnon
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FolioRef {
    Reclaim,
    ReclaimClean,
    Keep,
    Activate,
}

#[derive(Default, Clone, Copy)]
pub(crate) struct ReclaimStat {
    nr_pageout: u64,
    nr_activate: [u64; 2],
    /// File folios found dirty and not under writeback.
    nr_unqueued_dirty: u64,
}

/// kswapd's state between scheduler steps.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KswapdState {
    /// Asleep until `wakeup_kswapd`.
    #[default]
    Sleeping,
    /// Woken; will start `balance_pgdat` when next scheduled.
    Woken,
    /// Inside `balance_pgdat`'s priority loop.
    Balancing,
    /// The HZ/10 nap of `kswapd_try_to_sleep`, until the given time.
    Napping(u64),
}

#[derive(Default)]
pub struct Kswapd {
    pub state: KswapdState,
    pub sc: ScanControl,
    /// `kswapd_failures`: balance_pgdat runs in a row that reclaimed nothing.
    pub failures: u32,
    /// Set by a wakeup during the nap.
    pub woken_in_nap: bool,
    /// `psi_memstall_enter`'s flag of the balance_pgdat run.
    pub psi_was_in: bool,
}

impl Kernel {
    // ---- entry points -------------------------------------------------

    /// `try_to_free_mem_cgroup_pages`: reclaim from `memcg`'s subtree on
    /// behalf of a charge (memory.max) or memory.high.
    pub fn try_to_free_mem_cgroup_pages(&mut self, memcg: u16, nr_pages: u64) -> u64 {
        self.try_to_free_mem_cgroup_pages_with(memcg, nr_pages, None)
    }

    /// `try_to_free_mem_cgroup_pages` with memory.reclaim's swappiness.
    pub fn try_to_free_mem_cgroup_pages_with(
        &mut self,
        memcg: u16,
        nr_pages: u64,
        proactive_swappiness: Option<u32>,
    ) -> u64 {
        let mut sc = ScanControl {
            nr_to_reclaim: nr_pages.max(SWAP_CLUSTER_MAX),
            priority: DEF_PRIORITY,
            may_writepage: true,
            may_unmap: true,
            may_swap: true,
            target: Some(memcg),
            proactive_swappiness,
            ..Default::default()
        };
        let reclaimed = self.do_try_to_free_pages(&mut sc);
        // The limit reclaim's own work per page it frees, beyond the
        // constants its scan, unmap and swap-out charge (machine_profile.rs
        // `memcg_reclaim`; 0 in the reference values).
        self.charge_cost(
            Fn::TryToFreeMemCgroupPages,
            reclaimed * self.costs.memcg_reclaim,
        );
        reclaimed
    }

    /// `try_to_free_pages`: global direct reclaim from the allocator.
    pub fn try_to_free_pages(&mut self) -> u64 {
        let mut sc = ScanControl {
            nr_to_reclaim: SWAP_CLUSTER_MAX,
            priority: DEF_PRIORITY,
            may_writepage: true,
            may_unmap: true,
            may_swap: true,
            target: None,
            ..Default::default()
        };
        self.do_try_to_free_pages(&mut sc)
    }

    fn do_try_to_free_pages(&mut self, sc: &mut ScanControl) -> u64 {
        let initial_priority = sc.priority;
        loop {
            if !sc.cgroup_reclaim() {
                // sc->reclaim_idx is gfp_zone(GFP_HIGHUSER_MOVABLE): the
                // Movable zone's index, even with no memory in it.
                self.vm.inc(Vm::AllocstallMovable);
            }
            loop {
                sc.nr_scanned = 0;
                self.shrink_node(sc);
                if sc.nr_reclaimed >= sc.nr_to_reclaim {
                    break;
                }
                if sc.priority < DEF_PRIORITY - 2 {
                    sc.may_writepage = true;
                }
                sc.priority -= 1;
                if sc.priority < 0 {
                    break;
                }
            }
            self.snapshot_refaults(sc.target_memcg());
            if sc.nr_reclaimed > 0 {
                return sc.nr_reclaimed;
            }
            if sc.skipped_deactivate {
                sc.priority = initial_priority;
                sc.force_deactivate = true;
                sc.skipped_deactivate = false;
                continue;
            }
            // Untapped cgroup reserves? Don't OOM, retry.
            if sc.memcg_low_skipped {
                sc.priority = initial_priority;
                sc.force_deactivate = false;
                sc.memcg_low_reclaim = true;
                sc.memcg_low_skipped = false;
                continue;
            }
            return 0;
        }
    }

    /// `snapshot_refaults`: remember the activation counts reclaim saw.
    fn snapshot_refaults(&mut self, target: u16) {
        if self.lru_gen_enabled() {
            return;
        }
        let s = self.lruvec_stat_hier(target);
        self.lruvecs[target as usize].refaults = s;
    }

    /// workingset_activate_{anon,file} of a memcg's subtree (node-wide for root).
    fn lruvec_stat_hier(&self, memcg: u16) -> [u64; 2] {
        if self.rstat.lags() {
            return [
                self.memcg_page_state(memcg, Mc::WorkingsetActivateAnon) as u64,
                self.memcg_page_state(memcg, Mc::WorkingsetActivateFile) as u64,
            ];
        }
        if !self.memcgs[memcg as usize].has_children && memcg != ROOT_MEMCG {
            let s = &self.memcgs[memcg as usize].stat;
            return [
                s.get(Mc::WorkingsetActivateAnon) as u64,
                s.get(Mc::WorkingsetActivateFile) as u64,
            ];
        }
        if memcg == ROOT_MEMCG {
            return [
                self.vm.get(Vm::WorkingsetActivateAnon) as u64,
                self.vm.get(Vm::WorkingsetActivateFile) as u64,
            ];
        }
        let s = self.memory_stat(memcg);
        [
            s.get(Mc::WorkingsetActivateAnon) as u64,
            s.get(Mc::WorkingsetActivateFile) as u64,
        ]
    }

    // ---- node and lruvec level ------------------------------------------

    fn shrink_node(&mut self, sc: &mut ScanControl) {
        self.prepare_scan_count(sc);
        // shrink_node_memcgs: every memcg of the target's subtree, pre-order.
        let target = sc.target_memcg();
        let before = sc.nr_reclaimed;
        for m in 0..self.memcgs.len() as u16 {
            if !self.is_descendant(m, target) {
                continue;
            }
            self.mem_cgroup_calculate_protection(target, m);
            if self.mem_cgroup_below_min(target, m) {
                // Hard protection.
                continue;
            }
            if self.mem_cgroup_below_low(target, m) {
                // Soft protection: only while other memcgs have
                // reclaimable memory.
                if !sc.memcg_low_reclaim {
                    sc.memcg_low_skipped = true;
                    continue;
                }
                self.memcg_memory_event(m, super::oom_kill::MemcgEvent::Low);
            }
            self.traced(Fn::ShrinkLruvec, |k| k.shrink_lruvec(m, sc));
            // Its freed pages are not counted as reclaimed: 6.1's
            // reclaim_state counts only slab pages freed.
            self.shrink_slab(m, sc.priority);
        }
        if sc.nr_reclaimed > before {
            self.kswapd.failures = 0;
        }
    }

    /// `inactive_is_low`: the inactive list is smaller than the active one
    /// over an int_sqrt(10 × GiB) ratio.
    fn inactive_is_low(&self, memcg: u16, inactive_lru: u8) -> bool {
        let inactive = self.lruvec_page_state(memcg, inactive_lru);
        let active = self.lruvec_page_state(memcg, inactive_lru + 1);
        let gb = (inactive + active) >> (30 - 12);
        let ratio = if gb > 0 {
            super::page_alloc::int_sqrt(10 * gb)
        } else {
            1
        };
        inactive * ratio < active
    }

    fn prepare_scan_count(&mut self, sc: &mut ScanControl) {
        if self.lru_gen_enabled() {
            return;
        }
        let target = sc.target_memcg();
        // 6.1 flushes so that the heuristics read accurate memcg
        // counters; 6.8 only when the periodic flush is a period late, as
        // the heuristics need no accurate counters (its comment).
        match self.features.memcg_rstat_per_memcg {
            true => self.mem_cgroup_flush_stats_ratelimited(target),
            false => self.mem_cgroup_flush_stats(target),
        }
        sc.anon_cost = self.lruvecs[target as usize].anon_cost;
        sc.file_cost = self.lruvecs[target as usize].file_cost;
        if !sc.force_deactivate {
            let refaults = self.lruvec_stat_hier(target);
            let snap = self.lruvecs[target as usize].refaults;
            sc.may_deactivate = 0;
            if refaults[0] != snap[0] || self.inactive_is_low(target, LRU_INACTIVE_ANON) {
                sc.may_deactivate |= DEACTIVATE_ANON;
            }
            if refaults[1] != snap[1] || self.inactive_is_low(target, LRU_INACTIVE_FILE) {
                sc.may_deactivate |= DEACTIVATE_FILE;
            }
        } else {
            sc.may_deactivate = DEACTIVATE_ANON | DEACTIVATE_FILE;
        }
        let file = self.lruvec_page_state(target, LRU_INACTIVE_FILE);
        sc.cache_trim_mode = (file >> sc.priority) > 0 && sc.may_deactivate & DEACTIVATE_FILE == 0;
        if !sc.cgroup_reclaim() {
            let free = self.nr_free_pages();
            let file =
                self.vm.get(Vm::NrActiveFile) as u64 + self.vm.get(Vm::NrInactiveFile) as u64;
            let total_high: u64 = self.zones.iter().map(|z| z.watermark[WMARK_HIGH]).sum();
            let anon = self.vm.get(Vm::NrInactiveAnon) as u64;
            sc.file_is_tiny = file + free <= total_high
                && sc.may_deactivate & DEACTIVATE_ANON == 0
                && (anon >> sc.priority) > 0;
        }
    }

    /// `can_reclaim_anon_pages`: there is swap space to put anon pages in.
    fn can_reclaim_anon_pages(&self, memcg: u16) -> bool {
        self.mem_cgroup_get_nr_swap_pages(memcg) > 0
    }

    /// `get_scan_count`: how many pages of each list to scan this pass.
    fn get_scan_count(&self, memcg: u16, sc: &mut ScanControl) -> [u64; 4] {
        #[derive(PartialEq)]
        enum Balance {
            Equal,
            Fract,
            Anon,
            File,
        }
        let swappiness = sc.proactive_swappiness.unwrap_or(self.sysctl.swappiness) as u64;
        let mut fraction = [0u64; 2];
        let mut denominator = 1u64;
        // The first rule: no swap to reclaim anon into; the second: cgroup
        // reclaim with swappiness 0.
        let balance = if !sc.may_swap
            || !self.can_reclaim_anon_pages(memcg)
            || (sc.cgroup_reclaim() && swappiness == 0)
        {
            Balance::File
        } else if sc.priority == 0 && swappiness > 0 {
            Balance::Equal
        } else if sc.file_is_tiny {
            Balance::Anon
        } else if sc.cache_trim_mode {
            Balance::File
        } else {
            let total = sc.anon_cost + sc.file_cost;
            let anon_cost = total + sc.anon_cost;
            let file_cost = total + sc.file_cost;
            let total = anon_cost + file_cost;
            let ap = swappiness * (total + 1) / (anon_cost + 1);
            let fp = (200 - swappiness) * (total + 1) / (file_cost + 1);
            fraction = [ap, fp];
            denominator = ap + fp;
            Balance::Fract
        };
        let mut nr = [0u64; 4];
        let (min, low) = self.mem_cgroup_protection(sc.target_memcg(), memcg);
        for lru in 0..4u8 {
            let file = lru >= LRU_INACTIVE_FILE;
            let size = self.lruvecs[memcg as usize].size(lru);
            let mut scan = size;
            if min > 0 || low > 0 {
                // Reclaim pressure in proportion to the usage above the
                // protection (memory.low until the retry, then memory.min).
                let protection = if !sc.memcg_low_reclaim && low > min {
                    sc.memcg_low_skipped = true;
                    low
                } else {
                    min
                };
                let cgroup_size = self.memcgs[memcg as usize].memory.usage.max(protection);
                let kept = (size as u128 * protection as u128 / (cgroup_size as u128 + 1)) as u64;
                scan = (size - kept).max(SWAP_CLUSTER_MAX);
            }
            scan >>= sc.priority;
            scan = match balance {
                Balance::Equal => scan,
                Balance::Fract => scan * fraction[file as usize] / denominator,
                Balance::File => {
                    if file {
                        scan
                    } else {
                        0
                    }
                }
                Balance::Anon => {
                    if file {
                        0
                    } else {
                        scan
                    }
                }
            };
            nr[lru as usize] = scan;
        }
        nr
    }

    pub(crate) fn shrink_lruvec_classic(&mut self, memcg: u16, sc: &mut ScanControl) {
        let mut nr = self.get_scan_count(memcg, sc);
        let targets = nr;
        let mut nr_reclaimed = 0;
        let nr_to_reclaim = sc.nr_to_reclaim;
        let proportional =
            !sc.cgroup_reclaim() && !self.current_is_kswapd() && sc.priority == DEF_PRIORITY;
        const IA: usize = 0;
        const AA: usize = 1;
        const IF: usize = 2;
        const AF: usize = 3;
        self.blk_start_plug();
        while nr[IA] > 0 || nr[AF] > 0 || nr[IF] > 0 {
            #[allow(clippy::needless_range_loop)] // lru is the list number too
            for lru in 0..4 {
                if nr[lru] > 0 {
                    let n = nr[lru].min(SWAP_CLUSTER_MAX);
                    nr[lru] -= n;
                    nr_reclaimed += self.shrink_list(lru as u8, n, memcg, sc);
                }
            }
            if nr_reclaimed < nr_to_reclaim || proportional {
                continue;
            }
            let nr_file = nr[IF] + nr[AF];
            let nr_anon = nr[IA] + nr[AA];
            if nr_file == 0 || nr_anon == 0 {
                break;
            }
            let (small, other, pct) = if nr_file > nr_anon {
                (IA, IF, nr_anon * 100 / (targets[IA] + targets[AA] + 1))
            } else {
                (IF, IA, nr_file * 100 / (targets[IF] + targets[AF] + 1))
            };
            nr[small] = 0;
            nr[small + 1] = 0;
            for l in [other, other + 1] {
                let scanned = targets[l] - nr[l];
                nr[l] = targets[l] * (100 - pct) / 100;
                nr[l] -= nr[l].min(scanned);
            }
        }
        self.blk_finish_plug();
        sc.nr_reclaimed += nr_reclaimed;
        if self.swapfile.total_swap_pages() > 0 && self.inactive_is_low(memcg, LRU_INACTIVE_ANON) {
            self.traced(Fn::ShrinkActiveList, |k| {
                k.shrink_active_list(SWAP_CLUSTER_MAX, memcg, sc, LRU_ACTIVE_ANON)
            });
        }
    }

    fn shrink_list(&mut self, lru: u8, nr: u64, memcg: u16, sc: &mut ScanControl) -> u64 {
        if lru == LRU_ACTIVE_ANON || lru == LRU_ACTIVE_FILE {
            let bit = if lru == LRU_ACTIVE_FILE {
                DEACTIVATE_FILE
            } else {
                DEACTIVATE_ANON
            };
            if sc.may_deactivate & bit != 0 {
                self.traced(Fn::ShrinkActiveList, |k| {
                    k.shrink_active_list(nr, memcg, sc, lru)
                });
            } else {
                sc.skipped_deactivate = true;
            }
            return 0;
        }
        self.traced(Fn::ShrinkInactiveList, |k| {
            k.shrink_inactive_list(nr, memcg, sc, lru)
        })
    }

    // ---- list level -------------------------------------------------------

    /// `isolate_lru_folios`: up to `nr` folios from the tail, oldest first
    /// in `out`. Returns the number scanned.
    fn isolate_lru_folios(
        &mut self,
        nr: u64,
        memcg: u16,
        lru: u8,
        sc: &ScanControl,
        out: &mut Vec<Pfn>,
    ) -> u64 {
        let mut scanned = 0;
        let lock = self.spin_lock(crate::cacheline::Line::LruLock(memcg));
        while scanned < nr {
            let pfn = self.lruvecs[memcg as usize].lists[lru as usize].tail;
            if pfn == NIL {
                break;
            }
            let f = *self.folios.get(pfn);
            scanned += f.nr_pages() as u64;
            if !sc.may_unmap && f.mapcount > 0 {
                // Stays: rotated to the head as the kernel's `move` does.
                self.lruvec_del_folio(pfn);
                self.lruvec_add_folio(pfn);
                continue;
            }
            self.lruvec_del_folio(pfn);
            // folio_try_get and TestClearPageLRU, under the lru_lock.
            self.write_page_line(pfn, Fn::ShrinkInactiveList);
            let f = self.folios.get_mut(pfn);
            f.clear(PG_LRU);
            f.set(PG_ISOLATED);
            f.refcount += 1;
            out.push(pfn);
            self.charge_cost(Fn::ShrinkInactiveList, self.costs.lru_move);
        }
        self.mod_node_page_state(isolated_item(lru >= LRU_INACTIVE_FILE), out.len() as i64);
        self.spin_unlock(lock);
        scanned
    }

    /// `move_folios_to_lru`: put isolated folios back (oldest first, each
    /// at the head), freeing those whose last reference was the isolation.
    /// Returns the pages moved.
    pub(crate) fn move_folios_to_lru(&mut self, list: &[Pfn], memcg: u16) -> u64 {
        let mut moved = 0;
        let line = crate::cacheline::Line::LruLock(memcg);
        let mut lock = if list.is_empty() {
            None
        } else {
            self.spin_lock(line)
        };
        for &pfn in list {
            let f = self.folios.get_mut(pfn);
            f.clear(PG_ISOLATED);
            f.set(PG_LRU);
            f.refcount -= 1;
            if f.refcount == 0 {
                f.clear(PG_LRU);
                // Freed outside the hold, as the kernel frees a large one
                // (it frees a small one after the loop, outside it too).
                self.spin_unlock(lock.take());
                self.free_folio(pfn);
                lock = self.spin_relock(line);
                continue;
            }
            let nr = f.nr_pages() as u64;
            let active = f.test(PG_ACTIVE);
            self.lruvec_add_folio(pfn);
            self.charge_cost(Fn::ShrinkInactiveList, self.costs.lru_move);
            moved += nr;
            if active {
                self.workingset_age_nonresident(memcg, nr);
            }
        }
        self.spin_unlock(lock);
        moved
    }

    /// `folio_isolate_lru` (MADV_PAGEOUT): off the LRU with a reference;
    /// NR_ISOLATED is the caller's business and madvise leaves it alone.
    pub fn isolate_lru_folio(&mut self, pfn: Pfn) {
        // folio_lruvec_lock_irq: its work is inside the caller's priced
        // bundle (MADV_PAGEOUT's, khugepaged's), so the hold is empty.
        let memcg = self.folios.get(pfn).memcg;
        let lock = self.spin_lock(crate::cacheline::Line::LruLock(memcg));
        self.lruvec_del_folio(pfn);
        let f = self.folios.get_mut(pfn);
        f.clear(PG_LRU);
        f.set(PG_ISOLATED);
        f.refcount += 1;
        self.spin_unlock(lock);
    }

    /// `folio_putback_lru`: an isolated folio back through the lru_add
    /// batch, the isolation's reference dropped.
    pub fn folio_putback_lru(&mut self, pfn: Pfn) {
        self.folios.get_mut(pfn).clear(PG_ISOLATED);
        self.folio_add_lru(pfn);
        self.folio_put(pfn);
    }

    /// `reclaim_pages`: reclaim a list of isolated folios now, as
    /// shrink_folio_list would (references checked, no scan or steal
    /// counts); the rest go back through the lru_add batch.
    pub fn reclaim_pages(&mut self, list: &mut Vec<Pfn>) -> u64 {
        for &pfn in list.iter() {
            self.folios.get_mut(pfn).clear(PG_ACTIVE);
        }
        let mut sc = ScanControl {
            nr_to_reclaim: list.len() as u64,
            priority: DEF_PRIORITY,
            may_writepage: true,
            may_unmap: true,
            may_swap: true,
            target: None,
            ignore_references: self.release.pageout_ignore_references,
            ..Default::default()
        };
        let mut stat = ReclaimStat::default();
        let mut kept = self.take_scratch();
        let reclaimed = self.traced(Fn::ShrinkFolioList, |k| {
            k.shrink_folio_list(list, &mut sc, &mut stat, &mut kept)
        });
        for &pfn in &kept {
            self.folio_putback_lru(pfn);
        }
        self.give_scratch(kept);
        reclaimed
    }

    pub fn take_scratch(&mut self) -> Vec<Pfn> {
        self.scratch.pop().unwrap_or_default()
    }

    pub fn give_scratch(&mut self, mut v: Vec<Pfn>) {
        v.clear();
        self.scratch.push(v);
    }

    /// Whether /proc/vmstat's pgrefill and pgscan/pgsteal_{kswapd,direct}
    /// count this reclaim: up to 6.12 only reclaim that is not a cgroup's
    /// (`!cgroup_reclaim(sc)`); 7.3 counts them as node stats through
    /// mod_lruvec_state, cgroup reclaim included.
    fn count_reclaimer_events(&self, sc: &ScanControl) -> bool {
        !sc.cgroup_reclaim() || self.release.reclaim_events_cgroup
    }

    fn shrink_active_list(&mut self, nr: u64, memcg: u16, sc: &mut ScanControl, lru: u8) {
        self.lru_add_drain();
        let file = lru >= LRU_INACTIVE_FILE;
        let mut hold = self.take_scratch();
        let scanned = self.isolate_lru_folios(nr, memcg, lru, sc, &mut hold);
        let nr_taken = hold.len() as i64;
        if self.count_reclaimer_events(sc) {
            self.vm.add(Vm::Pgrefill, scanned as i64);
        }
        self.memcg_stat(memcg, Mc::Pgrefill, scanned as i64);
        let mut l_active = self.take_scratch();
        let mut l_inactive = self.take_scratch();
        for &pfn in &hold {
            let (referenced, vm_flags) = self.folio_referenced(pfn, sc.target);
            self.charge_cost(Fn::ShrinkActiveList, self.costs.shrink_folio);
            if referenced != 0
                && vm_flags & super::mmap::VM_EXEC != 0
                && self.folios.get(pfn).is_file_lru()
            {
                l_active.push(pfn);
                continue;
            }
            let f = self.folios.get_mut(pfn);
            f.clear(PG_ACTIVE);
            f.set(PG_WORKINGSET);
            l_inactive.push(pfn);
        }
        self.move_folios_to_lru(&l_active, memcg);
        let nr_deactivate = self.move_folios_to_lru(&l_inactive, memcg);
        self.vm.add(Vm::Pgdeactivate, nr_deactivate as i64);
        self.memcg_stat(memcg, Mc::Pgdeactivate, nr_deactivate as i64);
        self.mod_node_page_state(isolated_item(file), -nr_taken);
        self.give_scratch(hold);
        self.give_scratch(l_active);
        self.give_scratch(l_inactive);
    }

    fn shrink_inactive_list(&mut self, nr: u64, memcg: u16, sc: &mut ScanControl, lru: u8) -> u64 {
        let now = self.now();
        self.process_io_completions(now);
        self.lru_add_drain();
        let file = lru >= LRU_INACTIVE_FILE;
        let mut list = self.take_scratch();
        let scanned = self.isolate_lru_folios(nr, memcg, lru, sc, &mut list);
        let nr_taken = list.len() as i64;
        let kswapd = self.current_is_kswapd();
        let (scan_item, steal_item) = if kswapd {
            (Vm::PgscanKswapd, Vm::PgstealKswapd)
        } else {
            (Vm::PgscanDirect, Vm::PgstealDirect)
        };
        let (mscan, msteal) = if kswapd {
            (Mc::PgscanKswapd, Mc::PgstealKswapd)
        } else {
            (Mc::PgscanDirect, Mc::PgstealDirect)
        };
        if self.count_reclaimer_events(sc) {
            self.vm.add(scan_item, scanned as i64);
        }
        self.memcg_stat(memcg, mscan, scanned as i64);
        self.memcg_stat(memcg, Mc::Pgscan, scanned as i64);
        self.vm.add(
            if file { Vm::PgscanFile } else { Vm::PgscanAnon },
            scanned as i64,
        );
        if nr_taken == 0 {
            self.give_scratch(list);
            return 0;
        }
        let mut stat = ReclaimStat::default();
        let mut kept = self.take_scratch();
        let reclaimed = self.traced(Fn::ShrinkFolioList, |k| {
            k.shrink_folio_list(&mut list, sc, &mut stat, &mut kept)
        });
        self.move_folios_to_lru(&kept, memcg);
        self.mod_node_page_state(isolated_item(file), -nr_taken);
        // Dirty file pages reclaim cannot write: the flushers are behind.
        if stat.nr_unqueued_dirty == nr_taken as u64 {
            self.wakeup_flusher_threads();
        }
        if self.count_reclaimer_events(sc) {
            self.vm.add(steal_item, reclaimed as i64);
        }
        self.memcg_stat(memcg, msteal, reclaimed as i64);
        self.memcg_stat(memcg, Mc::Pgsteal, reclaimed as i64);
        self.vm.add(
            if file {
                Vm::PgstealFile
            } else {
                Vm::PgstealAnon
            },
            reclaimed as i64,
        );
        self.lru_note_cost(memcg, file, stat.nr_pageout);
        self.give_scratch(list);
        self.give_scratch(kept);
        reclaimed
    }

    /// `folio_check_references`.
    fn folio_check_references(&mut self, pfn: Pfn, sc: &ScanControl) -> FolioRef {
        let (referenced_ptes, vm_flags) = self.folio_referenced(pfn, sc.target);
        let f = self.folios.get_mut(pfn);
        let referenced_folio = f.test(PG_REFERENCED);
        f.clear(PG_REFERENCED);
        if vm_flags & super::mmap::VM_LOCKED != 0 {
            return FolioRef::Activate;
        }
        // rmap lock contention: rotate.
        if referenced_ptes == super::rmap::RMAP_CONTENDED {
            return FolioRef::Keep;
        }
        if !self.features.used_once_mapped_file {
            return self.folio_check_references_pre_002(pfn, referenced_ptes, referenced_folio);
        }
        let f = self.folios.get_mut(pfn);
        if referenced_ptes > 0 {
            f.set(PG_REFERENCED);
            if referenced_folio || referenced_ptes > 1 {
                return FolioRef::Activate;
            }
            if vm_flags & super::mmap::VM_EXEC != 0 && f.is_file_lru() {
                return FolioRef::Activate;
            }
            return FolioRef::Keep;
        }
        if referenced_folio && f.is_file_lru() {
            return FolioRef::ReclaimClean;
        }
        FolioRef::Reclaim
    }

    /// `page_check_references` before seed 002's series (2.6.33): any
    /// reference — a young PTE or PG_referenced — activates a page that is
    /// "in use" (`page_mapping_inuse`: mapped, in the swap cache, or of a
    /// file someone has mapped); an unused referenced page is reclaimed
    /// if clean.
    fn folio_check_references_pre_002(
        &mut self,
        pfn: Pfn,
        referenced_ptes: u32,
        referenced_folio: bool,
    ) -> FolioRef {
        if referenced_ptes == 0 && !referenced_folio {
            return FolioRef::Reclaim;
        }
        let f = *self.folios.get(pfn);
        let inuse = f.mapcount > 0
            || f.test(PG_SWAPCACHE)
            || (f.test(PG_PAGECACHE) && !self.inodes[f.mapping as usize].vmas.is_empty());
        if inuse {
            FolioRef::Activate
        } else {
            FolioRef::ReclaimClean
        }
    }

    /// `shrink_folio_list` for the isolated folios in `list` (oldest first).
    /// Folios not freed are appended to `kept`, in order. Returns pages
    /// reclaimed.
    /// A shmem folio split on the way appends its tails to `list`, where
    /// each takes its own pass.
    pub(crate) fn shrink_folio_list(
        &mut self,
        list: &mut Vec<Pfn>,
        sc: &mut ScanControl,
        stat: &mut ReclaimStat,
        kept: &mut Vec<Pfn>,
    ) -> u64 {
        let mut nr_reclaimed = 0;
        let mut unmapped_any = false;
        let mut i = 0;
        self.mem_cgroup_uncharge_list_begin();
        while i < list.len() {
            // cond_resched: zswap's shrink worker, queued by the last
            // folio's store on this CPU's workqueue, preempts the reclaimer.
            self.zswap_shrink_at_resched();
            let pfn = list[i];
            i += 1;
            self.charge_cost(Fn::ShrinkFolioList, self.costs.shrink_folio);
            sc.nr_scanned += self.folios.get(pfn).nr_pages() as u64;
            let before = list.len();
            let freed = self.shrink_one_folio(pfn, sc, stat, &mut unmapped_any, list);
            if list.len() > before {
                // lru_to_folio takes the list's tail, where the split put
                // its tails (the last one first): they come next, the
                // first tail first.
                let added = list.len() - before;
                list[i..].rotate_right(added);
            }
            // Read after the pass: a split folio is one page now.
            let nr = self.folios.get(pfn).nr_pages() as u64;
            match freed {
                true => nr_reclaimed += nr,
                false => kept.push(pfn),
            }
        }
        // free_it's folios leave the memcg together.
        self.mem_cgroup_uncharge_list_end();
        if unmapped_any {
            // try_to_unmap_flush: one batched TLB shootdown for the list.
            self.charge_cost(Fn::TryToUnmapFlush, self.costs.tlb_flush);
            self.try_to_unmap_flush();
        }
        let act = stat.nr_activate[0] + stat.nr_activate[1];
        self.vm.add(Vm::Pgactivate, act as i64);
        nr_reclaimed
    }

    /// One folio of `shrink_folio_list`; true if it was freed.
    fn shrink_one_folio(
        &mut self,
        pfn: Pfn,
        sc: &mut ScanControl,
        stat: &mut ReclaimStat,
        unmapped_any: &mut bool,
        list: &mut Vec<Pfn>,
    ) -> bool {
        let f = *self.folios.get(pfn);
        if f.test(PG_LOCKED) {
            // folio_trylock fails: a read is in flight.
            return false;
        }
        // folio_check_dirty_writeback.
        if f.is_file_lru() && f.test(PG_DIRTY) && !f.test(PG_WRITEBACK) {
            stat.nr_unqueued_dirty += 1;
        }
        if f.test(PG_UNEVICTABLE) {
            return self.activate_locked(pfn, stat);
        }
        if !sc.may_unmap && f.mapcount > 0 {
            return false;
        }
        // folio_update_gen() tried to promote this folio (a page-table
        // reference seen while it was isolated).
        if self.lru_gen_enabled()
            && !sc.ignore_references
            && f.mapcount > 0
            && f.test(PG_REFERENCED)
        {
            return false;
        }
        if f.test(PG_WRITEBACK) {
            // Writeback cases 1 and 2 (cgroup v2 and global reclaim throttle
            // "sanely", so never case 3's wait): mark it for rotation at
            // completion and activate. Simplification: the throttling that
            // case 1's nr_immediate triggers (reclaim_throttle) is not
            // modelled.
            self.folios.get_mut(pfn).set(PG_RECLAIM);
            return self.activate_locked(pfn, stat);
        }
        let references = if sc.ignore_references {
            FolioRef::Reclaim
        } else {
            self.folio_check_references(pfn, sc)
        };
        match references {
            FolioRef::Activate => return self.activate_locked(pfn, stat),
            FolioRef::Keep => return false,
            FolioRef::Reclaim | FolioRef::ReclaimClean => {}
        }
        let f = *self.folios.get(pfn);
        if f.test(PG_ANON) && f.test(PG_SWAPBACKED) && !f.test(PG_SWAPCACHE) {
            let swapped = self.add_anon_to_swap(pfn, list);
            if f.order > 0 && self.folios.get(pfn).order == 0 {
                // Split on the way: the tails are scanned on their own
                // passes.
                sc.nr_scanned -= f.nr_pages() as u64 - 1;
            }
            if !swapped {
                return self.activate_locked(pfn, stat);
            }
        }
        let f = *self.folios.get(pfn);
        if !f.test(PG_ANON)
            && f.test(PG_SWAPBACKED)
            && f.order > 0
            && !self.features.shmem_large_swapout
        {
            // 6.1 swaps shmem out page by page: the folio is split first
            // (its tails join the list) or kept. 6.12 leaves it whole to
            // shmem_writepage.
            if !self.split_huge_page(pfn, Some(list)) {
                return false;
            }
            // The tails are scanned on their own passes.
            sc.nr_scanned -= f.nr_pages() as u64 - 1;
        }
        if self.folios.get(pfn).mapcount > 0 {
            let f = *self.folios.get(pfn);
            if f.test(PG_PAGECACHE) {
                self.try_to_unmap_page_cache(pfn);
            } else {
                self.try_to_unmap(pfn);
            }
            *unmapped_any = true;
            if self.folios.get(pfn).mapcount > 0 {
                return self.activate_locked(pfn, stat);
            }
        }
        let f = *self.folios.get(pfn);
        if f.test(PG_ANON) && !f.test(PG_SWAPBACKED) {
            // A lazily freed page, unmapped clean: only the isolation's
            // reference is left; it is discarded, not written.
            if f.refcount != 1 {
                return false;
            }
            let nr = f.nr_pages() as i64;
            self.vm.add(Vm::Pglazyfreed, nr);
            self.memcg_stat(f.memcg, Mc::Pglazyfreed, nr);
            let g = self.folios.get_mut(pfn);
            g.refcount = 0;
            g.clear(PG_ISOLATED);
            self.free_folio(pfn);
            return true;
        }
        let f = *self.folios.get(pfn);
        let file_cache = f.test(PG_PAGECACHE) && !f.test(PG_SWAPBACKED);
        if file_cache && !f.test(PG_DIRTY) {
            return self.remove_mapping_file(pfn, sc.target_memcg());
        }
        if file_cache {
            // Only the flushers write a file's dirty pages (kswapd may once
            // the node is flagged PGDAT_DIRTY; not modelled, see
            // docs/model.md): mark it for reclaim at writeback's end and
            // keep it active meanwhile.
            self.mod_node_page_state(Vm::NrVmscanImmediate, 1);
            self.folios.get_mut(pfn).set(PG_RECLAIM);
            return self.activate_locked(pfn, stat);
        }
        if f.test(PG_PAGECACHE) && !f.test(PG_DIRTY) {
            // A shmem page never written: dropped, its hole reads zeros.
            return self.shmem_remove_clean(pfn);
        }
        if self.folios.get(pfn).test(PG_DIRTY) {
            if references == FolioRef::ReclaimClean || !sc.may_writepage {
                return false;
            }
            // No CPU may write it through a stale TLB entry once its I/O
            // starts.
            self.try_to_unmap_flush_dirty();
            match self.traced(Fn::Pageout, |k| k.pageout(pfn, list)) {
                PageOut::Keep => return false,
                PageOut::Activate => return self.activate_locked(pfn, stat),
                PageOut::Success => {
                    stat.nr_pageout += 1;
                    let f = self.folios.get(pfn);
                    if f.test(PG_DIRTY) || f.test(PG_WRITEBACK) {
                        return false;
                    }
                }
            }
        }
        self.remove_mapping(pfn, sc.target_memcg())
    }

    fn activate_locked(&mut self, pfn: Pfn, stat: &mut ReclaimStat) -> bool {
        let f = *self.folios.get(pfn);
        if f.test(PG_SWAPCACHE) && self.mem_cgroup_swap_full(f.memcg) {
            self.folio_free_swap(pfn);
        }
        self.folios.get_mut(pfn).set(PG_ACTIVE);
        let nr = f.nr_pages();
        stat.nr_activate[f.is_file_lru() as usize] += nr as u64;
        self.memcg_stat(f.memcg, Mc::Pgactivate, nr as i64);
        false
    }

    /// `shrink_folio_list`'s swap step for an anon folio not in the swap
    /// cache. A THP that cannot be split is kept; one no PMD maps is split
    /// at once (its tails join `list`); one that gets no run of slots is
    /// split and its head page tried alone (`thp_swpout_fallback`).
    /// False: no slot (the caller activates the folio).
    fn add_anon_to_swap(&mut self, pfn: Pfn, list: &mut Vec<Pfn>) -> bool {
        let later = self.release.swap_out_large_order;
        let f = *self.folios.get(pfn);
        if f.order > 0 {
            if !self.can_split_folio(pfn) {
                return false;
            }
            // 6.1 splits a THP no PMD maps; 6.12 one partly unmapped.
            let split_first = if later {
                f.test(PG_PARTIALLY_MAPPED) && f.test(PG_DEFERRED_SPLIT)
            } else {
                self.folios.entire_mapcount(pfn) == 0
            };
            if split_first && !self.split_huge_page_anon(pfn, Some(list)) {
                return false;
            }
        }
        if self.add_to_swap(pfn) {
            return true;
        }
        let order = self.folios.get(pfn).order;
        if order == 0 || !self.split_huge_page_anon(pfn, Some(list)) {
            return false;
        }
        if order == 9 {
            self.vm.inc(Vm::ThpSwpoutFallback);
        }
        if later {
            self.vm.inc(crate::vmstat::mthp_item(
                order,
                crate::vmstat::MthpStat::SwpoutFallback,
            ));
        }
        self.add_to_swap(pfn)
    }

    /// `add_to_swap`: a slot (a whole cluster for a THP), the swap cache,
    /// and the folio marked dirty.
    fn add_to_swap(&mut self, pfn: Pfn) -> bool {
        self.charge_cost(Fn::AddToSwap, self.costs.swap_slot);
        let memcg = self.folios.get(pfn).memcg;
        let order = self.folios.get(pfn).order;
        let entry = if order == 0 {
            self.folio_alloc_swap(memcg)
        } else if !self.release.swap_out_large_order {
            self.folio_alloc_swap_thp(memcg)
        } else if self.features.anon_mthp_swapout {
            // 6.10's per-order clusters.
            self.folio_alloc_swap_order(memcg, order)
        } else {
            // Before 6.10 only a PMD-size folio gets a run of slots.
            None
        };
        let Some(entry) = entry else {
            return false;
        };
        // The slot was just allocated, so no shadow can be in it.
        let _ = self.add_to_swap_cache(pfn, entry);
        self.folios.get_mut(pfn).set(PG_DIRTY);
        true
    }

    /// `pageout` → `swap_writepage` for a swap-cache folio.
    fn pageout(&mut self, pfn: Pfn, list: &mut Vec<Pfn>) -> PageOut {
        let f = *self.folios.get(pfn);
        // is_page_cache_freeable: only the isolation and the cache's refs.
        if f.refcount != 1 + f.nr_pages() {
            return PageOut::Keep;
        }
        if f.test(PG_PAGECACHE) {
            // shmem_writepage: to swap through the swap cache; without a
            // slot the folio is redirtied and activated.
            self.folios.get_mut(pfn).clear(PG_DIRTY);
            if !self.traced(Fn::SwapWritepage, |k| k.shmem_writepage(pfn, list)) {
                // AOP_WRITEPAGE_ACTIVATE: pageout returns before counting
                // the write.
                self.folios.get_mut(pfn).set(PG_DIRTY);
                return PageOut::Activate;
            }
            return self.pageout_started(pfn);
        }
        if !f.test(PG_SWAPCACHE) {
            return PageOut::Activate;
        }
        let f = self.folios.get_mut(pfn);
        f.clear(PG_DIRTY);
        f.set(PG_RECLAIM);
        if !self.traced(Fn::SwapWritepage, |k| k.swap_writepage(pfn)) {
            // AOP_WRITEPAGE_ACTIVATE: redirtied, kept locked and
            // activated; pageout returns before counting a write.
            let f = self.folios.get_mut(pfn);
            f.clear(PG_RECLAIM);
            f.set(PG_DIRTY);
            return PageOut::Activate;
        }
        self.pageout_started(pfn)
    }

    /// `pageout` once ->writepage took the folio: a write already over
    /// leaves nothing to rotate, and the write is counted whatever the
    /// writepage did, every page of the folio (node_stat_add_folio).
    fn pageout_started(&mut self, pfn: Pfn) -> PageOut {
        let f = self.folios.get_mut(pfn);
        if !f.test(PG_WRITEBACK) {
            f.clear(PG_RECLAIM);
        }
        let nr = f.nr_pages() as i64;
        self.mod_node_page_state(Vm::NrVmscanWrite, nr);
        PageOut::Success
    }

    /// 6.12's zero-filled swap-out in `swap_writepage`: a folio all of
    /// whose pages are zeros (never written, or written as zeros) is marked in the device's
    /// zeromap and not written (`swpout_zero`); any other folio clears the
    /// marks its slots may hold from an earlier one. True: done.
    fn swap_zeromap_folio(&mut self, pfn: Pfn) -> bool {
        if !self.release.swap_zeromap {
            return false;
        }
        let f = *self.folios.get(pfn);
        let (nr, ty, off) = (
            f.nr_pages() as usize,
            swp_type(f.swap),
            swp_offset(f.swap) as usize,
        );
        let zero = self.folios.version[pfn as usize..pfn as usize + nr]
            .iter()
            .all(|&v| self.contents.is_zero_page(v));
        self.swap[ty].zeromap[off..off + nr].fill(zero);
        if zero {
            self.vm.add(Vm::SwpoutZero, nr as i64);
            self.memcg_stat(f.memcg, Mc::SwpoutZero, nr as i64);
        }
        zero
    }

    /// `swap_writepage`: a stale cache entry no PTE needs is just dropped;
    /// zram stores the page at once, a block device gets a bio. False
    /// (AOP_WRITEPAGE_ACTIVATE) where zswap refused the folio and its
    /// memcg's memory.zswap.writeback keeps it off the device.
    pub fn swap_writepage(&mut self, pfn: Pfn) -> bool {
        if self.folio_free_swap(pfn) {
            return true;
        }
        let nr = self.folios.get(pfn).nr_pages();
        // The device (or zram's compressor, or the zero check) reads it.
        for p in pfn..pfn + nr {
            self.guest_frame(p, false);
        }
        if self.swap_zeromap_folio(pfn) {
            return true;
        }
        if self.frontswap_store(pfn) {
            if !self.release.zswap_lru {
                // 6.1's frontswap: folio_start_writeback, folio_unlock and
                // folio_end_writeback at once, no I/O (NR_WRITTEN counts
                // it). 6.12's zswap_store only unlocks.
                self.mod_node_page_state(Vm::NrWritten, nr as i64);
            }
            let order = self.folios.get(pfn).order;
            if order > 0 {
                self.vm.inc(crate::vmstat::mthp_item(
                    order,
                    crate::vmstat::MthpStat::Zswpout,
                ));
            }
            return true;
        }
        if self.release.zswap_lru
            && !self.mem_cgroup_zswap_writeback_enabled(self.folios.get(pfn).memcg)
        {
            return false;
        }
        self.__swap_writepage(pfn);
        true
    }

    /// `__swap_writepage`: the folio to its swap device, past zswap (a
    /// zswap writeback comes here too). Inlined into `swap_writepage`,
    /// reclaim's path.
    #[inline(always)]
    pub fn __swap_writepage(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        let (entry, nr) = (f.swap, f.nr_pages());
        let (ty, off) = (swp_type(entry), swp_offset(entry));
        // count_swpout_vm_event (and, 7.3, count_memcg_folio_events).
        self.vm.add(Vm::Pswpout, nr as i64);
        self.memcg_stat(f.memcg, Mc::Pswpout, nr as i64);
        if f.order > 0 {
            // The per-size stats came in 6.10 (with the large shmem
            // swap-out of seed 001's kernels).
            if self.release.mthp_stats || self.features.shmem_large_swapout {
                self.vm.inc(crate::vmstat::mthp_item(
                    f.order,
                    crate::vmstat::MthpStat::Swpout,
                ));
            }
            if f.order == 9 {
                self.vm.inc(Vm::ThpSwpout);
            }
        }
        if self.swap[ty].bdev.is_some() {
            self.swap_writepage_bdev(pfn, entry);
            return;
        }
        if f.order > 0 && self.release.zram_thp_one_bio && !self.features.shmem_large_swapout {
            // 6.1's zram_rw_page refuses a THP, so __swap_writepage sends
            // it as one bio, which zram stores page by page at once; the
            // bio counts in pgpgout (kB), as order-0 rw_page writes do not.
            self.vm.add(Vm::Pgpgout, 4 * nr as i64);
        }
        // zram's rw_page takes one page at a time; compression reads it.
        for i in 0..nr {
            self.l2_read(pfn + i, 1);
            if !self.zram_write_page(ty, off + i, self.folios.version[(pfn + i) as usize]) {
                // zram's rw_page failed (no pool page): __swap_writepage
                // falls back to a bio, which zram fails too; the write
                // error leaves the folio dirty, and shrink_folio_list
                // keeps it. Without rw_page the one bio counted all its
                // pages, of which the stored ones are counted already.
                let counted = if self.release.zram_submit_bio { i } else { 0 };
                self.vm.add(Vm::Pgpgout, 4 * (nr - counted) as i64);
                self.folios.get_mut(pfn).set(PG_DIRTY);
                return;
            }
        }
        self.mod_node_page_state(Vm::NrWritten, nr as i64);
    }

    /// `__remove_mapping` for a clean swap-cache folio: leave a shadow, let
    /// go of the slot's cache bit, free the folio.
    fn remove_mapping(&mut self, pfn: Pfn, target: u16) -> bool {
        let f = *self.folios.get(pfn);
        if f.refcount != 1 + f.nr_pages() || f.test(PG_DIRTY) || !f.test(PG_SWAPCACHE) {
            return false;
        }
        let shadow = self.workingset_eviction(pfn, target);
        let entry = f.swap;
        self.delete_from_swap_cache_locked(pfn, shadow);
        self.put_swap_folio_nr(entry, f.nr_pages());
        let f = self.folios.get_mut(pfn);
        f.refcount = 0;
        f.clear(PG_ISOLATED);
        self.free_folio(pfn);
        true
    }
}

enum PageOut {
    Keep,
    Activate,
    Success,
}

/// kswapd sleeps for HZ/10 before a full sleep.
pub const KSWAPD_NAP_NS: u64 = 100_000_000;
/// MAX_RECLAIM_RETRIES: kswapd gives up on a node after this many
/// fruitless `balance_pgdat` runs.
const KSWAPD_MAX_FAILURES: u32 = 16;

/// What the scheduler should do with kswapd after a step.
#[derive(Debug, PartialEq, Eq)]
pub enum KswapdNext {
    /// Run again as soon as it gets a CPU.
    Run,
    /// Nap until this time (the waker may cut it short).
    NapUntil(u64),
    /// Asleep until woken.
    Sleep,
}

impl Kernel {
    /// `pgdat_balanced`: some eligible zone is above its high watermark.
    pub fn pgdat_balanced(&self) -> bool {
        let highest = self.highest_zoneidx();
        self.zones[..=highest]
            .iter()
            .filter(|z| z.managed > 0)
            .any(|z| z.watermark_ok(z.watermark[WMARK_HIGH], highest))
    }

    /// `wakeup_kswapd` from the allocator's slow path.
    pub fn wakeup_kswapd(&mut self) {
        match self.kswapd.state {
            KswapdState::Sleeping | KswapdState::Napping(_) => {}
            KswapdState::Woken | KswapdState::Balancing => return,
        }
        if self.kswapd.failures >= KSWAPD_MAX_FAILURES || self.pgdat_balanced() {
            return;
        }
        if let KswapdState::Napping(_) = self.kswapd.state {
            self.kswapd.woken_in_nap = true;
        }
        self.kswapd.state = KswapdState::Woken;
        self.kswapd_wake_at = Some(self.now());
    }

    /// One step of kswapd: start `balance_pgdat`, run one pass of its
    /// priority loop, or decide how to sleep.
    pub fn kswapd_step(&mut self) -> KswapdNext {
        match self.kswapd.state {
            KswapdState::Sleeping => KswapdNext::Sleep,
            KswapdState::Napping(_) => self.kswapd_nap_over(),
            KswapdState::Woken => {
                if std::mem::take(&mut self.kswapd.woken_in_nap) {
                    self.vm.inc(Vm::KswapdLowWmarkHitQuickly);
                }
                // Awake: the zones' vmstat thresholds are lowered until
                // kswapd sleeps for good (kswapd_try_to_sleep).
                self.set_pgdat_percpu_threshold(true);
                self.vm.inc(Vm::Pageoutrun);
                self.set_reclaim_active(true);
                // balance_pgdat runs in a memory stall throughout.
                self.kswapd.psi_was_in = self.psi_memstall_enter();
                self.kswapd.sc = ScanControl {
                    priority: DEF_PRIORITY,
                    may_writepage: true,
                    may_unmap: true,
                    may_swap: true,
                    target: None,
                    ..Default::default()
                };
                self.kswapd.state = KswapdState::Balancing;
                KswapdNext::Run
            }
            KswapdState::Balancing => self.traced(Fn::BalancePgdat, |k| k.balance_pgdat_pass()),
        }
    }

    fn balance_pgdat_pass(&mut self) -> KswapdNext {
        if self.pgdat_balanced() {
            return self.balance_pgdat_done();
        }
        let mut sc = std::mem::take(&mut self.kswapd.sc);
        self.kswapd_age_node(&mut sc);
        if sc.priority < DEF_PRIORITY - 2 {
            sc.may_writepage = true;
        }
        sc.nr_scanned = 0;
        let before = sc.nr_reclaimed;
        let highest = self.highest_zoneidx();
        sc.nr_to_reclaim = self.zones[..=highest]
            .iter()
            .filter(|z| z.managed > 0)
            .map(|z| z.watermark[WMARK_HIGH].max(SWAP_CLUSTER_MAX))
            .sum();
        self.shrink_node(&mut sc);
        let raise_priority = sc.nr_scanned < sc.nr_to_reclaim;
        let nr = sc.nr_reclaimed - before;
        if raise_priority || nr == 0 {
            sc.priority -= 1;
        }
        let done = sc.priority < 1;
        let total = sc.nr_reclaimed;
        self.kswapd.sc = sc;
        if done {
            if total == 0 {
                self.kswapd.failures += 1;
            }
            return self.balance_pgdat_done();
        }
        KswapdNext::Run
    }

    /// The classic `kswapd_age_node`: keep the inactive anon list from
    /// running low.
    pub(crate) fn kswapd_age_node_classic(&mut self, sc: &mut ScanControl) {
        if self.swapfile.total_swap_pages() == 0
            || !self.inactive_is_low(ROOT_MEMCG, LRU_INACTIVE_ANON)
        {
            return;
        }
        for m in 0..self.memcgs.len() as u16 {
            self.traced(Fn::ShrinkActiveList, |k| {
                k.shrink_active_list(SWAP_CLUSTER_MAX, m, sc, LRU_ACTIVE_ANON)
            });
        }
    }

    /// End of `balance_pgdat`, then the first half of `kswapd_try_to_sleep`.
    fn balance_pgdat_done(&mut self) -> KswapdNext {
        self.set_reclaim_active(false);
        self.psi_memstall_leave(self.kswapd.psi_was_in);
        self.snapshot_refaults(ROOT_MEMCG);
        if self.prepare_kswapd_sleep() {
            let until = self.now() + KSWAPD_NAP_NS;
            self.kswapd.state = KswapdState::Napping(until);
            return KswapdNext::NapUntil(until);
        }
        self.vm.inc(Vm::KswapdHighWmarkHitQuickly);
        self.kswapd.state = KswapdState::Woken;
        KswapdNext::Run
    }

    fn prepare_kswapd_sleep(&self) -> bool {
        self.kswapd.failures >= KSWAPD_MAX_FAILURES || self.pgdat_balanced()
    }

    /// The nap ran out without a wakeup: sleep for good if still balanced.
    fn kswapd_nap_over(&mut self) -> KswapdNext {
        if self.prepare_kswapd_sleep() {
            self.kswapd.state = KswapdState::Sleeping;
            self.set_pgdat_percpu_threshold(false);
            return KswapdNext::Sleep;
        }
        self.vm.inc(Vm::KswapdHighWmarkHitQuickly);
        self.kswapd.state = KswapdState::Woken;
        KswapdNext::Run
    }
}

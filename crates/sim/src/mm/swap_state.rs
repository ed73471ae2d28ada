//! mm/swap_state.c: the swap cache. Each device's xarray is a flat array
//! indexed by slot: 0 empty, `pfn << 2 | 2` a folio, `shadow` (bit 0 set)
//! a workingset shadow.

use super::folio::*;
use super::swapfile::{swp_offset, swp_type, SwpEntry, SWAPFILE_CLUSTER};

/// include/linux/swap.h: a swap cache XArray covers 2^14 slots (64 MiB
/// of swap) before 6.18's swap table.
const SWAP_ADDRESS_SPACE_SHIFT: u32 = 14;
use crate::cost_model;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

/// Cluster swap readahead's global state, swap_state.c's statics:
/// `swapin_readahead_hits`, and `swapin_nr_pages`' `prev_offset` and
/// `last_readahead_pages`. Only this file reads or changes them.
pub struct Readahead {
    hits: u32,
    prev_offset: u32,
    last_pages: u32,
}

impl Default for Readahead {
    /// `swapin_readahead_hits` starts at 4 (`ATOMIC_INIT(4)`).
    fn default() -> Self {
        Readahead {
            hits: 4,
            prev_offset: 0,
            last_pages: 0,
        }
    }
}

impl Kernel {
    fn cache_slot(&mut self, entry: SwpEntry) -> &mut u64 {
        &mut self.swap[swp_type(entry)].cache[swp_offset(entry) as usize]
    }

    /// Points slot `entry` at folio `pfn` (a split's tail taking its
    /// page's slot).
    pub fn swap_cache_set(&mut self, entry: SwpEntry, pfn: Pfn) {
        *self.cache_slot(entry) = (pfn as u64) << 2 | 2;
    }

    /// `add_to_swap_cache`: the folio takes its slots (a large folio one
    /// per page, from `entry` on) and a reference per page; returns the
    /// shadow the first slot held, if any.
    pub fn add_to_swap_cache(&mut self, pfn: Pfn, entry: SwpEntry) -> Option<u64> {
        let nr = self.folios.get(pfn).nr_pages();
        let old = std::mem::replace(self.cache_slot(entry), (pfn as u64) << 2 | 2);
        debug_assert!(old & 3 != 2, "slot already caches a folio");
        for i in 1..nr {
            *self.cache_slot(entry + i) = (pfn as u64) << 2 | 2;
        }
        let f = self.folios.get_mut(pfn);
        f.refcount += nr;
        f.set(PG_SWAPCACHE);
        f.swap = entry;
        let memcg = f.memcg;
        self.mod_node_page_state(Vm::NrFilePages, nr as i64);
        self.mod_node_page_state(Vm::NrSwapcached, nr as i64);
        self.memcg_stat(memcg, Mc::Swapcached, nr as i64);
        // The insert is the work under the cache's lock (xas_lock_irq).
        let lock = self.spin_lock(self.swap_cache_lock(entry));
        self.charge_cost(cost_model::Fn::AddToSwapCache, self.costs.swap_cache_add);
        self.spin_unlock(lock);
        (old & 1 == 1).then_some(old)
    }

    /// The lock over `entry`'s swap cache entry: its XArray's (one per
    /// `SWAP_ADDRESS_SPACE_PAGES` slots), from 6.18 its swap cluster's.
    pub(super) fn swap_cache_lock(&self, entry: SwpEntry) -> crate::cacheline::Line {
        let shift = if self.release.swap_table {
            SWAPFILE_CLUSTER.trailing_zeros()
        } else {
            SWAP_ADDRESS_SPACE_SHIFT
        };
        crate::cacheline::Line::SwapCache {
            ty: swp_type(entry) as u8,
            range: swp_offset(entry) >> shift,
        }
    }

    /// `__delete_from_swap_cache`: leave `shadow` (or nothing) behind in
    /// each slot. The caller drops the cache's references and the slots'
    /// HAS_CACHE.
    pub fn delete_from_swap_cache_locked(&mut self, pfn: Pfn, shadow: u64) {
        let f = self.folios.get_mut(pfn);
        let (entry, nr) = (f.swap, f.nr_pages());
        f.clear(PG_SWAPCACHE);
        f.swap = 0;
        let memcg = f.memcg;
        for i in 0..nr {
            *self.cache_slot(entry + i) = shadow;
        }
        self.mod_node_page_state(Vm::NrFilePages, -(nr as i64));
        self.mod_node_page_state(Vm::NrSwapcached, -(nr as i64));
        self.memcg_stat(memcg, Mc::Swapcached, -(nr as i64));
        // Simplification: the whole deletion is held under the lock; the
        // folio lock swap_cache_del also prices is taken before it.
        let lock = self.spin_lock(self.swap_cache_lock(entry));
        self.charge_cost(
            cost_model::Fn::DeleteFromSwapCache,
            self.costs.swap_cache_del,
        );
        self.spin_unlock(lock);
    }

    /// `delete_from_swap_cache`: remove, release the slots' cache bits,
    /// drop the cache's references.
    pub fn delete_from_swap_cache(&mut self, pfn: Pfn) {
        let (entry, nr) = (self.folios.get(pfn).swap, self.folios.get(pfn).nr_pages());
        self.delete_from_swap_cache_locked(pfn, 0);
        self.put_swap_folio_nr(entry, nr);
        self.folio_put_refs(pfn, nr);
    }

    /// `get_shadow_from_swap_cache`.
    pub fn get_shadow_from_swap_cache(&self, entry: SwpEntry) -> Option<u64> {
        let v = self.swap[swp_type(entry)].cache[swp_offset(entry) as usize];
        (v & 1 == 1).then_some(v)
    }

    /// `folio_free_swap`: drop the swap copy of a folio that no PTE needs:
    /// only if not under writeback and the slot's count is 0. The folio
    /// becomes dirty, its only copy now in RAM.
    pub fn folio_free_swap(&mut self, pfn: Pfn) -> bool {
        let f = self.folios.get(pfn);
        // A locked folio (read in flight) fails the callers' trylock.
        if !f.test(PG_SWAPCACHE) || f.test(PG_WRITEBACK) || f.test(PG_LOCKED) {
            return false;
        }
        let (entry, nr) = (f.swap, f.nr_pages());
        // folio_swapped: any of its slots still referenced (swap_swapcount,
        // swap_page_trans_huge_swapped). Its lock of the slot's cluster is
        // not taken here: the same CPU takes it again for put_swap_folio
        // straight after, which moves the line once for both; only a
        // folio whose slots are still referenced (nothing freed) moves
        // the line in the kernel and not here.
        let si = &self.swap[swp_type(entry)];
        if (0..nr).any(|i| si.swap_count(swp_offset(entry) + i) != 0) {
            return false;
        }
        // Callers hold a reference (the kernel's always do), so the folio
        // outlives the cache's reference dropped here.
        debug_assert!(self.folios.get(pfn).refcount > 1);
        self.folios.get_mut(pfn).set(PG_DIRTY);
        self.delete_from_swap_cache(pfn);
        true
    }

    /// `free_swap_cache` (zap, COW): the swap copy of a folio no PTE maps
    /// any more goes.
    pub fn free_swap_cache(&mut self, head: Pfn) {
        let f = self.folios.get(head);
        if f.test(PG_SWAPCACHE) && f.mapcount == 0 {
            self.folio_free_swap(head);
        }
    }

    /// The page of folio `pfn` that holds `entry`: a THP in the swap cache
    /// has its pages in consecutive slots; an order-0 folio (in the cache
    /// or read past it) is its own page.
    #[inline]
    pub fn swap_cache_page(&self, pfn: Pfn, entry: SwpEntry) -> Pfn {
        let f = self.folios.get(pfn);
        if f.order > 0 {
            pfn + (entry - f.swap)
        } else {
            pfn
        }
    }

    /// `free_swap_and_cache` (zap of a swap PTE): drop the reference; if
    /// only the swap cache still holds the slot and its folio is unmapped
    /// or swap is full, free the cached folio's swap too.
    pub fn free_swap_and_cache(&mut self, entry: SwpEntry) {
        self.swap_free(entry);
        let (ty, off) = (swp_type(entry), swp_offset(entry));
        if self.swap[ty].swap_map[off as usize] == super::swapfile::SWAP_HAS_CACHE {
            if let Some(pfn) = self.swap_folio_of(entry) {
                // __try_to_reclaim_swap: with a reference of its own.
                let f = *self.folios.get(pfn);
                if f.mapcount == 0 || self.mem_cgroup_swap_full(f.memcg) {
                    self.folios.get_mut(pfn).refcount += 1;
                    self.folio_free_swap(pfn);
                    self.folio_put(pfn);
                }
            }
        }
    }
}

// ---- swap-in and readahead ------------------------------------------------

/// SWAP_RA_ORDER_CEILING: VMA readahead reads at most 2^5 pages.
const SWAP_RA_ORDER_CEILING: u32 = 5;
/// PMD_SIZE in pages: VMA readahead stays inside the fault's page table.
const PMD_PAGES: u64 = 512;

/// `__swapin_nr_pages`: the readahead window from the hit count, whether the
/// fault continues the previous one, and the previous window.
pub fn swapin_nr_pages_for(
    prev_offset: u64,
    offset: u64,
    hits: u32,
    max: u32,
    prev_win: u32,
) -> u32 {
    let mut pages = hits + 2;
    if pages == 2 {
        if offset != prev_offset.wrapping_add(1) && offset != prev_offset.wrapping_sub(1) {
            pages = 1;
        }
    } else {
        pages = pages.next_power_of_two().max(4);
    }
    pages.min(max).max(prev_win / 2)
}

/// `vma->swap_readahead_info` as the kernel packs it: page address, window
/// (bits 6-11), hits (bits 0-5); 0 reads as 4 hits.
fn swap_ra_unpack(v: u64) -> (u64, u32, u32) {
    let v = if v == 0 { 4 } else { v };
    (v >> 12, ((v >> 6) & 0x3f) as u32, (v & 0x3f) as u32)
}
fn swap_ra_pack(vpn: u64, win: u32, hits: u32) -> u64 {
    vpn << 12 | (win as u64) << 6 | hits as u64
}
const SWAP_RA_HITS_MAX: u32 = 0x3f;

impl Kernel {
    /// `swap_use_vma_readahead`.
    pub fn swap_use_vma_readahead(&self) -> bool {
        self.sysfs.vma_ra_enabled && self.swapfile.nr_rotate_swap() == 0
    }

    /// `lookup_swap_cache` (6.1; `swap_cache_get_folio` later): the cached
    /// folio with a reference, and the readahead hit bookkeeping. `at` is
    /// the faulting (vma, page index), None for lookups without a VMA.
    pub fn lookup_swap_cache(&mut self, entry: SwpEntry, at: Option<(u32, usize)>) -> Option<Pfn> {
        let pfn = self.swap_folio_of(entry)?;
        let f = self.folios.get_mut(pfn);
        f.refcount += 1;
        let readahead = f.test(PG_READAHEAD);
        f.clear(PG_READAHEAD);
        let vma_ra = self.swap_use_vma_readahead();
        if let (Some((vma, idx)), true) = (at, vma_ra) {
            let v = &mut self.vmas[vma as usize];
            let (_, win, mut hits) = swap_ra_unpack(v.swap_readahead_info);
            if readahead {
                hits = (hits + 1).min(SWAP_RA_HITS_MAX);
            }
            v.swap_readahead_info = swap_ra_pack(v.start_vpn + idx as u64, win, hits);
        }
        if readahead {
            self.vm.inc(Vm::SwapRaHit);
            if at.is_none() || !vma_ra {
                self.swap_ra.hits += 1;
            }
        }
        Some(pfn)
    }

    /// 7.3's `swap_cache_get_folio` (and `__read_swap_cache_async`'s own
    /// lookup in every release): the slot's folio with a reference, and
    /// nothing else: no readahead flag cleared, no hit counted or fed to
    /// the readahead windows (only the fault paths do that there).
    pub fn swap_cache_get_folio(&mut self, entry: SwpEntry) -> Option<Pfn> {
        let pfn = self.swap_folio_of(entry)?;
        self.folios.get_mut(pfn).refcount += 1;
        Some(pfn)
    }

    /// `__read_swap_cache_async`: the slot's folio, from the cache or newly
    /// allocated (locked, charged, in the cache, on its way to the LRU),
    /// with a reference for the caller; `true` if new (the caller starts
    /// the read). None if the slot is unused or memory ran out.
    pub fn read_swap_cache_async(&mut self, entry: SwpEntry, mm_memcg: u16) -> Option<(Pfn, bool)> {
        if let Some(pfn) = self.swap_cache_get_folio(entry) {
            return Some((pfn, false));
        }
        let (ty, off) = (swp_type(entry), swp_offset(entry) as usize);
        let m = self.swap[ty].swap_map[off];
        // Skip unused slots (and, with the slot caches off, free ones:
        // swapcache_prepare would fail with -ENOENT).
        if m & super::swapfile::SWAP_COUNT_MASK == 0 {
            return None;
        }
        // With no folio cached, nobody holds HAS_CACHE (a fault runs
        // start to end without another task in between).
        debug_assert_eq!(m & super::swapfile::SWAP_HAS_CACHE, 0);
        let memcg = self.swapin_memcg(entry, mm_memcg);
        let pfn = self.alloc_swapin_folio(memcg)?;
        // swapcache_prepare, after the allocation, whose reclaim may have
        // let go of the slot's last reference meanwhile (-ENOENT, or
        // -EEXIST while it waits in a CPU's return batch, after which the
        // retry finds no user left): the new folio goes back.
        self.lock_cluster_or_swap_info(entry);
        let m = self.swap[ty].swap_map[off];
        if m & super::swapfile::SWAP_COUNT_MASK == 0 || m & super::swapfile::SWAP_HAS_CACHE != 0 {
            self.folios.get_mut(pfn).clear(PG_LOCKED);
            self.folio_put(pfn);
            return self.swap_cache_get_folio(entry).map(|p| (p, false));
        }
        self.swap[ty].swap_map[off] |= super::swapfile::SWAP_HAS_CACHE;
        if let Some(shadow) = self.add_to_swap_cache(pfn, entry) {
            self.workingset_refault(pfn, shadow);
        }
        self.folio_add_lru(pfn);
        Some((pfn, true))
    }

    /// The memcg a swap-in is charged to: the one the slot's swap charge
    /// records, else the faulting mm's (`mem_cgroup_swapin_charge_folio`).
    pub fn swapin_memcg(&self, entry: SwpEntry, mm_memcg: u16) -> u16 {
        let m = self.swap[swp_type(entry)].cgroup[swp_offset(entry) as usize];
        if (m as usize) < self.memcgs.len() && m != 0 {
            m
        } else {
            mm_memcg
        }
    }

    /// `__swapin_nr_pages` with its histogram.
    fn swapin_window(&mut self, prev: u64, off: u64, hits: u32, max: u32, prev_win: u32) -> u32 {
        let pages = swapin_nr_pages_for(prev, off, hits, max, prev_win);
        self.hist.swapin_nr_pages.record(pages as u64);
        pages
    }

    /// `swapin_nr_pages` for cluster readahead: global hit statistics.
    fn swapin_nr_pages(&mut self, offset: u32) -> u32 {
        let max = 1u32 << self.sysctl.page_cluster;
        if max <= 1 {
            return 1;
        }
        let hits = std::mem::take(&mut self.swap_ra.hits);
        let pages = self.swapin_window(
            self.swap_ra.prev_offset as u64,
            offset as u64,
            hits,
            max,
            self.swap_ra.last_pages,
        );
        if hits == 0 {
            self.swap_ra.prev_offset = offset;
        }
        self.swap_ra.last_pages = pages;
        pages
    }

    /// Reads one readahead candidate; `target` is the faulting slot.
    fn readahead_one(&mut self, entry: SwpEntry, target: bool, memcg: u16) {
        if let Some((pfn, allocated)) = self.read_swap_cache_async(entry, memcg) {
            if allocated {
                self.swap_readpage(pfn, entry);
                if !target {
                    self.folios.get_mut(pfn).set(PG_READAHEAD);
                    self.vm.inc(Vm::SwapRa);
                }
            }
            self.folio_put(pfn);
        }
    }

    /// `swap_cluster_readahead`: the naturally aligned block of slots
    /// around the target, on its device, then the target itself.
    fn swap_cluster_readahead(&mut self, entry: SwpEntry, memcg: u16) -> Option<Pfn> {
        let (ty, off) = (swp_type(entry), swp_offset(entry));
        let mask = self.swapin_nr_pages(off) - 1;
        if mask > 0 {
            let start = (off & !mask).max(1);
            let end = (off | mask).min(self.swap[ty].max - 1);
            self.blk_start_plug();
            for o in start..=end {
                self.readahead_one(super::swapfile::swp_entry(ty, o), o == off, memcg);
            }
            self.blk_finish_plug();
            self.lru_add_drain();
        }
        self.read_swap_cache_target(entry, memcg)
    }

    /// `shmem_swapin_cluster`: shmem always reads with cluster readahead.
    pub fn shmem_swapin_cluster(&mut self, entry: SwpEntry, memcg: u16) -> Option<Pfn> {
        self.traced(crate::cost_model::Fn::SwapinReadahead, |k| {
            k.swap_cluster_readahead(entry, memcg)
        })
    }

    /// 7.3's `swapin_sync` on a SWP_SYNCHRONOUS_IO device: the one folio
    /// read through the swap cache, no readahead, whatever the slot's
    /// swap count.
    pub fn swapin_sync(&mut self, entry: SwpEntry, memcg: u16) -> Option<Pfn> {
        self.read_swap_cache_target(entry, memcg)
    }

    /// The final `read_swap_cache_async` of the target.
    fn read_swap_cache_target(&mut self, entry: SwpEntry, memcg: u16) -> Option<Pfn> {
        let (pfn, allocated) = self.read_swap_cache_async(entry, memcg)?;
        if allocated {
            self.swap_readpage(pfn, entry);
        }
        Some(pfn)
    }

    /// `swap_ra_info` + `swap_vma_readahead`: the swap PTEs in a window
    /// around the fault, placed by its direction, inside the VMA and the
    /// fault's page table.
    fn swap_vma_readahead(
        &mut self,
        entry: SwpEntry,
        vma: u32,
        idx: usize,
        memcg: u16,
    ) -> Option<Pfn> {
        let max_win = 1u32 << self.sysctl.page_cluster.min(SWAP_RA_ORDER_CEILING);
        let v = &self.vmas[vma as usize];
        let fpfn = v.start_vpn + idx as u64;
        let (pfn, prev_win, hits) = swap_ra_unpack(v.swap_readahead_info);
        let win = if max_win == 1 {
            1
        } else {
            self.swapin_window(pfn, fpfn, hits, max_win, prev_win)
        };
        if max_win > 1 {
            self.vmas[vma as usize].swap_readahead_info = swap_ra_pack(fpfn, win, 0);
        }
        if win > 1 {
            let win = win as u64;
            let (lo, hi) = if fpfn == pfn + 1 {
                (fpfn, fpfn + win)
            } else if pfn == fpfn + 1 {
                (fpfn + 1 - win, fpfn + 1)
            } else {
                let left = (win - 1) / 2;
                (fpfn.saturating_sub(left), fpfn + win - left)
            };
            let v = &self.vmas[vma as usize];
            let pmd = fpfn & !(PMD_PAGES - 1);
            let start = lo.max(v.start_vpn).max(pmd);
            let end = hi.min(v.start_vpn + v.pages).min(pmd + PMD_PAGES);
            self.blk_start_plug();
            for va in start..end {
                let pte =
                    self.vmas[vma as usize].ptes[(va - self.vmas[vma as usize].start_vpn) as usize];
                if !super::pgtable::is_swap_pte(pte) {
                    continue;
                }
                let e = super::pgtable::pte_swp_entry(pte);
                self.readahead_one(e, va == fpfn, memcg);
            }
            self.blk_finish_plug();
            self.lru_add_drain();
        }
        self.read_swap_cache_target(entry, memcg)
    }

    /// `swapin_readahead`: VMA readahead unless it is off or any swap device
    /// is rotational; cluster readahead then.
    pub fn swapin_readahead(
        &mut self,
        entry: SwpEntry,
        vma: u32,
        idx: usize,
        memcg: u16,
    ) -> Option<Pfn> {
        self.traced(crate::cost_model::Fn::SwapinReadahead, |k| {
            if k.swap_use_vma_readahead() {
                k.swap_vma_readahead(entry, vma, idx, memcg)
            } else {
                k.swap_cluster_readahead(entry, memcg)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::swapfile::swp_entry;
    use crate::cacheline::Line;
    use crate::kernel::test_kernel as kernel;

    fn range(l: Line) -> u32 {
        match l {
            Line::SwapCache { range, .. } => range,
            _ => unreachable!("a swap cache lock"),
        }
    }

    #[test]
    fn the_swap_cache_lock_covers_64_mib_of_slots_before_the_swap_table_and_a_cluster_after() {
        let k = kernel(2, "6.1");
        let r = |k: &crate::kernel::Kernel, off| range(k.swap_cache_lock(swp_entry(0, off)));
        assert_eq!(r(&k, 0), r(&k, 16_383));
        assert_ne!(r(&k, 16_383), r(&k, 16_384));
        let k = kernel(2, "7.3");
        assert_eq!(r(&k, 0), r(&k, 511));
        assert_ne!(r(&k, 511), r(&k, 512));
    }
}

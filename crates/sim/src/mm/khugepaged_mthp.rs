//! khugepaged as Linux 7.3 has it for anonymous mTHP (mm/khugepaged.c's
//! `collapse_scan_pmd`, `mthp_collapse` and `collapse_huge_page` at an
//! order): a PMD's worth of PTEs is scanned once against the PMD-size
//! limits, marking each present page in a bitmap; then, from the largest
//! enabled order down, every naturally aligned block with enough present
//! pages (`collapse_max_ptes_none` scaled to the order) is collapsed into
//! a new folio of that order, mapped by PTEs. A block already mapped by a
//! folio of that order or larger fails only after its folio is allocated
//! and charged (`collapse_alloc` counts it, as 7.3 does), then freed.
//!
//! PMD-size collapse is not reached here: the 7.3 preset refuses PMD-size
//! anonymous THP, so the enabled orders stop at 8.

use super::Scan;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::mm::folio::*;
use crate::mm::pgtable::*;
use crate::vmstat::{mthp_item, MthpStat, Vm};
use mmsim_spec::ThpEnabled;

/// `KHUGEPAGED_MIN_MTHP_ORDER`.
const MIN_ORDER: u8 = 2;

/// `max_order_from_offset`: the largest naturally aligned order at PTE
/// `offset` of a PMD.
fn max_order_from_offset(offset: u32) -> u8 {
    if offset == 0 {
        9
    } else {
        (offset.trailing_zeros() as u8).min(9)
    }
}

/// `cc->mthp_present_ptes`: one bit per PTE of the PMD that maps a page.
struct Present([u64; 8]);

impl Present {
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    /// `bitmap_weight_from`: the set bits in `[from, to)`.
    fn weight(&self, from: usize, to: usize) -> u32 {
        (from..to)
            .filter(|&i| self.0[i / 64] & (1 << (i % 64)) != 0)
            .count() as u32
    }
}

impl Kernel {
    /// `hugepage_enabled()` for anonymous memory: PMD-size THP on, or an
    /// mTHP size that may be used (`anon_hpage_enabled`).
    pub(super) fn hugepage_enabled(&self) -> bool {
        let m = self.thp.mthp;
        self.thp.enabled != ThpEnabled::Never || m.always != 0 || m.madvise != 0
    }

    /// 7.3's `collapse_possible_orders(vma, TVA_KHUGEPAGED)` for an
    /// anonymous VMA: the mTHP orders the knobs allow there
    /// (`thp_vma_allowable_orders`), those whose last aligned block fits
    /// the VMA, and none before the VMA's first fault (no anon_vma).
    pub(super) fn collapse_possible_orders(&self, vma: u32) -> u16 {
        let v = &self.vmas[vma as usize];
        if !v.live || v.inode != NIL || !v.anon_used {
            return 0;
        }
        let mut orders = self.anon_mthp_allowed(vma);
        // The size check from the highest order down: the first order
        // whose block ending at vm_end is inside the VMA keeps it and the
        // orders below.
        let end = v.start_vpn + v.pages;
        while orders != 0 {
            let order = 15 - orders.leading_zeros() as u8;
            let nr = 1u64 << order;
            let start = end.saturating_sub(nr) & !(nr - 1);
            if end >= nr && start >= v.start_vpn {
                break;
            }
            orders &= !(1 << order);
        }
        orders
    }

    /// `count_collapse_event` below PMD size: the per-size stat only.
    fn count_collapse_mthp(&mut self, order: u8, stat: MthpStat) {
        self.vm.inc(mthp_item(order, stat));
    }

    /// `collapse_max_ptes_none` for an mTHP order: the PMD limit scaled
    /// when it is at its maximum (511), else 0 (7.3 warns once and uses 0
    /// for any other value).
    fn collapse_max_ptes_none(&self, order: u8) -> u32 {
        if self.thp.khugepaged.max_ptes_none == HPAGE_PMD_NR as u32 - 1 {
            (1 << order) - 1
        } else {
            0
        }
    }

    /// 7.3's `collapse_scan_pmd` of the PMD block at virtual page `addr`,
    /// with mTHP orders enabled (the empty-PTE limit is then 511): the
    /// PMD-size limits for swap and shared PTEs, each present page
    /// checked and marked, then `mthp_collapse`. Returns the result,
    /// whether mmap_lock is still held, and the PTEs scanned (7.3's
    /// progress counts them one by one).
    pub(super) fn collapse_scan_pmd(&mut self, mm: u32, vma: u32, addr: u64) -> (Scan, bool, u64) {
        let first = (addr - self.vmas[vma as usize].start_vpn) as usize;
        let r = self.find_pmd_or_thp_or_none(vma, first);
        if r != Scan::Succeed {
            return (r, true, 1);
        }
        let enabled = self.collapse_possible_orders(vma);
        let ctl = self.thp.khugepaged;
        let (mut none_or_zero, mut unmapped, mut shared, mut referenced) = (0, 0, 0, 0);
        let mut present = Present([0; 8]);
        let mut scanned = 0;
        let mut r = Scan::Succeed;
        for i in 0..HPAGE_PMD_NR as usize {
            scanned += 1;
            let pte = self.vmas[vma as usize].ptes[first + i];
            if pte_none(pte) || pte & PTE_ZERO != 0 {
                none_or_zero += 1;
                if none_or_zero > HPAGE_PMD_NR as u32 - 1 {
                    self.vm.inc(Vm::ThpScanExceedNonePte);
                    self.count_collapse_mthp(9, MthpStat::CollapseExceedNonePte);
                    r = Scan::ExceedNonePte;
                    break;
                }
                continue;
            }
            if is_swap_pte(pte) {
                unmapped += 1;
                if unmapped > ctl.max_ptes_swap {
                    self.vm.inc(Vm::ThpScanExceedSwapPte);
                    self.count_collapse_mthp(9, MthpStat::CollapseExceedSwapPte);
                    r = Scan::ExceedSwapPte;
                    break;
                }
                continue;
            }
            let page = pte_pfn(pte);
            let head = self.folios.head_of(page);
            let f = *self.folios.get(head);
            if !f.test(PG_SWAPBACKED) && f.test(PG_ANON) && pte & PTE_DIRTY == 0 {
                r = Scan::PageLazyfree;
                break;
            }
            if !f.test(PG_ANON) {
                r = Scan::PageAnon;
                break;
            }
            if self.folio_maybe_mapped_shared(head) {
                shared += 1;
                if shared > ctl.max_ptes_shared {
                    self.vm.inc(Vm::ThpScanExceedSharePte);
                    self.count_collapse_mthp(9, MthpStat::CollapseExceedSharedPte);
                    r = Scan::ExceedSharedPte;
                    break;
                }
            }
            present.set(i);
            r = if !f.test(PG_LRU) {
                Scan::PageLru
            } else if f.test(PG_LOCKED) {
                Scan::PageLock
            } else if !self.is_refcount_suitable(head) {
                Scan::PageCount
            } else {
                Scan::Succeed
            };
            if r != Scan::Succeed {
                break;
            }
            if pte & PTE_YOUNG != 0 || f.test(PG_REFERENCED) {
                referenced += 1;
            }
        }
        self.charge_cost(Fn::Khugepaged, self.costs.pte * scanned);
        if r == Scan::Succeed
            && (referenced == 0 || (unmapped > 0 && referenced < HPAGE_PMD_NR as u32 / 2))
        {
            r = Scan::LackReferencedPage;
        }
        if r != Scan::Succeed {
            return (r, true, scanned);
        }
        let r = self.mthp_collapse(mm, vma, first, unmapped, enabled, &present);
        (r, false, scanned)
    }

    /// `mthp_collapse`: from the largest enabled order at each offset of
    /// the PMD, a block with enough present pages is collapsed; a success
    /// or a block already that large moves past it, a failure that a
    /// smaller order may not meet tries the next order down, and any
    /// other failure ends the PMD.
    fn mthp_collapse(
        &mut self,
        mm: u32,
        vma: u32,
        first: usize,
        unmapped: u32,
        enabled: u16,
        present: &Present,
    ) -> Scan {
        let (mut offset, mut order) = (0u32, 9u8);
        let (mut collapsed, mut alloc_failed, mut last) = (0, false, Scan::Fail);
        'offsets: while offset < HPAGE_PMD_NR as u32 {
            let nr = 1u32 << order;
            let mut next_offset = false;
            if enabled & (1 << order) != 0 {
                debug_assert!(order < 9, "7.3 has no PMD-size anonymous THP in mmsim");
                let occupied = present.weight(offset as usize, (offset + nr) as usize);
                if occupied >= nr - self.collapse_max_ptes_none(order) {
                    let start = first + offset as usize;
                    let r = self.traced(Fn::CollapseHugePage, |k| {
                        k.collapse_huge_page_mthp(mm, vma, start, unmapped, order)
                    });
                    match r {
                        Scan::Succeed => {
                            collapsed += nr;
                            next_offset = true;
                        }
                        Scan::PteMappedHugepage => next_offset = true,
                        Scan::AllocHugePageFail => {
                            alloc_failed = true;
                            last = r;
                        }
                        Scan::LackReferencedPage
                        | Scan::ExceedNonePte
                        | Scan::ExceedSwapPte
                        | Scan::ExceedSharedPte
                        | Scan::PageLock
                        | Scan::PageCount
                        | Scan::DelPageLru
                        | Scan::PteNonPresent
                        | Scan::PageLazyfree => last = r,
                        _ => {
                            last = r;
                            break 'offsets;
                        }
                    }
                }
            }
            if !next_offset && order > MIN_ORDER && enabled & ((1 << order) - 1) != 0 {
                order -= 1;
                continue;
            }
            offset += nr;
            order = max_order_from_offset(offset);
        }
        if collapsed > 0 {
            Scan::Succeed
        } else if alloc_failed {
            Scan::AllocHugePageFail
        } else {
            last
        }
    }

    /// 7.3's `collapse_huge_page` of the 2^`order` pages from page `start`
    /// of `vma`: the folio allocated and charged first (`collapse_alloc`),
    /// then the VMA and PMD checked again, a swap PTE in the block ending
    /// the attempt (`collapse_exceed_swap_pte`), the pages isolated,
    /// copied and replaced by the folio's PTEs. On failure the folio is
    /// uncharged and freed.
    fn collapse_huge_page_mthp(
        &mut self,
        mm: u32,
        vma: u32,
        start: usize,
        unmapped: u32,
        order: u8,
    ) -> Scan {
        let memcg = self.mms[mm as usize].memcg;
        let nr = 1u64 << order;
        let Some(folio) = self.alloc_large_folio(order as usize) else {
            self.count_collapse_mthp(order, MthpStat::CollapseAllocFailed);
            return Scan::AllocHugePageFail;
        };
        self.count_collapse_mthp(order, MthpStat::CollapseAlloc);
        self.folios.get_mut(folio).memcg = memcg;
        let charged = if self.thp.khugepaged.defrag {
            self.try_charge(memcg, nr)
        } else {
            self.try_charge_nowait(memcg, nr)
        };
        if charged != crate::mm::memcontrol::Charge::Ok {
            self.free_folio_pages(folio);
            return Scan::CgroupChargeFail;
        }
        let r = self.collapse_mthp_revalidated(vma, start, unmapped, order, folio);
        if r != Scan::Succeed {
            self.mem_cgroup_uncharge(memcg, nr);
            self.free_folio_pages(folio);
        }
        r
    }

    /// `hugepage_vma_revalidate` (the VMA spans the whole PMD and still
    /// allows the order) and the PMD checked, the swap PTEs of the block
    /// refused, then isolate, copy and map.
    fn collapse_mthp_revalidated(
        &mut self,
        vma: u32,
        start: usize,
        unmapped: u32,
        order: u8,
        folio: Pfn,
    ) -> Scan {
        let v = &self.vmas[vma as usize];
        let pmd = (v.start_vpn + start as u64) & !(HPAGE_PMD_NR - 1);
        if pmd < v.start_vpn || pmd + HPAGE_PMD_NR > v.start_vpn + v.pages {
            return Scan::VmaCheck;
        }
        if self.collapse_possible_orders(vma) & (1 << order) == 0 {
            return Scan::VmaCheck;
        }
        let r = self.find_pmd_or_thp_or_none(vma, start);
        if r != Scan::Succeed {
            return r;
        }
        let nr = 1usize << order;
        if unmapped > 0
            && self.vmas[vma as usize].ptes[start..start + nr]
                .iter()
                .any(|&p| is_swap_pte(p))
        {
            // __collapse_huge_page_swapin bails on the first swap entry
            // below PMD size.
            self.count_collapse_mthp(order, MthpStat::CollapseExceedSwapPte);
            return Scan::ExceedSwapPte;
        }
        // Under mmap_write_lock, the VMA write-locked: the process's
        // faults on other CPUs wait for the copy (mmap_lock.rs).
        let mm = self.vmas[vma as usize].mm;
        self.mmap_write_lock(mm, vma);
        // anon_vma_lock_write over the flush and the isolation, as the
        // PMD collapse (khugepaged.rs).
        let anon_vma = self.anon_vma_lock_write(self.vmas[vma as usize].anon_vma);
        self.mmu_notifier_invalidate_range(vma, start, 1 << order);
        // pmdp_collapse_flush.
        self.charge_cost(Fn::CollapseHugePage, self.costs.tlb_flush);
        self.flush_tlb_mm_range(mm, false);
        let mut compound = self.take_scratch();
        let r = self.collapse_isolate_mthp(vma, start, order, &mut compound);
        self.anon_vma_unlock_write(anon_vma);
        if r == Scan::Succeed {
            self.collapse_copy_mthp(vma, start, order, folio, &compound);
            self.map_anon_folio_pte_nopf(vma, start, folio, Fn::CollapseHugePage);
        }
        self.give_scratch(compound);
        self.mmap_write_unlock(mm);
        r
    }

    /// 7.3's `__collapse_huge_page_isolate` at an mTHP order: the
    /// order's empty-PTE limit, no swap PTE, no lazily freed clean page,
    /// no shared folio (limit 0), no folio already of the order or larger
    /// (`SCAN_PTE_MAPPED_HUGEPAGE`), then each folio off the LRU (a large
    /// one once). On failure the folios isolated so far go back.
    fn collapse_isolate_mthp(
        &mut self,
        vma: u32,
        start: usize,
        order: u8,
        compound: &mut Vec<Pfn>,
    ) -> Scan {
        let max_none = self.collapse_max_ptes_none(order);
        let (mut none_or_zero, mut referenced) = (0, 0);
        let mut small = self.take_scratch();
        let mut r = Scan::Succeed;
        for i in start..start + (1 << order) {
            let pte = self.vmas[vma as usize].ptes[i];
            if pte_none(pte) || pte & PTE_ZERO != 0 {
                none_or_zero += 1;
                if none_or_zero > max_none {
                    self.count_collapse_mthp(order, MthpStat::CollapseExceedNonePte);
                    r = Scan::ExceedNonePte;
                    break;
                }
                continue;
            }
            if !pte_present(pte) {
                r = Scan::PteNonPresent;
                break;
            }
            let head = self.folios.head_of(pte_pfn(pte));
            let f = *self.folios.get(head);
            if !f.test(PG_SWAPBACKED) && pte & PTE_DIRTY == 0 {
                r = Scan::PageLazyfree;
                break;
            }
            if self.folio_maybe_mapped_shared(head) {
                self.count_collapse_mthp(order, MthpStat::CollapseExceedSharedPte);
                r = Scan::ExceedSharedPte;
                break;
            }
            if f.order >= order {
                r = Scan::PteMappedHugepage;
                break;
            }
            r = self.collapse_isolate_folio(head, compound, &mut small);
            if r != Scan::Succeed {
                break;
            }
            if pte & PTE_YOUNG != 0 || self.folios.get(head).test(PG_REFERENCED) {
                referenced += 1;
            }
        }
        if r == Scan::Succeed && referenced == 0 {
            r = Scan::LackReferencedPage;
        }
        if r != Scan::Succeed {
            for &head in small.iter().chain(compound.iter()) {
                self.release_pte_page(head);
            }
            compound.clear();
        }
        self.give_scratch(small);
        r
    }

    /// 7.3's `__collapse_huge_page_copy` and `_copy_succeeded` at an mTHP
    /// order: each page's content into the new folio (a hole or the zero
    /// page gives a cleared page and one more page of RSS); a small folio
    /// goes back to the LRU and is unmapped; the PTEs of a smaller large
    /// folio go as one batch (`folio_remove_rmap_ptes`: whole, so never
    /// partially mapped), and it is put back.
    fn collapse_copy_mthp(
        &mut self,
        vma: u32,
        start: usize,
        order: u8,
        folio: Pfn,
        compound: &[Pfn],
    ) {
        let mm = self.vmas[vma as usize].mm;
        let nr = 1usize << order;
        let mut i = 0;
        while i < nr {
            let idx = start + i;
            let pte = self.vmas[vma as usize].ptes[idx];
            let dst = folio + i as Pfn;
            if pte_none(pte) || pte & PTE_ZERO != 0 {
                self.charge_mem(Fn::CollapseHugePage, self.costs.clear_page, PAGE_BYTES);
                self.l2_write(dst, 1);
                self.folios.version[dst as usize] = 0;
                self.mms[mm as usize].rss_anon += 1;
                self.vmas[vma as usize].ptes[idx] = 0;
                i += 1;
                continue;
            }
            let src = pte_pfn(pte);
            let head = self.folios.head_of(src);
            // folio_pte_batch: the following PTEs that map the following
            // pages of the same folio, never past its last page (the next
            // folio may follow it in memory and in the PTEs).
            let mut batch = 1;
            if self.folios.get(head).order > 0 {
                let folio_end = head + self.folios.get(head).nr_pages() as Pfn;
                while i + batch < nr && src + (batch as Pfn) < folio_end {
                    let p = self.vmas[vma as usize].ptes[idx + batch];
                    if !pte_present(p) || p & PTE_ZERO != 0 || pte_pfn(p) != src + batch as Pfn {
                        break;
                    }
                    batch += 1;
                }
            } else {
                self.release_pte_page(head);
            }
            let mut last = 0;
            for b in 0..batch {
                let (s, d) = (src + b as Pfn, dst + b as Pfn);
                let (copy, bytes) = self.copy_page_cost(s);
                self.charge_mem(Fn::CollapseHugePage, copy, bytes + PAGE_BYTES);
                self.l2_write(d, 1);
                self.guest_frame(s, false);
                self.folios.version[d as usize] = self.folios.version[s as usize];
                self.vmas[vma as usize].ptes[idx + b] = 0;
                if self.folios.get(head).order > 0 {
                    last += self.page_unmap_large(s, head, mm) as u32;
                } else {
                    self.page_remove_rmap(s, vma);
                }
            }
            if last > 0 && self.folios.get(head).mapcount > 0 {
                self.deferred_split_folio(head);
            }
            self.free_swap_cache(head);
            self.folio_put_refs(head, batch as u32);
            i += batch;
        }
        for &head in compound {
            self.free_swap_cache(head);
            self.release_pte_page(head);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_take_the_largest_aligned_order() {
        assert_eq!(max_order_from_offset(0), 9);
        assert_eq!(max_order_from_offset(4), 2);
        assert_eq!(max_order_from_offset(16), 4);
        assert_eq!(max_order_from_offset(256), 8);
        assert_eq!(max_order_from_offset(48), 4);
    }

    #[test]
    fn the_bitmap_counts_a_range() {
        let mut p = Present([0; 8]);
        for i in [0, 15, 16, 63, 64, 511] {
            p.set(i);
        }
        assert_eq!(p.weight(0, 16), 2);
        assert_eq!(p.weight(16, 32), 1);
        assert_eq!(p.weight(0, 512), 6);
        assert_eq!(p.weight(64, 128), 1);
    }
}

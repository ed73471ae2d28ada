//! mm/huge_memory.c: PMD mappings of PMD-size page-cache folios
//! (`do_set_pmd`, `zap_huge_pmd`, `__split_huge_pmd`), and splitting a
//! large page-cache folio (shmem or a regular file's) into order-0 folios
//! (`split_huge_page`), as reclaim does to a shmem THP before swap-out and
//! MADV_PAGEOUT/MADV_COLD do in 6.1 before they act on a page of a
//! PTE-mapped large folio.
//!
//! A PMD is held as its block's 512 entries in the VMA's PTE array, each
//! marked PTE_PMD (see pgtable.rs); the block has no PTE table.

use super::folio::*;
use super::pgtable::*;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

/// The first page (VMA index) of the 2 MiB block holding page `idx`, and
/// its PTE-table slot in the VMA.
pub fn pmd_block(start_vpn: u64, idx: usize) -> (usize, usize) {
    let va = start_vpn + idx as u64;
    let first = (va & !(HPAGE_PMD_NR - 1)).saturating_sub(start_vpn) as usize;
    let table = ((va >> 9) - (start_vpn >> 9)) as usize;
    (first, table)
}

/// The flags a tail page takes from its head (`__split_huge_page_tail`).
pub(super) const TAIL_FLAGS: u32 = PG_REFERENCED
    | PG_SWAPBACKED
    | PG_UPTODATE
    | PG_ACTIVE
    | PG_WORKINGSET
    | PG_UNEVICTABLE
    | PG_DIRTY
    | PG_PAGECACHE
    | PG_CHARGED
    | crate::mm::lru_gen::LRU_GEN_MASK
    | crate::mm::lru_gen::LRU_REFS_MASK;

impl Kernel {
    /// `pmd_none` for page `idx`: its block has neither a PTE table nor a
    /// PMD mapping.
    #[inline]
    pub fn pmd_none(&self, vma: u32, idx: usize) -> bool {
        let v = &self.vmas[vma as usize];
        let (_, table) = pmd_block(v.start_vpn, idx);
        v.pte_tables[table] == NIL && v.ptes[idx] & PTE_PMD == 0
    }

    /// `do_set_pmd`: maps the PMD-size folio `head` (which holds page
    /// `idx`'s file index) whole with one PMD, if `transhuge_vma_suitable`:
    /// the VMA's address and file offset agree modulo 2 MiB and the block
    /// lies inside it. `page_add_file_rmap(compound)` raises every page's
    /// mapcount and the PMD count; the caller's reference becomes the
    /// PMD's. False: not suitable, mapped nothing.
    pub fn do_set_pmd(&mut self, vma: u32, idx: usize, head: Pfn, write: bool) -> bool {
        let v = &self.vmas[vma as usize];
        if self.folios.get(head).order != 9
            || !v
                .start_vpn
                .wrapping_sub(v.pgoff)
                .is_multiple_of(HPAGE_PMD_NR)
        {
            return false;
        }
        let (first, _) = pmd_block(v.start_vpn, idx);
        // A block starting before the VMA comes back as `first` 0 with the
        // VMA unaligned.
        if !(v.start_vpn + first as u64).is_multiple_of(HPAGE_PMD_NR)
            || first as u64 + HPAGE_PMD_NR > v.pages
        {
            return false;
        }
        debug_assert_eq!(self.folios.get(head).index as u64, v.pgoff + first as u64);
        self.traced(Fn::DoSetPmd, |k| k.set_pmd(vma, first, head, write));
        true
    }

    fn set_pmd(&mut self, vma: u32, first: usize, head: Pfn, write: bool) {
        // do_set_pmd's rmap and PMD set under the PMD table's lock.
        let ptl = self.pmd_lock(vma, first, Fn::DoSetPmd);
        self.set_pmd_locked(vma, first, head, write);
        self.spin_unlock(ptl);
    }

    fn set_pmd_locked(&mut self, vma: u32, first: usize, head: Pfn, write: bool) {
        self.charge_cost(
            Fn::DoSetPmd,
            self.costs.pte + self.costs.mapcount * HPAGE_PMD_NR + self.costs.rmap_stat,
        );
        self.folio_add_file_rmap_pages(head, HPAGE_PMD_NR as u32);
        let f = *self.folios.get(head);
        if self.folios.entire_mapcount_add(head, 1) == 1 && f.test(PG_SWAPBACKED) {
            self.mod_node_page_state(Vm::NrShmemPmdmapped, 1);
        }
        let mm = self.vmas[vma as usize].mm as usize;
        *self.mms[mm].file_counter(f.test(PG_SWAPBACKED)) += HPAGE_PMD_NR;
        self.vm.inc(Vm::ThpFileMapped);
        // A shared mapping's PMD is writable from the start; a private
        // one would need write-protection, but only shmem maps PMDs here.
        let dirty = if write { PTE_DIRTY } else { 0 };
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + HPAGE_PMD_NR as usize];
        for (i, pte) in ptes.iter_mut().enumerate() {
            *pte = mk_pte(head + i as u32, PTE_PMD | PTE_WRITE | PTE_YOUNG | dirty);
        }
    }

    /// Clears the PMD whose block starts at page `first`: returns its
    /// folio and whether it was young and dirty (the OR over the entries),
    /// and removes the compound rmap (`page_remove_rmap(compound)`) and
    /// the RSS.
    fn pmd_clear(&mut self, vma: u32, first: usize) -> (Pfn, bool, bool) {
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + HPAGE_PMD_NR as usize];
        let head = self.folios.head_of(pte_pfn(ptes[0]));
        let bits = ptes.iter().fold(0, |a, &p| a | p);
        ptes.fill(0);
        self.charge_cost(
            Fn::RemoveRmap,
            self.costs.mapcount * HPAGE_PMD_NR + self.costs.rmap_stat,
        );
        let mut gone = 0;
        for i in 0..HPAGE_PMD_NR as u32 {
            if self.folios.page_mapcount_add(head + i, -1) == 0 {
                gone += 1;
            }
        }
        let f = *self.folios.get(head);
        if self.folios.entire_mapcount_add(head, -1) == 0 && f.test(PG_SWAPBACKED) {
            self.mod_node_page_state(Vm::NrShmemPmdmapped, -1);
        }
        self.mod_node_page_state(Vm::NrMapped, -gone);
        self.memcg_stat(f.memcg, Mc::FileMapped, -gone);
        let mm = self.vmas[vma as usize].mm as usize;
        *self.mms[mm].file_counter(f.test(PG_SWAPBACKED)) -= HPAGE_PMD_NR;
        (head, bits & PTE_YOUNG != 0, bits & PTE_DIRTY != 0)
    }

    /// `zap_huge_pmd` (munmap, exit, MADV_DONTNEED of a whole block): the
    /// PMD goes, a dirty one dirties the folio (its young bit is simply
    /// dropped), and the PMD's reference with it.
    pub fn zap_huge_pmd(&mut self, vma: u32, first: usize) {
        self.pmd_lock_empty(vma, first, Fn::ZapHugePmd);
        self.charge_cost(Fn::ZapHugePmd, self.costs.pte);
        let (head, _, dirty) = self.pmd_clear(vma, first);
        if dirty {
            self.filemap_dirty_folio(head);
        }
        self.tlb_folio_put(head);
    }

    /// `__split_huge_pmd` of a page-cache folio's PMD (a partial unmap, or
    /// `unmap_folio` before a split): a file VMA's PMD is not remapped by
    /// PTEs but zapped — its dirty bit to the folio, a young one as
    /// PG_referenced — and the pages fault back in later.
    pub fn split_huge_pmd(&mut self, vma: u32, idx: usize) {
        self.vm.inc(Vm::ThpSplitPmd);
        let (first, _) = pmd_block(self.vmas[vma as usize].start_vpn, idx);
        // The PMD's clear under the PMD table's lock.
        let ptl = self.pmd_lock(vma, first, Fn::SplitHugePmd);
        self.charge_cost(Fn::SplitHugePmd, self.costs.ptep_clear_flush());
        let (head, young, dirty) = self.pmd_clear(vma, first);
        if dirty {
            self.filemap_dirty_folio(head);
        }
        if young {
            self.folios.get_mut(head).set(PG_REFERENCED);
        }
        self.folio_put(head);
        self.spin_unlock(ptl);
    }

    /// The PMD mappings' share of `unmap_folio`'s walk: every PMD of the
    /// folio in `vma` split (zapped). `maps` is the walk's entries there.
    pub fn split_folio_pmds(&mut self, vma: u32, maps: &[(u32, usize, Pte)]) {
        let start_vpn = self.vmas[vma as usize].start_vpn;
        for &(_, idx, pte) in maps {
            if pte & PTE_PMD != 0 && pmd_block(start_vpn, idx).0 == idx {
                self.traced(Fn::SplitHugePmd, |k| k.split_huge_pmd(vma, idx));
            }
        }
    }

    /// `madvise_cold_or_pageout_pte_range`'s PMD branch for the block at
    /// page `first`, when `[first, end)` covers it: a folio mapped only by
    /// this PMD is made old and unreferenced, then isolated for reclaim
    /// (MADV_PAGEOUT) or deactivated (MADV_COLD). A partial range splits
    /// the folio (`split_huge_page`) and the PTE walk goes on.
    /// Returns whether the range's PTE walk should continue over the block.
    pub fn madvise_cold_or_pageout_pmd(
        &mut self,
        vma: u32,
        first: usize,
        whole: bool,
        pageout: bool,
        list: &mut Vec<Pfn>,
    ) -> bool {
        // pmd_trans_huge_lock: held over the branch, dropped before a
        // split.
        let ptl = self.pmd_lock(vma, first, Fn::MadviseColdOrPageoutPteRange);
        let pte = self.vmas[vma as usize].ptes[first];
        let head = match pte & PTE_ZERO {
            0 => self.folios.head_of(pte_pfn(pte)),
            _ => NIL,
        };
        if head == NIL || self.folios.page_mapcount(head) != 1 {
            self.spin_unlock(ptl);
            return false;
        }
        if !whole {
            self.folios.get_mut(head).refcount += 1;
            self.spin_unlock(ptl);
            let split = self.split_huge_page_any(head, None);
            self.folio_put(head);
            return split;
        }
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + HPAGE_PMD_NR as usize];
        if ptes[0] & PTE_YOUNG != 0 || ptes.iter().any(|p| p & PTE_YOUNG != 0) {
            ptes.iter_mut().for_each(|p| *p &= !PTE_YOUNG);
            self.charge_cost(Fn::Madvise, self.costs.ptep_clear_flush());
        }
        self.folios.get_mut(head).clear(PG_REFERENCED);
        let f = *self.folios.get(head);
        if pageout {
            if f.test(PG_LRU) && !f.test(PG_UNEVICTABLE) {
                self.isolate_lru_folio(head);
                list.push(head);
            }
        } else {
            self.deactivate_folio(head);
        }
        self.spin_unlock(ptl);
        false
    }

    /// `split_huge_page` of an anonymous THP or a large page-cache folio.
    pub fn split_huge_page_any(&mut self, head: Pfn, list: Option<&mut Vec<Pfn>>) -> bool {
        if self.folios.get(head).test(PG_ANON) {
            self.split_huge_page_anon(head, list)
        } else {
            self.split_huge_page(head, list)
        }
    }

    /// `split_huge_page` of a large page-cache folio (shmem or a regular
    /// file's) that the caller holds a reference to: `unmap_folio` (PTEs
    /// removed, PMDs split — a page-cache folio is not remapped; its pages
    /// fault back in), then, if nobody else holds a reference, every page
    /// becomes an order-0 folio in the page cache, charged to the same
    /// memcg. On an LRU list the tails go just before the head; for
    /// reclaim (`list`: the folio is isolated) each tail joins the list
    /// with a reference of its own, appended in page order
    /// (`lru_add_page_tail` adds them last first at the list's tail,
    /// where `shrink_folio_list` takes them from: it puts them next).
    /// False (`thp_split_page_failed`) under writeback, while locked for
    /// I/O, or with extra references.
    pub fn split_huge_page(&mut self, head: Pfn, list: Option<&mut Vec<Pfn>>) -> bool {
        let f = *self.folios.get(head);
        debug_assert!(f.order > 0 && f.test(PG_PAGECACHE));
        if f.test(PG_WRITEBACK | PG_LOCKED) {
            self.vm.inc(Vm::ThpSplitPageFailed);
            return false;
        }
        self.try_to_unmap_page_cache(head);
        let nr = f.nr_pages();
        // folio_ref_freeze(folio, 1 + extra_pins): the caller's and the
        // page cache's references only.
        if self.folios.get(head).refcount != 1 + nr {
            self.vm.inc(Vm::ThpSplitPageFailed);
            return false;
        }
        self.charge_cost(Fn::SplitHugePage, self.costs.split_tail * (nr as u64 - 1));
        let h = *self.folios.get(head);
        let on_lru = h.test(PG_LRU);
        let inode = h.mapping;
        let isolated = list.is_some();
        let extra = if isolated { PG_ISOLATED } else { 0 };
        for i in (1..nr).rev() {
            let tail = head + i;
            let index = h.index + i;
            *self.folios.get_mut(tail) = Folio {
                flags: h.flags & TAIL_FLAGS | if on_lru { PG_LRU } else { extra },
                refcount: 1 + isolated as u32,
                mapping: inode,
                index,
                memcg: h.memcg,
                ..Folio::FREE
            };
            self.inodes[inode as usize].pages[index as usize] =
                (tail as u64) << 2 | super::filemap::SLOT_FOLIO;
        }
        if h.order == 9 && h.test(PG_SWAPBACKED) {
            self.mod_node_page_state(Vm::NrShmemHugepages, -1);
            self.memcg_stat(h.memcg, Mc::ShmemThp, -(nr as i64));
        }
        // The head shrinks to order 0 in place, then the tails go just
        // before it on its list, or onto the reclaim list.
        let hf = self.folios.get_mut(head);
        hf.order = 0;
        hf.refcount = 2;
        if on_lru {
            self.lruvec_folio_shrunk(head, nr);
            for i in (1..nr).rev() {
                self.lruvec_add_folio_before(head, head + i);
            }
        } else if let Some(list) = list {
            list.extend((1..nr).map(|i| head + i));
        }
        self.vm.inc(Vm::ThpSplitPage);
        true
    }
}

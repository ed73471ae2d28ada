//! mm/madvise.c for private anonymous memory: MADV_PAGEOUT and MADV_COLD
//! (`madvise_cold_or_pageout_pte_range`, `reclaim_pages`), MADV_DONTNEED
//! (`zap_page_range`), MADV_FREE (`madvise_free_pte_range`, lazily freed
//! pages), MADV_WILLNEED (`swapin_walk_pmd_entry`). The whole call runs
//! under one block plug, as `do_madvise` does.

use super::folio::*;
use super::pgtable::*;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};
use mmsim_spec::Advice;

/// PTEs per page table: the walk handles one table at a time.
const PTRS_PER_PTE: usize = 512;

impl Kernel {
    /// madvise(2) over pages `[first, first + n)` of `vma`. MADV_FREE on a
    /// shared mapping fails with EINVAL, as `madvise_free_single_vma` does.
    pub fn madvise(
        &mut self,
        vma: u32,
        first: usize,
        n: usize,
        advice: Advice,
    ) -> Result<(), &'static str> {
        let inode = self.vmas[vma as usize].inode;
        if inode != NIL {
            match advice {
                Advice::Free => {
                    return Err("MADV_FREE applies to private anonymous memory only (EINVAL)")
                }
                Advice::Willneed => {
                    let memcg = self.mms[self.vmas[vma as usize].mm as usize].memcg;
                    let pgoff = self.vmas[vma as usize].pgoff;
                    let shmem = self.inodes[inode as usize].is_shmem();
                    self.traced(Fn::Madvise, |k| {
                        k.blk_start_plug();
                        if shmem {
                            k.shmem_willneed(inode, pgoff + first as u64, n as u64, memcg);
                        } else {
                            // vfs_fadvise(POSIX_FADV_WILLNEED).
                            k.file_willneed(vma, first as u64, n as u64, memcg);
                        }
                        k.blk_finish_plug();
                        k.lru_add_drain();
                    });
                    return Ok(());
                }
                _ => {}
            }
        }
        let hint = match advice {
            Advice::Sequential => Some(super::mmap::VM_SEQ_READ),
            Advice::Random => Some(super::mmap::VM_RAND_READ),
            Advice::Normal => Some(0),
            _ => None,
        };
        if let Some(flag) = hint {
            // The hint is the mapping's (mmsim applies it to the whole
            // region; the kernel splits the VMA at the range's edges).
            let v = &mut self.vmas[vma as usize];
            v.flags = (v.flags & !(super::mmap::VM_SEQ_READ | super::mmap::VM_RAND_READ)) | flag;
            return Ok(());
        }
        let thp = match advice {
            Advice::Hugepage => Some(super::mmap::VM_HUGEPAGE),
            Advice::Nohugepage => Some(super::mmap::VM_NOHUGEPAGE),
            _ => None,
        };
        if let Some(flag) = thp {
            // hugepage_madvise, for the whole region likewise; MADV_HUGEPAGE
            // registers the mm with khugepaged if the VMA now qualifies.
            let v = &mut self.vmas[vma as usize];
            v.flags = (v.flags & !(super::mmap::VM_HUGEPAGE | super::mmap::VM_NOHUGEPAGE)) | flag;
            if advice == Advice::Hugepage {
                self.khugepaged_enter_vma(vma);
            }
            return Ok(());
        }
        self.traced(Fn::Madvise, |k| {
            k.blk_start_plug();
            match advice {
                Advice::Pageout | Advice::Cold => {
                    k.lru_add_drain();
                    k.madvise_cold_or_pageout(vma, first, n, advice == Advice::Pageout);
                }
                Advice::Dontneed => k.zap_page_range(vma, first, n),
                Advice::Free => k.madvise_free(vma, first, n),
                Advice::Willneed => {
                    k.madvise_willneed(vma, first, n);
                    k.lru_add_drain();
                }
                Advice::Sequential
                | Advice::Random
                | Advice::Normal
                | Advice::Hugepage
                | Advice::Nohugepage => {}
            }
            k.blk_finish_plug();
        });
        Ok(())
    }

    /// Page-table ranges of `[first, first + n)`, in walk order.
    fn pmd_ranges(&self, vma: u32, first: usize, n: usize) -> Vec<(usize, usize)> {
        let start_vpn = self.vmas[vma as usize].start_vpn as usize;
        let mut out = Vec::new();
        let mut i = first;
        while i < first + n {
            let va = start_vpn + i;
            let end = ((va / PTRS_PER_PTE + 1) * PTRS_PER_PTE - start_vpn).min(first + n);
            out.push((i, end));
            i = end;
        }
        out
    }

    /// `madvise_cold_or_pageout_pte_range`, table by table: pages mapped
    /// only here lose their young bit and PG_referenced; MADV_COLD
    /// deactivates them, MADV_PAGEOUT isolates them and reclaims each
    /// table's batch at once (`reclaim_pages`).
    fn madvise_cold_or_pageout(&mut self, vma: u32, first: usize, n: usize, pageout: bool) {
        let mut walked = false;
        for (lo, hi) in self.pmd_ranges(vma, first, n) {
            walked = true;
            let mut list = self.take_scratch();
            let walk_ptes = self.vmas[vma as usize].ptes[lo] & PTE_PMD == 0
                || self.madvise_cold_or_pageout_pmd(
                    vma,
                    lo,
                    hi - lo == HPAGE_PMD_NR as usize,
                    pageout,
                    &mut list,
                );
            // The table's lock over the walk (pte_offset_map_lock), the
            // PTEs' work and the isolations under it; dropped around a
            // split and for the reclaim after the walk.
            let mut ptl = match walk_ptes {
                true => self.pte_table_lock(vma, lo, Fn::MadviseColdOrPageoutPteRange),
                false => None,
            };
            for idx in (lo..hi).take_while(|_| walk_ptes) {
                self.charge_cost(Fn::Madvise, self.costs.pte);
                let pte = self.vmas[vma as usize].ptes[idx];
                if !pte_present(pte) || pte & PTE_ZERO != 0 {
                    continue;
                }
                let pfn = pte_pfn(pte);
                let head = self.folios.head_of(pfn);
                if self.folios.get(head).order > 0 {
                    // A page of a PTE-mapped large folio: one mapped
                    // elsewhere too stops the range (6.1's PageTransCompound
                    // branch).
                    if self.folios.page_mapcount(pfn) != 1 {
                        break;
                    }
                    let nr = self.folios.get(head).nr_pages() as usize;
                    let in_folio = (pfn - head) as usize;
                    let covered = idx >= first + in_folio && idx - in_folio + nr <= first + n;
                    if pageout && !self.features.madv_pageout_split && covered {
                        // 6.10's madvise_folio_pte_batch (and seed 003's
                        // modified kernel): a folio whose every page is
                        // mapped inside the range is paged out whole,
                        // isolated at its first page met here; each of its
                        // PTEs is made old as the walk passes it. One only
                        // partly inside is split as 6.1 does.
                        self.vmas[vma as usize].ptes[idx] = pte & !PTE_YOUNG;
                        let h = *self.folios.get(head);
                        if h.test(PG_LRU) && !h.test(PG_UNEVICTABLE) {
                            self.folios.get_mut(head).clear(PG_REFERENCED);
                            self.isolate_lru_folio(head);
                            list.push(head);
                        }
                        continue;
                    }
                    // 6.1 splits the folio. A page-cache folio's split
                    // unmaps it: the page's PTE is empty afterwards; an
                    // anonymous one's pages stay mapped, and the walk
                    // takes this PTE again.
                    if self.folios.get(head).test(PG_LOCKED) {
                        break;
                    }
                    self.spin_unlock(ptl.take());
                    self.folios.get_mut(head).refcount += 1;
                    let split = self.split_huge_page_any(head, None);
                    self.folio_put(head);
                    if !split {
                        break;
                    }
                    ptl = self.pte_lock(vma, idx, Fn::MadviseColdOrPageoutPteRange);
                    if !self.folios.get(pfn).test(PG_ANON) {
                        continue;
                    }
                }
                let f = *self.folios.get(pfn);
                if !f.test(PG_LRU) || f.mapcount != 1 {
                    continue;
                }
                if pte & PTE_YOUNG != 0 {
                    self.vmas[vma as usize].ptes[idx] = pte & !PTE_YOUNG;
                }
                self.folios.get_mut(pfn).clear(PG_REFERENCED);
                if pageout {
                    if f.test(PG_UNEVICTABLE) {
                        continue;
                    }
                    self.isolate_lru_folio(pfn);
                    list.push(pfn);
                } else {
                    self.deactivate_folio(pfn);
                }
            }
            self.spin_unlock(ptl);
            // tlb_finish_mmu's flush of the young bits cleared.
            // Simplification: charged per PTE table walked; the flush
            // itself (its IPIs) is one, at the walk's end, below.
            self.charge_cost(Fn::Madvise, self.costs.tlb_flush);
            if pageout && !list.is_empty() {
                self.reclaim_pages(&mut list);
            }
            self.give_scratch(list);
        }
        if walked {
            self.flush_tlb_mm_range(self.vmas[vma as usize].mm, false);
        }
    }

    /// `deactivate_page`: an active folio moves to the inactive list (any
    /// folio, under the multi-gen LRU).
    /// Simplification: at once rather than through the per-CPU
    /// lru_deactivate batch (drained within 15 folios).
    pub fn deactivate_folio(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        // Under the multi-gen LRU every folio on it qualifies (PG_active
        // is clear there): it leaves for an older generation.
        let lru_gen = self.lru_gen_enabled();
        if !(f.test(PG_ACTIVE) || lru_gen) || f.test(PG_UNEVICTABLE) {
            return;
        }
        if lru_gen && !f.test(PG_LRU) {
            return;
        }
        self.lruvec_del_folio(pfn);
        let g = self.folios.get_mut(pfn);
        g.clear(PG_ACTIVE | PG_REFERENCED);
        self.lruvec_add_folio(pfn);
        let nr = f.nr_pages() as i64;
        self.vm.add(Vm::Pgdeactivate, nr);
        self.memcg_stat(f.memcg, Mc::Pgdeactivate, nr);
    }

    /// `zap_page_range` for MADV_DONTNEED: the PTEs go (the page tables
    /// stay); the range reads as zeros afterwards.
    fn zap_page_range(&mut self, vma: u32, first: usize, n: usize) {
        self.lru_add_drain();
        self.mmu_notifier_invalidate_range(vma, first, n);
        // tlb_finish_mmu flushes only a range the zap gathered: one with a
        // present PTE or PMD cleared (swap entries and holes add none).
        let mut gathered = false;
        let mut tlb = self.tlb_gather_mmu(self.vmas[vma as usize].mm);
        let mut batch = None;
        for idx in first..first + n {
            self.zap_pte_lock(vma, idx, first);
            let pte = self.vmas[vma as usize].ptes[idx];
            // Private anon reads zeros afterwards, a private file mapping
            // the file again; shared mappings keep their data.
            let v = &mut self.vmas[vma as usize];
            if v.inode == NIL {
                v.user_version[idx] = 0;
            } else if v.flags & super::mmap::VM_SHARED == 0 {
                v.user_version[idx] = super::mmap::FOLLOW_FILE;
            }
            if pte_none(pte) {
                batch = None;
                continue;
            }
            gathered |= pte_present(pte);
            if pte_present(pte) {
                // A PMD gathers its folio once, at its first entry here.
                let first_of_pmd = pte & PTE_PMD == 0
                    || super::huge_memory::pmd_block(self.vmas[vma as usize].start_vpn, idx).0
                        == idx
                    || idx == first;
                if first_of_pmd {
                    self.tlb_remove_tlb_entry(&mut tlb, pte & PTE_ZERO == 0);
                }
            }
            let anon = self.vmas[vma as usize].inode == NIL;
            if pte & PTE_PMD != 0 {
                // zap_pmd_range: a block wholly in the range is zapped,
                // else the PMD is split (zapped too, for a file; an
                // anonymous one's PTEs are zapped from here on).
                let (block, _) =
                    super::huge_memory::pmd_block(self.vmas[vma as usize].start_vpn, idx);
                let whole = block >= first && block + HPAGE_PMD_NR as usize <= first + n;
                match (whole, anon) {
                    (true, true) => self.zap_huge_pmd_anon(vma, block),
                    (true, false) => self.zap_huge_pmd(vma, block),
                    (false, false) => self.split_huge_pmd(vma, idx),
                    (false, true) => {
                        self.split_huge_pmd_anon(vma, block);
                        let pte = self.vmas[vma as usize].ptes[idx];
                        self.vmas[vma as usize].ptes[idx] = 0;
                        self.zap_pte(vma, pte, &mut batch);
                    }
                }
                continue;
            }
            self.vmas[vma as usize].ptes[idx] = 0;
            self.zap_pte(vma, pte, &mut batch);
        }
        self.zap_anon_batch_flush();
        if gathered {
            self.charge_cost(Fn::Madvise, self.costs.tlb_flush);
        }
        self.tlb_finish_mmu(tlb);
    }

    /// `madvise_free_pte_range`: swap entries are dropped (the page reads
    /// zeros); pages mapped only here become clean, old and lazily free,
    /// moved to the inactive file list, where reclaim discards them unless
    /// written again.
    fn madvise_free(&mut self, vma: u32, first: usize, n: usize) {
        self.lru_add_drain();
        for (lo, hi) in self.pmd_ranges(vma, first, n) {
            let pte = self.vmas[vma as usize].ptes[lo];
            if pte & PTE_PMD != 0 && !self.madvise_free_huge_pmd(vma, lo, hi - lo) {
                continue;
            }
            self.madvise_free_pte_range(vma, lo, hi);
        }
        self.charge_cost(Fn::Madvise, self.costs.tlb_flush);
        self.flush_tlb_mm_range(self.vmas[vma as usize].mm, false);
    }

    /// `madvise_free_huge_pmd` for the PMD over pages `[lo, lo + n)`:
    /// false when the walk skips the block (the huge zero page, a THP
    /// mapped elsewhere too, one that could not be split, or one lazily
    /// freed whole: made clean and old through its PMD and moved to the
    /// file LRU, `pglazyfree` 512). A range that covers part of the THP
    /// splits it, and the PTE walk goes on.
    fn madvise_free_huge_pmd(&mut self, vma: u32, lo: usize, n: usize) -> bool {
        let pte = self.vmas[vma as usize].ptes[lo];
        if pte & PTE_ZERO != 0 {
            return false;
        }
        let head = self.folios.head_of(pte_pfn(pte));
        if self.folio_mapcount(head) != 1 || self.folios.get(head).test(PG_LOCKED) {
            return false;
        }
        if n == HPAGE_PMD_NR as usize {
            // The whole THP is lazily freed through its PMD: clean, the
            // PMD old and clean, onto the file LRU.
            self.folios.get_mut(head).clear(PG_DIRTY);
            for p in &mut self.vmas[vma as usize].ptes[lo..lo + n] {
                *p &= !(PTE_YOUNG | PTE_DIRTY);
            }
            self.charge_cost(Fn::Madvise, self.costs.ptep_clear_flush());
            self.mark_page_lazyfree(head);
            return false;
        }
        self.folios.get_mut(head).refcount += 1;
        let split = self.split_huge_page_anon(head, None);
        self.folio_put(head);
        split
    }

    /// `madvise_free_pte_range` over one table's pages `[lo, hi)`.
    fn madvise_free_pte_range(&mut self, vma: u32, lo: usize, hi: usize) {
        // The table's lock: an empty hold (a split inside the walk drops
        // it; the PTEs' work is priced as the walk goes).
        self.walk_pte_lock_empty(vma, lo, lo, Fn::MadviseFreePteRange);
        let mm = self.vmas[vma as usize].mm as usize;
        let mut idx = lo;
        while idx < hi {
            self.charge_cost(Fn::Madvise, self.costs.pte);
            let i = idx;
            idx += 1;
            let pte = self.vmas[vma as usize].ptes[i];
            if is_swap_pte(pte) {
                self.mms[mm].swapents -= 1;
                self.free_swap_and_cache(pte_swp_entry(pte));
                self.vmas[vma as usize].ptes[i] = 0;
                self.vmas[vma as usize].user_version[i] = 0;
                continue;
            }
            if !pte_present(pte) || pte & PTE_ZERO != 0 {
                continue;
            }
            let pfn = pte_pfn(pte);
            let head = self.folios.head_of(pfn);
            if self.folios.get(head).order > 0 && self.release.madvise_free_large {
                idx = self.madvise_free_large(vma, i, hi);
                continue;
            }
            if self.folios.get(head).order > 0 {
                // A page of a PTE-mapped THP: split, then this PTE again;
                // mapped elsewhere too, or not split, the walk ends.
                // folio_estimated_sharers: the first page's mapcount.
                if self.folios.page_mapcount(head) != 1 || self.folios.get(head).test(PG_LOCKED) {
                    return;
                }
                self.folios.get_mut(head).refcount += 1;
                let split = self.split_huge_page_anon(head, None);
                self.folio_put(head);
                if !split {
                    return;
                }
                idx = i;
                continue;
            }
            let f = *self.folios.get(pfn);
            if f.test(PG_SWAPCACHE) || f.test(PG_DIRTY) {
                // Only a page mapped here alone may lose its swap copy or
                // dirty bit; a clean shared one is made lazily free too.
                if f.test(PG_LOCKED) || f.mapcount != 1 {
                    continue;
                }
                if f.test(PG_SWAPCACHE) && !self.folio_free_swap(pfn) {
                    continue;
                }
                self.folios.get_mut(pfn).clear(PG_DIRTY);
            }
            self.vmas[vma as usize].ptes[i] = pte & !(PTE_YOUNG | PTE_DIRTY);
            self.mark_page_lazyfree(pfn);
        }
    }

    /// 6.12's `madvise_free_pte_range` at PTE `i`, a page of a large
    /// folio: a folio the range covers whole from here
    /// (`madvise_folio_pte_batch`) becomes clean, old and lazily free as
    /// one; one it covers in part is split, unless it looks shared or is
    /// locked, and the walk goes on from `i` again. Returns where the
    /// walk goes on.
    fn madvise_free_large(&mut self, vma: u32, i: usize, hi: usize) -> usize {
        let pfn = pte_pfn(self.vmas[vma as usize].ptes[i]);
        let head = self.folios.head_of(pfn);
        let f = *self.folios.get(head);
        let end = (head + f.nr_pages()) as usize;
        let mut nr = 0;
        let (mut young, mut dirty) = (false, false);
        while i + nr < hi {
            let p = self.vmas[vma as usize].ptes[i + nr];
            if !pte_present(p)
                || p & PTE_ZERO != 0
                || pte_pfn(p) as usize != pfn as usize + nr
                || pfn as usize + nr >= end
            {
                break;
            }
            young |= p & PTE_YOUNG != 0;
            dirty |= p & PTE_DIRTY != 0;
            nr += 1;
        }
        self.charge_cost(Fn::Madvise, self.costs.pte * nr as u64);
        if nr < f.nr_pages() as usize {
            // folio_likely_mapped_shared (7.3: folio_maybe_mapped_shared),
            // folio_trylock, split_folio.
            if self.folio_maybe_mapped_shared(head) || f.test(PG_LOCKED) {
                return i + nr;
            }
            self.folios.get_mut(head).refcount += 1;
            let split = self.split_huge_page_anon(head, None);
            self.folio_put(head);
            return if split { i } else { i + nr };
        }
        if f.test(PG_SWAPCACHE) || f.test(PG_DIRTY) {
            if f.test(PG_LOCKED) || self.folio_mapcount(head) != f.nr_pages() {
                return i + nr;
            }
            if f.test(PG_SWAPCACHE) && !self.folio_free_swap(head) {
                return i + nr;
            }
            self.folios.get_mut(head).clear(PG_DIRTY);
        }
        if young || dirty {
            for p in &mut self.vmas[vma as usize].ptes[i..i + nr] {
                *p &= !(PTE_YOUNG | PTE_DIRTY);
            }
        }
        self.mark_page_lazyfree(head);
        i + nr
    }

    /// `mark_page_lazyfree` (at once rather than through the per-CPU
    /// batch): off the anon lists, no longer swap-backed, onto the
    /// inactive file list.
    fn mark_page_lazyfree(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        if !f.test(PG_LRU)
            || !f.test(PG_ANON)
            || !f.test(PG_SWAPBACKED)
            || f.test(PG_SWAPCACHE)
            || f.test(PG_UNEVICTABLE)
        {
            return;
        }
        self.lruvec_del_folio(pfn);
        let g = self.folios.get_mut(pfn);
        g.clear(PG_ACTIVE | PG_REFERENCED | PG_SWAPBACKED);
        self.lruvec_add_folio(pfn);
        let nr = f.nr_pages() as i64;
        self.vm.add(Vm::Pglazyfree, nr);
        self.memcg_stat(f.memcg, Mc::Pglazyfree, nr);
    }

    /// `swapin_walk_pmd_entry`: start reading every swapped-out page of
    /// the range into the swap cache (no readahead beyond the range).
    fn madvise_willneed(&mut self, vma: u32, first: usize, n: usize) {
        let memcg = self.mms[self.vmas[vma as usize].mm as usize].memcg;
        for idx in first..first + n {
            self.charge_cost(Fn::Madvise, self.costs.unuse_scan);
            let pte = self.vmas[vma as usize].ptes[idx];
            if !is_swap_pte(pte) {
                continue;
            }
            let entry = pte_swp_entry(pte);
            if let Some((pfn, allocated)) = self.read_swap_cache_async(entry, memcg) {
                if allocated {
                    self.swap_readpage(pfn, entry);
                }
                self.folio_put(pfn);
            }
        }
    }
}

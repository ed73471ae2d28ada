//! mm/rmap.c: the reverse map of anon folios — from a folio to the PTEs
//! that map it — and the two walks reclaim makes over it:
//! `folio_referenced` (young bits) and `try_to_unmap` (swap PTEs).

use super::folio::*;
use super::pgtable::*;
use crate::cacheline::Line;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::spinlock::SpinGuard;

/// What `folio_referenced` returns (the kernel's -1) when its walk found
/// the anon_vma's or i_mmap's rwsem held for writing (`rwc->contended`):
/// nonzero, so the active list treats it as referenced, and
/// `folio_check_references` keeps the folio.
pub const RMAP_CONTENDED: u32 = u32::MAX;

impl Kernel {
    /// The line of anon_vma `av`'s root's rwsem: every anon_vma of a fork
    /// tree locks its root's (`anon_vma->root->rwsem`).
    fn anon_vma_rwsem(&self, av: u32) -> Line {
        Line::AnonVma(self.anon_vmas[av as usize].root)
    }

    /// `folio_lock_anon_vma_read` with `rwc->try_lock` (folio_referenced):
    /// false when another CPU holds the root's rwsem for writing (a THP
    /// split, a collapse: rwsem.rs), and the walk gives up.
    #[inline]
    pub(super) fn anon_vma_trylock_read(&mut self, av: u32) -> bool {
        if self.cpus.len() == 1 {
            return true;
        }
        self.down_read_trylock(self.anon_vma_rwsem(av), Fn::DownReadTrylock)
    }

    /// `rmap_walk_anon_lock` without try_lock (try_to_unmap): asleep
    /// until another CPU's write hold of the root's rwsem ends.
    #[inline]
    pub(super) fn anon_vma_lock_read(&mut self, av: u32) {
        if self.cpus.len() > 1 {
            self.down_read(self.anon_vma_rwsem(av), Fn::DownReadTrylock);
        }
    }

    /// `anon_vma_lock_write` of `av`'s root: held until
    /// `anon_vma_unlock_write`, the work between making other CPUs' walks
    /// of the tree fail or sleep.
    #[inline]
    pub(super) fn anon_vma_lock_write(&mut self, av: u32) -> Option<SpinGuard> {
        if self.cpus.len() == 1 {
            return None;
        }
        self.down_write(self.anon_vma_rwsem(av))
    }

    /// `anon_vma_unlock_write`.
    #[inline]
    pub(super) fn anon_vma_unlock_write(&mut self, guard: Option<SpinGuard>) {
        self.up_write(guard);
    }

    /// The root's rwsem taken and dropped for writing around work priced
    /// in the path's bundle (fork's `anon_vma_fork`, munmap's
    /// `unlink_anon_vmas`): an empty hold.
    #[inline]
    pub(super) fn anon_vma_lock_write_empty(&mut self, av: u32) {
        if self.cpus.len() > 1 && av != NIL {
            self.down_write_empty(self.anon_vma_rwsem(av));
        }
    }

    /// `i_mmap_trylock_read` of a file's `i_mmap_rwsem` (folio_referenced's
    /// walk of a page-cache folio): false inside another CPU's write hold.
    #[inline]
    pub(crate) fn i_mmap_trylock_read(&mut self, inode: u32) -> bool {
        self.down_read_trylock(Line::IMmap(inode), Fn::DownReadTrylock)
    }

    /// `i_mmap_lock_read` (try_to_unmap of a page-cache folio): asleep
    /// until another CPU's write hold ends.
    #[inline]
    pub(crate) fn i_mmap_lock_read(&mut self, inode: u32) {
        self.down_read(Line::IMmap(inode), Fn::DownRead);
    }

    /// `i_mmap_lock_write` and its unlock around linking or unlinking a
    /// file VMA (mmap, fork's dup_mmap, munmap's `unlink_file_vma`): an
    /// empty hold, the work priced in the path's bundle.
    #[inline]
    pub(crate) fn i_mmap_lock_write_empty(&mut self, inode: u32) {
        if self.cpus.len() > 1 && inode != NIL {
            self.down_write_empty(Line::IMmap(inode));
        }
    }

    /// `page_vma_mapped_walk` for an order-0 folio: the PTE of `vma` that
    /// maps `pfn` at linear index `index`, if there is one.
    pub fn page_vma_mapped(&self, pfn: Pfn, index: u32, vma: u32) -> Option<(usize, Pte)> {
        let v = &self.vmas[vma as usize];
        let idx = (index as u64).wrapping_sub(v.pgoff);
        if idx >= v.pages {
            return None;
        }
        let pte = v.ptes[idx as usize];
        (pte_present(pte) && pte & PTE_ZERO == 0 && pte_pfn(pte) == pfn)
            .then_some((idx as usize, pte))
    }

    /// The pages `[lo, hi)` of `vma` where anon folio `head` would be
    /// mapped (its linear range inside the VMA), if any.
    pub fn anon_folio_range(&self, head: Pfn, vma: u32) -> Option<(usize, usize)> {
        let f = self.folios.get(head);
        let v = &self.vmas[vma as usize];
        let (index, nr) = (f.index as u64, f.nr_pages() as u64);
        let lo = index.max(v.pgoff) - v.pgoff;
        let hi = (index + nr).min(v.pgoff + v.pages).saturating_sub(v.pgoff);
        (lo < hi).then_some((lo as usize, hi as usize))
    }

    /// Whether `pte` maps a page of anon folio `head`.
    #[inline]
    pub(super) fn maps_folio(&self, pte: Pte, head: Pfn) -> bool {
        pte_present(pte) && pte & PTE_ZERO == 0 && self.folios.head_of(pte_pfn(pte)) == head
    }

    /// `try_to_unmap` of an anonymous THP (TTU_SPLIT_HUGE_PMD): in each
    /// mapping its PMD is split first, then each PTE of it becomes a swap
    /// PTE for its page's slot.
    fn try_to_unmap_large(&mut self, head: Pfn) {
        let av = self.folios.get(head).mapping;
        self.anon_vma_lock_read(av);
        let vmas = std::mem::take(&mut self.anon_vmas[av as usize].vmas);
        'walk: for &v in &vmas {
            let Some((lo, hi)) = self.anon_folio_range(head, v) else {
                continue;
            };
            // try_to_unmap_one's range: the folio's pages in this VMA.
            self.mmu_notifier_invalidate_range(v, lo, hi - lo);
            let mut idx = lo;
            let mut locked = false;
            while idx < hi {
                let pte = self.vmas[v as usize].ptes[idx];
                if !self.maps_folio(pte, head) {
                    idx += 1;
                    continue;
                }
                if pte & PTE_PMD != 0 {
                    self.split_huge_pmd_anon(v, idx);
                    continue;
                }
                if !locked {
                    // The walk's PTE lock, once for the folio's table. An
                    // empty hold: the PTEs' unmaps are not followed as one
                    // section (simplification, many CPUs only).
                    self.pte_lock_empty(v, idx, Fn::PageVmaMappedWalk);
                    locked = true;
                }
                let page = pte_pfn(pte);
                if self.release.unmap_lazyfree_batch && !self.folios.get(head).test(PG_SWAPBACKED) {
                    match self.traced(Fn::TryToUnmap, |k| {
                        k.try_to_unmap_lazyfree_batch(head, v, idx)
                    }) {
                        Some(nr) => idx += nr,
                        None => break 'walk,
                    }
                    continue;
                }
                if !self.traced(Fn::TryToUnmap, |k| {
                    k.try_to_unmap_one(head, page, v, idx, pte)
                }) {
                    break 'walk;
                }
                idx += 1;
            }
        }
        self.anon_vmas[av as usize].vmas = vmas;
    }

    /// 7.3's `try_to_unmap_one` over a lazily freed large folio: the PTEs
    /// from page `idx` of `vma` that map its following pages, within the
    /// VMA and one page table, with one write bit (`folio_unmap_pte_batch`),
    /// are cleared together; then `ttu_anon_lazyfree_folio` keeps a folio
    /// written since (swap-backed again) or held by more than the
    /// isolation and its mappings, and the walk stops (None). Otherwise
    /// the pages read zeros from then on and the rmap goes in one
    /// `folio_remove_rmap_ptes`: a folio unmapped whole is never partially
    /// mapped. Returns the PTEs unmapped.
    fn try_to_unmap_lazyfree_batch(&mut self, head: Pfn, vma: u32, idx: usize) -> Option<usize> {
        let v = &self.vmas[vma as usize];
        let first = v.ptes[idx];
        let page = pte_pfn(first);
        let end_folio = (head + self.folios.get(head).nr_pages()) as usize;
        let vpn = v.start_vpn + idx as u64;
        let table_end = ((vpn | (HPAGE_PMD_NR - 1)) + 1 - v.start_vpn) as usize;
        let max = (v.pages as usize).min(table_end) - idx;
        let mut nr = 0;
        let mut dirty = false;
        while nr < max && page as usize + nr < end_folio {
            let p = v.ptes[idx + nr];
            if !pte_present(p)
                || p & PTE_ZERO != 0
                || pte_pfn(p) as usize != page as usize + nr
                || (p ^ first) & PTE_WRITE != 0
            {
                break;
            }
            dirty |= p & PTE_DIRTY != 0;
            nr += 1;
        }
        self.charge_cost(Fn::TryToUnmap, self.costs.unmap_one * nr as u64);
        let f = self.folios.get_mut(head);
        if dirty {
            f.set(PG_DIRTY);
        }
        if f.test(PG_DIRTY) {
            f.set(PG_SWAPBACKED);
            return None;
        }
        if f.refcount != 1 + f.mapcount {
            return None;
        }
        let mm = self.vmas[vma as usize].mm;
        self.mms[mm as usize].rss_anon -= nr as u64;
        let mut last = 0;
        for i in 0..nr {
            self.vmas[vma as usize].ptes[idx + i] = 0;
            self.vmas[vma as usize].user_version[idx + i] = 0;
            last += self.page_unmap_large(page + i as Pfn, head, mm) as u32;
        }
        if last > 0 && self.folios.get(head).mapcount > 0 {
            self.deferred_split_folio(head);
        }
        self.folio_put_refs(head, nr as u32);
        Some(nr)
    }

    /// `try_to_unmap` of an anon folio: every PTE becomes a swap PTE.
    pub fn try_to_unmap(&mut self, pfn: Pfn) {
        if self.folios.get(pfn).order > 0 {
            return self.try_to_unmap_large(pfn);
        }
        let f = *self.folios.get(pfn);
        let av = f.mapping;
        self.anon_vma_lock_read(av);
        let vmas = std::mem::take(&mut self.anon_vmas[av as usize].vmas);
        for &v in &vmas {
            if let Some((idx, pte)) = self.page_vma_mapped(pfn, f.index, v) {
                self.mmu_notifier_invalidate_range(v, idx, 1);
                // page_vma_mapped_walk's PTE lock, held through the unmap.
                let ptl = self.pte_lock(v, idx, Fn::PageVmaMappedWalk);
                let unmapped = self.traced(Fn::TryToUnmap, |k| {
                    k.try_to_unmap_one(pfn, pfn, v, idx, pte)
                });
                self.spin_unlock(ptl);
                // rmap_walk stops at the first mapping that refuses.
                if !unmapped {
                    break;
                }
            }
        }
        self.anon_vmas[av as usize].vmas = vmas;
    }

    /// One PTE of `try_to_unmap`, mapping `page` of folio `pfn`; false
    /// stops the walk.
    fn try_to_unmap_one(&mut self, pfn: Pfn, page: Pfn, vma: u32, idx: usize, pte: Pte) -> bool {
        self.charge_cost(Fn::TryToUnmap, self.costs.unmap_one);
        self.tlb_ubc_add(self.vmas[vma as usize].mm, pte & PTE_DIRTY != 0);
        // The dirty bit moves to the folio as the PTE is cleared.
        if pte & PTE_DIRTY != 0 {
            self.folios.get_mut(pfn).set(PG_DIRTY);
        }
        if !self.folios.get(pfn).test(PG_SWAPBACKED) {
            return self.try_to_unmap_lazyfree(pfn, page, vma, idx);
        }
        let f = *self.folios.get(pfn);
        let entry = f.swap + (page - pfn);
        debug_assert!(f.test(PG_SWAPCACHE));
        self.swap_duplicate(entry);
        let exclusive = self.folios.get(page).test(PG_ANON_EXCLUSIVE);
        self.vmas[vma as usize].ptes[idx] = swp_entry_to_pte(entry, exclusive);
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_anon -= 1;
        self.mms[mm].swapents += 1;
        self.add_to_mmlist(mm as u32);
        self.page_remove_rmap(page, vma);
        self.folio_put(pfn);
        true
    }

    /// `folio_referenced`'s walk over a page-cache folio's mappings: a
    /// mapping counts once however many of the folio's PTEs it saw young
    /// (`folio_referenced_one` walks them all, clearing each).
    fn folio_referenced_shmem(&mut self, pfn: Pfn, target: Option<u16>) -> (u32, u32) {
        let inode = self.folios.get(pfn).mapping;
        if !self.i_mmap_trylock_read(inode) {
            return (RMAP_CONTENDED, 0);
        }
        let mut referenced = 0;
        let mut vm_flags = 0;
        let mut last = NIL;
        let lru_gen = self.lru_gen_enabled();
        for (v, idx, pte) in self.page_cache_mappings(pfn) {
            let vma = &self.vmas[v as usize];
            if let Some(t) = target {
                if !self.is_descendant(self.mms[vma.mm as usize].memcg, t) {
                    continue;
                }
            }
            let flags = vma.flags;
            // page_vma_mapped_walk's PTE lock, or its PMD table's lock for
            // a PMD mapping.
            if pte & PTE_PMD == 0 {
                self.pte_lock_empty(v, idx, Fn::PageVmaMappedWalk);
            } else {
                self.pmd_lock_empty(v, idx, Fn::PageVmaMappedWalk);
            }
            let young = if lru_gen {
                self.pte_referenced_lru_gen(pfn, v, idx)
            } else if pte & PTE_YOUNG != 0 {
                self.vmas[v as usize].ptes[idx] = pte & !PTE_YOUNG;
                flags & super::mmap::VM_SEQ_READ == 0
            } else {
                false
            };
            // A reference through a sequentially read mapping does not
            // count (folio_referenced_one).
            if young && v != last {
                referenced += 1;
                vm_flags |= flags;
                last = v;
            }
        }
        (referenced, vm_flags)
    }

    /// One PTE of `folio_referenced_one` under the multi-gen LRU: a young
    /// PTE of a VMA not read sequentially or at random first has its
    /// neighbours looked at (`lru_gen_look_around`, which clears it too);
    /// then `ptep_clear_flush_young`, which counts unless the VMA is read
    /// sequentially. True if the mapping saw the folio referenced. (The
    /// classic LRU's callers test and clear the bit in line.)
    fn pte_referenced_lru_gen(&mut self, pfn: Pfn, v: u32, idx: usize) -> bool {
        let mut pte = self.vmas[v as usize].ptes[idx];
        if pte & PTE_YOUNG == 0 {
            return false;
        }
        let flags = self.vmas[v as usize].flags;
        let mut referenced = false;
        if self.lru_gen_enabled()
            && pte & PTE_PMD == 0
            && flags & (super::mmap::VM_SEQ_READ | super::mmap::VM_RAND_READ) == 0
        {
            self.traced(Fn::LruGenLookAround, |k| k.lru_gen_look_around(pfn, v, idx));
            referenced = true;
            pte = self.vmas[v as usize].ptes[idx];
        }
        if pte & PTE_YOUNG != 0 {
            self.vmas[v as usize].ptes[idx] = pte & !PTE_YOUNG;
            if flags & super::mmap::VM_SEQ_READ == 0 {
                referenced = true;
            }
        }
        referenced
    }

    /// A lazily freed (MADV_FREE) page: clean, and with no references but
    /// the isolation's and the mappings', it is dropped from this mapping
    /// (the page reads zeros afterwards); written since, it stays mapped,
    /// becomes swap-backed again, and the walk stops.
    /// `page` of folio `pfn` (a THP's PTEs each in turn: its mapcount is
    /// then the folio's PTE mappings).
    fn try_to_unmap_lazyfree(&mut self, pfn: Pfn, page: Pfn, vma: u32, idx: usize) -> bool {
        let f = self.folios.get_mut(pfn);
        if f.test(PG_DIRTY) || f.refcount != 1 + f.mapcount {
            f.set(PG_SWAPBACKED);
            return false;
        }
        self.vmas[vma as usize].ptes[idx] = 0;
        // What user space will read now: zeros.
        self.vmas[vma as usize].user_version[idx] = 0;
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_anon -= 1;
        self.page_remove_rmap(page, vma);
        self.folio_put(pfn);
        true
    }

    /// `folio_referenced` of an anonymous THP: each mapping counts once,
    /// however many of its PTEs (or its PMD's entries) were young.
    fn folio_referenced_large(&mut self, head: Pfn, target: Option<u16>) -> (u32, u32) {
        let (mut referenced, mut vm_flags) = (0, 0);
        let av = self.folios.get(head).mapping;
        let lru_gen = self.lru_gen_enabled();
        for i in 0..self.anon_vmas[av as usize].vmas.len() {
            let v = self.anon_vmas[av as usize].vmas[i];
            let vma = &self.vmas[v as usize];
            if target.is_some_and(|t| !self.is_descendant(self.mms[vma.mm as usize].memcg, t)) {
                continue;
            }
            let flags = vma.flags;
            let Some((lo, hi)) = self.anon_folio_range(head, v) else {
                continue;
            };
            let mut young = false;
            let mut mapped = false;
            for idx in lo..hi {
                let pte = self.vmas[v as usize].ptes[idx];
                if !self.maps_folio(pte, head) {
                    continue;
                }
                if !mapped {
                    // The walk's PTE lock (a folio of at most a PMD's
                    // size, aligned: one table), or for a PMD mapping its
                    // PMD table's.
                    match pte & PTE_PMD {
                        0 => self.pte_lock_empty(v, idx, Fn::PageVmaMappedWalk),
                        _ => self.pmd_lock_empty(v, idx, Fn::PageVmaMappedWalk),
                    }
                }
                mapped = true;
                if lru_gen {
                    young |= self.pte_referenced_lru_gen(pte_pfn(pte), v, idx);
                } else if pte & PTE_YOUNG != 0 {
                    self.vmas[v as usize].ptes[idx] = pte & !PTE_YOUNG;
                    young |= flags & super::mmap::VM_SEQ_READ == 0;
                }
            }
            if mapped && flags & super::mmap::VM_LOCKED != 0 {
                return (referenced, vm_flags | super::mmap::VM_LOCKED);
            }
            if young {
                referenced += 1;
                vm_flags |= flags;
            }
        }
        (referenced, vm_flags)
    }

    /// `folio_referenced`: how many mappings saw the folio young (clearing
    /// the young bits), and their VMA flags; `RMAP_CONTENDED` (the
    /// kernel's -1) when another CPU held the rmap's rwsem for writing and
    /// the walk gave up. In cgroup reclaim only the target memcg's mms
    /// count.
    pub fn folio_referenced(&mut self, pfn: Pfn, target: Option<u16>) -> (u32, u32) {
        self.charge_cost(Fn::FolioReferenced, self.costs.folio_referenced);
        let f = *self.folios.get(pfn);
        if f.mapcount == 0 {
            return (0, 0);
        }
        if f.test(PG_PAGECACHE) {
            return self.folio_referenced_shmem(pfn, target);
        }
        if !f.test(PG_ANON) {
            return (0, 0);
        }
        if !self.anon_vma_trylock_read(f.mapping) {
            return (RMAP_CONTENDED, 0);
        }
        if f.order > 0 {
            return self.folio_referenced_large(pfn, target);
        }
        let mut referenced = 0;
        let mut vm_flags = 0;
        let av = f.mapping;
        let lru_gen = self.lru_gen_enabled();
        for i in 0..self.anon_vmas[av as usize].vmas.len() {
            let v = self.anon_vmas[av as usize].vmas[i];
            let vma = &self.vmas[v as usize];
            if let Some(t) = target {
                if !self.is_descendant(self.mms[vma.mm as usize].memcg, t) {
                    continue;
                }
            }
            let flags = vma.flags;
            let Some((idx, pte)) = self.page_vma_mapped(pfn, f.index, v) else {
                continue;
            };
            // page_vma_mapped_walk's PTE lock, over a test priced in
            // folio_referenced's bundle.
            self.pte_lock_empty(v, idx, Fn::PageVmaMappedWalk);
            if flags & super::mmap::VM_LOCKED != 0 {
                return (referenced, vm_flags | super::mmap::VM_LOCKED);
            }
            if lru_gen {
                if self.pte_referenced_lru_gen(pfn, v, idx) {
                    referenced += 1;
                    vm_flags |= flags;
                }
            } else if pte & PTE_YOUNG != 0 {
                self.vmas[v as usize].ptes[idx] = pte & !PTE_YOUNG;
                if flags & super::mmap::VM_SEQ_READ == 0 {
                    referenced += 1;
                    vm_flags |= flags;
                }
            }
        }
        (referenced, vm_flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{test_at, test_kernel};

    /// A 16-page anon mapping on a kernel of `cpus` CPUs, its first page
    /// mapped young by the last CPU at 0: the kernel, the VMA and the
    /// page.
    fn written_page(cpus: u32) -> (Kernel, u32, Pfn) {
        let mut k = test_kernel(cpus, "6.1");
        let mm = k.mm_alloc(0);
        let vma = k.mmap_anon(mm, 16);
        test_at(&mut k, cpus as usize - 1, 0);
        // do_anonymous_page's mapping, without a task to fault.
        let pfn = k.alloc_anon_folio(0).expect("memory");
        k.page_add_anon_rmap(pfn, vma, 0, true);
        k.vmas[vma as usize].ptes[0] = mk_pte(pfn, PTE_WRITE | PTE_YOUNG | PTE_DIRTY);
        (k, vma, pfn)
    }

    /// CPU 0 holds `vma`'s anon_vma rwsem for writing from 1,000 to
    /// 4,000 ns, as a THP split of the process does.
    fn split_on_cpu_0(k: &mut Kernel, vma: u32) {
        test_at(k, 0, 1_000);
        let g = k.anon_vma_lock_write(k.vmas[vma as usize].anon_vma);
        k.charge_cost(Fn::SplitHugePage, 3_000);
        k.anon_vma_unlock_write(g);
    }

    #[test]
    fn a_walk_inside_another_cpus_split_gives_up() {
        let (mut k, vma, pfn) = written_page(2);
        split_on_cpu_0(&mut k, vma);
        test_at(&mut k, 1, 2_000);
        assert_eq!(k.folio_referenced(pfn, None), (RMAP_CONTENDED, 0));
        // The young bit was not cleared: the walk after the split sees it.
        test_at(&mut k, 1, 4_000);
        assert_eq!(k.folio_referenced(pfn, None).0, 1);
        assert_eq!(k.folio_referenced(pfn, None).0, 0);
    }

    #[test]
    fn try_to_unmaps_walk_inside_another_cpus_split_sleeps_to_its_end() {
        // rmap_walk_anon_lock without try_lock: down_read.
        let (mut k, vma, _) = written_page(2);
        split_on_cpu_0(&mut k, vma);
        test_at(&mut k, 1, 2_000);
        k.anon_vma_lock_read(k.vmas[vma as usize].anon_vma);
        // The count's line comes over from CPU 0, then it sleeps.
        let line = k.costs.cacheline_transfer;
        assert_eq!(k.now(), 4_000);
        assert_eq!(
            k.fn_time_ns[Fn::RwsemDownReadSlowpath as usize],
            2_000 - line
        );
    }

    #[test]
    fn with_one_cpu_a_walk_never_gives_up() {
        let (mut k, vma, pfn) = written_page(1);
        split_on_cpu_0(&mut k, vma);
        test_at(&mut k, 0, 2_000);
        assert_eq!(k.folio_referenced(pfn, None).0, 1);
    }
}

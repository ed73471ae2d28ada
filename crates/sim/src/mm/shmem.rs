//! mm/shmem.c: tmpfs files and shared anonymous memory. A shmem page is
//! swap-backed (on the anon LRU lists) but lives in its inode's page cache,
//! counted as a file and shmem page. Reclaim writes it to swap through the
//! swap cache (`shmem_writepage`), leaving the swap entry in the inode's
//! mapping; a fault brings it back through the swap cache with cluster
//! readahead (`shmem_swapin_folio`; 6.1 has no skip-swapcache path here).
//! A never-written page is clean and reclaim simply drops it (a hole reads
//! as zeros again).

use super::folio::*;
use super::memory::FaultError;
use super::page_alloc::Gfp;
use super::pgtable::*;
use super::swapfile::SwpEntry;
use crate::cost::{self, Fn};
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

use super::filemap::{Inode, SLOT_FOLIO, SLOT_SWAP};
use super::mmap::{VM_HUGEPAGE, VM_NOHUGEPAGE};
use mmsim_spec::{ShmemEnabled, TmpfsHuge};

impl Kernel {
    /// A new shmem inode of `pages` pages: a tmpfs file on a mount with
    /// `huge`, or (`anon`) the object behind a MAP_SHARED|MAP_ANONYMOUS
    /// mapping, on the internal mount.
    pub fn shmem_inode_create(&mut self, pages: u64, anon: bool, huge: TmpfsHuge) -> u32 {
        self.inodes.push(Inode {
            pages: vec![0; pages as usize],
            user_version: vec![0; pages as usize],
            vmas: Vec::new(),
            anon,
            disk: None,
            disk_version: Vec::new(),
            block: 0,
            nr_dirty: 0,
            large_folios: false,
            huge,
        });
        (self.inodes.len() - 1) as u32
    }

    /// The internal mount's `huge=` (`shm_mnt`), which serves shared
    /// anonymous memory: 6.1's `shmem_enabled_store` sets it to any value
    /// but deny and force; the boot default is never.
    pub fn shm_mnt_huge(&self) -> TmpfsHuge {
        match self.sysfs.shmem_enabled {
            Some(ShmemEnabled::Always) => TmpfsHuge::Always,
            Some(ShmemEnabled::WithinSize) => TmpfsHuge::WithinSize,
            Some(ShmemEnabled::Advise) => TmpfsHuge::Advise,
            _ => TmpfsHuge::Never,
        }
    }

    /// `shmem_is_huge`: whether a hole at `index` gets a PMD-size folio.
    /// The VMA's MADV_NOHUGEPAGE refuses; shmem_enabled's deny and force
    /// override the mount; then the mount's `huge=` decides (within_size:
    /// i_size reaches the end of the 2 MiB block; advise: the VMA has
    /// MADV_HUGEPAGE).
    pub fn shmem_is_huge(&self, vma: Option<u32>, inode: u32, index: u64) -> bool {
        let vm_flags = vma.map_or(0, |v| self.vmas[v as usize].flags);
        if vm_flags & VM_NOHUGEPAGE != 0 {
            return false;
        }
        match self.sysfs.shmem_enabled {
            Some(ShmemEnabled::Deny) => return false,
            Some(ShmemEnabled::Force) => return true,
            _ => {}
        }
        let i = &self.inodes[inode as usize];
        let advised = vm_flags & VM_HUGEPAGE != 0;
        match i.huge {
            TmpfsHuge::Always => true,
            TmpfsHuge::WithinSize => {
                (index + 1).next_multiple_of(HPAGE_PMD_NR) <= i.pages.len() as u64 || advised
            }
            TmpfsHuge::Advise => advised,
            TmpfsHuge::Never => false,
        }
    }

    /// Whether `shmem_get_unmapped_area` places a mapping of `pages` pages
    /// of `inode` from page `pgoff` 2 MiB-aligned to its file offset: a
    /// huge-capable mount (or shmem_enabled force), at least 2 MiB, and
    /// not an offset too small to leave a whole aligned block.
    pub fn shmem_aligns_mapping(&self, inode: u32, pgoff: u64, pages: u64) -> bool {
        if self.sysfs.shmem_enabled == Some(ShmemEnabled::Deny) || pages < HPAGE_PMD_NR {
            return false;
        }
        if self.sysfs.shmem_enabled != Some(ShmemEnabled::Force)
            && self.inodes[inode as usize].huge == TmpfsHuge::Never
        {
            return false;
        }
        let offset = pgoff % HPAGE_PMD_NR;
        offset == 0 || offset + pages >= 2 * HPAGE_PMD_NR
    }

    pub fn shmem_folio_at(&self, inode: u32, index: u64) -> Option<Pfn> {
        let v = self.inodes[inode as usize].pages[index as usize];
        (v & 3 == SLOT_FOLIO).then_some((v >> 2) as Pfn)
    }

    fn shmem_swap_at(&self, inode: u32, index: u64) -> Option<SwpEntry> {
        let v = self.inodes[inode as usize].pages[index as usize];
        (v & 3 == SLOT_SWAP).then_some((v >> 2) as SwpEntry)
    }

    /// `shmem_add_to_page_cache`: the folio takes its slots (every slot of
    /// a large folio points to it) and a page-cache reference per page,
    /// counted as file and shmem pages (and a PMD-size one as a shmem THP).
    fn shmem_add_to_page_cache(&mut self, pfn: Pfn, inode: u32, index: u64) {
        let f = self.folios.get_mut(pfn);
        let nr = f.nr_pages();
        f.refcount += nr;
        f.set(PG_PAGECACHE | PG_SWAPBACKED);
        f.mapping = inode;
        f.index = index as u32;
        let (memcg, order) = (f.memcg, f.order);
        let range = index as usize..index as usize + nr as usize;
        for slot in &mut self.inodes[inode as usize].pages[range] {
            *slot = (pfn as u64) << 2 | SLOT_FOLIO;
        }
        self.shmem_stat(memcg, order, 1);
    }

    /// The file, shmem and shmem-THP gauges for a folio of `order`
    /// entering (`sign` 1) or leaving (-1) a shmem page cache.
    fn shmem_stat(&mut self, memcg: u16, order: u8, sign: i64) {
        let nr = sign << order;
        self.vm.add(Vm::NrFilePages, nr);
        self.vm.add(Vm::NrShmem, nr);
        self.memcg_stat(memcg, Mc::File, nr);
        self.memcg_stat(memcg, Mc::Shmem, nr);
        if order == 9 {
            self.vm.add(Vm::NrShmemHugepages, sign);
            self.memcg_stat(memcg, Mc::ShmemThp, nr);
        }
    }

    /// `shmem_delete_from_page_cache` / the page-cache half of
    /// `__filemap_remove_folio`: the folio's slots take `value`, the cache
    /// drops its references.
    fn shmem_delete_from_page_cache(&mut self, pfn: Pfn, value: u64) {
        let f = self.folios.get_mut(pfn);
        let (inode, index, memcg, order, nr) = (f.mapping, f.index, f.memcg, f.order, f.nr_pages());
        f.clear(PG_PAGECACHE);
        let range = index as usize..index as usize + nr as usize;
        for slot in &mut self.inodes[inode as usize].pages[range] {
            *slot = value;
        }
        self.shmem_stat(memcg, order, -1);
        self.folio_put_refs(pfn, nr);
    }

    /// `shmem_get_folio_gfp` for a fault (`vma`) or a write(2) (None): the
    /// cached folio, the swapped-out one read back, or a new zeroed one
    /// charged to the faulting memcg; with a reference for the caller. A
    /// large folio is returned by its head.
    fn shmem_get_folio(
        &mut self,
        vma: Option<u32>,
        inode: u32,
        index: u64,
        memcg: u16,
    ) -> Result<Pfn, FaultError> {
        self.charge_cost(Fn::ShmemFault, cost::PTE_NS);
        if let Some(pfn) = self.shmem_folio_at(inode, index) {
            self.folios.get_mut(pfn).refcount += 1;
            return Ok(pfn);
        }
        if let Some(entry) = self.shmem_swap_at(inode, index) {
            return self.shmem_swapin_folio(inode, index, entry, memcg);
        }
        if self.shmem_is_huge(vma, inode, index) {
            if let Some(pfn) = self.shmem_alloc_huge(inode, index, memcg) {
                return Ok(pfn);
            }
        }
        let pfn = self
            .alloc_page(Gfp::HighUserMovable)
            .ok_or(FaultError::Oom)?;
        self.folios.get_mut(pfn).memcg = memcg;
        if self.try_charge(memcg, 1) != super::memcontrol::Charge::Ok {
            self.free_page(pfn);
            return Err(FaultError::Oom);
        }
        self.charge_cost(Fn::ShmemFault, cost::CLEAR_PAGE_NS);
        self.folios.get_mut(pfn).set(PG_SWAPBACKED | PG_UPTODATE);
        self.folios.version[pfn as usize] = 0;
        self.shmem_add_to_page_cache(pfn, inode, index);
        self.folio_add_lru(pfn);
        Ok(pfn)
    }

    /// The PMD-size attempt of `shmem_get_folio_gfp` for a hole at
    /// `index`: `shmem_alloc_hugefolio` gives up quietly if any slot of the
    /// aligned 2 MiB block is present (a page or a swap entry), counts
    /// `thp_file_fallback` if the buddy allocator has no free order-9
    /// block (the THP gfp, with `defrag` at its default madvise, neither
    /// reclaims nor compacts), and `thp_file_fallback_charge` too if the
    /// memcg refuses 512 pages (a charge above order 3 gives up after its
    /// reclaim retries without the OOM killer). Then every page is
    /// cleared and the folio enters the cache and the LRU whole.
    fn shmem_alloc_huge(&mut self, inode: u32, index: u64, memcg: u16) -> Option<Pfn> {
        let hindex = index & !(HPAGE_PMD_NR - 1);
        let range = hindex as usize..(hindex + HPAGE_PMD_NR) as usize;
        // The spec refuses huge-capable shmem whose size is not a multiple
        // of 2 MiB (lib.rs), so the block is always inside the inode.
        let slots = self.inodes[inode as usize].pages.get(range.clone())?;
        if slots.iter().any(|&s| s != 0) {
            return None;
        }
        let Some(pfn) = self.alloc_large_folio(9) else {
            self.vm.inc(Vm::ThpFileFallback);
            return None;
        };
        self.folios.get_mut(pfn).memcg = memcg;
        if self.try_charge(memcg, HPAGE_PMD_NR) != super::memcontrol::Charge::Ok {
            self.vm.inc(Vm::ThpFileFallback);
            self.vm.inc(Vm::ThpFileFallbackCharge);
            self.free_folio_pages(pfn);
            return None;
        }
        self.charge_cost(Fn::ShmemFault, cost::CLEAR_PAGE_NS * HPAGE_PMD_NR);
        self.folios.get_mut(pfn).set(PG_SWAPBACKED | PG_UPTODATE);
        self.folios.version[pfn as usize..pfn as usize + HPAGE_PMD_NR as usize].fill(0);
        self.shmem_add_to_page_cache(pfn, inode, hindex);
        self.vm.inc(Vm::ThpFileAlloc);
        self.folio_add_lru(pfn);
        Some(pfn)
    }

    /// `shmem_swapin_folio`: from the swap cache, or read with cluster
    /// readahead (a major fault); a read in flight makes the fault wait.
    /// Then the folio replaces the swap entry in the mapping, leaves the
    /// swap cache dirty, and the slot is freed.
    fn shmem_swapin_folio(
        &mut self,
        inode: u32,
        index: u64,
        entry: SwpEntry,
        memcg: u16,
    ) -> Result<Pfn, FaultError> {
        let pfn = match self.lookup_swap_cache(entry, None) {
            Some(p) => p,
            None => {
                self.vm.inc(Vm::Pgmajfault);
                self.memcg_stat(memcg, Mc::Pgmajfault, 1);
                self.shmem_swapin_cluster(entry, memcg)
                    .ok_or(FaultError::Oom)?
            }
        };
        if let Some(done) = self.folio_lock_and_writeback_done_at(pfn) {
            // folio_lock sleeps until a read completes, folio_wait_writeback
            // until a write does; the fault then goes on (no retry: it does
            // not count again).
            self.folio_put(pfn);
            return Err(FaultError::Wait(done));
        }
        self.charge_cost(Fn::ShmemFault, cost::SWAP_SLOT_NS);
        // Into the page cache first, then out of the swap cache (whose
        // reference that drops), as shmem_swapin_folio orders them.
        self.shmem_add_to_page_cache(pfn, inode, index);
        self.delete_from_swap_cache(pfn);
        self.folios.get_mut(pfn).set(PG_DIRTY);
        self.swap_free(entry);
        Ok(pfn)
    }

    /// A fault on page `idx` of shmem VMA `vma` whose PTE is empty: fault
    /// around first on a read (the page may already be cached), then
    /// `shmem_fault`, and `finish_fault`: a PMD for a PMD-size folio where
    /// the VMA allows one and the block has no PTE table, else one PTE
    /// (writable: shmem mappings need no write notification). A write
    /// dirties the folio (`fault_dirty_shared_page`).
    pub fn do_shmem_fault(&mut self, vma: u32, idx: usize, write: bool) -> Result<(), FaultError> {
        let v = &self.vmas[vma as usize];
        let (inode, index) = (v.inode, v.pgoff + idx as u64);
        let memcg = self.mms[v.mm as usize].memcg;
        if !write {
            self.do_fault_around(vma, idx);
            if pte_present(self.vmas[vma as usize].ptes[idx]) {
                return Ok(());
            }
        }
        let head = self.traced(Fn::ShmemFault, |k| {
            k.shmem_get_folio(Some(vma), inode, index, memcg)
        })?;
        if write {
            self.folios.get_mut(head).set(PG_DIRTY);
        }
        if self.pmd_none(vma, idx) && self.do_set_pmd(vma, idx, head, write) {
            return Ok(());
        }
        if self.pte_alloc(vma, idx).is_err() {
            self.folio_put(head);
            return Err(FaultError::Oom);
        }
        self.map_shmem_pte(vma, idx, head, write);
        Ok(())
    }

    /// Installs a PTE for the page of shmem folio `head` at the PTE's file
    /// index (`do_set_pte`): the caller's reference becomes the mapping's.
    pub fn map_shmem_pte(&mut self, vma: u32, idx: usize, head: Pfn, write: bool) {
        self.charge_cost(Fn::AddFileRmap, cost::RMAP_NS + cost::PTE_NS);
        let index = self.vmas[vma as usize].pgoff + idx as u64;
        let page = self.folios.folio_page(head, index);
        self.page_add_file_rmap(page);
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_shmem += 1;
        let dirty = if write { PTE_DIRTY } else { 0 };
        self.vmas[vma as usize].ptes[idx] = mk_pte(page, PTE_WRITE | PTE_YOUNG | dirty);
    }

    /// `page_remove_rmap` for a shmem page.
    pub fn page_remove_file_rmap(&mut self, page: Pfn) {
        self.charge_cost(Fn::RemoveRmap, cost::MAPCOUNT_NS);
        debug_assert!(self.folios.page_mapcount(page) > 0);
        if self.folios.page_mapcount_add(page, -1) == 0 {
            // NR_FILE_MAPPED counts pages, whatever their folio's size.
            self.charge_cost(Fn::ModLruvecState, cost::RMAP_STAT_NS);
            let memcg = self.folios.get(self.folios.head_of(page)).memcg;
            self.vm.add(Vm::NrMapped, -1);
            self.memcg_stat(memcg, Mc::FileMapped, -1);
        }
    }

    /// `folio_remove_rmap_range` (seed 003): the mapcounts of a run of
    /// one folio's pages dropped in one call, and one stat update for the
    /// pages no longer mapped.
    pub fn folio_remove_rmap_range(&mut self, pages: impl Iterator<Item = Pfn>) {
        let mut unmapped = 0;
        let mut memcg = 0;
        for page in pages {
            self.charge_cost(Fn::FolioRemoveRmapRange, cost::MAPCOUNT_NS);
            memcg = self.folios.get(self.folios.head_of(page)).memcg;
            if self.folios.page_mapcount_add(page, -1) == 0 {
                unmapped += 1;
            }
        }
        if unmapped > 0 {
            self.charge_cost(Fn::ModLruvecState, cost::RMAP_STAT_NS);
            self.vm.add(Vm::NrMapped, -unmapped);
            self.memcg_stat(memcg, Mc::FileMapped, -unmapped);
        }
    }

    /// `page_add_file_rmap` for one PTE of a page-cache page (shmem or a
    /// regular file; a page of a large folio counts on its own).
    pub fn page_add_file_rmap(&mut self, page: Pfn) {
        if self.folios.page_mapcount_add(page, 1) == 1 {
            let memcg = self.folios.get(self.folios.head_of(page)).memcg;
            self.vm.inc(Vm::NrMapped);
            self.memcg_stat(memcg, Mc::FileMapped, 1);
        }
    }

    /// `shmem_writepage` for a clean-of-mappings, dirty shmem folio in
    /// reclaim: a swap slot owned by the inode, the folio moved from the
    /// page cache to the swap cache, then the write. False: no swap
    /// space (the folio stays, redirtied, and is activated).
    pub fn shmem_writepage(&mut self, pfn: Pfn) -> bool {
        let memcg = self.folios.get(pfn).memcg;
        let Some(entry) = self.folio_alloc_swap(memcg) else {
            return false;
        };
        self.charge_cost(Fn::AddToSwap, cost::SWAP_SLOT_NS);
        let _ = self.add_to_swap_cache(pfn, entry);
        // swap_shmem_alloc: the inode's entry is the slot's one reference.
        self.swap_duplicate(entry);
        self.shmem_delete_from_page_cache(pfn, (entry as u64) << 2 | SLOT_SWAP);
        self.swap_writepage(pfn);
        true
    }

    /// Reclaim drops a clean shmem folio from its page cache (it was never
    /// written: the hole reads as zeros again). Returns true if freed.
    pub fn shmem_remove_clean(&mut self, pfn: Pfn) -> bool {
        let f = *self.folios.get(pfn);
        // Only the isolation's and the cache's references.
        if f.refcount != 1 + f.nr_pages() || f.test(PG_DIRTY) {
            return false;
        }
        self.shmem_delete_from_page_cache(pfn, 0);
        let f = self.folios.get_mut(pfn);
        f.refcount = 0;
        f.clear(PG_ISOLATED);
        self.free_folio(pfn);
        true
    }

    /// The PTEs a page-cache folio's rmap walk (`i_mmap`) finds mapping
    /// any of its pages — shmem or a regular file: (VMA, index, PTE).
    pub fn page_cache_mappings(&self, pfn: Pfn) -> Vec<(u32, usize, Pte)> {
        let f = self.folios.get(pfn);
        let inode = f.mapping as usize;
        let mut out = Vec::new();
        for &v in &self.inodes[inode].vmas {
            let vm = &self.vmas[v as usize];
            // page_vma_mapped_walk over every page of the folio.
            for i in 0..f.nr_pages() {
                let idx = (f.index as u64 + i as u64).wrapping_sub(vm.pgoff);
                if idx >= vm.pages {
                    continue;
                }
                let pte = vm.ptes[idx as usize];
                if pte_present(pte) && pte_pfn(pte) == pfn + i {
                    out.push((v, idx as usize, pte));
                }
            }
        }
        out
    }

    /// `shmem_evict_inode` of shared anonymous memory whose last mapping
    /// went: its pages and swap entries are freed.
    pub fn shmem_evict(&mut self, inode: u32) {
        for index in 0..self.inodes[inode as usize].pages.len() as u64 {
            if let Some(pfn) = self.shmem_folio_at(inode, index) {
                if self.folios.get(pfn).test(PG_LOCKED) {
                    continue;
                }
                self.shmem_delete_from_page_cache(pfn, 0);
            } else if let Some(entry) = self.shmem_swap_at(inode, index) {
                self.inodes[inode as usize].pages[index as usize] = 0;
                self.free_swap_and_cache(entry);
            }
        }
        self.inodes[inode as usize].pages = Vec::new();
        self.inodes[inode as usize].user_version = Vec::new();
    }

    /// `shmem_swapin_range` (MADV_WILLNEED on shmem): start reading the
    /// range's swapped-out pages into the swap cache.
    pub fn shmem_willneed(&mut self, inode: u32, first: u64, n: u64, memcg: u16) {
        for index in first..first + n {
            if let Some(entry) = self.shmem_swap_at(inode, index) {
                if let Some((pfn, allocated)) = self.read_swap_cache_async(entry, memcg) {
                    if allocated {
                        self.swap_readpage(pfn, entry);
                    }
                    self.folio_put(pfn);
                }
            }
        }
    }

    /// `shmem_unuse` for swapoff of device `ty`: every inode's entries on
    /// it come back into the page cache (through the swap cache, with
    /// cluster readahead; no fault is counted). False if memory ran out.
    pub fn shmem_unuse(&mut self, ty: usize) -> bool {
        for inode in 0..self.inodes.len() as u32 {
            for index in 0..self.inodes[inode as usize].pages.len() as u64 {
                let Some(entry) = self.shmem_swap_at(inode, index) else {
                    continue;
                };
                if super::swapfile::swp_type(entry) != ty {
                    continue;
                }
                self.charge_cost(Fn::TryToUnuse, cost::PTE_NS);
                let memcg = self.swap[ty].cgroup[super::swapfile::swp_offset(entry) as usize];
                let pfn = match self.lookup_swap_cache(entry, None) {
                    Some(p) => p,
                    None => match self.shmem_swapin_cluster(entry, memcg) {
                        Some(p) => p,
                        None => return false,
                    },
                };
                self.wait_on_folio_io(pfn);
                self.shmem_add_to_page_cache(pfn, inode, index);
                self.delete_from_swap_cache(pfn);
                self.folios.get_mut(pfn).set(PG_DIRTY);
                self.swap_free(entry);
                self.folio_put(pfn);
            }
        }
        true
    }

    /// Swap entries an inode holds (for the invariant checker).
    pub fn shmem_swap_entries(&self) -> impl Iterator<Item = SwpEntry> + '_ {
        self.inodes
            .iter()
            .flat_map(|i| i.pages.iter())
            .filter(|&&v| v & 3 == SLOT_SWAP)
            .map(|&v| (v >> 2) as SwpEntry)
    }
}

impl Kernel {
    /// One page of read(2)/write(2) of tmpfs inode `inode`
    /// (`shmem_file_read_iter`, and `generic_perform_write` with
    /// `shmem_write_begin`/`end`). Err(Wait): the syscall sleeps for a
    /// swap-in's read or writeback and comes back to the page.
    pub fn shmem_file_io_page(
        &mut self,
        inode: u32,
        index: u64,
        write: bool,
        memcg: u16,
    ) -> Result<(), FaultError> {
        if write {
            self.shmem_write_page(inode, index, memcg)
        } else {
            self.shmem_read_page(inode, index, memcg)
        }
    }

    /// One page of `shmem_file_read_iter`: a hole reads zeros without a
    /// page; a cached or swapped-in page is marked accessed (the read
    /// starts at its beginning) and copied out.
    fn shmem_read_page(&mut self, inode: u32, index: u64, memcg: u16) -> Result<(), FaultError> {
        self.charge_cost(Fn::ShmemFault, cost::PTE_NS);
        let pfn = if let Some(p) = self.shmem_folio_at(inode, index) {
            self.folios.get_mut(p).refcount += 1;
            p
        } else if let Some(entry) = self.shmem_swap_at(inode, index) {
            self.shmem_swapin_folio_sgp(inode, index, entry, memcg, false)?
        } else {
            // A hole: iov_iter_zero.
            self.charge_cost(Fn::User, cost::CLEAR_PAGE_NS);
            self.check_read(0, self.inodes[inode as usize].user_version[index as usize]);
            return Ok(());
        };
        self.folio_mark_accessed(pfn);
        self.charge_cost(Fn::User, cost::COPY_PAGE_NS);
        let found = self.folios.version[self.folios.folio_page(pfn, index) as usize];
        self.check_read(
            found,
            self.inodes[inode as usize].user_version[index as usize],
        );
        self.folio_put(pfn);
        Ok(())
    }

    /// One page of a write: `shmem_write_begin` (SGP_WRITE: allocate a
    /// hole, swap in, mark accessed), the copy, `shmem_write_end` (dirty).
    fn shmem_write_page(&mut self, inode: u32, index: u64, memcg: u16) -> Result<(), FaultError> {
        self.charge_cost(Fn::ShmemFault, cost::PTE_NS);
        let pfn = if let Some(p) = self.shmem_folio_at(inode, index) {
            self.folios.get_mut(p).refcount += 1;
            self.folio_mark_accessed(p);
            p
        } else if let Some(entry) = self.shmem_swap_at(inode, index) {
            self.shmem_swapin_folio_sgp(inode, index, entry, memcg, true)?
        } else {
            // A new folio for SGP_WRITE starts referenced.
            let p = self.shmem_get_folio(None, inode, index, memcg)?;
            self.folios.get_mut(p).set(PG_REFERENCED);
            p
        };
        self.charge_cost(Fn::User, cost::COPY_PAGE_NS);
        let next = self.inodes[inode as usize].user_version[index as usize]
            .wrapping_add(1)
            .max(1);
        self.inodes[inode as usize].user_version[index as usize] = next;
        let page = self.folios.folio_page(pfn, index);
        self.folios.version[page as usize] = next;
        self.folios.get_mut(pfn).set(PG_DIRTY);
        self.folio_put(pfn);
        Ok(())
    }

    fn check_read(&mut self, found: u32, expected: u32) {
        self.integrity.pages_checked += 1;
        if found != expected {
            self.integrity.violations += 1;
        }
    }

    /// `shmem_swapin_folio` outside a fault (no major fault is counted);
    /// SGP_WRITE marks the folio accessed.
    fn shmem_swapin_folio_sgp(
        &mut self,
        inode: u32,
        index: u64,
        entry: SwpEntry,
        memcg: u16,
        write: bool,
    ) -> Result<Pfn, FaultError> {
        let majors = self.vm.get(Vm::Pgmajfault);
        let memcg_majors = self.memcgs[memcg as usize].stat.get(Mc::Pgmajfault);
        let r = self.shmem_swapin_folio(inode, index, entry, memcg);
        // Only a fault counts pgmajfault (fault_type is NULL here).
        let d = self.vm.get(Vm::Pgmajfault) - majors;
        self.vm.add(Vm::Pgmajfault, -d);
        let dm = self.memcgs[memcg as usize].stat.get(Mc::Pgmajfault) - memcg_majors;
        self.memcg_stat(memcg, Mc::Pgmajfault, -dm);
        let pfn = r?;
        if write {
            self.folio_mark_accessed(pfn);
        }
        Ok(pfn)
    }

    /// drop_caches' `invalidate_mapping_pagevec` over the shmem inodes: a
    /// page only the page cache holds, clean (never written: a hole again),
    /// is dropped (`mapping_evict_folio`); any other is deactivated as a
    /// hint (`deactivate_file_folio`).
    pub fn drop_caches(&mut self) {
        for inode in 0..self.inodes.len() as u32 {
            if !self.inodes[inode as usize].is_shmem() {
                self.invalidate_mapping_pages(inode);
                continue;
            }
            for index in 0..self.inodes[inode as usize].pages.len() as u64 {
                let Some(pfn) = self.shmem_folio_at(inode, index) else {
                    continue;
                };
                let f = *self.folios.get(pfn);
                if f.test(PG_LOCKED) {
                    continue;
                }
                self.charge_cost(Fn::User, cost::LRU_MOVE_NS);
                if f.refcount == f.nr_pages() && !f.test(PG_DIRTY | PG_WRITEBACK) {
                    self.folios.get_mut(pfn).refcount += 1;
                    self.shmem_delete_from_page_cache(pfn, 0);
                    self.folio_put(pfn);
                } else {
                    self.deactivate_file_folio(pfn);
                }
            }
        }
    }

    /// `deactivate_file_folio` → `lru_deactivate_file_fn`, applied at once
    /// rather than through the per-CPU batch (a folio not on an LRU list,
    /// which the batch would skip, is left alone): an unmapped folio goes
    /// inactive, dirty ones to the head marked for reclaim, clean ones to
    /// the tail.
    pub fn deactivate_file_folio(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        if f.test(PG_UNEVICTABLE) || !f.test(PG_LRU) || f.mapcount > 0 {
            return;
        }
        self.lruvec_del_folio(pfn);
        self.folios.get_mut(pfn).clear(PG_ACTIVE | PG_REFERENCED);
        if f.test(PG_WRITEBACK | PG_DIRTY) {
            self.lruvec_add_folio(pfn);
            self.folios.get_mut(pfn).set(PG_RECLAIM);
        } else {
            self.lruvec_add_folio_tail(pfn);
            self.vm.add(Vm::Pgrotated, f.nr_pages() as i64);
        }
        if f.test(PG_ACTIVE) {
            self.vm.add(Vm::Pgdeactivate, f.nr_pages() as i64);
            self.memcg_stat(f.memcg, Mc::Pgdeactivate, f.nr_pages() as i64);
        }
    }
}

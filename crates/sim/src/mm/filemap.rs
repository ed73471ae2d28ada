//! mm/filemap.c: the page cache of regular files on disks — an inode's
//! slots, `filemap_add_folio` with refault detection, `filemap_fault`,
//! fault-around (`filemap_map_pages`), `filemap_read` and the write path
//! (`generic_perform_write` as ext2 runs it), dirty accounting, writeback
//! (`write_cache_pages`, fsync and the flusher), `__remove_mapping` of
//! clean file folios with a shadow entry, and drop_caches.
//!
//! Files on disks live on an ext2 file system (4 KiB blocks, no large
//! folios: ext2 and ext4 have no large folio support in 6.1) or on XFS,
//! whose page cache readahead fills with large folios
//! (`page_cache_ra_order`); each file's blocks contiguous on its disk (a
//! fresh file system written file by file). Every slot of a large folio
//! names the folio (the xarray's multi-index entry); the page at an index
//! is `folio_page`. Simplification: the file system's metadata I/O (the indirect
//! block read once per 1024 data blocks, inode and bitmap writes) is left
//! out: it adds about 0.1% to pgpgin and nothing to the page cache's LRU.

use super::folio::*;
use super::memory::FaultError;
use super::mmap::{VM_RAND_READ, VM_SEQ_READ, VM_SHARED};
use super::page_alloc::Gfp;
use super::pgtable::*;
use super::readahead::FileRa;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::vmstat::{Mc, Vm};

/// An inode's page-cache slot: empty (0), a folio, a swap entry (shmem)
/// or a shadow entry left by reclaim (regular files).
pub const SLOT_SWAP: u64 = 1;
pub const SLOT_FOLIO: u64 = 2;
pub const SLOT_SHADOW: u64 = 3;

/// fault_around_bytes (64 KiB): a read fault maps up to 16 cached pages.
const FAULT_AROUND_PAGES: u64 = 16;

/// An inode and its address_space: a tmpfs file, the object behind a
/// shared anonymous mapping, or a regular file on a disk.
pub struct Inode {
    /// The mapping's xarray, one slot per page: 0 empty, `pfn << 2 | 2`,
    /// `entry << 2 | 1` (shmem) or `shadow << 2 | 3` (regular files).
    pub pages: Vec<u64>,
    /// What users last wrote to each page (0 = never: reads zeros, or the
    /// data the file was created with). User knowledge for the integrity
    /// check; the kernel never reads it.
    pub user_version: Vec<u32>,
    /// The VMAs mapping the inode (`i_mmap`).
    pub vmas: Vec<u32>,
    /// Shared anonymous memory: freed with its last mapping.
    pub anon: bool,
    /// The `[[disk]]` a regular file lives on; None for shmem.
    pub disk: Option<u16>,
    /// What the disk holds for each page of a regular file.
    pub disk_version: Vec<u32>,
    /// The file's first block on its disk (blocks are pages).
    pub block: u64,
    /// Dirty pages in the cache (regular files).
    pub nr_dirty: u64,
    /// `mapping_large_folio_support`: an XFS file.
    pub large_folios: bool,
    /// A shmem inode's superblock `huge=` policy: its tmpfs mount's, or
    /// for shared anonymous memory the internal mount's, which
    /// shmem_enabled sets (Never for regular files).
    pub huge: mmsim_spec::TmpfsHuge,
}

impl Inode {
    pub fn is_shmem(&self) -> bool {
        self.disk.is_none()
    }
}

/// A disk holding files: the device and its queue's readahead size.
pub struct Disk {
    pub bdev: crate::dev::blockdev::BlockDev,
    /// `bdi->ra_pages` (read_ahead_kb / 4).
    pub ra_pages: u64,
    /// Next free block for a new file.
    pub next_block: u64,
    /// Its file system is XFS (large folios in the page cache).
    pub large_folios: bool,
}

impl Kernel {
    /// A regular file of `pages` pages on disk `disk`, all on disk and
    /// none cached.
    pub fn disk_inode_create(&mut self, pages: u64, disk: u16) -> u32 {
        let d = &mut self.disks[disk as usize];
        let block = d.next_block;
        d.next_block += pages;
        let large_folios = d.large_folios;
        self.inodes.push(Inode {
            pages: vec![0; pages as usize],
            user_version: vec![0; pages as usize],
            vmas: Vec::new(),
            anon: false,
            disk: Some(disk),
            disk_version: vec![0; pages as usize],
            block,
            nr_dirty: 0,
            large_folios,
            huge: mmsim_spec::TmpfsHuge::Never,
        });
        (self.inodes.len() - 1) as u32
    }

    /// The folio cached at `index`, if any (`filemap_get_folio` without
    /// taking a reference).
    pub fn filemap_folio_at(&self, inode: u32, index: u64) -> Option<Pfn> {
        let v = self.inodes[inode as usize].pages[index as usize];
        (v & 3 == SLOT_FOLIO).then_some((v >> 2) as Pfn)
    }

    /// `filemap_add_folio` of a new, locked folio for a regular file,
    /// charged to `memcg`: a shadow in the slot is a refault (unless the
    /// page is being written: `__GFP_WRITE`), then the folio goes on the
    /// LRU. Returns the folio with the caller's reference, None if memory
    /// or the memcg charge failed.
    pub fn filemap_add_new_folio(
        &mut self,
        inode: u32,
        index: u64,
        memcg: u16,
        for_write: bool,
    ) -> Option<Pfn> {
        let pfn = self.alloc_page(Gfp::HighUserMovable)?;
        self.filemap_add_folio(pfn, inode, index, memcg, for_write)
    }

    /// `filemap_alloc_folio` of `order` and `filemap_add_folio` at
    /// `index` (aligned to the order; the caller knows no page of the
    /// range is cached). None if the block or the charge is not there.
    pub fn filemap_add_new_folio_order(
        &mut self,
        inode: u32,
        index: u64,
        order: usize,
        memcg: u16,
    ) -> Option<Pfn> {
        if order == 0 {
            return self.filemap_add_new_folio(inode, index, memcg, false);
        }
        debug_assert_eq!(index % (1 << order), 0);
        let pfn = self.alloc_large_folio(order)?;
        self.filemap_add_folio(pfn, inode, index, memcg, false)
    }

    /// `filemap_add_folio` of a new folio: charged, locked, in every slot
    /// of its range; a shadow in the range is a refault (unless the page
    /// is being written: `__GFP_WRITE`); then onto the LRU.
    fn filemap_add_folio(
        &mut self,
        pfn: Pfn,
        inode: u32,
        index: u64,
        memcg: u16,
        for_write: bool,
    ) -> Option<Pfn> {
        let nr = self.folios.get(pfn).nr_pages() as u64;
        self.folios.get_mut(pfn).memcg = memcg;
        if self.try_charge(memcg, nr) != super::memcontrol::Charge::Ok {
            self.free_folio_pages(pfn);
            return None;
        }
        // The insert is the work under the mapping's xa_lock.
        let lock = self.spin_lock(crate::cacheline::Line::PageCache(inode));
        self.charge_cost(Fn::AddToPageCache, self.costs.page_cache_add);
        self.spin_unlock(lock);
        let range = index as usize..(index + nr) as usize;
        let shadow = self.inodes[inode as usize].pages[range.clone()]
            .iter()
            .copied()
            .find(|s| s & 3 == SLOT_SHADOW);
        let f = self.folios.get_mut(pfn);
        f.set(PG_LOCKED | PG_PAGECACHE | PG_CHARGED);
        f.refcount += nr as u32;
        f.mapping = inode;
        f.index = index as u32;
        for slot in &mut self.inodes[inode as usize].pages[range] {
            *slot = (pfn as u64) << 2 | SLOT_FOLIO;
        }
        self.mod_node_page_state(Vm::NrFilePages, nr as i64);
        self.memcg_stat(memcg, Mc::File, nr as i64);
        self.hist.pagecache_folio_pages.record(nr);
        if let Some(s) = shadow.filter(|_| !for_write) {
            self.workingset_refault(pfn, s >> 2);
        }
        self.folio_add_lru(pfn);
        Some(pfn)
    }

    /// `__filemap_remove_folio` of a regular file's folio: the slot takes
    /// `shadow` (0: none), the cache's reference goes.
    pub fn filemap_remove_folio(&mut self, pfn: Pfn, shadow: u64) {
        let f = self.folios.get_mut(pfn);
        let (inode, index, memcg, nr) = (f.mapping, f.index as usize, f.memcg, f.nr_pages());
        f.clear(PG_PAGECACHE);
        let entry = if shadow != 0 {
            shadow << 2 | SLOT_SHADOW
        } else {
            0
        };
        for slot in &mut self.inodes[inode as usize].pages[index..index + nr as usize] {
            *slot = entry;
        }
        self.mod_node_page_state(Vm::NrFilePages, -(nr as i64));
        self.memcg_stat(memcg, Mc::File, -(nr as i64));
        self.folio_put_refs(pfn, nr);
    }

    /// `__remove_mapping` for a clean, unmapped file folio reclaim holds
    /// isolated: a shadow for refault detection takes its slot, and the
    /// folio is freed. False if someone else holds a reference.
    pub fn remove_mapping_file(&mut self, pfn: Pfn, target: u16) -> bool {
        let f = *self.folios.get(pfn);
        if f.refcount != 1 + f.nr_pages() || f.test(PG_DIRTY) {
            return false;
        }
        let shadow = self.workingset_eviction(pfn, target);
        self.filemap_remove_folio(pfn, shadow);
        let f = self.folios.get_mut(pfn);
        f.refcount = 0;
        f.clear(PG_ISOLATED);
        self.free_folio(pfn);
        true
    }

    /// `filemap_dirty_folio` → `folio_account_dirtied` for a regular
    /// file's folio (shmem folios carry no dirty accounting).
    pub fn filemap_dirty_folio(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        if f.test(PG_DIRTY) {
            return;
        }
        self.folios.get_mut(pfn).set(PG_DIRTY);
        if !f.test(PG_PAGECACHE) || f.test(PG_SWAPBACKED) {
            return;
        }
        let nr = f.nr_pages() as i64;
        self.mod_node_page_state(Vm::NrDirty, nr);
        self.mod_node_page_state(Vm::NrDirtied, nr);
        self.memcg_stat(f.memcg, Mc::FileDirty, nr);
        self.inodes[f.mapping as usize].nr_dirty += nr as u64;
    }

    /// `folio_clear_dirty_for_io`: writeback takes the dirty bit, after
    /// `folio_mkclean` write-protected every shared mapping of the folio
    /// (a later write faults and dirties it again).
    fn folio_clear_dirty_for_io(&mut self, pfn: Pfn) {
        for (v, idx, pte) in self.page_cache_mappings(pfn) {
            if self.vmas[v as usize].flags & VM_SHARED != 0 && pte & PTE_WRITE != 0 {
                self.charge_cost(Fn::Writeback, self.costs.pte);
                self.vmas[v as usize].ptes[idx] = pte & !(PTE_WRITE | PTE_DIRTY);
            }
        }
        let f = self.folios.get_mut(pfn);
        f.clear(PG_DIRTY);
        let (memcg, inode, nr) = (f.memcg, f.mapping, f.nr_pages() as i64);
        self.mod_node_page_state(Vm::NrDirty, -nr);
        self.memcg_stat(memcg, Mc::FileDirty, -nr);
        self.inodes[inode as usize].nr_dirty -= nr as u64;
    }

    /// `write_cache_pages` over a file (ext2's `mpage_writepages`): every
    /// dirty folio not already under writeback is cleaned for I/O and
    /// written to its block; the bios merge under one plug. Returns when
    /// the last write completes (None: nothing was written).
    pub fn filemap_writeback(&mut self, inode: u32) -> Option<u64> {
        if self.inodes[inode as usize].nr_dirty == 0 {
            return None;
        }
        let disk = self.inodes[inode as usize].disk.expect("a regular file") as usize;
        let block = self.inodes[inode as usize].block;
        self.blk_start_plug();
        for index in 0..self.inodes[inode as usize].pages.len() as u64 {
            let Some(pfn) = self.filemap_folio_at(inode, index) else {
                continue;
            };
            let f = *self.folios.get(pfn);
            if f.index as u64 != index
                || !f.test(PG_DIRTY)
                || f.test(PG_WRITEBACK)
                || f.test(PG_LOCKED)
            {
                continue;
            }
            self.charge_cost(Fn::Writeback, self.costs.pte);
            self.folio_clear_dirty_for_io(pfn);
            for i in 0..f.nr_pages() {
                self.inodes[inode as usize].disk_version[index as usize + i as usize] =
                    self.folios.version[(pfn + i) as usize];
            }
            self.folio_start_writeback(pfn);
            self.submit_bio(super::page_io::BioDev::Disk(disk), block + index, pfn, true);
        }
        self.blk_finish_plug();
        self.inode_writeback_done_at(inode)
    }

    /// When the last write of the file's folios under writeback completes.
    pub fn inode_writeback_done_at(&self, inode: u32) -> Option<u64> {
        let i = &self.inodes[inode as usize];
        i.pages
            .iter()
            .filter(|&&v| v & 3 == SLOT_FOLIO)
            .map(|&v| (v >> 2) as Pfn)
            .filter(|&p| self.folios.get(p).test(PG_WRITEBACK))
            .filter_map(|p| self.io_wait.get(&p).copied())
            .max()
    }

    /// The flusher (`wb_workfn`), run when dirty pages pass the background
    /// threshold or reclaim asks for it: every file's dirty pages are
    /// written. Simplification: the flusher's own CPU time is not charged
    /// (it runs in a kworker on another CPU's idle time in the kernel),
    /// and balance_dirty_pages' throttling of writers above the dirty
    /// threshold is not modelled.
    pub fn wakeup_flusher_threads(&mut self) {
        for inode in 0..self.inodes.len() as u32 {
            if self.inodes[inode as usize].disk.is_some() {
                self.filemap_writeback(inode);
            }
        }
    }

    /// `balance_dirty_pages_ratelimited`'s background check: past
    /// dirty_background_ratio (10%) of dirtyable memory (free pages and
    /// the file LRUs), the flusher starts.
    fn balance_dirty_pages(&mut self) {
        let dirty = self.vm.get(Vm::NrDirty).max(0) as u64;
        if dirty == 0 {
            return;
        }
        let dirtyable = self.nr_free_pages()
            + self.global_lru_pages(LRU_INACTIVE_FILE)
            + self.global_lru_pages(LRU_ACTIVE_FILE);
        if dirty > dirtyable / 10 {
            self.wakeup_flusher_threads();
        }
    }

    /// `global_node_page_state` of an LRU list (the node counters, no
    /// memcg flush).
    fn global_lru_pages(&self, lru: u8) -> u64 {
        let node = super::lruvec::LRU_VM[lru as usize].0;
        self.vm.get(node).max(0) as u64
    }

    /// `filemap_fault` for page `idx` of a file VMA: the cached folio (with
    /// async readahead at a marker), or a major fault that reads it with
    /// readahead and retries once the read completes. Returns the uptodate
    /// folio with a reference for the caller.
    fn filemap_fault(&mut self, vma: u32, idx: usize, memcg: u16) -> Result<Pfn, FaultError> {
        self.charge_cost(Fn::FilemapFault, self.costs.pagecache_lookup);
        let v = &self.vmas[vma as usize];
        let (inode, index) = (v.inode, v.pgoff + idx as u64);
        let task = self.cur_task.expect("faults come from tasks");
        let tried = self.tasks[task].fault_start.is_some();
        if let Some(pfn) = self.filemap_folio_at(inode, index) {
            // filemap_get_folio's reference keeps the folio through the
            // readahead's allocations (and their reclaim).
            self.folios.get_mut(pfn).refcount += 1;
            if !tried {
                self.do_async_mmap_readahead(vma, index, pfn, memcg);
            }
            if let Some(done) = self.folio_io_done_at(pfn) {
                // lock_folio_maybe_drop_mmap: the fault waits for the read
                // with the mmap lock dropped, then retries.
                self.psi_folio_wait(pfn);
                self.folio_put(pfn);
                return Err(FaultError::Retry(done));
            }
            return Ok(pfn);
        }
        self.vm.inc(Vm::Pgmajfault);
        self.memcg_stat(memcg, Mc::Pgmajfault, 1);
        self.do_sync_mmap_readahead(vma, index, memcg);
        let pfn = match self.filemap_folio_at(inode, index) {
            Some(p) => p,
            None => {
                // No readahead made it: __filemap_get_folio(FGP_CREAT) and
                // filemap_read_folio.
                let p = self
                    .filemap_add_new_folio(inode, index, memcg, false)
                    .ok_or(FaultError::Oom)?;
                self.filemap_read_folio(p);
                self.folio_put(p);
                p
            }
        };
        match self.folio_io_done_at(pfn) {
            Some(done) => {
                self.psi_folio_wait(pfn);
                Err(FaultError::Retry(done))
            }
            // Read already (a synchronous device): the fault still drops
            // the mmap lock for the I/O and retries.
            None => Err(FaultError::Retry(self.now())),
        }
    }

    /// `filemap_read_folio` / ext2's `read_folio` of one locked folio.
    pub fn filemap_read_folio(&mut self, pfn: Pfn) {
        self.blk_start_plug();
        self.read_pages(&[pfn]);
        self.blk_finish_plug();
    }

    /// A fault on an empty PTE of a VMA mapping a regular file: a read
    /// faults around first and maps the page read-only; a write to a
    /// shared mapping dirties the page (`do_shared_fault`); a write to a
    /// private one copies it (`do_cow_fault`).
    pub fn do_file_fault(&mut self, vma: u32, idx: usize, write: bool) -> Result<(), FaultError> {
        let memcg = self.mms[self.vmas[vma as usize].mm as usize].memcg;
        let shared = self.vmas[vma as usize].flags & VM_SHARED != 0;
        if !write {
            self.do_fault_around(vma, idx);
            if pte_present(self.vmas[vma as usize].ptes[idx]) {
                return Ok(());
            }
        }
        let pfn = self.traced(Fn::FilemapFault, |k| k.filemap_fault(vma, idx, memcg))?;
        if write && !shared {
            return self.do_cow_fault(vma, idx, pfn);
        }
        self.do_set_pte(vma, idx, pfn, write);
        if write {
            // do_shared_fault: finish_fault maps the page writable and
            // dirty, then fault_dirty_shared_page dirties the folio and
            // balances. In that order: a flusher the balance wakes cleans
            // the folio and write-protects the new PTE (folio_mkclean),
            // so the store that follows faults and dirties it again.
            self.filemap_dirty_folio(pfn);
            self.balance_dirty_pages();
            // ext4 and xfs have page_mkwrite: 5.10 retries every time.
            self.fault_dirty_shared_retry(vma, true);
        }
        Ok(())
    }

    /// `do_fault_around` → `filemap_map_pages`: every cached, uptodate,
    /// unlocked page in the 16-page aligned window (inside the VMA and its
    /// page table) whose PTE is empty gets mapped, read-only for a regular
    /// file, writable for shmem; a page marked for readahead is left for
    /// the fault. Each page seen lowers the file's mmap_miss.
    pub fn do_fault_around(&mut self, vma: u32, idx: usize) {
        let v = &self.vmas[vma as usize];
        let va = v.start_vpn + idx as u64;
        let start = (va & !(FAULT_AROUND_PAGES - 1))
            .max(v.start_vpn)
            .max(va & !511);
        let end = ((va & !(FAULT_AROUND_PAGES - 1)) + FAULT_AROUND_PAGES)
            .min(v.start_vpn + v.pages)
            .min((va & !511) + 512);
        let (inode, pgoff, base) = (v.inode, v.pgoff, v.start_vpn);
        let shmem = self.inodes[inode as usize].is_shmem();
        // With no table for the block yet, one is allocated first
        // (`prealloc_pte`): its charge may reclaim, which must not happen
        // between the page-cache lookups below and their mappings.
        let pmd_none = self.pmd_none(vma, idx);
        if pmd_none && self.prealloc_pte_table(vma).is_err() {
            return;
        }
        if pmd_none
            && self.filemap_map_pmd(vma, idx, (start - base) as usize, (end - base) as usize)
        {
            return;
        }
        let (start, end) = if self.release.fault_around_whole_folios {
            self.fault_around_whole_folios(vma, start, end)
        } else {
            (start, end)
        };
        let mut mmap_miss = self.vmas[vma as usize].ra.mmap_miss;
        for a in start..end {
            let i = (a - base) as usize;
            let Some(pfn) = self.filemap_folio_at(inode, pgoff + i as u64) else {
                continue;
            };
            let f = self.folios.get(pfn);
            if f.test(PG_LOCKED) || (!shmem && f.test(PG_READAHEAD)) {
                continue;
            }
            mmap_miss = mmap_miss.saturating_sub(1);
            if !pte_none(self.vmas[vma as usize].ptes[i]) {
                continue;
            }
            // pmd_install: the preallocated table (or the one there
            // already) takes the window's PTEs; nothing is allocated here.
            if self.pte_alloc(vma, i).is_err() {
                break;
            }
            self.folios.get_mut(pfn).refcount += 1;
            self.do_set_pte(vma, i, pfn, false);
            self.charge_cost(Fn::DoFault, self.costs.map_pages);
        }
        if !shmem {
            self.vmas[vma as usize].ra.mmap_miss = mmap_miss;
        }
    }

    /// 7.3's filemap_map_folio_range maps a large folio met at either end
    /// of the fault-around window whole, where the folio lies inside the
    /// file's size (or is shmem's), the VMA and one page table: the window
    /// `[start, end)` (virtual page numbers) grows to cover it.
    fn fault_around_whole_folios(&self, vma: u32, start: u64, end: u64) -> (u64, u64) {
        let v = &self.vmas[vma as usize];
        let inode = &self.inodes[v.inode as usize];
        let shmem = inode.is_shmem();
        let (mut lo, mut hi) = (start, end);
        for a in [start, end - 1] {
            let index = v.pgoff + (a - v.start_vpn);
            let Some(head) = self.filemap_folio_at(v.inode, index) else {
                continue;
            };
            let f = self.folios.get(head);
            let nr = f.nr_pages() as u64;
            let first = f.index as u64;
            if nr == 1 || first < v.pgoff {
                continue;
            }
            let va = v.start_vpn + (first - v.pgoff);
            if (shmem || first + nr <= inode.pages.len() as u64)
                && va + nr <= v.start_vpn + v.pages
                && va & !511 == (va + nr - 1) & !511
            {
                lo = lo.min(va);
                hi = hi.max(va + nr);
            }
        }
        (lo, hi)
    }

    /// `filemap_map_pmd` at the start of fault-around over pages
    /// `[lo, hi)` around page `idx`, whose block has no table yet: with a
    /// PMD-size, unlocked folio first in the window, `do_set_pmd` maps it
    /// whole and the fault is done (its preallocated table is freed when
    /// the fault ends).
    fn filemap_map_pmd(&mut self, vma: u32, idx: usize, lo: usize, hi: usize) -> bool {
        let v = &self.vmas[vma as usize];
        let (inode, pgoff) = (v.inode, v.pgoff);
        let Some(head) = (lo..hi).find_map(|i| self.filemap_folio_at(inode, pgoff + i as u64))
        else {
            return false;
        };
        let f = self.folios.get(head);
        if f.order != 9 || f.test(PG_LOCKED) || !f.test(PG_UPTODATE) {
            return false;
        }
        self.folios.get_mut(head).refcount += 1;
        if self.do_set_pmd(vma, idx, head, false) {
            return true;
        }
        self.folios.get_mut(head).refcount -= 1;
        false
    }

    /// `do_set_pte` for a page-cache page: the page of folio `head` at
    /// the PTE's file index; the caller's folio reference becomes the
    /// mapping's; young (x86 sets the accessed bit in the protection).
    /// `vm_page_prot` decides writability: a shmem mapping wants no write
    /// notification, so its PTE is writable from the first fault; a
    /// regular file's is writable (and dirty) only on a shared write
    /// fault. A write fault's PTE is dirty.
    pub fn do_set_pte(&mut self, vma: u32, idx: usize, head: Pfn, write: bool) {
        self.charge_cost(Fn::AddFileRmap, self.costs.rmap() + self.costs.pte);
        let index = self.vmas[vma as usize].pgoff + idx as u64;
        let page = self.folios.folio_page(head, index);
        self.page_add_file_rmap(page);
        let shmem = self.folios.get(head).test(PG_SWAPBACKED);
        let mm = self.vmas[vma as usize].mm as usize;
        *self.mms[mm].file_counter(shmem) += 1;
        let writable = if shmem || write { PTE_WRITE } else { 0 };
        let dirty = if write { PTE_DIRTY } else { 0 };
        self.vmas[vma as usize].ptes[idx] = mk_pte(page, PTE_YOUNG | writable | dirty);
    }

    /// `try_to_unmap` of a page-cache folio (a regular file's or shmem's):
    /// in each VMA mapping it, `try_to_unmap_one` clears every PTE of the
    /// folio (the page cache keeps the pages; a dirty bit moves to the
    /// folio) and removes the rmap page by page — or, with
    /// `features.batched_rmap_unmap` (seed 003), for the VMA's whole range
    /// at once.
    pub fn try_to_unmap_page_cache(&mut self, pfn: Pfn) {
        let inode = self.folios.get(pfn).mapping;
        self.i_mmap_lock_read(inode);
        let maps = self.page_cache_mappings(pfn);
        let mut i = 0;
        while i < maps.len() {
            let v = maps[i].0;
            let n = maps[i..].iter().take_while(|m| m.0 == v).count();
            let group = &maps[i..i + n];
            // page_vma_mapped_walk's PTE lock, held through the unmap (a
            // PMD mapping is split first, under its PMD table's lock).
            let ptl = match group[0].2 & PTE_PMD {
                0 => self.pte_lock(v, group[0].1, Fn::PageVmaMappedWalk),
                _ => None,
            };
            self.traced(Fn::TryToUnmap, |k| {
                k.try_to_unmap_one_page_cache(pfn, group)
            });
            self.spin_unlock(ptl);
            i += n;
        }
    }

    /// `try_to_unmap_one` of a page-cache folio in one VMA (`maps`: its
    /// PTEs).
    fn try_to_unmap_one_page_cache(&mut self, pfn: Pfn, maps: &[(u32, usize, Pte)]) {
        self.charge_cost(Fn::TryToUnmap, self.costs.unmap_walk());
        if maps[0].2 & PTE_PMD != 0 {
            // TTU_SPLIT_HUGE_PMD. A VMA maps a file range once, so a folio
            // it maps with a PMD has no PTEs in it besides.
            debug_assert!(maps.iter().all(|m| m.2 & PTE_PMD != 0));
            self.split_folio_pmds(maps[0].0, maps);
            return;
        }
        let batched = self.features.batched_rmap_unmap;
        let shmem = self.folios.get(pfn).test(PG_SWAPBACKED);
        for &(v, idx, pte) in maps {
            self.charge_cost(Fn::PtepClearFlush, self.costs.ptep_clear_flush());
            if pte & PTE_DIRTY != 0 {
                self.filemap_dirty_folio(pfn);
            }
            self.vmas[v as usize].ptes[idx] = 0;
            *self.mms[self.vmas[v as usize].mm as usize].file_counter(shmem) -= 1;
            if !batched {
                self.traced(Fn::RemoveRmap, |k| k.page_remove_file_rmap(pte_pfn(pte)));
            }
        }
        if batched {
            self.traced(Fn::FolioRemoveRmapRange, |k| {
                k.folio_remove_rmap_range(maps.iter().map(|m| pte_pfn(m.2)))
            });
        }
        // The mappings' references.
        self.folio_put_refs(pfn, maps.len() as u32);
    }

    /// `wp_page_shared` for a read-only PTE of a shared file mapping:
    /// page_mkwrite, the page dirtied, the PTE made writable
    /// (`wp_page_reuse`, counted as pgreuse).
    pub fn wp_page_shared(&mut self, vma: u32, idx: usize, pte: Pte) {
        let pfn = self.folios.head_of(pte_pfn(pte));
        self.charge_cost(Fn::DoWpPage, self.costs.pte);
        self.filemap_dirty_folio(pfn);
        self.vm.inc(Vm::Pgreuse);
        self.vmas[vma as usize].ptes[idx] = pte | PTE_WRITE | PTE_DIRTY | PTE_YOUNG;
        self.balance_dirty_pages();
        self.fault_dirty_shared_retry(vma, true);
    }
}

/// read(2) and write(2) of regular files, page by page.
impl Kernel {
    /// One page of `filemap_read` for a call covering pages up to
    /// `call_end`: readahead (sync on a miss, async at a marker), a wait
    /// for a read in flight (Err(Wait): the caller sleeps and comes back to
    /// the same page), then the copy, marking the folio accessed unless the
    /// previous copy ended inside it.
    pub fn filemap_read_page(
        &mut self,
        inode: u32,
        index: u64,
        call_end: u64,
        ra: &mut FileRa,
        memcg: u16,
    ) -> Result<(), FaultError> {
        self.charge_cost(Fn::FilemapRead, self.costs.pagecache_lookup);
        let pfn = match self.filemap_folio_at(inode, index) {
            Some(p) => p,
            None => {
                self.page_cache_sync_ra(inode, ra, index, call_end - index, memcg);
                match self.filemap_folio_at(inode, index) {
                    Some(p) => p,
                    None => {
                        // filemap_create_folio.
                        let p = self
                            .filemap_add_new_folio(inode, index, memcg, false)
                            .ok_or(FaultError::Oom)?;
                        self.filemap_read_folio(p);
                        self.folio_put(p);
                        p
                    }
                }
            }
        };
        // The read batch's reference, through the readahead's allocations.
        // Its get and the put after the copy are one visit to the folio's
        // line: two threads reading one tmpfs page natively cost each
        // other less than one transfer per read (docs/timing.md).
        self.write_page_line(pfn, Fn::FilemapRead);
        self.folios.get_mut(pfn).refcount += 1;
        if self.folios.get(pfn).test(PG_READAHEAD) {
            // filemap_readahead: from the folio's first index.
            let at = self.folios.get(pfn).index as u64;
            self.page_cache_async_ra(inode, ra, at, pfn, call_end - at, memcg);
        }
        if let Some(done) = self.folio_io_done_at(pfn) {
            self.psi_folio_wait(pfn);
            self.folio_put(pfn);
            return Err(FaultError::Wait(done));
        }
        // filemap_read: a folio is marked accessed when the copy enters it,
        // unless the previous copy ended in the same folio
        // (`pos_same_folio`).
        let shift = 12 + self.folios.get(pfn).order as u32;
        if ra.prev_pos <= 0 || (ra.prev_pos - 1) >> shift != ((index << 12) >> shift) as i64 {
            self.folio_mark_accessed(pfn);
        }
        let page = self.folios.folio_page(pfn, index);
        // copy_page_to_iter reads the page into the user buffer, which
        // read(2) reuses (its frames are not modelled, and it stays in
        // cache: membw.rs).
        let (copy, bytes) = self.copy_page_cost(page);
        self.charge_mem(Fn::User, copy, bytes);
        self.guest_frame(page, false);
        let found = self.folios.version[page as usize];
        let expected = self.inodes[inode as usize].user_version[index as usize];
        self.integrity.pages_checked += 1;
        if found != expected {
            self.integrity.violations += 1;
        }
        ra.prev_pos = ((index + 1) << 12) as i64;
        self.folio_put(pfn);
        Ok(())
    }

    /// One page of `generic_perform_write` on ext2: `write_begin` finds or
    /// creates the folio (a whole-page write reads nothing; a new page is
    /// not a refault), waiting for a read in flight; the copy; the folio
    /// dirtied (`block_write_end`); the background writeback check.
    pub fn filemap_write_page(
        &mut self,
        inode: u32,
        index: u64,
        memcg: u16,
    ) -> Result<(), FaultError> {
        self.charge_cost(Fn::FilemapWrite, self.costs.pagecache_lookup);
        let pfn = match self.filemap_folio_at(inode, index) {
            Some(p) => {
                if let Some(done) = self.folio_lock_and_writeback_done_at(p) {
                    // FGP_LOCK and FGP_STABLE: wait for the read or the
                    // write in flight.
                    self.psi_folio_wait(p);
                    return Err(FaultError::Wait(done));
                }
                self.write_page_line(p, Fn::FilemapWrite);
                self.folios.get_mut(p).refcount += 1;
                p
            }
            None => {
                let p = self
                    .filemap_add_new_folio(inode, index, memcg, true)
                    .ok_or(FaultError::Oom)?;
                let f = self.folios.get_mut(p);
                f.clear(PG_LOCKED);
                f.set(PG_UPTODATE);
                p
            }
        };
        // copy_page_from_iter writes the page from the user buffer.
        self.charge_mem(Fn::User, self.costs.copy_page, PAGE_BYTES);
        self.guest_frame(self.folios.folio_page(pfn, index), true);
        self.l2_write(self.folios.folio_page(pfn, index), 1);
        let next = self.inodes[inode as usize].user_version[index as usize]
            .wrapping_add(1)
            .max(1);
        self.inodes[inode as usize].user_version[index as usize] = next;
        let page = self.folios.folio_page(pfn, index);
        self.folios.version[page as usize] = next;
        self.filemap_dirty_folio(pfn);
        self.folio_put(pfn);
        self.balance_dirty_pages();
        Ok(())
    }

    /// fsync(2) of a regular file: write back its dirty pages; the caller
    /// waits until returned time (None: nothing in flight).
    pub fn filemap_fsync(&mut self, inode: u32) -> Option<u64> {
        self.filemap_writeback(inode);
        self.inode_writeback_done_at(inode)
    }

    /// drop_caches' `invalidate_mapping_pages` over a regular file: clean,
    /// unmapped, idle folios leave the cache without a shadow; the others
    /// are deactivated (`deactivate_file_folio`); shadow entries are
    /// cleared (`clear_shadow_entry`).
    pub fn invalidate_mapping_pages(&mut self, inode: u32) {
        for index in 0..self.inodes[inode as usize].pages.len() as u64 {
            let slot = self.inodes[inode as usize].pages[index as usize];
            if slot & 3 == SLOT_SHADOW {
                self.inodes[inode as usize].pages[index as usize] = 0;
                continue;
            }
            let Some(pfn) = self.filemap_folio_at(inode, index) else {
                continue;
            };
            let f = *self.folios.get(pfn);
            // A large folio is seen once, at its first index.
            if f.test(PG_LOCKED) || f.index as u64 != index {
                continue;
            }
            self.charge_cost(Fn::User, self.costs.lru_move);
            if f.refcount == f.nr_pages() && f.mapcount == 0 && !f.test(PG_DIRTY | PG_WRITEBACK) {
                self.folios.get_mut(pfn).refcount += 1;
                self.filemap_remove_folio(pfn, 0);
                self.folio_put(pfn);
            } else {
                self.deactivate_file_folio(pfn);
            }
        }
    }

    /// `force_page_cache_ra` for MADV_WILLNEED on a file mapping.
    pub fn file_willneed(&mut self, vma: u32, first: u64, n: u64, memcg: u16) {
        let v = &self.vmas[vma as usize];
        let (inode, index) = (v.inode, v.pgoff + first);
        let mut ra = v.ra;
        self.force_page_cache_ra(inode, &mut ra, index, n, memcg);
        self.vmas[vma as usize].ra = ra;
    }

    /// The readahead hints of a VMA's flags.
    pub fn vma_ra_flags(&self, vma: u32) -> (bool, bool) {
        let f = self.vmas[vma as usize].flags;
        (f & VM_SEQ_READ != 0, f & VM_RAND_READ != 0)
    }
}

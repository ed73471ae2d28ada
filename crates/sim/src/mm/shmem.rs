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
use super::swapfile::{
    swp_offset, swp_type, SwpEntry, SWAP_COUNT_MASK, SWAP_HAS_CACHE, SWP_SYNCHRONOUS_IO,
};
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::vmstat::{Mc, Vm};

use super::filemap::{Inode, SLOT_FOLIO, SLOT_SWAP};
use super::mmap::{VM_HUGEPAGE, VM_NOHUGEPAGE};
use crate::vmstat::{mthp_item, MthpStat};
use mmsim_spec::{MthpShmem, ShmemEnabled, TmpfsHuge};

/// Where a shmem slot's swap value keeps the order of its large entry.
const SWAP_ORDER_SHIFT: u32 = 40;

/// A shmem slot's swap value: the slot's own entry and the order of the
/// entry it belongs to (the kernel's multi-index value entry).
fn shmem_swap_value(entry: SwpEntry, order: u8) -> u64 {
    (order as u64) << SWAP_ORDER_SHIFT | (entry as u64) << 2 | SLOT_SWAP
}

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

    /// The alignment, in pages, `shmem_get_unmapped_area` gives a
    /// mapping of `pages` pages of `inode` from page `pgoff` (0: none): the
    /// address agrees with the file offset modulo 2 MiB on a huge-capable
    /// mount (or under shmem_enabled force), for mappings of at least 2
    /// MiB that leave a whole aligned block. With `features.shmem_mthp`
    /// (6.12) shared anonymous memory is aligned to its largest enabled
    /// size instead.
    pub fn shmem_mapping_align(&self, inode: u32, pgoff: u64, pages: u64) -> u64 {
        if self.sysfs.shmem_enabled == Some(ShmemEnabled::Deny) || pages < HPAGE_PMD_NR {
            return 0;
        }
        let i = &self.inodes[inode as usize];
        let mut align = HPAGE_PMD_NR;
        if self.sysfs.shmem_enabled != Some(ShmemEnabled::Force) {
            let mut order = 0;
            if self.features.shmem_mthp && i.anon {
                let never = i.huge == TmpfsHuge::Never;
                order = (2..=9usize)
                    .rev()
                    .find(|&o| match self.sysfs.shmem_mthp[o - 2] {
                        MthpShmem::Never => false,
                        MthpShmem::Inherit => !never,
                        _ => true,
                    })
                    .unwrap_or(0);
                if order > 0 {
                    align = 1 << order;
                }
            }
            if i.huge == TmpfsHuge::Never && order == 0 {
                return 0;
            }
        }
        let offset = pgoff % align;
        if offset != 0 && offset + pages < 2 * align {
            return 0;
        }
        align
    }

    pub fn shmem_folio_at(&self, inode: u32, index: u64) -> Option<Pfn> {
        let v = self.inodes[inode as usize].pages[index as usize];
        (v & 3 == SLOT_FOLIO).then_some((v >> 2) as Pfn)
    }

    fn shmem_swap_at(&self, inode: u32, index: u64) -> Option<SwpEntry> {
        let v = self.inodes[inode as usize].pages[index as usize];
        (v & 3 == SLOT_SWAP).then_some((v >> 2) as SwpEntry)
    }

    /// The order of the swap entry at `index` (`xa_get_order`): above 0
    /// only for a large folio swapped out whole (`features.
    /// shmem_large_swapout`), whose 2^order slots hold consecutive entries.
    #[inline]
    fn shmem_swap_order(&self, inode: u32, index: u64) -> u8 {
        (self.inodes[inode as usize].pages[index as usize] >> SWAP_ORDER_SHIFT) as u8
    }

    /// `shmem_split_large_entry` (6.13): the large swap entry holding
    /// `index` becomes order-0 entries, so that the swap-cache path can
    /// bring its pages back one at a time.
    #[inline]
    fn shmem_split_large_entry(&mut self, inode: u32, index: u64) {
        let order = self.shmem_swap_order(inode, index);
        if order == 0 {
            return;
        }
        let nr = 1u64 << order;
        let first = index & !(nr - 1);
        // xas_split_alloc's nodes and the split itself.
        self.charge_cost(Fn::ShmemFault, self.costs.split_tail * nr);
        let range = first as usize..(first + nr) as usize;
        for slot in &mut self.inodes[inode as usize].pages[range] {
            *slot &= (1 << SWAP_ORDER_SHIFT) - 1;
        }
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
        self.inodes[inode as usize].pages[range].fill((pfn as u64) << 2 | SLOT_FOLIO);
        self.shmem_stat(memcg, order, 1);
    }

    /// The file, shmem and shmem-THP gauges for a folio of `order`
    /// entering (`sign` 1) or leaving (-1) a shmem page cache.
    #[inline]
    fn shmem_stat(&mut self, memcg: u16, order: u8, sign: i64) {
        let nr = sign << order;
        self.mod_node_page_state(Vm::NrFilePages, nr);
        self.mod_node_page_state(Vm::NrShmem, nr);
        self.memcg_stat(memcg, Mc::File, nr);
        self.memcg_stat(memcg, Mc::Shmem, nr);
        if order == 9 {
            self.mod_node_page_state(Vm::NrShmemHugepages, sign);
            self.memcg_stat(memcg, Mc::ShmemThp, nr);
        }
    }

    /// `shmem_delete_from_page_cache` / the page-cache half of
    /// `__filemap_remove_folio`: the folio's slots take its swap entries
    /// (one per page, from `swap`) or become holes; the cache drops its
    /// references.
    fn shmem_delete_from_page_cache(&mut self, pfn: Pfn, swap: Option<SwpEntry>) {
        let f = self.folios.get_mut(pfn);
        let (inode, index, memcg, order, nr) = (f.mapping, f.index, f.memcg, f.order, f.nr_pages());
        f.clear(PG_PAGECACHE);
        let range = index as usize..index as usize + nr as usize;
        let slots = &mut self.inodes[inode as usize].pages[range];
        match swap {
            None => slots.fill(0),
            Some(e) => {
                for (i, slot) in slots.iter_mut().enumerate() {
                    *slot = shmem_swap_value(e + i as u32, order);
                }
            }
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
        self.charge_cost(Fn::ShmemFault, self.costs.pagecache_lookup);
        if let Some(pfn) = self.shmem_folio_at(inode, index) {
            self.folios.get_mut(pfn).refcount += 1;
            return Ok(pfn);
        }
        if let Some(entry) = self.shmem_swap_at(inode, index) {
            return self.shmem_swapin_folio(inode, index, entry, memcg);
        }
        let orders = self.shmem_huge_orders(vma, inode, index);
        if orders != 0 {
            // 6.12 charges a large folio with the THP gfp, which at the
            // default defrag (madvise) may reclaim only for a
            // MADV_HUGEPAGE VMA; 6.1 charged with the mapping's gfp.
            let may_reclaim = !self.release.shmem_large_charge_thp_gfp
                || vma.is_some_and(|v| self.vmas[v as usize].flags & VM_HUGEPAGE != 0);
            if let Some(pfn) = self.shmem_alloc_large(inode, index, memcg, orders, may_reclaim) {
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
        self.charge_mem(Fn::ShmemFault, self.costs.clear_page, PAGE_BYTES);
        self.l2_write(pfn, 1);
        self.folios.get_mut(pfn).set(PG_SWAPBACKED | PG_UPTODATE);
        self.folios.version[pfn as usize] = 0;
        self.shmem_add_to_page_cache(pfn, inode, index);
        self.folio_add_lru(pfn);
        Ok(pfn)
    }

    /// The orders above 0 a hole at `index` may be allocated at, as a
    /// bit mask, after the checks that need no allocation. 6.1: PMD size
    /// where `shmem_is_huge` says so, if no slot of the 2 MiB block is
    /// present (`shmem_alloc_hugefolio`'s quiet refusal). With
    /// `features.shmem_mthp` (6.11–6.13): `shmem_allowable_huge_orders`
    /// (tmpfs still PMD only; shared anonymous memory by the per-size
    /// knobs) and `shmem_suitable_orders` (the VMA's alignment, then the
    /// orders up to the highest whose aligned range is empty).
    fn shmem_huge_orders(&self, vma: Option<u32>, inode: u32, index: u64) -> u16 {
        let pages = &self.inodes[inode as usize].pages;
        let empty = |order: u32| {
            let nr = 1u64 << order;
            let first = index & !(nr - 1);
            // The spec refuses huge-capable shmem whose size is not a
            // whole number of 2 MiB (lib.rs): the range is inside.
            pages
                .get(first as usize..(first + nr) as usize)
                .is_some_and(|r| r.iter().all(|&v| v == 0))
        };
        if !self.features.shmem_mthp {
            let huge = self.shmem_is_huge(vma, inode, index) && empty(9);
            return if huge { 1 << 9 } else { 0 };
        }
        let mut mask = self.shmem_allowable_huge_orders(vma, inode, index);
        if let Some(v) = vma {
            mask &= self.thp_vma_suitable_orders(v, index);
        }
        for order in (2..=9).rev() {
            if mask & 1 << order != 0 && empty(order) {
                return mask & ((2 << order) - 1);
            }
        }
        0
    }

    /// 6.12's `shmem_allowable_huge_orders` (with `features.shmem_mthp`).
    fn shmem_allowable_huge_orders(&self, vma: Option<u32>, inode: u32, index: u64) -> u16 {
        let vm_flags = vma.map_or(0, |v| self.vmas[v as usize].flags);
        if vm_flags & VM_NOHUGEPAGE != 0 {
            return 0;
        }
        let global = self.shmem_is_huge(vma, inode, index);
        let i = &self.inodes[inode as usize];
        if vma.is_none() || !i.anon {
            // tmpfs gets PMD size only.
            return if global { 1 << 9 } else { 0 };
        }
        let knobs = &self.sysfs.shmem_mthp;
        let orders = |want: MthpShmem| -> u16 {
            (2..=9u16)
                .filter(|&o| knobs[o as usize - 2] == want)
                .fold(0, |m, o| m | 1 << o)
        };
        match self.sysfs.shmem_enabled {
            Some(ShmemEnabled::Deny) => return 0,
            Some(ShmemEnabled::Force) => return orders(MthpShmem::Inherit),
            _ => {}
        }
        let mut mask = orders(MthpShmem::Always);
        // Sizes that lie wholly within i_size. (6.12 rounds the index up
        // by the order rather than by its size, a slip later fixed; the
        // intended rule is used.)
        let within = orders(MthpShmem::WithinSize);
        if let Some(o) = (2..=9u32).rev().find(|&o| {
            within & 1 << o != 0 && (index + 1).next_multiple_of(1 << o) <= i.pages.len() as u64
        }) {
            let _ = o;
            mask |= within;
        }
        if vm_flags & VM_HUGEPAGE != 0 {
            mask |= orders(MthpShmem::Advise);
        }
        if global {
            mask |= orders(MthpShmem::Inherit);
        }
        mask
    }

    /// `thp_vma_suitable_orders` for page-cache `index` in `vma`: the
    /// orders whose aligned block lies inside the VMA, with the VMA's
    /// address and file offset agreeing modulo the block.
    fn thp_vma_suitable_orders(&self, vma: u32, index: u64) -> u16 {
        let v = &self.vmas[vma as usize];
        let va = v.start_vpn + (index - v.pgoff);
        (2..=9u32)
            .filter(|&o| {
                let nr = 1u64 << o;
                let haddr = va & !(nr - 1);
                v.start_vpn.wrapping_sub(v.pgoff).is_multiple_of(nr)
                    && haddr >= v.start_vpn
                    && haddr + nr <= v.start_vpn + v.pages
            })
            .fold(0, |m, o| m | 1 << o)
    }

    /// The large attempts of `shmem_get_folio_gfp` for a hole at `index`
    /// (6.1's PMD-size one, or 6.12's `shmem_alloc_and_add_folio` over
    /// `orders`, highest first): an order the buddy lists cannot give
    /// (the THP gfp, with `defrag` at its default, neither reclaims nor
    /// compacts: the low watermark decides) counts its fallback —
    /// `thp_file_fallback` at PMD size, `shmem_fallback` per size — and
    /// the next order is tried; a memcg that refuses the folio (a charge
    /// above order 3 gives up after its reclaim retries without the OOM
    /// killer) counts the charge fallbacks and ends the attempt: the
    /// caller takes order 0. Then every page is cleared and the folio
    /// enters the cache and the LRU whole.
    fn shmem_alloc_large(
        &mut self,
        inode: u32,
        index: u64,
        memcg: u16,
        orders: u16,
        may_reclaim: bool,
    ) -> Option<Pfn> {
        for order in (2..=9u8).rev().filter(|&o| orders & 1 << o != 0) {
            let nr = 1u64 << order;
            let Some(pfn) = self.alloc_large_folio(order as usize) else {
                self.count_shmem_fallback(order, false);
                continue;
            };
            self.folios.get_mut(pfn).memcg = memcg;
            let charged = if may_reclaim {
                self.try_charge(memcg, nr)
            } else {
                self.try_charge_nowait(memcg, nr)
            };
            if charged != super::memcontrol::Charge::Ok {
                self.count_shmem_fallback(order, true);
                self.free_folio_pages(pfn);
                return None;
            }
            self.charge_mem(Fn::ShmemFault, self.costs.clear_page * nr, PAGE_BYTES * nr);
            self.l2_write(pfn, nr as u32);
            self.folios.get_mut(pfn).set(PG_SWAPBACKED | PG_UPTODATE);
            self.folios.version[pfn as usize..(pfn as u64 + nr) as usize].fill(0);
            self.shmem_add_to_page_cache(pfn, inode, index & !(nr - 1));
            if order == 9 {
                self.vm.inc(Vm::ThpFileAlloc);
            }
            if self.features.shmem_mthp {
                self.vm.inc(mthp_item(order, MthpStat::ShmemAlloc));
            }
            self.folio_add_lru(pfn);
            return Some(pfn);
        }
        None
    }

    /// A large shmem allocation that fell back: `thp_file_fallback` (and
    /// `_charge`) at PMD size; the per-size stats under 6.12's knobs.
    fn count_shmem_fallback(&mut self, order: u8, charge: bool) {
        if order == 9 {
            self.vm.inc(Vm::ThpFileFallback);
            if charge {
                self.vm.inc(Vm::ThpFileFallbackCharge);
            }
        }
        if self.features.shmem_mthp {
            self.vm.inc(mthp_item(order, MthpStat::ShmemFallback));
            if charge {
                self.vm.inc(mthp_item(order, MthpStat::ShmemFallbackCharge));
            }
        }
    }

    /// `shmem_swapin_folio`: from the swap cache, or on a miss (a major
    /// fault) read past the swap cache (seed 001, below), or with cluster
    /// readahead through it; a read in flight makes the fault wait. Then
    /// the folio replaces the swap entries in the mapping, leaves the swap
    /// cache dirty, and the slots are freed. A large entry is split to
    /// order 0 for the swap-cache path (6.13; 6.1 has none).
    fn shmem_swapin_folio(
        &mut self,
        inode: u32,
        index: u64,
        entry: SwpEntry,
        memcg: u16,
    ) -> Result<Pfn, FaultError> {
        let order = self.shmem_swap_order(inode, index);
        let pfn = match self.lookup_swap_cache(entry, None) {
            Some(p) => {
                // 058313515d5a: a cached folio smaller than the entry (a
                // readahead's) splits the entry.
                if self.folios.get(p).order < order {
                    self.shmem_split_large_entry(inode, index);
                }
                p
            }
            None => {
                self.vm.inc(Vm::Pgmajfault);
                self.memcg_stat(memcg, Mc::Pgmajfault, 1);
                if let Some(r) = self.shmem_swapin_skip_swapcache(inode, index, entry, order, memcg)
                {
                    return r;
                }
                self.shmem_split_large_entry(inode, index);
                // 7.3's shmem_swap_alloc_folio falls back to order 0 on
                // the same synchronous path (no readahead) when the large
                // folio or its charge is not there.
                if order > 0 && self.release.shmem_swapin_sync_fallback {
                    if let Some(r) = self.shmem_swapin_skip_swapcache(inode, index, entry, 0, memcg)
                    {
                        return r;
                    }
                }
                self.shmem_swapin_cluster(entry, memcg)
                    .ok_or(FaultError::Oom)?
            }
        };
        if let Some(done) = self.folio_lock_and_writeback_done_at(pfn) {
            // folio_lock sleeps until a read completes, folio_wait_writeback
            // until a write does; the fault then goes on (no retry: it does
            // not count again).
            self.psi_folio_wait(pfn);
            self.folio_put(pfn);
            return Err(FaultError::Wait(done));
        }
        let nr = self.folios.get(pfn).nr_pages() as u64;
        self.charge_cost(
            Fn::ShmemFault,
            self.costs.swap_slot + self.costs.shmem_swapin * nr,
        );
        self.shmem_swapin_from_cache(pfn, inode, index, entry);
        Ok(pfn)
    }

    /// The end of a swap-in through the swap cache: into the page cache
    /// first (at the folio's first index), then out of the swap cache
    /// (whose references that drops), dirty, and every slot freed
    /// (`swap_free_nr`), as `shmem_swapin_folio` orders them.
    fn shmem_swapin_from_cache(&mut self, pfn: Pfn, inode: u32, index: u64, entry: SwpEntry) {
        let f = *self.folios.get(pfn);
        let first = f.swap;
        let first_index = index - (entry - first) as u64;
        self.shmem_add_to_page_cache(pfn, inode, first_index);
        self.delete_from_swap_cache(pfn);
        self.folios.get_mut(pfn).set(PG_DIRTY);
        self.swap_free_nr(first, f.nr_pages());
    }

    /// Seed 001 (`features.shmem_skip_swapcache`; merged in 6.14): on a
    /// SWP_SYNCHRONOUS_IO device (zram) `shmem_swap_alloc_folio` allocates
    /// a folio of the entry's order itself, claims the slots with
    /// `swapcache_prepare` (SWAP_HAS_CACHE as a lock), reads them
    /// synchronously without entering the swap cache and with no
    /// readahead, puts the folio in the page cache whole, then clears the
    /// claim (`swapcache_clear`) and frees the slots. None: not taken — the
    /// feature is off, the device is not synchronous, a page of a large
    /// entry is in the swap cache already (6.16's `non_swapcache_batch`
    /// fallback, which 6.14 lacked: there it failed with -EEXIST for
    /// ever), or the folio or its charge is not there (-ENOMEM) — and the
    /// caller goes the split-and-readahead way (also for a large entry once
    /// zswap was enabled). Userfaultfd, the patch's other order-0
    /// fallback, is not modelled.
    #[inline]
    fn shmem_swapin_skip_swapcache(
        &mut self,
        inode: u32,
        index: u64,
        entry: SwpEntry,
        order: u8,
        memcg: u16,
    ) -> Option<Result<Pfn, FaultError>> {
        let ty = swp_type(entry);
        if !self.features.shmem_skip_swapcache || self.swap[ty].flags & SWP_SYNCHRONOUS_IO == 0 {
            return None;
        }
        // Simplification: once zswap was enabled the kernel reads an
        // order-0 folio here (`!zswap_never_enabled()`), splitting a large
        // entry; mmsim takes the split-and-readahead way instead, which
        // reads it through the swap cache.
        if order > 0 && self.zswap_ever_enabled() {
            return None;
        }
        let nr = 1u32 << order;
        let first_index = index & !(nr as u64 - 1);
        let first = entry - (index - first_index) as u32;
        let off = swp_offset(first) as usize;
        if (0..nr as usize).any(|i| self.swap[ty].swap_map[off + i] & SWAP_HAS_CACHE != 0) {
            return None;
        }
        let memcg = self.swapin_memcg(first, memcg);
        let pfn = if order == 0 {
            self.alloc_page(Gfp::HighUserMovable)
        } else {
            // vma_thp_gfp_mask: no reclaim under defrag's default.
            self.alloc_large_folio(order as usize)
        }?;
        self.folios.get_mut(pfn).memcg = memcg;
        // 7.3 charges a large folio with the THP gfp: no reclaim.
        let charged = if order > 0 && self.release.shmem_swapin_sync_fallback {
            self.try_charge_nowait(memcg, nr as u64)
        } else {
            self.try_charge(memcg, nr as u64)
        };
        if charged != super::memcontrol::Charge::Ok {
            self.free_folio_pages(pfn);
            return None;
        }
        self.charge_cost(
            Fn::ShmemFault,
            self.costs.swap_slot + self.costs.shmem_swapin * nr as u64,
        );
        // swapcache_prepare over the range: nobody can hold a slot here (a
        // fault runs start to end in mmsim, and the check above).
        self.lock_cluster_or_swap_info(first);
        for i in 0..nr as usize {
            let m = &mut self.swap[ty].swap_map[off + i];
            debug_assert!(*m & SWAP_COUNT_MASK != 0);
            *m |= SWAP_HAS_CACHE;
        }
        self.folios.get_mut(pfn).set(PG_SWAPBACKED | PG_UPTODATE);
        if let Some(shadow) = self.get_shadow_from_swap_cache(first) {
            self.workingset_refault(pfn, shadow);
        }
        self.folio_add_lru(pfn);
        // swap_read_folio: a SWP_SYNCHRONOUS_IO device reads at once.
        self.swap_readpage(pfn, first);
        self.shmem_add_to_page_cache(pfn, inode, first_index);
        self.folios.get_mut(pfn).set(PG_DIRTY);
        // swapcache_clear, then swap_free_nr: the shmem entry still holds
        // each slot, so the first frees none.
        self.put_swap_folio_nr(first, nr);
        self.swap_free_nr(first, nr);
        Some(Ok(pfn))
    }

    /// A fault on page `idx` of shmem VMA `vma` whose PTE is empty: fault
    /// around first on a read (the page may already be cached), then
    /// `shmem_fault`, and `finish_fault`: a PMD for a PMD-size folio where
    /// the VMA allows one and the block has no PTE table, else one PTE
    /// (writable: shmem mappings need no write notification). A write
    /// dirties the folio (`fault_dirty_shared_page`).
    pub fn do_shmem_fault(&mut self, vma: u32, idx: usize, write: bool) -> Result<(), FaultError> {
        let r = self.do_shmem_fault_locked(vma, idx, write);
        self.free_prealloc_pte();
        r
    }

    fn do_shmem_fault_locked(
        &mut self,
        vma: u32,
        idx: usize,
        write: bool,
    ) -> Result<(), FaultError> {
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
        // shmem has no page_mkwrite: 5.10 retries only a fault that
        // dirtied the folio (a swapped-in one is dirty already).
        let dirtied = write && !self.folios.get(head).test(PG_DIRTY);
        if write {
            self.folios.get_mut(head).set(PG_DIRTY);
            // do_shared_fault's own work: finish_fault, the folio
            // dirtied, file_update_time (measured as a whole).
            self.charge_cost(Fn::DoFault, self.costs.shmem_shared_fault);
        }
        if self.pmd_none(vma, idx) && self.do_set_pmd(vma, idx, head, write) {
            self.fault_dirty_shared_retry(vma, dirtied);
            return Ok(());
        }
        if self.pte_alloc(vma, idx).is_err() {
            self.folio_put(head);
            return Err(FaultError::Oom);
        }
        if self.shmem_thp_possible {
            // finish_fault's PTE table lock, which handle_mm_fault did not
            // take for a fault that might have mapped a PMD (an empty
            // hold, as every PTE-level fault's).
            self.pte_lock_empty(vma, idx, Fn::DoFault);
        }
        if !self.map_shmem_folio_ptes(vma, idx, head, write) {
            self.do_set_pte(vma, idx, head, write);
        }
        self.fault_dirty_shared_retry(vma, dirtied);
        Ok(())
    }

    /// 6.11's `finish_fault` for shared anonymous memory (with
    /// `features.shmem_mthp`): a large folio whose pages all fall inside
    /// the VMA and the fault's page table, none of them mapped, gets all
    /// its PTEs in this one fault (`set_pte_range`, one rmap call for the
    /// batch). False: the caller maps one PTE (tmpfs always does; so do
    /// later kernels when a PTE of the range is taken, where 6.11 would
    /// return and refault).
    #[inline]
    fn map_shmem_folio_ptes(&mut self, vma: u32, idx: usize, head: Pfn, write: bool) -> bool {
        if !self.features.shmem_mthp || self.folios.get(head).order == 0 {
            return false;
        }
        let f = *self.folios.get(head);
        let v = &self.vmas[vma as usize];
        if !self.inodes[v.inode as usize].anon {
            return false;
        }
        let nr = f.nr_pages() as usize;
        let in_folio = (v.pgoff + idx as u64 - f.index as u64) as usize;
        let pte_off = ((v.start_vpn + idx as u64) % HPAGE_PMD_NR) as usize;
        if idx < in_folio
            || idx - in_folio + nr > v.pages as usize
            || pte_off < in_folio
            || pte_off - in_folio + nr > HPAGE_PMD_NR as usize
        {
            return false;
        }
        let first = idx - in_folio;
        if !v.ptes[first..first + nr].iter().all(|&p| pte_none(p)) {
            return false;
        }
        self.charge_cost(
            Fn::AddFileRmap,
            (self.costs.mapcount + self.costs.pte) * nr as u64 + self.costs.rmap_stat,
        );
        self.folio_add_file_rmap_pages(head, nr as u32);
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_shmem += nr as u64;
        // The caller's reference is the first PTE's; one more per page.
        self.folios.get_mut(head).refcount += nr as u32 - 1;
        let dirty = if write { PTE_DIRTY } else { 0 };
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + nr];
        for (i, pte) in ptes.iter_mut().enumerate() {
            *pte = mk_pte(head + i as u32, PTE_WRITE | PTE_YOUNG | dirty);
        }
        true
    }

    /// `page_remove_rmap` for a shmem page.
    pub fn page_remove_file_rmap(&mut self, page: Pfn) {
        self.charge_cost(Fn::RemoveRmap, self.costs.mapcount);
        self.write_mapped_page_lines(page, Fn::RemoveRmap);
        debug_assert!(self.folios.page_mapcount(page) > 0);
        if self.folios.page_mapcount_add(page, -1) == 0 {
            // NR_FILE_MAPPED counts pages, whatever their folio's size.
            self.charge_cost(Fn::ModLruvecState, self.costs.rmap_stat);
            let memcg = self.folios.get(self.folios.head_of(page)).memcg;
            self.mod_node_page_state(Vm::NrMapped, -1);
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
            self.charge_cost(Fn::FolioRemoveRmapRange, self.costs.mapcount);
            memcg = self.folios.get(self.folios.head_of(page)).memcg;
            if self.folios.page_mapcount_add(page, -1) == 0 {
                unmapped += 1;
            }
        }
        if unmapped > 0 {
            self.charge_cost(Fn::ModLruvecState, self.costs.rmap_stat);
            self.mod_node_page_state(Vm::NrMapped, -unmapped);
            self.memcg_stat(memcg, Mc::FileMapped, -unmapped);
        }
    }

    /// The rmap of `nr` pages of folio `head` from its first, mapped in one
    /// call (a PMD's compound `page_add_file_rmap`, or 6.11's
    /// `folio_add_file_rmap_ptes`): every page's mapcount rises, and
    /// NR_FILE_MAPPED counts the pages newly mapped, in one update.
    pub fn folio_add_file_rmap_pages(&mut self, head: Pfn, nr: u32) {
        let mut newly = 0;
        for i in 0..nr {
            if self.folios.page_mapcount_add(head + i, 1) == 1 {
                newly += 1;
            }
        }
        let memcg = self.folios.get(head).memcg;
        self.mod_node_page_state(Vm::NrMapped, newly);
        self.memcg_stat(memcg, Mc::FileMapped, newly);
    }

    /// `page_add_file_rmap` for one PTE of a page-cache page (shmem or a
    /// regular file; a page of a large folio counts on its own).
    pub fn page_add_file_rmap(&mut self, page: Pfn) {
        self.write_mapped_page_lines(page, Fn::AddFileRmap);
        if self.folios.page_mapcount_add(page, 1) == 1 {
            let memcg = self.folios.get(self.folios.head_of(page)).memcg;
            self.mod_node_page_state(Vm::NrMapped, 1);
            self.memcg_stat(memcg, Mc::FileMapped, 1);
        }
    }

    /// `shmem_writepage` for a clean-of-mappings, dirty shmem folio in
    /// reclaim: a swap slot owned by the inode, the folio moved from the
    /// page cache to the swap cache, then the write. False: no swap
    /// space (the folio stays, redirtied, and is activated).
    /// A large folio (`features.shmem_large_swapout`, 6.12) goes out
    /// whole under a large swap entry when an aligned run of slots is
    /// free; otherwise it is split (its tails join reclaim's `list`) and
    /// its first page goes out alone.
    pub fn shmem_writepage(&mut self, pfn: Pfn, list: &mut Vec<Pfn>) -> bool {
        let f = *self.folios.get(pfn);
        let entry = if f.order > 0 {
            match self.folio_alloc_swap_order(f.memcg, f.order) {
                Some(e) => Some(e),
                None => {
                    // try_split: the folio's pages stay dirty.
                    self.folios.get_mut(pfn).set(PG_DIRTY);
                    if !self.split_huge_page(pfn, Some(list)) {
                        return false;
                    }
                    self.folios.get_mut(pfn).clear(PG_DIRTY);
                    None
                }
            }
        } else {
            None
        };
        let entry = match entry {
            Some(e) => e,
            None => match self.folio_alloc_swap(f.memcg) {
                Some(e) => e,
                None => return false,
            },
        };
        self.charge_cost(Fn::AddToSwap, self.costs.swap_slot);
        let _ = self.add_to_swap_cache(pfn, entry);
        // swap_shmem_alloc: the inode's entries are the slots' references.
        self.swap_duplicate_nr(entry, self.folios.get(pfn).nr_pages());
        self.shmem_delete_from_page_cache(pfn, Some(entry));
        // AOP_WRITEPAGE_ACTIVATE from swap_writepage passes up.
        self.swap_writepage(pfn)
    }

    /// Reclaim drops a clean shmem folio from its page cache (it was never
    /// written: the hole reads as zeros again). Returns true if freed.
    pub fn shmem_remove_clean(&mut self, pfn: Pfn) -> bool {
        let f = *self.folios.get(pfn);
        // Only the isolation's and the cache's references.
        if f.refcount != 1 + f.nr_pages() || f.test(PG_DIRTY) {
            return false;
        }
        self.shmem_delete_from_page_cache(pfn, None);
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
                self.shmem_delete_from_page_cache(pfn, None);
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
                if swp_type(entry) != ty {
                    continue;
                }
                self.charge_cost(Fn::TryToUnuse, self.costs.pte);
                if self.swap_folio_of(entry).is_none() {
                    // Reads order 0 below: the large entry is split first.
                    self.shmem_split_large_entry(inode, index);
                }
                let memcg = self.swap[ty].cgroup[swp_offset(entry) as usize];
                let pfn = match self.lookup_swap_cache(entry, None) {
                    Some(p) => p,
                    None => match self.shmem_swapin_cluster(entry, memcg) {
                        Some(p) => p,
                        None => return false,
                    },
                };
                self.wait_on_folio_io(pfn);
                self.shmem_swapin_from_cache(pfn, inode, index, entry);
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
        self.charge_cost(Fn::ShmemFault, self.costs.pagecache_lookup);
        let pfn = if let Some(p) = self.shmem_folio_at(inode, index) {
            self.write_page_line(p, Fn::ShmemFault);
            self.folios.get_mut(p).refcount += 1;
            p
        } else if let Some(entry) = self.shmem_swap_at(inode, index) {
            self.shmem_swapin_folio_sgp(inode, index, entry, memcg, false)?
        } else {
            // A hole: iov_iter_zero clears the user buffer, in cache
            // (membw.rs): no DRAM bytes.
            self.charge_cost(Fn::User, self.costs.clear_page);
            self.check_read(0, self.inodes[inode as usize].user_version[index as usize]);
            return Ok(());
        };
        self.folio_mark_accessed(pfn);
        let page = self.folios.folio_page(pfn, index);
        let (copy, bytes) = self.copy_page_cost(page);
        self.charge_mem(Fn::User, copy, bytes);
        self.guest_frame(page, false);
        let found = self.folios.version[page as usize];
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
        self.charge_cost(Fn::ShmemFault, self.costs.pagecache_lookup);
        let pfn = if let Some(p) = self.shmem_folio_at(inode, index) {
            self.write_page_line(p, Fn::ShmemFault);
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
        self.charge_mem(Fn::User, self.costs.copy_page, PAGE_BYTES);
        self.charge_cost(Fn::FilemapWrite, self.costs.shmem_write);
        let next = self.inodes[inode as usize].user_version[index as usize]
            .wrapping_add(1)
            .max(1);
        self.inodes[inode as usize].user_version[index as usize] = next;
        let page = self.folios.folio_page(pfn, index);
        self.guest_frame(page, true);
        self.l2_write(page, 1);
        self.folios.version[page as usize] = next;
        self.folios.get_mut(pfn).set(PG_DIRTY);
        self.folio_put(pfn);
        Ok(())
    }

    fn check_read(&mut self, found: u32, expected: u32) {
        self.integrity.pages_checked += 1;
        if found != expected && !self.contents.reads_as(found, expected) {
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
                self.charge_cost(Fn::User, self.costs.lru_move);
                if f.refcount == f.nr_pages() && !f.test(PG_DIRTY | PG_WRITEBACK) {
                    self.folios.get_mut(pfn).refcount += 1;
                    self.shmem_delete_from_page_cache(pfn, None);
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

//! Anonymous multi-size THP (mTHP) as Linux 6.12 has it
//! (`features.anon_mthp`): private anonymous folios of orders 2 to 8
//! (16 KiB to 1 MiB) allocated whole at a write fault and mapped by PTEs
//! (`alloc_anon_folio` in mm/memory.c), under the per-size
//! `hugepages-<size>kB/enabled` knobs.
//!
//! Such a folio lives on through the paths large anonymous folios share
//! with a PTE-mapped THP: rmap and mapcounts per page, the deferred split
//! queue once part of it is unmapped, a split under reclaim or
//! MADV_PAGEOUT, swap-out whole (`features.anon_mthp_swapout`) and, from
//! zram, swap-in whole (`features.anon_large_swapin`).

use super::folio::*;
use super::huge_anon::{PG_DEFERRED_SPLIT, PG_PARTIALLY_MAPPED};
use super::mmap::{VM_HUGEPAGE, VM_NOHUGEPAGE, VM_WRITE};
use super::pgtable::*;
use super::swapfile::{swp_offset, swp_type, SwpEntry, SWAP_HAS_CACHE};
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::vmstat::{mthp_item, Mc, MthpStat, Vm};
use mmsim_spec::{MthpAnon, Sysfs, ThpEnabled};

/// The per-size knobs as order masks (bit n: order n), orders 2 to 8
/// (`huge_anon_orders_always`, `_madvise`, `_inherit`).
#[derive(Debug, Clone, Copy, Default)]
pub struct MthpOrders {
    pub always: u16,
    pub madvise: u16,
    pub inherit: u16,
}

impl MthpOrders {
    /// The masks the spec's knobs give, or none without
    /// `features.anon_mthp`. PMD size (order 9) stays with the 6.1 THP
    /// path and is left out.
    pub fn new(sysfs: &Sysfs, anon_mthp: bool) -> Self {
        let mut m = MthpOrders::default();
        if !anon_mthp {
            return m;
        }
        for order in 2..=8 {
            let bit = 1 << order;
            match sysfs.anon_mthp[order - 2] {
                MthpAnon::Always => m.always |= bit,
                MthpAnon::Madvise => m.madvise |= bit,
                MthpAnon::Inherit => m.inherit |= bit,
                MthpAnon::Never => {}
            }
        }
        m
    }

    /// Whether any order may ever be allocated.
    pub fn any(&self) -> bool {
        self.always | self.madvise | self.inherit != 0
    }
}

/// 6.12's `zap_present_ptes` over consecutive PTEs mapping consecutive
/// pages of one large anonymous folio (`folio_pte_batch`): their rmap goes
/// in one `folio_remove_rmap_ptes`, so a folio zapped whole is never
/// counted as partially mapped, and their references at the end.
#[derive(Debug, Clone, Copy)]
pub struct ZapAnonBatch {
    head: Pfn,
    /// The page the next PTE must map to continue the batch.
    next: Pfn,
    /// Pages whose last mapping went, and PTEs zapped.
    last: u32,
    nr: u32,
}

/// The highest order in `orders`.
fn highest_order(orders: u16) -> u8 {
    15 - orders.leading_zeros() as u8
}

impl Kernel {
    /// `thp_vma_allowable_orders(vma, TVA_IN_PF | TVA_ENFORCE_SYSFS,
    /// BIT(PMD_ORDER) - 1)` (none in a file VMA), then
    /// `thp_vma_suitable_orders`: the orders whose aligned block holding
    /// page `idx` lies inside the VMA.
    fn anon_mthp_orders(&self, vma: u32, idx: usize) -> u16 {
        let v = &self.vmas[vma as usize];
        if v.inode != NIL {
            // Not vma_is_anonymous: a MAP_PRIVATE file mapping's copied
            // pages are anonymous, but 6.12's __thp_vma_allowable_orders
            // gives a file VMA orders in the fault path only if its
            // vm_ops has huge_fault (vma_can_map_huge_file: DAX), which a
            // regular ext2/ext4/xfs file has not. So the swap-in of its
            // copies (alloc_swap_folio) reads order-0 folios only.
            return 0;
        }
        let mut orders = self.anon_mthp_allowed(vma);
        let vpn = v.start_vpn + idx as u64;
        while orders != 0 {
            let order = highest_order(orders);
            let start = vpn & !((1u64 << order) - 1);
            if start >= v.start_vpn && start + (1 << order) <= v.start_vpn + v.pages {
                break;
            }
            orders &= !(1 << order);
        }
        orders
    }

    /// The sizes the knobs allow in `vma` (`thp_vma_allowable_orders`'
    /// masks): per-size `always`, `madvise` with MADV_HUGEPAGE, and
    /// `inherit` where the top-level knob allows; none under
    /// MADV_NOHUGEPAGE.
    pub(super) fn anon_mthp_allowed(&self, vma: u32) -> u16 {
        let m = self.thp.mthp;
        let flags = self.vmas[vma as usize].flags;
        if flags & VM_NOHUGEPAGE != 0 {
            return 0;
        }
        let advised = flags & VM_HUGEPAGE != 0;
        let global = match self.thp.enabled {
            ThpEnabled::Always => true,
            ThpEnabled::Madvise => advised,
            ThpEnabled::Never => false,
        };
        m.always | if advised { m.madvise } else { 0 } | if global { m.inherit } else { 0 }
    }

    /// `alloc_anon_folio` for a write fault on the empty PTE of page `idx`:
    /// the highest allowed order whose aligned range of PTEs is all empty,
    /// allocated (at the low watermark: reclaim and compaction for it are
    /// not modelled, as for the PMD fault) and charged, trying lower
    /// orders on failure. Maps the folio and returns true; false leaves
    /// the fault to the order-0 path.
    pub fn do_anonymous_page_mthp(&mut self, vma: u32, idx: usize) -> bool {
        let mut orders = self.anon_mthp_orders(vma, idx);
        let v = &self.vmas[vma as usize];
        let vpn = v.start_vpn + idx as u64;
        // The first order whose range has no PTE yet (pte_range_none).
        while orders != 0 {
            let order = highest_order(orders);
            let first = (vpn & !((1u64 << order) - 1)) - v.start_vpn;
            let range = &v.ptes[first as usize..(first + (1 << order)) as usize];
            if range.iter().all(|&p| pte_none(p)) {
                break;
            }
            orders &= !(1 << order);
        }
        let memcg = self.mms[v.mm as usize].memcg;
        let mode = self.thp.charge_mode(v.flags);
        while orders != 0 {
            let order = highest_order(orders);
            orders &= !(1 << order);
            let Some(head) = self.alloc_large_folio(order as usize) else {
                self.vm.inc(mthp_item(order, MthpStat::AnonFaultFallback));
                continue;
            };
            let nr = 1u64 << order;
            self.folios.get_mut(head).memcg = memcg;
            let charged = self.try_charge_thp(memcg, nr, mode);
            if charged != super::memcontrol::Charge::Ok {
                self.free_folio_pages(head);
                self.vm
                    .inc(mthp_item(order, MthpStat::AnonFaultFallbackCharge));
                self.vm.inc(mthp_item(order, MthpStat::AnonFaultFallback));
                continue;
            }
            let first = ((vpn & !(nr - 1)) - self.vmas[vma as usize].start_vpn) as usize;
            self.map_new_anon_mthp(vma, first, head, order);
            return true;
        }
        false
    }

    /// `folio_add_new_anon_rmap(RMAP_EXCLUSIVE)` of a new large folio
    /// mapped by PTEs from page `first` of `vma`: every page mapped once and
    /// AnonExclusive, one reference per page, NR_ANON_MAPPED and the
    /// per-size `nr_anon` up.
    pub(super) fn folio_add_new_anon_rmap_ptes(&mut self, head: Pfn, vma: u32, first: usize) {
        let f = *self.folios.get(head);
        let (nr, order) = (f.nr_pages(), f.order);
        self.folios.get_mut(head).set(PG_ANON);
        self.charge_cost(
            Fn::AddRmap,
            self.costs.rmap() + self.costs.mapcount * nr as u64,
        );
        for i in 0..nr {
            self.folios.page_mapcount_add(head + i, 1);
            self.folios.get_mut(head + i).set(PG_ANON_EXCLUSIVE);
        }
        let v = &self.vmas[vma as usize];
        let (av, index, mm) = (v.anon_vma, (v.pgoff + first as u64) as u32, v.mm);
        self.mm_id_set(head, nr, mm);
        let f = self.folios.get_mut(head);
        f.mapping = av;
        f.index = index;
        // One reference per mapped page (folio_ref_add(nr - 1)).
        f.refcount += nr - 1;
        let memcg = f.memcg;
        self.mod_node_page_state(Vm::NrAnonPages, nr as i64);
        self.memcg_stat(memcg, Mc::Anon, nr as i64);
        self.vm.inc(mthp_item(order, MthpStat::NrAnon));
    }

    /// The tail of `do_anonymous_page` for a new mTHP: zeroed, every page
    /// mapped once and AnonExclusive (`folio_add_new_anon_rmap`), on the
    /// LRU, its PTEs young, dirty and writable.
    fn map_new_anon_mthp(&mut self, vma: u32, first: usize, head: Pfn, order: u8) {
        let nr = 1usize << order;
        // folio_zero_user.
        self.charge_mem(
            Fn::DoAnonymousPage,
            self.costs.clear_page * nr as u64,
            PAGE_BYTES * nr as u64,
        );
        self.l2_write(head, nr as u32);
        self.folios.version[head as usize..head as usize + nr].fill(0);
        // map_anon_folio_pte_pf.
        self.map_anon_folio_pte_nopf(vma, first, head, Fn::DoAnonymousPage);
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_anon += nr as u64;
        self.vm.inc(mthp_item(order, MthpStat::AnonFaultAlloc));
    }

    /// `map_anon_folio_pte_nopf`: a new anonymous folio mapped by its PTEs
    /// from page `first` of `vma`, every page AnonExclusive
    /// (`folio_add_new_anon_rmap`), on the LRU, the PTEs young, dirty and
    /// writable if the VMA is; no fault or RSS counted (the fault path,
    /// `_pf`, adds those). The PTE work is charged to `f`.
    pub(super) fn map_anon_folio_pte_nopf(&mut self, vma: u32, first: usize, head: Pfn, f: Fn) {
        let nr = self.folios.get(head).nr_pages() as usize;
        self.folios.get_mut(head).set(PG_SWAPBACKED | PG_UPTODATE);
        self.folio_add_new_anon_rmap_ptes(head, vma, first);
        self.folio_add_lru(head);
        let write = if self.vmas[vma as usize].flags & VM_WRITE != 0 {
            PTE_WRITE | PTE_DIRTY
        } else {
            0
        };
        self.charge_cost(f, self.costs.pte * nr as u64);
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + nr];
        for (i, pte) in ptes.iter_mut().enumerate() {
            *pte = mk_pte(head + i as Pfn, PTE_YOUNG | write);
        }
    }

    /// 6.12's `deferred_split_folio(folio, partially_mapped = true)`: the
    /// first partial mapping counts (`split_deferred`, and
    /// `thp_deferred_split_page` at PMD size) and the folio is queued; a
    /// folio in the swap cache is left alone.
    pub fn deferred_split_folio(&mut self, head: Pfn) {
        let f = *self.folios.get(head);
        if f.order <= 1 || f.test(PG_SWAPCACHE) {
            return;
        }
        if !f.test(PG_PARTIALLY_MAPPED) {
            self.folios.get_mut(head).set(PG_PARTIALLY_MAPPED);
            if f.order == 9 {
                self.vm.inc(Vm::ThpDeferredSplitPage);
            }
            self.vm.inc(mthp_item(f.order, MthpStat::SplitDeferred));
            self.vm
                .inc(mthp_item(f.order, MthpStat::NrAnonPartiallyMapped));
        }
        if !f.test(PG_DEFERRED_SPLIT) {
            self.folios.get_mut(head).set(PG_DEFERRED_SPLIT);
            self.huge.queue_deferred_split(head);
        }
    }

    /// `try_to_map_unused_to_zeropage` after a split (6.12): page `page`,
    /// now an order-0 folio that was never written (all zeros), maps the
    /// shared zero page instead wherever it was mapped, and is freed once
    /// nothing else holds it.
    pub(super) fn remap_unused_to_zeropage(&mut self, page: Pfn) {
        let f = *self.folios.get(page);
        if f.mapcount == 0 || self.folios.version[page as usize] != 0 || f.test(PG_SWAPCACHE) {
            return;
        }
        let root = self.anon_vmas[f.mapping as usize].root;
        let mut vmas = self.anon_vmas[f.mapping as usize].vmas.clone();
        if root != f.mapping {
            vmas.extend(self.anon_vmas[root as usize].vmas.iter().copied());
        }
        for v in vmas {
            if self.folios.get(page).mapcount == 0 {
                break;
            }
            let Some((idx, _)) = self.page_vma_mapped(page, f.index, v) else {
                continue;
            };
            if self.vmas[v as usize].flags & super::mmap::VM_LOCKED != 0 {
                continue;
            }
            self.charge_cost(Fn::SplitHugePage, self.costs.pte);
            self.vmas[v as usize].ptes[idx] = mk_pte(NIL, PTE_ZERO | PTE_YOUNG);
            let mm = self.vmas[v as usize].mm as usize;
            self.mms[mm].rss_anon -= 1;
            self.page_remove_rmap(page, v);
            self.folio_put(page);
        }
    }

    /// Whether zapping `pte` continues the open batch.
    pub fn zap_anon_continues(&mut self, pte: Pte) -> bool {
        let b = self.fault.zap_anon().expect("a batch is open");
        pte_present(pte)
            && pte & PTE_ZERO == 0
            && pte_pfn(pte) == b.next
            && self.folios.head_of(b.next) == b.head
    }

    /// One PTE of a large anonymous folio zapped (6.12): its page's
    /// mapping goes at once, the partial-mapping test and the references
    /// when the batch ends.
    pub fn zap_anon_large_pte(&mut self, page: Pfn, head: Pfn, mm: u32) {
        let b = self.fault.zap_anon().get_or_insert(ZapAnonBatch {
            head,
            next: page,
            last: 0,
            nr: 0,
        });
        b.next = page + 1;
        b.nr += 1;
        self.charge_cost(Fn::RemoveRmap, self.costs.mapcount);
        if self.page_unmap_large(page, head, mm) {
            self.fault.zap_anon().as_mut().expect("open").last += 1;
        }
    }

    /// The end of a zap batch: `folio_remove_rmap_ptes`'s partial-mapping
    /// test, then the TLB gather's `free_swap_cache` and references.
    pub fn zap_anon_batch_flush(&mut self) {
        let Some(b) = self.fault.zap_anon().take() else {
            return;
        };
        self.charge_cost(Fn::RemoveRmap, self.costs.rmap_stat);
        if b.last > 0 && self.folios.get(b.head).mapcount > 0 {
            self.deferred_split_folio(b.head);
        }
        self.free_swap_cache(b.head);
        self.tlb_folio_put_refs(b.head, b.nr);
    }

    /// 6.12's `do_swap_page` past the swap cache on a SWP_SYNCHRONOUS_IO
    /// device (`features.anon_large_swapin`, the faulting slot's only
    /// user): `alloc_swap_folio` picks the highest allowed order whose
    /// aligned block of PTEs holds contiguous swap entries that no swap
    /// cache holds (`can_swapin_thp`), with the block and its slots
    /// aligned alike; the folio is read whole and mapped whole, exclusive
    /// and writable. None: no such order, or zswap was ever enabled
    /// (`zswap_never_enabled`), and the order-0 path goes on.
    pub fn do_swap_page_mthp(&mut self, vma: u32, idx: usize, pte: Pte, write: bool) -> Option<()> {
        if self.zswap_ever_enabled() {
            return None;
        }
        let entry = pte_swp_entry(pte);
        let mut orders = self.thp_swap_suitable_orders(vma, idx, entry);
        while orders != 0 {
            let order = highest_order(orders);
            if self.can_swapin_thp(vma, idx, entry, order) {
                break;
            }
            orders &= !(1 << order);
        }
        let v = &self.vmas[vma as usize];
        let (mm_memcg, mode) = (self.mms[v.mm as usize].memcg, self.thp.charge_mode(v.flags));
        while orders != 0 {
            let order = highest_order(orders);
            orders &= !(1 << order);
            let Some(head) = self.alloc_large_folio(order as usize) else {
                continue;
            };
            let nr = 1u32 << order;
            let first = idx & !(nr as usize - 1);
            let first_entry = entry - (idx - first) as SwpEntry;
            // mem_cgroup_swapin_charge_folio: the slots' memcg.
            let memcg = self.swapin_memcg(first_entry, mm_memcg);
            self.folios.get_mut(head).memcg = memcg;
            let charged = self.try_charge_thp(memcg, nr as u64, mode);
            if charged != super::memcontrol::Charge::Ok {
                self.free_folio_pages(head);
                continue;
            }
            self.swapin_mthp_read(head, first_entry, order, mm_memcg);
            self.map_swapped_in_mthp(vma, first, head, first_entry, write);
            return Some(());
        }
        None
    }

    /// The allowed orders of an anonymous swap-in at page `idx` whose
    /// block and slots are aligned alike (`thp_vma_suitable_orders`, then
    /// `thp_swap_suitable_orders`).
    fn thp_swap_suitable_orders(&self, vma: u32, idx: usize, entry: SwpEntry) -> u16 {
        let vpn = self.vmas[vma as usize].start_vpn + idx as u64;
        let off = swp_offset(entry) as u64;
        let mut orders = self.anon_mthp_orders(vma, idx);
        for order in 2..=8u8 {
            let nr = 1u64 << order;
            if vpn % nr != off % nr {
                orders &= !(1 << order);
            }
        }
        orders
    }

    /// 6.12's `can_swapin_thp`: the 2^`order` PTEs of the block holding
    /// page `idx` are the swap entries around `entry`, contiguous on one
    /// device, with one exclusive bit (`swap_pte_batch`), and their slots
    /// are of one memcg and zero mark with no swap cache. (Every slot a
    /// swap PTE names is in use, so 7.3's `__swap_cache_add_check` is the
    /// same test of the slots.)
    fn can_swapin_thp(&self, vma: u32, idx: usize, entry: SwpEntry, order: u8) -> bool {
        let nr = 1usize << order;
        let first_entry = entry.wrapping_sub((idx & (nr - 1)) as SwpEntry);
        self.swap_pte_batch(vma, idx, entry, order)
            && self.swap_cache_add_check(first_entry, nr as u32)
    }

    /// The read of a large swap-in past the swap cache: the slots claimed
    /// (`swapcache_prepare`), refault detection from the first slot's
    /// shadow, onto the LRU, and each page read from zram.
    fn swapin_mthp_read(&mut self, head: Pfn, first_entry: SwpEntry, order: u8, mm_memcg: u16) {
        let nr = 1u32 << order;
        let (ty, off) = (swp_type(first_entry), swp_offset(first_entry));
        self.lock_cluster_or_swap_info(first_entry);
        for i in 0..nr {
            self.swap[ty].swap_map[(off + i) as usize] |= SWAP_HAS_CACHE;
        }
        self.folios.get_mut(head).set(PG_SWAPBACKED | PG_UPTODATE);
        if let Some(shadow) = self.get_shadow_from_swap_cache(first_entry) {
            self.workingset_refault(head, shadow);
        }
        self.folio_add_lru(head);
        if !self.swap_read_folio_zeromap(head, first_entry) {
            // swap_read_folio: the memory stall of a workingset folio.
            let psi = self.swap_read_memstall_enter(head);
            self.charge_cost(Fn::SwapReadpage, self.costs.swap_read);
            for i in 0..nr {
                let version = self.zram_read_page(ty, off + i);
                self.l2_write(head + i, 1);
                self.folios.version[(head + i) as usize] = version;
            }
            self.vm.add(Vm::Pswpin, nr as i64);
            let memcg = self.folios.get(head).memcg;
            self.memcg_stat(memcg, Mc::Pswpin, nr as i64);
            self.psi_memstall_leave(psi);
        }
        // count_memcg_event_mm: the faulting mm's memcg.
        self.vm.inc(Vm::Pgmajfault);
        self.memcg_stat(mm_memcg, Mc::Pgmajfault, 1);
    }

    /// The mapping of a large swap-in: every PTE of the block, exclusive
    /// and writable (dirty on a write fault), the slots freed
    /// (`swap_free_nr`, then `swapcache_clear`).
    fn map_swapped_in_mthp(
        &mut self,
        vma: u32,
        first: usize,
        head: Pfn,
        first_entry: SwpEntry,
        write: bool,
    ) {
        let nr = self.folios.get(head).nr_pages() as usize;
        self.swap_free_nr(first_entry, nr as u32);
        self.folio_add_new_anon_rmap_ptes(head, vma, first);
        let v = &self.vmas[vma as usize];
        let (mm, flags) = (v.mm, v.flags);
        let mut bits = PTE_YOUNG;
        if flags & VM_WRITE != 0 {
            bits |= PTE_WRITE | if write { PTE_DIRTY } else { 0 };
        }
        self.charge_cost(Fn::DoSwapPage, self.costs.pte * nr as u64);
        for (i, pte) in self.vmas[vma as usize].ptes[first..first + nr]
            .iter_mut()
            .enumerate()
        {
            *pte = mk_pte(head + i as Pfn, bits);
        }
        let m = &mut self.mms[mm as usize];
        m.rss_anon += nr as u64;
        m.swapents -= nr as u64;
        self.put_swap_folio_nr(first_entry, nr as u32);
    }

    /// 6.12's `do_swap_page` on a large folio found in the swap cache: the
    /// first page of the block it would be mapped at, if that block lies in
    /// the VMA and one page table and every PTE of it holds the folio's
    /// entry for that page, with one exclusive bit (`swap_pte_batch`).
    pub fn swapcache_mthp_range(
        &self,
        vma: u32,
        idx: usize,
        head: Pfn,
        entry: SwpEntry,
    ) -> Option<usize> {
        let f = self.folios.get(head);
        // A large folio 7.3 has just read is not anonymous yet.
        let fresh = f.order > 0 && f.mapping == NIL && f.test(PG_SWAPBACKED);
        if !f.test(PG_SWAPCACHE) || !(f.test(PG_ANON) || fresh) {
            return None;
        }
        let nr = f.nr_pages() as usize;
        let page_idx = entry.wrapping_sub(f.swap) as usize;
        let v = &self.vmas[vma as usize];
        let first = idx.checked_sub(page_idx)?;
        let vpn = v.start_vpn + first as u64;
        // The block must not cross a page table (pmd_addr_end).
        if first + nr > v.pages as usize || vpn >> 9 != (vpn + nr as u64 - 1) >> 9 {
            return None;
        }
        let head_pte = v.ptes[first];
        (0..nr)
            .all(|i| {
                let p = v.ptes[first + i];
                is_swap_pte(p)
                    && pte_swp_entry(p) == f.swap + i as SwpEntry
                    && (p ^ head_pte) & PTE_SWP_EXCLUSIVE == 0
            })
            .then_some(first)
    }

    /// The rest of 6.12's `do_swap_page` for a large folio in the swap
    /// cache mapped whole from page `first`: every slot's reference goes
    /// (`swap_free_nr`), the cache is freed where `should_try_to_free_swap`
    /// says, and each PTE maps its page, exclusive and writable if the
    /// swap PTE was exclusive (`folio_add_anon_rmap_ptes`). The caller's
    /// reference from the lookup becomes one of the mappings'.
    pub fn map_swapcache_mthp(
        &mut self,
        vma: u32,
        first: usize,
        head: Pfn,
        pte: Pte,
        write: bool,
    ) -> Result<(), super::memory::FaultError> {
        let f = *self.folios.get(head);
        let nr = f.nr_pages() as usize;
        self.charge_cost(Fn::DoSwapPage, self.costs.pte * nr as u64);
        self.swap_free_nr(f.swap, nr as u32);
        let later = self.release.large_swapin_exclusive_marker;
        let exclusive = if later {
            // 7.3: the swap PTE's marker alone; the cache is freed after
            // the mapping (below).
            pte & PTE_SWP_EXCLUSIVE != 0
        } else {
            if self.mem_cgroup_swap_full(f.memcg) || (write && f.refcount == 1 + nr as u32) {
                self.folio_free_swap(head);
            }
            pte & PTE_SWP_EXCLUSIVE != 0 || self.folios.get(head).refcount == 1
        };
        let v = &self.vmas[vma as usize];
        let (mm, flags) = (v.mm as usize, v.flags);
        let (av, index) = (v.anon_vma, (v.pgoff + first as u64) as u32);
        self.mms[mm].rss_anon += nr as u64;
        self.mms[mm].swapents -= nr as u64;
        let mut bits = PTE_YOUNG;
        if exclusive && flags & VM_WRITE != 0 {
            bits |= PTE_WRITE | if write { PTE_DIRTY } else { 0 };
        }
        self.folios.get_mut(head).refcount += nr as u32 - 1;
        self.charge_cost(
            Fn::AddRmap,
            self.costs.rmap() + self.costs.mapcount * nr as u64,
        );
        let memcg = f.memcg;
        if !f.test(PG_ANON) {
            // folio_add_new_anon_rmap's anon_vma and index (7.3). Its
            // __folio_set_anon takes the VMA's own anon_vma only for an
            // exclusive folio: one read for a swap entry that fork shared
            // may be mapped by the other processes of the fork tree too,
            // so it gets the root anon_vma, which all of them link to (the
            // VMA's own would leave the others' mappings out of its rmap).
            let av = if exclusive {
                av
            } else {
                self.anon_vmas[av as usize].root
            };
            let g = self.folios.get_mut(head);
            g.set(PG_ANON);
            g.mapping = av;
            g.index = index;
        }
        for i in 0..nr as Pfn {
            if self.folios.page_mapcount_add(head + i, 1) == 1 {
                self.mod_node_page_state(Vm::NrAnonPages, 1);
                self.memcg_stat(memcg, Mc::Anon, 1);
            }
            if exclusive {
                self.folios.get_mut(head + i).set(PG_ANON_EXCLUSIVE);
            }
            self.vmas[vma as usize].ptes[first + i as usize] = mk_pte(head + i, bits);
        }
        if !f.test(PG_ANON) {
            // folio_add_new_anon_rmap of a folio just read (7.3): new to
            // the per-size count, its mms start here.
            self.mm_id_set(head, nr as u32, mm as u32);
            self.vm.inc(mthp_item(f.order, MthpStat::NrAnon));
        } else {
            self.mm_id_add(head, nr as u32, mm as u32);
        }
        // 7.3's should_try_to_free_swap: always from a SWP_SYNCHRONOUS_IO
        // device, else when swap is full or on a write to an exclusive
        // page.
        let sync = self.swap[swp_type(f.swap)].flags & super::swapfile::SWP_SYNCHRONOUS_IO != 0;
        if later && (sync || self.mem_cgroup_swap_full(f.memcg) || (write && exclusive)) {
            self.folio_free_swap(head);
        }
        if write && bits & PTE_WRITE == 0 {
            let idx = first + (pte_swp_entry(pte) - f.swap) as usize;
            let p = self.vmas[vma as usize].ptes[idx];
            return self.do_wp_page(vma, idx, p);
        }
        Ok(())
    }
}

impl Kernel {
    /// 7.3's large swap-in on a SWP_SYNCHRONOUS_IO device, through the swap
    /// cache whatever the slots' swap counts (`thp_swapin_suitable_orders`,
    /// then `swapin_sync` → `swap_cache_alloc_folio`): the highest allowed
    /// order whose aligned block of PTEs holds contiguous swap entries,
    /// then from it down, each order whose slots are all in use, uncached,
    /// of one zero mark and one memcg (`__swap_cache_add_check`), that
    /// can be allocated and charged; a failed order counts
    /// `swpin_fallback` (and `swpin_fallback_charge` for the charge). The
    /// folio goes into the swap cache and is read (`swpin` at the read).
    /// Returns it with a reference for the caller, or None for order 0
    /// (always once zswap was enabled: `zswap_never_enabled`).
    pub fn swapin_sync_mthp(&mut self, vma: u32, idx: usize, pte: Pte) -> Option<Pfn> {
        if self.zswap_ever_enabled() {
            return None;
        }
        let entry = pte_swp_entry(pte);
        let mut orders = self.thp_swap_suitable_orders(vma, idx, entry);
        while orders != 0 && !self.swap_pte_batch(vma, idx, entry, highest_order(orders)) {
            orders &= !(1 << highest_order(orders));
        }
        let v = &self.vmas[vma as usize];
        let (mm_memcg, mode) = (self.mms[v.mm as usize].memcg, self.thp.charge_mode(v.flags));
        while orders != 0 {
            let order = highest_order(orders);
            orders &= !(1 << order);
            let nr = 1u32 << order;
            let first_entry = entry - (idx & (nr as usize - 1)) as SwpEntry;
            let head = if self.swap_cache_add_check(first_entry, nr) {
                self.alloc_large_folio(order as usize)
            } else {
                None
            };
            let Some(head) = head else {
                self.vm.inc(mthp_item(order, MthpStat::SwpinFallback));
                continue;
            };
            let memcg = self.swapin_memcg(entry, mm_memcg);
            self.folios.get_mut(head).memcg = memcg;
            if self.try_charge_thp(memcg, nr as u64, mode) != super::memcontrol::Charge::Ok {
                self.free_folio_pages(head);
                self.vm.inc(mthp_item(order, MthpStat::SwpinFallbackCharge));
                self.vm.inc(mthp_item(order, MthpStat::SwpinFallback));
                continue;
            }
            let (ty, first) = (swp_type(first_entry), swp_offset(first_entry));
            self.lock_cluster_or_swap_info(first_entry);
            for o in first..first + nr {
                self.swap[ty].swap_map[o as usize] |= SWAP_HAS_CACHE;
            }
            self.folios.get_mut(head).set(PG_SWAPBACKED);
            if let Some(shadow) = self.add_to_swap_cache(head, first_entry) {
                self.workingset_refault(head, shadow);
            }
            self.folio_add_lru(head);
            self.swap_readpage(head, first_entry);
            return Some(head);
        }
        None
    }

    /// `swap_pte_batch` from the block of 2^`order` PTEs holding page
    /// `idx`: every PTE the swap entry of its page, contiguous with
    /// `entry` on its device, with one exclusive bit.
    fn swap_pte_batch(&self, vma: u32, idx: usize, entry: SwpEntry, order: u8) -> bool {
        let nr = 1usize << order;
        let first = idx & !(nr - 1);
        let first_entry = entry.wrapping_sub((idx - first) as SwpEntry);
        if swp_type(first_entry) != swp_type(entry) || swp_offset(first_entry) > swp_offset(entry) {
            return false;
        }
        let v = &self.vmas[vma as usize];
        let head_pte = v.ptes[first];
        (0..nr).all(|i| {
            let p = v.ptes[first + i];
            is_swap_pte(p)
                && pte_swp_entry(p) == first_entry + i as SwpEntry
                && (p ^ head_pte) & PTE_SWP_EXCLUSIVE == 0
        })
    }

    /// 7.3's `__swap_cache_add_check` of `nr` slots from `first`: each in
    /// use and not cached, all of one zero mark and one memcg.
    fn swap_cache_add_check(&self, first: SwpEntry, nr: u32) -> bool {
        let si = &self.swap[swp_type(first)];
        let o = swp_offset(first) as usize;
        let (zero, cgroup) = (si.zeromap[o], si.cgroup[o]);
        (o..o + nr as usize).all(|s| {
            s < si.swap_map.len()
                && si.swap_count(s as u32) != 0
                && si.swap_map[s] & SWAP_HAS_CACHE == 0
                && si.zeromap[s] == zero
                && si.cgroup[s] == cgroup
        })
    }
}

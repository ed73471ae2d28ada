//! mm/huge_memory.c's anonymous half, as Linux 6.1 has it: PMD-size
//! anonymous folios (THPs) at fault time (`do_huge_pmd_anonymous_page`),
//! the huge zero page, write faults on a PMD (`do_huge_pmd_wp_page`),
//! splitting a PMD into PTEs (`__split_huge_pmd_locked`) and a folio into
//! order-0 folios (`split_huge_page_to_list`), zapping and fork's copy of a
//! PMD, and the deferred split queue.
//!
//! A PMD mapping of an anonymous THP is held as its block's 512 entries,
//! each PTE_PMD with its page's frame (pgtable.rs); unlike shmem's, the
//! block keeps the PTE table the kernel deposits with the PMD
//! (`pgtable_trans_huge_deposit`) in its `pte_tables` slot, so that
//! `pmd_none` is false and a split turns the deposit into the PTE table.
//!
//! Mapcounts: each page counts every mapping of it, PTE or PMD (the
//! kernel's `page_mapcount`), the head's `mapcount` their sum, and the
//! entire mapcount the PMDs. 6.1's PageDoubleMap bookkeeping gives the
//! same answers to every question the kernel asks of these counts.

use super::folio::*;
use super::huge_memory::{pmd_block, TAIL_FLAGS};
use super::mmap::{VM_HUGEPAGE, VM_NOHUGEPAGE};
use super::pgtable::*;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::vmstat::{mthp_item, Mc, MthpStat, Vm};
use mmsim_spec::{ThpDefrag, ThpEnabled};

/// On the head page of an anonymous THP: queued for a deferred split
/// (`!list_empty(page_deferred_list(page))`).
pub const PG_DEFERRED_SPLIT: u32 = 1 << 18;
/// On the head page of a large anonymous folio (6.12): some page of it
/// lost its last mapping while others are still mapped
/// (`folio_test_partially_mapped`).
pub const PG_PARTIALLY_MAPPED: u32 = 1 << 19;

/// How a THP's memcg charge may reclaim (from `vma_thp_gfp_mask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThpCharge {
    /// GFP_TRANSHUGE_LIGHT: fails at once over the limit.
    NoReclaim,
    /// GFP_TRANSHUGE | __GFP_NORETRY: one round of reclaim.
    NoRetry,
    /// GFP_TRANSHUGE: reclaims and retries (never the OOM killer).
    Reclaim,
}

/// huge_memory.c's globals besides its flags (`ThpCtl`), private to the
/// THP code: the rest of mm queues a folio with `queue_deferred_split`
/// and finds the huge zero page with `huge_zero_pfn`.
#[derive(Debug)]
pub struct HugeState {
    /// The huge zero page, once allocated (NIL before).
    huge_zero_pfn: Pfn,
    /// The deferred split queue: partly unmapped THPs, oldest first.
    /// Simplification: one list; the kernel keeps one per memcg, and its
    /// shrinker takes each memcg's in turn.
    deferred_split: Vec<Pfn>,
}

impl Default for HugeState {
    fn default() -> Self {
        HugeState {
            huge_zero_pfn: NIL,
            deferred_split: Vec::new(),
        }
    }
}

impl HugeState {
    /// The huge zero page's head (NIL until allocated).
    pub fn huge_zero_pfn(&self) -> Pfn {
        self.huge_zero_pfn
    }

    /// A folio marked PG_DEFERRED_SPLIT joins the queue's tail.
    pub(crate) fn queue_deferred_split(&mut self, head: Pfn) {
        self.deferred_split.push(head);
    }
}

/// `transparent_hugepage_flags`, as the spec and the machine's size set
/// them at boot.
#[derive(Debug, Clone, Copy)]
pub struct ThpCtl {
    pub enabled: ThpEnabled,
    /// None: no defrag flag set (`hugepage_init` clears them all on a
    /// machine under 512 MiB).
    pub defrag: Option<ThpDefrag>,
    pub use_zero_page: bool,
    pub khugepaged: super::khugepaged::KhugepagedCtl,
    /// The per-size anonymous knobs below PMD size (6.8 and later).
    pub mthp: super::anon_mthp::MthpOrders,
}

impl ThpCtl {
    /// 6.1's boot flags (Debian: enabled always, defrag madvise, the huge
    /// zero page on; all cleared under 512 MiB of RAM), then the spec's
    /// writes.
    pub fn new(sysfs: &mmsim_spec::Sysfs, big_enough: bool, anon_mthp: bool) -> Self {
        ThpCtl {
            enabled: sysfs.thp_enabled,
            defrag: sysfs
                .thp_defrag
                .or(big_enough.then_some(ThpDefrag::Madvise)),
            use_zero_page: sysfs.thp_use_zero_page.unwrap_or(big_enough),
            khugepaged: super::khugepaged::KhugepagedCtl::new(&sysfs.khugepaged, big_enough),
            mthp: super::anon_mthp::MthpOrders::new(sysfs, anon_mthp),
        }
    }

    /// `vma_thp_gfp_mask` as the memcg charge sees it: no direct reclaim,
    /// direct reclaim with __GFP_NORETRY (defrag `always` without
    /// MADV_HUGEPAGE), or full reclaim.
    pub(super) fn charge_mode(&self, vm_flags: u32) -> ThpCharge {
        let madvised = vm_flags & VM_HUGEPAGE != 0;
        match self.defrag {
            Some(ThpDefrag::Always) if madvised => ThpCharge::Reclaim,
            Some(ThpDefrag::Always) => ThpCharge::NoRetry,
            Some(ThpDefrag::DeferMadvise | ThpDefrag::Madvise) if madvised => ThpCharge::Reclaim,
            _ => ThpCharge::NoReclaim,
        }
    }
}

impl Kernel {
    /// `hugepage_vma_check(vma, in_pf = true, enforce_sysfs = true)` for
    /// the fault path: a private anonymous VMA without MADV_NOHUGEPAGE,
    /// with THP `always`, or `madvise` and MADV_HUGEPAGE.
    #[inline]
    pub fn thp_fault_allowed(&self, vma: u32) -> bool {
        let v = &self.vmas[vma as usize];
        v.inode == NIL
            && v.flags & VM_NOHUGEPAGE == 0
            && match self.thp.enabled {
                ThpEnabled::Always => true,
                ThpEnabled::Madvise => v.flags & VM_HUGEPAGE != 0,
                ThpEnabled::Never => false,
            }
    }

    /// `transhuge_vma_suitable`: the 2 MiB block holding page `idx` lies
    /// wholly inside the VMA. Returns the block's first page.
    fn transhuge_vma_suitable(&self, vma: u32, idx: usize) -> Option<usize> {
        let v = &self.vmas[vma as usize];
        let block = (v.start_vpn + idx as u64) & !(HPAGE_PMD_NR - 1);
        (block >= v.start_vpn && block + HPAGE_PMD_NR <= v.start_vpn + v.pages)
            .then(|| (block - v.start_vpn) as usize)
    }

    /// `do_huge_pmd_anonymous_page`: a read maps the huge zero page, a
    /// write a new THP. False: VM_FAULT_FALLBACK, the fault goes on at
    /// PTE level (which then allocates the PTE table, so this block gets
    /// no THP at fault time again).
    pub fn do_huge_pmd_anonymous_page(
        &mut self,
        vma: u32,
        idx: usize,
        write: bool,
    ) -> Result<bool, crate::SimError> {
        let Some(first) = self.transhuge_vma_suitable(vma, idx) else {
            return Ok(false);
        };
        // anon_vma_prepare, then khugepaged_enter_vma.
        self.vmas[vma as usize].anon_used = true;
        self.khugepaged_enter_vma(vma);
        if !write && self.thp.use_zero_page {
            let table = self.pte_alloc_one(vma)?;
            if !self.mm_get_huge_zero_page(self.vmas[vma as usize].mm) {
                self.pte_free(table);
                self.vm.inc(Vm::ThpFaultFallback);
                return Ok(false);
            }
            self.pmd_lock_empty(vma, first, Fn::DoHugePmdAnonymousPage);
            self.set_huge_zero_page(vma, first, table);
            return Ok(true);
        }
        let memcg = self.mms[self.vmas[vma as usize].mm as usize].memcg;
        // The page allocator's side of GFP_TRANSHUGE(_LIGHT). Direct
        // reclaim and compaction for it are not modelled (docs/model.md):
        // a block the free lists cannot give at the low watermark falls
        // back.
        let Some(head) = self.alloc_large_folio(9) else {
            self.vm.inc(Vm::ThpFaultFallback);
            return Ok(false);
        };
        self.folios.get_mut(head).memcg = memcg;
        let vm_flags = self.vmas[vma as usize].flags;
        // mem_cgroup_charge with the THP gfp: without direct reclaim it
        // fails at once over the limit; with it, it reclaims and retries
        // but never calls the OOM killer (order above 3).
        let charged = self.try_charge_thp(memcg, HPAGE_PMD_NR, self.thp.charge_mode(vm_flags));
        if charged != super::memcontrol::Charge::Ok {
            self.free_folio_pages(head);
            self.vm.inc(Vm::ThpFaultFallback);
            self.vm.inc(Vm::ThpFaultFallbackCharge);
            return Ok(false);
        }
        let table = match self.pte_alloc_one(vma) {
            Ok(t) => t,
            Err(e) => {
                self.mem_cgroup_uncharge(memcg, HPAGE_PMD_NR);
                self.free_folio_pages(head);
                return Err(e);
            }
        };
        // clear_huge_page.
        self.charge_mem(
            Fn::DoAnonymousPage,
            self.costs.clear_page * HPAGE_PMD_NR,
            PAGE_BYTES * HPAGE_PMD_NR,
        );
        self.l2_write(head, HPAGE_PMD_NR as u32);
        let nr = HPAGE_PMD_NR as usize;
        self.folios.version[head as usize..head as usize + nr].fill(0);
        self.folios
            .get_mut(head)
            .set(PG_SWAPBACKED | PG_UPTODATE | PG_ANON | PG_ANON_EXCLUSIVE);
        // The PMD table's lock from the rmap to the PMD set (the clear
        // runs before it).
        let ptl = self.pmd_lock(vma, first, Fn::DoHugePmdAnonymousPage);
        self.page_add_new_anon_rmap_pmd(head, vma, first);
        self.folio_add_lru(head);
        let t = self.pmd_table(vma, first);
        self.vmas[vma as usize].pte_tables[t] = table;
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + nr];
        for (i, pte) in ptes.iter_mut().enumerate() {
            *pte = mk_pte(head + i as u32, PTE_PMD | PTE_WRITE | PTE_YOUNG | PTE_DIRTY);
        }
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_anon += HPAGE_PMD_NR;
        self.spin_unlock(ptl);
        self.vm.inc(Vm::ThpFaultAlloc);
        self.memcg_stat(memcg, Mc::ThpFaultAlloc, 1);
        Ok(true)
    }

    /// The `pte_tables` slot of the block holding page `idx`.
    #[inline]
    pub(crate) fn pmd_table(&self, vma: u32, idx: usize) -> usize {
        pmd_block(self.vmas[vma as usize].start_vpn, idx).1
    }

    /// `page_add_new_anon_rmap` of a THP mapped by one PMD at page
    /// `first`: every page mapped once, NR_ANON_THPS and NR_ANON_MAPPED
    /// up by 512.
    pub(super) fn page_add_new_anon_rmap_pmd(&mut self, head: Pfn, vma: u32, first: usize) {
        self.charge_cost(
            Fn::AddRmap,
            self.costs.rmap() + self.costs.mapcount * HPAGE_PMD_NR,
        );
        self.pmd_mapcount_inc(head);
        let v = &self.vmas[vma as usize];
        let (av, index) = (v.anon_vma, (v.pgoff + first as u64) as u32);
        let f = self.folios.get_mut(head);
        f.mapping = av;
        f.index = index;
        let memcg = f.memcg;
        self.mod_node_page_state(Vm::NrAnonTransparentHugepages, 1);
        self.mod_node_page_state(Vm::NrAnonPages, HPAGE_PMD_NR as i64);
        self.memcg_stat(memcg, Mc::Anon, HPAGE_PMD_NR as i64);
        self.memcg_stat(memcg, Mc::AnonThp, HPAGE_PMD_NR as i64);
    }

    /// One more PMD mapping THP `head`: every page's mapcount and the
    /// entire mapcount rise.
    fn pmd_mapcount_inc(&mut self, head: Pfn) {
        for i in 0..HPAGE_PMD_NR as u32 {
            self.folios.page_mapcount_add(head + i, 1);
        }
        self.folios.entire_mapcount_add(head, 1);
    }

    /// `pte_alloc_one`: a PTE table for a deposit, charged to the mm's
    /// memcg.
    fn pte_alloc_one(&mut self, vma: u32) -> Result<Pfn, crate::SimError> {
        self.alloc_pgtable(vma)
    }

    /// `mm_get_huge_zero_page`: the mm's reference to the huge zero page,
    /// allocated on first use (`thp_zero_page_alloc`). It is not charged
    /// to any memcg and never on an LRU list. Simplification: once
    /// allocated it stays (the kernel's shrinker frees it when no mm
    /// holds it, which matters only to a later `thp_zero_page_alloc`).
    fn mm_get_huge_zero_page(&mut self, mm: u32) -> bool {
        if self.huge.huge_zero_pfn == NIL {
            let Some(p) = self.alloc_large_folio(9) else {
                self.vm.inc(Vm::ThpZeroPageAllocFailed);
                return false;
            };
            self.charge_mem(
                Fn::DoAnonymousPage,
                self.costs.clear_page * HPAGE_PMD_NR,
                PAGE_BYTES * HPAGE_PMD_NR,
            );
            self.l2_write(p, HPAGE_PMD_NR as u32);
            self.folios.get_mut(p).set(PG_KERNEL);
            self.vm.inc(Vm::ThpZeroPageAlloc);
            self.huge.huge_zero_pfn = p;
        }
        self.mms[mm as usize].huge_zero = true;
        true
    }

    /// `set_huge_zero_page`: a read-only PMD of the huge zero page, with
    /// its deposited table.
    fn set_huge_zero_page(&mut self, vma: u32, first: usize, table: Pfn) {
        let t = self.pmd_table(vma, first);
        self.vmas[vma as usize].pte_tables[t] = table;
        let zero = self.huge.huge_zero_pfn;
        let nr = HPAGE_PMD_NR as usize;
        for (i, pte) in self.vmas[vma as usize].ptes[first..first + nr]
            .iter_mut()
            .enumerate()
        {
            *pte = mk_pte(zero + i as u32, PTE_PMD | PTE_ZERO | PTE_YOUNG);
        }
    }

    /// `wp_huge_pmd` → `do_huge_pmd_wp_page` for a write to the read-only
    /// PMD over page `idx`: a THP only this mapping holds is reused whole
    /// (made writable, dirty and young; no pgreuse); the huge zero page
    /// and a shared THP are split, and the fault goes on at PTE level
    /// (VM_FAULT_FALLBACK: false).
    pub fn do_huge_pmd_wp_page(&mut self, vma: u32, idx: usize) -> bool {
        self.charge_cost(Fn::DoWpPage, self.costs.pte);
        let (first, _) = pmd_block(self.vmas[vma as usize].start_vpn, idx);
        let pte = self.vmas[vma as usize].ptes[first];
        if pte & PTE_ZERO != 0 {
            self.split_huge_pmd_anon(vma, first);
            return false;
        }
        let head = pte_pfn(pte);
        let f = *self.folios.get(head);
        let reuse = f.test(PG_ANON_EXCLUSIVE) || {
            let nr = f.nr_pages();
            if f.refcount > 1 + f.test(PG_SWAPCACHE) as u32 * nr {
                false
            } else {
                if f.test(PG_SWAPCACHE) {
                    self.folio_free_swap(head);
                }
                if self.folios.get(head).refcount == 1 {
                    // page_move_anon_rmap.
                    let av = self.vmas[vma as usize].anon_vma;
                    let h = self.folios.get_mut(head);
                    h.mapping = av;
                    h.set(PG_ANON_EXCLUSIVE);
                    true
                } else {
                    false
                }
            }
        };
        if !reuse {
            self.split_huge_pmd_anon(vma, first);
            return false;
        }
        let nr = HPAGE_PMD_NR as usize;
        for p in &mut self.vmas[vma as usize].ptes[first..first + nr] {
            *p |= PTE_WRITE | PTE_DIRTY | PTE_YOUNG;
        }
        true
    }

    /// `__split_huge_pmd_locked` for an anonymous VMA's PMD at page
    /// `first`: the deposited table becomes the PTE table. The huge zero
    /// page becomes 512 read-only 4 KiB zero-page PTEs; a THP's pages
    /// each get a PTE taking the PMD's write and young bits (not its
    /// dirty bit, which goes to the folio) and the PMD's exclusivity, and
    /// a reference each.
    pub fn split_huge_pmd_anon(&mut self, vma: u32, first: usize) {
        self.mmu_notifier_invalidate_range(vma, first, HPAGE_PMD_NR as usize);
        self.vm.inc(Vm::ThpSplitPmd);
        // `__split_huge_pmd_locked` under the PMD table's lock.
        let ptl = self.pmd_lock(vma, first, Fn::SplitHugePmd);
        self.split_huge_pmd_anon_locked(vma, first);
        self.spin_unlock(ptl);
    }

    fn split_huge_pmd_anon_locked(&mut self, vma: u32, first: usize) {
        self.charge_cost(
            Fn::SplitHugePmd,
            self.costs.ptep_clear_flush() + self.costs.pte * HPAGE_PMD_NR,
        );
        let nr = HPAGE_PMD_NR as usize;
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + nr];
        if ptes[0] & PTE_ZERO != 0 {
            for p in ptes.iter_mut() {
                *p = mk_pte(NIL, PTE_ZERO | PTE_YOUNG);
            }
            return;
        }
        let bits = ptes.iter().fold(0, |a, &p| a | p);
        let head = pte_pfn(ptes[0]);
        let keep = bits & (PTE_WRITE | PTE_YOUNG);
        for (i, p) in ptes.iter_mut().enumerate() {
            *p = mk_pte(head + i as u32, keep);
        }
        let h = *self.folios.get(head);
        if bits & PTE_DIRTY != 0 {
            self.folios.get_mut(head).set(PG_DIRTY);
        }
        if h.test(PG_ANON_EXCLUSIVE) {
            for i in 1..HPAGE_PMD_NR as u32 {
                self.folios.get_mut(head + i).set(PG_ANON_EXCLUSIVE);
            }
        }
        self.folios.get_mut(head).refcount += HPAGE_PMD_NR as u32 - 1;
        if self.folios.entire_mapcount_add(head, -1) == 0 {
            self.mod_node_page_state(Vm::NrAnonTransparentHugepages, -1);
            self.memcg_stat(h.memcg, Mc::AnonThp, -(HPAGE_PMD_NR as i64));
        }
    }

    /// `zap_huge_pmd` of an anonymous VMA's PMD at page `first` (munmap,
    /// exit, MADV_DONTNEED of the whole block): the PMD and its deposited
    /// table go, so the block is `pmd_none` again; a THP loses the
    /// mapping (`page_remove_rmap(compound)`) and the PMD's reference.
    pub fn zap_huge_pmd_anon(&mut self, vma: u32, first: usize) {
        // __pmd_trans_huge_lock: the PMD's clear and the rmap are in the
        // zap's priced work, the free after (tlb_remove_page_size).
        self.pmd_lock_empty(vma, first, Fn::ZapHugePmd);
        self.charge_cost(Fn::ZapHugePmd, self.costs.pte);
        let nr = HPAGE_PMD_NR as usize;
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + nr];
        let pte = ptes[0];
        ptes.fill(0);
        let t = self.pmd_table(vma, first);
        let table = std::mem::replace(&mut self.vmas[vma as usize].pte_tables[t], NIL);
        self.pte_free(table);
        if pte & PTE_ZERO != 0 {
            return;
        }
        let head = pte_pfn(pte);
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_anon -= HPAGE_PMD_NR;
        self.page_remove_anon_compound_rmap(head);
        self.free_swap_cache(head);
        self.tlb_folio_put(head);
    }

    /// `page_remove_anon_compound_rmap`: one PMD fewer; pages left with no
    /// mapping leave NR_ANON_MAPPED, and a THP left partly mapped is
    /// queued for a deferred split.
    fn page_remove_anon_compound_rmap(&mut self, head: Pfn) {
        self.charge_cost(
            Fn::RemoveRmap,
            self.costs.mapcount * HPAGE_PMD_NR + self.costs.rmap_stat,
        );
        let memcg = self.folios.get(head).memcg;
        let mut gone = 0;
        for i in 0..HPAGE_PMD_NR as u32 {
            if self.folios.page_mapcount_add(head + i, -1) == 0 {
                gone += 1;
                self.folios.get_mut(head + i).clear(PG_ANON_EXCLUSIVE);
            }
        }
        if self.folios.entire_mapcount_add(head, -1) == 0 {
            self.mod_node_page_state(Vm::NrAnonTransparentHugepages, -1);
            self.memcg_stat(memcg, Mc::AnonThp, -(HPAGE_PMD_NR as i64));
        }
        self.mod_node_page_state(Vm::NrAnonPages, -gone);
        self.memcg_stat(memcg, Mc::Anon, -gone);
        if gone > 0 && gone < HPAGE_PMD_NR as i64 {
            self.deferred_split_huge_page(head);
        }
    }

    /// `copy_huge_pmd` at fork: the child maps the same THP (or the huge
    /// zero page) with a PMD of its own and a deposited table; both PMDs
    /// are write-protected, the child's old, and the THP is no longer
    /// exclusive. False: the table's allocation reclaimed, and reclaim
    /// split the PMD (`!pmd_trans_huge`: -EAGAIN); the PTEs are copied
    /// instead.
    pub fn copy_huge_pmd(
        &mut self,
        src: u32,
        dst: u32,
        first: usize,
    ) -> Result<bool, crate::SimError> {
        let table = self.pte_alloc_one(dst)?;
        if self.vmas[src as usize].ptes[first] & PTE_PMD == 0 {
            self.pte_free(table);
            return Ok(false);
        }
        let t = self.pmd_table(dst, first);
        self.vmas[dst as usize].pte_tables[t] = table;
        // The source PMD table's lock (the child's is no other CPU's): an
        // empty hold, as copy_pte_range's (the parent's mmap_lock, held
        // for writing, keeps its threads out).
        self.pmd_lock_empty(src, first, Fn::CopyPageRange);
        self.charge_cost(Fn::CopyPageRange, self.costs.copy_pte);
        let nr = HPAGE_PMD_NR as usize;
        let pte = self.vmas[src as usize].ptes[first];
        let dst_mm = self.vmas[dst as usize].mm;
        if pte & PTE_ZERO != 0 {
            self.mm_get_huge_zero_page(dst_mm);
        } else {
            let head = pte_pfn(pte);
            self.pmd_mapcount_inc(head);
            let h = self.folios.get_mut(head);
            h.refcount += 1;
            h.clear(PG_ANON_EXCLUSIVE);
            self.mms[dst_mm as usize].rss_anon += HPAGE_PMD_NR;
        }
        for i in first..first + nr {
            let p = self.vmas[src as usize].ptes[i] & !PTE_WRITE;
            self.vmas[src as usize].ptes[i] = p;
            self.vmas[dst as usize].ptes[i] = p & !PTE_YOUNG;
        }
        Ok(true)
    }

    /// `deferred_split_huge_page`: queue a partly unmapped THP for the
    /// shrinker (not while reclaim holds it in the swap cache), counting
    /// each insertion.
    pub fn deferred_split_huge_page(&mut self, head: Pfn) {
        let f = self.folios.get_mut(head);
        if f.test(PG_SWAPCACHE | PG_DEFERRED_SPLIT) {
            return;
        }
        f.set(PG_DEFERRED_SPLIT);
        self.huge.deferred_split.push(head);
        self.vm.inc(Vm::ThpDeferredSplitPage);
    }

    /// Off the deferred split queue (`free_transhuge_page`, a split; 6.12's
    /// `__folio_unqueue_deferred_split` also ends a partial mapping's
    /// count).
    pub fn deferred_split_del(&mut self, head: Pfn) {
        let f = self.folios.get_mut(head);
        if f.test(PG_DEFERRED_SPLIT) {
            f.clear(PG_DEFERRED_SPLIT);
            self.huge.deferred_split.retain(|&p| p != head);
        }
        let f = self.folios.get_mut(head);
        if f.test(PG_PARTIALLY_MAPPED) {
            f.clear(PG_PARTIALLY_MAPPED);
            let order = f.order;
            self.vm
                .add(mthp_item(order, MthpStat::NrAnonPartiallyMapped), -1);
        }
    }

    /// The kernel's `folio_mapcount`: PTE mappings plus PMD mappings, a
    /// PMD counting once.
    pub fn folio_mapcount(&self, head: Pfn) -> u32 {
        let f = self.folios.get(head);
        f.mapcount - self.folios.entire_mapcount(head) * (HPAGE_PMD_NR as u32 - 1)
    }

    /// `can_split_folio`: nothing holds the folio but its mappings, the
    /// swap cache and the caller.
    pub fn can_split_folio(&self, head: Pfn) -> bool {
        let f = self.folios.get(head);
        let extra = f.test(PG_SWAPCACHE) as u32 * f.nr_pages();
        self.folio_mapcount(head) == f.refcount - extra - 1
    }

    /// `split_huge_page_to_list` of an anonymous THP the caller holds a
    /// reference to: its PMDs split (`unmap_folio` with
    /// TTU_SPLIT_HUGE_PMD), then each page becomes an order-0 folio
    /// mapped where it was, in the swap cache at its own slot if the THP
    /// was. Tails nobody maps are freed, unless reclaim's `list` takes
    /// them (it holds a reference to each). On an LRU list the tails go
    /// just before the head. False (`thp_split_page_failed`) under
    /// writeback or with extra references.
    pub fn split_huge_page_anon(&mut self, head: Pfn, list: Option<&mut Vec<Pfn>>) -> bool {
        let f = *self.folios.get(head);
        debug_assert!(f.order >= 2 && f.test(PG_ANON));
        let later = self.release.mthp_stats;
        if f.test(PG_WRITEBACK) {
            // -EBUSY before the counting.
            return false;
        }
        // anon_vma_lock_write to the split's end: other CPUs' rmap walks
        // of the process tree fail their trylock or sleep meanwhile.
        let anon_vma = self.anon_vma_lock_write(f.mapping);
        if !self.can_split_folio(head) {
            self.anon_vma_unlock_write(anon_vma);
            if f.order == 9 {
                self.vm.inc(Vm::ThpSplitPageFailed);
            }
            if later {
                self.vm.inc(mthp_item(f.order, MthpStat::SplitFailed));
            }
            return false;
        }
        self.unmap_folio_anon(head);
        let nr = f.nr_pages();
        self.charge_cost(Fn::SplitHugePage, self.costs.split_tail * (nr as u64 - 1));
        self.deferred_split_del(head);
        let h = *self.folios.get(head);
        let on_lru = h.test(PG_LRU);
        let isolated = list.is_some();
        let swapcache = h.test(PG_SWAPCACHE);
        // An anonymous folio has no page-cache flags to pass on.
        let keep = h.flags & (TAIL_FLAGS | PG_ANON | PG_SWAPCACHE);
        let mut orphans = Vec::new();
        // Read before the tails are rewritten: the first tail holds it.
        let head_maps = self.folios.page_mapcount(head);
        for i in (1..nr).rev() {
            let tail = head + i;
            let maps = self.folios.page_mapcount(tail);
            let exclusive = self.folios.get(tail).flags & PG_ANON_EXCLUSIVE;
            let lru = if on_lru {
                PG_LRU
            } else if isolated {
                PG_ISOLATED
            } else {
                0
            };
            *self.folios.get_mut(tail) = Folio {
                flags: keep | exclusive | lru,
                refcount: maps + isolated as u32 + swapcache as u32,
                mapcount: maps,
                mapping: h.mapping,
                index: h.index + i,
                swap: if swapcache { h.swap + i } else { 0 },
                memcg: h.memcg,
                ..Folio::FREE
            };
            if swapcache {
                self.swap_cache_set(h.swap + i, tail);
            }
            if self.folios.get(tail).refcount == 0 {
                orphans.push(tail);
            }
        }
        let hf = self.folios.get_mut(head);
        hf.order = 0;
        hf.mapcount = head_maps;
        hf.refcount = head_maps + 1 + swapcache as u32;
        if on_lru {
            self.lruvec_folio_shrunk(head, nr);
            for i in (1..nr).rev() {
                self.lruvec_add_folio_before(head, head + i);
            }
        } else if let Some(list) = list {
            list.extend((1..nr).map(|i| head + i));
        }
        // A tail no one maps or lists: its LRU and memcg charge go too.
        for tail in orphans {
            self.folios.get_mut(tail).refcount = 1;
            self.folio_put(tail);
        }
        if swapcache {
            // free_page_and_swap_cache of each tail, with the split's
            // reference: one no PTE maps whose slot no swap PTE holds
            // leaves the swap cache, and is freed unless listed.
            for tail in head + 1..head + nr {
                if self.folios.get(tail).mapcount == 0 {
                    self.folios.get_mut(tail).refcount += 1;
                    self.free_swap_cache(tail);
                    self.folio_put(tail);
                }
            }
        }
        if f.order == 9 {
            self.vm.inc(Vm::ThpSplitPage);
        }
        if later {
            self.vm.inc(mthp_item(f.order, MthpStat::Split));
            self.vm.add(mthp_item(f.order, MthpStat::NrAnon), -1);
            // remap_page(RMP_USE_SHARED_ZEROPAGE): each page still mapped
            // but never written maps the shared zero page instead.
            for i in 0..nr {
                self.remap_unused_to_zeropage(head + i);
            }
        }
        self.anon_vma_unlock_write(anon_vma);
        true
    }

    /// `unmap_folio` for an anonymous THP before a split: every PMD of it
    /// split; the PTEs' migration entries are put back as they were, a
    /// dirty one having dirtied the folio (`try_to_migrate_one`).
    /// Simplification: the PTEs are left in place rather than replaced and
    /// restored; what the round trip changes is the folio's dirty bit and
    /// the deferred split count below.
    fn unmap_folio_anon(&mut self, head: Pfn) {
        let av = self.folios.get(head).mapping;
        let vmas = self.anon_vmas[av as usize].vmas.clone();
        let mut dirty = false;
        for v in vmas {
            let Some((lo, hi)) = self.anon_folio_range(head, v) else {
                continue;
            };
            // try_to_migrate_one's range.
            self.mmu_notifier_invalidate_range(v, lo, hi - lo);
            let mut idx = lo;
            while idx < hi {
                let pte = self.vmas[v as usize].ptes[idx];
                let mine = self.maps_folio(pte, head);
                if mine && pte & PTE_PMD != 0 {
                    self.split_huge_pmd_anon(v, idx);
                    continue;
                }
                if mine {
                    self.charge_cost(Fn::TryToUnmap, self.costs.unmap_one);
                    dirty |= pte & PTE_DIRTY != 0;
                }
                idx += 1;
            }
        }
        if dirty {
            self.folios.get_mut(head).set(PG_DIRTY);
        }
        // Each PTE became a migration entry through page_remove_rmap: a
        // page left with no mapping queues the THP for a deferred split
        // (skipped in the swap cache), which the split then undoes. On
        // 6.12 that needs a page unmapped while another is still mapped:
        // two pages mapped at least.
        if self.release.deferred_split_partially_mapped {
            let nr = self.folios.get(head).nr_pages();
            let mapped = (0..nr)
                .filter(|&i| self.folios.page_mapcount(head + i) > 0)
                .count();
            if mapped >= 2 {
                self.deferred_split_folio(head);
            }
        } else if self.folios.get(head).mapcount > 0 {
            self.deferred_split_huge_page(head);
        }
    }
}

impl Kernel {
    /// `deferred_split_count`: THPs queued for `memcg`.
    pub(super) fn deferred_split_count(&self, memcg: u16) -> usize {
        self.huge
            .deferred_split
            .iter()
            .filter(|&&p| self.folios.get(p).memcg == memcg)
            .count()
    }

    /// `deferred_split_scan`: up to `nr` of the memcg's queued THPs, oldest
    /// first, each split if it can be (`split_huge_page` takes it off the
    /// queue); those that cannot go back to the queue's tail. Returns the
    /// THPs split, or None (SHRINK_STOP) when none was and the queue is
    /// empty.
    pub(super) fn deferred_split_scan(&mut self, memcg: u16, nr: usize) -> Option<u64> {
        let picked: Vec<Pfn> = self
            .huge
            .deferred_split
            .iter()
            .copied()
            .filter(|&p| self.folios.get(p).memcg == memcg)
            .take(nr)
            .collect();
        let mut split = 0;
        for &head in &picked {
            self.charge_cost(Fn::SplitHugePage, self.costs.lru_move);
            if self.folios.get(head).test(PG_LOCKED) {
                continue;
            }
            self.folios.get_mut(head).refcount += 1;
            if self.split_huge_page_anon(head, None) {
                split += 1;
            }
            self.folio_put(head);
        }
        // list_splice_tail: the ones still queued go to the tail.
        let left: Vec<Pfn> = picked
            .into_iter()
            .filter(|&p| self.folios.get(p).test(PG_DEFERRED_SPLIT))
            .collect();
        self.huge.deferred_split.retain(|p| !left.contains(p));
        self.huge.deferred_split.extend_from_slice(&left);
        if split == 0 && self.deferred_split_count(memcg) == 0 {
            return None;
        }
        Some(split)
    }
}

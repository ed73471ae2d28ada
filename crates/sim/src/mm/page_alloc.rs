//! Free memory: zones, watermarks, the allocation fast and slow paths.
//!
//! Order-0 pages pass through per-CPU page lists (pcp) as in 6.1: an
//! allocation takes from the CPU's list, refilled `batch` pages at a time
//! from the zone; a free goes onto it and a full list returns pages to the
//! zone in bulk. Pages on pcp lists are not in NR_FREE_PAGES, so watermark
//! checks do not see them.
//!
//! The zone's free memory is a buddy allocator (`free_area[order]`, orders
//! 0 to 10): an allocation takes the smallest block that fits and splits
//! the rest down (`expand`), a free merges a block with its free buddy
//! as long as it can (`__free_one_page`). Simplifications: one migratetype
//! (every page the simulator allocates is movable, so there is no fallback
//! and no pageblock stealing), no compaction, and large allocations do not
//! pass through the per-CPU lists (6.1 keeps orders up to 3 there too:
//! which frames a large folio gets cannot change a counter).

use super::folio::*;
use super::oom_kill::{Constraint, Oom};
use crate::kernel::Kernel;
use crate::vmstat::Vm;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ZoneType {
    Dma = 0,
    Dma32 = 1,
    Normal = 2,
}

pub const WMARK_MIN: usize = 0;
pub const WMARK_LOW: usize = 1;
pub const WMARK_HIGH: usize = 2;
/// ALLOC_NO_WATERMARKS: any free page will do.
const NO_WATERMARKS: usize = usize::MAX;
/// ALLOC_OOM: an OOM victim may take the min watermark's lower half.
const OOM_RESERVE: usize = usize::MAX - 1;

/// `sysctl_lowmem_reserve_ratio` defaults (DMA, DMA32, NORMAL).
const LOWMEM_RESERVE_RATIO: [u64; 3] = [256, 256, 32];

/// A CPU's `per_cpu_pages` for one zone (the movable order-0 list; every
/// page the simulator allocates is movable).
#[derive(Clone, Default)]
pub struct Pcp {
    pub list: Vec<Pfn>,
    pub high: u64,
    pub batch: u64,
    pub free_factor: u32,
}

/// MAX_ORDER in 6.1: blocks of orders 0 to MAX_ORDER - 1 (4 MiB).
pub const MAX_ORDER: usize = 11;

/// One order's free blocks: a doubly linked list through the head
/// frames' `prev`/`next`.
#[derive(Clone, Copy)]
pub struct FreeArea {
    pub head: Pfn,
    pub nr_free: u64,
}

/// CONFIG_PCP_BATCH_SCALE_MAX.
const PCP_BATCH_SCALE_MAX: u32 = 5;

pub struct Zone {
    pub ztype: ZoneType,
    /// Per CPU.
    pub pcp: Vec<Pcp>,
    /// ZONE_RECLAIM_ACTIVE: kswapd is balancing the node (pcp lists shrink).
    pub reclaim_active: bool,
    /// Frames `start..end` of the folio table belong to the zone.
    pub start: Pfn,
    pub end: Pfn,
    pub managed: u64,
    /// NR_FREE_PAGES of the zone (pages, not blocks).
    pub nr_free: u64,
    pub free_area: [FreeArea; MAX_ORDER],
    /// The max-order blocks boot freed that no allocation has taken yet:
    /// `lazy_next..lazy_end`, in blocks of MAX_ORDER - 1, ascending. They
    /// are the tail of `free_area[MAX_ORDER - 1]`'s list (boot lists them
    /// lowest first, allocations take from the front, frees go on the
    /// front) and are counted in its `nr_free`, but their frames' records
    /// are written only when the front reaches them, so host memory grows
    /// with what the workload uses, not with machine.memory.
    pub lazy_next: Pfn,
    pub lazy_end: Pfn,
    pub watermark: [u64; 3],
    /// Pages kept back from allocations whose highest usable zone is `[j]`.
    pub lowmem_reserve: [u64; 3],
}

impl Zone {
    pub fn new(ztype: ZoneType, start: Pfn, end: Pfn, cpus: usize) -> Self {
        Zone {
            ztype,
            pcp: vec![Pcp::default(); cpus],
            reclaim_active: false,
            start,
            end,
            managed: (end - start) as u64,
            nr_free: 0,
            free_area: [FreeArea {
                head: NIL,
                nr_free: 0,
            }; MAX_ORDER],
            lazy_next: start,
            lazy_end: start,
            watermark: [0; 3],
            lowmem_reserve: [0; 3],
        }
    }

    pub fn name(&self) -> &'static str {
        match self.ztype {
            ZoneType::Dma => "DMA",
            ZoneType::Dma32 => "DMA32",
            ZoneType::Normal => "Normal",
        }
    }

    /// `zone_watermark_ok` for order 0: free pages above the mark plus the
    /// reserve held against allocations that could use higher zones.
    pub fn watermark_ok(&self, mark: u64, highest: usize) -> bool {
        self.nr_free > mark + self.lowmem_reserve[highest]
    }

    /// `__zone_watermark_ok` for `order`: the pages left after taking the
    /// block clear the mark, and a free block of at least that order
    /// exists.
    pub fn watermark_ok_order(&self, mark: u64, highest: usize, order: usize) -> bool {
        let free = self.nr_free as i64 - ((1i64 << order) - 1);
        if free <= (mark + self.lowmem_reserve[highest]) as i64 {
            return false;
        }
        order == 0 || self.free_area[order..].iter().any(|a| a.nr_free > 0)
    }
}

/// The allocation context of a caller, as far as reclaim decisions go.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Gfp {
    /// GFP_HIGHUSER_MOVABLE: user pages; may wake kswapd and reclaim directly.
    HighUserMovable,
    /// A kernel allocation that must not recurse into reclaim (boot-time
    /// kernel memory): low, then min watermark, no direct reclaim.
    NoDirectReclaim,
    /// An allocation from reclaim itself (zram's pool during swap-out):
    /// the reclaimer runs with PF_MEMALLOC, which grants ALLOC_NO_WATERMARKS.
    Memalloc,
}

pub fn alloc_counter(z: ZoneType) -> Vm {
    match z {
        ZoneType::Dma => Vm::PgallocDma,
        ZoneType::Dma32 => Vm::PgallocDma32,
        ZoneType::Normal => Vm::PgallocNormal,
    }
}

/// `zone_batchsize`: pages moved between a pcp list and the zone at once.
fn zone_batchsize(managed: u64) -> u64 {
    let batch = ((managed >> 10).min(256) / 4).max(1);
    let b = batch + batch / 2;
    // rounddown_pow_of_two(b) - 1
    (1u64 << (63 - b.leading_zeros())) - 1
}

/// `zone_set_pageset_high_and_batch`: high (`zone_highsize`) = the low
/// watermark, or with vm.percpu_pagelist_high_fraction the managed pages
/// over it, split over the CPUs, at least four batches.
fn zone_set_pageset_high_and_batch(z: &mut Zone, high_fraction: u32) {
    let batch = zone_batchsize(z.managed).max(1);
    let cpus = z.pcp.len().max(1) as u64;
    let total = match high_fraction {
        0 => z.watermark[WMARK_LOW],
        f => z.managed / f as u64,
    };
    let high = (total / cpus).max(batch << 2);
    for p in &mut z.pcp {
        p.batch = batch;
        p.high = high;
    }
}

/// `nr_pcp_free`: how many pages a full list returns, growing with
/// consecutive frees (`free_factor`) between a batch and high − batch.
fn nr_pcp_free(pcp: &mut Pcp, high: u64) -> u64 {
    if high < pcp.batch {
        return 1;
    }
    let min_nr = pcp.batch;
    let max_nr = high - pcp.batch;
    let batch = pcp.batch << pcp.free_factor;
    if batch < max_nr && pcp.free_factor < PCP_BATCH_SCALE_MAX {
        pcp.free_factor += 1;
    }
    batch.max(min_nr).min(max_nr.max(min_nr))
}

/// `int_sqrt`: the largest r with r² ≤ x.
pub fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

impl Kernel {
    /// `nr_free_buffer_pages`: managed pages above the high watermark in
    /// the zones GFP_USER can use (all of ours).
    fn nr_free_buffer_pages(&self) -> u64 {
        self.zones
            .iter()
            .map(|z| z.managed.saturating_sub(z.watermark[WMARK_HIGH]))
            .sum()
    }

    /// `calculate_min_free_kbytes`.
    pub fn calculate_min_free_kbytes(&self) -> u64 {
        let lowmem_kbytes = self.nr_free_buffer_pages() * 4;
        int_sqrt(lowmem_kbytes * 16).clamp(128, 262_144)
    }

    /// khugepaged's `set_recommended_min_free_kbytes` with THP enabled, as
    /// Debian's kernel boots: two pageblocks per zone plus fallback room,
    /// capped at 5% of lowmem.
    pub fn thp_recommended_min_free_kbytes(&self) -> u64 {
        const PAGEBLOCK_PAGES: u64 = 512;
        const MIGRATE_PCPTYPES: u64 = 3;
        let nr_zones = self.zones.iter().filter(|z| z.managed > 0).count() as u64;
        let rec = PAGEBLOCK_PAGES * nr_zones * 2
            + PAGEBLOCK_PAGES * nr_zones * MIGRATE_PCPTYPES * MIGRATE_PCPTYPES;
        rec.min(self.nr_free_buffer_pages() / 20) * 4
    }

    /// `__setup_per_zone_wmarks` and `setup_per_zone_lowmem_reserve`.
    pub fn setup_per_zone_wmarks(&mut self, min_free_kbytes: u64) {
        let pages_min = min_free_kbytes / 4;
        let lowmem: u64 = self.zones.iter().map(|z| z.managed).sum();
        let wsf = self.sysctl.watermark_scale_factor as u64;
        for z in &mut self.zones {
            let min = pages_min * z.managed / lowmem.max(1);
            let gap = (min >> 2).max(z.managed * wsf / 10_000);
            z.watermark = [min, min + gap, min + 2 * gap];
        }
        let fraction = self.sysctl.percpu_pagelist_high_fraction;
        for z in &mut self.zones {
            zone_set_pageset_high_and_batch(z, fraction);
        }
        let n = self.zones.len();
        for i in 0..n {
            let mut above = 0;
            for j in i + 1..n {
                above += self.zones[j].managed;
                self.zones[i].lowmem_reserve[j] =
                    above / LOWMEM_RESERVE_RATIO[self.zones[i].ztype as usize];
            }
        }
    }

    /// Index of the highest zone user allocations may use.
    pub fn highest_zoneidx(&self) -> usize {
        self.zones.len() - 1
    }

    /// `get_page_from_freelist` for order 0: the first zone of the zonelist
    /// (highest first) whose free pages clear `mark`.
    fn get_page_from_freelist(&mut self, mark: usize) -> Option<Pfn> {
        let highest = self.highest_zoneidx();
        for zi in (0..=highest).rev() {
            let z = &self.zones[zi];
            let ok = match mark {
                NO_WATERMARKS => true,
                OOM_RESERVE => {
                    let min = z.watermark[WMARK_MIN];
                    z.watermark_ok(min - min / 2, highest)
                }
                _ => z.watermark_ok(z.watermark[mark], highest),
            };
            if z.nr_free == 0 || !ok {
                continue;
            }
            return Some(self.rmqueue(zi));
        }
        None
    }

    /// `rmqueue_pcplist`: a page from this CPU's list, refilled from the
    /// zone `batch` pages at a time (`rmqueue_bulk`).
    fn rmqueue(&mut self, zi: usize) -> Pfn {
        let cpu = self.cur_cpu;
        if self.zones[zi].pcp[cpu].list.is_empty() {
            // The buddy's work under zone->lock is priced in alloc_page's
            // per-page bundle, outside: the hold is empty (spinlock.rs).
            let lock = self.spin_lock(crate::cacheline::Line::ZoneLock(zi));
            let batch = self.zones[zi].pcp[cpu].batch.max(1);
            let mut taken = 0;
            for _ in 0..batch {
                let Some(p) = self.take_from_zone(zi) else {
                    break;
                };
                self.folios.get_mut(p).flags = PG_PCP;
                self.zones[zi].pcp[cpu].list.push(p);
                taken += 1;
            }
            // rmqueue_bulk's one NR_FREE_PAGES update for the batch.
            self.zone_stat_update(zi, Vm::NrFreePages, -taken);
            self.spin_unlock(lock);
        }
        let pcp = &mut self.zones[zi].pcp[cpu];
        pcp.free_factor >>= 1;
        let pfn = pcp
            .list
            .pop()
            .expect("a zone that passed the watermark has pages");
        self.vm.inc(alloc_counter(self.zones[zi].ztype));
        // Whoever takes a page fills it first (clear_page, a copy, a
        // read, a compressed object): a guest's frame is written.
        self.guest_frame(pfn, true);
        *self.folios.get_mut(pfn) = Folio {
            flags: 0,
            refcount: 1,
            ..Folio::FREE
        };
        self.charge_cost(crate::cost_model::Fn::PageAlloc, self.costs.alloc_page);
        pfn
    }

    /// One page off the zone's buddy lists, NR_FREE_PAGES − 1.
    fn take_from_zone(&mut self, zi: usize) -> Option<Pfn> {
        self.rmqueue_smallest(zi, 0)
    }

    /// `__rmqueue_smallest`: the first block of the smallest order at
    /// least `order` that has one, split down to `order` (`expand`: the
    /// upper halves go back on the lower lists). The frames keep their
    /// free-block state; the caller prepares them.
    fn rmqueue_smallest(&mut self, zi: usize, order: usize) -> Option<Pfn> {
        let z = &self.zones[zi];
        let lazy = z.lazy_next < z.lazy_end;
        let mut o = (order..MAX_ORDER)
            .find(|&o| z.free_area[o].head != NIL || (o == MAX_ORDER - 1 && lazy))?;
        if self.zones[zi].free_area[o].head == NIL {
            self.take_lazy_block(zi);
        }
        let pfn = self.zones[zi].free_area[o].head;
        self.del_free_block(zi, pfn, o);
        while o > order {
            o -= 1;
            let upper = pfn + (1 << o);
            self.add_free_block(zi, upper, o);
        }
        let n = 1u64 << order;
        self.zones[zi].nr_free -= n;
        // The per-CPU differential is the caller's: rmqueue_bulk updates
        // it once per batch.
        self.vm.add(Vm::NrFreePages, -(n as i64));
        Some(pfn)
    }

    /// The list's front has reached the blocks boot left unwritten: the
    /// next one gets the records freeing it would have given it, and
    /// becomes the list's (only) explicit entry.
    fn take_lazy_block(&mut self, zi: usize) {
        const N: Pfn = 1 << (MAX_ORDER - 1);
        let pfn = self.zones[zi].lazy_next;
        self.zones[zi].lazy_next += N;
        self.set_buddy_frames(pfn, N);
        // Counted already, as a lazy block.
        self.zones[zi].free_area[MAX_ORDER - 1].nr_free -= 1;
        self.add_free_block(zi, pfn, MAX_ORDER - 1);
    }

    /// Frames `pfn..pfn + n` as free pages inside a buddy block, before the
    /// block's head is listed (`add_free_block` writes the head's record).
    fn set_buddy_frames(&mut self, pfn: Pfn, n: Pfn) {
        for p in pfn..pfn + n {
            *self.folios.get_mut(p) = Folio {
                flags: PG_BUDDY | PG_TAIL,
                ..Folio::FREE
            };
        }
    }

    /// Links a free block's head onto `free_area[order]` (at the front, as
    /// `add_to_free_list`).
    fn add_free_block(&mut self, zi: usize, pfn: Pfn, order: usize) {
        let area = &mut self.zones[zi].free_area[order];
        let old = area.head;
        area.head = pfn;
        area.nr_free += 1;
        *self.folios.get_mut(pfn) = Folio {
            next: old,
            order: order as u8,
            ..Folio::FREE
        };
        if old != NIL {
            self.folios.get_mut(old).prev = pfn;
        }
    }

    /// Unlinks a free block's head from `free_area[order]`.
    fn del_free_block(&mut self, zi: usize, pfn: Pfn, order: usize) {
        let f = *self.folios.get(pfn);
        if f.prev != NIL {
            self.folios.get_mut(f.prev).next = f.next;
        } else {
            self.zones[zi].free_area[order].head = f.next;
        }
        if f.next != NIL {
            self.folios.get_mut(f.next).prev = f.prev;
        }
        self.zones[zi].free_area[order].nr_free -= 1;
        // Inside a larger block or allocated next: no longer a head.
        let f = self.folios.get_mut(pfn);
        f.prev = NIL;
        f.next = NIL;
        f.set(PG_TAIL);
    }

    /// `__free_one_page`: a block of `order` at `pfn` merges with its buddy while the buddy is a free
    /// block of the same order in the same zone, and goes on its list.
    fn free_one_page(&mut self, zi: usize, mut pfn: Pfn, mut order: usize) {
        self.set_buddy_frames(pfn, 1 << order);
        self.zones[zi].nr_free += 1 << order;
        self.mod_zone_page_state(zi, Vm::NrFreePages, 1 << order);
        while order < MAX_ORDER - 1 {
            let buddy = pfn ^ (1 << order);
            let z = &self.zones[zi];
            if buddy < z.start || buddy >= z.end {
                break;
            }
            let b = self.folios.get(buddy);
            if !b.test(PG_BUDDY) || b.test(PG_TAIL) || b.order as usize != order {
                break;
            }
            self.del_free_block(zi, buddy, order);
            pfn = pfn.min(buddy);
            order += 1;
        }
        self.add_free_block(zi, pfn, order);
    }

    /// `__alloc_pages` for an order-0 page: the fast path at the low
    /// watermark, then the slow path (wake kswapd, retry at min, direct
    /// reclaim, retry up to MAX_RECLAIM_RETRIES). None = out of memory.
    pub fn alloc_page(&mut self, gfp: Gfp) -> Option<Pfn> {
        // The fast path's cost is a leaf "__alloc_pages" of the caller; the
        // profile merges it with the traced slow path of the same name.
        if let Some(p) = self.get_page_from_freelist(WMARK_LOW) {
            return Some(p);
        }
        self.traced(crate::cost_model::Fn::PageAlloc, |k| {
            k.alloc_pages_slowpath(gfp)
        })
    }

    /// `__alloc_pages_slowpath`, entered once the fast path at the low
    /// watermark (in `alloc_page`) has failed.
    fn alloc_pages_slowpath(&mut self, gfp: Gfp) -> Option<Pfn> {
        self.wakeup_kswapd();
        if gfp == Gfp::Memalloc {
            return self.get_page_from_freelist(NO_WATERMARKS);
        }
        if let Some(p) = self.get_page_from_freelist(WMARK_MIN) {
            return Some(p);
        }
        if gfp == Gfp::NoDirectReclaim {
            return None;
        }
        loop {
            if let Some(p) = self.alloc_direct_reclaim_retries() {
                return Some(p);
            }
            // __alloc_pages_may_oom: one more try at the high watermark (a
            // kill elsewhere may have freed memory), then the OOM killer.
            if let Some(p) = self.get_page_from_freelist(WMARK_HIGH) {
                return Some(p);
            }
            match self.out_of_memory(Constraint::None) {
                Ok(Oom::Progress) if self.current_is_dying() => return self.alloc_oom_victim(),
                Ok(Oom::Progress) => {}
                // A victim has yet to exit: the allocation fails and a
                // fault sleeps until the victims have run (oom_kill.rs).
                Ok(Oom::Waiting) => {
                    self.oom.set_waiting();
                    return None;
                }
                Ok(Oom::Nothing) => return None,
                Err(e) => {
                    self.unmodelled.get_or_insert(e.to_string());
                    return None;
                }
            }
        }
    }

    /// The slow path's reclaim loop: direct reclaim until a page comes or
    /// MAX_RECLAIM_RETRIES rounds in a row reclaimed nothing.
    fn alloc_direct_reclaim_retries(&mut self) -> Option<Pfn> {
        const MAX_RECLAIM_RETRIES: u32 = 16;
        let mut no_progress = 0;
        while no_progress < MAX_RECLAIM_RETRIES {
            let reclaimed = self.alloc_direct_reclaim(WMARK_MIN);
            if let Some(p) = reclaimed.0 {
                return Some(p);
            }
            if reclaimed.1 == 0 {
                no_progress += 1;
            }
        }
        None
    }

    /// `__alloc_pages_direct_reclaim`: reclaim, then a page at `mark`
    /// (again after draining the per-CPU lists); and what reclaim freed.
    /// All of it is a memory stall.
    fn alloc_direct_reclaim(&mut self, mark: usize) -> (Option<Pfn>, u64) {
        let psi = self.psi_memstall_enter();
        let reclaimed = self.traced(crate::cost_model::Fn::TryToFreePages, |k| {
            k.try_to_free_pages()
        });
        let mut page = self.get_page_from_freelist(mark);
        if page.is_none() {
            // Pages may sit on pcp lists.
            self.drain_all_pages();
            page = self.get_page_from_freelist(mark);
        }
        self.psi_memstall_leave(psi);
        (page, reclaimed)
    }

    /// The retry of an OOM victim (`__gfp_pfmemalloc_flags` gives it
    /// ALLOC_OOM): the reserve, one more direct reclaim, then no page
    /// ("avoid allocations with no watermarks from looping endlessly").
    fn alloc_oom_victim(&mut self) -> Option<Pfn> {
        if let Some(p) = self.get_page_from_freelist(OOM_RESERVE) {
            return Some(p);
        }
        self.alloc_direct_reclaim(OOM_RESERVE).0
    }

    /// `__folio_alloc` of a large folio (order > 0) for the page cache or
    /// shmem: a block from the first zone whose free pages clear the low
    /// watermark for that order; None when none has one. Simplification:
    /// no reclaim or compaction for it — the callers fall back to order 0
    /// (readahead's `page_cache_ra_order`, shmem's huge allocation with
    /// THP's default defrag, GFP_TRANSHUGE_LIGHT, which does not reclaim
    /// either).
    pub fn alloc_large_folio(&mut self, order: usize) -> Option<Pfn> {
        debug_assert!(order > 0 && order < MAX_ORDER);
        let highest = self.highest_zoneidx();
        let zi = (0..=highest).rev().find(|&zi| {
            let z = &self.zones[zi];
            z.watermark_ok_order(z.watermark[WMARK_LOW], highest, order)
        })?;
        let head = self.rmqueue_smallest(zi, order)?;
        for p in head..head + (1 << order) as Pfn {
            self.guest_frame(p, true);
        }
        self.zone_stat_update(zi, Vm::NrFreePages, -(1 << order));
        self.prep_compound(head, order);
        self.vm.add(alloc_counter(self.zones[zi].ztype), 1 << order);
        self.charge_cost(
            crate::cost_model::Fn::PageAlloc,
            self.costs.alloc_page + self.costs.folio_tail * ((1 << order) - 1),
        );
        Some(head)
    }

    /// `prep_compound_page`: the head carries the folio, each tail points
    /// to it.
    fn prep_compound(&mut self, head: Pfn, order: usize) {
        *self.folios.get_mut(head) = Folio {
            flags: 0,
            refcount: 1,
            order: order as u8,
            ..Folio::FREE
        };
        for p in head + 1..head + (1 << order) {
            // `prev` of the first tail counts the head page's PTEs
            // (FolioTable::page_mapcount).
            *self.folios.get_mut(p) = Folio {
                flags: PG_TAIL,
                next: head,
                prev: 0,
                ..Folio::FREE
            };
        }
    }

    /// Frees a folio of any order: order 0 through the per-CPU list, a
    /// large one straight back to the buddy lists (`free_one_page`).
    pub fn free_folio_pages(&mut self, head: Pfn) {
        let order = self.folios.get(head).order as usize;
        if order == 0 {
            return self.free_page(head);
        }
        self.vm.add(Vm::Pgfree, 1 << order);
        self.charge_cost(
            crate::cost_model::Fn::PageFree,
            self.costs.free_page + self.costs.folio_tail * ((1 << order) - 1),
        );
        let zi = self.zone_of(head);
        self.free_one_page(zi, head, order);
    }

    /// `free_unref_page`: onto this CPU's list; a list at its high mark
    /// returns `nr_pcp_free` pages to the zone.
    pub fn free_page(&mut self, pfn: Pfn) {
        self.vm.inc(Vm::Pgfree);
        self.charge_cost(crate::cost_model::Fn::PageFree, self.costs.free_page);
        let zi = self.zone_of(pfn);
        let cpu = self.cur_cpu;
        *self.folios.get_mut(pfn) = Folio {
            flags: PG_PCP,
            ..Folio::FREE
        };
        let reclaim_active = self.zones[zi].reclaim_active;
        let pcp = &mut self.zones[zi].pcp[cpu];
        pcp.list.push(pfn);
        // nr_pcp_high: while kswapd balances, lists are kept short.
        let high = if reclaim_active {
            (pcp.batch << 2).min(pcp.high)
        } else {
            pcp.high
        };
        if pcp.list.len() as u64 >= high {
            let n = nr_pcp_free(pcp, high);
            self.free_pcppages_bulk(zi, cpu, n);
        }
    }

    /// `free_pcppages_bulk`: the oldest `n` pages of a CPU's list go back to
    /// the zone.
    fn free_pcppages_bulk(&mut self, zi: usize, cpu: usize, n: u64) {
        let n = (n as usize).min(self.zones[zi].pcp[cpu].list.len());
        if n == 0 {
            return;
        }
        // As rmqueue's refill: free_page's bundle prices the buddy's work.
        let lock = self.spin_lock(crate::cacheline::Line::ZoneLock(zi));
        let pages: Vec<Pfn> = self.zones[zi].pcp[cpu].list.drain(..n).collect();
        for p in pages {
            self.push_free(p);
        }
        self.spin_unlock(lock);
    }

    /// `drain_all_pages`: every CPU's lists back to their zones.
    pub fn drain_all_pages(&mut self) {
        for zi in 0..self.zones.len() {
            for cpu in 0..self.zones[zi].pcp.len() {
                let n = self.zones[zi].pcp[cpu].list.len() as u64;
                self.free_pcppages_bulk(zi, cpu, n);
            }
        }
    }

    /// Sets ZONE_RECLAIM_ACTIVE on every zone (kswapd's `balance_pgdat`).
    pub fn set_reclaim_active(&mut self, on: bool) {
        for z in &mut self.zones {
            z.reclaim_active = on;
        }
    }

    /// `memblock_free_all`: frames `0..end` into the buddy lists as the
    /// largest aligned blocks each zone holds (what freeing them one by
    /// one would merge into), lowest frames first in each list. The
    /// max-order blocks, one aligned run, are listed lazily
    /// (`Zone::lazy_next`): their records are written when taken.
    pub fn free_all_at_boot(&mut self, end: Pfn) {
        const TOP: usize = MAX_ORDER - 1;
        for zi in (0..self.zones.len()).rev() {
            let (start, zend) = (self.zones[zi].start, self.zones[zi].end.min(end));
            if start >= zend {
                continue;
            }
            // The blocks below the first max-order boundary, the run of
            // max-order blocks, and the blocks after it: at most 2 × TOP
            // small ones, so boot costs no time or memory per frame.
            let top = 1u64 << TOP;
            let run_start = (start as u64).div_ceil(top) * top;
            let run_end = (zend as u64 / top * top).max(run_start);
            let mut small = Vec::new();
            let mut pfn = start as u64;
            while pfn < zend as u64 {
                if pfn == run_start && run_end > run_start {
                    pfn = run_end;
                    continue;
                }
                let mut order = TOP.min(pfn.trailing_zeros() as usize);
                while pfn + (1 << order) > zend as u64 {
                    order -= 1;
                }
                small.push((pfn as Pfn, order));
                pfn += 1 << order;
            }
            let z = &mut self.zones[zi];
            if run_end > run_start {
                z.lazy_next = run_start as Pfn;
                z.lazy_end = run_end as Pfn;
                z.free_area[TOP].nr_free += (run_end - run_start) / top;
                z.nr_free += run_end - run_start;
                self.vm.add(Vm::NrFreePages, (run_end - run_start) as i64);
            }
            for &(pfn, order) in small.iter().rev() {
                let n = 1u64 << order;
                self.zones[zi].nr_free += n;
                self.vm.add(Vm::NrFreePages, n as i64);
                self.set_buddy_frames(pfn, 1 << order);
                self.add_free_block(zi, pfn, order);
            }
        }
    }

    fn push_free(&mut self, pfn: Pfn) {
        let zi = self.zone_of(pfn);
        self.free_one_page(zi, pfn, 0);
    }

    /// The listed free blocks of zone `zi`, as (head, order), for the
    /// checker (the lazy tail of the max-order list is `lazy_blocks`).
    pub fn free_blocks(&self, zi: usize) -> Vec<(Pfn, usize)> {
        let mut out = Vec::new();
        let z = &self.zones[zi];
        for (o, area) in z.free_area.iter().enumerate() {
            let mut p = area.head;
            while p != NIL {
                out.push((p, o));
                p = self.folios.get(p).next;
            }
        }
        out
    }

    /// The max-order blocks of zone `zi` boot freed and no allocation has
    /// taken, as (head, order): the tail of `free_area[MAX_ORDER - 1]`'s
    /// list, beyond what `free_blocks` walks.
    pub fn lazy_blocks(&self, zi: usize) -> impl Iterator<Item = (Pfn, usize)> {
        let z = &self.zones[zi];
        (z.lazy_next..z.lazy_end)
            .step_by(1 << (MAX_ORDER - 1))
            .map(|p| (p, MAX_ORDER - 1))
    }

    pub fn zone_of(&self, pfn: Pfn) -> usize {
        self.zones
            .iter()
            .position(|z| pfn >= z.start && pfn < z.end)
            .expect("pfn in a zone")
    }

    pub fn nr_free_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.nr_free).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel() -> Kernel {
        crate::kernel::test_kernel(1, "6.1")
    }

    fn blocks(k: &Kernel) -> Vec<Vec<(Pfn, usize)>> {
        let mut all: Vec<_> = (0..k.zones.len())
            .map(|z| {
                k.free_blocks(z)
                    .into_iter()
                    .chain(k.lazy_blocks(z))
                    .collect::<Vec<_>>()
            })
            .collect();
        for b in &mut all {
            b.sort();
        }
        all
    }

    #[test]
    fn large_folio_splits_a_block_and_merges_back_when_freed() {
        let mut k = kernel();
        crate::check::check_all(&k).expect("boot state");
        let before = blocks(&k);
        let free = k.nr_free_pages();
        let head = k.alloc_large_folio(4).expect("an order-4 block");
        assert_eq!(head % 16, 0, "aligned to its order");
        assert_eq!(k.nr_free_pages(), free - 16);
        assert_eq!(k.folios.get(head).order, 4);
        for p in head + 1..head + 16 {
            let t = k.folios.get(p);
            assert!(t.test(PG_TAIL) && t.next == head, "tail {p}: {t:?}");
        }
        // The pages are the folio's until it is freed (the checker is run
        // on a kernel whose tables know nothing of it, so not here).
        k.free_folio_pages(head);
        assert_eq!(k.nr_free_pages(), free);
        assert_eq!(blocks(&k), before, "the split halves merged back");
        crate::check::check_all(&k).expect("after free");
    }

    #[test]
    fn a_high_fraction_sizes_the_lists_from_the_managed_pages() {
        // zone_highsize: the low watermark over the CPUs by default; with
        // vm.percpu_pagelist_high_fraction, managed / fraction over the
        // CPUs; never below four batches.
        let mut k = crate::kernel::test_kernel(2, "6.1");
        let zi = k.zones.len() - 1;
        let (managed, low, batch) = {
            let z = &k.zones[zi];
            (z.managed, z.watermark[WMARK_LOW], z.pcp[0].batch)
        };
        assert_eq!(k.zones[zi].pcp[1].high, (low / 2).max(batch << 2));
        k.write_setting(&mmsim_spec::Setting::PercpuPagelistHighFraction(8))
            .expect("a sysctl");
        assert_eq!(k.zones[zi].pcp[0].high, (managed / 8 / 2).max(batch << 2));
        assert!(managed / 8 / 2 > batch << 2, "the fraction sets it here");
        k.write_setting(&mmsim_spec::Setting::PercpuPagelistHighFraction(
            i32::MAX as u32,
        ))
        .expect("a sysctl");
        assert_eq!(k.zones[zi].pcp[0].high, batch << 2, "four batches at least");
    }

    #[test]
    fn order_0_pages_merge_into_their_buddies() {
        let mut k = kernel();
        k.drain_all_pages();
        let before = blocks(&k);
        // Sixteen single pages out (through the pcp refill), back in, and
        // every pcp list drained: the zone's blocks are whole again.
        let pages: Vec<Pfn> = (0..16)
            .map(|_| k.alloc_page(Gfp::HighUserMovable).expect("a page"))
            .collect();
        for p in pages {
            k.free_page(p);
        }
        k.drain_all_pages();
        assert_eq!(blocks(&k), before);
    }

    #[test]
    fn watermark_for_an_order_needs_a_block_that_large() {
        let mut z = Zone::new(ZoneType::Normal, 0, 1024, 1);
        z.nr_free = 600;
        z.free_area[0].nr_free = 600;
        assert!(z.watermark_ok_order(100, 2, 0));
        assert!(
            !z.watermark_ok_order(100, 2, 3),
            "no block of order 3 or more"
        );
        z.free_area[5].nr_free = 1;
        assert!(z.watermark_ok_order(100, 2, 3));
        assert!(
            !z.watermark_ok_order(590, 2, 5),
            "600 - 31 pages left is under 590"
        );
    }
}

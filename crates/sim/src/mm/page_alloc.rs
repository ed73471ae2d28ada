//! Free memory: zones, watermarks, the allocation fast and slow paths.
//!
//! Simplifications (each cannot change a reported counter by more than the
//! per-CPU page lists hold, a few hundred pages):
//! - no buddy orders: every folio is order 0 today, so a free list per zone;
//! - no per-CPU page lists (pcp): freed pages return to the zone at once.

use super::folio::*;
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

/// `sysctl_lowmem_reserve_ratio` defaults (DMA, DMA32, NORMAL).
const LOWMEM_RESERVE_RATIO: [u64; 3] = [256, 256, 32];

pub struct Zone {
    pub ztype: ZoneType,
    /// Frames `start..end` of the folio table belong to the zone.
    pub start: Pfn,
    pub end: Pfn,
    pub managed: u64,
    pub nr_free: u64,
    free_head: Pfn,
    pub watermark: [u64; 3],
    /// Pages kept back from allocations whose highest usable zone is `[j]`.
    pub lowmem_reserve: [u64; 3],
}

impl Zone {
    pub fn new(ztype: ZoneType, start: Pfn, end: Pfn) -> Self {
        Zone {
            ztype,
            start,
            end,
            managed: (end - start) as u64,
            nr_free: 0,
            free_head: NIL,
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
            if z.nr_free == 0
                || (mark != NO_WATERMARKS && !z.watermark_ok(z.watermark[mark], highest))
            {
                continue;
            }
            return Some(self.rmqueue(zi));
        }
        None
    }

    fn rmqueue(&mut self, zi: usize) -> Pfn {
        let z = &mut self.zones[zi];
        let pfn = z.free_head;
        debug_assert_ne!(pfn, NIL);
        let ztype = z.ztype;
        z.free_head = self.folios.get(pfn).next;
        z.nr_free -= 1;
        self.vm.add(Vm::NrFreePages, -1);
        self.vm.inc(alloc_counter(ztype));
        let f = self.folios.get_mut(pfn);
        *f = Folio {
            flags: 0,
            refcount: 1,
            ..Folio::FREE
        };
        self.charge_cost(crate::cost::Fn::PageAlloc, crate::cost::ALLOC_PAGE_NS);
        pfn
    }

    /// `__alloc_pages` for an order-0 page: the fast path at the low
    /// watermark, then the slow path (wake kswapd, retry at min, direct
    /// reclaim, retry up to MAX_RECLAIM_RETRIES). None = out of memory.
    pub fn alloc_page(&mut self, gfp: Gfp) -> Option<Pfn> {
        if gfp == Gfp::Memalloc {
            if let Some(p) = self.get_page_from_freelist(WMARK_LOW) {
                return Some(p);
            }
            self.wakeup_kswapd();
            return self.get_page_from_freelist(NO_WATERMARKS);
        }
        if let Some(p) = self.get_page_from_freelist(WMARK_LOW) {
            return Some(p);
        }
        self.wakeup_kswapd();
        if let Some(p) = self.get_page_from_freelist(WMARK_MIN) {
            return Some(p);
        }
        if gfp == Gfp::NoDirectReclaim {
            return None;
        }
        const MAX_RECLAIM_RETRIES: u32 = 16;
        let mut no_progress = 0;
        while no_progress < MAX_RECLAIM_RETRIES {
            let reclaimed = self.try_to_free_pages();
            if let Some(p) = self.get_page_from_freelist(WMARK_MIN) {
                return Some(p);
            }
            if reclaimed == 0 {
                no_progress += 1;
            }
        }
        None
    }

    /// Returns a frame to its zone (`free_unref_page` without the pcp list).
    pub fn free_page(&mut self, pfn: Pfn) {
        self.push_free(pfn);
        self.vm.inc(Vm::Pgfree);
        self.charge_cost(crate::cost::Fn::PageFree, crate::cost::FREE_PAGE_NS);
    }

    /// Puts a frame on its zone's free list at boot (no event counters).
    pub fn add_free_at_boot(&mut self, pfn: Pfn) {
        self.push_free(pfn);
    }

    fn push_free(&mut self, pfn: Pfn) {
        let zi = self.zone_of(pfn);
        let z = &mut self.zones[zi];
        let head = z.free_head;
        z.free_head = pfn;
        z.nr_free += 1;
        *self.folios.get_mut(pfn) = Folio {
            next: head,
            ..Folio::FREE
        };
        self.vm.add(Vm::NrFreePages, 1);
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

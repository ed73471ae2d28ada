//! mm/zswap.c and mm/frontswap.c as Linux 6.1 has them: a compressed
//! cache in front of every swap device.
//!
//! - Store (`swap_writepage` → `frontswap_store` → `zswap_frontswap_store`,
//!   before any I/O): an entry the slot held before is dropped first; a
//!   THP is refused; over `max_pool_percent` of RAM the store is refused
//!   (`pool_limit_hit`) and the shrink worker queued, and after that
//!   stores are refused until the pool is under `accept_threshold_percent`
//!   of the limit. A same-filled page is kept as its value; any other is
//!   compressed and stored in the zpool (zbud: an 8-byte header with the
//!   swap entry in front, for writeback). The compressed length is charged
//!   to the page's memcg (`obj_cgroup_charge_zswap`: memory.current,
//!   memory.stat zswap and zswapped). A refused page goes on to the swap
//!   device.
//! - Load (`swap_readpage` → `frontswap_load`): decompressed, `zswpin`;
//!   the entry stays until the slot is freed (`swap_range_free` →
//!   `frontswap_invalidate_page`).
//! - The pool's pages come from the page allocator in reclaim's
//!   PF_MEMALLOC context (as zram's do); zbud counts no vmstat item,
//!   zsmalloc counts nr_zspages.
//!
//! Costs: a store is the profile's measured zram write of the same page
//! kind with the same compressor, a load its zram read (compression and
//! the allocator's store are the work of both; the block layer's share
//! of zram's is not zswap's, and is left in: the measured figure is what
//! there is).
//!
//! The shrink worker a full pool queues (`shrink_worker` →
//! `zpool_shrink(pool, 1)`) runs on the CPU that queued it: with zbud,
//! at the reclaimer's next `cond_resched` (the next folio of
//! `shrink_folio_list`), where the woken kworker preempts it; else before
//! the CPU's next scheduled entity, once however many stores queued it
//! meanwhile. (A real kworker that does not preempt at once runs at a
//! later tick: the QEMU oracle's runs show both.) zbud evicts one page
//! (`zbud_reclaim_page`, up to 8 tries from its LRU's tail): each of its
//! objects is written back (`zswap_writeback_entry`: a new swap-cache
//! page for the slot, charged to the slot's memcg, GFP_KERNEL, so it may
//! reclaim; the data decompressed into it; PG_reclaim; `__swap_writepage`
//! to the swap device; `written_back_pages`; the entry freed). An object
//! whose slot already has a swap-cache page (-EEXIST) or whose page cannot
//! be had (-ENOMEM) stays, and the page goes back to the LRU's head for
//! the next try. zsmalloc has no writeback in 6.1: its shrink fails. A
//! failed shrink counts in `reject_reclaim_fail`.
//!
//! 6.12 and 7.3 (`release.zswap_lru`): no frontswap. `swap_writepage`
//! calls `zswap_store` after the zeromap took zero pages; there are no
//! same-filled pages. Each stored entry goes on its memcg's LRU
//! (`zswap_list_lru`, oldest first) with its referenced bit set. A store
//! refused at the pool's limit (`zswap_check_limits`: the pool's pages
//! now, at or over `max_pool_percent` of RAM; accepting again at or under
//! `accept_threshold_percent` of that) queues the shrink worker, which
//! walks the memcgs round-robin from where it last stopped
//! (`zswap_next_shrink`), shrinking each (`shrink_memcg`: one entry in
//! 6.12, up to 32 in 7.3, from its LRU's head: a referenced entry loses
//! the bit and goes to the tail, any other goes to the tail and is
//! written back), until the pool is at or under the accept threshold or
//! 16 tries failed. A store over memory.zswap.max first shrinks its own
//! memcg once and is refused if that wrote nothing back. A load into the
//! swap cache takes the entry (exclusive loads: the folio dirty, the
//! entry freed); the synchronous zram fault of 6.12 reads into a folio
//! outside the cache and leaves it. `zswpwb` counts writebacks. 7.3
//! stores a large folio page by page (all or none), and a page that does
//! not compress below a page as it is (`stored_incompressible_pages`).
//! 6.12's worker is queued on an unbound workqueue and EEVDF lets the
//! reclaimer finish its slice: it preempts at the reclaimer's first folio
//! after the next scheduler tick (`zswap_queue_shrink`).
//!
//! Simplification: the worker is a kworker with no task; its time is
//! charged to the reclaimer it preempted, or to the CPU's next slice.
//! (6.12's shrink workqueue is unbound: on a machine with an idle CPU
//! the kworker would run there, beside the reclaimer; mmsim runs it on
//! the reclaimer's CPU, as 6.1's bound workqueue does.)

use super::folio::{
    Pfn, PG_DIRTY, PG_KERNEL, PG_LOCKED, PG_RECLAIM, PG_SWAPCACHE, PG_UPTODATE, PG_WRITEBACK,
};
use super::memcontrol::ROOT_MEMCG;
use super::page_alloc::Gfp;
use super::swapfile::{swp_offset, swp_type, SwpEntry};
use crate::cost_model::Fn;
use crate::dev::zbud::{self, ZbudPool, ZBUD_MAX_SIZE};
use crate::dev::zsmalloc::{ZsConfig, ZsPool};
use crate::kernel::Kernel;
use crate::machine_profile::KindCost;
use crate::membw::PAGE_BYTES;
use crate::vmstat::{Mc, Vm};
use crate::SimError;
use mmsim_spec::output::ZswapStats;
use mmsim_spec::Zpool;

const PAGE_SIZE: u32 = 4096;
/// `sizeof(struct zswap_header)`: the swap entry stored in front of the
/// data when the zpool can evict (zbud).
const ZSWAP_HEADER: u32 = 8;
/// A compressed length past the page: what the profile's "stored whole"
/// (zram's huge pages) becomes here, for the compressed length itself is
/// unknown beyond zs_huge_class_size; such content (random bytes) does
/// not compress, and both zpools refuse it.
const INCOMPRESSIBLE: u32 = PAGE_SIZE + 1;

/// Where an entry's data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handle {
    /// A same-filled page: its value only.
    Same,
    Zbud(zbud::Handle),
    /// The zspage holding it.
    Zs(u32),
}

/// A `struct zswap_entry`.
#[derive(Clone, Copy, Debug)]
struct Entry {
    handle: Handle,
    /// Compressed length (0: same-filled).
    length: u32,
    /// The page's memcg (`objcg`; the root has none: nothing charged).
    memcg: u16,
    /// The page's content token, what a load gives back.
    version: u32,
    /// The slot (`swpentry`): what writeback from the LRU writes to.
    swp: SwpEntry,
    /// Neighbours on its memcg's LRU (6.8+; NIL at the ends).
    lru_prev: u32,
    lru_next: u32,
    /// `referenced`: set at the store, cleared by the shrinker for a
    /// second chance.
    referenced: bool,
}

/// No entry (an LRU's end).
const NIL: u32 = u32::MAX;
/// `MAX_RECLAIM_RETRIES`: the shrink worker's failed tries.
const MAX_RECLAIM_RETRIES: u32 = 16;

/// Why `zswap_writeback_entry` wrote nothing back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WritebackErr {
    /// The slot has a swap-cache page already (-EEXIST): the page is
    /// warm again, being read back.
    Exist,
    /// No page could be had (-ENOMEM).
    NoMem,
}

/// `struct list_lru_one` of zswap's list (6.8+): a memcg's entries,
/// oldest first (NIL: empty).
#[derive(Clone, Copy, Debug)]
struct LruList {
    head: u32,
    tail: u32,
    nr_items: u32,
}

impl LruList {
    const EMPTY: LruList = LruList {
        head: NIL,
        tail: NIL,
        nr_items: 0,
    };
}

/// Why `shrink_memcg` wrote nothing back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ShrinkErr {
    /// The memcg's LRU is empty (-ENOENT).
    NoEntries,
    /// Entries were looked at, none written back (-EAGAIN).
    Again,
}

pub struct Zswap {
    pub params: mmsim_spec::Zswap,
    /// `zswap_trees`: per swap type, per slot, the entry's index + 1 (0:
    /// none). Sized at the device's first store.
    trees: Vec<Vec<u32>>,
    entries: Vec<Entry>,
    free_entries: Vec<u32>,
    zbud: ZbudPool,
    /// The swap slot each zbud object holds (`zswap_header`'s swpentry),
    /// by page index and buddy.
    zbud_swp: Vec<[SwpEntry; 2]>,
    zs: Option<ZsPool>,
    /// `zswap_pool_reached_full`.
    reached_full: bool,
    /// The shrink worker is queued (`queue_work` of a pending item does
    /// nothing).
    shrink_pending: bool,
    /// When the queued worker may preempt the reclaimer (6.12+: the next
    /// scheduler tick; 6.1: at once).
    shrink_due: u64,
    /// zbud pages the shrink worker freed since `pool_total_size` was
    /// last updated, which it still counts.
    freed_since_update: u64,
    /// The shrink worker is running.
    in_shrink_worker: bool,
    /// A store is writing back for memory.zswap.max (`shrink_memcg` in
    /// `zswap_store`, 6.12+): it runs in reclaim, with PF_MEMALLOC, so
    /// the swap-cache page it allocates neither reclaims nor fails its
    /// charge.
    pub(crate) pf_memalloc: bool,
    pub stats: ZswapStats,
    /// The compressor's cost per content kind id (0: token pages).
    kind_costs: Vec<KindCost>,
    /// `zswap_list_lru` (6.8+): per memcg, its entries; the root's holds
    /// the entries charged to no memcg.
    lru: Vec<LruList>,
    /// `zswap_lruvec_state.nr_disk_swapins` (6.8+), per memcg: pages read
    /// from the swap device since the shrinker last counted, the
    /// protection its count takes off the LRU.
    nr_disk_swapins: Vec<u64>,
    /// `zswap_next_shrink`: the memcg the shrink worker shrank last
    /// (None: start again at the root).
    next_shrink: Option<u16>,
}

impl Zswap {
    pub fn new(params: mmsim_spec::Zswap) -> Zswap {
        Zswap {
            params,
            trees: Vec::new(),
            entries: Vec::new(),
            free_entries: Vec::new(),
            zbud: ZbudPool::default(),
            zbud_swp: Vec::new(),
            zs: None,
            reached_full: false,
            shrink_pending: false,
            shrink_due: 0,
            freed_since_update: 0,
            in_shrink_worker: false,
            pf_memalloc: false,
            stats: ZswapStats::default(),
            kind_costs: Vec::new(),
            lru: Vec::new(),
            nr_disk_swapins: Vec::new(),
            next_shrink: None,
        }
    }

    fn lookup(&self, ty: usize, off: u32) -> Option<u32> {
        let e = *self.trees.get(ty)?.get(off as usize)?;
        (e != 0).then(|| e - 1)
    }

    /// Pool pages (`zswap_pool_total_size` / PAGE_SIZE).
    fn pool_pages(&self) -> u64 {
        match self.params.zpool {
            Zpool::Zbud => self.zbud.pages_nr,
            Zpool::Zsmalloc => self.zs.as_ref().map_or(0, |z| z.pages),
        }
    }

    /// `DIV_ROUND_UP(zswap_pool_total_size, PAGE_SIZE)`: the pool's size
    /// as last updated, which the limits read.
    fn total_size_pages(&self) -> u64 {
        self.stats.pool_total_size.div_ceil(PAGE_SIZE as u64)
    }

    /// Entries stored.
    pub fn nr_entries(&self) -> u64 {
        (self.entries.len() - self.free_entries.len()) as u64
    }
}

impl Kernel {
    /// Before the run: the compressor's cost of each page kind (token
    /// pages included) from the profile; Err where it has none.
    pub fn setup_zswap(
        &mut self,
        table: &crate::machine_profile::CompressTable,
    ) -> Result<(), SimError> {
        if !self.zswap.params.configured {
            return Ok(());
        }
        let comp = self.zswap.params.compressor;
        let mut costs =
            vec![crate::machine_profile::token_cost(table, comp).map_err(SimError::Spec)?];
        for &kind in self.contents.kinds.iter().skip(1) {
            costs.push(
                crate::machine_profile::kind_cost(table, comp, kind).map_err(SimError::Spec)?,
            );
        }
        self.zswap.kind_costs = costs;
        Ok(())
    }

    /// Not `zswap_never_enabled`: zswap was on at some point (the spec
    /// turns it on from boot), so a large folio may be partly in zswap,
    /// and 6.12 and 7.3 swap in pages only.
    pub fn zswap_ever_enabled(&self) -> bool {
        self.zswap.params.configured && self.zswap.params.enabled
    }

    /// `zswap_is_full`: the pool over max_pool_percent of RAM.
    fn zswap_is_full(&self) -> bool {
        self.zswap_max_pages() < self.zswap.total_size_pages()
    }

    /// `zswap_max_pages`: max_pool_percent of totalram.
    fn zswap_max_pages(&self) -> u64 {
        self.totalram_pages() * self.zswap.params.max_pool_percent as u64 / 100
    }

    /// `zswap_can_accept`: the pool under accept_threshold_percent of
    /// the limit.
    fn zswap_can_accept(&self) -> bool {
        let p = &self.zswap.params;
        let total = self.totalram_pages();
        total * p.accept_threshold_percent as u64 / 100 * p.max_pool_percent as u64 / 100
            > self.zswap.total_size_pages()
    }

    /// 6.12's `zswap_check_limits`: true while the pool is full (at or
    /// over its limit, and until it is back at or under the accept
    /// threshold), read from the pool as it is.
    fn zswap_check_limits(&mut self) -> bool {
        let cur = self.zswap.pool_pages();
        if cur >= self.zswap_max_pages() {
            self.zswap.stats.pool_limit_hit += 1;
            self.zswap.reached_full = true;
        } else if self.zswap.reached_full && cur <= self.zswap_accept_thr_pages() {
            self.zswap.reached_full = false;
        }
        self.zswap.reached_full
    }

    /// `zswap_accept_thr_pages`.
    fn zswap_accept_thr_pages(&self) -> u64 {
        self.zswap_max_pages() * self.zswap.params.accept_threshold_percent as u64 / 100
    }

    fn totalram_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.managed).sum()
    }

    /// `frontswap_store` of the locked swap-cache folio `pfn`: true if
    /// zswap took it (the caller ends the writeback at once, no I/O).
    pub fn frontswap_store(&mut self, pfn: Pfn) -> bool {
        if !self.zswap.params.configured {
            return false;
        }
        if self.release.zswap_lru {
            return self.zswap_store(pfn);
        }
        let f = *self.folios.get(pfn);
        let (ty, off) = (swp_type(f.swap), swp_offset(f.swap));
        // A dup: the old copy goes whether or not the new one is taken.
        if self.zswap.lookup(ty, off).is_some() {
            self.zswap_invalidate_page(ty, off);
        }
        if f.order > 0 || !self.zswap.params.enabled {
            return false;
        }
        if f.memcg != ROOT_MEMCG && !self.obj_cgroup_may_zswap(f.memcg) {
            return false;
        }
        let stored = self.traced(Fn::ZswapStore, |k| k.zswap_frontswap_store(pfn, ty, off));
        stored.is_some()
    }

    /// `zswap_frontswap_store`: Some(()) when stored.
    fn zswap_frontswap_store(&mut self, pfn: Pfn, ty: usize, off: u32) -> Option<()> {
        if self.zswap_is_full() {
            self.zswap.stats.pool_limit_hit += 1;
            self.zswap.reached_full = true;
            self.zswap_queue_shrink();
            return None;
        }
        if self.zswap.reached_full {
            if !self.zswap_can_accept() {
                return None;
            }
            self.zswap.reached_full = false;
        }
        let f = *self.folios.get(pfn);
        let version = self.folios.version[pfn as usize];
        let kind = self.contents.kind_of(version);
        let cost = self.zswap.kind_costs[kind];
        // A token page (kind 0) is a 4-byte token and zeros: not same-filled.
        let same = self.contents.is_zero_page(version)
            || (kind != 0 && self.contents.kinds[kind].same_filled());
        let (handle, length) = match same && self.zswap.params.same_filled_pages_enabled {
            true => {
                // zswap_is_page_same_filled: zram's same-page path is the
                // same scan.
                self.charge_mem(Fn::ZswapStore, cost.compress_ns, PAGE_BYTES);
                // The scan read the whole page.
                self.l2_read(pfn, 1);
                self.zswap.stats.same_filled_pages += 1;
                (Handle::Same, 0)
            }
            false => {
                if !self.zswap.params.non_same_filled_pages_enabled {
                    return None;
                }
                // A same-filled page compressed anyway is priced as a token
                // page (a word and zeros compress as zeros do, within bytes):
                // the profile measures same-filled pages only as zram keeps
                // them, uncompressed.
                let cost = if same { self.zswap.kind_costs[0] } else { cost };
                self.charge_mem(Fn::ZswapStore, cost.compress_ns, cost.compressed_bytes());
                // The compression reads the page (the same-filled scan
                // above stops at its first differing word).
                self.l2_read(pfn, 1);
                let dlen = match cost.comp_len >= PAGE_SIZE {
                    true => INCOMPRESSIBLE,
                    false => cost.comp_len,
                };
                (self.zpool_malloc(dlen, ZSWAP_HEADER)?, dlen)
            }
        };
        // The root memcg has no objcg: nothing charged, no memcg event.
        let memcg = f.memcg;
        if memcg != ROOT_MEMCG {
            self.obj_cgroup_charge_zswap(memcg, length);
            self.memcg_stat(memcg, Mc::Zswpout, 1);
        }
        let e = Entry {
            handle,
            length,
            memcg,
            version,
            swp: super::swapfile::swp_entry(ty, off),
            lru_prev: NIL,
            lru_next: NIL,
            referenced: false,
        };
        if let Handle::Zbud(h) = handle {
            let swp = &mut self.zswap.zbud_swp;
            if swp.len() <= h.page as usize {
                swp.resize(h.page as usize + 1, [0; 2]);
            }
            swp[h.page as usize][h.bud as usize] = super::swapfile::swp_entry(ty, off);
        }
        self.zswap_insert(ty, off, e);
        self.vm.inc(Vm::Zswpout);
        Some(())
    }

    /// `zpool_malloc` of a compressed page (`dlen` bytes, `header`
    /// bytes in front for zbud: 6.1's `zswap_header`); None when refused
    /// (counted as the kernel counts).
    fn zpool_malloc(&mut self, dlen: u32, header: u32) -> Option<Handle> {
        match self.zswap.params.zpool {
            Zpool::Zbud => {
                let size = header + dlen;
                if size > ZBUD_MAX_SIZE {
                    self.zswap.stats.reject_compress_poor += 1;
                    return None;
                }
                if let zbud::Alloc::Done(h) = self.zswap.zbud.alloc(size) {
                    return Some(Handle::Zbud(h));
                }
                let Some(p) = self.zswap_alloc_page() else {
                    self.zswap.stats.reject_alloc_fail += 1;
                    return None;
                };
                Some(Handle::Zbud(self.zswap.zbud.alloc_in_new_page(size, p)))
            }
            Zpool::Zsmalloc => {
                // zs_malloc: -EINVAL past ZS_MAX_ALLOC_SIZE (a page).
                if dlen > PAGE_SIZE {
                    self.zswap.stats.reject_alloc_fail += 1;
                    return None;
                }
                let cfg = ZsConfig {
                    chain: if self.release.zsmalloc_chain_8 { 8 } else { 4 },
                    inuse_ratio: self.release.zsmalloc_chain_8,
                };
                let zs = self.zswap.zs.get_or_insert_with(|| ZsPool::new(cfg));
                if let Some(o) = zs.malloc(dlen) {
                    return Some(Handle::Zs(o));
                }
                let n = zs.pages_for(dlen) as usize;
                let Some(frames) = self.alloc_zspage_frames(n) else {
                    self.zswap.stats.reject_alloc_fail += 1;
                    return None;
                };
                let zs = self.zswap.zs.as_mut().expect("pool");
                Some(Handle::Zs(zs.new_zspage(dlen, &frames[..n])))
            }
        }
    }

    /// A pool page: `alloc_page` with zswap's gfp (__GFP_NORETRY, no
    /// direct reclaim) from reclaim's PF_MEMALLOC context, which may dip
    /// below the watermarks.
    fn zswap_alloc_page(&mut self) -> Option<Pfn> {
        let p = self.alloc_page(Gfp::Memalloc)?;
        self.folios.get_mut(p).set(PG_KERNEL);
        Some(p)
    }

    /// The entry into slot (`ty`, `off`)'s tree; its index.
    fn zswap_insert(&mut self, ty: usize, off: u32, e: Entry) -> u32 {
        let z = &mut self.zswap;
        let i = match z.free_entries.pop() {
            Some(i) => {
                z.entries[i as usize] = e;
                i
            }
            None => {
                z.entries.push(e);
                z.entries.len() as u32 - 1
            }
        };
        if z.trees.len() <= ty {
            z.trees.resize(ty + 1, Vec::new());
        }
        if z.trees[ty].is_empty() {
            z.trees[ty] = vec![0; self.swap[ty].swap_map.len()];
        }
        z.trees[ty][off as usize] = i + 1;
        z.stats.stored_pages += 1;
        self.zswap_update_total_size();
        i
    }

    fn zswap_update_total_size(&mut self) {
        self.zswap.stats.pool_total_size = self.zswap.pool_pages() * PAGE_SIZE as u64;
        self.zswap.freed_since_update = 0;
    }

    /// `obj_cgroup_may_zswap`: every level below the root under its
    /// memory.zswap.max (0 refuses outright), in whole pages of the
    /// level's compressed bytes, its descendants' included, read after
    /// a flush of the level's subtree (`cgroup_rstat_flush`).
    fn obj_cgroup_may_zswap(&mut self, memcg: u16) -> bool {
        let mut cur = Some(memcg);
        while let Some(m) = cur.filter(|&m| m != ROOT_MEMCG) {
            if let Some(max) = self.memcgs[m as usize].zswap_max {
                if max == 0 {
                    return false;
                }
                if self.rstat.on() {
                    let pairs = self.cgroup_rstat_flush(Some(m));
                    self.charge_rstat_flush(pairs);
                }
                let bytes = self.memcg_page_state(m, Mc::Zswap) as u64;
                if bytes / PAGE_SIZE as u64 >= max {
                    return false;
                }
            }
            cur = self.memcgs[m as usize].parent;
        }
        true
    }

    /// `obj_cgroup_charge_zswap`.
    fn obj_cgroup_charge_zswap(&mut self, memcg: u16, size: u32) {
        self.obj_cgroup_charge(memcg, size);
        self.memcg_stat(memcg, Mc::Zswap, size as i64);
        self.memcg_stat(memcg, Mc::Zswapped, 1);
    }

    /// The shrink worker, queued on a full pool (`queue_work`). 6.1's
    /// workqueue is per-CPU and its woken kworker preempts the reclaimer
    /// (CFS places a long sleeper a latency's worth behind). 6.12's is
    /// unbound, and EEVDF lets the reclaimer run out its slice
    /// (RUN_TO_PARITY); with voluntary preemption the kworker gets the CPU
    /// at the reclaimer's first resched point after the next tick (HZ =
    /// 250) notices the slice is over. (The slice, 0.75 ms, is shorter
    /// than a tick; on a machine with an idle CPU the kworker would run
    /// there at once, which mmsim does not model.)
    fn zswap_queue_shrink(&mut self) {
        if self.zswap.shrink_pending {
            return;
        }
        self.zswap.shrink_pending = true;
        self.zswap.shrink_due = if self.release.zswap_lru {
            const JIFFY_NS: u64 = 1_000_000_000 / super::memcontrol::HZ;
            (self.now() / JIFFY_NS + 1) * JIFFY_NS
        } else {
            0
        };
    }

    /// `cond_resched` in `shrink_folio_list` with zbud's shrink worker
    /// queued: the kworker (zswap's workqueue is bound to the CPU that
    /// queued it, and a woken kworker preempts the reclaimer) writes back
    /// before the next folio. The list's gathered uncharges are made first:
    /// the worker's allocation may reclaim, and its list is its own.
    #[inline]
    pub(crate) fn zswap_shrink_at_resched(&mut self) {
        if self.zswap.shrink_pending && self.now() >= self.zswap.shrink_due {
            self.zswap_shrink_preempting();
        }
    }

    /// The queued worker preempts the reclaimer (`zswap_shrink_at_resched`).
    #[cold]
    fn zswap_shrink_preempting(&mut self) {
        // A work item does not run inside itself: a store of the worker's
        // own reclaim queues it for after this run.
        let can_evict = self.release.zswap_lru || self.zswap.params.zpool == Zpool::Zbud;
        if !can_evict || self.zswap.in_shrink_worker {
            return;
        }
        self.mem_cgroup_uncharge_list_end();
        self.run_pending_zswap_shrink();
        self.mem_cgroup_uncharge_list_begin();
    }

    /// Runs the queued shrink worker (a kworker: at the reclaimer's next
    /// `cond_resched`, or before the CPU's next entity, as the stock drains
    /// run): `zpool_shrink(pool, 1)`. zsmalloc cannot evict in 6.1
    /// (-EINVAL).
    #[inline]
    pub fn run_pending_zswap_shrink(&mut self) {
        if self.zswap.shrink_pending {
            self.zswap_shrink_worker();
        }
    }

    /// `shrink_worker`: `zpool_shrink(pool, 1)` (6.1), or writeback from
    /// the memcgs' LRUs (6.8+).
    #[cold]
    fn zswap_shrink_worker(&mut self) {
        self.zswap.shrink_pending = false;
        if self.release.zswap_lru {
            let task = self.cur_task.take();
            self.zswap.in_shrink_worker = true;
            self.traced(Fn::ZswapWriteback, |k| k.zswap_shrink_memcgs());
            self.zswap.in_shrink_worker = false;
            self.cur_task = task;
            return;
        }
        let shrunk = match self.zswap.params.zpool {
            Zpool::Zbud => {
                // A kworker: no task.
                let task = self.cur_task.take();
                self.zswap.in_shrink_worker = true;
                let done = self.traced(Fn::ZswapWriteback, |k| k.zbud_reclaim_page(8));
                self.zswap.in_shrink_worker = false;
                self.cur_task = task;
                done
            }
            Zpool::Zsmalloc => false,
        };
        if !shrunk {
            self.zswap.stats.reject_reclaim_fail += 1;
        }
    }

    /// The content kind whose measured decompression entry `e` costs: a
    /// same-filled page stored compressed (same_filled_pages_enabled off)
    /// decompresses as a token page, as it was priced at its store.
    fn zswap_decompress_kind(&self, e: Entry) -> usize {
        match (e.handle, self.contents.kind_of(e.version)) {
            (Handle::Same, k) => k,
            (_, k) if k != 0 && self.contents.kinds[k].same_filled() => 0,
            (_, k) => k,
        }
    }

    /// `zbud_reclaim_page`: up to `retries` tries at the LRU tail's page,
    /// each writing back its objects; true once a page is freed.
    fn zbud_reclaim_page(&mut self, retries: u32) -> bool {
        for _ in 0..retries {
            let Some((page, handles)) = self.zswap.zbud.reclaim_begin() else {
                return false;
            };
            for h in handles.into_iter().flatten() {
                if self.zswap_writeback_entry(h).is_err() {
                    break;
                }
            }
            if let Some(pfn) = self.zswap.zbud.reclaim_end(page) {
                // free_zbud_page: zswap_pool_total_size still counts the
                // page until its next update (a store's or a free's).
                self.free_page(pfn);
                self.zswap.freed_since_update += 1;
                return true;
            }
        }
        false
    }

    /// `zswap_writeback_entry`, zbud's evict callback for object `h`
    /// (6.1): the entry of the slot its header names.
    fn zswap_writeback_entry(&mut self, h: zbud::Handle) -> Result<(), WritebackErr> {
        let swp = self.zswap.zbud_swp[h.page as usize][h.bud as usize];
        self.zswap_writeback_slot(swp)
    }

    /// `zswap_writeback_entry` of slot `swp`'s entry: its page
    /// decompressed into a new swap-cache page and written to the swap
    /// device, the entry freed. An error where the kernel returns one:
    /// the slot has a swap-cache page already (-EEXIST), or no page could
    /// be had (-ENOMEM); an entry invalidated meanwhile is done (6.1's
    /// zbud holds a freed object's page until its buddy goes).
    fn zswap_writeback_slot(&mut self, swp: SwpEntry) -> Result<(), WritebackErr> {
        let (ty, off) = (swp_type(swp), swp_offset(swp));
        let Some(i) = self.zswap.lookup(ty, off) else {
            return Ok(());
        };
        // zswap_get_swap_cache_page / __read_swap_cache_async(GFP_KERNEL),
        // charged to the slot's memcg (no mm: the root's otherwise).
        if let Some(pfn) = self.swap_cache_get_folio(swp) {
            self.folio_put(pfn);
            return Err(WritebackErr::Exist);
        }
        let Some((pfn, new)) = self.read_swap_cache_async(swp, ROOT_MEMCG) else {
            return Err(WritebackErr::NoMem);
        };
        if !new {
            // The allocation's reclaim let another path cache the slot's
            // page meanwhile: -EEXIST.
            self.folio_put(pfn);
            return Err(WritebackErr::Exist);
        }
        // The entry is still the slot's: only the slot's free or a store
        // of its page (which was in no cache) could have dropped it, and
        // the slot is still in use.
        debug_assert_eq!(self.zswap.lookup(ty, off), Some(i));
        let e = self.zswap.entries[i as usize];
        let kind = self.zswap_decompress_kind(e);
        let cost = self.zswap.kind_costs[kind];
        self.charge_mem(
            Fn::ZswapWriteback,
            cost.decompress_ns,
            cost.compressed_bytes(),
        );
        self.l2_write(pfn, 1);
        self.folios.version[pfn as usize] = e.version;
        self.zswap.stats.written_back_pages += 1;
        if self.release.zswap_lru {
            // ZSWPWB, and the entry freed before the write.
            self.vm.inc(Vm::Zswpwb);
            if e.memcg != ROOT_MEMCG {
                self.memcg_stat(e.memcg, Mc::Zswpwb, 1);
            }
            self.zswap_invalidate_page(ty, off);
        }
        let f = self.folios.get_mut(pfn);
        f.set(PG_UPTODATE);
        // To the inactive tail once written (end_page_writeback).
        f.set(PG_RECLAIM);
        // The device reads the page.
        self.guest_frame(pfn, false);
        self.__swap_writepage(pfn);
        let f = self.folios.get_mut(pfn);
        if !f.test(PG_WRITEBACK) {
            // zram ended the writeback in rw_page with the page still
            // locked: PG_reclaim cleared, no rotation.
            f.clear(PG_RECLAIM);
        }
        f.clear(PG_LOCKED);
        self.folio_put(pfn);
        if !self.release.zswap_lru {
            // 6.1: both references dropped, the entry leaves the tree and
            // is freed.
            self.zswap_invalidate_page(ty, off);
        }
        Ok(())
    }

    /// `frontswap_load` into the locked folio `pfn` of slot `entry`: true
    /// if zswap held the page (now in the folio).
    pub fn frontswap_load(&mut self, pfn: Pfn, entry: SwpEntry) -> bool {
        if !self.zswap.params.configured {
            return false;
        }
        let (ty, off) = (swp_type(entry), swp_offset(entry));
        let Some(i) = self.zswap.lookup(ty, off) else {
            return false;
        };
        // Large swap-in is off while zswap was ever enabled
        // (`zswap_never_enabled`).
        debug_assert_eq!(self.folios.get(pfn).order, 0, "zswap loads pages");
        let e = self.zswap.entries[i as usize];
        let kind = self.zswap_decompress_kind(e);
        let cost = self.zswap.kind_costs[kind];
        self.charge_mem(Fn::ZswapLoad, cost.decompress_ns, cost.compressed_bytes());
        self.l2_write(pfn, 1);
        self.folios.version[pfn as usize] = e.version;
        self.vm.inc(Vm::Zswpin);
        if e.memcg != ROOT_MEMCG {
            self.memcg_stat(e.memcg, Mc::Zswpin, 1);
        }
        // 6.10's exclusive loads: the swap cache owns the page now; the
        // synchronous zram fault's folio is outside it and may be freed
        // if the fault fails, so zswap keeps the entry for it.
        if self.release.zswap_lru && self.folios.get(pfn).test(PG_SWAPCACHE) {
            self.zswap_invalidate_page(ty, off);
            self.folios.get_mut(pfn).set(PG_DIRTY);
        }
        true
    }

    /// `frontswap_invalidate_page` (`zswap_frontswap_invalidate_page`):
    /// the slot is free or rewritten; its entry, if any, goes.
    pub fn zswap_invalidate_page(&mut self, ty: usize, off: u32) {
        let Some(i) = self.zswap.lookup(ty, off) else {
            return;
        };
        self.zswap.trees[ty][off as usize] = 0;
        if self.release.zswap_lru {
            self.zswap_lru_del(i);
        }
        self.zswap.free_entries.push(i);
        let e = self.zswap.entries[i as usize];
        self.zswap_free_entry(e);
    }

    /// `zswap_free_entry`: the data back to the zpool, the charge back to
    /// the memcg.
    fn zswap_free_entry(&mut self, e: Entry) {
        if e.memcg != ROOT_MEMCG {
            self.obj_cgroup_uncharge(e.memcg, e.length);
            self.memcg_stat(e.memcg, Mc::Zswap, -(e.length as i64));
            self.memcg_stat(e.memcg, Mc::Zswapped, -1);
        }
        match e.handle {
            Handle::Same => self.zswap.stats.same_filled_pages -= 1,
            Handle::Zbud(h) => {
                if let Some(p) = self.zswap.zbud.free(h) {
                    self.free_page(p);
                }
            }
            Handle::Zs(o) => {
                let zs = self.zswap.zs.as_mut().expect("pool");
                if let Some(freed) = zs.free(o) {
                    // Copied out of the pool (no allocation: a zspage has at most 8).
                    let (mut frames, n) = ([0 as Pfn; 8], freed.len());
                    frames[..n].copy_from_slice(freed);
                    self.free_zspage_frames(&frames[..n]);
                }
            }
        }
        self.zswap.stats.stored_pages -= 1;
        self.zswap_update_total_size();
    }

    // ---- 6.12 and 7.3: zswap_store and zswap's LRU -----------------------

    /// 6.12's `zswap_store` of the locked swap-cache folio `pfn`: true if
    /// zswap took it (every page of it, 7.3; a large folio is refused in
    /// 6.12). A refused store drops the entries its slots held.
    fn zswap_store(&mut self, pfn: Pfn) -> bool {
        let f = *self.folios.get(pfn);
        if f.order > 0 && !self.release.zswap_large_store {
            return false;
        }
        let (ty, off, nr) = (swp_type(f.swap), swp_offset(f.swap), f.nr_pages());
        let stored = self.zswap.params.enabled
            && self.traced(Fn::ZswapStore, |k| k.zswap_store_folio(pfn, ty, off));
        if stored {
            return true;
        }
        if self.zswap.params.enabled && self.zswap.reached_full {
            self.zswap_queue_shrink();
        }
        // check_old: a stale entry must not be written back over the page.
        for i in 0..nr {
            self.zswap_invalidate_page(ty, off + i);
        }
        false
    }

    /// zswap_store's checks and its pages' stores; true when all are in.
    fn zswap_store_folio(&mut self, pfn: Pfn, ty: usize, off: u32) -> bool {
        let f = *self.folios.get(pfn);
        let memcg = f.memcg;
        if memcg != ROOT_MEMCG && !self.obj_cgroup_may_zswap(memcg) {
            // In reclaim (PF_MEMALLOC): see `Zswap::pf_memalloc`.
            let outer = std::mem::replace(&mut self.zswap.pf_memalloc, true);
            let shrunk = self.shrink_memcg(memcg);
            self.zswap.pf_memalloc = outer;
            if shrunk.is_err() {
                return false;
            }
        }
        if self.zswap_check_limits() {
            return false;
        }
        let nr = f.nr_pages();
        for i in 0..nr {
            if !self.zswap_store_page(pfn + i, ty, off + i, memcg) {
                return false;
            }
        }
        if memcg != ROOT_MEMCG {
            self.memcg_stat(memcg, Mc::Zswpout, nr as i64);
        }
        self.vm.add(Vm::Zswpout, nr as i64);
        true
    }

    /// `zswap_store_page`: compressed (7.3: kept whole if it does not
    /// compress below a page), stored in the zpool, the slot's old entry
    /// freed, the memcg charged, on the memcg's LRU with its referenced
    /// bit set.
    fn zswap_store_page(&mut self, pfn: Pfn, ty: usize, off: u32, memcg: u16) -> bool {
        let version = self.folios.version[pfn as usize];
        let mut kind = self.contents.kind_of(version);
        // No same-filled pages: a page of one repeated word (zeros went
        // to the zeromap) is compressed, priced as a token page is (a
        // word and zeros; the profile measures same-filled pages only as
        // zram keeps them).
        if kind != 0 && self.contents.kinds[kind].same_filled() {
            kind = 0;
        }
        let cost = self.zswap.kind_costs[kind];
        self.charge_mem(Fn::ZswapStore, cost.compress_ns, cost.compressed_bytes());
        self.l2_read(pfn, 1);
        let incompressible = cost.comp_len >= PAGE_SIZE;
        // 6.12's compressor writes into one page and fails past it (the
        // QEMU oracle's 6.12 counts reject_compress_fail, not zsmalloc's
        // refusal); 7.3 keeps the page whole only where it could be
        // written back later (-EINVAL otherwise).
        if incompressible
            && (!self.release.zswap_incompressible
                || !self.mem_cgroup_zswap_writeback_enabled(memcg))
        {
            self.zswap.stats.reject_compress_fail += 1;
            return false;
        }
        let dlen = match incompressible {
            true => PAGE_SIZE,
            false => cost.comp_len,
        };
        let Some(handle) = self.zpool_malloc(dlen, 0) else {
            return false;
        };
        if incompressible {
            self.zswap.stats.stored_incompressible_pages += 1;
        }
        // The slot's old entry (the page was written again) goes.
        self.zswap_invalidate_page(ty, off);
        if memcg != ROOT_MEMCG {
            self.obj_cgroup_charge_zswap(memcg, dlen);
        }
        let e = Entry {
            handle,
            length: dlen,
            memcg,
            version,
            swp: super::swapfile::swp_entry(ty, off),
            lru_prev: NIL,
            lru_next: NIL,
            referenced: true,
        };
        let i = self.zswap_insert(ty, off, e);
        self.zswap_lru_add(i);
        true
    }

    /// `zswap_lru_add`: at the tail of its memcg's list.
    fn zswap_lru_add(&mut self, i: u32) {
        let z = &mut self.zswap;
        let m = z.entries[i as usize].memcg as usize;
        if z.lru.len() <= m {
            z.lru.resize(m + 1, LruList::EMPTY);
        }
        let tail = z.lru[m].tail;
        let e = &mut z.entries[i as usize];
        e.lru_prev = tail;
        e.lru_next = NIL;
        match tail {
            NIL => z.lru[m].head = i,
            t => z.entries[t as usize].lru_next = i,
        }
        z.lru[m].tail = i;
        z.lru[m].nr_items += 1;
    }

    /// `zswap_lru_del`.
    fn zswap_lru_del(&mut self, i: u32) {
        let z = &mut self.zswap;
        let e = z.entries[i as usize];
        let m = e.memcg as usize;
        match e.lru_prev {
            NIL => z.lru[m].head = e.lru_next,
            p => z.entries[p as usize].lru_next = e.lru_next,
        }
        match e.lru_next {
            NIL => z.lru[m].tail = e.lru_prev,
            n => z.entries[n as usize].lru_prev = e.lru_prev,
        }
        z.lru[m].nr_items -= 1;
    }

    /// `list_lru_walk_one` of `memcg`'s list with `shrink_memcg_cb`: up to
    /// `nr_to_walk` entries from the head. A referenced entry loses its
    /// bit and goes to the tail (LRU_ROTATE); any other goes to the tail
    /// and is written back, after which the walk starts again at the
    /// head (the lock was dropped: LRU_REMOVED_RETRY, or LRU_RETRY on a
    /// failure). A walk of rotations ends at the list's end
    /// (`list_for_each_safe` reaches the head it started from), however
    /// much of `nr_to_walk` is left. With `stop_on_exist` (the shrinker's
    /// walk) a slot already back in the swap cache ends the walk
    /// (LRU_STOP). Returns the entries written back, and whether the walk
    /// met such a slot; `nr_to_walk` keeps what was not walked.
    fn zswap_lru_walk(
        &mut self,
        memcg: u16,
        nr_to_walk: &mut u32,
        stop_on_exist: bool,
    ) -> (u32, bool) {
        let (mut isolated, mut rotated) = (0u32, 0u32);
        while *nr_to_walk > 0 {
            let l = self
                .zswap
                .lru
                .get(memcg as usize)
                .copied()
                .unwrap_or(LruList::EMPTY);
            if l.head == NIL || rotated == l.nr_items {
                break;
            }
            *nr_to_walk -= 1;
            let head = l.head;
            self.zswap_lru_del(head);
            self.zswap_lru_add(head);
            let e = &mut self.zswap.entries[head as usize];
            if e.referenced {
                e.referenced = false;
                rotated += 1;
                continue;
            }
            rotated = 0;
            let swp = e.swp;
            match self.zswap_writeback_slot(swp) {
                Ok(()) => isolated += 1,
                Err(err) => {
                    self.zswap.stats.reject_reclaim_fail += 1;
                    if stop_on_exist && err == WritebackErr::Exist {
                        return (isolated, true);
                    }
                }
            }
        }
        (isolated, false)
    }

    /// `mem_cgroup_zswap_writeback_enabled` (6.8+): zswap is off, or
    /// neither `memcg` nor an ancestor has memory.zswap.writeback 0 (the
    /// root has no such file).
    pub(crate) fn mem_cgroup_zswap_writeback_enabled(&self, memcg: u16) -> bool {
        !self.zswap.params.enabled
            || self
                .ancestors(memcg)
                .all(|m| self.memcgs[m as usize].zswap_writeback)
    }

    /// `shrink_memcg`: walks up to 1 (6.12) or 32 (7.3: SWAP_CLUSTER_MAX)
    /// entries of `memcg`'s LRU (`zswap_lru_walk`); none where writeback
    /// is off (-ENOENT).
    fn shrink_memcg(&mut self, memcg: u16) -> Result<(), ShrinkErr> {
        if !self.mem_cgroup_zswap_writeback_enabled(memcg) {
            return Err(ShrinkErr::NoEntries);
        }
        let batch = if self.release.zswap_shrink_memcg_batch {
            32
        } else {
            1
        };
        let mut nr_to_walk = batch;
        let (shrunk, _) = self.zswap_lru_walk(memcg, &mut nr_to_walk, false);
        match (batch - nr_to_walk, shrunk) {
            (0, _) => Err(ShrinkErr::NoEntries),
            (_, 0) => Err(ShrinkErr::Again),
            _ => Ok(()),
        }
    }

    /// 6.12's `shrink_worker`: the memcgs round-robin (`mem_cgroup_iter`
    /// from `zswap_next_shrink`, pre-order from the root), each shrunk,
    /// until the pool is at or under the accept threshold; it gives up
    /// after MAX_RECLAIM_RETRIES failed shrinks or tree walks that found
    /// no entry.
    fn zswap_shrink_memcgs(&mut self) {
        let thr = self.zswap_accept_thr_pages();
        let (mut failures, mut attempts) = (0u32, 0u32);
        loop {
            let next = self.zswap.next_shrink.map_or(0, |m| m as usize + 1);
            let memcg = (next < self.memcgs.len()).then_some(next as u16);
            self.zswap.next_shrink = memcg;
            let failed = match memcg {
                // A tree walk: a failure if no memcg had an entry.
                None => std::mem::take(&mut attempts) == 0,
                Some(m) => match self.shrink_memcg(m) {
                    Err(ShrinkErr::NoEntries) => false,
                    r => {
                        attempts += 1;
                        r.is_err()
                    }
                },
            };
            if failed {
                failures += 1;
                if failures == MAX_RECLAIM_RETRIES {
                    break;
                }
            }
            if self.zswap.pool_pages() <= thr {
                break;
            }
        }
    }

    // ---- 6.8+: zswap's shrinker ------------------------------------------

    /// `zswap_folio_swapin` (6.8+): a page of `pfn`'s memcg read from the
    /// swap device, not from zswap, which the shrinker's next count takes
    /// as protection for the memcg's LRU.
    #[inline]
    pub(crate) fn zswap_folio_swapin(&mut self, pfn: Pfn) {
        if !self.release.zswap_lru {
            return;
        }
        let m = self.folios.get(pfn).memcg as usize;
        let swapins = &mut self.zswap.nr_disk_swapins;
        if swapins.len() <= m {
            swapins.resize(m + 1, 0);
        }
        swapins[m] += 1;
    }

    /// `zswap_shrinker_count`: the entries on `memcg`'s LRU, less the disk
    /// swap-ins seen since the last count (which it consumes), scaled by
    /// how much memory they hold per page (zswap's bytes over its pages,
    /// from the memcg's flushed statistics): the better pages compress,
    /// the less writing them back saves. Every reclaim mmsim runs may do
    /// I/O and enter the filesystem (`gfp_has_io_fs`).
    pub(super) fn zswap_shrinker_count(&mut self, memcg: u16) -> u64 {
        if !self.zswap.params.shrinker_enabled || !self.mem_cgroup_zswap_writeback_enabled(memcg) {
            return 0;
        }
        if self.release.zswap_shrinker_count_ratelimited {
            self.mem_cgroup_flush_stats_ratelimited(memcg);
        } else {
            self.mem_cgroup_flush_stats(memcg);
        }
        let nr_backing = self.memcg_page_state(memcg, Mc::Zswap).max(0) as u64 >> 12;
        let nr_stored = self.memcg_page_state(memcg, Mc::Zswapped).max(0) as u64;
        if nr_stored == 0 {
            return 0;
        }
        let z = &mut self.zswap;
        let nr_freeable = z.lru.get(memcg as usize).map_or(0, |l| l.nr_items) as u64;
        if nr_freeable == 0 {
            return 0;
        }
        let protected = z.nr_disk_swapins.get_mut(memcg as usize).map_or(0, |n| {
            let p = (*n).min(nr_freeable);
            *n -= p;
            p
        });
        mult_frac(nr_freeable - protected, nr_backing, nr_stored)
    }

    /// `zswap_shrinker_scan`: a walk of up to `nr_to_scan` entries of
    /// `memcg`'s LRU (`memalloc`: from reclaim, PF_MEMALLOC). None
    /// (SHRINK_STOP) when it wrote nothing back or met a slot already
    /// back in the swap cache (shrinking into the warm part of the LRU).
    pub(super) fn zswap_shrinker_scan(
        &mut self,
        memcg: u16,
        nr_to_scan: u32,
        memalloc: bool,
    ) -> Option<u64> {
        if !self.zswap.params.shrinker_enabled || !self.mem_cgroup_zswap_writeback_enabled(memcg) {
            return None;
        }
        let mut nr_to_walk = nr_to_scan;
        let outer = self.zswap.pf_memalloc;
        self.zswap.pf_memalloc |= memalloc;
        let (isolated, encountered) = self.traced(Fn::ZswapWriteback, |k| {
            k.zswap_lru_walk(memcg, &mut nr_to_walk, true)
        });
        self.zswap.pf_memalloc = outer;
        (!encountered && isolated > 0).then_some(isolated as u64)
    }

    /// The invariants: every slot's entry counted once in stored_pages,
    /// the pool's size its pages', and each memcg's zswapped its entries.
    pub fn check_zswap(&self) -> Result<(), String> {
        let z = &self.zswap;
        let in_trees = z.trees.iter().flatten().filter(|&&e| e != 0).count() as u64;
        if in_trees != z.nr_entries() || z.stats.stored_pages != in_trees {
            return Err(format!(
                "zswap: {in_trees} slots hold entries, {} entries are live, stored_pages is {}",
                z.nr_entries(),
                z.stats.stored_pages
            ));
        }
        let counted = z.pool_pages() + z.freed_since_update;
        if z.stats.pool_total_size != counted * PAGE_SIZE as u64 {
            return Err(format!(
                "zswap: pool_total_size {} but the pool has {} pages, and the shrink worker freed {} since its last update",
                z.stats.pool_total_size,
                z.pool_pages(),
                z.freed_since_update
            ));
        }
        if self.release.zswap_lru {
            self.check_zswap_lru()?;
        }
        let mut per_memcg = vec![0i64; self.memcgs.len()];
        for &e in z.trees.iter().flatten().filter(|&&e| e != 0) {
            per_memcg[z.entries[e as usize - 1].memcg as usize] += 1;
        }
        for (m, &n) in per_memcg.iter().enumerate().skip(1) {
            let zswapped = self.memcgs[m].stat.get(Mc::Zswapped);
            if zswapped != n {
                return Err(format!(
                    "zswap: memcg {} holds {n} entries but its zswapped is {zswapped}",
                    self.memcgs[m].name
                ));
            }
        }
        Ok(())
    }

    /// 6.8+: each live entry on its memcg's LRU once, the links both ways.
    fn check_zswap_lru(&self) -> Result<(), String> {
        let z = &self.zswap;
        let mut on_lru = 0u64;
        for (m, l) in z.lru.iter().enumerate() {
            let (mut prev, mut cur, mut nr) = (NIL, l.head, 0u32);
            while cur != NIL {
                let e = &z.entries[cur as usize];
                if e.memcg as usize != m || e.lru_prev != prev {
                    return Err(format!(
                        "zswap: entry {cur} on memcg {m}'s LRU belongs to memcg {} or is linked wrong",
                        e.memcg
                    ));
                }
                on_lru += 1;
                nr += 1;
                if on_lru > z.nr_entries() {
                    return Err("zswap: an LRU loops".to_string());
                }
                (prev, cur) = (cur, e.lru_next);
            }
            if prev != l.tail || nr != l.nr_items {
                return Err(format!(
                    "zswap: memcg {m}'s LRU tail is not its last entry, or it counts {} entries for {nr}",
                    l.nr_items
                ));
            }
        }
        if on_lru != z.nr_entries() {
            return Err(format!(
                "zswap: {on_lru} entries on the LRUs, {} live",
                z.nr_entries()
            ));
        }
        Ok(())
    }

    /// debugfs's counters, when the spec sets zswap.
    pub fn zswap_stats(&self) -> Option<ZswapStats> {
        self.zswap.params.configured.then_some(self.zswap.stats)
    }
}

/// `mult_frac(x, n, d)`: x × n / d without the product overflowing.
fn mult_frac(x: u64, n: u64, d: u64) -> u64 {
    x / d * n + x % d * n / d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 6.12 kernel with the shrinker on and a memcg `w` (memcg 1).
    fn shrinker_kernel() -> Kernel {
        let k = crate::kernel::test_kernel_of(
            "[machine]\nmemory = \"256M\"\nkernel = \"6.12\"\n[sysfs]\n\"module/zswap/parameters/shrinker_enabled\" = true\n[cgroup.w]\n[task.t]\ncgroup = \"w\"\nsteps = []\n",
        );
        assert!(k.zswap.params.shrinker_enabled);
        k
    }

    /// An entry of memcg `memcg`, referenced or not, at its LRU's tail.
    fn lru_entry(k: &mut Kernel, memcg: u16, referenced: bool) -> u32 {
        let i = k.zswap.entries.len() as u32;
        k.zswap.entries.push(Entry {
            handle: Handle::Same,
            length: 1000,
            memcg,
            version: 0,
            swp: super::super::swapfile::swp_entry(0, i),
            lru_prev: NIL,
            lru_next: NIL,
            referenced,
        });
        k.zswap_lru_add(i);
        i
    }

    #[test]
    fn the_shrinker_counts_the_lru_less_disk_swapins_scaled_by_compression() {
        let mut k = shrinker_kernel();
        for _ in 0..100 {
            lru_entry(&mut k, 1, true);
        }
        // 100 entries of 1000 bytes: 24 pages of pool for 100 stored.
        k.memcg_stat(1, Mc::Zswap, 100_000);
        k.memcg_stat(1, Mc::Zswapped, 100);
        k.cgroup_rstat_flush(None);
        assert_eq!(k.zswap_shrinker_count(1), 100 * 24 / 100);
        // 30 pages read from the disk: 70 left to count, the swap-ins
        // consumed.
        k.zswap.nr_disk_swapins = vec![0, 30];
        assert_eq!(k.zswap_shrinker_count(1), 70 * 24 / 100);
        assert_eq!(k.zswap.nr_disk_swapins[1], 0);
        // More swap-ins than entries: nothing, and the rest kept.
        k.zswap.nr_disk_swapins[1] = 130;
        assert_eq!(k.zswap_shrinker_count(1), 0);
        assert_eq!(k.zswap.nr_disk_swapins[1], 30);
        // Off: nothing.
        k.zswap.params.shrinker_enabled = false;
        assert_eq!(k.zswap_shrinker_count(1), 0);
    }

    #[test]
    fn a_walk_of_rotations_ends_at_the_lists_end() {
        // list_for_each_safe: three referenced entries are each rotated
        // once, however much of the walk is left; the bits are gone.
        let mut k = shrinker_kernel();
        let ids: Vec<u32> = (0..3).map(|_| lru_entry(&mut k, 1, true)).collect();
        let mut nr_to_walk = 32;
        assert_eq!(k.zswap_lru_walk(1, &mut nr_to_walk, true), (0, false));
        assert_eq!(nr_to_walk, 29);
        assert!(ids.iter().all(|&i| !k.zswap.entries[i as usize].referenced));
        assert_eq!(k.zswap.lru[1].head, ids[0]);
        assert_eq!(k.zswap.lru[1].nr_items, 3);
        assert_eq!(mult_frac(10, 3, 4), 7);
        assert_eq!(mult_frac(u64::MAX, 1, 2), u64::MAX / 2);
    }

    #[test]
    fn the_pool_limit_and_its_hysteresis_follow_totalram() {
        let mut k = crate::kernel::test_kernel(1, "6.1");
        k.zswap.params.configured = true;
        let total = k.totalram_pages();
        // 20 % of RAM, accepting again under 90 % of that.
        let limit = total * 20 / 100;
        let accept = total * 90 / 100 * 20 / 100;
        k.zswap.zbud.pages_nr = limit;
        k.zswap_update_total_size();
        assert!(!k.zswap_is_full());
        k.zswap.zbud.pages_nr = limit + 1;
        k.zswap_update_total_size();
        assert!(k.zswap_is_full());
        k.zswap.zbud.pages_nr = accept;
        k.zswap_update_total_size();
        assert!(!k.zswap_can_accept());
        k.zswap.zbud.pages_nr = accept - 1;
        k.zswap_update_total_size();
        assert!(k.zswap_can_accept());
    }
}

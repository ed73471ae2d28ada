//! Shrinkers (mm/shrinker.c; mm/vmscan.c before 6.7): `shrink_slab`,
//! `do_shrink_slab` and `drop_slab`.
//!
//! Reclaim asks each memcg's shrinkers to free objects after its LRUs
//! (`shrink_node_memcgs`), in proportion to what they hold: a shrinker
//! counts its freeable objects, and `do_shrink_slab` scans
//! `freeable >> priority` × 4 / `seeks` of them in batches, carrying
//! what a call could not do over to the next (`nr_deferred`, at most
//! twice the freeable count).
//!
//! Of the kernel's shrinkers mmsim has the two whose objects it models,
//! both memcg-aware, in their registration order (the order
//! `shrink_slab_memcg` takes their ids and the root's walk their list
//! in): THP's deferred split queue (`thp_shrinker_init`, a
//! subsys_initcall) and zswap's (`zswap_alloc_shrinker`, 6.8+, a
//! late_initcall). The kernel's slab caches (dentries, inodes, …) are not
//! modelled, so neither is `slabs_scanned`, which counts their scans too.
//!
//! A memcg's shrinkers run only where the memcg has objects
//! (`shrinker_info`'s bit, set at a list's first add): a shrinker called
//! where it has none counts 0 and does nothing, so mmsim calls each.

use crate::kernel::Kernel;

/// SHRINK_BATCH: objects a shrinker scans per call when its `batch` is 0
/// (both of mmsim's).
const SHRINK_BATCH: i64 = 128;
/// DEFAULT_SEEKS: both shrinkers' `seeks`.
const DEFAULT_SEEKS: u64 = 2;

/// A shrinker mmsim models, by its id (registration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shrinker {
    /// `deferred_split_shrinker` (mm/huge_anon.rs).
    DeferredSplit,
    /// zswap's (`mm-zswap`, mm/zswap.rs).
    Zswap,
}

impl Shrinker {
    const ALL: [Shrinker; 2] = [Shrinker::DeferredSplit, Shrinker::Zswap];
}

/// The shrinkers' `nr_deferred`: per memcg, per shrinker (the root's in
/// the shrinker, a memcg's in its `shrinker_info`; one node).
#[derive(Debug, Default)]
pub struct Shrinkers {
    nr_deferred: Vec<[i64; 2]>,
}

impl Kernel {
    /// `shrink_slab` for `memcg` at `priority`, from reclaim (kswapd or a
    /// reclaiming task: PF_MEMALLOC, so what a shrinker allocates neither
    /// reclaims nor fails its charge). Returns what was freed.
    pub fn shrink_slab(&mut self, memcg: u16, priority: i32) -> u64 {
        self.shrink_slab_ctx(memcg, priority, true)
    }

    /// `shrink_slab`: each shrinker in turn; `memalloc`: the caller is in
    /// reclaim (PF_MEMALLOC).
    fn shrink_slab_ctx(&mut self, memcg: u16, priority: i32, memalloc: bool) -> u64 {
        Shrinker::ALL
            .into_iter()
            .map(|s| self.do_shrink_slab(s, memcg, priority, memalloc))
            .sum()
    }

    /// `count_objects`: what `s` could free in `memcg` now.
    fn count_objects(&mut self, s: Shrinker, memcg: u16) -> u64 {
        match s {
            Shrinker::DeferredSplit => self.deferred_split_count(memcg) as u64,
            Shrinker::Zswap => self.zswap_shrinker_count(memcg),
        }
    }

    /// `scan_objects`: up to `nr` objects; None is SHRINK_STOP.
    fn scan_objects(&mut self, s: Shrinker, memcg: u16, nr: u32, memalloc: bool) -> Option<u64> {
        match s {
            Shrinker::DeferredSplit => self.deferred_split_scan(memcg, nr as usize),
            Shrinker::Zswap => self.zswap_shrinker_scan(memcg, nr, memalloc),
        }
    }

    /// `do_shrink_slab`: the work due is the freeable count shifted by
    /// the priority, times 4 over the shrinker's 2 seeks, plus the work
    /// earlier calls deferred, at most twice the freeable count; scanned
    /// in batches of 128 (or all at once when fewer are freeable than
    /// are due), until done or the shrinker stops. What was not scanned
    /// is deferred.
    fn do_shrink_slab(&mut self, s: Shrinker, memcg: u16, priority: i32, memalloc: bool) -> u64 {
        let freeable = self.count_objects(s, memcg) as i64;
        if freeable == 0 {
            return 0;
        }
        let m = memcg as usize;
        let deferred = &mut self.shrinker.nr_deferred;
        if deferred.len() <= m {
            deferred.resize(m + 1, [0; 2]);
        }
        let nr = std::mem::take(&mut deferred[m][s as usize]);
        let delta = ((freeable as u64 >> priority) * 4 / DEFAULT_SEEKS) as i64;
        let mut total_scan = ((nr >> priority) + delta).min(2 * freeable);
        let (mut freed, mut scanned) = (0, 0);
        while total_scan >= SHRINK_BATCH || total_scan >= freeable {
            let nr_to_scan = SHRINK_BATCH.min(total_scan);
            match self.scan_objects(s, memcg, nr_to_scan as u32, memalloc) {
                None => break,
                Some(n) => freed += n,
            }
            total_scan -= nr_to_scan;
            scanned += nr_to_scan;
        }
        let next = (nr + delta - scanned).max(0).min(2 * freeable);
        self.shrinker.nr_deferred[m][s as usize] += next;
        freed
    }

    /// `drop_slab` (drop_caches 2 or 3): every memcg's shrinkers at
    /// priority 0, round after round while a round frees more than a
    /// shifting threshold. The writing task is not in reclaim: what a
    /// shrinker allocates may reclaim.
    pub fn drop_slab(&mut self) {
        let mut shift = 0;
        loop {
            let mut freed = 0;
            for m in 0..self.memcgs.len() as u16 {
                freed += self.shrink_slab_ctx(m, 0, false);
            }
            if freed >> shift <= 1 {
                break;
            }
            shift += 1;
        }
    }
}

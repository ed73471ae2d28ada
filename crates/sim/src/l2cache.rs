//! Which pages each CPU's private L2 cache holds, at page granularity: a
//! 4 KiB copy whose source the copying CPU streamed whole a moment ago
//! reads it from L2, not from memory (docs/design.md "Cache residency").
//!
//! Profiles that measured it (`copy_page_l2` and the L2's geometry in
//! `[machine]`) turn the model on; without them there is no `L2Cache` at
//! all and every copy costs `copy_page`, as before it existed.
//!
//! The model:
//! - Each CPU's L2 is set-associative with true LRU per set. A page's 64
//!   lines fall in 64 consecutive line sets, so at page granularity the
//!   cache has size / (4096 × ways) page sets (the "page colours") of
//!   `ways` pages each, a frame going to set `pfn % sets`, as physical
//!   indexing puts it.
//! - Whole-page work fills it: clear_page's destination, copy_page's
//!   source and destination, read(2)'s and write(2)'s page, zram's or
//!   zswap's compression (the source) and decompression (the
//!   destination), brd's copies.
//! - A CPU's whole-page write invalidates the page in every other CPU's
//!   L2 (the lines' other copies are invalidated before the write, as
//!   MESI does); a device's DMA into a frame invalidates it everywhere.
//!   A read leaves other CPUs' copies (shared).
//! - A user access (`touch`) brings one line, not the page: every 64 of
//!   a CPU's accesses take one way of the next set in turn (its last way,
//!   a free one if it has one, else its oldest page, goes), as 64 lines
//!   of random addresses spread over 64 line sets would. Accesses are
//!   counted as misses, as their cost (`touch`) is; accesses that hit in
//!   the real caches evict nothing, so the model errs towards copies from
//!   memory, today's price.
//! - SMT threads of a core share its L2; guests have no model (their
//!   frames are the host's pages, whose caches the host's model keeps).
//! - The cache is physically tagged: freeing a frame evicts nothing, and
//!   a frame reused and filled again is resident, as in the hardware.
//!
//! Left out: the shared last-level cache (on the machines calibrated a
//! copy from it costs within 15 % of one from memory, docs/calibrate.md),
//! kernel data other than pages (page tables, struct pages: small beside
//! 4 KiB pages), and the destination's residency (the copy's price is its
//! source's: the bench copies into a hot buffer, as read(2) does).

use crate::mm::folio::Pfn;

const EMPTY: u32 = u32::MAX;
/// Lines in a 4 KiB page.
const LINES_PER_PAGE: u32 = 64;

/// One machine's L2 caches, one per core.
#[derive(Clone, Debug)]
pub struct L2Cache {
    sets: usize,
    ways: usize,
    /// SMT threads per core: a core's threads share its L2 (they are
    /// consecutive CPUs, `Topology::siblings`).
    threads_per_core: usize,
    /// [core][set][way] frames, most recently used first (EMPTY: none).
    tags: Vec<u32>,
    /// Per core: user accesses since its last aging, and the next set to
    /// age.
    lines: Vec<u32>,
    next_set: Vec<u32>,
    /// ns of a 4 KiB copy whose source is in the copying CPU's L2.
    pub copy_ns: u64,
}

/// What a profile says of a CPU's L2: its geometry and a copy from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2Model {
    pub bytes: u64,
    pub ways: u32,
    pub copy_page_l2: u64,
}

impl L2Cache {
    /// The L2s of `cpus` CPUs, `threads_per_core` to a core, as `m`
    /// describes them. None if the geometry holds less than a page set or
    /// more than `MAX_L2_BYTES` (both refused when a profile loads).
    pub fn new(m: L2Model, cpus: usize, threads_per_core: usize) -> Option<L2Cache> {
        if !crate::machine_profile::l2_geometry_ok(m.bytes, m.ways.into()) {
            return None;
        }
        let (ways, sets) = (m.ways as usize, (m.bytes / 4096 / m.ways as u64) as usize);
        let threads_per_core = threads_per_core.max(1);
        let cores = cpus.div_ceil(threads_per_core);
        Some(L2Cache {
            sets,
            ways,
            threads_per_core,
            tags: vec![EMPTY; cores * sets * ways],
            lines: vec![0; cores],
            next_set: vec![0; cores],
            copy_ns: m.copy_page_l2,
        })
    }

    /// The index of `pfn`'s set in the cache of `cpu`'s core.
    #[inline]
    fn set_of(&self, cpu: usize, pfn: Pfn) -> usize {
        self.core_set(cpu / self.threads_per_core, pfn)
    }

    #[inline]
    fn core_set(&self, core: usize, pfn: Pfn) -> usize {
        self.set_index(core, pfn as usize % self.sets)
    }

    /// The index in `tags` of set `set` of `core`'s cache.
    #[inline]
    fn set_index(&self, core: usize, set: usize) -> usize {
        (core * self.sets + set) * self.ways
    }

    /// Is `pfn` in `cpu`'s L2?
    pub fn resident(&self, cpu: usize, pfn: Pfn) -> bool {
        let s = self.set_of(cpu, pfn);
        self.tags[s..s + self.ways].contains(&pfn)
    }

    /// `cpu` streamed `pfn` whole: it becomes the most recently used page
    /// of its set, the least recently used going if the set was full.
    /// Returns whether it was resident before.
    #[inline]
    pub fn fill(&mut self, cpu: usize, pfn: Pfn) -> bool {
        let s = self.set_of(cpu, pfn);
        // One pass: each way takes the previous one's page until the
        // page itself (a hit) or the end (the least recent drops out).
        let mut carry = pfn;
        for way in &mut self.tags[s..s + self.ways] {
            let was = std::mem::replace(way, carry);
            if was == pfn {
                return true;
            }
            carry = was;
        }
        false
    }

    /// `pfn` is written by `cpu` (or, with None, by a device): every
    /// other core's copy is invalidated.
    #[inline]
    pub fn invalidate_others(&mut self, cpu: Option<usize>, pfn: Pfn) {
        let cores = self.lines.len();
        if cores == 1 && cpu.is_some() {
            return;
        }
        let own = cpu.map(|c| c / self.threads_per_core);
        for c in (0..cores).filter(|&c| Some(c) != own) {
            let s = self.core_set(c, pfn);
            let set = &mut self.tags[s..s + self.ways];
            if let Some(i) = set.iter().position(|&t| t == pfn) {
                // The invalid way becomes the set's least recently used.
                set[i..].rotate_left(1);
                set[self.ways - 1] = EMPTY;
            }
        }
    }

    /// `n` user accesses by `cpu`: one line each.
    #[inline]
    pub fn user_lines(&mut self, cpu: usize, n: u64) {
        let core = cpu / self.threads_per_core;
        let total = self.lines[core] as u64 + n;
        if total < LINES_PER_PAGE as u64 {
            self.lines[core] = total as u32;
            return;
        }
        self.age(core, total);
    }

    /// `user_lines`' aging of `cpu`'s core's cache by `total` / 64 ways,
    /// a set at a time in turn: a way taken by the lines goes to the
    /// set's front, its last way (a free one first) drops out.
    #[cold]
    fn age(&mut self, core: usize, total: u64) {
        let pages = total / LINES_PER_PAGE as u64;
        self.lines[core] = (total % LINES_PER_PAGE as u64) as u32;
        // Past a whole cache's worth, the cache holds none of its pages.
        for _ in 0..pages.min((self.sets * self.ways) as u64) {
            let set = self.next_set[core] as usize;
            self.next_set[core] = ((set + 1) % self.sets) as u32;
            let s = self.set_index(core, set);
            let set = &mut self.tags[s..s + self.ways];
            set.rotate_right(1);
            set[0] = EMPTY;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2 MiB, 16-way L2 (Sapphire Rapids'): 32 page sets of 16.
    fn two_cpus() -> L2Cache {
        let m = L2Model {
            bytes: 2 << 20,
            ways: 16,
            copy_page_l2: 70,
        };
        L2Cache::new(m, 2, 1).expect("geometry")
    }

    #[test]
    fn a_page_streamed_on_one_cpu_is_resident_there_only() {
        let mut c = two_cpus();
        assert!(!c.fill(0, 1000));
        assert!(c.resident(0, 1000));
        assert!(!c.resident(1, 1000));
        assert!(c.fill(0, 1000), "the second fill hits");
    }

    #[test]
    fn twice_the_cache_of_other_pages_evicts_it() {
        let mut c = two_cpus();
        c.fill(0, 7);
        // 512 pages fill the cache; 1024 others pass through every set.
        for p in 0..1024u32 {
            c.fill(0, 10_000 + p);
        }
        assert!(!c.resident(0, 7));
        // A set of 16 keeps its 16 most recent pages: 32 sets apart.
        let mut c = two_cpus();
        for i in 0..17u32 {
            c.fill(0, 7 + 32 * i);
        }
        assert!(
            !c.resident(0, 7),
            "the 17th page of a set evicts its oldest"
        );
        assert!(c.resident(0, 7 + 32));
    }

    #[test]
    fn a_hit_refreshes_its_page() {
        let mut c = two_cpus();
        for i in 0..16u32 {
            c.fill(0, 5 + 32 * i);
        }
        c.fill(0, 5);
        c.fill(0, 5 + 32 * 16);
        assert!(c.resident(0, 5), "used last, kept");
        assert!(!c.resident(0, 5 + 32), "the oldest went");
    }

    #[test]
    fn a_write_elsewhere_or_dma_invalidates() {
        let mut c = two_cpus();
        c.fill(0, 3);
        c.fill(1, 3);
        c.invalidate_others(Some(1), 3);
        assert!(!c.resident(0, 3));
        assert!(c.resident(1, 3));
        c.invalidate_others(None, 3);
        assert!(!c.resident(1, 3));
    }

    #[test]
    fn user_accesses_age_the_cache_a_line_at_a_time() {
        let mut c = two_cpus();
        for p in 0..512u32 {
            c.fill(0, p);
        }
        c.fill(1, 0);
        c.user_lines(0, 63);
        assert!(
            (0..512u32).all(|p| c.resident(0, p)),
            "63 lines: no page yet"
        );
        c.user_lines(0, 1);
        let kept = (0..512u32).filter(|&p| c.resident(0, p)).count();
        assert_eq!(kept, 511, "64 lines age one page");
        c.user_lines(0, 64 * 511);
        assert!((0..512u32).all(|p| !c.resident(0, p)));
        assert!(c.resident(1, 0), "another CPU's accesses leave it");
    }

    #[test]
    fn smt_siblings_share_their_cores_l2() {
        let m = L2Model {
            bytes: 2 << 20,
            ways: 16,
            copy_page_l2: 70,
        };
        let mut c = L2Cache::new(m, 4, 2).expect("geometry");
        c.fill(0, 9);
        assert!(c.resident(1, 9), "the sibling's");
        assert!(!c.resident(2, 9), "another core's");
        c.fill(2, 9);
        c.invalidate_others(Some(1), 9);
        assert!(c.resident(0, 9), "a sibling's write keeps the core's copy");
        assert!(!c.resident(3, 9));
    }

    #[test]
    fn a_geometry_under_one_set_is_refused() {
        let m = L2Model {
            bytes: 4096,
            ways: 16,
            copy_page_l2: 1,
        };
        assert!(L2Cache::new(m, 1, 1).is_none());
    }
}

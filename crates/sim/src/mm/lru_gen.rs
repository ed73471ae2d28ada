//! The multi-gen LRU (CONFIG_LRU_GEN) as Linux 6.1 has it: mm/vmscan.c's
//! aging and eviction, mm_inline.h's list operations, workingset.c's
//! shadows, swap.c's reference counting. Documentation/mm/multigen_lru.rst
//! describes the design; this file follows the code.
//!
//! Each lruvec keeps generations numbered by sequence: `max_seq` is the
//! youngest, `min_seq[type]` the oldest of anon and file, two to four
//! alive (a folio's generation is `seq % MAX_NR_GENS`, kept in its flags).
//! Faults add folios to the youngest generation; aging (`inc_max_seq`)
//! opens a new one, walking the page tables of the memcg's mms first
//! (`walk_mm`, capability 0x0002) to promote what they found young;
//! page-table references found by rmap (`lru_gen_look_around`) promote
//! folios too; accesses
//! through file descriptors count up a folio's tier (`folio_inc_refs`),
//! and eviction protects tiers whose refault rate is higher than the first
//! tier's of the other type (a PID controller over refaults and
//! evictions).
//!
//! Modelled as 6.1 with CONFIG_LRU_GEN_STATS off (NR_HIST_GENS = 1) and
//! x86-64's page-flag layout (LRU_REFS_WIDTH = 2). Not modelled, each with
//! no effect on what a spec can express: memory.min/low protection (no
//! spec keys; `mem_cgroup_below_min` is false), memcgs going offline
//! (none do), and the wait for another reclaimer's aging (aging here runs
//! to completion inside one reclaimer's step, so one walker at a time).

use super::folio::*;
use super::lruvec::{LruList, LruZone};
use super::memcontrol::HZ;
use super::mmap::{VM_LOCKED, VM_RAND_READ, VM_SEQ_READ};
use super::page_alloc::{WMARK_HIGH, WMARK_LOW};
use super::pgtable::*;
use super::vmscan::{ReclaimStat, ScanControl, DEF_PRIORITY};
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

pub const MIN_NR_GENS: u64 = 2;
pub const MAX_NR_GENS: usize = 4;
pub const MAX_NR_TIERS: usize = 4;
/// Reference-count bits beyond PG_referenced and PG_workingset.
const LRU_REFS_WIDTH: u32 = 2;
/// BITS_PER_LONG.
const MIN_LRU_BATCH: u64 = 64;
const MAX_LRU_BATCH: u64 = MIN_LRU_BATCH * 64;
/// The zones a lruvec's generations are split by (page_alloc.rs's
/// DMA, DMA32, Normal).
pub const NR_ZONES: usize = 3;
/// Lists per lruvec: `folios[gen][type][zone]`.
pub const NR_GEN_LISTS: usize = MAX_NR_GENS * 2 * NR_ZONES;
/// The first list id of the generations in a folio's `lru`.
pub const LRU_GEN_BASE: u8 = 16;

/// A folio's generation + 1 (0: not on a generation list), as
/// LRU_GEN_MASK keeps it in page flags.
const LRU_GEN_PGOFF: u32 = 29;
pub const LRU_GEN_MASK: u32 = 7 << LRU_GEN_PGOFF;
/// Accesses through file descriptors beyond the first two.
const LRU_REFS_PGOFF: u32 = 15;
pub const LRU_REFS_MASK: u32 = ((1 << LRU_REFS_WIDTH) - 1) << LRU_REFS_PGOFF;
const LRU_REFS_FLAGS: u32 = PG_REFERENCED | PG_WORKINGSET;

/// BLOOM_FILTER_SHIFT: each filter has 2^15 bits.
const BLOOM_FILTER_SHIFT: u32 = 15;
const BLOOM_WORDS: usize = (1 << BLOOM_FILTER_SHIFT) / 64;

/// `enabled`'s capability bits.
pub const LRU_GEN_CORE: u8 = 1;
pub const LRU_GEN_MM_WALK: u8 = 2;
pub const LRU_GEN_NONLEAF_YOUNG: u8 = 4;

/// Debian's 6.1 PAGEVEC_SIZE: look-around activates fewer folios than
/// this one by one.
const PAGEVEC_SIZE: usize = 15;
const ANON: usize = 0;
const FILE: usize = 1;

/// `struct lru_gen_struct` with `lru_gen_mm_state`'s sequence.
#[derive(Clone)]
pub struct LruGen {
    pub max_seq: u64,
    pub min_seq: [u64; 2],
    /// Birth of each generation, jiffies.
    pub timestamps: [u64; MAX_NR_GENS],
    /// `folios[gen][type][zone]`, flattened (`gen_list`).
    pub lists: [LruList; NR_GEN_LISTS],
    pub nr_pages: [[[i64; NR_ZONES]; 2]; MAX_NR_GENS],
    pub avg_refaulted: [[u64; MAX_NR_TIERS]; 2],
    pub avg_total: [[u64; MAX_NR_TIERS]; 2],
    pub protected: [[u64; MAX_NR_TIERS - 1]; 2],
    pub evicted: [[u64; MAX_NR_TIERS]; 2],
    pub refaulted: [[u64; MAX_NR_TIERS]; 2],
    /// `mm_state.seq`: the last max_seq an mm-list pass was started for.
    pub mm_seq: u64,
    /// `mm_state.tail`: None before the first pass (every mm is new), the
    /// first mm added since the last pass, or NIL (the list's end).
    pub mm_tail: Option<u32>,
    /// `mm_state.filters`: the Bloom filters of PTE tables worth walking,
    /// by sequence parity (allocated by the first walk that resets one).
    pub filters: [Option<Box<[u64; BLOOM_WORDS]>>; 2],
}

impl Default for LruGen {
    /// `lru_gen_init_lruvec` at boot.
    fn default() -> Self {
        LruGen {
            max_seq: MIN_NR_GENS + 1,
            min_seq: [0; 2],
            timestamps: [0; MAX_NR_GENS],
            lists: [LruList::EMPTY; NR_GEN_LISTS],
            nr_pages: [[[0; NR_ZONES]; 2]; MAX_NR_GENS],
            avg_refaulted: [[0; MAX_NR_TIERS]; 2],
            avg_total: [[0; MAX_NR_TIERS]; 2],
            protected: [[0; MAX_NR_TIERS - 1]; 2],
            evicted: [[0; MAX_NR_TIERS]; 2],
            refaulted: [[0; MAX_NR_TIERS]; 2],
            mm_seq: MIN_NR_GENS,
            mm_tail: None,
            filters: [None, None],
        }
    }
}

impl LruGen {
    fn nr_gens(&self, ty: usize) -> u64 {
        self.max_seq - self.min_seq[ty] + 1
    }

    /// `lru_gen_is_active`: the two youngest generations count as the
    /// active lists in the compatibility gauges.
    pub fn is_active(&self, gen: usize) -> bool {
        gen == lru_gen_from_seq(self.max_seq) || gen == lru_gen_from_seq(self.max_seq - 1)
    }

    /// Pages of a generation and type, over the zones.
    pub fn gen_size(&self, gen: usize, ty: usize) -> u64 {
        self.nr_pages[gen][ty]
            .iter()
            .map(|&n| n.max(0) as u64)
            .sum()
    }
}

/// The multi-gen LRU's switches and the reclaimer's walk.
#[derive(Default, Clone, Debug)]
pub struct LruGenCtl {
    /// `enabled`'s capabilities (0: the classic LRU runs).
    pub caps: u8,
    /// `min_ttl_ms` in jiffies.
    pub min_ttl: u64,
    /// `pgdat->mm_walk.can_swap`: kswapd's walk, kept between its runs.
    pub kswapd_can_swap: bool,
    /// `current->reclaim_state->mm_walk`, by its `can_swap`: set while
    /// kswapd reclaims, and for a direct reclaimer after it walked.
    pub walk: Option<bool>,
}

#[inline]
pub fn lru_gen_from_seq(seq: u64) -> usize {
    (seq % MAX_NR_GENS as u64) as usize
}

/// `order_base_2(refs + 1)`: tiers 0, 1, 2, 2, 3 for refs 0 to 4.
#[inline]
fn lru_tier_from_refs(refs: u32) -> usize {
    (32 - refs.leading_zeros()) as usize
}

/// The list id of `folios[gen][type][zone]`.
#[inline]
pub fn gen_list(gen: usize, ty: usize, zone: usize) -> u8 {
    LRU_GEN_BASE + ((gen * 2 + ty) * NR_ZONES + zone) as u8
}

/// `folio_lru_gen`.
#[inline]
pub fn folio_lru_gen(f: &Folio) -> Option<usize> {
    let g = (f.flags & LRU_GEN_MASK) >> LRU_GEN_PGOFF;
    (g > 0).then(|| g as usize - 1)
}

/// `folio_lru_refs`: accesses beyond the first (N−1 for N > 1).
#[inline]
fn folio_lru_refs(f: &Folio) -> u32 {
    ((f.flags & LRU_REFS_MASK) >> LRU_REFS_PGOFF) + f.test(PG_WORKINGSET) as u32
}

#[inline]
fn with_gen(flags: u32, gen: usize) -> u32 {
    (flags & !LRU_GEN_MASK) | ((gen as u32 + 1) << LRU_GEN_PGOFF)
}

/// `get_item_key`: two 15-bit keys from a 30-bit hash of the PMD entry.
/// The kernel hashes the entry's kernel address; mmsim has none, so it
/// hashes what identifies the entry, the mm and the 2 MiB block of
/// addresses (a different false-positive pattern at the same rate).
fn bloom_key(mm: u32, vpn: u64) -> [u32; 2] {
    const GOLDEN_RATIO_64: u64 = 0x61c8_8646_80b5_83eb;
    let item = ((mm as u64) << 40) ^ (vpn >> 9);
    let hash = (item.wrapping_mul(GOLDEN_RATIO_64) >> (64 - 2 * BLOOM_FILTER_SHIFT)) as u32;
    [
        hash & ((1 << BLOOM_FILTER_SHIFT) - 1),
        hash >> BLOOM_FILTER_SHIFT,
    ]
}

/// `struct ctrl_pos`: a type and tier's refaults over its evictions.
struct CtrlPos {
    refaulted: u64,
    total: u64,
    gain: u64,
}

/// `positive_ctrl_err`: the PV refaults little, or less than the SP.
fn positive_ctrl_err(sp: &CtrlPos, pv: &CtrlPos) -> bool {
    pv.refaulted < MIN_LRU_BATCH
        || pv
            .refaulted
            .wrapping_mul(sp.total + MIN_LRU_BATCH)
            .wrapping_mul(sp.gain)
            <= (sp.refaulted + 1)
                .wrapping_mul(pv.total)
                .wrapping_mul(pv.gain)
}

impl Kernel {
    /// Jiffies now (HZ = 250).
    fn jiffies(&self) -> u64 {
        self.now() / (1_000_000_000 / HZ)
    }

    fn folio_zonenum(&self, pfn: Pfn) -> usize {
        self.zone_of(pfn)
    }

    fn lrugen(&self, memcg: u16) -> &LruGen {
        &self.lruvecs[memcg as usize].lrugen
    }

    fn lrugen_mut(&mut self, memcg: u16) -> &mut LruGen {
        &mut self.lruvecs[memcg as usize].lrugen
    }

    fn lru_gen_is_active(&self, memcg: u16, gen: usize) -> bool {
        self.lrugen(memcg).is_active(gen)
    }

    /// `lru_gen_update_size`: the generation's count and the
    /// active/inactive gauges, for an addition, deletion or promotion.
    fn lru_gen_update_size(&mut self, pfn: Pfn, old: Option<usize>, new: Option<usize>) {
        let f = *self.folios.get(pfn);
        let (ty, zone, delta) = (
            f.is_file_lru() as usize,
            self.folio_zonenum(pfn),
            f.nr_pages() as i64,
        );
        let memcg = f.memcg;
        let lru = ty as u8 * LRU_INACTIVE_FILE;
        let lg = self.lrugen_mut(memcg);
        if let Some(o) = old {
            lg.nr_pages[o][ty][zone] -= delta;
        }
        if let Some(n) = new {
            lg.nr_pages[n][ty][zone] += delta;
        }
        match (old, new) {
            (None, Some(n)) => {
                let a = self.lru_gen_is_active(memcg, n) as u8;
                self.update_lru_size(memcg, lru + a, delta, LruZone::Is(zone));
            }
            (Some(o), None) => {
                let a = self.lru_gen_is_active(memcg, o) as u8;
                self.update_lru_size(memcg, lru + a, -delta, LruZone::Is(zone));
            }
            (Some(o), Some(n)) => {
                if !self.lru_gen_is_active(memcg, o) && self.lru_gen_is_active(memcg, n) {
                    self.update_lru_size(memcg, lru, -delta, LruZone::Is(zone));
                    self.update_lru_size(memcg, lru + 1, delta, LruZone::Is(zone));
                }
            }
            (None, None) => {}
        }
    }

    /// A split's tail joins (or its head leaves) the head's generation
    /// with `nr` pages, which the head's count held before.
    pub(crate) fn lru_gen_split_size(&mut self, pfn: Pfn, nr: i64) {
        let f = *self.folios.get(pfn);
        let gen = folio_lru_gen(&f).expect("a split folio on a generation list");
        let (ty, zone) = (f.is_file_lru() as usize, self.folio_zonenum(pfn));
        self.lrugen_mut(f.memcg).nr_pages[gen][ty][zone] += nr;
        let lru = ty as u8 * LRU_INACTIVE_FILE + self.lru_gen_is_active(f.memcg, gen) as u8;
        self.update_lru_size(f.memcg, lru, nr, LruZone::Is(zone));
    }

    /// `lru_gen_add_folio`: hot folios (PG_active: just faulted in) to the
    /// youngest generation; folios that cannot be evicted at once (anon
    /// without swap cache, dirty or under writeback for reclaim) to the
    /// second youngest; the rest to the oldest or second oldest. False for
    /// an unevictable folio, which takes the classic list.
    pub(crate) fn lru_gen_add_folio(&mut self, pfn: Pfn, reclaiming: bool) -> bool {
        let f = *self.folios.get(pfn);
        debug_assert!(folio_lru_gen(&f).is_none(), "{f:?}");
        if f.test(PG_UNEVICTABLE) {
            return false;
        }
        let ty = f.is_file_lru() as usize;
        let lg = self.lrugen(f.memcg);
        let seq = if f.test(PG_ACTIVE) {
            lg.max_seq
        } else if (ty == ANON && !f.test(PG_SWAPCACHE))
            || (f.test(PG_RECLAIM) && (f.test(PG_DIRTY) || f.test(PG_WRITEBACK)))
        {
            lg.max_seq - 1
        } else if reclaiming || lg.min_seq[ty] + MIN_NR_GENS >= lg.max_seq {
            lg.min_seq[ty]
        } else {
            lg.min_seq[ty] + 1
        };
        let gen = lru_gen_from_seq(seq);
        let g = self.folios.get_mut(pfn);
        g.flags = with_gen(g.flags, gen) & !PG_ACTIVE;
        self.lru_gen_update_size(pfn, None, Some(gen));
        let zone = self.folio_zonenum(pfn);
        self.list_link(pfn, f.memcg, gen_list(gen, ty, zone), reclaiming);
        true
    }

    /// `lru_gen_del_folio`: false if the folio is not on a generation.
    /// Leaving an active generation other than for reclaim, it keeps
    /// PG_active (for whoever adds it back).
    pub(crate) fn lru_gen_del_folio(&mut self, pfn: Pfn, reclaiming: bool) -> bool {
        let f = *self.folios.get(pfn);
        let Some(gen) = folio_lru_gen(&f) else {
            return false;
        };
        let active = !reclaiming && self.lru_gen_is_active(f.memcg, gen);
        self.lru_gen_update_size(pfn, Some(gen), None);
        let g = self.folios.get_mut(pfn);
        g.flags &= !LRU_GEN_MASK;
        if active {
            g.flags |= PG_ACTIVE;
        }
        self.list_unlink(pfn);
        true
    }

    /// `folio_inc_refs` (folio_mark_accessed): PG_referenced, then
    /// PG_workingset, then the reference bits up to their maximum.
    pub(crate) fn folio_inc_refs(&mut self, pfn: Pfn) {
        let f = self.folios.get_mut(pfn);
        if f.test(PG_UNEVICTABLE) {
            return;
        }
        if !f.test(PG_REFERENCED) {
            f.set(PG_REFERENCED);
            return;
        }
        if !f.test(PG_WORKINGSET) {
            f.set(PG_WORKINGSET);
            return;
        }
        if f.flags & LRU_REFS_MASK != LRU_REFS_MASK {
            f.flags += 1 << LRU_REFS_PGOFF;
        }
    }

    /// `folio_update_gen`: a page-table reference promotes the folio to
    /// `gen` (it moves lists when sorted). A folio off the generations
    /// (isolated) gets PG_referenced instead. Returns the old generation.
    fn folio_update_gen(&mut self, pfn: Pfn, gen: usize) -> Option<usize> {
        let f = self.folios.get_mut(pfn);
        let Some(old) = folio_lru_gen(f) else {
            f.set(PG_REFERENCED);
            return None;
        };
        f.flags = with_gen(f.flags & !(LRU_REFS_MASK | LRU_REFS_FLAGS), gen);
        Some(old)
    }

    /// `folio_inc_gen`: out of the oldest generation into the next, unless
    /// already promoted. `reclaiming` marks it for rotation at writeback's
    /// end.
    fn folio_inc_gen(&mut self, pfn: Pfn, reclaiming: bool) -> usize {
        let f = *self.folios.get(pfn);
        let ty = f.is_file_lru() as usize;
        let old_gen = lru_gen_from_seq(self.lrugen(f.memcg).min_seq[ty]);
        let cur = folio_lru_gen(&f).expect("on a generation");
        if cur != old_gen {
            return cur;
        }
        let new_gen = (old_gen + 1) % MAX_NR_GENS;
        let g = self.folios.get_mut(pfn);
        g.flags = with_gen(g.flags & !(LRU_REFS_MASK | LRU_REFS_FLAGS), new_gen);
        if reclaiming {
            g.flags |= PG_RECLAIM;
        }
        self.lru_gen_update_size(pfn, Some(old_gen), Some(new_gen));
        new_gen
    }

    // ---- the PID controller ---------------------------------------------

    fn read_ctrl_pos(&self, memcg: u16, ty: usize, tier: usize, gain: u64) -> CtrlPos {
        let lg = self.lrugen(memcg);
        let mut total = lg.avg_total[ty][tier] + lg.evicted[ty][tier];
        if tier > 0 {
            total += lg.protected[ty][tier - 1];
        }
        CtrlPos {
            refaulted: lg.avg_refaulted[ty][tier] + lg.refaulted[ty][tier],
            total,
            gain,
        }
    }

    /// `reset_ctrl_pos` with one history generation: only the carryover
    /// when min_seq moves does anything (halve into the averages, clear).
    fn reset_ctrl_pos(&mut self, memcg: u16, ty: usize, carryover: bool) {
        if !carryover {
            return;
        }
        let lg = self.lrugen_mut(memcg);
        for tier in 0..MAX_NR_TIERS {
            lg.avg_refaulted[ty][tier] = (lg.avg_refaulted[ty][tier] + lg.refaulted[ty][tier]) / 2;
            let mut sum = lg.avg_total[ty][tier] + lg.evicted[ty][tier];
            if tier > 0 {
                sum += lg.protected[ty][tier - 1];
            }
            lg.avg_total[ty][tier] = sum / 2;
            lg.refaulted[ty][tier] = 0;
            lg.evicted[ty][tier] = 0;
            if tier > 0 {
                lg.protected[ty][tier - 1] = 0;
            }
        }
    }

    /// `get_tier_idx`: the last tier whose refault rate is not above the
    /// first's (gain 1:2, a margin for noise).
    fn get_tier_idx(&self, memcg: u16, ty: usize) -> usize {
        let sp = self.read_ctrl_pos(memcg, ty, 0, 1);
        let mut tier = 1;
        while tier < MAX_NR_TIERS {
            let pv = self.read_ctrl_pos(memcg, ty, tier, 2);
            if !positive_ctrl_err(&sp, &pv) {
                break;
            }
            tier += 1;
        }
        tier - 1
    }

    /// `get_type_to_scan`: the type whose first tier refaults less
    /// (weighted by swappiness), and the last tier of it to evict.
    fn get_type_to_scan(&self, memcg: u16, swappiness: u64) -> (usize, usize) {
        let gain = [swappiness, 200 - swappiness];
        let sp = self.read_ctrl_pos(memcg, ANON, 0, gain[ANON]);
        let pv = self.read_ctrl_pos(memcg, FILE, 0, gain[FILE]);
        let ty = positive_ctrl_err(&sp, &pv) as usize;
        let sp = self.read_ctrl_pos(memcg, 1 - ty, 0, gain[1 - ty]);
        let mut tier = 1;
        while tier < MAX_NR_TIERS {
            let pv = self.read_ctrl_pos(memcg, ty, tier, gain[ty]);
            if !positive_ctrl_err(&sp, &pv) {
                break;
            }
            tier += 1;
        }
        (ty, tier - 1)
    }

    // ---- the aging --------------------------------------------------------

    /// `inc_min_seq`: move what is left of the oldest generation of `ty`
    /// into the next and retire it. False if MAX_LRU_BATCH folios moved
    /// first (the caller comes back).
    fn inc_min_seq(&mut self, memcg: u16, ty: usize, can_swap: bool) -> bool {
        if ty == FILE || can_swap {
            let mut remaining = MAX_LRU_BATCH;
            let old_gen = lru_gen_from_seq(self.lrugen(memcg).min_seq[ty]);
            for zone in 0..NR_ZONES {
                loop {
                    let id = gen_list(old_gen, ty, zone);
                    let pfn = self.lruvecs[memcg as usize].list(id).tail;
                    if pfn == NIL {
                        break;
                    }
                    let new_gen = self.folio_inc_gen(pfn, false);
                    self.list_move(pfn, gen_list(new_gen, ty, zone), true);
                    self.charge_cost(Fn::LruGenAging, self.costs.lru_move);
                    remaining -= 1;
                    if remaining == 0 {
                        return false;
                    }
                }
            }
        }
        self.reset_ctrl_pos(memcg, ty, true);
        self.lrugen_mut(memcg).min_seq[ty] += 1;
        true
    }

    /// `try_to_inc_min_seq`: retire empty oldest generations, keeping anon
    /// no older than file when swapping is allowed.
    fn try_to_inc_min_seq(&mut self, memcg: u16, can_swap: bool) -> bool {
        let lg = self.lrugen(memcg);
        let mut min_seq = lg.min_seq;
        for (ty, seq) in min_seq.iter_mut().enumerate().skip(!can_swap as usize) {
            while *seq + MIN_NR_GENS <= lg.max_seq {
                let gen = lru_gen_from_seq(*seq);
                let lists = &self.lruvecs[memcg as usize];
                if (0..NR_ZONES).any(|z| lists.list(gen_list(gen, ty, z)).head != NIL) {
                    break;
                }
                *seq += 1;
            }
        }
        if can_swap {
            min_seq[ANON] = min_seq[ANON].min(min_seq[FILE]);
            min_seq[FILE] = min_seq[ANON].max(lg.min_seq[FILE]);
        }
        let mut success = false;
        for (ty, &seq) in min_seq.iter().enumerate().skip(!can_swap as usize) {
            if seq == self.lrugen(memcg).min_seq[ty] {
                continue;
            }
            self.reset_ctrl_pos(memcg, ty, true);
            self.lrugen_mut(memcg).min_seq[ty] = seq;
            success = true;
        }
        success
    }

    /// `inc_max_seq`: a new youngest generation (retiring the oldest of a
    /// type that has four), the gauges of the one leaving the active pair
    /// moved to inactive.
    fn inc_max_seq(&mut self, memcg: u16, can_swap: bool) {
        let line = crate::cacheline::Line::LruLock(memcg);
        let mut lock = self.spin_lock(line);
        for ty in [FILE, ANON] {
            if self.lrugen(memcg).nr_gens(ty) != MAX_NR_GENS as u64 {
                continue;
            }
            // The lock is dropped between batches (cond_resched).
            while !self.inc_min_seq(memcg, ty, can_swap) {
                self.spin_unlock(lock.take());
                lock = self.spin_relock(line);
            }
        }
        let lg = self.lrugen(memcg);
        let prev = lru_gen_from_seq(lg.max_seq - 1);
        let next = lru_gen_from_seq(lg.max_seq + 1);
        for ty in [ANON, FILE] {
            for zone in 0..NR_ZONES {
                let lg = self.lrugen(memcg);
                let delta = lg.nr_pages[prev][ty][zone] - lg.nr_pages[next][ty][zone];
                if delta == 0 {
                    continue;
                }
                let lru = ty as u8 * LRU_INACTIVE_FILE;
                self.update_lru_size(memcg, lru, delta, LruZone::Is(zone));
                self.update_lru_size(memcg, lru + 1, -delta, LruZone::Is(zone));
            }
        }
        let now = self.jiffies();
        let lg = self.lrugen_mut(memcg);
        lg.timestamps[next] = now;
        lg.max_seq += 1;
        self.spin_unlock(lock);
    }

    /// `try_to_inc_max_seq`: one pass over the memcg's mm list per new
    /// generation. With page-table walks (capability 0x0002 on an MMU with
    /// accessed bits) the pass walks the page tables of every mm that ran
    /// since the last one; without, it is `iterate_mm_list_nowalk` and
    /// references are left for rmap's look-around to find.
    fn try_to_inc_max_seq(&mut self, memcg: u16, max_seq: u64, can_swap: bool) -> bool {
        let walks = self.hw_pte_young && self.lru_gen.caps & LRU_GEN_MM_WALK != 0;
        let success = if max_seq <= self.lrugen(memcg).mm_seq {
            false
        } else if !walks {
            // iterate_mm_list_nowalk.
            self.lrugen_mut(memcg).mm_seq += 1;
            true
        } else {
            // set_mm_walk: kswapd's walk lives on; a direct reclaimer's
            // stays until its lru_gen_shrink_lruvec ends.
            self.lru_gen.walk = Some(can_swap);
            if self.current_is_kswapd() {
                self.lru_gen.kswapd_can_swap = can_swap;
            }
            self.traced(Fn::LruGenWalk, |k| {
                k.iterate_mm_list(memcg, max_seq, can_swap)
            });
            true
        };
        if !success {
            return max_seq < self.lrugen(memcg).max_seq;
        }
        self.traced(Fn::LruGenAging, |k| k.inc_max_seq(memcg, can_swap));
        true
    }

    // ---- the mm list and page-table walks ---------------------------------

    /// `lru_gen_add_mm`: at the end of its memcg's mm list; the first one
    /// added since a completed pass is where the next pass's forced scan
    /// starts.
    pub(crate) fn lru_gen_add_mm(&mut self, mm: u32) {
        let memcg = self.mms[mm as usize].memcg;
        self.mms[mm as usize].lru_gen_listed = true;
        let lg = self.lrugen_mut(memcg);
        if lg.mm_tail == Some(NIL) {
            lg.mm_tail = Some(mm);
        }
    }

    /// `lru_gen_del_mm`: off the list (its task exited).
    pub(crate) fn lru_gen_del_mm(&mut self, mm: u32) {
        if !std::mem::take(&mut self.mms[mm as usize].lru_gen_listed) {
            return;
        }
        let memcg = self.mms[mm as usize].memcg;
        if self.lrugen(memcg).mm_tail == Some(mm) {
            let next = self.next_mm(memcg, mm + 1);
            self.lrugen_mut(memcg).mm_tail = Some(next);
        }
    }

    /// The first mm on `memcg`'s list from index `from` (NIL: the end).
    /// The list is a FIFO of mms by creation, which is their index order.
    fn next_mm(&self, memcg: u16, from: u32) -> u32 {
        (from..self.mms.len() as u32)
            .find(|&m| {
                let mm = &self.mms[m as usize];
                mm.lru_gen_listed && mm.memcg == memcg
            })
            .unwrap_or(NIL)
    }

    /// `iterate_mm_list` run to its end, walking each mm it hands out
    /// (one walker: the walk completes inside this reclaimer's step).
    fn iterate_mm_list(&mut self, memcg: u16, max_seq: u64, can_swap: bool) {
        let mut force_scan = false;
        let mut first = true;
        let mut cur = self.next_mm(memcg, 0);
        while cur != NIL {
            let mm = cur;
            cur = self.next_mm(memcg, mm + 1);
            // Force a scan from the first mm added since the last pass.
            let lg = self.lrugen_mut(memcg);
            if lg.mm_tail.is_none() || lg.mm_tail == Some(mm) {
                lg.mm_tail = Some(cur);
                force_scan = true;
            }
            if self.should_skip_mm(mm, force_scan, can_swap) {
                continue;
            }
            if std::mem::take(&mut first) {
                self.reset_bloom_filter(memcg, max_seq + 1);
            }
            self.walk_mm(memcg, mm, max_seq, can_swap, force_scan);
        }
        self.lrugen_mut(memcg).mm_seq += 1;
    }

    /// `should_skip_mm`: not run since the last walk (unless forced), or
    /// too small to be worth it.
    fn should_skip_mm(&mut self, mm: u32, force_scan: bool, can_swap: bool) -> bool {
        let m = &mut self.mms[mm as usize];
        if !force_scan && !m.lru_gen_used {
            return true;
        }
        m.lru_gen_used = false;
        let size = m.rss_file
            + if can_swap {
                m.rss_anon + m.rss_shmem
            } else {
                0
            };
        size < MIN_LRU_BATCH
    }

    /// `should_skip_vma`: VMAs the walk leaves alone.
    fn should_skip_vma(&self, vma: u32, can_swap: bool) -> bool {
        let v = &self.vmas[vma as usize];
        if !v.live || v.flags & (VM_LOCKED | VM_SEQ_READ | VM_RAND_READ) != 0 {
            return true;
        }
        if v.inode == NIL || self.inodes[v.inode as usize].is_shmem() {
            return !can_swap;
        }
        false
    }

    /// `walk_mm` → `walk_pmd_range` over each VMA in address order: a
    /// PMD-mapped folio young in its PMD is promoted; a PTE table whose
    /// PMD entry is old is skipped (with capability 0x0004), else walked if
    /// the Bloom filter has it (or the scan is forced); a table with many
    /// young PTEs goes into the next generation's filter.
    fn walk_mm(&mut self, memcg: u16, mm: u32, max_seq: u64, can_swap: bool, force_scan: bool) {
        let nonleaf = self.lru_gen.caps & LRU_GEN_NONLEAF_YOUNG != 0;
        for i in 0..self.mms[mm as usize].vmas.len() {
            let vma = self.mms[mm as usize].vmas[i];
            if self.should_skip_vma(vma, can_swap) {
                continue;
            }
            let v = &self.vmas[vma as usize];
            let (start, end) = (v.start_vpn, v.start_vpn + v.pages);
            let mut block = start & !(HPAGE_PMD_NR - 1);
            while block < end {
                let (lo, hi) = (block.max(start), (block + HPAGE_PMD_NR).min(end));
                self.walk_pmd_entry(memcg, vma, lo, hi, max_seq, can_swap, force_scan, nonleaf);
                block += HPAGE_PMD_NR;
            }
        }
    }

    /// One PMD entry of `walk_pmd_range`, covering pages `lo..hi` of the
    /// VMA's address space.
    #[allow(clippy::too_many_arguments)]
    fn walk_pmd_entry(
        &mut self,
        memcg: u16,
        vma: u32,
        lo: u64,
        hi: u64,
        max_seq: u64,
        can_swap: bool,
        force_scan: bool,
        nonleaf: bool,
    ) {
        self.charge_cost(Fn::LruGenWalk, self.costs.pte);
        let v = &self.vmas[vma as usize];
        let first = (lo - v.start_vpn) as usize;
        let pte = v.ptes[first];
        if pte & PTE_PMD != 0 {
            self.walk_pmd_leaf(memcg, vma, first, max_seq, can_swap);
            return;
        }
        let table = ((lo >> 9) - (v.start_vpn >> 9)) as usize;
        let tp = v.pte_tables[table];
        if tp == NIL {
            return;
        }
        if nonleaf {
            let t = self.folios.get_mut(tp);
            if !t.test(PG_PMD_YOUNG) {
                return;
            }
            // walk_pmd_range_locked's pmdp_test_and_clear_young.
            t.clear(PG_PMD_YOUNG);
        }
        let key = bloom_key(self.vmas[vma as usize].mm, lo);
        if !force_scan && !self.test_bloom_filter(memcg, max_seq, key) {
            return;
        }
        if self.walk_pte_range(memcg, vma, lo, hi, max_seq, can_swap) {
            self.update_bloom_filter(memcg, max_seq + 1, key);
        }
    }

    /// A PMD-mapped folio (`pmd_trans_huge`) in `walk_pmd_range_locked`:
    /// young in its PMD, it is promoted and the PMD made old.
    fn walk_pmd_leaf(&mut self, memcg: u16, vma: u32, first: usize, max_seq: u64, can_swap: bool) {
        let n = HPAGE_PMD_NR as usize;
        let ptes = &self.vmas[vma as usize].ptes[first..first + n];
        // get_pmd_pfn: the huge zero page is skipped.
        if ptes[0] & PTE_ZERO != 0 || !ptes.iter().any(|p| p & PTE_YOUNG != 0) {
            return;
        }
        let dirty = ptes.iter().any(|p| p & PTE_DIRTY != 0);
        let head = self.folios.head_of(pte_pfn(ptes[0]));
        let f = *self.folios.get(head);
        if f.memcg != memcg || (!f.is_file_lru() && !can_swap) {
            return;
        }
        self.vmas[vma as usize].ptes[first..first + n]
            .iter_mut()
            .for_each(|p| *p &= !PTE_YOUNG);
        self.pte_dirty_to_folio(head, f, dirty);
        self.walk_promote(head, max_seq);
    }

    /// `walk_pte_range`: the young PTEs' folios of this memcg promoted to
    /// the youngest generation, their PTEs made old. True if at least one
    /// PTE in 8 was young (`suitable_to_scan`, a cache line of PTEs).
    fn walk_pte_range(
        &mut self,
        memcg: u16,
        vma: u32,
        lo: u64,
        hi: u64,
        max_seq: u64,
        can_swap: bool,
    ) -> bool {
        let start = self.vmas[vma as usize].start_vpn;
        let (mut total, mut young) = (0u64, 0u64);
        for i in (lo - start) as usize..(hi - start) as usize {
            total += 1;
            self.charge_cost(Fn::LruGenWalk, self.costs.pte);
            if let Some((head, _)) = self.test_and_clear_young_pte(vma, i, memcg, can_swap) {
                young += 1;
                self.walk_promote(head, max_seq);
            }
        }
        young * 8 >= total
    }

    /// What walks and look-around do with PTE `i` of `vma`: if it is
    /// present, young and maps a folio of `memcg` the walk may take
    /// (`get_pte_pfn`, `get_pfn_folio`), it is made old
    /// (`ptep_test_and_clear_young`) and its dirty bit moved to the folio;
    /// returns the folio's head as it was before.
    fn test_and_clear_young_pte(
        &mut self,
        vma: u32,
        i: usize,
        memcg: u16,
        can_swap: bool,
    ) -> Option<(Pfn, Folio)> {
        let pte = self.vmas[vma as usize].ptes[i];
        if !pte_present(pte) || pte & (PTE_ZERO | PTE_PMD) != 0 || pte & PTE_YOUNG == 0 {
            return None;
        }
        let head = self.folios.head_of(pte_pfn(pte));
        let f = *self.folios.get(head);
        if f.memcg != memcg || (!f.is_file_lru() && !can_swap) {
            return None;
        }
        self.vmas[vma as usize].ptes[i] = pte & !PTE_YOUNG;
        self.pte_dirty_to_folio(head, f, pte & PTE_DIRTY != 0);
        Some((head, f))
    }

    /// A young mapping's dirty bit moves to its folio, unless the folio is
    /// anon not yet in the swap cache (it is dirty by nature).
    fn pte_dirty_to_folio(&mut self, head: Pfn, f: Folio, dirty: bool) {
        if dirty
            && !f.test(PG_DIRTY)
            && !(f.test(PG_ANON) && f.test(PG_SWAPBACKED) && !f.test(PG_SWAPCACHE))
        {
            self.filemap_dirty_folio(head);
        }
    }

    /// A young mapping's folio found by a walk, promoted to `max_seq`'s
    /// generation (sizes applied at once: the kernel batches them to the
    /// walk's end, and nothing reads them between).
    fn walk_promote(&mut self, head: Pfn, max_seq: u64) {
        let new_gen = lru_gen_from_seq(max_seq);
        if let Some(old) = self.folio_update_gen(head, new_gen) {
            if old != new_gen {
                self.lru_gen_update_size(head, Some(old), Some(new_gen));
            }
        }
    }

    fn reset_bloom_filter(&mut self, memcg: u16, seq: u64) {
        let f = &mut self.lrugen_mut(memcg).filters[(seq % 2) as usize];
        match f {
            Some(b) => b.fill(0),
            None => *f = Some(Box::new([0; BLOOM_WORDS])),
        }
    }

    fn update_bloom_filter(&mut self, memcg: u16, seq: u64, key: [u32; 2]) {
        if let Some(b) = &mut self.lrugen_mut(memcg).filters[(seq % 2) as usize] {
            for k in key {
                b[k as usize / 64] |= 1 << (k % 64);
            }
        }
    }

    /// No filter yet: everything passes.
    fn test_bloom_filter(&mut self, memcg: u16, seq: u64, key: [u32; 2]) -> bool {
        self.charge_cost(Fn::LruGenWalk, self.costs.pte);
        match &self.lrugen(memcg).filters[(seq % 2) as usize] {
            Some(b) => key
                .iter()
                .all(|&k| b[k as usize / 64] & (1 << (k % 64)) != 0),
            None => true,
        }
    }

    /// `should_run_aging`: whether a new generation is due, and how much
    /// to scan at `sc.priority`.
    fn should_run_aging(
        &self,
        memcg: u16,
        max_seq: u64,
        min_seq: [u64; 2],
        sc: &ScanControl,
        can_swap: bool,
    ) -> (bool, u64) {
        let lg = self.lrugen(memcg);
        let (mut old, mut young, mut total) = (0, 0, 0);
        for (ty, &first) in min_seq.iter().enumerate().skip(!can_swap as usize) {
            for seq in first..=max_seq {
                let size = lg.gen_size(lru_gen_from_seq(seq), ty);
                total += size;
                if seq == max_seq {
                    young += size;
                } else if seq + MIN_NR_GENS == max_seq {
                    old += size;
                }
            }
        }
        let nr_to_scan = total >> sc.priority;
        let oldest = min_seq[!can_swap as usize];
        let need = if oldest + MIN_NR_GENS > max_seq {
            true
        } else if oldest + MIN_NR_GENS < max_seq {
            false
        } else {
            young * MIN_NR_GENS > total || old * (MIN_NR_GENS + 2) < total
        };
        (need, nr_to_scan)
    }

    /// `get_swappiness`: 0 when there is no swap to put anon into.
    fn lru_gen_swappiness(&self, memcg: u16) -> u64 {
        if self.mem_cgroup_get_nr_swap_pages(memcg) < MIN_LRU_BATCH {
            return 0;
        }
        self.sysctl.swappiness as u64
    }

    /// `age_lruvec`: kswapd's aging of one lruvec; false if its oldest
    /// file generation is younger than min_ttl.
    fn age_lruvec(&mut self, memcg: u16, sc: &ScanControl, min_ttl: u64) -> bool {
        let swappiness = self.lru_gen_swappiness(memcg);
        // Nothing of a memcg within its memory.min is aged.
        self.mem_cgroup_calculate_protection(super::memcontrol::ROOT_MEMCG, memcg);
        if self.mem_cgroup_below_min(super::memcontrol::ROOT_MEMCG, memcg) {
            return false;
        }
        let lg = self.lrugen(memcg);
        let (max_seq, min_seq) = (lg.max_seq, lg.min_seq);
        let (need_aging, nr_to_scan) =
            self.should_run_aging(memcg, max_seq, min_seq, sc, swappiness != 0);
        if min_ttl > 0 {
            let birth = lg.timestamps[lru_gen_from_seq(min_seq[FILE])];
            if birth + min_ttl > self.jiffies() {
                return false;
            }
            if nr_to_scan == 0 && sc.priority != DEF_PRIORITY {
                return false;
            }
        }
        if need_aging {
            self.try_to_inc_max_seq(memcg, max_seq, swappiness != 0);
        }
        true
    }

    /// `lru_gen_age_node`: kswapd ages every memcg before a priority pass
    /// (skipping once after the eviction found aging unneeded). If every
    /// memcg's oldest generation is younger than min_ttl, 6.1 invokes the
    /// OOM killer (a global OOM: the whole machine's tasks).
    pub(crate) fn lru_gen_age_node(&mut self, sc: &mut ScanControl) {
        sc.last_reclaimed = sc.nr_reclaimed;
        if !sc.memcgs_need_aging {
            sc.memcgs_need_aging = true;
            return;
        }
        self.lru_gen.walk = Some(self.lru_gen.kswapd_can_swap);
        let min_ttl = self.lru_gen.min_ttl;
        let mut success = false;
        for memcg in 0..self.memcgs.len() as u16 {
            // mem_cgroup_iter from the root: every memcg, pre-order.
            if self.age_lruvec(memcg, sc, min_ttl) {
                success = true;
            }
        }
        self.lru_gen.walk = None;
        if success || min_ttl == 0 {
            return;
        }
        // The working set would thrash: 6.1 OOM-kills to protect it.
        if let Err(e) = self.out_of_memory(crate::mm::oom_kill::Constraint::None) {
            self.unmodelled.get_or_insert(e.to_string());
        }
    }

    /// `lru_gen_look_around`: rmap found `pfn` young at `vma`'s page
    /// `idx`; the PTEs around it (up to 64 in its PMD's range, within the
    /// VMA) are tested too, and the young ones' folios of the same memcg
    /// promoted to the youngest generation: without a walk and for fewer
    /// than PAGEVEC_SIZE of them through `folio_activate`, else in place
    /// (`folio_update_gen`).
    pub(crate) fn lru_gen_look_around(&mut self, pfn: Pfn, vma: u32, idx: usize) {
        let memcg = self.folios.get(pfn).memcg;
        let walk = self.lru_gen.walk;
        let can_swap = walk.unwrap_or(true);
        let new_gen = lru_gen_from_seq(self.lrugen(memcg).max_seq);
        let v = &self.vmas[vma as usize];
        let (vstart, vend) = (v.start_vpn, v.start_vpn + v.pages);
        let addr = vstart + idx as u64;
        let batch = MIN_LRU_BATCH;
        let mut start = (addr & !(HPAGE_PMD_NR - 1)).max(vstart);
        let mut end = (addr | (HPAGE_PMD_NR - 1)).min(vend - 1) + 1;
        if end - start > batch {
            if addr - start < batch / 2 {
                end = start + batch;
            } else if end - addr < batch / 2 {
                start = end - batch;
            } else {
                start = addr - batch / 2;
                end = addr + batch / 2;
            }
        }
        let mut promote = [NIL; MIN_LRU_BATCH as usize];
        let (mut nr_promote, mut young) = (0, 0u64);
        for a in start..end {
            let i = (a - vstart) as usize;
            self.charge_cost(Fn::LruGenLookAround, self.costs.pte);
            let Some((head, f)) = self.test_and_clear_young_pte(vma, i, memcg, can_swap) else {
                continue;
            };
            young += 1;
            match folio_lru_gen(&f) {
                None => self.folios.get_mut(head).set(PG_REFERENCED),
                Some(g) if g != new_gen => {
                    promote[nr_promote] = head;
                    nr_promote += 1;
                }
                Some(_) => {}
            }
        }
        // Feedback from rmap to the page-table walks.
        let nr_ptes = end - start;
        if young * 8 >= nr_ptes {
            let key = bloom_key(self.vmas[vma as usize].mm, addr);
            let max_seq = self.lrugen(memcg).max_seq;
            self.update_bloom_filter(memcg, max_seq, key);
        }
        if walk.is_none() && nr_promote < PAGEVEC_SIZE {
            for &head in &promote[..nr_promote] {
                // A large folio's later PTEs find it activated already.
                if folio_lru_gen(self.folios.get(head)) != Some(new_gen) {
                    self.folio_activate(head);
                }
            }
            return;
        }
        // With a walk the sizes are batched until evict_folios ends;
        // nothing reads them between, so they are applied at once.
        for &head in &promote[..nr_promote] {
            if self.folios.get(head).memcg != memcg {
                continue;
            }
            match self.folio_update_gen(head, new_gen) {
                Some(old) if old != new_gen => {
                    self.lru_gen_update_size(head, Some(old), Some(new_gen))
                }
                _ => {}
            }
        }
    }

    // ---- the eviction -----------------------------------------------------

    /// `sort_folio`: true if the folio is not to be evicted now (promoted,
    /// protected by its tier, or waiting for writeback) and was moved.
    fn sort_folio(&mut self, pfn: Pfn, tier_idx: usize) -> bool {
        let f = *self.folios.get(pfn);
        let gen = folio_lru_gen(&f).expect("on a generation");
        let (ty, zone, delta) = (
            f.is_file_lru() as usize,
            self.folio_zonenum(pfn),
            f.nr_pages() as i64,
        );
        let refs = folio_lru_refs(&f);
        let tier = lru_tier_from_refs(refs);
        let memcg = f.memcg;
        if f.test(PG_UNEVICTABLE) {
            return false;
        }
        // Dirty lazyfree: swap-backed again.
        if ty == FILE && f.test(PG_ANON) && f.test(PG_DIRTY) {
            self.lru_gen_del_folio(pfn, true);
            self.folios.get_mut(pfn).set(PG_SWAPBACKED);
            self.lruvec_add_folio_tail(pfn);
            return true;
        }
        // Promoted by a page-table reference.
        if gen != lru_gen_from_seq(self.lrugen(memcg).min_seq[ty]) {
            self.list_move(pfn, gen_list(gen, ty, zone), false);
            return true;
        }
        // Protected by its tier.
        if tier > tier_idx || refs == 1 << LRU_REFS_WIDTH {
            let gen = self.folio_inc_gen(pfn, false);
            self.list_move(pfn, gen_list(gen, ty, zone), true);
            self.lrugen_mut(memcg).protected[ty][tier - 1] += delta as u64;
            let (vm, mc) = if ty == FILE {
                (Vm::WorkingsetActivateFile, Mc::WorkingsetActivateFile)
            } else {
                (Vm::WorkingsetActivateAnon, Mc::WorkingsetActivateAnon)
            };
            self.mod_node_page_state(vm, delta);
            self.memcg_stat(memcg, mc, delta);
            return true;
        }
        // Waiting for writeback.
        if f.test(PG_LOCKED) || f.test(PG_WRITEBACK) || (ty == FILE && f.test(PG_DIRTY)) {
            let gen = self.folio_inc_gen(pfn, true);
            self.list_move(pfn, gen_list(gen, ty, zone), false);
            return true;
        }
        false
    }

    /// `isolate_folio`: off its generation for shrink_folio_list, unless
    /// the scan may not unmap or write it.
    fn isolate_folio(&mut self, pfn: Pfn, sc: &ScanControl) -> bool {
        let f = *self.folios.get(pfn);
        if !sc.may_unmap && f.mapcount > 0 {
            return false;
        }
        if !sc.may_writepage && (f.test(PG_DIRTY) || (f.test(PG_ANON) && !f.test(PG_SWAPCACHE))) {
            return false;
        }
        let g = self.folios.get_mut(pfn);
        if !g.test(PG_REFERENCED) {
            g.flags &= !(LRU_REFS_MASK | LRU_REFS_FLAGS);
        }
        g.clear(PG_RECLAIM | PG_REFERENCED);
        self.lru_gen_del_folio(pfn, true);
        self.write_page_line(pfn, Fn::EvictFolios);
        let g = self.folios.get_mut(pfn);
        g.refcount += 1;
        g.clear(PG_LRU);
        g.set(PG_ISOLATED);
        true
    }

    /// `scan_folios`: from the oldest generation of `ty`, zone by zone
    /// (highest first), sort or isolate folios until MIN_LRU_BATCH pages
    /// are isolated (or skipped) or MAX_LRU_BATCH folios were looked at.
    /// Returns pages scanned, or 0 if nothing could be isolated and the
    /// budget was not used up.
    fn scan_folios(
        &mut self,
        memcg: u16,
        sc: &ScanControl,
        ty: usize,
        tier: usize,
        list: &mut Vec<Pfn>,
    ) -> u64 {
        if self.lrugen(memcg).nr_gens(ty) == MIN_NR_GENS {
            return 0;
        }
        let gen = lru_gen_from_seq(self.lrugen(memcg).min_seq[ty]);
        let (mut sorted, mut scanned, mut isolated) = (0u64, 0u64, 0u64);
        let mut remaining = MAX_LRU_BATCH;
        let mut moved = self.take_scratch();
        for zone in (0..NR_ZONES).rev() {
            let id = gen_list(gen, ty, zone);
            let mut skipped = 0u64;
            loop {
                let pfn = self.lruvecs[memcg as usize].list(id).tail;
                if pfn == NIL {
                    break;
                }
                let delta = self.folios.get(pfn).nr_pages() as u64;
                scanned += delta;
                self.charge_cost(Fn::EvictFolios, self.costs.lru_move);
                if self.sort_folio(pfn, tier) {
                    sorted += delta;
                } else if self.isolate_folio(pfn, sc) {
                    list.push(pfn);
                    isolated += delta;
                } else {
                    self.list_unlink(pfn);
                    moved.push(pfn);
                    skipped += delta;
                }
                remaining -= 1;
                if remaining == 0 || isolated.max(skipped) >= MIN_LRU_BATCH {
                    break;
                }
            }
            // list_splice(&moved, head): back at the head, the last
            // moved first.
            for &pfn in &moved {
                self.list_link(pfn, memcg, id, false);
            }
            moved.clear();
            if remaining == 0 || isolated >= MIN_LRU_BATCH {
                break;
            }
        }
        self.give_scratch(moved);
        let kswapd = self.current_is_kswapd();
        let (vm, mc) = if kswapd {
            (Vm::PgscanKswapd, Mc::PgscanKswapd)
        } else {
            (Vm::PgscanDirect, Mc::PgscanDirect)
        };
        if !sc.cgroup_reclaim() {
            self.vm.add(vm, isolated as i64);
            self.vm.add(Vm::Pgrefill, sorted as i64);
        }
        self.memcg_stat(memcg, mc, isolated as i64);
        self.memcg_stat(memcg, Mc::Pgscan, isolated as i64);
        self.memcg_stat(memcg, Mc::Pgrefill, sorted as i64);
        self.vm.add(
            if ty == FILE {
                Vm::PgscanFile
            } else {
                Vm::PgscanAnon
            },
            isolated as i64,
        );
        if isolated > 0 || remaining == 0 {
            scanned
        } else {
            0
        }
    }

    /// `isolate_folios`: pick the type (the older one, swappiness's
    /// extremes, else the PID controller's choice) and scan it, the other
    /// type if nothing came of it.
    fn isolate_folios(
        &mut self,
        memcg: u16,
        sc: &ScanControl,
        swappiness: u64,
        list: &mut Vec<Pfn>,
    ) -> (u64, usize) {
        let min_seq = self.lrugen(memcg).min_seq;
        let mut tier = None;
        let mut ty = if swappiness == 0 {
            FILE
        } else if min_seq[ANON] < min_seq[FILE] {
            ANON
        } else if swappiness == 1 {
            FILE
        } else if swappiness == 200 {
            ANON
        } else {
            let (t, i) = self.get_type_to_scan(memcg, swappiness);
            tier = Some(i);
            t
        };
        let mut scanned = 0;
        for _ in (swappiness == 0) as usize..2 {
            let t = tier.unwrap_or_else(|| self.get_tier_idx(memcg, ty));
            scanned = self.scan_folios(memcg, sc, ty, t, list);
            if scanned > 0 {
                break;
            }
            ty = 1 - ty;
            tier = None;
        }
        (scanned, ty)
    }

    /// `evict_folios`: isolate a batch, reclaim it with shrink_folio_list,
    /// put back what stays (rejected folios to the youngest generation),
    /// and retry once the clean ones that may have missed their rotation.
    fn evict_folios(
        &mut self,
        memcg: u16,
        sc: &mut ScanControl,
        swappiness: u64,
        need_swapping: &mut bool,
    ) -> u64 {
        // I/O completes by interrupt; here it is noticed where reclaim
        // looks at the lists, as shrink_inactive_list does.
        let now = self.now();
        self.process_io_completions(now);
        let mut list = self.take_scratch();
        let lock = self.spin_lock(crate::cacheline::Line::LruLock(memcg));
        let (mut scanned, ty) = self.isolate_folios(memcg, sc, swappiness, &mut list);
        scanned += self.try_to_inc_min_seq(memcg, swappiness != 0) as u64;
        if self.lrugen(memcg).nr_gens((swappiness == 0) as usize) == MIN_NR_GENS {
            scanned = 0;
        }
        self.spin_unlock(lock);
        if list.is_empty() {
            self.give_scratch(list);
            return scanned;
        }
        let kswapd = self.current_is_kswapd();
        let (vm, mc) = if kswapd {
            (Vm::PgstealKswapd, Mc::PgstealKswapd)
        } else {
            (Vm::PgstealDirect, Mc::PgstealDirect)
        };
        let mut skip_retry = false;
        loop {
            let mut stat = ReclaimStat::default();
            let mut kept = self.take_scratch();
            let reclaimed = self.traced(Fn::ShrinkFolioList, |k| {
                k.shrink_folio_list(&mut list, sc, &mut stat, &mut kept)
            });
            sc.nr_reclaimed += reclaimed;
            let mut stay = self.take_scratch();
            list.clear();
            for &pfn in &kept {
                let f = *self.folios.get(pfn);
                let (dirty, wb) = (f.test(PG_DIRTY), f.test(PG_WRITEBACK));
                if f.test(PG_UNEVICTABLE) {
                    stay.push(pfn);
                } else if f.test(PG_RECLAIM) && (dirty || wb) {
                    // Restore LRU_REFS_FLAGS cleared by isolate_folio.
                    if f.test(PG_WORKINGSET) {
                        self.folios.get_mut(pfn).set(PG_REFERENCED);
                    }
                    stay.push(pfn);
                } else if skip_retry
                    || f.test(PG_ACTIVE)
                    || f.test(PG_REFERENCED)
                    || f.mapcount > 0
                    || f.test(PG_LOCKED)
                    || dirty
                    || wb
                {
                    // Rejected: not back to the oldest generation.
                    let g = self.folios.get_mut(pfn);
                    g.flags = (g.flags & !(LRU_REFS_MASK | LRU_REFS_FLAGS)) | PG_ACTIVE;
                    stay.push(pfn);
                } else {
                    list.push(pfn);
                }
            }
            self.move_folios_to_lru(&stay, memcg);
            self.give_scratch(stay);
            self.give_scratch(kept);
            if !sc.cgroup_reclaim() {
                self.vm.add(vm, reclaimed as i64);
            }
            self.memcg_stat(memcg, mc, reclaimed as i64);
            self.memcg_stat(memcg, Mc::Pgsteal, reclaimed as i64);
            self.vm.add(
                if ty == FILE {
                    Vm::PgstealFile
                } else {
                    Vm::PgstealAnon
                },
                reclaimed as i64,
            );
            if list.is_empty() {
                break;
            }
            skip_retry = true;
        }
        self.give_scratch(list);
        if ty == ANON {
            *need_swapping = true;
        }
        scanned
    }

    /// `get_nr_to_scan`: how much to scan, aging first if needed (not at
    /// the default priority, and left to kswapd's own aging in kswapd).
    fn get_nr_to_scan(
        &mut self,
        memcg: u16,
        sc: &ScanControl,
        can_swap: bool,
        need_aging: &mut bool,
    ) -> u64 {
        let target = sc.target_memcg();
        if self.mem_cgroup_below_min(target, memcg)
            || (self.mem_cgroup_below_low(target, memcg) && !sc.memcg_low_reclaim)
        {
            return 0;
        }
        let lg = self.lrugen(memcg);
        let (max_seq, min_seq) = (lg.max_seq, lg.min_seq);
        let (need, nr_to_scan) = self.should_run_aging(memcg, max_seq, min_seq, sc, can_swap);
        *need_aging = need;
        if !need {
            return nr_to_scan;
        }
        if sc.priority != DEF_PRIORITY {
            if self.current_is_kswapd() {
                return 0;
            }
            if self.try_to_inc_max_seq(memcg, max_seq, can_swap) {
                return nr_to_scan;
            }
        }
        if min_seq[!can_swap as usize] + MIN_NR_GENS <= max_seq {
            nr_to_scan
        } else {
            0
        }
    }

    /// `should_abort_scan`.
    fn should_abort_scan(
        &self,
        memcg: u16,
        seq: u64,
        sc: &mut ScanControl,
        need_swapping: bool,
    ) -> bool {
        let kswapd = self.current_is_kswapd();
        if !kswapd {
            // Age each memcg at most once, for fairness.
            if self.lrugen(memcg).max_seq - seq > 1 {
                return true;
            }
            if sc.nr_reclaimed >= sc.nr_to_reclaim && need_swapping {
                return true;
            }
            if sc.cgroup_reclaim() {
                return false;
            }
        } else if sc.nr_reclaimed - sc.last_reclaimed < sc.nr_to_reclaim {
            return false;
        }
        if sc.priority > DEF_PRIORITY - 2 {
            return false;
        }
        let mark = if kswapd { WMARK_HIGH } else { WMARK_LOW };
        let highest = self.highest_zoneidx();
        for z in self.zones[..=highest].iter().filter(|z| z.managed > 0) {
            if z.watermark[mark] > z.nr_free {
                return false;
            }
        }
        sc.nr_reclaimed += MIN_LRU_BATCH;
        true
    }

    /// `lru_gen_shrink_lruvec`: evict until the scan target is met, aging
    /// as needed.
    pub(crate) fn lru_gen_shrink_lruvec(&mut self, memcg: u16, sc: &mut ScanControl) {
        self.lru_add_drain();
        self.blk_start_plug();
        if self.current_is_kswapd() {
            self.lru_gen.walk = Some(self.lru_gen.kswapd_can_swap);
        }
        let max_seq = self.lrugen(memcg).max_seq;
        let reclaimed = sc.nr_reclaimed;
        let (mut scanned, mut need_aging, mut need_swapping) = (0, false, false);
        let mut done = false;
        loop {
            let swappiness = if sc.may_swap {
                self.lru_gen_swappiness(memcg)
            } else if !sc.cgroup_reclaim() && self.lru_gen_swappiness(memcg) > 0 {
                1
            } else {
                0
            };
            let nr_to_scan = self.get_nr_to_scan(memcg, sc, swappiness != 0, &mut need_aging);
            if nr_to_scan == 0 {
                done = true;
                break;
            }
            let delta = self.traced(Fn::EvictFolios, |k| {
                k.evict_folios(memcg, sc, swappiness, &mut need_swapping)
            });
            if delta == 0 {
                done = true;
                break;
            }
            scanned += delta;
            if scanned >= nr_to_scan || self.should_abort_scan(memcg, max_seq, sc, need_swapping) {
                break;
            }
        }
        if !done && sc.nr_reclaimed - reclaimed >= MIN_LRU_BATCH && !need_aging {
            sc.memcgs_need_aging = false;
        }
        self.lru_gen.walk = None;
        self.blk_finish_plug();
    }

    // ---- workingset -------------------------------------------------------

    /// `lru_gen_eviction`: the shadow holds the oldest generation's
    /// sequence and the folio's references; its tier's evictions count.
    pub(crate) fn lru_gen_eviction(&mut self, pfn: Pfn) -> u64 {
        let f = *self.folios.get(pfn);
        let ty = f.is_file_lru() as usize;
        let refs = folio_lru_refs(&f);
        let tier = lru_tier_from_refs(refs);
        let lg = self.lrugen_mut(f.memcg);
        let min_seq = lg.min_seq[ty];
        let token = (min_seq << LRU_REFS_WIDTH) | refs.saturating_sub(1) as u64;
        lg.evicted[ty][tier] += f.nr_pages() as u64;
        super::workingset::pack_shadow(f.memcg, token, refs != 0)
    }

    /// `lru_gen_refault`: a refault counts only in the memcg and oldest
    /// generation the folio left from; a fault's refault, or one of a
    /// folio used through file descriptors, restores its references.
    pub(crate) fn lru_gen_refault(&mut self, pfn: Pfn, shadow: u64) {
        let (memcg_id, token, workingset) = super::workingset::unpack_shadow(shadow);
        let f = *self.folios.get(pfn);
        if memcg_id != f.memcg {
            return;
        }
        let ty = f.is_file_lru() as usize;
        let delta = f.nr_pages() as i64;
        if token >> LRU_REFS_WIDTH != self.lrugen(f.memcg).min_seq[ty] {
            return;
        }
        let refs = (token & ((1 << LRU_REFS_WIDTH) - 1)) as u32 + workingset as u32;
        let tier = lru_tier_from_refs(refs);
        self.lrugen_mut(f.memcg).refaulted[ty][tier] += delta as u64;
        let (rf, mrf, rest, mrest) = if ty == FILE {
            (
                Vm::WorkingsetRefaultFile,
                Mc::WorkingsetRefaultFile,
                Vm::WorkingsetRestoreFile,
                Mc::WorkingsetRestoreFile,
            )
        } else {
            (
                Vm::WorkingsetRefaultAnon,
                Mc::WorkingsetRefaultAnon,
                Vm::WorkingsetRestoreAnon,
                Mc::WorkingsetRestoreAnon,
            )
        };
        self.vm.add(rf, delta);
        self.memcg_stat(f.memcg, mrf, delta);
        if self.fault.in_lru_fault() || refs >= (1 << LRU_REFS_WIDTH) - 1 {
            self.folios.get_mut(pfn).flags |= LRU_REFS_MASK | PG_WORKINGSET;
            self.vm.add(rest, delta);
            self.memcg_stat(f.memcg, mrest, delta);
        }
    }

    /// `lru_gen_enter_fault`: folios added to the LRU while this fault
    /// runs start in the youngest generation, unless the VMA is read
    /// sequentially or at random.
    pub(crate) fn lru_gen_enter_fault(&mut self, vma: u32) {
        let on = self.vmas[vma as usize].flags & (VM_SEQ_READ | VM_RAND_READ) == 0;
        self.fault.set_in_lru_fault(on);
    }

    /// The generations of every lruvec, as /sys/kernel/debug/lru_gen
    /// prints them: per memcg, each live sequence's age and anon and file
    /// pages (from the oldest anon generation to the youngest).
    pub fn lru_gen_snapshot(&self) -> Vec<mmsim_spec::output::LruGenLruvec> {
        if !self.lru_gen_enabled() {
            return Vec::new();
        }
        let now = self.jiffies();
        // mem_cgroup_iter from the root: every memcg, pre-order.
        (0..self.memcgs.len() as u16)
            .map(|m| {
                let lg = self.lrugen(m);
                let gens = (lg.min_seq[ANON]..=lg.max_seq)
                    .map(|seq| {
                        let gen = lru_gen_from_seq(seq);
                        mmsim_spec::output::LruGenGen {
                            seq,
                            // Each context keeps its own clock: a generation
                            // another context made may carry a later stamp
                            // than this one's now (age 0 then).
                            age_ms: now.saturating_sub(lg.timestamps[gen]) * 1000 / HZ,
                            anon: lg.gen_size(gen, ANON),
                            file: lg.gen_size(gen, FILE),
                        }
                    })
                    .collect();
                // cgroup_path: "/" for the root, "/NAME" for the spec's
                // cgroups (children of the root).
                mmsim_spec::output::LruGenLruvec {
                    memcg: format!("/{}", self.memcgs[m as usize].name),
                    // Created in this order after the root's 1.
                    id: m + 1,
                    node: 0,
                    gens,
                }
            })
            .collect()
    }
}

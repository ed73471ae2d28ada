//! Per-memcg LRU vectors and the list operations of `mm_inline.h`.
//!
//! One lruvec per memcg (a single NUMA node is modelled). Lists are
//! intrusive doubly-linked lists through the folio table: `head` is the
//! most recently added folio, reclaim takes from `tail`. A folio's `lru`
//! names the list it is on: the classic lists by `enum lru_list`, the
//! multi-gen LRU's from `LRU_GEN_BASE` (lru_gen.rs).
//!
//! Which algorithm the lists serve is the reclaim policy (`LruAlgo`),
//! chosen at boot from `kernel/mm/lru_gen/enabled` as 6.1's
//! `lru_gen_enabled()` static key chooses it. The hooks where 6.1 asks
//! that key are the `LruPolicy` trait's; the rest of mm/ calls them
//! through `Kernel`, which dispatches on the enum (static calls, no
//! vtable on the per-page paths).

use super::folio::*;
use super::lru_gen::{LruGen, LRU_GEN_BASE};
use super::vmscan::ScanControl;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

#[derive(Clone, Copy)]
pub struct LruList {
    pub head: Pfn,
    pub tail: Pfn,
    pub len: u64,
}

impl LruList {
    pub const EMPTY: LruList = LruList {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

#[derive(Clone)]
pub struct Lruvec {
    pub lists: [LruList; NR_LRU_LISTS],
    /// Reclaim cost of each type (`lru_note_cost`), [anon, file].
    pub anon_cost: u64,
    pub file_cost: u64,
    /// `nonresident_age`: evictions and activations seen (workingset.c).
    pub nonresident_age: u64,
    /// `refaults[]`: workingset_activate counts snapshotted by the last
    /// reclaim (`snapshot_refaults`), [anon, file].
    pub refaults: [u64; 2],
    /// `lrugen`: the multi-gen LRU's state (unused by the classic LRU).
    pub lrugen: LruGen,
}

impl Default for Lruvec {
    fn default() -> Self {
        Lruvec {
            lists: [LruList::EMPTY; NR_LRU_LISTS],
            anon_cost: 0,
            file_cost: 0,
            nonresident_age: 0,
            refaults: [0; 2],
            lrugen: LruGen::default(),
        }
    }
}

impl Lruvec {
    pub fn size(&self, lru: u8) -> u64 {
        self.lists[lru as usize].len
    }

    /// The list a folio's `lru` names.
    #[inline]
    pub fn list(&self, id: u8) -> &LruList {
        if id < LRU_GEN_BASE {
            &self.lists[id as usize]
        } else {
            &self.lrugen.lists[(id - LRU_GEN_BASE) as usize]
        }
    }

    #[inline]
    fn list_mut(&mut self, id: u8) -> &mut LruList {
        if id < LRU_GEN_BASE {
            &mut self.lists[id as usize]
        } else {
            &mut self.lrugen.lists[(id - LRU_GEN_BASE) as usize]
        }
    }
}

/// The reclaim algorithm: 6.1's `lru_gen_enabled()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LruAlgo {
    /// The active/inactive lists (Debian's 6.1 default).
    #[default]
    Classic,
    /// The multi-gen LRU (`kernel/mm/lru_gen/enabled` with 0x0001).
    MultiGen,
}

/// What an LRU algorithm provides to the rest of mm/: the places 6.1
/// branches on `lru_gen_enabled()` for more than a line.
pub trait LruPolicy {
    /// `lruvec_add_folio` (`reclaiming`: `lruvec_add_folio_tail`).
    fn add_folio(k: &mut Kernel, pfn: Pfn, reclaiming: bool);
    /// `lruvec_del_folio`.
    fn del_folio(k: &mut Kernel, pfn: Pfn);
    /// `folio_mark_accessed`.
    fn mark_accessed(k: &mut Kernel, pfn: Pfn);
    /// `shrink_lruvec`: reclaim from one memcg's lruvec.
    fn shrink_lruvec(k: &mut Kernel, memcg: u16, sc: &mut ScanControl);
    /// `kswapd_age_node`: kswapd's aging before each priority pass.
    fn age_node(k: &mut Kernel, sc: &mut ScanControl);
    /// `workingset_eviction`: the shadow a reclaimed folio leaves.
    fn eviction(k: &mut Kernel, pfn: Pfn, target: u16) -> u64;
    /// `workingset_refault`: a folio comes back where a shadow was.
    fn refault(k: &mut Kernel, pfn: Pfn, shadow: u64);
}

/// The classic two-list LRU (vmscan.c, workingset.c, swap.c).
pub struct Classic;
/// The multi-gen LRU (lru_gen.rs).
pub struct MultiGen;

impl LruPolicy for Classic {
    fn add_folio(k: &mut Kernel, pfn: Pfn, reclaiming: bool) {
        k.lru_link(pfn, reclaiming);
    }
    fn del_folio(k: &mut Kernel, pfn: Pfn) {
        k.lru_unlink_classic(pfn);
    }
    fn mark_accessed(k: &mut Kernel, pfn: Pfn) {
        k.folio_mark_accessed_classic(pfn);
    }
    fn shrink_lruvec(k: &mut Kernel, memcg: u16, sc: &mut ScanControl) {
        k.shrink_lruvec_classic(memcg, sc);
    }
    fn age_node(k: &mut Kernel, sc: &mut ScanControl) {
        k.kswapd_age_node_classic(sc);
    }
    fn eviction(k: &mut Kernel, pfn: Pfn, target: u16) -> u64 {
        k.workingset_eviction_classic(pfn, target)
    }
    fn refault(k: &mut Kernel, pfn: Pfn, shadow: u64) {
        k.workingset_refault_classic(pfn, shadow);
    }
}

impl LruPolicy for MultiGen {
    fn add_folio(k: &mut Kernel, pfn: Pfn, reclaiming: bool) {
        // Unevictable folios stay on the classic list (lru_gen_add_folio
        // declines them).
        if !k.lru_gen_add_folio(pfn, reclaiming) {
            k.lru_link(pfn, reclaiming);
        }
    }
    fn del_folio(k: &mut Kernel, pfn: Pfn) {
        if !k.lru_gen_del_folio(pfn, false) {
            k.lru_unlink_classic(pfn);
        }
    }
    fn mark_accessed(k: &mut Kernel, pfn: Pfn) {
        k.folio_inc_refs(pfn);
    }
    fn shrink_lruvec(k: &mut Kernel, memcg: u16, sc: &mut ScanControl) {
        k.lru_gen_shrink_lruvec(memcg, sc);
    }
    fn age_node(k: &mut Kernel, sc: &mut ScanControl) {
        k.lru_gen_age_node(sc);
    }
    fn eviction(k: &mut Kernel, pfn: Pfn, _target: u16) -> u64 {
        k.lru_gen_eviction(pfn)
    }
    fn refault(k: &mut Kernel, pfn: Pfn, shadow: u64) {
        k.lru_gen_refault(pfn, shadow);
    }
}

/// Calls the running algorithm's hook: a match on the boot-time choice,
/// each arm a static call.
macro_rules! lru_policy {
    ($k:expr, $hook:ident($($arg:expr),*)) => {
        match $k.lru_algo {
            LruAlgo::Classic => Classic::$hook($k, $($arg),*),
            LruAlgo::MultiGen => MultiGen::$hook($k, $($arg),*),
        }
    };
}

/// Each LRU list's node and zone gauge.
pub(crate) const LRU_VM: [(Vm, Vm); NR_LRU_LISTS] = [
    (Vm::NrInactiveAnon, Vm::NrZoneInactiveAnon),
    (Vm::NrActiveAnon, Vm::NrZoneActiveAnon),
    (Vm::NrInactiveFile, Vm::NrZoneInactiveFile),
    (Vm::NrActiveFile, Vm::NrZoneActiveFile),
    (Vm::NrUnevictable, Vm::NrZoneUnevictable),
];
/// The zone of an LRU size change: a folio's (looked up only where the
/// per-CPU differentials need it, with more than one CPU) or a zone's.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LruZone {
    Of(Pfn),
    Is(usize),
}

pub(crate) const LRU_MC: [Mc; NR_LRU_LISTS] = [
    Mc::InactiveAnon,
    Mc::ActiveAnon,
    Mc::InactiveFile,
    Mc::ActiveFile,
    Mc::Unevictable,
];

impl Kernel {
    /// `lru_gen_enabled()`.
    #[inline]
    pub fn lru_gen_enabled(&self) -> bool {
        self.lru_algo == LruAlgo::MultiGen
    }

    /// `update_lru_size`: node, zone and memcg gauges.
    #[inline(always)]
    pub(crate) fn update_lru_size(&mut self, memcg: u16, lru: u8, n: i64, at: LruZone) {
        let (node, zone) = LRU_VM[lru as usize];
        self.vm.add(node, n);
        self.vm.add(zone, n);
        self.memcgs[memcg as usize]
            .stat
            .add(LRU_MC[lru as usize], n);
        self.memcg_stat_updated(memcg, LRU_MC[lru as usize], n);
        if self.cpus.len() > 1 {
            self.lru_size_stat_diffs(lru, n, at);
        }
    }

    /// The per-CPU side of `update_lru_size`'s node and zone updates
    /// (mm/vmstat_pcp.rs), with more than one CPU.
    #[inline(never)]
    fn lru_size_stat_diffs(&mut self, lru: u8, n: i64, at: LruZone) {
        let (node, zone) = LRU_VM[lru as usize];
        self.node_stat_update(node, n);
        let zi = match at {
            LruZone::Of(pfn) => self.zone_of(pfn),
            LruZone::Is(zi) => zi,
        };
        self.zone_stat_update(zi, zone, n);
    }

    /// `lruvec_add_folio`: at the head of the list its flags select.
    #[inline]
    pub fn lruvec_add_folio(&mut self, pfn: Pfn) {
        lru_policy!(self, add_folio(pfn, false));
    }

    /// `lruvec_add_folio_tail`: at the tail, next in line for reclaim.
    pub fn lruvec_add_folio_tail(&mut self, pfn: Pfn) {
        lru_policy!(self, add_folio(pfn, true));
    }

    /// `lruvec_del_folio`: unlinks from the list it is on.
    #[inline]
    pub fn lruvec_del_folio(&mut self, pfn: Pfn) {
        lru_policy!(self, del_folio(pfn));
    }

    /// `folio_mark_accessed`.
    pub fn folio_mark_accessed(&mut self, pfn: Pfn) {
        lru_policy!(self, mark_accessed(pfn));
    }

    /// `shrink_lruvec`.
    pub(crate) fn shrink_lruvec(&mut self, memcg: u16, sc: &mut ScanControl) {
        lru_policy!(self, shrink_lruvec(memcg, sc));
    }

    /// `kswapd_age_node`.
    pub(crate) fn kswapd_age_node(&mut self, sc: &mut ScanControl) {
        lru_policy!(self, age_node(sc));
    }

    /// `workingset_eviction`: the shadow to leave behind for a folio
    /// reclaimed on behalf of `target` (the root for global reclaim).
    pub fn workingset_eviction(&mut self, pfn: Pfn, target: u16) -> u64 {
        lru_policy!(self, eviction(pfn, target))
    }

    /// `workingset_refault`.
    pub fn workingset_refault(&mut self, pfn: Pfn, shadow: u64) {
        lru_policy!(self, refault(pfn, shadow));
    }

    /// Links `pfn` just before `anchor` (on the newer side, as
    /// `list_add_tail(&new->lru, &anchor->lru)`), on `anchor`'s list; a
    /// split's tail, whose pages the head's list already counted.
    pub fn lruvec_add_folio_before(&mut self, anchor: Pfn, pfn: Pfn) {
        let a = *self.folios.get(anchor);
        let (lru, memcg, nr) = (a.lru, a.memcg, self.folios.get(pfn).nr_pages() as i64);
        if a.prev == NIL {
            self.lruvecs[memcg as usize].list_mut(lru).head = pfn;
        } else {
            self.folios.get_mut(a.prev).next = pfn;
        }
        self.folios.get_mut(anchor).prev = pfn;
        let f = self.folios.get_mut(pfn);
        (f.prev, f.next) = (a.prev, anchor);
        f.lru = lru;
        self.lruvecs[memcg as usize].list_mut(lru).len += nr as u64;
        if lru < LRU_GEN_BASE {
            debug_assert_eq!(self.folios.get(pfn).lru_list(), lru);
            self.update_lru_size(memcg, lru, nr, LruZone::Of(pfn));
        } else {
            self.lru_gen_split_size(pfn, nr);
        }
    }

    /// A folio on a list was `old_nr` pages and is now its current size
    /// (a split's head): the list and the gauges follow.
    pub fn lruvec_folio_shrunk(&mut self, pfn: Pfn, old_nr: u32) {
        let f = *self.folios.get(pfn);
        let d = old_nr as i64 - f.nr_pages() as i64;
        self.lruvecs[f.memcg as usize].list_mut(f.lru).len -= d as u64;
        if f.lru < LRU_GEN_BASE {
            self.update_lru_size(f.memcg, f.lru, -d, LruZone::Of(pfn));
        } else {
            self.lru_gen_split_size(pfn, -d);
        }
    }

    /// The classic `lruvec_add_folio`(_tail): the list the flags select,
    /// with the gauges.
    #[inline]
    fn lru_link(&mut self, pfn: Pfn, tail: bool) {
        let f = self.folios.get(pfn);
        let (lru, memcg, nr) = (f.lru_list(), f.memcg, f.nr_pages() as i64);
        self.list_link(pfn, memcg, lru, tail);
        self.update_lru_size(memcg, lru, nr, LruZone::Of(pfn));
    }

    /// The classic `lruvec_del_folio`.
    #[inline]
    fn lru_unlink_classic(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        debug_assert_ne!(f.lru, LRU_NONE);
        self.list_unlink(pfn);
        self.update_lru_size(f.memcg, f.lru, -(f.nr_pages() as i64), LruZone::Of(pfn));
    }

    /// Links `pfn` at the head (or tail) of `memcg`'s list `id`; the
    /// list's length follows, the gauges are the caller's.
    #[inline]
    pub(crate) fn list_link(&mut self, pfn: Pfn, memcg: u16, id: u8, tail: bool) {
        let nr = self.folios.get(pfn).nr_pages() as u64;
        let list = self.lruvecs[memcg as usize].list_mut(id);
        let old = if tail { list.tail } else { list.head };
        if tail {
            list.tail = pfn;
        } else {
            list.head = pfn;
        }
        if old == NIL {
            *(if tail { &mut list.head } else { &mut list.tail }) = pfn;
        }
        list.len += nr;
        if old != NIL {
            if tail {
                self.folios.get_mut(old).next = pfn;
            } else {
                self.folios.get_mut(old).prev = pfn;
            }
        }
        let f = self.folios.get_mut(pfn);
        (f.prev, f.next) = if tail { (old, NIL) } else { (NIL, old) };
        f.lru = id;
    }

    /// Unlinks `pfn` from the list it is on; the gauges are the caller's.
    #[inline]
    pub(crate) fn list_unlink(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        debug_assert_ne!(f.lru, LRU_NONE);
        let lv = &mut self.lruvecs[f.memcg as usize];
        let list = lv.list_mut(f.lru);
        if f.prev == NIL {
            list.head = f.next;
        }
        if f.next == NIL {
            list.tail = f.prev;
        }
        list.len -= f.nr_pages() as u64;
        if f.prev != NIL {
            self.folios.get_mut(f.prev).next = f.next;
        }
        if f.next != NIL {
            self.folios.get_mut(f.next).prev = f.prev;
        }
        let g = self.folios.get_mut(pfn);
        g.prev = NIL;
        g.next = NIL;
        g.lru = LRU_NONE;
    }

    /// `list_move`(_tail): from the list `pfn` is on to list `id` of its
    /// memcg, gauges untouched.
    pub(crate) fn list_move(&mut self, pfn: Pfn, id: u8, tail: bool) {
        let memcg = self.folios.get(pfn).memcg;
        self.list_unlink(pfn);
        self.list_link(pfn, memcg, id, tail);
    }
}

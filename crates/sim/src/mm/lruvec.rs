//! Per-memcg LRU vectors and the list operations of `mm_inline.h`.
//!
//! One lruvec per memcg (a single NUMA node is modelled). Lists are
//! intrusive doubly-linked lists through the folio table: `head` is the
//! most recently added folio, reclaim takes from `tail`.

use super::folio::*;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

#[derive(Clone, Copy)]
pub struct LruList {
    pub head: Pfn,
    pub tail: Pfn,
    pub len: u64,
}

impl LruList {
    const EMPTY: LruList = LruList {
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
}

impl Default for Lruvec {
    fn default() -> Self {
        Lruvec {
            lists: [LruList::EMPTY; NR_LRU_LISTS],
            anon_cost: 0,
            file_cost: 0,
            nonresident_age: 0,
            refaults: [0; 2],
        }
    }
}

impl Lruvec {
    pub fn size(&self, lru: u8) -> u64 {
        self.lists[lru as usize].len
    }
}

const LRU_VM: [(Vm, Vm); NR_LRU_LISTS] = [
    (Vm::NrInactiveAnon, Vm::NrZoneInactiveAnon),
    (Vm::NrActiveAnon, Vm::NrZoneActiveAnon),
    (Vm::NrInactiveFile, Vm::NrZoneInactiveFile),
    (Vm::NrActiveFile, Vm::NrZoneActiveFile),
    (Vm::NrUnevictable, Vm::NrZoneUnevictable),
];
const LRU_MC: [Mc; NR_LRU_LISTS] = [
    Mc::InactiveAnon,
    Mc::ActiveAnon,
    Mc::InactiveFile,
    Mc::ActiveFile,
    Mc::Unevictable,
];

impl Kernel {
    /// `update_lru_size`: node, zone and memcg gauges.
    fn update_lru_size(&mut self, memcg: u16, lru: u8, n: i64) {
        let (node, zone) = LRU_VM[lru as usize];
        self.vm.add(node, n);
        self.vm.add(zone, n);
        self.memcgs[memcg as usize]
            .stat
            .add(LRU_MC[lru as usize], n);
    }

    /// `lruvec_add_folio`: at the head of the list its flags select.
    pub fn lruvec_add_folio(&mut self, pfn: Pfn) {
        self.lru_link(pfn, false);
    }

    /// `lruvec_add_folio_tail`: at the tail, next in line for reclaim.
    pub fn lruvec_add_folio_tail(&mut self, pfn: Pfn) {
        self.lru_link(pfn, true);
    }

    /// Links `pfn` just before `anchor` (on the newer side, as
    /// `list_add_tail(&new->lru, &anchor->lru)`), on `anchor`'s list.
    pub fn lruvec_add_folio_before(&mut self, anchor: Pfn, pfn: Pfn) {
        let a = *self.folios.get(anchor);
        let (lru, memcg, nr) = (a.lru, a.memcg, self.folios.get(pfn).nr_pages() as i64);
        debug_assert_eq!(self.folios.get(pfn).lru_list(), lru);
        if a.prev == NIL {
            self.lruvecs[memcg as usize].lists[lru as usize].head = pfn;
        } else {
            self.folios.get_mut(a.prev).next = pfn;
        }
        self.folios.get_mut(anchor).prev = pfn;
        let f = self.folios.get_mut(pfn);
        (f.prev, f.next) = (a.prev, anchor);
        f.lru = lru;
        self.lruvecs[memcg as usize].lists[lru as usize].len += nr as u64;
        self.update_lru_size(memcg, lru, nr);
    }

    /// A folio on a list was `old_nr` pages and is now its current size
    /// (a split's head): the list and the gauges follow.
    pub fn lruvec_folio_shrunk(&mut self, pfn: Pfn, old_nr: u32) {
        let f = *self.folios.get(pfn);
        let d = old_nr as i64 - f.nr_pages() as i64;
        self.lruvecs[f.memcg as usize].lists[f.lru as usize].len -= d as u64;
        self.update_lru_size(f.memcg, f.lru, -d);
    }

    fn lru_link(&mut self, pfn: Pfn, tail: bool) {
        let f = self.folios.get(pfn);
        let (lru, memcg, nr) = (f.lru_list(), f.memcg, f.nr_pages() as i64);
        let list = &mut self.lruvecs[memcg as usize].lists[lru as usize];
        let old = if tail { list.tail } else { list.head };
        if tail {
            list.tail = pfn;
        } else {
            list.head = pfn;
        }
        if old == NIL {
            *(if tail { &mut list.head } else { &mut list.tail }) = pfn;
        } else if tail {
            self.folios.get_mut(old).next = pfn;
        } else {
            self.folios.get_mut(old).prev = pfn;
        }
        let list = &mut self.lruvecs[memcg as usize].lists[lru as usize];
        list.len += nr as u64;
        let f = self.folios.get_mut(pfn);
        (f.prev, f.next) = if tail { (old, NIL) } else { (NIL, old) };
        f.lru = lru;
        self.update_lru_size(memcg, lru, nr);
    }

    /// `lruvec_del_folio`: unlinks from the list it is on.
    pub fn lruvec_del_folio(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        debug_assert_ne!(f.lru, LRU_NONE);
        let list = &mut self.lruvecs[f.memcg as usize].lists[f.lru as usize];
        if f.prev == NIL {
            list.head = f.next;
        } else {
            self.folios.get_mut(f.prev).next = f.next;
        }
        let list = &mut self.lruvecs[f.memcg as usize].lists[f.lru as usize];
        if f.next == NIL {
            list.tail = f.prev;
        } else {
            self.folios.get_mut(f.next).prev = f.prev;
        }
        let list = &mut self.lruvecs[f.memcg as usize].lists[f.lru as usize];
        list.len -= f.nr_pages() as u64;
        let g = self.folios.get_mut(pfn);
        g.prev = NIL;
        g.next = NIL;
        g.lru = LRU_NONE;
        self.update_lru_size(f.memcg, f.lru, -(f.nr_pages() as i64));
    }
}

//! The MM_ID tracking of a large anonymous folio (CONFIG_MM_ID, 6.15, so
//! 7.3 has it): the folio remembers up to two mms that map it with how
//! many PTEs each, and keeps FOLIO_MM_IDS_SHARED set while its mappings
//! may belong to more than one mm (`folio_set_large_mapcount`,
//! `folio_add_return_large_mapcount`, `folio_sub_return_large_mapcount`
//! in include/linux/rmap.h).
//!
//! 7.3 reads the bit where 6.12 guessed from page mapcounts: a write
//! fault reuses a large folio only while it is clear
//! (`__wp_can_reuse_large_anon_folio`), and MADV_COLD, MADV_PAGEOUT,
//! MADV_FREE and khugepaged take a folio with it set as shared
//! (`folio_maybe_mapped_shared`).
//!
//! The kernel keeps `_mm_id[2]`, `_mm_id_mapcount[2]` and `_mm_ids` in the
//! folio's second page; mmsim keeps them in the first two tails' records
//! (`mapping` holds a slot's mm, NIL for MM_ID_DUMMY; `index` its PTE
//! count, the kernel's `_mm_id_mapcount` + 1; the first tail's `swap` the
//! shared bit), for anonymous folios of orders 2 to 8 on every preset:
//! no release before 7.3 reads them.

use super::folio::*;
use crate::kernel::Kernel;

/// The orders whose folios are tracked: anonymous mTHP (PMD-size THP is
/// modelled on 6.1 only, which has no MM_ID).
fn tracked(f: &Folio) -> bool {
    (2..9).contains(&f.order) && f.flags & (PG_TAIL | PG_ANON) == PG_ANON
}

impl Kernel {
    /// The `(mm, PTE count)` of slot `i` (0 or 1) of folio `head`.
    fn mm_id_slot(&self, head: Pfn, i: u32) -> (u32, u32) {
        let t = self.folios.get(head + 1 + i);
        (t.mapping, t.index)
    }

    fn mm_id_slot_set(&mut self, head: Pfn, i: u32, mm: u32, count: u32) {
        let t = self.folios.get_mut(head + 1 + i);
        t.mapping = mm;
        t.index = count;
    }

    fn mm_ids_shared_set(&mut self, head: Pfn, shared: bool) {
        self.folios.get_mut(head + 1).swap = shared as u32;
    }

    /// The invariant checker's view of a tracked folio: its slots'
    /// `(mm, count)` and the shared bit; None for a folio not tracked.
    pub fn mm_ids(&self, head: Pfn) -> Option<[(u32, u32); 2]> {
        tracked(self.folios.get(head)).then(|| [self.mm_id_slot(head, 0), self.mm_id_slot(head, 1)])
    }

    /// FOLIO_MM_IDS_SHARED of a tracked folio.
    pub fn mm_ids_shared(&self, head: Pfn) -> bool {
        self.folios.get(head + 1).swap != 0
    }

    /// `folio_set_large_mapcount` at `folio_add_new_anon_rmap`: all `nr`
    /// mappings are `mm`'s.
    pub fn mm_id_set(&mut self, head: Pfn, nr: u32, mm: u32) {
        if !tracked(self.folios.get(head)) {
            return;
        }
        self.mm_id_slot_set(head, 0, mm, nr);
        self.mm_id_slot_set(head, 1, NIL, 0);
        self.mm_ids_shared_set(head, false);
    }

    /// `folio_add_return_large_mapcount`: `diff` more of `mm`'s PTEs map
    /// folio `head` (whose total the caller has already raised). An mm
    /// without a slot takes a free one; the folio is then shared if any
    /// other mapping exists. A third mm takes no slot (its mappings stay
    /// counted in the total only, which keeps the bit set).
    pub fn mm_id_add(&mut self, head: Pfn, diff: u32, mm: u32) {
        if !tracked(self.folios.get(head)) {
            return;
        }
        let total = self.folios.get(head).mapcount;
        let (s0, s1) = (self.mm_id_slot(head, 0), self.mm_id_slot(head, 1));
        if s0.0 == mm {
            self.mm_id_slot_set(head, 0, mm, s0.1 + diff);
        } else if s1.0 == mm {
            self.mm_id_slot_set(head, 1, mm, s1.1 + diff);
        } else if s0.0 == NIL {
            self.mm_id_slot_set(head, 0, mm, diff);
            if total != diff {
                self.mm_ids_shared_set(head, true);
            }
        } else if s1.0 == NIL {
            self.mm_id_slot_set(head, 1, mm, diff);
            self.mm_ids_shared_set(head, true);
        }
    }

    /// `folio_sub_return_large_mapcount`: `diff` of `mm`'s PTEs no longer
    /// map folio `head` (whose total the caller has already lowered). A
    /// slot left without mappings is freed (a count that would go below
    /// zero, from mappings added while no slot was free, is freed too);
    /// then the bit clears if one slot holds every mapping left. While
    /// the mm keeps mappings the bit is not looked at.
    pub fn mm_id_sub(&mut self, head: Pfn, diff: u32, mm: u32) {
        if !tracked(self.folios.get(head)) {
            return;
        }
        let total = self.folios.get(head).mapcount;
        for i in 0..2 {
            let (id, count) = self.mm_id_slot(head, i);
            if id != mm {
                continue;
            }
            if count > diff {
                self.mm_id_slot_set(head, i, mm, count - diff);
                return;
            }
            self.mm_id_slot_set(head, i, NIL, 0);
            break;
        }
        let (c0, c1) = (self.mm_id_slot(head, 0).1, self.mm_id_slot(head, 1).1);
        if c0 == total || c1 == total {
            self.mm_ids_shared_set(head, false);
        }
    }

    /// `folio_maybe_mapped_shared` (7.3) or `folio_likely_mapped_shared`
    /// (6.12) of anonymous folio `head`: whether mappings of more than one
    /// mm may exist. 7.3 reads the MM_ID bit of a large folio; 6.12
    /// guesses from the first page's mapcount and the folio's total.
    pub fn folio_maybe_mapped_shared(&self, head: Pfn) -> bool {
        let f = self.folios.get(head);
        if f.order == 0 {
            return f.mapcount > 1;
        }
        if self.release.large_folio_mm_id && tracked(f) {
            return self.mm_ids_shared(head);
        }
        self.folios.page_mapcount(head) > 1 || self.folio_mapcount(head) > f.nr_pages()
    }
}

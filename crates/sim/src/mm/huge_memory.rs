//! mm/huge_memory.c: splitting a large page-cache folio of a regular file
//! into order-0 folios (`split_huge_page`), as MADV_PAGEOUT and MADV_COLD
//! do in 6.1 before they act on a page of a PTE-mapped large folio.

use super::folio::*;
use crate::cost::{self, Fn};
use crate::kernel::Kernel;
use crate::vmstat::Vm;

/// The flags a tail page takes from its head (`__split_huge_page_tail`).
const TAIL_FLAGS: u32 = PG_REFERENCED
    | PG_SWAPBACKED
    | PG_UPTODATE
    | PG_ACTIVE
    | PG_WORKINGSET
    | PG_UNEVICTABLE
    | PG_DIRTY
    | PG_PAGECACHE
    | PG_CHARGED;

impl Kernel {
    /// `split_huge_page` of a regular file's large folio that the caller
    /// holds a reference to: `unmap_folio` (a file folio's PTEs are simply
    /// removed; the pages fault back in), then, if nobody else holds a
    /// reference, every page becomes an order-0 folio in the page cache,
    /// charged to the same memcg, on the LRU just before the head in the
    /// head's list. False (`thp_split_page_failed`) under writeback, while
    /// locked for I/O, or with extra references.
    pub fn split_file_folio(&mut self, head: Pfn) -> bool {
        let f = *self.folios.get(head);
        debug_assert!(f.order > 0 && f.test(PG_PAGECACHE) && !f.test(PG_SWAPBACKED));
        if f.test(PG_WRITEBACK | PG_LOCKED) {
            self.vm.inc(Vm::ThpSplitPageFailed);
            return false;
        }
        self.try_to_unmap_page_cache(head);
        let nr = f.nr_pages();
        // folio_ref_freeze(folio, 1 + extra_pins): the caller's and the
        // page cache's references only.
        if self.folios.get(head).refcount != 1 + nr {
            self.vm.inc(Vm::ThpSplitPageFailed);
            return false;
        }
        self.charge_cost(Fn::SplitHugePage, cost::SPLIT_TAIL_NS * (nr as u64 - 1));
        let h = *self.folios.get(head);
        let on_lru = h.test(PG_LRU);
        let inode = h.mapping;
        for i in (1..nr).rev() {
            let tail = head + i;
            let index = h.index + i;
            *self.folios.get_mut(tail) = Folio {
                flags: h.flags & TAIL_FLAGS | if on_lru { PG_LRU } else { 0 },
                refcount: 1,
                mapping: inode,
                index,
                memcg: h.memcg,
                ..Folio::FREE
            };
            self.inodes[inode as usize].pages[index as usize] =
                (tail as u64) << 2 | super::filemap::SLOT_FOLIO;
        }
        // The head shrinks to order 0 in place on its list, then the tails
        // go just before it, the last first (`lru_add_page_tail`).
        let hf = self.folios.get_mut(head);
        hf.order = 0;
        hf.refcount = 2;
        if on_lru {
            self.lruvec_folio_shrunk(head, nr);
            for i in (1..nr).rev() {
                self.lruvec_add_folio_before(head, head + i);
            }
        }
        self.vm.inc(Vm::ThpSplitPage);
        true
    }
}

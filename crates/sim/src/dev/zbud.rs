//! mm/zbud.c: zswap's default allocator in 6.1. A zbud page holds at most
//! two objects ("buddies"), the first from the page's start and the last
//! up to its end, each a whole number of 64-byte chunks after a one-chunk
//! header. A page with one buddy waits on the unbuddied list of its free
//! chunk count for a second object; every allocation moves its page to
//! the head of the pool's LRU, whose tail is what `zbud_reclaim_page`
//! evicts.
//!
//! The lists keep the kernel's order (`list_add` at the head, the first
//! entry taken), so which page an object lands in, and which page
//! reclaim picks, are the kernel's. The page frames themselves are the
//! caller's (dev/zswap.rs allocates and frees them).

use crate::mm::folio::Pfn;

const CHUNK_SHIFT: u32 = 6;
const CHUNK_SIZE: u32 = 1 << CHUNK_SHIFT;
/// ZHDR_SIZE_ALIGNED: the page's header takes the first chunk.
const ZHDR_SIZE_ALIGNED: u32 = CHUNK_SIZE;
/// NCHUNKS: chunks an object may use in a page.
pub const NCHUNKS: u32 = (4096 - ZHDR_SIZE_ALIGNED) >> CHUNK_SHIFT;
/// The largest object zbud takes (`zbud_alloc`'s -ENOSPC past it).
pub const ZBUD_MAX_SIZE: u32 = 4096 - ZHDR_SIZE_ALIGNED - CHUNK_SIZE;

const NIL: u32 = u32::MAX;
/// `ZbudPage::on`: the buddied list, or none.
const BUDDIED: u8 = NCHUNKS as u8;
const OFF: u8 = u8::MAX;

/// Which half of a zbud page an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buddy {
    First,
    Last,
}

/// An object: its zbud page (an index into the pool) and its half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle {
    pub page: u32,
    pub bud: Buddy,
}

/// Links of one intrusive list (`struct list_head`), by page index.
#[derive(Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
};

/// A `struct zbud_header`.
#[derive(Clone, Copy)]
struct ZbudPage {
    pfn: Pfn,
    first_chunks: u32,
    last_chunks: u32,
    /// On an unbuddied list or the buddied list (`buddy`: which one in
    /// `on`), and on the LRU.
    buddy: Link,
    on: u8,
    lru: Link,
    under_reclaim: bool,
    in_use: bool,
}

/// A list head: first and last page index.
#[derive(Clone, Copy)]
struct Head {
    first: u32,
    last: u32,
}

const EMPTY: Head = Head {
    first: NIL,
    last: NIL,
};

/// A `struct zbud_pool`.
pub struct ZbudPool {
    pages: Vec<ZbudPage>,
    free_slots: Vec<u32>,
    /// unbuddied[i]: pages with one buddy and i free chunks.
    unbuddied: [Head; NCHUNKS as usize],
    buddied: Head,
    lru: Head,
    /// pages_nr.
    pub pages_nr: u64,
}

impl Default for ZbudPool {
    fn default() -> Self {
        ZbudPool {
            pages: Vec::new(),
            free_slots: Vec::new(),
            unbuddied: [EMPTY; NCHUNKS as usize],
            buddied: EMPTY,
            lru: EMPTY,
            pages_nr: 0,
        }
    }
}

/// `size_to_chunks`.
fn size_to_chunks(size: u32) -> u32 {
    (size + CHUNK_SIZE - 1) >> CHUNK_SHIFT
}

/// What `zbud_alloc` needs of its caller.
pub enum Alloc {
    /// Stored in an existing page.
    Done(Handle),
    /// No unbuddied page fits: the caller allocates a frame and calls
    /// `alloc_in_new_page`.
    NeedPage,
}

impl ZbudPool {
    /// The list a page belongs on by its chunks (`num_free_chunks` for
    /// one buddy, else the buddied list).
    fn list_for(&self, page: u32) -> u8 {
        let p = &self.pages[page as usize];
        if p.first_chunks == 0 || p.last_chunks == 0 {
            (NCHUNKS - p.first_chunks - p.last_chunks) as u8
        } else {
            BUDDIED
        }
    }

    fn head(&mut self, on: u8) -> &mut Head {
        match on {
            BUDDIED => &mut self.buddied,
            i => &mut self.unbuddied[i as usize],
        }
    }

    /// `list_add(&zhdr->buddy, ...)` onto the list its chunks name.
    fn add_buddy(&mut self, page: u32) {
        let on = self.list_for(page);
        let old = self.head(on).first;
        self.pages[page as usize].buddy = Link {
            prev: NIL,
            next: old,
        };
        self.pages[page as usize].on = on;
        match old {
            NIL => self.head(on).last = page,
            o => self.pages[o as usize].buddy.prev = page,
        }
        self.head(on).first = page;
    }

    /// `list_del(&zhdr->buddy)` from whichever list holds it.
    fn del_buddy(&mut self, page: u32) {
        let Link { prev, next } = self.pages[page as usize].buddy;
        let on = self.pages[page as usize].on;
        debug_assert_ne!(on, OFF);
        match prev {
            NIL => self.head(on).first = next,
            p => self.pages[p as usize].buddy.next = next,
        }
        match next {
            NIL => self.head(on).last = prev,
            n => self.pages[n as usize].buddy.prev = prev,
        }
        self.pages[page as usize].buddy = UNLINKED;
        self.pages[page as usize].on = OFF;
    }

    /// `list_add(&zhdr->lru, &pool->lru)`.
    fn lru_add(&mut self, page: u32) {
        let old = self.lru.first;
        self.pages[page as usize].lru = Link {
            prev: NIL,
            next: old,
        };
        match old {
            NIL => self.lru.last = page,
            o => self.pages[o as usize].lru.prev = page,
        }
        self.lru.first = page;
    }

    fn lru_del(&mut self, page: u32) {
        let Link { prev, next } = self.pages[page as usize].lru;
        match prev {
            NIL => self.lru.first = next,
            p => self.pages[p as usize].lru.next = next,
        }
        match next {
            NIL => self.lru.last = prev,
            n => self.pages[n as usize].lru.prev = prev,
        }
        self.pages[page as usize].lru = UNLINKED;
    }

    /// `zbud_alloc` of `size` bytes (1..=ZBUD_MAX_SIZE): into the first
    /// page of the first unbuddied list with room (`for_each_unbuddied_list`
    /// from the object's chunks up), else a new page is needed.
    pub fn alloc(&mut self, size: u32) -> Alloc {
        debug_assert!(size > 0 && size <= ZBUD_MAX_SIZE);
        let chunks = size_to_chunks(size);
        let Some(page) = (chunks..NCHUNKS)
            .map(|i| self.unbuddied[i as usize].first)
            .find(|&p| p != NIL)
        else {
            return Alloc::NeedPage;
        };
        self.del_buddy(page);
        let p = &mut self.pages[page as usize];
        let bud = if p.first_chunks == 0 {
            p.first_chunks = chunks;
            Buddy::First
        } else {
            p.last_chunks = chunks;
            Buddy::Last
        };
        self.placed(page);
        Alloc::Done(Handle { page, bud })
    }

    /// The rest of `zbud_alloc` after `alloc_page` gave `pfn`: a new page
    /// whose first buddy the object is.
    pub fn alloc_in_new_page(&mut self, size: u32, pfn: Pfn) -> Handle {
        let page = ZbudPage {
            pfn,
            first_chunks: size_to_chunks(size),
            last_chunks: 0,
            buddy: UNLINKED,
            on: OFF,
            lru: UNLINKED,
            under_reclaim: false,
            in_use: true,
        };
        let page = match self.free_slots.pop() {
            Some(i) => {
                self.pages[i as usize] = page;
                i
            }
            None => {
                self.pages.push(page);
                self.pages.len() as u32 - 1
            }
        };
        self.pages_nr += 1;
        self.placed(page);
        Handle {
            page,
            bud: Buddy::First,
        }
    }

    /// After an object went into `page`: onto its buddy list, to the
    /// LRU's head.
    fn placed(&mut self, page: u32) {
        self.add_buddy(page);
        if self.pages[page as usize].lru.prev != NIL || self.lru.first == page {
            self.lru_del(page);
        }
        self.lru_add(page);
    }

    /// `zbud_free`: the frame to give back when the page is now empty
    /// (and not under reclaim, which frees it itself).
    pub fn free(&mut self, h: Handle) -> Option<Pfn> {
        let p = &mut self.pages[h.page as usize];
        match h.bud {
            Buddy::First => p.first_chunks = 0,
            Buddy::Last => p.last_chunks = 0,
        }
        if p.under_reclaim {
            return None;
        }
        self.del_buddy(h.page);
        let p = self.pages[h.page as usize];
        if p.first_chunks == 0 && p.last_chunks == 0 {
            self.lru_del(h.page);
            return Some(self.release(h.page));
        }
        self.add_buddy(h.page);
        None
    }

    fn release(&mut self, page: u32) -> Pfn {
        let p = &mut self.pages[page as usize];
        p.in_use = false;
        self.free_slots.push(page);
        self.pages_nr -= 1;
        p.pfn
    }

    /// The LRU's tail page and its objects, taken off its lists and
    /// marked under reclaim (the start of one `zbud_reclaim_page` try);
    /// None for an empty pool.
    pub fn reclaim_begin(&mut self) -> Option<(u32, [Option<Handle>; 2])> {
        let page = self.lru.last;
        if page == NIL {
            return None;
        }
        self.lru_del(page);
        self.del_buddy(page);
        let p = &mut self.pages[page as usize];
        p.under_reclaim = true;
        let first = (p.first_chunks != 0).then_some(Handle {
            page,
            bud: Buddy::First,
        });
        let last = (p.last_chunks != 0).then_some(Handle {
            page,
            bud: Buddy::Last,
        });
        Some((page, [first, last]))
    }

    /// The end of a try: the page's frame when both buddies are gone
    /// (freed), else it goes back on its lists at the LRU's head.
    pub fn reclaim_end(&mut self, page: u32) -> Option<Pfn> {
        let p = &mut self.pages[page as usize];
        p.under_reclaim = false;
        if p.first_chunks == 0 && p.last_chunks == 0 {
            return Some(self.release(page));
        }
        self.add_buddy(page);
        self.lru_add(page);
        None
    }

    /// Every frame the pool holds.
    pub fn frames(&self) -> impl Iterator<Item = Pfn> + '_ {
        self.pages.iter().filter(|p| p.in_use).map(|p| p.pfn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(pool: &mut ZbudPool, size: u32, next_pfn: &mut Pfn) -> Handle {
        match pool.alloc(size) {
            Alloc::Done(h) => h,
            Alloc::NeedPage => {
                *next_pfn += 1;
                pool.alloc_in_new_page(size, *next_pfn)
            }
        }
    }

    #[test]
    fn two_objects_share_a_page_when_their_chunks_fit() {
        let mut pool = ZbudPool::default();
        let mut pfn = 0;
        // 52 bytes (an 8-byte header and a token page's 44) is a chunk.
        let a = store(&mut pool, 52, &mut pfn);
        let b = store(&mut pool, 52, &mut pfn);
        assert_eq!((a.page, a.bud), (b.page, Buddy::First));
        assert_eq!(b.bud, Buddy::Last);
        assert_eq!(pool.pages_nr, 1);
        // 62 chunks and 2 need two pages; 61 and 2 fit one.
        let mut pool = ZbudPool::default();
        store(&mut pool, 62 * 64, &mut pfn);
        store(&mut pool, 2 * 64, &mut pfn);
        assert_eq!(pool.pages_nr, 2);
        let mut pool = ZbudPool::default();
        store(&mut pool, 61 * 64, &mut pfn);
        store(&mut pool, 2 * 64, &mut pfn);
        assert_eq!(pool.pages_nr, 1);
    }

    #[test]
    fn the_fullest_fitting_page_is_found_first_and_a_freed_page_goes_back() {
        let mut pool = ZbudPool::default();
        let mut pfn = 0;
        let big = store(&mut pool, 40 * 64, &mut pfn); // 23 chunks free
        let small = store(&mut pool, 10 * 64, &mut pfn); // fits the first page
        assert_eq!(small.page, big.page);
        let other = store(&mut pool, 30 * 64, &mut pfn); // new page, 33 free
        assert_ne!(other.page, big.page);
        // 20 chunks: unbuddied[33] is the first list from 20 up with a page.
        assert_eq!(pool.free(small), None);
        let h = store(&mut pool, 20 * 64, &mut pfn);
        assert_eq!(h.page, big.page, "23 free chunks come before 33");
        assert_eq!(pool.free(h), None);
        assert_eq!(pool.free(big), Some(1));
        assert_eq!(pool.pages_nr, 1);
        assert_eq!(pool.frames().collect::<Vec<_>>(), vec![2]);
    }

    #[test]
    fn reclaim_takes_the_least_recently_stored_page() {
        let mut pool = ZbudPool::default();
        let mut pfn = 0;
        let a = store(&mut pool, 100, &mut pfn);
        // 62 chunks: more than the 61 a's page has free.
        let b = store(&mut pool, ZBUD_MAX_SIZE, &mut pfn);
        assert_ne!(b.page, a.page);
        let c = store(&mut pool, 100, &mut pfn); // into a's page: now most recent
        assert_eq!(c.page, a.page);
        let (page, objs) = pool.reclaim_begin().expect("a page");
        assert_eq!(page, b.page);
        assert_eq!(objs, [Some(b), None]);
        // Evicted: zswap frees the object while the page is under reclaim.
        assert_eq!(pool.free(b), None);
        assert_eq!(pool.reclaim_end(page), Some(2));
        let (page, objs) = pool.reclaim_begin().expect("a page");
        assert_eq!((page, objs), (a.page, [Some(a), Some(c)]));
        // One eviction failed: the page goes back, to the LRU's head.
        assert_eq!(pool.free(a), None);
        assert_eq!(pool.reclaim_end(page), None);
        assert_eq!(pool.pages_nr, 1);
        let d = store(&mut pool, 100, &mut pfn);
        assert_eq!((d.page, d.bud), (a.page, Buddy::First));
    }
}

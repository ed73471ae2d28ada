//! The folio table: one compact record per page frame.
//!
//! A frame that heads a folio carries the folio's state; the record keeps an
//! `order` so large folios can come without a new layout (today every folio
//! is order 0). Links are u32 frame numbers, so LRU lists and the free lists
//! are intrusive and cost no allocation.

pub type Pfn = u32;
/// "No frame" in links and lookups.
pub const NIL: u32 = u32::MAX;

// Folio flags, named after the kernel's PG_* bits.
pub const PG_LOCKED: u32 = 1 << 0;
pub const PG_REFERENCED: u32 = 1 << 1;
pub const PG_UPTODATE: u32 = 1 << 2;
pub const PG_DIRTY: u32 = 1 << 3;
pub const PG_LRU: u32 = 1 << 4;
pub const PG_ACTIVE: u32 = 1 << 5;
pub const PG_WORKINGSET: u32 = 1 << 6;
pub const PG_SWAPBACKED: u32 = 1 << 7;
pub const PG_SWAPCACHE: u32 = 1 << 8;
pub const PG_WRITEBACK: u32 = 1 << 9;
pub const PG_RECLAIM: u32 = 1 << 10;
pub const PG_UNEVICTABLE: u32 = 1 << 11;
pub const PG_READAHEAD: u32 = 1 << 12;
/// PageAnon: `mapping` names an anon_vma, not a file.
pub const PG_ANON: u32 = 1 << 13;
/// PageAnonExclusive (on the head page of an order-0 folio).
pub const PG_ANON_EXCLUSIVE: u32 = 1 << 14;
// Bits 15 and 16 hold the multi-gen LRU's reference count, 29 to 31 its
// generation (lru_gen.rs).
/// On a PTE table's frame: the accessed bit of the PMD entry that points
/// to it (x86 sets it when a page walk goes through; `pmd_populate`
/// installs the entry with it set).
pub const PG_PMD_YOUNG: u32 = 1 << 17;
// States the kernel expresses otherwise (buddy lists, page_type, the per-CPU
// batch's reference); kept as bits so the invariant checker can see them.
/// In the buddy allocator.
pub const PG_BUDDY: u32 = 1 << 20;
/// Queued in a per-CPU lru_add batch (holds a reference, not yet PG_lru).
pub const PG_LRU_BATCH: u32 = 1 << 21;
/// Isolated from its LRU by reclaim (holds a reference).
pub const PG_ISOLATED: u32 = 1 << 22;
/// Used by the kernel itself (boot reservation, zram's pool).
pub const PG_KERNEL: u32 = 1 << 23;
/// Free, on a CPU's per-CPU page list (not in the zone's free list).
pub const PG_PCP: u32 = 1 << 24;
/// A page-table page (PTE or PMD table) of a process, charged to its memcg.
pub const PG_PGTABLE: u32 = 1 << 25;
/// In an inode's page cache (`folio->mapping` is the inode's).
pub const PG_PAGECACHE: u32 = 1 << 26;
/// A regular file's page-cache folio charged to its memcg (`memcg_data`;
/// anon and shmem folios are known charged by their swap-backed state).
pub const PG_CHARGED: u32 = 1 << 27;
/// A frame after the first of a large folio or of a free buddy block
/// (PageTail). An allocated tail's `next` is its head (the kernel's
/// `compound_head`); its `mapcount` counts the PTEs mapping that page.
pub const PG_TAIL: u32 = 1 << 28;

/// LRU list numbers as `enum lru_list` orders them.
pub const LRU_INACTIVE_ANON: u8 = 0;
pub const LRU_ACTIVE_ANON: u8 = 1;
pub const LRU_INACTIVE_FILE: u8 = 2;
pub const LRU_ACTIVE_FILE: u8 = 3;
pub const LRU_UNEVICTABLE: u8 = 4;
pub const NR_LRU_LISTS: usize = 5;
/// Not on any LRU list.
pub const LRU_NONE: u8 = 0xff;

#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Folio {
    pub flags: u32,
    pub refcount: u32,
    /// Number of PTEs mapping the folio (the kernel's _mapcount + 1).
    pub mapcount: u32,
    /// LRU or free-list neighbours.
    pub prev: u32,
    pub next: u32,
    /// anon_vma id for anon folios.
    pub mapping: u32,
    /// Linear page index within the mapping (vma->vm_pgoff based).
    pub index: u32,
    /// Swap entry while PG_swapcache.
    pub swap: u32,
    pub memcg: u16,
    pub order: u8,
    /// Which LRU list the folio is on, or LRU_NONE.
    pub lru: u8,
}

impl Folio {
    pub const FREE: Folio = Folio {
        flags: PG_BUDDY,
        refcount: 0,
        mapcount: 0,
        prev: NIL,
        next: NIL,
        mapping: NIL,
        index: 0,
        swap: 0,
        memcg: 0,
        order: 0,
        lru: LRU_NONE,
    };

    #[inline]
    pub fn test(&self, f: u32) -> bool {
        self.flags & f != 0
    }
    #[inline]
    pub fn set(&mut self, f: u32) {
        self.flags |= f;
    }
    #[inline]
    pub fn clear(&mut self, f: u32) {
        self.flags &= !f;
    }
    #[inline]
    pub fn nr_pages(&self) -> u32 {
        1 << self.order
    }
    /// `folio_is_file_lru`: not swap-backed.
    #[inline]
    pub fn is_file_lru(&self) -> bool {
        !self.test(PG_SWAPBACKED)
    }
    /// `folio_lru_list`: the list the folio's flags say it belongs on.
    pub fn lru_list(&self) -> u8 {
        if self.test(PG_UNEVICTABLE) {
            return LRU_UNEVICTABLE;
        }
        let base = if self.is_file_lru() {
            LRU_INACTIVE_FILE
        } else {
            LRU_INACTIVE_ANON
        };
        base + self.test(PG_ACTIVE) as u8
    }
}

/// Types whose all-zero bytes are a valid value (plain integers and
/// records of them), so a [`FrameArray`] of them can start as untouched
/// zero memory.
///
/// # Safety
/// Implement only for types for which every field is an integer.
pub unsafe trait ZeroValid: Copy {}
unsafe impl ZeroValid for u32 {}
unsafe impl ZeroValid for Folio {}

/// A frame-indexed array whose host memory is committed only where it is
/// written. It is an anonymous mapping reserved without swap accounting
/// (MAP_NORESERVE): the host maps untouched parts to its zero page, so a
/// 1 TiB machine costs the host what its workload touches, not 40 bytes
/// for each of its 268 million frames.
pub struct FrameArray<T: ZeroValid> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
    _map: Option<memmap2::MmapMut>,
}

// The array owns its mapping exclusively, like a Vec.
unsafe impl<T: ZeroValid + Send> Send for FrameArray<T> {}
unsafe impl<T: ZeroValid + Sync> Sync for FrameArray<T> {}

impl<T: ZeroValid> FrameArray<T> {
    /// `len` zeroed elements; Err if the host cannot reserve the space.
    pub fn zeroed(len: usize) -> std::io::Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| std::io::Error::other("size overflows"))?;
        if bytes == 0 {
            return Ok(FrameArray {
                ptr: std::ptr::NonNull::dangling(),
                len,
                _map: None,
            });
        }
        let mut map = memmap2::MmapOptions::new()
            .len(bytes)
            .no_reserve_swap()
            .map_anon()?;
        // A mapping is page-aligned, which suits any T; it stays put while
        // `map` lives, and `map` lives as long as the array.
        let ptr = std::ptr::NonNull::new(map.as_mut_ptr() as *mut T)
            .expect("a mapping is not at address 0");
        Ok(FrameArray {
            ptr,
            len,
            _map: Some(map),
        })
    }
}

impl<T: ZeroValid> std::ops::Deref for FrameArray<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points at `len` initialised (zeroed or written) Ts
        // in a mapping the array owns; ZeroValid makes zero bytes valid.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: ZeroValid> std::ops::DerefMut for FrameArray<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as for deref; &mut self makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

pub struct FolioTable {
    /// One record per frame. A frame whose record was never written is
    /// inside a free max-order block the buddy allocator has not handed
    /// out since boot (`Zone::lazy_next`..`lazy_end`): nothing reads it
    /// until the block is taken, when its records are written.
    pub f: FrameArray<Folio>,
    /// Content token of each frame: the version of the last write to its
    /// data. Kept apart from the records because every user read checks
    /// it: a dense 4-byte array keeps that random access to one cache
    /// line per page, not a 36-byte record's.
    pub version: FrameArray<u32>,
}

impl FolioTable {
    /// A table of `frames` records, all still unwritten: boot frees the
    /// frames into the buddy lists, which write the records of the blocks
    /// they list (`free_all_at_boot`).
    pub fn new(frames: u32) -> std::io::Result<Self> {
        Ok(FolioTable {
            f: FrameArray::zeroed(frames as usize)?,
            version: FrameArray::zeroed(frames as usize)?,
        })
    }
    #[inline]
    pub fn get(&self, pfn: Pfn) -> &Folio {
        &self.f[pfn as usize]
    }
    #[inline]
    pub fn get_mut(&mut self, pfn: Pfn) -> &mut Folio {
        &mut self.f[pfn as usize]
    }
    pub fn len(&self) -> usize {
        self.f.len()
    }

    /// `compound_head`: the folio a frame belongs to (itself unless it is
    /// an allocated tail).
    #[inline]
    pub fn head_of(&self, pfn: Pfn) -> Pfn {
        let f = &self.f[pfn as usize];
        if f.flags & (PG_TAIL | PG_BUDDY) == PG_TAIL {
            f.next
        } else {
            pfn
        }
    }

    /// The page of folio `head` that holds file index `index`
    /// (`folio_file_page`).
    #[inline]
    pub fn folio_page(&self, head: Pfn, index: u64) -> Pfn {
        let f = &self.f[head as usize];
        debug_assert!(index >= f.index as u64 && index < f.index as u64 + f.nr_pages() as u64);
        head + (index - f.index as u64) as Pfn
    }

    /// The PTEs mapping one page (the kernel's `page->_mapcount + 1`). An
    /// order-0 folio's is its `mapcount`; a large folio's head carries the
    /// folio's total (`folio_mapcount`), so its head page's own count
    /// lives in the first tail, where the kernel keeps its folio-wide
    /// counts.
    #[inline]
    pub fn page_mapcount(&self, page: Pfn) -> u32 {
        let f = &self.f[page as usize];
        if f.flags & PG_TAIL != 0 || f.order == 0 {
            f.mapcount
        } else {
            self.f[page as usize + 1].prev
        }
    }

    /// Adds `delta` to one page's PTE count (and to its folio's total);
    /// returns the page's new count.
    pub fn page_mapcount_add(&mut self, page: Pfn, delta: i32) -> u32 {
        let head = self.head_of(page);
        let h = &mut self.f[head as usize];
        h.mapcount = h.mapcount.wrapping_add_signed(delta);
        if h.order == 0 {
            return h.mapcount;
        }
        let slot = if page == head {
            &mut self.f[head as usize + 1].prev
        } else {
            &mut self.f[page as usize].mapcount
        };
        *slot = slot.wrapping_add_signed(delta);
        *slot
    }
    /// PMDs mapping a PMD-size folio whole (the kernel's compound
    /// mapcount, `folio_entire_mapcount`), kept in the second tail.
    #[inline]
    pub fn entire_mapcount(&self, head: Pfn) -> u32 {
        let f = &self.f[head as usize];
        if f.order < 9 || f.flags & PG_TAIL != 0 {
            return 0;
        }
        self.f[head as usize + 2].prev
    }

    /// Adds `delta` to a PMD-size folio's PMD count; returns the new count.
    pub fn entire_mapcount_add(&mut self, head: Pfn, delta: i32) -> u32 {
        debug_assert_eq!(self.f[head as usize].order, 9);
        let slot = &mut self.f[head as usize + 2].prev;
        *slot = slot.wrapping_add_signed(delta);
        *slot
    }

    pub fn is_empty(&self) -> bool {
        self.f.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folio_record_is_compact() {
        // The host-memory target (40 bytes per touched frame, docs/design.md) rests on
        // this: 36 bytes of record plus the 4-byte content token.
        assert_eq!(std::mem::size_of::<Folio>(), 36);
    }

    #[test]
    fn lru_list_from_flags() {
        let mut f = Folio::FREE;
        f.flags = PG_SWAPBACKED;
        assert_eq!(f.lru_list(), LRU_INACTIVE_ANON);
        f.set(PG_ACTIVE);
        assert_eq!(f.lru_list(), LRU_ACTIVE_ANON);
        f.flags = PG_ACTIVE;
        assert_eq!(f.lru_list(), LRU_ACTIVE_FILE);
        f.set(PG_UNEVICTABLE);
        assert_eq!(f.lru_list(), LRU_UNEVICTABLE);
    }
}

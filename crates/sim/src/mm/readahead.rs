//! mm/readahead.c and the mmap readahead of mm/filemap.c: the per-file
//! window (`file_ra_state`), on-demand readahead (initial and ramped-up
//! windows, the PG_readahead marker, context readahead), mmap read-around
//! with `mmap_miss`, and the MADV_SEQUENTIAL / MADV_RANDOM hints.
//!
//! `page_cache_ra_order` fills the window with large folios on a file
//! system that supports them (XFS), growing the order by two per window
//! from the folio that triggered it; ext2 has no large folio support in
//! 6.1, so its windows fall back to order-0 `do_page_cache_ra`.

use super::filemap::SLOT_FOLIO;
use super::folio::*;
use super::mmap::{VM_RAND_READ, VM_SEQ_READ};
use crate::kernel::Kernel;

/// MMAP_LOTSAMISS: past this many misses, mmap read-around stops.
const MMAP_LOTSAMISS: u32 = 100;

/// MAX_PAGECACHE_ORDER with THP configured: PMD order (2 MiB).
pub const MAX_PAGECACHE_ORDER: usize = 9;

/// `struct file_ra_state`: one per open file (a mapping's file, or the
/// file a read op opens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileRa {
    pub start: u64,
    pub size: u64,
    pub async_size: u64,
    /// The disk's readahead size (`ra_pages`), copied at open.
    pub ra_pages: u64,
    pub mmap_miss: u32,
    /// Byte position after the last read (-1: none yet).
    pub prev_pos: i64,
}

impl FileRa {
    /// `file_ra_state_init`.
    pub fn new(ra_pages: u64) -> Self {
        FileRa {
            ra_pages,
            prev_pos: -1,
            ..Default::default()
        }
    }
}

/// `get_init_ra_size`: the first window for a read of `size` pages.
pub fn get_init_ra_size(size: u64, max: u64) -> u64 {
    let newsize = size.max(1).next_power_of_two();
    if newsize <= max / 32 {
        newsize * 4
    } else if newsize <= max / 4 {
        newsize * 2
    } else {
        max
    }
}

/// `get_next_ra_size`: the window after one of `cur` pages.
pub fn get_next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

impl Kernel {
    fn cached(&self, inode: u32, index: u64) -> bool {
        self.inodes[inode as usize].pages[index as usize] & 3 == SLOT_FOLIO
    }

    fn file_pages(&self, inode: u32) -> u64 {
        self.inodes[inode as usize].pages.len() as u64
    }

    /// `page_cache_ra_unbounded`: new folios for the uncached pages of
    /// `[index, index + nr)`, the one at `nr - lookahead` marked
    /// PG_readahead, read in runs (`read_pages`) under one plug. Stops
    /// where memory or the memcg charge runs out.
    fn page_cache_ra_unbounded(
        &mut self,
        inode: u32,
        index: u64,
        nr: u64,
        lookahead: u64,
        memcg: u16,
    ) {
        self.blk_start_plug();
        let mut run: Vec<Pfn> = Vec::new();
        for i in 0..nr {
            if self.cached(inode, index + i) {
                self.read_run(&mut run);
                continue;
            }
            let Some(pfn) = self.filemap_add_new_folio(inode, index + i, memcg, false) else {
                break;
            };
            // Unsigned as in the kernel: a lookahead longer than the
            // clipped window marks nothing.
            if i == nr.wrapping_sub(lookahead) {
                self.folios.get_mut(pfn).set(PG_READAHEAD);
            }
            run.push(pfn);
        }
        self.read_run(&mut run);
        self.blk_finish_plug();
    }

    /// `read_pages` of a run, whose folios then drop the allocation's
    /// reference (`readahead_folio`).
    fn read_run(&mut self, run: &mut Vec<Pfn>) {
        self.read_pages(run);
        for pfn in run.drain(..) {
            self.folio_put(pfn);
        }
    }

    /// `read_pages` → ext2's `mpage_readahead` (XFS's `iomap_readahead`):
    /// one bio per contiguous run of blocks. The folios stay locked until
    /// their read completes.
    /// Reading a workingset folio back is thrashing: the submission is a
    /// memory stall.
    pub fn read_pages(&mut self, run: &[Pfn]) {
        use super::folio::PG_WORKINGSET;
        let workingset = run.iter().any(|&p| self.folios.get(p).test(PG_WORKINGSET));
        // (5.10 counts no readahead as a memory stall.)
        let stall = workingset && self.release.psi_workingset_reads;
        let psi = !stall || self.psi_memstall_enter();
        for &pfn in run {
            let f = *self.folios.get(pfn);
            let (inode, index) = (f.mapping, f.index as u64);
            let i = &self.inodes[inode as usize];
            let disk = i.disk.expect("a regular file") as usize;
            let block = i.block + index;
            // The read returns what the disk holds now; nothing can write
            // the blocks while the folio is locked in the cache.
            for p in 0..f.nr_pages() {
                self.folios.version[(pfn + p) as usize] =
                    i.disk_version[(index + p as u64) as usize];
            }
            // The disk writes the folio by DMA.
            self.l2_dma(pfn, f.nr_pages());
            self.submit_bio(super::page_io::BioDev::Disk(disk), block, pfn, false);
        }
        self.psi_memstall_leave(psi);
    }

    /// `page_cache_ra_order`: the window `[index, index + ra.size)` in
    /// folios of `new_order` + 2 (at most the window and PMD order),
    /// smaller where alignment or the file's end demands (never order 1);
    /// the folio at the marker gets PG_readahead. A cached page in the
    /// way (-EEXIST) or a failed allocation stops it, and order-0
    /// `do_page_cache_ra` carries on from there for a whole window, as
    /// 6.1 does.
    fn page_cache_ra_order(
        &mut self,
        inode: u32,
        ra: &mut FileRa,
        index: u64,
        new_order: usize,
        memcg: u16,
    ) {
        let end = self.file_pages(inode);
        if !self.inodes[inode as usize].large_folios || ra.size < 4 || index >= end {
            self.do_page_cache_ra(inode, index, ra.size, ra.async_size, memcg);
            return;
        }
        let limit = (end - 1).min(index + ra.size - 1);
        let mark = index + ra.size - ra.async_size;
        let mut new_order = new_order;
        if new_order < MAX_PAGECACHE_ORDER {
            new_order = (new_order + 2).min(MAX_PAGECACHE_ORDER);
            while (1u64 << new_order) > ra.size {
                new_order -= 1;
            }
        }
        self.blk_start_plug();
        let mut run: Vec<Pfn> = Vec::new();
        let mut idx = index;
        let mut failed = false;
        while idx <= limit {
            let mut order = new_order;
            if idx & ((1 << order) - 1) != 0 {
                order = idx.trailing_zeros() as usize;
                if order == 1 {
                    order = 0;
                }
            }
            while idx + (1 << order) - 1 > limit {
                order -= 1;
                if order == 1 {
                    order = 0;
                }
            }
            // ra_alloc_folio: filemap_add_folio fails on a cached page.
            let n = 1u64 << order;
            if (idx..idx + n).any(|i| self.cached(inode, i)) {
                failed = true;
                break;
            }
            let Some(pfn) = self.filemap_add_new_folio_order(inode, idx, order, memcg) else {
                failed = true;
                break;
            };
            if idx == mark.next_multiple_of(n) {
                self.folios.get_mut(pfn).set(PG_READAHEAD);
            }
            run.push(pfn);
            idx += n;
        }
        if idx > limit {
            ra.size += idx - limit - 1;
            ra.async_size += idx - limit - 1;
        }
        self.read_run(&mut run);
        self.blk_finish_plug();
        if failed {
            self.do_page_cache_ra(inode, idx, ra.size, ra.async_size, memcg);
        }
    }

    /// `do_page_cache_ra`: `page_cache_ra_unbounded` clipped to the file.
    fn do_page_cache_ra(&mut self, inode: u32, index: u64, nr: u64, lookahead: u64, memcg: u16) {
        let end = self.file_pages(inode);
        if index >= end {
            return;
        }
        let nr = nr.min(end - index);
        self.page_cache_ra_unbounded(inode, index, nr, lookahead, memcg);
    }

    /// `force_page_cache_ra`: read `[index, index + nr)` in chunks of at
    /// most 2 MiB, without touching the window.
    pub fn force_page_cache_ra(
        &mut self,
        inode: u32,
        ra: &mut FileRa,
        index: u64,
        nr: u64,
        memcg: u16,
    ) {
        let end = self.file_pages(inode);
        if ra.ra_pages == 0 || index >= end {
            return;
        }
        let mut nr = nr.min(end - index);
        let mut index = index;
        while nr > 0 {
            let chunk = nr.min(512);
            self.do_page_cache_ra(inode, index, chunk, 0, memcg);
            index += chunk;
            nr -= chunk;
        }
    }

    /// `page_cache_next_miss`: the first uncached page in `[index, index +
    /// max)`, or `index + max` if there is none (past the end counts as a
    /// miss).
    fn page_cache_next_miss(&self, inode: u32, index: u64, max: u64) -> u64 {
        let end = self.file_pages(inode);
        (index..index + max)
            .find(|&i| i >= end || !self.cached(inode, i))
            .unwrap_or(index + max)
    }

    /// `count_history_pages`: cached pages just before `index` (at most
    /// `max`).
    fn count_history_pages(&self, inode: u32, index: u64, max: u64) -> u64 {
        let mut n = 0;
        while n < max && n < index && self.cached(inode, index - 1 - n) {
            n += 1;
        }
        n
    }

    /// `ondemand_readahead`: the window for a read of `req` pages at
    /// `index`, `marker` being the PG_readahead folio that triggered it
    /// (async) or None (sync, a miss).
    fn ondemand_readahead(
        &mut self,
        inode: u32,
        ra: &mut FileRa,
        index: u64,
        marker: Option<Pfn>,
        req: u64,
        memcg: u16,
    ) {
        let max = ra.ra_pages;
        let order = marker.map_or(0, |p| self.folios.get(p).order as u32);
        let initial = |ra: &mut FileRa| {
            ra.start = index;
            ra.size = get_init_ra_size(req, max);
            ra.async_size = if ra.size > req {
                ra.size - req
            } else {
                ra.size
            };
        };
        if index == 0 {
            initial(ra);
        } else if index == (ra.start + ra.size - ra.async_size) & !((1u64 << order) - 1)
            || index == ra.start + ra.size
        {
            // The expected marker or the window's end: ramp up and move on.
            ra.start += ra.size;
            ra.size = ra.size.max(get_next_ra_size(ra.size, max));
            ra.async_size = ra.size;
        } else if marker.is_some() {
            // A marker without matching state (interleaved reads): size
            // the window from the cached run ahead.
            let start = self.page_cache_next_miss(inode, index + 1, max);
            if start == 0 || start - index > max {
                return;
            }
            ra.start = start;
            ra.size = start - index + req;
            ra.size = get_next_ra_size(ra.size, max);
            ra.async_size = ra.size;
        } else if req > max {
            initial(ra);
        } else if ra.prev_pos >= 0 && index.wrapping_sub((ra.prev_pos >> 12) as u64) <= 1 {
            // A sequential miss.
            initial(ra);
        } else {
            // try_context_readahead: a stream leaves cached pages behind.
            let mut size = self.count_history_pages(inode, index, max);
            if size <= req {
                // A small random read: just the request.
                self.do_page_cache_ra(inode, index, req, 0, memcg);
                return;
            }
            if size >= index {
                size *= 2;
            }
            ra.start = index;
            ra.size = (size + req).min(max);
            ra.async_size = 1;
        }
        // A read that would hit its own marker merges the next window now.
        if index == ra.start && ra.size == ra.async_size {
            let add = get_next_ra_size(ra.size, max);
            if ra.size + add <= max {
                ra.async_size = add;
                ra.size += add;
            } else {
                ra.size = max;
                ra.async_size = max >> 1;
            }
        }
        let start = ra.start;
        self.page_cache_ra_order(inode, ra, start, order as usize, memcg);
    }

    /// `page_cache_sync_ra`: a read missed at `index`.
    pub fn page_cache_sync_ra(
        &mut self,
        inode: u32,
        ra: &mut FileRa,
        index: u64,
        req: u64,
        memcg: u16,
    ) {
        if ra.ra_pages == 0 {
            // Readahead off: the request is read as one page.
            self.do_page_cache_ra(inode, index, 1, 0, memcg);
            return;
        }
        self.ondemand_readahead(inode, ra, index, None, req, memcg);
    }

    /// `page_cache_async_ra`: a read reached the PG_readahead folio `pfn`.
    pub fn page_cache_async_ra(
        &mut self,
        inode: u32,
        ra: &mut FileRa,
        index: u64,
        pfn: Pfn,
        req: u64,
        memcg: u16,
    ) {
        if ra.ra_pages == 0 || self.folios.get(pfn).test(PG_WRITEBACK) {
            return;
        }
        self.folios.get_mut(pfn).clear(PG_READAHEAD);
        self.ondemand_readahead(inode, ra, index, Some(pfn), req, memcg);
    }

    /// `do_sync_mmap_readahead` for a fault that missed at `index`.
    pub fn do_sync_mmap_readahead(&mut self, vma: u32, index: u64, memcg: u16) {
        let v = &self.vmas[vma as usize];
        let (inode, flags, mut ra) = (v.inode, v.flags, v.ra);
        if flags & VM_RAND_READ != 0 || ra.ra_pages == 0 {
            return;
        }
        if flags & VM_SEQ_READ != 0 {
            let req = ra.ra_pages;
            self.page_cache_sync_ra(inode, &mut ra, index, req, memcg);
            self.vmas[vma as usize].ra = ra;
            return;
        }
        if ra.mmap_miss < MMAP_LOTSAMISS * 10 {
            ra.mmap_miss += 1;
        }
        if ra.mmap_miss > MMAP_LOTSAMISS {
            self.vmas[vma as usize].ra = ra;
            return;
        }
        // mmap read-around.
        ra.start = index.saturating_sub(ra.ra_pages / 2);
        ra.size = ra.ra_pages;
        ra.async_size = ra.ra_pages / 4;
        let start = ra.start;
        self.page_cache_ra_order(inode, &mut ra, start, 0, memcg);
        self.vmas[vma as usize].ra = ra;
    }

    /// `do_async_mmap_readahead` for a fault that found folio `pfn`.
    pub fn do_async_mmap_readahead(&mut self, vma: u32, index: u64, pfn: Pfn, memcg: u16) {
        let v = &self.vmas[vma as usize];
        let (inode, flags, mut ra) = (v.inode, v.flags, v.ra);
        if flags & VM_RAND_READ != 0 || ra.ra_pages == 0 {
            return;
        }
        ra.mmap_miss = ra.mmap_miss.saturating_sub(1);
        if self.folios.get(pfn).test(PG_READAHEAD) {
            let req = ra.ra_pages;
            self.page_cache_async_ra(inode, &mut ra, index, pfn, req, memcg);
        }
        self.vmas[vma as usize].ra = ra;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes_follow_readahead_c() {
        // 128 KiB readahead = 32 pages.
        assert_eq!(get_init_ra_size(1, 32), 4);
        assert_eq!(get_init_ra_size(2, 32), 4);
        assert_eq!(get_init_ra_size(8, 32), 16);
        assert_eq!(get_init_ra_size(9, 32), 32);
        assert_eq!(get_init_ra_size(32, 32), 32);
        assert_eq!(get_next_ra_size(1, 32), 4);
        assert_eq!(get_next_ra_size(4, 32), 8);
        assert_eq!(get_next_ra_size(16, 32), 32);
        assert_eq!(get_next_ra_size(32, 32), 32);
    }
}

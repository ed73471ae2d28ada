//! mm/page_io.c: swap I/O. zram (`rw_page`) completes in the caller; a
//! block device gets a bio per page, merged under the caller's plug with
//! the request before it when contiguous, and completes later: the
//! completion (`end_swap_bio_read` / `end_swap_bio_write`) is an event at
//! the device's completion time, run by `process_io_completions` once some
//! context's clock has passed it.
//!
//! A RAM disk (brd) is a bio-based driver: its bios skip the plug (only
//! request-based, blk-mq devices plug), `brd_submit_bio` copies each page
//! on the submitting CPU and the completion runs before `submit_bio`
//! returns: no device queue, no completion event.
//!
//! Simplifications: a completion runs when the next scheduling step,
//! fault or reclaim pass at or after its time looks (at most one
//! scheduler quantum late, never early for the task that waits on it);
//! `folio_rotate_reclaimable` moves the folio at once instead of through
//! the per-CPU lru_rotate batch (the batch is drained within a few
//! completions, and nothing in between looks at the inactive tail's order).

use super::folio::*;
use super::swapfile::{swp_offset, swp_type, SwpEntry};
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::vmstat::{Mc, Vm};
use std::cmp::Reverse;

/// Largest merged request: 128 KiB, the common NVMe maximum data transfer
/// size (virtio-blk and SATA disks allow more; a larger cap would only
/// merge longer runs of the same readahead window or reclaim batch).
const MAX_REQUEST_PAGES: u64 = 32;

/// BLK_MAX_REQUEST_COUNT: a plug holding this many requests is flushed
/// before it takes another.
const BLK_MAX_REQUEST_COUNT: usize = 32;
/// BLK_PLUG_FLUSH_SIZE: so is a plug whose last request reached 128 KiB.
const BLK_PLUG_FLUSH_PAGES: u64 = 32;

/// The block device a bio goes to: a swap device or a disk with files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BioDev {
    Swap(usize),
    Disk(usize),
}

/// A bio waiting in the plug: `pages` pages from block `offset` of `dev`,
/// for the folios in `pfns` (in block order).
pub struct Bio {
    dev: BioDev,
    offset: u64,
    write: bool,
    pages: u64,
    pfns: Vec<Pfn>,
}

/// A completion event: time, order of submission (ties), frame, and write.
pub type IoEvent = Reverse<(u64, u64, Pfn, bool)>;

impl Kernel {
    /// `blk_start_plug`.
    pub fn blk_start_plug(&mut self) {
        self.plug_depth += 1;
    }

    /// `blk_finish_plug`: submit what the outermost plug gathered.
    pub fn blk_finish_plug(&mut self) {
        self.plug_depth -= 1;
        if self.plug_depth == 0 {
            self.flush_plug();
        }
    }

    fn flush_plug(&mut self) {
        let now = self.now();
        for bio in std::mem::take(&mut self.plug) {
            let host = self.host_io.as_mut();
            let done = match host.and_then(|h| Some((h.file_of(bio.dev)?, h))) {
                // A guest's virtio-blk on a host file: the host completes
                // it (dev/virtio_host.rs).
                Some((f, host)) => host.complete(f, now, bio.write, bio.offset, bio.pages),
                None => {
                    let dev = match bio.dev {
                        BioDev::Swap(ty) => {
                            self.swap[ty].bdev.as_mut().expect("bio to a block device")
                        }
                        BioDev::Disk(d) => &mut self.disks[d].bdev,
                    };
                    dev.submit(now, bio.write, bio.offset, bio.pages)
                }
            };
            if let Some(log) = &mut self.blk_log {
                // A guest's request: its VMM's virtio-blk backend makes it.
                log.push(crate::vm::BlkIo {
                    dev: bio.dev,
                    offset: bio.offset,
                    pages: bio.pages,
                    write: bio.write,
                });
            }
            for pfn in bio.pfns {
                self.io_seq += 1;
                self.io_events
                    .push(Reverse((done, self.io_seq, pfn, bio.write)));
                self.io_wait.insert(pfn, done);
            }
        }
    }

    /// `submit_bio` of one page: merged into the last plugged bio when it
    /// continues it (`blk_attempt_plug_merge`), else queued; submitted at
    /// once without a plug.
    fn submit_swap_bio(&mut self, entry: SwpEntry, pfn: Pfn, write: bool) {
        let (ty, off) = (swp_type(entry), swp_offset(entry));
        self.submit_bio(BioDev::Swap(ty), off as u64, pfn, write);
    }

    /// `submit_bio` of a folio (its `nr_pages` pages) at block `off` of
    /// `dev` (see `submit_swap_bio`). Simplification: a folio larger than
    /// the largest request is one request here (the block layer would
    /// split it at 128 KiB; the device time is the same per page).
    pub fn submit_bio(&mut self, dev: BioDev, off: u64, pfn: Pfn, write: bool) {
        let nr = self.folios.get(pfn).nr_pages() as u64;
        // submit_bio counts pgpgin/pgpgout in KiB.
        self.vm
            .add(if write { Vm::Pgpgout } else { Vm::Pgpgin }, 4 * nr as i64);
        if let BioDev::Disk(d) = dev {
            if self.disks[d].bdev.is_ram() {
                self.brd_submit_bio(pfn, nr, write);
                return;
            }
        }
        if let Some(last) = self.plug.last_mut() {
            let end = last.offset + last.pages;
            if last.dev == dev
                && last.write == write
                && end == off
                && last.pages + nr <= MAX_REQUEST_PAGES
            {
                last.pfns.push(pfn);
                last.pages += nr;
                return;
            }
        }
        // blk_add_rq_to_plug: a full plug, or one whose last request is
        // large, is submitted before a new request joins it.
        if self.plug.len() >= BLK_MAX_REQUEST_COUNT
            || self
                .plug
                .last()
                .is_some_and(|b| b.pages >= BLK_PLUG_FLUSH_PAGES)
        {
            self.flush_plug();
        }
        self.plug.push(Bio {
            dev,
            offset: off,
            write,
            pages: nr,
            pfns: vec![pfn],
        });
        if self.plug_depth == 0 {
            self.flush_plug();
        }
    }

    /// O_DIRECT I/O of `pages` pages of the regular file `inode` from page
    /// `index` (`iomap_dio_rw`): one bio straight to the file's blocks on
    /// its disk, past the page cache, counted by submit_bio; the caller
    /// sleeps in iowait until the returned completion time. The data's
    /// contents are not followed: the file's own pages and versions stay
    /// as they were (its only user, a guest's I/O thread, keeps the
    /// contents in the guest's device).
    pub fn direct_io(&mut self, inode: u32, index: u64, pages: u64, write: bool) -> u64 {
        let f = &self.inodes[inode as usize];
        let disk = f.disk.expect("O_DIRECT of a file on a disk") as usize;
        let block = f.block + index;
        self.charge_cost(Fn::User, self.costs.syscall);
        self.vm.add(
            if write { Vm::Pgpgout } else { Vm::Pgpgin },
            4 * pages as i64,
        );
        self.psi_io_schedule();
        let now = self.now();
        self.disks[disk].bdev.submit(now, write, block, pages)
    }

    /// `brd_submit_bio` of a folio's `nr` pages: brd is bio-based
    /// (`__submit_bio` calls it directly, so no plug holds the bio), copies
    /// every page between its own memory and the folio on the submitting
    /// CPU (`copy_from_brd` for a read, `copy_to_brd` for a write:
    /// `COPY_PAGE_NS` each, charged to the current context) and ends the
    /// bio at once: the generic completion runs before `submit_bio`
    /// returns, so a read's folio is uptodate and unlocked, a write's off
    /// writeback. The contents were taken at submission (the folio's
    /// versions for a read, the inode's disk versions for a write), as for
    /// the other devices.
    fn brd_submit_bio(&mut self, pfn: Pfn, nr: u64, write: bool) {
        // Each page copy writes its destination: brd's own page, or the
        // folio's (membw.rs).
        let (copy, bytes) = match write {
            // copy_to_brd reads the folio's pages.
            true => (pfn..pfn + nr as Pfn)
                .map(|p| self.copy_page_cost(p))
                .fold((0, 0), |(ns, b), (n, r)| (ns + n, b + r + PAGE_BYTES)),
            // copy_from_brd writes them (brd's own pages are not frames,
            // and are read from DRAM).
            false => {
                self.l2_write(pfn, nr as u32);
                (self.costs.copy_page * nr, 2 * PAGE_BYTES * nr)
            }
        };
        self.charge_mem(Fn::BrdSubmitBio, copy, bytes);
        if write {
            self.end_swap_bio_write(pfn);
        } else {
            self.end_swap_bio_read(pfn);
        }
    }

    /// `__swap_writepage` to a block device: the device will hold the
    /// folio's contents as they are now; the folio is under writeback until
    /// the completion.
    /// A large folio (6.12's large swap-out) goes in one bio over its
    /// slots.
    pub fn swap_writepage_bdev(&mut self, pfn: Pfn, entry: SwpEntry) {
        let (ty, off) = (swp_type(entry), swp_offset(entry) as usize);
        let nr = self.folios.get(pfn).nr_pages() as usize;
        let versions = &self.folios.version[pfn as usize..pfn as usize + nr];
        let dev = self.swap[ty].bdev.as_mut().expect("block device");
        dev.version[off..off + nr].copy_from_slice(versions);
        self.folio_start_writeback(pfn);
        self.submit_swap_bio(entry, pfn, true);
    }

    /// `folio_start_writeback`: counted in nr_writeback and the memcg's
    /// file_writeback (NR_WRITEBACK, swap-backed folios included).
    pub fn folio_start_writeback(&mut self, pfn: Pfn) {
        let f = self.folios.get_mut(pfn);
        f.set(PG_WRITEBACK);
        let (memcg, nr) = (f.memcg, f.nr_pages() as i64);
        self.mod_node_page_state(Vm::NrWriteback, nr);
        self.memcg_stat(memcg, crate::vmstat::Mc::FileWriteback, nr);
    }

    /// `swap_readpage` of a locked, new swap-cache folio: zram reads at once
    /// and unlocks; a block device reads asynchronously and the folio stays
    /// locked (not uptodate) until the completion.
    pub fn swap_readpage(&mut self, pfn: Pfn, entry: SwpEntry) {
        let f = *self.folios.get(pfn);
        if self.swap_read_folio_zeromap(pfn, entry) {
            let f = self.folios.get_mut(pfn);
            f.set(PG_UPTODATE);
            f.clear(PG_LOCKED);
            return;
        }
        let psi = self.swap_read_memstall_enter(pfn);
        if self.frontswap_load(pfn, entry) {
            let f = self.folios.get_mut(pfn);
            f.set(PG_UPTODATE);
            f.clear(PG_LOCKED);
        } else {
            // Read from the slower device: more protection for zswap's LRU.
            self.zswap_folio_swapin(pfn);
            self.swap_readpage_dev(pfn, entry, f);
        }
        self.psi_memstall_leave(psi);
    }

    /// swap_readpage's `psi_memstall_enter`: reading a workingset folio
    /// back is thrashing, so its submission (all of a synchronous device's
    /// read) is a memory stall; 5.10 counts every swap read's. The token
    /// for `psi_memstall_leave`.
    pub(crate) fn swap_read_memstall_enter(&mut self, pfn: Pfn) -> bool {
        let workingset = self.folios.get(pfn).test(PG_WORKINGSET);
        let stall = workingset || !self.release.psi_workingset_reads;
        !stall || self.psi_memstall_enter()
    }

    fn swap_readpage_dev(&mut self, pfn: Pfn, entry: SwpEntry, f: super::folio::Folio) {
        let (ty, off) = (swp_type(entry), swp_offset(entry));
        self.vm.add(Vm::Pswpin, f.nr_pages() as i64);
        // count_memcg_folio_events: the folio's memcg, charged before the
        // read.
        self.memcg_stat(f.memcg, Mc::Pswpin, f.nr_pages() as i64);
        if f.order > 0 {
            self.vm.inc(crate::vmstat::mthp_item(
                f.order,
                crate::vmstat::MthpStat::Swpin,
            ));
        }
        match self.swap[ty].bdev.as_ref() {
            None => {
                // One rw_page call per folio around the reads.
                self.charge_cost(Fn::SwapReadpage, self.costs.swap_read);
                // zram reads a page at a time.
                for i in 0..f.nr_pages() {
                    let version = self.zram_read_page(ty, off + i);
                    self.l2_write(pfn + i, 1);
                    self.folios.version[(pfn + i) as usize] = version;
                }
                let f = self.folios.get_mut(pfn);
                f.set(PG_UPTODATE);
                f.clear(PG_LOCKED);
            }
            Some(dev) => {
                debug_assert_eq!(f.order, 0, "large swap-in is from zram only");
                // The slot cannot change while the cache holds it, so the
                // contents are those at submission.
                self.folios.version[pfn as usize] = dev.version[off as usize];
                // The device writes the frame by DMA.
                self.l2_dma(pfn, 1);
                self.submit_swap_bio(entry, pfn, false);
            }
        }
    }

    /// 6.12's `swap_read_folio_zeromap`: slots swapped out as zeros read
    /// back as zeros, with no I/O (`swpin_zero`). True: done. (A large
    /// folio is read only over slots all marked or all not: the large
    /// swap-in checks.)
    pub fn swap_read_folio_zeromap(&mut self, pfn: Pfn, entry: SwpEntry) -> bool {
        let (ty, off) = (swp_type(entry), swp_offset(entry) as usize);
        if !self.swap[ty].zeromap[off] {
            return false;
        }
        let f = *self.folios.get(pfn);
        let nr = f.nr_pages() as usize;
        debug_assert!(self.swap[ty].zeromap[off..off + nr].iter().all(|&z| z));
        self.folios.version[pfn as usize..pfn as usize + nr].fill(0);
        // folio_zero_range writes the folio.
        self.l2_write(pfn, nr as u32);
        self.vm.add(Vm::SwpinZero, nr as i64);
        self.memcg_stat(f.memcg, crate::vmstat::Mc::SwpinZero, nr as i64);
        true
    }

    /// When the read I/O of a locked folio completes (None: not in flight).
    pub fn folio_io_done_at(&self, pfn: Pfn) -> Option<u64> {
        if !self.folios.get(pfn).test(PG_LOCKED) {
            return None;
        }
        self.io_wait.get(&pfn).copied()
    }

    /// When a folio's read or writeback completes (`folio_lock` plus
    /// `folio_wait_writeback`), None if neither is in flight.
    pub fn folio_lock_and_writeback_done_at(&self, pfn: Pfn) -> Option<u64> {
        if !self.folios.get(pfn).test(PG_LOCKED | PG_WRITEBACK) {
            return None;
        }
        self.io_wait.get(&pfn).copied()
    }

    /// Runs every I/O completion due by `now`.
    pub fn process_io_completions(&mut self, now: u64) {
        while let Some(&Reverse((t, _, pfn, write))) = self.io_events.peek() {
            if t > now {
                break;
            }
            self.io_events.pop();
            if write {
                self.end_swap_bio_write(pfn);
            } else {
                self.end_swap_bio_read(pfn);
            }
        }
    }

    /// The earliest pending completion, if any.
    pub fn next_io_completion(&self) -> Option<u64> {
        self.io_events.peek().map(|r| r.0 .0)
    }

    fn end_swap_bio_read(&mut self, pfn: Pfn) {
        self.io_wait.remove(&pfn);
        let f = self.folios.get_mut(pfn);
        f.set(PG_UPTODATE);
        f.clear(PG_LOCKED);
    }

    /// `folio_end_writeback`: a folio reclaim wanted (PG_reclaim) goes to
    /// the tail of its inactive list, to be freed by the next scan.
    fn end_swap_bio_write(&mut self, pfn: Pfn) {
        self.io_wait.remove(&pfn);
        let nr = self.folios.get(pfn).nr_pages() as i64;
        self.mod_node_page_state(Vm::NrWriteback, -nr);
        self.mod_node_page_state(Vm::NrWritten, nr);
        let f = self.folios.get_mut(pfn);
        f.clear(PG_WRITEBACK);
        let memcg = f.memcg;
        self.memcg_stat(memcg, crate::vmstat::Mc::FileWriteback, -nr);
        let f = self.folios.get_mut(pfn);
        if f.test(PG_RECLAIM) {
            f.clear(PG_RECLAIM);
            self.folio_rotate_reclaimable(pfn);
        }
    }

    /// `folio_rotate_reclaimable` → `lru_move_tail_fn` (applied at once
    /// rather than through the per-CPU rotate batch): a folio on the LRU
    /// that is neither locked nor dirty goes to the tail of its inactive
    /// list, to be reclaimed next, whether it was active or not
    /// (`lru_move_tail_fn` clears PG_active: an active folio that reclaim
    /// wrote and someone referenced meanwhile goes back to the inactive
    /// tail all the same). A folio redirtied while under writeback stays
    /// where it is. Every preset's release does this: 5.10's
    /// `rotate_reclaimable_page` / `pagevec_move_tail_fn` (since 5.5's
    /// "move dirty pages out of the way until they're flushed"), 6.1's
    /// and 6.12's `folio_rotate_reclaimable` with `lru_move_tail_fn` /
    /// `lru_move_tail`, and 7.3's the same. Under the multi-gen LRU, the
    /// tail of the oldest generation (a folio leaving an active
    /// generation gets PG_active from lru_gen_del_folio, cleared here).
    fn folio_rotate_reclaimable(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        if f.test(PG_LOCKED) || f.test(PG_DIRTY) || f.test(PG_UNEVICTABLE) || !f.test(PG_LRU) {
            return;
        }
        self.lruvec_del_folio(pfn);
        self.folios.get_mut(pfn).clear(PG_ACTIVE);
        self.lruvec_add_folio_tail(pfn);
        self.vm.add(Vm::Pgrotated, f.nr_pages() as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::page_alloc::Gfp;

    fn kernel(preset: &str) -> Kernel {
        crate::kernel::test_kernel(1, preset)
    }

    /// An anonymous folio on the LRU (`extra`: PG_active, PG_dirty),
    /// under a write reclaim started (PG_writeback, PG_reclaim).
    fn written(k: &mut Kernel, extra: u32) -> Pfn {
        let pfn = k.alloc_page(Gfp::HighUserMovable).expect("a page");
        k.folios
            .get_mut(pfn)
            .set(PG_SWAPBACKED | PG_UPTODATE | PG_LRU | extra);
        k.lruvec_add_folio(pfn);
        k.folios.get_mut(pfn).set(PG_WRITEBACK | PG_RECLAIM);
        pfn
    }

    #[test]
    fn the_end_of_a_reclaim_write_rotates_active_folios_too_but_not_dirty_ones() {
        for preset in ["5.10", "6.1", "6.12", "7.3"] {
            let mut k = kernel(preset);
            let inactive = written(&mut k, 0);
            let active = written(&mut k, PG_ACTIVE);
            let redirtied = written(&mut k, PG_ACTIVE | PG_DIRTY);
            let tail = |k: &Kernel, lru| k.lruvecs[0].lists[lru as usize].tail;
            // Referenced while under writeback (activated), then written:
            // lru_move_tail_fn takes it to the inactive tail all the same.
            k.end_swap_bio_write(active);
            let f = *k.folios.get(active);
            assert!(!f.test(PG_ACTIVE | PG_RECLAIM | PG_WRITEBACK), "{preset}");
            assert_eq!(tail(&k, LRU_INACTIVE_ANON), active, "{preset}");
            k.end_swap_bio_write(inactive);
            assert_eq!(tail(&k, LRU_INACTIVE_ANON), inactive, "{preset}");
            assert_eq!(k.vm.get(Vm::Pgrotated), 2, "{preset}");
            // Written again meanwhile: folio_rotate_reclaimable leaves it.
            k.end_swap_bio_write(redirtied);
            let f = *k.folios.get(redirtied);
            assert!(f.test(PG_ACTIVE) && !f.test(PG_RECLAIM), "{preset}");
            assert_eq!(tail(&k, LRU_ACTIVE_ANON), redirtied, "{preset}");
            assert_eq!(k.vm.get(Vm::Pgrotated), 2, "{preset}");
        }
    }
}

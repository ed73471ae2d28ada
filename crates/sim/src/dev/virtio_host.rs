//! virtio-blk on a host file, as QEMU serves it (`aio=threads`): a guest
//! request is a preadv or pwritev of the file by one of QEMU's worker
//! threads, so it completes when the host lets that call return. With
//! QEMU's default `cache=writeback` it goes through the host's page cache:
//! a read of pages the host has cached is a copy, one of pages it has not
//! waits for the host disk, a write is a copy into the host's cache (the
//! host writes it back later, as it does any dirty page). With
//! `cache=none` the file is opened O_DIRECT: every request is the host
//! disk's, a read or a write of its pages, and the host caches nothing.
//!
//! The guest prices each request at its submission (mm/page_io.rs
//! `flush_plug`) from the host's state as the guest's slice began, which
//! the VMM lends it for the slice (vm.rs `lend_guest_io`): each backing
//! file's xarray, the host folios whose reads are still in flight, and the
//! queues of the host disks under the files. The VMM's I/O thread makes
//! the same requests on the host after the slice (player/guest.rs
//! `run_io`), which moves the host's counters, cache and clock.
//!
//! Simplifications, each changing only a guest request's time:
//! - The host's state is the slice's start's, plus what the guest's own
//!   requests of the slice bring into the host's cache (`arrivals`): a
//!   page another host task brings in or reclaim evicts within the slice
//!   is seen at the next slice. A guest op that makes many requests
//!   (swapoff's walk, a reclaim pass) runs in one slice.
//! - A miss reads the request's missing pages from the host disk, in runs,
//!   through a copy of the disk's queue; the host's readahead around them
//!   (which the I/O thread then makes, so later slices find those pages
//!   cached) is not in the price.
//! - A tmpfs page the host has swapped out is priced as cached: its swap-in
//!   is the I/O thread's, on the host.
//! - Requests are priced independently from their submission, as QEMU's
//!   thread pool serves them in parallel; a write is not throttled by the
//!   host's dirty limits.

use super::blockdev::{BlockDev, VIRTIO_NS};
use crate::mm::filemap::{SLOT_FOLIO, SLOT_SWAP};
use crate::mm::folio::Pfn;
use crate::mm::page_io::BioDev;
use std::collections::HashMap;

/// A host file behind a guest device, with its xarray lent for the slice.
#[derive(Debug, Default)]
pub struct HostFile {
    /// The host inode.
    pub inode: usize,
    /// Its xarray (`Inode::pages`), lent for the slice; empty otherwise.
    pub pages: Vec<u64>,
    /// The host disk it lives on (an index into `HostIo::disks`) and its
    /// first block there; None on tmpfs.
    pub disk: Option<(usize, u64)>,
    /// Opened O_DIRECT (`cache=none`).
    pub direct: bool,
    /// Pages the guest's requests of this slice brought into the host's
    /// cache, and when each is there.
    arrivals: HashMap<u64, u64>,
}

/// A host disk under backing files: its queue, lent for the slice.
#[derive(Debug)]
pub struct HostDisk {
    /// The host's `[[disk]]`.
    pub disk: usize,
    /// Its queue as the slice began.
    pub bdev: BlockDev,
    /// A copy of it the guest's misses queue on, made at the first miss.
    shadow: Option<BlockDev>,
}

/// The host's side of a guest's virtio-blk devices (module comment).
#[derive(Debug, Default)]
pub struct HostIo {
    /// For each guest swap device and disk, its file in `files`.
    pub swap: Vec<Option<usize>>,
    pub disk: Vec<Option<usize>>,
    pub files: Vec<HostFile>,
    pub disks: Vec<HostDisk>,
    /// Host folios whose read is in flight, and when each completes.
    pub reading: HashMap<Pfn, u64>,
    /// The host's costs of a call, a page-cache lookup and a page's copy.
    pub syscall: u64,
    pub lookup: u64,
    pub copy: u64,
}

impl HostIo {
    /// The host side of a guest whose swap devices and disks are backed by
    /// the host inodes `swap` and `disk` (None: not a virtio-blk device;
    /// true: opened O_DIRECT), on the host disks `disk_of` gives (None:
    /// tmpfs).
    pub fn new(
        swap: &[mmsim_spec::Backing],
        disk: &[mmsim_spec::Backing],
        disk_of: impl Fn(usize) -> Option<(usize, u64)>,
    ) -> Self {
        let mut io = HostIo::default();
        let file_of = |backing: mmsim_spec::Backing, io: &mut HostIo| {
            let (inode, direct) = backing?;
            let same = |f: &HostFile| f.inode == inode && f.direct == direct;
            if let Some(f) = io.files.iter().position(same) {
                return Some(f);
            }
            let disk = disk_of(inode).map(|(d, block)| {
                let i = match io.disks.iter().position(|h| h.disk == d) {
                    Some(i) => i,
                    None => {
                        io.disks.push(HostDisk {
                            disk: d,
                            bdev: BlockDev::of_kind(mmsim_spec::SwapKind::Nvme, 0),
                            shadow: None,
                        });
                        io.disks.len() - 1
                    }
                };
                (i, block)
            });
            io.files.push(HostFile {
                inode,
                disk,
                direct,
                ..Default::default()
            });
            Some(io.files.len() - 1)
        };
        io.swap = swap.iter().map(|&i| file_of(i, &mut io)).collect();
        io.disk = disk.iter().map(|&i| file_of(i, &mut io)).collect();
        io
    }

    /// The file behind a guest device, if it is virtio-blk on one.
    pub fn file_of(&self, dev: BioDev) -> Option<usize> {
        match dev {
            BioDev::Swap(t) => self.swap.get(t).copied().flatten(),
            BioDev::Disk(d) => self.disk.get(d).copied().flatten(),
        }
    }

    /// The slice is over: forget what it brought in and its disk copies.
    pub fn end_slice(&mut self) {
        for f in &mut self.files {
            f.arrivals.clear();
        }
        for d in &mut self.disks {
            d.shadow = None;
        }
        self.reading.clear();
    }

    /// When a request the guest submits at `now` to file `f`, `pages`
    /// pages from page `offset`, completes: the worker's call (its pages
    /// looked up and copied one after another, each once it is in the
    /// host's cache), then the request's virtualization round trip.
    pub fn complete(&mut self, f: usize, now: u64, write: bool, offset: u64, pages: u64) -> u64 {
        let mut t = now + self.syscall;
        if let (true, Some((d, block))) = (self.files[f].direct, self.files[f].disk) {
            // O_DIRECT: the request is the host disk's, in one bio.
            let disk = &mut self.disks[d];
            let shadow = disk.shadow.get_or_insert_with(|| disk.bdev.clone());
            return shadow.submit(t, write, block + offset, pages) + VIRTIO_NS;
        }
        let mut index = offset;
        while index < offset + pages {
            let ready = match write {
                // pwritev copies into the cache, whatever was there.
                true => t,
                false => self.ready_at(f, t, index, offset + pages),
            };
            t = t.max(ready) + self.lookup + self.copy;
            if write {
                self.files[f].arrivals.insert(index, t);
            }
            index += 1;
        }
        t + VIRTIO_NS
    }

    /// When page `index` of file `f` is in the host's cache for a read at
    /// `t`: now if cached (or once its read in flight ends); else the
    /// host disk reads it with the rest of the missing run up to `end`.
    fn ready_at(&mut self, f: usize, t: u64, index: u64, end: u64) -> u64 {
        if let Some(&at) = self.files[f].arrivals.get(&index) {
            return at;
        }
        let slot = |i: u64| self.files[f].pages.get(i as usize).copied().unwrap_or(0);
        match slot(index) & 3 {
            SLOT_FOLIO => {
                return self
                    .reading
                    .get(&((slot(index) >> 2) as Pfn))
                    .copied()
                    .unwrap_or(t)
            }
            SLOT_SWAP => return t,
            _ => {}
        }
        let Some((d, block)) = self.files[f].disk else {
            // A tmpfs page never written reads as zeros.
            return t;
        };
        let run = (index..end)
            .take_while(|&i| slot(i) & 3 != SLOT_FOLIO && slot(i) & 3 != SLOT_SWAP)
            .count() as u64;
        let disk = &mut self.disks[d];
        let shadow = disk.shadow.get_or_insert_with(|| disk.bdev.clone());
        let done = shadow.submit(t, false, block + index, run);
        let file = &mut self.files[f];
        for i in index..index + run {
            file.arrivals.insert(i, done);
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::filemap::SLOT_SHADOW;

    /// A file of 16 pages on one NVMe host disk at block 100; pages 0-3
    /// cached, page 4 cached with its read in flight until 9,000.
    fn io() -> HostIo {
        let mut io = HostIo::new(&[Some((7, false))], &[], |_| Some((0, 100)));
        io.disks[0].bdev = BlockDev::of_kind(mmsim_spec::SwapKind::Nvme, 0);
        let mut pages = vec![0u64; 16];
        for (i, p) in pages.iter_mut().enumerate().take(5) {
            *p = ((1000 + i as u64) << 2) | SLOT_FOLIO;
        }
        pages[5] = (9 << 2) | SLOT_SHADOW;
        io.files[0].pages = pages;
        io.reading.insert(1004, 9_000);
        (io.syscall, io.lookup, io.copy) = (100, 10, 600);
        io
    }

    #[test]
    fn a_cached_read_is_a_copy_and_the_round_trip() {
        let mut io = io();
        let f = io.file_of(BioDev::Swap(0)).unwrap();
        assert_eq!(
            io.complete(f, 1_000, false, 0, 2),
            1_000 + 100 + 2 * 610 + VIRTIO_NS
        );
    }

    #[test]
    fn a_page_being_read_waits_for_its_read() {
        let mut io = io();
        assert_eq!(io.complete(0, 1_000, false, 3, 2), 9_000 + 610 + VIRTIO_NS);
    }

    #[test]
    fn a_miss_waits_for_the_host_disk_and_then_is_cached() {
        let mut io = io();
        // Pages 5-7 miss (a shadow is a miss): one NVMe read of 3 pages
        // at block 105.
        let mut nvme = BlockDev::of_kind(mmsim_spec::SwapKind::Nvme, 0);
        let disk = nvme.submit(1_100, false, 105, 3);
        let done = io.complete(0, 1_000, false, 5, 3);
        assert_eq!(done, disk + 3 * 610 + VIRTIO_NS);
        // The same pages again in the slice: in the host's cache.
        assert_eq!(
            io.complete(0, done, false, 5, 1),
            done + 100 + 610 + VIRTIO_NS
        );
        // The host disk's own queue is untouched.
        assert!(io.disks[0].shadow.is_some());
        io.end_slice();
        assert!(io.disks[0].shadow.is_none());
        assert_eq!(
            io.complete(0, done, false, 5, 1),
            nvme.submit(done + 100, false, 105, 1) + 610 + VIRTIO_NS
        );
    }

    #[test]
    fn a_write_is_a_copy_and_a_later_read_finds_it() {
        let mut io = io();
        let w = io.complete(0, 0, true, 10, 2);
        assert_eq!(w, 100 + 2 * 610 + VIRTIO_NS);
        assert_eq!(
            io.complete(0, w, false, 10, 2),
            w + 100 + 2 * 610 + VIRTIO_NS
        );
    }

    #[test]
    fn a_direct_request_is_the_host_disks_whatever_it_caches() {
        let mut io = io();
        io.files[0].direct = true;
        // Pages 0-3 are cached, but O_DIRECT reads the disk: one bio.
        let mut nvme = BlockDev::of_kind(mmsim_spec::SwapKind::Nvme, 0);
        let disk = nvme.submit(1_100, false, 100, 4);
        assert_eq!(io.complete(0, 1_000, false, 0, 4), disk + VIRTIO_NS);
        // A write is the disk's too, behind the read on its queue.
        let w = nvme.submit(1_100, true, 110, 2);
        assert_eq!(io.complete(0, 1_000, true, 10, 2), w + VIRTIO_NS);
    }

    #[test]
    fn devices_on_one_file_share_it() {
        let io = HostIo::new(
            &[Some((3, false)), None],
            &[Some((3, false)), Some((4, false)), Some((4, true))],
            |i| (i == 4).then_some((2, 0)),
        );
        // One file for each inode and mode: inode 4 opened both ways.
        assert_eq!(io.files.len(), 3);
        assert_eq!(io.file_of(BioDev::Swap(0)), io.file_of(BioDev::Disk(0)));
        assert!(io.files[2].direct && !io.files[1].direct);
        assert_eq!(io.file_of(BioDev::Swap(1)), None);
        assert_eq!(io.files[0].disk, None);
        assert_eq!(io.files[1].disk, Some((0, 0)));
        assert_eq!(io.disks[0].disk, 2);
    }
}

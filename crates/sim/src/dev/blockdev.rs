//! Block devices that swap writes to through bios: NVMe, virtio-blk and a
//! rotating disk. Each request waits for a free slot of the device queue,
//! pays the device's access latency (a seek on a rotating disk when it does
//! not continue where the last one ended), then transfers its pages at the
//! device's bandwidth, which requests share one after another. Completion is
//! asynchronous: the caller gets the completion time and queues the
//! completion event (mm/page_io.rs).
//!
//! The constants are datasheet figures, not fitted to any result:
//! - NVMe: a Samsung 970 EVO Plus class TLC drive. Datasheet 4 KiB random
//!   QD1 read 19,000 IOPS (53 µs per read) and write 60,000 IOPS (17 µs);
//!   sequential 3,500 MB/s read and 3,300 MB/s write; the Linux driver's
//!   default I/O queue depth is 1023.
//! - virtio-blk: the same kind of SSD behind QEMU. Each request adds a guest
//!   exit, the host's io_submit/io_uring and an interrupt injection on
//!   completion: ~25 µs, the usual order of virtio-blk's added latency on
//!   KVM without polling. QEMU's default virtqueue size is 256.
//! - HDD: a 7,200 rpm disk: 8.5 ms average seek, 4.17 ms average rotational
//!   delay (half a turn), 200 MB/s sustained transfer. Simplification: one
//!   request at a time (no NCQ reordering); a request that starts where the
//!   previous one ended pays no seek and no rotation.
//! - RAM disk (brd): not a queue at all. brd is a bio-based driver whose
//!   `brd_submit_bio` copies every page on the submitting CPU and ends the
//!   bio before returning, so mm/page_io.rs never submits to this model
//!   for it (`BlockDev::is_ram`); see `brd_submit_bio` there.

use mmsim_spec::SwapKind;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What virtualization adds to a virtio-blk request on KVM without
/// polling: the guest's exit at the kick, the host's handoff to QEMU's
/// worker, the completion's interrupt injection (an estimate of the usual
/// order, the device's overhead above the SSD's figures).
pub const VIRTIO_NS: u64 = 25_000;

#[derive(Clone, Debug)]
pub struct BlockDev {
    read_latency_ns: u64,
    write_latency_ns: u64,
    /// Bytes per µs (= MB/s).
    read_mb_s: u64,
    write_mb_s: u64,
    queue_depth: usize,
    /// Seek and rotation apply (rotating disk).
    seeks: bool,
    /// Completion times of requests in the device queue.
    inflight: BinaryHeap<Reverse<u64>>,
    /// When the transfer path is free again.
    xfer_free_at: u64,
    /// Sector (in pages) after the last request, for seek detection.
    head: u64,
    /// Content token of each slot's data as last written.
    pub version: Vec<u32>,
    pub requests: u64,
    /// A RAM disk (brd): I/O completes in the submitter, never here.
    ram: bool,
}

impl BlockDev {
    pub fn new(dev: &mmsim_spec::SwapDevice, slots: u32) -> Self {
        let mut d = Self::of_kind(dev.kind, slots);
        if let Some(l) = dev.read_latency {
            d.read_latency_ns = l;
        }
        if let Some(l) = dev.write_latency {
            d.write_latency_ns = l;
        }
        d
    }

    /// A device of the model's own parameters, with `slots` content slots
    /// (0 for a disk holding files, whose contents live with the inodes).
    pub fn of_kind(kind: SwapKind, slots: u32) -> Self {
        let (rl, wl, rb, wb, qd, seeks) = match kind {
            SwapKind::Nvme => (53_000, 17_000, 3500, 3300, 1023, false),
            SwapKind::Virtio => (
                53_000 + VIRTIO_NS,
                17_000 + VIRTIO_NS,
                3500,
                3300,
                256,
                false,
            ),
            SwapKind::Hdd => (12_670_000, 12_670_000, 200, 200, 1, true),
            // brd, described in the model's terms for completeness only:
            // no access latency, no queue limit, a page per COPY_PAGE_NS
            // (4096 B / 670 ns = 6113 MB/s). Never used for I/O: page_io
            // completes a RAM disk's bios in the submitting context.
            SwapKind::Ram => {
                let mb_s = 4096 * 1000 / crate::cost_model::COPY_PAGE_NS;
                (0, 0, mb_s, mb_s, usize::MAX, false)
            }
            SwapKind::Zram => unreachable!("zram is not a bio device"),
        };
        BlockDev {
            read_latency_ns: rl,
            write_latency_ns: wl,
            read_mb_s: rb,
            write_mb_s: wb,
            queue_depth: qd,
            seeks,
            inflight: BinaryHeap::new(),
            xfer_free_at: 0,
            head: u64::MAX,
            version: vec![0; slots as usize],
            requests: 0,
            ram: kind == SwapKind::Ram,
        }
    }

    /// A RAM disk (brd): bios complete synchronously in the submitter
    /// (mm/page_io.rs `brd_submit_bio`), never through `submit`.
    pub fn is_ram(&self) -> bool {
        self.ram
    }

    /// Submits a request of `pages` pages at slot `offset` at time `now`;
    /// returns its completion time.
    pub fn submit(&mut self, now: u64, write: bool, offset: u64, pages: u64) -> u64 {
        debug_assert!(!self.ram, "a RAM disk's bios complete in the submitter");
        self.requests += 1;
        while self.inflight.peek().is_some_and(|r| r.0 <= now) {
            self.inflight.pop();
        }
        let mut start = now;
        if self.inflight.len() >= self.queue_depth {
            start = start.max(self.inflight.pop().expect("full queue").0);
        }
        let latency = if self.seeks && offset == self.head {
            0
        } else if write {
            self.write_latency_ns
        } else {
            self.read_latency_ns
        };
        let mb_s = if write {
            self.write_mb_s
        } else {
            self.read_mb_s
        };
        // bytes / (MB/s) = µs; ×1000 for ns.
        let xfer = pages * 4096 * 1000 / mb_s;
        let data_start = (start + latency).max(self.xfer_free_at);
        let done = data_start + xfer;
        self.xfer_free_at = done;
        self.head = offset + pages;
        self.inflight.push(Reverse(done));
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(kind: SwapKind, read_latency: Option<u64>) -> mmsim_spec::SwapDevice {
        mmsim_spec::SwapDevice {
            compressor: None,
            mem_limit: None,
            kind,
            size: 1 << 30,
            priority: None,
            rotational: None,
            read_latency,
            write_latency: None,
            size_line: 0,
            host_file: None,
            host_cache: Default::default(),
        }
    }

    #[test]
    fn latency_override() {
        let mut d = BlockDev::new(&dev(SwapKind::Virtio, Some(10_000)), 16);
        assert_eq!(d.submit(0, false, 5, 1), 10_000 + 1170);
    }

    #[test]
    fn nvme_single_read_is_latency_plus_transfer() {
        let mut d = BlockDev::new(&dev(SwapKind::Nvme, None), 16);
        // 53 µs + 4096 B at 3500 MB/s (1170 ns).
        assert_eq!(d.submit(1000, false, 5, 1), 1000 + 53_000 + 1170);
    }

    #[test]
    fn parallel_requests_share_bandwidth() {
        let mut d = BlockDev::new(&dev(SwapKind::Nvme, None), 1024);
        let a = d.submit(0, false, 0, 32);
        let b = d.submit(0, false, 100, 32);
        // Both wait the latency together; the second transfer follows the first.
        assert_eq!(b - a, 32 * 4096 * 1000 / 3500);
    }

    #[test]
    fn hdd_sequential_requests_skip_the_seek() {
        let mut d = BlockDev::new(&dev(SwapKind::Hdd, None), 1024);
        let a = d.submit(0, true, 10, 8);
        let b = d.submit(0, true, 18, 8);
        let c = d.submit(0, true, 500, 8);
        let xfer = 8 * 4096 * 1000 / 200;
        assert_eq!(a, 12_670_000 + xfer);
        // Queue depth 1: b starts when a is done, with no seek.
        assert_eq!(b, a + xfer);
        assert_eq!(c, b + 12_670_000 + xfer);
    }
}

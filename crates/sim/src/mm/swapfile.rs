//! Swap devices: swap_map counts, cluster slot allocation, the per-CPU
//! slot caches of swap_slots.c, and freeing.

use super::folio::Pfn;
use crate::cacheline::Line;
use crate::dev::blockdev::BlockDev;
use crate::dev::zram::Zram;
use crate::kernel::Kernel;
use mmsim_spec::{SwapDevice, SwapKind};
use std::collections::VecDeque;

/// A swap entry: device type in the top 5 bits, slot offset below.
pub type SwpEntry = u32;
const TYPE_SHIFT: u32 = 27;
const OFFSET_MASK: u32 = (1 << TYPE_SHIFT) - 1;

pub fn swp_entry(ty: usize, offset: u32) -> SwpEntry {
    (ty as u32) << TYPE_SHIFT | offset
}
pub fn swp_type(e: SwpEntry) -> usize {
    (e >> TYPE_SHIFT) as usize
}
pub fn swp_offset(e: SwpEntry) -> u32 {
    e & OFFSET_MASK
}
pub const MAX_SWAP_OFFSET: u64 = OFFSET_MASK as u64;

/// swap_map: count of PTE/shmem references in the low 6 bits.
pub const SWAP_COUNT_MASK: u8 = 0x3f;
/// A folio for the slot is (being) in the swap cache; also a lock.
pub const SWAP_HAS_CACHE: u8 = 0x40;
/// Highest plain count (above it the kernel chains continuation pages).
pub const SWAP_MAP_MAX: u8 = 0x3e;

/// SWAPFILE_CLUSTER with CONFIG_THP_SWAP (Debian).
pub const SWAPFILE_CLUSTER: u32 = 512;
/// SWAP_SLOTS_CACHE_SIZE (= SWAP_BATCH).
pub const SWAP_SLOTS_CACHE_SIZE: usize = 64;

// si->flags
pub const SWP_WRITEOK: u32 = 1 << 1;
pub const SWP_SOLIDSTATE: u32 = 1 << 4;
pub const SWP_SYNCHRONOUS_IO: u32 = 1 << 12;

pub struct SwapInfo {
    pub kind: SwapKind,
    pub prio: i32,
    pub flags: u32,
    /// Slots including the header slot 0.
    pub max: u32,
    pub pages: u32,
    pub inuse_pages: u32,
    pub swap_map: Vec<u8>,
    /// The swap cache's xarray for this device: 0 empty, a folio, or a
    /// workingset shadow (see swap_state.rs for the encoding).
    pub cache: Vec<u64>,
    /// swap_cgroup: the memcg each slot's swap charge belongs to.
    pub cgroup: Vec<u16>,
    /// Per-cluster count of slots in use, and the free clusters in order.
    cluster_used: Vec<u16>,
    free_clusters: VecDeque<u32>,
    /// Per-CPU cluster being handed out: (next offset, end).
    percpu_cluster: Vec<Option<(u32, u32)>>,
    /// Linear-scan hint once no free cluster remains; on a rotational
    /// device, the next slot to hand out.
    cluster_next: u32,
    /// Rotational devices: slots left before the next search for a free
    /// run of SWAPFILE_CLUSTER slots (`cluster_nr`).
    cluster_nr: u32,
    /// Per CPU, per order above 0: the cluster handing out aligned runs
    /// of that order (6.12's `percpu_cluster->next[order]`): (next, end).
    order_cluster: Vec<[Option<(u32, u32)>; 10]>,
    /// When the device was last requeued among equal priorities.
    pub requeued: u64,
    pub zram: Zram,
    /// `si->zeromap` (6.12): slots whose folio was all zeros when swapped
    /// out; nothing was written for them, a read gives zeros.
    pub zeromap: Vec<bool>,
    /// The block device, for every kind but zram.
    pub bdev: Option<BlockDev>,
}

/// SWAP_CLUSTER_COLS: max(clusters per cache line of cluster_info, 8,
/// and clusters per swap-cache address space, 16384 / 512 = 32).
const SWAP_CLUSTER_COLS: u32 = 32;

/// The free-cluster list `setup_swap_map_and_extents` builds: column by
/// column (cluster k, k + 32, k + 64, …, then k + 1, …) to spread
/// neighbouring allocations over cache lines and swap address spaces,
/// starting at column 0 (`cluster_next` is 0 at swapon), skipping the
/// clusters that are not free (cluster 0, a partial last one).
fn initial_free_clusters(nclusters: u32, end: u32) -> VecDeque<u32> {
    let rows = nclusters.div_ceil(SWAP_CLUSTER_COLS);
    (0..SWAP_CLUSTER_COLS)
        .flat_map(|col| (0..rows).map(move |row| row * SWAP_CLUSTER_COLS + col))
        .filter(|&c| c >= 1 && c < end)
        .collect()
}

/// Per-CPU `swap_slots_cache`.
#[derive(Default, Clone)]
pub struct SwapSlotsCache {
    pub slots: Vec<SwpEntry>,
    pub slots_ret: Vec<SwpEntry>,
}

impl SwapInfo {
    pub fn new(dev: &SwapDevice, prio: i32, cpus: usize) -> Self {
        let kind = dev.kind;
        let max = (dev.size / 4096).min(MAX_SWAP_OFFSET) as u32;
        let nclusters = max.div_ceil(SWAPFILE_CLUSTER);
        let mut cluster_used = vec![0u16; nclusters as usize];
        let mut swap_map = vec![0u8; max as usize];
        // Slot 0 holds the swap header and is never allocated.
        swap_map[0] = 0x3f;
        cluster_used[0] = 1;
        // setup_swap_map_and_extents: the header slot, and the slots past
        // the end of a partial last cluster, count as used, so neither
        // cluster is ever free: their slots go only to the linear scan.
        let partial_last = !max.is_multiple_of(SWAPFILE_CLUSTER);
        let first_free_after_end = nclusters - partial_last as u32;
        if partial_last {
            cluster_used[nclusters as usize - 1] += (nclusters * SWAPFILE_CLUSTER - max) as u16;
        }
        let mut flags = SWP_WRITEOK;
        if !dev.rotational() {
            flags |= SWP_SOLIDSTATE;
        }
        if kind == SwapKind::Zram {
            // zram has a rw_page method; no other modelled driver has.
            flags |= SWP_SYNCHRONOUS_IO;
        }
        SwapInfo {
            kind,
            prio,
            flags,
            max,
            pages: max - 1,
            inuse_pages: 0,
            swap_map,
            cache: vec![0; max as usize],
            cgroup: vec![0; max as usize],
            cluster_used,
            free_clusters: initial_free_clusters(nclusters, first_free_after_end),
            percpu_cluster: vec![None; cpus],
            order_cluster: vec![[None; 10]; cpus],
            cluster_next: 1,
            cluster_nr: SWAPFILE_CLUSTER,
            requeued: 0,
            zram: Zram::new(if kind == SwapKind::Zram { max } else { 0 }, dev.mem_limit),
            zeromap: vec![false; max as usize],
            bdev: (kind != SwapKind::Zram).then(|| BlockDev::new(dev, max)),
        }
    }

    pub fn swap_count(&self, offset: u32) -> u8 {
        self.swap_map[offset as usize] & SWAP_COUNT_MASK
    }

    /// `scan_swap_map_slots` for a solid-state device: slots in increasing
    /// order inside the CPU's current cluster, a new free cluster when it
    /// runs out, a linear scan when no free cluster is left.
    fn scan_swap_map_slots(&mut self, cpu: usize, want: usize, out: &mut Vec<u32>) {
        while out.len() < want && self.inuse_pages < self.pages {
            let next = if self.flags & SWP_SOLIDSTATE != 0 {
                self.next_in_cluster(cpu)
            } else {
                self.next_rotational()
            };
            let offset = match next {
                Some(o) => o,
                None => match self.linear_scan() {
                    Some(o) => o,
                    None => break,
                },
            };
            self.swap_map[offset as usize] = SWAP_HAS_CACHE;
            self.inuse_pages += 1;
            let c = (offset / SWAPFILE_CLUSTER) as usize;
            if self.cluster_used[c] == 0 {
                self.free_clusters.retain(|&x| x as usize != c);
            }
            self.cluster_used[c] += 1;
            out.push(offset);
        }
    }

    fn next_in_cluster(&mut self, cpu: usize) -> Option<u32> {
        loop {
            if let Some((next, end)) = self.percpu_cluster[cpu] {
                let mut o = next;
                while o < end && self.swap_map[o as usize] != 0 {
                    o += 1;
                }
                if o < end {
                    self.percpu_cluster[cpu] = Some((o + 1, end));
                    return Some(o);
                }
                self.percpu_cluster[cpu] = None;
            }
            let c = self.free_clusters.pop_front()?;
            let start = c * SWAPFILE_CLUSTER;
            self.percpu_cluster[cpu] = Some((start, (start + SWAPFILE_CLUSTER).min(self.max)));
        }
    }

    /// A rotational device's allocator: sequential from `cluster_next`;
    /// every SWAPFILE_CLUSTER slots, look for a wholly free run of that
    /// many slots from the start and continue there (keeps writes and later
    /// readahead sequential on the disk).
    fn next_rotational(&mut self) -> Option<u32> {
        if self.cluster_nr == 0 {
            self.cluster_nr = SWAPFILE_CLUSTER;
            let mut run = 0;
            for o in 1..self.max {
                if self.swap_map[o as usize] == 0 {
                    run += 1;
                    if run == SWAPFILE_CLUSTER {
                        self.cluster_next = o + 1 - SWAPFILE_CLUSTER;
                        break;
                    }
                } else {
                    run = 0;
                }
            }
        }
        self.cluster_nr -= 1;
        self.linear_scan()
    }

    fn linear_scan(&mut self) -> Option<u32> {
        for i in 0..self.max {
            let o = (self.cluster_next + i) % self.max;
            if o != 0 && self.swap_map[o as usize] == 0 {
                self.cluster_next = o + 1;
                return Some(o);
            }
        }
        None
    }

    /// A run of 2^`order` free slots aligned to its size, for a large
    /// folio (6.12's per-order cluster allocation, not in 6.1): the next
    /// aligned run in this CPU's cluster for the order, else a free
    /// cluster taken for it. Simplification: a cluster left behind is not
    /// revisited (6.12 keeps `nonfull[order]` lists and later scans
    /// fragmented clusters), so under fragmentation a large allocation
    /// fails (and the folio is split) somewhat sooner; seed 001's
    /// experiment swaps out to an empty device and never meets it.
    fn alloc_large(&mut self, cpu: usize, order: u8) -> Option<u32> {
        let nr = 1u32 << order;
        loop {
            if let Some((next, end)) = self.order_cluster[cpu][order as usize] {
                let mut o = next;
                while o + nr <= end
                    && self.swap_map[o as usize..(o + nr) as usize]
                        .iter()
                        .any(|&m| m != 0)
                {
                    o += nr;
                }
                if o + nr <= end {
                    self.order_cluster[cpu][order as usize] = Some((o + nr, end));
                    for off in o..o + nr {
                        self.swap_map[off as usize] = SWAP_HAS_CACHE;
                    }
                    self.inuse_pages += nr;
                    // Its cluster left the free list when it was taken, and
                    // went back if every slot of it was freed since (a run
                    // refused by its swap charge, a folio swapped in and
                    // freed): off it again, as the order-0 scan does.
                    let c = (o / SWAPFILE_CLUSTER) as usize;
                    if self.cluster_used[c] == 0 {
                        self.free_clusters.retain(|&x| x as usize != c);
                    }
                    self.cluster_used[c] += nr as u16;
                    return Some(o);
                }
                self.order_cluster[cpu][order as usize] = None;
            }
            // A free cluster with room for the order (cluster 0 holds the
            // header slot, a short last cluster may hold no aligned run):
            // taken off the free list for this order.
            let fits = |si: &Self, c: u32| {
                let (start, end) = (
                    c * SWAPFILE_CLUSTER,
                    ((c + 1) * SWAPFILE_CLUSTER).min(si.max),
                );
                (start..end).step_by(nr as usize).any(|o| {
                    o + nr <= end
                        && si.swap_map[o as usize..(o + nr) as usize]
                            .iter()
                            .all(|&m| m == 0)
                })
            };
            let at = self.free_clusters.iter().position(|&c| fits(self, c))?;
            let c = self.free_clusters.remove(at).expect("found");
            let start = c * SWAPFILE_CLUSTER;
            self.order_cluster[cpu][order as usize] =
                Some((start, (start + SWAPFILE_CLUSTER).min(self.max)));
        }
    }

    /// The slot's last user is gone: back to the allocator.
    fn release_slot(&mut self, offset: u32) {
        self.swap_map[offset as usize] = 0;
        self.inuse_pages -= 1;
        let c = (offset / SWAPFILE_CLUSTER) as usize;
        self.cluster_used[c] -= 1;
        if self.cluster_used[c] == 0 {
            self.free_clusters.push_back(c as u32);
        }
    }
}

/// swapfile.c's and swap_slots.c's globals, which the kernel keeps static
/// to those files: only this file changes them; the rest of mm reads what
/// swap.h exports of them (`get_nr_swap_pages`, `total_swap_pages`,
/// `nr_rotate_swap`) through the accessors below.
#[derive(Debug)]
pub struct Globals {
    /// Free swap slots; negative while swapoff has taken a device's pages
    /// away before freeing them, as in the kernel.
    nr_swap_pages: i64,
    total_swap_pages: i64,
    /// `swap_slot_cache_active`: the per-CPU slot caches are in use.
    slot_cache_active: bool,
    /// `swap_slot_cache_enabled`: off while swapoff runs.
    slot_cache_enabled: bool,
    /// Orders requeues of equal-priority swap devices (`plist_requeue`).
    requeue_seq: u64,
    /// `least_priority`: the last default (negative) swapon priority.
    least_priority: i32,
    /// `init_mm.mmlist`: every mm that ever held a swap entry, most recent
    /// first (the order try_to_unuse visits them).
    mmlist: Vec<u32>,
    /// `nr_rotate_swap`: rotational swap devices on.
    nr_rotate_swap: u32,
}

impl Default for Globals {
    fn default() -> Self {
        Globals {
            nr_swap_pages: 0,
            total_swap_pages: 0,
            slot_cache_active: false,
            slot_cache_enabled: true,
            requeue_seq: 0,
            least_priority: -1,
            mmlist: Vec::new(),
            nr_rotate_swap: 0,
        }
    }
}

impl Globals {
    /// `vm_swap_full`: less than half of all swap space is free.
    #[inline]
    pub fn vm_swap_full(&self) -> bool {
        self.nr_swap_pages * 2 < self.total_swap_pages
    }

    /// `get_nr_swap_pages`: free swap slots (negative during swapoff).
    #[inline]
    pub fn nr_swap_pages(&self) -> i64 {
        self.nr_swap_pages
    }

    /// `total_swap_pages`: the slots of every device on.
    #[inline]
    pub fn total_swap_pages(&self) -> i64 {
        self.total_swap_pages
    }

    /// `nr_rotate_swap`: rotational devices on (VMA readahead is off
    /// while any is).
    #[inline]
    pub fn nr_rotate_swap(&self) -> u32 {
        self.nr_rotate_swap
    }
}

impl Kernel {
    /// swapon of a spec device at boot, before any task runs: as
    /// `swapon`, without the requeue (the devices come in spec order) and
    /// with the slot caches enabled at the first (`enable_swap_slots_cache`).
    pub(crate) fn swapon_at_boot(&mut self, dev: &mmsim_spec::SwapDevice) {
        let prio = self.swapon_priority(dev.priority);
        let si = SwapInfo::new(dev, prio, self.cpus.len());
        self.swapfile.nr_swap_pages += si.pages as i64;
        self.swapfile.total_swap_pages += si.pages as i64;
        if dev.rotational() {
            self.swapfile.nr_rotate_swap += 1;
        }
        self.swap.push(si);
        self.swapfile.slot_cache_active = true;
    }

    /// `get_swap_pages`: up to `n` slots from the highest-priority device
    /// that has room; slots come back marked SWAP_HAS_CACHE.
    /// Devices of equal priority take turns: each one tried is requeued
    /// behind its equal-priority siblings (`plist_requeue`).
    fn get_swap_pages(&mut self, n: usize, out: &mut Vec<SwpEntry>) {
        let cpu = self.cur_cpu;
        for ty in self.swap_avail() {
            self.swapfile.requeue_seq += 1;
            // si->lock around the scan: its work is inside swap_slot's
            // bundle, so the hold lasts only for the moves of the
            // clusters' lines taken under it (spinlock.rs).
            let lock = self.spin_lock(crate::cacheline::Line::SwapInfo(ty as u8));
            let si = &mut self.swap[ty];
            si.requeued = self.swapfile.requeue_seq;
            let mut offs = Vec::with_capacity(n);
            si.scan_swap_map_slots(cpu, n, &mut offs);
            // scan_swap_map_slots' lock_cluster per slot, nested: one
            // move of each cluster's line per batch (`lock_cluster`).
            let mut seen = Vec::new();
            for &o in &offs {
                self.lock_cluster(swp_entry(ty, o), &mut seen);
            }
            self.spin_unlock(lock);
            self.swapfile.nr_swap_pages -= offs.len() as i64;
            out.extend(offs.into_iter().map(|o| swp_entry(ty, o)));
            if !out.is_empty() {
                return;
            }
        }
    }

    /// `swap_avail_heads`: the devices swap can go to, by priority, then
    /// by when last requeued.
    fn swap_avail(&self) -> Vec<usize> {
        let mut avail: Vec<usize> = (0..self.swap.len())
            .filter(|&i| self.swap[i].flags & SWP_WRITEOK != 0)
            .collect();
        avail.sort_by_key(|&i| (std::cmp::Reverse(self.swap[i].prio), self.swap[i].requeued));
        avail
    }

    /// `check_cache_active`: the slot caches run only while free swap is
    /// plentiful (more than 5×64 slots per CPU on, below 2×64 off).
    fn check_cache_active(&mut self) -> bool {
        if !self.swapfile.slot_cache_enabled {
            return false;
        }
        let cpus = self.cpus.len() as i64;
        let size = SWAP_SLOTS_CACHE_SIZE as i64;
        if !self.swapfile.slot_cache_active {
            if self.swapfile.nr_swap_pages > cpus * 5 * size {
                self.swapfile.slot_cache_active = true;
            }
        } else if self.swapfile.nr_swap_pages < cpus * 2 * size {
            self.swapfile.slot_cache_active = false;
            for cpu in 0..self.cpus.len() {
                self.drain_slots_cache(cpu);
            }
        }
        self.swapfile.slot_cache_active
    }

    /// Returns every slot a CPU's caches hold to the devices.
    pub fn drain_slots_cache(&mut self, cpu: usize) {
        let slots = std::mem::take(&mut self.cpus[cpu].slots.slots);
        let ret = std::mem::take(&mut self.cpus[cpu].slots.slots_ret);
        self.swapcache_free_entries(&slots);
        self.swapcache_free_entries(&ret);
    }

    /// `folio_alloc_swap` for an order-0 folio: a slot from the per-CPU
    /// cache (refilled 64 at a time) or straight from the device, then the
    /// memcg swap charge. None = no swap space or memory.swap.max.
    pub fn folio_alloc_swap(&mut self, memcg: u16) -> Option<SwpEntry> {
        let entry = self.get_swap_page();
        self.mem_cgroup_try_charge_swap(memcg, entry, 1)
    }

    /// A slot for an order-0 folio: from the per-CPU cache (refilled 64
    /// at a time) or straight from the device.
    fn get_swap_page(&mut self) -> Option<SwpEntry> {
        let cpu = self.cur_cpu;
        if self.check_cache_active() {
            if self.cpus[cpu].slots.slots.is_empty() {
                let mut v = Vec::with_capacity(SWAP_SLOTS_CACHE_SIZE);
                self.get_swap_pages(SWAP_SLOTS_CACHE_SIZE, &mut v);
                v.reverse();
                self.cpus[cpu].slots.slots = v;
            }
            self.cpus[cpu].slots.slots.pop()
        } else {
            let mut v = Vec::with_capacity(1);
            self.get_swap_pages(1, &mut v);
            v.pop()
        }
    }

    /// `folio_alloc_swap` for a large folio of `order` (6.12, not 6.1): an
    /// aligned run of slots on the highest-priority device, with the
    /// memcg swap charge. 6.12 allocates large entries only from a
    /// solid-state device (zram, an SSD), whose clusters it keeps per CPU;
    /// 7.3 keeps clusters on every device, a rotational one's in one
    /// `global_cluster` shared by all CPUs. None: the caller splits the
    /// folio.
    pub fn folio_alloc_swap_order(&mut self, memcg: u16, order: u8) -> Option<SwpEntry> {
        let entry = self.get_swap_pages_order(order);
        self.mem_cgroup_try_charge_swap(memcg, entry, 1 << order)
    }

    fn get_swap_pages_order(&mut self, order: u8) -> Option<SwpEntry> {
        let nr = 1u32 << order;
        let ty = *self.swap_avail().first()?;
        let solid = self.swap[ty].flags & SWP_SOLIDSTATE != 0;
        if (!solid && !self.release.swap_clusters_rotational)
            || self.swap[ty].pages - self.swap[ty].inuse_pages < nr
        {
            return None;
        }
        // Simplification: 7.3 allocates a rotational device's order-0
        // slots from clusters too; mmsim keeps 6.12's sequential scan for
        // them, which may take free slots of a cluster kept for an order
        // (the large allocation then moves on to another cluster).
        let cpu = if solid { self.cur_cpu } else { 0 };
        self.alloc_large_slots(ty, order, cpu)
    }

    /// An aligned run of 2^`order` slots on device `ty` from `cpu`'s
    /// cluster for the order, accounted (the large allocations' common
    /// part).
    fn alloc_large_slots(&mut self, ty: usize, order: u8, cpu: usize) -> Option<SwpEntry> {
        let nr = 1u32 << order;
        let off = self.swap[ty].alloc_large(cpu, order)?;
        self.swapfile.nr_swap_pages -= nr as i64;
        Some(swp_entry(ty, off))
    }

    /// 6.1's `folio_alloc_swap` for a THP (CONFIG_THP_SWAP, past the slot
    /// cache): `get_swap_pages(1, .., 512)` tries only the first device
    /// (requeued behind its equal-priority siblings) and takes a wholly
    /// free cluster from it (`swap_alloc_cluster`), which only a
    /// solid-state device keeps a list of. None: the caller splits.
    pub fn folio_alloc_swap_thp(&mut self, memcg: u16) -> Option<SwpEntry> {
        let entry = self.get_swap_pages_thp();
        self.mem_cgroup_try_charge_swap(memcg, entry, SWAPFILE_CLUSTER)
    }

    fn get_swap_pages_thp(&mut self) -> Option<SwpEntry> {
        const NR: u32 = SWAPFILE_CLUSTER;
        if self.swapfile.nr_swap_pages < NR as i64 {
            return None;
        }
        let ty = *self.swap_avail().first()?;
        self.swapfile.requeue_seq += 1;
        self.swap[ty].requeued = self.swapfile.requeue_seq;
        if self.swap[ty].flags & SWP_SOLIDSTATE == 0 {
            return None;
        }
        // alloc_large's order-9 run is a whole free cluster, the head of
        // the free list, as swap_alloc_cluster takes.
        self.alloc_large_slots(ty, 9, self.cur_cpu)
    }

    /// `lock_cluster_or_swap_info` and its unlock around a swap_map update
    /// of `entry` (priced in the caller's bundle: unmap_one, swap_slot,
    /// swap_slot_free, the fault's): an empty hold of the cluster's lock,
    /// or of `si->lock` on a device without clusters, which moves the
    /// lock's line and waits out another CPU's hold. Nothing with one CPU.
    #[inline]
    pub fn lock_cluster_or_swap_info(&mut self, entry: SwpEntry) {
        if self.cpus.len() > 1 {
            self.swap_lock_touch(entry, true);
        }
    }

    /// `lock_cluster` and its unlock for each slot of a batch under
    /// si->lock (slot allocation and release), as
    /// `lock_cluster_or_swap_info`; nothing on a device without clusters,
    /// whose si->lock the caller holds already. A line moves over once
    /// per batch (`seen`): the batch's microseconds leave it in this
    /// CPU's cache between its slots, though the model's clock has moved
    /// on (each move is charged), so the line's own rule would count it
    /// again whenever another CPU wrote it within a quantum.
    #[inline]
    fn lock_cluster(&mut self, entry: SwpEntry, seen: &mut Vec<Line>) {
        if self.cpus.len() > 1 {
            self.lock_cluster_batched(entry, seen);
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_cluster_batched(&mut self, entry: SwpEntry, seen: &mut Vec<Line>) {
        let Some(line) = self.swap_cluster_lock(entry, false) else {
            return;
        };
        if seen.contains(&line) {
            return;
        }
        seen.push(line);
        self.spin_lock_empty(line);
    }

    #[cold]
    #[inline(never)]
    fn swap_lock_touch(&mut self, entry: SwpEntry, or_swap_info: bool) {
        if let Some(line) = self.swap_cluster_lock(entry, or_swap_info) {
            self.spin_lock_empty(line);
        }
    }

    /// The line of the lock that guards `entry`'s swap_map byte.
    ///
    /// A device has clusters when it is non-rotational (zram, SSDs), and
    /// from the 7.3 preset every device (`swap_clusters_rotational`);
    /// without them `si->lock` guards the map (`or_swap_info`), or the
    /// caller's si->lock does. A cluster's `ci->lock` sits in one
    /// kvcalloc'd `cluster_info` array, line-aligned for any swap above
    /// 24 MiB: 6.1's `struct swap_cluster_info` is 8 bytes, so 8 clusters'
    /// locks share a line; 6.12's is 24 (`swap_cluster_list`), 8 over 3
    /// lines. Each CPU allocates from its own cluster, and the free list
    /// hands clusters out 32 apart (SWAP_CLUSTER_COLS), so two CPUs meet
    /// on a line where one frees or duplicates the other's slots. From
    /// 6.18 (`swap_table`) the cluster's lock is the swap cache's
    /// (swap_state.rs), a line per cluster: its 32-byte info shares a line
    /// with one neighbour, not followed.
    fn swap_cluster_lock(&self, entry: SwpEntry, or_swap_info: bool) -> Option<Line> {
        let ty = swp_type(entry);
        let clusters =
            self.swap[ty].flags & SWP_SOLIDSTATE != 0 || self.release.swap_clusters_rotational;
        if !clusters {
            return or_swap_info.then_some(Line::SwapInfo(ty as u8));
        }
        if self.release.swap_table {
            return Some(self.swap_cache_lock(entry));
        }
        let size = if self.release.swap_cluster_list {
            24
        } else {
            8
        };
        let cluster = swp_offset(entry) / SWAPFILE_CLUSTER;
        Some(Line::SwapCluster {
            ty: ty as u8,
            line: cluster * size / 64,
        })
    }

    /// `swap_duplicate` for a PTE taking a reference to the slot.
    pub fn swap_duplicate(&mut self, entry: SwpEntry) {
        self.lock_cluster_or_swap_info(entry);
        self.swap_duplicate_locked(entry);
    }

    /// `swap_duplicate` of `nr` slots from `entry` in one cluster (6.12's
    /// `swap_shmem_alloc(entry, nr)`: the lock once).
    pub fn swap_duplicate_nr(&mut self, entry: SwpEntry, nr: u32) {
        self.lock_cluster_or_swap_info(entry);
        for i in 0..nr {
            self.swap_duplicate_locked(entry + i);
        }
    }

    #[inline]
    fn swap_duplicate_locked(&mut self, entry: SwpEntry) {
        let m = &mut self.swap[swp_type(entry)].swap_map[swp_offset(entry) as usize];
        assert!(
            *m & SWAP_COUNT_MASK < SWAP_MAP_MAX,
            "swap count continuation is not modelled"
        );
        *m += 1;
    }

    /// `swap_free` / `__swap_entry_free`: drop one reference; a slot whose
    /// value reaches zero (the last reference, no swap cache holding the
    /// slot) goes to `free_swap_slot`.
    pub fn swap_free(&mut self, entry: SwpEntry) {
        self.lock_cluster_or_swap_info(entry);
        self.swap_free_locked(entry);
    }

    /// `swap_free_nr` (6.12; 6.1 frees one slot at a time): `nr` slots
    /// from `entry`, the lock taken once per cluster they span.
    pub fn swap_free_nr(&mut self, entry: SwpEntry, nr: u32) {
        for i in 0..nr {
            let e = entry + i;
            if i == 0 || swp_offset(e).is_multiple_of(SWAPFILE_CLUSTER) {
                self.lock_cluster_or_swap_info(e);
            }
            self.swap_free_locked(e);
        }
    }

    #[inline]
    fn swap_free_locked(&mut self, entry: SwpEntry) {
        let (ty, off) = (swp_type(entry), swp_offset(entry) as usize);
        let m = &mut self.swap[ty].swap_map[off];
        debug_assert!(*m & SWAP_COUNT_MASK > 0);
        *m -= 1;
        if *m != 0 {
            return;
        }
        // Parked as HAS_CACHE until the return batch frees it.
        *m = SWAP_HAS_CACHE;
        self.free_swap_slot(entry);
    }

    /// `put_swap_folio` / `swapcache_clear`: the swap cache lets go of the
    /// slot (clears SWAP_HAS_CACHE).
    pub fn put_swap_folio(&mut self, entry: SwpEntry) {
        self.lock_cluster_or_swap_info(entry);
        self.put_swap_folio_locked(entry);
    }

    /// `put_swap_folio` with the slot's lock held (or, for the model's own
    /// claim of a slot 6.1 does not claim, none taken).
    #[inline]
    pub(crate) fn put_swap_folio_locked(&mut self, entry: SwpEntry) {
        let (ty, off) = (swp_type(entry), swp_offset(entry) as usize);
        let m = &mut self.swap[ty].swap_map[off];
        debug_assert!(*m & SWAP_HAS_CACHE != 0);
        *m &= !SWAP_HAS_CACHE;
        if *m == 0 {
            *m = SWAP_HAS_CACHE;
            self.free_swap_slot(entry);
        }
    }

    /// `put_swap_folio` of a folio of `nr` pages: each slot from `entry`.
    /// The lock is taken once for the folio (it lies in one cluster);
    /// the kernel's relock after each slot freed finds the line still in
    /// this CPU's cache. An order-0 folio, the common case, goes straight
    /// to `put_swap_folio`, kept inline (callgrind counts,
    /// docs/performance.md).
    #[inline]
    pub fn put_swap_folio_nr(&mut self, entry: SwpEntry, nr: u32) {
        if nr == 1 {
            return self.put_swap_folio(entry);
        }
        self.put_swap_folio_range(entry, nr);
    }

    #[inline(never)]
    fn put_swap_folio_range(&mut self, entry: SwpEntry, nr: u32) {
        self.lock_cluster_or_swap_info(entry);
        for i in 0..nr {
            self.put_swap_folio_locked(entry + i);
        }
    }

    /// `put_swap_folio` of slots just allocated and never used (a swap
    /// charge refused): a large run only the swap cache bit holds goes
    /// back to its device at once (6.1's `swap_free_cluster`, 6.12's
    /// `swap_entry_range_free`), one slot through the CPU's return batch.
    pub fn put_unused_swap(&mut self, entry: SwpEntry, nr: u32) {
        if nr == 1 {
            self.put_swap_folio(entry);
            return;
        }
        let entries: Vec<SwpEntry> = (0..nr).map(|i| entry + i).collect();
        self.swapcache_free_entries(&entries);
    }

    /// `free_swap_slot`: queue in the CPU's return batch of 64, freed
    /// together when it is full (or at once with the caches off).
    fn free_swap_slot(&mut self, entry: SwpEntry) {
        // The slot's release is priced here, once per slot, though the
        // batch frees it later: the same work either way.
        self.charge_cost(
            crate::cost_model::Fn::FreeSwapSlot,
            self.costs.swap_slot_free,
        );
        let cpu = self.cur_cpu;
        if self.swapfile.slot_cache_active && self.swapfile.slot_cache_enabled {
            if self.cpus[cpu].slots.slots_ret.len() >= SWAP_SLOTS_CACHE_SIZE {
                let ret = std::mem::take(&mut self.cpus[cpu].slots.slots_ret);
                self.swapcache_free_entries(&ret);
                self.cpus[cpu].slots.slots_ret = ret;
                self.cpus[cpu].slots.slots_ret.clear();
            }
            self.cpus[cpu].slots.slots_ret.push(entry);
        } else {
            self.swapcache_free_entries(&[entry]);
        }
    }

    /// `swapcache_free_entries` → `swap_entry_free` → `swap_range_free`:
    /// the slot is free again; zram drops its copy, the shadow goes, the
    /// memcg's swap charge is returned.
    pub fn swapcache_free_entries(&mut self, entries: &[SwpEntry]) {
        // si->lock, taken again where the batch moves to another device
        // (swap_info_get_cont); the work under it is in swap_slot_free's
        // price, charged where a slot's last reference goes: the hold
        // lasts only for the moves of the clusters' lines taken under it.
        let mut lock = None;
        let mut seen = Vec::new();
        for &e in entries {
            let (ty, off) = (swp_type(e), swp_offset(e));
            self.spin_lock_switch(&mut lock, crate::cacheline::Line::SwapInfo(ty as u8));
            // swap_entry_free's lock_cluster, nested.
            self.lock_cluster(e, &mut seen);
            // swap_cgroup_record(entry, 0): the record goes with the charge,
            // so a slot freed again unused (from a slot cache) uncharges
            // nobody.
            let memcg = std::mem::take(&mut self.swap[ty].cgroup[off as usize]);
            let si = &mut self.swap[ty];
            debug_assert_eq!(si.swap_map[off as usize], SWAP_HAS_CACHE);
            si.release_slot(off);
            si.zeromap[off as usize] = false;
            // clear_shadow_from_swap_cache
            if si.cache[off as usize] & 1 == 1 {
                si.cache[off as usize] = 0;
            }
            self.swapfile.nr_swap_pages += 1;
            self.zswap_invalidate_page(ty, off);
            if self.swap[ty].bdev.is_none() {
                self.zram_slot_free_notify(ty, off);
            }
            self.mem_cgroup_uncharge_swap(memcg, 1);
        }
        self.spin_unlock(lock);
    }

    /// Slots held by the per-CPU allocation caches (allocated, unused).
    pub fn slots_in_caches(&self) -> impl Iterator<Item = SwpEntry> + '_ {
        self.cpus.iter().flat_map(|c| {
            c.slots
                .slots
                .iter()
                .chain(c.slots.slots_ret.iter())
                .copied()
        })
    }

    pub fn swap_folio_of(&self, entry: SwpEntry) -> Option<Pfn> {
        let v = self.swap[swp_type(entry)].cache[swp_offset(entry) as usize];
        (v & 3 == 2).then_some((v >> 2) as Pfn)
    }
}

// ---- swapon and swapoff -----------------------------------------------------

/// What swapoff found that the kernel would fail with.
#[derive(Debug, PartialEq, Eq)]
pub enum SwapoffError {
    /// The device is not on (EINVAL).
    NotOn,
    /// A page could not be allocated or charged, the OOM killer having
    /// run (ENOMEM).
    NoMemory,
    /// `try_to_unuse` made this many passes without freeing a slot: the
    /// memcg's reclaim sends every page a pass brings in back to the slot
    /// it came from (a swap-cache page another mm still references keeps
    /// its entry), and the kernel would go round until swapoff is killed.
    NoProgress(u32),
}

/// Passes of `try_to_unuse` without a slot freed before swapoff gives up
/// (mmsim's own bound: the kernel loops until a signal).
const UNUSE_PASSES_WITHOUT_PROGRESS: u32 = 16;

impl Kernel {
    /// The priority swapon gives a device: the spec's, or the next lower
    /// negative default (`--least_priority`, from -2).
    pub fn swapon_priority(&mut self, prio: Option<i32>) -> i32 {
        prio.unwrap_or_else(|| {
            self.swapfile.least_priority -= 1;
            self.swapfile.least_priority
        })
    }

    /// swapon(2) of device `ty` again, empty.
    pub fn swapon(&mut self, ty: usize, dev: &mmsim_spec::SwapDevice) -> Result<(), SwapoffError> {
        if self.swap[ty].flags & SWP_WRITEOK != 0 {
            return Err(SwapoffError::NotOn);
        }
        let prio = self.swapon_priority(dev.priority);
        let mut si = SwapInfo::new(dev, prio, self.cpus.len());
        // plist_add: behind the devices already on at this priority.
        self.swapfile.requeue_seq += 1;
        si.requeued = self.swapfile.requeue_seq;
        self.swapfile.nr_swap_pages += si.pages as i64;
        self.swapfile.total_swap_pages += si.pages as i64;
        if dev.rotational() {
            self.swapfile.nr_rotate_swap += 1;
        }
        self.swap[ty] = si;
        Ok(())
    }

    /// `add_to_mmlist`: the mm holds a swap entry; swapoff must visit it.
    pub fn add_to_mmlist(&mut self, mm: u32) {
        if !self.swapfile.mmlist.contains(&mm) {
            self.swapfile.mmlist.insert(0, mm);
        }
    }

    /// swapoff(2): take the device out of allocation, bring every page it
    /// holds back into memory (`try_to_unuse`), and release it.
    pub fn swapoff(&mut self, ty: usize, rotational: bool) -> Result<(), SwapoffError> {
        if self.swap[ty].flags & SWP_WRITEOK == 0 {
            return Err(SwapoffError::NotOn);
        }
        let si = &mut self.swap[ty];
        si.flags &= !SWP_WRITEOK;
        let pages = si.pages as i64;
        let prio = si.prio;
        // The device's pages leave the totals up front: with one device
        // nr_swap_pages goes negative, vm_swap_full() holds and reclaim
        // cannot take anon pages while swapoff runs.
        self.swapfile.nr_swap_pages -= pages;
        self.swapfile.total_swap_pages -= pages;
        if prio < 0 {
            // Devices below a removed default priority move up one.
            for s in self.swap.iter_mut() {
                if s.prio < prio {
                    s.prio += 1;
                }
            }
            self.swapfile.least_priority += 1;
        }
        // disable_swap_slots_cache_lock: drain every CPU's cached slots.
        self.swapfile.slot_cache_enabled = false;
        for cpu in 0..self.cpus.len() {
            self.drain_slots_cache(cpu);
        }
        // It walks other processes' mms and the shmem inodes: an OOM
        // victim's memory is freed when the syscall is done, not under it.
        self.oom.defer_reap += 1;
        let r = self.traced(crate::cost_model::Fn::TryToUnuse, |k| k.try_to_unuse(ty));
        self.oom.defer_reap -= 1;
        self.swapfile.slot_cache_enabled = true;
        if let Err(e) = r {
            // The kernel puts the device back (reinsert_swap_info).
            let si = &mut self.swap[ty];
            si.flags |= SWP_WRITEOK;
            self.swapfile.nr_swap_pages += pages;
            self.swapfile.total_swap_pages += pages;
            return Err(e);
        }
        debug_assert_eq!(self.swap[ty].inuse_pages, 0);
        if rotational {
            self.swapfile.nr_rotate_swap -= 1;
        }
        // exit_swap_address_space: shadows go with the cache.
        let si = &mut self.swap[ty];
        si.cache.iter_mut().for_each(|c| *c = 0);
        Ok(())
    }

    /// `try_to_unuse`: every mm on the mmlist, in order, then a sweep of
    /// the swap map for folios only the swap cache still holds; again
    /// until nothing is in use.
    fn try_to_unuse(&mut self, ty: usize) -> Result<(), SwapoffError> {
        let (mut best, mut stalled) = (u32::MAX, 0);
        while self.swap[ty].inuse_pages > 0 {
            if self.swap[ty].inuse_pages < best {
                (best, stalled) = (self.swap[ty].inuse_pages, 0);
            } else {
                stalled += 1;
                if stalled == UNUSE_PASSES_WITHOUT_PROGRESS {
                    return Err(SwapoffError::NoProgress(stalled));
                }
            }
            if !self.shmem_unuse(ty) {
                return Err(SwapoffError::NoMemory);
            }
            let mms = self.swapfile.mmlist.clone();
            for mm in mms {
                for vma in self.mms[mm as usize].vmas.clone() {
                    self.unuse_vma(ty, vma)?;
                }
            }
            for off in 1..self.swap[ty].max {
                let m = self.swap[ty].swap_map[off as usize];
                if m == 0 || m & SWAP_COUNT_MASK == 0x3f {
                    continue;
                }
                self.charge_cost(crate::cost_model::Fn::TryToUnuse, self.costs.pte);
                if let Some(pfn) = self.swap_folio_of(swp_entry(ty, off)) {
                    // find_get_page's reference, dropped after.
                    self.folios.get_mut(pfn).refcount += 1;
                    self.wait_on_folio(pfn);
                    self.folio_free_swap(pfn);
                    self.folio_put(pfn);
                }
            }
            // Slots parked in return batches are freed by the drain.
            for cpu in 0..self.cpus.len() {
                self.drain_slots_cache(cpu);
            }
        }
        Ok(())
    }

    /// Waits, inside the current syscall, for a folio's read or writeback.
    pub fn wait_on_folio_io(&mut self, pfn: Pfn) {
        self.wait_on_folio(pfn);
    }

    fn wait_on_folio(&mut self, pfn: Pfn) {
        loop {
            let f = self.folios.get(pfn);
            let locked = f.test(super::folio::PG_LOCKED) || f.test(super::folio::PG_WRITEBACK);
            if !locked {
                return;
            }
            let Some(t) = self.next_io_completion() else {
                return;
            };
            self.wait_until(t);
        }
    }

    /// Sleeps in a syscall until `t` (simulated time passes; the time is
    /// shown as `io_schedule` in the profile).
    pub fn wait_until(&mut self, t: u64) {
        let now = self.now();
        if t > now {
            self.psi_io_wait(t);
            self.io_wait_ns += t - now;
            self.charge_wall(crate::cost_model::Fn::IoSchedule, t - now);
        }
        self.process_io_completions(t.max(now));
    }

    /// `unuse_pte_range` over a VMA: each swap PTE of the device gets its
    /// page back, from the swap cache (6.1 looks there first, counting
    /// readahead hits) or read with readahead.
    fn unuse_vma(&mut self, ty: usize, vma: u32) -> Result<(), SwapoffError> {
        let n = self.vmas[vma as usize].pages as usize;
        let memcg = self.mms[self.vmas[vma as usize].mm as usize].memcg;
        for idx in 0..n {
            self.charge_cost(crate::cost_model::Fn::TryToUnuse, self.costs.unuse_scan);
            let pte = self.vmas[vma as usize].ptes[idx];
            if !super::pgtable::is_swap_pte(pte) {
                continue;
            }
            let entry = super::pgtable::pte_swp_entry(pte);
            if swp_type(entry) != ty {
                continue;
            }
            let looked = if !self.features.swapoff_readahead_stats {
                None
            } else if self.release.unuse_plain_lookup {
                // 7.3's unuse_pte_range: a plain swap cache lookup, so
                // the readahead it starts sees no hits and stays small.
                self.swap_cache_get_folio(entry)
            } else {
                self.lookup_swap_cache(entry, Some((vma, idx)))
            };
            let pfn = match looked {
                Some(p) => p,
                None => match self.swapin_readahead(entry, vma, idx, memcg) {
                    Some(p) => p,
                    None => {
                        let m = self.swap[ty].swap_map[swp_offset(entry) as usize];
                        if m == 0 {
                            continue;
                        }
                        return Err(SwapoffError::NoMemory);
                    }
                },
            };
            self.wait_on_folio(pfn);
            self.unuse_pte(vma, idx, entry, pfn);
            self.folio_free_swap(pfn);
            self.folio_put(pfn);
        }
        Ok(())
    }

    /// `unuse_pte`: map the page read-only and old, as a swap-in would
    /// without the write, and drop the PTE's swap reference.
    fn unuse_pte(&mut self, vma: u32, idx: usize, entry: SwpEntry, pfn: Pfn) {
        use super::pgtable::*;
        self.charge_cost(crate::cost_model::Fn::TryToUnuse, self.costs.pte);
        let pte = self.vmas[vma as usize].ptes[idx];
        let exclusive = pte & PTE_SWP_EXCLUSIVE != 0;
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].swapents -= 1;
        self.folios.get_mut(pfn).refcount += 1;
        // A page of a THP still in the swap cache maps alone.
        let page = self.swap_cache_page(pfn, entry);
        self.page_add_anon_rmap(page, vma, idx, exclusive);
        self.vmas[vma as usize].ptes[idx] = mk_pte(page, 0);
        self.swap_free(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{test_at, test_kernel_of};

    fn kernel(release: &str, device: &str, cpus: usize) -> Kernel {
        test_kernel_of(&format!(
            "[machine]\nmemory = \"256M\"\ncpus = {cpus}\nkernel = \"{release}\"\n\
             [[swap]]\ndevice = \"{device}\"\nsize = \"1G\"\n[task.t]\nsteps = []\n"
        ))
    }

    /// The cluster_info line holding the lock of slot `offset`'s cluster.
    fn line_of(k: &Kernel, offset: u32, or_swap_info: bool) -> Option<Line> {
        k.swap_cluster_lock(swp_entry(0, offset), or_swap_info)
    }

    #[test]
    fn eight_clusters_share_a_line_on_6_1_eight_over_three_lines_on_6_12() {
        let c = |n: u32| n * SWAPFILE_CLUSTER;
        let k = kernel("6.1", "zram", 2);
        let at = |k: &Kernel, n| match line_of(k, c(n), true) {
            Some(Line::SwapCluster { ty: 0, line }) => line,
            other => panic!("{other:?}"),
        };
        assert_eq!([0, 7, 8, 15, 16].map(|n| at(&k, n)), [0, 0, 1, 1, 2]);
        // 24 bytes each: clusters 0-2 on line 0, 3-5 on line 1, 6-7 on 2.
        let k = kernel("6.12", "zram", 2);
        assert_eq!(
            [0, 2, 3, 5, 6, 7, 8].map(|n| at(&k, n)),
            [0, 0, 1, 1, 2, 2, 3]
        );
        // 7.3: the cluster's lock is the swap cache's, one per cluster.
        let k = kernel("7.3", "zram", 2);
        assert_eq!(
            line_of(&k, c(9) + 5, true),
            Some(Line::SwapCache { ty: 0, range: 9 })
        );
    }

    #[test]
    fn a_rotational_disk_has_no_clusters_before_7_3() {
        let k = kernel("6.1", "hdd", 2);
        assert_eq!(line_of(&k, 4096, true), Some(Line::SwapInfo(0)));
        assert_eq!(line_of(&k, 4096, false), None, "the caller's si->lock");
        let k = kernel("7.3", "hdd", 2);
        assert_eq!(
            line_of(&k, 4096, false),
            Some(Line::SwapCache { ty: 0, range: 8 })
        );
    }

    /// Slot operations by `cpus` in turn, 20 µs apart, on `offsets`: the
    /// time each waited for its lock's line.
    fn swap_map_updates(k: &mut Kernel, ops: &[(usize, u32)]) -> Vec<u64> {
        let mut t = 0;
        ops.iter()
            .map(|&(cpu, offset)| {
                t += 20_000;
                test_at(k, cpu, t);
                k.lock_cluster_or_swap_info(swp_entry(0, offset));
                k.pending_ns
            })
            .collect()
    }

    #[test]
    fn cpus_meet_on_a_cluster_line_only_where_they_share_it() {
        let mut k = kernel("6.1", "zram", 2);
        let h = k.costs.lock_handoff;
        let c = |n: u32| n * SWAPFILE_CLUSTER + 1;
        // CPU 1 frees a slot of CPU 0's cluster 1: the line moves, and
        // back; cluster 33 (the next one CPU 0 would be given, 32 on) is
        // on another line and meets nothing.
        let waits = swap_map_updates(&mut k, &[(0, c(1)), (1, c(1)), (0, c(1)), (1, c(33))]);
        assert_eq!(waits, [0, h, h, 0]);
        // Cluster 2 shares cluster 1's line (false sharing).
        let waits = swap_map_updates(&mut k, &[(1, c(2))]);
        assert_eq!(waits, [h]);
        // One CPU takes no lock.
        let mut k = kernel("6.1", "zram", 1);
        assert_eq!(swap_map_updates(&mut k, &[(0, c(1)), (0, c(2))]), [0, 0]);
    }
}

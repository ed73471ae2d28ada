//! Cache lines that several CPUs write: a lock word, an atomic counter.
//! A write (a locked read-modify-write, a spinlock taken) finds the line
//! in its own cache only if no other CPU wrote it since this CPU last
//! did; otherwise the line moves over first, and the write waits for it
//! (`cacheline_transfer`; a contended spinlock's hand-off with its data,
//! `lock_handoff`: both measured by `mmsim calibrate`, smp.rs).
//!
//! The scheduler runs one CPU's slice at a time with the CPUs in step to
//! within `QUANTUM_NS` (sched/rq.rs), so a line sees the writes of one
//! CPU's slice before another's that overlaps it in simulated time: a
//! write counts as following another CPU's when that CPU wrote the line
//! later than a quantum before this CPU's previous write. Two CPUs
//! writing a line throughout the same stretch of time thus each move it
//! at every write, as interleaved writers do; a CPU that writes alone
//! moves it once.
//!
//! A line that comes from a CPU of another socket costs `cross_socket`
//! thousandths of the transfer within one (a documented figure; the
//! machines calibrated have one socket).
//!
//! A transfer occupies the line for its duration: a CPU whose transfer
//! would overlap another CPU's waits for that one's end, so writers that
//! meet on a line queue, each waiting for those recorded before it (at
//! two CPUs a rare collision; at 96 the queue of a hot counter). As with
//! spinlocks (spinlock.rs), the CPU whose slice ran second waits for the
//! first one's transfer whichever wanted the line first: the queue's total
//! wait is kept, not its order.

use std::collections::BTreeMap;

use crate::cost_model::{Fn, QUANTUM_NS};
use crate::kernel::Kernel;
use crate::mm::folio::Pfn;

const NONE: u32 = u32::MAX;
/// Lines of a zone's `vm_stat` (11 items, 8 a line).
const ZONE_STAT_LINES: usize = 2;

/// The last CPU to write the line and when, and the last of any other
/// CPU and when.
#[derive(Clone, Copy, Debug)]
pub struct SharedLine {
    cpu: [u32; 2],
    at: [u64; 2],
}

impl Default for SharedLine {
    fn default() -> Self {
        SharedLine {
            cpu: [NONE; 2],
            at: [0; 2],
        }
    }
}

impl SharedLine {
    /// A write by `cpu` at `t`: the CPU whose cache the line came from,
    /// if it was not this CPU's.
    #[inline]
    pub fn write(&mut self, cpu: usize, t: u64) -> Option<usize> {
        let cpu = cpu as u32;
        let (mine, other) = if self.cpu[0] == cpu {
            (Some(self.at[0]), 1)
        } else if self.cpu[1] == cpu {
            (Some(self.at[1]), 0)
        } else {
            (None, 0)
        };
        let from = match (mine, self.written(other)) {
            (_, None) => None,
            // This CPU wrote it at this very instant (one section's
            // writes, or a batch's under one lock): nothing came between.
            (Some(m), _) if m == t => None,
            (None, Some(_)) => Some(self.cpu[other] as usize),
            (Some(m), Some(o)) => (o + QUANTUM_NS > m).then_some(self.cpu[other] as usize),
        };
        self.record(cpu, t);
        from
    }

    /// When entry `i`'s CPU last wrote, if it has one.
    #[inline]
    fn written(&self, i: usize) -> Option<u64> {
        (self.cpu[i] != NONE).then_some(self.at[i])
    }

    /// The latest write by a CPU other than `cpu`, and when.
    #[inline]
    fn other_than(&self, cpu: usize) -> Option<u64> {
        let cpu = cpu as u32;
        match (self.cpu[0], self.cpu[1]) {
            (c, _) if c != NONE && c != cpu => Some(self.at[0]),
            (_, c) if c != NONE && c != cpu => Some(self.at[1]),
            _ => None,
        }
    }

    /// Keeps the latest write and the latest by another CPU.
    fn record(&mut self, cpu: u32, t: u64) {
        if self.cpu[0] == cpu {
            self.at[0] = self.at[0].max(t);
        } else if self.cpu[1] == cpu {
            self.at[1] = self.at[1].max(t);
            if self.at[1] > self.at[0] {
                self.cpu.swap(0, 1);
                self.at.swap(0, 1);
            }
        } else if self.cpu[0] == NONE || t >= self.at[0] {
            self.cpu[1] = self.cpu[0];
            self.at[1] = self.at[0];
            self.cpu[0] = cpu;
            self.at[0] = t;
        } else if self.cpu[1] == NONE || t > self.at[1] {
            self.cpu[1] = cpu;
            self.at[1] = t;
        }
    }
}

/// The shared lines the model follows, each where 6.1 writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// `mm->mmap_lock`'s count: taken for read by every fault before 6.4.
    MmapLock(u32),
    /// A VMA's `vm_lock->lock` (6.4's per-VMA locks), taken by a fault in it.
    VmaLock(u32),
    /// A memcg's lruvec `lru_lock` (one node).
    LruLock(u16),
    /// `zone->lock`: the buddy lists, taken per pcp batch.
    ZoneLock(usize),
    /// A memcg's `memory` page counter, charged per stock batch.
    MemcgCounter(u16),
    /// The swap cache's lock over one range of a swap device's slots:
    /// through 6.17 the `xa_lock` of one of its address spaces
    /// (`swapper_spaces[type][offset >> SWAP_ADDRESS_SPACE_SHIFT]`, 64 MiB
    /// of swap each), from 6.18 its swap cluster's lock (the swap table).
    SwapCache { ty: u8, range: u32 },
    /// A file's page cache `xa_lock` (`mapping->i_pages`), by inode.
    PageCache(u32),
    /// A swap device's `si->lock`: slot allocation's scan and the
    /// batched release of freed slots.
    SwapInfo(u8),
    /// The line of the node's `vm_stat` holding these eight items (the
    /// one node's; mm/vmstat_pcp.rs).
    NodeStat(u16),
    /// The line of the global `vm_node_stat` holding these eight items.
    VmNodeStat(u16),
    /// A line of a zone's `vm_stat`.
    ZoneStat { zone: u8, line: u16 },
    /// A line of the global `vm_zone_stat`.
    VmZoneStat(u16),
    /// The count of a root anon_vma's `rwsem` (by anon_vma index), taken
    /// for read by each rmap walk of its folios and for write by a THP
    /// split (mm/rmap.rs).
    AnonVma(u32),
    /// The count of a file's `mapping->i_mmap_rwsem` (by inode), taken for
    /// read by each rmap walk of its mapped folios.
    IMmap(u32),
    /// The cache line of a swap device's `cluster_info` array holding
    /// these clusters' locks (mm/swapfile.rs `swap_cluster_lock`).
    SwapCluster { ty: u8, line: u32 },
    /// The split page-table lock of a VMA's PTE table (by VMA, then its
    /// table's index in the VMA: mm/mmap.rs `table_line`).
    Ptl { vma: u32, table: u32 },
    /// The split lock of a VMA's PMD table (`pmd_lockptr`: the spinlock
    /// in the PMD table page's struct page), by VMA, then its table's
    /// index in the VMA (mm/mmap.rs `table_line`).
    Pmd { vma: u32, table: u32 },
    /// memcg's global `stats_flush_threshold` (mm/memcg_rstat.rs): each
    /// CPU adds to it once per 64 updates until it passes the CPUs, and
    /// a flush zeroes it.
    StatsFlushThreshold,
    /// A memcg's `vmstats->stats_updates` (6.8+, mm/memcg_rstat.rs): each
    /// CPU adds its 64s of updates to it until it passes 64 × CPUs, and
    /// a flush of the memcg zeroes it.
    MemcgStatsUpdates(u16),
    /// One of a memcg's 5.10 statistics atomics (mm/memcg_batch.rs): by
    /// memory.stat item, and NR_MC_ITEMS + item for its lruvec's copy.
    MemcgVmstat { memcg: u16, item: u8 },
}

/// A line and, when it is a spinlock's, the recent holds of its lock
/// (spinlock.rs).
#[derive(Clone, Debug, Default)]
pub struct LineState {
    pub(crate) line: SharedLine,
    pub(crate) holds: crate::spinlock::Holds,
    /// The line's recent transfers between CPUs, start → end: disjoint
    /// (each is placed in a gap between the others). A map, not a list:
    /// CPUs whose slices run ahead leave many on a hot line (seed 000's
    /// 88 CPUs), and a new one goes in among them.
    transfers: BTreeMap<u64, u64>,
}

impl LineState {
    /// A transfer of `ns`, wanted at `t`: it starts once every transfer
    /// it would overlap has ended (those that ended by `horizon` are
    /// retired first). A CPU's own transfers end before its next write,
    /// so only other CPUs' delay it. Returns its start.
    fn queue_transfer(&mut self, t: u64, ns: u64, horizon: u64) -> u64 {
        while let Some(first) = self.transfers.first_entry() {
            if *first.get() > horizon {
                break;
            }
            first.remove();
        }
        // The latest transfer starting before this one would end: if it
        // overlaps, this one starts at its end (any gap before it is
        // shorter than `ns`), and the test repeats from there.
        let mut start = t;
        while let Some((_, &end)) = self.transfers.range(..start + ns).next_back() {
            if end <= start {
                break;
            }
            start = end;
        }
        if ns > 0 {
            self.transfers.insert(start, start + ns);
        }
        start
    }
}

/// The cache line of one `struct page` (64 bytes on x86-64, one line
/// exactly): a folio's reference count and flags in its head page's, each
/// page's `_mapcount` in its own. Kept per frame, with the line's latest
/// transfer only (its start and end), not the whole queue a lock's line
/// keeps: a page line is a hot queue only when many CPUs read one page at
/// once, and then each transfer starts where the latest ends.
#[derive(Clone, Copy, Debug, Default)]
pub struct PageLine {
    line: SharedLine,
    busy: [u64; 2],
}

impl PageLine {
    /// A transfer of `ns` wanted at `t`: it starts at the end of the
    /// latest transfer if it would overlap it. Returns its start.
    fn queue_transfer(&mut self, t: u64, ns: u64) -> u64 {
        let [start, end] = self.busy;
        let at = if end > t && start < t + ns { end } else { t };
        if at + ns > end {
            self.busy = [at, at + ns];
        }
        at
    }
}

/// Host bytes per page frame of the page lines, kept only with more
/// than one CPU (`work::host_bytes` counts them so).
pub const PAGE_LINE_BYTES: usize = std::mem::size_of::<PageLine>();

/// Every shared line the model follows, by the index of what it belongs
/// to, grown as lines are first written. Kept apart from the structures
/// they belong to so that one CPU's hot paths (which never write a line)
/// keep those structures as they are.
#[derive(Debug, Default)]
pub struct SharedLines {
    mmap_lock: Vec<LineState>,
    vma_lock: Vec<LineState>,
    lru_lock: Vec<LineState>,
    zone_lock: Vec<LineState>,
    memcg_counter: Vec<LineState>,
    /// By swap type, then range.
    swap_cache: Vec<Vec<LineState>>,
    page_cache: Vec<LineState>,
    swap_info: Vec<LineState>,
    node_stat: Vec<LineState>,
    vm_node_stat: Vec<LineState>,
    /// By zone and line (`zone * ZONE_STAT_LINES + line`).
    zone_stat: Vec<LineState>,
    vm_zone_stat: Vec<LineState>,
    anon_vma: Vec<LineState>,
    i_mmap: Vec<LineState>,
    /// By swap type, then line.
    swap_cluster: Vec<Vec<LineState>>,
    /// By VMA, then PTE table.
    ptl: Vec<Vec<LineState>>,
    /// By VMA, then PMD table.
    pmd: Vec<Vec<LineState>>,
    /// By page frame: the `struct page` lines (grown to the highest frame
    /// written).
    page: Vec<PageLine>,
    /// memcg's `stats_flush_threshold` (one line).
    stats_flush_threshold: Vec<LineState>,
    /// By memcg: its `vmstats->stats_updates`.
    memcg_stats_updates: Vec<LineState>,
    /// By memcg, then item: 5.10's statistics atomics.
    memcg_vmstat: Vec<Vec<LineState>>,
    /// No CPU's clock is before this (the scheduler's slice start): holds
    /// that ended before it can make no one wait any more.
    pub(crate) horizon: u64,
}

impl SharedLines {
    #[inline]
    pub(crate) fn get(&mut self, line: Line) -> &mut LineState {
        let (v, i) = match line {
            Line::MmapLock(mm) => (&mut self.mmap_lock, mm as usize),
            Line::VmaLock(vma) => (&mut self.vma_lock, vma as usize),
            Line::LruLock(memcg) => (&mut self.lru_lock, memcg as usize),
            Line::ZoneLock(zi) => (&mut self.zone_lock, zi),
            Line::MemcgCounter(memcg) => (&mut self.memcg_counter, memcg as usize),
            Line::SwapCache { ty, range } => {
                (grown(&mut self.swap_cache, ty as usize), range as usize)
            }
            Line::PageCache(inode) => (&mut self.page_cache, inode as usize),
            Line::SwapInfo(ty) => (&mut self.swap_info, ty as usize),
            Line::NodeStat(l) => (&mut self.node_stat, l as usize),
            Line::VmNodeStat(l) => (&mut self.vm_node_stat, l as usize),
            Line::ZoneStat { zone, line } => (
                &mut self.zone_stat,
                zone as usize * ZONE_STAT_LINES + line as usize,
            ),
            Line::VmZoneStat(l) => (&mut self.vm_zone_stat, l as usize),
            Line::AnonVma(av) => (&mut self.anon_vma, av as usize),
            Line::IMmap(inode) => (&mut self.i_mmap, inode as usize),
            Line::SwapCluster { ty, line } => {
                (grown(&mut self.swap_cluster, ty as usize), line as usize)
            }
            Line::Ptl { vma, table } => (grown(&mut self.ptl, vma as usize), table as usize),
            Line::Pmd { vma, table } => (grown(&mut self.pmd, vma as usize), table as usize),
            Line::StatsFlushThreshold => (&mut self.stats_flush_threshold, 0),
            Line::MemcgStatsUpdates(memcg) => (&mut self.memcg_stats_updates, memcg as usize),
            Line::MemcgVmstat { memcg, item } => {
                (grown(&mut self.memcg_vmstat, memcg as usize), item as usize)
            }
        };
        grown(v, i)
    }
}

/// Entry `i` of `v`, grown with defaults to hold it.
#[inline]
fn grown<T: Clone + Default>(v: &mut Vec<T>, i: usize) -> &mut T {
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    &mut v[i]
}

/// A line's transfer of `ns` within a socket, from CPU `from` to `to`:
/// `cross_socket` thousandths of that between two sockets.
#[inline]
fn transfer_ns(
    cpus: &[crate::kernel::Cpu],
    cross_socket: u64,
    from: usize,
    to: usize,
    ns: u64,
) -> u64 {
    match cpus[from].socket == cpus[to].socket {
        true => ns,
        false => ns * cross_socket.max(1000) / 1000,
    }
}

impl Kernel {
    /// This CPU writes `line` now: when the line was another CPU's, the
    /// write waits `ns` for it, charged to `f`. Nothing with one CPU
    /// (checked inline, so one CPU's hot paths pay a compare).
    #[inline]
    pub fn write_line(&mut self, line: Line, f: Fn, ns: u64) {
        if self.cpus.len() > 1 {
            self.write_shared_line(line, f, ns);
        }
    }

    #[inline(never)]
    pub(crate) fn write_shared_line(&mut self, line: Line, f: Fn, ns: u64) {
        let (cpu, t) = (self.cur_cpu, self.now());
        let horizon = self.lines.horizon;
        let state = self.lines.get(line);
        let Some(from) = state.line.write(cpu, t) else {
            return;
        };
        let ns = transfer_ns(&self.cpus, self.costs.cross_socket, from, cpu, ns);
        let start = state.queue_transfer(t, ns, horizon);
        // Waiting for the line is latency, not work: a busy SMT sibling
        // does not stretch it (charge_wall), and the write ends exactly
        // where its transfer does in the line's queue.
        self.charge_wall(f, start - t + ns);
    }

    /// This CPU writes page `pfn`'s `struct page` line now (a reference
    /// taken or dropped, a mapcount changed), charged to `f`. Nothing with
    /// one CPU.
    #[inline]
    pub fn write_page_line(&mut self, pfn: Pfn, f: Fn) {
        if self.cpus.len() > 1 {
            self.write_shared_page_line(pfn, f);
        }
    }

    /// A mapping of `page` made or removed on this CPU: its `_mapcount`'s
    /// line and, for a tail page, its head's (the reference the mapping
    /// holds). Nothing with one CPU.
    #[inline]
    pub fn write_mapped_page_lines(&mut self, page: Pfn, f: Fn) {
        if self.cpus.len() > 1 {
            self.write_shared_page_line(page, f);
            let head = self.folios.head_of(page);
            if head != page {
                self.write_shared_page_line(head, f);
            }
        }
    }

    /// A page line moves only when another CPU wrote it within a quantum
    /// of now: CPUs at the page together (readers of one hot file page,
    /// threads faulting one shared page). A line another CPU wrote longer
    /// ago costs nothing more: the one-CPU calibrations already pay for a
    /// `struct page` that is not in this core's cache (their pages' lines
    /// are cold by the time a path comes back to them), and a line left in
    /// another core's cache long ago costs about as much as one in the
    /// shared L3. Locks' and counters' lines keep every move (the rule
    /// above `SharedLine::write`): they are hot by nature.
    #[inline(never)]
    fn write_shared_page_line(&mut self, pfn: Pfn, f: Fn) {
        let (cpu, t) = (self.cur_cpu, self.now());
        let state = grown(&mut self.lines.page, pfn as usize);
        let recent = state
            .line
            .other_than(cpu)
            .is_some_and(|o| o + QUANTUM_NS > t);
        let Some(from) = state.line.write(cpu, t) else {
            return;
        };
        if !recent {
            return;
        }
        let ns = self.costs.cacheline_transfer;
        let ns = transfer_ns(&self.cpus, self.costs.cross_socket, from, cpu, ns);
        let start = state.queue_transfer(t, ns);
        self.charge_wall(f, start - t + ns);
    }

    /// The mmap_lock (6.4+: the VMA's lock) a fault in `vma` takes for
    /// read, or drops, now: a write of its count's line, charged to `f`.
    #[inline]
    pub fn fault_lock_line(&mut self, vma: u32, f: Fn) {
        if self.cpus.len() == 1 {
            return;
        }
        let line = if self.release.per_vma_locks {
            Line::VmaLock(vma)
        } else {
            Line::MmapLock(self.vmas[vma as usize].mm)
        };
        self.write_shared_line(line, f, self.costs.cacheline_transfer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_bytes_counts_the_page_lines_as_they_are() {
        assert_eq!(
            PAGE_LINE_BYTES as u64,
            mmsim_spec::work::HOST_BYTES_PER_PAGE_LINE
        );
    }

    /// `cpu` writes page 7's line at `t`: the time its write took.
    fn page_write_at(k: &mut Kernel, cpu: usize, t: u64) -> u64 {
        crate::kernel::test_at(k, cpu, t);
        k.write_page_line(7, Fn::FilemapRead);
        k.pending_ns
    }

    #[test]
    fn a_page_line_moves_only_between_cpus_at_the_page_together() {
        let mut k = crate::kernel::test_kernel(3, "6.1");
        let x = k.costs.cacheline_transfer;
        assert_eq!(page_write_at(&mut k, 0, 0), 0, "first written");
        assert_eq!(page_write_at(&mut k, 1, 4_000), x, "within a quantum");
        assert_eq!(page_write_at(&mut k, 0, 6_000), x, "and back");
        // Within a quantum of the other's write it may have come between.
        assert_eq!(page_write_at(&mut k, 0, 7_000), x);
        assert_eq!(page_write_at(&mut k, 0, 30_000), 0, "the other is gone");
        // Another CPU long after: a cold line, priced in its path's work.
        assert_eq!(page_write_at(&mut k, 1, 500_000), 0);
        assert_eq!(page_write_at(&mut k, 0, 900_000), 0);
        // Three at once queue: the second waits for the first's transfer.
        assert_eq!(page_write_at(&mut k, 1, 901_000), x);
        assert_eq!(page_write_at(&mut k, 2, 901_000), 2 * x);
        // One CPU: nothing.
        let mut one = crate::kernel::test_kernel(1, "6.1");
        assert_eq!(page_write_at(&mut one, 0, 0), 0);
        assert!(one.lines.page.is_empty(), "no table with one CPU");
    }

    #[test]
    fn a_line_written_by_one_cpu_stays_in_its_cache() {
        let mut l = SharedLine::default();
        assert_eq!(l.write(0, 100), None);
        assert_eq!(l.write(0, 2_000), None);
        assert_eq!(l.write(0, 90_000), None);
    }

    #[test]
    fn two_cpus_writing_through_the_same_time_move_it_at_every_write() {
        // CPU 0's slice runs first, CPU 1's over the same 10 µs after.
        let mut l = SharedLine::default();
        l.write(1, 0);
        l.write(0, 0);
        let a: Vec<_> = (1..5).map(|i| l.write(0, i * 2_000)).collect();
        let b: Vec<_> = (1..5).map(|i| l.write(1, i * 2_000)).collect();
        assert_eq!(a, [Some(1); 4]);
        assert_eq!(b, [Some(0); 4]);
        // The next quantum: CPU 1 runs first this time.
        let b: Vec<_> = (5..10).map(|i| l.write(1, i * 2_000)).collect();
        let a: Vec<_> = (5..10).map(|i| l.write(0, i * 2_000)).collect();
        assert_eq!(a, [Some(1); 5]);
        assert_eq!(b, [Some(0); 5]);
    }

    #[test]
    fn writes_at_one_instant_move_the_line_once() {
        // Both CPUs write through the same time; CPU 0's three writes at
        // one instant (a batch under one lock) take the line over once.
        let mut l = SharedLine::default();
        l.write(1, 5_000);
        assert_eq!(l.write(0, 6_000), Some(1));
        assert_eq!(l.write(0, 6_000), None);
        assert_eq!(l.write(0, 6_000), None);
        assert_eq!(
            l.write(0, 7_000),
            Some(1),
            "the other may have written since"
        );
    }

    #[test]
    fn once_the_other_cpu_stops_the_line_stays() {
        let mut l = SharedLine::default();
        l.write(1, 10_000);
        assert_eq!(l.write(0, 15_000), Some(1), "the other CPU wrote last");
        // Until this CPU's previous write is a quantum past the other's
        // last, the other may have written between (its slice may not
        // have run yet).
        assert_eq!(l.write(0, 19_000), Some(1));
        assert_eq!(l.write(0, 30_000), Some(1));
        assert_eq!(l.write(0, 32_000), None);
        assert_eq!(l.write(0, 40_000), None);
        // A third CPU takes it over.
        assert_eq!(l.write(2, 33_000), Some(0));
        assert_eq!(l.write(0, 34_000), Some(2));
    }

    /// Writes of one line by `cpus` in turn, 20 µs apart: the time each
    /// write waited for the line.
    fn ping_pong(spec: &str, cpus: &[usize]) -> Vec<u64> {
        let mut k = crate::kernel::test_kernel_of(spec);
        let mut t = 0;
        cpus.iter()
            .map(|&cpu| {
                t += 20_000;
                crate::kernel::test_at(&mut k, cpu, t);
                k.write_line(Line::MemcgCounter(1), Fn::MemcgCharge, 100);
                k.pending_ns
            })
            .collect()
    }

    #[test]
    fn a_line_from_another_socket_costs_cross_socket_times_more() {
        // Two sockets of two cores: CPUs 0-1 and 2-3.
        let spec = "[machine]\nmemory = \"256M\"\ncpus = 4\nsockets = 2\n\
                    cores_per_socket = 2\n[task.t]\nsteps = []\n";
        let cross = 100 * crate::cost_model::CROSS_SOCKET_PERMILLE / 1000;
        assert_eq!(
            ping_pong(spec, &[0, 1, 0, 2, 3, 0, 0]),
            [0, 100, 100, cross, 100, cross, 0]
        );
        // One socket: every move costs the same.
        let flat = "[machine]\nmemory = \"256M\"\ncpus = 4\n[task.t]\nsteps = []\n";
        assert_eq!(
            ping_pong(flat, &[0, 1, 0, 2, 3, 0]),
            [0, 100, 100, 100, 100, 100]
        );
    }

    /// `cpu` writes a contended line at `t` (the line last another's):
    /// the time its write took.
    fn write_at(k: &mut Kernel, cpu: usize, t: u64) -> u64 {
        crate::kernel::test_at(k, cpu, t);
        k.write_line(Line::MemcgCounter(1), Fn::MemcgCharge, 100);
        k.pending_ns
    }

    #[test]
    fn writers_meeting_on_a_line_queue_for_it() {
        let mut k = crate::kernel::test_kernel(4, "6.1");
        write_at(&mut k, 3, 0);
        // Three CPUs want it at 1,000: each waits for the transfers before.
        let waits: Vec<_> = (0..3).map(|cpu| write_at(&mut k, cpu, 1_000)).collect();
        assert_eq!(waits, [100, 200, 300]);
        // Apart in time, no one waits beyond the transfer.
        assert_eq!(write_at(&mut k, 3, 5_000), 100);
        assert_eq!(write_at(&mut k, 0, 6_000), 100);
    }

    #[test]
    fn the_cpu_whose_slice_runs_second_waits_for_an_overlapping_transfer() {
        let mut k = crate::kernel::test_kernel(2, "6.1");
        write_at(&mut k, 1, 0);
        // CPU 0's slice ran first: its transfer 1,050..1,150. CPU 1 wanted
        // the line at 1,000, first in time, but learns of the overlap only
        // now: it waits until 1,150.
        assert_eq!(write_at(&mut k, 0, 1_050), 100);
        assert_eq!(write_at(&mut k, 1, 1_000), 250);
        // Retired transfers make no one wait.
        k.lines.horizon = 2_000;
        assert_eq!(write_at(&mut k, 0, 1_000), 100);
    }
}

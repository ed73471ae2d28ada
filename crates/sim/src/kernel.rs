//! The simulated kernel's state: one struct, with the mechanisms in the
//! files the kernel would put them in (`impl Kernel` blocks under mm/).

use crate::cost_model::{self, NR_FNS};
use crate::mm::folio::*;
use crate::mm::lruvec::Lruvec;
use crate::mm::memcontrol::{Memcg, MemcgStock};
use crate::mm::mmap::{AnonVma, Mm, Vma};
use crate::mm::page_alloc::{Zone, ZoneType};
use crate::mm::swapfile::{SwapInfo, SwapSlotsCache};
use crate::vmstat::VmStat;
use mmsim_spec::{Features, Preset, Spec, Sysctl, Sysfs};
use std::collections::{BinaryHeap, HashMap};

/// Per simulated CPU state the kernel keeps per CPU.
#[derive(Default)]
pub struct Cpu {
    /// The lru_add folio batch (PAGEVEC_SIZE entries at most).
    pub lru_add: Vec<Pfn>,
    pub stock: MemcgStock,
    /// The same stock's bytes charged in advance to one memcg's objcg
    /// (`cached_objcg`, `nr_bytes`: memcontrol.rs `obj_cgroup_charge`).
    pub obj_stock: crate::mm::memcontrol::ObjStock,
    /// `drain_all_stock` queued a drain of this CPU's stock in a kworker
    /// there; it runs before the CPU's next scheduled entity.
    pub stock_drain_pending: bool,
    pub slots: SwapSlotsCache,
    /// `cpu_tlbstate.loaded_mm`: the user mm whose page tables the CPU
    /// has loaded (None: only the kernel's, before any task ran there).
    pub loaded_mm: Option<u32>,
    /// `cpu_tlbstate_shared.is_lazy`: a kernel thread or the idle task
    /// runs there on the loaded mm (tlb.rs).
    pub is_lazy: bool,
    /// `irq_tlb_count`: TLB-shootdown IPIs this CPU has taken.
    pub irq_tlb_count: u64,
    /// `irq_call_count`: call-function IPIs it has taken (KVM's kicks of a
    /// vCPU for a remote TLB flush, kvm.rs).
    pub irq_call_count: u64,
    /// Kicks that made the vCPU running here exit, whose exit is charged
    /// at the CPU's next slice (tlb.rs `run_pending_ipis`).
    pub kvm_kicks: u64,
    /// When each flush IPI sent to this CPU whose handler has not been
    /// charged arrived (tlb.rs `run_pending_ipis`).
    pub ipi_pending: Vec<u64>,
    /// The memory stalls entities ran in here since this CPU's last slice
    /// started, `[enter, leave)` each (a stall an entity runs across
    /// slices is cut at each switch), and the one open now (more than one
    /// CPU only): an IPI that arrived inside one interrupted a stall
    /// (tlb.rs `run_pending_ipis`).
    pub memstall_spans: Vec<(u64, u64)>,
    pub memstall_since: Option<u64>,
    /// Handlers of IPIs that interrupted a memory stall, charged inside one
    /// once the next entity is on the CPU (`charge_stalled_ipis`).
    pub ipi_stalled: u64,
    /// The socket (package) the CPU is in: a cache line coming from a CPU
    /// of another costs `cross_socket` (cacheline.rs).
    pub socket: u16,
}

/// Kernel-side state of a task (what `task_struct` carries for mm).
pub struct KTask {
    pub mm: u32,
    pub memcg: u16,
    /// `memcg_nr_pages_over_high`, settled on return to user space.
    pub nr_pages_over_high: u64,
    /// Work for the return to user space (the thread flags
    /// `exit_to_user_mode_loop` tests): `TIF_NOTIFY_RESUME` (memory.high
    /// debt), `TIF_SIGPENDING` (SIGKILL). One test per access while none.
    pub ti_work: u8,
    /// When the pending SIGKILL was sent: another CPU's slice may run
    /// behind the sender's clock (within a quantum), and a task does not
    /// act on a signal before it was sent.
    pub sigkill_at: u64,
    /// A fault being retried: when it first started and whether an attempt
    /// was major; whether an attempt read from swap.
    pub fault_start: Option<(u64, bool)>,
    pub fault_read: bool,
    /// The fault slept inside (a shmem swap-in waiting for its read): its
    /// continuation does not count as another fault.
    pub fault_waited: bool,
    /// Attempts of the fault being retried so far (see
    /// `memory::MAX_FAULT_ATTEMPTS`).
    pub fault_attempts: u32,
    /// `signal->oom_score_adj`.
    pub oom_score_adj: i16,
    /// The thread-group leader's task (itself for a process).
    pub tgid: usize,
    /// It has exited (its mm gone, or left to its process).
    pub exited: bool,
    /// Its fault sleeps, since this time, until the OOM killer's victims
    /// have exited.
    pub oom_wait: Option<u64>,
    /// Its pressure-stall state.
    pub psi: crate::sched::psi::PsiTask,
}

impl KTask {
    /// SIGKILL pending (an OOM victim): it exits at its next return to
    /// user space. The flag stays set until then.
    #[inline]
    pub fn sigkill(&self) -> bool {
        self.ti_work & TIF_SIGPENDING != 0
    }
}

/// `KTask::ti_work`: memory.high debt to settle.
pub const TIF_NOTIFY_RESUME: u8 = 1 << 0;
/// `KTask::ti_work`: a fatal signal (an OOM kill) to act on.
pub const TIF_SIGPENDING: u8 = 1 << 1;

/// Content-integrity results.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Integrity {
    pub pages_checked: u64,
    pub violations: u64,
    /// Times the invariant checker ran (`--check`) and found them held.
    pub invariant_checks: u64,
}

/// `Kernel::cpu_scale` of a CPU whose SMT siblings idle.
pub const CPU_SCALE_ALONE: u64 = 1024;

pub struct Kernel {
    /// What each primitive costs (the run's machine profile).
    pub costs: crate::machine_profile::Costs,
    pub features: Features,
    /// The release whose decisions the model follows where they are not
    /// a seed feature (`machine.kernel`).
    pub preset: mmsim_spec::Preset,
    /// What that release changes on the paths mmsim models (its table in
    /// release.rs): the mm/ code asks it where the releases part.
    pub release: crate::release::Release,
    /// `arch_has_hw_pte_young`: the MMU sets accessed bits (spec
    /// `machine.hw_pte_young`).
    pub hw_pte_young: bool,
    /// `machine.stats_flush_phase`: where the memcg statistics flush
    /// worker is in its period when the workload starts.
    pub stats_flush_phase: u64,
    /// A guest's kernel (`[vm.NAME]`): the frames its accesses and the
    /// allocator's fills touched, in order, for its VMM to make on the
    /// host (vm.rs). None on a machine of its own.
    pub frame_log: Option<FrameLog>,
    /// Where a guest kernel's own metadata lies, for the log.
    pub guest_meta: GuestMeta,
    /// A guest's requests to its virtio-blk devices, in submission order,
    /// for its VMM's I/O thread to make on the host files backing them.
    pub blk_log: Option<Vec<crate::vm::BlkIo>>,
    /// The host's side of a guest's virtio-blk devices, which completes
    /// their requests (dev/virtio_host.rs): lent for each slice.
    pub host_io: Option<crate::dev::virtio_host::HostIo>,
    pub sysctl: Sysctl,
    pub sysfs: Sysfs,
    pub folios: FolioTable,
    pub zones: Vec<Zone>,
    pub vm: VmStat,
    pub memcgs: Vec<Memcg>,
    /// Reclaim's batched uncharges and when other CPUs see them.
    pub uncharge_list: crate::mm::memcontrol::UnchargeList,
    pub lruvecs: Vec<Lruvec>,
    pub swap: Vec<SwapInfo>,
    /// The page contents regions stated (`mm/page_content.rs`).
    pub contents: crate::mm::page_content::PageContents,
    /// What zram makes of each content kind, per swap device and kind id
    /// (resolved from the profile before the run; empty: no content).
    pub zram_kind_costs: Vec<Vec<crate::machine_profile::KindCost>>,
    /// zswap (`mm/zswap.rs`).
    pub zswap: crate::mm::zswap::Zswap,
    /// The shrinkers' deferred work (`mm/shrinker.rs`).
    pub shrinker: crate::mm::shrinker::Shrinkers,
    /// swapfile.c's globals (free and total slots, the mmlist …).
    pub swapfile: crate::mm::swapfile::Globals,
    /// Time syscalls spent waiting for I/O inside a step (swapoff).
    pub io_wait_ns: u64,
    pub mms: Vec<Mm>,
    pub vmas: Vec<Vma>,
    pub anon_vmas: Vec<AnonVma>,
    /// shmem inodes: the spec's tmpfs files first, then shared anonymous
    /// objects.
    pub inodes: Vec<crate::mm::filemap::Inode>,
    /// `[[disk]]`s holding the regular files.
    pub disks: Vec<crate::mm::filemap::Disk>,
    pub cpus: Vec<Cpu>,
    pub cur_cpu: usize,
    /// Which pages each CPU's L2 holds (l2cache.rs); None where the
    /// profile does not model it.
    pub l2: Option<Box<crate::l2cache::L2Cache>>,
    /// Each socket's memory bandwidth and what its CPUs draw (membw.rs).
    pub membw: crate::membw::MemBw,
    pub tasks: Vec<KTask>,
    /// The task on whose behalf the kernel runs now (None: kswapd).
    pub cur_task: Option<usize>,
    /// Simulated time the current context has consumed and not yet been
    /// charged to its clock.
    pub pending_ns: u64,
    /// The current context's clock when it was last scheduled.
    pub clock_base: u64,
    /// How long the current context's CPU work takes against a lone
    /// thread's, in 1024ths: more than 1024 while an SMT sibling of its
    /// CPU is busy (set by the scheduler for each slice).
    cpu_scale: u64,
    /// Set when a task wakes kswapd: the time of the wakeup.
    pub kswapd_wake_at: Option<u64>,
    /// Simulated time charged to each kernel function (`cost_model::Fn`),
    /// flat: the output's `profile`.
    pub fn_time_ns: [u64; NR_FNS],
    /// The same time by call path (user accesses' time apart, below): the
    /// output's `profile_tree`.
    pub call_paths: crate::call_paths::CallPaths,
    /// Time of user accesses, charged outside `call_paths` (`charge_user`).
    pub user_access_ns: u64,
    pub integrity: Integrity,
    pub hist: crate::histogram::Histograms,
    pub kswapd: crate::mm::vmscan::Kswapd,
    /// vm.min_free_kbytes in force.
    pub min_free_kbytes: u64,
    /// Scratch lists for reclaim, reused to avoid allocation.
    pub scratch: Vec<Vec<Pfn>>,
    /// The current context's block plug: bios gathered, nesting depth.
    pub plug: Vec<crate::mm::page_io::Bio>,
    pub plug_depth: u32,
    /// Pending I/O completions, earliest first, and their sequence counter.
    pub io_events: BinaryHeap<crate::mm::page_io::IoEvent>,
    pub io_seq: u64,
    /// Completion time of each locked folio whose read is in flight.
    /// Consulted only on the fault path when a folio is locked.
    pub io_wait: HashMap<Pfn, u64>,
    /// `current->tlb_ubc`: reclaim's deferred flush (tlb.rs).
    pub tlb_ubc: crate::mm::tlb::TlbUbc,
    /// Every mm's mmap_lock write holds that a fault on another CPU may
    /// still meet (mmap_lock.rs).
    pub mmap_locks: crate::mm::mmap_lock::MmapLocks,
    /// The cache lines CPUs share, by what they belong to (cacheline.rs);
    /// empty with one CPU.
    pub lines: crate::cacheline::SharedLines,
    /// vmstat's per-CPU differentials (mm/vmstat_pcp.rs); empty with one
    /// CPU.
    pub stat_diffs: crate::mm::vmstat_pcp::StatDiffs,
    /// The memcg statistics' rstat flush state (mm/memcg_rstat.rs).
    pub rstat: crate::mm::memcg_rstat::MemcgRstat,
    /// `release_pages`' lruvec lock across a TLB gather's frees (swap.rs).
    pub release_batch: crate::mm::swap::ReleaseBatch,
    /// Some CPU's `stock_drain_pending` is set (memcontrol.rs).
    pub stock_drains_pending: bool,
    /// What the fault or zap in progress carries between its functions.
    pub fault: crate::mm::memory::FaultCtx,
    /// Cluster swap readahead's global state (swap_state.c's).
    pub swap_ra: crate::mm::swap_state::Readahead,
    /// Some shmem can get large folios (a tmpfs `huge=` other than never,
    /// shmem_enabled above never, or a per-size knob on): shmem faults
    /// then leave the PTE table to `finish_fault`.
    pub shmem_thp_possible: bool,
    /// The reclaim algorithm, chosen at boot (`lru_gen_enabled()`).
    pub lru_algo: crate::mm::lruvec::LruAlgo,
    /// The multi-gen LRU's capabilities, min_ttl and reclaimer walk.
    pub lru_gen: crate::mm::lru_gen::LruGenCtl,
    /// Accesses set the accessed bit of the PMD entry above their PTE
    /// table (PG_PMD_YOUNG): only the multi-gen LRU's page-table walk with
    /// non-leaf young bits (0x0006 on an MMU with accessed bits) reads it.
    pub track_pmd_young: bool,
    /// Set where the kernel would do what mmsim does not model outside a
    /// task's own call chain (kswapd's min_ttl OOM kill): the run stops
    /// with it.
    pub unmodelled: Option<String>,
    /// The OOM killer's kills, and those the scheduler has yet to end.
    pub oom: crate::mm::oom_kill::OomState,
    /// Pressure stall information of the machine and the cgroups.
    pub psi: crate::sched::psi::Psi,
    /// Anonymous THP's sysfs flags in force.
    pub thp: crate::mm::huge_anon::ThpCtl,
    /// huge_memory.c's globals: the huge zero page, the deferred split
    /// queue.
    pub huge: crate::mm::huge_anon::HugeState,
    /// The khugepaged thread's list of mms and scan cursor.
    pub khugepaged: crate::mm::khugepaged::Khugepaged,
    /// A private anonymous fault may allocate a large folio (THP or mTHP):
    /// regions start 2 MiB-aligned.
    pub anon_large_possible: bool,
    /// The VMs whose RAM is a mapping of this (the host's) kernel, run
    /// under KVM (kvm.rs): each one's EPT.
    pub kvm: Vec<crate::kvm::Kvm>,
}

/// Boot-time reservation of the 6.1 kernel outside the page allocator:
/// the memmap (64 bytes per 4 KiB page) plus the kernel image, firmware
/// areas and early allocations. Measured on Debian's 6.1.0-56-amd64 under
/// QEMU (pc machine, default CPU model, 1 CPU): MemTotal 468416 kB at
/// -m 512M, 983744 kB at 1G, 2014400 kB at 2G, i.e. memory/64 plus
/// 46.7, 47.3 and 48.8 MiB: 46 MiB plus 1.4 MiB per GiB.
/// Each CPU beyond the first reserves its per-CPU areas: 248 kB measured
/// (MemTotal at -smp 2 vs -smp 1, 512M).
/// Other releases' MemTotal differs from 6.1's by a constant, measured
/// the same way (median over the fidelity suite's recorded runs, at 256M
/// to 1G, 1 and 2 CPUs: the same to 12 kB at every size): 5.10's is
/// 3960 kB larger, 6.12's 7044 kB, 7.3's 500 kB.
pub fn boot_reserved_bytes(memory: u64, cpus: u32, preset: Preset) -> u64 {
    let more_total_kb = match preset {
        Preset::V5_10 => 3960,
        Preset::V6_1 => 0,
        Preset::V6_12 => 7044,
        Preset::V7_3 => 500,
    };
    memory / 64 + (46 << 20) + memory * 14 / 10 / 1024 + (cpus.max(1) as u64 - 1) * 248 * 1024
        - more_total_kb * 1024
}

/// Memory the booted kernel uses before the workload starts (slab, per-CPU
/// areas, kernel stacks, the initramfs in rootfs), measured as MemTotal −
/// MemFree in the oracle's guest before zram is set up: 31.3 MiB at
/// 512M, 32.6 MiB at 1G, 33.5 MiB at 2G, i.e. 31.3 MiB plus 1.1 MiB per
/// doubling; plus zram's table of 16 bytes per slot once it is set up.
/// Other releases use a constant more or less at the start, measured
/// as MemTotal − MemFree when the workload starts, against 6.1's at the
/// same memory size: the median over the recorded runs of the anonymous
/// memory specs on zram (anon_seq, anon_zipf, fork_cow, fork_reuse,
/// madv_pageout, memory_high, the swappiness specs): 5.10 uses 6000 kB
/// less (those specs spread from -7500 to -5700), 6.12 1400 kB less
/// (-5500 to +2200), 7.3 9500 kB more (+3700 to +10600).
pub fn boot_used_bytes(spec: &Spec) -> u64 {
    let zram_table: u64 = spec.swap.iter().map(|s| s.size / 4096 * 16).sum();
    let doublings = (spec.machine.memory as f64 / (512u64 << 20) as f64).log2();
    let more_kb = match spec.machine.kernel {
        Preset::V5_10 => -6000.0,
        Preset::V6_1 => 0.0,
        Preset::V6_12 => -1400.0,
        Preset::V7_3 => 9500.0,
    };
    let mib = 31.3 + 1.1 * doublings + more_kb / 1024.0;
    (mib.max(16.0) * (1u64 << 20) as f64) as u64 + zram_table
}

/// Pages the RAM disks (`[[disk]]` device "ram": brd) hold when the
/// workload starts. brd allocates a page for every 4 KiB of the disk that
/// is written and keeps it — unreclaimable, on no LRU, charged to no
/// memcg — until the disk goes. By then mkfs has written the file
/// system's metadata and the oracle every file in full. Measured in the
/// oracle's 6.1 guest as MemFree before the disk's mkfs less MemFree once
/// its files were written, synced and the caches dropped, against the
/// same spec on a virtio disk (which cancels the guest's own drift of
/// ~2800 pages over that time):
/// - XFS (mkfs.xfs 6.1): it zeroes its whole internal log, max(size/2048,
///   64 MiB), and writes about 1 MiB more (128 KiB zeroed at each end of
///   the device, allocation-group headers and btree roots, the root
///   inode chunk): 16636 pages at 300 MiB and 16683 at 1 GiB, so the log
///   plus 256 pages here.
/// - ext2 (busybox mke2fs 1.35): 1955 pages at 256 MiB, 4026 at 1 GiB, so
///   1265 pages plus 2.7 pages per MiB of disk (a line through the two
///   points: the block groups' bitmaps, descriptors and the inode-table
///   blocks it writes), plus the files' indirect blocks, one per 1024
///   data blocks.
/// - every file page: a 64 MiB file added 16384 pages, a 16 MiB one 4096,
///   within the measurement's noise of a few hundred pages.
pub fn brd_pages(spec: &Spec) -> u64 {
    let mut pages = 0;
    for (d, disk) in spec.disks.iter().enumerate() {
        if disk.kind != mmsim_spec::SwapKind::Ram {
            continue;
        }
        let files: u64 = spec
            .files
            .iter()
            .filter(|f| f.on == mmsim_spec::FileOn::Disk(d))
            .map(|f| f.size / 4096)
            .sum();
        let metadata = match disk.fs {
            mmsim_spec::Fs::Xfs => (disk.size / 2048).max(64 << 20) / 4096 + 256,
            mmsim_spec::Fs::Ext2 => 1265 + (disk.size >> 20) * 27 / 10 + files / 1024,
        };
        pages += files + metadata;
    }
    pages
}

/// Pages the kernel frees after the boot-time watermark computation (init
/// sections and the like): measured as MemTotal − lowmem_kbytes implied by
/// min_free_kbytes (int_sqrt(16 × lowmem_kbytes)) on 6.1.0-56-amd64 at
/// -m 512M: 468416 kB − 464102 kB = 4.2 MiB.
const INIT_FREED_PAGES: u64 = 1079;

/// DMA zone: the first 16 MiB, less the first MiB of firmware areas.
const DMA_MANAGED_PAGES: u64 = 3840;
/// DMA32 ends at 3 GiB of RAM on QEMU's pc machine (the PCI hole above).
const DMA32_END_BYTES: u64 = 3 << 30;

impl Kernel {
    /// The price of copying frame `src` whole on this CPU, and the DRAM
    /// bytes its reading moves (membw.rs): `copy_page`, or `copy_page_l2`
    /// and none where the profile models the L2 and `src` is in this
    /// CPU's (l2cache.rs). The source is resident afterwards.
    #[inline]
    pub(crate) fn copy_page_cost(&mut self, src: Pfn) -> (u64, u64) {
        let cpu = self.cur_cpu;
        match self
            .l2
            .as_deref_mut()
            .map(|l2| (l2.fill(cpu, src), l2.copy_ns))
        {
            Some((true, l2_ns)) => (l2_ns, 0),
            _ => (self.costs.copy_page, crate::membw::PAGE_BYTES),
        }
    }

    /// This CPU read frames `[pfn, pfn + nr)` whole (compression's
    /// source): they enter its L2.
    #[inline]
    pub(crate) fn l2_read(&mut self, pfn: Pfn, nr: u32) {
        if let Some(l2) = self.l2.as_deref_mut() {
            for p in pfn..pfn + nr {
                l2.fill(self.cur_cpu, p);
            }
        }
    }

    /// This CPU wrote frames `[pfn, pfn + nr)` whole (a clear, a copy's
    /// destination, a decompression): they enter its L2 and leave every
    /// other CPU's.
    #[inline]
    pub(crate) fn l2_write(&mut self, pfn: Pfn, nr: u32) {
        if let Some(l2) = self.l2.as_deref_mut() {
            for p in pfn..pfn + nr {
                l2.fill(self.cur_cpu, p);
                l2.invalidate_others(Some(self.cur_cpu), p);
            }
        }
    }

    /// A device wrote frames `[pfn, pfn + nr)` (a read's DMA): no CPU's L2
    /// holds them any more.
    #[inline]
    pub(crate) fn l2_dma(&mut self, pfn: Pfn, nr: u32) {
        if let Some(l2) = self.l2.as_deref_mut() {
            for p in pfn..pfn + nr {
                l2.invalidate_others(None, p);
            }
        }
    }

    /// `n` user accesses on this CPU: a line each (l2cache.rs).
    #[inline]
    pub(crate) fn l2_user_lines(&mut self, n: u64) {
        if let Some(l2) = self.l2.as_deref_mut() {
            l2.user_lines(self.cur_cpu, n);
        }
    }

    /// A guest kernel's access of its frame `pfn` (a read, or a write):
    /// logged for the VMM to make on the host (vm.rs). Nothing on a
    /// machine of its own.
    /// The kernel touches the frame through its own paths (it holds a
    /// reference, sets flags, locks it), so its struct page is written
    /// first.
    #[inline(always)]
    pub(crate) fn guest_frame(&mut self, pfn: Pfn, write: bool) {
        if self.frame_log.is_some() {
            self.guest_frame_log(pfn, write);
        }
    }

    /// `guest_frame`'s logging, out of line: a machine of its own pays one
    /// test.
    #[cold]
    fn guest_frame_log(&mut self, pfn: Pfn, write: bool) {
        if let Some(log) = &mut self.frame_log {
            let meta = &mut self.guest_meta;
            if meta.memmap != crate::mm::folio::NIL {
                meta.touch(log, meta.memmap + pfn / STRUCT_PAGES_PER_PAGE, true);
            }
            log_frame(log, pfn, write);
        }
    }

    /// Boots the spec's machine. Err: the host cannot reserve the frame
    /// table's address space (the table is committed only as it is used).
    pub fn new(
        spec: &Spec,
        costs: crate::machine_profile::Costs,
    ) -> Result<Kernel, crate::SimError> {
        let cpus = spec.machine.cpus as usize;
        let (zones, managed) = boot_zones(spec);
        let memcgs = boot_memcgs(spec);
        let parents: Vec<Option<u16>> = memcgs.iter().map(|m| m.parent).collect();
        let nmemcg = memcgs.len();
        let mut k = Kernel {
            features: spec.features,
            preset: spec.machine.kernel,
            release: crate::release::Release::of(spec.machine.kernel),
            hw_pte_young: spec.machine.hw_pte_young,
            stats_flush_phase: spec.machine.stats_flush_phase,
            frame_log: None,
            guest_meta: GuestMeta::default(),
            blk_log: None,
            host_io: None,
            lru_algo: if spec.sysfs.lru_gen & crate::mm::lru_gen::LRU_GEN_CORE != 0 {
                crate::mm::lruvec::LruAlgo::MultiGen
            } else {
                crate::mm::lruvec::LruAlgo::Classic
            },
            lru_gen: crate::mm::lru_gen::LruGenCtl {
                caps: spec.sysfs.lru_gen,
                // msecs_to_jiffies rounds up.
                min_ttl: (spec.sysfs.lru_gen_min_ttl_ms as u64 * crate::mm::memcontrol::HZ)
                    .div_ceil(1000),
                ..Default::default()
            },
            track_pmd_young: spec.machine.hw_pte_young && {
                use crate::mm::lru_gen::{LRU_GEN_CORE, LRU_GEN_MM_WALK, LRU_GEN_NONLEAF_YOUNG};
                let all = LRU_GEN_CORE | LRU_GEN_MM_WALK | LRU_GEN_NONLEAF_YOUNG;
                spec.sysfs.lru_gen & all == all
            },
            unmodelled: None,
            oom: Default::default(),
            psi: crate::sched::psi::Psi::new(
                &parents,
                spec.machine.cpus as usize,
                crate::release::Release::of(spec.machine.kernel).psi_memstall_running,
            ),
            // boot_watermarks sets it once the machine's size is known.
            thp: crate::mm::huge_anon::ThpCtl::new(&spec.sysfs, true, spec.features.anon_mthp),
            huge: Default::default(),
            khugepaged: Default::default(),
            anon_large_possible: spec.sysfs.anon_large_possible(spec.features.anon_mthp),
            kvm: Vec::new(),
            sysctl: spec.sysctl,
            sysfs: spec.sysfs,
            folios: FolioTable::new(managed as u32).map_err(|e| {
                crate::SimError::Spec(format!(
                    "key `machine.memory`: the host cannot reserve the address space for {managed} frames ({e}); expected a smaller machine.memory"
                ))
            })?,
            zones,
            vm: VmStat::default(),
            memcgs,
            lruvecs: vec![Lruvec::default(); nmemcg],
            swap: Vec::new(),
            contents: Default::default(),
            zram_kind_costs: Vec::new(),
            zswap: crate::mm::zswap::Zswap::new(spec.sysfs.zswap),
            shrinker: Default::default(),
            swapfile: Default::default(),
            io_wait_ns: 0,
            mms: Vec::new(),
            vmas: Vec::new(),
            anon_vmas: Vec::new(),
            inodes: Vec::new(),
            disks: Vec::new(),
            cpus: (0..cpus)
                .map(|c| Cpu {
                    socket: spec.machine.topology.socket_of(c) as u16,
                    ..Cpu::default()
                })
                .collect(),
            cur_cpu: 0,
            l2: None,
            membw: crate::membw::MemBw::new(0, cpus, 1),
            tasks: Vec::new(),
            cur_task: None,
            pending_ns: 0,
            cpu_scale: CPU_SCALE_ALONE,
            clock_base: 0,
            kswapd_wake_at: None,
            costs,
            fn_time_ns: [0; NR_FNS],
            call_paths: Default::default(),
            user_access_ns: 0,
            integrity: Integrity::default(),
            hist: Default::default(),
            kswapd: Default::default(),
            min_free_kbytes: 0,
            scratch: Vec::new(),
            plug: Vec::new(),
            plug_depth: 0,
            io_events: BinaryHeap::new(),
            io_seq: 0,
            io_wait: HashMap::new(),
            swap_ra: Default::default(),
            fault: Default::default(),
            tlb_ubc: Default::default(),
            mmap_locks: Default::default(),
            lines: Default::default(),
            stat_diffs: Default::default(),
            rstat: Default::default(),
            release_batch: Default::default(),
            stock_drains_pending: false,
            uncharge_list: Default::default(),
            shmem_thp_possible: spec.files.iter().any(|f| {
                f.on == mmsim_spec::FileOn::Tmpfs && f.huge != mmsim_spec::TmpfsHuge::Never
            }) || spec.sysfs.shmem_enabled.is_some_and(|w| w.allows_large())
                || (spec.features.shmem_mthp
                    && spec
                        .sysfs
                        .shmem_mthp
                        .iter()
                        .any(|&w| w != mmsim_spec::MthpShmem::Never)),
        };
        k.free_all_at_boot(managed as Pfn);
        k.boot_disks_and_files(spec);
        k.boot_watermarks(spec);
        k.boot_kernel_usage(boot_used_bytes(spec) / 4096);
        // The RAM disks' pages (brd), allocated while the oracle set them up.
        k.boot_kernel_usage(brd_pages(spec));
        for s in &spec.swap {
            k.swapon_at_boot(s);
        }
        k.pending_ns = 0;
        k.fn_time_ns = [0; NR_FNS];
        k.call_paths = Default::default();
        k.user_access_ns = 0;
        k.vm = {
            // Boot allocations are not part of any run's counters.
            let mut v = VmStat::default();
            v.add(crate::vmstat::Vm::NrFreePages, k.nr_free_pages() as i64);
            v
        };
        k.zero_stat_diffs();
        k.memcg_rstat_init();
        Ok(k)
    }

    /// Debian's 6.1 boots with THP "always", so khugepaged raises
    /// min_free_kbytes; writing "never" (as the oracle does) recomputes it
    /// from the watermarks then in force. An explicit vm.min_free_kbytes
    /// is applied last, as sysctl does.
    fn boot_watermarks(&mut self, spec: &Spec) {
        // init_per_zone_wmark_min runs before the kernel frees its init
        // sections, so it sees fewer managed pages than MemTotal later
        // shows; the watermarks are not recomputed when those pages come.
        let z = self.zones.len() - 1;
        let absent = INIT_FREED_PAGES.min(self.zones[z].managed / 2);
        self.zones[z].managed -= absent;
        let base = self.calculate_min_free_kbytes();
        self.setup_per_zone_wmarks(base);
        self.refresh_zone_stat_thresholds();
        self.zones[z].managed += absent;
        self.min_free_kbytes = base;
        // hugepage_init leaves THP off on machines under 512 MiB of RAM, and
        // then khugepaged never raises the watermarks.
        let managed: u64 = self.zones.iter().map(|z| z.managed).sum();
        let big_enough = managed >= 512 << 8;
        self.thp =
            crate::mm::huge_anon::ThpCtl::new(&spec.sysfs, big_enough, spec.features.anon_mthp);
        let thp_on = spec.sysfs.thp_enabled != mmsim_spec::ThpEnabled::Never;
        if big_enough || thp_on {
            // set_recommended_min_free_kbytes, at boot and again on the
            // oracle's write to `enabled` (which starts khugepaged on a
            // small machine too): raised while THP is on, recomputed from
            // scratch once it is off.
            let raised = self.thp_recommended_min_free_kbytes().max(base);
            self.setup_per_zone_wmarks(raised);
            self.min_free_kbytes = raised;
            if !thp_on {
                self.min_free_kbytes = self.calculate_min_free_kbytes();
                self.setup_per_zone_wmarks(self.min_free_kbytes);
            }
        }
        if let Some(kb) = spec.sysctl.min_free_kbytes {
            self.min_free_kbytes = kb;
            self.setup_per_zone_wmarks(kb);
        }
    }

    /// A `set` step: the write to the knob's file, with what the kernel's
    /// handler does on it (a lower memory.max or memory.high reclaims down
    /// to it; new watermark settings recompute the zones' watermarks).
    pub fn write_setting(&mut self, s: &mmsim_spec::Setting) -> Result<(), crate::SimError> {
        use mmsim_spec::Setting;
        match s {
            Setting::MemoryMax { cgroup, limit } => {
                let m = self
                    .memcg_by_name(cgroup)
                    .expect("the parser checked the cgroup");
                self.memory_max_write(m, limit.pages())?;
            }
            Setting::MemoryHigh { cgroup, limit } => {
                let m = self
                    .memcg_by_name(cgroup)
                    .expect("the parser checked the cgroup");
                self.memory_high_write(m, limit.pages());
            }
            Setting::MemorySwapMax { cgroup, limit } => {
                let m = self
                    .memcg_by_name(cgroup)
                    .expect("the parser checked the cgroup");
                // swap_max_write: an xchg, nothing reclaimed or freed.
                self.memcgs[m as usize].swap.max = limit.pages();
            }
            Setting::Swappiness(n) => self.sysctl.swappiness = *n,
            Setting::PageCluster(n) => self.sysctl.page_cluster = *n,
            Setting::PercpuPagelistHighFraction(n) => {
                // percpu_pagelist_high_fraction_sysctl_handler: every
                // zone's lists resized (zone_pcp_update).
                self.sysctl.percpu_pagelist_high_fraction = *n;
                self.setup_per_zone_wmarks(self.min_free_kbytes);
            }
            Setting::WatermarkScaleFactor(n) => {
                self.sysctl.watermark_scale_factor = *n;
                self.setup_per_zone_wmarks(self.min_free_kbytes);
            }
            Setting::MinFreeKbytes(kb) => {
                self.sysctl.min_free_kbytes = Some(*kb);
                self.min_free_kbytes = *kb;
                self.setup_per_zone_wmarks(*kb);
            }
            Setting::VmaRaEnabled(b) => self.sysfs.vma_ra_enabled = *b,
        }
        Ok(())
    }

    fn boot_kernel_usage(&mut self, pages: u64) {
        for _ in 0..pages {
            match self.alloc_page(crate::mm::page_alloc::Gfp::NoDirectReclaim) {
                Some(p) => self.folios.get_mut(p).set(PG_KERNEL),
                None => break,
            }
        }
    }

    /// Accounts simulated CPU time to the current context and the profile:
    /// `ns` of a lone thread's work, longer while an SMT sibling is busy.
    #[inline]
    pub fn charge_cost(&mut self, f: cost_model::Fn, ns: u64) {
        let ns = self.scaled(ns);
        self.charge_wall(f, ns);
    }

    /// Accounts `ns` of elapsed time that is not CPU work (a sleep in a
    /// syscall): SMT does not stretch it.
    #[inline]
    pub fn charge_wall(&mut self, f: cost_model::Fn, ns: u64) {
        self.pending_ns += ns;
        self.fn_time_ns[f as usize] += ns;
        self.call_paths.charge(f, ns);
    }

    /// Sets the current slice's CPU speed: a busy SMT sibling leaves each
    /// of the core's two threads `smt_throughput` / 2 of a lone one's.
    pub fn set_sibling_busy(&mut self, busy: bool) {
        self.cpu_scale = match busy {
            false => CPU_SCALE_ALONE,
            true => CPU_SCALE_ALONE * 2000 / self.costs.smt_throughput.max(1000),
        };
    }

    /// A lone thread's `ns` of work on the current CPU.
    #[inline]
    pub(crate) fn scaled(&self, ns: u64) -> u64 {
        if self.cpu_scale == CPU_SCALE_ALONE {
            return ns;
        }
        ns * self.cpu_scale / CPU_SCALE_ALONE
    }

    /// The work a lone thread does in `wall` ns of the current CPU.
    pub fn work_in(&self, wall: u64) -> u64 {
        if self.cpu_scale == CPU_SCALE_ALONE {
            return wall;
        }
        wall * CPU_SCALE_ALONE / self.cpu_scale
    }

    /// A user access's time: always at the root of the call tree, on the
    /// hottest path of all, so it skips the tree (the profile reads it
    /// from the flat counter).
    #[inline]
    pub fn charge_user(&mut self, ns: u64) {
        let ns = self.scaled(ns);
        self.pending_ns += ns;
        self.fn_time_ns[cost_model::Fn::User as usize] += ns;
        self.user_access_ns += ns;
    }

    /// Runs `body` as a call of kernel function `f` in the profile.
    #[inline]
    pub fn traced<R>(&mut self, f: cost_model::Fn, body: impl FnOnce(&mut Self) -> R) -> R {
        self.call_paths.enter(f);
        let r = body(self);
        self.call_paths.leave();
        r
    }

    /// The current context's simulated time. It stops at u64::MAX: a
    /// task asleep that long (picked last, there) may still exit, and a
    /// guest's VMM then tears its RAM down.
    pub fn now(&self) -> u64 {
        self.clock_base.saturating_add(self.pending_ns)
    }

    pub fn current_task_over_high(&mut self, pages: u64) {
        if let Some(t) = self.cur_task {
            self.tasks[t].nr_pages_over_high += pages;
            self.tasks[t].ti_work |= TIF_NOTIFY_RESUME;
        }
    }

    pub fn current_is_kswapd(&self) -> bool {
        self.cur_task.is_none()
    }
}

/// The machine's zones after boot: DMA, DMA32 and (on a machine larger
/// than 4 GiB) Normal, over the pages the kernel manages; and that count.
fn boot_zones(spec: &Spec) -> (Vec<Zone>, u64) {
    let memory = spec.machine.memory;
    let cpus = spec.machine.cpus as usize;
    let managed =
        (memory - boot_reserved_bytes(memory, spec.machine.cpus, spec.machine.kernel)) / 4096;
    let dma = DMA_MANAGED_PAGES.min(managed);
    let dma32_end = (DMA32_END_BYTES.min(memory)
        - boot_reserved_bytes(memory, spec.machine.cpus, spec.machine.kernel)
            .min(DMA32_END_BYTES.min(memory)))
        / 4096;
    let dma32 = dma32_end.saturating_sub(dma).min(managed - dma);
    let normal = managed - dma - dma32;
    let mut zones = vec![
        Zone::new(ZoneType::Dma, 0, dma as Pfn, cpus),
        Zone::new(ZoneType::Dma32, dma as Pfn, (dma + dma32) as Pfn, cpus),
    ];
    if normal > 0 {
        zones.push(Zone::new(
            ZoneType::Normal,
            (dma + dma32) as Pfn,
            managed as Pfn,
            cpus,
        ));
    }
    (zones, managed)
}

/// The root memcg and one child per spec cgroup, with its limits.
fn boot_memcgs(spec: &Spec) -> Vec<Memcg> {
    let mut memcgs = vec![Memcg::new("", None)];
    for cg in &spec.cgroups {
        let mut m = Memcg::new(&cg.name, Some(0));
        m.memory.max = cg.memory_max.pages();
        m.memory.high = cg.memory_high.pages();
        m.memory.min = cg.memory_min.pages().unwrap_or(u64::MAX);
        m.memory.low = cg.memory_low.pages().unwrap_or(u64::MAX);
        m.swap.max = cg.memory_swap_max.pages();
        m.zswap_max = cg.memory_zswap_max.pages();
        m.zswap_writeback = cg.memory_zswap_writeback;
        m.oom_group = cg.memory_oom_group;
        memcgs.push(m);
    }
    memcgs[0].has_children = memcgs.len() > 1;
    memcgs
}

impl Kernel {
    /// The spec's disks, then its files as inodes 0.. in their order.
    fn boot_disks_and_files(&mut self, spec: &Spec) {
        for d in &spec.disks {
            self.disks.push(crate::mm::filemap::Disk {
                bdev: crate::dev::blockdev::BlockDev::of_kind(d.kind, 0),
                ra_pages: d.read_ahead_kb / 4,
                next_block: 0,
                large_folios: match d.fs {
                    mmsim_spec::Fs::Xfs => self.release.xfs_large_folios,
                    mmsim_spec::Fs::Ext2 => self.release.ext4_large_folios,
                },
            });
        }
        // The spec's files are inodes 0.. in their order.
        for f in &spec.files {
            match f.on {
                mmsim_spec::FileOn::Tmpfs => self.shmem_inode_create(f.size / 4096, false, f.huge),
                mmsim_spec::FileOn::Disk(d) => self.disk_inode_create(f.size / 4096, d as u16),
            };
        }
    }
}

/// A unit test's machine: 256 MiB, `cpus` CPUs, the `preset` kernel, one
/// task with no steps, cost_model.rs's reference costs.
#[cfg(test)]
pub(crate) fn test_kernel(cpus: u32, preset: &str) -> Kernel {
    test_kernel_of(&format!(
        "[machine]\nmemory = \"256M\"\ncpus = {cpus}\nkernel = \"{preset}\"\n[task.t]\nsteps = []\n"
    ))
}

/// A kernel booted for the spec `text`, with the reference costs.
#[cfg(test)]
pub(crate) fn test_kernel_of(text: &str) -> Kernel {
    let spec = mmsim_spec::parse_str(text, "t.toml", &[]).expect("spec");
    Kernel::new(&spec, crate::machine_profile::Costs::REFERENCE).expect("boot")
}

/// Test kernel `k`'s CPU `cpu` runs at `t`, nothing yet charged.
#[cfg(test)]
pub(crate) fn test_at(k: &mut Kernel, cpu: usize, t: u64) {
    (k.cur_cpu, k.clock_base, k.pending_ns) = (cpu, t, 0);
}

/// Appends an access to a guest's frame log; repeats of the last frame
/// merge (a write covers a read), so a loop over one page is one host
/// access.
/// struct pages per page of a guest's memmap (64 bytes each on x86-64).
const STRUCT_PAGES_PER_PAGE: Pfn = 64;

/// A guest kernel's metadata in its own frames, which its paths touch
/// beside the frames they work on: its memmap (the struct pages, at the
/// start of the frames boot reserves) and the page tables a user access
/// walks (TCG's soft MMU reads them on a TLB miss).
/// Simplification: a touch of the metadata page the log touched last in
/// the slice is not logged again: the host made it young just before,
/// and only a host reclaim between the two (of a page it had just
/// found young) could tell them apart.
#[derive(Debug)]
pub struct GuestMeta {
    /// The memmap's first frame; NIL on a machine of its own, or where
    /// the reservation is too small to hold it.
    pub memmap: Pfn,
    /// The metadata page logged last in this slice (NIL: none yet).
    pub last: Pfn,
}

impl Default for GuestMeta {
    fn default() -> Self {
        GuestMeta {
            memmap: crate::mm::folio::NIL,
            last: crate::mm::folio::NIL,
        }
    }
}

impl GuestMeta {
    /// The memmap of a guest of `present` frames, `managed` of them
    /// managed: at the start of the rest.
    pub fn new(managed: Pfn, present: Pfn) -> Self {
        let fits = (present - managed) >= present.div_ceil(STRUCT_PAGES_PER_PAGE);
        GuestMeta {
            memmap: if fits { managed } else { crate::mm::folio::NIL },
            last: crate::mm::folio::NIL,
        }
    }

    /// Logs a touch of metadata page `pfn`, unless it was the last.
    #[inline]
    pub fn touch(&mut self, log: &mut FrameLog, pfn: Pfn, write: bool) {
        if pfn != self.last {
            self.last = pfn;
            log_frame(log, pfn, write);
        }
    }
}

/// A guest kernel's log of the frames its slice touched, for its VMM to
/// make on the host (vm.rs), with the host's map of guest RAM as the slice
/// began: the first access the host must handle (a host fault under TCG,
/// an EPT violation under KVM) ends the guest's slice after its op, as the
/// vCPU stops there until the host is done (sched/rq.rs `Slice::check`).
#[derive(Default)]
pub struct FrameLog {
    /// The accesses, in order.
    pub accesses: Vec<(Pfn, bool)>,
    /// The host's map of guest RAM, lent for the slice.
    pub host: HostMap,
    /// An access the host must handle is logged.
    pub exit: bool,
}

/// What a guest's access needs of its host, as the host's map stood when
/// the guest's slice began.
#[derive(Default)]
pub enum HostMap {
    /// Not known: no access ends the slice.
    #[default]
    Unknown,
    /// TCG: the VMM's PTEs of guest RAM (frame N at page N), and whether
    /// the host's MMU sets accessed bits (`Kernel::hw_pte_young`).
    Ptes(Vec<crate::mm::pgtable::Pte>, bool),
    /// KVM: the VM's SPTEs (kvm.rs).
    Ept(Vec<u8>),
}

impl HostMap {
    /// The access goes through without the host: the host's PTE lets it
    /// through, or the SPTE does.
    #[inline]
    fn lets_through(&self, pfn: Pfn, write: bool) -> bool {
        match self {
            HostMap::Unknown => true,
            HostMap::Ptes(ptes, hw_young) => (ptes.get(pfn as usize))
                .is_some_and(|&p| crate::mm::pgtable::pte_lets_through(p, write, *hw_young)),
            HostMap::Ept(sptes) => sptes
                .get(pfn as usize)
                .is_some_and(|&s| crate::kvm::spte_lets_through(s, write)),
        }
    }
}

/// Logs an access of guest frame `pfn`, merged with the last one when it
/// is of the same frame and adds nothing to it (a read after either, a
/// write after a write); a write after a read stays apart, as the host may
/// map the read's page read-only and then fault on the write. One the host
/// must handle marks the slice's exit.
#[inline]
pub(crate) fn log_frame(log: &mut FrameLog, pfn: Pfn, write: bool) {
    match log.accesses.last() {
        Some(&(last, was_write)) if last == pfn && (was_write || !write) => return,
        _ => log.accesses.push((pfn, write)),
    }
    if !log.exit && !log.host.lets_through(pfn, write) {
        log.exit = true;
    }
}

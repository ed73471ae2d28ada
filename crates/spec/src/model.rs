//! The validated spec: what both engines execute.

use crate::units::Limit;

#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The file the spec was read from (for messages and the output).
    pub file: String,
    pub machine: Machine,
    pub features: Features,
    pub sysctl: Sysctl,
    pub sysfs: Sysfs,
    /// Every knob in force, with the value it had, as `(key, value)` pairs
    /// whose key is `sysctl:NAME` (e.g. `sysctl:vm.swappiness`) or
    /// `sysfs:PATH` (e.g. `sysfs:kernel/mm/transparent_hugepage/enabled`):
    /// what the oracle applies and what an output records.
    pub knobs: Vec<(String, String)>,
    pub swap: Vec<SwapDevice>,
    /// `[[disk]]`: block devices holding an ext2 file system for files.
    pub disks: Vec<Disk>,
    /// `[[file]]`: files the tasks can map, created before they start.
    pub files: Vec<File>,
    pub cgroups: Vec<Cgroup>,
    pub tasks: Vec<Task>,
    /// `[fidelity]`: tolerances of the simulation against recorded
    /// real-kernel results. Engines ignore it.
    pub fidelity: Fidelity,
    /// `[vm.NAME]`: guests, each a spec of its own run by a VMM process on
    /// this (the host's) machine. Empty in a guest.
    pub vms: Vec<Vm>,
}

/// `[vm.NAME]`: a guest. Its RAM is an anonymous mapping of the VMM
/// process, a host task of the guest's name in `cgroup`.
#[derive(Debug, Clone, PartialEq)]
pub struct Vm {
    pub name: String,
    /// `[vm.NAME.host] cgroup`: index into the host's `Spec::cgroups`;
    /// None = the root cgroup.
    pub cgroup: Option<usize>,
    pub accel: Accel,
    /// `[vm.NAME.host] vmm_memory`: the VMM's own anonymous memory besides
    /// guest RAM and TCG's translation cache (QEMU's heap: its copies of
    /// the guest's kernel, initramfs and firmware, device and memory-map
    /// state, the vCPU's soft TLB), written as it starts and cold after.
    /// Default 27 MiB: QEMU 7.2 (Debian 12) booting Debian's 6.1 with
    /// the oracle's initramfs, anonymous memory outside guest RAM in
    /// /proc/PID/smaps once the guest kernel runs, before its first task
    /// (docs/model.md "Guests").
    pub vmm_memory: u64,
    /// `[vm.NAME.host] tb_size`: TCG's translation cache (QEMU's
    /// `-accel tcg,tb-size=`, which the native comparison passes):
    /// filled as the guest starts and executed from after every guest
    /// slice. Default 16 MiB; 0 under KVM, which has none.
    pub tb_size: u64,
    /// The guest's machine, kernel, swap, cgroups and tasks.
    pub guest: Box<Spec>,
    /// For each of the guest's `[[swap]]` devices and `[[disk]]`s, the
    /// host `[[file]]` backing it (virtio-blk on a host file; index into
    /// the host's `Spec::files`); None for zram.
    pub swap_files: Vec<Option<usize>>,
    pub disk_files: Vec<Option<usize>>,
}

/// A guest block device's host file (an index into the host's
/// `Spec::files`) and whether QEMU opens it O_DIRECT; None for zram.
pub type Backing = Option<(usize, bool)>;

impl Vm {
    /// For each of the guest's `[[swap]]` devices and `[[disk]]`s, the
    /// host file backing it and whether QEMU opens it O_DIRECT
    /// (`cache = "none"`).
    pub fn backings(&self) -> (Vec<Backing>, Vec<Backing>) {
        let direct = |c: HostCache| c == HostCache::None;
        let swap = (self.swap_files.iter().zip(&self.guest.swap))
            .map(|(f, s)| f.map(|f| (f, direct(s.host_cache))))
            .collect();
        let disk = (self.disk_files.iter().zip(&self.guest.disks))
            .map(|(f, d)| f.map(|f| (f, direct(d.host_cache))))
            .collect();
        (swap, disk)
    }

    /// The host's task that runs this guest (its VMM, QEMU): named after
    /// the guest, in its host cgroup, one instance, with `steps` (the
    /// simulator's model of QEMU; none for the native runner, whose task
    /// starts a real QEMU).
    pub fn vmm_task(&self, steps: Vec<Step>) -> Task {
        Task {
            name: self.name.clone(),
            cgroup: self.cgroup,
            instances: 1,
            oom_score_adj: 0,
            steps,
        }
    }
}

/// How the VMM runs guest code (`[vm.NAME.host] accel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// QEMU's TCG: a software MMU, whose loads and stores of guest RAM
    /// are the VMM's own user accesses of its mapping.
    Tcg,
    /// KVM: the guest runs on the CPU, reaching its RAM through the EPT
    /// (two-dimensional paging), which KVM fills from the VMM's page
    /// tables on each EPT violation and the host's MMU notifier empties.
    Kvm,
}

/// `[fidelity]`: relative tolerances, per counter (against the median of
/// the recorded QEMU runs) and per phase time (against the fastest
/// recorded native run).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fidelity {
    pub counters: Vec<(String, f64)>,
    pub times: Vec<(String, f64)>,
    /// Declared misses on a release: (preset, counter, why). The counter
    /// is shown against that kernel's recordings but not held to its
    /// tolerance there (`[fidelity.miss."5.10"] pgfault = "why"`).
    pub misses: Vec<(Preset, String, String)>,
}

impl Fidelity {
    /// Why `counter` is a declared miss on `preset`, if it is one.
    pub fn miss(&self, preset: Preset, counter: &str) -> Option<&str> {
        self.misses
            .iter()
            .find(|(p, c, _)| *p == preset && c == counter)
            .map(|(_, _, why)| why.as_str())
    }
}

impl Spec {
    /// Calls `f` with every step's op of every task, the bodies of
    /// `repeat`, `fork` and `spawn` included (each body once), in order.
    pub fn for_each_op<'a>(&'a self, f: &mut impl FnMut(&'a Op)) {
        for t in &self.tasks {
            for_each_op_in(&t.steps, f);
        }
    }

    /// The parameters brd must be loaded with for the spec's RAM disks:
    /// `rd_nr` one per RAM `[[disk]]`, `rd_size` the largest one's size in
    /// KiB (brd makes all its disks that size when it loads; a smaller
    /// disk's file system takes its first `size` bytes). None without RAM
    /// disks. The oracle passes it to insmod; the runner names it when a
    /// RAM disk is missing.
    pub fn brd_params(&self) -> Option<String> {
        let ram: Vec<u64> = self
            .disks
            .iter()
            .filter(|d| d.kind == SwapKind::Ram)
            .map(|d| d.size)
            .collect();
        let largest = ram.iter().max()?;
        Some(format!("rd_nr={} rd_size={}", ram.len(), largest / 1024))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// What the machine has (QEMU's -m), bytes.
    pub memory: u64,
    pub cpus: u32,
    /// How the CPUs are arranged (`sockets`, `cores_per_socket`,
    /// `threads_per_core`); their product is `cpus`.
    pub topology: Topology,
    /// Behaviour preset: the release whose mechanisms and counter names
    /// the simulator follows, and the kernel the oracle boots.
    pub kernel: Preset,
    /// The MMU sets a PTE's accessed bit itself (`arch_has_hw_pte_young`,
    /// x86 and arm64 with FEAT_HAFDBS). Without it (32-bit ARM, seed 002's
    /// test machine), an access through an old PTE traps and the fault
    /// handler makes the PTE young.
    pub hw_pte_young: bool,
    /// How far into its 2 s period the memcg statistics flush worker is
    /// when the workload starts (ns, under 2 s): its first periodic flush
    /// comes 2 s less this after the start.
    pub stats_flush_phase: u64,
    /// What each socket's memory delivers, MB/s (10^6 bytes), counted as
    /// STREAM counts it (bytes read plus bytes written); None: the
    /// machine profile's `mem_bw`, what two of its cores reach together,
    /// on sockets of at most two CPUs, and not modelled on larger ones.
    pub memory_bandwidth: Option<u64>,
    /// Line of `memory` in the spec file (0: from `--set`), for errors
    /// found after parsing (what the kernel's reservation leaves).
    pub memory_line: usize,
}

/// The machine's CPUs as sockets of cores of SMT threads. Numbered as
/// QEMU numbers its APIC IDs and Linux then its CPUs: thread fastest,
/// then core, then socket, so CPUs 2c and 2c+1 are one core's threads
/// at two threads per core. Without the keys: one socket, every CPU a
/// core of its own (QEMU's `-smp N` since its 6.2 machine types, and the
/// project's 2-vCPU machines as `lscpu` shows them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Topology {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
}

impl Topology {
    /// One socket of `cpus` single-threaded cores.
    pub fn flat(cpus: u32) -> Self {
        Topology {
            sockets: 1,
            cores_per_socket: cpus,
            threads_per_core: 1,
        }
    }

    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }

    /// Whether it is the default arrangement: one socket, no SMT.
    pub fn is_flat(&self) -> bool {
        self.sockets == 1 && self.threads_per_core == 1
    }

    /// The output's `machine.topology`: None when flat.
    pub fn unless_flat(self) -> Option<Self> {
        (!self.is_flat()).then_some(self)
    }

    /// The socket (last-level cache and memory controller) of `cpu`.
    pub fn socket_of(&self, cpu: usize) -> usize {
        cpu / (self.threads_per_core * self.cores_per_socket) as usize
    }

    /// The other SMT threads of `cpu`'s core.
    pub fn siblings(&self, cpu: usize) -> impl Iterator<Item = usize> {
        let t = self.threads_per_core as usize;
        let first = cpu - cpu % t;
        (first..first + t).filter(move |&c| c != cpu)
    }
}

/// A kernel release mmsim models (`machine.kernel`). Each is checked
/// against a Debian kernel the oracle boots (docs/model.md "Kernel
/// presets" lists what of each release the model does not have).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Preset {
    /// bullseye's 5.10: seed 000's baseline.
    V5_10,
    /// bookworm's 6.1: the reference the model was built on.
    V6_1,
    /// bookworm-backports' 6.12 LTS: seed 001's baseline.
    V6_12,
    /// trixie-backports' 7.3: after seeds 001 and 003.
    V7_3,
}

impl Preset {
    pub const ALL: [Preset; 4] = [Preset::V5_10, Preset::V6_1, Preset::V6_12, Preset::V7_3];

    pub fn name(self) -> &'static str {
        match self {
            Preset::V5_10 => "5.10",
            Preset::V6_1 => "6.1",
            Preset::V6_12 => "6.12",
            Preset::V7_3 => "7.3",
        }
    }

    pub fn parse(s: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The preset of a kernel release string ("5.10.0-32-amd64" → 5.10):
    /// its major.minor, whole.
    pub fn of_release(release: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| {
            release
                .strip_prefix(p.name())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '-', '+']))
        })
    }

    /// The Debian suite whose linux-image-amd64 is this release
    /// (`scripts/get-kernel SUITE`).
    pub fn suite(self) -> &'static str {
        match self {
            Preset::V5_10 => "bullseye",
            Preset::V6_1 => "bookworm",
            Preset::V6_12 => "bookworm-backports",
            Preset::V7_3 => "trixie-backports",
        }
    }

    /// The release's mechanisms, before `[features]` overrides them.
    pub fn features(self) -> Features {
        let f = Features::LINUX_6_1;
        match self {
            // do_wp_page copies whenever page_count != 1 (5.8's "mm:
            // do_wp_page() simplification" until seed 000's fix in 5.18).
            Preset::V5_10 => Features {
                wp_reuse_swapcache: false,
                ..f
            },
            Preset::V6_1 => f,
            Preset::V6_12 => Features::LINUX_6_12,
            // 7.3 has seed 001 (shmem swap-in from a SWP_SYNCHRONOUS_IO
            // device reads the one folio, no readahead) and batches the
            // rmap removal of a file folio's PTEs in try_to_unmap_one
            // (folio_unmap_pte_batch; swap-backed anon still PTE by PTE).
            Preset::V7_3 => Features {
                shmem_skip_swapcache: true,
                batched_rmap_unmap: true,
                ..Features::LINUX_6_12
            },
        }
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq<&str> for Preset {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// The seed mechanisms (docs/design.md "Features"), resolved against the preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    pub wp_reuse_swapcache: bool,
    pub shmem_skip_swapcache: bool,
    pub used_once_mapped_file: bool,
    pub batched_rmap_unmap: bool,
    pub swapoff_readahead_stats: bool,
    /// Not a seed mechanism: the change seed 003's author made to measure
    /// it. 6.1's MADV_PAGEOUT splits a PTE-mapped large folio it meets
    /// (true); false pages the folio out whole.
    pub madv_pageout_split: bool,
    /// Not in 6.1 (6.11, "add multi-size THP sysfs interface for anonymous
    /// shmem"): the per-size `hugepages-<size>kB/shmem_enabled` knobs give
    /// shared anonymous memory folios of any order from 2 to 9, mapped
    /// whole at the first fault. Seed 001's kernels have it.
    pub shmem_mthp: bool,
    /// Not in 6.1 (6.12, "support large folio swap-out for shmem", with
    /// 6.13's `shmem_split_large_entry` on swap-in): reclaim swaps a large
    /// shmem folio out whole under a large swap entry (6.1 splits it
    /// first); a swap-in through the swap cache splits that entry to
    /// order 0. Seed 001's baseline.
    pub shmem_large_swapout: bool,
    /// Not in 6.1 (6.8, "mm: thp: support allocation of anonymous
    /// multi-size THP"): the per-size `hugepages-<size>kB/enabled` knobs
    /// give private anonymous memory folios of orders 2 to 8 at a write
    /// fault, mapped by PTEs. Modelled with 6.12's paths around them.
    pub anon_mthp: bool,
    /// Not in 6.1 (6.10, "mm: swap: allow storage of all mTHP orders"):
    /// reclaim swaps an anonymous mTHP out whole into a run of slots of a
    /// cluster kept for its order; false splits it first, as 6.8 does.
    pub anon_mthp_swapout: bool,
    /// Not in 6.1 (6.12, "mm: support large folios swap-in for sync io
    /// devices"): a swap fault past the swap cache on a
    /// SWP_SYNCHRONOUS_IO device (zram) reads a whole mTHP back when its
    /// entries are contiguous; false reads order 0, as 6.11 does.
    pub anon_large_swapin: bool,
    /// Not in 6.1 (6.8, "mm: memcg: make stats flushing threshold
    /// per-memcg"): each memcg counts its own statistics updates and a
    /// reader flushes a memcg's subtree only past 64 × CPUs of them;
    /// reclaim and the refault read counters the 2-second worker last
    /// flushed. False: 6.1's one global threshold, flushed by reclaim.
    pub memcg_rstat_per_memcg: bool,
}

impl Features {
    /// Every flag by its spec name.
    pub fn list(&self) -> [(&'static str, bool); 12] {
        [
            ("wp_reuse_swapcache", self.wp_reuse_swapcache),
            ("shmem_skip_swapcache", self.shmem_skip_swapcache),
            ("used_once_mapped_file", self.used_once_mapped_file),
            ("batched_rmap_unmap", self.batched_rmap_unmap),
            ("swapoff_readahead_stats", self.swapoff_readahead_stats),
            ("madv_pageout_split", self.madv_pageout_split),
            ("shmem_mthp", self.shmem_mthp),
            ("shmem_large_swapout", self.shmem_large_swapout),
            ("anon_mthp", self.anon_mthp),
            ("anon_mthp_swapout", self.anon_mthp_swapout),
            ("anon_large_swapin", self.anon_large_swapin),
            ("memcg_rstat_per_memcg", self.memcg_rstat_per_memcg),
        ]
    }

    /// Linux 6.1's behaviour.
    pub const LINUX_6_1: Features = Features {
        wp_reuse_swapcache: true,
        shmem_skip_swapcache: false,
        used_once_mapped_file: true,
        batched_rmap_unmap: false,
        swapoff_readahead_stats: true,
        madv_pageout_split: true,
        shmem_mthp: false,
        shmem_large_swapout: false,
        anon_mthp: false,
        anon_mthp_swapout: false,
        anon_large_swapin: false,
        memcg_rstat_per_memcg: false,
    };

    /// Linux 6.12's: MADV_PAGEOUT pages out a large folio it covers whole
    /// (madvise_folio_pte_batch), shmem mTHP (hugepages-<size>kB/
    /// shmem_enabled) and large shmem swap-out with
    /// shmem_split_large_entry on swap-in. Its try_to_unmap_one still
    /// removes a large folio's rmap PTE by PTE (folio_remove_rmap_pte).
    pub const LINUX_6_12: Features = Features {
        wp_reuse_swapcache: true,
        shmem_skip_swapcache: false,
        used_once_mapped_file: true,
        batched_rmap_unmap: false,
        swapoff_readahead_stats: true,
        madv_pageout_split: false,
        shmem_mthp: true,
        shmem_large_swapout: true,
        anon_mthp: true,
        anon_mthp_swapout: true,
        anon_large_swapin: true,
        memcg_rstat_per_memcg: true,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sysctl {
    /// vm.swappiness (each sysctl's range and default: `crate::sysctls`).
    pub swappiness: u32,
    /// vm.watermark_scale_factor.
    pub watermark_scale_factor: u32,
    /// vm.min_free_kbytes; None = the kernel computes it from memory size.
    pub min_free_kbytes: Option<u64>,
    /// vm.page-cluster: swap readahead reads up to 2^n pages; 0 disables it.
    pub page_cluster: u32,
    /// vm.percpu_pagelist_high_fraction: each per-CPU free list holds up
    /// to a zone's managed pages / this, split over the CPUs; 0 (the
    /// kernel's, when a spec leaves it) sizes them from the low watermark.
    pub percpu_pagelist_high_fraction: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sysfs {
    /// kernel/mm/transparent_hugepage/enabled: anonymous THP (6.1 only;
    /// `never` on every other preset).
    pub thp_enabled: ThpEnabled,
    /// kernel/mm/transparent_hugepage/defrag when the spec sets it (None:
    /// the kernel's boot value — `madvise` on a machine of 512 MiB or
    /// more, where `hugepage_init` leaves the flags alone, else none).
    pub thp_defrag: Option<ThpDefrag>,
    /// kernel/mm/transparent_hugepage/use_zero_page when the spec sets it
    /// (None: the boot value, on from 512 MiB of RAM).
    pub thp_use_zero_page: Option<bool>,
    /// kernel/mm/transparent_hugepage/khugepaged/*: each as the spec sets
    /// it (None: the kernel's boot value).
    pub khugepaged: KhugepagedKnobs,
    /// kernel/mm/swap/vma_ra_enabled: VMA-based swap readahead (ignored
    /// while any rotational swap device is on, as the kernel ignores it).
    pub vma_ra_enabled: bool,
    /// kernel/mm/lru_gen/enabled: the multi-gen LRU's capability bits as
    /// 6.1 defines them (0x0001 the multi-gen LRU itself, 0x0002
    /// page-table walks when aging, 0x0004 non-leaf PMD young bits); 0
    /// runs the classic active/inactive LRU.
    pub lru_gen: u8,
    /// kernel/mm/lru_gen/min_ttl_ms: kswapd keeps generations younger
    /// than this (0: off).
    pub lru_gen_min_ttl_ms: u32,
    /// kernel/mm/transparent_hugepage/shmem_enabled when the spec sets it
    /// (None: left alone, 6.1's boot default `never`). The simulator
    /// refuses anything but `never` and `deny` (large shmem folios are not
    /// modelled yet).
    pub shmem_enabled: Option<ShmemEnabled>,
    /// `hugepages-<size>kB/shmem_enabled` (with `features.shmem_mthp`;
    /// not in 6.1), for orders 2 to 9 (16 KiB to 2 MiB): index order − 2.
    /// Unset: the kernel's default, `inherit` at PMD size, else `never`.
    pub shmem_mthp: [MthpShmem; 8],
    /// `hugepages-<size>kB/enabled` (with `features.anon_mthp`; not in
    /// 6.1), for orders 2 to 9: index order − 2. Unset: the kernel's
    /// default, `inherit` at PMD size, else `never`.
    pub anon_mthp: [MthpAnon; 8],
    /// module/zswap/parameters/*: the compressed cache in front of swap.
    pub zswap: Zswap,
}

/// zswap's module parameters as the spec sets them (Debian's 6.1 boot
/// values where it does not: off, lzo, zbud, 20 %, 90 %, both kinds of
/// page accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zswap {
    /// Whether any `module/zswap/parameters/` key was given: without one
    /// the run has no zswap at all, and its output no zswap counters.
    pub configured: bool,
    pub enabled: bool,
    /// The crypto compressor's name.
    pub compressor: &'static str,
    pub zpool: Zpool,
    pub max_pool_percent: u32,
    pub accept_threshold_percent: u32,
    pub same_filled_pages_enabled: bool,
    pub non_same_filled_pages_enabled: bool,
    /// `shrinker_enabled` (6.8+): reclaim writing back zswap's entries
    /// through its shrinker (`shrink_slab`); off in Debian's configs
    /// (CONFIG_ZSWAP_SHRINKER_DEFAULT_ON unset).
    pub shrinker_enabled: bool,
}

impl Default for Zswap {
    fn default() -> Self {
        Zswap {
            configured: false,
            enabled: false,
            compressor: "lzo",
            zpool: Zpool::Zbud,
            max_pool_percent: 20,
            accept_threshold_percent: 90,
            same_filled_pages_enabled: true,
            non_same_filled_pages_enabled: true,
            shrinker_enabled: false,
        }
    }
}

impl Zswap {
    /// Debian's boot values on `preset`: zbud until 6.6, zsmalloc after
    /// (CONFIG_ZSWAP_ZPOOL_DEFAULT; 7.3 has no other).
    pub fn boot(preset: Preset) -> Zswap {
        Zswap {
            zpool: if preset >= Preset::V6_12 {
                Zpool::Zsmalloc
            } else {
                Zpool::Zbud
            },
            ..Zswap::default()
        }
    }
}

/// The allocator zswap stores compressed pages in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zpool {
    /// Two objects per page at most, in 64-byte chunks, with an LRU of
    /// its pages that zswap writes back from.
    Zbud,
    /// Size classes over zspages; not evictable in 6.1 (6.8's zswap
    /// writes back from its own LRU, whatever the zpool).
    Zsmalloc,
}

impl Zpool {
    pub const ALL: [Zpool; 2] = [Zpool::Zbud, Zpool::Zsmalloc];
    pub fn name(self) -> &'static str {
        match self {
            Zpool::Zbud => "zbud",
            Zpool::Zsmalloc => "zsmalloc",
        }
    }
}

impl Sysfs {
    /// Whether a private anonymous fault may allocate a folio larger than a
    /// page: PMD-size THP on, or (with `features.anon_mthp`) a smaller size
    /// enabled, `inherit` following the top-level knob.
    pub fn anon_large_possible(&self, anon_mthp: bool) -> bool {
        self.thp_enabled != ThpEnabled::Never
            || (anon_mthp
                && self.anon_mthp[..7].iter().any(|&w| match w {
                    MthpAnon::Always | MthpAnon::Madvise => true,
                    MthpAnon::Inherit => self.thp_enabled != ThpEnabled::Never,
                    MthpAnon::Never => false,
                }))
    }
}

/// A per-size `hugepages-<size>kB/enabled` value (6.8 and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MthpAnon {
    Always,
    Inherit,
    Madvise,
    Never,
}

impl MthpAnon {
    pub const ALL: [MthpAnon; 4] = [
        MthpAnon::Always,
        MthpAnon::Inherit,
        MthpAnon::Madvise,
        MthpAnon::Never,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MthpAnon::Always => "always",
            MthpAnon::Inherit => "inherit",
            MthpAnon::Madvise => "madvise",
            MthpAnon::Never => "never",
        }
    }

    /// The kernel's default for `order`: `inherit` at PMD size, else never.
    pub fn default_for(order: usize) -> MthpAnon {
        if order == 9 {
            MthpAnon::Inherit
        } else {
            MthpAnon::Never
        }
    }
}

/// kernel/mm/transparent_hugepage/khugepaged/*, as the spec writes them
/// (None: left at 6.1's boot value, `khugepaged_init`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KhugepagedKnobs {
    /// `defrag` (0 or 1): whether khugepaged's allocation may reclaim and
    /// compact (GFP_TRANSHUGE) or not (GFP_TRANSHUGE_LIGHT).
    pub defrag: Option<bool>,
    /// `pages_to_scan` (at least 1; boot 4096): PTEs' worth of address
    /// space one wakeup scans.
    pub pages_to_scan: Option<u32>,
    /// `scan_sleep_millisecs` (boot 10000): the sleep between wakeups.
    pub scan_sleep_millisecs: Option<u32>,
    /// `alloc_sleep_millisecs` (boot 60000): the sleep after a failed
    /// huge page allocation.
    pub alloc_sleep_millisecs: Option<u32>,
    /// `max_ptes_none`, `max_ptes_swap`, `max_ptes_shared` (0 to 511;
    /// boot 511, 64, 256): how many empty, swapped-out and shared PTEs a
    /// range may have and still be collapsed.
    pub max_ptes_none: Option<u32>,
    pub max_ptes_swap: Option<u32>,
    pub max_ptes_shared: Option<u32>,
}

impl KhugepagedKnobs {
    /// `pages_to_scan` as set, or khugepaged_init's boot value
    /// (HPAGE_PMD_NR * 8 = 4096). The simulator and the work limit both
    /// read it here.
    pub fn pages_to_scan(&self) -> u32 {
        self.pages_to_scan.unwrap_or(4096)
    }

    /// `scan_sleep_millisecs` as set, or its boot value (10000).
    pub fn scan_sleep_millisecs(&self) -> u32 {
        self.scan_sleep_millisecs.unwrap_or(10_000)
    }

    /// Every knob's file name under khugepaged/ and its value, if set.
    pub fn set(&self) -> Vec<(&'static str, String)> {
        let d = self.defrag.map(|b| (b as u32).to_string());
        let n = |v: Option<u32>| v.map(|n| n.to_string());
        [
            ("defrag", d),
            ("pages_to_scan", n(self.pages_to_scan)),
            ("scan_sleep_millisecs", n(self.scan_sleep_millisecs)),
            ("alloc_sleep_millisecs", n(self.alloc_sleep_millisecs)),
            ("max_ptes_none", n(self.max_ptes_none)),
            ("max_ptes_swap", n(self.max_ptes_swap)),
            ("max_ptes_shared", n(self.max_ptes_shared)),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

/// A per-size `hugepages-<size>kB/shmem_enabled` value (6.11 and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MthpShmem {
    Always,
    Inherit,
    WithinSize,
    Advise,
    Never,
}

impl MthpShmem {
    pub const ALL: [MthpShmem; 5] = [
        MthpShmem::Always,
        MthpShmem::Inherit,
        MthpShmem::WithinSize,
        MthpShmem::Advise,
        MthpShmem::Never,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MthpShmem::Always => "always",
            MthpShmem::Inherit => "inherit",
            MthpShmem::WithinSize => "within_size",
            MthpShmem::Advise => "advise",
            MthpShmem::Never => "never",
        }
    }

    /// The kernel's default for `order`: `inherit` at PMD size, else never.
    pub fn default_for(order: usize) -> MthpShmem {
        if order == 9 {
            MthpShmem::Inherit
        } else {
            MthpShmem::Never
        }
    }
}

/// kernel/mm/transparent_hugepage/enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThpEnabled {
    Always,
    Madvise,
    Never,
}

impl ThpEnabled {
    pub const ALL: [ThpEnabled; 3] = [ThpEnabled::Always, ThpEnabled::Madvise, ThpEnabled::Never];
    pub fn name(self) -> &'static str {
        match self {
            ThpEnabled::Always => "always",
            ThpEnabled::Madvise => "madvise",
            ThpEnabled::Never => "never",
        }
    }
}

/// kernel/mm/transparent_hugepage/defrag: how hard a THP allocation may
/// try (`vma_thp_gfp_mask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThpDefrag {
    Always,
    Defer,
    DeferMadvise,
    Madvise,
    Never,
}

impl ThpDefrag {
    pub const ALL: [ThpDefrag; 5] = [
        ThpDefrag::Always,
        ThpDefrag::Defer,
        ThpDefrag::DeferMadvise,
        ThpDefrag::Madvise,
        ThpDefrag::Never,
    ];
    pub fn name(self) -> &'static str {
        match self {
            ThpDefrag::Always => "always",
            ThpDefrag::Defer => "defer",
            ThpDefrag::DeferMadvise => "defer+madvise",
            ThpDefrag::Madvise => "madvise",
            ThpDefrag::Never => "never",
        }
    }
}

/// kernel/mm/transparent_hugepage/shmem_enabled, as 6.1's
/// `shmem_enabled_store` takes it: the policy of the internal shmem mount
/// (shared anonymous mappings, SysV SHM, memfd), and at `deny` or `force`
/// an override of every tmpfs mount's `huge=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShmemEnabled {
    Always,
    WithinSize,
    Advise,
    Never,
    Deny,
    Force,
}

impl ShmemEnabled {
    pub const ALL: [ShmemEnabled; 6] = [
        ShmemEnabled::Always,
        ShmemEnabled::WithinSize,
        ShmemEnabled::Advise,
        ShmemEnabled::Never,
        ShmemEnabled::Deny,
        ShmemEnabled::Force,
    ];

    /// The word the sysfs file takes and shows.
    pub fn name(self) -> &'static str {
        match self {
            ShmemEnabled::Always => "always",
            ShmemEnabled::WithinSize => "within_size",
            ShmemEnabled::Advise => "advise",
            ShmemEnabled::Never => "never",
            ShmemEnabled::Deny => "deny",
            ShmemEnabled::Force => "force",
        }
    }

    /// Whether it can give a shmem file or mapping a large folio by itself
    /// (`force`), or lets the mount's policy do so (all but `deny` and
    /// `never`; `never` leaves user tmpfs mounts to their `huge=`).
    pub fn allows_large(self) -> bool {
        !matches!(self, ShmemEnabled::Never | ShmemEnabled::Deny)
    }
}

/// Where the runner mounts its tmpfs for `huge = "never"` files; the
/// tmpfs of any other `huge=` value is mounted at this + "." + the value
/// (e.g. /mnt/mmsim-tmpfs.always: a disk's name has no dot, so it never
/// collides with a disk's mount point).
pub const RUNNER_TMPFS_DIR: &str = "/mnt/mmsim-tmpfs";

impl File {
    /// Where the runner makes this file when it is on tmpfs (the native
    /// guests' QEMU opens it there); None for a file on a disk.
    pub fn runner_tmpfs_path(&self) -> Option<String> {
        (self.on == FileOn::Tmpfs).then(|| format!("{}/{}", self.huge.runner_dir(), self.name))
    }
}

/// A tmpfs mount's `huge=` option (6.1 `SHMEM_HUGE_*`): whether shmem
/// faults and writes on its files allocate PMD-size folios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmpfsHuge {
    Never,
    Always,
    WithinSize,
    Advise,
}

impl TmpfsHuge {
    pub const ALL: [TmpfsHuge; 4] = [
        TmpfsHuge::Never,
        TmpfsHuge::Always,
        TmpfsHuge::WithinSize,
        TmpfsHuge::Advise,
    ];

    /// The word the mount option takes.
    /// Where the runner mounts the tmpfs of files with this `huge`.
    pub fn runner_dir(self) -> String {
        match self {
            TmpfsHuge::Never => RUNNER_TMPFS_DIR.to_string(),
            h => format!("{RUNNER_TMPFS_DIR}.{}", h.name()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TmpfsHuge::Never => "never",
            TmpfsHuge::Always => "always",
            TmpfsHuge::WithinSize => "within_size",
            TmpfsHuge::Advise => "advise",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapKind {
    /// zram: compressed RAM with `rw_page` (SWP_SYNCHRONOUS_IO).
    Zram,
    /// An NVMe SSD: non-rotational, deep queue.
    Nvme,
    /// A virtio-blk disk: the guest sees it rotational unless told otherwise.
    Virtio,
    /// A rotating disk: seeks, queue depth 1.
    Hdd,
    /// A RAM disk (brd, /dev/ramN): its blocks are pages of memory, and a
    /// bio is copied on the submitting CPU and completes at once. Only for
    /// a `[[disk]]` (the spec refuses it as a `[[swap]]` device).
    Ram,
}

impl SwapKind {
    pub fn name(self) -> &'static str {
        match self {
            SwapKind::Zram => "zram",
            SwapKind::Nvme => "nvme",
            SwapKind::Virtio => "virtio",
            SwapKind::Hdd => "hdd",
            SwapKind::Ram => "ram",
        }
    }

    /// What the block queue's `rotational` attribute says by default:
    /// virtio-blk sets no non-rotational flag, so 6.1 guests see 1 (brd
    /// sets QUEUE_FLAG_NONROT).
    pub fn default_rotational(self) -> bool {
        matches!(self, SwapKind::Virtio | SwapKind::Hdd)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SwapDevice {
    pub kind: SwapKind,
    /// Bytes.
    pub size: u64,
    /// swapon priority; None = the kernel's decreasing negative default.
    pub priority: Option<i32>,
    /// /sys/block/DEV/queue/rotational, written before swapon; None = the
    /// device's default.
    pub rotational: Option<bool>,
    /// Model parameters of a block device (simulator only): access latency
    /// of a read and of a write, ns; None = the device model's.
    pub read_latency: Option<u64>,
    pub write_latency: Option<u64>,
    /// zram's comp_algorithm (None: the kernel's default, `compressor()`).
    pub compressor: Option<String>,
    /// zram's mem_limit in pages (None: no limit; `0` in the spec is none,
    /// as the kernel reads it).
    pub mem_limit: Option<u64>,
    /// Line of `size` in the spec file (0: from `--set`), for errors found
    /// after parsing (the host memory its slots take).
    pub size_line: usize,
    /// A guest's block device: the host `[[file]]` backing it (virtio-blk
    /// on a host file) by name, and the line naming it.
    pub host_file: Option<(String, usize)>,
    /// How QEMU opens that file (`cache`).
    pub host_cache: HostCache,
}

/// QEMU's `-drive cache=` mode for a guest device's host file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostCache {
    /// `cache=writeback` (QEMU's default): through the host's page cache.
    #[default]
    Writeback,
    /// `cache=none`: O_DIRECT, the host's page cache bypassed.
    None,
}

impl SwapDevice {
    /// The compressors zram offers on the preset's Debian kernel, where
    /// known (its comp_algorithm list): 6.12's and 7.3's have no lzo or
    /// lzo-rle (read under QEMU, 2026-11-27); None: not restricted (5.10
    /// and 6.1 offer lzo-rle, their default, and lzo; their whole lists
    /// were not read).
    pub fn zram_offers(preset: Preset) -> Option<&'static [&'static str]> {
        match preset {
            Preset::V6_12 | Preset::V7_3 => Some(&["lz4", "lz4hc", "zstd", "deflate"]),
            Preset::V5_10 | Preset::V6_1 => None,
        }
    }

    /// zram's compressor: the spec's, else the preset's default
    /// (CONFIG_ZRAM_DEF_COMP of Debian's kernel: lzo-rle in 5.10 and 6.1,
    /// lz4 in 6.12's and 7.3's; each read from the device under QEMU,
    /// fidelity/results/zram_content/).
    pub fn compressor(&self, preset: Preset) -> &str {
        self.compressor.as_deref().unwrap_or(match preset {
            Preset::V5_10 | Preset::V6_1 => "lzo-rle",
            Preset::V6_12 | Preset::V7_3 => "lz4",
        })
    }

    pub fn rotational(&self) -> bool {
        self.kind != SwapKind::Zram && self.rotational.unwrap_or(self.kind.default_rotational())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cgroup {
    pub name: String,
    pub memory_max: Limit,
    pub memory_high: Limit,
    /// memory.min and memory.low: reclaim protection (0 by default; "max"
    /// protects everything).
    pub memory_min: Limit,
    pub memory_low: Limit,
    /// memory.swap.max: the swap its pages may hold ("max" by default).
    pub memory_swap_max: Limit,
    /// memory.zswap.max: the compressed bytes its pages may hold in zswap
    /// ("max" by default; 5.19 and later).
    pub memory_zswap_max: Limit,
    /// memory.zswap.writeback (6.8+): false keeps its pages, and its
    /// descendants', off the swap device while zswap is on: zswap's
    /// writeback skips them and a page zswap refuses stays in memory
    /// (true by default).
    pub memory_zswap_writeback: bool,
    /// memory.oom.group: an OOM kill in it kills every task in it.
    pub memory_oom_group: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub name: String,
    /// Index into `Spec::cgroups`; None = the root cgroup.
    pub cgroup: Option<usize>,
    pub instances: u32,
    /// /proc/PID/oom_score_adj (-1000 ..= 1000; -1000: never the OOM
    /// killer's victim). Its forks and threads inherit it.
    pub oom_score_adj: i16,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Line of the step in the spec file (for run-time messages).
    pub line: usize,
    /// Its dotted key path, e.g. `task.main.steps[2]` (for the same).
    pub key: String,
    pub op: Op,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// MAP_PRIVATE | MAP_ANONYMOUS.
    Anon,
    /// MAP_SHARED of a file on tmpfs: shmem pages, shared by every task
    /// that maps the file.
    Shmem,
    /// MAP_SHARED | MAP_ANONYMOUS: shmem pages private to the mapping (and
    /// shared with children it forks).
    SharedAnon,
    /// MAP_SHARED of a file on a disk: page-cache pages on the file LRU.
    File,
    /// MAP_PRIVATE of a file on a disk: page-cache pages mapped read-only,
    /// copied to private anon pages on a write.
    FilePrivate,
}

impl MapKind {
    pub fn name(self) -> &'static str {
        match self {
            MapKind::Anon => "anon",
            MapKind::Shmem => "shmem",
            MapKind::SharedAnon => "shared_anon",
            MapKind::File => "file",
            MapKind::FilePrivate => "file_private",
        }
    }
}

/// A `[[file]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub name: String,
    /// Bytes (a whole number of pages).
    pub size: u64,
    /// Where the file lives.
    pub on: FileOn,
    /// The tmpfs `huge=` mount option of a tmpfs file (`Never` for a file
    /// on a disk). The simulator refuses anything but `Never`.
    pub huge: TmpfsHuge,
    /// Line of `size` in the spec file (0: from `--set`), as the swap
    /// device's.
    pub size_line: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOn {
    /// tmpfs (mounted with the file's `huge=`): the file's pages are shmem.
    Tmpfs,
    /// An ext2 file system on `[[disk]]` number N: the file exists with
    /// data at start (not cached) and is read through the page cache.
    Disk(usize),
}

/// A `[[disk]]`: a block device with an ext2 file system holding files.
#[derive(Debug, Clone, PartialEq)]
pub struct Disk {
    pub name: String,
    /// nvme, virtio, hdd or ram (never zram).
    pub kind: SwapKind,
    /// Bytes.
    pub size: u64,
    /// /sys/block/DEV/queue/read_ahead_kb: the files' readahead window.
    pub read_ahead_kb: u64,
    /// The file system the files live on.
    pub fs: Fs,
    /// A guest's disk: the host `[[file]]` backing it, by name, and the
    /// line naming it.
    pub host_file: Option<(String, usize)>,
    /// How QEMU opens that file (`cache`).
    pub host_cache: HostCache,
}

/// A disk's file system: what decides whether its page cache holds large
/// folios in 6.1 (`mapping_large_folio_support`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fs {
    /// ext2 (the default; ext2 and ext4 have no large folios in 6.1).
    Ext2,
    /// XFS: readahead allocates large folios (`page_cache_ra_order`).
    Xfs,
}

impl Fs {
    pub fn name(self) -> &'static str {
        match self {
            Fs::Ext2 => "ext2",
            Fs::Xfs => "xfs",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Seq,
    Rev,
    Shuffle,
    Uniform,
    Zipf,
    /// A `trace` step: the requests of a file (`Touch::trace`).
    Trace,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Touch {
    pub region: String,
    pub order: Order,
    /// Zipf exponent (only for `zipf`).
    pub theta: f64,
    /// Total accesses; None = passes × pages.
    pub count: Option<u64>,
    pub passes: u64,
    /// Fraction of accesses that write, 0..=1.
    pub write: f64,
    /// Sub-range start within the region, pages.
    pub offset: u64,
    /// Sub-range length, pages; None = to the end of the region.
    pub length: Option<u64>,
    pub seed: u64,
    /// The file a `trace` step replays (order `Trace`); None otherwise.
    pub trace: Option<Box<crate::trace::TraceSource>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Mmap {
        name: String,
        kind: MapKind,
        pages: u64,
        /// The `[[file]]` mapped (index into `Spec::files`), for `shmem`,
        /// `file` and `file_private`.
        file: Option<usize>,
        /// The file offset of the mapping's first page, in pages.
        offset: u64,
        /// PROT_EXEC (VM_EXEC): a program's text.
        exec: bool,
        /// What its pages hold once written (None: the runner's 4-byte
        /// token and zeros), for the compressors of zram and zswap.
        content: Option<crate::content::Content>,
    },
    Munmap {
        region: String,
    },
    Touch(Touch),
    Sleep {
        ns: u64,
    },
    /// User CPU time without memory accesses (a compiler's work).
    Compute {
        ns: u64,
    },
    Phase {
        name: String,
    },
    Repeat {
        times: u64,
        steps: Vec<Step>,
    },
    /// fork(2): a child process with a copy-on-write copy of the address
    /// space runs `steps` beside its parent, then exits.
    Fork {
        steps: Vec<Step>,
    },
    /// A thread (clone with CLONE_VM): runs `steps` beside its creator in
    /// the same address space and cgroup, on the creator's regions, then
    /// exits.
    Thread {
        steps: Vec<Step>,
    },
    /// Wait until every child this task forked or spawned, and every
    /// thread it started, has exited.
    Wait,
    /// Start a new program (fork and exec): a process with a fresh address
    /// space, in the task's cgroup, runs `steps` beside the task and exits.
    Spawn {
        steps: Vec<Step>,
    },
    /// madvise(2) over a page range of a region.
    Madvise {
        region: String,
        advice: Advice,
        offset: u64,
        length: Option<u64>,
    },
    /// swapoff(2) of `[[swap]]` device number `device` (0-based).
    Swapoff {
        device: usize,
    },
    /// swapon(2) of `[[swap]]` device number `device` again.
    Swapon {
        device: usize,
    },
    /// A key-value server in a region, driven by a memtier-like client
    /// (crate::kv).
    KvStore(KvStore),
    /// read(2) or write(2) of a `[[file]]`'s pages `[offset, offset +
    /// length)` in calls of `chunk` pages each (pread/pwrite).
    FileIo {
        write: bool,
        file: usize,
        offset: u64,
        length: u64,
        chunk: u64,
    },
    /// fsync(2) of a `[[file]]`.
    Fsync {
        file: usize,
    },
    /// `echo 3 > /proc/sys/vm/drop_caches`.
    DropCaches,
    /// Proactive reclaim of `pages` from a cgroup, as writing its
    /// memory.reclaim does (with `swappiness=` where the kernel takes it).
    Reclaim {
        cgroup: String,
        pages: u64,
        swappiness: Option<u32>,
    },
    /// A knob changed at this point of the steps, as a workload does with
    /// `echo V > …` between its phases (raise memory.max before swapoff,
    /// switch readahead between passes).
    Set(Setting),
    /// Map, read and unmap successive windows of `window` pages of a file
    /// over its pages `[offset, offset + length)` (a hasher streaming a
    /// large file through mmap).
    Stream {
        file: usize,
        offset: u64,
        length: u64,
        window: u64,
        /// User CPU time spent on each page after reading it (hashing), ns.
        work: u64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct KvStore {
    pub region: String,
    /// Keys 1..=keys (memtier's --key-maximum).
    pub keys: u64,
    /// Value bytes (memtier's --data-size).
    pub value_size: u64,
    /// Requests the client makes.
    pub requests: u64,
    /// The set:get ratio (memtier's --ratio, default 1:10).
    pub sets: u64,
    pub gets: u64,
    /// Requests sent before waiting for replies (--pipeline).
    pub pipeline: u64,
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// MADV_PAGEOUT: reclaim the range now.
    Pageout,
    /// MADV_COLD: deactivate the range.
    Cold,
    /// MADV_DONTNEED: drop the range (private anon: back to zero-fill).
    Dontneed,
    /// MADV_FREE: lazily free clean private anon pages.
    Free,
    /// MADV_WILLNEED: start reading swapped-out pages of the range.
    Willneed,
    /// MADV_SEQUENTIAL, MADV_RANDOM, MADV_NORMAL: the mapping's access
    /// hint (VM_SEQ_READ, VM_RAND_READ), for the whole region.
    Sequential,
    Random,
    Normal,
    /// MADV_HUGEPAGE, MADV_NOHUGEPAGE: the mapping's THP hint
    /// (VM_HUGEPAGE, VM_NOHUGEPAGE), for the whole region.
    Hugepage,
    Nohugepage,
}

impl Advice {
    pub fn name(self) -> &'static str {
        match self {
            Advice::Pageout => "pageout",
            Advice::Cold => "cold",
            Advice::Dontneed => "dontneed",
            Advice::Free => "free",
            Advice::Willneed => "willneed",
            Advice::Sequential => "sequential",
            Advice::Random => "random",
            Advice::Normal => "normal",
            Advice::Hugepage => "hugepage",
            Advice::Nohugepage => "nohugepage",
        }
    }
}

/// What a `set` step changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// `[cgroup.NAME]`'s memory.max: lowering it below the usage reclaims
    /// down to it first, as writing the file does.
    MemoryMax {
        cgroup: String,
        limit: Limit,
    },
    /// Its memory.high: lowering it reclaims down to it, as writing does.
    MemoryHigh {
        cgroup: String,
        limit: Limit,
    },
    /// Its memory.swap.max: later swap charges meet the new limit (what
    /// is already in swap stays, as writing the file leaves it).
    MemorySwapMax {
        cgroup: String,
        limit: Limit,
    },
    Swappiness(u32),
    WatermarkScaleFactor(u32),
    MinFreeKbytes(u64),
    PageCluster(u32),
    PercpuPagelistHighFraction(u32),
    VmaRaEnabled(bool),
}

impl Setting {
    /// The sysctl or sysfs knob it writes (`sysctl:vm.swappiness`) and the
    /// value as the file takes it; None for a cgroup's file.
    pub fn knob(&self) -> Option<(String, String)> {
        let (k, v) = match self {
            Setting::MemoryMax { .. }
            | Setting::MemoryHigh { .. }
            | Setting::MemorySwapMax { .. } => return None,
            Setting::VmaRaEnabled(b) => (
                "sysfs:kernel/mm/swap/vma_ra_enabled".to_string(),
                if *b { "true" } else { "false" }.to_string(),
            ),
            _ => crate::sysctls::SYSCTLS.iter().find_map(|k| {
                (k.of_setting)(self).map(|v| (format!("sysctl:{}", k.name), v.to_string()))
            })?,
        };
        Some((k, v))
    }
}

impl Op {
    /// The steps an op runs as a body of its own (a repeat's, a fork's, a
    /// spawn's, a thread's).
    pub fn body(&self) -> Option<&[Step]> {
        match self {
            Op::Repeat { steps, .. }
            | Op::Fork { steps }
            | Op::Spawn { steps }
            | Op::Thread { steps } => Some(steps),
            _ => None,
        }
    }

    /// `body`, to change.
    pub fn body_mut(&mut self) -> Option<&mut Vec<Step>> {
        match self {
            Op::Repeat { steps, .. }
            | Op::Fork { steps }
            | Op::Spawn { steps }
            | Op::Thread { steps } => Some(steps),
            _ => None,
        }
    }
}

/// Every op of `steps`, those inside repeat, fork, spawn and thread bodies included, in
/// spec order.
pub fn for_each_op_in<'a>(steps: &'a [Step], f: &mut impl FnMut(&'a Op)) {
    for s in steps {
        f(&s.op);
        if let Some(steps) = s.op.body() {
            for_each_op_in(steps, f);
        }
    }
}

//! Counters under their /proc/vmstat and memory.stat names.
//!
//! Events only increase; gauges (`nr_*`) go up and down. Both are kept in
//! flat arrays indexed by an enum, so an increment is one add.

use mmsim_spec::Preset;

macro_rules! items {
    ($name:ident, $count:ident, $names:ident { $($variant:ident = $text:literal,)* }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[allow(non_camel_case_types)]
        #[repr(usize)]
        pub enum $name { $($variant,)* }
        pub const $count: usize = [$($text,)*].len();
        pub const $names: [&str; $count] = [$($text,)*];
    };
}

items!(Vm, NR_VM_ITEMS, VM_NAMES {
    // Gauges (node and zone state), in /proc/vmstat order.
    NrFreePages = "nr_free_pages",
    NrZoneInactiveAnon = "nr_zone_inactive_anon",
    NrZoneActiveAnon = "nr_zone_active_anon",
    NrZoneInactiveFile = "nr_zone_inactive_file",
    NrZoneActiveFile = "nr_zone_active_file",
    NrZoneUnevictable = "nr_zone_unevictable",
    NrInactiveAnon = "nr_inactive_anon",
    NrActiveAnon = "nr_active_anon",
    NrInactiveFile = "nr_inactive_file",
    NrActiveFile = "nr_active_file",
    NrUnevictable = "nr_unevictable",
    NrIsolatedAnon = "nr_isolated_anon",
    NrIsolatedFile = "nr_isolated_file",
    WorkingsetRefaultAnon = "workingset_refault_anon",
    WorkingsetRefaultFile = "workingset_refault_file",
    WorkingsetActivateAnon = "workingset_activate_anon",
    WorkingsetActivateFile = "workingset_activate_file",
    WorkingsetRestoreAnon = "workingset_restore_anon",
    WorkingsetRestoreFile = "workingset_restore_file",
    NrAnonPages = "nr_anon_pages",
    NrMapped = "nr_mapped",
    NrFilePages = "nr_file_pages",
    NrDirty = "nr_dirty",
    NrWriteback = "nr_writeback",
    NrShmem = "nr_shmem",
    // NR_SHMEM_THPS and NR_SHMEM_PMDMAPPED, kept in THP units as
    // /proc/vmstat prints them (`vmstat_item_print_in_thp`).
    NrShmemHugepages = "nr_shmem_hugepages",
    NrShmemPmdmapped = "nr_shmem_pmdmapped",
    // NR_ANON_THPS, in THP units: THPs a PMD maps.
    NrAnonTransparentHugepages = "nr_anon_transparent_hugepages",
    NrVmscanWrite = "nr_vmscan_write",
    NrVmscanImmediate = "nr_vmscan_immediate_reclaim",
    NrDirtied = "nr_dirtied",
    NrWritten = "nr_written",
    NrSwapcached = "nr_swapcached",
    NrPageTablePages = "nr_page_table_pages",
    NrZspages = "nr_zspages",
    // Events.
    Pgpgin = "pgpgin",
    Pgpgout = "pgpgout",
    Pswpin = "pswpin",
    Pswpout = "pswpout",
    PgallocDma = "pgalloc_dma",
    PgallocDma32 = "pgalloc_dma32",
    PgallocNormal = "pgalloc_normal",
    AllocstallDma = "allocstall_dma",
    AllocstallDma32 = "allocstall_dma32",
    AllocstallNormal = "allocstall_normal",
    AllocstallMovable = "allocstall_movable",
    PgskipDma = "pgskip_dma",
    PgskipDma32 = "pgskip_dma32",
    PgskipNormal = "pgskip_normal",
    Pgfree = "pgfree",
    Pgactivate = "pgactivate",
    Pgdeactivate = "pgdeactivate",
    Pglazyfree = "pglazyfree",
    Pglazyfreed = "pglazyfreed",
    Pgfault = "pgfault",
    Pgmajfault = "pgmajfault",
    Pgrefill = "pgrefill",
    Pgreuse = "pgreuse",
    PgstealKswapd = "pgsteal_kswapd",
    PgstealDirect = "pgsteal_direct",
    PgscanKswapd = "pgscan_kswapd",
    PgscanDirect = "pgscan_direct",
    PgscanDirectThrottle = "pgscan_direct_throttle",
    PgscanAnon = "pgscan_anon",
    PgscanFile = "pgscan_file",
    PgstealAnon = "pgsteal_anon",
    PgstealFile = "pgsteal_file",
    Pageoutrun = "pageoutrun",
    Pgrotated = "pgrotated",
    KswapdLowWmarkHitQuickly = "kswapd_low_wmark_hit_quickly",
    KswapdHighWmarkHitQuickly = "kswapd_high_wmark_hit_quickly",
    OomKill = "oom_kill",
    ThpFaultAlloc = "thp_fault_alloc",
    ThpFaultFallback = "thp_fault_fallback",
    ThpFaultFallbackCharge = "thp_fault_fallback_charge",
    ThpCollapseAlloc = "thp_collapse_alloc",
    ThpCollapseAllocFailed = "thp_collapse_alloc_failed",
    ThpFileAlloc = "thp_file_alloc",
    ThpFileFallback = "thp_file_fallback",
    ThpFileFallbackCharge = "thp_file_fallback_charge",
    ThpFileMapped = "thp_file_mapped",
    ThpSplitPage = "thp_split_page",
    ThpSplitPageFailed = "thp_split_page_failed",
    ThpDeferredSplitPage = "thp_deferred_split_page",
    ThpSplitPmd = "thp_split_pmd",
    ThpScanExceedNonePte = "thp_scan_exceed_none_pte",
    ThpScanExceedSwapPte = "thp_scan_exceed_swap_pte",
    ThpScanExceedSharePte = "thp_scan_exceed_share_pte",
    ThpZeroPageAlloc = "thp_zero_page_alloc",
    ThpZeroPageAllocFailed = "thp_zero_page_alloc_failed",
    ThpSwpout = "thp_swpout",
    ThpSwpoutFallback = "thp_swpout_fallback",
    SwapRa = "swap_ra",
    SwapRaHit = "swap_ra_hit",
    SwpinZero = "swpin_zero",
    SwpoutZero = "swpout_zero",
    // zswap's (CONFIG_ZSWAP; output only where the spec sets zswap).
    Zswpin = "zswpin",
    Zswpout = "zswpout",
    // 6.8's: zswap's writebacks to the swap device.
    Zswpwb = "zswpwb",
    // Per-size mTHP statistics (not in 6.1: sysfs
    // transparent_hugepage/hugepages-<size>kB/stats/, 6.10 and later),
    // reported only when not zero.
    Mthp16kShmemAlloc = "hugepages-16kB/stats/shmem_alloc",
    Mthp16kShmemFallback = "hugepages-16kB/stats/shmem_fallback",
    Mthp16kShmemFallbackCharge = "hugepages-16kB/stats/shmem_fallback_charge",
    Mthp16kSwpout = "hugepages-16kB/stats/swpout",
    Mthp16kSwpoutFallback = "hugepages-16kB/stats/swpout_fallback",
    Mthp16kSwpin = "hugepages-16kB/stats/swpin",
    Mthp16kAnonFaultAlloc = "hugepages-16kB/stats/anon_fault_alloc",
    Mthp16kAnonFaultFallback = "hugepages-16kB/stats/anon_fault_fallback",
    Mthp16kAnonFaultFallbackCharge = "hugepages-16kB/stats/anon_fault_fallback_charge",
    Mthp16kSplitDeferred = "hugepages-16kB/stats/split_deferred",
    Mthp16kSplit = "hugepages-16kB/stats/split",
    Mthp16kSplitFailed = "hugepages-16kB/stats/split_failed",
    Mthp16kNrAnon = "hugepages-16kB/stats/nr_anon",
    Mthp16kNrAnonPartiallyMapped = "hugepages-16kB/stats/nr_anon_partially_mapped",
    Mthp16kSwpinFallback = "hugepages-16kB/stats/swpin_fallback",
    Mthp16kSwpinFallbackCharge = "hugepages-16kB/stats/swpin_fallback_charge",
    Mthp16kZswpout = "hugepages-16kB/stats/zswpout",
    Mthp16kCollapseAlloc = "hugepages-16kB/stats/collapse_alloc",
    Mthp16kCollapseAllocFailed = "hugepages-16kB/stats/collapse_alloc_failed",
    Mthp16kCollapseExceedNonePte = "hugepages-16kB/stats/collapse_exceed_none_pte",
    Mthp16kCollapseExceedSwapPte = "hugepages-16kB/stats/collapse_exceed_swap_pte",
    Mthp16kCollapseExceedSharedPte = "hugepages-16kB/stats/collapse_exceed_shared_pte",
    Mthp32kShmemAlloc = "hugepages-32kB/stats/shmem_alloc",
    Mthp32kShmemFallback = "hugepages-32kB/stats/shmem_fallback",
    Mthp32kShmemFallbackCharge = "hugepages-32kB/stats/shmem_fallback_charge",
    Mthp32kSwpout = "hugepages-32kB/stats/swpout",
    Mthp32kSwpoutFallback = "hugepages-32kB/stats/swpout_fallback",
    Mthp32kSwpin = "hugepages-32kB/stats/swpin",
    Mthp32kAnonFaultAlloc = "hugepages-32kB/stats/anon_fault_alloc",
    Mthp32kAnonFaultFallback = "hugepages-32kB/stats/anon_fault_fallback",
    Mthp32kAnonFaultFallbackCharge = "hugepages-32kB/stats/anon_fault_fallback_charge",
    Mthp32kSplitDeferred = "hugepages-32kB/stats/split_deferred",
    Mthp32kSplit = "hugepages-32kB/stats/split",
    Mthp32kSplitFailed = "hugepages-32kB/stats/split_failed",
    Mthp32kNrAnon = "hugepages-32kB/stats/nr_anon",
    Mthp32kNrAnonPartiallyMapped = "hugepages-32kB/stats/nr_anon_partially_mapped",
    Mthp32kSwpinFallback = "hugepages-32kB/stats/swpin_fallback",
    Mthp32kSwpinFallbackCharge = "hugepages-32kB/stats/swpin_fallback_charge",
    Mthp32kZswpout = "hugepages-32kB/stats/zswpout",
    Mthp32kCollapseAlloc = "hugepages-32kB/stats/collapse_alloc",
    Mthp32kCollapseAllocFailed = "hugepages-32kB/stats/collapse_alloc_failed",
    Mthp32kCollapseExceedNonePte = "hugepages-32kB/stats/collapse_exceed_none_pte",
    Mthp32kCollapseExceedSwapPte = "hugepages-32kB/stats/collapse_exceed_swap_pte",
    Mthp32kCollapseExceedSharedPte = "hugepages-32kB/stats/collapse_exceed_shared_pte",
    Mthp64kShmemAlloc = "hugepages-64kB/stats/shmem_alloc",
    Mthp64kShmemFallback = "hugepages-64kB/stats/shmem_fallback",
    Mthp64kShmemFallbackCharge = "hugepages-64kB/stats/shmem_fallback_charge",
    Mthp64kSwpout = "hugepages-64kB/stats/swpout",
    Mthp64kSwpoutFallback = "hugepages-64kB/stats/swpout_fallback",
    Mthp64kSwpin = "hugepages-64kB/stats/swpin",
    Mthp64kAnonFaultAlloc = "hugepages-64kB/stats/anon_fault_alloc",
    Mthp64kAnonFaultFallback = "hugepages-64kB/stats/anon_fault_fallback",
    Mthp64kAnonFaultFallbackCharge = "hugepages-64kB/stats/anon_fault_fallback_charge",
    Mthp64kSplitDeferred = "hugepages-64kB/stats/split_deferred",
    Mthp64kSplit = "hugepages-64kB/stats/split",
    Mthp64kSplitFailed = "hugepages-64kB/stats/split_failed",
    Mthp64kNrAnon = "hugepages-64kB/stats/nr_anon",
    Mthp64kNrAnonPartiallyMapped = "hugepages-64kB/stats/nr_anon_partially_mapped",
    Mthp64kSwpinFallback = "hugepages-64kB/stats/swpin_fallback",
    Mthp64kSwpinFallbackCharge = "hugepages-64kB/stats/swpin_fallback_charge",
    Mthp64kZswpout = "hugepages-64kB/stats/zswpout",
    Mthp64kCollapseAlloc = "hugepages-64kB/stats/collapse_alloc",
    Mthp64kCollapseAllocFailed = "hugepages-64kB/stats/collapse_alloc_failed",
    Mthp64kCollapseExceedNonePte = "hugepages-64kB/stats/collapse_exceed_none_pte",
    Mthp64kCollapseExceedSwapPte = "hugepages-64kB/stats/collapse_exceed_swap_pte",
    Mthp64kCollapseExceedSharedPte = "hugepages-64kB/stats/collapse_exceed_shared_pte",
    Mthp128kShmemAlloc = "hugepages-128kB/stats/shmem_alloc",
    Mthp128kShmemFallback = "hugepages-128kB/stats/shmem_fallback",
    Mthp128kShmemFallbackCharge = "hugepages-128kB/stats/shmem_fallback_charge",
    Mthp128kSwpout = "hugepages-128kB/stats/swpout",
    Mthp128kSwpoutFallback = "hugepages-128kB/stats/swpout_fallback",
    Mthp128kSwpin = "hugepages-128kB/stats/swpin",
    Mthp128kAnonFaultAlloc = "hugepages-128kB/stats/anon_fault_alloc",
    Mthp128kAnonFaultFallback = "hugepages-128kB/stats/anon_fault_fallback",
    Mthp128kAnonFaultFallbackCharge = "hugepages-128kB/stats/anon_fault_fallback_charge",
    Mthp128kSplitDeferred = "hugepages-128kB/stats/split_deferred",
    Mthp128kSplit = "hugepages-128kB/stats/split",
    Mthp128kSplitFailed = "hugepages-128kB/stats/split_failed",
    Mthp128kNrAnon = "hugepages-128kB/stats/nr_anon",
    Mthp128kNrAnonPartiallyMapped = "hugepages-128kB/stats/nr_anon_partially_mapped",
    Mthp128kSwpinFallback = "hugepages-128kB/stats/swpin_fallback",
    Mthp128kSwpinFallbackCharge = "hugepages-128kB/stats/swpin_fallback_charge",
    Mthp128kZswpout = "hugepages-128kB/stats/zswpout",
    Mthp128kCollapseAlloc = "hugepages-128kB/stats/collapse_alloc",
    Mthp128kCollapseAllocFailed = "hugepages-128kB/stats/collapse_alloc_failed",
    Mthp128kCollapseExceedNonePte = "hugepages-128kB/stats/collapse_exceed_none_pte",
    Mthp128kCollapseExceedSwapPte = "hugepages-128kB/stats/collapse_exceed_swap_pte",
    Mthp128kCollapseExceedSharedPte = "hugepages-128kB/stats/collapse_exceed_shared_pte",
    Mthp256kShmemAlloc = "hugepages-256kB/stats/shmem_alloc",
    Mthp256kShmemFallback = "hugepages-256kB/stats/shmem_fallback",
    Mthp256kShmemFallbackCharge = "hugepages-256kB/stats/shmem_fallback_charge",
    Mthp256kSwpout = "hugepages-256kB/stats/swpout",
    Mthp256kSwpoutFallback = "hugepages-256kB/stats/swpout_fallback",
    Mthp256kSwpin = "hugepages-256kB/stats/swpin",
    Mthp256kAnonFaultAlloc = "hugepages-256kB/stats/anon_fault_alloc",
    Mthp256kAnonFaultFallback = "hugepages-256kB/stats/anon_fault_fallback",
    Mthp256kAnonFaultFallbackCharge = "hugepages-256kB/stats/anon_fault_fallback_charge",
    Mthp256kSplitDeferred = "hugepages-256kB/stats/split_deferred",
    Mthp256kSplit = "hugepages-256kB/stats/split",
    Mthp256kSplitFailed = "hugepages-256kB/stats/split_failed",
    Mthp256kNrAnon = "hugepages-256kB/stats/nr_anon",
    Mthp256kNrAnonPartiallyMapped = "hugepages-256kB/stats/nr_anon_partially_mapped",
    Mthp256kSwpinFallback = "hugepages-256kB/stats/swpin_fallback",
    Mthp256kSwpinFallbackCharge = "hugepages-256kB/stats/swpin_fallback_charge",
    Mthp256kZswpout = "hugepages-256kB/stats/zswpout",
    Mthp256kCollapseAlloc = "hugepages-256kB/stats/collapse_alloc",
    Mthp256kCollapseAllocFailed = "hugepages-256kB/stats/collapse_alloc_failed",
    Mthp256kCollapseExceedNonePte = "hugepages-256kB/stats/collapse_exceed_none_pte",
    Mthp256kCollapseExceedSwapPte = "hugepages-256kB/stats/collapse_exceed_swap_pte",
    Mthp256kCollapseExceedSharedPte = "hugepages-256kB/stats/collapse_exceed_shared_pte",
    Mthp512kShmemAlloc = "hugepages-512kB/stats/shmem_alloc",
    Mthp512kShmemFallback = "hugepages-512kB/stats/shmem_fallback",
    Mthp512kShmemFallbackCharge = "hugepages-512kB/stats/shmem_fallback_charge",
    Mthp512kSwpout = "hugepages-512kB/stats/swpout",
    Mthp512kSwpoutFallback = "hugepages-512kB/stats/swpout_fallback",
    Mthp512kSwpin = "hugepages-512kB/stats/swpin",
    Mthp512kAnonFaultAlloc = "hugepages-512kB/stats/anon_fault_alloc",
    Mthp512kAnonFaultFallback = "hugepages-512kB/stats/anon_fault_fallback",
    Mthp512kAnonFaultFallbackCharge = "hugepages-512kB/stats/anon_fault_fallback_charge",
    Mthp512kSplitDeferred = "hugepages-512kB/stats/split_deferred",
    Mthp512kSplit = "hugepages-512kB/stats/split",
    Mthp512kSplitFailed = "hugepages-512kB/stats/split_failed",
    Mthp512kNrAnon = "hugepages-512kB/stats/nr_anon",
    Mthp512kNrAnonPartiallyMapped = "hugepages-512kB/stats/nr_anon_partially_mapped",
    Mthp512kSwpinFallback = "hugepages-512kB/stats/swpin_fallback",
    Mthp512kSwpinFallbackCharge = "hugepages-512kB/stats/swpin_fallback_charge",
    Mthp512kZswpout = "hugepages-512kB/stats/zswpout",
    Mthp512kCollapseAlloc = "hugepages-512kB/stats/collapse_alloc",
    Mthp512kCollapseAllocFailed = "hugepages-512kB/stats/collapse_alloc_failed",
    Mthp512kCollapseExceedNonePte = "hugepages-512kB/stats/collapse_exceed_none_pte",
    Mthp512kCollapseExceedSwapPte = "hugepages-512kB/stats/collapse_exceed_swap_pte",
    Mthp512kCollapseExceedSharedPte = "hugepages-512kB/stats/collapse_exceed_shared_pte",
    Mthp1024kShmemAlloc = "hugepages-1024kB/stats/shmem_alloc",
    Mthp1024kShmemFallback = "hugepages-1024kB/stats/shmem_fallback",
    Mthp1024kShmemFallbackCharge = "hugepages-1024kB/stats/shmem_fallback_charge",
    Mthp1024kSwpout = "hugepages-1024kB/stats/swpout",
    Mthp1024kSwpoutFallback = "hugepages-1024kB/stats/swpout_fallback",
    Mthp1024kSwpin = "hugepages-1024kB/stats/swpin",
    Mthp1024kAnonFaultAlloc = "hugepages-1024kB/stats/anon_fault_alloc",
    Mthp1024kAnonFaultFallback = "hugepages-1024kB/stats/anon_fault_fallback",
    Mthp1024kAnonFaultFallbackCharge = "hugepages-1024kB/stats/anon_fault_fallback_charge",
    Mthp1024kSplitDeferred = "hugepages-1024kB/stats/split_deferred",
    Mthp1024kSplit = "hugepages-1024kB/stats/split",
    Mthp1024kSplitFailed = "hugepages-1024kB/stats/split_failed",
    Mthp1024kNrAnon = "hugepages-1024kB/stats/nr_anon",
    Mthp1024kNrAnonPartiallyMapped = "hugepages-1024kB/stats/nr_anon_partially_mapped",
    Mthp1024kSwpinFallback = "hugepages-1024kB/stats/swpin_fallback",
    Mthp1024kSwpinFallbackCharge = "hugepages-1024kB/stats/swpin_fallback_charge",
    Mthp1024kZswpout = "hugepages-1024kB/stats/zswpout",
    Mthp1024kCollapseAlloc = "hugepages-1024kB/stats/collapse_alloc",
    Mthp1024kCollapseAllocFailed = "hugepages-1024kB/stats/collapse_alloc_failed",
    Mthp1024kCollapseExceedNonePte = "hugepages-1024kB/stats/collapse_exceed_none_pte",
    Mthp1024kCollapseExceedSwapPte = "hugepages-1024kB/stats/collapse_exceed_swap_pte",
    Mthp1024kCollapseExceedSharedPte = "hugepages-1024kB/stats/collapse_exceed_shared_pte",
    Mthp2048kShmemAlloc = "hugepages-2048kB/stats/shmem_alloc",
    Mthp2048kShmemFallback = "hugepages-2048kB/stats/shmem_fallback",
    Mthp2048kShmemFallbackCharge = "hugepages-2048kB/stats/shmem_fallback_charge",
    Mthp2048kSwpout = "hugepages-2048kB/stats/swpout",
    Mthp2048kSwpoutFallback = "hugepages-2048kB/stats/swpout_fallback",
    Mthp2048kSwpin = "hugepages-2048kB/stats/swpin",
    Mthp2048kAnonFaultAlloc = "hugepages-2048kB/stats/anon_fault_alloc",
    Mthp2048kAnonFaultFallback = "hugepages-2048kB/stats/anon_fault_fallback",
    Mthp2048kAnonFaultFallbackCharge = "hugepages-2048kB/stats/anon_fault_fallback_charge",
    Mthp2048kSplitDeferred = "hugepages-2048kB/stats/split_deferred",
    Mthp2048kSplit = "hugepages-2048kB/stats/split",
    Mthp2048kSplitFailed = "hugepages-2048kB/stats/split_failed",
    Mthp2048kNrAnon = "hugepages-2048kB/stats/nr_anon",
    Mthp2048kNrAnonPartiallyMapped = "hugepages-2048kB/stats/nr_anon_partially_mapped",
    Mthp2048kSwpinFallback = "hugepages-2048kB/stats/swpin_fallback",
    Mthp2048kSwpinFallbackCharge = "hugepages-2048kB/stats/swpin_fallback_charge",
    Mthp2048kZswpout = "hugepages-2048kB/stats/zswpout",
    Mthp2048kCollapseAlloc = "hugepages-2048kB/stats/collapse_alloc",
    Mthp2048kCollapseAllocFailed = "hugepages-2048kB/stats/collapse_alloc_failed",
    Mthp2048kCollapseExceedNonePte = "hugepages-2048kB/stats/collapse_exceed_none_pte",
    Mthp2048kCollapseExceedSwapPte = "hugepages-2048kB/stats/collapse_exceed_swap_pte",
    Mthp2048kCollapseExceedSharedPte = "hugepages-2048kB/stats/collapse_exceed_shared_pte",
});

/// A per-size mTHP statistic (`enum mthp_stat_item`, the ones mmsim
/// counts).
#[derive(Debug, Clone, Copy)]
pub enum MthpStat {
    ShmemAlloc,
    ShmemFallback,
    ShmemFallbackCharge,
    Swpout,
    SwpoutFallback,
    Swpin,
    AnonFaultAlloc,
    AnonFaultFallback,
    AnonFaultFallbackCharge,
    SplitDeferred,
    Split,
    SplitFailed,
    NrAnon,
    NrAnonPartiallyMapped,
    // 7.3's: after 6.12.
    SwpinFallback,
    SwpinFallbackCharge,
    Zswpout,
    CollapseAlloc,
    CollapseAllocFailed,
    CollapseExceedNonePte,
    CollapseExceedSwapPte,
    CollapseExceedSharedPte,
}

/// The counter of `stat` for folios of `order` (2 to 9).
pub fn mthp_item(order: u8, stat: MthpStat) -> Vm {
    MTHP_ITEMS[order as usize - 2][stat as usize]
}

const MTHP_ITEMS: [[Vm; 22]; 8] = [
    [
        Vm::Mthp16kShmemAlloc,
        Vm::Mthp16kShmemFallback,
        Vm::Mthp16kShmemFallbackCharge,
        Vm::Mthp16kSwpout,
        Vm::Mthp16kSwpoutFallback,
        Vm::Mthp16kSwpin,
        Vm::Mthp16kAnonFaultAlloc,
        Vm::Mthp16kAnonFaultFallback,
        Vm::Mthp16kAnonFaultFallbackCharge,
        Vm::Mthp16kSplitDeferred,
        Vm::Mthp16kSplit,
        Vm::Mthp16kSplitFailed,
        Vm::Mthp16kNrAnon,
        Vm::Mthp16kNrAnonPartiallyMapped,
        Vm::Mthp16kSwpinFallback,
        Vm::Mthp16kSwpinFallbackCharge,
        Vm::Mthp16kZswpout,
        Vm::Mthp16kCollapseAlloc,
        Vm::Mthp16kCollapseAllocFailed,
        Vm::Mthp16kCollapseExceedNonePte,
        Vm::Mthp16kCollapseExceedSwapPte,
        Vm::Mthp16kCollapseExceedSharedPte,
    ],
    [
        Vm::Mthp32kShmemAlloc,
        Vm::Mthp32kShmemFallback,
        Vm::Mthp32kShmemFallbackCharge,
        Vm::Mthp32kSwpout,
        Vm::Mthp32kSwpoutFallback,
        Vm::Mthp32kSwpin,
        Vm::Mthp32kAnonFaultAlloc,
        Vm::Mthp32kAnonFaultFallback,
        Vm::Mthp32kAnonFaultFallbackCharge,
        Vm::Mthp32kSplitDeferred,
        Vm::Mthp32kSplit,
        Vm::Mthp32kSplitFailed,
        Vm::Mthp32kNrAnon,
        Vm::Mthp32kNrAnonPartiallyMapped,
        Vm::Mthp32kSwpinFallback,
        Vm::Mthp32kSwpinFallbackCharge,
        Vm::Mthp32kZswpout,
        Vm::Mthp32kCollapseAlloc,
        Vm::Mthp32kCollapseAllocFailed,
        Vm::Mthp32kCollapseExceedNonePte,
        Vm::Mthp32kCollapseExceedSwapPte,
        Vm::Mthp32kCollapseExceedSharedPte,
    ],
    [
        Vm::Mthp64kShmemAlloc,
        Vm::Mthp64kShmemFallback,
        Vm::Mthp64kShmemFallbackCharge,
        Vm::Mthp64kSwpout,
        Vm::Mthp64kSwpoutFallback,
        Vm::Mthp64kSwpin,
        Vm::Mthp64kAnonFaultAlloc,
        Vm::Mthp64kAnonFaultFallback,
        Vm::Mthp64kAnonFaultFallbackCharge,
        Vm::Mthp64kSplitDeferred,
        Vm::Mthp64kSplit,
        Vm::Mthp64kSplitFailed,
        Vm::Mthp64kNrAnon,
        Vm::Mthp64kNrAnonPartiallyMapped,
        Vm::Mthp64kSwpinFallback,
        Vm::Mthp64kSwpinFallbackCharge,
        Vm::Mthp64kZswpout,
        Vm::Mthp64kCollapseAlloc,
        Vm::Mthp64kCollapseAllocFailed,
        Vm::Mthp64kCollapseExceedNonePte,
        Vm::Mthp64kCollapseExceedSwapPte,
        Vm::Mthp64kCollapseExceedSharedPte,
    ],
    [
        Vm::Mthp128kShmemAlloc,
        Vm::Mthp128kShmemFallback,
        Vm::Mthp128kShmemFallbackCharge,
        Vm::Mthp128kSwpout,
        Vm::Mthp128kSwpoutFallback,
        Vm::Mthp128kSwpin,
        Vm::Mthp128kAnonFaultAlloc,
        Vm::Mthp128kAnonFaultFallback,
        Vm::Mthp128kAnonFaultFallbackCharge,
        Vm::Mthp128kSplitDeferred,
        Vm::Mthp128kSplit,
        Vm::Mthp128kSplitFailed,
        Vm::Mthp128kNrAnon,
        Vm::Mthp128kNrAnonPartiallyMapped,
        Vm::Mthp128kSwpinFallback,
        Vm::Mthp128kSwpinFallbackCharge,
        Vm::Mthp128kZswpout,
        Vm::Mthp128kCollapseAlloc,
        Vm::Mthp128kCollapseAllocFailed,
        Vm::Mthp128kCollapseExceedNonePte,
        Vm::Mthp128kCollapseExceedSwapPte,
        Vm::Mthp128kCollapseExceedSharedPte,
    ],
    [
        Vm::Mthp256kShmemAlloc,
        Vm::Mthp256kShmemFallback,
        Vm::Mthp256kShmemFallbackCharge,
        Vm::Mthp256kSwpout,
        Vm::Mthp256kSwpoutFallback,
        Vm::Mthp256kSwpin,
        Vm::Mthp256kAnonFaultAlloc,
        Vm::Mthp256kAnonFaultFallback,
        Vm::Mthp256kAnonFaultFallbackCharge,
        Vm::Mthp256kSplitDeferred,
        Vm::Mthp256kSplit,
        Vm::Mthp256kSplitFailed,
        Vm::Mthp256kNrAnon,
        Vm::Mthp256kNrAnonPartiallyMapped,
        Vm::Mthp256kSwpinFallback,
        Vm::Mthp256kSwpinFallbackCharge,
        Vm::Mthp256kZswpout,
        Vm::Mthp256kCollapseAlloc,
        Vm::Mthp256kCollapseAllocFailed,
        Vm::Mthp256kCollapseExceedNonePte,
        Vm::Mthp256kCollapseExceedSwapPte,
        Vm::Mthp256kCollapseExceedSharedPte,
    ],
    [
        Vm::Mthp512kShmemAlloc,
        Vm::Mthp512kShmemFallback,
        Vm::Mthp512kShmemFallbackCharge,
        Vm::Mthp512kSwpout,
        Vm::Mthp512kSwpoutFallback,
        Vm::Mthp512kSwpin,
        Vm::Mthp512kAnonFaultAlloc,
        Vm::Mthp512kAnonFaultFallback,
        Vm::Mthp512kAnonFaultFallbackCharge,
        Vm::Mthp512kSplitDeferred,
        Vm::Mthp512kSplit,
        Vm::Mthp512kSplitFailed,
        Vm::Mthp512kNrAnon,
        Vm::Mthp512kNrAnonPartiallyMapped,
        Vm::Mthp512kSwpinFallback,
        Vm::Mthp512kSwpinFallbackCharge,
        Vm::Mthp512kZswpout,
        Vm::Mthp512kCollapseAlloc,
        Vm::Mthp512kCollapseAllocFailed,
        Vm::Mthp512kCollapseExceedNonePte,
        Vm::Mthp512kCollapseExceedSwapPte,
        Vm::Mthp512kCollapseExceedSharedPte,
    ],
    [
        Vm::Mthp1024kShmemAlloc,
        Vm::Mthp1024kShmemFallback,
        Vm::Mthp1024kShmemFallbackCharge,
        Vm::Mthp1024kSwpout,
        Vm::Mthp1024kSwpoutFallback,
        Vm::Mthp1024kSwpin,
        Vm::Mthp1024kAnonFaultAlloc,
        Vm::Mthp1024kAnonFaultFallback,
        Vm::Mthp1024kAnonFaultFallbackCharge,
        Vm::Mthp1024kSplitDeferred,
        Vm::Mthp1024kSplit,
        Vm::Mthp1024kSplitFailed,
        Vm::Mthp1024kNrAnon,
        Vm::Mthp1024kNrAnonPartiallyMapped,
        Vm::Mthp1024kSwpinFallback,
        Vm::Mthp1024kSwpinFallbackCharge,
        Vm::Mthp1024kZswpout,
        Vm::Mthp1024kCollapseAlloc,
        Vm::Mthp1024kCollapseAllocFailed,
        Vm::Mthp1024kCollapseExceedNonePte,
        Vm::Mthp1024kCollapseExceedSwapPte,
        Vm::Mthp1024kCollapseExceedSharedPte,
    ],
    [
        Vm::Mthp2048kShmemAlloc,
        Vm::Mthp2048kShmemFallback,
        Vm::Mthp2048kShmemFallbackCharge,
        Vm::Mthp2048kSwpout,
        Vm::Mthp2048kSwpoutFallback,
        Vm::Mthp2048kSwpin,
        Vm::Mthp2048kAnonFaultAlloc,
        Vm::Mthp2048kAnonFaultFallback,
        Vm::Mthp2048kAnonFaultFallbackCharge,
        Vm::Mthp2048kSplitDeferred,
        Vm::Mthp2048kSplit,
        Vm::Mthp2048kSplitFailed,
        Vm::Mthp2048kNrAnon,
        Vm::Mthp2048kNrAnonPartiallyMapped,
        Vm::Mthp2048kSwpinFallback,
        Vm::Mthp2048kSwpinFallbackCharge,
        Vm::Mthp2048kZswpout,
        Vm::Mthp2048kCollapseAlloc,
        Vm::Mthp2048kCollapseAllocFailed,
        Vm::Mthp2048kCollapseExceedNonePte,
        Vm::Mthp2048kCollapseExceedSwapPte,
        Vm::Mthp2048kCollapseExceedSharedPte,
    ],
];

/// The first per-size mTHP item: counters from here on are printed only
/// when not zero.
pub const FIRST_MTHP_ITEM: usize = Vm::Mthp16kShmemAlloc as usize;

/// A flat array of counters indexed by an item enum.
#[derive(Clone)]
pub struct Counters<E, const N: usize> {
    v: [i64; N],
    _item: std::marker::PhantomData<E>,
}

impl<E, const N: usize> Default for Counters<E, N> {
    fn default() -> Self {
        Counters {
            v: [0; N],
            _item: std::marker::PhantomData,
        }
    }
}

impl<E: Into<usize>, const N: usize> Counters<E, N> {
    #[inline]
    pub fn add(&mut self, item: E, n: i64) {
        self.v[item.into()] += n;
    }
    #[inline]
    pub fn inc(&mut self, item: E) {
        self.v[item.into()] += 1;
    }
    #[inline]
    pub fn get(&self, item: E) -> i64 {
        self.v[item.into()]
    }
    /// Adds every counter of `other`.
    pub fn add_all(&mut self, other: &Self) {
        for (a, b) in self.v.iter_mut().zip(other.v.iter()) {
            *a += b;
        }
    }
    /// Counter-by-counter difference `self − earlier`.
    pub fn delta(&self, earlier: &Self) -> Self {
        let mut d = Self::default();
        for i in 0..N {
            d.v[i] = self.v[i] - earlier.v[i];
        }
        d
    }
}

impl From<Vm> for usize {
    fn from(v: Vm) -> usize {
        v as usize
    }
}

impl From<Mc> for usize {
    fn from(m: Mc) -> usize {
        m as usize
    }
}

/// Node-wide /proc/vmstat.
pub type VmStat = Counters<Vm, NR_VM_ITEMS>;

impl VmStat {
    /// (name, value) in /proc/vmstat order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        VM_NAMES
            .iter()
            .copied()
            .zip(self.v.iter().copied())
            .enumerate()
            .filter(|&(i, (_, v))| i < FIRST_MTHP_ITEM || v != 0)
            .map(|(_, nv)| nv)
    }
}

items!(Mc, NR_MC_ITEMS, MC_NAMES {
    // memory.stat, 6.1 order. Sizes are kept in pages and printed in bytes.
    Anon = "anon",
    File = "file",
    Pagetables = "pagetables",
    Shmem = "shmem",
    // MEMCG_ZSWAP_B (kept in bytes) and MEMCG_ZSWAPPED (pages): output
    // only where the spec sets zswap.
    Zswap = "zswap",
    Zswapped = "zswapped",
    FileMapped = "file_mapped",
    FileDirty = "file_dirty",
    FileWriteback = "file_writeback",
    Swapcached = "swapcached",
    AnonThp = "anon_thp",
    ShmemThp = "shmem_thp",
    InactiveAnon = "inactive_anon",
    ActiveAnon = "active_anon",
    InactiveFile = "inactive_file",
    ActiveFile = "active_file",
    Unevictable = "unevictable",
    WorkingsetRefaultAnon = "workingset_refault_anon",
    WorkingsetRefaultFile = "workingset_refault_file",
    WorkingsetActivateAnon = "workingset_activate_anon",
    WorkingsetActivateFile = "workingset_activate_file",
    WorkingsetRestoreAnon = "workingset_restore_anon",
    WorkingsetRestoreFile = "workingset_restore_file",
    WorkingsetNodereclaim = "workingset_nodereclaim",
    Pgscan = "pgscan",
    Pgsteal = "pgsteal",
    // memcg_vm_event_stat's PSWPIN and PSWPOUT (after 6.12, 7.3 has them;
    // memory_stat_absent hides them before): printed after pgsteal.
    Pswpin = "pswpin",
    Pswpout = "pswpout",
    PgscanKswapd = "pgscan_kswapd",
    PgscanDirect = "pgscan_direct",
    PgstealKswapd = "pgsteal_kswapd",
    PgstealDirect = "pgsteal_direct",
    Pgfault = "pgfault",
    Pgmajfault = "pgmajfault",
    Pgrefill = "pgrefill",
    Pgactivate = "pgactivate",
    Pgdeactivate = "pgdeactivate",
    Pglazyfree = "pglazyfree",
    Pglazyfreed = "pglazyfreed",
    Zswpin = "zswpin",
    Zswpout = "zswpout",
    Zswpwb = "zswpwb",
    ThpFaultAlloc = "thp_fault_alloc",
    ThpCollapseAlloc = "thp_collapse_alloc",
    SwpinZero = "swpin_zero",
    SwpoutZero = "swpout_zero",
});

/// One cgroup's memory.stat (its own, not yet summed over descendants).
pub type MemcgStat = Counters<Mc, NR_MC_ITEMS>;

impl MemcgStat {
    /// memory.stat lines: (name, value) with sizes in bytes.
    pub fn lines(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        MC_NAMES.iter().enumerate().map(|(i, &n)| {
            let size = i <= Mc::Unevictable as usize && i != Mc::Zswap as usize;
            (n, if size { self.v[i] * 4096 } else { self.v[i] })
        })
    }
}

/// The /proc/vmstat and memory.stat lines of zswap, left out of the
/// output of a run whose spec does not set zswap (its output is as it
/// was before zswap was modelled).
pub const ZSWAP_LINES: [&str; 5] = ["zswpin", "zswpout", "zswpwb", "zswap", "zswapped"];

/// /proc/vmstat lines mmsim keeps that the preset's release does not
/// have: its output leaves them out, as that kernel does. 5.10's from its
/// mm/vmstat.c (nr_swapcached came in 5.12).
pub fn vmstat_absent(preset: Preset) -> &'static [&'static str] {
    match preset {
        // The zero-filled swap-out came in 6.12.
        Preset::V5_10 => &["nr_swapcached", "swpin_zero", "swpout_zero", "zswpwb"],
        Preset::V6_1 => &["swpin_zero", "swpout_zero", "zswpwb"],
        // The per-size swpin stat came after 6.12 (7.3 has it).
        Preset::V6_12 => &[
            "hugepages-16kB/stats/swpin",
            "hugepages-32kB/stats/swpin",
            "hugepages-64kB/stats/swpin",
            "hugepages-128kB/stats/swpin",
            "hugepages-256kB/stats/swpin",
            "hugepages-512kB/stats/swpin",
            "hugepages-1024kB/stats/swpin",
            "hugepages-2048kB/stats/swpin",
        ],
        _ => &[],
    }
}

/// memory.stat keys mmsim keeps that the preset's release does not have
/// (5.10's memory_stat_format: no pagetables, swapcached or shmem_thp,
/// and pgscan/pgsteal not split by kswapd and direct).
pub fn memory_stat_absent(preset: Preset) -> &'static [&'static str] {
    match preset {
        Preset::V5_10 => &[
            "pagetables",
            "swapcached",
            "shmem_thp",
            "pgscan_kswapd",
            "pgscan_direct",
            "pgsteal_kswapd",
            "pgsteal_direct",
            "swpin_zero",
            "swpout_zero",
            "pswpin",
            "pswpout",
            "zswpwb",
        ],
        Preset::V6_1 => &["swpin_zero", "swpout_zero", "pswpin", "pswpout", "zswpwb"],
        // 6.12's memcg_vm_event_stat has no PSWPIN or PSWPOUT: the
        // per-memcg swap-in and swap-out counts came after it (7.3 has
        // them, counted by count_memcg_folio_events beside the vmstat).
        Preset::V6_12 => &["pswpin", "pswpout"],
        _ => &[],
    }
}

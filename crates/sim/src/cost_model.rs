//! The cost model: simulated CPU time of each kernel primitive, in ns.
//!
//! Every constant states where its value comes from. None is fitted to a
//! seed's published result: the seeds are the test, not the training set.
//! "First principles" here means an estimate from the hardware's documented
//! or commonly measured latencies and throughputs on a current x86-64
//! server core (~3 GHz, DDR4/DDR5, ~80-100 ns DRAM latency, ~10-20 GB/s
//! single-core memset/memcpy bandwidth), or measured by
//! `cargo bench -p mmsim-sim --bench primitives` (benches/primitives.rs) on
//! the development machine (a 2-vCPU Xeon KVM guest, docs/performance.md).

/// A user access to one byte of a resident, mapped page, one per 4 KiB
/// page as `touch` does: every access is a new page, so it pays a TLB miss
/// (a page walk served mostly from cache, ~20-30 ns) and a cache miss to
/// DRAM (~80 ns). 100 ns.
pub const TOUCH_NS: u64 = 100;

/// Exception entry and exit for a page fault, plus `handle_mm_fault`'s
/// walk and PTE lock: a minimal minor fault (e.g. mapping the zero page)
/// measures ~0.5-1 µs on current x86-64 with the usual speculation
/// mitigations. 600 ns.
pub const FAULT_ENTRY_NS: u64 = 600;

/// `clear_page` of a 4 KiB page not in cache: 589 ns measured (minimum of
/// 7 rounds; benches/primitives.rs, each page cold in a 256 MiB pool).
pub const CLEAR_PAGE_NS: u64 = 590;

/// `copy_page` of 4 KiB into a page not in cache: 670 ns measured. Also
/// what a RAM disk (brd) costs per page of a bio: `brd_submit_bio` copies
/// each page between its own page and the page-cache page
/// (`copy_to_brd`/`copy_from_brd`, a 4 KiB memcpy) on the submitting CPU.
pub const COPY_PAGE_NS: u64 = 670;

/// Taking an order-0 page off a free list (`rmqueue`, zone lock or pcp
/// list, `prep_new_page`): ~100 ns; a handful of cache misses on
/// struct page and the list heads.
pub const ALLOC_PAGE_NS: u64 = 100;

/// Returning an order-0 page (`free_unref_page`): ~80 ns, as above.
pub const FREE_PAGE_NS: u64 = 80;

/// `__split_huge_page_tail` for one page of a split folio: its flags,
/// mapping, index and refcount set, the xarray slot and the LRU link
/// rewritten — a few stores to two or three cache lines: ~20 ns.
pub const SPLIT_TAIL_NS: u64 = 20;

/// Preparing or releasing one tail page of a large folio
/// (`prep_compound_tail`, the free path's tail checks): a store or two to
/// one 64-byte struct page, usually a cache miss on a fresh block: ~5 ns.
pub const FOLIO_TAIL_NS: u64 = 5;

/// `mem_cgroup_charge` served from the per-CPU stock: ~30 ns; a
/// `page_counter_try_charge` walk of one or two levels adds ~50 ns.
pub const MEMCG_CHARGE_NS: u64 = 40;
pub const PAGE_COUNTER_NS: u64 = 50;

/// Adding a folio to the per-CPU lru_add batch and its share of the batch
/// flush under the lruvec lock (15 folios a flush): ~60 ns.
pub const LRU_ADD_NS: u64 = 60;

/// Rmap add or remove on an order-0 folio plus its lruvec stat update
/// (`page_add_new_anon_rmap`, `__lruvec_stat_mod_folio`): ~40 ns, the
/// sum of the two parts below.
pub const RMAP_NS: u64 = MAPCOUNT_NS + RMAP_STAT_NS;

/// The atomic update of one page's `_mapcount` (a locked RMW on a line
/// the PTE walk just brought in): ~10 ns.
pub const MAPCOUNT_NS: u64 = 10;

/// One `__mod_lruvec_page_state` of NR_FILE_MAPPED or NR_ANON_MAPPED: the
/// node counter, the memcg's per-CPU counter and its rstat update
/// (`cgroup_rstat_updated`): ~30 ns.
pub const RMAP_STAT_NS: u64 = 30;

/// `ptep_clear_flush` of one PTE mapped by a single-threaded process: the
/// PTE cleared and the local TLB entry flushed (`invlpg`); try_to_unmap
/// defers the flush only when other CPUs may cache the mm's entries.
pub const PTEP_CLEAR_FLUSH_NS: u64 = PTE_NS + TLB_FLUSH_NS;

/// `try_to_unmap_one`'s own work on a file folio in one VMA, besides its
/// PTEs: the `page_vma_mapped_walk` set-up, the i_mmap walk step, the mm
/// counter and the mmu notifier calls. `UNMAP_ONE_NS` prices an order-0
/// page's whole unmap, so what is left of it after its one PTE flush and
/// rmap removal: 250 + 40 − 120 − 40 = 130 ns.
pub const UNMAP_WALK_NS: u64 = UNMAP_ONE_NS - PTEP_CLEAR_FLUSH_NS;

/// Setting or changing one PTE under the PTE lock: ~20 ns. The multi-gen
/// LRU's page-table reads are priced at this too, per entry: each PTE its
/// walk (`walk_pte_range`) or rmap's look-around tests (and clears, if
/// young), each PMD entry `walk_pmd_range` reads, and each Bloom filter
/// test (two bit loads keyed by a hash): the same cache-line-bound work on
/// one entry. Walks read PTEs in order, eight to a cache line, so this is
/// an upper bound for them; no separate microbenchmark exists yet.
pub const PTE_NS: u64 = 20;

/// Flushing one user TLB entry on the local CPU (`invlpg`): ~100 ns.
pub const TLB_FLUSH_NS: u64 = 100;

/// Isolating or putting back one folio on an LRU list (list ops and flag
/// updates under the lruvec lock): ~30 ns. Also the multi-gen LRU's moves
/// between generations (`inc_min_seq`, `sort_folio`) and each folio
/// `scan_folios` takes off a list: the same list and flag operations.
pub const LRU_MOVE_NS: u64 = 30;

/// `folio_referenced` for an order-0 folio mapped once: anon_vma lock,
/// `page_vma_mapped_walk` to the PTE, test-and-clear young: ~150 ns.
pub const FOLIO_REFERENCED_NS: u64 = 150;

/// `try_to_unmap_one` for an order-0 folio mapped once: walk, PTE clear,
/// swap entry install, rmap removal, stats; TLB flush batched at the end
/// of `shrink_folio_list` (charged as TLB_FLUSH_NS once per batch): ~250 ns.
pub const UNMAP_ONE_NS: u64 = 250;

/// `filemap_add_folio` of a new page-cache folio: xarray insert under the
/// i_pages lock, mapping and index set, node and memcg stat updates; the
/// same order as `add_to_swap_cache` with its deletion (SWAP_SLOT_NS), of
/// which it is about two thirds: ~100 ns.
pub const PAGE_CACHE_ADD_NS: u64 = 100;

/// Swap slot allocation from the per-CPU slot cache, `add_to_swap_cache`
/// (xarray store) and the matching deletion: ~150 ns together. That is
/// what the reference values price (with SWAP_CACHE_ADD_NS at 0 and the
/// deletion's half in SWAP_CACHE_DEL_NS); a measured profile prices the
/// insert and the deletion apart, and this is then the allocation (and
/// shmem swap-in's fixed share), which no stock path separates.
pub const SWAP_SLOT_NS: u64 = 150;

/// `add_to_swap_cache` beyond SWAP_SLOT_NS, with the lookup that misses
/// before it on swap-in (`__read_swap_cache_async`): the store in the
/// swap cache (6.1's xarray under the i_pages lock), the folio's
/// reference, PG_swapcache, the node and memcg stats. 0 ns in the
/// reference values, whose SWAP_SLOT_NS holds it on the swap-out path
/// and whose swap-in through the cache had no price for it. `mmsim
/// calibrate` measures it (calibrate/swap_cache.toml: read faults on
/// slots a fork shares, which go through the swap cache, against slots
/// of count 1, which skip it on zram).
pub const SWAP_CACHE_ADD_NS: u64 = 0;

/// `__delete_from_swap_cache` (the store cleared, or the shadow left, the
/// stats, PG_swapcache, and the swap cache's references dropped) with the
/// folio lock its callers take: half of SWAP_SLOT_NS, 75 ns, in the
/// reference values. `mmsim calibrate` measures it
/// (calibrate/swap_cache.toml: munmap of folios the swap cache holds
/// against plain anon).
pub const SWAP_CACHE_DEL_NS: u64 = SWAP_SLOT_NS / 2;

/// Compressing one 4 KiB page in zram. The pages mmsim and its runner write
/// are zero but for a 4-byte content token. LZO1X-1 (minilzo) compresses
/// such a page in 1123 ns here (minimum of 7 rounds, benches/primitives.rs);
/// the kernel's default lzo-rle adds run-length coding of zero runs, so that
/// is an upper bound. zsmalloc's allocation and copy of the 44-byte result
/// add ~50 ns. 1150 ns.
pub const ZRAM_COMPRESS_NS: u64 = 1150;

/// Decompressing the same page, plus zsmalloc's map/unmap. Not measured:
/// minilzo copies a zero run byte by byte (9 µs here) where lzo-rle decodes
/// it as a run, i.e. a 4 KiB memset (~0.6 µs cold, CLEAR_PAGE_NS) plus
/// parsing a few dozen bytes. An estimate: 700 ns.
pub const ZRAM_DECOMPRESS_NS: u64 = 700;

/// Pool memory per stored page in zram: measured on the real kernel as
/// nr_zspages growth over pages stored (425 zspages for 25787 pages in
/// fidelity/anon_seq's write phase, 6.1.0-56): 67.5 bytes, i.e. the
/// ~50-60-byte lzo-rle object in zsmalloc's 64-byte class plus zspage
/// fragmentation. 68 bytes.
pub const ZRAM_STORED_BYTES: u64 = 68;

/// Per-folio overhead of the reclaim loop around a folio beyond the above
/// (trylock, flag tests, list handling in `shrink_folio_list`): ~50 ns.
pub const SHRINK_FOLIO_NS: u64 = 50;

/// What a core's two SMT threads deliver together against one thread alone,
/// in thousandths: 1300. Documented, not measured (the project's machines
/// have no SMT siblings): Intel's first Hyper-Threading paper reports "up
/// to 30%" more throughput on server application benchmarks (Marr et al.,
/// "Hyper-Threading Technology Architecture and Microarchitecture", Intel
/// Technology Journal 6(1), 2002). With both threads busy each runs at
/// 1.30 / 2 of a lone thread's speed, so its work takes 1 / 0.65 as long.
pub const SMT_THROUGHPUT_PERMILLE: u64 = 1300;

// What two CPUs cost each other, measured by `mmsim calibrate`'s many-CPU
// benches (crates/cli/src/calibrate/smp.rs; each timing the least of
// three tries) on the development machine, a 2-vCPU Intel Xeon @ 2.50GHz
// KVM guest whose vCPUs are two cores of one socket (a transfer of
// ~100 ns, not the ~20 ns of SMT siblings sharing an L1). Three runs on
// 2026-11-27, the middle one of each (`cargo test -p mmsim-cli --release
// --bin mmsim smp::tests::print_one_run -- --ignored --nocapture`):

/// One cache line moving to another core for a write: 103, 101, 110 ns.
pub const CACHELINE_TRANSFER_NS: u64 = 103;
/// A contended spinlock (and its data's line) passing to the waiting
/// core, beyond an uncontended acquisition: 175, 130, 185 ns.
pub const LOCK_HANDOFF_NS: u64 = 175;
/// The sender's synchronous IPI round trip to one other CPU (send, wait
/// for its handler): 2330, 1752, 2413 ns. In a KVM guest each IPI is a
/// VM exit on both sides; bare metal takes about half as long.
pub const IPI_NS: u64 = 2330;
/// The receiver's time lost to one IPI (entry, handler, exit): 1215,
/// 1087, 1199 ns.
pub const IPI_HANDLER_NS: u64 = 1199;

/// One memcg's fold from one CPU in an rstat flush
/// (`mem_cgroup_css_rstat_flush`: every memcg counter, event and lruvec
/// counter of that CPU read, subtracted and added up the tree). Measured
/// on the AMD development guest (Linux 6.18, cgroup v1) on 2026-11-30 by
/// calibrate's rstat bench (`mmsim-runner calibrate/rstat.toml --native
/// --rstat-bench 1000`): a memory.stat read after 512 pages mapped,
/// written and unmapped half on each CPU, minus after all on the
/// reader's (docs/calibrate.md). The session's five runs
/// (calibrate/results-native/amd-epyc-rstat-2026-11-30, rstat.json):
/// 2924, 2493, 1942, 2343 and 2153 ns; the median here.
pub const MEMCG_RSTAT_FLUSH_NS: u64 = 2343;

/// A VM exit and the entry back into the guest, with nothing handled
/// between (the hardware's world switch and KVM's exit and entry paths).
/// Documented, not measured (the machines calibrated are KVM guests
/// without nested VMX, so KVM does not run on them): kvm-unit-tests'
/// `vmcall` test takes 1,529 cycles on a Skylake-SP server (Wanpeng Li,
/// "KVM: VMX: Micro-optimize vmexit time when not exposing PMU",
/// kvm@vger.kernel.org, March 2020: 1,559 before the patch); at 2.5 GHz,
/// 612 ns. Charged for each EPT violation and each exit a remote TLB
/// flush's IPI forces (kvm.rs).
pub const KVM_EXIT_NS: u64 = 612;

/// KVM's handling of an EPT violation between the exit and the entry
/// when the host's page is there (`kvm_mmu_page_fault`: the fault's
/// walk of the EPT, `hva_to_pfn`'s get_user_pages, the SPTE installed):
/// 0.50 µs, the least EPT_VIOLATION time `perf kvm stat` shows (Andrea
/// Arcangeli, "Re: [PATCH 12/14] KVM: retpolines: x86: eliminate
/// retpoline from vmx.c exit handlers", kvm@vger.kernel.org, 15 October
/// 2019; the CPU is not named). Documented, not measured, as
/// `KVM_EXIT_NS`. A fault that needs the host's page adds the host
/// fault's own work, priced as the host's.
pub const KVM_PAGE_FAULT_NS: u64 = 500;

/// What a cache line's move between two sockets costs against its move
/// between two cores of one socket, in thousandths: 2118. Documented, not
/// measured (the project's machines have one socket): on a two-socket
/// Intel Xeon Platinum 8375C (Ice Lake-SP, an AWS c6i.metal) a cache line
/// bounced by compare-and-swap between two threads takes a median 108 ns
/// across the sockets against 51 ns within one (nviennot's
/// core-to-core-latency, github.com/nviennot/core-to-core-latency, its
/// README's single- and dual-socket tables). Ice Lake-SP because it is
/// the one two-socket machine a seed names (003); the same tables give
/// 2.7-2.8 for Broadwell and Cascade Lake pairs. Applied to a line's
/// transfer and a spinlock's hand-off alike (a hand-off moves the lock's
/// line and its data's).
pub const CROSS_SOCKET_PERMILLE: u64 = 2118;
/// Each of two cores copying at once gets this share of one core's copy
/// bandwidth alone, in thousandths: 903, 990, 955.
pub const MEM_BW_PAIR_PERMILLE: u64 = 955;
/// What a socket's memory delivers, MB/s, counted as STREAM counts it
/// (bytes read plus bytes written): two cores of the development machine
/// each copying 4 KiB pages over pools 4x its LLC at once, 2 x 2 x 128 MiB
/// in 19.4 ms (calibrate's `mem_bw` bench; membw.rs).
pub const MEM_BW_MBPS: u64 = 27_600;

/// CFS's `sysctl_sched_latency` (6 ms) and `sysctl_sched_min_granularity`
/// (0.75 ms) before the kernel scales them by 1 + log2(cpus): runnable
/// entities sharing a CPU get slices of latency / nr_running, at least
/// min_granularity (kernel/sched/fair.c defaults).
pub const SCHED_LATENCY_NS: u64 = 6_000_000;
pub const SCHED_MIN_GRANULARITY_NS: u64 = 750_000;
/// `sysctl_sched_wakeup_granularity` (1 ms before scaling): a woken entity
/// preempts the running one only if it is this far behind in vruntime.
pub const SCHED_WAKEUP_GRANULARITY_NS: u64 = 1_000_000;

/// How far one entity may run ahead of another ready one before the
/// scheduler switches: the granularity at which concurrently running tasks
/// (and kswapd) interleave. A few faults' worth: 10 µs. A simulation
/// parameter, not a kernel cost; it bounds how stale one CPU's view of
/// another's progress can be.
pub const QUANTUM_NS: u64 = 10_000;

/// Defines `Fn` (kernel functions the profile attributes time to), their
/// kernel names `FN_NAMES`, and `ALL_FNS`, from one list.
macro_rules! functions {
    ($($variant:ident = $name:literal,)*) => {
        /// Where simulated time goes, for the profile (like `perf report`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub enum Fn { $($variant,)* }
        pub const FN_NAMES: &[&str] = &[$($name,)*];
        pub const NR_FNS: usize = FN_NAMES.len();
        /// Every `Fn` in declaration order (`ALL_FNS[f as usize] == f`).
        pub const ALL_FNS: [Fn; NR_FNS] = [$(Fn::$variant,)*];
    };
}

functions! {
    User = "user",
    FaultEntry = "exc_page_fault",
    DoAnonymousPage = "do_anonymous_page",
    DoWpPage = "do_wp_page",
    DoSwapPage = "do_swap_page",
    PageAlloc = "__alloc_pages",
    PageFree = "free_unref_page",
    MemcgCharge = "mem_cgroup_charge",
    LruAdd = "folio_add_lru",
    ShrinkActiveList = "shrink_active_list",
    ShrinkInactiveList = "shrink_inactive_list",
    ShrinkFolioList = "shrink_folio_list",
    FolioReferenced = "folio_referenced",
    TryToUnmap = "try_to_unmap_one",
    AddToSwap = "add_to_swap",
    AddToSwapCache = "add_to_swap_cache",
    DeleteFromSwapCache = "__delete_from_swap_cache",
    FreeSwapSlot = "free_swap_slot",
    ZramWrite = "zram_write_page",
    ZramRead = "zram_read_page",
    ZswapStore = "zswap_frontswap_store",
    ZswapWriteback = "zswap_writeback_entry",
    ZswapLoad = "zswap_frontswap_load",
    SwapReadpage = "swap_readpage",
    Unmap = "unmap_page_range",
    HandleMmFault = "handle_mm_fault",
    TryToFreeMemCgroupPages = "try_to_free_mem_cgroup_pages",
    TryToFreePages = "try_to_free_pages",
    BalancePgdat = "balance_pgdat",
    ShrinkLruvec = "shrink_lruvec",
    Pageout = "pageout",
    TryToUnmapFlush = "try_to_unmap_flush",
    FlushTlbMulti = "native_flush_tlb_multi",
    FlushTlbFunc = "flush_tlb_func",
    RwsemDownWriteSlowpath = "rwsem_down_write_slowpath",
    RwsemDownReadSlowpath = "rwsem_down_read_slowpath",
    DownRead = "down_read",
    DownReadTrylock = "down_read_trylock",
    DownWrite = "down_write",
    UpWrite = "up_write",
    UpRead = "up_read",
    RawSpinLock = "_raw_spin_lock",
    QueuedSpinLockSlowpath = "native_queued_spin_lock_slowpath",
    AddRmap = "page_add_anon_rmap",
    AddFileRmap = "page_add_file_rmap",
    RemoveRmap = "page_remove_rmap",
    FolioRemoveRmapRange = "folio_remove_rmap_range",
    ModLruvecState = "__mod_lruvec_page_state",
    ModNodePageState = "__mod_node_page_state",
    ModZonePageState = "__mod_zone_page_state",
    PtepClearFlush = "ptep_clear_flush",
    SwapinReadahead = "swapin_readahead",
    SwapWritepage = "swap_writepage",
    CopyPageRange = "copy_page_range",
    TryToUnuse = "try_to_unuse",
    Madvise = "do_madvise",
    SplitHugePage = "split_huge_page",
    DoSetPmd = "do_set_pmd",
    ZapHugePmd = "zap_huge_pmd",
    SplitHugePmd = "__split_huge_pmd",
    IoSchedule = "io_schedule",
    ShmemFault = "shmem_fault",
    FilemapFault = "filemap_fault",
    DoFault = "do_fault",
    FilemapRead = "filemap_read",
    FilemapWrite = "generic_perform_write",
    AddToPageCache = "filemap_add_folio",
    Writeback = "do_writepages",
    PageCacheRa = "page_cache_ra_unbounded",
    BrdSubmitBio = "brd_submit_bio",
    LruGenAging = "try_to_inc_max_seq",
    EvictFolios = "evict_folios",
    LruGenLookAround = "lru_gen_look_around",
    LruGenWalk = "walk_mm",
    Khugepaged = "khugepaged",
    CollapseHugePage = "collapse_huge_page",
    ReleasePages = "release_pages",
    PageCacheRelease = "__page_cache_release",
    HandlePteFault = "handle_pte_fault",
    PageVmaMappedWalk = "page_vma_mapped_walk",
    ZapPteRange = "zap_pte_range",
    CopyPteRange = "copy_pte_range",
    MadviseColdOrPageoutPteRange = "madvise_cold_or_pageout_pte_range",
    MadviseFreePteRange = "madvise_free_pte_range",
    HpageCollapseScanPmd = "hpage_collapse_scan_pmd",
    PmdInstall = "pmd_install",
    DoHugePmdAnonymousPage = "do_huge_pmd_anonymous_page",
    MemcgFlushStats = "__mem_cgroup_flush_stats",
    VmxVcpuRun = "vmx_vcpu_run",
    KvmMmuPageFault = "kvm_mmu_page_fault",
    KvmFlushRemoteTlbs = "kvm_flush_remote_tlbs",
    KvmVcpuHalt = "kvm_vcpu_halt",
}

/// fork's own work beyond copying page tables: task_struct, mm_struct,
/// files, signal and credential copies, VMA duplication, the child's first
/// schedule. fork of a small process takes ~30-60 µs on current x86-64,
/// most of it outside page-table copying; 30 µs.
pub const FORK_NS: u64 = 30_000;

/// execve of a small program beyond fork: tearing down the old mm,
/// loading and mapping the binary, the new stack and the loader's first
/// steps (its page faults are simulated apart, by the program's steps).
/// lmbench's "fork+execve" measures ~150-300 µs on current x86-64, fork
/// included; 100 µs.
pub const EXEC_NS: u64 = 100_000;

/// Copying one PTE in `copy_page_range`: read the parent's PTE, take a
/// reference and a map count on the page (an atomic on a struct page,
/// usually a cache miss), write-protect the parent's PTE, write the
/// child's: ~60 ns.
pub const COPY_PTE_NS: u64 = 60;

/// `unuse_pte_range` reading one PTE that does not hold an entry of the
/// device being turned off: a sequential scan of a page table, a few ns.
pub const UNUSE_SCAN_NS: u64 = 2;

/// redis-server's own work per request of a pipelined memtier stream,
/// besides touching the table and value pages (mmsim charges those as
/// accesses and faults): reading and parsing the RESP command, the dict
/// lookup's hashing and compares, building the reply, and the request's
/// share of the read/write syscalls of its pipeline batch. Redis serves
/// about 1 M pipelined GET/SET per second on one current core
/// (redis-benchmark -P 16 reports 1-2 M/s; with 2 KiB values the copies
/// add ~0.2 µs): 1 µs.
pub const KV_REQUEST_NS: u64 = 1000;

/// A system call's entry and exit (mmap, munmap) beyond its own work:
/// ~100-300 ns on current x86-64 with speculation mitigations. 250 ns.
pub const SYSCALL_NS: u64 = 250;

/// Finding a page-cache folio and taking a reference on it in read(2),
/// write(2) and a file fault (`filemap_get_entry`'s xarray walk,
/// `folio_try_get`): the same order as setting one PTE; 20 ns. Calibrated
/// apart from `PTE_NS` (`mmsim calibrate`), so a machine profile can
/// price the lookup and the PTE differently.
pub const PAGECACHE_LOOKUP_NS: u64 = PTE_NS;

/// `filemap_map_pages`'s work per page mapped by fault-around besides the
/// PTE itself (the xarray iteration, `folio_trylock`, the reference and
/// map count), not priced separately in the reference values (0 ns): its
/// PTE and rmap charges stand for it. `mmsim calibrate` measures it.
pub const MAP_PAGES_NS: u64 = 0;

/// A swap-in's work around the zram read besides the constants above (the
/// bio or rw_page call, the swap cgroup record, the memcg swap-in charge,
/// `swap_free`): 0 ns in the reference values, whose swap-in is the
/// decompression and the fault's own charges. `mmsim calibrate` measures
/// it.
pub const SWAP_READ_NS: u64 = 0;

/// shmem's swap-in work per page beyond the swap-in constants above
/// (`shmem_swapin_folio`'s own: the mapping's xarray entry replaced, the
/// inode's swapped count, the shmem accounting): 0 ns in the reference
/// values. `mmsim calibrate` measures it.
pub const SHMEM_SWAPIN_NS: u64 = 0;

/// write(2)'s work per page of a tmpfs file besides the lookup and the
/// copy (`generic_perform_write`'s `fault_in_iov_readable` of the user
/// buffer, `shmem_write_begin`'s folio lock, `shmem_write_end`'s
/// dirtying and unlock, `balance_dirty_pages_ratelimited`): 0 ns in the
/// reference values, whose write(2) costs what read(2) does. `mmsim
/// calibrate` measures it (calibrate/read.toml's write phases).
pub const SHMEM_WRITE_NS: u64 = 0;

/// A write fault's own work on a shared tmpfs mapping beyond the costs
/// the model names on that path (fault entry, the folio's allocation,
/// charge, clear and LRU add, the rmap, the PTE): `do_shared_fault`'s
/// `finish_fault` and `fault_dirty_shared_page` (the folio dirtied,
/// `file_update_time`): 0 ns in the reference values, whose shared write
/// fault costs what those constants add up to. `mmsim calibrate` measures
/// it (calibrate/munmap_shmem.toml's touch phases: write faults into tmpfs
/// holes).
pub const SHMEM_SHARED_FAULT_NS: u64 = 0;

/// A swap slot's release once nothing references it (`free_swap_slot`):
/// the slot's return through the per-CPU slot cache
/// (`swapcache_free_entries`) and the device's `swap_slot_free_notify`
/// (zram frees the stored page), with the count's last decrement under
/// the swap lock. Paid wherever the last reference goes: the zap of a
/// swap PTE (`free_swap_and_cache` from `zap_pte_range`, MADV_DONTNEED/
/// FREE, a tmpfs truncation), a swap-in that frees its slot (count 1, or
/// a write fault freeing the cache), a folio leaving the swap cache with
/// no PTE left on its slot. A decrement that leaves the slot referenced
/// (after fork), or held by the swap cache, does not pay it. 0 ns in the
/// reference values, where a zapped swap PTE costs what a present one's
/// clear does. `mmsim calibrate` measures it (calibrate/swap_zap.toml).
pub const SWAP_SLOT_FREE_NS: u64 = 0;

/// A memory.max reclaim's own work per page it frees, beyond the scan,
/// unmap and swap-out constants (`try_to_free_mem_cgroup_pages`' set-up,
/// the memcg iteration, stat flushes and LRU drains, spread over the pages
/// it reclaims): 0 ns in the reference values. `mmsim calibrate`
/// measures it.
pub const MEMCG_RECLAIM_NS: u64 = 0;

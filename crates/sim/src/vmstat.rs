//! Counters under their /proc/vmstat and memory.stat names.
//!
//! Events only increase; gauges (`nr_*`) go up and down. Both are kept in
//! flat arrays indexed by an enum, so an increment is one add.

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
    ThpFileAlloc = "thp_file_alloc",
    ThpFileFallback = "thp_file_fallback",
    ThpFileFallbackCharge = "thp_file_fallback_charge",
    ThpFileMapped = "thp_file_mapped",
    ThpSplitPage = "thp_split_page",
    ThpSplitPageFailed = "thp_split_page_failed",
    ThpSplitPmd = "thp_split_pmd",
    SwapRa = "swap_ra",
    SwapRaHit = "swap_ra_hit",
});

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
        VM_NAMES.iter().copied().zip(self.v.iter().copied())
    }
}

items!(Mc, NR_MC_ITEMS, MC_NAMES {
    // memory.stat, 6.1 order. Sizes are kept in pages and printed in bytes.
    Anon = "anon",
    File = "file",
    Pagetables = "pagetables",
    Shmem = "shmem",
    FileMapped = "file_mapped",
    FileDirty = "file_dirty",
    FileWriteback = "file_writeback",
    Swapcached = "swapcached",
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
});

/// One cgroup's memory.stat (its own, not yet summed over descendants).
pub type MemcgStat = Counters<Mc, NR_MC_ITEMS>;

impl MemcgStat {
    /// memory.stat lines: (name, value) with sizes in bytes.
    pub fn lines(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        MC_NAMES.iter().enumerate().map(|(i, &n)| {
            let size = i <= Mc::Unevictable as usize;
            (n, if size { self.v[i] * 4096 } else { self.v[i] })
        })
    }
}

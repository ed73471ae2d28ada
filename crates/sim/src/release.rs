//! What each kernel release changes on the paths mmsim models, as one
//! table per preset (`Release::V5_10` … `Release::V7_3`, each told as
//! the release before it plus what it changes): the mm/ code
//! asks `self.release.<behaviour>` where the releases part, and
//! docs/model.md's per-release lists are generated from these tables
//! (`model_md_section`; a test keeps the two in step).
//!
//! Each behaviour's doc comment says what the kernel does when it is on
//! and names the function or commit that made the difference; it is also
//! the line the generated list shows. The seed features (`Features`,
//! chosen per preset by the spec crate and settable by a spec) are not
//! here: they are the changes a seed proposes, this table the ones a
//! release made.

use mmsim_spec::Preset;

/// Defines `Release` and `Release::behaviours` (each behaviour's name,
/// doc text and value) from one list.
macro_rules! behaviours {
    ($($(#[doc = $doc:literal])+ $name:ident,)*) => {
        /// The behaviours releases change, each on or off in a release.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct Release { $($(#[doc = $doc])+ pub $name: bool,)* }

        impl Release {
            /// Every behaviour off: what the releases' tables start from.
            const NONE: Release = Release { $($name: false,)* };

            /// Every behaviour: its name, its doc text and whether it is on.
            pub fn behaviours(&self) -> Vec<(&'static str, &'static str, bool)> {
                vec![$((stringify!($name), concat!($($doc, "\n",)+), self.$name),)*]
            }
        }
    };
}

behaviours! {
    /// fault_dirty_shared_page completes the fault after dirtying a page of
    /// a shared mapping ("mm: avoid unnecessary page fault retires on shared
    /// memory types", 5.19); before, it returns VM_FAULT_RETRY (always for a
    /// file with `page_mkwrite`) and the retried fault counts pgfault again:
    /// two per first write to a shmem page.
    fault_dirty_shared_completes,
    /// The swap PTE carries an exclusive marker (PTE_SWP_EXCLUSIVE, 5.19)
    /// that do_swap_page's reuse follows; before, a write fault reuses the
    /// page when `reuse_swap_page` finds no other user (its mappings plus
    /// its slot's swap count at most 1) and takes it out of the swap cache,
    /// and a read fault maps it read-only and leaves it in the swap cache
    /// unless swap is half full.
    pte_swp_exclusive,
    /// cgroup v2's `memory.peak` (5.19).
    memory_peak,
    /// cgroup v2's `memory.reclaim` (5.19): `memory_reclaim` asks
    /// `try_to_free_mem_cgroup_pages` for what is left to reclaim until
    /// it is reclaimed, allowing 16 attempts that reclaim nothing (the last
    /// after `lru_add_drain_all`), else EAGAIN.
    memory_reclaim,
    /// memory.reclaim asks for a quarter of what is left each time ("will
    /// converge on zero, but reclaim enforces a minimum": 32 pages), and
    /// takes `swappiness=` (0-200) for the proactive reclaim's anon/file
    /// balance (`sc_swappiness`); 6.1 asks for all of it and refuses any
    /// argument.
    memory_reclaim_batches,
    /// Reclaim reads the target memcg's own effective memory.min and
    /// memory.low as the last reclaim from above left them (6.0's
    /// `mem_cgroup_below_min(memcg)`; fixed in 6.3 by "mm: memcg: fix stale
    /// protection of reclaim target memcg"): a memcg whose memory.low once
    /// covered its usage skips its own limit reclaim until the retry.
    /// 5.10's `mem_cgroup_protected` and 6.3's `mem_cgroup_unprotected`
    /// give the target none.
    memcg_protection_stale_target,
    /// XFS caches files in large folios (5.18); before, the page cache is
    /// all order 0.
    xfs_large_folios,
    /// ext4 (which mounts the ext2 disks) sets a regular file's mapping to
    /// large folios (ext4_set_inode_mapping_order).
    ext4_large_folios,
    /// pgfault counts completed faults only (mm_account_fault); before, every
    /// entry to handle_mm_fault counts, a retried fault twice.
    pgfault_completed_only,
    /// The lru_add batch holds 31 folios (PAGEVEC_SIZE 15 before).
    lru_add_batch_31,
    /// MADV_PAGEOUT's reclaim_pages skips the reference checks
    /// (`ignore_references`).
    pageout_ignore_references,
    /// A large shmem folio is charged with the THP gfp, which under the
    /// default defrag cannot reclaim outside a MADV_HUGEPAGE VMA: at the
    /// memcg's limit the charge fails and the fault falls back to order 0
    /// (shmem_alloc_and_add_folio; thp_file_fallback_charge).
    shmem_large_charge_thp_gfp,
    /// Zapping a large folio's PTEs is one batch, marked accessed once
    /// (6.9's zap_present_ptes), so a folio unmapped whole is not activated
    /// by its own pages.
    zap_present_ptes_batch,
    /// do_swap_page maps an exclusive page writable on a read fault in a
    /// writable VMA, so a write after a read swap-in takes no fault and
    /// counts no pgreuse.
    swapin_read_maps_writable,
    /// do_swap_page maps a large folio found in the swap cache whole when
    /// its range of PTEs still holds its entries.
    swapin_map_large_swapcache,
    /// should_try_to_free_swap counts a large folio's references as 1 +
    /// folio_nr_pages.
    free_swap_large_refs,
    /// wp_can_reuse_anon_folio never reuses a large folio.
    wp_no_large_reuse,
    /// Large anonymous folios in the deferred split queue only when
    /// partially mapped (__folio_remove_rmap's partially mapped check,
    /// free_tail_page_prepare's unqueue), and split stats per size.
    deferred_split_partially_mapped,
    /// Per-size THP stats (`hugepages-<size>kB/stats/*`, 6.10) for anon and
    /// swap-out.
    mthp_stats,
    /// MADV_FREE handles a large folio's range as a whole
    /// (madvise_free_pte_range's folio batch).
    madvise_free_large,
    /// Reclaim swaps a large anonymous folio out at its own order
    /// (folio_alloc_swap, 6.10), splitting first one partly unmapped.
    swap_out_large_order,
    /// Zero-filled folios skip swap I/O (the zeromap, `swpout_zero`).
    swap_zeromap,
    /// zram_rw_page refuses a THP, so __swap_writepage sends it to zram as
    /// one bio, which counts in pgpgout (6.1 only in the model).
    zram_thp_one_bio,
    /// A large anonymous swap-in from a synchronous device whose slot only
    /// this page uses skips the swap cache (6.12's alloc_swap_folio on the
    /// SWP_SYNCHRONOUS_IO path).
    large_swapin_skip_swapcache,
    /// Anonymous swap-in from a synchronous device always goes through the
    /// swap cache without readahead (swapin_sync), whatever the swap count,
    /// at the folio's order.
    swapin_sync,
    /// should_try_to_free_swap frees a SWP_SYNCHRONOUS_IO device's cache
    /// always, and on a write to an exclusive page.
    free_swap_sync_device,
    /// Large anonymous folios carry MM_IDs (which mms map them): a write
    /// fault reuses one only this mm maps (wp_can_reuse_anon_folio) and
    /// makes just the page exclusive, keeping the folio's anon_vma.
    large_folio_mm_id,
    /// do_swap_page takes a large folio's exclusivity from the swap PTE's
    /// marker alone, and frees its swap cache after mapping it.
    large_swapin_exclusive_marker,
    /// Fault-around maps whole large folios (filemap_map_pages' folio
    /// ranges).
    fault_around_whole_folios,
    /// shmem_swap_alloc_folio falls back to order 0 on the synchronous
    /// path when the large folio or its charge is not there, and charges a
    /// large folio without reclaim.
    shmem_swapin_sync_fallback,
    /// Swap clusters on every device, a rotational one's in one shared
    /// `global_cluster`, so large swap-out works on rotational swap too.
    swap_clusters_rotational,
    /// The swap-in past the swap cache claims its slots with
    /// `swapcache_prepare` and lets them go with `swapcache_clear` (6.8),
    /// each under the cluster's lock; 6.1 claims nothing there.
    skip_swapcache_prepare,
    /// `struct swap_cluster_info` carries its list_head (6.11's swap
    /// allocator): 24 bytes, 8 clusters' locks over 3 cache lines instead
    /// of 6.1's 8 bytes, 8 a line.
    swap_cluster_list,
    /// The swap cache is the swap table (6.18): a slot's cache entry sits
    /// in its swap cluster's table under the cluster's lock (512 slots),
    /// not in an XArray of 64 MiB of swap under that XArray's lock.
    swap_table,
    /// swapoff's unuse_pte_range looks the swap cache up plainly
    /// (swap_cache_get_folio): no readahead hit is counted or fed back, so
    /// its readahead stays at 1 or 2 pages.
    unuse_plain_lookup,
    /// khugepaged collapses into mTHP orders (collapse_scan_pmd,
    /// mthp_collapse) and counts the PTEs it looked at as its progress.
    khugepaged_mthp,
    /// An mm registers with khugepaged when its process starts (a brk or a
    /// stack VMA), waking the thread.
    khugepaged_register_at_exec,
    /// try_to_unmap_one batches a lazyfree anonymous folio's PTEs
    /// (folio_unmap_pte_batch).
    unmap_lazyfree_batch,
    /// pgrefill and pgscan/pgsteal_{kswapd,direct} are node stats counted
    /// for every reclaim, a memcg's limit reclaim included (before, for
    /// global reclaim only).
    reclaim_events_cgroup,
    /// zram is reached through submit_bio (6.3 removed `->rw_page`, zram's
    /// with it), which counts pgpgin and pgpgout, 4 per page: the 6.12
    /// and 7.3 recordings show pgpgin = 4 x pswpin and pgpgout = 4 x
    /// pswpout on zram, 6.1's and 5.10's neither.
    zram_submit_bio,
    /// zswap without frontswap (6.5's `zswap_store`, `zswap_load` and
    /// `zswap_invalidate` on the swap paths) and with its own LRU (6.8):
    /// each memcg's entries on a list (`zswap_list_lru`) with a referenced
    /// bit for a second chance; the shrink worker a refused store queues
    /// writes back from them round-robin over the memcgs, whatever the
    /// zpool, until the pool is under the accept threshold, and a store
    /// over memory.zswap.max first writes back one of its memcg's
    /// (`shrink_memcg`); the limits read the pool's size as it is
    /// (`zswap_total_pages`); a load into the swap cache takes the entry
    /// (6.10's exclusive loads: the folio dirty, the entry freed); `zswpwb`
    /// counts writebacks; no same-filled pages (6.12's swap zeromap takes
    /// zero pages before zswap, and other repeated words are compressed).
    zswap_lru,
    /// zswap stores a large folio page by page (6.13); before, it refuses
    /// it and the folio goes to the swap device.
    zswap_large_store,
    /// A page that does not compress below a page is stored as it is
    /// (`stored_incompressible_pages`, 6.18) where writeback is allowed;
    /// before, compressing into one page fails (`reject_compress_fail`).
    /// zswap has no `zpool` knob: zsmalloc only (6.18).
    zswap_incompressible,
    /// zswap's `shrink_memcg` walks up to SWAP_CLUSTER_MAX (32) entries of
    /// the memcg's LRU (after 6.12; 7.3 has it); 6.12 walks one.
    zswap_shrink_memcg_batch,
    /// zswap's shrinker counts from the memcg's statistics as the
    /// ratelimited flush leaves them (`mem_cgroup_flush_stats_ratelimited`,
    /// after 6.12; 7.3 has it); 6.12 flushes the memcg's subtree once its
    /// updates pass the threshold (`mem_cgroup_flush_stats`).
    zswap_shrinker_count_ratelimited,
    /// zsmalloc's zspages chain up to 8 pages (6.6's
    /// CONFIG_ZSMALLOC_CHAIN_SIZE, Debian's default) and its fullness
    /// groups are tenths of use (6.3); before, 4 pages and four groups.
    zsmalloc_chain_8,
    /// A page fault takes its VMA's lock (`lock_vma_under_rcu`, 6.4's
    /// per-VMA locks) instead of mmap_lock, so it waits for a writer on
    /// another CPU only when that writer has write-locked its VMA (fork:
    /// all of them; khugepaged's collapse: the one it changes).
    per_vma_locks,
    /// PSI as 5.12-5.13 made it ("psi: Use ONCPU state tracking machinery
    /// to detect reclaim", "psi: Fix PSI_MEM_FULL state when tasks are in
    /// memstall and doing reclaim", "psi: Add PSI_CPU_FULL state"): memory
    /// full when every runnable task of the group on a CPU is in a memory
    /// stall or the one on the CPU reclaims, judged at each change, and a
    /// cpu full line. Before: full only with no runnable task, a
    /// reclaiming CPU sampled full at each scheduler tick
    /// (psi_memstall_tick), and no cpu full.
    psi_memstall_running,
    /// A read counts as a memory stall for a workingset folio only:
    /// swap_readpage's `if (workingset)` around its submission, and
    /// read_pages for a readahead batch holding one. Before (5.10): every
    /// swap read's submission is a memory stall, and no file readahead
    /// is (the wait on a locked workingset page is one on both).
    psi_workingset_reads,
    /// memcg statistics reach the counters reclaim and memory.stat read
    /// (`lruvec_page_state`, `memcg_page_state`) only at an rstat flush
    /// (5.15 and later; mm/memcg_rstat.rs): a reader flushes once the
    /// CPUs updated more than 64 × (CPUs + 1) pages and events since the
    /// last (one global `stats_flush_threshold`, 5.15-6.7; 6.8's
    /// threshold per memcg is `features.memcg_rstat_per_memcg`), and a
    /// worker every 2 s. Off, the model reads exact counters (5.10
    /// batches each counter per CPU into atomics instead, which is not
    /// modelled).
    memcg_rstat_flush,
    /// 5.10's memcg statistics: each CPU batches each counter's updates
    /// and adds them to the memcg's and its ancestors' atomics past 32,
    /// which the readers read (mm/memcg_batch.rs); no flush.
    memcg_stat_percpu_batch,
    /// With 6.8's per-memcg threshold, `memcg_rstat_updated` stops at
    /// the first memcg already past it (its ancestors are too) instead
    /// of walking on to the root (7.3; 6.8-6.12 walk the whole way).
    memcg_rstat_updated_stops_when_flushable,
}

impl Release {
    /// 5.10: before 5.19's fault-retry and swap-PTE changes.
    pub const V5_10: Release = Release {
        memcg_stat_percpu_batch: true,
        ..Release::NONE
    };

    /// 6.1, the reference.
    pub const V6_1: Release = Release {
        fault_dirty_shared_completes: true,
        pte_swp_exclusive: true,
        memory_peak: true,
        memory_reclaim: true,
        memcg_protection_stale_target: true,
        psi_memstall_running: true,
        psi_workingset_reads: true,
        xfs_large_folios: true,
        zram_thp_one_bio: true,
        memcg_rstat_flush: true,
        ..Release::NONE
    };

    /// 6.12: folio batching, mTHP and the swap paths that came with them.
    pub const V6_12: Release = Release {
        pgfault_completed_only: true,
        lru_add_batch_31: true,
        pageout_ignore_references: true,
        shmem_large_charge_thp_gfp: true,
        zap_present_ptes_batch: true,
        swapin_read_maps_writable: true,
        swapin_map_large_swapcache: true,
        free_swap_large_refs: true,
        wp_no_large_reuse: true,
        deferred_split_partially_mapped: true,
        mthp_stats: true,
        madvise_free_large: true,
        swap_out_large_order: true,
        swap_zeromap: true,
        zsmalloc_chain_8: true,
        large_swapin_skip_swapcache: true,
        zram_thp_one_bio: false,
        zram_submit_bio: true,
        per_vma_locks: true,
        swap_cluster_list: true,
        skip_swapcache_prepare: true,
        memory_reclaim_batches: true,
        memcg_protection_stale_target: false,
        zswap_lru: true,
        ..Release::V6_1
    };

    /// 7.3: everything 6.12 changes, and what 7.3 changes on top.
    pub const V7_3: Release = Release {
        large_swapin_skip_swapcache: false,
        swapin_sync: true,
        free_swap_sync_device: true,
        large_folio_mm_id: true,
        large_swapin_exclusive_marker: true,
        fault_around_whole_folios: true,
        shmem_swapin_sync_fallback: true,
        swap_clusters_rotational: true,
        swap_table: true,
        unuse_plain_lookup: true,
        khugepaged_mthp: true,
        khugepaged_register_at_exec: true,
        unmap_lazyfree_batch: true,
        reclaim_events_cgroup: true,
        zram_submit_bio: true,
        ext4_large_folios: true,
        memcg_rstat_updated_stops_when_flushable: true,
        zswap_large_store: true,
        zswap_incompressible: true,
        zswap_shrink_memcg_batch: true,
        zswap_shrinker_count_ratelimited: true,
        ..Release::V6_12
    };

    /// The table of `preset`.
    pub const fn of(preset: Preset) -> Release {
        match preset {
            Preset::V5_10 => Release::V5_10,
            Preset::V6_1 => Release::V6_1,
            Preset::V6_12 => Release::V6_12,
            Preset::V7_3 => Release::V7_3,
        }
    }
}

/// The presets whose lists docs/model.md carries, each with the release it
/// is told against.
const LISTED: [(Preset, &str, Preset, &str); 3] = [
    (Preset::V5_10, "5.10", Preset::V6_1, "6.1"),
    (Preset::V6_12, "6.12", Preset::V6_1, "6.1"),
    (Preset::V7_3, "7.3", Preset::V6_12, "6.12"),
];

/// The marker lines around release `name`'s generated list in
/// docs/model.md.
pub fn model_md_markers(name: &str) -> (String, String) {
    (
        format!("<!-- release {name}: generated from crates/sim/src/release.rs -->"),
        format!("<!-- end of release {name} -->"),
    )
}

/// Release `name`'s list for docs/model.md: each behaviour it turns on
/// or off against the release before it.
pub fn model_md_section(preset: Preset, base: Preset, base_name: &str) -> String {
    let mut s = format!("Behaviours changed against {base_name} (`release.rs`):\n\n");
    let base = Release::of(base).behaviours();
    for ((name, doc, on), (_, _, was)) in Release::of(preset).behaviours().into_iter().zip(base) {
        if on == was {
            continue;
        }
        let text = doc.lines().map(str::trim).collect::<Vec<_>>().join(" ");
        let state = if on { "on" } else { "off" };
        s += &format!("- `{name}` {state}: {text}\n");
    }
    s
}

/// docs/model.md with every release's generated list replaced by the
/// table's (None: a marker is missing).
pub fn regenerate_model_md(text: &str) -> Option<String> {
    let mut out = text.to_string();
    for (preset, name, base, base_name) in LISTED {
        let (begin, end) = model_md_markers(name);
        let from = out.find(&begin)? + begin.len();
        let to = from + out[from..].find(&end)?;
        let body = format!("\n{}", model_md_section(preset, base, base_name));
        out.replace_range(from..to, &body);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/model.md's per-release lists are the tables': run with
    /// MMSIM_WRITE_MODEL_MD=1 to rewrite them after changing a table.
    #[test]
    fn model_md_lists_follow_the_tables() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/model.md");
        let text = std::fs::read_to_string(path).expect("docs/model.md");
        let want = regenerate_model_md(&text).expect("docs/model.md has every release's markers");
        if std::env::var_os("MMSIM_WRITE_MODEL_MD").is_some() {
            std::fs::write(path, &want).expect("writes docs/model.md");
            return;
        }
        assert!(
            text == want,
            "docs/model.md's per-release lists differ from crates/sim/src/release.rs; rerun this test with MMSIM_WRITE_MODEL_MD=1"
        );
    }
}

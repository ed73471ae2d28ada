//! The later-kernel shmem mechanisms seed 001 is written against, each a
//! feature away from 6.1: per-size shmem THP for shared anonymous memory
//! (`shmem_mthp`, 6.11), large folios swapped out whole and their entries
//! split on a swap-cache swap-in (`shmem_large_swapout`, 6.12–6.13), and
//! the seed's swap-in that skips the swap cache (`shmem_skip_swapcache`).
//! Counts follow from the kernels' rules; every run passes the invariant
//! checker (swap counts and HAS_CACHE per slot, large swap-cache folios,
//! mapcounts) and the content-integrity check.

mod common;
use common::*;

/// 4 MiB of shared anonymous memory: 64 folios of 64 KiB, 1024 pages.
const PAGES: i64 = 1024;
const FOLIOS: i64 = 64;

fn spec(features: &str, knob: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
[features]
{features}
[sysfs]
{knob}
[[swap]]
device = "zram"
size = "64M"
[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "shared_anon", size = "4M" }},
  {{ op = "phase", name = "write" }},
  {{ op = "touch", region = "m", order = "seq", write = 1.0 }},
{steps}
]
"#
    )
}

const MTHP: &str = "shmem_mthp = true\nmadv_pageout_split = false";
const K64: &str = "\"kernel/mm/transparent_hugepage/hugepages-64kB/shmem_enabled\" = \"always\"";
const PAGEOUT_READ: &str = r#"  { op = "phase", name = "pageout" },
  { op = "madvise", region = "m", advice = "pageout" },
  { op = "phase", name = "read" },
  { op = "touch", region = "m", order = "seq" },"#;

#[test]
fn per_size_knobs_give_anon_shmem_64k_folios_mapped_whole() {
    let r = run_checked(&spec(MTHP, K64, ""));
    // One fault per folio maps its 16 PTEs (finish_fault on anon shmem).
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), FOLIOS);
    assert_eq!(vm(&r, "hugepages-64kB/stats/shmem_alloc"), FOLIOS);
    assert_eq!(phase_vm(&r, 0, "write", "nr_mapped"), PAGES);
    assert_eq!(vm(&r, "thp_file_alloc"), 0);
}

#[test]
fn the_per_size_knobs_need_the_feature() {
    let e = mmsim_spec::parse_str(&spec("", K64, ""), "t.toml", &[]).unwrap_err();
    assert!(
        e.to_string().contains("per-size shmem THP came in 6.11"),
        "{e}"
    );
}

/// tmpfs keeps PMD size only under 6.12's rules; its mapping's 64 KiB
/// knob does nothing.
#[test]
fn tmpfs_ignores_the_per_size_knobs() {
    let text = format!(
        r#"
[machine]
memory = "512M"
[features]
shmem_mthp = true
[sysfs]
{K64}
[[file]]
name = "f"
size = "4M"
on = "tmpfs"
[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "shmem", file = "f", size = "4M" }},
  {{ op = "touch", region = "m", write = 1.0 }},
]
"#
    );
    let r = run_checked(&text);
    assert_eq!(vm(&r, "pgfault"), PAGES);
    // Per-size statistics are printed only when not zero.
    assert!(!r.vmstat.contains_key("hugepages-64kB/stats/shmem_alloc"));
}

/// 6.1 splits a shmem large folio in reclaim; 6.12 swaps it out whole
/// under a large entry. The swap-cache swap-in before seed 001 then
/// splits each entry at its first touch and reads order 0 with cluster
/// readahead (8 pages).
#[test]
fn large_swapout_then_split_entry_swapin() {
    let r = run_checked(&spec(
        &format!("{MTHP}\nshmem_large_swapout = true"),
        K64,
        PAGEOUT_READ,
    ));
    assert_eq!(
        phase_vm(&r, 0, "pageout", "hugepages-64kB/stats/swpout"),
        FOLIOS
    );
    assert_eq!(phase_vm(&r, 0, "pageout", "pswpout"), PAGES);
    assert_eq!(phase_vm(&r, 0, "pageout", "thp_split_page"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), PAGES);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), PAGES);
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), PAGES / 8);
    assert_eq!(phase_vm(&r, 0, "read", "swap_ra"), PAGES - PAGES / 8);
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
}

/// Without the feature the same workload splits in reclaim (6.1).
#[test]
fn without_large_swapout_reclaim_splits_first() {
    let r = run_checked(&spec(MTHP, K64, PAGEOUT_READ));
    assert_eq!(phase_vm(&r, 0, "pageout", "thp_split_page"), FOLIOS);
    assert_eq!(phase_vm(&r, 0, "pageout", "pswpout"), PAGES);
    assert!(!r.vmstat.contains_key("hugepages-64kB/stats/swpout"));
}

/// Seed 001: each large entry comes back whole in one major fault, read
/// past the swap cache with no readahead, and is mapped whole.
#[test]
fn skip_swapcache_swaps_large_entries_in_whole() {
    let r = run_checked(&spec(
        &format!("{MTHP}\nshmem_large_swapout = true\nshmem_skip_swapcache = true"),
        K64,
        PAGEOUT_READ,
    ));
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), FOLIOS);
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), FOLIOS);
    assert_eq!(
        phase_vm(&r, 0, "read", "hugepages-64kB/stats/swpin"),
        FOLIOS
    );
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), PAGES);
    assert_eq!(phase_vm(&r, 0, "read", "swap_ra"), 0);
    assert_eq!(vm(&r, "nr_swapcached"), 0);
    // Every slot is free again.
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
}

/// At order 0 the seed's path is one synchronous read per fault: every
/// page is a major fault and nothing is read ahead.
#[test]
fn skip_swapcache_at_order_0() {
    let r = run_checked(&spec("shmem_skip_swapcache = true", "", PAGEOUT_READ));
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), PAGES);
    assert_eq!(phase_vm(&r, 0, "read", "swap_ra"), 0);
    // The swap-cache way reads 8-slot aligned windows: the pages went out
    // in order into a free cluster (not cluster 0, whose slot 0 is the
    // header), so one major fault per window.
    let base = run_checked(&spec("", "", PAGEOUT_READ));
    assert_eq!(phase_vm(&base, 0, "read", "pgmajfault"), PAGES / 8);
}

/// A page of a large entry already in the swap cache (MADV_WILLNEED read
/// it) sends the swap-in of that entry the swap-cache way: 6.16's
/// `non_swapcache_batch` fallback, without which the whole-folio path
/// could never claim the range. The other entries still come back whole.
#[test]
fn a_cached_subpage_sends_its_entry_the_swap_cache_way() {
    let r = run_checked(&spec(
        &format!("{MTHP}\nshmem_large_swapout = true\nshmem_skip_swapcache = true"),
        K64,
        r#"  { op = "phase", name = "pageout" },
  { op = "madvise", region = "m", advice = "pageout" },
  { op = "madvise", region = "m", advice = "willneed", offset = "4K", length = "4K" },
  { op = "phase", name = "read" },
  { op = "touch", region = "m", order = "seq" },"#,
    ));
    assert_eq!(
        phase_vm(&r, 0, "read", "hugepages-64kB/stats/swpin"),
        FOLIOS - 1
    );
    assert_eq!(vm(&r, "pswpin"), PAGES);
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
}

/// Two processes on two CPUs (a parent and its forked child, sharing a
/// shared anonymous mapping swapped out in 64 KiB entries) read the same
/// entries at the same time, in both modes, and both see what was
/// written. (mmsim runs each fault start to end, so the second finds the
/// first one's folio in the page cache; the -EEXIST race of two faults
/// claiming the same slots at once cannot arise here.)
#[test]
fn two_tasks_swap_in_the_same_entries_in_both_modes() {
    for skip in [false, true] {
        let text = format!(
            r#"
[machine]
memory = "512M"
cpus = 2
[features]
shmem_mthp = true
shmem_large_swapout = true
madv_pageout_split = false
shmem_skip_swapcache = {skip}
[sysfs]
{K64}
[[swap]]
device = "zram"
size = "64M"
[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "shared_anon", size = "4M" }},
  {{ op = "touch", region = "m", write = 1.0 }},
  {{ op = "madvise", region = "m", advice = "pageout" }},
  {{ op = "fork", steps = [ {{ op = "touch", region = "m" }} ] }},
  {{ op = "touch", region = "m" }},
]
"#
        );
        let r = run_checked(&text);
        assert_eq!(vm(&r, "pswpout"), PAGES, "skip {skip}");
        assert_eq!(vm(&r, "pswpin"), PAGES, "skip {skip}");
        assert_eq!(r.integrity.pages_checked, 2 * PAGES as u64, "skip {skip}");
        if skip {
            assert_eq!(vm(&r, "hugepages-64kB/stats/swpin"), FOLIOS);
        }
    }
}

/// On an SSD (solid-state, no SWP_SYNCHRONOUS_IO) a large folio goes out
/// whole too, in one bio, under writeback until it completes, and stays in
/// the swap cache (nothing presses memory here): the read finds each one
/// there whole — one minor fault per folio, which maps it whole — without
/// the seed's skip path, which needs a synchronous device.
#[test]
fn large_swapout_to_an_ssd_and_back_through_the_swap_cache() {
    let r = run_checked(
        &spec(
            &format!("{MTHP}\nshmem_large_swapout = true\nshmem_skip_swapcache = true"),
            K64,
            PAGEOUT_READ,
        )
        .replace("device = \"zram\"", "device = \"nvme\""),
    );
    assert_eq!(
        phase_vm(&r, 0, "pageout", "hugepages-64kB/stats/swpout"),
        FOLIOS
    );
    assert_eq!(phase_vm(&r, 0, "pageout", "pswpout"), PAGES);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), FOLIOS);
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 0);
    assert_eq!(vm(&r, "pswpin"), 0);
    assert_eq!(vm(&r, "nr_writeback"), 0);
    assert_eq!(vm(&r, "nr_swapcached"), 0);
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
}

//! Large folios in the page cache of XFS files: readahead growing the
//! folio order window by window, reclaim and writeback of whole folios,
//! PTE-mapped pages of a folio each counted in its mapcount and in
//! nr_mapped, and MADV_PAGEOUT splitting a folio it meets (6.1). Every run
//! checks the invariants (refcounts and mapcounts page by page, the page
//! cache's slots, LRU sizes in pages, the buddy lists) at each phase, and
//! every read checks its page's contents.

mod common;
use common::*;
use mmsim_sim::output::RunResult;

/// 16 MiB = 4096 pages.
const PAGES: i64 = 4096;

fn spec(fs: &str, max: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
[[disk]]
name = "d"
device = "nvme"
size = "512M"
fs = "{fs}"
[[file]]
name = "f"
size = "16M"
on = "d"
[[file]]
name = "big"
size = "64M"
on = "d"
[cgroup.w]
memory_max = "{max}"
[task.main]
cgroup = "w"
steps = [
{steps}
]
"#
    )
}

/// Pages added to the page cache in folios of each size (pages → pages).
fn folio_sizes(r: &RunResult) -> Vec<(u64, u64)> {
    r.histograms
        .get("pagecache_folio_pages")
        .map(|h| {
            h.iter()
                .filter(|b| b.count > 0)
                .map(|b| (b.lo.max(1), b.count * b.lo.max(1)))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn xfs_readahead_grows_folios_to_the_window() {
    let steps = r#"
  { op = "phase", name = "read" },
  { op = "read", file = "f" },
"#;
    let xfs = run_checked(&spec("xfs", "max", steps));
    let ext2 = run_checked(&spec("ext2", "max", steps));
    for r in [&xfs, &ext2] {
        assert_eq!(phase_vm(r, 0, "read", "pgpgin"), PAGES * 4);
        assert_eq!(phase_vm(r, 0, "read", "nr_file_pages"), PAGES);
    }
    // ext2: every folio is one page.
    assert_eq!(folio_sizes(&ext2), [(1, PAGES as u64)]);
    // XFS: the order grows by two per window (1 → 4 → 16 → 32 pages with
    // a 32-page window) and stays at the window's size.
    let sizes = folio_sizes(&xfs);
    let in_32: u64 = sizes.iter().filter(|s| s.0 == 32).map(|s| s.1).sum();
    let total: u64 = sizes.iter().map(|s| s.1).sum();
    assert_eq!(total, PAGES as u64, "{sizes:?}");
    assert!(in_32 * 10 >= total * 9, "{sizes:?}");
    assert!(sizes.iter().all(|s| s.0 <= 32), "{sizes:?}");
}

#[test]
fn whole_large_folios_are_reclaimed_and_refault() {
    // 64 MiB read through a 24 MiB cgroup, twice: reclaim takes whole
    // folios (pgsteal counts pages), and the second pass refaults every
    // page the first left as a shadow.
    let r = run_checked(&spec(
        "xfs",
        "24M",
        r#"
  { op = "phase", name = "first" },
  { op = "read", file = "big" },
  { op = "phase", name = "second" },
  { op = "read", file = "big" },
"#,
    ));
    let big = 4 * PAGES;
    assert_eq!(phase_vm(&r, 0, "first", "pgpgin"), big * 4);
    assert_eq!(phase_vm(&r, 0, "second", "pgpgin"), big * 4);
    let stolen = phase_vm(&r, 0, "second", "pgsteal_file");
    assert!(stolen >= big - 24 * 256, "{stolen}");
    // Shadows are left per folio over its whole range.
    let refaults = phase_vm(&r, 0, "second", "workingset_refault_file");
    assert!(refaults >= big - 24 * 256 && refaults <= big, "{refaults}");
}

#[test]
fn each_mapped_page_of_a_large_folio_counts_in_nr_mapped() {
    let r = run_checked(&spec(
        "xfs",
        "max",
        r#"
  { op = "read", file = "f" },
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "phase", name = "map" },
  { op = "touch", region = "m", length = "1M" },
  { op = "phase", name = "unmap" },
  { op = "munmap", region = "m" },
"#,
    ));
    // 256 pages of 32-page folios, mapped by fault-around 16 at a time.
    assert_eq!(phase_vm(&r, 0, "map", "nr_mapped"), 256);
    assert_eq!(phase_vm(&r, 0, "map", "pgfault"), 16);
    assert_eq!(phase_vm(&r, 0, "unmap", "nr_mapped"), -256);
}

#[test]
fn writing_one_page_writes_back_its_whole_folio() {
    // 6.1's iomap has no per-block dirty state: a folio is dirty or clean
    // as a whole, and writeback writes all of it. Page 192 is in the
    // fourth window of the read, in a 32-page folio (the first window's
    // folios are 4 pages, the second's 16).
    let r = run_checked(&spec(
        "xfs",
        "max",
        r#"
  { op = "read", file = "f", length = "1M" },
  { op = "phase", name = "write" },
  { op = "write", file = "f", offset = "768K", length = "4K" },
  { op = "phase", name = "fsync" },
  { op = "fsync", file = "f" },
"#,
    ));
    let folio = 32;
    assert_eq!(phase_vm(&r, 0, "write", "nr_dirty"), folio);
    assert_eq!(phase_vm(&r, 0, "fsync", "pgpgout"), folio * 4);
    assert_eq!(phase_vm(&r, 0, "fsync", "nr_dirty"), -folio);
}

#[test]
fn madv_pageout_splits_large_folios_and_leaves_the_pages_cached() {
    let steps = r#"
  { op = "mmap", name = "m", kind = "file_private", file = "f", size = "16M" },
  { op = "touch", region = "m" },
  { op = "phase", name = "pageout" },
  { op = "madvise", region = "m", advice = "pageout" },
  { op = "phase", name = "again" },
  { op = "touch", region = "m" },
"#;
    let xfs = run_checked(&spec("xfs", "max", steps));
    let ext2 = run_checked(&spec("ext2", "max", steps));
    // ext2: every page is reclaimed (reclaim_pages counts no pgsteal),
    // and read again.
    assert_eq!(phase_vm(&ext2, 0, "pageout", "nr_file_pages"), -PAGES);
    assert_eq!(phase_vm(&ext2, 0, "again", "pgpgin"), PAGES * 4);
    // XFS (6.1): each large folio met is split, which unmaps it; the
    // pages stay cached and fault back in without I/O.
    let folios: u64 = folio_sizes(&xfs)
        .iter()
        .filter(|s| s.0 > 1)
        .map(|s| s.1 / s.0)
        .sum();
    assert_eq!(
        phase_vm(&xfs, 0, "pageout", "thp_split_page"),
        folios as i64
    );
    assert_eq!(phase_vm(&xfs, 0, "pageout", "nr_mapped"), -PAGES);
    assert_eq!(phase_vm(&xfs, 0, "pageout", "nr_file_pages"), 0);
    assert_eq!(phase_vm(&xfs, 0, "again", "pgpgin"), 0);
    assert_eq!(phase_vm(&xfs, 0, "again", "pgmajfault"), 0);
}

#[test]
fn private_writes_and_fork_copy_the_right_page_of_a_large_folio() {
    // Content checks do the asserting: a copy of the wrong page of a folio
    // reads the wrong version.
    let r = run_checked(&spec(
        "xfs",
        "max",
        r#"
  { op = "write", file = "f" },
  { op = "fsync", file = "f" },
  { op = "drop_caches" },
  { op = "mmap", name = "m", kind = "file_private", file = "f", size = "16M" },
  { op = "touch", region = "m" },
  { op = "touch", region = "m", write = 1.0, order = "uniform", count = 500, seed = 7 },
  { op = "fork", steps = [
    { op = "touch", region = "m" },
    { op = "touch", region = "m", write = 1.0, order = "uniform", count = 500, seed = 8 },
    { op = "touch", region = "m" },
  ] },
  { op = "wait" },
  { op = "touch", region = "m" },
"#,
    ));
    assert!(r.integrity.pages_checked > 3 * PAGES as u64);
    assert!(folio_sizes(&r).iter().any(|s| s.0 > 1));
}

#[test]
fn a_mapping_references_a_large_folio_once_however_many_ptes_are_young() {
    // Every page of f mapped and touched once, then 64 MiB streamed past
    // it in a 40 MiB cgroup: reclaim finds each folio referenced through
    // one mapping — kept once with PG_referenced (6.1's used-once rule),
    // not activated for having many young PTEs — exactly as order-0 pages
    // are.
    let steps = r#"
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "touch", region = "m" },
  { op = "phase", name = "stream" },
  { op = "read", file = "big" },
"#;
    let xfs = run_checked(&spec("xfs", "40M", steps));
    let ext2 = run_checked(&spec("ext2", "40M", steps));
    assert!(phase_vm(&ext2, 0, "stream", "pgsteal_file") > 0);
    assert_eq!(
        phase_vm(&xfs, 0, "stream", "pgactivate"),
        phase_vm(&ext2, 0, "stream", "pgactivate")
    );
}

#[test]
fn munmap_activates_every_large_folio_it_marks_twice() {
    // zap_pte_range marks a young page's folio accessed once per PTE: the
    // second page of a large folio activates all of it, and pgactivate
    // counts its pages (the real 6.1 kernel activated the whole 64 MiB file
    // so on XFS, 18 pages on ext2: docs/oracle.md).
    let steps = r#"
  { op = "read", file = "f" },
  { op = "drop_caches" },
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "touch", region = "m" },
  { op = "phase", name = "munmap" },
  { op = "munmap", region = "m" },
"#;
    let xfs = run_checked(&spec("xfs", "max", steps));
    let ext2 = run_checked(&spec("ext2", "max", steps));
    assert_eq!(phase_vm(&xfs, 0, "munmap", "pgactivate"), PAGES);
    assert!(phase_vm(&ext2, 0, "munmap", "pgactivate") < 32);
}

/// The seed 003 loop on one 2 MiB file: touch every page, MADV_PAGEOUT.
fn pageout_loop(split: bool, batched: bool) -> RunResult {
    run_checked(&format!(
        r#"
[machine]
memory = "512M"
[features]
madv_pageout_split = {split}
batched_rmap_unmap = {batched}
[[disk]]
name = "d"
device = "nvme"
size = "512M"
fs = "xfs"
[[file]]
name = "f"
size = "2M"
on = "d"
[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "file_private", file = "f", size = "2M" }},
  {{ op = "phase", name = "loop" }},
  {{ op = "repeat", times = 10, steps = [
    {{ op = "touch", region = "m" }},
    {{ op = "madvise", region = "m", advice = "pageout" }},
  ] }},
]
"#
    ))
}

#[test]
fn pageout_without_split_drops_whole_folios_every_loop() {
    // 6.1 splits the folios it meets (the first loop) and then pages out
    // the order-0 pages of the next: every other loop reads the file.
    let split = pageout_loop(true, false);
    assert!(phase_vm(&split, 0, "loop", "thp_split_page") > 0);
    assert_eq!(phase_vm(&split, 0, "loop", "pgpgin"), 5 * 512 * 4);
    // The seed's kernel pages each large folio out whole: every loop
    // reads the whole file back, and nothing is split.
    let whole = pageout_loop(false, false);
    assert_eq!(phase_vm(&whole, 0, "loop", "thp_split_page"), 0);
    assert_eq!(phase_vm(&whole, 0, "loop", "pgpgin"), 10 * 512 * 4);
    assert_eq!(phase_vm(&whole, 0, "loop", "nr_file_pages"), 0);
}

#[test]
fn batched_rmap_removal_changes_time_not_counters() {
    let one = pageout_loop(false, false);
    let batched = pageout_loop(false, true);
    assert_eq!(one.vmstat, batched.vmstat);
    let share = |r: &RunResult, f: &str| -> u64 {
        r.profile_tree
            .iter()
            .filter(|row| row.path.ends_with(f))
            .map(|row| row.total_ns)
            .sum()
    };
    // One stat update per folio instead of one per page.
    assert!(
        share(&batched, "__mod_lruvec_page_state") * 8 < share(&one, "__mod_lruvec_page_state")
    );
    assert!(share(&batched, "try_to_unmap_one") < share(&one, "try_to_unmap_one"));
    assert_eq!(share(&one, "folio_remove_rmap_range"), 0);
    assert!(batched.elapsed_ns < one.elapsed_ns);
}

//! madvise on private anonymous memory: MADV_PAGEOUT, MADV_COLD,
//! MADV_DONTNEED, MADV_FREE, MADV_WILLNEED, with counts derived from 6.1's
//! madvise.c and vmscan.c paths, and content integrity throughout.

mod common;
use common::*;

fn spec(device: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
[[swap]]
device = "{device}"
size = "256M"
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "16M" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
  {steps}
]
"#
    )
}

const PAGES: i64 = 4096;

#[test]
fn pageout_writes_every_page_without_scan_counts() {
    for dev in ["zram", "virtio", "nvme"] {
        let r = run_checked(&spec(
            dev,
            r#"{ op = "phase", name = "out" },
               { op = "madvise", region = "heap", advice = "pageout" },
               { op = "phase", name = "in" },
               { op = "touch", region = "heap" },"#,
        ));
        assert_eq!(phase_vm(&r, 0, "out", "pswpout"), PAGES, "{dev}");
        // reclaim_pages counts no scan or steal.
        assert_eq!(phase_vm(&r, 0, "out", "pgscan_anon"), 0, "{dev}");
        assert_eq!(phase_vm(&r, 0, "out", "pgsteal_anon"), 0, "{dev}");
        if dev == "zram" {
            // Written synchronously and freed: every read swaps in.
            assert_eq!(phase_vm(&r, 0, "in", "pswpin"), PAGES, "{dev}");
        } else {
            // Under writeback when shrink_folio_list looks again, so kept
            // in the swap cache: the reads are minor faults on it.
            assert_eq!(phase_vm(&r, 0, "in", "pswpin"), 0, "{dev}");
            assert_eq!(phase_vm(&r, 0, "in", "pgmajfault"), 0, "{dev}");
            assert_eq!(phase_vm(&r, 0, "in", "pgfault"), PAGES, "{dev}");
        }
        assert_eq!(r.integrity.pages_checked, PAGES as u64);
    }
}

#[test]
fn second_pageout_writes_again_only_without_the_swap_cache() {
    let steps = r#"{ op = "madvise", region = "heap", advice = "pageout" },
               { op = "touch", region = "heap" },
               { op = "phase", name = "again" },
               { op = "madvise", region = "heap", advice = "pageout" },"#;
    // zram swaps in past the swap cache and frees the slot: the page is
    // dirty again and must be written.
    let z = run_checked(&spec("zram", steps));
    assert_eq!(phase_vm(&z, 0, "again", "pswpout"), PAGES);
    // A block device swaps in through the swap cache; read back, the page
    // is clean and its slot still holds it: reclaim drops it unwritten.
    let v = run_checked(&spec("virtio", steps));
    assert_eq!(phase_vm(&v, 0, "again", "pswpout"), 0);
    assert!(
        vm(&v, "nr_swapcached") <= 0,
        "swap cache emptied by reclaim"
    );
}

#[test]
fn pageout_skips_pages_shared_with_a_child() {
    let r = run_checked(&spec(
        "zram",
        r#"{ op = "fork", steps = [ { op = "sleep", duration = "1s" } ] },
           { op = "phase", name = "out" },
           { op = "madvise", region = "heap", advice = "pageout" },
           { op = "wait" },"#,
    ));
    // page_mapcount != 1: left alone.
    assert_eq!(phase_vm(&r, 0, "out", "pswpout"), 0);
}

#[test]
fn cold_deactivates_active_pages() {
    // Under a limit, a region read over and over while another task
    // streams is activated by reclaim (still referenced when scanned again).
    let text = r#"
[machine]
memory = "512M"
cpus = 2
[[swap]]
device = "zram"
size = "256M"
[cgroup.w]
memory_max = "24M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "touch", region = "heap", passes = 40 },
  { op = "sleep", duration = "1s" },
  { op = "phase", name = "cold" },
  { op = "madvise", region = "heap", advice = "cold" },
]
[task.stream]
cgroup = "w"
steps = [
  { op = "mmap", name = "s", kind = "anon", size = "64M" },
  { op = "touch", region = "s", write = 1.0 },
]
"#;
    let r = run_checked(text);
    let d = phase_vm(&r, 0, "cold", "pgdeactivate");
    assert!(d > 0, "nothing was active");
    // Each deactivated page moved from the active to the inactive list.
    // Besides, madvise_cold starts with lru_add_drain(): the pages still
    // in its CPU's lru_add batch (fewer than PAGEVEC_SIZE, 15) join the
    // inactive list too. The task woke on the CPU it slept on, where its
    // first touch left the batch's last pages.
    assert_eq!(phase_vm(&r, 0, "cold", "nr_active_anon"), -d);
    let drained = phase_vm(&r, 0, "cold", "nr_inactive_anon") - d;
    assert!((0..15).contains(&drained), "{drained} more inactive");
    assert_eq!(phase_vm(&r, 0, "cold", "pswpout"), 0);
}

#[test]
fn dontneed_drops_the_range_and_it_reads_zeros() {
    let r = run_checked(&spec(
        "zram",
        r#"{ op = "madvise", region = "heap", advice = "pageout", length = "4M" },
           { op = "phase", name = "drop" },
           { op = "madvise", region = "heap", advice = "dontneed" },
           { op = "phase", name = "read" },
           { op = "touch", region = "heap" },"#,
    ));
    // Swap entries and pages alike are gone: every read is a zero-page
    // fault, checked against zeros.
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), PAGES);
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 0);
    assert_eq!(phase_vm(&r, 0, "drop", "nr_anon_pages"), -(PAGES - 1024));
}

#[test]
fn free_pages_are_discarded_under_pressure_unless_written_again() {
    let text = r#"
[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "256M"
[cgroup.w]
memory_max = "48M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "32M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "madvise", region = "heap", advice = "free" },
  { op = "touch", region = "heap", write = 1.0, length = "8M" },
  { op = "phase", name = "pressure" },
  { op = "mmap", name = "other", kind = "anon", size = "40M" },
  { op = "touch", region = "other", write = 1.0 },
  { op = "phase", name = "read" },
  { op = "touch", region = "heap" },
]
"#;
    let r = run_checked(text);
    assert_eq!(vm(&r, "pglazyfree"), 8192);
    // The 24 MiB not written again are discarded first, without a write.
    let freed = phase_vm(&r, 0, "pressure", "pglazyfreed");
    assert!((6000..=6144).contains(&freed), "pglazyfreed {freed}");
    // Every read sees zeros for a discarded page, the data for the rest.
    assert_eq!(r.integrity.violations, 0);
    assert!(phase_vm(&r, 0, "read", "pgfault") >= freed);
}

#[test]
fn willneed_reads_swapped_pages_ahead_of_use() {
    let text = r#"
[machine]
memory = "512M"
[[swap]]
device = "virtio"
size = "256M"
[cgroup.w]
memory_max = "12M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "16M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "sleep", duration = "100ms" },
  { op = "phase", name = "willneed" },
  { op = "madvise", region = "heap", advice = "willneed", length = "2M" },
  { op = "sleep", duration = "100ms" },
  { op = "phase", name = "use" },
  { op = "touch", region = "heap", length = "2M" },
]
"#;
    let r = run_checked(text);
    let read = phase_vm(&r, 0, "willneed", "pswpin");
    assert!(read > 256, "pswpin {read}");
    // No readahead accounting: the pages were asked for.
    assert_eq!(phase_vm(&r, 0, "willneed", "swap_ra"), 0);
    // Using them: swap-cache hits, minor faults only.
    assert_eq!(phase_vm(&r, 0, "use", "pgmajfault"), 0);
    assert_eq!(phase_vm(&r, 0, "use", "pswpin"), 0);
    assert_eq!(phase_vm(&r, 0, "use", "pgfault"), read);
}

#[test]
fn free_marks_clean_pages_shared_with_a_child_lazily_free_too() {
    // madvise_free_pte_range checks the mapcount only of a page in the
    // swap cache or dirty (PG_dirty: a written anon page's dirt is in its
    // PTE): clean pages shared after fork become lazily free as well.
    let r = run_checked(&spec(
        "zram",
        r#"{ op = "fork", steps = [{ op = "sleep", duration = "100ms" }] },
  { op = "phase", name = "free" },
  { op = "madvise", region = "heap", advice = "free" },
  { op = "phase", name = "end" },
  { op = "wait" },"#,
    ));
    assert_eq!(phase_vm(&r, 0, "free", "pglazyfree"), PAGES);
}

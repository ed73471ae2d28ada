//! Anonymous THP as 6.1 has it: fault-time THPs and their fallbacks, the
//! huge zero page, PMD splits on COW, fork and partial unmaps, the
//! deferred split queue's counting, and reclaim swapping a THP out whole
//! to a device with free clusters (zram) or splitting it (a rotational
//! disk). Every run has the invariant checker on (mapcounts, references,
//! PMD deposits, the THP gauge) and checks content tokens.

mod common;
use common::*;
use mmsim_sim::output::RunResult;

/// memcg_spec with THP `mode` (always, madvise or never).
fn thp(mode: &str, max: &str, steps: &str) -> String {
    memcg_spec(max, "", steps).replace(
        "\"kernel/mm/transparent_hugepage/enabled\" = \"never\"",
        &format!("\"kernel/mm/transparent_hugepage/enabled\" = \"{mode}\""),
    )
}

fn stat(r: &RunResult, name: &str) -> i64 {
    r.cgroups["w"].memory_stat[name]
}

const WRITE_16M: &str = r#"{ op = "mmap", name = "a", kind = "anon", size = "16M" },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "end" },"#;

#[test]
fn a_write_fault_maps_one_thp_per_block() {
    let r = run_checked(&thp("always", "256M", WRITE_16M));
    // Eight 2 MiB blocks, one fault and one THP each.
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 8);
    assert_eq!(vm(&r, "thp_fault_alloc"), 8);
    assert_eq!(vm(&r, "thp_fault_fallback"), 0);
    assert_eq!(phase_vm(&r, 0, "write", "nr_anon_transparent_hugepages"), 8);
    assert_eq!(phase_vm(&r, 0, "write", "nr_anon_pages"), 4096);
    // A deposited PTE table per PMD, and the PMD table above them.
    assert_eq!(phase_vm(&r, 0, "write", "nr_page_table_pages"), 9);
    assert_eq!(stat(&r, "thp_fault_alloc"), 8);
    // memory.stat as the last phase mark left it: all anon memory in THPs.
    assert_eq!(stat(&r, "anon_thp"), 16 << 20);
    assert_eq!(stat(&r, "anon"), 16 << 20);
    // The task's exit zapped every PMD: the gauge is back at 0.
    assert_eq!(vm(&r, "nr_anon_transparent_hugepages"), 0);
}

#[test]
fn never_and_madvise_without_the_hint_fault_every_page() {
    for mode in ["never", "madvise"] {
        let r = run_checked(&thp(mode, "256M", WRITE_16M));
        assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 4096, "{mode}");
        assert_eq!(vm(&r, "thp_fault_alloc"), 0, "{mode}");
        assert_eq!(vm(&r, "nr_anon_transparent_hugepages"), 0, "{mode}");
    }
    let r = run_checked(&thp(
        "madvise",
        "256M",
        &format!(
            "{{ op = \"mmap\", name = \"a\", kind = \"anon\", size = \"16M\" }},
             {{ op = \"madvise\", region = \"a\", advice = \"hugepage\" }},
             {}",
            WRITE_16M.split_once("\n").expect("two lines").1
        ),
    ));
    assert_eq!(vm(&r, "thp_fault_alloc"), 8);
}

#[test]
fn the_huge_zero_page_serves_reads_on_a_machine_of_512m_or_more() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "8M" },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "end" },"#;
    let big = thp("always", "512M", steps).replace("memory = \"512M\"", "memory = \"1G\"");
    let r = run_checked(&big);
    // One zero-page PMD per block; the machine allocates it once.
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 4);
    assert_eq!(vm(&r, "thp_zero_page_alloc"), 1);
    // A write splits the zero PMD and copies 4 KiB pages: no THP.
    assert_eq!(phase_vm(&r, 0, "write", "thp_split_pmd"), 4);
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 2048);
    assert_eq!(vm(&r, "thp_fault_alloc"), 0);
    // Under 512 MiB of RAM hugepage_init clears use_zero_page: reads
    // allocate THPs.
    let r = run_checked(&thp("always", "256M", steps));
    assert_eq!(vm(&r, "thp_zero_page_alloc"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "thp_fault_alloc"), 4);
    // Mapped writable and dirty: the writes take no fault.
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 0);
}

#[test]
fn a_charge_over_the_limit_falls_back_without_reclaim() {
    // 16 MiB under an 8 MiB limit: defrag "madvise" without MADV_HUGEPAGE
    // charges without direct reclaim, so a block that does not fit under
    // the limit falls back to 4 KiB pages (which do reclaim).
    let r = run_checked(&thp("always", "8M", WRITE_16M));
    let alloc = vm(&r, "thp_fault_alloc");
    let fallback = vm(&r, "thp_fault_fallback");
    assert!(alloc > 0 && fallback > 0, "{alloc} {fallback}");
    assert_eq!(vm(&r, "thp_fault_fallback_charge"), fallback);
    assert_eq!(alloc + fallback, 8);
    // A fallen-back block faults page by page.
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), alloc + 512 * fallback);
}

#[test]
fn reclaim_swaps_a_thp_out_whole_to_zram_and_splits_it_for_a_disk() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "64M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "madvise", region = "a", advice = "hugepage" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },"#;
    let r = run_checked(&thp("always", "24M", steps));
    assert!(vm(&r, "thp_swpout") > 0);
    assert_eq!(vm(&r, "thp_swpout_fallback"), 0);
    // Every THP swapped out had its PMD split for its swap entries.
    assert!(vm(&r, "thp_split_pmd") >= vm(&r, "thp_swpout"));
    let disk = thp("always", "24M", steps).replace("device = \"zram\"", "device = \"virtio\"");
    let r = run_checked(&disk);
    assert_eq!(vm(&r, "thp_swpout"), 0);
    let fallback = vm(&r, "thp_swpout_fallback");
    assert!(fallback > 0);
    assert_eq!(vm(&r, "thp_split_page"), fallback);
}

#[test]
fn fork_shares_thps_and_a_write_splits_the_writers_pmd() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "8M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "child" },
   { op = "fork", steps = [ { op = "touch", region = "a", order = "seq", write = 1.0, length = "4M" } ] },
   { op = "wait" },
   { op = "phase", name = "parent" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&thp("always", "256M", steps));
    // The child's first write to each of two shared blocks splits its
    // PMD; each page is then copied.
    assert_eq!(phase_vm(&r, 0, "child", "thp_split_pmd"), 2);
    assert_eq!(phase_vm(&r, 0, "child", "pgfault"), 1024);
    // Once the child is gone the parent's THPs are its own again: one
    // write fault per block reuses each whole, no split.
    assert_eq!(phase_vm(&r, 0, "parent", "pgfault"), 4);
    assert_eq!(phase_vm(&r, 0, "parent", "thp_split_pmd"), 0);
    assert_eq!(
        phase_vm(&r, 0, "parent", "nr_anon_transparent_hugepages"),
        0
    );
    // The child's copies replaced its PTEs of the two THPs, but the
    // parent's PMDs kept every page mapped: none was left unmapped in a
    // partly mapped THP, so nothing was queued for a deferred split.
    assert_eq!(vm(&r, "thp_deferred_split_page"), 0);
}

#[test]
fn a_partial_dontneed_splits_the_pmd_and_queues_the_thp() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "8M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "advise" },
   { op = "madvise", region = "a", advice = "dontneed", offset = "1M", length = "512K" },
   { op = "madvise", region = "a", advice = "dontneed", offset = "4M", length = "2M" },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&thp("always", "256M", steps));
    assert_eq!(phase_vm(&r, 0, "advise", "thp_split_pmd"), 1);
    assert_eq!(phase_vm(&r, 0, "advise", "thp_deferred_split_page"), 1);
    // Two THPs still PMD-mapped, one PTE-mapped and partly unmapped, one
    // zapped whole.
    assert_eq!(
        phase_vm(&r, 0, "advise", "nr_anon_transparent_hugepages"),
        -2
    );
    assert_eq!(phase_vm(&r, 0, "advise", "nr_anon_pages"), -128 - 512);
    // The zapped block is pmd_none again: a read maps... a THP (512 MiB
    // machine: no zero page); the split block's holes fault per page.
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 1 + 128);
    assert_eq!(phase_vm(&r, 0, "read", "thp_fault_alloc"), 1);
}

#[test]
fn drop_caches_splits_the_queued_thps_and_frees_their_holes() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "8M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "madvise", region = "a", advice = "dontneed", offset = "1M", length = "512K" },
   { op = "madvise", region = "a", advice = "dontneed", offset = "3M", length = "256K" },
   { op = "phase", name = "drop" },
   { op = "drop_caches" },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&thp("always", "256M", steps));
    // Two THPs queued by their holes; drop_slab's priority-0 pass scans
    // the whole queue and splits both, freeing the 128 + 64 pages no PTE
    // maps.
    assert_eq!(vm(&r, "thp_deferred_split_page"), 2);
    assert_eq!(phase_vm(&r, 0, "drop", "thp_split_page"), 2);
    let dropped = r.cgroups["w"].memory_current;
    // Without the drop the holes stay allocated (charged to the cgroup).
    let r = run_checked(&thp(
        "always",
        "256M",
        &steps.replace("{ op = \"drop_caches\" },", ""),
    ));
    assert_eq!(phase_vm(&r, 0, "drop", "thp_split_page"), 0);
    assert_eq!(r.cgroups["w"].memory_current - dropped, 192 << 12);
}

#[test]
fn a_thp_lazily_freed_whole_is_discarded_by_reclaim() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "8M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "free" },
   { op = "madvise", region = "a", advice = "free", offset = "2M", length = "2M" },
   { op = "phase", name = "pressure" },
   { op = "mmap", name = "b", kind = "anon", size = "8M" },
   { op = "touch", region = "b", order = "seq", write = 1.0 },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&thp("always", "12M", steps));
    // madvise_free_huge_pmd: the whole THP through its PMD.
    assert_eq!(phase_vm(&r, 0, "free", "pglazyfree"), 512);
    assert_eq!(phase_vm(&r, 0, "free", "thp_split_pmd"), 0);
    // Reclaim splits its PMD to unmap it (TTU_SPLIT_HUGE_PMD), drops each
    // clean PTE (the first page left unmapped queues it), and frees the
    // THP whole without writing it.
    assert_eq!(vm(&r, "pglazyfreed"), 512);
    assert!(vm(&r, "thp_deferred_split_page") >= 1);
    // The freed block reads zeros again (content tokens checked).
    assert_eq!(r.integrity.violations, 0);
}

#[test]
fn a_fault_on_a_thp_still_in_the_swap_cache_maps_one_page() {
    // MADV_PAGEOUT of a whole PMD-mapped THP to an NVMe device: swapped
    // out whole, its write still in flight, it stays in the swap cache;
    // reads then map its pages one by one from there (no swap-in).
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "4M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "pageout" },
   { op = "madvise", region = "a", advice = "pageout", offset = "0", length = "2M" },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "end" },"#;
    let r = run_checked(
        &thp("always", "256M", steps).replace("device = \"zram\"", "device = \"nvme\""),
    );
    assert_eq!(phase_vm(&r, 0, "pageout", "thp_swpout"), 1);
    assert_eq!(phase_vm(&r, 0, "pageout", "pswpout"), 512);
    // Each page of the block faults once and is found in the swap cache:
    // minor faults, nothing read.
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 512);
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "nr_anon_pages"), 512);
}

#[test]
fn madv_free_of_a_pte_mapped_thp_asks_its_first_page_whether_it_is_shared() {
    // MADV_DONTNEED of the first 4 KiB splits the PMD and leaves the
    // head page unmapped. 6.1's madvise_free_pte_range takes the folio's
    // sharers from its first page (folio_estimated_sharers: 0 here, not
    // 1), so the walk stops at the THP: nothing is split or made lazy.
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "2M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "madvise", region = "a", advice = "dontneed", length = "4K" },
   { op = "phase", name = "free" },
   { op = "madvise", region = "a", advice = "free", offset = "8K" },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&thp("always", "256M", steps));
    assert_eq!(vm(&r, "thp_split_pmd"), 1);
    assert_eq!(phase_vm(&r, 0, "free", "pglazyfree"), 0);
    assert_eq!(phase_vm(&r, 0, "free", "thp_split_page"), 0);
    // With the head page still mapped the THP is split and every page of
    // the range made lazily free.
    let r = run_checked(&thp(
        "always",
        "256M",
        &steps.replace("length = \"4K\"", "offset = \"4K\", length = \"4K\""),
    ));
    assert_eq!(phase_vm(&r, 0, "free", "thp_split_page"), 1);
    assert_eq!(phase_vm(&r, 0, "free", "pglazyfree"), 510);
}

//! Anonymous mTHP as 6.12 has it (`hugepages-<size>kB/enabled`): the
//! order a write fault takes, the zero page for reads, zaps in batches
//! (a folio zapped whole is never partially mapped), the deferred split
//! and its zero-page remapping, swap-out whole and the large swap-in from
//! zram (each with its feature off too), MADV_FREE, and COW after fork.
//! Every run has the invariant checker on and checks content tokens.

mod common;
use common::*;
use mmsim_sim::output::RunResult;

/// 6.12, a 512 MiB machine with zram, `knobs` (sysfs lines, or `[…]`
/// sections after), the task's `steps` in cgroup w with memory.max `max`.
fn spec(knobs: &str, max: &str, steps: &str) -> String {
    memcg_spec(max, "", steps)
        .replace("memory = \"512M\"", "memory = \"512M\"\nkernel = \"6.12\"")
        .replace(
            "\"kernel/mm/transparent_hugepage/enabled\" = \"never\"",
            &format!("\"kernel/mm/transparent_hugepage/enabled\" = \"never\"\n{knobs}"),
        )
}

const K64: &str = "\"kernel/mm/transparent_hugepage/hugepages-64kB/enabled\" = \"always\"";

fn stat(r: &RunResult, name: &str) -> i64 {
    r.vmstat
        .get(&format!("hugepages-64kB/stats/{name}"))
        .copied()
        .unwrap_or(0)
}

fn phase_stat(r: &RunResult, phase: &str, name: &str) -> i64 {
    let p = r.tasks[0]
        .phases
        .iter()
        .find(|p| p.name == phase)
        .expect("phase");
    p.vmstat
        .get(&format!("hugepages-64kB/stats/{name}"))
        .copied()
        .unwrap_or(0)
}

const WRITE_1M: &str = r#"{ op = "mmap", name = "a", kind = "anon", size = "1M" },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },"#;

#[test]
fn a_write_fault_takes_a_64k_folio_and_a_read_the_zero_page() {
    let steps = format!(
        r#"{WRITE_1M}
   {{ op = "mmap", name = "r", kind = "anon", size = "1M" }},
   {{ op = "phase", name = "read" }},
   {{ op = "touch", region = "r", order = "seq", write = 0.0 }},
   {{ op = "phase", name = "rewrite" }},
   {{ op = "touch", region = "r", order = "seq", write = 1.0 }},
   {{ op = "phase", name = "end" }},"#
    );
    let r = run_checked(&spec(K64, "256M", &steps));
    // 16 folios of 16 pages, one fault each, all mapped.
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 16);
    assert_eq!(phase_stat(&r, "write", "anon_fault_alloc"), 16);
    assert_eq!(phase_stat(&r, "write", "nr_anon"), 16);
    assert_eq!(phase_vm(&r, 0, "write", "nr_anon_pages"), 256);
    // No PMD-size THP, and the legacy counters stay at 0.
    assert_eq!(vm(&r, "thp_fault_alloc"), 0);
    assert_eq!(vm(&r, "nr_anon_transparent_hugepages"), 0);
    // Reads map the zero page page by page; the writes then copy each
    // (the zero-page PTEs are not empty, so no mTHP).
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 256);
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgfault"), 256);
    assert_eq!(stat(&r, "anon_fault_alloc"), 16);
    // Exit zaps each folio whole, in one batch: never partially mapped.
    assert_eq!(stat(&r, "split_deferred"), 0);
    assert_eq!(stat(&r, "nr_anon"), 0);
}

#[test]
fn madvise_mode_needs_the_hint_and_the_highest_fitting_order_wins() {
    let knobs = "\"kernel/mm/transparent_hugepage/hugepages-64kB/enabled\" = \"madvise\"\n\
                 \"kernel/mm/transparent_hugepage/hugepages-16kB/enabled\" = \"always\"";
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "1M" },
   { op = "mmap", name = "h", kind = "anon", size = "1M" },
   { op = "madvise", region = "h", advice = "hugepage" },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "touch", region = "h", order = "seq", write = 1.0 },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&spec(knobs, "256M", steps));
    // Plain: 16 KiB folios (64 faults); advised: 64 KiB (16 faults).
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 64 + 16);
    assert_eq!(vm(&r, "hugepages-16kB/stats/anon_fault_alloc"), 64);
    assert_eq!(stat(&r, "anon_fault_alloc"), 16);
}

#[test]
fn a_partial_dontneed_queues_the_folio_and_its_split_remaps_unwritten_pages_to_zero() {
    // One write per 64 KiB folio: the folio is allocated whole, 15 of its
    // pages never written. MADV_DONTNEED of page 1 of the first folio
    // leaves it partly mapped; a whole folio's DONTNEED frees it.
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "256K" },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0, length = "4K" },
   { op = "touch", region = "a", order = "seq", write = 1.0, offset = "64K", length = "4K" },
   { op = "touch", region = "a", order = "seq", write = 1.0, offset = "128K", length = "4K" },
   { op = "phase", name = "holes" },
   { op = "madvise", region = "a", advice = "dontneed", offset = "4K", length = "4K" },
   { op = "madvise", region = "a", advice = "dontneed", offset = "64K", length = "64K" },
   { op = "phase", name = "drop" },
   { op = "drop_caches" },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&spec(K64, "256M", steps));
    assert_eq!(phase_stat(&r, "write", "anon_fault_alloc"), 3);
    assert_eq!(phase_stat(&r, "holes", "split_deferred"), 1);
    assert_eq!(phase_stat(&r, "holes", "nr_anon_partially_mapped"), 1);
    assert_eq!(phase_stat(&r, "holes", "nr_anon"), -1);
    assert_eq!(phase_vm(&r, 0, "holes", "nr_anon_pages"), -17);
    // drop_caches: the shrinker splits the queued folio; its 14 mapped,
    // never-written pages map the shared zero page instead.
    assert_eq!(phase_stat(&r, "drop", "split"), 1);
    assert_eq!(phase_stat(&r, "drop", "nr_anon_partially_mapped"), -1);
    assert_eq!(phase_vm(&r, 0, "drop", "nr_anon_pages"), -14);
    // Read back: the hole and the freed folio fault (17), the zero-page
    // PTEs do not, the last 64 KiB was never touched (16).
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 1 + 16 + 16);
}

const PRESSURE: &str = r#"{ op = "mmap", name = "a", kind = "anon", size = "32M" },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "end" },"#;

#[test]
fn reclaim_swaps_an_mthp_out_whole_and_zram_swaps_it_in_whole() {
    let r = run_checked(&spec(K64, "16M", PRESSURE));
    let swpout = stat(&r, "swpout");
    assert!(swpout > 0);
    assert_eq!(stat(&r, "swpout_fallback"), 0);
    // Every page came back, most 16 to a fault.
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 8192);
    let faults = phase_vm(&r, 0, "read", "pgmajfault");
    assert_eq!(faults, phase_vm(&r, 0, "read", "pgfault"));
    assert!(faults < 8192 - 15 * 100, "few large swap-ins: {faults}");
    // Without large swap-in (6.11) every page faults alone.
    let off = spec(K64, "16M", PRESSURE).replace(
        "[task.main]",
        "[features]\nanon_large_swapin = false\n[task.main]",
    );
    let r = run_checked(&off);
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 8192);
    // Without mTHP swap-out (6.9) each folio is split first.
    let off = spec(K64, "16M", PRESSURE).replace(
        "[task.main]",
        "[features]\nanon_mthp_swapout = false\n[task.main]",
    );
    let r = run_checked(&off);
    assert_eq!(stat(&r, "swpout"), 0);
    assert!(stat(&r, "swpout_fallback") > 0);
    assert_eq!(stat(&r, "swpout_fallback"), stat(&r, "split"));
}

#[test]
fn madv_free_frees_whole_folios_lazily_and_splits_a_cut_one() {
    let steps = format!(
        r#"{WRITE_1M}
   {{ op = "phase", name = "free" }},
   {{ op = "madvise", region = "a", advice = "free", length = "520K" }},
   {{ op = "phase", name = "end" }},"#
    );
    let r = run_checked(&spec(K64, "256M", &steps));
    // Eight folios whole (128 pages) and two pages of the ninth, split.
    assert_eq!(phase_vm(&r, 0, "free", "pglazyfree"), 130);
    assert_eq!(phase_stat(&r, "free", "split"), 1);
    assert_eq!(phase_stat(&r, "free", "nr_anon"), -1);
}

#[test]
fn cow_of_a_shared_mthp_copies_page_by_page_even_after_the_child_exits() {
    let steps = format!(
        r#"{WRITE_1M}
   {{ op = "phase", name = "fork" }},
   {{ op = "fork", steps = [] }},
   {{ op = "wait" }},
   {{ op = "phase", name = "rewrite" }},
   {{ op = "touch", region = "a", order = "seq", write = 1.0 }},
   {{ op = "phase", name = "end" }},"#
    );
    let r = run_checked(&spec(K64, "256M", &steps));
    // fork made every page shared (not exclusive); 6.12 never reuses a
    // large folio for a page that is not exclusive: 256 copies.
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgfault"), 256);
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgreuse"), 0);
    // Each copy leaves its old page unmapped while the rest of the folio
    // is mapped: every folio is queued once.
    assert_eq!(phase_stat(&r, "rewrite", "split_deferred"), 16);
}

#[test]
fn without_mthp_swapout_a_split_frees_never_written_pages_without_io() {
    // One page written per 64 KiB folio of 8 MiB under 4 MiB: reclaim
    // cannot swap a folio out whole (6.9), so it splits it; the 15 pages
    // never written map the zero page, and reclaim frees each, its swap
    // slot dropped before any write (`swap_writepage`'s folio_free_swap:
    // nothing maps it), so no swpout_zero; the written page is swapped.
    let mut steps = String::from(
        r#"{ op = "mmap", name = "a", kind = "anon", size = "8M" },
   { op = "phase", name = "write" },"#,
    );
    for i in 0..128 {
        steps.push_str(&format!(
            "\n   {{ op = \"touch\", region = \"a\", order = \"seq\", write = 1.0, offset = \"{}K\", length = \"4K\" }},",
            64 * i
        ));
    }
    steps.push_str(
        r#"
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "end" },"#,
    );
    let text = spec(K64, "4M", &steps).replace(
        "[task.main]",
        "[features]\nanon_mthp_swapout = false\n[task.main]",
    );
    let r = run_checked(&text);
    let split = stat(&r, "swpout_fallback");
    assert!(split > 0);
    assert_eq!(stat(&r, "split"), split);
    assert_eq!(vm(&r, "swpout_zero"), 0);
    assert_eq!(stat(&r, "swpout"), 0);
    // Read back: the swapped pages fault in, and so do the untouched
    // pages of the blocks whose mTHP charge fell back to one page; the
    // zero-page PTEs do not.
    let fallback = stat(&r, "anon_fault_fallback");
    assert_eq!(
        phase_vm(&r, 0, "read", "pgfault"),
        phase_vm(&r, 0, "read", "pswpin") + 15 * fallback
    );
}

#[test]
fn a_folio_still_in_the_swap_cache_is_mapped_whole() {
    // NVMe: MADV_PAGEOUT's writes are in flight when the task reads the
    // range back, so each folio is found in the swap cache and mapped
    // whole by one minor fault, exclusive and writable.
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "1M" },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "pageout" },
   { op = "madvise", region = "a", advice = "pageout" },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "rewrite" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "end" },"#;
    let text = spec(K64, "256M", steps).replace("device = \"zram\"", "device = \"nvme\"");
    let r = run_checked(&text);
    assert_eq!(phase_stat(&r, "pageout", "swpout"), 16);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 16);
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 0);
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgfault"), 0);
}

/// The same on 7.3.
fn spec73(knobs: &str, max: &str, steps: &str) -> String {
    spec(knobs, max, steps).replace("kernel = \"6.12\"", "kernel = \"7.3\"")
}

const FORK_REWRITE: &str = r#"{ op = "mmap", name = "a", kind = "anon", size = "1M" },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "fork" },
   { op = "fork", steps = [{ op = "touch", region = "a", order = "seq", write = 1.0, length = "256K" }] },
   { op = "wait" },
   { op = "phase", name = "rewrite" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "end" },"#;

#[test]
fn on_7_3_a_large_folio_one_mm_maps_is_reused_page_by_page_after_fork() {
    let r = run_checked(&spec73(K64, "256M", FORK_REWRITE));
    // The child copies its 64 pages (it and the parent both map the
    // folios: MM_ID shared); once it has copied them or exited, the
    // parent is the folios' only mm and reuses each page it writes.
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgfault"), 256);
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgreuse"), 256);
    // No copy, so no folio is left partly mapped, none is freed.
    assert_eq!(phase_stat(&r, "rewrite", "split_deferred"), 0);
    assert_eq!(phase_stat(&r, "rewrite", "nr_anon"), 0);
    // 6.12 copies all 256 into order-0 pages and frees the 16 folios.
    let r = run_checked(&spec(K64, "256M", FORK_REWRITE));
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgreuse"), 0);
    assert_eq!(phase_stat(&r, "rewrite", "nr_anon"), -16);
}

#[test]
fn on_7_3_a_folio_the_child_still_maps_is_copied() {
    // The child sleeps while the parent writes: every folio is shared.
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "1M" },
   { op = "phase", name = "write" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "fork" },
   { op = "fork", steps = [{ op = "sleep", duration = "1s" }] },
   { op = "phase", name = "rewrite" },
   { op = "touch", region = "a", order = "seq", write = 1.0, length = "512K" },
   { op = "phase", name = "end" },
   { op = "wait" },"#;
    let r = run_checked(&spec73(K64, "256M", steps));
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgreuse"), 0);
    assert_eq!(phase_vm(&r, 0, "rewrite", "nr_anon_pages"), 128);
}

#[test]
fn on_7_3_zram_swaps_in_through_the_swap_cache_counting_swpin() {
    let r = run_checked(&spec73(K64, "16M", PRESSURE));
    assert!(stat(&r, "swpout") > 0);
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 8192);
    let faults = phase_vm(&r, 0, "read", "pgmajfault");
    assert!(faults < 8192 - 15 * 100, "few large swap-ins: {faults}");
    // Each large swap-in counts its size's swpin; 6.12 has no such stat.
    let large = phase_stat(&r, "read", "swpin");
    assert!(large > 0);
    assert!(
        large * 16 + (faults - large) <= 8192,
        "{large} large of {faults}"
    );
    assert!(r.vmstat.contains_key("hugepages-64kB/stats/swpin"));
    let r = run_checked(&spec(K64, "16M", PRESSURE));
    assert_eq!(r.vmstat.get("hugepages-64kB/stats/swpin"), None);
}

#[test]
fn on_7_3_a_shared_slot_is_swapped_in_large_and_left_in_the_swap_cache() {
    // Paged out, then forked: the slots have two users, which 6.12's
    // skip path refuses (order 0 each) and 7.3 reads large into the swap
    // cache, mapped read-only (no exclusive marker after fork) and kept
    // cached for the child.
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "1M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "madvise", region = "a", advice = "pageout" },
   { op = "fork", steps = [{ op = "sleep", duration = "1s" }] },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "end" },
   { op = "wait" },"#;
    let r = run_checked(&spec73(K64, "256M", steps));
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 16);
    assert_eq!(phase_stat(&r, "read", "swpin"), 16);
    assert_eq!(phase_vm(&r, 0, "read", "nr_swapcached"), 256);
    // 6.12 reads each page alone, through readahead.
    let r = run_checked(&spec(K64, "256M", steps));
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 256);
    assert_eq!(phase_stat(&r, "read", "nr_anon"), 0);
    assert!(phase_vm(&r, 0, "read", "pgmajfault") > 16);
}

#[test]
fn on_7_3_a_large_folio_a_child_reads_from_shared_slots_is_in_the_parents_rmap_too() {
    // The child reads the slots fork shared into 64 KiB folios in the swap
    // cache and exits; the parent then maps the same folios from the
    // cache. Not exclusive at the read, each folio took the root anon_vma
    // (__folio_set_anon), which the parent's VMA is linked into: the
    // checker's rmap test holds for the parent's mappings, and pageout
    // finds and unmaps them.
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "1M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "madvise", region = "a", advice = "pageout" },
   { op = "fork", steps = [{ op = "touch", region = "a", order = "seq", write = 0.0 }] },
   { op = "wait" },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "pageout" },
   { op = "madvise", region = "a", advice = "pageout" },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&spec73(K64, "256M", steps));
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "nr_anon_pages"), 256);
    assert_eq!(phase_vm(&r, 0, "pageout", "nr_anon_pages"), -256);
}

#[test]
fn a_private_file_mappings_copies_are_swapped_in_page_by_page() {
    // A MAP_PRIVATE file VMA is not anonymous: __thp_vma_allowable_orders
    // gives it no mTHP order, so 6.12's and 7.3's large swap-in
    // (alloc_swap_folio) read its copies as order-0 folios.
    let text = |kernel: &str| {
        format!(
            r#"
[machine]
memory = "128M"
kernel = "{kernel}"
[sysfs]
"kernel/mm/transparent_hugepage/hugepages-128kB/enabled" = "always"
[[swap]]
device = "zram"
size = "64M"
[[disk]]
name = "d0"
device = "nvme"
size = "64M"
[[file]]
name = "f0"
size = "4M"
on = "d0"
[task.t]
steps = [
{{ op = "mmap", name = "p", kind = "file_private", size = "4M", file = "f0" }},
{{ op = "touch", region = "p", write = 1 }},
{{ op = "madvise", region = "p", advice = "pageout" }},
{{ op = "phase", name = "read" }},
{{ op = "touch", region = "p", order = "shuffle", write = 0, seed = 33 }},
{{ op = "phase", name = "end" }},
]
"#
        )
    };
    for kernel in ["6.12", "7.3"] {
        let r = run_checked(&text(kernel));
        assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 1024, "{kernel}");
        assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 1024, "{kernel}");
        let large = r.vmstat.get("hugepages-128kB/stats/swpin").copied();
        assert!(large.unwrap_or(0) == 0, "{kernel}: {large:?}");
    }
}

#[test]
fn on_7_3_reclaim_of_a_lazily_freed_folio_unmaps_it_in_one_batch() {
    let steps = format!(
        r#"{WRITE_1M}
   {{ op = "phase", name = "free" }},
   {{ op = "madvise", region = "a", advice = "free" }},
   {{ op = "madvise", region = "a", advice = "pageout" }},
   {{ op = "phase", name = "end" }},"#
    );
    let r = run_checked(&spec73(K64, "256M", &steps));
    assert_eq!(phase_vm(&r, 0, "free", "pglazyfreed"), 256);
    assert_eq!(phase_stat(&r, "free", "split_deferred"), 0);
    assert_eq!(phase_stat(&r, "free", "nr_anon"), -16);
    // 6.12 removes the rmap PTE by PTE: each folio is partly mapped once.
    let r = run_checked(&spec(K64, "256M", &steps));
    assert_eq!(phase_vm(&r, 0, "free", "pglazyfreed"), 256);
    assert_eq!(phase_stat(&r, "free", "split_deferred"), 16);
}

#[test]
fn on_7_3_a_rotational_device_takes_large_slots() {
    let steps = format!(
        r#"{WRITE_1M}
   {{ op = "phase", name = "pageout" }},
   {{ op = "madvise", region = "a", advice = "pageout" }},
   {{ op = "phase", name = "end" }},"#
    );
    let hdd = |s: String| s.replace("device = \"zram\"", "device = \"virtio\"");
    let r = run_checked(&hdd(spec73(K64, "256M", &steps)));
    assert_eq!(phase_stat(&r, "pageout", "swpout"), 16);
    assert_eq!(phase_stat(&r, "pageout", "swpout_fallback"), 0);
    let r = run_checked(&hdd(spec(K64, "256M", &steps)));
    assert_eq!(phase_stat(&r, "pageout", "swpout"), 0);
    assert_eq!(phase_stat(&r, "pageout", "swpout_fallback"), 16);
}

/// An 8 MiB region read, then written (zero-page copies: 4 KiB pages),
/// less 1 MiB and 60 KiB of one 64 KiB block; 7.3's khugepaged, with
/// which the mm registered at its start, scans every 500 ms for 3 s
/// (MADV_HUGEPAGE changes nothing: the mm is registered already).
const COLLAPSE: &str = r#"{ op = "mmap", name = "a", kind = "anon", size = "8M" },
   { op = "phase", name = "fill" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "madvise", region = "a", advice = "dontneed", offset = "1M", length = "1M" },
   { op = "madvise", region = "a", advice = "dontneed", offset = "4100K", length = "60K" },
   { op = "phase", name = "collapse" },
   { op = "madvise", region = "a", advice = "hugepage" },
   { op = "sleep", duration = "3s" },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "end" },"#;

const SCAN_500MS: &str = "\"kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs\" = 500";

#[test]
fn on_7_3_khugepaged_collapses_small_pages_into_mthp_orders() {
    let r = run_checked(&spec73(&format!("{K64}\n{SCAN_500MS}"), "256M", COLLAPSE));
    assert_eq!(phase_vm(&r, 0, "fill", "pgfault"), 4096);
    // 112 blocks have pages (the 16 of the 1 MiB hole have none); the
    // one with 15 pages gone is filled with zeroed pages (max_ptes_none
    // 511 scales to 15 at 64 KiB).
    assert_eq!(phase_stat(&r, "collapse", "nr_anon"), 112);
    assert_eq!(phase_vm(&r, 0, "collapse", "nr_anon_pages"), 15);
    // Every later scan allocates a folio for each block already 64 KiB
    // and frees it: one scan at registration, then one every 500 ms.
    let allocs = phase_stat(&r, "collapse", "collapse_alloc");
    assert_eq!(allocs % 112, 0);
    assert!(allocs >= 112 * 6, "{allocs}");
    assert_eq!(phase_stat(&r, "collapse", "collapse_alloc_failed"), 0);
    // Only the 1 MiB hole faults when read; contents checked throughout.
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 256);
}

#[test]
fn on_7_3_max_ptes_none_other_than_511_allows_no_hole() {
    for none in [0, 100] {
        let knobs = format!(
            "{K64}\n{SCAN_500MS}\n\"kernel/mm/transparent_hugepage/khugepaged/max_ptes_none\" = {none}"
        );
        let r = run_checked(&spec73(&knobs, "256M", COLLAPSE));
        // The holed block stays small: 111 collapses, no page added.
        assert_eq!(
            phase_stat(&r, "collapse", "nr_anon"),
            111,
            "max_ptes_none {none}"
        );
        assert_eq!(phase_vm(&r, 0, "collapse", "nr_anon_pages"), 0);
        assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 256 + 15);
    }
}

#[test]
fn on_7_3_a_process_registers_at_its_start_and_without_an_mthp_size_nothing_is_collapsed() {
    // No MADV_HUGEPAGE: the process registered as it started (its heap).
    let steps = COLLAPSE.replace(
        r#"{ op = "madvise", region = "a", advice = "hugepage" },"#,
        "",
    );
    let r = run_checked(&spec73(&format!("{K64}\n{SCAN_500MS}"), "256M", &steps));
    assert_eq!(phase_stat(&r, "collapse", "nr_anon"), 112);
    // Its first scan came at the start and found nothing: the first
    // collapse is 500 ms in, after the fill.
    assert_eq!(phase_stat(&r, "fill", "collapse_alloc"), 0);
    // 6.12 does not run khugepaged for mTHP.
    let r = run_checked(&spec(K64, "256M", &steps));
    assert_eq!(stat(&r, "collapse_alloc"), 0);
    assert_eq!(phase_stat(&r, "collapse", "nr_anon"), 0);
    // No size on: khugepaged has no work.
    let r = run_checked(&spec73(SCAN_500MS, "256M", COLLAPSE));
    assert_eq!(stat(&r, "collapse_alloc"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 256 + 15);
}

//! Fault-path behaviour with counter values derived from what Linux 6.1
//! does on each path in mm/memory.c (handle_mm_fault, do_anonymous_page,
//! do_swap_page, do_wp_page, wp_page_copy).

mod common;
use common::*;

#[test]
fn reads_of_never_written_memory_map_the_zero_page() {
    // 1000 read faults map the shared zero page: no folio is allocated or
    // charged; only the page tables that map the range (1000 pages from a
    // 2 MiB-aligned start: two PTE tables and one PMD table).
    let r = run_checked(&memcg_spec(
        "100M",
        "",
        r#"{ op = "mmap", name = "a", kind = "anon", size = "4000K" },
           { op = "touch", region = "a", order = "seq", write = 0.0 },
           { op = "touch", region = "a", order = "rev", write = 0.0 },"#,
    ));
    assert_eq!(vm(&r, "pgfault"), 1000);
    assert_eq!(
        vm(&r, "pgalloc_dma32") + vm(&r, "pgalloc_normal") + vm(&r, "pgalloc_dma"),
        3
    );
    let cg = &r.cgroups["w"];
    assert_eq!(cg.memory_stat["anon"], 0);
    assert_eq!(cg.memory_stat["pagetables"], 3 * 4096);
    // The first charge takes a whole MEMCG_CHARGE_BATCH (64 pages) into
    // the CPU's stock: that is what memory.current and memory.peak show.
    assert_eq!(cg.memory_peak.unwrap(), 64 * 4096);
    assert_eq!(r.integrity.pages_checked, 2000);
}

#[test]
fn writing_over_the_zero_page_copies_from_it() {
    // A read fault maps the zero page; the write that follows goes through
    // do_wp_page → wp_page_copy with a zeroed page: two faults per page, no
    // reuse.
    let r = run_checked(&memcg_spec(
        "100M",
        "",
        r#"{ op = "mmap", name = "a", kind = "anon", size = "4000K" },
           { op = "touch", region = "a", order = "seq", write = 0.0 },
           { op = "touch", region = "a", order = "seq", write = 1.0 },"#,
    ));
    assert_eq!(vm(&r, "pgfault"), 2000);
    assert_eq!(vm(&r, "pgreuse"), 0);
    // 1000 zeroed copies plus the 3 page tables.
    assert_eq!(vm(&r, "pgalloc_dma32") + vm(&r, "pgalloc_normal"), 1003);
    assert_eq!(r.cgroups["w"].memory_stat["anon"], 1000 * 4096);
}

#[test]
fn resident_memory_faults_once() {
    // Below the limit: one fault per page on first write, none after.
    let r = run_checked(&memcg_spec(
        "100M",
        "",
        r#"{ op = "mmap", name = "a", kind = "anon", size = "40M" },
           { op = "touch", region = "a", order = "seq", write = 1.0 },
           { op = "touch", region = "a", order = "shuffle", passes = 3, write = 0.5, seed = 3 },"#,
    ));
    assert_eq!(vm(&r, "pgfault"), 10_240);
    assert_eq!(vm(&r, "pgmajfault"), 0);
    assert_eq!(vm(&r, "pswpout"), 0);
    // Reads are checked; writes are not (a write replaces the content).
    let reads = r.integrity.pages_checked;
    assert!(
        reads > 13_000 && reads < 17_700,
        "{reads} of 30720 shuffled accesses were reads"
    );
}

#[test]
fn a_page_read_back_from_zram_is_reused_on_write() {
    // 60M written under a 40M limit pushes the first ~20M to zram. Reading the first 100 pages
    // swaps them in through the skip-swapcache path, mapped read-only but
    // PageAnonExclusive; writing them then reuses each page in do_wp_page
    // (pgreuse), with no copy and no further major fault.
    let r = run_checked(&memcg_spec(
        "40M",
        "",
        r#"{ op = "mmap", name = "a", kind = "anon", size = "60M" },
           { op = "touch", region = "a", order = "seq", write = 1.0 },
           { op = "phase", name = "read" },
           { op = "touch", region = "a", order = "seq", length = "400K", write = 0.0 },
           { op = "phase", name = "write" },
           { op = "touch", region = "a", order = "seq", length = "400K", write = 1.0 },"#,
    ));
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 100);
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgmajfault"), 0);
    assert_eq!(phase_vm(&r, 0, "write", "pgreuse"), 100);
    // No copy: nothing new is allocated in the write phase.
    assert_eq!(phase_vm(&r, 0, "write", "pgalloc_dma32"), 0);
}

#[test]
fn a_write_fault_on_a_swapped_page_maps_it_writable_at_once() {
    // do_swap_page on a write fault with an exclusive page makes the PTE
    // writable directly: one fault per page, no pgreuse.
    let r = run_checked(&memcg_spec(
        "40M",
        "",
        r#"{ op = "mmap", name = "a", kind = "anon", size = "60M" },
           { op = "touch", region = "a", order = "seq", write = 1.0 },
           { op = "phase", name = "write" },
           { op = "touch", region = "a", order = "seq", length = "400K", write = 1.0 },"#,
    ));
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgmajfault"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgreuse"), 0);
}

#[test]
fn without_wp_reuse_swapcache_a_swapped_in_page_may_be_copied() {
    // The 5.10 rule copies unless page_count == 1: pages still held by the
    // per-CPU lru_add batch (at most 14 outstanding) are copied, the rest
    // reused.
    let r = run_checked(&memcg_spec(
        "40M",
        "[features]\nwp_reuse_swapcache = false",
        r#"{ op = "mmap", name = "a", kind = "anon", size = "60M" },
           { op = "touch", region = "a", order = "seq", write = 1.0 },
           { op = "touch", region = "a", order = "seq", length = "400K", write = 0.0 },
           { op = "phase", name = "write" },
           { op = "touch", region = "a", order = "seq", length = "400K", write = 1.0 },"#,
    ));
    // Every write fault either reuses or copies.
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 100);
    let copies = 100 - phase_vm(&r, 0, "write", "pgreuse");
    // Reclaim (every ~32 charges at the limit) drains the batch, so between
    // 1 and 14 pages read last are still in it when the writes begin.
    assert!((1..=14).contains(&copies), "copies {copies}");
}

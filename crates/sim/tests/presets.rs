//! Kernel presets (`machine.kernel`): each follows its release where the
//! paths differ. Expected values are derived from each release's code:
//! 5.10's do_swap_page (reuse_swap_page on a write fault, no exclusive
//! marker in the swap PTE) and do_wp_page (copy unless page_count == 1),
//! 6.1's PTE_SWP_EXCLUSIVE and PageAnonExclusive reuse, and the counter
//! lines each release's /proc/vmstat and memory.stat have.

mod common;
use common::*;
use mmsim_sim::output::RunResult;

/// 60 MiB written under a 40 MiB memory.max with swap on `device`, read
/// back over its first 400 KiB, then written there again.
fn read_then_write(kernel: &str, device: &str) -> RunResult {
    read_then_write_with(kernel, device, "")
}

/// The same with `extra` tables (a `[features]` override) in the spec.
fn read_then_write_with(kernel: &str, device: &str, extra: &str) -> RunResult {
    run_checked(&format!(
        r#"
[machine]
memory = "512M"
kernel = "{kernel}"
{extra}
[[swap]]
device = "{device}"
size = "512M"
[cgroup.w]
memory_max = "40M"
[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "a", kind = "anon", size = "60M" }},
  {{ op = "touch", region = "a", order = "seq", write = 1.0 }},
  {{ op = "phase", name = "read" }},
  {{ op = "touch", region = "a", order = "seq", length = "400K", write = 0.0 }},
  {{ op = "phase", name = "write" }},
  {{ op = "touch", region = "a", order = "seq", length = "400K", write = 1.0 }},
]
"#
    ))
}

#[test]
fn a_write_after_a_read_swap_in_through_the_swap_cache_copies_on_5_10() {
    // NVMe swap goes through the swap cache. 5.10: the read fault maps the
    // page read-only and leaves it in the swap cache (swap is far from
    // half full), so page_count is 2 at the write and do_wp_page copies
    // every page: no pgreuse.
    let r = read_then_write("5.10", "nvme");
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgreuse"), 0);
    // 6.1: the swap PTE was exclusive, so the page is mapped
    // PageAnonExclusive and the write reuses it.
    let r = read_then_write("6.1", "nvme");
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgreuse"), 100);
}

#[test]
fn seed_000s_patch_on_5_10_reuses_the_swap_cache_page() {
    // 5.10 with wp_reuse_swapcache: reuse_swap_page in do_wp_page finds
    // one mapping and no other swap reference, drops the swap cache copy
    // and reuses the page.
    let r = read_then_write_with("5.10", "nvme", "[features]\nwp_reuse_swapcache = true");
    let copies = 100 - phase_vm(&r, 0, "write", "pgreuse");
    // Only pages still in the per-CPU lru_add batch (an extra reference,
    // at most 14 outstanding) are copied.
    assert!((0..=14).contains(&copies), "copies {copies}");
}

#[test]
fn a_write_fault_on_a_swapped_page_reuses_it_at_swap_in_on_5_10() {
    // zram skips the swap cache (swap count 1): reuse_swap_page sees no
    // swap cache and no mapping, so the write fault maps the page
    // writable at once; one fault per page and no wp fault, as on 6.1.
    let r = run_checked(
        &memcg_spec(
            "40M",
            "",
            r#"{ op = "mmap", name = "a", kind = "anon", size = "60M" },
               { op = "touch", region = "a", order = "seq", write = 1.0 },
               { op = "phase", name = "write" },
               { op = "touch", region = "a", order = "seq", length = "400K", write = 1.0 },"#,
        )
        .replace("[machine]\n", "[machine]\nkernel = \"5.10\"\n"),
    );
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgmajfault"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgreuse"), 0);
}

#[test]
fn each_preset_reports_the_lines_its_release_has() {
    let r = read_then_write("5.10", "zram");
    // 5.10 has no nr_swapcached (5.12), no memory.peak (5.19) and no
    // memory.stat pagetables, swapcached, shmem_thp or kswapd/direct
    // split of pgscan and pgsteal.
    assert!(!r.vmstat.contains_key("nr_swapcached"));
    assert!(r.vmstat.contains_key("pgscan_kswapd"));
    let cg = &r.cgroups["w"];
    assert_eq!(cg.memory_peak, None);
    for k in ["pagetables", "swapcached", "shmem_thp", "pgscan_direct"] {
        assert!(!cg.memory_stat.contains_key(k), "{k}");
    }
    assert!(cg.memory_stat["pgscan"] > 0);
    let r = read_then_write("6.1", "zram");
    assert!(r.vmstat.contains_key("nr_swapcached"));
    let cg = &r.cgroups["w"];
    assert!(cg.memory_peak.is_some_and(|p| p <= 40 << 20));
    assert!(cg.memory_stat.contains_key("pgscan_direct"));
}

/// A one-step spec on preset `kernel`, with `extra` tables.
fn preset_spec(kernel: &str, extra: &str) -> mmsim_spec::Spec {
    spec(&format!(
        "[machine]\nmemory = \"512M\"\nkernel = \"{kernel}\"\n{extra}[task.t]\nsteps = [{{ op = \"mmap\", name = \"a\", kind = \"anon\", size = \"4K\" }}]\n"
    ))
}

#[test]
fn the_later_presets_have_their_releases_mechanisms() {
    let s = preset_spec("7.3", "");
    assert!(s.features.shmem_skip_swapcache && s.features.batched_rmap_unmap);
    assert!(!s.features.madv_pageout_split);
    let s = preset_spec("6.12", "");
    assert!(!s.features.shmem_skip_swapcache && s.features.shmem_mthp);
    // [features] still overrides a preset.
    let s = preset_spec("7.3", "[features]\nshmem_skip_swapcache = false\n");
    assert!(!s.features.shmem_skip_swapcache && s.features.shmem_mthp);
}

#[test]
fn from_6_12_a_read_swap_in_maps_an_exclusive_page_writable() {
    // 6.12's do_swap_page makes an exclusive page's PTE writable on a
    // read fault (the VMA is writable): the writes that follow take no
    // fault at all, where 6.1 takes a wp fault and counts pgreuse.
    let r = read_then_write("6.12", "nvme");
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 0);
    assert_eq!(phase_vm(&r, 0, "write", "pgreuse"), 0);
}

#[test]
fn on_7_3_cgroup_reclaim_counts_in_the_global_reclaimer_counters() {
    // Up to 6.12 shrink_inactive_list counts pgscan/pgsteal_direct in
    // /proc/vmstat only for reclaim that is not a cgroup's; 7.3 counts
    // them as node stats for every reclaim. Memory.max reclaim here is
    // all there is (the machine has room), so 6.1 shows none.
    let r = read_then_write("6.1", "zram");
    assert_eq!(vm(&r, "pgscan_direct"), 0);
    assert!(vm(&r, "pgscan_anon") > 0);
    let r = read_then_write("7.3", "zram");
    let cg = &r.cgroups["w"];
    assert_eq!(vm(&r, "pgscan_direct"), cg.memory_stat["pgscan_direct"]);
    assert_eq!(vm(&r, "pgsteal_direct"), cg.memory_stat["pgsteal_direct"]);
    assert!(vm(&r, "pgscan_direct") > 0);
}

#[test]
fn on_5_10_a_first_write_to_a_shared_page_is_retried() {
    // 5.10's fault_dirty_shared_page returns VM_FAULT_RETRY after it
    // dirtied the page, and the retry counts pgfault again: two per page
    // written first; 6.1 completes the fault at once.
    let steps = r#"{ op = "mmap", name = "s", kind = "shared_anon", size = "4M" },
           { op = "phase", name = "write" },
           { op = "touch", region = "s", order = "seq", write = 1.0 },
           { op = "phase", name = "rewrite" },
           { op = "touch", region = "s", order = "seq", write = 1.0 },"#;
    let text = memcg_spec("64M", "", steps);
    let r = run_checked(&text.replace("[machine]\n", "[machine]\nkernel = \"5.10\"\n"));
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 2 * 1024);
    // The pages are mapped writable and dirty now: no fault at all.
    assert_eq!(phase_vm(&r, 0, "rewrite", "pgfault"), 0);
    let r = run_checked(&text);
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 1024);
}

#[test]
fn memory_stat_counts_swap_in_and_out_on_7_3_only() {
    // memcg_vm_event_stat gained PSWPIN and PSWPOUT after 6.12: 7.3's
    // memory.stat counts the pages its cgroup's folios read from and wrote
    // to swap (here every swap I/O is the one cgroup's), 6.12's and
    // 6.1's have no such lines.
    let r = read_then_write("7.3", "zram");
    let cg = &r.cgroups["w"];
    assert!(vm(&r, "pswpout") > 0 && vm(&r, "pswpin") > 0);
    assert_eq!(cg.memory_stat["pswpin"], vm(&r, "pswpin"));
    assert_eq!(cg.memory_stat["pswpout"], vm(&r, "pswpout"));
    for kernel in ["6.12", "6.1", "5.10"] {
        let r = read_then_write(kernel, "zram");
        let cg = &r.cgroups["w"];
        assert!(!cg.memory_stat.contains_key("pswpin"), "{kernel}");
        assert!(!cg.memory_stat.contains_key("pswpout"), "{kernel}");
    }
}

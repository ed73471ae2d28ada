//! memory.swap.max (6.1's cgroup v2 swap controller): the swap charge
//! `folio_alloc_swap` ends with (`__mem_cgroup_try_charge_swap`), the
//! room `mem_cgroup_get_nr_swap_pages` gives reclaim, the per-memcg
//! `mem_cgroup_swap_full`, memory.swap.events and the OOM killer's
//! `mem_cgroup_get_max`.

mod common;
use common::*;
use mmsim_sim::output::RunResult;

/// A 64 MiB cgroup on a 512 MiB machine with 512 MiB of zram, with
/// `extra` in its table: its task writes `size` of anonymous memory,
/// then reads it back.
fn write_read(size: &str, extra: &str) -> RunResult {
    run_checked(&memcg_spec(
        "64M",
        extra,
        &format!(
            r#"{{ op = "mmap", name = "a", kind = "anon", size = "{size}" }},
   {{ op = "phase", name = "write" }},
   {{ op = "touch", region = "a", order = "seq", write = 1.0 }},
   {{ op = "phase", name = "read" }},
   {{ op = "touch", region = "a", order = "seq", write = 0.0 }},
   {{ op = "phase", name = "end" }},"#
        ),
    ))
}

fn swap_event(r: &RunResult, ev: &str) -> u64 {
    r.cgroups["w"].memory_swap_events[ev]
}

fn event(r: &RunResult, ev: &str) -> u64 {
    r.cgroups["w"].memory_events[ev]
}

/// MADV_PAGEOUT of 32 MiB under a 16 MiB memory.swap.max: reclaim_pages
/// gives every page to shrink_folio_list, so the first 4096 are charged
/// and written and each later one is refused by the charge (a max and a
/// fail event), its slot given back, the page activated and kept.
#[test]
fn pageout_beyond_memory_swap_max_is_refused_page_by_page() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "32M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "pageout" },
   { op = "madvise", region = "a", advice = "pageout" },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&memcg_spec("256M", "memory_swap_max = \"16M\"", steps));
    assert_eq!(phase_vm(&r, 0, "pageout", "pswpout"), 4096);
    assert_eq!(r.cgroups["w"].memory_swap_current, 16 << 20);
    assert_eq!(swap_event(&r, "max"), 4096);
    assert_eq!(swap_event(&r, "fail"), 4096);
    assert_eq!(swap_event(&r, "high"), 0);
    assert_eq!(phase_vm(&r, 0, "pageout", "pgactivate"), 4096);
    // No slot leaks from the refusals: run_checked's invariant checker
    // counts the slots recorded for the memcg against its charge.
    let open = run_checked(&memcg_spec("256M", "", steps));
    assert_eq!(phase_vm(&open, 0, "pageout", "pswpout"), 8192);
    assert_eq!(swap_event(&open, "max") + swap_event(&open, "fail"), 0);
}

/// With no room under memory.swap.max (0) reclaim does not scan anon at
/// all (get_scan_count: can_reclaim_anon_pages is false), so nothing is
/// swapped and no charge is refused: anon beyond memory.max is an OOM
/// kill.
#[test]
fn memory_swap_max_zero_leaves_anon_unscanned() {
    let r = write_read("72M", "memory_swap_max = \"0\"");
    assert_eq!(vm(&r, "pswpout"), 0);
    assert_eq!(vm(&r, "pgscan_anon"), 0);
    assert_eq!(swap_event(&r, "max"), 0);
    assert_eq!(event(&r, "oom_kill"), 1);
    assert_eq!(
        r.tasks[0]
            .oom_kill
            .as_ref()
            .and_then(|k| k.oom_memcg.as_deref()),
        Some("w")
    );
}

/// More than memory.max + memory.swap.max ends in the memcg OOM killer,
/// where 512 MiB of zram alone would have held it.
#[test]
fn beyond_memory_max_and_swap_max_the_task_is_killed() {
    let open = write_read("112M", "");
    assert_eq!(event(&open, "oom_kill"), 0);
    let r = write_read("112M", "memory_swap_max = \"30000K\"");
    assert_eq!(event(&r, "oom_kill"), 1);
    assert!(swap_event(&r, "max") > 0);
}

/// mem_cgroup_swap_full: once the memcg's swap is half its
/// memory.swap.max, a swap-in frees the slot (the swap cache lets go)
/// where with the global test alone (512 MiB of swap, far from half
/// full) the slot stays with the page. (On an NVMe device: zram's
/// swap-ins bypass the swap cache.)
#[test]
fn swap_half_of_swap_max_frees_slots_on_swapin() {
    let nvme = |extra: &str| {
        let spec = memcg_spec(
            "64M",
            extra,
            r#"{ op = "mmap", name = "a", kind = "anon", size = "72M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "touch", region = "a", order = "seq", write = 0.0 },"#,
        );
        run_checked(&spec.replace("device = \"zram\"", "device = \"nvme\""))
    };
    let open = nvme("");
    let capped = nvme("memory_swap_max = \"24M\"");
    let cached = |r: &RunResult| r.cgroups["w"].memory_stat["swapcached"];
    assert!(cached(&open) > 4 << 20, "open {}", cached(&open));
    assert!(
        cached(&capped) * 4 < cached(&open),
        "capped {} open {}",
        cached(&capped),
        cached(&open)
    );
}

/// 6.1 swaps a THP out whole only to a device that keeps free clusters;
/// on a rotational disk `folio_alloc_swap` finds no run of slots, which
/// memory.swap.events counts as a fail, and reclaim splits the THP: one
/// fail per fallback.
#[test]
fn a_thp_with_no_cluster_is_a_swap_fail() {
    let spec = memcg_spec(
        "64M",
        "",
        r#"{ op = "mmap", name = "a", kind = "anon", size = "96M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },"#,
    )
    .replace(
        "\"kernel/mm/transparent_hugepage/enabled\" = \"never\"",
        "\"kernel/mm/transparent_hugepage/enabled\" = \"always\"",
    )
    .replace("device = \"zram\"", "device = \"hdd\"");
    let r = run_checked(&spec);
    let fallback = vm(&r, "thp_swpout_fallback");
    assert!(fallback > 0);
    assert_eq!(swap_event(&r, "fail"), fallback as u64);
    assert_eq!(swap_event(&r, "max"), 0);
    // On zram the clusters are there: no fail.
    let r = run_checked(&spec.replace("device = \"hdd\"", "device = \"zram\""));
    assert!(vm(&r, "thp_swpout") > 0);
    assert_eq!(swap_event(&r, "fail"), 0);
}

/// MGLRU's get_swappiness: with less than MIN_LRU_BATCH pages of room
/// under memory.swap.max anon is not evicted.
#[test]
fn mglru_leaves_anon_alone_without_swap_room() {
    let spec = memcg_spec(
        "64M",
        "memory_swap_max = \"128K\"",
        r#"{ op = "mmap", name = "a", kind = "anon", size = "72M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },"#,
    )
    .replace("[sysfs]", "[sysfs]\n\"kernel/mm/lru_gen/enabled\" = \"y\"");
    let r = run_checked(&spec);
    assert_eq!(vm(&r, "pswpout"), 0);
    assert_eq!(event(&r, "oom_kill"), 1);
}

/// A `set` step raising memory.swap.max: the pages refused before go out
/// at the next pageout (what is in swap stays charged).
#[test]
fn a_set_step_moves_memory_swap_max() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "32M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "phase", name = "first" },
   { op = "madvise", region = "a", advice = "pageout" },
   { op = "set", key = "cgroup.w.memory_swap_max", value = "max" },
   { op = "phase", name = "second" },
   { op = "madvise", region = "a", advice = "pageout" },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&memcg_spec("256M", "memory_swap_max = \"16M\"", steps));
    assert_eq!(phase_vm(&r, 0, "first", "pswpout"), 4096);
    assert_eq!(phase_vm(&r, 0, "second", "pswpout"), 4096);
    assert_eq!(r.cgroups["w"].memory_swap_current, 32 << 20);
    assert_eq!(swap_event(&r, "max"), 4096);
}

/// A `set` step lowering memory.swap.max below what is in swap leaves it
/// there (swap_max_write is an xchg) and refuses every later charge.
#[test]
fn a_set_step_below_the_usage_keeps_what_is_in_swap() {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "32M" },
   { op = "touch", region = "a", order = "seq", write = 1.0 },
   { op = "madvise", region = "a", advice = "pageout", length = "16M" },
   { op = "set", key = "cgroup.w.memory_swap_max", value = "4M" },
   { op = "phase", name = "second" },
   { op = "madvise", region = "a", advice = "pageout" },
   { op = "phase", name = "end" },"#;
    let r = run_checked(&memcg_spec("256M", "", steps));
    assert_eq!(r.cgroups["w"].memory_swap_current, 16 << 20);
    assert_eq!(phase_vm(&r, 0, "second", "pswpout"), 0);
    assert_eq!(swap_event(&r, "max"), 4096);
}

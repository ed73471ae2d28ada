//! The multi-gen LRU (`kernel/mm/lru_gen/enabled` = 0x0001) as 6.1 runs
//! it: where new folios land, how the two youngest generations count as
//! "active", eviction's counters, refaults in faults restoring a folio's
//! references, MADV_COLD moving every folio, kswapd's min_ttl, and the
//! classic LRU untouched when it is off. The invariant checker (two to
//! four generations, each generation's size matching its folios, the
//! gauges matching the generations) runs at every phase mark.

mod common;
use common::*;
use mmsim_sim::output::{LruGenLruvec, RunResult};

const MGLRU: &str = "[sysfs]\n\"kernel/mm/lru_gen/enabled\" = \"0x0001\"\n";

/// The lruvec of `memcg` at the end of `phase` of task 0.
fn lruvec<'a>(r: &'a RunResult, phase: &str, memcg: &str) -> &'a LruGenLruvec {
    let p = r.tasks[0]
        .phases
        .iter()
        .find(|p| p.name == phase)
        .expect("phase");
    p.lru_gen
        .iter()
        .find(|l| l.memcg == memcg)
        .unwrap_or_else(|| panic!("no lruvec {memcg} in {:?}", p.lru_gen))
}

fn stat(r: &RunResult, cg: &str, name: &str) -> i64 {
    r.cgroups[cg].memory_stat[name]
}

/// A 512 MiB machine with zram swap and the multi-gen LRU, a cgroup `w`
/// limited to `max`, `steps` in it.
fn mglru(max: &str, steps: &str) -> String {
    memcg_spec(max, "", steps).replace("[sysfs]\n", MGLRU)
}

#[test]
fn faulted_folios_start_in_the_youngest_generation() {
    let r = run_checked(&mglru(
        "256M",
        r#"{ op = "mmap", name = "heap", kind = "anon", size = "16M" },
           { op = "phase", name = "fill" },
           { op = "touch", region = "heap", order = "seq", write = 1.0 },
           { op = "phase", name = "end" },"#,
    ));
    // lru_gen_init_lruvec: max_seq 3, min_seq 0; no reclaim, no aging.
    let lv = lruvec(&r, "fill", "/w");
    let seqs: Vec<u64> = lv.gens.iter().map(|g| g.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    // All but the page still in the CPU's lru_add batch (4096 = 273 × 15
    // + 1), which no list holds yet.
    assert_eq!(lv.gens[3].anon, 4095, "{lv:?}");
    assert_eq!(lv.gens.iter().map(|g| g.anon).sum::<u64>(), 4095);
    // The youngest two generations are the "active" lists.
    assert_eq!(stat(&r, "w", "active_anon"), 4095 << 12);
    assert_eq!(stat(&r, "w", "inactive_anon"), 0);
    assert_eq!(vm(&r, "pgactivate"), 0);
}

#[test]
fn eviction_counts_and_refaults_in_faults_restore() {
    // The zipf workload below, aging by look-around only.
    let text = zipf("\"0x0001\"", true);
    let r = run_checked(&text);
    // Generations move pages between ages; nothing is deactivated.
    assert_eq!(vm(&r, "pgdeactivate"), 0);
    assert_eq!(stat(&r, "w", "pgdeactivate"), 0);
    // Limit reclaim: the memcg counts, /proc/vmstat's reclaimer events do
    // not (6.1's !cgroup_reclaim), but its per-type ones do.
    assert_eq!(vm(&r, "pgscan_direct") + vm(&r, "pgscan_kswapd"), 0);
    assert_eq!(vm(&r, "pgsteal_direct") + vm(&r, "pgsteal_kswapd"), 0);
    assert_eq!(stat(&r, "w", "pgscan"), vm(&r, "pgscan_anon"));
    assert_eq!(stat(&r, "w", "pgsteal"), vm(&r, "pgsteal_anon"));
    assert_eq!(vm(&r, "pgsteal_anon"), vm(&r, "pswpout"));
    assert!(
        stat(&r, "w", "pgrefill") > 0,
        "sorted folios count as pgrefill"
    );
    // Every anon refault comes in a fault, which restores its references.
    let refaults = vm(&r, "workingset_refault_anon");
    assert!(refaults > 0);
    assert_eq!(vm(&r, "workingset_restore_anon"), refaults);
    // Two to four generations at every phase end.
    for p in &r.tasks[0].phases {
        let lv = p.lru_gen.iter().find(|l| l.memcg == "/w").unwrap();
        assert!((2..=4).contains(&lv.gens.len()), "{lv:?}");
        let pages: u64 = lv.gens.iter().map(|g| g.anon).sum();
        assert!(pages <= 8192, "{pages} pages under a 32M limit");
    }
    // Deterministic.
    assert_eq!(r, run_checked(&text));
}

#[test]
fn madv_cold_moves_every_folio_to_an_older_generation() {
    let r = run_checked(&mglru(
        "256M",
        r#"{ op = "mmap", name = "heap", kind = "anon", size = "4M" },
           { op = "touch", region = "heap", order = "seq", write = 1.0 },
           { op = "phase", name = "cold" },
           { op = "madvise", region = "heap", advice = "cold" },
           { op = "phase", name = "end" },"#,
    ));
    // lru_deactivate_fn takes every folio under the multi-gen LRU (none
    // is PG_active on it), and anon not in the swap cache goes to the
    // second youngest generation.
    assert_eq!(phase_vm(&r, 0, "cold", "pgdeactivate"), 1024);
    let lv = lruvec(&r, "cold", "/w");
    assert_eq!(lv.gens.last().unwrap().anon, 0);
    assert_eq!(lv.gens[lv.gens.len() - 2].anon, 1024, "{lv:?}");
}

#[test]
fn read_file_pages_start_in_an_old_generation() {
    let r = run_checked(
        &disk(
            "256M",
            r#"{ op = "phase", name = "read" },
               { op = "read", file = "f" },
               { op = "phase", name = "end" },"#,
        )
        .replace(
            "[[disk]]",
            "[sysfs]\n\"kernel/mm/lru_gen/enabled\" = 1\n[[disk]]",
        ),
    );
    // Not in a fault: not PG_active; with four generations the second
    // oldest (min_seq + 1) takes it.
    let lv = lruvec(&r, "read", "/w");
    // All but the page still in the CPU's lru_add batch.
    assert_eq!(lv.gens[1].file, 4095, "{lv:?}");
    assert_eq!(stat(&r, "w", "inactive_file"), 4095 << 12);
    assert_eq!(stat(&r, "w", "active_file"), 0);
}

#[test]
fn min_ttl_oom_kills_where_6_1_does() {
    let text = r#"
[machine]
memory = "192M"
[sysfs]
"kernel/mm/lru_gen/enabled" = 1
"kernel/mm/lru_gen/min_ttl_ms" = 60000
[[swap]]
device = "zram"
size = "512M"
[task.main]
steps = [
  { op = "mmap", name = "a", kind = "anon", size = "160M" },
  { op = "touch", region = "a", order = "seq", write = 1.0 },
  { op = "touch", region = "a", order = "seq", write = 0.0 },
]
[task.side]
steps = [
  { op = "mmap", name = "a", kind = "anon", size = "8M" },
  { op = "touch", region = "a", order = "seq", write = 1.0 },
  { op = "sleep", duration = "1s" },
  { op = "touch", region = "a", order = "seq", write = 0.0 },
]
"#;
    // kswapd finds every generation younger than min_ttl: lru_gen_age_node
    // calls the (global) OOM killer instead of evicting, and the largest
    // task dies with nothing swapped out; the other runs to its end.
    let r = run_checked(text);
    let kill = r.tasks[0].oom_kill.as_ref().expect("main is killed");
    assert_eq!(
        (kill.constraint.as_str(), &kill.oom_memcg),
        ("global", &None)
    );
    assert!(r.tasks[1].oom_kill.is_none());
    assert!(r.tasks[1].end_ns > 1_000_000_000);
    assert_eq!((vm(&r, "oom_kill"), vm(&r, "pswpout")), (1, 0));
    // Without min_ttl the same workload runs, reclaimed by kswapd.
    let r = run_checked(&text.replace("\"kernel/mm/lru_gen/min_ttl_ms\" = 60000\n", ""));
    assert_eq!(vm(&r, "oom_kill"), 0);
    assert!(vm(&r, "pgsteal_kswapd") > 0);
    assert_eq!(
        vm(&r, "pgsteal_kswapd") + vm(&r, "pgsteal_direct"),
        vm(&r, "pgsteal_anon")
    );
}

#[test]
fn lru_gen_off_is_the_classic_lru() {
    let steps = r#"{ op = "mmap", name = "heap", kind = "anon", size = "64M" },
           { op = "touch", region = "heap", order = "seq", write = 1.0 },
           { op = "touch", region = "heap", order = "zipf", theta = 0.9, count = 20000, write = 0.3, seed = 7 },"#;
    let classic = run_checked(&memcg_spec("32M", "", steps));
    let off = run_checked(&memcg_spec("32M", "", steps).replace(
        "[sysfs]\n",
        "[sysfs]\n\"kernel/mm/lru_gen/enabled\" = false\n",
    ));
    assert_eq!(classic.vmstat, off.vmstat);
    assert!(classic.tasks[0].phases.iter().all(|p| p.lru_gen.is_empty()));
    assert!(vm(&classic, "pgdeactivate") > 0);
    let multi = run_checked(&mglru("32M", steps));
    assert_ne!(classic.vmstat, multi.vmstat);
}

/// The zipf workload under memory.max with the given `enabled` value and
/// `machine.hw_pte_young`.
fn zipf(enabled: &str, hw_pte_young: bool) -> String {
    memcg_spec(
        "32M",
        "",
        r#"{ op = "mmap", name = "heap", kind = "anon", size = "64M" },
           { op = "phase", name = "fill" },
           { op = "touch", region = "heap", order = "seq", write = 1.0 },
           { op = "phase", name = "zipf" },
           { op = "touch", region = "heap", order = "zipf", theta = 0.9, count = 100000, write = 0.3, seed = 7 },"#,
    )
    .replace(
        "[sysfs]\n",
        &format!("[sysfs]\n\"kernel/mm/lru_gen/enabled\" = {enabled}\n"),
    )
    .replace(
        "memory = \"512M\"",
        &format!("memory = \"512M\"\nhw_pte_young = {hw_pte_young}"),
    )
}

#[test]
fn page_table_walks_need_hardware_accessed_bits() {
    // Aging walks page tables (walk_mm) with 0x0002 on an MMU that sets
    // accessed bits; the walk's promotions change what eviction finds.
    let walks = run_checked(&zipf("\"y\"", true));
    assert!(walks.profile.get("walk_mm").copied().unwrap_or(0) > 0);
    let rmap_only = run_checked(&zipf("\"0x0001\"", true));
    assert!(!rmap_only.profile.contains_key("walk_mm"));
    assert_ne!(walks.vmstat, rmap_only.vmstat);
    // Without hardware accessed bits 6.1 never walks
    // (arch_has_hw_pte_young): "y" ages as 0x0001 does, counter for
    // counter.
    let y = run_checked(&zipf("\"y\"", false));
    let one = run_checked(&zipf("1", false));
    assert!(!y.profile.contains_key("walk_mm"));
    assert_eq!(y.vmstat, one.vmstat);
    assert_eq!(y.tasks, one.tasks);
    // Deterministic with walks too.
    assert_eq!(walks, run_checked(&zipf("\"y\"", true)));
}

#[test]
fn non_leaf_young_bits_let_the_walk_skip_cold_tables() {
    // 64 MiB filled, then only its first 8 MiB used, under a 32 MiB limit:
    // with 0x0004 the walk skips the PTE tables whose PMD entry no access
    // went through since the last walk (6.1's walk_pmd_range), so it
    // tests fewer entries than 0x0003's walk of every table the Bloom
    // filter passes.
    let spec = |enabled: &str| {
        zipf(enabled, true).replace(
            r#"order = "zipf", theta = 0.9, count = 100000, write = 0.3, seed = 7"#,
            r#"order = "uniform", count = 200000, write = 0.3, seed = 7, length = "8M""#,
        )
    };
    let with = run_checked(&spec("7"));
    let without = run_checked(&spec("3"));
    assert!(
        with.profile["walk_mm"] < without.profile["walk_mm"],
        "{} vs {}",
        with.profile["walk_mm"],
        without.profile["walk_mm"]
    );
}

#[test]
fn writeback_end_rotates_to_the_oldest_generation() {
    // Swap on a block device: reclaim starts a write and puts the folio
    // back (second youngest generation, PG_reclaim); the write's end
    // rotates it to the tail of the oldest generation (lru_move_tail_fn
    // clears the PG_active that leaving an active generation gave it).
    let text = memcg_spec(
        "32M",
        "",
        r#"{ op = "mmap", name = "heap", kind = "anon", size = "64M" },
           { op = "phase", name = "fill" },
           { op = "touch", region = "heap", order = "seq", write = 1.0 },
           { op = "phase", name = "end" },"#,
    )
    .replace("[sysfs]\n", MGLRU)
    .replace("device = \"zram\"", "device = \"virtio\"");
    let r = run_checked(&text);
    let written = vm(&r, "pswpout");
    assert!(written > 0);
    // Every write that has ended found its folio clean on the LRU: all
    // of those rotated (the last few writes are still in flight).
    assert_eq!(vm(&r, "pgrotated"), vm(&r, "nr_written"));
    assert!(vm(&r, "nr_written") > written / 2);
}

//! examples/anon_seq.toml against the real Linux 6.1 result recorded in
//! docs/design.md "Oracle" (Linux 6.1.0-56-amd64 under QEMU, 512 MiB, 1 CPU,
//! zram 512M, memory.max 100M, THP never; median of 3 boots, whole
//! workload process).

mod common;

const REAL: &[(&str, f64)] = &[
    ("pgfault", 154_064.0),
    ("pgmajfault", 102_447.0),
    ("pswpin", 102_447.0),
    ("pswpout", 128_224.0),
    ("workingset_refault_anon", 102_445.0),
];

#[test]
fn anon_seq_matches_the_real_kernel_within_10_percent() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/anon_seq.toml"
    ))
    .unwrap();
    let r = common::run_checked(&text);
    for &(name, real) in REAL {
        let sim = common::vm(&r, name) as f64;
        let err = (sim - real).abs() / real;
        assert!(
            err <= 0.10,
            "{name}: simulated {sim}, real {real}, error {:.1}%",
            err * 100.0
        );
    }
    // The real run had no swap readahead (zram skips the swap cache).
    assert_eq!(common::vm(&r, "swap_ra"), 0);
    // Every read was checked: one read pass over 51200 pages.
    assert_eq!(r.integrity.pages_checked, 51_200);
}

#[test]
fn anon_seq_phases_follow_from_the_kernel() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/anon_seq.toml"
    ))
    .unwrap();
    let r = common::run_checked(&text);
    // Write pass: every page faults once in do_anonymous_page; nothing is
    // read back, so no major faults; roughly the excess over 100M is
    // swapped out.
    assert_eq!(common::phase_vm(&r, 0, "write", "pgfault"), 51_200);
    assert_eq!(common::phase_vm(&r, 0, "write", "pgmajfault"), 0);
    let out = common::phase_vm(&r, 0, "write", "pswpout");
    assert!((25_000..=26_000).contains(&out), "write pswpout {out}");
    // Read pass: sequential access over twice the limit evicts each page
    // before it is reached again, so every page is a major fault through
    // the skip-swapcache path, each with a shadow (a refault).
    for ph in ["read", "rewrite"] {
        assert_eq!(common::phase_vm(&r, 0, ph, "pgmajfault"), 51_200, "{ph}");
        assert_eq!(common::phase_vm(&r, 0, ph, "pswpin"), 51_200, "{ph}");
        assert_eq!(
            common::phase_vm(&r, 0, ph, "workingset_refault_anon"),
            51_200,
            "{ph}"
        );
        // The refault distance (~51200-25600) exceeds the workingset size
        // (no active pages): nothing is activated.
        assert_eq!(
            common::phase_vm(&r, 0, ph, "workingset_activate_anon"),
            0,
            "{ph}"
        );
    }
    // memory.max reclaim is cgroup reclaim: no global pgscan/pgsteal.
    assert_eq!(
        common::vm(&r, "pgscan_direct") + common::vm(&r, "pgscan_kswapd"),
        0
    );
    assert_eq!(common::vm(&r, "pgsteal_anon"), common::vm(&r, "pswpout"));
    let cg = &r.cgroups["w"];
    assert_eq!(cg.memory_stat["pgsteal"], common::vm(&r, "pgsteal_anon"));
    assert!(cg.memory_peak.unwrap() <= 100 << 20);
}

#[test]
fn runs_are_deterministic() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/anon_seq.toml"
    ))
    .unwrap();
    let a = serde_json::to_string(&common::run_checked(&text)).unwrap();
    let b = serde_json::to_string(&common::run_checked(&text)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn histograms_count_every_fault_and_swapin() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/anon_seq.toml"
    ))
    .unwrap();
    let r = common::run_checked(&text);
    let total = |name: &str| -> i64 {
        r.histograms
            .get(name)
            .map_or(0, |b| b.iter().map(|x| x.count as i64).sum())
    };
    assert_eq!(
        total("fault_latency_ns{kind=major}"),
        common::vm(&r, "pgmajfault")
    );
    assert_eq!(
        total("fault_latency_ns{kind=minor}") + total("fault_latency_ns{kind=major}"),
        common::vm(&r, "pgfault")
    );
    assert_eq!(total("swapin_latency_ns"), common::vm(&r, "pswpin"));
    // A zram swap-in costs at least its decompression.
    let first = &r.histograms["swapin_latency_ns"][0];
    assert!(
        first.hi > mmsim_sim::cost_model::ZRAM_DECOMPRESS_NS,
        "{first:?}"
    );
}

#[test]
fn profile_tree_accounts_for_all_time_by_call_path() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/anon_seq.toml"
    ))
    .unwrap();
    let r = common::run_checked(&text);
    let flat: u64 = r.profile.values().sum();
    let roots: u64 = r
        .profile_tree
        .iter()
        .filter(|p| !p.path.contains(';'))
        .map(|p| p.total_ns)
        .sum();
    let selfs: u64 = r.profile_tree.iter().map(|p| p.self_ns).sum();
    assert_eq!(roots, flat);
    assert_eq!(selfs, flat);
    // One task: its simulated time is all CPU time.
    assert_eq!(flat, r.elapsed_ns);
    for p in &r.profile_tree {
        assert!(p.total_ns >= p.self_ns, "{p:?}");
    }
    // memory.max reclaim happens inside the charge of the faulting task.
    let path = "handle_mm_fault;do_swap_page;mem_cgroup_charge;try_to_free_mem_cgroup_pages;shrink_lruvec;shrink_inactive_list;shrink_folio_list;pageout;swap_writepage;zram_write_page";
    assert!(
        r.profile_tree
            .iter()
            .any(|p| p.path == path && p.self_ns > 0),
        "no {path}"
    );
}

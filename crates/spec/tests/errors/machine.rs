//! The top-level sections, [machine] and [features].

use super::*;

#[test]
fn unknown_top_level_section() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[bogus]
x = 1
"#,
    ));
    check(&e, 3, "bogus", &["bogus", "machine", "task"]);
}

#[test]
fn unknown_key_in_machine() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
colour = 3
"#,
    ));
    check(
        &e,
        3,
        "machine.colour",
        &["colour", "memory", "cpus", "kernel"],
    );
}

#[test]
fn missing_machine_section() {
    let e = rejected(TASK);
    check(&e, 1, "machine", &["machine"]);
}

#[test]
fn missing_machine_memory() {
    let e = rejected(&with_task(
        r#"[machine]
cpus = 2
"#,
    ));
    check(&e, 1, "machine.memory", &["memory", "size"]);
}

#[test]
fn bad_size_unit() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512Q"
"#,
    ));
    check(&e, 2, "machine.memory", &["\"512Q\"", "K, M, G or T"]);
}

#[test]
fn size_of_wrong_type() {
    let e = rejected(&with_task(
        r#"[machine]
memory = 1.5
"#,
    ));
    check(&e, 2, "machine.memory", &["1.5", "a size"]);
}

#[test]
fn memory_not_page_multiple() {
    let e = rejected(&with_task(
        r#"[machine]
memory = 100000001
"#,
    ));
    check(&e, 2, "machine.memory", &["100000001 bytes", "4 KiB pages"]);
}

#[test]
fn memory_too_small() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "32M"
"#,
    ));
    check(&e, 2, "machine.memory", &["33554432 bytes", "at least 64M"]);
}

#[test]
fn unknown_kernel_preset() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
kernel = "5.15"
"#,
    ));
    check(
        &e,
        3,
        "machine.kernel",
        &["\"5.15\"", "\"6.1\"", "\"5.10\"", "\"7.3\""],
    );
}

#[test]
fn the_presets_parse_and_set_their_releases_features() {
    for (name, preset) in [
        ("5.10", Preset::V5_10),
        ("6.1", Preset::V6_1),
        ("6.12", Preset::V6_12),
        ("7.3", Preset::V7_3),
    ] {
        let s = parse(&with_task(&format!(
            "[machine]\nmemory = \"512M\"\nkernel = \"{name}\"\n"
        )))
        .unwrap();
        assert_eq!(s.machine.kernel, preset);
        assert_eq!(s.features, preset.features());
    }
    assert!(!Preset::V5_10.features().wp_reuse_swapcache);
    assert_eq!(Preset::of_release("5.10.0-32-amd64"), Some(Preset::V5_10));
    assert_eq!(
        Preset::of_release("6.12.95+deb12-amd64"),
        Some(Preset::V6_12)
    );
    assert_eq!(Preset::of_release("6.1.0-56-amd64"), Some(Preset::V6_1));
    assert_eq!(Preset::of_release("6.18.44-fc-v657"), None);
    assert_eq!(Preset::of_release("7.3.4+deb13-amd64"), Some(Preset::V7_3));
}

#[test]
fn lru_gen_is_refused_on_a_release_without_it() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
kernel = "5.10"
[sysfs]
"kernel/mm/lru_gen/enabled" = false
"#,
    ));
    check(
        &e,
        5,
        "sysfs.\"kernel/mm/lru_gen/enabled\"",
        &["5.10", "6.1"],
    );
}

#[test]
fn per_size_shmem_thp_needs_a_release_that_has_it() {
    let text = |kernel: &str| {
        with_task(&format!(
            r#"[machine]
memory = "512M"
kernel = "{kernel}"
[sysfs]
"kernel/mm/transparent_hugepage/hugepages-64kB/shmem_enabled" = "always"
"#
        ))
    };
    let e = rejected(&text("6.1"));
    check(
        &e,
        5,
        "sysfs.\"kernel/mm/transparent_hugepage/hugepages-64kB/shmem_enabled\"",
        &["Linux 6.1 does not have", "6.11", "\"6.12\""],
    );
    let s = parse(&text("6.12")).unwrap();
    assert_eq!(s.sysfs.shmem_mthp[2], MthpShmem::Always);
}

#[test]
fn cpus_zero() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
cpus = 0
"#,
    ));
    check(&e, 3, "machine.cpus", &["found 0", "1 to 1024"]);
}

#[test]
fn hw_pte_young_is_a_boolean() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
hw_pte_young = "no"
"#,
    ));
    check(&e, 3, "machine.hw_pte_young", &["\"no\"", "boolean"]);
    let s = parse(&with_task(
        "[machine]\nmemory = \"512M\"\nhw_pte_young = false\n",
    ))
    .unwrap();
    assert!(!s.machine.hw_pte_young);
    let s = parse(&with_task("[machine]\nmemory = \"512M\"\n")).unwrap();
    assert!(s.machine.hw_pte_young);
}

#[test]
fn compute_takes_a_duration() {
    let s = parse(
        "[machine]\nmemory = \"512M\"\n[task.t]\nsteps = [{ op = \"compute\", duration = \"200ms\" }]\n",
    )
    .unwrap();
    assert_eq!(s.tasks[0].steps[0].op, Op::Compute { ns: 200_000_000 });
    let e = rejected("[machine]\nmemory = \"512M\"\n[task.t]\nsteps = [{ op = \"compute\" }]\n");
    check(&e, 4, "task.t.steps[0].duration", &["duration"]);
}

#[test]
fn unknown_feature() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[features]
thp = true
"#,
    ));
    check(&e, 4, "features.thp", &["thp", "shmem_skip_swapcache"]);
}

#[test]
fn feature_of_wrong_type() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[features]
shmem_skip_swapcache = 1
"#,
    ));
    check(&e, 4, "features.shmem_skip_swapcache", &["1", "boolean"]);
}

fn topology(keys: &str) -> Result<(u32, mmsim_spec::Topology), SpecError> {
    parse(&with_task(&format!("[machine]\nmemory = \"512M\"\n{keys}")))
        .map(|s| (s.machine.cpus, s.machine.topology))
}

#[test]
fn topology_defaults_to_one_socket_of_single_threaded_cores() {
    let (cpus, t) = topology("cpus = 8\n").unwrap();
    assert_eq!((cpus, t), (8, mmsim_spec::Topology::flat(8)));
    assert!(t.is_flat());
    let (cpus, t) = topology("").unwrap();
    assert_eq!((cpus, t.cores_per_socket), (1, 1));
}

#[test]
fn topology_keys_left_out_follow_from_the_others() {
    // cpus from the product.
    let (cpus, t) = topology("sockets = 2\ncores_per_socket = 24\nthreads_per_core = 2\n").unwrap();
    assert_eq!(cpus, 96);
    assert_eq!(
        (t.sockets, t.cores_per_socket, t.threads_per_core),
        (2, 24, 2)
    );
    // cores_per_socket from cpus.
    let (cpus, t) = topology("cpus = 96\nthreads_per_core = 2\n").unwrap();
    assert_eq!((cpus, t.sockets, t.cores_per_socket), (96, 1, 48));
    assert!(!t.is_flat());
    // Thread fastest: CPUs 2c and 2c+1 are one core's threads; a socket
    // holds cores_per_socket cores.
    let (_, t) = topology("sockets = 2\ncores_per_socket = 2\nthreads_per_core = 2\n").unwrap();
    assert_eq!(t.siblings(5).collect::<Vec<_>>(), vec![4]);
    assert_eq!((t.socket_of(5), t.socket_of(3)), (1, 0));
}

#[test]
fn topology_that_does_not_multiply_to_cpus() {
    let e = topology("cpus = 8\nsockets = 2\ncores_per_socket = 3\n").unwrap_err();
    check(&e, 3, "machine.cpus", &["cpus = 8", "2 × 3 × 1 = 6"]);
    let e = topology("cpus = 3\nthreads_per_core = 2\n").unwrap_err();
    check(&e, 3, "machine.cpus", &["found 3", "multiple of", "1 × 2"]);
    let e = topology("threads_per_core = 4\n").unwrap_err();
    check(&e, 3, "machine.threads_per_core", &["4", "from 1 to 2"]);
    let e = topology("sockets = 64\ncores_per_socket = 64\n").unwrap_err();
    check(&e, 3, "machine.cpus", &["4096", "at most 1024"]);
}

#[test]
fn the_stats_flush_phase_is_under_the_workers_period() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
stats_flush_phase = "2s"
"#,
    ));
    check(
        &e,
        3,
        "machine.stats_flush_phase",
        &["2000000000 ns", "under 2s"],
    );
    let s = parse(&with_task(
        "[machine]\nmemory = \"512M\"\nstats_flush_phase = \"1500ms\"\n",
    ))
    .unwrap();
    assert_eq!(s.machine.stats_flush_phase, 1_500_000_000);
}

#[test]
fn the_memory_bandwidth_is_a_whole_number_of_mb_per_s() {
    for (v, found) in [
        ("0", "0"),
        ("\"146GB/s\"", "\"146GB/s\""),
        ("100000001", "100000001"),
    ] {
        let e = rejected(&with_task(&format!(
            "[machine]\nmemory = \"512M\"\nmemory_bandwidth = {v}\n"
        )));
        check(
            &e,
            3,
            "machine.memory_bandwidth",
            &[found, "whole number of MB/s from 1 to 100000000"],
        );
    }
    let s = parse(&with_task(
        "[machine]\nmemory = \"512M\"\nmemory_bandwidth = 145921\n",
    ))
    .unwrap();
    assert_eq!(s.machine.memory_bandwidth, Some(145_921));
}

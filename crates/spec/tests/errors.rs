//! Malformed specs get clear errors: every one names the file, the 1-based
//! line, the dotted key, what was found and what was expected (docs/design.md
//! "Workload spec"). Valid specs parse to the right values and defaults, and
//! `--set KEY=VALUE` overrides take effect.
//!
//! Spec texts start right after `r#"`, so line 1 of a text is the line the
//! literal opens on. Tests marked `#[ignore]` state what a user would expect
//! and the crate does not do yet.

use mmsim_spec::{
    parse_str, Features, FileOn, Limit, MapKind, MthpShmem, Op, Order, Preset, ShmemEnabled, Spec,
    SpecError, SwapKind, TmpfsHuge, OPS, SYSCTLS,
};

fn parse(text: &str) -> Result<Spec, SpecError> {
    parse_str(text, "t.toml", &[])
}

fn parse_set(text: &str, sets: &[&str]) -> Result<Spec, SpecError> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    parse_str(text, "t.toml", &sets)
}

#[track_caller]
fn rejected(text: &str) -> SpecError {
    match parse(text) {
        Ok(spec) => panic!("spec should be rejected, parsed as {spec:#?}"),
        Err(e) => e,
    }
}

/// Asserts every field of `e`: file `t.toml`, the exact line and key, and
/// that the message mentions each of `mentions` (what was found and what
/// was expected).
#[track_caller]
fn check(e: &SpecError, line: usize, key: &str, mentions: &[&str]) {
    check_in(e, "t.toml", line, key, mentions);
}

#[track_caller]
fn check_in(e: &SpecError, file: &str, line: usize, key: &str, mentions: &[&str]) {
    assert_eq!(e.file, file, "file of: {e}");
    assert_eq!(e.line, line, "line of: {e}");
    assert_eq!(e.key, key, "key of: {e}");
    for m in mentions {
        assert!(
            e.message.contains(m),
            "message of `{e}` should mention {m:?}"
        );
    }
}

const TASK: &str = r#"[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap" },
]
"#;

fn with_task(head: &str) -> String {
    format!("{head}{TASK}")
}

// ---------------------------------------------------------------- sections

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

// ------------------------------------------------------------------ sysctl

#[test]
fn unknown_sysctl() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = 100
"vm.dirty_ratio" = 20
"#,
    ));
    check(
        &e,
        5,
        "sysctl.\"vm.dirty_ratio\"",
        &[
            "vm.dirty_ratio",
            "does not model",
            "vm.swappiness",
            "vm.watermark_scale_factor",
            "vm.min_free_kbytes",
        ],
    );
}

#[test]
fn swappiness_out_of_range() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = 201
"#,
    ));
    check(&e, 4, "sysctl.\"vm.swappiness\"", &["201", "0 to 200"]);
}

#[test]
fn swappiness_negative() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = -1
"#,
    ));
    check(&e, 4, "sysctl.\"vm.swappiness\"", &["-1", "0 to 200"]);
}

#[test]
fn watermark_scale_factor_out_of_range() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.watermark_scale_factor" = 0
"#,
    ));
    check(
        &e,
        4,
        "sysctl.\"vm.watermark_scale_factor\"",
        &["found 0", "1 to 3000"],
    );
}

#[test]
fn sysctl_of_wrong_type() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = "60"
"#,
    ));
    check(&e, 4, "sysctl.\"vm.swappiness\"", &["\"60\"", "an integer"]);
}

// ------------------------------------------------------------------- sysfs

#[test]
fn thp_enabled_takes_6_1_values() {
    for (word, w) in [
        ("always", mmsim_spec::ThpEnabled::Always),
        ("madvise", mmsim_spec::ThpEnabled::Madvise),
        ("never", mmsim_spec::ThpEnabled::Never),
    ] {
        let s = parse(&with_task(&format!(
            "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/transparent_hugepage/enabled\" = \"{word}\"\n\"kernel/mm/transparent_hugepage/defrag\" = \"defer+madvise\"\n\"kernel/mm/transparent_hugepage/use_zero_page\" = 0\n"
        )))
        .expect("6.1 takes every value");
        assert_eq!(s.sysfs.thp_enabled, w);
        assert_eq!(
            s.sysfs.thp_defrag,
            Some(mmsim_spec::ThpDefrag::DeferMadvise)
        );
        assert_eq!(s.sysfs.thp_use_zero_page, Some(false));
        let knob = |name: &str| {
            s.knobs
                .iter()
                .find(|(k, _)| k == &format!("sysfs:kernel/mm/transparent_hugepage/{name}"))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(knob("enabled").as_deref(), Some(word));
        assert_eq!(knob("defrag").as_deref(), Some("defer+madvise"));
        assert_eq!(knob("use_zero_page").as_deref(), Some("0"));
    }
}

#[test]
fn thp_enabled_always_is_refused_after_6_1() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
kernel = "6.12"
[sysfs]
"kernel/mm/transparent_hugepage/enabled" = "always"
"#,
    ));
    check(
        &e,
        5,
        "sysfs.\"kernel/mm/transparent_hugepage/enabled\"",
        &["\"always\"", "\"never\"", "6.1"],
    );
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysfs]
"kernel/mm/transparent_hugepage/enabled" = "sometimes"
"#,
    ));
    check(
        &e,
        4,
        "sysfs.\"kernel/mm/transparent_hugepage/enabled\"",
        &["\"sometimes\"", "\"madvise\""],
    );
}

#[test]
fn khugepaged_knobs_take_6_1_values_and_are_written_when_set() {
    let s = parse(&with_task(
        r#"[machine]
memory = "512M"
[sysfs]
"kernel/mm/transparent_hugepage/enabled" = "madvise"
"kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs" = 100
"kernel/mm/transparent_hugepage/khugepaged/max_ptes_none" = "0"
"kernel/mm/transparent_hugepage/khugepaged/defrag" = 0
"#,
    ))
    .expect("6.1 takes them");
    let k = s.sysfs.khugepaged;
    assert_eq!(k.scan_sleep_millisecs, Some(100));
    assert_eq!(k.max_ptes_none, Some(0));
    assert_eq!(k.defrag, Some(false));
    assert_eq!(k.pages_to_scan, None);
    let knobs: Vec<_> = s
        .knobs
        .iter()
        .filter(|(k, _)| k.contains("/khugepaged/"))
        .map(|(k, v)| (k.rsplit('/').next().unwrap_or_default(), v.as_str()))
        .collect();
    assert_eq!(
        knobs,
        [
            ("defrag", "0"),
            ("scan_sleep_millisecs", "100"),
            ("max_ptes_none", "0")
        ]
    );
}

#[test]
fn khugepaged_knobs_out_of_range_unknown_or_on_other_presets_are_refused() {
    let head = |key: &str, value: &str, kernel: &str| {
        with_task(&format!(
            "[machine]\nmemory = \"512M\"\nkernel = \"{kernel}\"\n[sysfs]\n\"kernel/mm/transparent_hugepage/khugepaged/{key}\" = {value}\n"
        ))
    };
    let key = |k: &str| format!("sysfs.\"kernel/mm/transparent_hugepage/khugepaged/{k}\"");
    let e = rejected(&head("max_ptes_none", "512", "6.1"));
    check(&e, 5, &key("max_ptes_none"), &["512", "0 to 511"]);
    let e = rejected(&head("pages_to_scan", "0", "6.1"));
    check(&e, 5, &key("pages_to_scan"), &["from 1"]);
    let e = rejected(&head("scan_sleep_millisecs", "0", "6.1"));
    check(&e, 5, &key("scan_sleep_millisecs"), &["0", "without end"]);
    let e = rejected(&head("defrag", "2", "6.1"));
    check(&e, 5, &key("defrag"), &["0 or 1"]);
    let e = rejected(&head("max_ptes_sometimes", "1", "6.1"));
    check(&e, 5, &key("max_ptes_sometimes"), &["max_ptes_shared"]);
    let e = rejected(&head("max_ptes_none", "0", "6.12"));
    check(&e, 5, &key("max_ptes_none"), &["6.12", "6.1", "7.3"]);
    // 7.3 runs khugepaged for mTHP too: its knobs are written there.
    let s = parse(&head("scan_sleep_millisecs", "3600000", "7.3")).expect("7.3 has them");
    assert_eq!(s.sysfs.khugepaged.scan_sleep_millisecs, Some(3_600_000));
}

#[test]
fn anon_mthp_knobs_take_6_12_and_7_3_values_and_are_refused_before() {
    let head = |kernel: &str, size: u32, value: &str| {
        with_task(&format!(
            "[machine]\nmemory = \"512M\"\nkernel = \"{kernel}\"\n[sysfs]\n\"kernel/mm/transparent_hugepage/hugepages-{size}kB/enabled\" = \"{value}\"\n"
        ))
    };
    let s = parse(&head("6.12", 64, "always")).expect("6.12 has it");
    assert_eq!(s.sysfs.anon_mthp[4 - 2], mmsim_spec::MthpAnon::Always);
    assert_eq!(s.sysfs.anon_mthp[9 - 2], mmsim_spec::MthpAnon::Inherit);
    assert!(s.sysfs.anon_large_possible(s.features.anon_mthp));
    assert!(s
        .knobs
        .iter()
        .any(|(k, v)| k.ends_with("hugepages-64kB/enabled") && v == "always"));
    let key =
        |size: u32| format!("sysfs.\"kernel/mm/transparent_hugepage/hugepages-{size}kB/enabled\"");
    let e = rejected(&head("6.1", 64, "always"));
    check(&e, 5, &key(64), &["6.8", "features.anon_mthp"]);
    let s = parse(&head("7.3", 64, "madvise")).expect("7.3 has it");
    assert_eq!(s.sysfs.anon_mthp[4 - 2], mmsim_spec::MthpAnon::Madvise);
    let e = rejected(&head("5.10", 64, "always"));
    check(&e, 5, &key(64), &["6.8", "features.anon_mthp"]);
    let e = rejected(&head("6.12", 2048, "always"));
    check(&e, 5, &key(2048), &["PMD-size", "never"]);
    let e = rejected(&head("6.12", 64, "sometimes"));
    check(&e, 5, &key(64), &["\"sometimes\"", "\"inherit\""]);
}

#[test]
fn shmem_enabled_takes_6_1_values() {
    const KEY: &str = "sysfs:kernel/mm/transparent_hugepage/shmem_enabled";
    for (word, w) in [
        ("always", ShmemEnabled::Always),
        ("within_size", ShmemEnabled::WithinSize),
        ("advise", ShmemEnabled::Advise),
        ("never", ShmemEnabled::Never),
        ("deny", ShmemEnabled::Deny),
        ("force", ShmemEnabled::Force),
    ] {
        let s = parse(&with_task(&format!(
            "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/transparent_hugepage/shmem_enabled\" = \"{word}\"\n"
        )))
        .unwrap();
        assert_eq!(s.sysfs.shmem_enabled, Some(w));
        let at = s.knobs.iter().position(|(k, _)| k == KEY).unwrap();
        assert_eq!(s.knobs[at].1, word);
        // Right after transparent_hugepage/enabled (docs/spec.md "Knobs in force").
        assert_eq!(
            s.knobs[at - 1].0,
            "sysfs:kernel/mm/transparent_hugepage/enabled"
        );
    }
    // Not set: not among the knobs (the engines add `never` when shmem is used).
    let s = parse(&with_task("[machine]\nmemory = \"512M\"\n")).unwrap();
    assert_eq!(s.sysfs.shmem_enabled, None);
    assert!(s.knobs.iter().all(|(k, _)| k != KEY));
}

#[test]
fn shmem_enabled_of_another_value_or_type() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysfs]
"kernel/mm/transparent_hugepage/shmem_enabled" = "madvise"
"#,
    ));
    check(
        &e,
        4,
        "sysfs.\"kernel/mm/transparent_hugepage/shmem_enabled\"",
        &[
            "found \"madvise\"",
            "one of \"always\", \"within_size\", \"advise\", \"never\", \"deny\", \"force\"",
        ],
    );
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysfs]
"kernel/mm/transparent_hugepage/shmem_enabled" = false
"#,
    ));
    check(
        &e,
        4,
        "sysfs.\"kernel/mm/transparent_hugepage/shmem_enabled\"",
        &["found false,", "\"deny\""],
    );
}

#[test]
fn mglru_enabled_values() {
    // `true` and "y" turn every capability on (store_enabled's caps = -1).
    for (v, caps) in [("true", 7), ("\"y\"", 7), ("7", 7), ("\"0x0003\"", 3)] {
        let s = parse(&with_task(&format!(
            "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/lru_gen/enabled\" = {v}\n"
        )))
        .unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(s.sysfs.lru_gen, caps, "{v}");
    }
    let e = rejected(&with_task(
        "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/lru_gen/enabled\" = \"maybe\"\n",
    ));
    check(
        &e,
        4,
        "sysfs.\"kernel/mm/lru_gen/enabled\"",
        &["found \"maybe\"", "capability bits"],
    );
}

#[test]
fn mglru_capabilities_and_min_ttl() {
    // As store_enabled reads them: bits beyond the three capabilities are
    // ignored, so 8 is off.
    for (v, caps, knob) in [
        ("1", 1, "0x0001"),
        ("\"0x0001\"", 1, "0x0001"),
        ("\"0x0005\"", 5, "0x0005"),
        ("\"5\"", 5, "0x0005"),
        ("8", 0, "n"),
        ("false", 0, "n"),
    ] {
        let s = parse(&with_task(&format!(
            "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/lru_gen/enabled\" = {v}\n\"kernel/mm/lru_gen/min_ttl_ms\" = 1000\n"
        )))
        .unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(s.sysfs.lru_gen, caps, "{v}");
        assert_eq!(s.sysfs.lru_gen_min_ttl_ms, 1000);
        assert!(s.knobs.contains(&(
            "sysfs:kernel/mm/lru_gen/enabled".to_string(),
            knob.to_string()
        )));
        assert!(s.knobs.contains(&(
            "sysfs:kernel/mm/lru_gen/min_ttl_ms".to_string(),
            "1000".to_string()
        )));
    }
    let e = rejected(&with_task(
        "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/lru_gen/min_ttl_ms\" = -1\n",
    ));
    check(
        &e,
        4,
        "sysfs.\"kernel/mm/lru_gen/min_ttl_ms\"",
        &["found -1", "milliseconds"],
    );
    // Modelled as 6.1 has it.
    let e = rejected(&with_task(
        "[machine]\nmemory = \"512M\"\nkernel = \"6.12\"\n[sysfs]\n\"kernel/mm/lru_gen/enabled\" = 1\n",
    ));
    check(
        &e,
        5,
        "sysfs.\"kernel/mm/lru_gen/enabled\"",
        &["6.12", "6.1"],
    );
}

#[test]
fn unknown_sysfs_knob() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysfs]
"kernel/mm/ksm/run" = 1
"#,
    ));
    check(
        &e,
        4,
        "sysfs.\"kernel/mm/ksm/run\"",
        &[
            "kernel/mm/ksm/run",
            "does not model",
            "kernel/mm/transparent_hugepage/enabled",
        ],
    );
}

#[test]
fn sysfs_of_wrong_type() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysfs]
"kernel/mm/transparent_hugepage/enabled" = 1.5
"#,
    ));
    check(
        &e,
        4,
        "sysfs.\"kernel/mm/transparent_hugepage/enabled\"",
        &["1.5", "a string, boolean or integer"],
    );
}

// -------------------------------------------------------------------- swap

#[test]
fn swap_block_devices_and_rotational() {
    let s = parse(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "nvme"
size = "1G"
[[swap]]
device = "virtio"
size = "1G"
[[swap]]
device = "virtio"
size = "1G"
rotational = false
[[swap]]
device = "hdd"
size = "1G"
"#,
    ))
    .unwrap();
    let kinds: Vec<SwapKind> = s.swap.iter().map(|d| d.kind).collect();
    assert_eq!(
        kinds,
        [
            SwapKind::Nvme,
            SwapKind::Virtio,
            SwapKind::Virtio,
            SwapKind::Hdd
        ]
    );
    let rot: Vec<bool> = s.swap.iter().map(|d| d.rotational()).collect();
    assert_eq!(rot, [false, true, false, true]);
}

#[test]
fn swap_rotational_on_zram() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1G"
rotational = true
"#,
    ));
    check(&e, 6, "swap[0].rotational", &["zram", "non-rotational"]);
}

#[test]
fn swap_rotational_not_bool() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "virtio"
size = "1G"
rotational = "no"
"#,
    ));
    check(&e, 6, "swap[0].rotational", &["\"no\"", "boolean"]);
}

#[test]
fn page_cluster_and_vma_ra_knobs() {
    let s = parse(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.page-cluster" = 0
[sysfs]
"kernel/mm/swap/vma_ra_enabled" = false
"#,
    ))
    .unwrap();
    assert_eq!(s.sysctl.page_cluster, 0);
    assert!(!s.sysfs.vma_ra_enabled);
    assert!(s
        .knobs
        .contains(&("sysctl:vm.page-cluster".into(), "0".into())));
    assert!(s
        .knobs
        .contains(&("sysfs:kernel/mm/swap/vma_ra_enabled".into(), "false".into())));
    let d = parse(&with_task("[machine]\nmemory = \"512M\"\n")).unwrap();
    assert_eq!(d.sysctl.page_cluster, 3);
    assert!(d.sysfs.vma_ra_enabled);
}

#[test]
fn page_cluster_out_of_range() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.page-cluster" = 11
"#,
    ));
    check(&e, 4, "sysctl.\"vm.page-cluster\"", &["11", "0 to 10"]);
}

#[test]
fn vma_ra_enabled_garbage() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysfs]
"kernel/mm/swap/vma_ra_enabled" = "maybe"
"#,
    ));
    check(
        &e,
        4,
        "sysfs.\"kernel/mm/swap/vma_ra_enabled\"",
        &["maybe", "boolean"],
    );
}

#[test]
fn swap_device_garbage() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1G"
[[swap]]
device = "floppy"
size = "1G"
"#,
    ));
    check(
        &e,
        7,
        "swap[1].device",
        &["\"floppy\"", "zram, nvme, virtio, hdd"],
    );
    assert!(!e.message.contains("not modelled"), "{e}");
}

#[test]
fn swap_on_a_ram_disk_is_refused() {
    // brd is modelled as a [[disk]] only; RAM-backed swap is zram.
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "ram"
size = "64M"
"#,
    ));
    check(
        &e,
        4,
        "swap[0].device",
        &[
            "found \"ram\"",
            "RAM disk (brd)",
            "only as a [[disk]]",
            "expected one of zram, nvme, virtio, hdd",
        ],
    );
}

#[test]
fn ram_disks_hold_file_systems() {
    let s = parse(&with_task(
        r#"[machine]
memory = "1G"
[[disk]]
name = "r"
device = "ram"
size = "300M"
fs = "xfs"
read_ahead_kb = 256
[[disk]]
name = "e"
device = "ram"
size = "16M"
[[file]]
name = "f"
size = "2M"
on = "r"
"#,
    ))
    .unwrap();
    assert_eq!(s.disks[0].kind, SwapKind::Ram);
    assert_eq!(s.disks[0].kind.name(), "ram");
    assert_eq!(s.disks[0].fs, mmsim_spec::Fs::Xfs);
    assert_eq!(s.disks[0].read_ahead_kb, 256);
    assert_eq!(s.disks[1].kind, SwapKind::Ram);
    assert_eq!(s.disks[1].fs, mmsim_spec::Fs::Ext2);
    assert!(!s.disks[0].kind.default_rotational());
    // The same rules as on any disk: an XFS RAM disk needs 300 MiB.
    let e = rejected(&with_task(
        "[machine]\nmemory = \"1G\"\n[[disk]]\nname = \"r\"\ndevice = \"ram\"\nsize = \"64M\"\nfs = \"xfs\"\n",
    ));
    check(&e, 6, "disk[0].size", &["xfs disk", "at least 300M"]);
    // A misspelt device names ram among the choices.
    let e = rejected(&with_task(
        "[machine]\nmemory = \"1G\"\n[[disk]]\nname = \"r\"\ndevice = \"brd\"\nsize = \"64M\"\n",
    ));
    check(
        &e,
        5,
        "disk[0].device",
        &["found \"brd\"", "one of nvme, virtio, hdd, ram"],
    );
}

#[test]
fn swap_size_too_small() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1K"
"#,
    ));
    check(
        &e,
        5,
        "swap[0].size",
        &["1024 bytes", "4 KiB pages", "at least 8K"],
    );
}

#[test]
fn unknown_swap_key() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1M"
prio = 3
"#,
    ));
    check(&e, 6, "swap[0].prio", &["prio", "priority"]);
}

// ------------------------------------------------------------------ cgroup

#[test]
fn cgroup_referenced_by_task_does_not_exist() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
cgroup = "w"
steps = []
"#,
    );
    check(
        &e,
        4,
        "task.main.cgroup",
        &["\"w\"", "[cgroup.NAME]", "none defined"],
    );
}

#[test]
fn cgroup_referenced_by_task_lists_known_cgroups() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[cgroup.a]
[cgroup.b]
memory_max = "1G"
[task.main]
cgroup = "c"
steps = []
"#,
    );
    check(&e, 7, "task.main.cgroup", &["\"c\"", "a, b"]);
}

#[test]
fn invalid_cgroup_name() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup."a b"]
memory_max = "1M"
"#,
    ));
    check(
        &e,
        3,
        "cgroup.\"a b\"",
        &["\"a b\"", "letters, digits, '_' or '-'"],
    );
}

#[test]
fn bad_cgroup_limit() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup.w]
memory_max = "lots"
"#,
    ));
    check(&e, 4, "cgroup.w.memory_max", &["\"lots\"", "\"max\""]);
}

#[test]
fn unknown_cgroup_key() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup.w]
memory_min = "1M"
"#,
    ));
    check(
        &e,
        4,
        "cgroup.w.memory_min",
        &["memory_min", "memory_max", "memory_high"],
    );
}

#[test]
fn cgroup_by_dotted_keys_is_valid_toml() {
    let spec = parse(&with_task(
        r#"[machine]
memory = "512M"
[cgroup]
w.memory_max = "1M"
"#,
    ))
    .unwrap();
    assert_eq!(spec.cgroups[0].memory_max, Limit::Bytes(1 << 20));
}

#[test]
fn steps_as_array_of_tables_without_task_header() {
    let spec = parse(
        r#"[machine]
memory = "512M"

[[task.main.steps]]
op = "mmap"
name = "heap"
kind = "anon"
size = "8M"
"#,
    )
    .unwrap();
    assert_eq!(spec.tasks[0].steps.len(), 1);
}

// -------------------------------------------------------------------- task

#[test]
fn invalid_task_name() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task."x/y"]
steps = []
"#,
    );
    check(
        &e,
        3,
        "task.\"x/y\"",
        &["\"x/y\"", "letters, digits, '_' or '-'"],
    );
}

#[test]
fn instances_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
instances = 0
steps = []
"#,
    );
    check(&e, 4, "task.main.instances", &["found 0", "at least 1"]);
}

#[test]
fn no_tasks_at_all() {
    let e = rejected(
        r#"[machine]
memory = "512M"
"#,
    );
    check(&e, 0, "task", &["no tasks", "[task.NAME]"]);
}

#[test]
fn task_without_steps() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
instances = 2
"#,
    );
    check(&e, 3, "task.main.steps", &["missing", "steps"]);
}

// ------------------------------------------------------------------- steps

#[test]
fn missing_op() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { name = "heap" },
]
"#,
    );
    check(&e, 5, "task.main.steps[0].op", &["missing", OPS]);
}

#[test]
fn unknown_op() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "phase", name = "a" },
  { op = "teleport" },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].op", &["\"teleport\"", OPS]);
}

#[test]
fn op_of_wrong_type() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = 3 },
]
"#,
    );
    check(&e, 5, "task.main.steps[0].op", &["found 3", OPS]);
}

#[test]
fn step_not_a_table() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  "touch",
]
"#,
    );
    check(&e, 5, "task.main.steps[0]", &["\"touch\"", "a table"]);
}

#[test]
fn unknown_step_field() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M", huge = true },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].huge",
        &["huge", "name", "kind", "size"],
    );
}

#[test]
fn missing_step_field() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", size = "8M" },
]
"#,
    );
    check(&e, 5, "task.main.steps[0].kind", &["missing", "kind"]);
}

#[test]
fn bad_size_in_step() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8Q" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].size",
        &["\"8Q\"", "K, M, G or T"],
    );
}

#[test]
fn step_field_of_wrong_type() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", write = "half" },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].write", &["\"half\"", "number"]);
}

#[test]
fn mmap_kind_unknown_and_file_mapping_without_a_disk_file() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "f", kind = "hugetlb", size = "8M" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].kind",
        &[
            "\"hugetlb\"",
            "anon, shmem, shared_anon, file, file_private",
        ],
    );
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "f", kind = "file", size = "8M" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].file",
        &["missing", "[[file]] on a [[disk]]", "none defined"],
    );
}

const DISK: &str = r#"[machine]
memory = "512M"
[[disk]]
name = "d0"
device = "virtio"
size = "256M"
[[file]]
name = "data"
size = "16M"
on = "d0"
[[file]]
name = "t"
size = "4M"
on = "tmpfs"
"#;

#[test]
fn files_on_disks_and_their_mappings() {
    let s = parse(&format!(
        r#"{DISK}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "file", file = "data", size = "8M", offset = "4M", exec = true }},
  {{ op = "mmap", name = "p", kind = "file_private", file = "data", size = "16M" }},
  {{ op = "read", file = "data" }},
]
"#
    ))
    .unwrap();
    assert_eq!(s.disks.len(), 1);
    assert_eq!(s.disks[0].kind, SwapKind::Virtio);
    assert_eq!(s.disks[0].read_ahead_kb, 128);
    assert_eq!(s.files[0].on, FileOn::Disk(0));
    assert_eq!(s.files[1].on, FileOn::Tmpfs);
    assert_eq!(
        s.tasks[0].steps[0].op,
        Op::Mmap {
            name: "m".into(),
            kind: MapKind::File,
            pages: 2048,
            file: Some(0),
            offset: 1024,
            exec: true,
        }
    );
    assert!(matches!(
        s.tasks[0].steps[1].op,
        Op::Mmap {
            kind: MapKind::FilePrivate,
            exec: false,
            ..
        }
    ));
}

#[test]
fn file_mappings_need_the_right_kind_of_file() {
    let e = rejected(&format!(
        r#"{DISK}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "file", file = "t", size = "4M" }},
]
"#
    ));
    check(
        &e,
        17,
        "task.main.steps[0].file",
        &["\"t\"", "kind = \"shmem\"", "[[file]] on a [[disk]] (data)"],
    );
    let e = rejected(&format!(
        r#"{DISK}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "shmem", file = "data", size = "4M" }},
]
"#
    ));
    check(
        &e,
        17,
        "task.main.steps[0].file",
        &["\"data\"", "\"file\" or \"file_private\"", "on tmpfs (t)"],
    );
    let e = rejected(&format!(
        r#"{DISK}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "anon", size = "4M", exec = true }},
]
"#
    ));
    check(
        &e,
        17,
        "task.main.steps[0].exec",
        &["exec on kind \"anon\"", "\"file\" or \"file_private\""],
    );
    let e = rejected(&format!(
        r#"{DISK}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "file", file = "data", size = "4M", exec = "yes" }},
]
"#
    ));
    check(
        &e,
        17,
        "task.main.steps[0].exec",
        &["\"yes\"", "true or false"],
    );
}

#[test]
fn disk_errors() {
    let cases: &[(&str, usize, &str, &[&str])] = &[
        (
            "[[disk]]\nname = \"d\"\ndevice = \"zram\"\nsize = \"1G\"\n",
            5,
            "disk[0].device",
            &["\"zram\"", "nvme, virtio, hdd, ram"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"8M\"\n",
            6,
            "disk[0].size",
            &["8388608 bytes", "at least 16M"],
        ),
        (
            "[[disk]]\nname = \"tmpfs\"\ndevice = \"nvme\"\nsize = \"1G\"\n",
            4,
            "disk[0].name",
            &["\"tmpfs\"", "taken"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"1G\"\nread_ahead_kb = 6\n",
            7,
            "disk[0].read_ahead_kb",
            &["found 6", "multiple of 4"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"1G\"\nfs = \"btrfs\"\n",
            7,
            "disk[0].fs",
            &["\"btrfs\"", "ext2 or xfs"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"virtio\"\nsize = \"299M\"\nfs = \"xfs\"\n",
            6,
            "disk[0].size",
            &["313524224 bytes", "xfs disk", "at least 300M", "mkfs.xfs"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"virtio\"\nsize = \"300M\"\nfs = \"xfs\"\n[[file]]\nname = \"f\"\nsize = \"64M\"\non = \"d\"\n[[file]]\nname = \"g\"\nsize = \"155M\"\non = \"d\"\n",
            14,
            "file[1].size",
            &[
                "219 MiB of files on disk \"d\"",
                "at most 218 MiB",
                "XFS on its 300 MiB",
                "64 MiB log",
            ],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"4G\"\nfs = \"xfs\"\n[[file]]\nname = \"f\"\nsize = \"3960M\"\non = \"d\"\n",
            10,
            "file[0].size",
            &["3960 MiB of files", "at most 3959 MiB"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"1G\"\nqueue = 4\n",
            7,
            "disk[0].queue",
            &["queue"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"64M\"\n[[file]]\nname = \"f\"\nsize = \"62M\"\non = \"d\"\n",
            9,
            "file[0].size",
            &["62 MiB of files on disk \"d\"", "at most 59 MiB"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"64M\"\n[[file]]\nname = \"f\"\nsize = \"4M\"\non = \"e\"\n",
            10,
            "file[0].on",
            &["\"e\"", "\"tmpfs\" or the name of a [[disk]] (\"tmpfs\", \"d\")"],
        ),
        (
            "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"64M\"\n[[file]]\nname = \"f\"\nsize = \"4M\"\non = \"d\"\nhuge = \"never\"\n",
            11,
            "file[0].huge",
            &["huge on a file on disk \"d\"", "only on tmpfs"],
        ),
    ];
    for (head, line, key, mentions) in cases {
        let e = rejected(&with_task(&format!("[machine]\nmemory = \"512M\"\n{head}")));
        check(&e, *line, key, mentions);
    }
    // At the limits: the smallest xfs disk, filled to its room (what the
    // oracle's guest wrote whole); and a small ext2 disk beside it.
    let spec = parse(&with_task(
        "[machine]\nmemory = \"512M\"\n[[disk]]\nname = \"x\"\ndevice = \"virtio\"\nsize = \"300M\"\nfs = \"xfs\"\n[[disk]]\nname = \"e\"\ndevice = \"virtio\"\nsize = \"16M\"\n[[file]]\nname = \"f\"\nsize = \"64M\"\non = \"x\"\n[[file]]\nname = \"g\"\nsize = \"154M\"\non = \"x\"\n",
    ))
    .unwrap();
    assert_eq!(spec.disks[0].fs, mmsim_spec::Fs::Xfs);
    assert_eq!(spec.disks[1].fs, mmsim_spec::Fs::Ext2);
}

#[test]
fn mmap_size_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = 0 },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].size",
        &["found 0", "at least one page"],
    );
}

#[test]
fn unmapped_region_in_touch() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "stack" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].region",
        &["\"stack\"", "earlier mmap", "heap"],
    );
}

#[test]
fn touch_before_mmap() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "touch", region = "heap" },
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn touch_after_munmap() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "munmap", region = "heap" },
  { op = "touch", region = "heap" },
]
"#,
    );
    check(
        &e,
        7,
        "task.main.steps[2].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn regions_are_per_task() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.a]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
]
[task.b]
steps = [
  { op = "touch", region = "heap" },
]
"#,
    );
    check(
        &e,
        9,
        "task.b.steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn munmap_of_unknown_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "munmap", region = "heap2" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].region",
        &["\"heap2\"", "earlier mmap", "heap"],
    );
}

#[test]
fn duplicate_mmap_name() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "phase", name = "x" },
  { op = "mmap", name = "heap", kind = "anon", size = "4M" },
]
"#,
    );
    check(
        &e,
        7,
        "task.main.steps[2].name",
        &["\"heap\"", "already mapped", "new region name"],
    );
}

#[test]
fn touch_offset_outside_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", offset = "8M" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].offset",
        &["2048..2048", "\"heap\"", "2048 pages"],
    );
}

#[test]
fn touch_length_outside_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", offset = "4M", length = "8M" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].length",
        &["1024..3072", "\"heap\"", "2048 pages"],
    );
}

#[test]
fn theta_on_non_zipf_order() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", order = "uniform", theta = 0.5 },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].theta", &["theta", "\"zipf\""]);
}

#[test]
fn theta_out_of_range() {
    for (theta, found) in [
        ("11.0", "11"),
        ("0.0", "found 0"),
        ("-1.0", "-1"),
        ("nan", "NaN"),
        ("inf", "inf"),
    ] {
        let text = format!(
            r#"[machine]
memory = "512M"
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "8M" }},
  {{ op = "touch", region = "heap", order = "zipf", theta = {theta} }},
]
"#
        );
        let e = rejected(&text);
        check(
            &e,
            6,
            "task.main.steps[1].theta",
            &[found, "above 0", "at most 10"],
        );
    }
}

#[test]
fn unknown_order() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", order = "random" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].order",
        &["\"random\"", "seq, rev, shuffle, uniform, zipf"],
    );
}

#[test]
fn write_fraction_above_one() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", write = 1.5 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].write",
        &["1.5", "fraction from 0 to 1"],
    );
}

#[test]
fn both_count_and_passes() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", count = 10, passes = 2 },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].passes", &["count", "passes"]);
}

#[test]
fn count_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", count = 0 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].count",
        &["found 0", "at least 1"],
    );
}

#[test]
fn passes_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", passes = 0 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].passes",
        &["found 0", "at least 1"],
    );
}

#[test]
fn offset_not_page_multiple() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", offset = 100 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].offset",
        &["100 bytes", "multiple of 4096"],
    );
}

#[test]
fn length_not_page_multiple_or_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", length = "6K" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].length",
        &["6144 bytes", "multiple of 4096"],
    );
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", length = 0 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].length",
        &["found 0", "at least one page"],
    );
}

#[test]
fn repeat_times_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "repeat", times = 0, steps = [] },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].times",
        &["found 0", "at least 1"],
    );
}

/// The key path of an error inside a repeat names both steps. (Its line is
/// checked separately in `nested_repeat_error_line_is_the_inner_step`.)
#[test]
fn nested_repeat_error_names_inner_step() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "repeat", times = 2, steps = [
      { op = "phase", name = "p" },
      { op = "repeat", steps = [
          { op = "touch", region = "heap", order = "zigzag" },
      ] },
  ] },
]
"#,
    );
    assert_eq!(e.file, "t.toml");
    assert_eq!(e.key, "task.main.steps[1].steps[1].steps[0].order", "{e}");
    assert!(
        e.message.contains("\"zigzag\"") && e.message.contains("seq, rev"),
        "{e}"
    );
}

#[test]
fn nested_repeat_error_line_is_the_inner_step() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "repeat", times = 2, steps = [
      { op = "phase", name = "p" },
      { op = "touch", region = "heap", order = "zigzag" },
  ] },
]
"#,
    );
    check(
        &e,
        8,
        "task.main.steps[1].steps[1].order",
        &["\"zigzag\"", "seq, rev"],
    );
}

#[test]
fn nested_repeat_region_error_names_inner_step() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "phase", name = "a" },
  { op = "phase", name = "b" },
  { op = "repeat", steps = [
    { op = "touch", region = "nope" },
  ] },
]
"#,
    );
    check(
        &e,
        9,
        "task.main.steps[3].steps[0].region",
        &["\"nope\"", "heap"],
    );
}

#[test]
fn repeat_body_is_checked_for_every_iteration() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "repeat", times = 3, steps = [
    { op = "mmap", name = "tmp", kind = "anon", size = "1M" },
    { op = "touch", region = "tmp" },
  ] },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[0].steps[0].name",
        &["\"tmp\"", "already mapped"],
    );
}

#[test]
fn bad_sleep_duration() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "sleep", duration = "5min" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].duration",
        &["\"5min\"", "ns, us, ms or s"],
    );
}

// ------------------------------------------------------------- TOML syntax

#[test]
fn toml_syntax_error_duplicate_key() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
memory = "1G"
"#,
    ));
    check(&e, 3, "machine.memory", &["duplicate key `memory`"]);
}

#[test]
fn toml_syntax_error_in_steps() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap" kind = "anon" },
]
"#,
    );
    check(&e, 5, "task.main", &["inline table", "expected"]);
}

#[test]
fn toml_syntax_error_unterminated_string() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M
"#,
    ));
    check(&e, 2, "machine.memory", &["string"]);
}

// -------------------------------------------------------------------- --set

#[test]
fn set_without_equals() {
    let e = parse_set(
        &with_task("[machine]\nmemory = \"512M\"\n"),
        &["machine.memory"],
    )
    .unwrap_err();
    check_in(&e, "--set", 0, "machine.memory", &["no '='", "KEY=VALUE"]);
    assert_eq!(
        e.to_string(),
        "--set: key `machine.memory`: found no '=', expected KEY=VALUE"
    );
}

#[test]
fn set_through_a_non_table() {
    let e = parse_set(
        &with_task("[machine]\nmemory = \"512M\"\n"),
        &["machine.memory.x=1"],
    )
    .unwrap_err();
    // The key of a --set error is the KEY of the --set that failed.
    check_in(
        &e,
        "--set",
        0,
        "machine.memory.x",
        &["`machine.memory`", "not a table"],
    );
}

#[test]
fn set_with_a_bad_key_path() {
    let e = parse_set(&with_task("[machine]\nmemory = \"512M\"\n"), &["a..b=1"]).unwrap_err();
    check_in(&e, "--set", 0, "a..b", &["\"a..b\"", "not a TOML key"]);
}

#[test]
fn set_value_error_names_the_set() {
    let e = parse_set(
        &with_task("[machine]\nmemory = \"512M\"\n"),
        &["sysctl.\"vm.swappiness\"=300"],
    )
    .unwrap_err();
    check_in(
        &e,
        "--set",
        0,
        "sysctl.\"vm.swappiness\"",
        &["300", "0 to 200"],
    );
}

#[test]
fn set_into_an_array_of_tables() {
    // [[swap]] is an array of tables: --set cannot address its entries.
    let text =
        with_task("[machine]\nmemory = \"512M\"\n[[swap]]\ndevice = \"zram\"\nsize = \"1M\"\n");
    let e = parse_set(&text, &["swap.size=2M"]).unwrap_err();
    check_in(&e, "--set", 0, "swap.size", &["`swap`", "not a table"]);
}

#[test]
fn set_on_a_spec_with_a_syntax_error() {
    let e = parse_set("[machine]\nmemory = \"512M\n", &["machine.cpus=2"]).unwrap_err();
    assert_eq!(e.file, "t.toml");
    assert_eq!(e.line, 2, "{e}");
}

#[test]
fn set_does_not_move_the_lines_of_the_file() {
    // A --set that adds a key to a table of the file must not shift the
    // lines of later errors.
    let text = r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "touch", region = "heap" },
]
"#;
    let e = parse_set(text, &["machine.cpus=2", "machine.kernel=\"6.1\""]).unwrap_err();
    check(
        &e,
        5,
        "task.main.steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn set_error_under_the_set_key_names_the_set_and_the_key() {
    let text = "[machine]\nmemory = \"512M\"\n";
    // A task created by --set lacks steps: the error is the --set's.
    let e = parse_set(text, &["task.x.instances=2"]).unwrap_err();
    check_in(
        &e,
        "--set",
        0,
        "task.x.instances",
        &["missing", "`steps`", "`task.x.steps`"],
    );
    // Steps given by --set: the error names the step inside it.
    let e = parse_set(
        text,
        &[r#"task.main.steps=[{ op = "phase", name = "a" }, { op = "touch", region = "r" }]"#],
    )
    .unwrap_err();
    check_in(
        &e,
        "--set",
        0,
        "task.main.steps",
        &["\"r\"", "none mapped", "`task.main.steps[1].region`"],
    );
    // The key is reported as written, whatever its quoting.
    let e = parse_set(&with_task(text), &["sysctl.'vm.swappiness'=300"]).unwrap_err();
    check_in(
        &e,
        "--set",
        0,
        "sysctl.'vm.swappiness'",
        &["found 300", "0 to 200"],
    );
    assert!(!e.message.contains("(at"), "{e}");
}

#[test]
fn set_messages_are_sentences() {
    let text = with_task("[machine]\nmemory = \"512M\"\n");
    let e = parse_set(&text, &["machine.memory.x=1"]).unwrap_err();
    assert_eq!(
        e.message,
        "found `machine.memory`, which is a string, not a table; expected a key path through tables only"
    );
    let e = parse_set(&text, &["a..b=1"]).unwrap_err();
    assert!(
        !e.message.contains(": ;") && !e.message.ends_with(": "),
        "{e}"
    );
    assert!(e.message.contains("expected"), "{e}");
}

#[test]
fn dotted_and_implicit_tables_report_their_lines() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup]
w.memory_max = "1M"
w.memory_min = "1M"
"#,
    ));
    check(&e, 5, "cgroup.w.memory_min", &["memory_min", "memory_max"]);
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup]
"a b".memory_max = "1M"
"#,
    ));
    check(&e, 4, "cgroup.\"a b\"", &["\"a b\"", "letters, digits"]);
    // [[task.x.steps]] without [task.x]: the task is where its name is.
    let e = rejected(
        r#"[machine]
memory = "512M"

[[task."x y".steps]]
op = "phase"
name = "p"
"#,
    );
    check(&e, 4, "task.\"x y\"", &["\"x y\"", "letters, digits"]);
}

#[test]
fn steps_as_array_of_tables_report_the_field_line() {
    let e = rejected(
        r#"[machine]
memory = "512M"

[[task.main.steps]]
op = "mmap"
name = "heap"
kind = "anon"
size = "8M"

[[task.main.steps]]
op = "touch"
region = "heap"
write = 2
"#,
    );
    check(&e, 13, "task.main.steps[1].write", &["found 2", "0 to 1"]);
    // A missing field: the line of the step's header.
    let e = rejected(
        r#"[machine]
memory = "512M"

[[task.main.steps]]
op = "mmap"
name = "heap"
size = "8M"
"#,
    );
    check(
        &e,
        4,
        "task.main.steps[0].kind",
        &["missing", "anon, shmem"],
    );
}

#[test]
fn nested_steps_keep_their_own_lines() {
    let s = parse(FULL).unwrap();
    let Op::Repeat { steps, .. } = &s.tasks[0].steps[8].op else {
        panic!()
    };
    assert_eq!(steps.iter().map(|s| s.line).collect::<Vec<_>>(), [48, 49]);
}

#[test]
fn step_field_types_in_words() {
    for (field, found, words) in [
        ("count = 1.5", "found 1.5", "a whole number"),
        ("count = 2.0", "found 2.0,", "a whole number"),
        ("count = -2", "found -2", "a whole number"),
        ("passes = \"2\"", "found \"2\"", "a whole number"),
        ("seed = -1", "found -1", "a whole number from 0"),
        ("seed = true", "found true", "a whole number"),
        ("order = 1", "found 1", "a string"),
        ("offset = 1.5", "found 1.5", "a size"),
        ("write = [1]", "found an array", "a number from 0 to 1"),
    ] {
        let text = format!(
            r#"[machine]
memory = "512M"
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "8M" }},
  {{ op = "touch", region = "heap", {field} }},
]
"#
        );
        let e = rejected(&text);
        let key = format!("task.main.steps[1].{}", field.split(' ').next().unwrap());
        check(&e, 6, &key, &[found, words]);
        for jargon in ["u64", "f64", "i64", "invalid type"] {
            assert!(!e.message.contains(jargon), "{e}");
        }
    }
}

#[test]
fn missing_step_fields_by_op() {
    for (step, field, expected) in [
        ("{ op = \"munmap\" }", "region", "region"),
        ("{ op = \"sleep\" }", "duration", "duration"),
        ("{ op = \"phase\" }", "name", "string"),
        (
            "{ op = \"repeat\", times = 2 }",
            "steps",
            "array of step tables",
        ),
        ("{ op = \"touch\", order = \"seq\" }", "region", "region"),
    ] {
        let text = format!("[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n  {step},\n]\n");
        let e = rejected(&text);
        check(
            &e,
            5,
            &format!("task.main.steps[0].{field}"),
            &["missing", &format!("`{field}`"), expected],
        );
    }
}

#[test]
fn region_and_phase_names_are_validated() {
    for (step, key, found) in [
        (
            r#"{ op = "mmap", name = "a b", kind = "anon", size = "8M" }"#,
            "name",
            "\"a b\"",
        ),
        (
            r#"{ op = "mmap", name = "", kind = "anon", size = "8M" }"#,
            "name",
            "\"\"",
        ),
        (r#"{ op = "phase", name = "x/y" }"#, "name", "\"x/y\""),
        (r#"{ op = "phase", name = "" }"#, "name", "\"\""),
    ] {
        let text = format!("[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n  {step},\n]\n");
        let e = rejected(&text);
        check(
            &e,
            5,
            &format!("task.main.steps[0].{key}"),
            &[found, "letters, digits, '_' or '-'", "non-empty"],
        );
    }
}

#[test]
fn access_counts_are_bounded() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", count = 281474976710657 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].count",
        &["281474976710657", "2^48"],
    );
    // passes × pages, which would overflow 64 bits here.
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "1T" },
  { op = "touch", region = "heap", passes = 281474976710656 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].passes",
        &[
            "281474976710656 passes over 268435456 pages",
            "at most 2^48",
        ],
    );
    // At the bound exactly is fine.
    parse(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "1G" },
  { op = "touch", region = "heap", passes = 1073741824 },
  { op = "touch", region = "heap", count = 281474976710656 },
]
"#,
    )
    .unwrap();
    // An mmap beyond x86-64's user address space.
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "129T" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].size",
        &["141836999983104 bytes", "128T"],
    );
}

#[test]
fn repeat_state_after_the_first_iteration_is_checked() {
    // The second iteration touches a region remapped smaller by the first.
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "repeat", times = 2, steps = [
    { op = "touch", region = "heap", offset = "6M" },
    { op = "munmap", region = "heap" },
    { op = "mmap", name = "heap", kind = "anon", size = "4M" },
  ] },
]
"#,
    );
    check(
        &e,
        7,
        "task.main.steps[1].steps[0].offset",
        &["1536..1536", "1024 pages"],
    );
    // Once is fine, and so is a body that leaves the state as it found it.
    parse(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "repeat", times = 1, steps = [
    { op = "touch", region = "heap", offset = "6M" },
    { op = "munmap", region = "heap" },
    { op = "mmap", name = "heap", kind = "anon", size = "4M" },
  ] },
  { op = "repeat", times = 1000000, steps = [
    { op = "mmap", name = "tmp", kind = "anon", size = "1M" },
    { op = "touch", region = "tmp" },
    { op = "munmap", region = "tmp" },
  ] },
]
"#,
    )
    .unwrap();
}

#[test]
fn deeply_nested_repeats_are_checked_quickly() {
    // Each level remaps "r" with its own size, so every body changes the
    // state; checking must still not take 2^depth walks.
    let depth = 30;
    let mut body = String::from(r#"{ op = "touch", region = "r" }"#);
    for d in 0..depth {
        body = format!(
            r#"{{ op = "repeat", times = 2, steps = [ {{ op = "munmap", region = "r" }}, {{ op = "mmap", name = "r", kind = "anon", size = {} }}, {body} ] }}"#,
            4096 * (d + 1)
        );
    }
    let text = format!(
        "[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n  {{ op = \"mmap\", name = \"r\", kind = \"anon\", size = \"1M\" }},\n  {body},\n]\n"
    );
    let t = std::time::Instant::now();
    parse(&text).unwrap();
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
}

#[test]
fn syntax_errors_name_the_header_on_their_line() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup.w]
[cgroup.w]
"#,
    ));
    check(&e, 4, "cgroup.w", &["duplicate key `w`"]);
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1M"
[[swap]]
device = "zram" size = "1M"
"#,
    ));
    check(&e, 7, "swap[1].device", &["expected", "found `size`"]);
}

// ----------------------------------------------------------- error display

#[test]
fn display_format() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "teleport" },
]
"#,
    );
    assert_eq!(
        e.to_string(),
        format!("t.toml:5: key `task.main.steps[0].op`: found \"teleport\", expected one of {OPS}")
    );
    let e = rejected("[machine]\nmemory = \"512M\"\n");
    assert_eq!(
        e.to_string(),
        "t.toml: key `task`: found no tasks, expected at least one [task.NAME] table"
    );
    let e = SpecError {
        file: "f".into(),
        line: 3,
        column: 0,
        key: String::new(),
        message: "m".into(),
    };
    assert_eq!(e.to_string(), "f:3: m");
}

#[test]
fn unreadable_file() {
    let e =
        mmsim_spec::load(std::path::Path::new("/nonexistent/mmsim/spec.toml"), &[]).unwrap_err();
    assert_eq!(e.file, "/nonexistent/mmsim/spec.toml");
    assert_eq!(e.line, 0);
    assert_eq!(e.key, "");
    assert!(e.message.starts_with("cannot read the spec"), "{e}");
}

// ------------------------------------------------------------ valid specs

const FULL: &str = r#"# every section
[machine]
memory = "1.5G"
cpus = 4
kernel = "6.1"

[features]
shmem_skip_swapcache = true
wp_reuse_swapcache = false

[sysctl]
"vm.swappiness" = 100
"vm.watermark_scale_factor" = 200
"vm.min_free_kbytes" = 65536

[sysfs]
"kernel/mm/transparent_hugepage/enabled" = "never"
"kernel/mm/lru_gen/enabled" = false

[[swap]]
device = "zram"
size = "512M"
priority = 10

[[swap]]
device = "zram"
size = 1_048_576

[cgroup.w]
memory_max = "100M"
memory_high = "80MiB"

[cgroup.free]

[task.main]
cgroup = "w"
instances = 3
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "200M" },
  { op = "mmap", name = "odd", kind = "anon", size = "5K" },
  { op = "phase", name = "write" },
  { op = "touch", region = "heap", order = "seq", write = 1.0 },
  { op = "touch", region = "heap", order = "zipf", count = 2_000_000, seed = 7 },
  { op = "touch", region = "heap", order = "zipf", theta = 1.2, offset = "4M", length = "16K" },
  { op = "touch", region = "heap", order = "shuffle", passes = 3, write = 0.25 },
  { op = "sleep", duration = "250ms" },
  { op = "repeat", times = 2, steps = [
      { op = "touch", region = "odd", order = "rev" },
      { op = "sleep", duration = 1000 },
  ] },
  { op = "munmap", region = "heap" },
]

[task.other]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = 4096 },
  { op = "touch", region = "heap", order = "uniform", count = 10 },
]
"#;

#[test]
fn full_valid_spec() {
    let s = parse(FULL).unwrap();
    assert_eq!(s.file, "t.toml");
    assert_eq!(s.machine.memory, 3 << 29);
    assert_eq!(s.machine.cpus, 4);
    assert_eq!(s.machine.kernel, "6.1");
    assert_eq!(
        s.features,
        Features {
            shmem_skip_swapcache: true,
            wp_reuse_swapcache: false,
            ..Features::LINUX_6_1
        }
    );
    assert_eq!(s.sysctl.swappiness, 100);
    assert_eq!(s.sysctl.watermark_scale_factor, 200);
    assert_eq!(s.sysctl.min_free_kbytes, Some(65536));
    assert_eq!(s.sysfs.thp_enabled, mmsim_spec::ThpEnabled::Never);

    assert_eq!(s.swap.len(), 2);
    assert_eq!(s.swap[0].kind, SwapKind::Zram);
    assert_eq!(s.swap[0].kind.name(), "zram");
    assert_eq!(s.swap[0].size, 512 << 20);
    assert_eq!(s.swap[0].priority, Some(10));
    assert_eq!(s.swap[1].size, 1 << 20);
    assert_eq!(s.swap[1].priority, None);

    assert_eq!(s.cgroups.len(), 2);
    assert_eq!(s.cgroups[0].name, "w");
    assert_eq!(s.cgroups[0].memory_max, Limit::Bytes(100 << 20));
    assert_eq!(s.cgroups[0].memory_max.pages(), Some(25600));
    assert_eq!(s.cgroups[0].memory_high, Limit::Bytes(80 << 20));
    assert_eq!(s.cgroups[1].name, "free");
    assert_eq!(s.cgroups[1].memory_max, Limit::Max);
    assert_eq!(s.cgroups[1].memory_max.pages(), None);
    assert_eq!(s.cgroups[1].memory_high, Limit::Max);

    // Tasks keep the file's order.
    assert_eq!(s.tasks.len(), 2);
    let t = &s.tasks[0];
    assert_eq!(t.name, "main");
    assert_eq!(t.cgroup, Some(0));
    assert_eq!(t.instances, 3);
    let lines: Vec<usize> = t.steps.iter().map(|s| s.line).collect();
    assert_eq!(lines, [39, 40, 41, 42, 43, 44, 45, 46, 47, 51]);
    let ops: Vec<&Op> = t.steps.iter().map(|s| &s.op).collect();
    assert_eq!(
        *ops[0],
        Op::Mmap {
            name: "heap".into(),
            kind: MapKind::Anon,
            pages: 51200,
            file: None,
            offset: 0,
            exec: false,
        }
    );
    // mmap rounds a length up to whole pages.
    assert_eq!(
        *ops[1],
        Op::Mmap {
            name: "odd".into(),
            kind: MapKind::Anon,
            pages: 2,
            file: None,
            offset: 0,
            exec: false,
        }
    );
    assert_eq!(
        *ops[2],
        Op::Phase {
            name: "write".into()
        }
    );
    let Op::Touch(seq) = ops[3] else {
        panic!("{:?}", ops[3])
    };
    assert_eq!((seq.region.as_str(), seq.order), ("heap", Order::Seq));
    assert_eq!(
        (seq.count, seq.passes, seq.write, seq.offset, seq.length, seq.seed),
        (None, 1, 1.0, 0, None, 0)
    );
    assert_eq!(seq.theta, 0.0);
    let Op::Touch(z) = ops[4] else {
        panic!("{:?}", ops[4])
    };
    assert_eq!(
        (z.order, z.theta, z.count, z.seed, z.write),
        (Order::Zipf, 0.99, Some(2_000_000), 7, 0.0)
    );
    let Op::Touch(z2) = ops[5] else {
        panic!("{:?}", ops[5])
    };
    assert_eq!((z2.theta, z2.offset, z2.length), (1.2, 1024, Some(4)));
    let Op::Touch(sh) = ops[6] else {
        panic!("{:?}", ops[6])
    };
    assert_eq!(
        (sh.order, sh.passes, sh.count, sh.write),
        (Order::Shuffle, 3, None, 0.25)
    );
    assert_eq!(*ops[7], Op::Sleep { ns: 250_000_000 });
    let Op::Repeat { times, steps } = ops[8] else {
        panic!("{:?}", ops[8])
    };
    assert_eq!(*times, 2);
    assert_eq!(steps.len(), 2);
    let Op::Touch(rev) = &steps[0].op else {
        panic!("{:?}", steps[0])
    };
    assert_eq!((rev.region.as_str(), rev.order), ("odd", Order::Rev));
    assert_eq!(steps[1].op, Op::Sleep { ns: 1000 });
    assert_eq!(
        *ops[9],
        Op::Munmap {
            region: "heap".into()
        }
    );

    let t = &s.tasks[1];
    assert_eq!((t.name.as_str(), t.cgroup, t.instances), ("other", None, 1));
    assert_eq!(
        t.steps[0].op,
        Op::Mmap {
            name: "heap".into(),
            kind: MapKind::Anon,
            pages: 1,
            file: None,
            offset: 0,
            exec: false,
        }
    );
    let Op::Touch(u) = &t.steps[1].op else {
        panic!()
    };
    assert_eq!((u.order, u.count), (Order::Uniform, Some(10)));
}

#[test]
fn defaults() {
    let s = parse(
        r#"[machine]
memory = "64M"
[task.t]
steps = [
  { op = "mmap", name = "r", kind = "anon", size = "1M" },
  { op = "touch", region = "r" },
  { op = "touch", region = "r", order = "zipf" },
  { op = "repeat", steps = [] },
]
"#,
    )
    .unwrap();
    assert_eq!(s.machine.memory, 64 << 20);
    assert_eq!(s.machine.cpus, 1);
    assert_eq!(s.machine.kernel, "6.1");
    assert_eq!(s.features, Features::LINUX_6_1);
    assert_eq!(s.sysctl.swappiness, 60);
    assert_eq!(s.sysctl.watermark_scale_factor, 10);
    assert_eq!(s.sysctl.min_free_kbytes, None);
    assert_eq!(s.sysfs.thp_enabled, mmsim_spec::ThpEnabled::Never);
    assert!(s.swap.is_empty());
    assert!(s.cgroups.is_empty());
    let t = &s.tasks[0];
    assert_eq!((t.instances, t.cgroup), (1, None));
    let Op::Touch(d) = &t.steps[1].op else {
        panic!()
    };
    assert_eq!(d.order, Order::Seq);
    assert_eq!(
        (d.count, d.passes, d.write, d.offset, d.length, d.seed),
        (None, 1, 0.0, 0, None, 0)
    );
    let Op::Touch(z) = &t.steps[2].op else {
        panic!()
    };
    assert_eq!(z.theta, 0.99);
    assert_eq!(
        t.steps[3].op,
        Op::Repeat {
            times: 1,
            steps: vec![]
        }
    );
}

#[test]
fn features_preset_is_linux_6_1() {
    let f = Features::LINUX_6_1;
    assert!(f.wp_reuse_swapcache);
    assert!(!f.shmem_skip_swapcache);
    assert!(f.used_once_mapped_file);
    assert!(!f.batched_rmap_unmap);
    assert!(f.swapoff_readahead_stats);
}

#[test]
fn sizes_and_durations_syntax() {
    for (size, bytes) in [
        ("8192", 8192u64),
        ("\"8K\"", 8192),
        ("\"8k\"", 8192),
        ("\"8KB\"", 8192),
        ("\"8KiB\"", 8192),
        ("\"8 kib\"", 8192),
        ("\"0.5M\"", 512 << 10),
        ("\"1_024K\"", 1 << 20),
        ("\"1 M\"", 1 << 20),
        ("\"1g\"", 1 << 30),
        ("\"1T\"", 1 << 40),
        ("\"8192B\"", 8192),
        ("\"8192\"", 8192),
    ] {
        let text = with_task(&format!(
            "[machine]\nmemory = \"512M\"\n[[swap]]\ndevice = \"zram\"\nsize = {size}\n"
        ));
        let spec = parse(&text).unwrap_or_else(|e| panic!("{size}: {e}"));
        assert_eq!(spec.swap[0].size, bytes, "{size}");
    }
    for (d, ns) in [
        ("0", 0u64),
        ("1500", 1500),
        ("\"1500ns\"", 1500),
        ("\"1.5us\"", 1500),
        ("\"1.5µs\"", 1500),
        ("\"2ms\"", 2_000_000),
        ("\"0.25s\"", 250_000_000),
    ] {
        let text = format!(
            "[machine]\nmemory = \"512M\"\n[task.t]\nsteps = [ {{ op = \"sleep\", duration = {d} }} ]\n"
        );
        let spec = parse(&text).unwrap_or_else(|e| panic!("{d}: {e}"));
        assert_eq!(spec.tasks[0].steps[0].op, Op::Sleep { ns }, "{d}");
    }
}

#[test]
fn set_overrides_take_effect() {
    let text = r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = 60
[cgroup.w]
memory_max = "100M"
[task.main]
cgroup = "w"
steps = []
"#;
    let s = parse_set(
        text,
        &[
            "sysctl.\"vm.swappiness\"=100",
            "features.shmem_skip_swapcache=true",
            "features.used_once_mapped_file = false",
            "cgroup.w.memory_max=50M",
            "machine.memory=1G",
            "machine.cpus=2",
        ],
    )
    .unwrap();
    assert_eq!(s.sysctl.swappiness, 100);
    assert!(s.features.shmem_skip_swapcache);
    assert!(!s.features.used_once_mapped_file);
    assert_eq!(
        s.features.wp_reuse_swapcache,
        Features::LINUX_6_1.wp_reuse_swapcache
    );
    assert_eq!(s.cgroups[0].memory_max, Limit::Bytes(50 << 20));
    assert_eq!(s.machine.memory, 1 << 30);
    assert_eq!(s.machine.cpus, 2);
    assert!(s
        .knobs
        .contains(&("sysctl:vm.swappiness".to_string(), "100".to_string())));

    // "max", and a quoted TOML string, both work as limits.
    let s = parse_set(text, &["cgroup.w.memory_max=max"]).unwrap();
    assert_eq!(s.cgroups[0].memory_max, Limit::Max);
    let s = parse_set(text, &["cgroup.w.memory_max=\"12K\""]).unwrap();
    assert_eq!(s.cgroups[0].memory_max, Limit::Bytes(12288));
    // The last --set of a key wins.
    let s = parse_set(
        text,
        &["sysctl.\"vm.swappiness\"=1", "sysctl.\"vm.swappiness\"=2"],
    )
    .unwrap();
    assert_eq!(s.sysctl.swappiness, 2);
}

#[test]
fn set_creates_missing_tables() {
    let text = r#"[machine]
memory = "512M"
[task.main]
steps = []
"#;
    let s = parse_set(
        text,
        &[
            "cgroup.w.memory_max=50M",
            "task.main.cgroup=w",
            "sysctl.\"vm.min_free_kbytes\"=4096",
            "features.batched_rmap_unmap=true",
        ],
    )
    .unwrap();
    assert_eq!(s.cgroups.len(), 1);
    assert_eq!(s.cgroups[0].memory_max, Limit::Bytes(50 << 20));
    assert_eq!(s.tasks[0].cgroup, Some(0));
    assert_eq!(s.sysctl.min_free_kbytes, Some(4096));
    assert!(s.features.batched_rmap_unmap);
}

#[test]
fn knobs_lists_the_knobs_in_force() {
    let base = r#"[machine]
memory = "512M"
[task.main]
steps = []
"#;
    let s = parse(base).unwrap();
    let knobs: Vec<(&str, &str)> = s
        .knobs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        knobs,
        [
            ("sysctl:vm.swappiness", "60"),
            ("sysctl:vm.watermark_scale_factor", "10"),
            ("sysctl:vm.page-cluster", "3"),
            ("sysfs:kernel/mm/transparent_hugepage/enabled", "never"),
            ("sysfs:kernel/mm/lru_gen/enabled", "n"),
            ("sysfs:kernel/mm/swap/vma_ra_enabled", "true"),
        ]
    );
    let s = parse(FULL).unwrap();
    let knobs: Vec<(&str, &str)> = s
        .knobs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        knobs,
        [
            ("sysctl:vm.swappiness", "100"),
            ("sysctl:vm.watermark_scale_factor", "200"),
            ("sysctl:vm.min_free_kbytes", "65536"),
            ("sysctl:vm.page-cluster", "3"),
            ("sysfs:kernel/mm/transparent_hugepage/enabled", "never"),
            ("sysfs:kernel/mm/lru_gen/enabled", "n"),
            ("sysfs:kernel/mm/swap/vma_ra_enabled", "true"),
        ]
    );
    // Every sysctl the crate models is accepted at both ends of its range.
    for &(name, lo, hi) in SYSCTLS {
        for v in [lo, hi] {
            let s = parse_set(base, &[&format!("sysctl.\"{name}\"={v}")]).unwrap();
            assert!(
                s.knobs.contains(&(format!("sysctl:{name}"), v.to_string())),
                "{name}={v}"
            );
        }
    }
}

#[test]
fn mglru_off_spellings() {
    for v in ["false", "0", "\"n\"", "\"0\"", "\"0x0000\""] {
        let text = with_task(&format!(
            "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/lru_gen/enabled\" = {v}\n"
        ));
        parse(&text).unwrap_or_else(|e| panic!("{v}: {e}"));
    }
}

#[test]
fn steps_as_array_of_tables_with_task_header() {
    let s = parse(
        r#"[machine]
memory = "512M"
[task.main]
instances = 2

[[task.main.steps]]
op = "mmap"
name = "heap"
kind = "anon"
size = "8M"

[[task.main.steps]]
op = "touch"
region = "heap"
"#,
    )
    .unwrap();
    let t = &s.tasks[0];
    assert_eq!(t.instances, 2);
    assert_eq!(t.steps.iter().map(|s| s.line).collect::<Vec<_>>(), [6, 12]);
}

#[test]
fn reference_example_parses() {
    let doc = include_str!("../../../docs/spec.md");
    let start = doc
        .find("```toml\n")
        .expect("docs/spec.md opens with a toml example")
        + 8;
    let len = doc[start..].find("```").unwrap();
    let s = parse(&doc[start..start + len]).unwrap_or_else(|e| panic!("docs/spec.md example: {e}"));
    assert_eq!(s.tasks[0].steps.len(), 5);
    assert!(s.features.shmem_skip_swapcache);
}

#[test]
fn example_file_parses() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/anon_seq.toml");
    let s = mmsim_spec::load(std::path::Path::new(path), &[]).unwrap();
    assert_eq!(s.cgroups[0].memory_max.pages(), Some(25600));
    assert_eq!(s.tasks[0].steps.len(), 7);
}

#[test]
fn swap_priority_outside_swapon_range_is_refused() {
    let text = "[machine]\nmemory = \"512M\"\n[[swap]]\ndevice = \"zram\"\nsize = \"64M\"\npriority = -1\n[task.t]\nsteps = []\n";
    let e = mmsim_spec::parse_str(text, "t.toml", &[]).unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (6, "swap[0].priority"));
    assert!(
        e.message.contains("-1") && e.message.contains("0 to 32767"),
        "{}",
        e.message
    );
}

// ------------------------------------------------- fork, madvise, swapoff

#[test]
fn fork_wait_madvise_swapoff_parse() {
    let s = parse(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1G"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "fork", steps = [
      { op = "touch", region = "heap", write = 1.0 },
      { op = "munmap", region = "heap" },
  ] },
  { op = "wait" },
  { op = "madvise", region = "heap", advice = "pageout", offset = "4M", length = "1M" },
  { op = "swapoff", device = 0 },
  { op = "swapon", device = 0 },
]
"#,
    )
    .unwrap();
    let ops = &s.tasks[0].steps;
    assert!(matches!(&ops[1].op, Op::Fork { steps } if steps.len() == 2));
    assert_eq!(ops[2].op, Op::Wait);
    assert_eq!(
        ops[3].op,
        Op::Madvise {
            region: "heap".into(),
            advice: mmsim_spec::Advice::Pageout,
            offset: 1024,
            length: Some(256),
        }
    );
    assert_eq!(ops[4].op, Op::Swapoff { device: 0 });
    assert_eq!(ops[5].op, Op::Swapon { device: 0 });
}

#[test]
fn forked_child_munmap_leaves_parent_region() {
    // The child's munmap is its own: the parent still has the region.
    parse(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "fork", steps = [ { op = "munmap", region = "heap" } ] },
  { op = "touch", region = "heap" },
]
"#,
    )
    .unwrap();
}

#[test]
fn forked_child_region_unknown() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "fork", steps = [ { op = "touch", region = "heap" } ] },
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn madvise_advice_garbage() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "madvise", region = "heap", advice = "forget" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].advice",
        &["\"forget\"", "pageout, cold, dontneed, free, willneed"],
    );
}

#[test]
fn madvise_range_outside_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "madvise", region = "heap", advice = "cold", offset = "4M", length = "8M" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].length",
        &["1024..3072", "2048 pages"],
    );
}

#[test]
fn madvise_missing_advice() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "madvise", region = "heap" },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].advice", &["pageout"]);
}

#[test]
fn swapoff_without_that_device() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1G"
[task.main]
steps = [ { op = "swapoff", device = 1 } ]
"#,
    );
    check(&e, 7, "task.main.steps[0].device", &["found 1", "0 to 0"]);
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [ { op = "swapon", device = 0 } ]
"#,
    );
    check(
        &e,
        4,
        "task.main.steps[0].device",
        &["found 0", "none is defined"],
    );
}

#[test]
fn wait_takes_no_keys() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [ { op = "wait", for = "child" } ]
"#,
    );
    check(&e, 4, "task.main.steps[0].for", &["for"]);
}

#[test]
fn kvstore_parses_with_defaults() {
    let s = parse(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "ram", kind = "anon", size = "64M" },
  { op = "kvstore", region = "ram", keys = 1000, value_size = "2K", requests = 5000 },
]
"#,
    )
    .unwrap();
    let Op::KvStore(kv) = &s.tasks[0].steps[1].op else {
        panic!("not a kvstore");
    };
    assert_eq!((kv.sets, kv.gets, kv.pipeline, kv.seed), (1, 10, 1, 0));
    assert_eq!(kv.value_size, 2048);
}

#[test]
fn kvstore_region_too_small() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "ram", kind = "anon", size = "1M" },
  { op = "kvstore", region = "ram", keys = 100000, value_size = "2K", requests = 110000 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].region",
        &["256 pages", "hash table of 100000 keys"],
    );
}

#[test]
fn kvstore_bad_ratio() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "ram", kind = "anon", size = "64M" },
  { op = "kvstore", region = "ram", keys = 10, value_size = "2K", requests = 5, ratio = "0:0" },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].ratio", &["\"0:0\"", "SETS:GETS"]);
}

// ------------------------------------------------------------ files, shmem

const TMPFS: &str = r#"[machine]
memory = "512M"
[[file]]
name = "data"
size = "16M"
on = "tmpfs"
"#;

#[test]
fn shmem_and_shared_anon_mappings() {
    let s = parse(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "shmem", file = "data", offset = "4M", size = "8M" }},
  {{ op = "mmap", name = "s", kind = "shared_anon", size = "1M" }},
]
"#
    ))
    .unwrap();
    assert_eq!(s.files.len(), 1);
    assert_eq!(s.files[0].size, 16 << 20);
    assert_eq!(
        s.tasks[0].steps[0].op,
        Op::Mmap {
            name: "m".into(),
            kind: MapKind::Shmem,
            pages: 2048,
            file: Some(0),
            offset: 1024,
            exec: false,
        }
    );
    assert!(matches!(
        s.tasks[0].steps[1].op,
        Op::Mmap {
            kind: MapKind::SharedAnon,
            file: None,
            ..
        }
    ));
}

#[test]
fn shmem_mapping_past_the_end_of_its_file() {
    let e = rejected(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "shmem", file = "data", offset = "12M", size = "8M" }},
]
"#
    ));
    check(
        &e,
        9,
        "task.main.steps[0].size",
        &["3072..5120", "4096 pages"],
    );
}

#[test]
fn shmem_mapping_of_an_unknown_file() {
    let e = rejected(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "shmem", file = "nope", size = "8M" }},
]
"#
    ));
    check(&e, 9, "task.main.steps[0].file", &["\"nope\"", "data"]);
    let e = rejected(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "shmem", size = "8M" }},
]
"#
    ));
    check(&e, 9, "task.main.steps[0].file", &["missing", "[[file]]"]);
}

#[test]
fn file_keys_only_with_shmem() {
    let e = rejected(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "anon", file = "data", size = "8M" }},
]
"#
    ));
    check(&e, 9, "task.main.steps[0].file", &["\"anon\"", "shmem"]);
}

#[test]
fn file_on_an_unknown_disk_and_huge_are_refused() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[file]]
name = "data"
size = "16M"
on = "nvme0"
"#,
    ));
    check(
        &e,
        6,
        "file[0].on",
        &[
            "\"nvme0\"",
            "\"tmpfs\" or the name of a [[disk]] (\"tmpfs\")",
        ],
    );
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[file]]
name = "data"
size = "16M"
on = "tmpfs"
huge = "madvise"
"#,
    ));
    check(
        &e,
        7,
        "file[0].huge",
        &[
            "found \"madvise\"",
            "one of \"never\", \"always\", \"within_size\", \"advise\"",
            "huge= mount option",
        ],
    );
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[file]]
name = "data"
size = "16M"
on = "tmpfs"
huge = true
"#,
    ));
    check(&e, 7, "file[0].huge", &["found true", "\"within_size\""]);
}

#[test]
fn tmpfs_huge_values_are_stored() {
    for (word, huge) in [
        ("never", TmpfsHuge::Never),
        ("always", TmpfsHuge::Always),
        ("within_size", TmpfsHuge::WithinSize),
        ("advise", TmpfsHuge::Advise),
    ] {
        let s = parse(&with_task(&format!(
            "[machine]\nmemory = \"512M\"\n[[file]]\nname = \"data\"\nsize = \"16M\"\non = \"tmpfs\"\nhuge = \"{word}\"\n"
        )))
        .unwrap();
        assert_eq!(s.files[0].huge, huge);
        assert_eq!(huge.name(), word);
    }
    // Left out: never, as tmpfs mounts default to.
    let s = parse(&with_task(
        "[machine]\nmemory = \"512M\"\n[[file]]\nname = \"data\"\nsize = \"16M\"\non = \"tmpfs\"\n",
    ))
    .unwrap();
    assert_eq!(s.files[0].huge, TmpfsHuge::Never);
}

#[test]
fn file_size_and_duplicate_names() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[file]]
name = "data"
size = 100
on = "tmpfs"
"#,
    ));
    check(&e, 5, "file[0].size", &["100 bytes", "4 KiB pages"]);
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[file]]
name = "data"
size = "4K"
on = "tmpfs"
[[file]]
name = "data"
size = "4K"
on = "tmpfs"
"#,
    ));
    check(&e, 8, "file[1].name", &["\"data\"", "already"]);
}

#[test]
fn read_write_fsync_drop_caches_parse() {
    let s = parse(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "write", file = "data", chunk = "64K" }},
  {{ op = "read", file = "data", offset = "4M", length = "4M" }},
  {{ op = "fsync", file = "data" }},
  {{ op = "drop_caches" }},
]
"#
    ))
    .unwrap();
    let ops: Vec<&Op> = s.tasks[0].steps.iter().map(|s| &s.op).collect();
    assert_eq!(
        *ops[0],
        Op::FileIo {
            write: true,
            file: 0,
            offset: 0,
            length: 4096,
            chunk: 16
        }
    );
    assert_eq!(
        *ops[1],
        Op::FileIo {
            write: false,
            file: 0,
            offset: 1024,
            length: 1024,
            chunk: 32
        }
    );
    assert_eq!(*ops[2], Op::Fsync { file: 0 });
    assert_eq!(*ops[3], Op::DropCaches);
}

#[test]
fn read_past_the_end_of_the_file() {
    let e = rejected(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "read", file = "data", offset = "12M", length = "8M" }},
]
"#
    ));
    check(
        &e,
        9,
        "task.main.steps[0].length",
        &["3072..5120", "4096 pages"],
    );
    let e = rejected(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "write", file = "nope" }},
]
"#
    ));
    check(&e, 9, "task.main.steps[0].file", &["\"nope\"", "data"]);
}

#[test]
fn swap_latency_overrides() {
    let s = parse(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "virtio"
size = "1G"
read_latency = "25us"
"#,
    ))
    .unwrap();
    assert_eq!(s.swap[0].read_latency, Some(25_000));
    assert_eq!(s.swap[0].write_latency, None);
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1G"
read_latency = "25us"
"#,
    ));
    check(
        &e,
        6,
        "swap[0].read_latency",
        &["zram", "nvme, virtio or hdd"],
    );
}

#[test]
fn stream_parses_with_a_default_window() {
    let s = parse(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "stream", file = "data" }},
  {{ op = "stream", file = "data", offset = "4M", window = "2M", work = "4us" }},
]
"#
    ))
    .unwrap();
    assert_eq!(
        s.tasks[0].steps[0].op,
        Op::Stream {
            file: 0,
            offset: 0,
            length: 4096,
            window: 8192,
            work: 0,
        }
    );
    assert_eq!(
        s.tasks[0].steps[1].op,
        Op::Stream {
            file: 0,
            offset: 1024,
            length: 3072,
            window: 512,
            work: 4000,
        }
    );
    let e = rejected(&format!(
        r#"{TMPFS}[task.main]
steps = [
  {{ op = "stream", file = "data", work = "fast" }},
]
"#
    ));
    assert!(e.to_string().contains("work"), "{e}");
    assert!(e.to_string().contains("fast"), "{e}");
}

#[test]
fn spawned_program_has_no_regions_of_its_launcher() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "spawn", steps = [ { op = "touch", region = "heap" } ] },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn access_hints_take_the_whole_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "madvise", region = "heap", advice = "sequential", offset = "4M" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].offset",
        &["\"sequential\"", "whole region"],
    );
}

// ---- the set step ---------------------------------------------------------

const SET_HEAD: &str =
    "[machine]\nmemory = \"256M\"\n[cgroup.w]\nmemory_max = \"max\"\n[task.t]\nsteps = [\n";

fn set_step(step: &str) -> String {
    format!("{SET_HEAD}  {step},\n]\n")
}

#[test]
fn set_steps_parse_to_their_settings() {
    use mmsim_spec::Setting;
    let one = |step: &str| -> Setting {
        let spec = parse(&set_step(step)).unwrap_or_else(|e| panic!("{e}"));
        match &spec.tasks[0].steps[0].op {
            Op::Set(s) => s.clone(),
            op => panic!("{op:?}"),
        }
    };
    assert_eq!(
        one(r#"{ op = "set", key = "cgroup.w.memory_max", value = "50M" }"#),
        Setting::MemoryMax {
            cgroup: "w".into(),
            limit: Limit::Bytes(50 << 20)
        }
    );
    assert_eq!(
        one(r#"{ op = "set", key = "cgroup.w.memory_high", value = "max" }"#),
        Setting::MemoryHigh {
            cgroup: "w".into(),
            limit: Limit::Max
        }
    );
    assert_eq!(
        one(r#"{ op = "set", key = 'sysctl."vm.swappiness"', value = 100 }"#),
        Setting::Swappiness(100)
    );
    assert_eq!(
        one(r#"{ op = "set", key = 'sysctl."vm.min_free_kbytes"', value = 8192 }"#),
        Setting::MinFreeKbytes(8192)
    );
    assert_eq!(
        one(r#"{ op = "set", key = 'sysfs."kernel/mm/swap/vma_ra_enabled"', value = "n" }"#),
        Setting::VmaRaEnabled(false)
    );
    let s = one(r#"{ op = "set", key = 'sysctl."vm.page-cluster"', value = 0 }"#);
    assert_eq!(
        s.knob(),
        Some(("sysctl:vm.page-cluster".into(), "0".into()))
    );
}

#[test]
fn set_steps_with_bad_keys_or_values_are_rejected_at_their_line() {
    let e = rejected(&set_step(
        r#"{ op = "set", key = "machine.memory", value = "1G" }"#,
    ));
    check(
        &e,
        7,
        "task.t.steps[0].key",
        &["machine.memory", "cgroup.NAME.memory_max"],
    );
    let e = rejected(&set_step(
        r#"{ op = "set", key = "cgroup.x.memory_max", value = "1G" }"#,
    ));
    check(
        &e,
        7,
        "task.t.steps[0].key",
        &["\"x\"", "[cgroup.NAME]", "w"],
    );
    let e = rejected(&set_step(
        r#"{ op = "set", key = 'sysctl."vm.swappiness"', value = 201 }"#,
    ));
    check(&e, 7, "task.t.steps[0].value", &["201", "0 to 200"]);
    let e = rejected(&set_step(
        r#"{ op = "set", key = 'sysctl."vm.dirty_ratio"', value = 5 }"#,
    ));
    check(&e, 7, "task.t.steps[0].key", &["vm.dirty_ratio"]);
    let e = rejected(&set_step(
        r#"{ op = "set", key = 'sysfs."kernel/mm/swap/vma_ra_enabled"', value = "maybe" }"#,
    ));
    check(&e, 7, "task.t.steps[0].value", &["boolean"]);
    let e = rejected(&set_step(r#"{ op = "set", key = "cgroup.w.memory_max" }"#));
    check(&e, 7, "task.t.steps[0].value", &["missing"]);
}

#[test]
fn shmem_thp_is_refused_on_5_10() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
kernel = "5.10"
[sysfs]
"kernel/mm/transparent_hugepage/shmem_enabled" = "force"
"#,
    ));
    check(
        &e,
        5,
        "sysfs.\"kernel/mm/transparent_hugepage/shmem_enabled\"",
        &["5.10", "6.1's shmem THP", "\"never\""],
    );
}

#[test]
fn a_declared_miss_names_a_preset_and_a_counter_of_the_tolerances() {
    let ok = parse(&with_task(
        r#"[machine]
memory = "512M"
[fidelity]
tolerance = { pgfault = 0.05 }
[fidelity.miss."5.10"]
pgfault = "why"
"#,
    ))
    .unwrap();
    assert_eq!(ok.fidelity.miss(Preset::V5_10, "pgfault"), Some("why"));
    assert_eq!(ok.fidelity.miss(Preset::V6_1, "pgfault"), None);
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[fidelity]
tolerance = { pgfault = 0.05 }
[fidelity.miss."5.15"]
pgfault = "why"
"#,
    ));
    check(
        &e,
        5,
        "fidelity.miss.\"5.15\"",
        &["5.15", "5.10, 6.1, 6.12, 7.3"],
    );
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[fidelity]
tolerance = { pgfault = 0.05 }
[fidelity.miss."5.10"]
pswpin = "why"
"#,
    ));
    check(
        &e,
        6,
        "fidelity.miss.\"5.10\".pswpin",
        &["pswpin", "tolerance"],
    );
}

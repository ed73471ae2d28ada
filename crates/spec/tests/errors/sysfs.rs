//! [sysfs]: THP, khugepaged, shmem, multi-size THP and MGLRU knobs, and which releases have them.

use super::*;

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

#[test]
fn zswap_parameters_take_6_1_values_and_are_written_enabled_last() {
    let s = parse(&with_task(
        "[machine]\nmemory = \"512M\"\nkernel = \"6.1\"\n[sysfs]\n\"module/zswap/parameters/enabled\" = \"Y\"\n\"module/zswap/parameters/zpool\" = \"zsmalloc\"\n\"module/zswap/parameters/max_pool_percent\" = 5\n",
    ))
    .expect("valid");
    let z = s.sysfs.zswap;
    assert!(z.configured && z.enabled && z.same_filled_pages_enabled);
    assert_eq!(
        (z.compressor, z.zpool.name(), z.max_pool_percent),
        ("lzo", "zsmalloc", 5)
    );
    let written: Vec<&str> = s
        .knobs
        .iter()
        .filter_map(|(k, _)| k.strip_prefix("sysfs:module/zswap/parameters/"))
        .collect();
    assert_eq!(written.last(), Some(&"enabled"));
    assert_eq!(
        written.len(),
        7,
        "every parameter, so a machine's own stay out"
    );
    // Without a zswap key nothing of zswap is written.
    let s = parse(&with_task("[machine]\nmemory = \"512M\"\n")).expect("valid");
    assert!(!s.sysfs.zswap.configured);
    assert!(!s.knobs.iter().any(|(k, _)| k.contains("zswap")));
}

#[test]
fn zswap_parameters_out_of_range_unknown_or_on_other_presets_are_refused() {
    let head = |key: &str, value: &str, kernel: &str| {
        with_task(&format!(
            "[machine]\nmemory = \"512M\"\nkernel = \"{kernel}\"\n[sysfs]\n\"module/zswap/parameters/{key}\" = {value}\n"
        ))
    };
    let key = |k: &str| format!("sysfs.\"module/zswap/parameters/{k}\"");
    let e = rejected(&head("enabled", "\"maybe\"", "6.1"));
    check(&e, 5, &key("enabled"), &["maybe", "boolean"]);
    let e = rejected(&head("compressor", "\"lzma\"", "6.1"));
    check(&e, 5, &key("compressor"), &["lzma", "\"lz4\""]);
    let e = rejected(&head("zpool", "\"z3fold\"", "6.1"));
    check(&e, 5, &key("zpool"), &["z3fold", "does not model", "zbud"]);
    let e = rejected(&head("max_pool_percent", "-1", "6.1"));
    check(&e, 5, &key("max_pool_percent"), &["-1", "percentage"]);
    let e = rejected(&head("shrinker_enabled", "true", "6.1"));
    check(
        &e,
        5,
        &key("shrinker_enabled"),
        &["Linux 6.1 does not have", "shrinker came in 6.8"],
    );
    let e = rejected(&head("bogus", "true", "6.1"));
    check(
        &e,
        5,
        &key("bogus"),
        &["6.1's zswap does not have", "accept_threshold_percent"],
    );
    let e = rejected(&head("enabled", "true", "5.10"));
    check(&e, 5, &key("enabled"), &["5.10", "6.1, 6.12 and 7.3"]);
    let e = rejected(&head("same_filled_pages_enabled", "true", "6.12"));
    check(
        &e,
        5,
        &key("same_filled_pages_enabled"),
        &["Linux 6.12 does not have", "6.10"],
    );
    let e = rejected(&head("zpool", "\"zsmalloc\"", "7.3"));
    check(
        &e,
        5,
        &key("zpool"),
        &["Linux 7.3 does not have", "zsmalloc only"],
    );
    let e = rejected(&head("shrinker_enabled", "\"maybe\"", "7.3"));
    check(&e, 5, &key("shrinker_enabled"), &["maybe", "boolean"]);
    let s = parse(&head("shrinker_enabled", "true", "7.3")).expect("valid");
    assert!(s.sysfs.zswap.shrinker_enabled);
    assert!(s.knobs.contains(&(
        "sysfs:module/zswap/parameters/shrinker_enabled".into(),
        "Y".into()
    )));
    let e = rejected(&head("bogus", "1", "7.3"));
    check(
        &e,
        5,
        &key("bogus"),
        &["7.3's zswap does not have", "shrinker_enabled"],
    );
    // 6.12 writes its own parameters: no same-filled ones, its shrinker's.
    let s = parse(&head("enabled", "true", "6.12")).expect("valid");
    let written: Vec<&str> = s
        .knobs
        .iter()
        .filter_map(|(k, _)| k.strip_prefix("sysfs:module/zswap/parameters/"))
        .collect();
    assert_eq!(
        written,
        [
            "compressor",
            "zpool",
            "max_pool_percent",
            "accept_threshold_percent",
            "shrinker_enabled",
            "enabled"
        ]
    );
    assert_eq!(s.sysfs.zswap.zpool, mmsim_spec::Zpool::Zsmalloc);
}

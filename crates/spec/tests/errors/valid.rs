//! Valid specs parse to the right values and defaults.

use super::*;

pub(super) const FULL: &str = r#"# every section
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
            content: None,
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
            content: None,
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
            content: None,
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
    for k in SYSCTLS {
        let name = k.name;
        for v in [k.min, k.max] {
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
    let doc = include_str!("../../../../docs/spec.md");
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

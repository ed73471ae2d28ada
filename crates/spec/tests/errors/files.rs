//! [[file]]s on tmpfs, shmem mappings, read/write/fsync and stream steps.

use super::*;

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
            content: None,
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

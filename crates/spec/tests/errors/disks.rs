//! [[disk]]s, the files on them and their mappings.

use super::*;

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
            content: None,
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

//! [[swap]] devices and the swap readahead knobs.

use super::*;

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
fn percpu_pagelist_high_fraction_below_the_kernels_least() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.percpu_pagelist_high_fraction" = 7
"#,
    ));
    check(
        &e,
        4,
        "sysctl.\"vm.percpu_pagelist_high_fraction\"",
        &["7", "8 to 2147483647"],
    );
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

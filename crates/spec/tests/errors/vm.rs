//! `[vm.NAME]`: guests, each a spec of its own under the host's.

use super::*;

/// A host with one guest; `host` is the guest's [vm.g1.host] body and
/// `extra` more of the guest's sections.
fn guest(host: &str, extra: &str) -> String {
    format!(
        r#"[machine]
memory = "1G"
cpus = 2
[cgroup.vms]
memory_max = "64M"
[vm.g1.host]
{host}
[vm.g1.machine]
memory = "256M"
{extra}
[vm.g1.task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "8M" }},
  {{ op = "touch", region = "heap" }},
]
"#
    )
}

#[test]
fn a_guest_parses_as_a_spec_of_its_own() {
    let s = parse(&guest("cgroup = \"vms\"\naccel = \"tcg\"", "")).unwrap();
    // The host needs no tasks of its own.
    assert!(s.tasks.is_empty());
    assert_eq!(s.vms.len(), 1);
    let v = &s.vms[0];
    assert_eq!(v.name, "g1");
    assert_eq!(v.cgroup, Some(0));
    assert_eq!(v.accel, mmsim_spec::Accel::Tcg);
    assert_eq!(v.guest.machine.memory, 256 << 20);
    assert_eq!(v.guest.machine.cpus, 1);
    assert_eq!(v.guest.tasks[0].name, "main");
    // Run-time errors name a guest's steps under it.
    assert_eq!(v.guest.tasks[0].steps[1].key, "vm.g1.task.main.steps[1]");
    assert!(v.guest.vms.is_empty());
    // QEMU's own memory, by default as measured (docs/model.md "Guests").
    assert_eq!(v.vmm_memory, 27 << 20);
    assert_eq!(v.tb_size, 16 << 20);
}

#[test]
fn the_vmms_memory_is_sized_and_tcgs_cache_in_whole_mib() {
    let s = parse(&guest(
        "accel = \"tcg\"\nvmm_memory = 5000\ntb_size = \"32M\"",
        "",
    ))
    .unwrap();
    assert_eq!(s.vms[0].vmm_memory, 8192, "rounded up to pages");
    assert_eq!(s.vms[0].tb_size, 32 << 20);
    for bad in ["\"1500K\"", "0", "\"2G\""] {
        let e = rejected(&guest(&format!("accel = \"tcg\"\ntb_size = {bad}"), ""));
        check(
            &e,
            8,
            "vm.g1.host.tb_size",
            &["whole number of MiB", "tb-size"],
        );
    }
    let e = rejected(&guest("accel = \"tcg\"\nvmm_memory = \"lots\"", ""));
    check(&e, 8, "vm.g1.host.vmm_memory", &["lots"]);
}

#[test]
fn kvm_has_no_translation_cache_and_needs_the_classic_lru_on_the_host() {
    let s = parse(&guest("accel = \"kvm\"", "")).unwrap();
    assert_eq!(s.vms[0].accel, mmsim_spec::Accel::Kvm);
    assert_eq!(s.vms[0].tb_size, 0, "QEMU has no TCG cache under KVM");
    assert_eq!(s.vms[0].vmm_memory, 27 << 20);
    let e = rejected(&guest("accel = \"kvm\"\ntb_size = \"16M\"", ""));
    check(&e, 8, "vm.g1.host.tb_size", &["kvm", "translation cache"]);
    let e = rejected(&guest("accel = \"xen\"", ""));
    check(&e, 7, "vm.g1.host.accel", &["xen", "tcg", "kvm"]);
    // The host's multi-gen LRU walks page tables a KVM guest's accesses
    // leave untouched.
    let mglru = guest("accel = \"kvm\"", "").replace(
        "[cgroup.vms]",
        "[sysfs]\n\"kernel/mm/lru_gen/enabled\" = \"y\"\n[cgroup.vms]",
    );
    let e = rejected(&mglru);
    check(
        &e,
        9,
        "vm.g1.host.accel",
        &["multi-gen LRU", "lru_gen/enabled"],
    );
    let tcg = mglru.replace("accel = \"kvm\"", "accel = \"tcg\"");
    assert!(parse(&tcg).is_ok(), "TCG's accesses are the VMM's own");
}

#[test]
fn the_host_table_is_required() {
    let text = guest("accel = \"tcg\"", "").replace("[vm.g1.host]\naccel = \"tcg\"\n", "");
    let e = rejected(&text);
    check(&e, 6, "vm.g1.host", &["host", "tcg"]);
}

#[test]
fn an_unknown_host_cgroup_is_named() {
    let e = rejected(&guest("cgroup = \"nope\"\naccel = \"tcg\"", ""));
    check(&e, 7, "vm.g1.host.cgroup", &["nope", "[cgroup.NAME]"]);
}

#[test]
fn a_guest_error_names_its_key_under_the_guest() {
    let e = rejected(&guest("accel = \"tcg\"", "").replace("size = \"8M\"", "size = \"8Q\""));
    check(&e, 13, "vm.g1.task.main.steps[0].size", &["8Q"]);
}

#[test]
fn guests_of_several_vcpus_are_refused() {
    let e = rejected(&guest("accel = \"tcg\"", "cpus = 4"));
    check(&e, 8, "vm.g1.machine", &["4 vCPUs", "cpus = 1"]);
}

#[test]
fn a_guest_block_device_without_its_host_file_is_refused() {
    let e = rejected(&guest(
        "accel = \"tcg\"",
        "[[vm.g1.swap]]\ndevice = \"nvme\"\nsize = \"64M\"",
    ));
    check(&e, 10, "vm.g1.swap", &["block device", "host_file", "zram"]);
}

#[test]
fn guests_do_not_nest() {
    let e = rejected(&guest(
        "accel = \"tcg\"",
        "[vm.g1.vm.inner.host]\naccel = \"tcg\"",
    ));
    check(&e, 10, "vm.g1.vm", &["vm", "host", "task"]);
}

#[test]
fn a_guest_block_device_names_its_host_file() {
    let text = guest(
        "accel = \"tcg\"",
        "[[vm.g1.swap]]\ndevice = \"virtio\"\nsize = \"64M\"\nhost_file = \"img\"",
    )
    .replacen(
        "[cgroup.vms]",
        "[[file]]\nname = \"img\"\nsize = \"64M\"\non = \"tmpfs\"\n[cgroup.vms]",
        1,
    );
    let s = parse(&text).unwrap();
    assert_eq!(s.vms[0].swap_files, [Some(0)]);
    assert!(s.vms[0].disk_files.is_empty());
}

#[test]
fn a_host_file_smaller_than_its_device_is_refused() {
    let text = guest(
        "accel = \"tcg\"",
        "[[vm.g1.swap]]\ndevice = \"virtio\"\nsize = \"64M\"\nhost_file = \"img\"",
    )
    .replacen(
        "[cgroup.vms]",
        "[[file]]\nname = \"img\"\nsize = \"32M\"\non = \"tmpfs\"\n[cgroup.vms]",
        1,
    );
    let e = rejected(&text);
    check(&e, 17, "vm.g1.swap[0].host_file", &["32 MiB", "64 MiB"]);
}

#[test]
fn an_unknown_host_file_is_named() {
    let e = rejected(&guest(
        "accel = \"tcg\"",
        "[[vm.g1.swap]]\ndevice = \"virtio\"\nsize = \"64M\"\nhost_file = \"nope\"",
    ));
    check(&e, 13, "vm.g1.swap[0].host_file", &["nope", "[[file]]"]);
}

#[test]
fn the_host_s_own_devices_take_no_host_file() {
    let e = rejected(&with_task(
        "[machine]\nmemory = \"512M\"\n[[swap]]\ndevice = \"virtio\"\nsize = \"64M\"\nhost_file = \"x\"\n",
    ));
    check(&e, 6, "swap[0].host_file", &["host_file", "guest"]);
}

#[test]
fn a_guest_named_like_a_host_task_is_refused() {
    // The host runs guest g1 as its VMM task "g1".
    let text =
        guest("accel = \"tcg\"", "").replace("[cgroup.vms]", "[task.g1]\nsteps = []\n[cgroup.vms]");
    let e = rejected(&text);
    check(&e, 8, "vm.g1", &["g1", "[task.g1]", "VMM task"]);
}

/// A guest swap device on host file `img` with `extra` keys.
fn with_cache(extra: &str) -> String {
    guest(
        "accel = \"tcg\"",
        &format!("[[vm.g1.swap]]\ndevice = \"virtio\"\nsize = \"64M\"\n{extra}"),
    )
    .replacen(
        "[cgroup.vms]",
        "[[file]]\nname = \"img\"\nsize = \"64M\"\non = \"tmpfs\"\n[cgroup.vms]",
        1,
    )
}

#[test]
fn a_guest_device_takes_qemus_cache_mode_beside_its_host_file() {
    let s = parse(&with_cache("host_file = \"img\"\ncache = \"none\"")).unwrap();
    assert_eq!(s.vms[0].backings().0, [Some((0, true))]);
    let s = parse(&with_cache("host_file = \"img\"")).unwrap();
    assert_eq!(s.vms[0].backings().0, [Some((0, false))]);
    let e = rejected(&with_cache("host_file = \"img\"\ncache = \"unsafe\""));
    check(
        &e,
        18,
        "vm.g1.swap[0].cache",
        &["\"unsafe\"", "writeback or none"],
    );
    let e = rejected(&with_cache("cache = \"none\""));
    check(&e, 17, "vm.g1.swap[0].cache", &["without host_file"]);
}

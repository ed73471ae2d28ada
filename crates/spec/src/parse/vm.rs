//! `[vm.NAME]`: a guest, a whole spec of its own (machine, kernel, swap,
//! cgroups, tasks) run by a VMM process on the host, and `[vm.NAME.host]`:
//! how the host runs it (its cgroup, the accelerator).

use super::fields::{size, string, valid_name, Fields, NAME_WORDS};
use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::tree::{join, Node, Table, Val};

/// The host's settings of a guest.
const HOST_KEYS: &[&str] = &["cgroup", "accel", "vmm_memory", "tb_size"];

/// QEMU's own anonymous memory besides guest RAM and the translation
/// cache, by default: measured, see `Vm::vmm_memory`.
pub const VMM_MEMORY_DEFAULT: u64 = 27 << 20;
/// TCG's translation cache by default (`Vm::tb_size`).
pub const TB_SIZE_DEFAULT: u64 = 16 << 20;

/// Every `[vm.NAME]` table, each built by `build_spec` (a spec's own
/// builder, given the guest's sections) and checked against what the
/// simulator models of guests so far.
/// What a guest's table is checked against in the host's spec.
pub(super) struct HostSpec<'a> {
    pub cgroups: &'a [Cgroup],
    pub files: &'a [File],
    pub tasks: &'a [Task],
    /// The host boots with the multi-gen LRU on.
    pub lru_gen: bool,
}

pub(super) fn build_vms(
    rep: &Reporter,
    node: &Node,
    host_spec: HostSpec,
    build_spec: fn(&Reporter, &Node, &[&str]) -> Result<Spec, SpecError>,
) -> Result<Vec<Vm>, SpecError> {
    let f = Fields::of(rep, "vm".into(), node, "a table of guests, such as [vm.g1]")?;
    let mut vms = Vec::new();
    for (name, e) in &f.table.entries {
        let key = join("vm", name);
        if !valid_name(name) {
            return Err(rep.at(
                e.key_at,
                key,
                format!("found the guest name {name:?}, expected {NAME_WORDS}"),
            ));
        }
        // The host runs the guest as a task named after it (its VMM).
        if host_spec.tasks.iter().any(|t| &t.name == name) {
            return Err(rep.at(
                e.key_at,
                key,
                format!("found the guest name {name:?}, which a host [task.{name}] has; expected a name of its own: the host runs the guest as its VMM task, named after it"),
            ));
        }
        let g = Fields::of(
            rep,
            key.clone(),
            &e.node,
            "a guest's table, such as [vm.g1]",
        )?;
        let host = build_host(rep, &g, &host_spec)?;
        // The guest's sections without `host`, built as a spec of its own;
        // its errors name their keys under the guest's.
        let mut table = Table::default();
        for (k, v) in &g.table.entries {
            if k != "host" {
                table.entries.insert(k.clone(), v.clone());
            }
        }
        let guest_node = Node {
            val: Val::Table(table),
            at: e.node.at,
        };
        let guest = build_spec(rep, &guest_node, super::GUEST_SECTIONS).map_err(|mut err| {
            err.key = match err.key.is_empty() {
                true => key.clone(),
                false => format!("{key}.{}", err.key),
            };
            err
        })?;
        check_modelled(rep, &g, &guest)?;
        let mut guest = guest;
        for t in &mut guest.tasks {
            prefix_keys(&mut t.steps, &key);
        }
        let backing = |dev: &Option<(String, usize)>, size: u64, what: String| {
            backing_file(rep, &key, dev, size, &what, host_spec.files)
        };
        let swap_files = (guest.swap.iter().enumerate())
            .map(|(i, s)| backing(&s.host_file, s.size, format!("swap[{i}]")))
            .collect::<Result<_, _>>()?;
        let disk_files = (guest.disks.iter().enumerate())
            .map(|(i, d)| backing(&d.host_file, d.size, format!("disk[{i}]")))
            .collect::<Result<_, _>>()?;
        vms.push(Vm {
            name: name.clone(),
            cgroup: host.cgroup,
            accel: host.accel,
            vmm_memory: host.vmm_memory,
            tb_size: host.tb_size,
            guest: Box::new(guest),
            swap_files,
            disk_files,
        });
    }
    Ok(vms)
}

/// What `[vm.NAME.host]` says.
struct Host {
    cgroup: Option<usize>,
    accel: Accel,
    vmm_memory: u64,
    tb_size: u64,
}

/// `[vm.NAME.host]`: the VMM process's cgroup on the host, its
/// accelerator and its own memory.
fn build_host(rep: &Reporter, g: &Fields, host_spec: &HostSpec) -> Result<Host, SpecError> {
    let node = g.require(
        "host",
        "a [vm.NAME.host] table saying how the host runs the guest, e.g. accel = \"tcg\"",
    )?;
    let h = Fields::of(rep, g.path("host"), node, "a table, such as [vm.g1.host]")?;
    h.only(HOST_KEYS, "a [vm.NAME.host] table")?;
    let cgroup = match h.get("cgroup") {
        None => None,
        Some(v) => {
            let key = h.path("cgroup");
            let name = string(rep, v, &key, "the name of a host [cgroup.NAME]")?;
            match host_spec.cgroups.iter().position(|c| c.name == name) {
                Some(i) => Some(i),
                None => {
                    return Err(rep.at(
                        v.at,
                        key,
                        format!(
                            "found the cgroup {name:?}, which the host's spec does not define; expected one of its [cgroup.NAME] tables"
                        ),
                    ))
                }
            }
        }
    };
    let key = h.path("accel");
    let v = h.require("accel", "\"tcg\" or \"kvm\"")?;
    let accel = match string(rep, v, &key, "\"tcg\" or \"kvm\"")? {
        "tcg" => Accel::Tcg,
        "kvm" => Accel::Kvm,
        other => {
            return Err(rep.at(
                v.at,
                key,
                format!("found {other:?}, expected \"tcg\" (QEMU's software MMU) or \"kvm\" (hardware virtualization with EPT)"),
            ))
        }
    };
    // 6.1's multi-gen LRU ages by walking the host's page tables, whose
    // accessed bits a guest under KVM does not set (its accesses set the
    // EPT entries'; only folio_referenced asks KVM, through the MMU
    // notifier): not modelled.
    if accel == Accel::Kvm && host_spec.lru_gen {
        return Err(rep.at(
            v.at,
            key,
            "found \"kvm\" on a host whose multi-gen LRU is on; expected the classic LRU on the host (sysfs kernel/mm/lru_gen/enabled = 0): the multi-gen LRU's page-table walk does not see a KVM guest's accesses, which mmsim does not model yet",
        ));
    }
    let vmm_memory = match h.get("vmm_memory") {
        None => VMM_MEMORY_DEFAULT,
        Some(v) => size(rep, v, &h.path("vmm_memory"))?.next_multiple_of(crate::PAGE_SIZE),
    };
    let tb_size = match (h.get("tb_size"), accel) {
        // QEMU under KVM runs guest code on the CPU: no translation cache.
        (None, Accel::Kvm) => 0,
        (None, Accel::Tcg) => TB_SIZE_DEFAULT,
        (Some(v), Accel::Kvm) => {
            return Err(rep.at(
                v.at,
                h.path("tb_size"),
                "found tb_size with accel = \"kvm\"; expected none: tb_size is TCG's translation cache, which QEMU does not have under KVM",
            ))
        }
        (Some(v), Accel::Tcg) => {
            let b = size(rep, v, &h.path("tb_size"))?;
            // QEMU's -accel tcg,tb-size= is in MiB, at least 1.
            if b == 0 || !b.is_multiple_of(1 << 20) || b > 1 << 30 {
                return Err(rep.at(
                    v.at,
                    h.path("tb_size"),
                    format!("found {b} bytes, expected a whole number of MiB from 1M to 1G (QEMU's -accel tcg,tb-size= in MiB)"),
                ));
            }
            b
        }
    };
    Ok(Host {
        cgroup,
        accel,
        vmm_memory,
        tb_size,
    })
}

/// The host file backing a guest's block device (`host_file`, written at
/// `dev.1`): a host `[[file]]` of at least the device's size.
fn backing_file(
    rep: &Reporter,
    vm_key: &str,
    dev: &Option<(String, usize)>,
    size: u64,
    what: &str,
    host_files: &[File],
) -> Result<Option<usize>, SpecError> {
    let Some((name, line)) = dev else {
        return Ok(None);
    };
    let err = |message: String| SpecError {
        file: rep.file.to_string(),
        line: *line,
        column: 0,
        key: format!("{vm_key}.{what}.host_file"),
        message,
    };
    let Some(i) = host_files.iter().position(|f| &f.name == name) else {
        return Err(err(format!(
            "found the file {name:?}, which the host's spec does not define; expected the name of a host [[file]]"
        )));
    };
    if host_files[i].size < size {
        return Err(err(format!(
            "found the host file {name:?} of {} MiB backing a device of {} MiB; expected a file at least the device's size",
            host_files[i].size >> 20,
            size >> 20
        )));
    }
    Ok(Some(i))
}

/// What guests may not have yet, each refused by its key: more than one
/// vCPU (the VMM is one host thread), and a block device without the host
/// file that backs it (`host_file`).
fn check_modelled(rep: &Reporter, g: &Fields, guest: &Spec) -> Result<(), SpecError> {
    let refuse = |section: &str, message: String| {
        let at = g.get(section).map_or(g.at, |n| n.at);
        Err(rep.at(at, g.path(section), message))
    };
    if guest.machine.cpus != 1 {
        return refuse(
            "machine",
            format!(
                "found a guest of {} vCPUs; expected cpus = 1: mmsim runs a guest as one VMM thread on the host so far",
                guest.machine.cpus
            ),
        );
    }
    // A RAM disk (brd) is guest kernel memory; any other disk is virtio-blk
    // on a host file.
    let ram = |d: &Disk| d.kind == SwapKind::Ram;
    if let Some(i) = (guest.disks.iter()).position(|d| !ram(d) && d.host_file.is_none()) {
        return refuse(
            "disk",
            format!("found the guest's [[disk]] number {} without host_file; expected host_file = \"NAME\", the host [[file]] backing it (virtio-blk on a host file)", i + 1),
        );
    }
    if let Some(i) = (guest.disks.iter()).position(|d| ram(d) && d.host_file.is_some()) {
        return refuse(
            "disk",
            format!("found host_file on the guest's RAM disk number {}, which lives in the guest's memory; expected host_file only on nvme, virtio or hdd", i + 1),
        );
    }
    if let Some(i) =
        (guest.swap.iter()).position(|s| s.kind != SwapKind::Zram && s.host_file.is_none())
    {
        return refuse(
            "swap",
            format!("found the guest's [[swap]] number {} on a block device without host_file; expected host_file = \"NAME\", the host [[file]] backing it (or device = \"zram\", which lives in the guest's RAM)", i + 1),
        );
    }
    if let Some(i) =
        (guest.swap.iter()).position(|s| s.kind == SwapKind::Zram && s.host_file.is_some())
    {
        return refuse(
            "swap",
            format!("found host_file on the guest's zram [[swap]] number {}, which lives in the guest's RAM; expected host_file only on a block device", i + 1),
        );
    }
    Ok(())
}

/// Every step's key under the guest's (`vm.NAME.task.T.steps[i]`), so a
/// run-time error names it as the parser's errors do.
fn prefix_keys(steps: &mut [Step], vm_key: &str) {
    for s in steps {
        s.key = format!("{vm_key}.{}", s.key);
        if let Some(body) = s.op.body_mut() {
            prefix_keys(body, vm_key);
        }
    }
}

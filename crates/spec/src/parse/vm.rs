//! `[vm.NAME]`: a guest, a whole spec of its own (machine, kernel, swap,
//! cgroups, tasks) run by a VMM process on the host, and `[vm.NAME.host]`:
//! how the host runs it (its cgroup, the accelerator).

use super::fields::{string, valid_name, Fields, NAME_WORDS};
use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::tree::{join, Node, Table, Val};

/// The host's settings of a guest.
const HOST_KEYS: &[&str] = &["cgroup", "accel"];

/// Every `[vm.NAME]` table, each built by `build_spec` (a spec's own
/// builder, given the guest's sections) and checked against what the
/// simulator models of guests so far.
pub(super) fn build_vms(
    rep: &Reporter,
    node: &Node,
    host_cgroups: &[Cgroup],
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
        let g = Fields::of(
            rep,
            key.clone(),
            &e.node,
            "a guest's table, such as [vm.g1]",
        )?;
        let host = build_host(rep, &g, host_cgroups)?;
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
        vms.push(Vm {
            name: name.clone(),
            cgroup: host.0,
            accel: host.1,
            guest: Box::new(guest),
        });
    }
    Ok(vms)
}

/// `[vm.NAME.host]`: the VMM process's cgroup on the host and its
/// accelerator.
fn build_host(
    rep: &Reporter,
    g: &Fields,
    host_cgroups: &[Cgroup],
) -> Result<(Option<usize>, Accel), SpecError> {
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
            match host_cgroups.iter().position(|c| c.name == name) {
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
    let v = h.require("accel", "\"tcg\"")?;
    let accel = match string(rep, v, &key, "\"tcg\"")? {
        "tcg" => Accel::Tcg,
        "kvm" => {
            return Err(rep.at(
                v.at,
                key,
                "found \"kvm\", which mmsim does not model yet (EPT violations, VM exits and the MMU notifier's SPTE zaps are the next part of guests); expected \"tcg\" (QEMU's software MMU: the guest's RAM is touched by the VMM's own loads and stores)",
            ))
        }
        other => {
            return Err(rep.at(
                v.at,
                key,
                format!("found {other:?}, expected \"tcg\""),
            ))
        }
    };
    Ok((cgroup, accel))
}

/// What guests may not have yet, each refused by its key: more than one
/// vCPU (the VMM is one host thread), block devices (virtio-blk backed by
/// the host is the next part) and so swap or files on them.
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
    if !guest.disks.is_empty() {
        return refuse(
            "disk",
            "found a [[disk]] in a guest; expected none: virtio-blk devices backed by the host are not modelled yet (a guest may swap to zram, which lives in its RAM, and keep files on tmpfs)".into(),
        );
    }
    if let Some(i) = guest.swap.iter().position(|s| s.kind != SwapKind::Zram) {
        return refuse(
            "swap",
            format!("found the guest's [[swap]] number {} on a block device; expected kind = \"zram\": a guest's block devices are not modelled yet", i + 1),
        );
    }
    Ok(())
}

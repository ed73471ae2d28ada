//! TOML → validated [`Spec`]. Every error carries file, line and key.
//!
//! The file is parsed once into a [`tree`](crate::tree) that keeps where each
//! key and value is written; validation walks it section by section, key by
//! key, so an error names the exact key (`task.main.steps[1].write`) and the
//! line of its value.

//!
//! One module per part of the spec; the steps' ops are in `crate::ops`.

mod devices;
mod fidelity;
pub(crate) mod fields;
pub(crate) mod knobs;
mod machine;
pub(crate) mod regions;
mod syntax;
pub(crate) mod sysfs;
pub(crate) mod tasks;
mod vm;

use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::tree::{self, join, Node, Table, Val};
use devices::{build_disks, build_files, build_swaps};
use fidelity::build_fidelity;
use fields::Fields;
use knobs::build_sysctl;
use machine::{build_features, build_machine};
use syntax::toml_error;
use sysfs::build_sysfs;
use tasks::{build_cgroup, build_task};

pub(crate) use syntax::escape_controls;
pub(crate) use tasks::Locations;

/// The most accesses one `touch` step may make (`count`, or `passes` ×
/// pages): 2^48, far beyond any run, and small enough that every engine can
/// count them in 64 bits.
pub const MAX_ACCESSES: u64 = 1 << 48;

/// The largest `mmap`: 128 TiB, x86-64's user address space with 4-level
/// page tables.
pub const MAX_MAP_BYTES: u64 = 1 << 47;

/// Parses `text`, read from `file`, and applies `sets` (`--set KEY=VALUE`).
pub fn parse(text: &str, file: &str, sets: &[String]) -> Result<Spec, SpecError> {
    let mut rep = Reporter::new(file, text);
    let doc = toml_edit::ImDocument::parse(text).map_err(|e| toml_error(&rep, text, &e))?;
    let mut root = tree::from_document(&doc);
    rep.sets = crate::overrides::apply(&mut root, sets)?;
    build(&rep, &root)
}

/// The sections a spec may have.
const SECTIONS: &[&str] = &[
    "machine", "features", "sysctl", "sysfs", "swap", "disk", "file", "cgroup", "task", "fidelity",
    "vm",
];

/// The sections a guest's `[vm.NAME]` table may have: a spec's own, less
/// `vm` (no nesting) and `fidelity` (the host's), plus `host`.
const GUEST_SECTIONS: &[&str] = &[
    "host", "machine", "features", "sysctl", "sysfs", "swap", "disk", "file", "cgroup", "task",
];

fn build(rep: &Reporter, root: &Node) -> Result<Spec, SpecError> {
    build_at(rep, root, SECTIONS)
}

/// A spec from its top table `root`, whose sections must be `sections`:
/// the file's, or a guest's (`vm::build_vm`).
fn build_at(rep: &Reporter, root: &Node, sections: &[&str]) -> Result<Spec, SpecError> {
    let top = Fields::of(rep, String::new(), root, "a table")?;
    let guest = sections.contains(&"host");
    for (name, e) in &top.table.entries {
        if !sections.contains(&name.as_str()) {
            return Err(rep.at(
                e.key_at,
                join("", name),
                format!(
                    "found the section `{}`, which mmsim does not know; expected one of {}",
                    tree::quote(name),
                    sections.join(", ")
                ),
            ));
        }
    }
    let machine = match top.get("machine") {
        Some(m) => build_machine(rep, m)?,
        None => {
            return Err(rep.at(
                root.at,
                "machine",
                "the spec is missing the required table [machine]; expected one with at least `memory`, e.g. [machine] memory = \"512M\"",
            ))
        }
    };
    let mut knobs = Vec::new();
    let features = match top.get("features") {
        Some(f) => build_features(rep, f, machine.kernel)?,
        None => machine.kernel.features(),
    };
    let empty = Node {
        val: Val::Table(Table::default()),
        at: root.at,
    };
    let sysctl = build_sysctl(rep, top.get("sysctl").unwrap_or(&empty), &mut knobs)?;
    let sysfs = build_sysfs(
        rep,
        top.get("sysfs").unwrap_or(&empty),
        &mut knobs,
        &features,
        machine.kernel,
    )?;
    let swap = match top.get("swap") {
        Some(s) => build_swaps(rep, s, guest)?,
        None => Vec::new(),
    };
    let disks = match top.get("disk") {
        Some(d) => build_disks(rep, d, guest)?,
        None => Vec::new(),
    };
    let files = match top.get("file") {
        Some(f) => build_files(rep, f, &disks, machine.kernel)?,
        None => Vec::new(),
    };
    let mut cgroups = Vec::new();
    if let Some(c) = top.get("cgroup") {
        let f = Fields::of(
            rep,
            "cgroup".into(),
            c,
            "a table of cgroups, such as [cgroup.w]",
        )?;
        for (name, e) in &f.table.entries {
            cgroups.push(build_cgroup(rep, name, &e.node, machine.kernel)?);
        }
    }
    let mut tasks = Vec::new();
    if let Some(t) = top.get("task") {
        let f = Fields::of(
            rep,
            "task".into(),
            t,
            "a table of tasks, such as [task.main]",
        )?;
        for (name, e) in &f.table.entries {
            tasks.push(build_task(
                rep,
                name,
                &e.node,
                &cgroups,
                swap.len(),
                &files,
            )?);
        }
    }
    let fidelity = match top.get("fidelity") {
        Some(f) => build_fidelity(rep, f)?,
        None => Fidelity::default(),
    };
    let vms = match top.get("vm") {
        Some(v) => vm::build_vms(
            rep,
            v,
            vm::HostSpec {
                cgroups: &cgroups,
                files: &files,
                tasks: &tasks,
                lru_gen: sysfs.lru_gen != 0,
            },
            build_at,
        )?,
        None => Vec::new(),
    };
    if tasks.is_empty() && vms.is_empty() {
        return Err(SpecError {
            file: rep.file.to_string(),
            line: 0,
            column: 0,
            key: "task".into(),
            message: "found no tasks, expected at least one [task.NAME] table".into(),
        });
    }
    Ok(Spec {
        file: rep.file.to_string(),
        machine,
        features,
        sysctl,
        sysfs,
        knobs,
        swap,
        disks,
        files,
        cgroups,
        tasks,
        fidelity,
        vms,
    })
}

//! `[machine]` and `[features]`.

use super::fields::{boolean, integer, size, type_error, Fields};
use crate::error::{Reporter, SpecError};
use crate::model::{Features, Machine, Preset};
use crate::tree::{Node, Val};
use crate::units::PAGE_SIZE;

pub(super) fn build_machine(rep: &Reporter, node: &Node) -> Result<Machine, SpecError> {
    let m = Fields::of(rep, "machine".into(), node, "a table [machine]")?;
    m.only(&["memory", "cpus", "kernel", "hw_pte_young"], "[machine]")?;
    let mem = m.require(
        "memory",
        "a size such as \"512M\" (what the machine has, a whole number of 4 KiB pages, at least 64M)",
    )?;
    let memory = size(rep, mem, "machine.memory")?;
    if memory < 64 << 20 || !memory.is_multiple_of(PAGE_SIZE) {
        return Err(rep.at(
            mem.at,
            "machine.memory",
            format!("found {memory} bytes, expected a whole number of 4 KiB pages, at least 64M"),
        ));
    }
    let cpus = match m.get("cpus") {
        None => 1,
        Some(c) => integer(
            rep,
            c,
            "machine.cpus",
            1,
            1024,
            "a whole number from 1 to 1024",
        )? as u32,
    };
    let kernel = match m.get("kernel") {
        None => Preset::V6_1,
        Some(k) => match &k.val {
            Val::Str(s) if Preset::parse(s).is_some() => Preset::parse(s).expect("checked"),
            _ => {
                return Err(type_error(
                    rep,
                    k,
                    "machine.kernel",
                    "one of \"5.10\", \"6.1\", \"6.12\", \"7.3\" (the behaviour presets)",
                ))
            }
        },
    };
    let hw_pte_young = match m.get("hw_pte_young") {
        None => true,
        Some(b) => boolean(rep, b, "machine.hw_pte_young")?,
    };
    Ok(Machine {
        memory,
        cpus,
        kernel,
        hw_pte_young,
        memory_line: rep.line(mem.at),
    })
}

const FEATURES: &[&str] = &[
    "wp_reuse_swapcache",
    "shmem_skip_swapcache",
    "used_once_mapped_file",
    "batched_rmap_unmap",
    "swapoff_readahead_stats",
    "madv_pageout_split",
    "shmem_mthp",
    "shmem_large_swapout",
    "anon_mthp",
    "anon_mthp_swapout",
    "anon_large_swapin",
];

pub(super) fn build_features(
    rep: &Reporter,
    node: &Node,
    preset: Preset,
) -> Result<Features, SpecError> {
    let f = Fields::of(rep, "features".into(), node, "a table [features]")?;
    f.only(FEATURES, "[features]")?;
    let mut out = preset.features();
    for (name, e) in &f.table.entries {
        let v = boolean(rep, &e.node, &f.path(name))?;
        match name.as_str() {
            "wp_reuse_swapcache" => out.wp_reuse_swapcache = v,
            "shmem_skip_swapcache" => out.shmem_skip_swapcache = v,
            "used_once_mapped_file" => out.used_once_mapped_file = v,
            "batched_rmap_unmap" => out.batched_rmap_unmap = v,
            "madv_pageout_split" => out.madv_pageout_split = v,
            "shmem_mthp" => out.shmem_mthp = v,
            "shmem_large_swapout" => out.shmem_large_swapout = v,
            "anon_mthp" => out.anon_mthp = v,
            "anon_mthp_swapout" => out.anon_mthp_swapout = v,
            "anon_large_swapin" => out.anon_large_swapin = v,
            _ => out.swapoff_readahead_stats = v,
        }
    }
    Ok(out)
}

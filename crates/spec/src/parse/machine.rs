//! `[machine]` and `[features]`.

use super::fields::{boolean, duration, integer, size, type_error, Fields};
use crate::error::{Reporter, SpecError};
use crate::model::{Features, Machine, Preset, Topology};
use crate::tree::{Node, Val};
use crate::units::PAGE_SIZE;

pub(super) fn build_machine(rep: &Reporter, node: &Node) -> Result<Machine, SpecError> {
    let m = Fields::of(rep, "machine".into(), node, "a table [machine]")?;
    m.only(
        &[
            "memory",
            "cpus",
            "sockets",
            "cores_per_socket",
            "threads_per_core",
            "kernel",
            "hw_pte_young",
            "stats_flush_phase",
            "memory_bandwidth",
        ],
        "[machine]",
    )?;
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
    let (cpus, topology) = build_topology(rep, &m)?;
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
    let stats_flush_phase = match m.get("stats_flush_phase") {
        None => 0,
        Some(n) => {
            let key = "machine.stats_flush_phase";
            let t = duration(rep, n, key)?;
            if t >= STATS_FLUSH_PERIOD_NS {
                return Err(rep.at(
                    n.at,
                    key,
                    format!("found {t} ns, expected a duration under 2s, the period of the memcg statistics flush worker"),
                ));
            }
            t
        }
    };
    let memory_bandwidth = m
        .get("memory_bandwidth")
        .map(|n| {
            integer(
                rep,
                n,
                "machine.memory_bandwidth",
                1,
                MAX_MEMORY_BANDWIDTH,
                "a whole number of MB/s from 1 to 100000000 (a socket's memory bandwidth, as STREAM counts it)",
            )
            .map(|v| v as u64)
        })
        .transpose()?;
    Ok(Machine {
        memory,
        cpus,
        topology,
        kernel,
        hw_pte_young,
        stats_flush_phase,
        memory_bandwidth,
        memory_line: rep.line(mem.at),
    })
}

/// The largest `machine.memory_bandwidth`, MB/s: 100 TB/s a socket, far
/// above any machine's.
const MAX_MEMORY_BANDWIDTH: i64 = 100_000_000;

/// The memcg statistics flush worker's period (`FLUSH_TIME`, 2 s).
const STATS_FLUSH_PERIOD_NS: u64 = 2_000_000_000;

/// `cpus` and the three topology keys: any left out is derived from the
/// others (sockets and threads_per_core 1, cores_per_socket the rest),
/// and all four given must agree.
fn build_topology(rep: &Reporter, m: &Fields) -> Result<(u32, Topology), SpecError> {
    let key = |name: &str, hi: i64| -> Result<Option<u32>, SpecError> {
        m.get(name)
            .map(|n| {
                integer(
                    rep,
                    n,
                    &format!("machine.{name}"),
                    1,
                    hi,
                    &format!("a whole number from 1 to {hi}"),
                )
                .map(|v| v as u32)
            })
            .transpose()
    };
    let cpus = key("cpus", 1024)?;
    let sockets = key("sockets", 64)?;
    let cores = key("cores_per_socket", 1024)?;
    let threads = key("threads_per_core", 2)?;
    if sockets.is_none() && cores.is_none() && threads.is_none() {
        let cpus = cpus.unwrap_or(1);
        return Ok((cpus, Topology::flat(cpus)));
    }
    let (s, t) = (sockets.unwrap_or(1), threads.unwrap_or(1));
    let c = match (cores, cpus) {
        (Some(c), _) => c,
        (None, Some(n)) if n.is_multiple_of(s * t) => n / (s * t),
        (None, Some(n)) => {
            return Err(rep.at(
                m.req("cpus").at,
                "machine.cpus",
                format!("found {n}, expected a multiple of sockets × threads_per_core = {s} × {t}"),
            ))
        }
        (None, None) => 1,
    };
    let topology = Topology {
        sockets: s,
        cores_per_socket: c,
        threads_per_core: t,
    };
    let total = s as u64 * c as u64 * t as u64;
    let at = |name: &str| m.get(name).map(|n| n.at);
    let first = at("cpus")
        .or(at("sockets"))
        .or(at("cores_per_socket"))
        .or(at("threads_per_core"));
    if total > 1024 || cpus.is_some_and(|n| n as u64 != total) {
        let found = cpus.map_or(String::new(), |n| format!("cpus = {n} with "));
        return Err(rep.at(
            first.expect("a topology key is present"),
            "machine.cpus",
            format!(
                "found {found}sockets × cores_per_socket × threads_per_core = {s} × {c} × {t} = {total}, expected the product to be cpus and at most 1024"
            ),
        ));
    }
    Ok((total as u32, topology))
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
    "memcg_rstat_per_memcg",
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
            "memcg_rstat_per_memcg" => out.memcg_rstat_per_memcg = v,
            _ => out.swapoff_readahead_stats = v,
        }
    }
    Ok(out)
}

//! Helpers shared by the simulator's integration tests.
#![allow(dead_code)]

use mmsim_sim::machine_profile::CostProfile;
use mmsim_sim::output::RunResult;
use mmsim_sim::{run, RunOptions, SimError};

pub fn spec(text: &str) -> mmsim_spec::Spec {
    mmsim_spec::parse_str(text, "test.toml", &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs with the invariant checker on; panics on any simulator error.
pub fn run_checked(text: &str) -> RunResult {
    try_run(text).unwrap_or_else(|e| panic!("{e}"))
}

pub fn try_run(text: &str) -> Result<RunResult, SimError> {
    // The documented costs, whatever the default profile: tests that
    // assert times derive them from cost_model.rs's constants.
    try_run_with(text, CostProfile::reference())
}

/// As [`try_run`], with the costs `costs`.
pub fn try_run_with(text: &str, costs: CostProfile) -> Result<RunResult, SimError> {
    let r = run(
        &spec(text),
        RunOptions {
            check: true,
            costs,
            ..Default::default()
        },
    )?;
    assert_eq!(r.integrity.violations, 0, "content integrity violated");
    Ok(r)
}

/// As [`try_run`], with a compression table of the test's own in place
/// of the profile's measured one (zram's and zswap's stored lengths and
/// times per compressor and content kind).
pub fn try_run_compress(
    text: &str,
    table: mmsim_sim::machine_profile::CompressTable,
) -> Result<RunResult, SimError> {
    let costs = CostProfile {
        compress: std::sync::Arc::new(table),
        ..CostProfile::reference()
    };
    try_run_with(text, costs)
}

/// A compression table's entry: stored bytes, compress and decompress ns.
pub fn compress_entry(bytes: u64, c: u64, d: u64) -> mmsim_sim::machine_profile::CompressEntry {
    mmsim_sim::machine_profile::CompressEntry {
        bytes,
        compress_ns: c,
        decompress_ns: d,
        method: "test".into(),
    }
}

pub fn vm(r: &RunResult, name: &str) -> i64 {
    *r.vmstat
        .get(name)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

pub fn phase_vm(r: &RunResult, task: usize, phase: &str, name: &str) -> i64 {
    let p = r.tasks[task]
        .phases
        .iter()
        .find(|p| p.name == phase)
        .expect("phase");
    p.vmstat[name]
}

/// A machine, zram swap, a cgroup limited to `max`, and `steps`.
pub fn memcg_spec(max: &str, extra: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
[sysfs]
"kernel/mm/transparent_hugepage/enabled" = "never"
[[swap]]
device = "zram"
size = "512M"
[cgroup.w]
memory_max = "{max}"
{extra}
[task.main]
cgroup = "w"
steps = [
{steps}
]
"#
    )
}

/// A 16 MiB file on a virtio disk, read and written by one task in
/// cgroup `w` with memory.max `max`.
pub fn disk(max: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
[[disk]]
name = "d"
device = "virtio"
size = "256M"
[[file]]
name = "f"
size = "16M"
on = "d"
[cgroup.w]
memory_max = "{max}"
[task.main]
cgroup = "w"
steps = [
{steps}
]
"#
    )
}

//! The result of a run: the document `mmsim run --json` prints and the
//! native runner produces for a real kernel (docs/output.md).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Output format version.
    pub format: u32,
    pub engine: Engine,
    pub spec: String,
    /// Every knob in force: `section:key` → value.
    pub knobs: BTreeMap<String, String>,
    pub machine: MachineInfo,
    /// Simulated (or wall, for a real kernel) time of the whole run, ns.
    pub elapsed_ns: u64,
    pub tasks: Vec<TaskResult>,
    /// /proc/vmstat differences over the whole run, by kernel name.
    pub vmstat: BTreeMap<String, i64>,
    pub cgroups: BTreeMap<String, CgroupResult>,
    pub integrity: IntegrityResult,
    /// Simulated time per kernel function, ns (absent for a real kernel).
    pub profile: BTreeMap<String, u64>,
    /// The profile by call path, callers before callees (docs/output.md).
    #[serde(default)]
    pub profile_tree: Vec<ProfileRow>,
    /// Event histograms by site (docs/output.md); empty for a real kernel.
    #[serde(default)]
    pub histograms: BTreeMap<String, Vec<HistBucket>>,
}

/// One call path of the profile: `path` is the functions from the
/// outermost to this one, `;`-separated (folded-stack form).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ProfileRow {
    pub path: String,
    /// Time with this function innermost.
    pub self_ns: u64,
    /// Time in this function and its callees.
    pub total_ns: u64,
}

/// One power-of-two bucket: `count` events with `lo ≤ value < hi`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistBucket {
    pub lo: u64,
    pub hi: u64,
    pub count: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Engine {
    /// "mmsim" or "linux".
    pub name: String,
    /// mmsim's version, or the kernel's release.
    pub version: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MachineInfo {
    pub memory_bytes: u64,
    pub cpus: u32,
    /// MemTotal as the kernel reports it, bytes.
    pub mem_total_bytes: u64,
    /// Free memory when the workload started, bytes.
    pub mem_free_at_start_bytes: u64,
    pub min_free_kbytes: u64,
    pub zones: Vec<ZoneInfo>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ZoneInfo {
    pub name: String,
    pub managed_pages: u64,
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TaskResult {
    /// `name` for one instance, `name#i` for several.
    pub name: String,
    pub cgroup: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub phases: Vec<PhaseResult>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PhaseResult {
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    /// /proc/vmstat differences between the phase's start and end.
    pub vmstat: BTreeMap<String, i64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CgroupResult {
    /// memory.current when the workload's last step finished, bytes.
    pub memory_current: u64,
    /// Largest memory.current seen, bytes.
    pub memory_peak: u64,
    pub memory_swap_current: u64,
    /// memory.stat at the same moment (sizes in bytes).
    pub memory_stat: BTreeMap<String, i64>,
    pub memory_events: BTreeMap<String, u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntegrityResult {
    pub pages_checked: u64,
    pub violations: u64,
}

//! The memory controller the runner finds: cgroup v2 (the oracle's guest,
//! and any host whose v2 hierarchy has the memory controller), or the v1
//! memory hierarchy (hosts that still mount it, like the machines the
//! native oracle runs on). The spec speaks v2; v1 gets the closest
//! files, and what v1 cannot express is refused.
//!
//! v1 differences that matter here:
//! - `memory.max` is `memory.limit_in_bytes` ("max" is -1): the same hard
//!   limit on the group's memory, swap not included in either.
//! - `memory.high` has no v1 counterpart (memory.soft_limit_in_bytes acts
//!   only under global pressure, not as a throttle): a spec that sets it
//!   is refused.
//! - `memory.stat` has v1 names (`rss`, `cache`, `mapped_file`, …) and
//!   lacks the reclaim counters (`pgscan`, `pgsteal`, `workingset_*`):
//!   the names that have a v2 counterpart are renamed, the rest dropped.
//! - `memory.current` is `memory.usage_in_bytes`, `memory.peak`
//!   `memory.max_usage_in_bytes`, swap in use is `memory.memsw.usage_in_bytes`
//!   less usage (when swap accounting is on), `memory.events`' `max` is
//!   `memory.failcnt` and its `oom_kill` comes from `memory.oom_control`.

use std::collections::BTreeMap;
use std::fs;
use std::sync::OnceLock;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// cgroup v2 with the memory controller, at this root.
    V2(String),
    /// The v1 memory hierarchy, at this root.
    V1(String),
}

static MODE: OnceLock<Mode> = OnceLock::new();

/// The controller in use (detected once).
pub fn mode() -> &'static Mode {
    MODE.get_or_init(detect)
}

fn has_memory(controllers: &str) -> bool {
    fs::read_to_string(controllers)
        .map(|c| c.split_whitespace().any(|w| w == "memory"))
        .unwrap_or(false)
}

fn detect() -> Mode {
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        if has_memory(&format!("{root}/cgroup.controllers")) {
            return Mode::V2(root.into());
        }
    }
    if std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        return Mode::V1("/sys/fs/cgroup/memory".into());
    }
    // The guest mounts v2 at /sys/fs/cgroup itself: fall back to it.
    Mode::V2("/sys/fs/cgroup".into())
}

/// Whether a memory controller is there to use at all.
pub fn available() -> bool {
    match mode() {
        Mode::V2(root) => has_memory(&format!("{root}/cgroup.controllers")),
        Mode::V1(root) => std::path::Path::new(&format!("{root}/memory.limit_in_bytes")).exists(),
    }
}

/// The directory of the spec's cgroup `name`.
pub fn dir(name: &str) -> String {
    match mode() {
        Mode::V2(root) | Mode::V1(root) => format!("{root}/mmsim-{name}"),
    }
}

/// Makes the controller available to child groups (v2's subtree_control).
pub fn enable(write: impl Fn(&str, &str) -> Result<(), String>) -> Result<(), String> {
    match mode() {
        Mode::V2(root) => write(&format!("{root}/cgroup.subtree_control"), "+memory"),
        Mode::V1(_) => Ok(()),
    }
}

/// The files and values that set memory.max and memory.high, as the
/// controller in use takes them; Err for what it cannot express.
pub fn limits(max: Option<u64>, high: Option<u64>) -> Result<Vec<(&'static str, String)>, String> {
    let v2 = |l: Option<u64>| l.map_or("max".to_string(), |b| b.to_string());
    match mode() {
        Mode::V2(_) => Ok(vec![("memory.max", v2(max)), ("memory.high", v2(high))]),
        Mode::V1(_) => {
            if high.is_some() {
                return Err("memory_high: this kernel's memory controller is cgroup v1, which has no memory.high (memory.soft_limit_in_bytes acts only under global pressure); expected memory_high = \"max\" on this machine".into());
            }
            Ok(vec![(
                "memory.limit_in_bytes",
                max.map_or("-1".to_string(), |b| b.to_string()),
            )])
        }
    }
}

/// The files and values that set memory.min and memory.low (none left at
/// 0); Err on cgroup v1, which has neither.
pub fn protection(min: &str, low: &str) -> Result<Vec<(&'static str, String)>, String> {
    let set: Vec<(&'static str, String)> = [("memory.min", min), ("memory.low", low)]
        .into_iter()
        .filter(|(_, v)| *v != "0")
        .map(|(f, v)| (f, v.to_string()))
        .collect();
    match mode() {
        Mode::V1(_) if !set.is_empty() => Err("memory_min, memory_low: this kernel's memory controller is cgroup v1, which has no reclaim protection; expected 0 on this machine".into()),
        _ => Ok(set),
    }
}

/// The file and value that set memory.swap.max (none left at "max"); Err
/// on cgroup v1, whose memory.memsw.limit_in_bytes limits memory and swap
/// together, which is another limit.
pub fn swap_max(max: &str) -> Result<Option<(&'static str, String)>, String> {
    match (mode(), max) {
        (_, "max") => Ok(None),
        (Mode::V2(_), _) => Ok(Some(("memory.swap.max", max.to_string()))),
        (Mode::V1(_), _) => Err("memory_swap_max: this kernel's memory controller is cgroup v1, which has no memory.swap.max (memory.memsw.limit_in_bytes limits memory and swap together); expected memory_swap_max = \"max\" on this machine".into()),
    }
}

/// The file and value that set memory.zswap.max (none left at "max");
/// Err on cgroup v1, which has none (zswap charges no v1 memcg).
pub fn zswap_max(max: &str) -> Result<Option<(&'static str, String)>, String> {
    match (mode(), max) {
        (_, "max") => Ok(None),
        (Mode::V2(_), _) => Ok(Some(("memory.zswap.max", max.to_string()))),
        (Mode::V1(_), _) => Err("memory_zswap_max: this kernel's memory controller is cgroup v1, which has no memory.zswap.max (zswap charges no v1 memcg); expected memory_zswap_max = \"max\" on this machine".into()),
    }
}

/// The file and value that set memory.zswap.writeback (none left at 1);
/// Err on cgroup v1, which has none.
pub fn zswap_writeback(on: bool) -> Result<Option<(&'static str, String)>, String> {
    match (mode(), on) {
        (_, true) => Ok(None),
        (Mode::V2(_), false) => Ok(Some(("memory.zswap.writeback", "0".into()))),
        (Mode::V1(_), false) => Err("memory_zswap_writeback: this kernel's memory controller is cgroup v1, which has no memory.zswap.writeback; expected memory_zswap_writeback = true on this machine".into()),
    }
}

/// The file and value that set memory.oom.group; Err on cgroup v1, which
/// has no group kill (its OOM killer always picks one task).
pub fn oom_group(on: bool) -> Result<Option<(&'static str, String)>, String> {
    match (mode(), on) {
        (_, false) => Ok(None),
        (Mode::V2(_), true) => Ok(Some(("memory.oom.group", "1".into()))),
        (Mode::V1(_), true) => Err("memory_oom_group: this kernel's memory controller is cgroup v1, which has no memory.oom.group (its OOM killer kills one task); expected memory_oom_group = false on this machine".into()),
    }
}

/// The file and value a `set` step writes for a cgroup's `memory_max` or
/// `memory_high` (`high`); None where v1 has nothing to write (memory.high
/// back to "max", which v1 never had). Err: what v1 cannot express.
pub fn limit_write(
    high: bool,
    value: Option<u64>,
) -> Result<Option<(&'static str, String)>, String> {
    let files = if high {
        limits(None, value)?
    } else {
        limits(value, None)?
    };
    let want = match (mode(), high) {
        (Mode::V2(_), false) => "memory.max",
        (Mode::V2(_), true) => "memory.high",
        (Mode::V1(_), false) => "memory.limit_in_bytes",
        (Mode::V1(_), true) => return Ok(None),
    };
    Ok(files.into_iter().find(|(f, _)| *f == want))
}

/// v1 `memory.stat` names → v2's, for the counters both have.
const V1_STAT: &[(&str, &str)] = &[
    ("rss", "anon"),
    ("rss_huge", "anon_thp"),
    ("cache", "file"),
    ("shmem", "shmem"),
    ("mapped_file", "file_mapped"),
    ("dirty", "file_dirty"),
    ("writeback", "file_writeback"),
    ("pgfault", "pgfault"),
    ("pgmajfault", "pgmajfault"),
    ("inactive_anon", "inactive_anon"),
    ("active_anon", "active_anon"),
    ("inactive_file", "inactive_file"),
    ("active_file", "active_file"),
    ("unevictable", "unevictable"),
];

/// A v1 memory.stat as v2 names it (only the group's own counters, not
/// the `total_*` hierarchy sums, which equal them for a leaf group).
pub fn v1_stat_as_v2(v1: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    V1_STAT
        .iter()
        .filter_map(|&(from, to)| v1.get(from).map(|&v| (to.to_string(), v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_names_map_to_v2() {
        let v1: BTreeMap<String, i64> = [
            ("rss", 4096),
            ("cache", 8192),
            ("mapped_file", 4096),
            ("pgpgin", 7),
            ("total_rss", 4096),
            ("pgmajfault", 3),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let v2 = v1_stat_as_v2(&v1);
        assert_eq!(v2["anon"], 4096);
        assert_eq!(v2["file"], 8192);
        assert_eq!(v2["file_mapped"], 4096);
        assert_eq!(v2["pgmajfault"], 3);
        // pgpgin counts charge events in v1, not what v2 means: dropped.
        assert!(!v2.contains_key("pgpgin") && !v2.contains_key("total_rss"));
    }

    #[test]
    fn swap_max_is_written_on_v2_and_refused_on_v1() {
        assert_eq!(swap_max("max"), Ok(None));
        match mode() {
            Mode::V2(_) => assert_eq!(
                swap_max("16777216"),
                Ok(Some(("memory.swap.max", "16777216".to_string())))
            ),
            Mode::V1(_) => {
                let e = swap_max("16777216").unwrap_err();
                assert!(
                    e.starts_with("memory_swap_max:") && e.contains("\"max\""),
                    "{e}"
                );
            }
        }
    }
}

//! Reading the kernel's counters: /proc/vmstat, /proc/meminfo,
//! /proc/zoneinfo, and a cgroup's memory.* files.

use mmsim_spec::output::{CgroupResult, ZoneInfo};
use std::collections::BTreeMap;
use std::fs;

/// "name value" lines as a map.
pub fn parse_pairs(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k.trim_end_matches(':').to_string(), v))
        })
        .collect()
}

/// /proc/vmstat, and where the kernel has per-size THP (6.8 and later)
/// each size's event counters under the names the simulator gives them
/// (`hugepages-64kB/stats/swpout`).
pub fn vmstat() -> BTreeMap<String, i64> {
    let mut v = parse_pairs(&fs::read_to_string("/proc/vmstat").unwrap_or_default());
    const THP: &str = "/sys/kernel/mm/transparent_hugepage";
    let Ok(sizes) = fs::read_dir(THP) else {
        return v;
    };
    for size in sizes.filter_map(|e| e.ok()) {
        let name = size.file_name().to_string_lossy().to_string();
        if !name.starts_with("hugepages-") {
            continue;
        }
        let Ok(stats) = fs::read_dir(size.path().join("stats")) else {
            continue;
        };
        for stat in stats.filter_map(|e| e.ok()) {
            let Some(n) = fs::read_to_string(stat.path())
                .ok()
                .and_then(|t| t.trim().parse::<i64>().ok())
            else {
                continue;
            };
            v.insert(
                format!("{name}/stats/{}", stat.file_name().to_string_lossy()),
                n,
            );
        }
    }
    v
}

pub fn delta(
    after: &BTreeMap<String, i64>,
    before: &BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .collect()
}

/// A /proc/meminfo field in bytes.
pub fn meminfo(field: &str) -> u64 {
    let m = parse_pairs(&fs::read_to_string("/proc/meminfo").unwrap_or_default());
    m.get(field).copied().unwrap_or(0) as u64 * 1024
}

pub fn read_u64(path: &str) -> u64 {
    fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Populated zones of node 0 with their managed pages and watermarks.
pub fn zoneinfo() -> Vec<ZoneInfo> {
    let text = fs::read_to_string("/proc/zoneinfo").unwrap_or_default();
    let mut zones: Vec<ZoneInfo> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Node 0, zone") {
            zones.push(ZoneInfo {
                name: rest.trim().to_string(),
                managed_pages: 0,
                min: 0,
                low: 0,
                high: 0,
            });
            continue;
        }
        let Some(z) = zones.last_mut() else { continue };
        let mut it = t.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let Ok(v) = v.parse::<u64>() else { continue };
        match k {
            "managed" => z.managed_pages = v,
            "min" => z.min = v,
            "low" => z.low = v,
            "high" => z.high = v,
            _ => {}
        }
    }
    zones.retain(|z| z.managed_pages > 0);
    zones
}

pub fn cgroup_snapshot(dir: &str) -> CgroupResult {
    if let crate::cgroup::Mode::V1(_) = crate::cgroup::mode() {
        return cgroup_snapshot_v1(dir);
    }
    let stat = parse_pairs(&fs::read_to_string(format!("{dir}/memory.stat")).unwrap_or_default());
    let events =
        parse_pairs(&fs::read_to_string(format!("{dir}/memory.events")).unwrap_or_default());
    CgroupResult {
        memory_current: read_u64(&format!("{dir}/memory.current")),
        // Before 5.19 there is no memory.peak: absent, not 0.
        memory_peak: fs::read_to_string(format!("{dir}/memory.peak"))
            .ok()
            .and_then(|s| s.trim().parse().ok()),
        memory_swap_current: read_u64(&format!("{dir}/memory.swap.current")),
        memory_stat: stat,
        memory_events: events
            .into_iter()
            .map(|(k, v)| (k, v.max(0) as u64))
            .collect(),
    }
}

/// A v1 memory group's state, under v2's names (crate::cgroup).
fn cgroup_snapshot_v1(dir: &str) -> CgroupResult {
    let stat = parse_pairs(&fs::read_to_string(format!("{dir}/memory.stat")).unwrap_or_default());
    let usage = read_u64(&format!("{dir}/memory.usage_in_bytes"));
    let memsw = read_u64(&format!("{dir}/memory.memsw.usage_in_bytes"));
    let oom =
        parse_pairs(&fs::read_to_string(format!("{dir}/memory.oom_control")).unwrap_or_default());
    let mut events = BTreeMap::new();
    events.insert(
        "max".to_string(),
        read_u64(&format!("{dir}/memory.failcnt")),
    );
    events.insert(
        "oom_kill".to_string(),
        oom.get("oom_kill").copied().unwrap_or(0).max(0) as u64,
    );
    CgroupResult {
        memory_current: usage,
        memory_peak: Some(read_u64(&format!("{dir}/memory.max_usage_in_bytes"))),
        memory_swap_current: memsw.saturating_sub(usage),
        memory_stat: crate::cgroup::v1_stat_as_v2(&stat),
        memory_events: events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs() {
        let m = parse_pairs("pgfault 10\npgmajfault 2\nMemTotal:  468000 kB\nbad\n");
        assert_eq!(m["pgfault"], 10);
        assert_eq!(m["MemTotal"], 468000);
        assert!(!m.contains_key("bad"));
        let d = delta(&parse_pairs("a 5\nb 1"), &parse_pairs("a 2"));
        assert_eq!((d["a"], d["b"]), (3, 1));
    }
}

//! Reading the kernel's counters: /proc/vmstat, /proc/meminfo,
//! /proc/zoneinfo, and a cgroup's memory.* files.

use mmsim_spec::output::{CgroupResult, Pressure, PressureLine, PressureResource, ZoneInfo};
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
/// The TLB-shootdown IPIs every CPU has taken: /proc/interrupts' `TLB:`
/// row, summed over its per-CPU columns (0 where the row is missing).
pub fn tlb_shootdowns() -> u64 {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    interrupt_row(&text, "TLB")
}

/// The per-CPU counts of row `name` in /proc/interrupts text, summed.
pub fn interrupt_row(text: &str, name: &str) -> u64 {
    let head = format!("{name}:");
    text.lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(head.as_str()))
        .map_or(0, |rest| {
            rest.split_whitespace()
                .map_while(|w| w.parse::<u64>().ok())
                .sum()
        })
}

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

/// The machine's pressure files (/proc/pressure/{memory,io,cpu}), or a
/// cgroup v2 directory's (`memory.pressure`, …); None where the kernel
/// has no PSI (or it is off: the files refuse reads).
pub fn pressure(cgroup_dir: Option<&str>) -> Option<Pressure> {
    let read = |res: &str| {
        let path = match cgroup_dir {
            None => format!("/proc/pressure/{res}"),
            Some(d) => format!("{d}/{res}.pressure"),
        };
        fs::read_to_string(path)
            .ok()
            .and_then(|t| parse_pressure(&t))
    };
    Some(Pressure {
        memory: read("memory")?,
        io: read("io")?,
        cpu: read("cpu")?,
    })
}

/// The machine's pressure now with each total less `before`'s: the stall
/// since that read (None unless both reads worked).
pub fn pressure_since(before: Option<Pressure>) -> Option<Pressure> {
    pressure(None).zip(before).map(|(now, b)| now.since(&b))
}

/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and its `full` line
/// (cpu's has none before 5.13: zeros).
pub fn parse_pressure(text: &str) -> Option<PressureResource> {
    let mut r = PressureResource::default();
    let mut some = false;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let which = words.next()?;
        let mut l = PressureLine::default();
        for w in words {
            let (k, v) = w.split_once('=')?;
            match k {
                "avg10" => l.avg10 = v.parse().ok()?,
                "avg60" => l.avg60 = v.parse().ok()?,
                "avg300" => l.avg300 = v.parse().ok()?,
                "total" => l.total_us = v.parse().ok()?,
                _ => {}
            }
        }
        match which {
            "some" => {
                r.some = l;
                some = true;
            }
            "full" => r.full = l,
            _ => {}
        }
    }
    some.then_some(r)
}

pub fn cgroup_snapshot(dir: &str) -> CgroupResult {
    if let crate::cgroup::Mode::V1(_) = crate::cgroup::mode() {
        return cgroup_snapshot_v1(dir);
    }
    let stat = parse_pairs(&fs::read_to_string(format!("{dir}/memory.stat")).unwrap_or_default());
    let events =
        parse_pairs(&fs::read_to_string(format!("{dir}/memory.events")).unwrap_or_default());
    let swap_events =
        parse_pairs(&fs::read_to_string(format!("{dir}/memory.swap.events")).unwrap_or_default());
    let psi = pressure(Some(dir));
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
        memory_swap_events: swap_events
            .into_iter()
            .map(|(k, v)| (k, v.max(0) as u64))
            .collect(),
        // Totals since the cgroup was made (at the run's start).
        memory_pressure: psi.map(|p| p.memory),
        io_pressure: psi.map(|p| p.io),
        cpu_pressure: psi.map(|p| p.cpu),
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
        // cgroup v1 has no memory.swap.events (nor swap.max).
        memory_swap_events: BTreeMap::new(),
        // cgroup v1 has no pressure files.
        memory_pressure: None,
        io_pressure: None,
        cpu_pressure: None,
    }
}

/// The multi-gen LRU's generations from /sys/kernel/debug/lru_gen, for
/// the root memcg and the spec's cgroups (named as the spec names them);
/// empty where debugfs is not mounted or the kernel has no multi-gen LRU
/// on.
pub fn lru_gen() -> Vec<mmsim_spec::output::LruGenLruvec> {
    let on = std::fs::read_to_string("/sys/kernel/mm/lru_gen/enabled")
        .map(|t| t.trim() != "0x0000")
        .unwrap_or(false);
    let Ok(text) = std::fs::read_to_string("/sys/kernel/debug/lru_gen") else {
        return Vec::new();
    };
    if !on {
        return Vec::new();
    }
    mmsim_spec::output::LruGenLruvec::parse_debugfs(&text)
        .into_iter()
        .filter_map(|mut lv| {
            if lv.memcg != "/" {
                lv.memcg = format!("/{}", lv.memcg.strip_prefix("/mmsim-")?);
            }
            Some(lv)
        })
        .collect()
}

/// The online CPUs' arrangement from sysfs (`topology/physical_package_id`
/// and `thread_siblings_list` of each), None if it cannot be read or is
/// not a whole number of equal sockets and cores.
pub fn cpu_topology() -> Option<mmsim_spec::Topology> {
    let mut sockets = std::collections::BTreeSet::new();
    let mut threads = 0;
    let mut cpus = 0u32;
    for cpu in 0.. {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let Ok(pkg) = std::fs::read_to_string(format!("{dir}/physical_package_id")) else {
            break;
        };
        sockets.insert(pkg.trim().to_string());
        let sib = std::fs::read_to_string(format!("{dir}/thread_siblings_list")).ok()?;
        // "0-1" or "0,48": one core's threads.
        let n: u32 = sib
            .trim()
            .split(',')
            .map(|r| match r.split_once('-') {
                Some((a, b)) => (b.parse::<u32>().ok()? + 1).checked_sub(a.parse().ok()?),
                None => Some(1),
            })
            .sum::<Option<u32>>()?;
        threads = threads.max(n);
        cpus += 1;
    }
    let s = sockets.len() as u32;
    if cpus == 0 || threads == 0 || !cpus.is_multiple_of(s * threads) {
        return None;
    }
    Some(mmsim_spec::Topology {
        sockets: s,
        cores_per_socket: cpus / (s * threads),
        threads_per_core: threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pressure_file_reads_as_the_kernel_prints_it() {
        let text = "some avg10=12.50 avg60=3.07 avg300=0.66 total=720113\nfull avg10=11.00 avg60=2.90 avg300=0.60 total=700001\n";
        let r = parse_pressure(text).expect("parses");
        assert_eq!(r.some.avg10, 12.5);
        assert_eq!(r.some.total_us, 720113);
        assert_eq!(r.full.avg300, 0.6);
        assert_eq!(r.full.total_us, 700001);
        // A kernel before 5.13 has no cpu full line: zeros.
        let cpu = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n").unwrap();
        assert_eq!((cpu.some.total_us, cpu.full.total_us), (5, 0));
        assert_eq!(parse_pressure(""), None);
        assert_eq!(parse_pressure("some avg10=x total=1\n"), None);
    }

    #[test]
    fn the_tlb_row_is_summed_over_the_cpus() {
        let text = "           CPU0       CPU1\n  0:         40          0   IO-APIC   2-edge      timer\n TLB:    3456056    3770948   TLB shootdowns\n";
        assert_eq!(interrupt_row(text, "TLB"), 3456056 + 3770948);
        assert_eq!(interrupt_row(text, "NMI"), 0);
    }

    #[test]
    fn pairs() {
        let m = parse_pairs("pgfault 10\npgmajfault 2\nMemTotal:  468000 kB\nbad\n");
        assert_eq!(m["pgfault"], 10);
        assert_eq!(m["MemTotal"], 468000);
        assert!(!m.contains_key("bad"));
        let d = delta(&parse_pairs("a 5\nb 1"), &parse_pairs("a 2"));
        assert_eq!((d["a"], d["b"]), (3, 1));
    }

    #[test]
    fn lru_gen_debugfs_text() {
        // As 6.1's lru_gen_seq_show prints it (the read-only file).
        let text = "memcg     1 /\n node     0\n          0      12345          0        812 \n          1      12345          0          0 \n          2       3456         17          0 \n          3         12       2048       1024 \nmemcg     5 /mmsim-w\n node     0\n          7        400       4000          0 \n          8          4       8128         33 \n";
        let lvs = mmsim_spec::output::LruGenLruvec::parse_debugfs(text);
        assert_eq!(lvs.len(), 2);
        assert_eq!(lvs[0].memcg, "/");
        assert_eq!(lvs[0].gens.len(), 4);
        assert_eq!(lvs[0].gens[0].file, 812);
        assert_eq!(lvs[0].gens[3].seq, 3);
        assert_eq!(lvs[0].gens[3].age_ms, 12);
        assert_eq!(lvs[0].gens[3].anon, 2048);
        assert_eq!(lvs[1].memcg, "/mmsim-w");
        assert_eq!(lvs[1].id, 5);
        assert_eq!(
            lvs[1].gens[1],
            mmsim_spec::output::LruGenGen {
                seq: 8,
                age_ms: 4,
                anon: 8128,
                file: 33
            }
        );
        // What the simulator prints reads back the same.
        let again = mmsim_spec::output::LruGenLruvec::parse_debugfs(&lvs[1].debugfs_text());
        assert_eq!(again, lvs[1..]);
    }
}

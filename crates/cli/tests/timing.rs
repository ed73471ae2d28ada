//! The timing suite's recorded native results (fidelity/timing/
//! results-native/) are complete and consistent, and docs/timing.md shows
//! what `mmsim fidelity --timing` computes from them now. Nothing here
//! runs natively: the results were recorded with
//! `mmsim oracle record --native --runs 5 fidelity/timing/*.toml`.

use std::path::{Path, PathBuf};
use std::process::Command;

const MMSIM: &str = env!("CARGO_BIN_EXE_mmsim");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn specs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("fidelity/timing"))
        .expect("fidelity/timing")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v
}

/// The CPU models the suite was recorded on (results-native/<machine>/).
fn machines() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("fidelity/timing/results-native"))
        .expect("results-native")
        .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// The specs a machine's results-native/<machine>/not-recorded.toml lists
/// as having no runs on that CPU model (each with why).
fn not_recorded(machine: &str) -> Vec<String> {
    let path = root()
        .join("fidelity/timing/results-native")
        .join(machine)
        .join("not-recorded.toml");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let t: std::collections::BTreeMap<String, String> =
                toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            t.into_keys().collect()
        }
        Err(_) => Vec::new(),
    }
}

fn listed(spec: &Path, machine: &str) -> bool {
    let name = spec.file_stem().expect("stem").to_string_lossy();
    not_recorded(machine).iter().any(|n| *n == name)
}

fn runs(spec: &Path, machine: &str) -> Vec<serde_json::Value> {
    let dir = spec
        .parent()
        .expect("dir")
        .join("results-native")
        .join(machine)
        .join(spec.file_stem().expect("stem"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).expect("read")).expect("json"))
        .collect()
}

/// A spec is listed as not recorded on a CPU model only while it has no
/// runs there; every spec is recorded on at least one model.
#[test]
fn a_spec_listed_as_not_recorded_has_no_runs_there() {
    for m in machines() {
        for name in not_recorded(&m) {
            let dir = root()
                .join("fidelity/timing/results-native")
                .join(&m)
                .join(&name);
            assert!(!dir.exists(), "{}: listed as not recorded", dir.display());
            assert!(
                root().join(format!("fidelity/timing/{name}.toml")).exists(),
                "{m}: lists {name}, which is not a timing spec"
            );
        }
    }
    for spec in specs() {
        assert!(
            machines().iter().any(|m| !listed(&spec, m)),
            "{}: recorded on no CPU model",
            spec.display()
        );
    }
}

#[test]
fn every_timing_spec_has_five_native_runs_of_each_machine() {
    let specs = specs();
    assert!(specs.len() >= 13, "the timing suite is missing specs");
    assert!(machines().len() >= 2, "{:?}", machines());
    for m in machines() {
        one_machine(&specs, &m);
    }
}

/// Every spec's runs of one machine folder come from that CPU model.
fn one_machine(specs: &[PathBuf], slug: &str) {
    let mut machine = None;
    for spec in specs.iter().filter(|s| !listed(s, slug)) {
        let runs = runs(spec, slug);
        assert!(runs.len() >= 5, "{}: {} runs", spec.display(), runs.len());
        for r in &runs {
            assert_eq!(r["engine"]["name"], "linux-native", "{}", spec.display());
            // The release, not the build: the AMD guest's runs span two
            // builds of 6.18.44 (-fc-v657 on 2026-11-24, -fc-v595 on
            // 2026-11-27), one machine for the suite.
            let release = r["engine"]["version"].as_str().unwrap_or("");
            let m = (
                release.split('-').next().unwrap_or("").to_string(),
                r["knobs"]["native:cpu"].as_str().unwrap_or("").to_string(),
            );
            assert!(!m.1.is_empty(), "{}: no CPU model", spec.display());
            assert_eq!(
                mmsim_sim::machine_profile::machine_slug(&m.1),
                slug,
                "{}",
                spec.display()
            );
            assert_eq!(machine.get_or_insert(m.clone()), &m, "{}", spec.display());
            assert_eq!(r["integrity"]["violations"], 0, "{}", spec.display());
        }
    }
}

/// Phases shorter than 20 ms in their fastest run on a machine, and why.
/// The test fails if another phase is that short, or one of these is not.
const SHORT_PHASES: &[(&str, &[&str])] = &[(
    // The suite's sizes were chosen on the AMD guest (31.8, 33.1 and
    // 38.0 ms there); this machine zaps 512 MiB of anon in 12.9 ms,
    // unmaps 1 GiB of tmpfs in 19.0 ms and maps a 512 MiB file by
    // fault-around in 19.6 ms. Longer specs would need the AMD recordings
    // made again, on a machine this project does not have now.
    "intel-xeon",
    &[
        "dontneed main/dontneed",
        "munmap main/munmap_shmem",
        "tmpfs_mmap_read main/mmap_read",
    ],
)];

#[test]
fn every_timed_phase_lasts_at_least_20_ms_in_its_fastest_run() {
    let mut short: Vec<(String, String)> = Vec::new();
    for (spec, m) in specs()
        .into_iter()
        .flat_map(|s| machines().into_iter().map(move |m| (s.clone(), m)))
        .filter(|(s, m)| !listed(s, m))
    {
        let runs = runs(&spec, &m);
        for t in runs[0]["tasks"].as_array().expect("tasks") {
            for p in t["phases"].as_array().expect("phases") {
                let name = p["name"].as_str().expect("name");
                if name.starts_with("wait") {
                    continue;
                }
                let fastest = runs
                    .iter()
                    .filter_map(|r| {
                        let t2 = r["tasks"]
                            .as_array()?
                            .iter()
                            .find(|x| x["name"] == t["name"])?;
                        let q = t2["phases"]
                            .as_array()?
                            .iter()
                            .find(|q| q["name"] == name)?;
                        Some(q["end_ns"].as_u64()? - q["start_ns"].as_u64()?)
                    })
                    .min()
                    .expect("the phase in every run");
                if fastest < 20_000_000 {
                    let stem = spec.file_stem().expect("stem").to_string_lossy();
                    let task = t["name"].as_str().expect("task name");
                    short.push((m.clone(), format!("{stem} {task}/{name}")));
                }
            }
        }
    }
    for m in machines() {
        let found: Vec<&str> = short
            .iter()
            .filter(|s| s.0 == m)
            .map(|s| s.1.as_str())
            .collect();
        assert_eq!(found, known_of(SHORT_PHASES, &m), "{m}: phases under 20 ms");
    }
}

/// Phases known to miss their time tolerance with a machine's profile,
/// and why (docs/timing.md "Intel Xeon @ 2.50GHz (family 6 model 85): a
/// miss"). The test fails if any other phase misses, and if one of these
/// comes within tolerance (then this list is out of date). The AMD EPYC
/// profile has none since its calibration measured the shared tmpfs write
/// fault (`shmem_shared_fault`, 2026-11-28), the last of its phases' paths
/// no spec priced apart; the Intel family 6 model 207 one none since it
/// measured a copy from L2 (`copy_page_l2`, 2026-12-01: smp_threads_read
/// rereads a 1 MiB file, which stays in the core's 2 MiB L2).
const KNOWN_MISSES: &[(&str, &[&str])] = &[(
    // This 2-vCPU guest's speed drifts by up to 2× between runs minutes
    // apart (steal time up to 16 %, DAMON's kdamond scanning): the
    // calibration's least disturbed runs price paths faster than the
    // suite's fastest run of a slower period.
    "intel-xeon-2-50ghz",
    &[
        "dontneed main/dontneed",
        "munmap main/munmap_anon",
        "munmap main/munmap_shmem",
        "psi_zram_memcg main/read",
        "psi_zram_memcg main/rewrite",
        "resident main/seq",
        "swapoff main/swapoff",
        "tmpfs_rw main/write_128k",
        "zram_memcg main/refault_zipf",
    ],
)];

/// Phases whose memory pressure totals miss `PRESSURE_TOLERANCE` with a
/// machine's profile (docs/timing.md "Memory pressure"): the stalled share
/// of each phase is within 10 % of the real runs', but the phases run
/// about 0.7× as long as the real ones on this guest (the time misses
/// above), and so do their stalls.
const KNOWN_PRESSURE_MISSES: &[(&str, &[&str])] = &[
    (
        // The stall is set beside the median real run's and the phase
        // beside the fastest: on this guest the median run of these
        // phases took 1.1-1.5x the fastest (of ten runs spread to 1.3-1.8x),
        // while each phase's time is within 20 % of the fastest run's and
        // its stalled share 0-10 points below the real one's.
        "intel-xeon",
        &[
            "psi_zram_memcg main/write",
            "smp_threads_reclaim main/thread0/write",
            "two_procs a/write",
            "two_procs b/write",
            "zram_content_lz4 main/refault_seq",
            "zram_memcg main/swapout_write",
            "zram_memcg main/refault_seq",
            "zram_memcg main/refault_zipf",
            "zswap_zram main/read",
            "zswap_zram main/rewrite",
        ],
    ),
    (
        "intel-xeon-2-50ghz",
        &[
            "psi_zram_memcg main/write",
            "psi_zram_memcg main/read",
            "psi_zram_memcg main/rewrite",
        ],
    ),
    (
        // zram_memcg's first phase: the median real run's stall alone
        // (538.9 ms) is longer than the fastest run's whole phase (381.6
        // ms, which mmsim's is within 10 % of). two_procs, two processes
        // reclaiming in one memcg on their own CPUs: phases 0.79-0.82 of the
        // real, stalls 0.71 of the median run's (61-62 % of the phase
        // against 67-68 %): what the two cost each other inside reclaim
        // beyond the TLB shootdowns (lock waits) is not modelled. Two
        // threads reclaiming in one memcg (smp_threads_reclaim) stall
        // 65 % of the phase against 72-76 %, and pass at 0.89 and 0.78.
        // zswap_zram's write phase is zram_memcg's case again: its five
        // runs took 287-582 ms, the median run's stall (361 ms) is longer
        // than the fastest run's whole phase, which mmsim's is within 1 %
        // of; the read and rewrite stalls agree (0.98, 0.97).
        "amd-epyc",
        &[
            "two_procs a/write",
            "two_procs b/write",
            "zram_memcg main/swapout_write",
            "zswap_zram main/write",
        ],
    ),
];

/// A machine's entry of a known-miss list.
fn known_of(list: &[(&str, &'static [&'static str])], slug: &str) -> &'static [&'static str] {
    list.iter().find(|k| k.0 == slug).map_or(&[], |k| k.1)
}

/// The phases `--check` names after `prefix` ("spec phase (ratios)", comma
/// separated), in its order.
fn missed_in<'a>(err: &'a str, prefix: &str) -> Vec<&'a str> {
    err.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .flat_map(|l| l.split("), "))
        .map(|m| m.rsplit_once(" (").map_or(m, |x| x.0))
        .collect()
}

/// With each committed profile, every phase's time against the suite
/// recorded on that profile's CPU is within its declared tolerance
/// (`--check` exits 1 otherwise) but for the machine's known misses, and
/// docs/timing.md shows that machine's current table.
#[test]
fn docs_timing_shows_the_current_table_of_each_machine() {
    let doc = std::fs::read_to_string(root().join("docs/timing.md")).expect("docs/timing.md");
    for (file, text) in mmsim_sim::machine_profile::PROFILES {
        let p = mmsim_sim::machine_profile::MachineProfile::parse(text).expect("parses");
        let path = root().join("crates/sim/profiles").join(file);
        let out = Command::new(MMSIM)
            .current_dir(root())
            .args([
                "--profile",
                path.to_str().unwrap(),
                "fidelity",
                "--timing",
                "--check",
            ])
            .output()
            .expect("run mmsim");
        let slug = mmsim_sim::machine_profile::machine_slug(&p.machine.cpu);
        let err = String::from_utf8_lossy(&out.stderr);
        let known = known_of(KNOWN_MISSES, &slug);
        let missed = missed_in(&err, "mmsim: phase time out of tolerance: ");
        assert_eq!(missed, known, "{file}: {err}");
        let known_psi = known_of(KNOWN_PRESSURE_MISSES, &slug);
        let missed_psi = missed_in(&err, "mmsim: memory pressure out of tolerance: ");
        assert_eq!(missed_psi, known_psi, "{file}: {err}");
        let want = if known.is_empty() && known_psi.is_empty() {
            0
        } else {
            1
        };
        assert_eq!(out.status.code(), Some(want), "{file}: {err}");
        let table = String::from_utf8(out.stdout).expect("utf-8");
        let begin = format!("<!-- BEGIN mmsim fidelity --timing {slug} -->");
        let section = doc
            .split(&begin)
            .nth(1)
            .unwrap_or_else(|| panic!("docs/timing.md has no {begin}"));
        assert!(
            section.contains(table.trim()),
            "docs/timing.md is stale for {slug}: regenerate it with `mmsim --profile crates/sim/profiles/{file} fidelity --timing --write docs/timing.md`"
        );
    }
}

/// A machine profile from another CPU than the recordings' is named in a
/// warning; the default profile, measured where they were, is not.
#[test]
fn a_profile_from_another_cpu_is_warned_about() {
    let run = |args: &[&str]| {
        let out = Command::new(MMSIM)
            .env("MMSIM_PROFILE", "default")
            .current_dir(root())
            .args(args)
            .output()
            .expect("run mmsim");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(!run(&["--profile", "default", "fidelity", "--timing"]).contains("warning"));
    let text = std::fs::read_to_string(root().join("crates/sim/profiles/default.toml")).unwrap();
    let cpu = text
        .lines()
        .find(|l| l.starts_with("cpu = "))
        .expect("a cpu line")
        .to_string();
    let other = std::env::temp_dir().join(format!("mmsim-other-cpu-{}.toml", std::process::id()));
    std::fs::write(&other, text.replacen(&cpu, "cpu = \"Other CPU\"", 1)).unwrap();
    let err = run(&["--profile", other.to_str().unwrap(), "fidelity", "--timing"]);
    std::fs::remove_file(&other).ok();
    assert!(err.contains("measured on \"Other CPU\""), "{err}");
}

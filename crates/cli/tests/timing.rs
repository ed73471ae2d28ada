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

fn runs(spec: &Path) -> Vec<serde_json::Value> {
    let dir = spec
        .parent()
        .expect("dir")
        .join("results-native")
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

#[test]
fn every_timing_spec_has_five_native_runs_of_one_machine() {
    let specs = specs();
    assert!(specs.len() >= 13, "the timing suite is missing specs");
    let mut machine = None;
    for spec in &specs {
        let runs = runs(spec);
        assert!(runs.len() >= 5, "{}: {} runs", spec.display(), runs.len());
        for r in &runs {
            assert_eq!(r["engine"]["name"], "linux-native", "{}", spec.display());
            let m = (
                r["engine"]["version"].as_str().unwrap_or("").to_string(),
                r["knobs"]["native:cpu"].as_str().unwrap_or("").to_string(),
            );
            assert!(!m.1.is_empty(), "{}: no CPU model", spec.display());
            assert_eq!(machine.get_or_insert(m.clone()), &m, "{}", spec.display());
            assert_eq!(r["integrity"]["violations"], 0, "{}", spec.display());
        }
    }
}

#[test]
fn every_timed_phase_lasts_at_least_20_ms_in_its_fastest_run() {
    for spec in specs() {
        let runs = runs(&spec);
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
                assert!(
                    fastest >= 20_000_000,
                    "{} {}/{name}: {fastest} ns",
                    spec.display(),
                    t["name"]
                );
            }
        }
    }
}

/// Every phase's time is within its declared tolerance (`--check` exits 1
/// otherwise), with the default profile, and docs/timing.md is current.
#[test]
fn docs_timing_shows_the_current_table() {
    let out = Command::new(MMSIM)
        .current_dir(root())
        .args(["fidelity", "--timing", "--check"])
        .output()
        .expect("run mmsim");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).expect("utf-8");
    let doc = std::fs::read_to_string(root().join("docs/timing.md")).expect("docs/timing.md");
    assert!(
        doc.contains(table.trim()),
        "docs/timing.md is stale: regenerate it with `mmsim fidelity --timing --write docs/timing.md`"
    );
}

/// A machine profile from another CPU than the recordings' is named in a
/// warning; the default profile, measured where they were, is not.
#[test]
fn a_profile_from_another_cpu_is_warned_about() {
    let run = |args: &[&str]| {
        let out = Command::new(MMSIM)
            .current_dir(root())
            .args(args)
            .output()
            .expect("run mmsim");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(!run(&["fidelity", "--timing"]).contains("warning"));
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

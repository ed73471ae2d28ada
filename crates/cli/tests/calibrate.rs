//! `mmsim calibrate` without running anything natively: the committed
//! default profile is what its recorded measurements solve to, and says
//! where it came from.

use mmsim_sim::machine_profile::{machine_slug, Basis, MachineProfile, PROFILES};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn mmsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .env("MMSIM_PROFILE", "default")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run mmsim")
}

/// Each committed profile, with the folder its calibration runs are
/// recorded in (calibrate/results-native/<machine>/).
fn committed() -> Vec<(&'static str, MachineProfile, String)> {
    PROFILES
        .iter()
        .map(|(file, text)| {
            let p = MachineProfile::parse(text).expect("parses");
            let dir = format!("calibrate/results-native/{}", machine_slug(&p.machine.cpu));
            (*file, p, dir)
        })
        .collect()
}

#[test]
fn every_committed_profile_is_what_its_recordings_solve_to() {
    for (file, p, dir) in committed() {
        let o = mmsim(&["calibrate", "--from", &dir, "-o", "-"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{file}: {err}");
        let solved = MachineProfile::parse(&String::from_utf8_lossy(&o.stdout)).expect("parses");
        assert_eq!(solved.cost, p.cost, "{file}");
        // The compression table too, from the zram content runs
        // (calibrate --zram-content) the same folder holds, if any.
        assert_eq!(solved.compress, p.compress, "{file}");
        assert_eq!(solved.machine, p.machine, "{file}");
        assert_eq!(solved.provenance.runs, p.provenance.runs, "{file}");
        assert_eq!(solved.provenance.date, p.provenance.date, "{file}");
        assert_eq!(solved.provenance.sessions, p.provenance.sessions, "{file}");
        // The fit's report names every equation.
        assert!(err.contains("pageout/in_b-in_a"), "{file}: {err}");
    }
}

#[test]
fn every_committed_profile_says_where_it_came_from() {
    for (file, p, dir) in committed() {
        assert!(
            p.provenance.command.starts_with("mmsim calibrate ")
                && p.provenance.command.contains(&dir),
            "{file}: {}",
            p.provenance.command
        );
        assert!(!p.machine.cpu.is_empty() && !p.machine.kernel.is_empty());
        assert!(p.provenance.runs >= 5, "{file}: {}", p.provenance.runs);
        // Measured on the machine its timing suite was recorded on.
        let doc = repo().join(format!(
            "fidelity/timing/results-native/{}/pageout/run-1.json",
            machine_slug(&p.machine.cpu)
        ));
        let run: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display())),
        )
        .expect("JSON");
        assert_eq!(run["knobs"]["native:cpu"], p.machine.cpu.as_str(), "{file}");
        assert_eq!(
            run["engine"]["version"],
            p.machine.kernel.as_str(),
            "{file}"
        );
        // Every constant not measured says why; every bound says its
        // bound.
        for (name, e) in &p.cost {
            match e.basis {
                Basis::Reference => assert!(
                    e.method.starts_with("not measured: "),
                    "{file} {name}: {}",
                    e.method
                ),
                Basis::Bound => assert!(
                    e.method
                        .contains("not resolved from zero by these runs: at most"),
                    "{file} {name}: {}",
                    e.method
                ),
                _ => {}
            }
        }
    }
}

/// Without --profile, a run uses the committed profile of this machine's
/// CPU model, else the default, and its knobs say which.
#[test]
fn a_run_picks_the_profile_of_this_machines_cpu() {
    let o = Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .env_remove("MMSIM_PROFILE")
        .args(["run", "--json", "examples/smoke.toml"])
        .current_dir(repo())
        .output()
        .expect("run mmsim");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let label = doc["knobs"]["mmsim:cost-profile"]
        .as_str()
        .expect("a label");
    let cpu = mmsim_sim::machine_profile::cpu_model().unwrap_or_default();
    match committed()
        .into_iter()
        .find(|(_, p, _)| p.machine.cpu == cpu)
    {
        Some((file, _, _)) => {
            assert!(label.starts_with(&format!("auto: {file}")), "{label}");
            assert!(label.ends_with("(this machine's CPU)"), "{label}");
        }
        None => assert!(
            label.starts_with("auto: default: ") && label.contains("no committed profile"),
            "{label}"
        ),
    }
    // MMSIM_PROFILE and --profile choose instead.
    let o = mmsim(&["run", "--json", "examples/smoke.toml"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert!(doc["knobs"]["mmsim:cost-profile"]
        .as_str()
        .unwrap()
        .starts_with("default: "));
}

#[test]
fn dry_run_prints_the_count_matrix_without_root() {
    let o = mmsim(&["calibrate", "--dry-run"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for home in ["touch ", "fault_entry ", "swap_out ", "memcg_reclaim "] {
        assert!(out.contains(home), "{home}: {out}");
    }
}

#[test]
fn bad_arguments_exit_2() {
    let o = mmsim(&["calibrate", "--runs", "0"]);
    assert_eq!(o.status.code(), Some(2));
    let o = mmsim(&["calibrate", "--from", "/nonexistent"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no recorded runs"));
}

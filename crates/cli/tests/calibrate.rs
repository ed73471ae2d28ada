//! `mmsim calibrate` without running anything natively: the committed
//! default profile is what its recorded measurements solve to, and says
//! where it came from.

use mmsim_sim::costs::{Basis, MachineProfile, DEFAULT_PROFILE};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn mmsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run mmsim")
}

#[test]
fn the_default_profile_is_what_its_recordings_solve_to() {
    let o = mmsim(&["calibrate", "--from", "calibrate/results-native", "-o", "-"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let solved = MachineProfile::parse(&String::from_utf8_lossy(&o.stdout)).expect("parses");
    let default = MachineProfile::parse(DEFAULT_PROFILE).expect("parses");
    assert_eq!(solved.cost, default.cost);
    assert_eq!(solved.machine, default.machine);
    assert_eq!(solved.provenance.runs, default.provenance.runs);
    assert_eq!(solved.provenance.date, default.provenance.date);
    assert_eq!(solved.provenance.sessions, default.provenance.sessions);
}

#[test]
fn the_default_profile_says_where_it_came_from() {
    let p = MachineProfile::parse(DEFAULT_PROFILE).expect("parses");
    assert!(
        p.provenance.command.starts_with("mmsim calibrate ")
            && p.provenance
                .command
                .contains("--record calibrate/results-native"),
        "{}",
        p.provenance.command
    );
    assert!(!p.machine.cpu.is_empty() && !p.machine.kernel.is_empty());
    assert!(p.provenance.runs >= 5, "{}", p.provenance.runs);
    // Measured on the machine the timing suite was recorded on.
    let doc = repo().join("fidelity/timing/results-native/pageout/run-1.json");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(doc).expect("a recording")).expect("JSON");
    assert_eq!(run["knobs"]["native:cpu"], p.machine.cpu.as_str());
    assert_eq!(run["engine"]["version"], p.machine.kernel.as_str());
    // Every constant not measured says why.
    for (name, e) in &p.cost {
        if e.basis == Basis::Reference {
            assert!(
                e.method.starts_with("not measured: "),
                "{name}: {}",
                e.method
            );
        }
    }
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

//! `mmsim fidelity --timing`: the timing suite (fidelity/timing/*.toml),
//! each phase's simulated time beside the fastest of its runs recorded on
//! a real kernel at hardware speed (`mmsim oracle record --native`, kept
//! under results-native/), with the runs' spread and sim/real.
//!
//! The suite is the test of the cost model, never its training set: no
//! constant is fitted to it.

use crate::oracle_cmd::native_results_dir;
use mmsim_sim::output::RunResult;
use std::fmt::Write as _;
use std::path::Path;

/// One phase of one timing spec.
pub struct PhaseTime {
    pub spec: String,
    pub phase: String,
    /// The fastest real run and the slowest, ns.
    pub real_min_ns: u64,
    pub real_max_ns: u64,
    pub sim_ns: u64,
}

impl PhaseTime {
    pub fn ratio(&self) -> f64 {
        self.sim_ns as f64 / self.real_min_ns.max(1) as f64
    }
}

/// A timing spec's recorded native runs.
pub fn recorded_native(spec: &Path) -> Vec<RunResult> {
    crate::oracle_cmd::recorded_in(&native_results_dir(spec))
}

/// Phases whose time is not a kernel path's (a task waiting for another)
/// are named `wait*` and left out.
fn timed(phase: &str) -> bool {
    !phase.starts_with("wait")
}

/// Every timed phase of the spec at `path`, simulated and recorded.
pub fn phases(path: &Path) -> Result<Vec<PhaseTime>, String> {
    let spec = mmsim_spec::load(path, &[]).map_err(|e| e.to_string())?;
    let real = recorded_native(path);
    if real.is_empty() {
        return Err(format!(
            "{}: no native results in {}; record them with `mmsim oracle record --native --runs 5 {}`",
            path.display(),
            native_results_dir(path).display(),
            path.display()
        ));
    }
    let sim = mmsim_sim::run(&spec, crate::sim_options())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let name = path.file_stem().unwrap_or_default().to_string_lossy();
    let mut out = Vec::new();
    for t in &sim.tasks {
        for p in t.phases.iter().filter(|p| timed(&p.name)) {
            let times: Vec<u64> = real
                .iter()
                .filter_map(|r| r.tasks.iter().find(|x| x.name == t.name))
                .filter_map(|x| x.phases.iter().find(|q| q.name == p.name))
                .map(|q| q.end_ns - q.start_ns)
                .collect();
            let (Some(&min), Some(&max)) = (times.iter().min(), times.iter().max()) else {
                return Err(format!(
                    "{name}: no real run has phase {}/{}",
                    t.name, p.name
                ));
            };
            out.push(PhaseTime {
                spec: name.to_string(),
                phase: format!("{}/{}", t.name, p.name),
                real_min_ns: min,
                real_max_ns: max,
                sim_ns: p.end_ns - p.start_ns,
            });
        }
    }
    Ok(out)
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// The markdown table of every phase, then the summary line.
pub fn markdown(rows: &[PhaseTime]) -> String {
    let mut s = String::new();
    s += "| spec | phase | real fastest (ms) | real spread (ms) | mmsim (ms) | sim/real |\n";
    s += "|---|---|---|---|---|---|\n";
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {}–{} | {} | {:.2} |",
            r.spec,
            r.phase,
            ms(r.real_min_ns),
            ms(r.real_min_ns),
            ms(r.real_max_ns),
            ms(r.sim_ns),
            r.ratio()
        );
    }
    let mut dev: Vec<f64> = rows.iter().map(|r| (r.ratio() - 1.0).abs()).collect();
    dev.sort_by(f64::total_cmp);
    if let (Some(&worst), false) = (dev.last(), dev.is_empty()) {
        let median = dev[dev.len() / 2];
        let _ = writeln!(
            s,
            "\n{} phases: median |sim/real − 1| {:.0}%, worst {:.0}% (targets: 10% and 30%).",
            rows.len(),
            median * 100.0,
            worst * 100.0
        );
    }
    s
}

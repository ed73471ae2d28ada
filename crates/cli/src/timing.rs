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

/// A phase's time tolerance unless its spec's `[fidelity] time_tolerance`
/// declares another: the suite's target for its worst phase.
pub const DEFAULT_TIME_TOLERANCE: f64 = 0.30;

/// One phase of one timing spec.
pub struct PhaseTime {
    pub spec: String,
    pub phase: String,
    /// The fastest real run and the slowest, ns.
    pub real_min_ns: u64,
    pub real_max_ns: u64,
    /// Simulated with the run's profile, and with cost_model.rs's reference
    /// values (the state before calibration).
    pub sim_ns: u64,
    pub reference_ns: u64,
    /// |sim/real − 1| allowed.
    pub tolerance: f64,
    /// The phase's memory pressure, where the real runs read it.
    pub pressure: Option<PhasePressure>,
}

/// A phase's memory stall (/proc/pressure/memory's totals over the phase)
/// simulated and recorded: the real runs' median, µs.
pub struct PhasePressure {
    pub real_some_us: u64,
    pub real_full_us: u64,
    pub sim_some_us: u64,
    pub sim_full_us: u64,
    /// The stalled share of the phase's time (some), real (the median
    /// run's) and simulated.
    pub real_share: f64,
    pub sim_share: f64,
}

/// How far a phase's simulated memory stall may be from the real runs'
/// median: the bar for PSI.
pub const PRESSURE_TOLERANCE: f64 = 0.25;

/// Phases the real runs stall less than this in are not compared (µs).
const PRESSURE_MIN_US: u64 = 10_000;

impl PhasePressure {
    pub fn some_ratio(&self) -> f64 {
        self.sim_some_us as f64 / self.real_some_us.max(1) as f64
    }

    pub fn full_ratio(&self) -> f64 {
        self.sim_full_us as f64 / self.real_full_us.max(1) as f64
    }

    pub fn within(&self) -> bool {
        (self.some_ratio() - 1.0).abs() <= PRESSURE_TOLERANCE
            && (self.full_ratio() - 1.0).abs() <= PRESSURE_TOLERANCE
    }
}

/// The median of the real runs' memory stall over a phase, and that
/// run's stalled share; None unless every run read /proc/pressure and
/// the phase stalls at least `PRESSURE_MIN_US`.
fn real_pressure(runs: &[(u64, Option<mmsim_spec::output::Pressure>)]) -> Option<(u64, u64, f64)> {
    let mut v: Vec<(u64, u64, u64)> = runs
        .iter()
        .map(|(ns, p)| p.map(|p| (p.memory.some.total_us, p.memory.full.total_us, *ns)))
        .collect::<Option<_>>()?;
    v.sort_unstable();
    let (some, full, ns) = *v.get(v.len() / 2)?;
    (some >= PRESSURE_MIN_US).then(|| (some, full, some as f64 * 1e3 / ns.max(1) as f64))
}

impl PhaseTime {
    pub fn ratio(&self) -> f64 {
        self.sim_ns as f64 / self.real_min_ns.max(1) as f64
    }

    pub fn reference_ratio(&self) -> f64 {
        self.reference_ns as f64 / self.real_min_ns.max(1) as f64
    }

    pub fn within(&self) -> bool {
        (self.ratio() - 1.0).abs() <= self.tolerance
    }
}

/// A timing spec's native runs recorded on a CPU of model `machine` (a
/// `machine_profile::machine_slug`).
pub fn recorded_native(spec: &Path, machine: &str) -> Vec<RunResult> {
    crate::oracle_cmd::recorded_in(&native_results_dir(spec, machine))
}

/// The file in a machine's results-native/ folder that names the suite's
/// specs not recorded on that CPU model, each with why.
pub const NOT_RECORDED: &str = "not-recorded.toml";

/// The timing specs (of `specs`) with no native runs on CPU model
/// `machine`, each with the reason its `not-recorded.toml` gives
/// (`spec = "why"`); none when the file is absent. Such a spec is listed
/// under the table instead of failing the suite; any other spec without
/// runs still fails it. A listed name that is no spec, or a listed spec
/// that has runs there, is an error.
pub fn not_recorded(
    dir: &Path,
    machine: &str,
    specs: &[std::path::PathBuf],
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let path = dir
        .join("timing/results-native")
        .join(machine)
        .join(NOT_RECORDED);
    let listed: std::collections::BTreeMap<String, String> = match std::fs::read_to_string(&path) {
        Ok(text) => toml::from_str(&text).map_err(|e| {
            format!(
                "{}: {e}expected: spec name = \"why it has no native runs here\"",
                path.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    for name in listed.keys() {
        let Some(spec) = specs.iter().find(|s| spec_name(s) == *name) else {
            return Err(format!(
                "{}: {name}: no such timing spec (expected one of fidelity/timing/*.toml's names)",
                path.display()
            ));
        };
        if !recorded_native(spec, machine).is_empty() {
            return Err(format!(
                "{}: {name} has native runs on {machine} but is listed here",
                path.display()
            ));
        }
    }
    Ok(listed)
}

/// A spec's name: its file's stem.
pub fn spec_name(spec: &Path) -> String {
    spec.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string()
}

/// Whose recordings the suite's times are set beside: those made on the
/// CPU the run's profile was measured on; where there are none, this
/// machine's; else the default profile's machine. Returns the machine's
/// slug.
pub fn machine(dir: &Path) -> String {
    use mmsim_sim::machine_profile::{cpu_model, machine_slug, CostProfile};
    let has = |m: &str| dir.join("timing/results-native").join(m).is_dir();
    let candidates = [
        crate::sim_options().costs.cpu,
        cpu_model(),
        CostProfile::default_profile().cpu,
    ];
    let slugs: Vec<String> = candidates
        .iter()
        .flatten()
        .map(|c| machine_slug(c))
        .collect();
    slugs
        .iter()
        .find(|m| has(m))
        .or(slugs.last())
        .cloned()
        .unwrap_or_default()
}

/// Phases whose time is not a kernel path's (a task waiting for another)
/// are named `wait*` and left out.
fn timed(phase: &str) -> bool {
    !phase.starts_with("wait")
}

/// Tolerance of zram's compr_data_size (a stated content's stored bytes).
pub const ZRAM_TOLERANCE: f64 = 0.10;

/// zram's mm_stat at a spec's end, simulated beside the real runs'
/// (their median).
#[derive(Debug, Clone)]
pub struct ZramRow {
    pub spec: String,
    pub swap: usize,
    pub real_compr: u64,
    pub real_compr_spread: (u64, u64),
    pub sim_compr: u64,
    pub real_mem_used: u64,
    pub sim_mem_used: u64,
    pub real_same: u64,
    pub sim_same: u64,
}

impl ZramRow {
    pub fn ratio(&self) -> f64 {
        self.sim_compr as f64 / self.real_compr.max(1) as f64
    }

    pub fn within(&self) -> bool {
        (self.ratio() - 1.0).abs() <= ZRAM_TOLERANCE
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The zram rows of a spec whose regions state content.
fn zram_rows(name: &str, sim: &RunResult, real: &[RunResult]) -> Vec<ZramRow> {
    sim.zram
        .iter()
        .map(|z| {
            let of = |f: &dyn Fn(&mmsim_spec::output::ZramMmStat) -> u64| -> Vec<u64> {
                real.iter()
                    .filter_map(|r| r.zram.iter().find(|x| x.swap == z.swap))
                    .map(f)
                    .collect()
            };
            let compr = of(&|x| x.compr_data_size);
            ZramRow {
                spec: name.to_string(),
                swap: z.swap,
                real_compr_spread: (
                    compr.iter().copied().min().unwrap_or(0),
                    compr.iter().copied().max().unwrap_or(0),
                ),
                real_compr: median(compr),
                sim_compr: z.compr_data_size,
                real_mem_used: median(of(&|x| x.mem_used_total)),
                sim_mem_used: z.mem_used_total,
                real_same: median(of(&|x| x.same_pages)),
                sim_same: z.same_pages,
            }
        })
        .collect()
}

/// Every timed phase of the spec at `path`, simulated and recorded, and
/// its zram devices' stored bytes when its regions state content.
pub fn phases(path: &Path, machine: &str) -> Result<(Vec<PhaseTime>, Vec<ZramRow>), String> {
    let mut spec = mmsim_spec::load(path, &[]).map_err(|e| e.to_string())?;
    let real = recorded_native(path, machine);
    // Simulated as the recorded kernel runs it (the mechanisms it has
    // that the spec's preset lacks), as calibrate fits the profile.
    if let Some(r) = real.first() {
        crate::calibrate::HostKernel::from_release(&r.engine.version).apply(&mut spec);
    }
    if real.is_empty() {
        return Err(format!(
            "{}: no native results in {}; record them with `mmsim oracle record --native --runs 5 {}`",
            path.display(),
            native_results_dir(path, machine).display(),
            path.display()
        ));
    }
    let opts = crate::sim_options();
    // cost_model.rs documents no page content's compression: the
    // reference column takes the run's profile's measured table.
    let compress = opts.costs.compress.clone();
    let sim = mmsim_sim::run(&spec, opts).map_err(|e| format!("{}: {e}", path.display()))?;
    let reference = mmsim_sim::run(
        &spec,
        mmsim_sim::RunOptions {
            costs: mmsim_sim::machine_profile::CostProfile {
                compress,
                ..mmsim_sim::machine_profile::CostProfile::reference()
            },
            ..Default::default()
        },
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let tolerance = |phase: &str| {
        spec.fidelity
            .times
            .iter()
            .find(|(p, _)| p == phase)
            .map_or(DEFAULT_TIME_TOLERANCE, |t| t.1)
    };
    let name = spec_name(path);
    let zram = zram_rows(&name, &sim, &real);
    let mut out = Vec::new();
    for (t, rt) in sim.tasks.iter().zip(&reference.tasks) {
        for (p, rp) in t
            .phases
            .iter()
            .zip(&rt.phases)
            .filter(|(p, _)| timed(&p.name))
        {
            let runs: Vec<(u64, Option<mmsim_spec::output::Pressure>)> = real
                .iter()
                .filter_map(|r| r.tasks.iter().find(|x| x.name == t.name))
                .filter_map(|x| x.phases.iter().find(|q| q.name == p.name))
                .map(|q| (q.end_ns - q.start_ns, q.pressure))
                .collect();
            let times: Vec<u64> = runs.iter().map(|r| r.0).collect();
            let sim_ns = p.end_ns - p.start_ns;
            let pressure = real_pressure(&runs).map(|(some, full, share)| {
                let sp = p.pressure.unwrap_or_default().memory;
                PhasePressure {
                    real_some_us: some,
                    real_full_us: full,
                    sim_some_us: sp.some.total_us,
                    sim_full_us: sp.full.total_us,
                    real_share: share,
                    sim_share: sp.some.total_us as f64 * 1e3 / sim_ns.max(1) as f64,
                }
            });
            let (Some(&min), Some(&max)) = (times.iter().min(), times.iter().max()) else {
                return Err(format!(
                    "{name}: no real run has phase {}/{}",
                    t.name, p.name
                ));
            };
            out.push(PhaseTime {
                spec: name.clone(),
                phase: format!("{}/{}", t.name, p.name),
                real_min_ns: min,
                real_max_ns: max,
                sim_ns,
                reference_ns: rp.end_ns - rp.start_ns,
                tolerance: tolerance(&p.name),
                pressure,
            });
        }
    }
    Ok((out, zram))
}

/// zram's stored bytes for the specs whose regions state content.
fn zram_markdown(rows: &[ZramRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    s += "
zram's mm_stat at the end (stated page content; real: the median run; memory used: 6.1's zsmalloc in mmsim, 6.18's in the real kernel):

";
    s += "| spec | swap | real compr_data_size (MiB) | real spread | mmsim (MiB) | sim/real | tolerance | same_pages real / mmsim | mem_used_total real / mmsim (MiB) |\n";
    s += "|---|---|---|---|---|---|---|---|---|\n";
    let mib = |b: u64| format!("{:.2}", b as f64 / (1u64 << 20) as f64);
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {}–{} | {} | {:.3} | {:.0}%{} | {} / {} | {} / {} |",
            r.spec,
            r.swap,
            mib(r.real_compr),
            mib(r.real_compr_spread.0),
            mib(r.real_compr_spread.1),
            mib(r.sim_compr),
            r.ratio(),
            ZRAM_TOLERANCE * 100.0,
            if r.within() { "" } else { " ✗" },
            r.real_same,
            r.sim_same,
            mib(r.real_mem_used),
            mib(r.sim_mem_used)
        );
    }
    s
}

/// The phases whose real runs read /proc/pressure: memory some and full,
/// the real runs' median beside mmsim's, and the share of the phase's
/// time stalled (which does not depend on how fast the phase ran).
fn pressure_markdown(rows: &[PhaseTime]) -> String {
    let with: Vec<(&PhaseTime, &PhasePressure)> = rows
        .iter()
        .filter_map(|r| r.pressure.as_ref().map(|p| (r, p)))
        .collect();
    if with.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    s += "\nMemory pressure (/proc/pressure/memory over the phase; real: the median run):\n\n";
    s += "| spec | phase | real some (ms) | mmsim some (ms) | sim/real | real full (ms) | mmsim full (ms) | sim/real | tolerance | stalled share real / mmsim |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|\n";
    for (r, p) in with {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2} | {} | {} | {:.2} | {:.0}%{} | {:.0}% / {:.0}% |",
            r.spec,
            r.phase,
            ms(p.real_some_us * 1000),
            ms(p.sim_some_us * 1000),
            p.some_ratio(),
            ms(p.real_full_us * 1000),
            ms(p.sim_full_us * 1000),
            p.full_ratio(),
            PRESSURE_TOLERANCE * 100.0,
            if p.within() { "" } else { " ✗" },
            p.real_share * 100.0,
            p.sim_share * 100.0
        );
    }
    s
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// The markdown table of every phase, then the summary lines, then the
/// specs not recorded on this CPU model (name, why).
pub fn markdown(rows: &[PhaseTime], zram: &[ZramRow], skipped: &[(String, String)]) -> String {
    let mut s = String::new();
    s += "| spec | phase | real fastest (ms) | real spread (ms) | mmsim (ms) | sim/real | tolerance | reference sim/real |\n";
    s += "|---|---|---|---|---|---|---|---|\n";
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {}–{} | {} | {:.2} | {:.0}%{} | {:.2} |",
            r.spec,
            r.phase,
            ms(r.real_min_ns),
            ms(r.real_min_ns),
            ms(r.real_max_ns),
            ms(r.sim_ns),
            r.ratio(),
            r.tolerance * 100.0,
            if r.within() { "" } else { " ✗" },
            r.reference_ratio()
        );
    }
    let summary = |ratio: &dyn Fn(&PhaseTime) -> f64, what: &str| -> String {
        let mut dev: Vec<f64> = rows.iter().map(|r| (ratio(r) - 1.0).abs()).collect();
        dev.sort_by(f64::total_cmp);
        match dev.last() {
            Some(&worst) => format!(
                "{} phases, {what}: median |sim/real − 1| {:.0}%, worst {:.0}% (targets: 10% and 30%).\n",
                rows.len(),
                dev[dev.len() / 2] * 100.0,
                worst * 100.0
            ),
            None => String::new(),
        }
    };
    s += "\n";
    s += &summary(&PhaseTime::ratio, "the run's profile");
    s += "\n";
    s += &summary(
        &PhaseTime::reference_ratio,
        "the reference profile's values",
    );
    s += &pressure_markdown(rows);
    s += &zram_markdown(zram);
    if !skipped.is_empty() {
        s += "\nNot recorded on this CPU model, so not in the table:\n\n";
        for (spec, why) in skipped {
            let _ = writeln!(s, "- {spec}: {why}");
        }
    }
    s
}

//! Running an experiment: both sides of every variant, in parallel, then
//! each effect measured and judged.

use crate::experiment::{Effect, Experiment, FeatureIn, Variant};
use crate::judge::{self, Direction, Magnitude};
use crate::measure::measure;
use crate::scorecard::{measurements, verdict, EffectResult, ExperimentResult, ExtraResult, Pair};
use mmsim_sim::output::RunResult;
use mmsim_sim::RunOptions;
use mmsim_spec::Spec;
use std::collections::BTreeMap;
use std::path::Path;

/// `f` over `jobs` on up to as many threads as the machine has CPUs (the
/// runs are independent and deterministic, so the results are the same
/// as one after another), in the jobs' order.
pub fn run_parallel<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<R>> = (0..jobs.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut out);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(job) = jobs.get(i) else {
                    break;
                };
                let r = f(job);
                slots.lock().expect("no worker panics holding it")[i] = Some(r);
            });
        }
    });
    out.into_iter().map(|r| r.expect("every job ran")).collect()
}

/// How the runs of an experiment are made: the simulator's options for
/// each run (the machine profile), and what to do as each ends (a
/// progress bar's step).
pub struct Runner<'a> {
    pub options: &'a (dyn Fn() -> RunOptions<'static> + Sync),
    pub done: &'a (dyn Fn() + Sync),
}

/// Runs one variant's spec with the feature at `value`, in the host's
/// kernel or in each of its guests' (`feature_in`).
fn run_side(
    dir: &Path,
    spec: &str,
    feature: &str,
    (value, feature_in): (bool, FeatureIn),
    runner: &Runner,
) -> Result<(Spec, RunResult), String> {
    let path = dir.join(spec);
    let sets = match feature_in {
        FeatureIn::Host => vec![format!("features.{feature}={value}")],
        FeatureIn::Guests => {
            let s = mmsim_spec::load(&path, &[]).map_err(|e| e.to_string())?;
            if s.vms.is_empty() {
                return Err(format!(
                    "{}: found no guest, expected a [vm.NAME] for feature_in = \"guests\"",
                    path.display()
                ));
            }
            (s.vms.iter())
                .map(|v| format!("vm.{}.features.{feature}={value}", v.name))
                .collect()
        }
    };
    let s = mmsim_spec::load(&path, &sets).map_err(|e| e.to_string())?;
    let r =
        mmsim_sim::run(&s, (runner.options)()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((s, r))
}

/// One effect judged from mmsim's pair of figures.
pub fn evaluate(e: &Effect, sim: Pair) -> EffectResult {
    let expected = Direction::parse_expected(&e.direction).expect("checked by load");
    let v = judge::judge(
        expected,
        (e.seed.baseline, e.seed.patched),
        (sim.baseline, sim.patched),
    );
    EffectResult {
        metric: e.metric.clone(),
        seed: e.seed,
        sim,
        seed_change: v.r_seed,
        sim_change: v.r_sim,
        direction: e.direction.clone(),
        observed: v.observed.observed_word().to_string(),
        direction_matches: v.direction_matches,
        magnitude: v.magnitude.word().to_string(),
        within: v.magnitude == Magnitude::Within,
        reproduced: v.reproduced,
        known_miss: e.miss.clone(),
        known_direction_miss: e.direction_miss,
        measurement: e.measurement.clone(),
    }
}

/// Every run of an experiment and its spec, keyed by (variant, patched).
pub type Runs = BTreeMap<(String, bool), (Spec, RunResult)>;

/// Runs both sides of every variant of the experiment in `dir`.
fn run_sides(dir: &Path, e: &Experiment, quick: bool, runner: &Runner) -> Result<Runs, String> {
    let jobs: Vec<(&Variant, bool)> = e
        .variants
        .iter()
        .flat_map(|v| [(v, false), (v, true)])
        .collect();
    let results = run_parallel(&jobs, |&(v, patched)| {
        let value = if patched { e.patched } else { e.baseline };
        let spec = if quick { &v.quick } else { &v.spec };
        let r = run_side(dir, spec, &e.feature, (value, v.feature_in), runner);
        (runner.done)();
        r
    });
    let mut runs = BTreeMap::new();
    for (&(v, patched), r) in jobs.iter().zip(results) {
        runs.insert((v.name.clone(), patched), r?);
    }
    Ok(runs)
}

/// What `measure` reads from a variant's two runs.
fn measure_pair(runs: &Runs, variant: &str, what: &str) -> Result<Pair, String> {
    let get = |patched: bool| {
        let (s, r) = &runs[&(variant.to_string(), patched)];
        measure(r, s, what)
    };
    Ok(Pair {
        baseline: get(false)?,
        patched: get(true)?,
    })
}

/// Runs every side of the experiment in `dir` and judges its effects;
/// returns the result and the runs (for the report's tables).
pub fn run_experiment(
    dir: &Path,
    e: &Experiment,
    quick: bool,
    runner: &Runner,
) -> Result<(ExperimentResult, Runs), String> {
    let runs = run_sides(dir, e, quick, runner)?;
    let effects = e
        .effects
        .iter()
        .map(|eff| {
            Ok(evaluate(
                eff,
                measure_pair(&runs, &eff.variant, &eff.measure)?,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let extras = e
        .extras
        .iter()
        .map(|x| {
            Ok(ExtraResult {
                metric: x.metric.clone(),
                sim: measure_pair(&runs, &x.variant, &x.measure)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let ms = measurements(&effects);
    let result = ExperimentResult {
        name: name_of(dir),
        title: e.title.clone(),
        doc: e.doc.clone(),
        reproduced: effects.iter().filter(|x| x.reproduced).count(),
        verdict: verdict(&effects),
        effects,
        measurements_reproduced: ms.iter().filter(|m| m.reproduced).count(),
        measurements: ms,
        extras,
    };
    Ok((result, runs))
}

/// An experiment's name: its folder's.
pub fn name_of(dir: &Path) -> String {
    dir.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::run_parallel;

    #[test]
    fn parallel_runs_keep_the_jobs_order() {
        let jobs: Vec<u64> = (0..37).collect();
        let out = run_parallel(&jobs, |&j| {
            // Uneven work, so the workers finish out of order.
            std::thread::sleep(std::time::Duration::from_micros((37 - j) * 50));
            j * j
        });
        assert_eq!(out, jobs.iter().map(|j| j * j).collect::<Vec<_>>());
    }
}

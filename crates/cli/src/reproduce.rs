//! `mmsim reproduce`: rerun the seed experiments under `experiments/`,
//! baseline and patched, and set mmsim's numbers beside the seed's.
//!
//! Each experiment folder holds `experiment.toml` (the feature flag that
//! separates the two sides, the spec variants, and one `[[effect]]` per
//! figure the seed reports: its numbers, how mmsim measures it and the
//! expected direction) and the specs it names. Every effect is judged by
//! the rule in `judge.rs`: on the factor patched / baseline, the seed's
//! against mmsim's, in logarithms. Effects that are one measurement (the
//! same figure printed several ways, shares that sum to one, the maximum
//! and mean of the same launches) share a `measurement` name and count
//! once among the independent measurements, reproduced when all of its
//! effects are.

use crate::judge::{self, num, percent, Direction, Magnitude};
use mmsim_sim::output::RunResult;
use mmsim_spec::Spec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub title: String,
    /// The feature flag whose value separates baseline from patched.
    pub feature: String,
    pub baseline: bool,
    pub patched: bool,
    /// Where the docs discuss the experiment and any miss.
    pub doc: String,
    #[serde(default)]
    pub tables: Vec<Table>,
    #[serde(rename = "variant")]
    pub variants: Vec<Variant>,
    #[serde(rename = "effect")]
    pub effects: Vec<Effect>,
    /// Figures the seed does not report that explain the effects (mmsim
    /// only), printed both ways.
    #[serde(default, rename = "extra")]
    pub extras: Vec<Extra>,
    /// The mechanism on real kernels before and after it (seeds_real.rs).
    #[serde(default)]
    pub real: Option<crate::seeds_real::RealAb>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Extra {
    pub metric: String,
    pub variant: String,
    pub measure: String,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub variant: String,
    pub site: String,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    pub spec: String,
    /// The reduced-scale spec `--quick` runs.
    pub quick: String,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Effect {
    pub metric: String,
    pub variant: String,
    /// `phase_s:PHASE`, `vmstat:COUNTER`, `kv:FIGURE:PHASE`, the longest
    /// or mean run time of the programs a task launched
    /// (`spawn_max_s:TASK`, `spawn_mean_s:TASK`), a phase's throughput over
    /// the whole of file FILE (`mb_per_s:PHASE:FILE`, MB/s), the
    /// iterations of the repeat after a phase mark over the phase's time
    /// (`loops_per_s:PHASE`), the share of simulated
    /// CPU time in a kernel function and its callees
    /// (`profile_share:FUNCTION`, %), or the share of a histogram's
    /// events at most / at least N: `hist_share_le:SITE:N`,
    /// `hist_share_ge:SITE:N`.
    pub measure: String,
    pub seed: Pair,
    /// "lower" or "higher": where the patch moves the metric; "none": the
    /// seed saw no change (under 3 %; a pair of 1, 1 when it gives no
    /// figures). It must be what the seed's pair shows.
    pub direction: String,
    /// A known miss — the effect is not reproduced: why (the docs explain
    /// it in full).
    #[serde(default)]
    pub miss: Option<String>,
    /// The known miss includes the direction (mmsim does not move the
    /// figure the seed's way).
    #[serde(default)]
    pub direction_miss: bool,
    /// The measurement this effect is part of, when it is not a
    /// measurement of its own: effects of one variant that are the same
    /// measurement seen several ways name the same one, which the
    /// scorecard counts once.
    #[serde(default)]
    pub measurement: Option<String>,
}

#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    pub baseline: f64,
    pub patched: f64,
}

impl Pair {
    fn ratio(&self) -> f64 {
        self.patched / self.baseline
    }

    fn change(&self) -> f64 {
        judge::change(self.baseline, self.patched)
    }
}

/// One effect's outcome, as `--json` prints it.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct EffectResult {
    pub metric: String,
    pub seed: Pair,
    pub sim: Pair,
    /// patched / baseline − 1, the seed's and mmsim's (null if infinite).
    pub seed_change: f64,
    pub sim_change: f64,
    /// The expected direction: "lower", "higher" or "none".
    pub direction: String,
    /// What mmsim saw: "lower", "higher" or "no change".
    pub observed: String,
    pub direction_matches: bool,
    /// "within", "none seen", "too small", "too large" or "opposite".
    pub magnitude: String,
    pub within: bool,
    /// Direction right and magnitude within.
    pub reproduced: bool,
    /// The recorded reason for a known miss.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub known_miss: Option<String>,
    /// The known miss includes the direction.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub known_direction_miss: bool,
    /// The measurement it is part of, when it shares one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub measurement: Option<String>,
}

/// One independent measurement: an effect of its own (named by its
/// metric), or the effects that share a `measurement`. It is reproduced
/// when all of its effects are.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct MeasurementResult {
    pub name: String,
    /// The metrics of its effects.
    pub effects: Vec<String>,
    pub reproduced: bool,
}

/// An mmsim-only figure, both ways.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ExtraResult {
    pub metric: String,
    pub sim: Pair,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ExperimentResult {
    pub name: String,
    pub title: String,
    pub doc: String,
    /// How many of the effects are reproduced, and the one-line verdict.
    pub reproduced: usize,
    pub verdict: String,
    pub effects: Vec<EffectResult>,
    /// How many of the independent measurements are reproduced, and
    /// which effects each is made of, in the effects' order.
    pub measurements_reproduced: usize,
    pub measurements: Vec<MeasurementResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extras: Vec<ExtraResult>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct Report {
    /// Effects reproduced over all the experiments, and their number.
    pub reproduced: usize,
    pub effects: usize,
    /// Independent measurements reproduced, and their number.
    pub measurements_reproduced: usize,
    pub measurements: usize,
    pub experiments: Vec<ExperimentResult>,
}

/// The experiment folders under `dir` whose names start with any of
/// `names` (all of them when `names` is empty), in name order, and whether
/// that is every experiment there.
fn select(dir: &Path, names: &[String]) -> Result<(Vec<PathBuf>, bool), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut all: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("experiment.toml").is_file())
        .collect();
    all.sort();
    if names.is_empty() {
        return Ok((all, true));
    }
    let mut out = Vec::new();
    for n in names {
        let found: Vec<&PathBuf> = all
            .iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|f| f.to_string_lossy().starts_with(n.as_str()))
            })
            .collect();
        if found.is_empty() {
            let known: Vec<String> = all
                .iter()
                .filter_map(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
                .collect();
            return Err(format!(
                "found no experiment named {n:?} under {}; expected one of {}",
                dir.display(),
                known.join(", ")
            ));
        }
        out.extend(found.into_iter().cloned());
    }
    out.sort();
    out.dedup();
    let every = out == all;
    Ok((out, every))
}

pub fn load(dir: &Path) -> Result<Experiment, String> {
    let path = dir.join("experiment.toml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let e: Experiment = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    for eff in &e.effects {
        if !e.variants.iter().any(|v| v.name == eff.variant) {
            return Err(format!(
                "{}: effect {:?} names variant {:?}, which the file does not define",
                path.display(),
                eff.metric,
                eff.variant
            ));
        }
        // A seed's figures are published counts, times, rates and shares:
        // the judgement's logarithms need them finite and not negative.
        for (side, v) in [
            ("baseline", eff.seed.baseline),
            ("patched", eff.seed.patched),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "{}: effect {:?}: found the seed's {side} {v}, expected a finite number, 0 or more",
                    path.display(),
                    eff.metric
                ));
            }
        }
        let Some(expected) = Direction::parse_expected(&eff.direction) else {
            return Err(format!(
                "{}: effect {:?}: found direction {:?}, expected \"lower\", \"higher\" or \"none\"",
                path.display(),
                eff.metric,
                eff.direction
            ));
        };
        let shown = Direction::of(eff.seed.change());
        if shown != expected {
            return Err(format!(
                "{}: effect {:?}: found direction {:?}, but the seed's figures ({} -> {}, {}) show {:?} (a change under 3% is \"none\")",
                path.display(),
                eff.metric,
                eff.direction,
                num(eff.seed.baseline),
                num(eff.seed.patched),
                percent(eff.seed.change()),
                shown.expected_word()
            ));
        }
        if eff.direction_miss && eff.miss.is_none() {
            return Err(format!(
                "{}: effect {:?}: direction_miss needs a miss (the reason)",
                path.display(),
                eff.metric
            ));
        }
        if let Some(m) = &eff.measurement {
            // One measurement is one set of runs, seen several ways; a
            // name on one effect alone is most likely a misspelt one.
            let group: Vec<&Effect> = e
                .effects
                .iter()
                .filter(|x| x.measurement.as_ref() == Some(m))
                .collect();
            if group.len() < 2 {
                return Err(format!(
                    "{}: effect {:?}: found measurement {m:?} on this effect alone, expected at least two effects to share it (an effect without one is a measurement of its own)",
                    path.display(),
                    eff.metric
                ));
            }
            if let Some(other) = group.iter().find(|x| x.variant != eff.variant) {
                return Err(format!(
                    "{}: measurement {m:?}: found effects of variants {:?} and {:?}, expected one variant (one measurement is one set of runs)",
                    path.display(),
                    eff.variant,
                    other.variant
                ));
            }
            if e.effects
                .iter()
                .any(|x| x.measurement.is_none() && x.metric == *m)
            {
                return Err(format!(
                    "{}: measurement {m:?} is also the metric of an effect of its own, expected distinct names",
                    path.display()
                ));
            }
        }
    }
    Ok(e)
}

/// What one measure reads from a run.
pub fn measure(r: &RunResult, spec: &Spec, what: &str) -> Result<f64, String> {
    let parts: Vec<&str> = what.split(':').collect();
    match parts.as_slice() {
        ["phase_s", phase] => r
            .tasks
            .iter()
            .flat_map(|t| t.phases.iter())
            .find(|p| p.name == *phase)
            .map(|p| (p.end_ns - p.start_ns) as f64 / 1e9)
            .ok_or_else(|| format!("no phase {phase:?} in the run")),
        ["vmstat", name] => Ok(r.vmstat.get(*name).copied().unwrap_or(0) as f64),
        ["vmstat", phase, name] => {
            // A counter's change over one phase, summed over the tasks
            // that have it.
            let ps: Vec<_> = r
                .tasks
                .iter()
                .flat_map(|t| t.phases.iter())
                .filter(|p| p.name == *phase)
                .collect();
            if ps.is_empty() {
                return Err(format!("no phase {phase:?} in the run"));
            }
            Ok(ps
                .iter()
                .map(|p| p.vmstat.get(*name).copied().unwrap_or(0))
                .sum::<i64>() as f64)
        }
        [kind @ ("spawn_max_s" | "spawn_mean_s"), task] => {
            // The run times of the programs task TASK launched.
            let prefix = format!("{task}/spawn");
            let times: Vec<f64> = r
                .tasks
                .iter()
                .filter(|t| t.name.starts_with(&prefix))
                .map(|t| (t.end_ns - t.start_ns) as f64 / 1e9)
                .collect();
            if times.is_empty() {
                return Err(format!("task {task:?} launched no program"));
            }
            Ok(if *kind == "spawn_max_s" {
                times.iter().cloned().fold(0.0, f64::max)
            } else {
                times.iter().sum::<f64>() / times.len() as f64
            })
        }
        ["mb_per_s", phase, file] => {
            // The file's bytes over the phase's time: what a program that
            // reads the file in that phase reports as its throughput.
            let f = spec
                .files
                .iter()
                .find(|f| f.name == *file)
                .ok_or_else(|| format!("no file {file:?} in the spec, in {what:?}"))?;
            let s = measure(r, spec, &format!("phase_s:{phase}"))?;
            Ok(f.size as f64 / 1e6 / s)
        }
        ["loops_per_s", phase] => {
            // The iterations of the `repeat` that follows the phase mark in
            // the first task, over the phase's time: what a loop run for
            // one second counts.
            let steps = &spec.tasks.first().ok_or("the spec has no task")?.steps;
            let at = steps
                .iter()
                .position(|s| matches!(&s.op, mmsim_spec::Op::Phase { name } if name == phase))
                .ok_or_else(|| format!("no phase {phase:?} in the first task"))?;
            let times = steps[at..]
                .iter()
                .find_map(|s| match s.op {
                    mmsim_spec::Op::Repeat { times, .. } => Some(times),
                    _ => None,
                })
                .ok_or_else(|| format!("no repeat after phase {phase:?}"))?;
            Ok(times as f64 / measure(r, spec, &format!("phase_s:{phase}"))?)
        }
        ["profile_share", fs] => {
            // perf's "children" share: time in f and its callees, over
            // all the simulated CPU time (f counted once where it nests);
            // `A+B` adds two functions' shares (one side's function and
            // the other side's replacement).
            let total: u64 = r
                .profile_tree
                .iter()
                .filter(|row| !row.path.contains(';'))
                .map(|row| row.total_ns)
                .sum();
            let inside: u64 = fs
                .split('+')
                .map(|f| {
                    r.profile_tree
                        .iter()
                        .filter(|row| {
                            let mut parts = row.path.rsplit(';');
                            parts.next() == Some(f) && parts.all(|p| p != f)
                        })
                        .map(|row| row.total_ns)
                        .sum::<u64>()
                })
                .sum();
            if total == 0 {
                return Err("the run has no profile".into());
            }
            Ok(100.0 * inside as f64 / total as f64)
        }
        ["kv", what, phase] => {
            // memtier's figures, averaged over the tasks (the seed's
            // "Index(average)" over its instances).
            let per: Vec<f64> = r
                .tasks
                .iter()
                .flat_map(|t| t.phases.iter())
                .filter(|p| p.name == *phase)
                .filter_map(|p| p.kv)
                .map(|k| match *what {
                    "ops_per_sec" => Ok(k.ops_per_sec()),
                    "hits_per_sec" => Ok(k.hits_per_sec()),
                    "misses_per_sec" => Ok(k.misses_per_sec()),
                    "latency_ms" => Ok(k.latency_ms()),
                    "kb_per_sec" => Ok(k.kb_per_sec()),
                    other => Err(format!("found the kv figure {other:?}, expected ops_per_sec, hits_per_sec, misses_per_sec, latency_ms or kb_per_sec")),
                })
                .collect::<Result<_, _>>()?;
            if per.is_empty() {
                return Err(format!("no kvstore in phase {phase:?}"));
            }
            Ok(per.iter().sum::<f64>() / per.len() as f64)
        }
        [kind @ ("hist_share_le" | "hist_share_ge"), site, n] => {
            let n: u64 = n.parse().map_err(|_| format!("bad bucket {n:?} in {what:?}"))?;
            let h = r.histograms.get(*site).cloned().unwrap_or_default();
            let total: u64 = h.iter().map(|b| b.count).sum();
            // Power-of-two buckets: [lo, hi) holds values of lo.
            let hit: u64 = h
                .iter()
                .filter(|b| if *kind == "hist_share_le" { b.lo <= n } else { b.lo >= n })
                .map(|b| b.count)
                .sum();
            Ok(if total == 0 { 0.0 } else { hit as f64 / total as f64 })
        }
        _ => Err(format!(
            "found the measure {what:?}, expected phase_s:PHASE, vmstat:COUNTER, kv:FIGURE:PHASE, spawn_max_s:TASK, spawn_mean_s:TASK, mb_per_s:PHASE:FILE, loops_per_s:PHASE, profile_share:FUNCTION, hist_share_le:SITE:N or hist_share_ge:SITE:N"
        )),
    }
}

/// `f` over `jobs` on up to as many threads as the machine has CPUs (the
/// runs are independent and deterministic, so the results are the same
/// as one after another), in the jobs' order.
pub(crate) fn run_parallel<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> R + Sync) -> Vec<R> {
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

/// Runs one variant's spec with the feature at `value`.
fn run_side(
    dir: &Path,
    spec: &str,
    feature: &str,
    value: bool,
) -> Result<(Spec, RunResult), String> {
    let path = dir.join(spec);
    let set = format!("features.{feature}={value}");
    let s = mmsim_spec::load(&path, &[set]).map_err(|e| e.to_string())?;
    let r =
        mmsim_sim::run(&s, crate::sim_options()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((s, r))
}

fn evaluate(e: &Effect, sim: Pair) -> EffectResult {
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

/// The independent measurements of an experiment's effects, in the order
/// of their first effect: an effect without a `measurement` is one of its
/// own, named by its metric; a measurement is reproduced when all of its
/// effects are.
pub fn measurements(effects: &[EffectResult]) -> Vec<MeasurementResult> {
    let mut out: Vec<MeasurementResult> = Vec::new();
    for e in effects {
        match &e.measurement {
            Some(m) => match out.iter_mut().find(|x| x.name == *m) {
                Some(x) => {
                    x.effects.push(e.metric.clone());
                    x.reproduced &= e.reproduced;
                }
                None => out.push(MeasurementResult {
                    name: m.clone(),
                    effects: vec![e.metric.clone()],
                    reproduced: e.reproduced,
                }),
            },
            None => out.push(MeasurementResult {
                name: e.metric.clone(),
                effects: vec![e.metric.clone()],
                reproduced: e.reproduced,
            }),
        }
    }
    out
}

/// The one-line verdict on an experiment's effects: how many are
/// reproduced, and what mmsim sees of the rest.
pub fn verdict(effects: &[EffectResult]) -> String {
    let n = effects.len();
    let rep = effects.iter().filter(|e| e.reproduced).count();
    let head = if rep == n {
        "reproduced"
    } else if rep == 0 {
        "not reproduced"
    } else {
        "partly reproduced"
    };
    let ms = measurements(effects);
    let mrep = ms.iter().filter(|m| m.reproduced).count();
    let mut s = format!(
        "{head} ({rep} of {n} effects, {mrep} of {} measurements)",
        ms.len()
    );
    if rep == n {
        return s;
    }
    // What mmsim sees where it misses, most common first.
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for e in effects.iter().filter(|e| !e.reproduced) {
        let kind = if e.observed == Direction::NoChange.observed_word() && e.direction != "none" {
            "no change"
        } else {
            match e.magnitude.as_str() {
                "too small" => "a smaller change",
                "too large" if e.direction == "none" => "a change the seed did not see",
                "too large" => "a larger change",
                "opposite" => "the opposite change",
                // Within, but not the seed's direction.
                _ => "a change on the edge of no change",
            }
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, c)) => *c += 1,
            None => kinds.push((kind, 1)),
        }
    }
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    let list: Vec<String> = kinds
        .iter()
        .map(|(k, c)| {
            if *c == n {
                format!("{k} in any")
            } else {
                format!("{k} in {c}")
            }
        })
        .collect();
    s += ": mmsim sees ";
    s += &join_and(&list);
    s
}

fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [a] => a.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Every run of an experiment and its spec, keyed by (variant, patched).
type Runs = BTreeMap<(String, bool), (Spec, RunResult)>;

/// Runs every side of one experiment (with a progress bar) and returns its
/// effects and the runs.
fn run_experiment(
    dir: &Path,
    e: &Experiment,
    quick: bool,
    bar: &indicatif::ProgressBar,
) -> Result<(ExperimentResult, Runs), String> {
    let jobs: Vec<(&Variant, bool)> = e
        .variants
        .iter()
        .flat_map(|v| [(v, false), (v, true)])
        .collect();
    bar.set_message(name_of(dir));
    let results = run_parallel(&jobs, |&(v, patched)| {
        let value = if patched { e.patched } else { e.baseline };
        let spec = if quick { &v.quick } else { &v.spec };
        let r = run_side(dir, spec, &e.feature, value);
        bar.inc(1);
        r
    });
    let mut runs = BTreeMap::new();
    for (&(v, patched), r) in jobs.iter().zip(results) {
        runs.insert((v.name.clone(), patched), r?);
    }
    let mut effects = Vec::new();
    for eff in &e.effects {
        let get = |patched: bool| {
            let (s, r) = &runs[&(eff.variant.clone(), patched)];
            measure(r, s, &eff.measure)
        };
        let sim = Pair {
            baseline: get(false)?,
            patched: get(true)?,
        };
        effects.push(evaluate(eff, sim));
    }
    let mut extras = Vec::new();
    for x in &e.extras {
        let get = |patched: bool| {
            let (s, r) = &runs[&(x.variant.clone(), patched)];
            measure(r, s, &x.measure)
        };
        extras.push(ExtraResult {
            metric: x.metric.clone(),
            sim: Pair {
                baseline: get(false)?,
                patched: get(true)?,
            },
        });
    }
    let ms = measurements(&effects);
    Ok((
        ExperimentResult {
            name: name_of(dir),
            title: e.title.clone(),
            doc: e.doc.clone(),
            reproduced: effects.iter().filter(|x| x.reproduced).count(),
            verdict: verdict(&effects),
            effects,
            measurements_reproduced: ms.iter().filter(|m| m.reproduced).count(),
            measurements: ms,
            extras,
        },
        runs,
    ))
}

fn name_of(dir: &Path) -> String {
    dir.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn side(patched: bool) -> &'static str {
    if patched {
        "patched"
    } else {
        "baseline"
    }
}

/// The columns of an effect's row, in every form of the report.
const HEADER: [&str; 11] = [
    "metric",
    "seed baseline",
    "seed patched",
    "seed change",
    "mmsim baseline",
    "mmsim patched",
    "mmsim change",
    "expected",
    "observed",
    "magnitude",
    "reproduced",
];

/// Columns printed left-aligned in the text table.
const LEFT: [bool; 11] = [
    true, false, false, false, false, false, false, true, true, true, true,
];

fn effect_rows(r: &ExperimentResult) -> Vec<[String; 11]> {
    r.effects
        .iter()
        .map(|e| {
            [
                e.metric.clone(),
                num(e.seed.baseline),
                num(e.seed.patched),
                percent(e.seed.change()),
                num(e.sim.baseline),
                num(e.sim.patched),
                percent(e.sim.change()),
                e.direction.clone(),
                e.observed.clone(),
                if e.within {
                    format!("within ×{}", judge::FACTOR)
                } else {
                    e.magnitude.clone()
                },
                (if e.reproduced { "yes" } else { "no" }).to_string(),
            ]
        })
        .collect()
}

/// Columns of text, padded to their widest cell.
fn text_table<const N: usize>(header: [&str; N], left: [bool; N], rows: &[[String; N]]) -> String {
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain(std::iter::once(header[i].chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..N).map(width).collect();
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = widths[i] - c.chars().count();
            if i > 0 {
                s += "  ";
            }
            if left[i] {
                s += c;
                if i + 1 < N {
                    s += &" ".repeat(pad);
                }
            } else {
                s += &" ".repeat(pad);
                s += c;
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(header.to_vec());
    for r in rows {
        s += &line(r.iter().map(|c| c.as_str()).collect());
    }
    s
}

/// The recorded reasons of an experiment's misses, each once, with the
/// effects it explains.
fn misses(r: &ExperimentResult) -> Vec<(Vec<&str>, &str)> {
    let mut out: Vec<(Vec<&str>, &str)> = Vec::new();
    for e in r.effects.iter().filter(|e| !e.reproduced) {
        if let Some(why) = &e.known_miss {
            match out.iter_mut().find(|(_, w)| *w == why.as_str()) {
                Some((ms, _)) => ms.push(&e.metric),
                None => out.push((vec![&e.metric], why)),
            }
        }
    }
    out
}

/// The side-by-side table of one experiment.
pub fn render(r: &ExperimentResult) -> String {
    let mut s = format!("{} — {}\nverdict: {}\n\n", r.name, r.title, r.verdict);
    let mut rows = effect_rows(r);
    for row in &mut rows {
        if row[10] == "no" {
            row[10] = "NO".into();
        }
    }
    s += &text_table(HEADER, LEFT, &rows);
    if !r.extras.is_empty() {
        let rows: Vec<[String; 3]> = r
            .extras
            .iter()
            .map(|x| [x.metric.clone(), num(x.sim.baseline), num(x.sim.patched)])
            .collect();
        s += "\n";
        s += &text_table(
            ["mmsim only", "baseline", "patched"],
            [true, false, false],
            &rows,
        );
    }
    let groups = groups(r);
    if !groups.is_empty() {
        s += "\nmeasurements of several effects (each counts once, reproduced when all its effects are):\n";
        for m in groups {
            s += &format!(
                "  {}: {} — {}\n",
                m.name,
                m.effects.join("; "),
                if m.reproduced {
                    "reproduced"
                } else {
                    "NOT reproduced"
                }
            );
        }
    }
    let ms = misses(r);
    if !ms.is_empty() {
        s += &format!("\nmisses (explained in {}):\n", r.doc);
        for (metrics, why) in ms {
            s += &format!("  {}: {why}\n", metrics.join("; "));
        }
    }
    s
}

/// The measurements made of several effects, which the report lists
/// under an experiment's table (the others are its rows).
fn groups(r: &ExperimentResult) -> Vec<&MeasurementResult> {
    r.measurements
        .iter()
        .filter(|m| m.effects.len() > 1)
        .collect()
}

/// The scorecard as text.
pub fn render_scorecard(parts: &[ExperimentResult]) -> String {
    let mut rows: Vec<[String; 4]> = parts
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                format!("{} / {}", r.reproduced, r.effects.len()),
                format!("{} / {}", r.measurements_reproduced, r.measurements.len()),
                r.verdict.clone(),
            ]
        })
        .collect();
    let t = totals(parts);
    rows.push([
        "total".into(),
        format!("{} / {}", t.reproduced, t.effects),
        format!("{} / {}", t.measurements_reproduced, t.measurements),
        String::new(),
    ]);
    format!(
        "scorecard — reproduced / total, of effects and of independent measurements (effects that are one measurement count once, reproduced when all are); an effect is reproduced when mmsim moves it the seed's way and its factor patched/baseline is within a power of {} of the seed's (its change under 3% when the seed's is)\n\n{}",
        judge::FACTOR,
        text_table(
            ["seed", "effects", "measurements", "verdict"],
            [true, false, false, true],
            &rows
        )
    )
}

/// Effects and measurements reproduced over all the experiments, and
/// their numbers.
struct Totals {
    reproduced: usize,
    effects: usize,
    measurements_reproduced: usize,
    measurements: usize,
}

fn totals(parts: &[ExperimentResult]) -> Totals {
    Totals {
        reproduced: parts.iter().map(|r| r.reproduced).sum(),
        effects: parts.iter().map(|r| r.effects.len()).sum(),
        measurements_reproduced: parts.iter().map(|r| r.measurements_reproduced).sum(),
        measurements: parts.iter().map(|r| r.measurements.len()).sum(),
    }
}

/// A histogram as bpftrace's `count()` by value prints it: COUNT EVENT.
fn render_table(site: &str, label: &str, r: &RunResult) -> String {
    let mut s = format!("{site} ({label})\nCOUNT EVENT\n");
    let mut rows: Vec<_> = r.histograms.get(site).cloned().unwrap_or_default();
    rows.retain(|b| b.count > 0);
    rows.sort_by_key(|b| b.count);
    for b in rows {
        s += &format!("{} $retval = {}\n", b.count, b.lo.max(1));
    }
    s
}

/// Where the report goes.
pub enum ReportTo {
    /// `report/` for every experiment at full scale, else `report-NAME/`,
    /// `report-quick/` or `report-NAME-quick/`.
    Default,
    Dir(PathBuf),
    Nowhere,
}

/// The default report folder: `report` only for every experiment at full
/// scale, so that a part or a reduced run never replaces the full report.
pub fn default_report_dir(names: &[String], every: bool, quick: bool) -> PathBuf {
    let mut s = String::from("report");
    if !every {
        for n in names {
            s.push('-');
            s.extend(n.chars().map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            }));
        }
    }
    if quick {
        s += "-quick";
    }
    PathBuf::from(s)
}

pub fn reproduce_cmd(
    dir: &Path,
    names: &[String],
    quick: bool,
    json: bool,
    to: ReportTo,
) -> ExitCode {
    let (dirs, every) = match select(dir, names) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(2);
        }
    };
    let mut exps = Vec::new();
    for d in &dirs {
        match load(d) {
            Ok(e) => exps.push((d.clone(), e)),
            Err(e) => {
                eprintln!("mmsim: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let report_dir = match to {
        ReportTo::Default => Some(default_report_dir(names, every, quick)),
        ReportTo::Dir(d) => Some(d),
        ReportTo::Nowhere => None,
    };
    let total: u64 = exps.iter().map(|(_, e)| 2 * e.variants.len() as u64).sum();
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{bar:30}] {pos}/{len} runs {msg} ({elapsed})",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    let mut results = Vec::new();
    let mut text = String::new();
    let mut parts = Vec::new();
    for (d, e) in &exps {
        let (res, runs) = match run_experiment(d, e, quick, &bar) {
            Ok(x) => x,
            Err(err) => {
                bar.finish_and_clear();
                eprintln!("mmsim: {}: {err}", d.display());
                return ExitCode::from(1);
            }
        };
        text += &render(&res);
        let mut blocks = Vec::new();
        if let Some(real) = &e.real {
            let table = crate::seeds_real::render(&repository_root(dir), real)
                .unwrap_or_else(|err| format!("Real kernels: not shown: {err}\n"));
            text += "\n";
            text += &table;
            blocks.push(("real kernels, before and after".to_string(), table));
        }
        for t in &e.tables {
            for patched in [false, true] {
                if let Some((_, r)) = runs.get(&(t.variant.clone(), patched)) {
                    let label = format!("{}, {}", t.variant, side(patched));
                    let table = render_table(&t.site, &label, r);
                    text += "\n";
                    text += &table;
                    blocks.push((format!("{} ({label})", t.site), table));
                }
            }
        }
        for v in &e.variants {
            if let (Some((_, b)), Some((_, n))) = (
                runs.get(&(v.name.clone(), false)),
                runs.get(&(v.name.clone(), true)),
            ) {
                let table = lkp_table(&v.name, b, n);
                text += "\n";
                text += &table;
                blocks.push((format!("{}: baseline against patched", v.name), table));
            }
        }
        for ((variant, patched), (_, r)) in &runs {
            let p = crate::profile_text(r);
            if !p.is_empty() {
                blocks.push((format!("profile: {variant}, {}", side(*patched)), p));
            }
        }
        text += "\n";
        parts.push(ReportPart {
            result: res.clone(),
            blocks,
        });
        results.push(res);
    }
    bar.finish_and_clear();
    text += &render_scorecard(&results);
    if let Some(out) = &report_dir {
        let root = repository_root(dir);
        let scale = if quick {
            "at reduced scale (--quick)"
        } else {
            "at full scale"
        };
        if let Err(e) = write_report(out, &root, &parts, scale) {
            eprintln!("mmsim: cannot write the report in {}: {e}", out.display());
            return ExitCode::from(1);
        }
        let note = format!(
            "report written to {}/ (index.html, README.md, one SVG plot per experiment)",
            out.display()
        );
        if json {
            eprintln!("{note}");
        } else {
            text += &format!("\n{note}\n");
        }
    }
    if json {
        let t = totals(&results);
        let report = Report {
            reproduced: t.reproduced,
            effects: t.effects,
            measurements_reproduced: t.measurements_reproduced,
            measurements: t.measurements,
            experiments: results,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        );
    } else {
        print!("{text}");
    }
    ExitCode::SUCCESS
}

/// A variant's baseline and patched runs as `mmsim diff` prints them,
/// changes of 2% (or 2 points) or more.
fn lkp_table(variant: &str, base: &RunResult, patched: &RunResult) -> String {
    use crate::diff;
    let rows = diff::rows(
        &[diff::metrics(base)],
        &[diff::metrics(patched)],
        false,
        2.0,
    );
    format!(
        "{variant}: baseline against patched (mmsim diff, changes of 2% or more)\n{}",
        diff::render("baseline", "patched", 1, 1, &rows)
    )
}

/// The repository the experiments belong to: the folder above the
/// experiments folder (the doc paths in experiment.toml are relative to
/// it).
fn repository_root(dir: &Path) -> PathBuf {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    dir.parent().map(Path::to_path_buf).unwrap_or(dir)
}

/// The relative link from folder `from` to `to`, both absolute, with
/// forward slashes.
fn relative_link(from: &Path, to: &Path) -> String {
    let f: Vec<Component> = from.components().collect();
    let t: Vec<Component> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); f.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

// ---- the report ---------------------------------------------------------

/// One experiment's part of the report: its result, and text blocks
/// (bpftrace-like tables, profiles) to show under it.
pub struct ReportPart {
    pub result: ExperimentResult,
    pub blocks: Vec<(String, String)>,
}

/// Effects per row of a plot: rows of six keep it 800 px wide at most.
const PLOT_PER_ROW: usize = 6;
/// Pixels per effect, per doubling of the ratio, and the height of a row.
const PLOT_COL: f64 = 120.0;
const PLOT_SCALE: f64 = 30.0;
const PLOT_ROW_H: f64 = 385.0;
/// The outline of the band mmsim's bar must end in.
const BAND_COLOR: &str = "#e07000";
/// The axis reaches 2^±4: 1/16 and 16.
const PLOT_LIMIT: f64 = 4.0;

/// Where a ratio falls on a row's log2 axis around `mid`, and whether it
/// is off the scale (1: above, -1: below).
fn plot_y(ratio: f64, mid: f64) -> (f64, i32) {
    let (l, off) = if ratio.is_nan() {
        (0.0, 0)
    } else if ratio <= 0.0 {
        (-PLOT_LIMIT, -1)
    } else if ratio.is_infinite() {
        (PLOT_LIMIT, 1)
    } else {
        let l = ratio.log2();
        if l > PLOT_LIMIT {
            (PLOT_LIMIT, 1)
        } else if l < -PLOT_LIMIT {
            (-PLOT_LIMIT, -1)
        } else {
            (l, 0)
        }
    };
    (mid - l * PLOT_SCALE, off)
}

/// The SVG plot of an experiment: per effect, the patched/baseline ratio
/// of the seed and of mmsim side by side, on a log2 axis around 1 from
/// 1/16 to 16, with the band mmsim's ratio must end in to be within; six
/// effects to a row. A bar off the scale ends in a break mark with its
/// value printed.
pub fn svg_plot(r: &ExperimentResult) -> String {
    let n = r.effects.len().max(1);
    let cols = n.min(PLOT_PER_ROW);
    let rows = n.div_ceil(PLOT_PER_ROW);
    let top = 48.0;
    let w = ((70.0 + PLOT_COL * cols as f64) as usize).max(560);
    let h = top + PLOT_ROW_H * rows as f64;
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">
<text x="10" y="16" font-size="13">{} — patched / baseline (log scale; 1 = no change)</text>
<rect x="10" y="28" width="10" height="10" fill="#999"/><text x="24" y="37">seed</text>
<rect x="70" y="28" width="10" height="10" fill="#36c"/><text x="84" y="37">mmsim</text>
<rect x="140" y="28" width="10" height="10" fill="none" stroke="{BAND_COLOR}" stroke-width="1.5" stroke-dasharray="4,2"/><text x="154" y="37">within: mmsim's bar ends in the box</text>
"##,
        esc(&r.name),
    );
    for row in 0..rows {
        let y0 = top + PLOT_ROW_H * row as f64;
        let mid = y0 + 150.0;
        for k in [-4i32, -2, 0, 2, 4] {
            let yy = mid - k as f64 * PLOT_SCALE;
            let label = if k >= 0 {
                format!("{}", 1u32 << k)
            } else {
                format!("1/{}", 1u32 << -k)
            };
            s += &format!(
                "<line x1=\"50\" x2=\"{}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"{}\"/><text x=\"10\" y=\"{}\">{label}</text>\n",
                w - 10,
                if k == 0 { "#000" } else { "#ddd" },
                yy + 4.0
            );
        }
        for (i, e) in r
            .effects
            .iter()
            .enumerate()
            .skip(row * PLOT_PER_ROW)
            .take(PLOT_PER_ROW)
        {
            let x0 = 60.0 + PLOT_COL * (i % PLOT_PER_ROW) as f64;
            for (j, (ratio, color)) in [(e.seed.ratio(), "#999"), (e.sim.ratio(), "#36c")]
                .into_iter()
                .enumerate()
            {
                let x = x0 + 40.0 * j as f64;
                let (a, off) = plot_y(ratio, mid);
                let (y1, y2) = if a < mid { (a, mid) } else { (mid, a) };
                s += &format!(
                    "<rect x=\"{x}\" y=\"{y1:.1}\" width=\"36\" height=\"{:.1}\" fill=\"{color}\"><title>{}</title></rect>\n",
                    (y2 - y1).max(1.0),
                    num(ratio)
                );
                if off != 0 {
                    // A break mark across the bar near its end, and the
                    // value beyond it.
                    let yb = a + 10.0 * off as f64;
                    for d in [-3.0, 3.0] {
                        s += &format!(
                            "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#fff\" stroke-width=\"2\"/>\n",
                            x - 2.0,
                            x + 38.0,
                            yb + d + 4.0,
                            yb + d - 4.0
                        );
                    }
                    // The seed's value nearer the axis, mmsim's a line
                    // beyond, so that neighbours do not overlap.
                    let line = 12.0 * j as f64;
                    let ty = if off > 0 {
                        a - 4.0 - line
                    } else {
                        a + 12.0 + line
                    };
                    s += &format!(
                        "<text x=\"{}\" y=\"{ty:.1}\" text-anchor=\"middle\" font-size=\"10\" font-weight=\"bold\">×{}</text>\n",
                        x + 18.0,
                        esc(&num(ratio))
                    );
                }
            }
            // The band: mmsim's ratios within the seed's change, drawn
            // over the bars.
            let (lo, hi) = judge::band(e.seed.change());
            let (ya, _) = plot_y(1.0 + hi, mid);
            let (yb, _) = plot_y(1.0 + lo, mid);
            s += &format!(
                "<rect x=\"{}\" y=\"{ya:.1}\" width=\"44\" height=\"{:.1}\" fill=\"none\" stroke=\"{BAND_COLOR}\" stroke-width=\"1.5\" stroke-dasharray=\"4,2\"/>\n",
                x0 + 36.0,
                (yb - ya).max(1.0)
            );
            // The metric over up to three lines: effects of one experiment
            // often share their first words.
            for (l, line) in wrap(&e.metric, 19, 3).iter().enumerate() {
                s += &format!(
                    "<text x=\"{x0}\" y=\"{}\" font-size=\"10\">{}</text>\n",
                    mid + 156.0 + 13.0 * l as f64,
                    esc(line)
                );
            }
            for (l, line) in [
                format!("seed {}", percent(e.seed.change())),
                format!("mmsim {}", percent(e.sim.change())),
            ]
            .iter()
            .enumerate()
            {
                s += &format!(
                    "<text x=\"{x0}\" y=\"{}\" fill=\"#444\">{}</text>\n",
                    mid + 198.0 + 13.0 * l as f64,
                    esc(line)
                );
            }
            let (mark, color) = if e.reproduced {
                ("reproduced", "#080")
            } else if !e.direction_matches {
                ("direction missed", "#c00")
            } else {
                ("magnitude missed", "#c00")
            };
            s += &format!(
                "<text x=\"{x0}\" y=\"{}\" fill=\"{color}\">{mark}</text>\n",
                mid + 228.0
            );
        }
    }
    s + "</svg>\n"
}

/// Words of `s` in at most `lines` lines of at most `n` characters, the
/// last one shortened if they do not fit.
fn wrap(s: &str, n: usize, lines: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut words = s.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > n {
            if out.len() + 1 == lines {
                let rest: Vec<&str> = std::iter::once(w).chain(words).collect();
                cur = shorten(&format!("{cur} {}", rest.join(" ")), n);
                break;
            }
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur += w;
    }
    if !cur.is_empty() {
        out.push(shorten(&cur, n));
    }
    out
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A markdown table cell.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

const RULE: &str = "An effect is **reproduced** when mmsim moves the figure the seed's way (lower, higher, or no change where the seed saw none) and its factor q = patched / baseline lies within the seed's band: ln q_sim of the same sign as ln q_seed and |ln q_sim| within ×1.5 of |ln q_seed| either way; when the seed's change is under 3%, mmsim's under 3%. A figure falling to 0 has fallen beyond any factor: mmsim's 0 is too large a fall against a seed's finite one, and a seed's 0 is matched by mmsim's 0 or a fall below a thousandth. A change under 3% is \"no change\"; \"expected\" is the seed's direction, \"observed\" mmsim's. Effects that are one measurement (the same runs seen several ways) count once among the independent measurements, which are reproduced when all their effects are.";

/// The link from the report folder to a path of the repository
/// (`docs/experiments.md#seed-…`).
fn repo_link(root_link: &str, path: &str) -> String {
    if root_link == "." {
        path.to_string()
    } else {
        format!("{root_link}/{path}")
    }
}

/// report/README.md.
pub fn report_markdown(parts: &[ReportPart], scale: &str, root_link: &str) -> String {
    let docs = repo_link(root_link, "docs/experiments.md");
    let mut s = format!(
        "# mmsim reproduce\n\nThe seed experiments {scale}, run by mmsim {}: the seed's published figures beside mmsim's, baseline (before the patch) and patched. Every miss is explained in [docs/experiments.md]({docs}).\n\n## Scorecard\n\n{}\n\n| seed | what the patch does | effects reproduced | measurements reproduced | verdict |\n|---|---|---|---|---|\n",
        env!("CARGO_PKG_VERSION"),
        RULE
    );
    for p in parts {
        let r = &p.result;
        s += &format!(
            "| [{}](#{}) | {} | {} / {} | {} / {} | {} |\n",
            r.name,
            r.name,
            md_cell(&r.title),
            r.reproduced,
            r.effects.len(),
            r.measurements_reproduced,
            r.measurements.len(),
            md_cell(&r.verdict)
        );
    }
    let results: Vec<ExperimentResult> = parts.iter().map(|p| p.result.clone()).collect();
    let t = totals(&results);
    s += &format!(
        "| **total** | | **{} / {}** | **{} / {}** | |\n",
        t.reproduced, t.effects, t.measurements_reproduced, t.measurements
    );
    for p in parts {
        let r = &p.result;
        s += &format!(
            "\n<a id=\"{}\"></a>\n\n## {} — {}\n\nVerdict: {}.\n\n![{}]({}.svg)\n\n",
            r.name, r.name, r.title, r.verdict, r.name, r.name
        );
        s += &format!(
            "| {} |\n|{}\n",
            HEADER.join(" | "),
            "---|".repeat(HEADER.len())
        );
        for row in effect_rows(r) {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == 10 && c == "no" {
                        "**no**".to_string()
                    } else {
                        md_cell(c)
                    }
                })
                .collect();
            s += &format!("| {} |\n", cells.join(" | "));
        }
        let gs = groups(r);
        if !gs.is_empty() {
            s += "\n| measurement (counts once) | its effects | reproduced |\n|---|---|---|\n";
            for m in gs {
                s += &format!(
                    "| {} | {} | {} |\n",
                    md_cell(&m.name),
                    md_cell(&m.effects.join("; ")),
                    if m.reproduced { "yes" } else { "**no**" }
                );
            }
        }
        if !r.extras.is_empty() {
            s += "\n| mmsim only | baseline | patched |\n|---|---|---|\n";
            for x in &r.extras {
                s += &format!(
                    "| {} | {} | {} |\n",
                    md_cell(&x.metric),
                    num(x.sim.baseline),
                    num(x.sim.patched)
                );
            }
        }
        s += "\n";
        for (metrics, why) in misses(r) {
            s += &format!("- {}: {why}\n", metrics.join("; "));
        }
        s += &format!(
            "\nExplained in [{}]({}).\n",
            r.doc,
            repo_link(root_link, &r.doc)
        );
        for (title, text) in &p.blocks {
            s += &format!("\n### {title}\n\n```\n{text}```\n");
        }
    }
    s
}

/// report/index.html: the same content.
pub fn report_html(parts: &[ReportPart], scale: &str, root_link: &str) -> String {
    let docs = repo_link(root_link, "docs/experiments.md");
    let mut s = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>mmsim reproduce</title>\n<style>body{{font-family:sans-serif;max-width:70em;margin:auto;padding:0 1em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}td:first-child,th:first-child{{text-align:left}}td.l{{text-align:left}}td.no{{color:#c00;font-weight:bold}}td.yes{{color:#080}}tr.total td{{font-weight:bold}}.wide{{overflow-x:auto}}img{{max-width:100%}}pre{{background:#f6f6f6;padding:6px;overflow-x:auto}}</style>\n<h1>mmsim reproduce</h1><p>The seed experiments {}, run by mmsim {}: the seed's published figures beside mmsim's. Every miss is explained in <a href=\"{}\">docs/experiments.md</a>.</p>\n<h2 id=\"scorecard\">Scorecard</h2>\n<p>{}</p>\n<table><tr><th>seed</th><th>what the patch does</th><th>effects reproduced</th><th>measurements reproduced</th><th>verdict</th></tr>\n",
        esc(scale),
        env!("CARGO_PKG_VERSION"),
        esc(&docs),
        esc(RULE).replace("**reproduced**", "<b>reproduced</b>")
    );
    for p in parts {
        let r = &p.result;
        s += &format!(
            "<tr><td><a href=\"#{}\">{}</a></td><td class=\"l\">{}</td><td>{} / {}</td><td>{} / {}</td><td class=\"l\">{}</td></tr>\n",
            esc(&r.name),
            esc(&r.name),
            esc(&r.title),
            r.reproduced,
            r.effects.len(),
            r.measurements_reproduced,
            r.measurements.len(),
            esc(&r.verdict)
        );
    }
    let results: Vec<ExperimentResult> = parts.iter().map(|p| p.result.clone()).collect();
    let t = totals(&results);
    s += &format!(
        "<tr class=\"total\"><td>total</td><td></td><td>{} / {}</td><td>{} / {}</td><td></td></tr>\n</table>\n",
        t.reproduced, t.effects, t.measurements_reproduced, t.measurements
    );
    for p in parts {
        let r = &p.result;
        s += &format!(
            "<h2 id=\"{}\">{} — {}</h2>\n<p>Verdict: {}.</p>\n<img src=\"{}.svg\" alt=\"{}\">\n<div class=\"wide\"><table><tr>{}</tr>\n",
            esc(&r.name),
            esc(&r.name),
            esc(&r.title),
            esc(&r.verdict),
            esc(&r.name),
            esc(&r.name),
            HEADER
                .iter()
                .map(|h| format!("<th>{h}</th>"))
                .collect::<String>()
        );
        for row in effect_rows(r) {
            s += &format!(
                "<tr>{}</tr>\n",
                row.iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let class = match (i, c.as_str()) {
                            (10, "no") => " class=\"no\"",
                            (10, _) => " class=\"yes\"",
                            (7..=9, _) => " class=\"l\"",
                            _ => "",
                        };
                        format!("<td{class}>{}</td>", esc(c))
                    })
                    .collect::<String>()
            );
        }
        s += "</table></div>\n";
        let gs = groups(r);
        if !gs.is_empty() {
            s += "<table><tr><th>measurement (counts once)</th><th>its effects</th><th>reproduced</th></tr>\n";
            for m in gs {
                s += &format!(
                    "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"{}\">{}</td></tr>\n",
                    esc(&m.name),
                    esc(&m.effects.join("; ")),
                    if m.reproduced { "yes" } else { "no" },
                    if m.reproduced { "yes" } else { "no" }
                );
            }
            s += "</table>\n";
        }
        if !r.extras.is_empty() {
            s += "<table><tr><th>mmsim only</th><th>baseline</th><th>patched</th></tr>\n";
            for x in &r.extras {
                s += &format!(
                    "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                    esc(&x.metric),
                    num(x.sim.baseline),
                    num(x.sim.patched)
                );
            }
            s += "</table>\n";
        }
        s += "<ul>";
        for (metrics, why) in misses(r) {
            s += &format!("<li>{}: {}</li>", esc(&metrics.join("; ")), esc(why));
        }
        s += &format!(
            "</ul><p>Explained in <a href=\"{}\">{}</a>.</p>\n",
            esc(&repo_link(root_link, &r.doc)),
            esc(&r.doc)
        );
        for (title, text) in &p.blocks {
            s += &format!("<h3>{}</h3><pre>{}</pre>\n", esc(title), esc(text));
        }
    }
    s
}

/// Writes README.md, index.html and one SVG per experiment into `out`,
/// each atomically, with links into the repository at `root`.
fn write_report(out: &Path, root: &Path, parts: &[ReportPart], scale: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let root_link = relative_link(&std::fs::canonicalize(out)?, root);
    for p in parts {
        let svg = svg_plot(&p.result);
        crate::write_atomically(&out.join(format!("{}.svg", p.result.name)), svg.as_bytes())?;
    }
    crate::write_atomically(
        &out.join("README.md"),
        report_markdown(parts, scale, &root_link).as_bytes(),
    )?;
    crate::write_atomically(
        &out.join("index.html"),
        report_html(parts, scale, &root_link).as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::{default_report_dir, relative_link, run_parallel, wrap};
    use std::path::{Path, PathBuf};

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

    #[test]
    fn wrap_breaks_at_words_and_shortens_the_last_line() {
        assert_eq!(
            wrap("hash throughput (MB/s)", 19, 3),
            ["hash throughput", "(MB/s)"]
        );
        assert_eq!(
            wrap("python -c 'import pydoc': max launch time (s)", 19, 3),
            ["python -c 'import", "pydoc': max launch", "time (s)"]
        );
        assert_eq!(
            wrap("a bb ccc dddd eeeee ffffff ggggggg hhhhhhhh", 8, 2),
            ["a bb ccc", "dddd ee…"]
        );
        assert_eq!(wrap("", 8, 2), Vec::<String>::new());
    }

    #[test]
    fn the_full_report_is_only_for_every_experiment_at_full_scale() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            default_report_dir(&[], true, false),
            PathBuf::from("report")
        );
        assert_eq!(
            default_report_dir(&[], true, true),
            PathBuf::from("report-quick")
        );
        assert_eq!(
            default_report_dir(&names(&["004"]), false, false),
            PathBuf::from("report-004")
        );
        assert_eq!(
            default_report_dir(&names(&["004"]), false, true),
            PathBuf::from("report-004-quick")
        );
        assert_eq!(
            default_report_dir(&names(&["001", "../x"]), false, false),
            PathBuf::from("report-001-.._x")
        );
        // Naming every experiment is the full set.
        assert_eq!(
            default_report_dir(&names(&["0"]), true, false),
            PathBuf::from("report")
        );
    }

    #[test]
    fn links_are_relative() {
        assert_eq!(relative_link(Path::new("/r/report"), Path::new("/r")), "..");
        assert_eq!(relative_link(Path::new("/r"), Path::new("/r")), ".");
        assert_eq!(
            relative_link(Path::new("/tmp/x/y"), Path::new("/r")),
            "../../../r"
        );
    }
}

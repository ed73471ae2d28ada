//! `mmsim reproduce`: rerun the seed experiments under `experiments/`,
//! baseline and patched, and set mmsim's numbers beside the seed's.
//!
//! Each experiment folder holds `experiment.toml` (the feature flag that
//! separates the two sides, the spec variants, and one `[[effect]]` per
//! figure the seed reports: its numbers, how mmsim measures it, the
//! expected direction and a band for the ratio) and the specs it names.

use mmsim_sim::output::RunResult;
use mmsim_sim::RunOptions;
use mmsim_spec::Spec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
    /// seed saw no significant change (the seed's pair is then 1, 1).
    pub direction: String,
    /// mmsim's patched/baseline ratio should be within this factor of
    /// the seed's.
    pub band: f64,
    /// A known miss of the band: why (the docs explain it in full).
    #[serde(default)]
    pub miss: Option<String>,
    /// A known miss of the direction itself: why.
    #[serde(default)]
    pub direction_miss: Option<String>,
}

/// A change of less than this fraction is no change: a direction needs more.
pub const NO_CHANGE: f64 = 0.01;
/// An effect the seed found insignificant ("none") matches if mmsim's
/// ratio is within this fraction of 1.
pub const SAME_WITHIN: f64 = 0.05;

#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    pub baseline: f64,
    pub patched: f64,
}

impl Pair {
    fn ratio(&self) -> f64 {
        self.patched / self.baseline
    }
}

/// One effect's outcome, as `--json` prints it.
#[derive(Serialize, Deserialize, Debug)]
pub struct EffectResult {
    pub metric: String,
    pub seed: Pair,
    pub sim: Pair,
    pub direction: String,
    pub direction_matches: bool,
    pub band: f64,
    pub within_band: bool,
    /// The recorded reason for a known miss.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub known_miss: Option<String>,
    /// The recorded reason for a known miss of the direction.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub known_direction_miss: Option<String>,
}

/// An mmsim-only figure, both ways.
#[derive(Serialize, Deserialize, Debug)]
pub struct ExtraResult {
    pub metric: String,
    pub sim: Pair,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct ExperimentResult {
    pub name: String,
    pub title: String,
    pub doc: String,
    pub effects: Vec<EffectResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extras: Vec<ExtraResult>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct Report {
    pub experiments: Vec<ExperimentResult>,
}

/// The experiment folders under `dir` whose names start with any of
/// `names` (all of them when `names` is empty), in name order.
fn select(dir: &Path, names: &[String]) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut all: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("experiment.toml").is_file())
        .collect();
    all.sort();
    if names.is_empty() {
        return Ok(all);
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
    out.dedup();
    Ok(out)
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
        if !["lower", "higher", "none"].contains(&eff.direction.as_str()) {
            return Err(format!(
                "{}: effect {:?}: found direction {:?}, expected \"lower\", \"higher\" or \"none\"",
                path.display(),
                eff.metric,
                eff.direction
            ));
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
    let r = mmsim_sim::run(&s, RunOptions::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((s, r))
}

fn evaluate(e: &Effect, sim: Pair) -> EffectResult {
    let r = sim.ratio();
    let direction_matches = match e.direction.as_str() {
        "lower" => r < 1.0 - NO_CHANGE,
        "higher" => r > 1.0 + NO_CHANGE,
        // "none": the seed saw no significant change.
        _ => (r - 1.0).abs() <= SAME_WITHIN,
    };
    let (rs, rm) = (e.seed.ratio(), sim.ratio());
    let within_band = rm.is_finite() && rm > 0.0 && rm >= rs / e.band && rm <= rs * e.band;
    EffectResult {
        metric: e.metric.clone(),
        seed: e.seed,
        sim,
        direction: e.direction.clone(),
        direction_matches,
        band: e.band,
        within_band,
        known_miss: e.miss.clone(),
        known_direction_miss: e.direction_miss.clone(),
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
    let mut runs = BTreeMap::new();
    for v in &e.variants {
        for patched in [false, true] {
            let value = if patched { e.patched } else { e.baseline };
            let spec = if quick { &v.quick } else { &v.spec };
            bar.set_message(format!("{} {} {}", name_of(dir), v.name, side(patched)));
            runs.insert(
                (v.name.clone(), patched),
                run_side(dir, spec, &e.feature, value)?,
            );
            bar.inc(1);
        }
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
    Ok((
        ExperimentResult {
            name: name_of(dir),
            title: e.title.clone(),
            doc: e.doc.clone(),
            effects,
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

/// The side-by-side table of one experiment.
pub fn render(r: &ExperimentResult) -> String {
    let mut s = format!("{} — {}\n\n", r.name, r.title);
    s += &format!(
        "{:<42} {:>10} {:>10} {:>7}   {:>10} {:>10} {:>7}   {:<9} {}\n",
        "metric",
        "seed base",
        "seed patch",
        "ratio",
        "mmsim base",
        "mmsim patch",
        "ratio",
        "direction",
        "magnitude"
    );
    let mut misses = Vec::new();
    for e in &r.effects {
        if let (false, Some(why)) = (e.direction_matches, &e.known_direction_miss) {
            misses.push(format!("  {} (direction): {why}", e.metric));
        }
        if let (false, Some(why)) = (e.within_band, &e.known_miss) {
            misses.push(format!("  {}: {why}", e.metric));
        }
        s += &format!(
            "{:<42} {:>10} {:>10} {:>7.3}   {:>10} {:>10} {:>7.3}   {:<9} {}\n",
            e.metric,
            num(e.seed.baseline),
            num(e.seed.patched),
            e.seed.ratio(),
            num(e.sim.baseline),
            num(e.sim.patched),
            e.sim.ratio(),
            if e.direction_matches {
                "ok"
            } else if (e.sim.ratio() - 1.0).abs() <= NO_CHANGE {
                "none"
            } else {
                "WRONG"
            },
            if e.within_band {
                format!("within ×{}", e.band)
            } else {
                format!("miss (×{} band)", e.band)
            }
        );
    }
    if !r.extras.is_empty() {
        s += &format!(
            "\n{:<42} {:>10} {:>10}   (mmsim only)\n",
            "", "baseline", "patched"
        );
        for x in &r.extras {
            s += &format!(
                "{:<42} {:>10} {:>10}\n",
                x.metric,
                num(x.sim.baseline),
                num(x.sim.patched)
            );
        }
    }
    if !misses.is_empty() {
        s += &format!(
            "\nmisses (explained in {}):\n{}\n",
            r.doc,
            misses.join("\n")
        );
    }
    s
}

fn num(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
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

pub fn reproduce_cmd(
    dir: &Path,
    names: &[String],
    quick: bool,
    json: bool,
    report_dir: Option<&Path>,
) -> ExitCode {
    let dirs = match select(dir, names) {
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
    let mut report = Report {
        experiments: Vec::new(),
    };
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
        for ((variant, patched), (_, r)) in &runs {
            let p = crate::profile_text(r);
            if !p.is_empty() {
                blocks.push((format!("profile: {variant}, {}", side(*patched)), p));
            }
        }
        text += "\n";
        parts.push(ReportPart {
            result: ExperimentResult {
                name: res.name.clone(),
                title: res.title.clone(),
                doc: res.doc.clone(),
                effects: res
                    .effects
                    .iter()
                    .map(|x| EffectResult {
                        metric: x.metric.clone(),
                        seed: x.seed,
                        sim: x.sim,
                        direction: x.direction.clone(),
                        direction_matches: x.direction_matches,
                        band: x.band,
                        within_band: x.within_band,
                        known_miss: x.known_miss.clone(),
                        known_direction_miss: x.known_direction_miss.clone(),
                    })
                    .collect(),
                extras: Vec::new(),
            },
            blocks,
        });
        report.experiments.push(res);
    }
    bar.finish_and_clear();
    if let Some(out) = report_dir {
        if let Err(e) = write_report(out, &parts, if quick { "reduced" } else { "full" }) {
            eprintln!("mmsim: cannot write the report in {}: {e}", out.display());
            return ExitCode::from(1);
        }
        if !json {
            text += &format!("report: {}\n", out.join("index.html").display());
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        );
    } else {
        print!("{text}");
    }
    ExitCode::SUCCESS
}

// ---- the report ---------------------------------------------------------

/// One experiment's part of the report: its result, and text blocks
/// (bpftrace-like tables, profiles) to show under it.
pub struct ReportPart {
    pub result: ExperimentResult,
    pub blocks: Vec<(String, String)>,
}

/// The SVG plot of an experiment: per effect, the patched/baseline ratio
/// of the seed and of mmsim side by side, on a log2 axis around 1
/// (clipped at 1/16 and 16).
pub fn svg_plot(r: &ExperimentResult) -> String {
    let n = r.effects.len().max(1);
    let (w, h, mid) = (120 * n + 80, 390, 180.0);
    let scale = 30.0; // pixels per doubling
    let y = |ratio: f64| {
        let l = if ratio.is_finite() && ratio > 0.0 {
            ratio.log2().clamp(-4.0, 4.0)
        } else if ratio > 0.0 {
            4.0
        } else {
            -4.0
        };
        mid - l * scale
    };
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">
<text x="10" y="16" font-size="13">{} — patched / baseline (log scale; 1 = no change)</text>
<rect x="10" y="28" width="10" height="10" fill="#999"/><text x="24" y="37">seed</text>
<rect x="70" y="28" width="10" height="10" fill="#36c"/><text x="84" y="37">mmsim</text>
"##,
        esc(&r.name),
    );
    for k in [-4i32, -2, 0, 2, 4] {
        let yy = mid - k as f64 * scale;
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
    for (i, e) in r.effects.iter().enumerate() {
        let x0 = 60.0 + 120.0 * i as f64;
        for (j, (ratio, color)) in [(e.seed.ratio(), "#999"), (e.sim.ratio(), "#36c")]
            .iter()
            .enumerate()
        {
            let (a, b) = (y(*ratio), mid);
            let (y1, y2) = if a < b { (a, b) } else { (b, a) };
            s += &format!(
                "<rect x=\"{}\" y=\"{y1:.1}\" width=\"36\" height=\"{:.1}\" fill=\"{color}\"><title>{:.3}</title></rect>\n",
                x0 + 40.0 * j as f64,
                (y2 - y1).max(1.0),
                ratio
            );
        }
        let mark = if !e.direction_matches {
            "direction missed"
        } else if e.within_band {
            "within band"
        } else {
            "magnitude missed"
        };
        // The metric over up to three lines: effects of one experiment
        // often share their first words.
        for (l, line) in wrap(&e.metric, 19, 3).iter().enumerate() {
            s += &format!(
                "<text x=\"{x0}\" y=\"{}\">{}</text>\n",
                mid + 138.0 + 13.0 * l as f64,
                esc(line)
            );
        }
        s += &format!(
            "<text x=\"{x0}\" y=\"{}\" fill=\"#666\">{mark}</text>\n",
            mid + 183.0
        );
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
}

fn effect_rows(r: &ExperimentResult) -> Vec<[String; 9]> {
    r.effects
        .iter()
        .map(|e| {
            [
                e.metric.clone(),
                num(e.seed.baseline),
                num(e.seed.patched),
                format!("{:.3}", e.seed.ratio()),
                num(e.sim.baseline),
                num(e.sim.patched),
                format!("{:.3}", e.sim.ratio()),
                (if e.direction_matches { "yes" } else { "**no**" }).to_string(),
                if e.within_band {
                    format!("within ×{}", e.band)
                } else {
                    format!("**missed** (×{} band)", e.band)
                },
            ]
        })
        .collect()
}

const HEADER: [&str; 9] = [
    "metric",
    "seed baseline",
    "seed patched",
    "seed ratio",
    "mmsim baseline",
    "mmsim patched",
    "mmsim ratio",
    "direction matches",
    "magnitude",
];

/// report/README.md.
pub fn report_markdown(parts: &[ReportPart], scale: &str) -> String {
    let mut s = format!(
        "# mmsim reproduce\n\nThe seed experiments ({scale} scale), run by mmsim {}: the seed's published figures beside mmsim's, baseline (before the patch) and patched. Every miss is explained in [docs/experiments.md](../docs/experiments.md).\n",
        env!("CARGO_PKG_VERSION")
    );
    for p in parts {
        let r = &p.result;
        s += &format!(
            "\n## {} — {}\n\n![{}]({}.svg)\n\n",
            r.name, r.title, r.name, r.name
        );
        s += &format!(
            "| {} |\n|{}\n",
            HEADER.join(" | "),
            "---|".repeat(HEADER.len())
        );
        for row in effect_rows(r) {
            s += &format!("| {} |\n", row.join(" | "));
        }
        for e in &r.effects {
            if let (false, Some(why)) = (e.direction_matches, &e.known_direction_miss) {
                s += &format!("\n- {} (direction): {why}", e.metric);
            }
            if let (false, Some(why)) = (e.within_band, &e.known_miss) {
                s += &format!("\n- {}: {why}", e.metric);
            }
        }
        s += &format!("\n\nExplained in [{}](../{}).\n", r.doc, r.doc);
        for (title, text) in &p.blocks {
            s += &format!("\n### {title}\n\n```\n{text}```\n");
        }
    }
    s
}

/// report/index.html: the same content.
pub fn report_html(parts: &[ReportPart], scale: &str) -> String {
    let mut s = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>mmsim reproduce</title>\n<style>body{{font-family:sans-serif;max-width:70em;margin:auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}td:first-child{{text-align:left}}pre{{background:#f6f6f6;padding:6px}}</style>\n<h1>mmsim reproduce</h1><p>The seed experiments ({scale} scale), run by mmsim {}: the seed's published figures beside mmsim's. Every miss is explained in <a href=\"../docs/experiments.md\">docs/experiments.md</a>.</p>\n",
        env!("CARGO_PKG_VERSION")
    );
    for p in parts {
        let r = &p.result;
        s += &format!(
            "<h2>{} — {}</h2>\n<img src=\"{}.svg\" alt=\"{}\">\n<table><tr>{}</tr>\n",
            esc(&r.name),
            esc(&r.title),
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
                    .map(|c| format!("<td>{}</td>", esc(&c.replace("**", ""))))
                    .collect::<String>()
            );
        }
        s += "</table>\n<ul>";
        for e in &r.effects {
            if let (false, Some(why)) = (e.direction_matches, &e.known_direction_miss) {
                s += &format!("<li>{} (direction): {}</li>", esc(&e.metric), esc(why));
            }
            if let (false, Some(why)) = (e.within_band, &e.known_miss) {
                s += &format!("<li>{}: {}</li>", esc(&e.metric), esc(why));
            }
        }
        s += &format!(
            "</ul><p>Explained in <a href=\"../{}\">{}</a>.</p>\n",
            esc(&r.doc),
            esc(&r.doc)
        );
        for (title, text) in &p.blocks {
            s += &format!("<h3>{}</h3><pre>{}</pre>\n", esc(title), esc(text));
        }
    }
    s
}

/// Writes report/README.md, report/index.html and one SVG per experiment,
/// each atomically.
fn write_report(out: &Path, parts: &[ReportPart], scale: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    for p in parts {
        let svg = svg_plot(&p.result);
        crate::write_atomically(&out.join(format!("{}.svg", p.result.name)), svg.as_bytes())?;
    }
    crate::write_atomically(
        &out.join("README.md"),
        report_markdown(parts, scale).as_bytes(),
    )?;
    crate::write_atomically(
        &out.join("index.html"),
        report_html(parts, scale).as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::wrap;

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
}

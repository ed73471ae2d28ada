//! A seed experiment as `experiments/NAME/experiment.toml` describes it,
//! and finding and loading them.
//!
//! Each experiment folder holds `experiment.toml` (the feature flag that
//! separates the two sides, the spec variants, and one `[[effect]]` per
//! figure the seed reports: its numbers, how mmsim measures it and the
//! expected direction) and the specs it names.

use crate::judge::{num, percent, Direction};
use crate::scorecard::Pair;
use serde::Deserialize;
use std::path::{Path, PathBuf};

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
    pub tables: Vec<HistTable>,
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
    pub real: Option<RealAb>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Extra {
    pub metric: String,
    pub variant: String,
    pub measure: String,
}

/// A histogram of a variant's runs printed as bpftrace's `count()` by
/// value prints it.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct HistTable {
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
    /// Which kernels of the run the feature is set in: the host's (the
    /// default) or its guests' (`[vm.NAME]`: the seed's kernel ran in a VM).
    #[serde(default)]
    pub feature_in: FeatureIn,
}

/// Where a variant's feature flag is set (`Variant::feature_in`).
#[derive(Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FeatureIn {
    #[default]
    Host,
    Guests,
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

/// An experiment's `[real]` table: the seed's mechanism on real kernels,
/// a release before it against one after it (the command's seeds_real
/// compares them).
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RealAb {
    /// No packaged kernel lacks the seed's mechanism: why.
    #[serde(default)]
    pub none: Option<String>,
    /// The presets of the releases before and after the mechanism.
    #[serde(default)]
    pub before: Option<String>,
    #[serde(default)]
    pub after: Option<String>,
    /// Fidelity specs (paths from the repository root) recorded on both.
    #[serde(default)]
    pub specs: Vec<String>,
    /// Whole-run /proc/vmstat counters compared.
    #[serde(default)]
    pub counters: Vec<String>,
    /// A phase ("task/phase") whose time is compared as a ratio, after
    /// over before: real times are QEMU TCG wall time (emulated).
    #[serde(default)]
    pub phase: Option<String>,
}

/// The experiment folders under `dir` whose names start with any of
/// `names` (all of them when `names` is empty), in name order, and whether
/// that is every experiment there.
pub fn select(dir: &Path, names: &[String]) -> Result<(Vec<PathBuf>, bool), String> {
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

/// Reads `dir/experiment.toml` and checks what the judgement relies on:
/// effects name defined variants, the seed's figures are finite and not
/// negative and show the expected direction, and shared measurements are
/// one variant's runs.
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

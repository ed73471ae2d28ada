//! The outcome of the experiments: each effect judged, the independent
//! measurements, the one-line verdict, the totals of the scorecard, and
//! the rows every form of the report prints. `--json` prints these types.

use crate::judge::{self, num, percent, Direction};
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    pub baseline: f64,
    pub patched: f64,
}

impl Pair {
    /// patched / baseline.
    pub fn ratio(&self) -> f64 {
        self.patched / self.baseline
    }

    /// patched / baseline − 1 (judge::change).
    pub fn change(&self) -> f64 {
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

/// Effects and measurements reproduced over all the experiments, and
/// their numbers.
pub struct Totals {
    pub reproduced: usize,
    pub effects: usize,
    pub measurements_reproduced: usize,
    pub measurements: usize,
}

pub fn totals(parts: &[ExperimentResult]) -> Totals {
    Totals {
        reproduced: parts.iter().map(|r| r.reproduced).sum(),
        effects: parts.iter().map(|r| r.effects.len()).sum(),
        measurements_reproduced: parts.iter().map(|r| r.measurements_reproduced).sum(),
        measurements: parts.iter().map(|r| r.measurements.len()).sum(),
    }
}

impl Report {
    /// The document `--json` prints: the totals, then every experiment.
    pub fn new(experiments: Vec<ExperimentResult>) -> Report {
        let t = totals(&experiments);
        Report {
            reproduced: t.reproduced,
            effects: t.effects,
            measurements_reproduced: t.measurements_reproduced,
            measurements: t.measurements,
            experiments,
        }
    }
}

/// The columns of an effect's row, in every form of the report.
pub const HEADER: [&str; 11] = [
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

/// The column of HEADER that says yes or no.
pub const REPRODUCED: usize = 10;

/// Columns of HEADER that are words, not numbers (left-aligned).
pub const LEFT: [bool; 11] = [
    true, false, false, false, false, false, false, true, true, true, true,
];

/// An experiment's effects, one row of HEADER's columns each.
pub fn effect_rows(r: &ExperimentResult) -> Vec<[String; 11]> {
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

/// The recorded reasons of an experiment's misses, each once, with the
/// effects it explains.
pub fn misses(r: &ExperimentResult) -> Vec<(Vec<&str>, &str)> {
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

/// The measurements made of several effects, which the report lists
/// under an experiment's table (the others are its rows).
pub fn groups(r: &ExperimentResult) -> Vec<&MeasurementResult> {
    r.measurements
        .iter()
        .filter(|m| m.effects.len() > 1)
        .collect()
}

//! The terminal's forms: an experiment's side-by-side table, the
//! scorecard, and a histogram as bpftrace prints it. `mmsim reproduce`
//! prints these, byte for byte as before the engine became a library.

use crate::judge::{self, num};
use crate::scorecard::{
    effect_rows, groups, misses, totals, ExperimentResult, HEADER, LEFT, REPRODUCED,
};
use mmsim_sim::output::RunResult;

/// Columns of text, padded to their widest cell.
pub fn text_table<const N: usize>(
    header: [&str; N],
    left: [bool; N],
    rows: &[[String; N]],
) -> String {
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

/// The side-by-side table of one experiment.
pub fn render(r: &ExperimentResult) -> String {
    let mut s = format!("{} — {}\nverdict: {}\n\n", r.name, r.title, r.verdict);
    let mut rows = effect_rows(r);
    for row in &mut rows {
        if row[REPRODUCED] == "no" {
            row[REPRODUCED] = "NO".into();
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

/// A histogram's rows as bpftrace's `count()` by value prints them:
/// (COUNT, value), fewest first, empty buckets left out. `vm:NAME:SITE`
/// is guest NAME's histogram.
pub fn hist_rows(site: &str, r: &RunResult) -> Vec<(u64, u64)> {
    let (r, site) = match crate::measure::guest_part(site) {
        Some((name, site)) => match r.vms.get(name) {
            Some(g) => (g, site),
            None => return Vec::new(),
        },
        None => (r, site),
    };
    let mut rows: Vec<_> = r.histograms.get(site).cloned().unwrap_or_default();
    rows.retain(|b| b.count > 0);
    rows.sort_by_key(|b| b.count);
    rows.into_iter().map(|b| (b.count, b.lo.max(1))).collect()
}

/// A histogram as bpftrace's `count()` by value prints it: COUNT EVENT.
pub fn hist_text(site: &str, label: &str, r: &RunResult) -> String {
    let mut s = format!("{site} ({label})\nCOUNT EVENT\n");
    for (count, value) in hist_rows(site, r) {
        s += &format!("{count} $retval = {value}\n");
    }
    s
}

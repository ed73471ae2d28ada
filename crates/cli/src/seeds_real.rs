//! A seed's mechanism on real kernels: the same fidelity specs recorded
//! on a release before the seed and one after it (QEMU, 3 runs each),
//! beside mmsim with the two releases' presets. An experiment's `[real]`
//! table names them; `mmsim reproduce` prints the comparison and the
//! report carries it.

use crate::oracle_cmd::recorded;
use mmsim_lab::experiment::RealAb;
use mmsim_lab::report::Table;
use mmsim_oracle::compare::median;
use mmsim_sim::output::RunResult;
use mmsim_spec::Preset;
use std::path::Path;

/// Both sides' relative change is "the same" within this.
const SAME: f64 = 0.03;

fn preset(name: &Option<String>, key: &str) -> Result<Preset, String> {
    let n = name
        .as_deref()
        .ok_or_else(|| format!("[real] needs `{key}` (a preset) or `none`"))?;
    Preset::parse(n)
        .ok_or_else(|| format!("[real] {key}: found \"{n}\", expected one of 5.10, 6.1, 6.12, 7.3"))
}

fn change(before: f64, after: f64) -> Option<f64> {
    (before != 0.0).then(|| after / before - 1.0)
}

fn fmt_change(c: Option<f64>) -> String {
    c.map_or("—".into(), |c| format!("{:+.0}%", c * 100.0))
}

/// Up, down or the same, for comparing the two sides' changes.
fn sense(before: f64, after: f64) -> i8 {
    let scale = before.abs().max(after.abs()).max(1.0);
    if (after - before).abs() <= SAME * scale {
        0
    } else if after > before {
        1
    } else {
        -1
    }
}

/// The median of the runs, and their range.
fn real_median(runs: &[RunResult], f: impl Fn(&RunResult) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    let m = median(&mut v);
    (m, v[0], v[v.len() - 1])
}

/// The real kernels' way: none where the two releases' runs overlap
/// (the change is inside what one release does from run to run).
fn real_sense(b: (f64, f64, f64), a: (f64, f64, f64)) -> i8 {
    if b.1 <= a.2 && a.1 <= b.2 {
        0
    } else {
        sense(b.0, a.0)
    }
}

fn phase_ns(r: &RunResult, which: &str) -> f64 {
    let (task, phase) = which.split_once('/').unwrap_or(("", which));
    r.tasks
        .iter()
        .filter(|t| task.is_empty() || t.name == task)
        .flat_map(|t| t.phases.iter())
        .find(|p| p.name == phase)
        .map_or(0.0, |p| (p.end_ns - p.start_ns) as f64)
}

fn simulate(path: &Path, p: Preset) -> Result<RunResult, String> {
    let spec =
        mmsim_spec::load(path, &[format!("machine.kernel=\"{p}\"")]).map_err(|e| e.to_string())?;
    mmsim_sim::run(&spec, crate::sim_options()).map_err(|e| format!("{}: {e}", path.display()))
}

/// The comparison: what it is, and its table (none when no packaged
/// kernel lacks the mechanism).
pub struct Comparison {
    pub note: String,
    pub table: Option<Table>,
}

impl Comparison {
    /// As the terminal prints it: the note, then the table in Markdown.
    pub fn text(&self) -> String {
        match &self.table {
            Some(t) => format!("{}\n\n{}", self.note, t.markdown()),
            None => format!("{}\n", self.note),
        }
    }
}

const HEADER: [&str; 9] = [
    "spec",
    "measure",
    "real before",
    "real after",
    "real change",
    "mmsim before",
    "mmsim after",
    "mmsim change",
    "same way",
];

/// The comparison, or why there is none.
pub fn compare(root: &Path, real: &RealAb) -> Result<Comparison, String> {
    if let Some(why) = &real.none {
        return Ok(Comparison {
            note: format!("Real kernels: none to compare. {why}"),
            table: None,
        });
    }
    let (b, a) = (
        preset(&real.before, "before")?,
        preset(&real.after, "after")?,
    );
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut releases = (String::new(), String::new());
    for s in &real.specs {
        let path = root.join(s);
        let (rb, ra) = (recorded(&path, b), recorded(&path, a));
        if rb.is_empty() || ra.is_empty() {
            return Err(format!(
                "{s}: no recorded runs on {} (record them: mmsim oracle record --kernel {} {s})",
                if rb.is_empty() { b } else { a },
                if rb.is_empty() { b } else { a }
            ));
        }
        releases = (rb[0].engine.version.clone(), ra[0].engine.version.clone());
        let (sb, sa) = (simulate(&path, b)?, simulate(&path, a)?);
        let name = Path::new(s)
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let mut row = |what: String, f: &dyn Fn(&RunResult) -> f64, fmt: &dyn Fn(f64) -> String| {
            let (rb3, ra3) = (real_median(&rb, f), real_median(&ra, f));
            let (xb, xa) = (rb3.0, ra3.0);
            let (yb, ya) = (f(&sb), f(&sa));
            let agree = if real_sense(rb3, ra3) == sense(yb, ya) {
                "yes"
            } else {
                "no"
            };
            rows.push(vec![
                name.clone(),
                what,
                fmt(xb),
                fmt(xa),
                fmt_change(change(xb, xa)),
                fmt(yb),
                fmt(ya),
                fmt_change(change(yb, ya)),
                agree.into(),
            ]);
        };
        for c in &real.counters {
            let get = |r: &RunResult| *r.vmstat.get(c).unwrap_or(&0) as f64;
            row(c.clone(), &get, &|x| format!("{x:.0}"));
        }
        if let Some(ph) = &real.phase {
            let get = |r: &RunResult| phase_ns(r, ph);
            row(format!("{ph} time (real: emulated)"), &get, &|x| {
                format!("{:.1} ms", x / 1e6)
            });
        }
    }
    let note = format!(
        "Real kernels: {} (before) against {} (after), 3 QEMU runs each (medians), beside mmsim's {b} and {a} presets. Same way: both sides go up, both down, or both stay (mmsim within 3%; the real kernel within its runs' range).",
        releases.0, releases.1
    );
    let left = [true, true, false, false, false, false, false, false, true];
    Ok(Comparison {
        note,
        table: Some(Table::new(&HEADER, &left, rows).marked(8)),
    })
}

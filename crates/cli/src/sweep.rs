//! `mmsim sweep SPEC --grid KEY=V1,V2,... [--grid ...]`: one run per point
//! of the grid's product (each point's values as `--set` overrides), on as
//! many threads as there are CPUs, with a progress bar; a table of one row
//! per point (the overrides, `elapsed_ns`, each phase's duration, the
//! whole-run /proc/vmstat counters), optionally as CSV, and a plot of one
//! column against a grid key (plotters' SVG backend). A point whose run
//! fails is a row with its error (the `error` column) and the others are
//! all there; the exit status is then `POINTS_FAILED`.

use mmsim_sim::output::RunResult;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

/// The exit status of a sweep that printed its table but in which some
/// points failed (1 and 2 keep their meaning: a failure of the command, a
/// bad spec or grid).
pub const POINTS_FAILED: u8 = 3;

/// One grid dimension: a `--set` key and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    pub key: String,
    pub values: Vec<String>,
}

/// `KEY=V1,V2,...` (the key is everything before the first `=`).
pub fn parse_grid(arg: &str) -> Result<Dim, String> {
    let (key, values) = arg
        .split_once('=')
        .ok_or_else(|| format!("--grid {arg}: expected KEY=V1,V2,..."))?;
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if key.trim().is_empty() || values.iter().any(|v| v.is_empty()) {
        return Err(format!(
            "--grid {arg}: expected KEY=V1,V2,... with no empty key or value"
        ));
    }
    Ok(Dim {
        key: key.trim().to_string(),
        values,
    })
}

/// The grid's points, the last dimension varying fastest.
pub fn points(dims: &[Dim]) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    for d in dims {
        out = out
            .into_iter()
            .flat_map(|p| {
                d.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push(v.clone());
                    q
                })
            })
            .collect();
    }
    out
}

/// The mm_stat fields a row has for each zram device (as the Python
/// sweep's).
const ZRAM_COLUMNS: [&str; 5] = [
    "orig_data_size",
    "compr_data_size",
    "mem_used_total",
    "mem_used_max",
    "same_pages",
];

/// A run's row: `elapsed_ns`, `TASK/PHASE.duration_ns`, the machine's
/// memory stall over the run (`memory_some_us`, `memory_full_us`, where
/// the engine reads pressure), zram's mm_stat when a region states its
/// content (`zramN.compr_data_size` … for `[[swap]]` entry N), zswap's
/// debugfs when the spec sets zswap (`zswap.stored_pages` …), then the
/// whole-run counters, by column name.
fn row(r: &RunResult) -> Vec<(String, i64)> {
    let mut cols = vec![("elapsed_ns".to_string(), r.elapsed_ns as i64)];
    if let Some(p) = &r.pressure {
        cols.push(("memory_some_us".into(), p.memory.some.total_us as i64));
        cols.push(("memory_full_us".into(), p.memory.full.total_us as i64));
    }
    for t in &r.tasks {
        for p in &t.phases {
            cols.push((
                format!("{}/{}.duration_ns", t.name, p.name),
                (p.end_ns - p.start_ns) as i64,
            ));
        }
    }
    for z in &r.zram {
        for f in ZRAM_COLUMNS {
            let v = z.field(f).expect("an mm_stat field");
            cols.push((format!("zram{}.{f}", z.swap), v as i64));
        }
    }
    if let Some(z) = &r.zswap {
        for f in mmsim_spec::output::ZswapStats::FILES {
            let v = z.field(f).expect("a zswap debugfs file");
            if v == 0 && mmsim_spec::output::ZswapStats::ONLY_WHERE_SET.contains(&f) {
                continue;
            }
            cols.push((format!("zswap.{f}"), v as i64));
        }
    }
    cols.extend(r.vmstat.iter().map(|(k, &v)| (k.clone(), v)));
    cols
}

/// The table: the grid keys, then every column any run has (in the first
/// run's order, others after), 0 where a run lacks a counter and empty
/// where it lacks a phase (its task never ran it, or the OOM killer
/// ended the task first), and last `error`:
/// empty for a run that ended, the error of one that failed (whose other
/// columns are then empty).
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// How many leading columns are grid keys.
    pub keys: usize,
}

impl Table {
    /// Rows whose run failed.
    pub fn failed(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.last().is_some_and(|e| !e.is_empty()))
            .count()
    }
}

fn table(dims: &[Dim], points: &[Vec<String>], runs: &[Result<RunResult, String>]) -> Table {
    let mut columns: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    let rows: Vec<Result<Vec<(String, i64)>, &String>> =
        runs.iter().map(|r| r.as_ref().map(row)).collect();
    for r in rows.iter().flatten() {
        for (k, _) in r {
            if seen.insert(k.clone()) {
                columns.push(k.clone());
            }
        }
    }
    let header = dims
        .iter()
        .map(|d| d.key.clone())
        .chain(columns.iter().cloned())
        .chain(["error".to_string()])
        .collect();
    let rows = points
        .iter()
        .zip(&rows)
        .map(|(p, r)| {
            let mut out = p.clone();
            match r {
                Ok(r) => {
                    out.extend(
                        columns
                            .iter()
                            .map(|c| match r.iter().find(|(k, _)| k == c) {
                                Some((_, v)) => v.to_string(),
                                None if c.ends_with(".duration_ns") => String::new(),
                                None => "0".to_string(),
                            }),
                    );
                    out.push(String::new());
                }
                Err(e) => {
                    out.extend(columns.iter().map(|_| String::new()));
                    out.push(e.to_string());
                }
            }
            out
        })
        .collect();
    Table {
        header,
        rows,
        keys: dims.len(),
    }
}

/// The table as CSV (the `csv` crate quotes keys such as
/// `sysctl."vm.swappiness"`).
fn to_csv(t: &Table) -> Result<Vec<u8>, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&t.header).map_err(|e| e.to_string())?;
    for r in &t.rows {
        w.write_record(r).map_err(|e| e.to_string())?;
    }
    w.into_inner().map_err(|e| e.to_string())
}

/// `--plot FILE.svg --x KEY --y COLUMN`: COLUMN against KEY, one line per
/// combination of the other keys (mmsim_lab's plot, in the units people
/// read). KEY's values must be numbers, or sizes (16M), plotted in MiB.
fn plot(t: &Table, dims: &[Dim], x: &str, y: &str, out: &Path) -> Result<(), String> {
    use mmsim_lab::plot::{lines_svg, Axis, Series};
    let xi = dims
        .iter()
        .position(|d| d.key == x)
        .ok_or_else(|| format!("--x {x}: expected one of the --grid keys ({})", keys(dims)))?;
    let yi = t
        .header
        .iter()
        .position(|h| h == y)
        .ok_or_else(|| format!("--y {y}: expected a column of the table (elapsed_ns, a phase's TASK/PHASE.duration_ns, a counter)"))?;
    let num = |s: &str, what: &str| {
        s.parse::<f64>()
            .map_err(|_| format!("{what}: found {s:?}, expected a number to plot"))
    };
    // A key of sizes ("16M") reads in MiB; any other must be numbers.
    let sizes = dims[xi].values.iter().all(|v| v.parse::<f64>().is_err())
        && dims[xi]
            .values
            .iter()
            .all(|v| mmsim_spec::units::parse_size(v).is_ok());
    let x_value = |s: &str| {
        if sizes {
            mmsim_spec::units::parse_size(s).map(|b| b as f64)
        } else {
            num(s, x)
        }
    };
    // One series per value of the other keys.
    let mut series: Vec<Series> = Vec::new();
    // A failed point has no value to draw, nor has one whose task never
    // ran the phase (the OOM killer ended it first): an empty cell.
    for r in t
        .rows
        .iter()
        .filter(|r| r.last().is_none_or(|e| e.is_empty()) && !r[yi].is_empty())
    {
        let label: Vec<String> = dims
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != xi)
            .map(|(i, d)| format!("{}={}", d.key, r[i]))
            .collect();
        let label = if label.is_empty() {
            y.to_string()
        } else {
            label.join(", ")
        };
        let pt = (x_value(&r[xi])?, num(&r[yi], y)?);
        match series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(pt),
            None => series.push(Series {
                label,
                points: vec![pt],
            }),
        }
    }
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let x_axis = if sizes {
        Axis::mib(x)
    } else {
        Axis::for_column(x, 0.0)
    };
    let y_axis = Axis::for_column(y, y_max);
    // In the axes' words and units, not the raw column names.
    let title = format!("{} against {}", y_axis.label, x_axis.label);
    let svg = lines_svg(&title, &x_axis, &y_axis, &series)?;
    crate::write_atomically(out, svg.as_bytes()).map_err(|e| format!("{}: {e}", out.display()))
}

fn keys(dims: &[Dim]) -> String {
    dims.iter()
        .map(|d| d.key.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `mmsim sweep` was asked.
pub struct SweepArgs<'a> {
    pub spec: &'a Path,
    pub grid: &'a [String],
    pub csv: Option<&'a Path>,
    pub plot: Option<&'a Path>,
    pub x: Option<&'a str>,
    pub y: Option<&'a str>,
    /// No progress bar.
    pub quiet: bool,
}

pub fn sweep_cmd(a: SweepArgs) -> ExitCode {
    match sweep(&a) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!(
                "mmsim: {failed} point(s) of the sweep failed: their rows give the error (exit status {POINTS_FAILED})"
            );
            ExitCode::from(POINTS_FAILED)
        }
        Err((code, msg)) => {
            eprintln!("mmsim: {msg}");
            ExitCode::from(code)
        }
    }
}

/// Runs the sweep; Ok(how many points failed) once the table is out.
fn sweep(a: &SweepArgs) -> Result<usize, (u8, String)> {
    let dims: Vec<Dim> = a
        .grid
        .iter()
        .map(|g| parse_grid(g))
        .collect::<Result<_, _>>()
        .map_err(|e| (2, e))?;
    if dims.is_empty() {
        return Err((2, "expected at least one --grid KEY=V1,V2,...".into()));
    }
    if a.plot.is_some() != (a.x.is_some() && a.y.is_some()) {
        return Err((
            2,
            "--plot FILE.svg needs --x KEY and --y COLUMN, and they need --plot".into(),
        ));
    }
    let points = points(&dims);
    // Every point's spec first: a refused one stops the sweep before any
    // run, naming the point.
    let mut specs = Vec::with_capacity(points.len());
    for p in &points {
        let sets: Vec<String> = dims
            .iter()
            .zip(p)
            .map(|(d, v)| format!("{}={v}", d.key))
            .collect();
        let spec = mmsim_spec::load(a.spec, &sets)
            .map_err(|e| (2, format!("{e} (at the grid point {})", sets.join(" "))))?;
        specs.push(spec);
    }
    let bar = if a.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(specs.len() as u64)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} sweeping [{bar:40}] {pos}/{len} points ({elapsed})",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    let results = mmsim_lab::run::run_parallel(&specs, |s| {
        let r = mmsim_sim::run(s, crate::sim_options());
        bar.inc(1);
        r
    });
    bar.finish_and_clear();
    // A failed point's error, as `mmsim run` gives it less the file name
    // (the sweep's spec): "line N: key `K`: …".
    let runs: Vec<Result<RunResult, String>> = results
        .into_iter()
        .map(|r| r.map_err(|e| e.to_string()))
        .collect();
    let t = table(&dims, &points, &runs);
    if let Some(path) = a.csv {
        let mut bytes = to_csv(&t).map_err(|e| (1, e))?;
        // write_atomically ends the file with its own newline.
        bytes.pop();
        crate::write_atomically(path, &bytes)
            .map_err(|e| (1, format!("{}: {e}", path.display())))?;
    }
    if let (Some(out), Some(x), Some(y)) = (a.plot, a.x, a.y) {
        plot(&t, &dims, x, y, out).map_err(|e| (2, e))?;
    }
    print!("{}", text(&t));
    Ok(t.failed())
}

/// The table for the terminal: the grid keys, elapsed time and the phase
/// durations (the counters are in --csv), `oom_kill` if any point had
/// one, and `error` if a point failed.
fn text(t: &Table) -> String {
    let failed = t.failed() > 0;
    let last = t.header.len() - 1;
    let killed = |i: usize| t.rows.iter().any(|r| !r[i].is_empty() && r[i] != "0");
    let shown: Vec<usize> = (0..t.header.len())
        .filter(|&i| {
            let h = &t.header[i];
            i < t.keys
                || (i < last && (h == "elapsed_ns" || h.ends_with(".duration_ns")))
                || (i < last && (h == "oom_kill" || h == "memory_full_us") && killed(i))
                || (i == last && failed)
        })
        .collect();
    let width = |i: usize| {
        t.rows
            .iter()
            .map(|r| r[i].len())
            .chain([t.header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = shown.iter().map(|&i| width(i)).collect();
    let line = |cells: Vec<&str>| {
        let mut s: Vec<String> = Vec::new();
        for ((c, w), &i) in cells.into_iter().zip(&widths).zip(&shown) {
            // Numbers to the right, the error (text) to the left.
            s.push(if i == last {
                c.to_string()
            } else {
                format!("{c:>w$}")
            });
        }
        s.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(shown.iter().map(|&i| t.header[i].as_str()).collect());
    for r in &t.rows {
        out += &line(shown.iter().map(|&i| r[i].as_str()).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_argument_splits_at_the_first_equals_sign() {
        let d = parse_grid("sysctl.\"vm.swappiness\"=0,60, 100").unwrap();
        assert_eq!(d.key, "sysctl.\"vm.swappiness\"");
        assert_eq!(d.values, ["0", "60", "100"]);
        assert!(parse_grid("swappiness").is_err());
        assert!(parse_grid("k=1,,2").is_err());
        assert!(parse_grid("=1").is_err());
    }

    #[test]
    fn points_are_the_product_last_key_fastest() {
        let dims = [
            Dim {
                key: "a".into(),
                values: vec!["1".into(), "2".into()],
            },
            Dim {
                key: "b".into(),
                values: vec!["x".into(), "y".into(), "z".into()],
            },
        ];
        let p = points(&dims);
        assert_eq!(p.len(), 6);
        assert_eq!(p[0], ["1", "x"]);
        assert_eq!(p[1], ["1", "y"]);
        assert_eq!(p[3], ["2", "x"]);
    }
}

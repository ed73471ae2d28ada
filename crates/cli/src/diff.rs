//! `mmsim diff`: two sets of runs side by side as LKP's 0-day reports
//! print them (`base ±%stddev  %change  new ±%stddev  metric`), over the
//! phase times, /proc/vmstat, memory.stat and mmtests' reclaim summary
//! rows. A side is one run's JSON document (`mmsim run --json`, or an
//! oracle recording), a folder of them, or a comma-separated list.

use mmsim_spec::output::RunResult;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every metric of one run, by name.
pub type Metrics = BTreeMap<String, f64>;

/// A run's metrics: `time.*` in ms (the whole run and each task's
/// phases), `vmstat.*`, `memory.stat.CGROUP.*`, and mmtests' derived
/// reclaim rows (`mmtests.*`, where their denominators are not zero).
pub fn metrics(r: &RunResult) -> Metrics {
    let mut m = Metrics::new();
    let ms = |ns: u64| ns as f64 / 1e6;
    m.insert("time.elapsed_ms".into(), ms(r.elapsed_ns));
    for t in &r.tasks {
        for p in &t.phases {
            let key = format!("time.{}.{}_ms", t.name, p.name);
            m.insert(key, ms(p.end_ns.saturating_sub(p.start_ns)));
        }
    }
    for (k, &v) in &r.vmstat {
        m.insert(format!("vmstat.{k}"), v as f64);
    }
    for (cg, c) in &r.cgroups {
        for (k, &v) in &c.memory_stat {
            m.insert(format!("memory.stat.{cg}.{k}"), v as f64);
        }
    }
    mmtests_rows(r, &mut m);
    m
}

/// mmtests' vmstat summary (MonitorMmtestsvmstat): reclaim efficiency
/// (pages stolen per page scanned), velocity (pages scanned per second of
/// the run) and the share of scanning done by direct reclaim.
fn mmtests_rows(r: &RunResult, m: &mut Metrics) {
    let get = |k: &str| r.vmstat.get(k).copied().unwrap_or(0) as f64;
    let (scan_k, steal_k) = (get("pgscan_kswapd"), get("pgsteal_kswapd"));
    let (scan_d, steal_d) = (get("pgscan_direct"), get("pgsteal_direct"));
    let secs = r.elapsed_ns as f64 / 1e9;
    if scan_k > 0.0 {
        m.insert(
            "mmtests.kswapd_efficiency%".into(),
            100.0 * steal_k / scan_k,
        );
    }
    if scan_d > 0.0 {
        m.insert(
            "mmtests.direct_efficiency%".into(),
            100.0 * steal_d / scan_d,
        );
    }
    if secs > 0.0 {
        m.insert("mmtests.kswapd_velocity".into(), scan_k / secs);
        m.insert("mmtests.direct_velocity".into(), scan_d / secs);
    }
    if scan_k + scan_d > 0.0 {
        m.insert(
            "mmtests.percentage_direct_scans%".into(),
            100.0 * scan_d / (scan_k + scan_d),
        );
    }
}

/// Mean and sample standard deviation.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub metric: String,
    pub base: Option<(f64, f64)>,
    pub new: Option<(f64, f64)>,
}

impl Row {
    /// The change: in points for a percentage metric (as LKP prints
    /// them), else relative, in %. None when either side lacks it or the
    /// base is 0 for a relative change.
    pub fn change(&self) -> Option<f64> {
        let (b, n) = (self.base?.0, self.new?.0);
        if self.metric.ends_with('%') {
            return Some(n - b);
        }
        (b != 0.0).then(|| (n - b) / b.abs() * 100.0)
    }

    fn changed(&self) -> bool {
        match (self.base, self.new) {
            (Some((b, _)), Some((n, _))) => b != n,
            _ => true,
        }
    }
}

/// The rows for every metric of either side, in the order time, mmtests,
/// vmstat, memory.stat; unchanged ones only with `all`, and changes
/// smaller than `min_change` % (points for a percentage) left out. Rows of
/// numbered tasks (or cgroups) that are equal on both sides for every
/// number are one row (`collapse_numbered`).
pub fn rows(base: &[Metrics], new: &[Metrics], all: bool, min_change: f64) -> Vec<Row> {
    let mut names: Vec<&String> = base.iter().chain(new).flat_map(|m| m.keys()).collect();
    names.sort_by_key(|n| (group(n), *n));
    names.dedup();
    let side = |runs: &[Metrics], name: &str| -> Option<(f64, f64)> {
        let v: Vec<f64> = runs.iter().filter_map(|m| m.get(name).copied()).collect();
        (!v.is_empty()).then(|| mean_sd(&v))
    };
    let rows = names
        .into_iter()
        .map(|n| Row {
            metric: n.clone(),
            base: side(base, n),
            new: side(new, n),
        })
        .filter(|r| all || (r.changed() && r.change().is_none_or(|c| c.abs() >= min_change)))
        .collect();
    collapse_numbered(rows)
}

/// `time.b7.loop_ms` → (`time.b*.loop_ms`, "tasks"): the metric with each
/// number in its task's name (a phase time) or its cgroup's (memory.stat)
/// made `*`; None for a metric of neither, or a name without a number.
fn numbered(metric: &str) -> Option<(String, &'static str)> {
    let (prefix, unit) = [("time.", "tasks"), ("memory.stat.", "cgroups")]
        .into_iter()
        .find(|(p, _)| metric.starts_with(p))?;
    let rest = &metric[prefix.len()..];
    let (name, tail) = rest.split_at(rest.rfind('.')?);
    if !name.contains(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut starred = String::new();
    let mut in_number = false;
    for c in name.chars() {
        let digit = c.is_ascii_digit();
        if !digit {
            starred.push(c);
        } else if !in_number {
            starred.push('*');
        }
        in_number = digit;
    }
    Some((format!("{prefix}{starred}{tail}"), unit))
}

/// Rows that differ only in a task's (or cgroup's) number and have the
/// same base and new values, spread included, for every number become one,
/// `time.b*.loop_ms (96 tasks, equal)`, where the first of them was; if
/// any of them differs, each stays a row of its own.
fn collapse_numbered(rows: Vec<Row>) -> Vec<Row> {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let Some((pattern, _)) = numbered(&r.metric) {
            groups.entry(pattern).or_default().push(i);
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let Some((pattern, unit)) = numbered(&r.metric) else {
            out.push(r.clone());
            continue;
        };
        let members = &groups[&pattern];
        let equal = members.len() > 1
            && members
                .iter()
                .all(|&j| rows[j].base == r.base && rows[j].new == r.new);
        if !equal {
            out.push(r.clone());
        } else if members[0] == i {
            out.push(Row {
                metric: format!("{pattern} ({} {unit}, equal)", members.len()),
                base: r.base,
                new: r.new,
            });
        }
    }
    out
}

fn group(name: &str) -> u8 {
    match name.split('.').next() {
        Some("time") => 0,
        Some("mmtests") => 1,
        Some("vmstat") => 2,
        _ => 3,
    }
}

/// A value as LKP prints it: integers whole, others to 3 significant
/// figures at most.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `± N%` when the runs spread (LKP leaves it out under 1%).
fn spread((mean, sd): (f64, f64)) -> String {
    if mean == 0.0 {
        return String::new();
    }
    let pct = (sd / mean.abs() * 100.0).round();
    if pct >= 1.0 {
        format!("±{pct:>3}%")
    } else {
        String::new()
    }
}

/// A row's figures as LKP prints them: base, its spread, the change
/// (points for a percentage), new, its spread.
pub fn cells(r: &Row) -> [String; 5] {
    let cell = |v: Option<(f64, f64)>| match v {
        Some(v) => (num(v.0), spread(v)),
        None => ("-".to_string(), String::new()),
    };
    let (b, bs) = cell(r.base);
    let (n, ns) = cell(r.new);
    let change = match r.change() {
        Some(c) if r.metric.ends_with('%') => format!("{c:+.1}"),
        Some(c) => format!("{c:+.1}%"),
        None => String::new(),
    };
    [b, bs, change, n, ns]
}

/// The table as text, headed by the two sides' labels and run counts.
pub fn render(base_label: &str, new_label: &str, nb: usize, nn: usize, rows: &[Row]) -> String {
    let mut s = format!(
        "{:>16} {:>27}\n---------------- ---------------------------\n",
        shorten(base_label, 16),
        shorten(new_label, 27)
    );
    s += &format!("{:>16}     %change         %stddev\n", "%stddev");
    s += &format!("{:>16}          |                \\\n", "\\");
    for r in rows {
        let [b, bs, change, n, ns] = cells(r);
        s += &format!(
            "{b:>10} {bs:>6} {change:>10} {n:>10} {ns:>6}  {}\n",
            r.metric
        );
    }
    s += &format!("\n{nb} base run(s), {nn} new run(s)\n");
    s
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let tail: String = s
        .chars()
        .rev()
        .take(n - 1)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("…{tail}")
}

/// The JSON documents one side names: a file, every `*.json` of a folder
/// (sorted), or a comma-separated list of files.
pub fn side_files(arg: &str) -> Result<Vec<PathBuf>, String> {
    if arg.contains(',') {
        return Ok(arg
            .split(',')
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .collect());
    }
    let p = Path::new(arg);
    if p.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|e| format!("{arg}: cannot list the folder: {e}"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(format!("{arg}: found no *.json run in the folder, expected the JSON documents of `mmsim run --json` or an oracle recording"));
        }
        return Ok(files);
    }
    Ok(vec![p.to_path_buf()])
}

/// Reads one run's JSON document.
pub fn load_run(path: &Path) -> Result<RunResult, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: line {}: not a run document ({e}); expected the JSON of `mmsim run --json` or an oracle recording",
            path.display(),
            e.line()
        )
    })
}

/// `mmsim diff BASE NEW`.
pub fn diff_cmd(sides: &[String], all: bool, min_change: f64) -> std::process::ExitCode {
    match diff_text(sides, all, min_change) {
        Ok(text) => {
            print!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mmsim: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

fn diff_text(sides: &[String], all: bool, min_change: f64) -> Result<String, String> {
    let [base, new] = sides else {
        return Err(format!(
            "diff takes two sides, found {}; expected BASE NEW, each a run's JSON file, a folder of them or a comma-separated list (more runs of each: a.json,b.json or a folder)",
            sides.len()
        ));
    };
    if !min_change.is_finite() || min_change < 0.0 {
        return Err(format!(
            "--min-change: found {min_change}, expected a percentage of 0 or more"
        ));
    }
    let load = |arg: &str| -> Result<Vec<Metrics>, String> {
        side_files(arg)?
            .iter()
            .map(|f| load_run(f).map(|r| metrics(&r)))
            .collect()
    };
    let (b, n) = (load(base)?, load(new)?);
    let rows = rows(&b, &n, all, min_change);
    Ok(render(base, new, b.len(), n.len(), &rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, f64)]) -> Metrics {
        pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
    }

    #[test]
    fn rows_hold_means_spreads_and_changes() {
        let base = [
            m(&[("vmstat.pgfault", 100.0)]),
            m(&[("vmstat.pgfault", 110.0)]),
        ];
        let new = [
            m(&[("vmstat.pgfault", 120.0)]),
            m(&[("vmstat.pgfault", 120.0)]),
        ];
        let r = rows(&base, &new, false, 0.0);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].base.map(|b| b.0), Some(105.0));
        let sd = r[0].base.expect("base").1;
        assert!((sd - 7.0710678).abs() < 1e-6, "{sd}");
        let c = r[0].change().expect("change");
        assert!((c - 14.285714).abs() < 1e-5, "{c}");
        let text = render("a", "b", 2, 2, &r);
        assert!(text.contains("±  7%"), "{text}");
        assert!(text.contains("+14.3%"), "{text}");
    }

    #[test]
    fn percentages_change_in_points_and_unchanged_rows_hide() {
        let base = [m(&[
            ("mmtests.kswapd_efficiency%", 40.0),
            ("vmstat.x", 5.0),
        ])];
        let new = [m(&[
            ("mmtests.kswapd_efficiency%", 55.0),
            ("vmstat.x", 5.0),
        ])];
        let r = rows(&base, &new, false, 0.0);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].change(), Some(15.0));
        assert_eq!(rows(&base, &new, true, 0.0).len(), 2);
        assert!(rows(&base, &new, false, 20.0).is_empty());
    }

    #[test]
    fn numbered_tasks_equal_on_both_sides_are_one_row() {
        // 96 tasks b0..b95 with the same loop time each side, two of
        // another set (c*) that differ, a numbered cgroup pair, and an
        // unnumbered task.
        let mut base = Metrics::new();
        let mut new = Metrics::new();
        for i in 0..96 {
            base.insert(format!("time.b{i}.loop_ms"), 1000.0);
            new.insert(format!("time.b{i}.loop_ms"), 900.0);
        }
        for (i, v) in [(0, 500.0), (1, 510.0)] {
            base.insert(format!("time.c{i}.loop_ms"), 100.0);
            new.insert(format!("time.c{i}.loop_ms"), v);
        }
        for i in [1, 2] {
            base.insert(format!("memory.stat.g{i}.pgscan"), 10.0);
            new.insert(format!("memory.stat.g{i}.pgscan"), 20.0);
        }
        base.insert("time.main.write_ms".into(), 1.0);
        new.insert("time.main.write_ms".into(), 2.0);
        let r = rows(&[base], &[new], false, 0.0);
        let names: Vec<&str> = r.iter().map(|r| r.metric.as_str()).collect();
        assert_eq!(
            names,
            [
                "time.b*.loop_ms (96 tasks, equal)",
                "time.c0.loop_ms",
                "time.c1.loop_ms",
                "time.main.write_ms",
                "memory.stat.g*.pgscan (2 cgroups, equal)",
            ]
        );
        assert_eq!(r[0].base, Some((1000.0, 0.0)));
        assert_eq!(r[0].change(), Some(-10.0));
        let text = render("a", "b", 1, 1, &r);
        assert_eq!(text.matches("loop_ms").count(), 3, "{text}");
        // One task of the 96 unlike the others: every row stays.
        let mut base = Metrics::new();
        let mut new = Metrics::new();
        for i in 0..96 {
            base.insert(format!("time.b{i}.loop_ms"), 1000.0);
            new.insert(
                format!("time.b{i}.loop_ms"),
                if i == 7 { 901.0 } else { 900.0 },
            );
        }
        assert_eq!(rows(&[base], &[new], false, 0.0).len(), 96);
    }

    #[test]
    fn only_a_task_or_cgroup_name_s_numbers_are_starred() {
        assert_eq!(
            numbered("time.b12.loop_ms"),
            Some(("time.b*.loop_ms".into(), "tasks"))
        );
        assert_eq!(
            numbered("time.w#3/fork10.p2_ms"),
            Some(("time.w#*/fork*.p2_ms".into(), "tasks"))
        );
        assert_eq!(numbered("time.main.phase2_ms"), None);
        assert_eq!(numbered("time.elapsed_ms"), None);
        assert_eq!(numbered("vmstat.allocstall_dma32"), None);
        assert_eq!(
            numbered("memory.stat.g7.anon"),
            Some(("memory.stat.g*.anon".into(), "cgroups"))
        );
    }

    #[test]
    fn a_metric_on_one_side_only_is_shown_without_a_change() {
        let base = [m(&[("vmstat.a", 1.0)])];
        let new = [m(&[("vmstat.b", 2.0)])];
        let r = rows(&base, &new, false, 0.0);
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|r| r.change().is_none()));
    }
}

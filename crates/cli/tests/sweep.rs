//! `mmsim sweep`: one row per grid point, each the run `--set` would give,
//! the CSV and the plot, and bad grids refused with exit status 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MMSIM: &str = env!("CARGO_BIN_EXE_mmsim");
const KEY: &str = "sysctl.\"vm.swappiness\"";

fn smoke() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/smoke.toml")
}

fn mmsim(args: &[&str]) -> Output {
    Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .args(args)
        .output()
        .expect("run mmsim")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mmsim-sweep-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run_json(sets: &[&str]) -> serde_json::Value {
    let spec = smoke();
    let mut args = vec!["run", "--json", spec.to_str().unwrap()];
    for s in sets {
        args.extend(["--set", s]);
    }
    let o = mmsim(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn each_csv_row_is_the_run_at_its_point_and_the_plot_is_drawn() {
    let dir = tmp("ok");
    let (csv, svg) = (dir.join("s.csv"), dir.join("s.svg"));
    let grid = format!("{KEY}=10,100,200");
    let o = mmsim(&[
        "sweep",
        smoke().to_str().unwrap(),
        "--grid",
        &grid,
        "--grid",
        "cgroup.w.memory_max=16M,max",
        "--grid",
        "task.main.oom_score_adj=-1000",
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--x",
        KEY,
        "--y",
        "pswpout",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The terminal table: a header and six points.
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 7, "{out}");
    assert!(out
        .lines()
        .next()
        .unwrap()
        .contains("main/write.duration_ns"));
    let mut r = csv::Reader::from_path(&csv).unwrap();
    let header = r.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 6);
    assert_eq!(&rows[1][0], "10");
    assert_eq!(&rows[1][1], "max");
    for row in &rows {
        let set_a = format!("{KEY}={}", &row[0]);
        let set_b = format!("cgroup.w.memory_max={}", &row[1]);
        let doc = run_json(&[&set_a, &set_b]);
        assert_eq!(row[col("elapsed_ns")], doc["elapsed_ns"].to_string());
        assert_eq!(row[col("pswpout")], doc["vmstat"]["pswpout"].to_string());
        let write = &doc["tasks"][0]["phases"][0];
        let d = write["end_ns"].as_i64().unwrap() - write["start_ns"].as_i64().unwrap();
        assert_eq!(row[col("main/write.duration_ns")], d.to_string());
    }
    // Without a limit nothing is swapped.
    assert!(rows
        .iter()
        .filter(|r| &r[1] == "max")
        .all(|r| &r[col("pswpout")] == "0"));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    // One line per value of the other key (its legend entry), each
    // through its three points.
    assert!(svg.contains("cgroup.w.memory_max=16M") && svg.contains("cgroup.w.memory_max=max"));
    assert_eq!(svg.matches("<circle").count(), 6, "{svg}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_plot_reads_in_human_units() {
    let dir = tmp("units");
    let svg = dir.join("u.svg");
    let o = mmsim(&[
        "sweep",
        smoke().to_str().unwrap(),
        "--grid",
        "cgroup.w.memory_max=16M,32M",
        "--plot",
        svg.to_str().unwrap(),
        "--x",
        "cgroup.w.memory_max",
        "--y",
        "elapsed_ns",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(&svg).unwrap();
    // Sizes in MiB, times in ms or s, and ticks without a ".0".
    assert!(svg.contains("cgroup.w.memory_max (MiB)"), "{svg}");
    assert!(
        svg.contains("elapsed (ms)") || svg.contains("elapsed (s)"),
        "{svg}"
    );
    let ticks: Vec<&str> = svg
        .split("</text>")
        .filter_map(|t| t.rsplit('>').next())
        .map(str::trim)
        .filter(|t| t.parse::<f64>().is_ok())
        .collect();
    assert!(ticks.contains(&"16") && ticks.contains(&"32"), "{ticks:?}");
    assert!(ticks.iter().all(|t| !t.ends_with(".0")), "{ticks:?}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bad_grids_are_refused_with_their_reason() {
    let spec = smoke();
    let spec = spec.to_str().unwrap();
    let swap = "sysctl.\"vm.swappiness\"=60";
    let plot = |x: &'static str| ["--plot", "x.svg", "--x", x, "--y", "pswpout"];
    let cases: [(&str, &[&str], &str); 5] = [
        ("swappiness", &[], "KEY=V1,V2"),
        ("sysctl.\"vm.swappiness\"=60,900", &[], "grid point"),
        (swap, &["--plot", "x.svg"], "--x"),
        (
            "cgroup.w.memory_max=16M,max",
            &plot("cgroup.w.memory_max"),
            "number",
        ),
        (swap, &plot("nokey"), "--grid keys"),
    ];
    for (grid, more, want) in cases {
        let mut args = vec!["sweep", spec, "--grid", grid];
        args.extend(more);
        let o = mmsim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert!(!Path::new("x.svg").exists());
}

#[test]
fn a_failed_point_is_a_row_with_its_error_and_the_others_are_all_there() {
    // Swappiness 0 under 16M: the anon pages cannot go to swap, and the
    // memcg's only task is exempt from its OOM killer (oom_score_adj
    // -1000): the run cannot end as the kernel's would (it retries the
    // fault forever).
    let dir = tmp("failed");
    let (csv, svg) = (dir.join("f.csv"), dir.join("f.svg"));
    let grid = format!("{KEY}=0,60");
    let o = mmsim(&[
        "sweep",
        smoke().to_str().unwrap(),
        "--grid",
        &grid,
        "--grid",
        "cgroup.w.memory_max=16M,max",
        "--grid",
        "task.main.oom_score_adj=-1000",
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--x",
        KEY,
        "--y",
        "elapsed_ns",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("1 point(s) of the sweep failed"), "{err}");
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines[0].ends_with("error"), "{out}");
    // The failed point names the step and why; the others carry no error.
    assert!(
        lines[1].contains("16M")
            && lines[1].contains("line 20: key `task.main.steps[2]`")
            && lines[1].contains("no task to kill"),
        "{out}"
    );
    assert!(
        lines[2..].iter().all(|l| !l.contains("no task to kill")),
        "{out}"
    );
    let mut r = csv::Reader::from_path(&csv).unwrap();
    let header = r.headers().unwrap().clone();
    assert_eq!(header.iter().next_back(), Some("error"));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = r.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 4);
    let failed = &rows[0];
    assert_eq!((&failed[0], &failed[1]), ("0", "16M"));
    assert!(failed[col("error")].contains("no task to kill"));
    assert_eq!(&failed[col("elapsed_ns")], "");
    assert_eq!(&failed[col("pswpout")], "");
    for row in &rows[1..] {
        assert_eq!(&row[col("error")], "");
        let set_a = format!("{KEY}={}", &row[0]);
        let set_b = format!("cgroup.w.memory_max={}", &row[1]);
        let doc = run_json(&[&set_a, &set_b]);
        assert_eq!(row[col("elapsed_ns")], doc["elapsed_ns"].to_string());
        assert_eq!(row[col("pswpout")], doc["vmstat"]["pswpout"].to_string());
    }
    // The plot draws the three points that ran.
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_sweep_with_no_failure_prints_no_error_column_but_its_csv_has_one() {
    let dir = tmp("nofail");
    let csv = dir.join("n.csv");
    let grid = format!("{KEY}=60,100");
    let o = mmsim(&[
        "sweep",
        "--quiet",
        smoke().to_str().unwrap(),
        "--grid",
        &grid,
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(!out.contains("error"), "{out}");
    let mut r = csv::Reader::from_path(&csv).unwrap();
    assert_eq!(r.headers().unwrap().iter().next_back(), Some("error"));
    assert!(r
        .records()
        .all(|r| r.unwrap().iter().next_back() == Some("")));
    std::fs::remove_dir_all(dir).ok();
}

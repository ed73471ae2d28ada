//! The engine on small fixed inputs: an experiment loaded and checked,
//! measures read from one tiny run, an experiment run and judged, and a
//! fixed scorecard rendered as text, Markdown, HTML and a plot.

use mmsim_lab::experiment::{load, Effect};
use mmsim_lab::measure::measure;
use mmsim_lab::report::{self, Block, ReportPart, Table};
use mmsim_lab::run::{evaluate, run_experiment, Runner};
use mmsim_lab::scorecard::{measurements, verdict, ExperimentResult, Pair};
use mmsim_lab::{plot, text};
use std::path::PathBuf;

const SPEC: &str = r#"[machine]
memory = "256M"
cpus = 1

[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "4M" },
  { op = "phase", name = "write" },
  { op = "touch", region = "heap", order = "seq", write = 1.0 },
]
"#;

const EXPERIMENT: &str = r#"title = "a feature that changes nothing here"
feature = "wp_reuse_swapcache"
baseline = false
patched = true
doc = "docs/experiments.md#null"

[[variant]]
name = "tiny"
spec = "tiny.toml"
quick = "tiny.toml"

[[effect]]
metric = "write time"
variant = "tiny"
measure = "phase_s:write"
seed = { baseline = 100, patched = 141 }
direction = "higher"
miss = "mmsim sees no change"

[[effect]]
metric = "faults"
variant = "tiny"
measure = "vmstat:pgfault"
seed = { baseline = 1000, patched = 1000 }
direction = "none"
"#;

/// A folder holding the experiment `toml` and its spec.
fn experiment_dir(tag: &str, toml: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mmsim-lab-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("tiny.toml"), SPEC).unwrap();
    std::fs::write(d.join("experiment.toml"), toml).unwrap();
    d
}

#[test]
fn measures_read_the_run() {
    let spec = mmsim_spec::parse_str(SPEC, "tiny.toml", &[]).unwrap();
    let r = mmsim_sim::run(&spec, Default::default()).unwrap();
    let faults = measure(&r, &spec, "vmstat:pgfault").unwrap();
    assert_eq!(faults, r.vmstat["pgfault"] as f64);
    assert!(faults >= 1024.0, "{faults}");
    let p = &r.tasks[0].phases[0];
    let s = measure(&r, &spec, "phase_s:write").unwrap();
    assert_eq!(s, (p.end_ns - p.start_ns) as f64 / 1e9);
    // A counter the run never moved is 0; a phase it lacks, an error.
    assert_eq!(measure(&r, &spec, "vmstat:pswpin").unwrap(), 0.0);
    let e = measure(&r, &spec, "phase_s:read").unwrap_err();
    assert!(e.contains("no phase \"read\""), "{e}");
    let e = measure(&r, &spec, "hist_share_le:x:two").unwrap_err();
    assert!(e.contains("bad bucket \"two\""), "{e}");
    let e = measure(&r, &spec, "seconds:write").unwrap_err();
    assert!(e.contains("expected phase_s:PHASE"), "{e}");
}

#[test]
fn kv_measures_average_the_hosts_and_the_guests_servers() {
    let server = r#"[
  { op = "mmap", name = "ram", kind = "anon", size = "16M" },
  { op = "phase", name = "bench" },
  { op = "kvstore", region = "ram", keys = 1000, value_size = "2K", requests = 2000, pipeline = 16, seed = 1 },
]"#;
    let text = format!(
        "[machine]\nmemory = \"512M\"\ncpus = 2\n[task.redis]\nsteps = {server}\n\
         [vm.g.host]\naccel = \"kvm\"\n[vm.g.machine]\nmemory = \"128M\"\n\
         [vm.g.task.redis]\nsteps = {server}\n"
    );
    let spec = mmsim_spec::parse_str(&text, "kv.toml", &[]).unwrap();
    let r = mmsim_sim::run(&spec, Default::default()).unwrap();
    let ops = |t: &mmsim_sim::output::TaskResult| t.phases[0].kv.unwrap().ops_per_sec();
    let (host, guest) = (ops(&r.tasks[0]), ops(&r.vms["g"].tasks[0]));
    // The guest's server waits for its EPT violations: another figure.
    assert!(guest < host, "{guest} vs {host}");
    let m = measure(&r, &spec, "kv:ops_per_sec:bench").unwrap();
    assert_eq!(m, (host + guest) / 2.0);
}

/// SPEC as the only guest, `g`, of a host of 512 MiB.
fn hosted() -> String {
    let mut s = String::from("[machine]\nmemory = \"512M\"\n[vm.g.host]\naccel = \"kvm\"\n");
    for line in SPEC.lines() {
        s += &match line.strip_prefix('[') {
            Some(rest) => format!("[vm.g.{rest}\n"),
            None => format!("{line}\n"),
        };
    }
    s
}

#[test]
fn vm_measures_read_a_guests_run() {
    let spec = mmsim_spec::parse_str(&hosted(), "hosted.toml", &[]).unwrap();
    let r = mmsim_sim::run(&spec, Default::default()).unwrap();
    let p = &r.vms["g"].tasks[0].phases[0];
    let s = measure(&r, &spec, "vm:g:phase_s:write").unwrap();
    assert_eq!(s, (p.end_ns - p.start_ns) as f64 / 1e9);
    let faults = measure(&r, &spec, "vm:g:vmstat:pgfault").unwrap();
    assert_eq!(faults, r.vms["g"].vmstat["pgfault"] as f64);
    // The host's own run has no such phase.
    assert!(measure(&r, &spec, "phase_s:write").is_err());
    let e = measure(&r, &spec, "vm:h:phase_s:write").unwrap_err();
    assert!(e.contains("no guest \"h\""), "{e}");
}

#[test]
fn a_variant_sets_its_feature_in_its_guests() {
    let toml = EXPERIMENT
        .replace(
            "quick = \"tiny.toml\"\n",
            "quick = \"tiny.toml\"\nfeature_in = \"guests\"\n",
        )
        .replace("measure = \"", "measure = \"vm:g:");
    let d = experiment_dir("guests", &toml);
    std::fs::write(d.join("tiny.toml"), hosted()).unwrap();
    let e = load(&d).unwrap();
    let runner = Runner {
        options: &mmsim_sim::RunOptions::default,
        done: &|| {},
    };
    let (_, sides) = run_experiment(&d, &e, true, &runner).unwrap();
    for ((_, patched), (spec, _)) in &sides {
        // The guest's kernel has the side's value; the host keeps its own.
        assert_eq!(spec.vms[0].guest.features.wp_reuse_swapcache, *patched);
        assert!(spec.features.wp_reuse_swapcache);
    }
    // A variant without a guest cannot.
    std::fs::write(d.join("tiny.toml"), SPEC).unwrap();
    let err = run_experiment(&d, &e, true, &runner).unwrap_err();
    assert!(err.contains("found no guest"), "{err}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn load_refuses_a_direction_the_seed_does_not_show() {
    let d = experiment_dir("load", EXPERIMENT);
    let e = load(&d).unwrap();
    assert_eq!((e.variants.len(), e.effects.len()), (1, 2));
    let bad = EXPERIMENT.replacen("direction = \"higher\"", "direction = \"lower\"", 1);
    std::fs::write(d.join("experiment.toml"), bad).unwrap();
    let err = load(&d).unwrap_err();
    assert!(err.contains("show \"higher\""), "{err}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn an_experiment_runs_and_is_judged() {
    let d = experiment_dir("run", EXPERIMENT);
    let e = load(&d).unwrap();
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let done = || {
        runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let runner = Runner {
        options: &mmsim_sim::RunOptions::default,
        done: &done,
    };
    let (r, sides) = run_experiment(&d, &e, true, &runner).unwrap();
    assert_eq!(runs.into_inner(), 2);
    assert_eq!(sides.len(), 2);
    // The feature changes nothing in this workload.
    assert_eq!(r.effects[0].observed, "no change");
    assert!(!r.effects[0].reproduced && r.effects[1].reproduced);
    assert_eq!(
        r.verdict,
        "partly reproduced (1 of 2 effects, 1 of 2 measurements): mmsim sees no change in 1"
    );
    std::fs::remove_dir_all(&d).ok();
}

/// An effect of the fixed scorecard.
fn effect(toml: &str) -> Effect {
    toml::from_str(toml).unwrap()
}

/// A fixed result: one effect reproduced, one missed and explained.
fn fixed() -> ExperimentResult {
    let time = effect(
        "metric = \"write time (s)\"\nvariant = \"v\"\nmeasure = \"phase_s:w\"\nseed = { baseline = 2, patched = 1 }\ndirection = \"lower\"",
    );
    let faults = effect(
        "metric = \"faults | major\"\nvariant = \"v\"\nmeasure = \"vmstat:pgmajfault\"\nseed = { baseline = 100, patched = 141 }\ndirection = \"higher\"\nmiss = \"mmsim's <model> lacks it\"",
    );
    let effects = vec![
        evaluate(
            &time,
            Pair {
                baseline: 4.0,
                patched: 1.9,
            },
        ),
        evaluate(
            &faults,
            Pair {
                baseline: 50.0,
                patched: 50.0,
            },
        ),
    ];
    let ms = measurements(&effects);
    ExperimentResult {
        name: "900_fixed".into(),
        title: "a fixed experiment".into(),
        doc: "docs/experiments.md#fixed".into(),
        reproduced: 1,
        verdict: verdict(&effects),
        effects,
        measurements_reproduced: 1,
        measurements: ms,
        extras: Vec::new(),
    }
}

#[test]
fn a_fixed_scorecard_renders_as_text() {
    let r = fixed();
    let t = text::render(&r);
    assert!(t.starts_with("900_fixed — a fixed experiment\nverdict: partly reproduced (1 of 2 effects, 1 of 2 measurements): mmsim sees no change in 1\n\nmetric "), "{t}");
    assert!(
        t.contains("  -52.5%  lower     lower      within ×1.5  yes\n"),
        "{t}"
    );
    assert!(t.contains("no change  none seen    NO\n"), "{t}");
    assert!(t.ends_with("misses (explained in docs/experiments.md#fixed):\n  faults | major: mmsim's <model> lacks it\n"), "{t}");
    let card = text::render_scorecard(&[r]);
    assert!(
        card.contains("\n900_fixed    1 / 2         1 / 2  partly reproduced (1 of 2"),
        "{card}"
    );
    assert!(
        card.ends_with("\ntotal        1 / 2         1 / 2\n"),
        "{card}"
    );
}

/// The fixed result with a table and a profile under it.
fn part() -> ReportPart {
    let table = Table::new(
        &["metric", "baseline", "patched", "same way"],
        &[true, false, false, true],
        vec![
            vec!["pgfault".into(), "10".into(), "12".into(), "yes".into()],
            vec!["pswpin".into(), "3".into(), "0".into(), "no".into()],
        ],
    )
    .marked(3);
    ReportPart {
        result: fixed(),
        blocks: vec![
            Block {
                title: "real kernels".into(),
                note: "Real kernels: two runs.".into(),
                table: Some(table),
                pre: None,
            },
            Block {
                title: "profile".into(),
                pre: Some("  100.00%  main\n".into()),
                ..Block::default()
            },
        ],
    }
}

#[test]
fn a_fixed_scorecard_renders_as_markdown() {
    let md = report::markdown(&[part()], "at full scale", "..");
    assert!(
        md.contains("[docs/experiments.md](../docs/experiments.md)"),
        "{md}"
    );
    assert!(
        md.contains(
            "| [900_fixed](#900_fixed) | a fixed experiment | 1 / 2 | 1 / 2 | partly reproduced"
        ),
        "{md}"
    );
    assert!(
        md.contains("| **total** |  | **1 / 2** | **1 / 2** |  |\n"),
        "{md}"
    );
    // A pipe in a cell is escaped; a "no" in the mark column is bold.
    assert!(md.contains("| faults \\| major | 100 | 141 | +41.0% | 50 | 50 | 0% | higher | no change | none seen | **no** |\n"), "{md}");
    assert!(
        md.contains("- faults | major: mmsim's <model> lacks it\n"),
        "{md}"
    );
    assert!(md.contains("### real kernels\n\nReal kernels: two runs.\n\n| metric | baseline | patched | same way |\n|---|---|---|---|\n| pgfault | 10 | 12 | yes |\n| pswpin | 3 | 0 | **no** |\n"), "{md}");
    assert!(
        md.ends_with("### profile\n\n```\n  100.00%  main\n```\n"),
        "{md}"
    );
    assert!(!md.contains("\n\n\n"), "{md}");
}

#[test]
fn a_fixed_scorecard_renders_as_html() {
    let html = report::html(&[part()], "at full scale", "..");
    assert!(html.starts_with("<!doctype html>"), "{html}");
    assert!(
        html.contains("<a href=\"../docs/experiments.md\">"),
        "{html}"
    );
    assert!(
        html.contains("<td class=\"l\"><a href=\"#900_fixed\">900_fixed</a></td>"),
        "{html}"
    );
    assert!(
        html.contains("<h2 id=\"900_fixed\">900_fixed — a fixed experiment</h2>"),
        "{html}"
    );
    // Escaped once, and the table is a table, its "no" marked.
    assert!(
        html.contains("<li>faults | major: mmsim&#x27;s &lt;model&gt; lacks it</li>")
            || html.contains("<li>faults | major: mmsim's &lt;model&gt; lacks it</li>"),
        "{html}"
    );
    assert!(
        html.contains(
            "<tr><td class=\"l\">pswpin</td><td>3</td><td>0</td><td class=\"no\">no</td></tr>"
        ),
        "{html}"
    );
    assert!(html.contains("<pre>  100.00%  main\n</pre>"), "{html}");
    assert_eq!(html.matches("<pre>").count(), 1, "{html}");
    assert!(!html.contains("|---|"), "{html}");
}

#[test]
fn a_fixed_result_plots_its_factors() {
    let svg = plot::effects_svg(&fixed()).unwrap();
    assert!(svg.starts_with("<svg width=\"560\""), "{svg}");
    // Background, two swatches, two bars per effect.
    assert_eq!(svg.matches("<rect").count(), 3 + 2 * 2, "{svg}");
    assert!(
        svg.contains("write time (s)") && svg.contains("magnitude missed")
            || svg.contains("direction missed"),
        "{svg}"
    );
    for label in ["1/16", "1/4", "\n1\n", "\n4\n", "16"] {
        assert!(svg.contains(label), "{label}: {svg}");
    }
}

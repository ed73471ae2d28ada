//! `mmsim reproduce`: rerun the seed experiments under `experiments/`,
//! baseline and patched, and set mmsim's numbers beside the seed's. The
//! engine (loading, measuring, running, judging, rendering) is the
//! mmsim-lab library; this is the command around it: choosing the
//! experiments, the progress bar, the tables the report carries beside
//! the effects (real kernels, histograms, LKP-style diffs, profiles) and
//! the report's folder.

use mmsim_lab::experiment::{load, select, Experiment, FeatureIn};
use mmsim_lab::report::{self, Block, ReportPart, Table};
use mmsim_lab::run::{name_of, run_experiment, Runner, Runs};
use mmsim_lab::scorecard::Report;
use mmsim_lab::{plot, text};
use mmsim_sim::output::RunResult;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

fn side(patched: bool) -> &'static str {
    if patched {
        "patched"
    } else {
        "baseline"
    }
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

/// The progress bar over every run of the experiments.
fn progress_bar(exps: &[(PathBuf, Experiment)]) -> indicatif::ProgressBar {
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
    bar
}

/// The experiments `names` picks under `dir`, loaded, and whether they
/// are every one there.
fn load_all(dir: &Path, names: &[String]) -> Result<(Vec<(PathBuf, Experiment)>, bool), String> {
    let (dirs, every) = select(dir, names)?;
    let exps = dirs
        .into_iter()
        .map(|d| load(&d).map(|e| (d, e)))
        .collect::<Result<_, _>>()?;
    Ok((exps, every))
}

pub fn reproduce_cmd(
    dir: &Path,
    names: &[String],
    quick: bool,
    json: bool,
    to: ReportTo,
) -> ExitCode {
    let (exps, every) = match load_all(dir, names) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(2);
        }
    };
    let report_dir = match to {
        ReportTo::Default => Some(default_report_dir(names, every, quick)),
        ReportTo::Dir(d) => Some(d),
        ReportTo::Nowhere => None,
    };
    let bar = progress_bar(&exps);
    let done = || bar.inc(1);
    let runner = Runner {
        options: &crate::sim_options,
        done: &done,
    };
    let mut results = Vec::new();
    let mut out = String::new();
    let mut parts = Vec::new();
    for (d, e) in &exps {
        bar.set_message(name_of(d));
        let (res, runs) = match run_experiment(d, e, quick, &runner) {
            Ok(x) => x,
            Err(err) => {
                bar.finish_and_clear();
                eprintln!("mmsim: {}: {err}", d.display());
                return ExitCode::from(1);
            }
        };
        out += &text::render(&res);
        let blocks = experiment_tables(dir, e, &runs, &mut out);
        out += "\n";
        parts.push(ReportPart {
            result: res.clone(),
            blocks,
        });
        results.push(res);
    }
    bar.finish_and_clear();
    out += &text::render_scorecard(&results);
    if let Some(to) = &report_dir {
        let scale = if quick {
            "at reduced scale (--quick)"
        } else {
            "at full scale"
        };
        if let Err(e) = write_report(to, &repository_root(dir), &parts, scale) {
            eprintln!("mmsim: cannot write the report in {}: {e}", to.display());
            return ExitCode::from(1);
        }
        let note = format!(
            "report written to {}/ (index.html, README.md, one SVG plot per experiment)",
            to.display()
        );
        if json {
            eprintln!("{note}");
        } else {
            out += &format!("\n{note}\n");
        }
    }
    if json {
        let report = Report::new(results);
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        );
    } else {
        print!("{out}");
    }
    ExitCode::SUCCESS
}

/// The tables printed under an experiment's effects, appended to `out`
/// as the terminal shows them, and the report's blocks: the real
/// kernels' comparison, the histograms, each variant's LKP-style diff,
/// then the profiles (in the report only).
fn experiment_tables(dir: &Path, e: &Experiment, runs: &Runs, out: &mut String) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut add = |text: String, block: Block| {
        *out += "\n";
        *out += &text;
        blocks.push(block);
    };
    if let Some(real) = &e.real {
        let title = "real kernels, before and after".to_string();
        match crate::seeds_real::compare(&repository_root(dir), real) {
            Ok(c) => add(
                c.text(),
                Block {
                    title,
                    note: c.note,
                    table: c.table,
                    pre: None,
                },
            ),
            Err(err) => {
                let note = format!("Real kernels: not shown: {err}");
                add(
                    format!("{note}\n"),
                    Block {
                        title,
                        note,
                        ..Block::default()
                    },
                )
            }
        }
    }
    for t in &e.tables {
        for patched in [false, true] {
            if let Some((_, r)) = runs.get(&(t.variant.clone(), patched)) {
                let label = format!("{}, {}", t.variant, side(patched));
                add(
                    text::hist_text(&t.site, &label, r),
                    hist_block(&t.site, &label, r),
                );
            }
        }
    }
    for v in &e.variants {
        if let (Some((_, b)), Some((_, n))) = (
            runs.get(&(v.name.clone(), false)),
            runs.get(&(v.name.clone(), true)),
        ) {
            let (text, block) = lkp(&v.name, b, n);
            add(text, block);
            if v.feature_in == FeatureIn::Guests {
                // The seed's kernel is the guests': their counters too.
                for (name, gb) in &b.vms {
                    if let Some(gn) = n.vms.get(name) {
                        let (text, block) = lkp(&format!("{}, guest {name}", v.name), gb, gn);
                        add(text, block);
                    }
                }
            }
        }
    }
    for ((variant, patched), (_, r)) in runs {
        let p = crate::profile_text(r);
        if !p.is_empty() {
            blocks.push(Block {
                title: format!("profile: {variant}, {}", side(*patched)),
                pre: Some(p),
                ..Block::default()
            });
        }
    }
    blocks
}

/// A histogram's block: bpftrace's COUNT and EVENT as a table.
fn hist_block(site: &str, label: &str, r: &RunResult) -> Block {
    let rows = text::hist_rows(site, r)
        .into_iter()
        .map(|(count, value)| vec![count.to_string(), format!("$retval = {value}")])
        .collect();
    Block {
        title: format!("{site} ({label})"),
        table: Some(Table::new(&["COUNT", "EVENT"], &[false, true], rows)),
        ..Block::default()
    }
}

/// A variant's baseline and patched runs as `mmsim diff` prints them,
/// changes of 2% (or 2 points) or more: the text, and the report's table
/// (one run a side, so without the spreads).
fn lkp(variant: &str, base: &RunResult, patched: &RunResult) -> (String, Block) {
    use crate::diff;
    let rows = diff::rows(
        &[diff::metrics(base)],
        &[diff::metrics(patched)],
        false,
        2.0,
    );
    let what = "mmsim diff, changes of 2% or more";
    let text = format!(
        "{variant}: baseline against patched ({what})\n{}",
        diff::render("baseline", "patched", 1, 1, &rows)
    );
    let cells = rows
        .iter()
        .map(|r| {
            let [b, _, change, n, _] = diff::cells(r);
            vec![r.metric.clone(), b, n, change]
        })
        .collect();
    let header = ["metric", "baseline", "patched", "change"];
    let block = Block {
        title: format!("{variant}: baseline against patched"),
        note: format!("As {what}: counters, times in ms, mmtests' reclaim rows."),
        table: Some(Table::new(&header, &[true, false, false, false], cells)),
        pre: None,
    };
    (text, block)
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

/// Writes README.md, index.html and one SVG per experiment into `out`,
/// each atomically, with links into the repository at `root`.
fn write_report(out: &Path, root: &Path, parts: &[ReportPart], scale: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let root_link = relative_link(&std::fs::canonicalize(out)?, root);
    for p in parts {
        let svg = plot::effects_svg(&p.result).map_err(std::io::Error::other)?;
        crate::write_atomically(&out.join(format!("{}.svg", p.result.name)), svg.as_bytes())?;
    }
    crate::write_atomically(
        &out.join("README.md"),
        report::markdown(parts, scale, &root_link).as_bytes(),
    )?;
    crate::write_atomically(
        &out.join("index.html"),
        report::html(parts, scale, &root_link).as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::{default_report_dir, relative_link};
    use std::path::{Path, PathBuf};

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

//! The `mmsim` command.

mod calibrate;
mod calibrate_content;
mod diff;
mod fidelity;
mod oracle_cmd;
mod progress;
mod reproduce;
mod seeds_real;
mod sweep;
mod timing;

use clap::{Parser, Subcommand};
use mmsim_sim::output::RunResult;
use mmsim_sim::{RunOptions, SimError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mmsim",
    version,
    about = "A deterministic simulator of the Linux 6.1 memory-management subsystem"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// The machine profile: what each kernel primitive costs. `auto`
    /// (the committed profile measured on this machine's CPU model, else
    /// `default`), a profile file written by `mmsim calibrate`, `default`
    /// (crates/sim/profiles/default.toml) or `reference` (cost_model.rs's
    /// documented values). Without it: $MMSIM_PROFILE, else `auto`. The
    /// run's knobs say which (`mmsim:cost-profile`).
    #[arg(long, global = true, value_name = "FILE")]
    profile: Option<String>,
}

/// The run's machine profile, chosen once by `--profile`.
static COST_PROFILE: std::sync::OnceLock<mmsim_sim::machine_profile::CostProfile> =
    std::sync::OnceLock::new();

/// Simulator options with the chosen machine profile.
pub(crate) fn sim_options<'a>() -> RunOptions<'a> {
    RunOptions {
        costs: COST_PROFILE.get().cloned().unwrap_or_default(),
        ..RunOptions::default()
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a workload spec in the simulator.
    Run {
        /// The spec (TOML); `-` reads it from standard input.
        spec: PathBuf,
        /// Print the JSON result document instead of the summary.
        #[arg(long)]
        json: bool,
        /// Check the simulated kernel's invariants as it runs.
        #[arg(long)]
        check: bool,
        /// Override a spec key, e.g. --set sysctl."vm.swappiness"=100
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Also write the JSON document to this file (atomically).
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// Refuse a spec asking for more page operations than this
        /// (accesses, pages read or written, PTEs walked; see docs/spec.md
        /// "Limits").
        #[arg(long, value_name = "N", default_value_t = mmsim_spec::work::DEFAULT_MAX_WORK)]
        max_work: u64,
        /// Stop (exit 2) once the run passes this much simulated time, e.g.
        /// "10s": a bound on the kernel's own work, which the spec does not
        /// state (reclaim retrying against pages it cannot free).
        #[arg(long, value_name = "DURATION", value_parser = parse_max_time)]
        max_time: Option<u64>,
        /// No progress bar (one shows on a terminal's stderr for a run
        /// still going after 2 s).
        #[arg(long, short = 'q')]
        quiet: bool,
    },
    /// Run specs on a real Linux kernel under QEMU.
    Oracle {
        #[command(subcommand)]
        cmd: OracleCmd,
    },
    /// Run a spec on the real kernel and in the simulator; print every
    /// counter side by side.
    Compare {
        spec: PathBuf,
        /// Real-kernel runs (their median, min and max are shown).
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// Use the results recorded under results/ beside the spec instead
        /// of booting a kernel.
        #[arg(long)]
        recorded: bool,
        #[arg(long)]
        json: bool,
        /// Show every counter, not only the scored ones.
        #[arg(long)]
        all: bool,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        guest: GuestArgs,
    },
    /// Two sets of runs side by side, LKP-style (`base ±%stddev %change
    /// new ±%stddev metric`): phase times, vmstat, memory.stat and
    /// mmtests' reclaim rows.
    Diff {
        /// BASE and NEW: each a run's JSON document (`mmsim run --json`, an
        /// oracle recording), a folder of them, or a comma-separated list.
        #[arg(num_args = 2, value_names = ["BASE", "NEW"])]
        sides: Vec<String>,
        /// Show unchanged metrics too.
        #[arg(long)]
        all: bool,
        /// Leave out changes smaller than this (%, or points for a
        /// percentage metric).
        #[arg(long, value_name = "PCT", default_value_t = 0.0)]
        min_change: f64,
    },
    /// Check the simulator against the recorded real-kernel results of the
    /// fidelity specs; print or write the table.
    Fidelity(FidelityArgs),
    /// Measure the cost model's constants on this machine (natively, as
    /// root, like `oracle run --native`) and write a machine profile for
    /// --profile (docs/calibrate.md).
    Calibrate(calibrate::CalibrateArgs),
    /// Run a spec at every point of a grid of overrides: a table of one row
    /// per point (docs/output.md "sweep"). A point whose run fails is a
    /// row with its error; the exit status is then 3.
    Sweep {
        /// The spec (TOML).
        spec: PathBuf,
        /// A key as --set takes it and its values, e.g.
        /// --grid 'sysctl."vm.swappiness"=0,60,100'; several make a product.
        #[arg(long, value_name = "KEY=V1,V2,...", required = true)]
        grid: Vec<String>,
        /// Also write the whole table (every counter) as CSV.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
        /// Plot --y against --x into this SVG file.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// The grid key on the plot's x axis (numeric values).
        #[arg(long, value_name = "KEY")]
        x: Option<String>,
        /// The column on the plot's y axis: elapsed_ns, TASK/PHASE.duration_ns
        /// or a /proc/vmstat counter.
        #[arg(long, value_name = "COLUMN")]
        y: Option<String>,
        /// No progress bar.
        #[arg(long, short = 'q')]
        quiet: bool,
    },
    /// Rerun the seed experiments (baseline and patched) and print the
    /// seed's numbers beside mmsim's.
    Reproduce {
        /// Experiments to run, by folder name or a prefix of it ("004");
        /// all when none is given.
        names: Vec<String>,
        /// Run the reduced-scale specs.
        #[arg(long)]
        quick: bool,
        /// Print every experiment's effects as JSON.
        #[arg(long)]
        json: bool,
        /// The folder of experiments.
        #[arg(long, default_value = "experiments")]
        dir: PathBuf,
        /// Write the report (index.html, README.md, one SVG plot per
        /// experiment) into this folder. Default: report/ for every
        /// experiment at full scale, else report-NAME/, report-quick/ or
        /// report-NAME-quick/, so that a part or a reduced run never
        /// replaces the full report.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
        /// Do not write the report.
        #[arg(long, conflicts_with = "report")]
        no_report: bool,
    },
}

#[derive(clap::Args)]
struct FidelityArgs {
    /// The folder of fidelity specs (each with results/<name>/<release>/run-*.json).
    #[arg(default_value = "fidelity")]
    dir: PathBuf,
    /// Exit 1 if any counter is outside its declared tolerance.
    #[arg(long)]
    check: bool,
    /// Write the table into this markdown file between its markers.
    #[arg(long, value_name = "FILE")]
    write: Option<PathBuf>,
    /// Only these kernels' tables ("5.10", "6.1", "6.12", "7.3"; repeat
    /// the option for several): the specs recorded on that release,
    /// simulated with that preset. Default: every kernel with recordings.
    #[arg(long, value_name = "PRESET", value_parser = parse_preset)]
    kernel: Vec<mmsim_spec::Preset>,
    /// The timing suite (DIR/timing/*.toml) instead: each phase's
    /// simulated time beside its fastest recorded native run, within its
    /// declared time tolerance (`[fidelity] time_tolerance`, else 30%).
    #[arg(long)]
    timing: bool,
}

fn parse_preset(s: &str) -> Result<mmsim_spec::Preset, String> {
    mmsim_spec::Preset::parse(s).ok_or_else(|| {
        format!("found \"{s}\", expected one of 5.10, 6.1, 6.12, 7.3 (the behaviour presets)")
    })
}

#[derive(clap::Args)]
struct GuestArgs {
    /// Kernel image, or the release of one in /boot or fetched by
    /// `scripts/get-kernel` ("5.10", "6.12.95+deb12-amd64"; default: the
    /// newest /boot/vmlinuz-*).
    #[arg(long)]
    kernel: Option<PathBuf>,
    /// Its modules directory (default: /lib/modules/RELEASE).
    #[arg(long)]
    modules: Option<PathBuf>,
    /// A static mmsim-runner (default: $MMSIM_RUNNER, else built with cargo).
    #[arg(long)]
    runner: Option<PathBuf>,
    /// Give up on a guest after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    /// Run on this machine's own kernel at hardware speed instead of under
    /// QEMU (root; sets up and undoes zram swap, memory cgroups and knobs;
    /// docs/oracle.md "Native runs").
    #[arg(long)]
    native: bool,
}

impl GuestArgs {
    fn oracle_args(&self) -> oracle_cmd::OracleArgs {
        oracle_cmd::OracleArgs {
            kernel: self.kernel.clone(),
            modules: self.modules.clone(),
            runner: self.runner.clone(),
            timeout_s: self.timeout,
            native: self.native,
        }
    }
}

#[derive(Subcommand)]
enum OracleCmd {
    /// Run one spec once on the real kernel.
    Run {
        spec: PathBuf,
        #[arg(long)]
        json: bool,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        guest: GuestArgs,
    },
    /// Run specs on the real kernel and record the results under
    /// results/<spec name>/ beside each spec (results-native/ with
    /// --native).
    Record {
        specs: Vec<PathBuf>,
        #[arg(long, default_value_t = 3)]
        runs: usize,
        #[command(flatten)]
        guest: GuestArgs,
    },
    /// Undo what a native run that was killed left on this machine (its
    /// swap, cgroups, knobs and mounts), from its journal.
    Cleanup {
        /// Required: the cleanup is of native runs.
        #[arg(long, required = true)]
        native: bool,
        /// A static mmsim-runner (default: $MMSIM_RUNNER, else built).
        #[arg(long)]
        runner: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let profile = match &cli.profile {
        Some(p) => mmsim_sim::machine_profile::CostProfile::load(p),
        None => mmsim_sim::machine_profile::CostProfile::from_env(),
    };
    match profile {
        Ok(p) => {
            let _ = COST_PROFILE.set(p);
        }
        Err(e) => {
            eprintln!("mmsim: --profile {e}");
            return ExitCode::from(2);
        }
    }
    match cli.cmd {
        Cmd::Run {
            spec,
            json,
            check,
            sets,
            output,
            max_work,
            max_time,
            quiet,
        } => cmd_run(
            &spec,
            json,
            check,
            &sets,
            output.as_deref(),
            RunLimits { max_work, max_time },
            quiet,
        ),
        Cmd::Oracle {
            cmd:
                OracleCmd::Run {
                    spec,
                    json,
                    sets,
                    guest,
                },
        } => oracle_cmd::oracle_run(&spec, &sets, json, &guest.oracle_args()),
        Cmd::Oracle {
            cmd: OracleCmd::Record { specs, runs, guest },
        } => oracle_cmd::oracle_record(&specs, runs, &guest.oracle_args()),
        Cmd::Oracle {
            cmd: OracleCmd::Cleanup { runner, .. },
        } => oracle_cmd::native_cleanup(runner),
        Cmd::Compare {
            spec,
            runs,
            recorded,
            json,
            all,
            sets,
            guest,
        } => oracle_cmd::compare_cmd(
            &spec,
            &sets,
            runs,
            recorded,
            json,
            all,
            &guest.oracle_args(),
        ),
        Cmd::Diff {
            sides,
            all,
            min_change,
        } => diff::diff_cmd(&sides, all, min_change),
        Cmd::Calibrate(a) => calibrate::calibrate_cmd(&a),
        Cmd::Fidelity(a) if a.timing => fidelity::timing_cmd(&a.dir, a.check, a.write.as_deref()),
        Cmd::Fidelity(a) => fidelity::fidelity_cmd(&a.dir, a.check, a.write.as_deref(), a.kernel),
        Cmd::Sweep {
            spec,
            grid,
            csv,
            plot,
            x,
            y,
            quiet,
        } => sweep::sweep_cmd(sweep::SweepArgs {
            spec: &spec,
            grid: &grid,
            csv: csv.as_deref(),
            plot: plot.as_deref(),
            x: x.as_deref(),
            y: y.as_deref(),
            quiet,
        }),
        Cmd::Reproduce {
            names,
            quick,
            json,
            dir,
            report,
            no_report,
        } => reproduce::reproduce_cmd(
            &dir,
            &names,
            quick,
            json,
            match (report, no_report) {
                (_, true) => reproduce::ReportTo::Nowhere,
                (Some(d), false) => reproduce::ReportTo::Dir(d),
                (None, false) => reproduce::ReportTo::Default,
            },
        ),
    }
}

/// Reads a spec from its file, or from standard input for `-`.
fn load_spec(path: &Path, sets: &[String]) -> Result<mmsim_spec::Spec, mmsim_spec::SpecError> {
    if path != Path::new("-") {
        return mmsim_spec::load(path, sets);
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes).map_err(|e| {
        mmsim_spec::SpecError {
            file: "<stdin>".into(),
            line: 0,
            column: 0,
            key: String::new(),
            message: format!("cannot read the spec from standard input: {e}"),
        }
    })?;
    mmsim_spec::parse_bytes(&bytes, "<stdin>", sets)
}

/// Prints a simulator error as `mmsim: FILE[:LINE]: [key `K`: ]MESSAGE`.
fn print_sim_error(file: &str, e: &SimError) {
    match e {
        SimError::At { line, key, error } if *line > 0 => {
            let key = if key.is_empty() {
                String::new()
            } else {
                format!("key `{key}`: ")
            };
            eprintln!("mmsim: {file}:{line}: {key}{error}");
        }
        _ => eprintln!("mmsim: {file}: {e}"),
    }
}

/// `--max-time`: a duration with its unit, as a spec's string form.
fn parse_max_time(s: &str) -> Result<u64, String> {
    mmsim_spec::units::parse_duration(s).map_err(|_| {
        format!("found \"{s}\", expected a duration with a unit ns, us, ms or s, e.g. \"10s\"")
    })
}

/// `mmsim run`'s bounds: page operations the spec may ask for, and
/// simulated time the run may reach.
struct RunLimits {
    max_work: u64,
    max_time: Option<u64>,
}

fn cmd_run(
    path: &Path,
    json: bool,
    check: bool,
    sets: &[String],
    output: Option<&Path>,
    limits: RunLimits,
    quiet: bool,
) -> ExitCode {
    let spec = match load_spec(path, sets) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = RunOptions {
        check,
        progress: progress::run_hook(quiet),
        max_work: Some(limits.max_work),
        max_sim_ns: limits.max_time,
        max_host_bytes: mmsim_sim::host_available_bytes(),
        ..sim_options()
    };
    let result = match mmsim_sim::run(&spec, opts) {
        Ok(r) => r,
        Err(e) => {
            print_sim_error(&spec.file, &e);
            return ExitCode::from(e.exit_code());
        }
    };
    let doc = serde_json::to_string_pretty(&result).expect("result serialises");
    if let Some(out) = output {
        if let Err(e) = write_atomically(out, doc.as_bytes()) {
            eprintln!("mmsim: cannot write {}: {e}", out.display());
            return ExitCode::from(1);
        }
    }
    let mut text = if json { doc + "\n" } else { summary(&result) };
    if let Some(n) = result.integrity.invariant_checks {
        // So a user sees the checker ran; beside the JSON, not in it.
        let line = format!("invariants: checked {n} times, all held\n");
        if json {
            eprint!("{line}");
        } else {
            text.push_str(&line);
        }
    }
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(text.as_bytes()).is_err() {
        return ExitCode::from(1);
    }
    if result.integrity.violations > 0 {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Writes to a temporary file beside `path`, then renames it into place.
pub(crate) fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A task's OOM kill in the summary, as the kernel's log would say it.
fn oom_kill_line(k: &mmsim_spec::output::OomKillResult) -> String {
    let by = match &k.oom_memcg {
        Some(m) => format!("cgroup {m}'s OOM killer (memory.max)"),
        None if k.constraint == "global" => "the OOM killer (the machine's memory and swap)".into(),
        None => "SIGKILL (the OOM killer?)".into(),
    };
    let kb = |v: Option<u64>| v.map_or("?".to_string(), |v| format!("{v} kB"));
    format!(
        "  killed by {by} at {}: anon-rss {}, file-rss {}, shmem-rss {}, pgtables {}, oom_score_adj {}\n",
        ms(k.at_ns),
        kb(k.anon_rss_kb),
        kb(k.file_rss_kb),
        kb(k.shmem_rss_kb),
        kb(k.pgtables_kb),
        k.oom_score_adj
    )
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// A bucket bound as bpftrace prints it: 512, 1K, 2M, …
fn bound(v: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in UNITS {
        if v >= size && v.is_multiple_of(size) {
            return format!("{}{unit}", v / size);
        }
    }
    v.to_string()
}

/// A histogram in bpftrace's `hist()` layout.
fn hist_table(buckets: &[mmsim_sim::output::HistBucket]) -> String {
    let max = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let mut s = String::new();
    for b in buckets {
        let bar = "@".repeat(((b.count * 52).div_ceil(max)) as usize);
        s += &format!(
            "{:<20} {:>8} |{bar:<52}|\n",
            format!("[{}, {})", bound(b.lo), bound(b.hi)),
            b.count
        );
    }
    s
}

pub(crate) fn summary(r: &RunResult) -> String {
    let mut s = String::new();
    s += &format!("{} {} — {}\n", r.engine.name, r.engine.version, r.spec);
    s += &format!(
        "machine: {} MiB, {} cpu(s), MemTotal {} MiB, free at start {} MiB, min_free_kbytes {}\n",
        r.machine.memory_bytes >> 20,
        r.machine.cpus,
        r.machine.mem_total_bytes >> 20,
        r.machine.mem_free_at_start_bytes >> 20,
        r.machine.min_free_kbytes
    );
    // A real kernel's document carries wall time (emulated under QEMU).
    let time = match r.engine.name.as_str() {
        "mmsim" => "simulated time",
        "linux-native" => "wall time (native)",
        _ => "wall time (under QEMU's emulated CPU)",
    };
    s += &format!("{time}: {}\n\n", ms(r.elapsed_ns));
    for t in &r.tasks {
        s += &format!(
            "task {}{}: {}\n",
            t.name,
            if t.cgroup.is_empty() {
                String::new()
            } else {
                format!(" (cgroup {})", t.cgroup)
            },
            ms(t.end_ns - t.start_ns)
        );
        if let Some(k) = &t.oom_kill {
            s += &oom_kill_line(k);
        }
        for p in &t.phases {
            s += &format!(
                "  phase {:<12} {:>14}   pgfault {:>9}  pgmajfault {:>9}  pswpin {:>9}  pswpout {:>9}\n",
                p.name,
                ms(p.end_ns - p.start_ns),
                p.vmstat.get("pgfault").copied().unwrap_or(0),
                p.vmstat.get("pgmajfault").copied().unwrap_or(0),
                p.vmstat.get("pswpin").copied().unwrap_or(0),
                p.vmstat.get("pswpout").copied().unwrap_or(0)
            );
            if p.trace_requests > 0 {
                s += &format!("    trace requests {}\n", p.trace_requests);
            }
            if let Some(ps) = &p.pressure {
                s += &format!(
                    "    stalled (the machine): memory some {} full {}, io some {} full {}, cpu some {}\n",
                    ms(ps.memory.some.total_us * 1000),
                    ms(ps.memory.full.total_us * 1000),
                    ms(ps.io.some.total_us * 1000),
                    ms(ps.io.full.total_us * 1000),
                    ms(ps.cpu.some.total_us * 1000)
                );
            }
            // The multi-gen LRU's generations at the phase's end, as
            // /sys/kernel/debug/lru_gen shows them (seq, age ms, anon and
            // file pages), for the lruvecs that hold pages.
            for lv in p
                .lru_gen
                .iter()
                .filter(|lv| lv.gens.iter().any(|g| g.anon + g.file > 0))
            {
                for line in lv.debugfs_text().lines() {
                    s += &format!("    lru_gen {line}\n");
                }
            }
        }
        if let Some(kv) = &t.kv {
            s += &format!(
                "  kvstore: {} requests ({} sets, {} gets)  Ops/sec {:.0}  Hits/sec {:.0}  Misses/sec {:.0}  Latency {:.3} ms  KB/sec {:.0}\n",
                kv.requests,
                kv.sets,
                kv.gets,
                kv.ops_per_sec(),
                kv.hits_per_sec(),
                kv.misses_per_sec(),
                kv.latency_ms(),
                kv.kb_per_sec()
            );
        }
    }
    s += "\nvmstat (whole run; the scored counters that moved):\n";
    for c in mmsim_oracle::compare::SCORED {
        match r.vmstat.get(*c) {
            Some(&v) if v != 0 || *c == "pgfault" => s += &format!("  {c:<28} {v:>12}\n"),
            _ => {}
        }
    }
    let gauge = |k: &str| r.vmstat.get(k).copied().unwrap_or(0);
    if gauge("nr_shmem") != 0 || gauge("nr_file_pages") != 0 {
        s += &format!(
            "  page cache at the end (change over the run, pages): nr_file_pages {:+}, nr_shmem {:+}, nr_swapcached {:+}\n",
            gauge("nr_file_pages"),
            gauge("nr_shmem"),
            gauge("nr_swapcached")
        );
    }
    if let Some(ps) = &r.pressure {
        s += "\npressure (/proc/pressure: averages at the end, totals over the run, µs):\n";
        for (res, f) in [("memory", &ps.memory), ("io", &ps.io), ("cpu", &ps.cpu)] {
            s += &pressure_text(&format!("  {res:<6} "), f);
        }
    }
    for (name, cg) in &r.cgroups {
        s += &format!(
            "\ncgroup {name}: memory.current {} MiB (peak {}), memory.swap.current {} MiB, events low {} high {} max {} oom {} oom_kill {}\n",
            cg.memory_current >> 20,
            cg.memory_peak.map_or("not on this kernel".to_string(), |p| format!(
                "{} MiB",
                p >> 20
            )),
            cg.memory_swap_current >> 20,
            cg.memory_events.get("low").copied().unwrap_or(0),
            cg.memory_events.get("high").copied().unwrap_or(0),
            cg.memory_events.get("max").copied().unwrap_or(0),
            cg.memory_events.get("oom").copied().unwrap_or(0),
            cg.memory_events.get("oom_kill").copied().unwrap_or(0)
        );
        let mib = |k: &str| cg.memory_stat.get(k).copied().unwrap_or(0) >> 20;
        s += &format!(
            "  anon {} MiB, file {} MiB (shmem {} MiB, mapped {} MiB), swapcached {} MiB\n",
            mib("anon"),
            mib("file"),
            mib("shmem"),
            mib("file_mapped"),
            mib("swapcached")
        );
        let swap_ev = |k: &str| cg.memory_swap_events.get(k).copied().unwrap_or(0);
        if swap_ev("max") + swap_ev("fail") > 0 {
            s += &format!(
                "  memory.swap.events max {} fail {} (swap charges memory.swap.max refused; folios that got no swap slot)\n",
                swap_ev("max"),
                swap_ev("fail")
            );
        }
        for k in [
            "pgscan",
            "pgsteal",
            "pgrefill",
            "pgactivate",
            "pgdeactivate",
            "workingset_refault_anon",
        ] {
            s += &format!(
                "  {k:<28} {:>12}\n",
                cg.memory_stat.get(k).copied().unwrap_or(0)
            );
        }
        for (file, f) in [
            ("memory.pressure", &cg.memory_pressure),
            ("io.pressure", &cg.io_pressure),
            ("cpu.pressure", &cg.cpu_pressure),
        ] {
            if let Some(f) = f {
                s += &pressure_text(&format!("  {file:<16}"), f);
            }
        }
    }
    for z in &r.zram {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        s += &format!(
            "\nzram (swap[{}], mm_stat as the last task ends): {:.1} MiB stored in {:.1} MiB compressed, {:.1} MiB of memory (most {:.1}); {} same-filled and {} whole pages\n",
            z.swap,
            mib(z.orig_data_size),
            mib(z.compr_data_size),
            mib(z.mem_used_total),
            mib(z.mem_used_max),
            z.same_pages,
            z.huge_pages
        );
    }
    if let Some(z) = &r.zswap {
        let zswpout = r.vmstat.get("zswpout").copied().unwrap_or(0);
        let zswpin = r.vmstat.get("zswpin").copied().unwrap_or(0);
        s += &format!(
            "
zswap (debugfs as the last task ends): {} pages stored ({} same-filled) in a {:.1} MiB pool; {zswpout} stored and {zswpin} loaded over the run, {} refused at the pool's limit\n",
            z.stored_pages,
            z.same_filled_pages,
            z.pool_total_size as f64 / (1u64 << 20) as f64,
            z.pool_limit_hit
        );
        if z.written_back_pages > 0 || z.stored_incompressible_pages > 0 {
            s += &format!(
                "  {} written back to the swap device, {} stored uncompressed\n",
                z.written_back_pages, z.stored_incompressible_pages
            );
        }
    }
    let verdict = if r.integrity.violations == 0 {
        "OK"
    } else {
        "VIOLATED"
    };
    s += &format!(
        "\nintegrity: {verdict} ({} pages checked, {} violations)\n",
        r.integrity.pages_checked, r.integrity.violations
    );
    for (row, n) in &r.interrupts {
        s += &format!("interrupts {row}: {n} (/proc/interrupts, all CPUs)\n");
    }
    if !r.kvm.is_empty() {
        let stats: Vec<String> = r.kvm.iter().map(|(k, v)| format!("{k} {v}")).collect();
        s += &format!(
            "kvm (its VM's statistics on the host): {}\n",
            stats.join(", ")
        );
    }
    for (name, buckets) in &r.histograms {
        s += &format!("\n@{name}:\n{}", hist_table(buckets));
    }
    let profile = profile_text(r);
    if !profile.is_empty() {
        s += "\nprofile (simulated time; children and self, call paths of 1% or more):\n";
        s += &profile;
    }
    // Each guest's own run, as its kernel shows it, indented under the
    // host's (its VMM is one of the host's tasks above).
    for (name, g) in &r.vms {
        s += &format!("\nguest {name} (run by the host's task {name}):\n");
        for line in summary(g).lines().skip(1) {
            s += &match line.is_empty() {
                true => "\n".to_string(),
                false => format!("  {line}\n"),
            };
        }
    }
    s
}

/// A pressure file's two lines as the kernel prints them, after `prefix`.
fn pressure_text(prefix: &str, f: &mmsim_spec::output::PressureResource) -> String {
    [("some", &f.some), ("full", &f.full)]
        .iter()
        .map(|(which, l)| {
            format!(
                "{prefix}{which} avg10={:.2} avg60={:.2} avg300={:.2} total={}\n",
                l.avg10, l.avg60, l.avg300, l.total_us
            )
        })
        .collect()
}

/// The profile by call path, `perf report --children` style: call paths
/// of 1% of the time or more, nested by caller.
pub(crate) fn profile_text(r: &RunResult) -> String {
    let total: u64 = r.profile.values().sum();
    let mut s = String::new();
    if total == 0 {
        return s;
    }
    for row in r.profile_tree.iter().filter(|p| p.total_ns * 100 >= total) {
        let depth = row.path.matches(';').count();
        let name = row.path.rsplit(';').next().unwrap_or(&row.path);
        s += &format!(
            "  {:>6.2}% {:>6.2}%  {}{name}\n",
            row.total_ns as f64 * 100.0 / total as f64,
            row.self_ns as f64 * 100.0 / total as f64,
            "  ".repeat(depth)
        );
    }
    s
}

//! `mmsim oracle run|record`, `mmsim compare`: the real kernel beside the
//! simulation.

use mmsim_oracle::{compare, Oracle};
use mmsim_sim::output::RunResult;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub struct OracleArgs {
    pub kernel: Option<PathBuf>,
    pub modules: Option<PathBuf>,
    pub runner: Option<PathBuf>,
    pub timeout_s: u64,
    /// On this machine's kernel, not under QEMU.
    pub native: bool,
}

fn load(path: &Path, sets: &[String]) -> Result<(mmsim_spec::Spec, String), ExitCode> {
    let spec = mmsim_spec::load(path, sets).map_err(|e| {
        eprintln!("mmsim: {e}");
        ExitCode::from(2)
    })?;
    let text = std::fs::read_to_string(path).map_err(|e| {
        eprintln!("mmsim: {}: {e}", path.display());
        ExitCode::from(2)
    })?;
    Ok((spec, text))
}

fn oracle(a: &OracleArgs, preset: mmsim_spec::Preset) -> Result<Oracle, ExitCode> {
    let mut o = Oracle::detect(
        a.kernel.clone(),
        preset,
        a.modules.clone(),
        a.runner.clone(),
    )
    .map_err(|e| {
        eprintln!("mmsim: {e}");
        ExitCode::from(2)
    })?;
    o.timeout = std::time::Duration::from_secs(a.timeout_s);
    Ok(o)
}

/// The real kernel's results for the spec at `path`: `runs` native runs
/// or QEMU boots.
fn real_results(
    a: &OracleArgs,
    path: &Path,
    spec: &mmsim_spec::Spec,
    text: &str,
    sets: &[String],
    runs: usize,
) -> Result<Vec<RunResult>, ExitCode> {
    if !spec.vms.is_empty() && !a.native {
        eprintln!(
            "mmsim: {}: the spec has guests ([vm.NAME]), which the oracle under QEMU does not boot (QEMU in QEMU); expected --native, which runs each guest as a QEMU process on this machine's kernel (or run it with `mmsim run`)",
            path.display()
        );
        return Err(ExitCode::from(2));
    }
    if a.native {
        let runner = runner_path(a.runner.clone())?;
        return native_runs(a, &runner, path, spec, text, sets, runs);
    }
    let o = oracle(a, spec.machine.kernel)?;
    real_runs(&o, spec, text, sets, runs)
}

fn runner_path(runner: Option<PathBuf>) -> Result<PathBuf, ExitCode> {
    mmsim_oracle::runner_path(runner).map_err(|e| {
        eprintln!("mmsim: {e}");
        ExitCode::from(2)
    })
}

/// Runs the spec `runs` times on this machine's kernel, its guests under
/// QEMU (`--kernel`, `--modules` are theirs).
fn native_runs(
    a: &OracleArgs,
    runner: &Path,
    path: &Path,
    spec: &mmsim_spec::Spec,
    text: &str,
    sets: &[String],
    runs: usize,
) -> Result<Vec<RunResult>, ExitCode> {
    let guest_oracle = |vm: &mmsim_spec::Vm| {
        Oracle::detect(
            a.kernel.clone(),
            vm.guest.machine.kernel,
            a.modules.clone(),
            Some(runner.to_path_buf()),
        )
    };
    let mut out = Vec::new();
    for i in 0..runs {
        eprintln!("mmsim: native run {}/{runs}…", i + 1);
        let run = match spec.vms.is_empty() {
            true => mmsim_oracle::native::run_once(runner, path, sets),
            false => {
                let run = mmsim_oracle::guests::Run {
                    runner,
                    path,
                    spec,
                    text,
                    sets,
                };
                mmsim_oracle::guests::run_once(&run, &guest_oracle)
            }
        };
        match run {
            Ok(mmsim_oracle::native::Outcome::Done(mut r)) => {
                r.spec = spec.file.clone();
                out.push(*r);
            }
            Ok(mmsim_oracle::native::Outcome::Refused(m)) => {
                eprintln!("{m}");
                return Err(ExitCode::from(2));
            }
            Err(e) => {
                eprintln!("mmsim: {e}");
                return Err(ExitCode::from(1));
            }
        }
    }
    Ok(out)
}

/// `mmsim oracle cleanup --native`.
pub fn native_cleanup(runner: Option<PathBuf>) -> ExitCode {
    let runner = match runner_path(runner) {
        Ok(r) => r,
        Err(c) => return c,
    };
    match mmsim_oracle::native::cleanup(&runner) {
        Ok(true) => {
            eprintln!(
                "mmsim: tore down what {} listed",
                mmsim_oracle::native::JOURNAL
            );
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!(
                "mmsim: nothing to clean up (no {})",
                mmsim_oracle::native::JOURNAL
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mmsim: {e}");
            ExitCode::from(1)
        }
    }
}

/// Boots the real kernel `runs` times on the spec.
fn real_runs(
    o: &Oracle,
    spec: &mmsim_spec::Spec,
    text: &str,
    sets: &[String],
    runs: usize,
) -> Result<Vec<RunResult>, ExitCode> {
    let mut out = Vec::new();
    for i in 0..runs {
        eprintln!(
            "mmsim: booting {} under QEMU (run {}/{runs})…",
            o.release,
            i + 1
        );
        let started = std::time::Instant::now();
        let mut r = o.run(spec, text, sets).map_err(|e| {
            eprintln!("mmsim: {e}");
            ExitCode::from(1)
        })?;
        // The guest read it as /spec.toml; name it as the user did.
        r.spec = spec.file.clone();
        eprintln!(
            "mmsim: run {} done in {:.1} s",
            i + 1,
            started.elapsed().as_secs_f64()
        );
        out.push(r);
    }
    Ok(out)
}

/// `--kernel R` says which release the spec runs as: where R is one mmsim
/// has a preset for, `machine.kernel` is set to it on both sides (the
/// simulator follows that release; the runner checks it is the one
/// running). Native runs use the machine's own kernel and the spec's preset.
pub fn with_kernel_preset(a: &OracleArgs, sets: &[String]) -> Vec<String> {
    let mut out = sets.to_vec();
    let Some(k) = a.kernel.as_ref().filter(|_| !a.native) else {
        return out;
    };
    let name = k.file_name().unwrap_or_default().to_string_lossy();
    let release = name.trim_start_matches("vmlinuz-");
    if let Some(p) = mmsim_spec::Preset::of_release(release) {
        out.push(format!("machine.kernel=\"{p}\""));
    }
    out
}

pub fn oracle_run(path: &Path, sets: &[String], json: bool, a: &OracleArgs) -> ExitCode {
    let sets = &with_kernel_preset(a, sets);
    let result = (|| {
        let (spec, text) = load(path, sets)?;
        let mut r = real_results(a, path, &spec, &text, sets, 1)?;
        Ok::<_, ExitCode>(r.remove(0))
    })();
    match result {
        Ok(r) if json => {
            println!("{}", serde_json::to_string_pretty(&r).expect("serialises"));
            ExitCode::SUCCESS
        }
        Ok(r) => {
            print!("{}", crate::summary(&r));
            ExitCode::SUCCESS
        }
        Err(c) => c,
    }
}

/// The directory holding a spec's native results recorded on a CPU of
/// the model `machine` (its `machine_profile::machine_slug`):
/// results-native/<machine>/<spec name>/ beside the spec. Each CPU
/// model's recordings are kept apart, as its profile is.
pub fn native_results_dir(spec: &Path, machine: &str) -> PathBuf {
    let stem = spec.file_stem().unwrap_or_default().to_string_lossy();
    spec.parent()
        .unwrap_or(Path::new("."))
        .join("results-native")
        .join(machine)
        .join(stem.as_ref())
}

/// The directory holding a fidelity spec's recorded real results, one
/// folder per kernel release below it (results/<spec>/<release>/).
pub fn results_dir(spec: &Path) -> PathBuf {
    results_under(spec, "results")
}

/// FOLDER/<spec name> beside the spec.
fn results_under(spec: &Path, folder: &str) -> PathBuf {
    let stem = spec.file_stem().unwrap_or_default().to_string_lossy();
    spec.parent()
        .unwrap_or(Path::new("."))
        .join(folder)
        .join(stem.as_ref())
}

/// The recorded release folder for `preset` under a spec's results: the
/// newest release of that preset (by version), if any.
pub fn release_dir(spec: &Path, preset: mmsim_spec::Preset) -> Option<PathBuf> {
    let mut found: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(results_dir(spec))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().to_string();
            (mmsim_spec::Preset::of_release(&name) == Some(preset))
                .then(|| (mmsim_oracle::version_key(&name), p))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

/// The real results recorded for `spec` on its preset's release.
pub fn recorded(spec: &Path, preset: mmsim_spec::Preset) -> Vec<RunResult> {
    release_dir(spec, preset)
        .map(|d| recorded_in(&d))
        .unwrap_or_default()
}

/// The result documents run-*.json in `dir`, in name order; unreadable
/// ones are named and skipped.
pub fn recorded_in(dir: &Path) -> Vec<RunResult> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter_map(|f| {
            let read = std::fs::read_to_string(f).map_err(|e| e.to_string());
            match read.and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string())) {
                Ok(r) => Some(r),
                Err(e) => {
                    eprintln!("mmsim: ignoring {}: {e}", f.display());
                    None
                }
            }
        })
        .collect()
}

pub fn oracle_record(specs: &[PathBuf], runs: usize, a: &OracleArgs) -> ExitCode {
    let sets = with_kernel_preset(a, &[]);
    for path in specs {
        let (spec, text) = match load(path, &sets) {
            Ok(x) => x,
            Err(c) => return c,
        };
        let results = match real_results(a, path, &spec, &text, &sets, runs) {
            Ok(r) => r,
            Err(c) => return c,
        };
        let dir = if a.native {
            let cpu = results[0]
                .knobs
                .get("native:cpu")
                .cloned()
                .unwrap_or_default();
            native_results_dir(path, &mmsim_sim::machine_profile::machine_slug(&cpu))
        } else {
            results_dir(path).join(&results[0].engine.version)
        };
        // A new recording replaces the old one whole, never mixes with it.
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("mmsim: {}: {e}", dir.display());
            return ExitCode::from(1);
        }
        for (i, r) in results.iter().enumerate() {
            let f = dir.join(format!("run-{}.json", i + 1));
            let doc = serde_json::to_string_pretty(r).expect("serialises");
            if let Err(e) = crate::write_atomically(&f, doc.as_bytes()) {
                eprintln!("mmsim: {}: {e}", f.display());
                return ExitCode::from(1);
            }
        }
        eprintln!(
            "mmsim: recorded {} runs of {} in {}",
            runs,
            path.display(),
            dir.display()
        );
    }
    ExitCode::SUCCESS
}

pub fn compare_cmd(
    path: &Path,
    sets: &[String],
    runs: usize,
    use_recorded: bool,
    json: bool,
    all: bool,
    a: &OracleArgs,
) -> ExitCode {
    let user_sets = sets;
    let sets = &with_kernel_preset(a, sets);
    let (spec, text) = match load(path, sets) {
        Ok(x) => x,
        Err(c) => return c,
    };
    if runs == 0 {
        eprintln!("mmsim: --runs must be at least 1");
        return ExitCode::from(2);
    }
    if use_recorded && !user_sets.is_empty() {
        eprintln!("mmsim: --set would change only the simulated side of --recorded results; record the changed spec instead");
        return ExitCode::from(2);
    }
    let real = if use_recorded {
        let r = recorded(path, spec.machine.kernel);
        if r.is_empty() {
            eprintln!(
                "mmsim: no results recorded on a {} kernel in {}; run `mmsim oracle record --kernel {} {}`",
                spec.machine.kernel,
                results_dir(path).display(),
                spec.machine.kernel,
                path.display()
            );
            return ExitCode::from(2);
        }
        r
    } else {
        match real_results(a, path, &spec, &text, sets, runs) {
            Ok(r) => r,
            Err(c) => return c,
        }
    };
    let sim = match mmsim_sim::run(&spec, crate::sim_options()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mmsim: {}: {e}", path.display());
            return ExitCode::from(1);
        }
    };
    let c = compare::compare(&real, &sim);
    if json {
        println!("{}", serde_json::to_string_pretty(&c).expect("serialises"));
    } else {
        print!("{}", compare::render(&c, all));
    }
    ExitCode::SUCCESS
}

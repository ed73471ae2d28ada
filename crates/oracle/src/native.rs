//! The native oracle: the runner on the machine's own kernel, at hardware
//! speed, for time (the QEMU oracle emulates the CPU and judges counters
//! only). It changes the host's swap, cgroups and knobs, so every run is
//! supervised:
//!
//! - the runner checks it can set the spec up faithfully and refuses
//!   otherwise (`mmsim-runner --native`: root, no swap already on, zram
//!   only, a memory controller);
//! - it journals every change to [`JOURNAL`] as it makes it;
//! - whatever way the runner ends (success, error, panic, a signal, a
//!   kill), this side then undoes what the journal still lists
//!   (`mmsim-runner --teardown`), and checks /proc/swaps is empty;
//! - SIGINT, SIGTERM and SIGHUP to mmsim during a run kill the runner
//!   (its tasks die with it: PR_SET_PDEATHSIG) and tear down before mmsim
//!   exits;
//! - a journal left by a run that could not tear down (mmsim itself
//!   killed with SIGKILL) is torn down before the next run starts, and by
//!   `mmsim oracle cleanup --native`.

use crate::OracleError;
use mmsim_spec::output::RunResult;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// Where the runner journals what it changed.
pub const JOURNAL: &str = "/run/mmsim-native.journal";

/// The last signal mmsim got during a native run (0: none).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP while it lives (so a run is torn
/// down before mmsim exits), restoring the old handlers after.
struct SignalGuard {
    old: Vec<(libc::c_int, libc::sighandler_t)>,
}

impl SignalGuard {
    fn install() -> SignalGuard {
        SIGNALLED.store(0, Ordering::SeqCst);
        let old = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP]
            .into_iter()
            // SAFETY: the handler only stores to an atomic.
            .map(|s| {
                (s, unsafe {
                    libc::signal(s, on_signal as *const () as libc::sighandler_t)
                })
            })
            .collect();
        SignalGuard { old }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for &(s, h) in &self.old {
            // SAFETY: restoring the handler that was there.
            unsafe { libc::signal(s, h) };
        }
    }
}

/// The devices in /proc/swaps.
pub fn swaps_on() -> Vec<String> {
    std::fs::read_to_string("/proc/swaps")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Undoes a journal a run left, if there is one. Ok(true) if there was.
pub fn cleanup(runner: &Path) -> Result<bool, OracleError> {
    if !Path::new(JOURNAL).exists() {
        return Ok(false);
    }
    let out = Command::new(runner)
        .args(["--teardown", JOURNAL])
        .output()
        .map_err(|e| OracleError::Io(format!("cannot run {}: {e}", runner.display())))?;
    if !out.status.success() {
        return Err(OracleError::Io(format!(
            "the teardown of {JOURNAL} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(true)
}

/// What a native run ended with.
#[derive(Debug)]
pub enum Outcome {
    Done(Box<RunResult>),
    /// The runner refused the spec or the machine (exit 2): the message.
    Refused(String),
}

/// Runs `spec_path` (with `sets`) once on the running kernel.
pub fn run_once(runner: &Path, spec_path: &Path, sets: &[String]) -> Result<Outcome, OracleError> {
    run_once_with(runner, spec_path, sets, &[])
}

/// `run_once` with `extra` arguments to the runner (guests.rs's).
pub fn run_once_with(
    runner: &Path,
    spec_path: &Path,
    sets: &[String],
    extra: &[String],
) -> Result<Outcome, OracleError> {
    let text = match supervise(runner, spec_path, sets, extra)? {
        Ok(t) => t,
        Err(refusal) => return Ok(Outcome::Refused(refusal)),
    };
    let doc: RunResult = serde_json::from_str(&text)
        .map_err(|e| OracleError::Io(format!("the runner's document does not parse: {e}")))?;
    Ok(Outcome::Done(Box::new(doc)))
}

/// The runner's zram bench (`--zram-bench PAGES`; with `content`, every
/// compressor and page content, `--zram-content-bench`) on the zram swap
/// of `spec_path`: its JSON document, or the runner's refusal.
pub fn zram_bench(
    runner: &Path,
    spec_path: &Path,
    pages: u64,
    content: bool,
) -> Result<Result<String, String>, OracleError> {
    let mut args = vec!["--zram-bench".to_string(), pages.to_string()];
    if content {
        args.push("--zram-content-bench".into());
    }
    supervise(runner, spec_path, &[], &args)
}

/// The runner's rstat bench (`--rstat-bench REPS`) in the cgroup of
/// `spec_path`: Ok(Ok(its JSON document)), Ok(Err(refusal)).
pub fn rstat_bench(
    runner: &Path,
    spec_path: &Path,
    reps: u64,
) -> Result<Result<String, String>, OracleError> {
    supervise(
        runner,
        spec_path,
        &[],
        &["--rstat-bench".to_string(), reps.to_string()],
    )
}

/// Runs the runner natively on `spec_path` with `extra` arguments, under
/// the journal and signal supervision above: Ok(Ok(document)),
/// Ok(Err(refusal)) when it refused (exit 2).
fn supervise(
    runner: &Path,
    spec_path: &Path,
    sets: &[String],
    extra: &[String],
) -> Result<Result<String, String>, OracleError> {
    if cleanup(runner)? {
        eprintln!("mmsim: tore down what an earlier native run left ({JOURNAL})");
    }
    let out_file = PathBuf::from(format!("/run/mmsim-native-{}.json", std::process::id()));
    let mut cmd = Command::new(runner);
    cmd.arg(spec_path)
        .args(["--native", "--journal", JOURNAL, "--output"])
        .arg(&out_file)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for s in sets {
        cmd.args(["--set", s]);
    }
    let guard = SignalGuard::install();
    let mut child = cmd
        .spawn()
        .map_err(|e| OracleError::Io(format!("cannot run {}: {e}", runner.display())))?;
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| OracleError::Io(e.to_string()))?
        {
            break Some(st);
        }
        if SIGNALLED.load(Ordering::SeqCst) != 0 {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = child
        .stderr
        .take()
        .map(|mut e| {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
        .unwrap_or_default();
    // Whatever happened, what the journal still lists goes.
    let torn = cleanup(runner);
    drop(guard);
    let left = swaps_on();
    let result = std::fs::read_to_string(&out_file);
    let _ = std::fs::remove_file(&out_file);
    torn?;
    if !left.is_empty() {
        return Err(OracleError::Io(format!(
            "swap still on after the native run: {}",
            left.join(", ")
        )));
    }
    let Some(status) = status else {
        let sig = SIGNALLED.load(Ordering::SeqCst);
        return Err(OracleError::Io(format!(
            "interrupted by signal {sig}; the run was stopped and everything it set up undone"
        )));
    };
    if status.code() == Some(2) {
        return Ok(Err(stderr.trim().to_string()));
    }
    if !status.success() {
        return Err(OracleError::Io(format!(
            "the native runner failed ({status}): {}",
            stderr.trim()
        )));
    }
    result
        .map(Ok)
        .map_err(|e| OracleError::Io(format!("no result document: {e}")))
}

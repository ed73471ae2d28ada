//! The native oracle on this machine's own kernel: every run, however it
//! ends, leaves the machine as it found it (no swap on, no cgroup of its
//! own, knobs restored, no journal). These tests change the machine's swap
//! and cgroups while they run, so they are ignored by default and CI never
//! runs them; run them as root on a machine with zram and no swap on:
//!
//! ```sh
//! cargo test -p mmsim-cli --test native -- --ignored --test-threads 1
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MMSIM: &str = env!("CARGO_BIN_EXE_mmsim");
const JOURNAL: &str = "/run/mmsim-native.journal";

/// What a native run may change, as it stands now.
#[derive(Debug, PartialEq, Eq)]
struct MachineState {
    swaps: String,
    cgroups: Vec<String>,
    zram_disksize: String,
    thp: String,
    swappiness: String,
    journal: bool,
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn state() -> MachineState {
    let mut cgroups: Vec<String> = [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/unified",
    ]
    .iter()
    .flat_map(|root| std::fs::read_dir(root).into_iter().flatten())
    .filter_map(|e| e.ok())
    .map(|e| e.file_name().to_string_lossy().to_string())
    .filter(|n| n.starts_with("mmsim-"))
    .collect();
    cgroups.sort();
    MachineState {
        swaps: read("/proc/swaps"),
        cgroups,
        zram_disksize: read("/sys/block/zram0/disksize"),
        thp: read("/sys/kernel/mm/transparent_hugepage/enabled"),
        swappiness: read("/proc/sys/vm/swappiness"),
        journal: Path::new(JOURNAL).exists(),
    }
}

fn spec(passes: u32) -> PathBuf {
    let p = std::env::temp_dir().join(format!("mmsim-native-{passes}-{}.toml", std::process::id()));
    std::fs::write(
        &p,
        format!(
            r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = 100
[[swap]]
device = "zram"
size = "256M"
[cgroup.w]
memory_max = "32M"
[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "64M" }},
  {{ op = "repeat", times = {passes}, steps = [ {{ op = "touch", region = "heap", write = 1.0 }} ] }},
]
"#
        ),
    )
    .expect("write spec");
    p
}

fn runner_running() -> bool {
    Command::new("pgrep")
        .args(["-f", "mmsim-runner.*--native"])
        .status()
        .is_ok_and(|s| s.success())
}

/// `mmsim oracle run --native SPEC` in the background.
fn spawn_native(spec: &Path, stderr: Stdio) -> std::process::Child {
    Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .args(["oracle", "run", "--native"])
        .arg(spec)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn mmsim")
}

/// Waits until the runner has set the machine up (the journal lists swap).
fn wait_for_setup() {
    let t = Instant::now();
    while !read(JOURNAL).contains("zram0") {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the runner never set up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
}

#[test]
#[ignore = "changes this machine's swap and cgroups; see the comment atop this file"]
fn a_native_run_leaves_the_machine_as_it_found_it() {
    let before = state();
    assert!(
        before.swaps.lines().count() <= 1,
        "swap is on: {}",
        before.swaps
    );
    let p = spec(2);
    let out = Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .args(["oracle", "run", "--native", "--json"])
        .arg(&p)
        .output()
        .expect("run mmsim");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["engine"]["name"], "linux-native");
    // Every page written was read back and swapped: the run did its work.
    assert!(doc["vmstat"]["pswpout"].as_i64().unwrap_or(0) > 0, "{doc}");
    assert_eq!(doc["integrity"]["violations"], 0);
    assert!(doc["knobs"]["native:cpu"]
        .as_str()
        .is_some_and(|c| !c.is_empty()));
    assert_eq!(state(), before);
}

#[test]
#[ignore = "changes this machine's swap and cgroups; see the comment atop this file"]
fn a_killed_runner_is_torn_down() {
    let before = state();
    let p = spec(1000);
    let cli = spawn_native(&p, Stdio::piped());
    wait_for_setup();
    assert_ne!(state(), before, "the run should have set swap up");
    Command::new("pkill")
        .args(["-KILL", "-f", "mmsim-runner.*--native"])
        .status()
        .expect("pkill");
    let out = cli.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    assert!(!runner_running());
    assert_eq!(state(), before);
}

#[test]
#[ignore = "changes this machine's swap and cgroups; see the comment atop this file"]
fn an_interrupted_run_is_torn_down_and_a_killed_one_by_cleanup() {
    let before = state();
    let p = spec(1000);
    // SIGINT to mmsim (and its runner, as a terminal's ^C does).
    let cli = spawn_native(&p, Stdio::piped());
    wait_for_setup();
    Command::new("kill")
        .args(["-INT", &cli.id().to_string()])
        .status()
        .expect("kill -INT");
    let out = cli.wait_with_output().expect("wait");
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted by signal 2"));
    assert_eq!(state(), before);
    // SIGKILL to mmsim and its runner: nothing can tear down then; the
    // journal is left, and `oracle cleanup --native` undoes it.
    let mut cli = spawn_native(&p, Stdio::null());
    wait_for_setup();
    cli.kill().expect("kill mmsim");
    let _ = cli.wait();
    Command::new("pkill")
        .args(["-KILL", "-f", "mmsim-runner.*--native"])
        .status()
        .expect("pkill");
    std::thread::sleep(Duration::from_millis(300));
    assert!(state().journal);
    let out = Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .args(["oracle", "cleanup", "--native"])
        .output()
        .expect("cleanup");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(state(), before);
}

/// `mmsim calibrate` (three runs: the user-space benches, the zram bench
/// and every calibration spec natively) leaves the machine as it found it,
/// and writes a profile that loads and that its recordings solve to; or,
/// when a value solves below zero (a noisy machine), writes none and says
/// so.
#[test]
#[ignore = "changes this machine's swap and cgroups; see the comment atop this file"]
fn calibrate_leaves_the_machine_as_it_found_it() {
    let before = state();
    let dir = std::env::temp_dir().join(format!("mmsim-calibrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (rec, out) = (dir.join("rec"), dir.join("p.toml"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o = Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .current_dir(&root)
        .args(["calibrate", "--runs", "3", "--record"])
        .arg(&rec)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("run mmsim");
    assert_eq!(state(), before);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(1) {
        assert!(err.contains("no profile written") && !out.exists(), "{err}");
        std::fs::remove_dir_all(&dir).ok();
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{err}");
    let text = std::fs::read_to_string(&out).expect("the profile");
    let p = mmsim_sim::machine_profile::MachineProfile::parse(&text).expect("it loads");
    assert_eq!((p.provenance.runs, p.provenance.sessions), (3, 1));
    assert!(p.cost["touch"].value > 0 && p.cost["zram_compress"].value > 0);
    let o = Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .current_dir(&root)
        .args(["calibrate", "--from"])
        .arg(&rec)
        .arg("--check")
        .arg(&out)
        .output()
        .expect("run mmsim");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

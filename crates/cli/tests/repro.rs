//! Regression tests from fuzzing: every spec under tests/repro/ once made
//! mmsim panic, hang, abort, break an invariant or print an unclear
//! message. Each file's header says what it must do now:
//!
//! ```text
//! # expect: exit 0
//! # expect: exit 2: TEXT THE ERROR MUST CONTAIN
//! ```
//!
//! Each runs with `--check`; a run that succeeds must say the invariants
//! were checked and held. A new reproducer is a new file here. A fix that
//! puts a counter right says so under the exit line, and the run's JSON
//! must show it:
//!
//! ```text
//! # expect: vmstat NAME = VALUE
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

const MMSIM: &str = env!("CARGO_BIN_EXE_mmsim");

struct Expect {
    code: i32,
    message: Option<String>,
}

/// The `# expect:` line of a reproducer (its bytes may be anything after
/// the header: some are not UTF-8 on purpose).
fn expectation(path: &Path, bytes: &[u8]) -> Expect {
    let line = bytes
        .split(|&b| b == b'\n')
        .take_while(|l| l.starts_with(b"#"))
        .map(String::from_utf8_lossy)
        .find_map(|l| l.strip_prefix("# expect: exit ").map(str::to_string))
        .unwrap_or_else(|| panic!("{}: no `# expect: exit N` header", path.display()));
    let (code, message) = match line.split_once(": ") {
        Some((c, m)) => (c, Some(m.to_string())),
        None => (line.as_str(), None),
    };
    Expect {
        code: code.trim().parse().expect("an exit status"),
        message,
    }
}

/// Runs mmsim with `args`, `input` on its standard input.
fn run_stdin(args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn mmsim");
    // mmsim may refuse its arguments and exit before it reads the input:
    // a broken pipe then is its answer, not the test's failure.
    let written = std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), input);
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    child.wait_with_output().expect("wait for mmsim")
}

fn reproducers() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/repro");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/repro")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

/// A reproducer whose end depends on time names the profile it was found
/// with (`# profile: NAME`, or a committed profile's file under
/// crates/sim/profiles/); the others run with the default.
fn header_profile(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .find_map(|l| l.strip_prefix("# profile: ").map(str::to_string))
        .map(|p| match p.ends_with(".toml") {
            true => Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../sim/profiles")
                .join(p)
                .to_string_lossy()
                .into_owned(),
            false => p,
        })
        .unwrap_or_else(|| "default".into())
}

#[test]
fn every_reproducer_ends_as_its_header_says() {
    let files = reproducers();
    assert!(files.len() >= 10, "the reproducers are missing");
    let mut failures = Vec::new();
    for path in &files {
        let bytes = std::fs::read(path).expect("read reproducer");
        let want = expectation(path, &bytes);
        let out = Command::new(MMSIM)
            .env("MMSIM_PROFILE", header_profile(&bytes))
            .arg("run")
            .arg(path)
            .arg("--check")
            .output()
            .expect("run mmsim");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let code = out.status.code();
        let ok = match (&want.message, code) {
            (_, c) if c != Some(want.code) => false,
            (Some(m), _) => stderr.contains(m.as_str()),
            (None, _) => stdout.contains("invariants: checked") && stdout.contains("all held"),
        };
        // No message sends raw control bytes to a terminal.
        let raw = stderr
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t');
        if !ok || raw {
            failures.push(format!(
                "{}: expected exit {} {:?}, got {code:?}\nstderr: {stderr}",
                path.display(),
                want.code,
                want.message
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The `# expect: vmstat NAME = VALUE` lines of a reproducer's header.
fn expected_counters(bytes: &[u8]) -> Vec<(String, i64)> {
    bytes
        .split(|&b| b == b'\n')
        .take_while(|l| l.starts_with(b"#"))
        .map(String::from_utf8_lossy)
        .filter_map(|l| {
            let (name, value) = l.strip_prefix("# expect: vmstat ")?.split_once(" = ")?;
            Some((
                name.trim().to_string(),
                value.trim().parse().expect("a count"),
            ))
        })
        .collect()
}

#[test]
fn fixed_reproducers_count_what_their_fix_put_right() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in reproducers() {
        let bytes = std::fs::read(&path).expect("read reproducer");
        let counters = expected_counters(&bytes);
        if counters.is_empty() {
            continue;
        }
        let out = Command::new(MMSIM)
            .env("MMSIM_PROFILE", header_profile(&bytes))
            .args(["run", "--json", "--check"])
            .arg(&path)
            .output()
            .expect("run mmsim");
        assert_eq!(out.status.code(), Some(0), "{}", path.display());
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert!(
            doc["integrity"]["invariant_checks"].as_u64().unwrap_or(0) > 0,
            "{}: the checker did not run",
            path.display()
        );
        for (name, want) in counters {
            let got = doc["vmstat"][&name].as_i64();
            if got != Some(want) {
                failures.push(format!(
                    "{}: {name} {got:?}, expected {want}",
                    path.display()
                ));
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "the counter expectations are missing");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_spec_on_standard_input_runs_as_from_a_file() {
    let path = reproducers()
        .into_iter()
        .find(|p| p.ends_with("min-invariant-clean-differs.toml"))
        .expect("fixture");
    let file = Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .args(["run", "--json"])
        .arg(&path)
        .output()
        .expect("run");
    let stdin = run_stdin(
        &["run", "--json", "-"],
        &std::fs::read(&path).expect("read"),
    );
    assert_eq!(stdin.status.code(), Some(0));
    let strip = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .filter(|l| !l.contains("\"spec\""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&file.stdout), strip(&stdin.stdout));
    assert!(String::from_utf8_lossy(&stdin.stdout).contains("\"spec\": \"<stdin>\""));
}

#[test]
fn max_work_raises_the_limit() {
    let path = reproducers()
        .into_iter()
        .find(|p| p.ends_with("limit-work-nested-repeat.toml"))
        .expect("fixture");
    // The same spec at a millionth of the work: refused under a limit of
    // 100, run under one of its own size.
    let text = std::fs::read_to_string(&path).expect("read").replace(
        "times = 100000000, steps = [ { op = \"repeat\", times = 100000000",
        "times = 1000, steps = [ { op = \"repeat\", times = 10000",
    );
    let out = run_stdin(&["run", "-", "--max-work", "100"], text.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("10000001 page operations"));
    let out = run_stdin(&["run", "-", "--max-work", "10000001"], text.as_bytes());
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn max_time_stops_a_run_past_it() {
    let text = r#"
[machine]
memory = "64M"
[task.t]
steps = [
  { op = "sleep", duration = "100ms" },
  { op = "mmap", name = "a", kind = "anon", size = "64K" },
  { op = "touch", region = "a" },
]
"#;
    let out = run_stdin(&["run", "-", "--max-time", "50ms"], text.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("expected it to end within 50.000 ms: the time limit"),
        "{err}"
    );
    let out = run_stdin(&["run", "-", "--max-time", "1s"], text.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    let out = run_stdin(&["run", "-", "--max-time", "5"], text.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"found "5", expected a duration with a unit"#),
        "{err}"
    );
}

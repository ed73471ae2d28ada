//! End-to-end tests of the `mmsim` command: they run the built binary on
//! small specs and check its exit status, stdout, stderr and the JSON
//! document (docs/output.md).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

const MMSIM: &str = env!("CARGO_BIN_EXE_mmsim");

/// The repository's examples/anon_seq.toml.
fn anon_seq() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/anon_seq.toml")
}

fn mmsim(args: &[&str]) -> Output {
    Command::new(MMSIM)
        .env("MMSIM_PROFILE", "default")
        .args(args)
        .output()
        .expect("run mmsim")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}

/// Runs `mmsim run SPEC --json ARGS…`, expects success, returns the document.
fn run_json(spec: &Path, args: &[&str]) -> Value {
    let mut a = vec!["run", spec.to_str().unwrap(), "--json"];
    a.extend_from_slice(args);
    let o = mmsim(&a);
    assert_eq!(
        o.status.code(),
        Some(0),
        "mmsim {a:?} failed: {}",
        stderr(&o)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document: {e}\n{}", stdout(&o)))
}

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "mmsim-cli-{tag}-{}-{n}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).expect("write spec");
        p
    }

    fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .expect("read temp dir")
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small valid spec: 16 MiB touched in a 32 MiB cgroup. Line numbers
/// matter to the malformed variants below.
const SMALL: &str = r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "64M"
[cgroup.w]
memory_max = "32M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "16M" },
  { op = "touch", region = "heap", write = 1.0 },
]
"#;

/// Runs a spec that must be rejected as bad input: status 2, nothing on
/// stdout. Returns stderr.
fn rejected(spec: &Path, args: &[&str]) -> String {
    let mut a = vec!["run", spec.to_str().unwrap()];
    a.extend_from_slice(args);
    for json in [false, true] {
        let mut a = a.clone();
        if json {
            a.push("--json");
        }
        let o = mmsim(&a);
        assert_eq!(
            o.status.code(),
            Some(2),
            "mmsim {a:?}: expected status 2; stderr: {}",
            stderr(&o)
        );
        assert!(
            o.stdout.is_empty(),
            "mmsim {a:?}: expected no stdout, got {}",
            stdout(&o)
        );
    }
    let o = mmsim(&a);
    let e = stderr(&o);
    assert!(
        !e.trim().is_empty(),
        "mmsim {a:?}: expected a message on stderr"
    );
    e
}

#[test]
fn summary_of_anon_seq() {
    let spec = anon_seq();
    let o = mmsim(&["run", spec.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let mut at = 0;
    for phase in ["write", "read", "rewrite"] {
        let needle = format!("phase {phase} ");
        let i = out[at..]
            .find(&needle)
            .unwrap_or_else(|| panic!("no line for phase {phase} (in order) in\n{out}"));
        at += i + needle.len();
    }
    assert!(out.contains("task main (cgroup w)"), "{out}");
    assert!(out.contains("cgroup w: memory.current"), "{out}");
    assert!(out.contains("integrity: OK"), "{out}");
    assert!(out.contains("vmstat (whole run"), "{out}");
    // Pressure: each phase's stall, the machine's files, the cgroup's.
    assert!(
        out.contains("    stalled (the machine): memory some "),
        "{out}"
    );
    assert!(out.contains("pressure (/proc/pressure"), "{out}");
    assert!(out.contains("  memory some avg10="), "{out}");
    assert!(out.contains("  memory.pressure full avg10="), "{out}");
    // A fast run shows no progress bar, and a piped stderr never does.
    assert!(o.stderr.is_empty(), "unexpected stderr: {}", stderr(&o));
}

#[test]
fn json_document_of_anon_seq() {
    let d = run_json(&anon_seq(), &[]);
    assert_eq!(d["format"], 1);
    assert_eq!(d["engine"]["name"], "mmsim");
    assert_eq!(d["engine"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        d["spec"].as_str().unwrap().ends_with("anon_seq.toml"),
        "{}",
        d["spec"]
    );
    for key in [
        "format",
        "engine",
        "spec",
        "knobs",
        "machine",
        "elapsed_ns",
        "tasks",
        "vmstat",
        "cgroups",
        "integrity",
        "profile",
    ] {
        assert!(d.get(key).is_some(), "no field {key}");
    }
    assert_eq!(d["knobs"]["sysctl:vm.swappiness"], "60");
    assert_eq!(
        d["knobs"]["sysfs:kernel/mm/transparent_hugepage/enabled"],
        "never"
    );
    assert_eq!(d["machine"]["memory_bytes"], 512u64 << 20);
    assert_eq!(d["machine"]["cpus"], 1);
    assert!(!d["machine"]["zones"].as_array().unwrap().is_empty());

    let tasks = d["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1);
    let t = &tasks[0];
    assert_eq!(t["name"], "main");
    assert_eq!(t["cgroup"], "w");
    let phases: Vec<&str> = t["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["write", "read", "rewrite"]);
    let mut prev_end = t["start_ns"].as_u64().unwrap();
    for p in t["phases"].as_array().unwrap() {
        let (s, e) = (
            p["start_ns"].as_u64().unwrap(),
            p["end_ns"].as_u64().unwrap(),
        );
        assert!(prev_end <= s && s < e, "phase times out of order: {p}");
        prev_end = e;
        // 200 MiB touched once per phase: 51200 faults each.
        assert_eq!(p["vmstat"]["pgfault"], 51200, "{}", p["name"]);
    }
    assert!(prev_end <= t["end_ns"].as_u64().unwrap());
    assert!(t["end_ns"].as_u64().unwrap() <= d["elapsed_ns"].as_u64().unwrap());

    let vm = &d["vmstat"];
    assert!(vm["pgfault"].as_i64().unwrap() > 0);
    assert!(
        vm["pswpout"].as_i64().unwrap() > 0,
        "a 200M heap in a 100M cgroup swaps"
    );
    // The whole-run vmstat is the sum of the phases' for these events (one task).
    for c in ["pgfault", "pgmajfault", "pswpin"] {
        let sum: i64 = t["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["vmstat"][c].as_i64().unwrap())
            .sum();
        assert_eq!(vm[c].as_i64().unwrap(), sum, "{c}");
    }

    let w = &d["cgroups"]["w"];
    let stat = w["memory_stat"].as_object().expect("cgroups.w.memory_stat");
    for k in [
        "anon",
        "pgscan",
        "pgsteal",
        "pgfault",
        "workingset_refault_anon",
    ] {
        assert!(stat.contains_key(k), "memory_stat has no {k}");
    }
    assert!(w["memory_current"].as_u64().unwrap() <= 100 << 20);
    assert!(w["memory_peak"].as_u64().unwrap() <= 100 << 20);
    assert!(w["memory_swap_current"].as_u64().unwrap() > 0);
    assert!(w["memory_events"]["max"].as_u64().unwrap() > 0);

    assert_eq!(d["integrity"]["violations"], 0);
    assert!(d["integrity"]["pages_checked"].as_u64().unwrap() > 0);
    assert!(!d["profile"].as_object().unwrap().is_empty());
}

#[test]
fn json_is_deterministic() {
    let spec = anon_seq();
    let a = mmsim(&["run", spec.to_str().unwrap(), "--json"]);
    let b = mmsim(&["run", spec.to_str().unwrap(), "--json"]);
    assert_eq!(a.status.code(), Some(0));
    assert_eq!(b.status.code(), Some(0));
    assert!(a.stdout == b.stdout, "two runs of the same spec differ");
}

#[test]
fn check_passes_and_changes_nothing() {
    let spec = anon_seq();
    let o = mmsim(&["run", spec.to_str().unwrap(), "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("integrity: OK"));
    let checked = mmsim(&["run", spec.to_str().unwrap(), "--check", "--json"]);
    let plain = mmsim(&["run", spec.to_str().unwrap(), "--json"]);
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    // The one line that says the checker ran, on stdout beside the
    // summary and on stderr beside the JSON.
    let line = regex_free_count(&stdout(&o));
    assert!(line >= 2, "{}", stdout(&o));
    assert!(
        stderr(&checked).contains("all held"),
        "{}",
        stderr(&checked)
    );
    // The document says so too; otherwise it is the unchecked one.
    let mut c: Value = serde_json::from_slice(&checked.stdout).expect("json");
    let p: Value = serde_json::from_slice(&plain.stdout).expect("json");
    let n = c["integrity"]
        .as_object_mut()
        .and_then(|i| i.remove("invariant_checks"))
        .expect("invariant_checks with --check");
    assert_eq!(n.as_u64(), Some(line));
    assert!(p["integrity"].get("invariant_checks").is_none());
    assert_eq!(c, p, "--check changed the result");
}

/// N of the summary's "invariants: checked N times, all held" line.
fn regex_free_count(summary: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| l.strip_prefix("invariants: checked "))
        .and_then(|r| r.strip_suffix(" times, all held"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn set_sysctl_is_recorded_in_knobs() {
    let d = run_json(&anon_seq(), &["--set", r#"sysctl."vm.swappiness"=100"#]);
    assert_eq!(d["knobs"]["sysctl:vm.swappiness"], "100");
}

#[test]
fn set_memory_max_stops_swapping() {
    let d = run_json(&anon_seq(), &["--set", "cgroup.w.memory_max=300M"]);
    assert_eq!(d["vmstat"]["pswpout"], 0, "a 200M heap fits in 300M");
    assert_eq!(d["vmstat"]["pswpin"], 0);
    assert_eq!(d["integrity"]["violations"], 0);
}

#[test]
fn bad_set_is_rejected() {
    let dir = TempDir::new("badset");
    let spec = dir.write("small.toml", SMALL);
    // An error in a --set names the --set (it has no line in the file).
    let e = rejected(&spec, &["--set", "machine.memory"]);
    assert!(e.contains("--set"), "{e}");
    assert!(e.contains("machine.memory"), "{e}");
    let e = rejected(&spec, &["--set", "cgroup.w.memory_max=lots"]);
    assert!(e.contains("--set"), "{e}");
    assert!(e.contains("cgroup.w.memory_max"), "{e}");
    assert!(e.contains("lots"), "{e}");
}

#[test]
fn output_file_holds_the_same_document() {
    let dir = TempDir::new("output");
    let file = dir.0.join("result.json");
    let spec = anon_seq();
    let o = mmsim(&[
        "run",
        spec.to_str().unwrap(),
        "--json",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let printed: Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    let written: Value = serde_json::from_slice(&std::fs::read(&file).expect("-o wrote FILE"))
        .expect("FILE is JSON");
    assert_eq!(printed, written);
    assert_eq!(
        dir.entries(),
        ["result.json"],
        "a temporary file was left beside FILE"
    );

    // Without --json: the summary on stdout, the document in FILE,
    // replacing the one there.
    std::fs::write(&file, "stale").unwrap();
    let o = mmsim(&[
        "run",
        spec.to_str().unwrap(),
        "--output",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("integrity: OK"));
    let written: Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).expect("FILE is JSON");
    assert_eq!(printed, written);
    assert_eq!(
        dir.entries(),
        ["result.json"],
        "a temporary file was left beside FILE"
    );
}

#[test]
fn failed_output_leaves_no_temporary_file() {
    let dir = TempDir::new("outfail");
    let spec = dir.write("small.toml", SMALL);
    // FILE is a directory: the temporary file is written, the rename fails.
    std::fs::create_dir(dir.0.join("out")).unwrap();
    let o = mmsim(&[
        "run",
        spec.to_str().unwrap(),
        "-o",
        dir.0.join("out").to_str().unwrap(),
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("cannot write"), "{}", stderr(&o));
    assert_eq!(dir.entries(), ["out", "small.toml"]);
}

#[test]
fn unknown_key() {
    let dir = TempDir::new("unknown-key");
    let spec = dir.write(
        "spec.toml",
        &SMALL.replacen("[machine]\n", "[machine]\nbogus = 1\n", 1),
    );
    let e = rejected(&spec, &[]);
    assert!(e.contains(&format!("{}:2:", spec.display())), "{e}");
    assert!(e.contains("machine.bogus"), "{e}");
}

#[test]
fn bad_size() {
    let dir = TempDir::new("bad-size");
    let spec = dir.write(
        "spec.toml",
        &SMALL.replacen(r#"memory = "512M""#, r#"memory = "512Q""#, 1),
    );
    let e = rejected(&spec, &[]);
    assert!(e.contains(&format!("{}:2:", spec.display())), "{e}");
    assert!(e.contains("machine.memory"), "{e}");
    assert!(e.contains("512Q"), "{e}");

    let spec = dir.write(
        "step.toml",
        &SMALL.replacen(r#"size = "16M""#, r#"size = "16Q""#, 1),
    );
    let e = rejected(&spec, &[]);
    assert!(e.contains(&format!("{}:11:", spec.display())), "{e}");
    assert!(e.contains("task.main.steps[0].size"), "{e}");
    assert!(e.contains("16Q"), "{e}");
}

#[test]
fn unknown_region() {
    let dir = TempDir::new("unknown-region");
    let spec = dir.write(
        "spec.toml",
        &SMALL.replacen(r#"region = "heap""#, r#"region = "stack""#, 1),
    );
    let e = rejected(&spec, &[]);
    assert!(e.contains(&format!("{}:12:", spec.display())), "{e}");
    assert!(e.contains("task.main.steps[1].region"), "{e}");
    assert!(e.contains("stack"), "{e}");
}

#[test]
fn toml_syntax_error() {
    let dir = TempDir::new("syntax");
    let spec = dir.write(
        "spec.toml",
        &SMALL.replacen(r#"memory_max = "32M""#, r#"memory_max = "32M"#, 1),
    );
    let e = rejected(&spec, &[]);
    assert!(e.contains(&format!("{}:7:", spec.display())), "{e}");
}

#[test]
fn nonexistent_spec() {
    let dir = TempDir::new("missing");
    let spec = dir.0.join("no-such-spec.toml");
    let e = rejected(&spec, &[]);
    assert!(e.contains("no-such-spec.toml"), "{e}");
}

#[test]
fn unmodelled_case() {
    let dir = TempDir::new("unmodelled");
    // A huge-capable shared anonymous mapping that is not whole 2 MiB
    // blocks: 6.1 could give it a folio reaching past its end.
    let odd = "[machine]\nmemory = \"512M\"\n[task.t]\nsteps = [\n  { op = \"mmap\", name = \"m\", kind = \"shared_anon\", size = \"3M\" },\n  { op = \"touch\", region = \"m\", write = 1.0 },\n]\n";
    let spec = dir.write(
        "spec.toml",
        &odd.replace(
            "[task.t]",
            "[sysfs]\n\"kernel/mm/transparent_hugepage/shmem_enabled\" = \"always\"\n[task.t]",
        ),
    );
    let e = rejected(&spec, &[]);
    assert!(e.contains("not modelled"), "{e}");
    assert!(e.contains("shared anonymous mapping of 3072 KiB"), "{e}");
    // The same through --set.
    let spec = dir.write("plain.toml", odd);
    let e = rejected(
        &spec,
        &[
            "--set",
            "sysfs.\"kernel/mm/transparent_hugepage/shmem_enabled\"=force",
        ],
    );
    assert!(e.contains("not modelled"), "{e}");
}

#[test]
fn out_of_memory_is_an_oom_kill_and_the_run_goes_on() {
    let dir = TempDir::new("oom");
    let spec = dir.write(
        "spec.toml",
        &SMALL
            .replacen(r#"memory_max = "32M""#, r#"memory_max = "1M""#, 1)
            .replacen(r#"size = "16M""#, r#"size = "64M""#, 1),
    );
    let args = [
        "run",
        spec.to_str().unwrap(),
        "--set",
        r#"sysctl."vm.swappiness"=0"#,
    ];
    // No swap to reclaim to: the memcg OOM killer ends the task, and the
    // run reports it (exit 0).
    let o = mmsim(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("killed by cgroup w's OOM killer"), "{out}");
    let o = mmsim(&[&args[..], &["--json"]].concat());
    let doc: Value = serde_json::from_slice(&o.stdout).expect("json");
    let kill = &doc["tasks"][0]["oom_kill"];
    assert_eq!(kill["constraint"], "memcg", "{kill}");
    assert_eq!(kill["oom_memcg"], "w", "{kill}");
    assert_eq!(doc["cgroups"]["w"]["memory_events"]["oom_kill"], 1);
    assert_eq!(doc["vmstat"]["oom_kill"], 1);
    // With the only task exempt (oom_score_adj -1000) the kernel would
    // retry the fault forever: an error at the touch's line (exit 2).
    let e = rejected(
        &spec,
        &[
            "--set",
            r#"sysctl."vm.swappiness"=0"#,
            "--set",
            "task.main.oom_score_adj=-1000",
        ],
    );
    assert!(e.contains("found no task to kill"), "{e}");
    assert!(e.contains(".toml:") && e.contains("memory_max"), "{e}");
}

/// The committed default profile with `[cost.touch]` replaced by `block`.
fn profile_with_touch(block: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/profiles/default.toml");
    let text = std::fs::read_to_string(path).expect("default profile");
    let start = text.find("[cost.touch]\n").expect("a touch entry");
    let end = start
        + text[start..]
            .find("\n\n")
            .expect("entries end in a blank line");
    format!("{}{block}{}", &text[..start], &text[end..])
}

#[test]
fn profile_sets_what_a_primitive_costs() {
    let dir = TempDir::new("profile");
    let spec = dir.write(
        "re.toml",
        "[machine]\nmemory = \"256M\"\n[task.t]\nsteps = [\n  { op = \"mmap\", name = \"h\", kind = \"anon\", size = \"4M\" },\n  { op = \"touch\", region = \"h\", write = 1.0 },\n  { op = \"phase\", name = \"re\" },\n  { op = \"touch\", region = \"h\" },\n]\n",
    );
    let phase_ns = |d: &Value| {
        let p = &d["tasks"][0]["phases"][0];
        assert_eq!(p["name"], "re");
        p["end_ns"].as_u64().unwrap() - p["start_ns"].as_u64().unwrap()
    };
    let reference = run_json(&spec, &["--profile", "reference"]);
    assert_eq!(reference["knobs"]["mmsim:cost-profile"], "reference");
    let default = run_json(&spec, &[]);
    assert!(default["knobs"]["mmsim:cost-profile"]
        .as_str()
        .unwrap()
        .starts_with("default: "));

    // 1024 resident touches, each 150 ns dearer.
    let touch = "[cost.touch]\nvalue = 250\nunit = \"ns\"\nspread = [240, 260]\nbasis = \"measured\"\nmethod = \"test\"";
    let file = dir.write("p.toml", &profile_with_touch(touch));
    let dear = run_json(&spec, &["--profile", file.to_str().unwrap()]);
    assert_eq!(phase_ns(&dear), phase_ns(&reference) + 1024 * 150);
    assert_eq!(
        dear["vmstat"], reference["vmstat"],
        "costs change no counter"
    );

    let bad = dir.write(
        "bad.toml",
        &profile_with_touch(&touch.replace("\"ns\"", "\"us\"")),
    );
    let o = mmsim(&[
        "run",
        spec.to_str().unwrap(),
        "--profile",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("bad.toml") && e.contains("cost.touch.unit") && e.contains("\"us\""),
        "{e}"
    );
    let o = mmsim(&[
        "run",
        spec.to_str().unwrap(),
        "--profile",
        "/nonexistent/p.toml",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// examples/mglru.toml as its header says: the summary shows each phase's
/// generations in debugfs's form, and `--set` of lru_gen/enabled to false
/// runs the classic LRU on the same workload (no generations, deactivation
/// instead of aging).
#[test]
fn mglru_example_and_its_classic_twin() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mglru.toml");
    let o = mmsim(&["run", spec.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("    lru_gen memcg     2 /w\n"), "{out}");
    assert!(out.contains("    lru_gen  node     0\n"), "{out}");
    let multi = run_json(&spec, &[]);
    assert_eq!(
        multi["knobs"]["sysfs:kernel/mm/lru_gen/enabled"],
        Value::from("0x0007")
    );
    assert_eq!(multi["vmstat"]["pgdeactivate"], Value::from(0));
    let gens = &multi["tasks"][0]["phases"][1]["lru_gen"];
    assert!(gens.as_array().is_some_and(|g| !g.is_empty()), "{gens}");
    let classic = run_json(
        &spec,
        &["--set", "sysfs.\"kernel/mm/lru_gen/enabled\"=false"],
    );
    assert_eq!(
        classic["knobs"]["sysfs:kernel/mm/lru_gen/enabled"],
        Value::from("n")
    );
    assert!(classic["tasks"][0]["phases"][1].get("lru_gen").is_none());
    assert!(classic["vmstat"]["pgdeactivate"].as_i64().unwrap() > 0);
}

#[test]
fn diff_compares_two_runs_lkp_style() {
    let dir = std::env::temp_dir().join(format!("mmsim-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let base = dir.join("base.json");
    let new = dir.join("new.json");
    let spec = anon_seq();
    let run = |out: &Path, set: &[&str]| {
        let mut a = vec!["run", spec.to_str().unwrap(), "-o", out.to_str().unwrap()];
        a.extend_from_slice(set);
        let o = mmsim(&a);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    run(&base, &[]);
    run(&new, &["--set", "cgroup.w.memory_max=150M"]);
    let o = mmsim(&["diff", base.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    // A larger memory.max swaps less: pswpout falls, and the row says so.
    let row = text
        .lines()
        .find(|l| l.ends_with(" vmstat.pswpout"))
        .unwrap_or_else(|| panic!("no pswpout row in {text}"));
    assert!(row.contains("-"), "{row}");
    assert!(text.contains("time.elapsed_ms"), "{text}");
    assert!(text.contains("1 base run(s), 1 new run(s)"), "{text}");
    // The same run on both sides: nothing changed, no rows but the header.
    let o = mmsim(&["diff", base.to_str().unwrap(), base.to_str().unwrap()]);
    assert!(!stdout(&o).contains("vmstat."), "{}", stdout(&o));
    // Two runs on a side: means and a spread.
    let both = format!("{},{}", base.display(), new.display());
    let o = mmsim(&["diff", &both, new.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("2 base run(s), 1 new run(s)"),
        "{}",
        stdout(&o)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn diff_refuses_what_is_not_a_run() {
    let o = mmsim(&[
        "diff",
        anon_seq().to_str().unwrap(),
        anon_seq().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("anon_seq.toml") && e.contains("not a run document"),
        "{e}"
    );
    let o = mmsim(&["diff", "/nonexistent/a.json", "/nonexistent/b.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read"), "{}", stderr(&o));
}

/// `mmsim ARGS` with stderr a pseudo-terminal (util-linux's `script`),
/// the bar's delay 0; returns what the terminal showed, or None where
/// `script` is missing.
fn on_a_terminal(args: &[&str]) -> Option<String> {
    let cmd = std::iter::once(MMSIM)
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new("script")
        .args(["-qec", &format!("{cmd} >/dev/null"), "/dev/null"])
        .env("MMSIM_PROGRESS_AFTER_MS", "0")
        .output()
        .ok()?;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn no_progress_bar_unless_stderr_is_a_terminal() {
    // Due at once, but stderr is a pipe: nothing on it, stdout as quiet.
    let spec = anon_seq();
    let spec = spec.to_str().unwrap();
    let run = |quiet: bool| {
        let mut c = Command::new(MMSIM);
        c.args(["run", spec]).env("MMSIM_PROGRESS_AFTER_MS", "0");
        if quiet {
            c.arg("--quiet");
        }
        c.output().expect("run mmsim")
    };
    let (shown, quiet) = (run(false), run(true));
    assert_eq!(shown.status.code(), Some(0));
    assert_eq!(stderr(&shown), "");
    assert_eq!(stdout(&shown), stdout(&quiet));
    // On a terminal the bar shows, work and simulated time beside it;
    // --quiet hides it there too.
    match on_a_terminal(&["run", spec]) {
        Some(tty) => {
            assert!(
                tty.contains("simulating") && tty.contains("page ops") && tty.contains("simulated"),
                "{tty}"
            );
            let quiet = on_a_terminal(&["run", spec, "--quiet"]).unwrap();
            assert!(!quiet.contains("simulating"), "{quiet}");
        }
        None => eprintln!("skipped the terminal half: no `script` (util-linux) to make one"),
    }
}

#[test]
fn set_reaches_array_entries() {
    let dir = TempDir::new("set-array");
    let spec = dir.write("spec.toml", SMALL);
    let pswpout = |args: &[&str]| {
        let mut a = vec!["run", spec.to_str().unwrap(), "--json"];
        a.extend_from_slice(args);
        let o = mmsim(&a);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let doc: Value = serde_json::from_slice(&o.stdout).expect("json");
        (
            doc["vmstat"]["pswpout"].as_i64().unwrap(),
            doc["knobs"]["swap:0"].clone(),
        )
    };
    // 16 MiB under a 1 MiB limit swaps; the same touch as reads does not.
    let limited = ["--set", "cgroup.w.memory_max=1M"];
    assert!(pswpout(&limited).0 > 0);
    let reads = [&limited[..], &["--set", "task.main.steps[1].write=0.0"]].concat();
    assert_eq!(pswpout(&reads).0, 0);
    // The swap device's size, as a sweep of zram sizes sets it.
    let (_, knob) = pswpout(&["--set", "swap[0].size=32M"]);
    assert_eq!(knob, "zram 33554432");
    let e = rejected(&spec, &["--set", "swap[1].size=32M"]);
    assert!(
        e.contains("`swap` has 1 entries; expected an index below 1"),
        "{e}"
    );
}

/// The summary of `examples/NAME` (run successfully), and where its guest
/// g1's section starts.
fn guest_summary(name: &str) -> (std::path::PathBuf, String, usize) {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    let o = mmsim(&["run", spec.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let guest_at = out
        .find("guest g1 (run by the host's task g1):")
        .expect("a guest section");
    (spec, out, guest_at)
}

/// examples/guest_tcg.toml: the summary shows the host (its VMM task and
/// the host's swapping of guest RAM) and then the guest's own run; the
/// JSON nests the guest under `vms`.
#[test]
fn a_guest_is_summarised_under_its_host() {
    let (spec, out, guest_at) = guest_summary("guest_tcg.toml");
    assert!(out[..guest_at].contains("task g1 (cgroup vms)"));
    assert!(out[guest_at..].contains("  task main (cgroup app)"));
    assert!(out[guest_at..].contains("  phase read"));
    let d = run_json(&spec, &[]);
    let g = &d["vms"]["g1"];
    assert!(g["vmstat"]["pswpout"].as_i64().unwrap() > 0);
    assert!(d["vmstat"]["pswpout"].as_i64().unwrap() > 0);
    assert_eq!(g["tasks"][0]["name"], "main");
}

/// examples/guest_kvm.toml: a KVM guest's summary lists KVM's statistics,
/// and its JSON has them (the guest's, not the host's).
#[test]
fn a_kvm_guest_is_summarised_with_its_vms_statistics() {
    let (spec, out, guest_at) = guest_summary("guest_kvm.toml");
    assert!(
        out[guest_at..].contains("  kvm (its VM's statistics on the host): exits "),
        "{out}"
    );
    let d = run_json(&spec, &[]);
    let kvm = &d["vms"]["g1"]["kvm"];
    assert!(kvm["exits"].as_u64().unwrap() >= kvm["pf_taken"].as_u64().unwrap());
    assert!(kvm["pf_taken"].as_u64().unwrap() > kvm["pf_fixed"].as_u64().unwrap());
    assert!(d["kvm"].is_null(), "the host's document has none");
}

/// The oracle does not boot guests yet: a clear refusal, exit status 2.
#[test]
fn the_oracle_refuses_a_spec_with_guests() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/guest_tcg.toml");
    let o = mmsim(&["oracle", "run", spec.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("guests"), "{}", stderr(&o));
}

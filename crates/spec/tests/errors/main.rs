//! Malformed specs get clear errors: every one names the file, the 1-based
//! line, the dotted key, what was found and what was expected (docs/design.md
//! "Workload spec"). Valid specs parse to the right values and defaults, and
//! `--set KEY=VALUE` overrides take effect.
//!
//! Spec texts start right after `r#"`, so line 1 of a text is the line the
//! literal opens on. Tests marked `#[ignore]` state what a user would expect
//! and the crate does not do yet.

use mmsim_spec::{
    parse_str, Features, FileOn, Limit, MapKind, MthpShmem, Op, Order, Preset, ShmemEnabled, Spec,
    SpecError, SwapKind, TmpfsHuge, OPS, SYSCTLS,
};

fn parse(text: &str) -> Result<Spec, SpecError> {
    parse_str(text, "t.toml", &[])
}

fn parse_set(text: &str, sets: &[&str]) -> Result<Spec, SpecError> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    parse_str(text, "t.toml", &sets)
}

#[track_caller]
fn rejected(text: &str) -> SpecError {
    match parse(text) {
        Ok(spec) => panic!("spec should be rejected, parsed as {spec:#?}"),
        Err(e) => e,
    }
}

/// Asserts every field of `e`: file `t.toml`, the exact line and key, and
/// that the message mentions each of `mentions` (what was found and what
/// was expected).
#[track_caller]
fn check(e: &SpecError, line: usize, key: &str, mentions: &[&str]) {
    check_in(e, "t.toml", line, key, mentions);
}

#[track_caller]
fn check_in(e: &SpecError, file: &str, line: usize, key: &str, mentions: &[&str]) {
    assert_eq!(e.file, file, "file of: {e}");
    assert_eq!(e.line, line, "line of: {e}");
    assert_eq!(e.key, key, "key of: {e}");
    for m in mentions {
        assert!(
            e.message.contains(m),
            "message of `{e}` should mention {m:?}"
        );
    }
}

const TASK: &str = r#"[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap" },
]
"#;

fn with_task(head: &str) -> String {
    format!("{head}{TASK}")
}

mod content;
mod disks;
mod display;
mod files;
mod machine;
mod processes;
mod regions;
mod set;
mod set_step;
mod steps;
mod swap;
mod syntax;
mod sysctl;
mod sysfs;
mod tasks;
mod valid;
mod vm;

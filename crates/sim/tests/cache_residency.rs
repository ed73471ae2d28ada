//! Which pages a CPU's L2 holds (l2cache.rs): a copy from a page the CPU
//! streamed a moment ago costs the profile's `copy_page_l2`, any other
//! `copy_page`; a profile without the model prices every copy as before.

mod common;

use common::try_run_with;
use mmsim_sim::l2cache::L2Model;
use mmsim_sim::machine_profile::{CostProfile, Costs};
use mmsim_sim::output::RunResult;

/// Sapphire Rapids' L2 (2 MiB, 16 ways: 32 page sets of 16 pages).
const L2: L2Model = L2Model {
    bytes: 2 << 20,
    ways: 16,
    copy_page_l2: 70,
};
const COPY: u64 = Costs::REFERENCE.copy_page;
/// What a copy from L2 saves.
const SAVED: u64 = COPY - L2.copy_page_l2;

fn with_l2() -> CostProfile {
    CostProfile {
        l2: Some(L2),
        ..CostProfile::reference()
    }
}

fn run(text: &str, costs: CostProfile) -> RunResult {
    try_run_with(text, costs).unwrap_or_else(|e| panic!("{e}"))
}

/// Task `task`'s phase `phase`, ns.
fn phase(r: &RunResult, task: &str, phase: &str) -> u64 {
    let t = r.tasks.iter().find(|t| t.name == task).expect("task");
    let p = t.phases.iter().find(|p| p.name == phase).expect("phase");
    p.end_ns - p.start_ns
}

/// What each of `phases` of `task` is shorter with the L2 model, ns.
fn saved(text: &str, task: &str, phases: &[&str]) -> Vec<u64> {
    let (cold, warm) = (run(text, CostProfile::reference()), run(text, with_l2()));
    phases
        .iter()
        .map(|p| phase(&cold, task, p) - phase(&warm, task, p))
        .collect()
}

/// A machine of `cpus` CPUs with a tmpfs file `f` of `size`, and task
/// main's `steps` (inline tables, each with its trailing comma).
fn with_file(cpus: u32, size: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "256M"
cpus = {cpus}
[[file]]
name = "f"
size = "{size}"
on = "tmpfs"
[task.main]
steps = [
{steps}
]
"#
    )
}

/// The file read in 4 KiB calls.
const READ: &str = r#"{ op = "read", file = "f", chunk = "4K" },"#;

/// A tmpfs file of `size` written, then read twice in 4 KiB calls.
fn reread(size: &str) -> String {
    let steps = format!(
        r#"{{ op = "write", file = "f" }},
{{ op = "phase", name = "first" }}, {READ}
{{ op = "phase", name = "again" }}, {READ}"#
    );
    with_file(1, size, &steps)
}

#[test]
fn a_file_half_the_l2_is_read_from_l2_every_time() {
    // write(2) streamed its 256 pages into this CPU's L2: both reads copy
    // from there.
    assert_eq!(
        saved(&reread("1M"), "main", &["first", "again"]),
        [256 * SAVED, 256 * SAVED]
    );
}

#[test]
fn a_file_twice_the_l2_is_read_from_memory() {
    // 1024 pages stream in order through 32 sets of 16: each set sees 32
    // pages in turn, so LRU has evicted every page before a read comes
    // back to it.
    assert_eq!(saved(&reread("4M"), "main", &["first", "again"]), [0, 0]);
}

#[test]
fn another_cpu_reads_from_memory_first_then_from_its_own_l2() {
    let steps = format!(
        r#"{{ op = "write", file = "f" }},
{{ op = "thread", steps = [
  {{ op = "phase", name = "first" }}, {READ}
  {{ op = "phase", name = "again" }}, {READ}
] }},
{{ op = "wait" }},"#
    );
    assert_eq!(
        saved(
            &with_file(2, "1M", &steps),
            "main/thread0",
            &["first", "again"]
        ),
        [0, 256 * SAVED]
    );
}

#[test]
fn a_write_on_another_cpu_takes_the_pages_from_this_one() {
    let steps = format!(
        r#"{{ op = "write", file = "f" }},
{{ op = "thread", steps = [ {{ op = "write", file = "f" }} ] }},
{{ op = "wait" }},
{{ op = "phase", name = "after" }}, {READ}"#
    );
    assert_eq!(saved(&with_file(2, "1M", &steps), "main", &["after"]), [0]);
}

#[test]
fn user_accesses_age_the_l2_a_line_each() {
    // 64 pages faulted in (cleared: in L2), the file written, then 512
    // passes over the 64 pages: 32,768 accesses, 512 pages' worth of
    // lines, the whole L2.
    let text = |passes: u32| {
        let steps = format!(
            r#"{{ op = "mmap", name = "r", kind = "anon", size = "256K" }},
{{ op = "touch", region = "r", write = 1.0 }},
{{ op = "write", file = "f" }},
{{ op = "touch", region = "r", passes = {passes} }},
{{ op = "phase", name = "read" }}, {READ}"#
        );
        with_file(1, "1M", &steps)
    };
    assert_eq!(saved(&text(512), "main", &["read"]), [0]);
    // 64 passes age 64 ways: two of each set's sixteen, which held ten
    // pages (two of the region's, eight of the file's) and six free ways:
    // the lines take free ways, the file stays.
    assert_eq!(saved(&text(64), "main", &["read"]), [256 * SAVED]);
}

#[test]
fn cow_copies_a_page_the_cpu_just_cleared_from_l2() {
    // 128 sources and 128 copies: half the L2, so no set overflows (with
    // 1 MiB, 512 pages, the copies evict sources not yet copied).
    let text = r#"
[machine]
memory = "256M"
[task.main]
steps = [
  { op = "mmap", name = "r", kind = "anon", size = "512K" },
  { op = "touch", region = "r", write = 1.0 },
  { op = "fork", steps = [ { op = "sleep", duration = "1s" } ] },
  { op = "phase", name = "cow" },
  { op = "touch", region = "r", write = 1.0 },
]
"#;
    assert_eq!(saved(text, "main", &["cow"]), [128 * SAVED]);
}

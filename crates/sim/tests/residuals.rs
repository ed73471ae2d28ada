//! Residual costs (docs/calibrate.md "The unknowns"): each is charged on
//! the path its calibration home times, once per page, and nowhere its
//! kernel path does not run. Each test runs a spec twice, the residual at
//! 0 and at 1000 ns, and reads what a phase gained.

mod common;
use common::*;
use mmsim_sim::machine_profile::{CostProfile, Costs};
use mmsim_sim::output::RunResult;

const NS: u64 = 1000;

fn run_costs(text: &str, costs: Costs) -> RunResult {
    try_run_with(
        text,
        CostProfile {
            costs,
            ..CostProfile::reference()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Each phase of task `main`'s time, ns.
fn phases(r: &RunResult) -> Vec<(String, u64)> {
    r.tasks
        .iter()
        .find(|t| t.name == "main")
        .expect("task main")
        .phases
        .iter()
        .map(|p| (p.name.clone(), p.end_ns - p.start_ns))
        .collect()
}

/// What each phase gains when `set` raises one residual to `NS`.
fn gained(text: &str, set: fn(&mut Costs)) -> Vec<(String, i64)> {
    let mut raised = Costs::REFERENCE;
    set(&mut raised);
    let base = phases(&run_costs(text, Costs::REFERENCE));
    let more = phases(&run_costs(text, raised));
    base.iter()
        .zip(&more)
        .map(|(a, b)| (a.0.clone(), b.1 as i64 - a.1 as i64))
        .collect()
}

const PAGES: i64 = 4096;

/// 16 MiB paged out to zram; `between` runs before the munmap.
fn zap_spec(between: &str) -> String {
    format!(
        r#"
[machine]
memory = "256M"
[[swap]]
device = "zram"
size = "64M"
[task.main]
steps = [
  {{ op = "mmap", name = "r", kind = "anon", size = "16M" }},
  {{ op = "touch", region = "r", write = 1.0 }},
  {{ op = "madvise", region = "r", advice = "pageout" }},
  {between}
  {{ op = "phase", name = "zap" }},
  {{ op = "munmap", region = "r" }},
  {{ op = "phase", name = "after" }},
  {{ op = "wait" }},
]
"#
    )
}

#[test]
fn a_zap_that_frees_the_slot_pays_swap_slot_free_per_page() {
    let g = gained(&zap_spec(""), |c| c.swap_slot_free = NS);
    assert_eq!(g[0], ("zap".to_string(), PAGES * NS as i64));
}

#[test]
fn a_zap_that_leaves_the_slot_to_a_forked_child_does_not() {
    // The child holds a second reference to every slot: the parent's zap
    // only lowers the count (free_swap_and_cache finds it above 0). The
    // child's exit frees them, after the phase.
    let fork = r#"{ op = "fork", steps = [ { op = "sleep", duration = "1s" } ] },"#;
    let g = gained(&zap_spec(fork), |c| c.swap_slot_free = NS);
    assert_eq!(g[0], ("zap".to_string(), 0));
}

/// A 16 MiB tmpfs file, first read or written through a shared mapping.
fn shared_spec(first_write: u32) -> String {
    format!(
        r#"
[machine]
memory = "256M"
[[file]]
name = "f"
size = "16M"
on = "tmpfs"
[task.main]
steps = [
  {{ op = "mmap", name = "sh", kind = "shmem", file = "f", size = "16M" }},
  {{ op = "phase", name = "first" }},
  {{ op = "touch", region = "sh", write = {first_write} }},
  {{ op = "phase", name = "end" }},
]
"#
    )
}

#[test]
fn a_shared_write_fault_on_tmpfs_pays_shmem_shared_fault_per_page() {
    let g = gained(&shared_spec(1), |c| c.shmem_shared_fault = NS);
    assert_eq!(g[0], ("first".to_string(), PAGES * NS as i64));
}

#[test]
fn a_shared_read_fault_on_tmpfs_does_not() {
    let g = gained(&shared_spec(0), |c| c.shmem_shared_fault = NS);
    assert_eq!(g[0], ("first".to_string(), 0));
}

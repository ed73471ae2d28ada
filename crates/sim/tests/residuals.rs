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

/// What each phase gains when `set` raises one residual from 0 to `NS`.
fn gained(text: &str, set: fn(&mut Costs, u64)) -> Vec<(String, i64)> {
    let (mut zero, mut raised) = (Costs::REFERENCE, Costs::REFERENCE);
    set(&mut zero, 0);
    set(&mut raised, NS);
    let base = phases(&run_costs(text, zero));
    let more = phases(&run_costs(text, raised));
    base.iter()
        .zip(&more)
        .map(|(a, b)| (a.0.clone(), b.1 as i64 - a.1 as i64))
        .collect()
}

const PAGES: i64 = 4096;

/// A child that only sleeps past the parent's phases, holding a second
/// reference to every swap slot the parent had when it forked.
const FORK_SLEEPER: &str = r#"{ op = "fork", steps = [ { op = "sleep", duration = "1s" } ] },"#;

/// Region `r`, 16 MiB of private anon written and paged out to zram, then
/// `steps` (inline step tables, each with its trailing comma); `sysctl`
/// lines go in a `[sysctl]` table.
fn paged_out_spec(sysctl: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "256M"
[[swap]]
device = "zram"
size = "64M"
[sysctl]
{sysctl}
[task.main]
steps = [
  {{ op = "mmap", name = "r", kind = "anon", size = "16M" }},
  {{ op = "touch", region = "r", write = 1.0 }},
  {{ op = "madvise", region = "r", advice = "pageout" }},
  {steps}
]
"#
    )
}

/// The paged-out region unmapped; `between` runs before the munmap.
fn zap_spec(between: &str) -> String {
    paged_out_spec(
        "",
        &format!(
            r#"{between}
  {{ op = "phase", name = "zap" }},
  {{ op = "munmap", region = "r" }},
  {{ op = "phase", name = "after" }},
  {{ op = "wait" }},"#
        ),
    )
}

#[test]
fn a_zap_that_frees_the_slot_pays_swap_slot_free_per_page() {
    let g = gained(&zap_spec(""), |c, v| c.swap_slot_free = v);
    assert_eq!(g[0], ("zap".to_string(), PAGES * NS as i64));
}

#[test]
fn a_zap_that_leaves_the_slot_to_a_forked_child_does_not() {
    // The child holds a second reference to every slot: the parent's zap
    // only lowers the count (free_swap_and_cache finds it above 0). The
    // child's exit frees them, after the phase.
    let g = gained(&zap_spec(FORK_SLEEPER), |c, v| c.swap_slot_free = v);
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
    let g = gained(&shared_spec(1), |c, v| c.shmem_shared_fault = v);
    assert_eq!(g[0], ("first".to_string(), PAGES * NS as i64));
}

#[test]
fn a_shared_read_fault_on_tmpfs_does_not() {
    let g = gained(&shared_spec(0), |c, v| c.shmem_shared_fault = v);
    assert_eq!(g[0], ("first".to_string(), 0));
}

/// The paged-out region read back, `fork` (a child holding every slot)
/// between the pageout and the reads; then the child's exit and the
/// munmap.
fn swapin_spec(fork: bool) -> String {
    let fork = if fork { FORK_SLEEPER } else { "" };
    paged_out_spec(
        r#""vm.page-cluster" = 0"#,
        &format!(
            r#"{fork}
  {{ op = "phase", name = "swapin" }},
  {{ op = "touch", region = "r", write = 0.0 }},
  {{ op = "phase", name = "wait" }},
  {{ op = "wait" }},
  {{ op = "phase", name = "munmap" }},
  {{ op = "munmap", region = "r" }},
  {{ op = "phase", name = "end" }},"#
        ),
    )
}

fn phase(g: &[(String, i64)], name: &str) -> i64 {
    g.iter().find(|p| p.0 == name).expect("phase").1
}

#[test]
fn a_swapin_of_a_shared_slot_pays_swap_cache_add_and_keeps_the_slot() {
    // A slot of count 2 cannot skip the swap cache: each page is looked
    // up, inserted and read; the slot stays for the child's reference.
    let g = gained(&swapin_spec(true), |c, v| c.swap_cache_add = v);
    assert_eq!(phase(&g, "swapin"), PAGES * NS as i64);
    let g = gained(&swapin_spec(true), |c, v| c.swap_slot_free = v);
    assert_eq!(phase(&g, "swapin"), 0);
}

#[test]
fn a_swapin_of_a_slot_of_count_1_skips_the_cache_and_frees_the_slot() {
    let g = gained(&swapin_spec(false), |c, v| c.swap_cache_add = v);
    assert_eq!(phase(&g, "swapin"), 0);
    let g = gained(&swapin_spec(false), |c, v| c.swap_slot_free = v);
    assert_eq!(phase(&g, "swapin"), PAGES * NS as i64);
}

#[test]
fn a_munmap_of_folios_the_swap_cache_holds_deletes_them_and_frees_their_slots() {
    // The child's exit left each slot to the cache (the folio is mapped);
    // the parent's zap frees the folio's swap (free_swap_cache).
    let g = gained(&swapin_spec(true), |c, v| c.swap_cache_del = v);
    assert_eq!(phase(&g, "munmap"), PAGES * NS as i64);
    assert_eq!(phase(&g, "swapin"), 0);
    let g = gained(&swapin_spec(true), |c, v| c.swap_slot_free = v);
    assert_eq!(phase(&g, "munmap"), PAGES * NS as i64);
    // Without the fork, no folio is in the cache by then.
    let g = gained(&swapin_spec(false), |c, v| c.swap_cache_del = v);
    assert_eq!(phase(&g, "munmap"), 0);
}

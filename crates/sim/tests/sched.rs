//! The scheduler's view of CPU time: `compute` steps share the CPUs, and
//! an MMU without hardware accessed bits traps on old PTEs.

mod common;
use common::*;

fn computing(cpus: u32, tasks: u32) -> String {
    format!(
        r#"
[machine]
memory = "256M"
cpus = {cpus}
[task.cc]
instances = {tasks}
steps = [{{ op = "compute", duration = "1s" }}]
"#
    )
}

fn ends_s(r: &mmsim_sim::output::RunResult) -> Vec<f64> {
    r.tasks.iter().map(|t| t.end_ns as f64 / 1e9).collect()
}

#[test]
fn compute_steps_share_the_cpus() {
    // Alone, a second of CPU ends at one second.
    let one = ends_s(&run_checked(&computing(1, 1)));
    assert!((one[0] - 1.0).abs() < 1e-6, "{one:?}");
    // Two on one CPU take turns: both end near two seconds.
    for end in ends_s(&run_checked(&computing(1, 2))) {
        assert!((1.9..=2.0 + 1e-6).contains(&end), "{end}");
    }
    // Two on two CPUs run side by side.
    for end in ends_s(&run_checked(&computing(2, 2))) {
        assert!((end - 1.0).abs() < 1e-6, "{end}");
    }
}

/// A region touched, then a fork (the child's PTEs start old, as
/// copy_present_pte makes them) whose child reads it twice: without hardware accessed bits every first
/// access through an old PTE is a minor fault; with them, none is.
fn young_bits(hw: bool) -> mmsim_sim::output::RunResult {
    run_checked(&format!(
        r#"
[machine]
memory = "256M"
hw_pte_young = {hw}
[task.main]
steps = [
  {{ op = "mmap", name = "a", kind = "anon", size = "4M" }},
  {{ op = "touch", region = "a", write = 1.0 }},
  {{ op = "fork", steps = [
    {{ op = "phase", name = "child" }},
    {{ op = "touch", region = "a" }},
    {{ op = "touch", region = "a" }},
  ] }},
]
"#
    ))
}

#[test]
fn old_ptes_trap_without_hardware_accessed_bits() {
    let soft = young_bits(false);
    let hard = young_bits(true);
    // 1024 pages: one trap each on the first pass, none on the second.
    assert_eq!(phase_vm(&soft, 1, "child", "pgfault"), 1024);
    assert_eq!(phase_vm(&hard, 1, "child", "pgfault"), 0);
    assert_eq!(phase_vm(&soft, 1, "child", "pgmajfault"), 0);
    // The traps cost time.
    let t = |r: &mmsim_sim::output::RunResult| r.tasks[1].end_ns - r.tasks[1].start_ns;
    assert!(t(&soft) > t(&hard));
}

fn computing_on(topology: &str, tasks: u32) -> Vec<f64> {
    ends_s(&run_checked(&format!(
        r#"
[machine]
memory = "256M"
{topology}
[task.cc]
instances = {tasks}
steps = [{{ op = "compute", duration = "1s" }}]
"#
    )))
}

/// Two SMT threads of one core share its throughput: busy together, each
/// runs at `smt_throughput` / 2 of a lone thread's speed (1.30 / 2 in the
/// reference values), so a second of work takes 1 / 0.65 s; alone, or on
/// two cores, a second.
#[test]
fn smt_siblings_share_their_core() {
    let one_core = "cpus = 2\nthreads_per_core = 2";
    let want = 2.0 / 1.3;
    for end in computing_on(one_core, 2) {
        assert!((end - want).abs() < 1e-3, "{end} against {want}");
    }
    assert!((computing_on(one_core, 1)[0] - 1.0).abs() < 1e-6);
    // Two cores of two threads: the second task takes the idle core, not
    // the busy one's sibling.
    for end in computing_on("cores_per_socket = 2\nthreads_per_core = 2", 2) {
        assert!((end - 1.0).abs() < 1e-6, "{end}");
    }
    // Four tasks on them: every core's two threads busy.
    for end in computing_on("cores_per_socket = 2\nthreads_per_core = 2", 4) {
        assert!((end - want).abs() < 1e-3, "{end} against {want}");
    }
}

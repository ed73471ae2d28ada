//! Specs that validate but ask for more than the simulator holds get a
//! clear error, never a panic.

mod common;
use common::*;
use mmsim_sim::SimError;

#[test]
fn too_many_cpus_for_the_memory_is_refused() {
    let text = "[machine]\nmemory = \"64M\"\ncpus = 512\n[task.t]\nsteps = [ { op = \"sleep\", duration = \"1ms\" } ]\n";
    match try_run(text) {
        Err(SimError::Spec(m)) => assert!(m.contains("leaves no memory"), "{m}"),
        other => panic!("expected a spec error, got {other:?}"),
    }
}

#[test]
fn more_swap_devices_than_the_kernel_takes_are_refused() {
    let mut text = String::from("[machine]\nmemory = \"512M\"\n");
    for _ in 0..30 {
        text += "[[swap]]\ndevice = \"zram\"\nsize = \"8K\"\n";
    }
    text += "[task.t]\nsteps = [ { op = \"sleep\", duration = \"1ms\" } ]\n";
    match try_run(&text) {
        Err(SimError::Spec(m)) => assert!(m.contains("swap devices"), "{m}"),
        other => panic!("expected a spec error, got {other:?}"),
    }
}

#[test]
fn a_huge_mapping_is_refused_not_allocated() {
    let text = "[machine]\nmemory = \"512M\"\n[task.t]\nsteps = [ { op = \"mmap\", name = \"a\", kind = \"anon\", size = \"20T\" } ]\n";
    assert!(matches!(try_run(text), Err(SimError::Unmodelled(_))));
}

#[test]
fn the_longest_sleep_does_not_overflow_the_clock() {
    let r = run_checked(
        "[machine]\nmemory = \"512M\"\n[task.t]\nsteps = [ { op = \"sleep\", duration = \"18446744073709551615ns\" } ]\n",
    );
    assert_eq!(r.tasks[0].end_ns, u64::MAX);
}

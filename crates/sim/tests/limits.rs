//! Specs that validate but ask for more than the simulator holds get a
//! clear error, never a panic.

mod common;
use common::*;
use mmsim_sim::SimError;

#[test]
fn too_many_cpus_for_the_memory_is_refused() {
    let text = "[machine]\nmemory = \"64M\"\ncpus = 512\n[task.t]\nsteps = [ { op = \"sleep\", duration = \"1ms\" } ]\n";
    match try_run(text) {
        Err(e @ SimError::At { .. }) => {
            let SimError::At { line, ref key, .. } = e else {
                unreachable!()
            };
            assert_eq!((line, key.as_str()), (2, "machine.memory"));
            let m = e.to_string();
            assert!(m.contains("found 64 MiB") && m.contains("512 CPUs"), "{m}");
            assert_eq!(e.exit_code(), 2);
        }
        other => panic!("expected a spec error at machine.memory, got {other:?}"),
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

const TMPFS_TASK: &str = "[task.t]\nsteps = [\n  { op = \"mmap\", name = \"m\", kind = \"shmem\", file = \"f\", size = \"4M\" },\n  { op = \"touch\", region = \"m\", write = 1.0 },\n]\n";

/// A huge-capable shmem object must be whole 2 MiB blocks (6.1 may give
/// its last block a folio reaching past i_size, which mmsim does not
/// hold); the same sizes run when nothing can be huge.
#[test]
fn huge_capable_shmem_of_odd_size_is_refused() {
    let task = TMPFS_TASK.replace("4M", "3M");
    for huge in ["always", "within_size", "advise"] {
        let text = format!(
            "[machine]\nmemory = \"512M\"\n[[file]]\nname = \"f\"\nsize = \"3M\"\non = \"tmpfs\"\nhuge = \"{huge}\"\n{task}"
        );
        match try_run(&text) {
            Err(SimError::Unmodelled(m)) => {
                assert!(
                    m.contains("file f: a huge-capable tmpfs file of 3072 KiB"),
                    "{m}"
                )
            }
            other => panic!("huge = {huge}: expected Unmodelled, got {other:?}"),
        }
    }
    let anon = "[task.t]\nsteps = [\n  { op = \"mmap\", name = \"m\", kind = \"shared_anon\", size = \"3M\" },\n  { op = \"touch\", region = \"m\", write = 1.0 },\n]\n";
    for w in ["always", "within_size", "advise", "force"] {
        let text = format!(
            "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/transparent_hugepage/shmem_enabled\" = \"{w}\"\n{anon}"
        );
        match try_run(&text) {
            Err(SimError::Unmodelled(m)) => {
                assert!(m.contains(&format!("shmem_enabled \"{w}\"")), "{m}")
            }
            other => panic!("shmem_enabled = {w}: expected Unmodelled, got {other:?}"),
        }
    }
    for w in ["never", "deny"] {
        let text = format!(
            "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/transparent_hugepage/shmem_enabled\" = \"{w}\"\n{anon}"
        );
        run_checked(&text);
    }
}

#[test]
fn huge_never_and_shmem_enabled_never_or_deny_still_run() {
    let text = format!(
        "[machine]\nmemory = \"512M\"\n[[file]]\nname = \"f\"\nsize = \"4M\"\non = \"tmpfs\"\nhuge = \"never\"\n{TMPFS_TASK}"
    );
    let r = run_checked(&text);
    assert_eq!(r.knobs["file:f"], "tmpfs 4194304 huge=never");
    assert_eq!(
        r.knobs["sysfs:kernel/mm/transparent_hugepage/shmem_enabled"],
        "never"
    );
    assert_eq!(r.vmstat["nr_shmem"], 1024);
    for w in ["never", "deny"] {
        let text = format!(
            "[machine]\nmemory = \"512M\"\n[sysfs]\n\"kernel/mm/transparent_hugepage/shmem_enabled\" = \"{w}\"\n[[file]]\nname = \"f\"\nsize = \"4M\"\non = \"tmpfs\"\n{TMPFS_TASK}"
        );
        let r = run_checked(&text);
        assert_eq!(
            r.knobs["sysfs:kernel/mm/transparent_hugepage/shmem_enabled"],
            w
        );
    }
}

/// The host-memory refusal names its part at its line, and says no line
/// (never "line 0") for a value `--set` gave.
#[test]
fn the_host_memory_refusal_names_the_key_and_its_line_or_none() {
    let text = "[machine]\nmemory = \"8G\"\n[task.a]\nsteps = [\n{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"4K\" },\n{ op = \"touch\", region = \"h\", count = 3000000 },\n]\n";
    let opts = || mmsim_sim::RunOptions {
        max_host_bytes: Some(1 << 20),
        ..Default::default()
    };
    let s = spec(text);
    let e = mmsim_sim::check_work(&s, &opts()).expect_err("over 1 MiB");
    assert!(
        e.to_string().starts_with(
            "line 2: key `machine.memory`: found a spec whose tables would take 80 MiB"
        ),
        "{e}"
    );
    let set = mmsim_spec::parse_str(text, "t.toml", &["machine.memory=\"9G\"".to_string()])
        .expect("spec");
    let e = mmsim_sim::check_work(&set, &opts()).expect_err("over 1 MiB");
    assert!(
        e.to_string()
            .starts_with("key `machine.memory`: found a spec whose tables"),
        "{e}"
    );
}

//! memory.reclaim as a step (`memory_reclaim`): what it frees, when it
//! gives up, and what each preset accepts.

mod common;
use common::{run_checked, spec, try_run};
use mmsim_sim::output::RunResult;
use mmsim_sim::SimError;

/// A cgroup holding 48 MiB of anon and 32 MiB of a file's page cache
/// (read from disk), no limit, zram swap; then `step`, then a phase that
/// does nothing, so the step's effect is read at the phase's start.
fn cold(kernel: &str, step: &str) -> RunResult {
    run_checked(&cold_text(kernel, step))
}

fn cold_text(kernel: &str, step: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
kernel = "{kernel}"
[[swap]]
device = "zram"
size = "256M"
[[disk]]
name = "d"
device = "virtio"
size = "64M"
[[file]]
name = "f"
size = "32M"
on = "d"
[cgroup.w]
[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "48M" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
  {{ op = "read", file = "f" }},
  {{ op = "phase", name = "reclaim" }},
  {step}
  {{ op = "phase", name = "after" }},
]
"#
    )
}

fn phase_vm(r: &RunResult, name: &str, counter: &str) -> i64 {
    let p = r.tasks[0]
        .phases
        .iter()
        .find(|p| p.name == name)
        .expect("phase");
    p.vmstat.get(counter).copied().unwrap_or(0)
}

/// 6.1 asks reclaim for everything left until it has it: 32 MiB asked,
/// at least 8,192 pages freed (reclaim may overshoot by a batch), the
/// anon part swapped out, and the cgroup's charge down by as much.
#[test]
fn a_reclaim_step_frees_what_it_asks_for() {
    let before = cold("6.1", "");
    let r = cold(
        "6.1",
        r#"{ op = "reclaim", cgroup = "w", amount = "32M" },"#,
    );
    let freed =
        phase_vm(&r, "reclaim", "pgsteal_direct") + phase_vm(&r, "reclaim", "pgsteal_kswapd");
    // Proactive reclaim is cgroup reclaim: counted in memory.stat, not
    // in /proc/vmstat's pgsteal (as memory.max reclaim).
    assert_eq!(freed, 0);
    let stat = |r: &RunResult, k: &str| r.cgroups["w"].memory_stat[k];
    let stolen = stat(&r, "pgsteal") - stat(&before, "pgsteal");
    assert!((8192..8192 + 1024).contains(&stolen), "{stolen}");
    let current = |r: &RunResult| r.cgroups["w"].memory_current as i64;
    let dropped = (current(&before) - current(&r)) / 4096;
    assert!(dropped >= 8192 - 64, "{dropped}");
    // Nothing hit a limit; no memory stall (memory.reclaim enters none).
    assert_eq!(r.cgroups["w"].memory_events["max"], 0);
    let p = r.tasks[0].phases[0].pressure.unwrap();
    assert_eq!(p.memory.some.total_us, 0);
}

/// Without swap and with only anon left after the file's pages go, the
/// write gives up after 16 rounds that reclaim nothing (EAGAIN): the steps
/// go on.
#[test]
fn a_reclaim_that_cannot_be_met_gives_up_and_the_steps_go_on() {
    let text = cold_text(
        "6.1",
        r#"{ op = "reclaim", cgroup = "w", amount = "256M" },"#,
    )
    .replace("[[swap]]\ndevice = \"zram\"\nsize = \"256M\"\n", "");
    let r = run_checked(&text);
    assert_eq!(r.tasks[0].phases.len(), 2);
    // All of the file's 8,192 pages went, none of the anon.
    assert_eq!(r.cgroups["w"].memory_stat["file"], 0);
    assert_eq!(r.cgroups["w"].memory_stat["anon"], 48 << 20);
}

/// 6.12 asks for a quarter of what is left each round and takes
/// swappiness=. Asked for 40 MiB of a cgroup with 32 MiB of page cache,
/// reclaim trims the cache first either way (cache_trim_mode: plenty of
/// inactive file); then swappiness=0 lets cgroup reclaim take no anon
/// (SCAN_FILE) and the write gives up, while 200 swaps the rest out.
#[test]
fn on_6_12_swappiness_chooses_what_goes() {
    let step = |s: u32| {
        format!(r#"{{ op = "reclaim", cgroup = "w", amount = "40M", swappiness = {s} }},"#)
    };
    let none = cold("6.12", &step(0));
    assert_eq!(phase_vm(&none, "reclaim", "pswpout"), 0);
    assert_eq!(none.cgroups["w"].memory_stat["file"], 0);
    let anon = cold("6.12", &step(200));
    assert!(phase_vm(&anon, "reclaim", "pswpout") >= 2048 - 32);
}

/// 5.10 has no memory.reclaim, 6.1 no swappiness=: both refused (exit 2),
/// naming the step.
#[test]
fn presets_without_the_file_or_the_argument_refuse_the_step() {
    let s = spec(&cold_text(
        "5.10",
        r#"{ op = "reclaim", cgroup = "w", amount = "16M" },"#,
    ));
    let err = mmsim_sim::run(&s, Default::default()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string().contains("memory.reclaim came in 5.19"),
        "{err}"
    );
    let err = try_run(&cold_text(
        "6.1",
        r#"{ op = "reclaim", cgroup = "w", amount = "16M", swappiness = 0 },"#,
    ))
    .unwrap_err();
    assert!(matches!(err, SimError::At { .. }), "{err:?}");
    assert!(err.to_string().contains("found swappiness"), "{err}");
}

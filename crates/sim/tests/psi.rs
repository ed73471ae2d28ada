//! Pressure stall information (sched/psi.rs): which waits count as which
//! stall, per cgroup and for the machine, derived from psi.c's rules.

mod common;
use common::run_checked;
use mmsim_sim::output::{Pressure, RunResult};

/// 64 MiB written then read back under memory.max = 32M, swap `device`.
fn thrash(device: &str, extra: &str) -> RunResult {
    run_checked(&format!(
        r#"
[machine]
memory = "512M"
cpus = 2
[[swap]]
device = "{device}"
size = "256M"
[cgroup.w]
memory_max = "32M"
{extra}
[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "64M" }},
  {{ op = "phase", name = "write" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
  {{ op = "phase", name = "read" }},
  {{ op = "touch", region = "heap", write = 0.0 }},
  {{ op = "phase", name = "reread" }},
  {{ op = "touch", region = "heap", write = 0.0 }},
]
"#
    ))
}

fn machine(r: &RunResult) -> Pressure {
    r.pressure.expect("mmsim reads /proc/pressure")
}

/// A lone task thrashing its memcg on zram: reclaim and refaults are
/// memory stalls, and with nothing else runnable every stall is full; the
/// zram reads are synchronous, so nothing waits on I/O. The cgroup holds
/// the only task that stalls: its memory.pressure is the machine's.
#[test]
fn a_lone_thrashing_task_is_some_and_full_on_memory_and_never_on_io() {
    let r = thrash("zram", "");
    let p = machine(&r);
    let m = p.memory;
    assert!(m.some.total_us > 0);
    assert_eq!(m.some.total_us, m.full.total_us);
    assert!(m.some.total_us * 1000 < r.elapsed_ns);
    assert_eq!(p.io.some.total_us, 0);
    assert_eq!(p.cpu.some.total_us, 0);
    let cg = r.cgroups["w"].memory_pressure.expect("cgroup pressure");
    assert_eq!(cg.some.total_us, m.some.total_us);
    // Each phase's stall is its share of the run's: the read phases
    // refault workingset pages on top of reclaiming.
    let phases: u64 = r.tasks[0]
        .phases
        .iter()
        .map(|ph| ph.pressure.expect("phase pressure").memory.some.total_us)
        .sum();
    assert!(phases <= m.some.total_us && phases + 1_000 >= m.some.total_us);
    for ph in &r.tasks[0].phases {
        assert!(ph.pressure.unwrap().memory.some.total_us > 0, "{}", ph.name);
    }
}

/// Swap-in from a block device is a sleep on the folio's read: an I/O
/// stall (full: the task is the only one), and for a workingset folio a
/// memory stall too.
#[test]
fn a_block_device_swap_in_is_an_io_stall() {
    let r = thrash("nvme", "");
    let p = machine(&r);
    assert!(p.io.some.total_us > 0);
    assert_eq!(p.io.some.total_us, p.io.full.total_us);
    assert!(p.memory.some.total_us > 0);
}

/// Without a limit or swap nothing stalls.
#[test]
fn no_pressure_no_stall() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "16M" },
  { op = "touch", region = "heap", write = 1.0 },
]
"#,
    );
    assert_eq!(machine(&r), {
        let mut z = machine(&r);
        z.memory = Default::default();
        z.io = Default::default();
        z.cpu = Default::default();
        z
    });
}

/// Two tasks computing on one CPU: one always waits for it (cpu some over
/// the whole overlap); in their cgroup one is always on the CPU, so cpu
/// full stays zero; the machine's cpu full is zeros by definition.
#[test]
fn runnable_tasks_waiting_for_the_cpu_are_cpu_some() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
cpus = 1
[cgroup.w]
[task.a]
cgroup = "w"
steps = [ { op = "compute", duration = "200ms" } ]
[task.b]
cgroup = "w"
steps = [ { op = "compute", duration = "200ms" } ]
"#,
    );
    let p = machine(&r);
    let some = p.cpu.some.total_us;
    // Both run 200 ms on one CPU: 400 ms, all but the last task's tail
    // (one slice at most) with the other waiting.
    assert!((380_000..=400_000).contains(&some), "{some}");
    assert_eq!(p.cpu.full.total_us, 0);
    let cg = r.cgroups["w"].cpu_pressure.unwrap();
    assert_eq!(cg.some.total_us, some);
    assert_eq!(cg.full.total_us, 0);
    assert_eq!(p.memory.some.total_us, 0);
}

/// memory.high's throttling sleep is a memory stall until the task runs
/// again. Without swap reclaim cannot keep 40 MiB of anon under a 32M
/// memory.high, so the task sleeps for most of the run: every sleep is
/// stalled (full: the task is all the group has), and the averages see
/// a mostly stalled last 10 s.
#[test]
fn memory_high_throttling_is_a_memory_stall() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
[cgroup.w]
memory_high = "32M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "40M" },
  { op = "touch", region = "heap", write = 1.0 },
]
"#,
    );
    let m = machine(&r).memory;
    assert_eq!(m.some, m.full);
    assert!(r.cgroups["w"].memory_events["high"] > 0);
    // The run's time nobody spent on a CPU (the profile adds up what
    // was) is its throttling sleeps: all stalled.
    let busy: u64 = r.profile.values().sum();
    let asleep = r.elapsed_ns - busy;
    assert!(asleep > 1_000_000_000, "{asleep}");
    assert!(m.some.total_us * 1000 >= asleep, "{m:?} {asleep}");
    assert!(m.some.total_us * 1000 <= r.elapsed_ns);
    assert!(m.some.avg10 > 50.0 && m.some.avg10 >= m.some.avg60, "{m:?}");
    assert!(
        m.some.avg60 >= m.some.avg300 && m.some.avg300 > 0.0,
        "{m:?}"
    );
}

/// The same spec gives the same pressure, to the microsecond.
#[test]
fn pressure_is_deterministic() {
    let a = thrash("zram", "");
    let b = thrash("zram", "");
    assert_eq!(a.pressure, b.pressure);
    assert_eq!(
        a.cgroups["w"].memory_pressure,
        b.cgroups["w"].memory_pressure
    );
}

/// A task on `kernel`'s preset with 256 MiB of zram, in a cgroup
/// holding `cgroup` (empty: the root), running `steps`.
fn on_kernel(kernel: &str, cgroup: &str, steps: &str) -> RunResult {
    let (table, join) = if cgroup.is_empty() {
        (String::new(), "")
    } else {
        (format!("[cgroup.w]\n{cgroup}\n"), "cgroup = \"w\"\n")
    };
    run_checked(&format!(
        r#"
[machine]
kernel = "{kernel}"
memory = "512M"
[[swap]]
device = "zram"
size = "256M"
{table}[task.main]
{join}steps = [
{steps}
]
"#
    ))
}

/// 5.10's rules on the same lone thrashing task: the task reclaims and
/// swaps in while counted as running, so 5.10's test_state never finds
/// memory full (it wants no runnable task); only the scheduler ticks
/// that find it stalled record full, from each stall's start to its last
/// tick. Full is then above 0 and short of some, where 6.1's equals it;
/// and 5.10 has no cpu full.
#[test]
fn v5_10_samples_full_at_ticks_and_has_no_cpu_full() {
    let thrash = |kernel: &str| {
        let steps = r#"{ op = "mmap", name = "heap", kind = "anon", size = "64M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "touch", region = "heap", write = 0.0 },"#;
        machine(&on_kernel(kernel, "memory_max = \"32M\"", steps))
    };
    let p = thrash("5.10");
    let m = p.memory;
    assert!(m.full.total_us > 0);
    assert!(m.full.total_us < m.some.total_us, "{m:?}");
    assert_eq!(p.cpu.full.total_us, 0);
    let p = thrash("6.1");
    assert_eq!(p.memory.full.total_us, p.memory.some.total_us);
}

/// A swap read of a page that was never active is no memory stall on 6.1
/// (swap_readpage's `if (workingset)`), and is one on 5.10, which counts
/// every swap read's submission: MADV_PAGEOUT of 16 MiB, read back.
#[test]
fn v5_10_counts_every_swap_read_as_a_memory_stall() {
    let steps = r#"{ op = "mmap", name = "heap", kind = "anon", size = "16M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "madvise", region = "heap", advice = "pageout" },
  { op = "touch", region = "heap", write = 0.0 },"#;
    let new = on_kernel("6.1", "", steps);
    assert_eq!(new.vmstat["pswpin"], 4096);
    assert_eq!(machine(&new).memory.some.total_us, 0);
    let old = on_kernel("5.10", "", steps);
    assert_eq!(old.vmstat["pswpin"], 4096);
    assert!(machine(&old).memory.some.total_us > 0);
}

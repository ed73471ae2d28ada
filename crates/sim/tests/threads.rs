//! Threads: tasks that share their creator's mm, regions and cgroup
//! (clone with CLONE_VM), the creator's wait joining them, and mm_cpumask
//! following the CPUs the mm is loaded on (the invariant checker holds it
//! to each CPU's loaded mm at every phase mark and after the run).

mod common;
use common::*;

fn two_cpus(steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
cpus = 2
[task.main]
steps = [
  {{ op = "mmap", name = "buf", kind = "anon", size = "8M" }},
  {steps}
]
"#
    )
}

#[test]
fn two_threads_write_and_dontneed_their_own_halves() {
    // Each half is 1024 pages; every pass write-faults each page once
    // (MADV_DONTNEED left it unmapped), 8 passes per half, then the
    // creator reads the whole region (1024 + 1024 zero-page faults after
    // the last DONTNEED), and the thread's own 256-page region is written
    // once.
    let r = run_checked(&two_cpus(
        r#"{ op = "phase", name = "loops" },
  { op = "thread", steps = [
      { op = "repeat", times = 8, steps = [
        { op = "touch", region = "buf", length = "4M", write = 1.0 },
        { op = "madvise", region = "buf", advice = "dontneed", length = "4M" },
      ] },
      { op = "mmap", name = "own", kind = "anon", size = "1M" },
      { op = "touch", region = "own", write = 1.0 },
  ] },
  { op = "repeat", times = 8, steps = [
    { op = "touch", region = "buf", offset = "4M", write = 1.0 },
    { op = "madvise", region = "buf", advice = "dontneed", offset = "4M" },
  ] },
  { op = "wait" },
  { op = "phase", name = "read" },
  { op = "touch", region = "buf" },"#,
    ));
    let names: Vec<&str> = r.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["main", "main/thread0"]);
    assert_eq!(vm(&r, "pgfault"), 8 * 2048 + 256 + 2048);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 2048);
    // One address space: nothing is copied.
    assert_eq!(vm(&r, "pgreuse"), 0);
    // The two loops ran side by side on the two CPUs: the thread started
    // as its creator's loop did and ended before the creator's did alone
    // twice over.
    let (main, thread) = (&r.tasks[0], &r.tasks[1]);
    let creator_loop = r.tasks[0].phases[0].end_ns - r.tasks[0].phases[0].start_ns;
    assert!(thread.start_ns < main.phases[0].start_ns + creator_loop / 10);
    assert!(thread.end_ns - thread.start_ns < creator_loop * 3 / 2);
}

#[test]
fn a_threads_writes_land_in_its_creators_pages() {
    // The creator writes 512 pages; its thread writes them again through
    // the same PTEs (no copy-on-write, no fault) and the creator reads the
    // thread's data back: 512 faults in all; each read checks the token
    // the thread wrote (a copy would leave the creator the old ones).
    let r = run_checked(&two_cpus(
        r#"{ op = "touch", region = "buf", length = "2M", write = 1.0 },
  { op = "thread", steps = [ { op = "touch", region = "buf", length = "2M", write = 1.0 } ] },
  { op = "wait" },
  { op = "touch", region = "buf", length = "2M" },"#,
    ));
    assert_eq!(vm(&r, "pgfault"), 512);
    assert_eq!(vm(&r, "pgreuse"), 0);
    assert_eq!(r.integrity.pages_checked, 512);
}

#[test]
fn a_fork_after_threads_copies_the_whole_address_space() {
    // A thread maps its own region and exits; the process forks: the
    // child's copy holds both mappings, so the child's write of the
    // shared region copies each page (the thread's region stays mapped
    // in the process until it exits, then goes with it).
    let r = run_checked(&two_cpus(
        r#"{ op = "touch", region = "buf", length = "1M", write = 1.0 },
  { op = "thread", steps = [
      { op = "mmap", name = "own", kind = "anon", size = "1M" },
      { op = "touch", region = "own", write = 1.0 },
      { op = "thread", steps = [ { op = "touch", region = "own" } ] },
  ] },
  { op = "wait" },
  { op = "fork", steps = [ { op = "touch", region = "buf", length = "1M", write = 1.0 } ] },
  { op = "wait" },"#,
    ));
    let names: Vec<&str> = r.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["main", "main/thread0", "main/thread0/thread0", "main/fork0"]
    );
    // 256 + 256 first writes; the child's 256 writes copy (the parent
    // still maps every page).
    assert_eq!(vm(&r, "pgfault"), 3 * 256);
    assert_eq!(vm(&r, "pgreuse"), 0);
}

#[test]
fn threads_run_the_same_twice() {
    let s = two_cpus(
        r#"{ op = "thread", steps = [ { op = "touch", region = "buf", order = "zipf", count = 20000, write = 0.5, seed = 3 } ] },
  { op = "thread", steps = [ { op = "touch", region = "buf", order = "uniform", count = 20000, write = 0.5, seed = 4 } ] },
  { op = "touch", region = "buf", order = "shuffle", write = 0.5 },
  { op = "wait" },"#,
    );
    let (a, b) = (run_checked(&s), run_checked(&s));
    assert_eq!(
        serde_json::to_string(&a.vmstat).unwrap(),
        serde_json::to_string(&b.vmstat).unwrap()
    );
    let ends =
        |r: &mmsim_spec::output::RunResult| r.tasks.iter().map(|t| t.end_ns).collect::<Vec<_>>();
    assert_eq!(ends(&a), ends(&b));
}

/// A thread that computes (or sleeps) while its creator writes and
/// MADV_DONTNEEDs `size` `passes` times; the TLB-shootdown IPIs counted.
fn shootdowns(thread: &str, size: &str, passes: u32) -> u64 {
    let r = run_checked(&dontneed_beside(thread, size, passes));
    r.interrupts.get("TLB").copied().unwrap_or(0)
}

fn dontneed_beside(thread: &str, size: &str, passes: u32) -> String {
    format!(
        r#"
[machine]
memory = "512M"
cpus = 2
[task.main]
steps = [
  {{ op = "mmap", name = "buf", kind = "anon", size = "{size}" }},
  {{ op = "thread", steps = [ {{ op = "{thread}", duration = "2s" }} ] }},
  {{ op = "repeat", times = {passes}, steps = [
    {{ op = "touch", region = "buf", write = 1.0 }},
    {{ op = "madvise", region = "buf", advice = "dontneed" }},
  ] }},
  {{ op = "wait" }},
]
"#
    )
}

#[test]
fn a_zap_interrupts_the_other_cpu_only_while_it_runs_the_mm() {
    // Each MADV_DONTNEED of 1024 pages flushes once, an IPI to the CPU
    // running the computing thread; the exit's unmap frees page tables,
    // one more IPI to that CPU, idle by then (lazy TLB) but still holding
    // the mm.
    assert_eq!(shootdowns("compute", "4M", 3), 3 + 1);
    // A sleeping thread's CPU is idle, lazy: the zaps skip it (it flushes
    // at its next switch); only the freed tables reach it.
    assert_eq!(shootdowns("sleep", "4M", 3), 1);
}

#[test]
fn a_shootdown_costs_its_sender_a_round_trip_and_a_busy_receiver_its_handler() {
    use mmsim_sim::cost_model::{IPI_HANDLER_NS, IPI_NS};
    let r = run_checked(&dontneed_beside("compute", "4M", 3));
    assert_eq!(r.interrupts["TLB"], 4);
    // Every flush that sent an IPI waited for it.
    assert_eq!(r.profile["native_flush_tlb_multi"], 4 * IPI_NS);
    // The three zaps interrupted the computing thread; the exit's IPI
    // found its CPU idle.
    assert_eq!(r.profile["flush_tlb_func"], 3 * IPI_HANDLER_NS);
}

#[test]
fn a_large_zap_flushes_each_time_its_gather_fills() {
    // 12,288 pages overflow one mmu_gather (9,698 pages): two flushes per
    // MADV_DONTNEED.
    assert_eq!(shootdowns("compute", "48M", 2), 2 * 2 + 1);
}

#[test]
fn one_cpu_takes_no_shootdowns() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "buf", kind = "anon", size = "4M" },
  { op = "thread", steps = [ { op = "touch", region = "buf", write = 1.0 } ] },
  { op = "madvise", region = "buf", advice = "dontneed" },
  { op = "wait" },
]
"#,
    );
    assert!(r.interrupts.is_empty(), "{:?}", r.interrupts);
}

#[test]
fn reclaim_flushes_before_each_dirty_page_is_written_out() {
    // The creator pages out 1,024 pages it wrote while its thread computes
    // on the other CPU: reclaim defers each unmap's flush, but a dirty
    // PTE makes it due before the page's write-out
    // (try_to_unmap_flush_dirty): one IPI per page; then the madvise
    // walk's own flush and the exit's unmap.
    let r = run_checked(
        r#"
[machine]
memory = "512M"
cpus = 2
[[swap]]
device = "zram"
size = "64M"
[task.main]
steps = [
  { op = "mmap", name = "buf", kind = "anon", size = "4M" },
  { op = "thread", steps = [ { op = "compute", duration = "2s" } ] },
  { op = "touch", region = "buf", write = 1.0 },
  { op = "madvise", region = "buf", advice = "pageout" },
  { op = "wait" },
]
"#,
    );
    assert_eq!(vm(&r, "pswpout"), 1024);
    assert_eq!(r.interrupts["TLB"], 1024 + 1 + 1);
}

/// A thread read-faulting a fresh 64 MiB region while its creator runs
/// `op` (the creator's 8 MiB are resident): the thread's `read` phase
/// and the creator's `op` phase, ns.
fn reader_beside(op: &str, kernel: &str) -> (u64, u64) {
    let spec = two_cpus(&format!(
        r#"{{ op = "touch", region = "buf", write = 1.0 }},
  {{ op = "mmap", name = "rd", kind = "anon", size = "64M" }},
  {{ op = "thread", steps = [ {{ op = "phase", name = "read" }}, {{ op = "touch", region = "rd" }} ] }},
  {{ op = "phase", name = "op" }},
  {op}
  {{ op = "phase", name = "wait" }},
  {{ op = "wait" }},"#
    ))
    .replace("cpus = 2", &format!("cpus = 2\nkernel = \"{kernel}\""));
    let r = run_checked(&spec);
    let len = |t: usize, name: &str| {
        let p = r.tasks[t].phases.iter().find(|p| p.name == name).unwrap();
        p.end_ns - p.start_ns
    };
    (len(1, "read"), len(0, "op"))
}

#[test]
fn a_thread_faulting_while_its_process_forks_waits_out_the_copy() {
    // dup_mmap holds mmap_lock for writing while it copies the page
    // tables; the thread's faults in that time sleep until it is done.
    // What the fork does before (copy_process: its fixed cost and the
    // syscall) does not hold it.
    let (alone, _) = reader_beside("", "6.1");
    let (beside, fork) = reader_beside(r#"{ op = "fork", steps = [] },"#, "6.1");
    let held = fork - mmsim_sim::cost_model::FORK_NS - mmsim_sim::cost_model::SYSCALL_NS;
    let waited = beside - alone;
    // Within a scheduler quantum and a TLB-flush IPI's handler.
    assert!(
        waited.abs_diff(held) <= 10_000 + mmsim_sim::cost_model::IPI_HANDLER_NS,
        "waited {waited} ns, held {held} ns"
    );
    // 6.4's per-VMA locks: fork still write-locks every VMA.
    let (alone, _) = reader_beside("", "6.12");
    let (beside, _) = reader_beside(r#"{ op = "fork", steps = [] },"#, "6.12");
    assert!(beside - alone >= held * 9 / 10, "{beside} {alone}");
}

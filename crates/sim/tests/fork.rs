//! fork: copy-on-write sharing of anon pages and swap entries, the reuse
//! decision after the other process is gone, content integrity in parent
//! and child, and exit freeing everything (the invariant checker runs at
//! every phase mark and after the run).

mod common;
use common::*;

fn no_swap(features: &str, child: &str, after: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
{features}
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "4M" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
  {{ op = "phase", name = "fork" }},
  {{ op = "fork", steps = [ {child} ] }},
  {{ op = "wait" }},
  {{ op = "phase", name = "after" }},
  {after}
]
"#
    )
}

#[test]
fn child_writes_copy_and_parent_reuses_after_exit() {
    let r = run_checked(&no_swap(
        "",
        r#"{ op = "touch", region = "heap" }, { op = "touch", region = "heap", write = 1.0 }"#,
        r#"{ op = "touch", region = "heap" }, { op = "touch", region = "heap", write = 1.0 }"#,
    ));
    assert_eq!(r.tasks.len(), 2);
    assert_eq!(r.tasks[1].name, "main/fork0");
    // The child's reads hit its copied, write-protected PTEs; each write
    // copies the page (mapcount 2).
    assert_eq!(phase_vm(&r, 0, "fork", "pgfault"), 1024);
    assert_eq!(phase_vm(&r, 0, "fork", "pgreuse"), 0);
    // The child is gone: the parent's pages have one reference again,
    // and each write fault on its write-protected PTE reuses the page.
    assert_eq!(phase_vm(&r, 0, "after", "pgfault"), 1024);
    assert_eq!(phase_vm(&r, 0, "after", "pgreuse"), 1024);
    // Reads in both processes saw the right contents (the child the
    // parent's data, the parent its own data after the child wrote).
    assert_eq!(r.integrity.pages_checked, 2 * 1024);
}

#[test]
fn parent_writes_while_child_lives_copy_too() {
    let r = run_checked(&no_swap(
        "",
        r#"{ op = "sleep", duration = "10ms" }, { op = "touch", region = "heap" }"#,
        r#"{ op = "touch", region = "heap" }"#,
    ));
    // The child only reads: no faults. Nothing written after the fork.
    assert_eq!(phase_vm(&r, 0, "fork", "pgfault"), 0);
    let s = no_swap(
        "",
        r#"{ op = "sleep", duration = "100ms" }, { op = "touch", region = "heap" }"#,
        r#"{ op = "touch", region = "heap" }"#,
    )
    .replace(
        r#"{ op = "wait" },"#,
        r#"{ op = "touch", region = "heap", write = 1.0 }, { op = "wait" },"#,
    );
    let r = run_checked(&s);
    // The parent writes while the child still maps every page: copies;
    // the child then reads the old contents (checked).
    assert_eq!(phase_vm(&r, 0, "fork", "pgfault"), 1024);
    assert_eq!(phase_vm(&r, 0, "fork", "pgreuse"), 0);
    assert_eq!(r.integrity.violations, 0);
}

#[test]
fn fork_under_memcg_pressure_shares_swap_entries() {
    let text = memcg_spec(
        "24M",
        "",
        r#"
  { op = "mmap", name = "heap", kind = "anon", size = "32M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "phase", name = "fork" },
  { op = "fork", steps = [
      { op = "touch", region = "heap" },
      { op = "touch", region = "heap", write = 1.0, length = "16M" },
  ] },
  { op = "touch", region = "heap", write = 1.0, offset = "16M" },
  { op = "wait" },
  { op = "phase", name = "after" },
  { op = "touch", region = "heap" },
"#,
    );
    let r = run_checked(&text);
    // Swap entries copied at fork have two users, so zram's
    // skip-swapcache path is not taken for them: swap-in goes through
    // the swap cache with readahead.
    assert!(phase_vm(&r, 0, "fork", "swap_ra") > 0);
    assert!(phase_vm(&r, 0, "fork", "pswpin") > 0);
    assert_eq!(r.integrity.violations, 0);
    // COW copies are charged like any page: the limit holds.
    assert!(r.cgroups["w"].memory_peak.unwrap() <= 24 << 20);
}

#[test]
fn nested_forks_report_depth_first() {
    let r = run_checked(&no_swap(
        "",
        r#"{ op = "fork", steps = [ { op = "touch", region = "heap" } ] }, { op = "touch", region = "heap", write = 1.0 }"#,
        r#"{ op = "touch", region = "heap" }"#,
    ));
    let names: Vec<&str> = r.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["main", "main/fork0", "main/fork0/fork0"]);
}

#[test]
fn wp_reuse_swapcache_off_copies_the_same_pages_here() {
    // Without swap in the picture the 5.10 rule (refcount and mapcount 1)
    // and 6.1's agree.
    let r = run_checked(&no_swap(
        "[features]\nwp_reuse_swapcache = false",
        r#"{ op = "touch", region = "heap", write = 1.0 }"#,
        r#"{ op = "touch", region = "heap", write = 1.0 }"#,
    ));
    assert_eq!(phase_vm(&r, 0, "fork", "pgfault"), 1024);
    assert_eq!(phase_vm(&r, 0, "after", "pgreuse"), 1024);
}

#[test]
fn kvstore_server_data_survives_between_steps_and_reads_check() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "256M"
[cgroup.w]
memory_max = "16M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "ram", kind = "anon", size = "40M" },
  { op = "phase", name = "load" },
  { op = "kvstore", region = "ram", keys = 10000, value_size = "2K", requests = 30000, ratio = "1:0", pipeline = 16, seed = 1 },
  { op = "phase", name = "bench" },
  { op = "kvstore", region = "ram", keys = 10000, value_size = "2K", requests = 22000, ratio = "1:10", pipeline = 16, seed = 2 },
]
"#,
    );
    let load = r.tasks[0].phases[0].kv.unwrap();
    assert_eq!((load.requests, load.sets, load.gets), (30000, 30000, 0));
    let bench = r.tasks[0].phases[1].kv.unwrap();
    assert_eq!((bench.sets, bench.gets), (2000, 20000));
    // 30000 random SETs over 10000 keys leave 95% of them set
    // (1 - e^-3): the bench's GETs mostly hit the data the load stored.
    let hit = bench.hits as f64 / bench.gets as f64;
    assert!((0.93..0.98).contains(&hit), "hit ratio {hit}");
    // Values swapped out under the limit come back with the content the
    // last SET wrote: every read was checked.
    assert!(vm(&r, "pswpin") > 0);
    assert!(r.integrity.pages_checked > 20000);
    assert_eq!(r.integrity.violations, 0);
    let total = r.tasks[0].kv.unwrap();
    assert_eq!(total.requests, 52000);
}

#[test]
fn spawned_programs_start_fresh_and_their_run_times_are_recorded() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
cpus = 2
[task.launcher]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "repeat", times = 3, steps = [
      { op = "spawn", steps = [
          { op = "mmap", name = "bin", kind = "anon", size = "4M" },
          { op = "touch", region = "bin", write = 1.0 },
      ] },
      { op = "sleep", duration = "100ms" },
  ] },
]
"#,
    );
    let names: Vec<&str> = r.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "launcher",
            "launcher/spawn0",
            "launcher/spawn1",
            "launcher/spawn2"
        ]
    );
    // A fresh address space each: no page of the launcher is shared or
    // copied; each program faults in its own 1024 pages.
    assert_eq!(vm(&r, "pgfault"), 2048 + 3 * 1024);
    let h = &r.histograms["spawn_runtime_ns"];
    assert_eq!(h.iter().map(|b| b.count).sum::<u64>(), 3);
    // fork + exec (130 µs) and 1024 first-touch faults: about 1-2 ms.
    assert!(
        h.iter()
            .all(|b| b.count == 0 || (b.lo >= 1 << 17 && b.hi <= 1 << 22)),
        "{h:?}"
    );
}

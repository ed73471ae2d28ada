//! The OOM killer (mm/oom_kill.c): which task dies, what is counted, and
//! that the rest of the run goes on.

mod common;
use common::*;

/// Two tasks in a 128 MiB memcg with no swap: `small` writes 32 MiB and
/// later rewrites it; `big` starts 50 ms in and writes `big_size`.
fn two_in_a_memcg(big_size: &str, small_extra: &str, big_extra: &str, cg_extra: &str) -> String {
    format!(
        r#"
[machine]
memory = "1G"
[cgroup.w]
memory_max = "128M"
{cg_extra}
[task.small]
cgroup = "w"
{small_extra}
steps = [
  {{ op = "mmap", name = "a", kind = "anon", size = "32M" }},
  {{ op = "touch", region = "a", order = "seq", write = 1.0 }},
  {{ op = "sleep", duration = "200ms" }},
  {{ op = "phase", name = "after" }},
  {{ op = "touch", region = "a", order = "seq", write = 1.0 }},
]
[task.big]
cgroup = "w"
{big_extra}
steps = [
  {{ op = "sleep", duration = "50ms" }},
  {{ op = "mmap", name = "a", kind = "anon", size = "{big_size}" }},
  {{ op = "touch", region = "a", order = "seq", write = 1.0 }},
]
"#
    )
}

fn task<'r>(r: &'r RunResult, name: &str) -> &'r mmsim_spec::output::TaskResult {
    r.tasks.iter().find(|t| t.name == name).expect("task")
}

use mmsim_sim::output::RunResult;

#[test]
fn a_memcg_oom_kills_the_largest_task_and_the_bystander_goes_on() {
    let r = run_checked(&two_in_a_memcg("160M", "", "", ""));
    let kill = task(&r, "big").oom_kill.as_ref().expect("big is killed");
    assert_eq!(
        (kill.constraint.as_str(), kill.oom_memcg.as_deref()),
        ("memcg", Some("w"))
    );
    // Nothing is reclaimable without swap: at the kill the memcg held its
    // limit, 32,768 pages: small's 8,192, both page tables and big's RSS,
    // less what sits in a CPU's charge stock (at most a batch, 64).
    let small = task(&r, "small");
    assert!(small.oom_kill.is_none());
    let held = 8192 + (kill.anon_rss_kb.unwrap() + kill.pgtables_kb.unwrap()) / 4;
    assert!((32_768 - 64..32_768 + 64).contains(&held), "{kill:?}");
    // small rewrites its pages after the kill, faulting none.
    assert_eq!(phase_vm(&r, 0, "after", "pgfault"), 0);
    assert!(small.end_ns > 200_000_000 && small.end_ns > kill.at_ns);
    let ev = &r.cgroups["w"].memory_events;
    assert_eq!((ev["oom"], ev["oom_kill"], ev["oom_group_kill"]), (1, 1, 0));
    assert_eq!(vm(&r, "oom_kill"), 1);
    // What is left charged is small's: its 8,192 pages and page tables.
    let left = r.cgroups["w"].memory_current / 4096;
    assert!((8192..8192 + 64).contains(&left), "{left}");
}

/// oom_badness: RSS + page tables + oom_score_adj × (totalpages / 1000),
/// totalpages being memory.max plus swap (none here): 32,768, so each
/// point of adj weighs 32 pages. big holds ~24,500 pages at the kill and
/// small ~8,210: adj 300 adds 9,600 (17,810, big still dies), adj 600
/// adds 19,200 (27,410, small dies).
#[test]
fn oom_score_adj_weighs_thousandths_of_the_memcgs_pages() {
    let victim = |adj: i16| {
        let r = run_checked(&two_in_a_memcg(
            "160M",
            &format!("oom_score_adj = {adj}"),
            "",
            "",
        ));
        let first = r
            .tasks
            .iter()
            .filter(|t| t.oom_kill.is_some())
            .min_by_key(|t| t.oom_kill.as_ref().unwrap().at_ns)
            .expect("a kill");
        (
            first.name.clone(),
            first.oom_kill.as_ref().unwrap().oom_score_adj,
        )
    };
    assert_eq!(victim(300), ("big".to_string(), 0));
    assert_eq!(victim(600), ("small".to_string(), 600));
}

#[test]
fn oom_score_adj_min_is_never_chosen() {
    // big fits alone (100 MiB) but not beside small: exempt, it survives
    // and small, the only candidate, dies.
    let r = run_checked(&two_in_a_memcg("100M", "", "oom_score_adj = -1000", ""));
    assert!(task(&r, "big").oom_kill.is_none());
    let kill = task(&r, "small")
        .oom_kill
        .as_ref()
        .expect("small is killed");
    assert_eq!(kill.anon_rss_kb, Some(32 << 10));
    // small's open phase never ended: none is reported.
    assert!(task(&r, "small").phases.is_empty());
    assert_eq!(r.cgroups["w"].memory_events["oom_kill"], 1);
}

#[test]
fn memory_oom_group_kills_every_task_of_the_group() {
    let r = run_checked(&two_in_a_memcg("160M", "", "", "memory_oom_group = true"));
    let (small, big) = (task(&r, "small"), task(&r, "big"));
    let (ks, kb) = (small.oom_kill.as_ref(), big.oom_kill.as_ref());
    assert!(ks.is_some() && kb.is_some(), "{ks:?} {kb:?}");
    assert_eq!(ks.unwrap().at_ns, kb.unwrap().at_ns);
    // __oom_kill_process counts the victim, then mem_cgroup_scan_tasks
    // visits it again (its mm is still there) beside small: three kills.
    let ev = &r.cgroups["w"].memory_events;
    assert_eq!((ev["oom"], ev["oom_kill"], ev["oom_group_kill"]), (1, 3, 1));
    assert_eq!(vm(&r, "oom_kill"), 3);
    // Both mms are gone; what stays charged is a CPU's stock (under a batch).
    assert!(r.cgroups["w"].memory_current < 64 * 4096);
}

#[test]
fn a_global_oom_kills_the_largest_process_with_its_threads() {
    let text = r#"
[machine]
memory = "256M"
cpus = 2
[task.small]
steps = [
  { op = "mmap", name = "a", kind = "anon", size = "32M" },
  { op = "touch", region = "a", order = "seq", write = 1.0 },
  { op = "sleep", duration = "300ms" },
  { op = "phase", name = "after" },
  { op = "touch", region = "a", order = "seq", write = 1.0 },
]
[task.big]
steps = [
  { op = "sleep", duration = "50ms" },
  { op = "mmap", name = "a", kind = "anon", size = "150M" },
  { op = "mmap", name = "b", kind = "anon", size = "150M" },
  { op = "thread", steps = [ { op = "touch", region = "b", order = "seq", write = 1.0 } ] },
  { op = "touch", region = "a", order = "seq", write = 1.0 },
  { op = "wait" },
]
"#;
    let r = run_checked(text);
    let kill = task(&r, "big").oom_kill.as_ref().expect("big is killed");
    assert_eq!(
        (kill.constraint.as_str(), &kill.oom_memcg),
        ("global", &None)
    );
    // Its thread dies with it (SIGKILL goes to the thread group).
    let thread = task(&r, "big/thread0");
    assert_eq!(thread.oom_kill.as_ref(), Some(kill));
    // Both exit after the kill, as soon as each runs: within a slice.
    for t in [task(&r, "big"), thread] {
        assert!(t.end_ns >= kill.at_ns && t.end_ns - kill.at_ns < 10_000_000);
    }
    assert!(task(&r, "small").oom_kill.is_none());
    assert_eq!(phase_vm(&r, 0, "after", "pgfault"), 0);
    assert_eq!(vm(&r, "oom_kill"), 1);
    // No cgroup: no memory.events anywhere.
    assert!(r.cgroups.is_empty());
}

#[test]
fn a_forked_child_outlives_its_killed_parent() {
    // The parent forks before growing past the limit; the child (another
    // mm, 4 MiB of its own writes) is not killed with it.
    let text = r#"
[machine]
memory = "1G"
[cgroup.w]
memory_max = "64M"
[task.p]
cgroup = "w"
steps = [
  { op = "mmap", name = "a", kind = "anon", size = "96M" },
  { op = "fork", steps = [
      { op = "mmap", name = "b", kind = "anon", size = "4M" },
      { op = "touch", region = "b", order = "seq", write = 1.0 },
      { op = "sleep", duration = "200ms" },
      { op = "phase", name = "late" },
      { op = "touch", region = "b", order = "seq", write = 1.0 },
  ] },
  { op = "touch", region = "a", order = "seq", write = 1.0 },
  { op = "wait" },
]
"#;
    let r = run_checked(text);
    assert!(task(&r, "p").oom_kill.is_some());
    let child = task(&r, "p/fork0");
    assert!(child.oom_kill.is_none());
    assert_eq!(child.phases.len(), 1);
    assert!(child.end_ns > 200_000_000);
    assert_eq!(r.cgroups["w"].memory_events["oom_kill"], 1);
}

#[test]
fn kills_are_deterministic() {
    let text = two_in_a_memcg("160M", "", "", "memory_oom_group = true");
    let a = serde_json::to_string(&run_checked(&text)).unwrap();
    let b = serde_json::to_string(&run_checked(&text)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_killer_in_a_fault_waits_for_its_victim_to_exit() {
    // big fits alone (100 MiB) but not beside small, which sleeps: the
    // kill wakes small, big's fault retries once more (a second OOM call
    // finds small still exiting), sleeps until small has exited in its own
    // slice, and is retried without counting another fault.
    let r = run_checked(&two_in_a_memcg("100M", "", "oom_score_adj = -1000", ""));
    let (small, big) = (task(&r, "small"), task(&r, "big"));
    let kill = small.oom_kill.as_ref().expect("small is killed");
    assert!(small.end_ns > kill.at_ns && big.end_ns > small.end_ns);
    let ev = &r.cgroups["w"].memory_events;
    // A kill, then one more round of 16 reclaims and an OOM call that
    // aborts: 1 + 16 + 1 max events each time, and the first charge's.
    assert_eq!((ev["oom"], ev["oom_kill"]), (2, 1));
    // small wrote 8,192 pages, big 25,600: one fault each, no retry.
    assert_eq!(vm(&r, "pgfault"), 8192 + 25_600);
}

#[test]
fn a_mapping_larger_than_ram_and_swap_fails_as_overcommit_refuses_it() {
    // __vm_enough_memory (OVERCOMMIT_GUESS): 300 MiB on a 256 MiB machine
    // with no swap fails at mmap; 128 MiB of zram swap makes it fit.
    let text = |swap: &str| {
        format!(
            "[machine]\nmemory = \"256M\"\n{swap}[task.t]\nsteps = [ {{ op = \"mmap\", name = \"a\", kind = \"anon\", size = \"300M\" }} ]\n"
        )
    };
    let e = try_run(&text("")).expect_err("ENOMEM at mmap");
    assert!(e.to_string().contains("overcommit"), "{e}");
    assert_eq!(e.exit_code(), 2);
    run_checked(&text("[[swap]]\ndevice = \"zram\"\nsize = \"128M\"\n"));
}

//! Spinlocks with holders (spinlock.rs): a lock's hold lasts the work the
//! model prices under it, and a CPU that meets another's hold spins to
//! its end (native_queued_spin_lock_slowpath).

mod common;
use common::*;

/// `n` processes on `n` CPUs, each writing its own 24 MiB twice: in one
/// memcg of 16 MiB a task (`shared`) they all reclaim one lruvec, under
/// one lru_lock; otherwise each has a 16 MiB memcg of its own.
fn reclaimers(n: usize, shared: bool) -> String {
    let mut s = format!(
        r#"
[machine]
memory = "1G"
cpus = {n}
[[swap]]
device = "zram"
size = "1G"
"#
    );
    let groups = if shared { 1 } else { n };
    for g in 0..groups {
        let max = if shared { 16 * n } else { 16 };
        s += &format!("[cgroup.g{g}]\nmemory_max = \"{max}M\"\n");
    }
    for t in 0..n {
        let g = if shared { 0 } else { t };
        s += &format!(
            r#"[task.t{t}]
cgroup = "g{g}"
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "24M" }},
  {{ op = "touch", region = "heap", write = 1.0, passes = 2 }},
]
"#
        );
    }
    s
}

fn spin_ns(r: &mmsim_spec::output::RunResult) -> u64 {
    r.profile
        .get("native_queued_spin_lock_slowpath")
        .copied()
        .unwrap_or(0)
}

#[test]
fn one_cpu_never_spins() {
    let r = run_checked(&reclaimers(1, true));
    assert!(vm(&r, "pswpout") > 0, "it reclaims");
    assert_eq!(spin_ns(&r), 0);
}

#[test]
fn reclaimers_of_one_lruvec_wait_for_each_others_lru_lock_more_the_more_they_are() {
    let two = run_checked(&reclaimers(2, true));
    let eight = run_checked(&reclaimers(8, true));
    for r in [&two, &eight] {
        assert!(vm(r, "pswpout") > 0, "they reclaim");
    }
    // Per reclaimer, the wait grows with the others holding the lock: a
    // queue of seven ahead waits longer than a queue of one. The wait is
    // the spin for holders (slowpath) and, since a line's transfers
    // queue, the lock line's own queue (in `_raw_spin_lock`, with the
    // hand-offs themselves): both grow.
    let per_task = |r: &mmsim_spec::output::RunResult, f: &str| {
        r.profile.get(f).copied().unwrap_or(0) / r.tasks.len() as u64
    };
    let spin = "native_queued_spin_lock_slowpath";
    assert!(
        per_task(&two, spin) > 0,
        "two reclaimers of one lruvec meet"
    );
    for f in [spin, "_raw_spin_lock"] {
        assert!(
            2 * per_task(&eight, f) > 3 * per_task(&two, f),
            "{f}: 8 CPUs {} ns a task, 2 CPUs {} ns",
            per_task(&eight, f),
            per_task(&two, f)
        );
    }
}

#[test]
fn reclaimers_of_their_own_lruvecs_hardly_wait() {
    // The same eight reclaimers, each in a memcg of its own: their
    // lru_locks are distinct, and what is left to meet on (the swap
    // cache's lock over 64 MiB of slots) holds for a fraction of the time.
    let shared = run_checked(&reclaimers(8, true));
    let apart = run_checked(&reclaimers(8, false));
    assert!(vm(&apart, "pswpout") > 0);
    assert!(
        spin_ns(&apart) * 4 < spin_ns(&shared),
        "apart {} ns, shared {} ns",
        spin_ns(&apart),
        spin_ns(&shared)
    );
}

/// Time reclaim's rmap walks waited for their rwsem's line
/// (`down_read_trylock` under a shrink path: the faults' own
/// `down_read_trylock` on mmap_lock is not under one).
fn rmap_line_ns(r: &mmsim_spec::output::RunResult) -> u64 {
    r.profile_tree
        .iter()
        .filter(|row| row.path.contains(";shrink_") && row.path.ends_with(";down_read_trylock"))
        .map(|row| row.self_ns)
        .sum()
}

#[test]
fn reclaimers_of_one_lruvec_move_each_others_anon_vma_lines() {
    // In one memcg each reclaimer walks the other's folios too, taking the
    // other process's anon_vma rwsem for read: its line moves over.
    let one = run_checked(&reclaimers(1, true));
    let shared = run_checked(&reclaimers(2, true));
    let apart = run_checked(&reclaimers(2, false));
    assert_eq!(rmap_line_ns(&one), 0, "one CPU keeps every line");
    assert!(
        rmap_line_ns(&shared) > 0,
        "the walks meet on both anon_vmas"
    );
    // Each in a memcg of its own, a task walks only its own anon_vma from
    // the one CPU it keeps (no other task wants that CPU): nothing moves.
    assert!(vm(&apart, "pswpout") > 0);
    assert_eq!(rmap_line_ns(&apart), 0);
}

/// One process on `cpus` CPUs with a `size` anonymous mapping "buf": a
/// thread runs `thread` while the creator runs `main`, then joins it.
fn two_threads(cpus: usize, size: &str, thread: &str, main: &str) -> String {
    format!(
        r#"
[machine]
memory = "256M"
cpus = {cpus}
[task.main]
steps = [
  {{ op = "mmap", name = "buf", kind = "anon", size = "{size}" }},
  {{ op = "thread", steps = [ {thread} ] }},
  {main},
  {{ op = "wait" }},
]
"#
    )
}

/// Two threads of one process (one memcg, one lru_lock) on `cpus` CPUs,
/// each writing and MADV_DONTNEEDing its own 16 MiB 4 times.
fn dontneed_threads(cpus: usize) -> String {
    let half = |offset: &str| {
        format!(
            r#"{{ op = "repeat", times = 4, steps = [
    {{ op = "touch", region = "buf", offset = {offset}, length = "16M", write = 1.0 }},
    {{ op = "madvise", region = "buf", advice = "dontneed", offset = {offset}, length = "16M" }},
  ] }}"#
        )
    };
    two_threads(cpus, "32M", &half("0"), &half("\"16M\""))
}

/// Time charged below kernel function `f` in the call-path tree (for a
/// lock taken from `f`: its line coming over and waits for other CPUs'
/// holds).
fn ns_under(r: &mmsim_spec::output::RunResult, f: &str) -> u64 {
    r.profile_tree
        .iter()
        .filter(|row| {
            row.path.contains(&format!(";{f};")) || row.path.starts_with(&format!("{f};"))
        })
        .map(|row| row.self_ns)
        .sum()
}

#[test]
fn threads_freeing_into_one_lruvec_move_its_lock_between_them() {
    // Each zap's release_pages takes the lruvec's lock once per 32 pages
    // (or lruvec change); the other thread's faults (their lru_add
    // drains) and frees took it since, so its line comes over.
    let one = run_checked(&dontneed_threads(1));
    let two = run_checked(&dontneed_threads(2));
    assert_eq!(ns_under(&one, "release_pages"), 0, "one CPU takes no lock");
    let ns = ns_under(&two, "release_pages");
    assert!(ns > 0, "the threads meet on the lock");
    // At most one hand-off per 32 freed pages: 2 threads × 4 × 4096.
    let bound = 2 * 4 * 4096 / 32 * mmsim_sim::machine_profile::Costs::REFERENCE.lock_handoff;
    assert!(ns <= bound, "{ns} ns > {bound} ns");
}

#[test]
fn reclaimers_of_one_lruvec_take_each_others_pte_locks() {
    // In one memcg each reclaimer unmaps the other's pages too: the
    // walk takes the PTE table's lock the owner's faults took.
    let one = run_checked(&reclaimers(1, true));
    let shared = run_checked(&reclaimers(2, true));
    let apart = run_checked(&reclaimers(2, false));
    assert_eq!(ns_under(&one, "page_vma_mapped_walk"), 0, "one CPU");
    assert!(ns_under(&shared, "page_vma_mapped_walk") > 0);
    assert!(
        ns_under(&shared, "handle_pte_fault") > 0,
        "and the owners take them back"
    );
    // Each in a memcg of its own, a task's tables stay on its CPU.
    assert!(vm(&apart, "pswpout") > 0);
    assert_eq!(ns_under(&apart, "page_vma_mapped_walk"), 0);
    assert_eq!(ns_under(&apart, "handle_pte_fault"), 0);
}

/// Two threads of one process on two CPUs first-touching one 16 MiB
/// mapping: `shared`, both all of it in shuffled orders of their own (a
/// page goes to the first to fault it; every PTE table is both's); else
/// each its own 8 MiB half (4 tables of its own).
fn first_touch_threads(shared: bool) -> String {
    let touch = |t: usize| match shared {
        true => format!(
            r#"{{ op = "touch", region = "buf", order = "shuffle", seed = {}, write = 1.0 }}"#,
            t + 1
        ),
        false => format!(
            r#"{{ op = "touch", region = "buf", offset = "{}M", length = "8M", write = 1.0 }}"#,
            t * 8
        ),
    };
    two_threads(2, "16M", &touch(1), &touch(0))
}

#[test]
fn threads_faulting_in_one_pte_table_move_its_lock() {
    let apart = run_checked(&first_touch_threads(false));
    let shared = run_checked(&first_touch_threads(true));
    assert_eq!(
        ns_under(&apart, "handle_pte_fault"),
        0,
        "tables of their own"
    );
    assert!(ns_under(&shared, "handle_pte_fault") > 0, "tables of both");
    for r in [&apart, &shared] {
        assert_eq!(vm(r, "pgfault"), 4096, "each page faults once");
    }
}

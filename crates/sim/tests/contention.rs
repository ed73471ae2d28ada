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

/// One process on `cpus` CPUs with a `size` anonymous mapping "buf":
/// after mapping it, `steps`, then a wait for its threads and children.
fn one_process(cpus: usize, size: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "256M"
cpus = {cpus}
[task.main]
steps = [
  {{ op = "mmap", name = "buf", kind = "anon", size = "{size}" }},
  {steps},
  {{ op = "wait" }},
]
"#
    )
}

/// One process on `cpus` CPUs with a `size` anonymous mapping "buf": a
/// thread runs `thread` while the creator runs `main`, then joins it.
fn two_threads(cpus: usize, size: &str, thread: &str, main: &str) -> String {
    let steps = format!("{{ op = \"thread\", steps = [ {thread} ] }},\n  {main}");
    one_process(cpus, size, &steps)
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

/// Two threads of one process (else two processes) on `cpus` CPUs with
/// THPs always, each writing its own 32 MiB of one mapping (16 THPs),
/// then lazily freeing a page in each THP, which splits it
/// (split_huge_page, under the anon_vma's rwsem for writing).
fn splitters(cpus: usize, threads: bool) -> String {
    let half = |offset: usize| {
        let mut steps = format!(
            r#"{{ op = "touch", region = "buf", offset = "{offset}M", length = "32M", write = 1.0 }}"#
        );
        for thp in 0..16 {
            steps += &format!(
                r#", {{ op = "madvise", region = "buf", advice = "free", offset = "{}M", length = "4K" }}"#,
                offset + 2 * thp + 1
            );
        }
        steps
    };
    let head = format!(
        "[machine]\nmemory = \"256M\"\ncpus = {cpus}\n[sysfs]\n\
         \"kernel/mm/transparent_hugepage/enabled\" = \"always\"\n"
    );
    let mmap = r#"{ op = "mmap", name = "buf", kind = "anon", size = "64M" }"#;
    match threads {
        true => format!(
            "{head}[task.main]\nsteps = [\n  {mmap},\n  {{ op = \"thread\", steps = [ {} ] }},\n  {},\n  {{ op = \"wait\" }},\n]\n",
            half(32),
            half(0)
        ),
        false => format!(
            "{head}[task.a]\nsteps = [ {mmap}, {} ]\n[task.b]\nsteps = [ {mmap}, {} ]\n",
            half(0),
            half(32)
        ),
    }
}

#[test]
fn threads_splitting_thps_of_one_process_wait_for_each_others_anon_vma_rwsem() {
    const SLOW: &str = "rwsem_down_write_slowpath";
    let waited = |r: &mmsim_spec::output::RunResult| r.profile.get(SLOW).copied().unwrap_or(0);
    let one = run_checked(&splitters(1, true));
    let threads = run_checked(&splitters(2, true));
    let procs = run_checked(&splitters(2, false));
    for r in [&one, &threads, &procs] {
        assert_eq!(vm(r, "thp_split_page"), 32, "every THP splits once");
        assert_eq!(r.integrity.violations, 0);
    }
    assert_eq!(waited(&one), 0, "one CPU");
    // Threads split THPs of one anon_vma: a split on one CPU meets the
    // other's; processes each lock their own.
    assert!(waited(&threads) > 0);
    assert_eq!(waited(&procs), 0);
}

/// Two threads of one process on `cpus` CPUs, its 16 MiB written first:
/// one pages out [0, 8M) four times while the other writes [0, 8M)
/// (`shared`: the same PTE tables) or [8M, 16M) four times.
fn pageout_and_write(cpus: usize, shared: bool) -> String {
    let at = if shared { "0M" } else { "8M" };
    format!(
        r#"
[machine]
memory = "256M"
cpus = {cpus}
[[swap]]
device = "zram"
size = "256M"
[task.main]
steps = [
  {{ op = "mmap", name = "buf", kind = "anon", size = "16M" }},
  {{ op = "touch", region = "buf", write = 1.0 }},
  {{ op = "thread", steps = [ {{ op = "repeat", times = 4, steps = [
    {{ op = "madvise", region = "buf", advice = "pageout", offset = "0M", length = "8M" }},
  ] }} ] }},
  {{ op = "repeat", times = 4, steps = [
    {{ op = "touch", region = "buf", offset = "{at}", length = "8M", write = 1.0 }},
  ] }},
  {{ op = "wait" }},
]
"#
    )
}

#[test]
fn a_pageout_walk_takes_the_pte_table_locks_the_writers_faults_took() {
    const WALK: &str = "madvise_cold_or_pageout_pte_range";
    let one = run_checked(&pageout_and_write(1, true));
    let shared = run_checked(&pageout_and_write(2, true));
    let apart = run_checked(&pageout_and_write(2, false));
    for r in [&one, &shared, &apart] {
        assert!(vm(r, "pswpout") > 0, "it pages out");
        assert_eq!(r.integrity.violations, 0);
    }
    assert_eq!(ns_under(&one, WALK), 0, "one CPU");
    // In tables of their own the walk takes each of its 4 tables' locks
    // over from the first touch's CPU once, and the faults never meet it.
    let once = 4 * mmsim_sim::machine_profile::Costs::REFERENCE.lock_handoff;
    assert!(ns_under(&apart, WALK) <= once, "{}", ns_under(&apart, WALK));
    assert_eq!(ns_under(&apart, "handle_pte_fault"), 0);
    // In the same tables the walk takes the lock the writer's faults
    // (swap-ins of what it paged out) took last, and they take it back.
    assert!(
        ns_under(&shared, WALK) > once,
        "{}",
        ns_under(&shared, WALK)
    );
    assert!(ns_under(&shared, "handle_pte_fault") > 0);
}

/// Two threads of one process on `cpus` CPUs reading a file's page 0
/// with 4 KiB read(2)s 2,000 times each, both the same page (`shared`),
/// else thread 1 page 1. `on`: "tmpfs" (shmem_file_read_iter) or a disk
/// (filemap_read, the file cached by a first read).
fn page_readers(cpus: usize, on: &str, shared: bool) -> String {
    let read = |page: usize| {
        format!(
            r#"{{ op = "repeat", times = 2000, steps = [
    {{ op = "read", file = "f", offset = "{page}K", length = "4K", chunk = "4K" }},
  ] }}"#,
            page = page * 4
        )
    };
    let (disk, warm) = match on {
        "tmpfs" => ("", r#"{ op = "write", file = "f" },"#),
        _ => (
            "[[disk]]\nname = \"d\"\ndevice = \"virtio\"\nsize = \"64M\"\n",
            r#"{ op = "read", file = "f" },"#,
        ),
    };
    let on = if on == "tmpfs" { "tmpfs" } else { "d" };
    format!(
        r#"
[machine]
memory = "256M"
cpus = {cpus}
{disk}
[[file]]
name = "f"
size = "64K"
on = "{on}"
[task.main]
steps = [
  {warm}
  {{ op = "thread", steps = [ {thread} ] }},
  {main},
  {{ op = "wait" }},
]
"#,
        thread = read(if shared { 0 } else { 1 }),
        main = read(0),
    )
}

/// Time charged to `f` itself (its own work, and the lines its atomics
/// wait for).
fn self_ns(r: &mmsim_spec::output::RunResult, f: &str) -> u64 {
    r.profile.get(f).copied().unwrap_or(0)
}

#[test]
fn readers_of_one_file_page_move_its_struct_page_line() {
    // Each read takes a reference on the folio and drops it after the
    // copy: with both threads at one page its line moves at nearly every
    // read; with pages of their own, never. One CPU: never.
    let transfer = mmsim_sim::machine_profile::Costs::REFERENCE.cacheline_transfer;
    for (on, f) in [("tmpfs", "shmem_fault"), ("d", "filemap_read")] {
        let apart = run_checked(&page_readers(2, on, false));
        let shared = run_checked(&page_readers(2, on, true));
        let one = run_checked(&page_readers(1, on, true));
        let one_apart = run_checked(&page_readers(1, on, false));
        assert_eq!(self_ns(&one, f), self_ns(&one_apart, f), "{on}: one CPU");
        assert_eq!(self_ns(&apart, f), self_ns(&one_apart, f), "{on}: apart");
        let moved = self_ns(&shared, f) - self_ns(&apart, f);
        // 4,000 reads; a few at the ends run alone, and a read may queue
        // behind the other's transfer (at most one).
        assert!(
            moved >= 3_000 * transfer && moved <= 2 * 4_000 * transfer,
            "{on}: {moved} ns moving the line, {} transfers",
            moved / transfer
        );
    }
}

/// A parent and its child on `cpus` CPUs, each writing every page of a
/// 4 MiB private mapping they share after the fork, at the same pace.
fn cow_pair(cpus: usize) -> String {
    let write = r#"{ op = "touch", region = "buf", write = 1.0 }"#;
    let steps = format!("{write},\n  {{ op = \"fork\", steps = [ {write} ] }},\n  {write}");
    one_process(cpus, "4M", &steps)
}

#[test]
fn a_parent_and_child_breaking_cow_together_move_the_shared_pages_lines() {
    let one = run_checked(&cow_pair(1));
    let two = run_checked(&cow_pair(2));
    assert_eq!(vm(&one, "pgfault"), vm(&two, "pgfault"));
    let ns = |r| self_ns(r, "page_remove_rmap") + self_ns(r, "do_wp_page");
    let moved = ns(&two) - ns(&one);
    // 1,024 shared pages: the first to write one copies it and drops its
    // mapping, the second reuses it after a folio_trylock; the second
    // moves the line when the first wrote it within the quantum.
    let transfer = mmsim_sim::machine_profile::Costs::REFERENCE.cacheline_transfer;
    assert!(moved > 0, "the two meet on the shared pages");
    // At most once each at a page, and one queued behind the other.
    assert!(moved <= 1024 * 2 * transfer, "{moved} ns");
}

#[test]
fn threads_mapping_thps_under_one_pmd_table_move_its_lock() {
    // Both halves of the mapping lie under one PMD table (1 GiB): each
    // THP fault sets its PMD and each split rewrites one under that
    // table's lock, whose line the other thread's last fault or split
    // left on its CPU. Processes have tables of their own.
    let one = run_checked(&splitters(1, true));
    let threads = run_checked(&splitters(2, true));
    let procs = run_checked(&splitters(2, false));
    for r in [&one, &threads, &procs] {
        assert_eq!(vm(r, "thp_fault_alloc"), 32, "every block faults a THP");
    }
    for f in ["do_huge_pmd_anonymous_page", "__split_huge_pmd"] {
        assert_eq!(ns_under(&one, f), 0, "{f}: one CPU");
        assert!(ns_under(&threads, f) > 0, "{f}: one table");
        assert_eq!(ns_under(&procs, f), 0, "{f}: tables of their own");
    }
}

//! khugepaged as 6.1 has it: registration by MADV_HUGEPAGE, the first scan
//! at once, the max_ptes_none/swap/shared limits, the collapse of a
//! PTE-mapped range into a THP (holes zeroed, swapped-out pages read back
//! in first) and the thread's time in the profile. Every run has the
//! invariant checker on and checks content tokens.

mod common;
use common::*;
use mmsim_sim::output::RunResult;

/// THP `madvise`, khugepaged knobs `knobs` (sysfs lines), a 512 MiB
/// machine with zram, and the task's `steps` in cgroup w (256 MiB).
fn spec(knobs: &str, steps: &str) -> String {
    memcg_spec("256M", "", steps).replace(
        "\"kernel/mm/transparent_hugepage/enabled\" = \"never\"",
        &format!("\"kernel/mm/transparent_hugepage/enabled\" = \"madvise\"\n{knobs}"),
    )
}

/// Writes the first `first` pages of block 0 and `second` of block 1 of a
/// 4 MiB region (no THP at fault: no MADV_HUGEPAGE yet).
fn fill(first: u64, second: u64) -> String {
    format!(
        r#"{{ op = "mmap", name = "a", kind = "anon", size = "4M" }},
   {{ op = "phase", name = "fill" }},
   {{ op = "touch", region = "a", order = "seq", write = 1.0, length = "{}K" }},
   {{ op = "touch", region = "a", order = "seq", write = 1.0, offset = "2M", length = "{}K" }},"#,
        first * 4,
        second * 4
    )
}

const ADVISE_WAIT_READ: &str = r#"{ op = "phase", name = "collapse" },
   { op = "madvise", region = "a", advice = "hugepage" },
   { op = "sleep", duration = "1s" },
   { op = "phase", name = "read" },
   { op = "touch", region = "a", order = "seq", write = 0.0 },
   { op = "phase", name = "end" },"#;

fn stat(r: &RunResult, name: &str) -> i64 {
    r.cgroups["w"].memory_stat[name]
}

#[test]
fn madv_hugepage_wakes_khugepaged_which_collapses_a_range_with_few_holes() {
    let knob = "\"kernel/mm/transparent_hugepage/khugepaged/max_ptes_none\" = 256";
    let r = run_checked(&spec(
        knob,
        &format!("{}\n{ADVISE_WAIT_READ}", fill(400, 100)),
    ));
    // Block 0 has 112 empty PTEs (≤ 256): collapsed, its holes zeroed.
    // Block 1 has 412 (> 256): refused once. The next wakeup is 10 s away.
    assert_eq!(phase_vm(&r, 0, "collapse", "thp_collapse_alloc"), 1);
    assert_eq!(phase_vm(&r, 0, "collapse", "thp_collapse_alloc_failed"), 0);
    assert_eq!(phase_vm(&r, 0, "collapse", "thp_scan_exceed_none_pte"), 1);
    assert_eq!(
        phase_vm(&r, 0, "collapse", "nr_anon_transparent_hugepages"),
        1
    );
    assert_eq!(phase_vm(&r, 0, "collapse", "nr_anon_pages"), 112);
    assert_eq!(phase_vm(&r, 0, "collapse", "pgfault"), 0);
    assert_eq!(stat(&r, "thp_collapse_alloc"), 1);
    // No fault-time THP: the range was written before the hint.
    assert_eq!(vm(&r, "thp_fault_alloc"), 0);
    // Reading back: the THP takes no fault, block 1's holes one each.
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 412);
    // The thread's scan and copy are simulated time in the profile.
    assert!(r.profile.get("collapse_huge_page").copied().unwrap_or(0) > 0);
    assert!(r
        .profile_tree
        .iter()
        .any(|p| p.path.starts_with("khugepaged")));
}

#[test]
fn the_default_max_ptes_none_collapses_any_range_with_a_page() {
    let r = run_checked(&spec("", &format!("{}\n{ADVISE_WAIT_READ}", fill(400, 1))));
    assert_eq!(phase_vm(&r, 0, "collapse", "thp_collapse_alloc"), 2);
    assert_eq!(phase_vm(&r, 0, "collapse", "thp_scan_exceed_none_pte"), 0);
    assert_eq!(phase_vm(&r, 0, "collapse", "nr_anon_pages"), 112 + 511);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 0);
}

#[test]
fn without_the_hint_madvise_mode_leaves_khugepaged_asleep() {
    let steps = format!(
        "{}\n{}",
        fill(400, 100),
        ADVISE_WAIT_READ.replace(
            r#"{ op = "madvise", region = "a", advice = "hugepage" },"#,
            ""
        )
    );
    let r = run_checked(&spec("", &steps));
    assert_eq!(vm(&r, "thp_collapse_alloc"), 0);
    assert_eq!(vm(&r, "thp_scan_exceed_none_pte"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 112 + 412);
    assert!(!r
        .profile_tree
        .iter()
        .any(|p| p.path.starts_with("khugepaged")));
}

#[test]
fn swapped_out_pages_are_read_back_unless_over_max_ptes_swap() {
    // Both blocks written whole; 32 pages of block 0 and 100 of block 1
    // paged out (zram). 32 ≤ max_ptes_swap (64): block 0's are swapped in
    // by the collapse (major faults, no pgfault); 100 > 64 refuses block 1.
    let steps = format!(
        r#"{}
   {{ op = "madvise", region = "a", advice = "pageout", length = "128K" }},
   {{ op = "madvise", region = "a", advice = "pageout", offset = "2M", length = "400K" }},
   {ADVISE_WAIT_READ}"#,
        fill(512, 512)
    );
    let r = run_checked(&spec("", &steps));
    assert_eq!(phase_vm(&r, 0, "fill", "pswpout"), 132);
    assert_eq!(phase_vm(&r, 0, "collapse", "thp_collapse_alloc"), 1);
    assert_eq!(phase_vm(&r, 0, "collapse", "thp_scan_exceed_swap_pte"), 1);
    assert_eq!(phase_vm(&r, 0, "collapse", "pswpin"), 32);
    assert_eq!(phase_vm(&r, 0, "collapse", "pgmajfault"), 32);
    assert_eq!(phase_vm(&r, 0, "collapse", "pgfault"), 0);
    // Block 1's swapped-out pages fault back when read.
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), 100);
}

#[test]
fn pages_shared_with_a_child_count_against_max_ptes_shared() {
    // The parent writes both blocks, forks a child that sleeps through
    // the scan, then asks for THP: every page is mapped twice (512 > 256),
    // so khugepaged refuses both blocks and the child, forked before the
    // parent registered, is not scanned.
    let steps = format!(
        r#"{}
   {{ op = "fork", steps = [{{ op = "sleep", duration = "2s" }}] }},
   {ADVISE_WAIT_READ}"#,
        fill(512, 512)
    );
    let r = run_checked(&spec("", &steps));
    assert_eq!(vm(&r, "thp_scan_exceed_share_pte"), 2);
    assert_eq!(vm(&r, "thp_collapse_alloc"), 0);
}

#[test]
fn a_collapse_charge_over_the_limit_fails_without_an_oom_event() {
    // 3 MiB of memory.max: the two blocks' 624 pages fit, a THP's 512
    // more do not, and with khugepaged/defrag 0 the charge may not
    // reclaim.
    let knobs = "\"kernel/mm/transparent_hugepage/khugepaged/defrag\" = 0";
    let r = run_checked(
        &spec(knobs, &format!("{}\n{ADVISE_WAIT_READ}", fill(400, 224)))
            .replace("memory_max = \"256M\"", "memory_max = \"3M\""),
    );
    assert_eq!(vm(&r, "thp_collapse_alloc"), 2);
    assert_eq!(stat(&r, "thp_collapse_alloc"), 0);
    assert_eq!(vm(&r, "nr_anon_transparent_hugepages"), 0);
    assert_eq!(r.cgroups["w"].memory_events["oom"], 0);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 112 + 288);
}

/// On two CPUs, a thread read-faulting a fresh 32 MiB region while
/// khugepaged collapses the process's 2 MiB block, 400 pages of it
/// written, or refuses to (`knobs`): the
/// thread's `read` phase, ns, and the collapse's time in the profile
/// (with what it calls).
fn reader_beside_collapse(knobs: &str) -> (u64, u64) {
    let steps = r#"{ op = "mmap", name = "a", kind = "anon", size = "4M" },
   { op = "touch", region = "a", order = "seq", write = 1.0, length = "1600K" },
   { op = "mmap", name = "b", kind = "anon", size = "32M" },
   { op = "thread", steps = [ { op = "phase", name = "read" }, { op = "touch", region = "b" } ] },
   { op = "madvise", region = "a", advice = "hugepage" },
   { op = "sleep", duration = "1s" },
   { op = "wait" },"#;
    let text = spec(knobs, steps).replace("memory = \"512M\"", "memory = \"512M\"\ncpus = 2");
    let r = run_checked(&text);
    let p = r.tasks[1].phases.iter().find(|p| p.name == "read").unwrap();
    let collapse = r
        .profile_tree
        .iter()
        .find(|p| p.path == "khugepaged;collapse_huge_page")
        .map_or(0, |p| p.total_ns);
    (p.end_ns - p.start_ns, collapse)
}

#[test]
fn a_collapse_holds_mmap_lock_and_another_cpus_faults_wait() {
    // The collapse of block 0 holds mmap_lock for writing through its
    // copy; the thread's faults on the other CPU (another VMA: before
    // 6.4 that does not matter) sleep until it is done. With
    // max_ptes_none 0 the block's 112 holes refuse the collapse.
    let (beside, collapse) = reader_beside_collapse("");
    let none = "\"kernel/mm/transparent_hugepage/khugepaged/max_ptes_none\" = 0";
    let (alone, _) = reader_beside_collapse(none);
    assert!(collapse > 0);
    let waited = beside - alone;
    // More than the flush IPI's handler, at most the collapse's time (the
    // hold is all of it but the THP's allocation).
    assert!(
        waited > 2 * mmsim_sim::cost_model::IPI_HANDLER_NS && waited <= collapse,
        "waited {waited} ns, collapse {collapse} ns"
    );
}

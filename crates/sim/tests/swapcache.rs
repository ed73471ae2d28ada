//! Swap on block devices through the swap cache: asynchronous writeback,
//! swap-in with cluster and VMA readahead, faults that wait for reads in
//! flight. Expected values are derived from 6.1's code paths: the swap
//! cache and swap readahead in mm/swap_state.c (swapin_readahead,
//! swap_cluster_readahead, swap_vma_readahead, __swapin_nr_pages) and swap
//! I/O in mm/page_io.c (swap_readpage, swap_writepage).

mod common;
use common::*;
use mmsim_sim::mm::swap_state::swapin_nr_pages_for;

/// 64 MiB written under a 32 MiB memory.max with swap on `device`, then
/// read back in `order`.
fn spec(device: &str, extra_swap: &str, knobs: &str, order: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
{knobs}
[[swap]]
device = "{device}"
size = "256M"
{extra_swap}
[cgroup.w]
memory_max = "32M"
[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "64M" }},
  {{ op = "phase", name = "write" }},
  {{ op = "touch", region = "heap", order = "seq", write = 1.0 }},
  {{ op = "phase", name = "read" }},
  {{ op = "touch", region = "heap", order = "{order}" }},
  {{ op = "phase", name = "rewrite" }},
  {{ op = "touch", region = "heap", order = "seq", write = 1.0 }},
]
"#
    )
}

#[test]
fn window_formula_matches_the_kernel_table() {
    // 6.1 mm/swap_state.c, __swapin_nr_pages: hits 0 non-adjacent 1,
    // adjacent 2; 1 → 4, 2 → 4, 3+ → 8 (max 8); never below half the
    // previous window.
    assert_eq!(swapin_nr_pages_for(100, 200, 0, 8, 0), 1);
    assert_eq!(swapin_nr_pages_for(100, 101, 0, 8, 0), 2);
    assert_eq!(swapin_nr_pages_for(100, 99, 0, 8, 0), 2);
    assert_eq!(swapin_nr_pages_for(0, 50, 1, 8, 0), 4);
    assert_eq!(swapin_nr_pages_for(0, 50, 2, 8, 0), 4);
    assert_eq!(swapin_nr_pages_for(0, 50, 3, 8, 0), 8);
    assert_eq!(swapin_nr_pages_for(0, 50, 63, 8, 0), 8);
    assert_eq!(swapin_nr_pages_for(0, 50, 0, 8, 8), 4);
    assert_eq!(swapin_nr_pages_for(0, 50, 4, 2, 0), 2);
}

#[test]
fn virtio_sequential_swapin_uses_full_cluster_windows() {
    let r = run_checked(&spec("virtio", "", "", "seq"));
    // The write phase pushes out at least the 32 MiB over the limit, all
    // through bios (pgpgout in KiB, 4 per page).
    let out = phase_vm(&r, 0, "write", "pswpout");
    assert!(out >= 8192, "pswpout {out}");
    assert_eq!(phase_vm(&r, 0, "write", "pgpgout"), 4 * out);
    // Read: sequential slots, so after the first window every cluster
    // readahead window is 8 and every readahead page is used once:
    // one major fault per 8 pages read, each hit counted.
    let inn = phase_vm(&r, 0, "read", "pswpin");
    let maj = phase_vm(&r, 0, "read", "pgmajfault");
    let ra = phase_vm(&r, 0, "read", "swap_ra");
    let hit = phase_vm(&r, 0, "read", "swap_ra_hit");
    assert_eq!(phase_vm(&r, 0, "read", "pgpgin"), 4 * inn);
    assert_eq!(inn, maj + ra, "each read is a fault's target or readahead");
    assert!(
        (inn as f64 / maj as f64) > 7.5,
        "pswpin {inn} majfault {maj}"
    );
    assert!(hit as f64 >= 0.99 * ra as f64, "swap_ra {ra} hit {hit}");
    // Each major fault waits for its read and is retried: handle_mm_fault
    // runs (and counts pgfault) twice; so does a fault on a readahead page
    // whose read is still in flight (rare when reads complete in order).
    let retries = phase_vm(&r, 0, "read", "pgfault") - 16384;
    assert!(
        retries >= maj && retries <= maj + maj / 100,
        "{retries} retries, {maj} major"
    );
    let h = &r.histograms["swapin_nr_pages"];
    let eights = h.iter().find(|b| b.lo == 8).map_or(0, |b| b.count);
    assert!(eights as f64 >= 0.99 * maj as f64, "{h:?}");
    assert_eq!(r.knobs["sysfs:kernel/mm/swap/vma_ra_enabled"], "true");
}

#[test]
fn readahead_off_with_page_cluster_zero() {
    let r = run_checked(&spec(
        "virtio",
        "",
        "[sysctl]\n\"vm.page-cluster\" = 0",
        "seq",
    ));
    assert_eq!(phase_vm(&r, 0, "read", "swap_ra"), 0);
    assert_eq!(
        phase_vm(&r, 0, "read", "pswpin"),
        phase_vm(&r, 0, "read", "pgmajfault")
    );
}

#[test]
fn non_rotational_device_uses_vma_readahead_both_directions() {
    for order in ["seq", "rev"] {
        let r = run_checked(&spec("nvme", "", "", order));
        let inn = phase_vm(&r, 0, "read", "pswpin");
        let maj = phase_vm(&r, 0, "read", "pgmajfault");
        let ra = phase_vm(&r, 0, "read", "swap_ra");
        let hit = phase_vm(&r, 0, "read", "swap_ra_hit");
        // The window follows the direction of the faults (placed after
        // the fault going up, before it going down), so it stays at 8.
        assert_eq!(inn, maj + ra, "{order}");
        assert!(
            (inn as f64 / maj as f64) > 7.0,
            "{order}: pswpin {inn} majfault {maj}"
        );
        assert!(hit as f64 >= 0.98 * ra as f64, "{order}: ra {ra} hit {hit}");
    }
}

#[test]
fn vma_readahead_off_falls_back_to_cluster() {
    let knobs = "[sysfs]\n\"kernel/mm/swap/vma_ra_enabled\" = false";
    let up = run_checked(&spec("nvme", "", knobs, "seq"));
    let down = run_checked(&spec("nvme", "", knobs, "rev"));
    // Cluster readahead reads aligned blocks of slots, which serve a
    // descending walk as well as an ascending one.
    for r in [&up, &down] {
        let inn = phase_vm(r, 0, "read", "pswpin");
        let maj = phase_vm(r, 0, "read", "pgmajfault");
        assert!(
            (inn as f64 / maj as f64) > 7.0,
            "pswpin {inn} majfault {maj}"
        );
    }
}

#[test]
fn random_reads_shrink_the_window() {
    let r = run_checked(&spec("virtio", "", "", "shuffle"));
    let inn = phase_vm(&r, 0, "read", "pswpin");
    let maj = phase_vm(&r, 0, "read", "pgmajfault");
    let ra = phase_vm(&r, 0, "read", "swap_ra");
    let hit = phase_vm(&r, 0, "read", "swap_ra_hit");
    // Few readahead pages are used before reclaim takes them again, so
    // windows fall towards 1 page.
    assert!(
        (inn as f64 / maj as f64) < 2.0,
        "pswpin {inn} majfault {maj}"
    );
    assert!(hit < ra, "ra {ra} hit {hit}");
    let ones = r.histograms["swapin_nr_pages"]
        .iter()
        .find(|b| b.lo <= 1 && b.hi > 1)
        .map_or(0, |b| b.count);
    assert!(
        ones as f64 > 0.5 * maj as f64,
        "{:?}",
        r.histograms["swapin_nr_pages"]
    );
}

#[test]
fn writeback_completion_rotates_folios_for_reclaim() {
    let r = run_checked(&spec("nvme", "", "", "seq"));
    // Asynchronous writes: reclaim finds folios still under writeback
    // and marks them; their completion moves them to the inactive tail.
    assert!(vm(&r, "pgrotated") > 0);
    assert_eq!(vm(&r, "pswpout") * 4, vm(&r, "pgpgout"));
    // zram completes synchronously: nothing to rotate, no bios.
    let z = run_checked(&spec("zram", "", "", "seq"));
    assert_eq!(vm(&z, "pgrotated"), 0);
    assert_eq!(vm(&z, "pgpgout"), 0);
    assert_eq!(vm(&z, "pgpgin"), 0);
}

#[test]
fn swapin_waits_for_the_device() {
    let hdd = run_checked(&spec("hdd", "", "", "seq"));
    let nvme = run_checked(&spec(
        "nvme",
        "",
        "[sysfs]\n\"kernel/mm/swap/vma_ra_enabled\" = false",
        "seq",
    ));
    let read_ms = |r: &mmsim_sim::output::RunResult| {
        let p = r.tasks[0].phases.iter().find(|p| p.name == "read").unwrap();
        (p.end_ns - p.start_ns) as f64 / 1e6
    };
    // Per page read back, a rotating disk is far slower: it seeks
    // (12.7 ms) whenever a request does not continue the last one, and
    // transfers at 200 MB/s. (The page traffic itself differs: writes that
    // take longer are still in flight when reclaim comes back to them.)
    let per_page =
        |r: &mmsim_sim::output::RunResult| read_ms(r) / phase_vm(r, 0, "read", "pswpin") as f64;
    assert!(
        per_page(&hdd) > 3.0 * per_page(&nvme),
        "{} vs {} ms per page",
        per_page(&hdd),
        per_page(&nvme)
    );
    let major = &nvme.histograms["fault_latency_ns{kind=major}"];
    // Every major fault includes at least one 53 µs device read.
    assert!(
        major.iter().all(|b| b.hi > 53_000 || b.count == 0),
        "{major:?}"
    );
}

/// 64 MiB paged out with MADV_PAGEOUT to two zram devices of the given
/// priorities, then each device swapped off in turn: without readahead
/// (page-cluster 0) a swapoff reads exactly the pages its device holds.
fn two_devices(p0: &str, p1: &str) -> mmsim_sim::output::RunResult {
    run_checked(&format!(
        r#"
[machine]
memory = "512M"
[sysctl]
"vm.page-cluster" = 0
[[swap]]
device = "zram"
size = "256M"
{p0}
[[swap]]
device = "zram"
size = "256M"
{p1}
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "64M" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
  {{ op = "madvise", region = "heap", advice = "pageout" }},
  {{ op = "phase", name = "off0" }},
  {{ op = "swapoff", device = 0 }},
  {{ op = "phase", name = "off1" }},
  {{ op = "swapoff", device = 1 }},
]
"#
    ))
}

#[test]
fn device_priorities_order_and_share_slots() {
    // Swapping a device off reads back exactly the pages it holds.
    let held = |r: &mmsim_sim::output::RunResult| {
        (
            phase_vm(r, 0, "off0", "pswpin"),
            phase_vm(r, 0, "off1", "pswpin"),
        )
    };
    // The higher priority device takes everything while it has room.
    assert_eq!(
        held(&two_devices("priority = 5", "priority = 10")),
        (0, 16384)
    );
    // Default priorities decrease in swapon order: the first is used.
    assert_eq!(held(&two_devices("", "")), (16384, 0));
    // Equal priorities take turns, 64 slots (a slot-cache refill) at a time.
    let (a, b) = held(&two_devices("priority = 7", "priority = 7"));
    assert_eq!(a + b, 16384);
    assert!((a - b).abs() <= 64, "{a} vs {b}");
}

#[test]
fn concurrent_faults_on_one_entry_both_see_the_data() {
    // Parent and child on two CPUs read the same swapped-out pages (swap
    // entries shared by fork) at the same time from a virtio disk: one
    // starts the read, the other finds the locked folio in the swap cache
    // and waits for the same I/O.
    let r = run_checked(
        r#"
[machine]
memory = "512M"
cpus = 2
[[swap]]
device = "virtio"
size = "256M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "16M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "madvise", region = "heap", advice = "pageout" },
  { op = "sleep", duration = "50ms" },
  { op = "madvise", region = "heap", advice = "pageout" },
  { op = "fork", steps = [ { op = "touch", region = "heap" } ] },
  { op = "phase", name = "both" },
  { op = "touch", region = "heap" },
  { op = "wait" },
]
"#,
    );
    assert_eq!(r.integrity.pages_checked, 2 * 4096);
    assert_eq!(r.integrity.violations, 0);
    // Each page is read from the device once, whoever asked first.
    assert!(vm(&r, "pswpin") <= 4096, "pswpin {}", vm(&r, "pswpin"));
}

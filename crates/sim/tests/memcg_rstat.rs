//! The memcg statistics' rstat flush of 6.1 in whole runs
//! (mm/memcg_rstat.rs): memcg reclaim flushes, each flush costs the
//! profile's `memcg_rstat_flush` per memcg and CPU it folds, and other
//! releases' reclaim never flushes.

mod common;
use common::*;
use mmsim_sim::machine_profile::Costs;

const FLUSH: &str = "__mem_cgroup_flush_stats";

/// One task writing 48 MiB in a 32 MiB memcg, swapping to zram.
fn spec(kernel: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
kernel = "{kernel}"
[[swap]]
device = "zram"
size = "256M"
[cgroup.w]
memory_max = "32M"
[task.t]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "a", kind = "anon", size = "48M" }},
  {{ op = "touch", region = "a", write = 1.0 }},
]
"#
    )
}

#[test]
fn memcg_reclaim_flushes_the_memcg_and_the_root() {
    let r = run_checked(&spec("6.1"));
    let spent = r.profile.get(FLUSH).copied().unwrap_or(0);
    let fold = Costs::REFERENCE.memcg_rstat_flush;
    assert!(
        spent > 0,
        "prepare_scan_count flushes once the threshold passes"
    );
    // One CPU moves no line: the time is whole folds, each the memcg w
    // or the root on CPU 0.
    assert_eq!(spent % fold, 0, "{spent} ns is not whole folds of {fold}");
    // 16 MiB over the limit is 4096 pages reclaimed at least; each flush
    // needs two threshold steps (64 updates each, more than one CPU's
    // worth) and a page's reclaim makes several updates, so flushes are
    // far fewer than pages, and more than a few.
    let folds = spent / fold;
    assert!((10..4096).contains(&folds), "{folds} folds");
}

#[test]
fn reclaim_flushes_only_in_6_1() {
    // 5.10 has no flush. 6.12's and 7.3's reclaim flushes only when the
    // 2-second worker is a whole period late, which it never is while a
    // CPU is busy; the worker's own flushes are a kworker's time.
    for kernel in ["5.10", "6.12", "7.3"] {
        let r = run_checked(&spec(kernel));
        assert_eq!(r.profile.get(FLUSH).copied().unwrap_or(0), 0, "{kernel}");
    }
}

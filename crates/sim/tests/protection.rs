//! memory.min and memory.low (6.1's shrink_node_memcgs, get_scan_count's
//! proportional protection and do_try_to_free_pages' retry).

mod common;
use common::run_checked;
use mmsim_sim::output::RunResult;

/// Two sibling cgroups on a 256 MiB machine with zram: `a` writes 96 MiB
/// (with `a_extra` in its table), then `b` writes 160 MiB; then `a`
/// reads its memory back. Global reclaim (kswapd, direct) takes what it
/// needs from both unless `a` is protected.
fn siblings(a_extra: &str) -> RunResult {
    siblings_on(
        "6.1",
        a_extra,
        r#"{ op = "touch", region = "heap", write = 0.0 }"#,
    )
}

/// `siblings` on `kernel`'s preset, `a`'s last step `a_last` (after its
/// second of sleep).
fn siblings_on(kernel: &str, a_extra: &str, a_last: &str) -> RunResult {
    run_checked(&format!(
        r#"
[machine]
memory = "256M"
kernel = "{kernel}"
[[swap]]
device = "zram"
size = "512M"
[cgroup.a]
{a_extra}
[cgroup.b]
[task.a]
cgroup = "a"
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "96M" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
  {{ op = "sleep", duration = "1s" }},
  {a_last},
]
[task.b]
cgroup = "b"
steps = [
  {{ op = "sleep", duration = "100ms" }},
  {{ op = "mmap", name = "heap", kind = "anon", size = "160M" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
]
"#
    ))
}

fn stat(r: &RunResult, cg: &str, k: &str) -> i64 {
    r.cgroups[cg].memory_stat[k]
}

/// Unprotected, `a` loses pages to `b`'s growth; with memory.low above
/// its usage it loses none while `b` has reclaimable memory, and no low
/// event is counted (the protection was never breached).
#[test]
fn memory_low_shields_a_sibling_while_the_other_has_reclaimable_memory() {
    let open = siblings("");
    assert!(
        stat(&open, "a", "pgsteal") > 1000,
        "{}",
        stat(&open, "a", "pgsteal")
    );
    let low = siblings("memory_low = \"128M\"");
    assert!(
        stat(&low, "a", "pgsteal") * 10 < stat(&open, "a", "pgsteal"),
        "protected {} open {}",
        stat(&low, "a", "pgsteal"),
        stat(&open, "a", "pgsteal")
    );
    assert!(stat(&low, "b", "pgsteal") > stat(&open, "b", "pgsteal"));
    assert_eq!(low.cgroups["a"].memory_events["low"], 0);
    // Fewer of a's pages to read back.
    assert!(stat(&low, "a", "pgmajfault") < stat(&open, "a", "pgmajfault"));
}

/// memory.low below the usage still scales the scan down in proportion
/// (get_scan_count): `a` loses fewer pages than unprotected, some still.
#[test]
fn memory_low_below_the_usage_scales_reclaim_down() {
    let open = siblings("");
    let part = siblings("memory_low = \"48M\"");
    let (p, o) = (stat(&part, "a", "pgsteal"), stat(&open, "a", "pgsteal"));
    assert!(p < o, "partly protected {p} open {o}");
}

/// memory.min is hard: nothing of `a` is reclaimed even when the rest of
/// the machine runs short.
#[test]
fn memory_min_is_never_breached() {
    let r = siblings("memory_min = \"128M\"");
    assert_eq!(stat(&r, "a", "pgsteal"), 0);
    assert_eq!(stat(&r, "a", "pgscan"), 0);
}

/// 6.1 reads a reclaim target's own effective protection as the last
/// reclaim from above left it: after global reclaim computed `a`'s
/// memory.low, lowering `a`'s memory.max reclaims from `a` only on the
/// retry that breaches the protection (memory.events low). 6.12 (6.3's
/// fix) gives the target no protection: no low event.
#[test]
fn on_6_1_a_limit_reclaim_reads_the_targets_stale_protection() {
    let run = |kernel: &str| {
        siblings_on(
            kernel,
            "memory_low = \"128M\"",
            r#"{ op = "set", key = "cgroup.a.memory_max", value = "64M" }"#,
        )
    };
    let old = run("6.1");
    assert!(old.cgroups["a"].memory_events["low"] > 0);
    assert!(stat(&old, "a", "pgsteal") >= 8192);
    let new = run("6.12");
    assert_eq!(new.cgroups["a"].memory_events["low"], 0);
    assert!(stat(&new, "a", "pgsteal") >= 8192);
}

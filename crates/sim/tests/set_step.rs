//! The `set` step: a knob written at a point of the steps does what the
//! kernel's write handler does there.

mod common;
use common::*;

/// 100 MiB written in cgroup w, whose limit is then set to 50 MiB, and
/// later to "max" again.
const LIMITED_STEPS: &str = r#"
  { op = "mmap", name = "heap", kind = "anon", size = "100M" },
  { op = "touch", region = "heap", write = 1.0 },
  { op = "phase", name = "shrink" },
  { op = "set", key = "cgroup.w.memory_max", value = "50M" },
  { op = "phase", name = "limited" },
  { op = "touch", region = "heap", write = 0 },
  { op = "phase", name = "raise" },
  { op = "set", key = "cgroup.w.memory_max", value = "max" },
  { op = "phase", name = "free" },
  { op = "touch", region = "heap", write = 0 },
"#;

/// memory_max_write reclaims down to the new limit at once; raising it
/// again lets every page back in without swapping any out.
#[test]
fn lowering_memory_max_reclaims_down_to_it() {
    let r = run_checked(&memcg_spec("max", "", LIMITED_STEPS));
    let limit = (50 << 20) / 4096;
    // 25600 pages written; the write leaves at most 12800 charged, page
    // tables included, so at least 12800 − 256 anon pages go to swap.
    let out = phase_vm(&r, 0, "shrink", "pswpout");
    assert!((12_800 - 256..=25_600).contains(&out), "{out}");
    assert_eq!(
        phase_vm(&r, 0, "shrink", "pgfault"),
        0,
        "no fault: the write reclaims"
    );
    // Under the limit the read-back swaps pages in and others out.
    assert!(phase_vm(&r, 0, "limited", "pswpin") >= out - 256);
    assert!(phase_vm(&r, 0, "limited", "pswpout") > 0);
    // No limit: pages come back and none goes out.
    assert_eq!(phase_vm(&r, 0, "raise", "pswpout"), 0);
    assert_eq!(phase_vm(&r, 0, "free", "pswpout"), 0);
    assert!(phase_vm(&r, 0, "free", "pswpin") > 0);
    let cg = &r.cgroups["w"];
    assert!(cg.memory_current > limit * 4096, "everything is back in");
    assert_eq!(r.integrity.violations, 0);
}

/// vm.page-cluster = 0 turns swap readahead off from that step on (shared
/// anon memory: shmem swaps in through the swap cache with readahead,
/// where private anon on zram skips both).
#[test]
fn page_cluster_set_to_zero_stops_swap_readahead() {
    let spec = |set: &str| {
        format!(
            r#"
[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "256M"
[task.t]
steps = [
  {{ op = "mmap", name = "heap", kind = "shared_anon", size = "64M" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
  {{ op = "madvise", region = "heap", advice = "pageout" }},
  {set}
  {{ op = "phase", name = "read" }},
  {{ op = "touch", region = "heap", write = 0 }},
]
"#
        )
    };
    let before = run_checked(&spec(""));
    let after = run_checked(&spec(
        r#"{ op = "set", key = 'sysctl."vm.page-cluster"', value = 0 },"#,
    ));
    assert!(phase_vm(&before, 0, "read", "swap_ra") > 0);
    assert_eq!(phase_vm(&after, 0, "read", "swap_ra"), 0);
    assert_eq!(
        phase_vm(&after, 0, "read", "pswpin"),
        phase_vm(&before, 0, "read", "pswpin"),
        "every page still comes back"
    );
}

/// A limit reclaim cannot reach (no swap): memory_max_write's reclaims
/// free nothing, so the memcg OOM killer runs and kills the writer, the
/// cgroup's only task; the write itself takes effect.
#[test]
fn a_limit_below_what_reclaim_can_reach_oom_kills_the_writer() {
    let with_swap = memcg_spec("max", "", LIMITED_STEPS);
    let text = with_swap.replace("[[swap]]\ndevice = \"zram\"\nsize = \"512M\"\n", "");
    assert_ne!(text, with_swap, "the swap device is gone");
    let r = run_checked(&text);
    let t = &r.tasks[0];
    let kill = t.oom_kill.as_ref().expect("the writer is killed");
    assert_eq!(kill.oom_memcg.as_deref(), Some("w"), "{kill:?}");
    // Its whole heap was still there: 25,600 pages.
    assert_eq!(kill.anon_rss_kb, Some(100 << 10), "{kill:?}");
    // The phase the write ran in never ended, and none began after it.
    assert!(t.phases.is_empty(), "{:?}", t.phases);
    // memory_max_write raises no max event; one OOM, one kill.
    let ev = &r.cgroups["w"].memory_events;
    assert_eq!((ev["max"], ev["oom"], ev["oom_kill"]), (0, 1, 1), "{ev:?}");
    assert_eq!(vm(&r, "oom_kill"), 1);
}

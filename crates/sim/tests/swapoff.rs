//! swapoff: try_to_unuse brings every page back, maps it read-only and
//! old, frees every slot; 6.1 looks in the swap cache before reading
//! (seed 004), so readahead hits are counted and windows stay large.

mod common;
use common::*;

/// Global reclaim pushes part of `a` out while `b` is written; `b` goes,
/// and swapoff brings `a`'s pages back (as fidelity/swapoff_*.toml).
fn spec(device: &str, rotational: &str, extra: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
[[swap]]
device = "{device}"
size = "1G"
{rotational}
[task.main]
steps = [
  {{ op = "mmap", name = "a", kind = "anon", size = "200M" }},
  {{ op = "mmap", name = "b", kind = "anon", size = "300M" }},
  {{ op = "phase", name = "fill" }},
  {{ op = "touch", region = "a", order = "seq", write = 1.0 }},
  {{ op = "touch", region = "b", order = "seq", write = 1.0 }},
  {{ op = "munmap", region = "b" }},
  {extra}
  {{ op = "phase", name = "swapoff" }},
  {{ op = "swapoff", device = 0 }},
  {{ op = "phase", name = "check" }},
  {{ op = "touch", region = "a", order = "seq" }},
]
"#
    )
}

fn phase_ms(r: &mmsim_sim::output::RunResult, name: &str) -> f64 {
    let p = r.tasks[0].phases.iter().find(|p| p.name == name).unwrap();
    (p.end_ns - p.start_ns) as f64 / 1e6
}

#[test]
fn swapoff_brings_every_page_back() {
    for dev in ["virtio", "nvme", "zram"] {
        let r = match try_run(&spec(dev, "", "")) {
            Ok(r) => r,
            Err(e) => panic!("{dev}: {e}"),
        };
        let back = phase_vm(&r, 0, "swapoff", "pswpin");
        assert!(back > 10_000, "{dev}: only {back} pages swapped in");
        // Every page comes back in swapoff, without a fault.
        assert_eq!(phase_vm(&r, 0, "swapoff", "pgfault"), 0, "{dev}");
        // Mapped (read-only): reading them faults no more, and each read
        // sees what was written.
        assert_eq!(phase_vm(&r, 0, "check", "pgfault"), 0, "{dev}");
        assert_eq!(r.integrity.pages_checked, 51200, "{dev}");
        assert_eq!(r.integrity.violations, 0);
    }
}

#[test]
fn readahead_stats_keep_windows_large_and_swapoff_fast() {
    let base = spec("virtio", "", "");
    let on = run_checked(&base);
    let off = run_checked(&base.replace(
        "[machine]",
        "[features]\nswapoff_readahead_stats = false\n[machine]",
    ));
    let (on_hit, off_hit) = (
        phase_vm(&on, 0, "swapoff", "swap_ra_hit"),
        phase_vm(&off, 0, "swapoff", "swap_ra_hit"),
    );
    // Without the lookup first, swapoff never counts a hit itself.
    assert_eq!(off_hit, 0);
    assert!(on_hit > 0);
    assert_eq!(
        phase_vm(&on, 0, "swapoff", "pswpin"),
        phase_vm(&off, 0, "swapoff", "pswpin")
    );
    // Without hits the window shrinks to 1-2 pages, each read waited for:
    // swapoff takes longer.
    assert!(
        phase_ms(&off, "swapoff") > 1.5 * phase_ms(&on, "swapoff"),
        "{} vs {}",
        phase_ms(&off, "swapoff"),
        phase_ms(&on, "swapoff")
    );
    let small = |r: &mmsim_sim::output::RunResult| -> f64 {
        let h = &r.histograms["swapin_nr_pages"];
        let total: u64 = h.iter().map(|b| b.count).sum();
        let le2: u64 = h.iter().filter(|b| b.lo <= 2).map(|b| b.count).sum();
        le2 as f64 / total as f64
    };
    assert!(small(&off) > 0.8, "{:?}", off.histograms["swapin_nr_pages"]);
    assert!(small(&on) < 0.5, "{:?}", on.histograms["swapin_nr_pages"]);
}

#[test]
fn swapoff_of_shared_entries_after_fork() {
    let extra = r#"{ op = "fork", steps = [ { op = "sleep", duration = "10s" }, { op = "touch", region = "a" } ] },"#;
    // The child shares a's swap entries; it reads them after swapoff.
    let r = run_checked(&spec("virtio", "", extra));
    // The child still holds the swap entries when the parent turns swap
    // off: every mm on the mmlist is walked, both get their pages back.
    assert!(phase_vm(&r, 0, "swapoff", "pswpin") > 0);
    assert_eq!(r.tasks[1].name, "main/fork0");
    assert_eq!(r.integrity.violations, 0);
}

#[test]
fn swapoff_twice_is_an_error_and_swapon_restores() {
    let text = spec("zram", "", "")
        .replace(
            "{ op = \"swapoff\", device = 0 },",
            "{ op = \"swapoff\", device = 0 }, { op = \"swapon\", device = 0 }, { op = \"swapoff\", device = 0 },",
        );
    run_checked(&text);
    let bad = spec("zram", "", "").replace(
        "{ op = \"swapoff\", device = 0 },",
        "{ op = \"swapoff\", device = 0 }, { op = \"swapoff\", device = 0 },",
    );
    let e = try_run(&bad).unwrap_err().to_string();
    assert!(e.contains("not on") && e.contains("line"), "{e}");
}

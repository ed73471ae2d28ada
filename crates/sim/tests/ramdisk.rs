//! Files on a RAM disk (`[[disk]]` device "ram", the kernel's brd): a bio
//! is copied page by page on the submitting CPU (`brd_submit_bio`,
//! COPY_PAGE_NS a page) and completes before submit_bio returns, so reads
//! and writes never wait for a device; the event counters are those of any
//! disk (pgpgin, pgpgout, pgmajfault for a page-cache miss); the disk's
//! blocks are memory the kernel holds from the start. Every run checks the
//! invariants at each phase and every read its page's contents.

mod common;
use common::*;
use mmsim_sim::cost_model::COPY_PAGE_NS;
use mmsim_sim::output::RunResult;

/// 16 MiB = 4096 pages.
const PAGES: i64 = 4096;

fn spec(device: &str, fs: &str, max: &str, steps: &str) -> String {
    let size = if fs == "xfs" { "300M" } else { "64M" };
    format!(
        r#"
[machine]
memory = "512M"
[[disk]]
name = "d"
device = "{device}"
size = "{size}"
fs = "{fs}"
[[file]]
name = "f"
size = "16M"
on = "d"
[cgroup.w]
memory_max = "{max}"
[task.main]
cgroup = "w"
steps = [
{steps}
]
"#
    )
}

fn phase_ns(r: &RunResult, phase: &str) -> u64 {
    let p = r.tasks[0]
        .phases
        .iter()
        .find(|p| p.name == phase)
        .expect("phase");
    p.end_ns - p.start_ns
}

fn profile(r: &RunResult, f: &str) -> u64 {
    r.profile.get(f).copied().unwrap_or(0)
}

/// Simulated CPU time charged over the whole run, every function.
fn cpu_ns(r: &RunResult) -> u64 {
    r.profile.values().sum()
}

#[test]
fn a_read_costs_the_copy_and_waits_for_nothing() {
    let steps = r#"
  { op = "phase", name = "read" },
  { op = "read", file = "f" },
"#;
    for fs in ["xfs", "ext2"] {
        let ram = run_checked(&spec("ram", fs, "max", steps));
        let nvme = run_checked(&spec("nvme", fs, "max", steps));
        for r in [&ram, &nvme] {
            assert_eq!(phase_vm(r, 0, "read", "pgpgin"), PAGES * 4, "{fs}");
            assert_eq!(phase_vm(r, 0, "read", "nr_file_pages"), PAGES, "{fs}");
            assert_eq!(phase_vm(r, 0, "read", "pgmajfault"), 0, "{fs}");
        }
        // brd copies every page once, on the reading task's CPU.
        assert_eq!(
            profile(&ram, "brd_submit_bio"),
            PAGES as u64 * COPY_PAGE_NS,
            "{fs}"
        );
        assert_eq!(profile(&nvme, "brd_submit_bio"), 0, "{fs}");
        // The phase is CPU time only: brd's copy and read(2)'s own copy to
        // user space at least, and no sleep for a device.
        let t = phase_ns(&ram, "read");
        assert!(t >= 2 * PAGES as u64 * COPY_PAGE_NS, "{fs}: {t}");
        assert_eq!(ram.tasks[0].end_ns, cpu_ns(&ram), "{fs}: never slept");
        // An NVMe disk makes the same reads wait (53 µs a request).
        assert!(nvme.tasks[0].end_ns > cpu_ns(&nvme), "{fs}");
    }
}

#[test]
fn a_mapped_miss_is_a_major_fault_and_retries_without_sleeping() {
    // MADV_RANDOM: no readahead, so every page is a miss that
    // filemap_read_folio reads, synchronously on brd; 6.1 still returns
    // VM_FAULT_RETRY after dropping the mmap lock for the I/O, so each miss
    // counts two faults.
    let r = run_checked(&spec(
        "ram",
        "xfs",
        "max",
        r#"
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "madvise", region = "m", advice = "random" },
  { op = "phase", name = "touch" },
  { op = "touch", region = "m", order = "seq", write = 0.0 },
"#,
    ));
    assert_eq!(phase_vm(&r, 0, "touch", "pgmajfault"), PAGES);
    assert_eq!(phase_vm(&r, 0, "touch", "pgfault"), 2 * PAGES);
    assert_eq!(phase_vm(&r, 0, "touch", "pgpgin"), PAGES * 4);
    assert_eq!(profile(&r, "brd_submit_bio"), PAGES as u64 * COPY_PAGE_NS);
    assert_eq!(r.tasks[0].end_ns, cpu_ns(&r), "the task never slept");
    // No major fault waits for a device: each costs its CPU work only.
    let major = &r.histograms["fault_latency_ns{kind=major}"];
    let slowest = major.iter().filter(|b| b.count > 0).map(|b| b.hi).max();
    assert!(slowest.unwrap() <= 16 << 10, "{major:?}");

    // With readahead a sequential pass misses once, as on the real kernel
    // (a 64 MiB file on a brd XFS disk: 1 major fault, ~1540 faults).
    let r = run_checked(&spec(
        "ram",
        "xfs",
        "max",
        r#"
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "phase", name = "touch" },
  { op = "touch", region = "m", order = "seq", write = 0.0 },
"#,
    ));
    assert_eq!(phase_vm(&r, 0, "touch", "pgmajfault"), 1);
    assert_eq!(phase_vm(&r, 0, "touch", "pgpgin"), PAGES * 4);
    let faults = phase_vm(&r, 0, "touch", "pgfault");
    assert!(faults > PAGES / 16 && faults < PAGES / 4, "{faults}");
}

#[test]
fn writes_reach_the_disk_at_once_and_read_back() {
    // Written through read/write and a shared mapping, fsynced, dropped
    // from the cache, read again: every page's contents come back from the
    // disk (run_checked checks each read), and nothing is ever left under
    // writeback.
    for fs in ["xfs", "ext2"] {
        let r = run_checked(&spec(
            "ram",
            fs,
            "max",
            r#"
  { op = "phase", name = "write" },
  { op = "write", file = "f" },
  { op = "phase", name = "fsync" },
  { op = "fsync", file = "f" },
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "phase", name = "mapped" },
  { op = "touch", region = "m", order = "shuffle", write = 0.5 },
  { op = "fsync", file = "f" },
  { op = "munmap", region = "m" },
  { op = "phase", name = "drop" },
  { op = "drop_caches" },
  { op = "phase", name = "reread" },
  { op = "read", file = "f" },
"#,
        ));
        assert_eq!(phase_vm(&r, 0, "fsync", "pgpgout"), PAGES * 4, "{fs}");
        assert_eq!(phase_vm(&r, 0, "fsync", "nr_written"), PAGES, "{fs}");
        assert_eq!(phase_vm(&r, 0, "fsync", "nr_writeback"), 0, "{fs}");
        assert!(phase_vm(&r, 0, "mapped", "pgpgout") > 0, "{fs}");
        // drop_caches leaves what it cannot drop (a folio still in a
        // per-CPU LRU batch holds a reference): nearly all is read again.
        let reread = phase_vm(&r, 0, "reread", "pgpgin");
        assert!(
            reread > (PAGES - 16) * 4 && reread <= PAGES * 4,
            "{fs}: {reread}"
        );
        assert_eq!(vm(&r, "nr_writeback"), 0, "{fs}");
        assert_eq!(vm(&r, "nr_dirty"), 0, "{fs}");
        // The fsync of a whole dirty file: brd copies each page once.
        assert!(phase_ns(&r, "fsync") >= PAGES as u64 * COPY_PAGE_NS, "{fs}");
        // Reads through the mapping (half the accesses) and the reread.
        let checked = r.integrity.pages_checked;
        assert!(checked >= PAGES as u64 * 4 / 3, "{fs}: {checked}");
    }
}

#[test]
fn memcg_reclaim_refaults_from_a_ram_disk() {
    // A 16 MiB file through an 8 MiB cgroup, mapped and read: reclaim
    // drops clean pages (and writes nothing: only the flushers do),
    // refaults read them back from brd, and MADV_PAGEOUT splits XFS's large
    // folios as on any disk.
    let r = run_checked(&spec(
        "ram",
        "xfs",
        "8M",
        r#"
  { op = "mmap", name = "m", kind = "file_private", file = "f", size = "16M" },
  { op = "phase", name = "first" },
  { op = "touch", region = "m", order = "seq", write = 0.0 },
  { op = "phase", name = "second" },
  { op = "touch", region = "m", order = "seq", write = 0.0 },
  { op = "phase", name = "pageout" },
  { op = "madvise", region = "m", advice = "pageout" },
  { op = "phase", name = "write" },
  { op = "touch", region = "m", order = "shuffle", length = "2M", write = 1.0 },
  { op = "touch", region = "m", order = "seq", write = 0.0 },
"#,
    ));
    assert!(phase_vm(&r, 0, "second", "workingset_refault_file") > PAGES / 2);
    assert!(phase_vm(&r, 0, "second", "pgsteal_file") > PAGES / 2);
    assert_eq!(vm(&r, "pgpgout"), 0);
    assert!(vm(&r, "thp_split_page") > 0);
    assert!(vm(&r, "pgpgin") >= PAGES * 8);
}

#[test]
fn the_disk_holds_memory_from_the_start() {
    let steps = r#"{ op = "phase", name = "p" },"#;
    // Free pages at start, to within what the per-CPU lists hold back.
    let held = |fs: &str| {
        let free = |device: &str| {
            run_checked(&spec(device, fs, "max", steps))
                .machine
                .mem_free_at_start_bytes as i64
                / 4096
        };
        free("nvme") - free("ram")
    };
    // XFS on 300 MiB: the 64 MiB log mkfs.xfs zeroes, 1 MiB more, and the
    // 16 MiB file.
    let xfs = held("xfs");
    assert!((xfs - (16384 + 256 + 4096)).abs() < 64, "{xfs}");
    // ext2 on 64 MiB: 1265 + 2.7 × 64 pages of metadata, 4 indirect blocks
    // and the file.
    let ext2 = held("ext2");
    assert!((ext2 - (1265 + 172 + 4 + 4096)).abs() < 64, "{ext2}");
}

#[test]
fn a_ram_disk_larger_than_memory_is_refused() {
    let text = r#"
[machine]
memory = "512M"
[[disk]]
name = "d"
device = "ram"
size = "1G"
[[file]]
name = "f"
size = "480M"
on = "d"
[task.main]
steps = []
"#;
    let e = try_run(text).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, mmsim_sim::SimError::At { line: 3, .. }),
        "{msg}"
    );
    assert_eq!(e.exit_code(), 2);
    for m in ["machine.memory", "found 512 MiB", "RAM disks", "hold 4"] {
        assert!(msg.contains(m), "{m}: {msg}");
    }
}

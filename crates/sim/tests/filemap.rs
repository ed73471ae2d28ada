//! Files on disks: the page cache read with readahead (read(2) and mmap
//! faults), fault-around, writes, dirty accounting and writeback, reclaim
//! of clean file pages with shadow entries and refaults, private file
//! mappings copying on write, drop_caches, and the used-once rule of
//! `folio_check_references` (seed 002's feature flag). Every read checks
//! its page's contents against what was last written (run_checked fails on
//! a violation), and the invariant checker runs at every phase mark.

mod common;
use common::*;

/// 16 MiB = 4096 pages.
const PAGES: i64 = 4096;

#[test]
fn read_syscalls_read_the_file_once_with_readahead() {
    let r = run_checked(&disk(
        "max",
        r#"
  { op = "phase", name = "cold" },
  { op = "read", file = "f" },
  { op = "phase", name = "warm" },
  { op = "read", file = "f" },
"#,
    ));
    // Every page comes from the disk once (pgpgin in KiB), by readahead:
    // read(2) counts no fault at all.
    assert_eq!(phase_vm(&r, 0, "cold", "pgpgin"), PAGES * 4);
    assert_eq!(phase_vm(&r, 0, "cold", "pgmajfault"), 0);
    assert_eq!(phase_vm(&r, 0, "cold", "nr_file_pages"), PAGES);
    // The second pass finds everything cached and activates every page
    // (the first pass set PG_referenced, the second promotes).
    assert_eq!(phase_vm(&r, 0, "warm", "pgpgin"), 0);
    // (A page still in the CPU's lru_add batch is made active there,
    // uncounted: __lru_cache_activate_folio.)
    let act = phase_vm(&r, 0, "warm", "pgactivate");
    assert!((PAGES - 15..=PAGES).contains(&act), "{act}");
    assert_eq!(r.integrity.pages_checked, 2 * PAGES as u64);
}

#[test]
fn a_sequential_mapping_takes_one_major_fault() {
    let r = run_checked(&disk(
        "max",
        r#"
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "phase", name = "read" },
  { op = "touch", region = "m" },
"#,
    ));
    // Read-around brings the first window; every later window is already
    // in the cache (async readahead at each PG_readahead mark) when the
    // fault reaches it, so only the first fault is major.
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 1);
    assert_eq!(phase_vm(&r, 0, "read", "pgpgin"), PAGES * 4);
    // Fault-around maps up to 16 pages per fault.
    let faults = phase_vm(&r, 0, "read", "pgfault");
    assert!((PAGES / 16..PAGES / 4).contains(&faults), "{faults} faults");
    assert_eq!(phase_vm(&r, 0, "read", "nr_mapped"), PAGES);
}

#[test]
fn madv_random_reads_one_page_per_fault() {
    let r = run_checked(&disk(
        "max",
        r#"
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "madvise", region = "m", advice = "random" },
  { op = "phase", name = "read" },
  { op = "touch", region = "m", count = 256 },
"#,
    ));
    // No readahead, no fault-around help (nothing else is cached): each
    // page is a major fault, which waits for its read and retries.
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 256);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 512);
    assert_eq!(phase_vm(&r, 0, "read", "pgpgin"), 256 * 4);
}

#[test]
fn clean_file_pages_are_reclaimed_and_refault_under_a_limit() {
    let r = run_checked(&disk(
        "8M",
        r#"
  { op = "phase", name = "one" },
  { op = "read", file = "f" },
  { op = "phase", name = "two" },
  { op = "read", file = "f" },
"#,
    ));
    // The file is twice the limit: the second pass finds none of it and
    // every page refaults, too far back to be activated.
    assert_eq!(phase_vm(&r, 0, "two", "pgpgin"), PAGES * 4);
    assert_eq!(phase_vm(&r, 0, "two", "workingset_refault_file"), PAGES);
    assert!(phase_vm(&r, 0, "two", "pgsteal_file") > PAGES / 2);
    // Clean pages need no I/O to go.
    assert_eq!(vm(&r, "pgpgout"), 0);
    assert_eq!(vm(&r, "pswpout"), 0);
    let cg = &r.cgroups["w"];
    assert!(cg.memory_current <= 8 << 20, "{}", cg.memory_current);
}

#[test]
fn writes_are_dirty_until_fsync_writes_them_back() {
    let r = run_checked(&disk(
        "max",
        r#"
  { op = "phase", name = "write" },
  { op = "write", file = "f", length = "4M" },
  { op = "phase", name = "fsync" },
  { op = "fsync", file = "f" },
  { op = "phase", name = "drop" },
  { op = "drop_caches" },
  { op = "phase", name = "reread" },
  { op = "read", file = "f", length = "4M" },
"#,
    ));
    let n = PAGES / 4;
    // A whole-page write reads nothing and dirties the page.
    assert_eq!(phase_vm(&r, 0, "write", "pgpgin"), 0);
    assert_eq!(phase_vm(&r, 0, "write", "nr_dirtied"), n);
    assert_eq!(phase_vm(&r, 0, "write", "nr_dirty"), n);
    // fsync writes each page once and waits for the writes.
    assert_eq!(phase_vm(&r, 0, "fsync", "pgpgout"), n * 4);
    assert_eq!(phase_vm(&r, 0, "fsync", "nr_written"), n);
    assert_eq!(phase_vm(&r, 0, "fsync", "nr_dirty"), -n);
    assert_eq!(phase_vm(&r, 0, "fsync", "nr_writeback"), 0);
    // Clean now, they drop; the re-read gets the written data from the
    // disk (the integrity check holds it to the last write).
    assert!(phase_vm(&r, 0, "drop", "nr_file_pages") <= -(n - 15));
    // (Readahead runs up to a window past the range read.)
    let pgpgin = phase_vm(&r, 0, "reread", "pgpgin");
    assert!((n * 4..=(n + 32) * 4).contains(&pgpgin), "{pgpgin}");
    assert_eq!(r.integrity.pages_checked, n as u64);
}

#[test]
fn dirty_pages_under_pressure_are_written_by_the_flusher() {
    // 16 MiB written under an 8 MiB limit, never fsynced: reclaim finds
    // only dirty pages, activates them for the flushers, wakes them; the
    // data survives eviction and reads back intact.
    let r = run_checked(&disk(
        "8M",
        r#"
  { op = "phase", name = "write" },
  { op = "write", file = "f" },
  { op = "phase", name = "read" },
  { op = "read", file = "f" },
"#,
    ));
    assert!(vm(&r, "nr_vmscan_immediate_reclaim") > 0);
    assert!(vm(&r, "pgpgout") >= PAGES * 4 / 2);
    assert_eq!(vm(&r, "pswpout"), 0);
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
}

#[test]
fn private_file_mappings_copy_on_write_and_leave_the_file_alone() {
    let r = run_checked(&disk(
        "max",
        r#"
  { op = "mmap", name = "p", kind = "file_private", file = "f", size = "16M" },
  { op = "phase", name = "cow" },
  { op = "touch", region = "p", count = 1024, write = 1.0 },
  { op = "phase", name = "fork" },
  { op = "fork", steps = [
    { op = "touch", region = "p", count = 2048 },
  ] },
  { op = "wait" },
  { op = "phase", name = "file" },
  { op = "read", file = "f" },
  { op = "madvise", region = "p", advice = "dontneed" },
  { op = "touch", region = "p", count = 1024 },
"#,
    ));
    // Each write copies the file page (read in first: a fault on a page
    // not cached is a major fault) into an anon page.
    assert_eq!(phase_vm(&r, 0, "cow", "nr_anon_pages"), 1024);
    // The child reads the parent's copies and the file's other pages; the
    // file, read(2) afterwards, still has its old contents; after
    // MADV_DONTNEED the mapping reads the file again.
    assert_eq!(r.integrity.pages_checked, 2048 + PAGES as u64 + 1024);
    assert_eq!(vm(&r, "nr_dirtied"), 0);
    assert_eq!(vm(&r, "pgpgout"), 0);
}

#[test]
fn shared_file_writes_dirty_through_a_write_fault() {
    let r = run_checked(&disk(
        "max",
        r#"
  { op = "mmap", name = "m", kind = "file", file = "f", size = "16M" },
  { op = "phase", name = "read" },
  { op = "touch", region = "m" },
  { op = "phase", name = "write" },
  { op = "touch", region = "m", write = 1.0 },
  { op = "phase", name = "sync" },
  { op = "fsync", file = "f" },
  { op = "phase", name = "again" },
  { op = "touch", region = "m", write = 1.0, count = 100 },
"#,
    ));
    // Read faults map read-only; the first write to each page faults to
    // make it writable and dirty (wp_page_shared: pgreuse).
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), PAGES);
    assert_eq!(phase_vm(&r, 0, "write", "pgreuse"), PAGES);
    assert_eq!(phase_vm(&r, 0, "write", "nr_dirty"), PAGES);
    assert_eq!(phase_vm(&r, 0, "sync", "pgpgout"), PAGES * 4);
    // Writeback write-protected the PTEs again: the next write faults.
    assert_eq!(phase_vm(&r, 0, "again", "pgfault"), 100);
    assert_eq!(phase_vm(&r, 0, "again", "nr_dirtied"), 100);
}

/// A hot mapped file re-read between chunks of a streamed one, on a small
/// machine: with the used-once rule (6.1) the streamed pages are not
/// activated by their one reference; without it (before seed 002) a
/// referenced page of a file someone maps is activated when reclaim first
/// meets it, and the streamed file is always mapped.
fn stream_with_hot(used_once: bool, exec: bool) -> mmsim_sim::output::RunResult {
    run_checked(&format!(
        r#"
[machine]
memory = "256M"
[features]
used_once_mapped_file = {used_once}
[[disk]]
name = "d"
device = "virtio"
size = "512M"
[[file]]
name = "big"
size = "384M"
on = "d"
[[file]]
name = "hot"
size = "16M"
on = "d"
[task.main]
steps = [
  {{ op = "mmap", name = "hot", kind = "file", file = "hot", size = "16M", exec = {exec} }},
  {{ op = "touch", region = "hot" }},
  {{ op = "stream", file = "big", offset = "0", length = "96M" }},
  {{ op = "touch", region = "hot" }},
  {{ op = "stream", file = "big", offset = "96M", length = "96M" }},
  {{ op = "touch", region = "hot" }},
  {{ op = "stream", file = "big", offset = "192M", length = "96M" }},
  {{ op = "touch", region = "hot" }},
  {{ op = "stream", file = "big", offset = "288M", length = "96M" }},
  {{ op = "touch", region = "hot" }},
]
"#
    ))
}

#[test]
fn used_once_mapped_pages_stay_inactive() {
    let on = stream_with_hot(true, false);
    let off = stream_with_hot(false, false);
    // Both read the big file through reclaim; before seed 002 reclaim
    // activates the streamed pages it finds referenced, so it activates
    // far more and scans the active list to make room.
    assert!(vm(&on, "pgsteal_file") > 40_000);
    assert!(
        vm(&off, "pgactivate") > 2 * vm(&on, "pgactivate"),
        "off {} on {}",
        vm(&off, "pgactivate"),
        vm(&on, "pgactivate")
    );
    // The hot file's pages survive the stream with the rule: they are
    // referenced at every re-read and get activated. Without it the
    // active list fills with streamed pages and the hot file is evicted.
    assert!(vm(&on, "workingset_refault_file") < 1000);
    assert!(vm(&off, "workingset_refault_file") > PAGES / 2);
}

#[test]
fn executable_file_pages_are_activated_on_first_reference() {
    let data = stream_with_hot(true, false);
    let text = stream_with_hot(true, true);
    // VM_EXEC: reclaim activates a referenced executable page at once,
    // which for the hot file is every page, every time it is found
    // referenced on the inactive list.
    assert!(vm(&text, "pgactivate") >= vm(&data, "pgactivate"));
    assert!(vm(&text, "workingset_refault_file") <= vm(&data, "workingset_refault_file"));
}

/// Windows clipped at the end of the file: whatever the file's length,
/// a sequential mapping reads each page once, with one major fault (the
/// clipped async window may be shorter than its lookahead, which then
/// marks no page, as the kernel's unsigned `nr_to_read - lookahead_size`).
#[test]
fn readahead_windows_clipped_at_the_end_of_the_file() {
    for pages in [37u64, 129, 515, 1000, 1543] {
        let spec = format!(
            r#"
[machine]
memory = "512M"
[[disk]]
name = "d"
device = "virtio"
size = "256M"
[[file]]
name = "f"
size = "{k}K"
on = "d"
[task.main]
steps = [
  {{ op = "mmap", name = "m", kind = "file", file = "f", size = "{k}K" }},
  {{ op = "phase", name = "read" }},
  {{ op = "touch", region = "m" }},
  {{ op = "read", file = "f" }},
]
"#,
            k = pages * 4
        );
        let r = run_checked(&spec);
        assert_eq!(
            phase_vm(&r, 0, "read", "pgpgin"),
            pages as i64 * 4,
            "{pages}"
        );
        assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 1, "{pages}");
    }
}

/// A stream's `work` is user CPU time per page, on top of the reads: the
/// phase lasts at least pages × work, and the reads still overlap it
/// (readahead keeps the disk ahead of the hash), so it lasts less than
/// the sum of the hash and every read done one after another.
#[test]
fn stream_work_is_cpu_time_per_page() {
    let run = |work: &str| {
        run_checked(&disk(
            "max",
            &format!(
                r#"
  {{ op = "phase", name = "hash" }},
  {{ op = "stream", file = "f", window = "4M", work = "{work}" }},
"#
            ),
        ))
    };
    let phase_s = |r: &mmsim_sim::output::RunResult| {
        let p = &r.tasks[0].phases[0];
        (p.end_ns - p.start_ns) as f64 / 1e9
    };
    let idle = phase_s(&run("0us"));
    let busy = phase_s(&run("100us"));
    let hash = PAGES as f64 * 100e-6;
    assert!(busy >= hash, "{busy} < {hash}");
    assert!(busy < hash + idle, "{busy} >= {hash} + {idle}: no overlap");
}

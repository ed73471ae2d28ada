//! shmem: tmpfs files and shared anonymous memory — pages shared between
//! tasks and with forked children, counted as file and shmem pages, fault
//! around on reads, swapped out through the swap cache and back, dropped
//! when clean, freed with their last mapping, brought back by swapoff.

mod common;
use common::*;

const PAGES: i64 = 4096;

fn tmpfs(extra: &str, tasks: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
cpus = 2
[[swap]]
device = "zram"
size = "256M"
[[file]]
name = "shm"
size = "16M"
on = "tmpfs"
{extra}
{tasks}
"#
    )
}

#[test]
fn tasks_share_a_tmpfs_file_and_read_with_fault_around() {
    let r = run_checked(&tmpfs(
        "",
        r#"
[task.writer]
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "touch", region = "m", write = 1.0 },
]
[task.reader]
steps = [
  { op = "sleep", duration = "1s" },
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "phase", name = "read" },
  { op = "touch", region = "m" },
]
"#,
    ));
    // The reader sees every page the writer wrote (checked), and maps
    // them 16 at a time: one fault per fault-around window.
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
    let reader = r.tasks.iter().find(|t| t.name == "reader").unwrap();
    let read = reader.phases.iter().find(|p| p.name == "read").unwrap();
    assert_eq!(read.vmstat["pgfault"], PAGES / 16);
    // The file's pages stay in the page cache after both unmap it.
    assert_eq!(vm(&r, "nr_shmem"), PAGES);
    assert_eq!(vm(&r, "nr_file_pages"), PAGES);
    assert_eq!(vm(&r, "nr_anon_pages"), 0);
}

#[test]
fn shmem_under_a_limit_goes_to_swap_and_comes_back() {
    let r = run_checked(&tmpfs(
        "[cgroup.w]\nmemory_max = \"8M\"",
        r#"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "phase", name = "write" },
  { op = "touch", region = "m", write = 1.0 },
  { op = "phase", name = "read" },
  { op = "touch", region = "m" },
]
"#,
    ));
    assert!(phase_vm(&r, 0, "write", "pswpout") > 2000);
    // shmem swap-in always goes through the swap cache with cluster
    // readahead (no skip-swapcache path for shmem in 6.1): 8-page windows.
    let maj = phase_vm(&r, 0, "read", "pgmajfault");
    let inn = phase_vm(&r, 0, "read", "pswpin");
    assert!(maj > 0 && inn >= 7 * maj, "pswpin {inn} pgmajfault {maj}");
    assert!(phase_vm(&r, 0, "read", "swap_ra_hit") > 0);
    assert_eq!(r.integrity.violations, 0);
    // Counted as shmem and file in the cgroup (bytes).
    let st = &r.cgroups["w"].memory_stat;
    assert!(st["shmem"] > 0 && st["file"] >= st["shmem"], "{st:?}");
    assert_eq!(st["anon"], 0);
}

#[test]
fn clean_shmem_pages_are_dropped_not_written() {
    // Read-only use of a fresh file: zero pages in the page cache, never
    // dirtied; reclaim drops them without any swap-out.
    let r = run_checked(&tmpfs(
        "[cgroup.w]\nmemory_max = \"8M\"",
        r#"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "touch", region = "m", passes = 2 },
]
"#,
    ));
    assert_eq!(vm(&r, "pswpout"), 0);
    assert!(vm(&r, "pgsteal_anon") > 0);
    assert_eq!(r.integrity.violations, 0);
}

#[test]
fn shared_anon_is_shared_with_a_child_and_freed_with_its_last_mapping() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "256M"
[cgroup.w]
memory_max = "12M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "s", kind = "shared_anon", size = "16M" },
  { op = "touch", region = "s", write = 1.0 },
  { op = "fork", steps = [ { op = "touch", region = "s", write = 1.0, length = "8M" } ] },
  { op = "wait" },
  { op = "phase", name = "after" },
  { op = "touch", region = "s" },
  { op = "munmap", region = "s" },
]
"#,
    );
    // The parent reads the child's writes (no copy-on-write: checked).
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
    assert_eq!(r.integrity.violations, 0);
    // No COW copies: nothing anon was ever mapped.
    assert_eq!(vm(&r, "pgreuse"), 0);
    // Gone with its last mapping: pages and swap entries (whose slots
    // wait in the CPU's return batch of 64 before the charge goes).
    assert_eq!(vm(&r, "nr_shmem"), 0);
    assert!(r.cgroups["w"].memory_swap_current <= 64 * 4096);
}

#[test]
fn swapoff_brings_shmem_back() {
    let r = run_checked(&tmpfs(
        "[cgroup.w]\nmemory_max = \"64M\"",
        r#"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "touch", region = "m", write = 1.0 },
  { op = "madvise", region = "m", advice = "pageout" },
  { op = "phase", name = "off" },
  { op = "swapoff", device = 0 },
  { op = "phase", name = "read" },
  { op = "touch", region = "m" },
]
"#,
    ));
    assert_eq!(phase_vm(&r, 0, "off", "pswpin"), PAGES);
    // Back in the page cache, unmapped: reads fault around, none major.
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), PAGES / 16);
    assert_eq!(r.integrity.violations, 0);
}

#[test]
fn madvise_free_on_shared_memory_is_einval() {
    let e = try_run(&tmpfs(
        "",
        r#"
[task.main]
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "madvise", region = "m", advice = "free" },
]
"#,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("EINVAL") && e.contains("line"), "{e}");
}

#[test]
fn read_and_write_syscalls_share_the_page_cache_with_mappings() {
    let r = run_checked(&tmpfs(
        "[cgroup.w]\nmemory_max = \"8M\"",
        r#"
[task.main]
cgroup = "w"
steps = [
  { op = "phase", name = "write" },
  { op = "write", file = "shm", chunk = "64K" },
  { op = "fsync", file = "shm" },
  { op = "phase", name = "mmap" },
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "touch", region = "m", write = 0.5, seed = 3 },
  { op = "phase", name = "read" },
  { op = "read", file = "shm", offset = "4M", length = "8M" },
]
"#,
    ));
    // write(2) allocates and dirties every page; half the file then goes
    // to swap under the 8 MiB limit.
    assert!(phase_vm(&r, 0, "write", "pswpout") > 1000);
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), 0);
    // read(2) swaps pages back in without counting major faults (only a
    // fault does), and sees what the mapping wrote (checked).
    assert!(phase_vm(&r, 0, "read", "pswpin") > 0);
    assert_eq!(phase_vm(&r, 0, "read", "pgmajfault"), 0);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 0);
    assert_eq!(r.integrity.violations, 0);
    assert!(r.integrity.pages_checked >= 2048);
}

#[test]
fn drop_caches_drops_only_clean_idle_shmem_pages() {
    let r = run_checked(&tmpfs(
        "",
        r#"
[task.main]
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "touch", region = "m", length = "8M" },
  { op = "touch", region = "m", write = 1.0, offset = "8M" },
  { op = "munmap", region = "m" },
  { op = "phase", name = "drop" },
  { op = "drop_caches" },
]
"#,
    ));
    // The 2048 pages only read (zero pages, never dirtied) go, bar the
    // few still in a per-CPU lru_add batch; the 2048 written stay.
    let dropped = -phase_vm(&r, 0, "drop", "nr_shmem");
    assert!((2048 - 15..=2048).contains(&dropped), "{dropped}");
    assert_eq!(vm(&r, "nr_shmem"), PAGES - dropped);
}

#[test]
fn second_read_activates_and_drop_caches_deactivates_dirty_pages() {
    let r = run_checked(&tmpfs(
        "",
        r#"
[task.main]
steps = [
  { op = "write", file = "shm" },
  { op = "phase", name = "read" },
  { op = "read", file = "shm" },
  { op = "read", file = "shm" },
  { op = "phase", name = "drop" },
  { op = "drop_caches" },
]
"#,
    ));
    // folio_mark_accessed: the first read sets PG_referenced (the write
    // already did for pages it found cached: none here, all were new), the
    // second activates — all but those still in the lru_add batch.
    let act = phase_vm(&r, 0, "read", "pgactivate");
    assert!((PAGES - 15..=PAGES).contains(&act), "{act}");
    // drop_caches cannot drop dirty shmem; it deactivates it.
    assert_eq!(phase_vm(&r, 0, "drop", "pgdeactivate"), act);
    assert_eq!(phase_vm(&r, 0, "drop", "nr_shmem"), 0);
}

#[test]
fn stream_maps_reads_and_unmaps_successive_windows() {
    let r = run_checked(&tmpfs(
        "",
        r#"
[task.main]
steps = [
  { op = "write", file = "shm" },
  { op = "phase", name = "stream" },
  { op = "stream", file = "shm", window = "1M" },
]
"#,
    ));
    // 16 windows of 256 pages, each read through a fresh mapping: fault
    // around maps 16 cached pages per fault; every read is checked.
    assert_eq!(phase_vm(&r, 0, "stream", "pgfault"), PAGES / 16);
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
    assert_eq!(r.integrity.violations, 0);
    // The windows are gone, the file's pages stay cached.
    assert_eq!(vm(&r, "nr_mapped"), 0);
    assert_eq!(vm(&r, "nr_shmem"), PAGES);
}

#[test]
fn munmap_keeps_what_the_mapping_wrote_and_marks_pages_accessed() {
    let cycle = |hint: &str| {
        tmpfs(
            "[cgroup.w]\nmemory_max = \"24M\"",
            &format!(
                r#"
[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" }},
  {hint}
  {{ op = "touch", region = "m" }},
  {{ op = "touch", region = "m", write = 1.0 }},
  {{ op = "munmap", region = "m" }},
  {{ op = "mmap", name = "m2", kind = "shmem", file = "shm", size = "16M" }},
  {hint2}
  {{ op = "touch", region = "m2" }},
  {{ op = "munmap", region = "m2" }},
  {{ op = "phase", name = "pressure" }},
  {{ op = "mmap", name = "a", kind = "anon", size = "20M" }},
  {{ op = "touch", region = "a", write = 1.0 }},
  {{ op = "munmap", region = "a" }},
  {{ op = "mmap", name = "m3", kind = "shmem", file = "shm", size = "16M" }},
  {{ op = "touch", region = "m3" }},
]
"#,
                hint2 = hint.replace("\"m\"", "\"m2\"")
            ),
        )
    };
    let normal = run_checked(&cycle(""));
    // Read-faulted pages written through their (writable) PTEs are dirty
    // only in the PTE: munmap moves that to the folio, so reclaim writes
    // them to swap instead of dropping them, and the last reads see the
    // writes (checked).
    assert!(phase_vm(&normal, 0, "pressure", "pswpout") > 0);
    assert_eq!(normal.integrity.violations, 0);
    // A young PTE at munmap marks the page accessed: referenced at the
    // first unmap, activated at the second.
    assert!(
        vm(&normal, "pgactivate") >= PAGES - 16,
        "{}",
        vm(&normal, "pgactivate")
    );
    let seq = run_checked(&cycle(
        r#"{ op = "madvise", region = "m", advice = "sequential" },"#,
    ));
    // MADV_SEQUENTIAL: references through the mapping do not count.
    assert!(vm(&seq, "pgactivate") < 64, "{}", vm(&seq, "pgactivate"));
    assert_eq!(seq.integrity.violations, 0);
}

/// Two tasks on two CPUs fault the same swapped-out shmem pages at the
/// same moment, from an NVMe device whose reads complete later: the first
/// fault's read puts the folio in the swap cache locked, the second finds
/// it there and waits for the same read (6.1's shmem swap-in through the
/// swap cache). No page is read from the device twice, and both tasks read
/// what the writer wrote (the content check fails the run otherwise).
#[test]
fn two_tasks_fault_the_same_shmem_swap_entry_at_once() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
cpus = 2
[sysctl]
"vm.page-cluster" = 0
[[swap]]
device = "nvme"
size = "256M"
[[file]]
name = "shm"
size = "16M"
on = "tmpfs"
[cgroup.w]
memory_max = "6M"
[cgroup.r]
memory_max = "max"
[task.writer]
cgroup = "w"
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "touch", region = "m", write = 1.0 },
  { op = "munmap", region = "m" },
]
[task.a]
cgroup = "r"
steps = [
  { op = "sleep", duration = "2s" },
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "phase", name = "swapin" },
  { op = "touch", region = "m" },
]
[task.b]
cgroup = "r"
steps = [
  { op = "sleep", duration = "2s" },
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "16M" },
  { op = "phase", name = "swapin" },
  { op = "touch", region = "m" },
]
"#,
    );
    let a = r.tasks.iter().find(|t| t.name == "a").unwrap();
    let b = r.tasks.iter().find(|t| t.name == "b").unwrap();
    let (pa, pb) = (
        a.phases.iter().find(|p| p.name == "swapin").unwrap(),
        b.phases.iter().find(|p| p.name == "swapin").unwrap(),
    );
    // Most of the file was on the device when the two started.
    let out = r.tasks[0]
        .phases
        .iter()
        .map(|p| p.vmstat["pswpout"])
        .sum::<i64>();
    let read = pa.vmstat["pswpin"].max(pb.vmstat["pswpin"]);
    assert!(read > PAGES / 2, "{read}");
    // Both took major faults: each met entries the other had not read.
    assert!(pa.vmstat["pgmajfault"] > 0 && pb.vmstat["pgmajfault"] > 0);
    // No slot was read twice: reads never exceed the pages written out.
    assert!(
        vm(&r, "pswpin") <= vm(&r, "pswpout"),
        "{} > {}",
        vm(&r, "pswpin"),
        out
    );
    assert!(vm(&r, "pswpin") <= PAGES);
    assert_eq!(r.integrity.pages_checked, 2 * PAGES as u64);
}

/// A forked child's shared mapping sits at its parent's address, so its
/// page-table bookkeeping must span the tables that address needs, not
/// those of the child's next free address (here the parent's mapping
/// spans three PTE tables and would have got two). Found by the
/// `large_shmem_folios` property (an index out of bounds).
#[test]
fn a_forked_shared_mapping_has_its_parents_table_span() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
[[file]]
name = "f"
size = "4M"
on = "tmpfs"
[task.t]
steps = [
{ op = "mmap", name = "a", kind = "anon", size = "8K" },
{ op = "mmap", name = "m", kind = "shmem", file = "f", offset = "4K", size = "4092K" },
{ op = "fork", steps = [ { op = "touch", region = "m" } ] },
]
"#,
    );
    assert_eq!(r.integrity.pages_checked, 1023);
}

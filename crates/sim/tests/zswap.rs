//! zswap in front of swap (mm/zswap.rs, dev/zbud.rs): what 6.1's
//! frontswap store and load, the pool limit and memory.zswap.max make of
//! a workload. The profile here is a test table, not a measurement: each
//! length is chosen so the expected pool follows from zbud's and
//! zsmalloc's rules by hand. The real kernel's lengths are the default
//! profile's (mmsim calibrate --zram-content).

mod common;
use common::*;
use mmsim_sim::machine_profile::CompressTable;
use mmsim_sim::output::RunResult;
use mmsim_sim::SimError;

/// lzo: token pages 44 bytes (52 with zbud's header: one chunk, two to a
/// zbud page), text 1000 (16 chunks with the header), same-filled kinds
/// nothing; zram's lzo-rle the same.
fn table() -> CompressTable {
    let e = compress_entry;
    let mut t = CompressTable::new();
    let lzo = t.entry("lzo".into()).or_default();
    lzo.insert("token".into(), e(44, 700, 8000));
    lzo.insert("text".into(), e(1000, 5000, 2000));
    lzo.insert("zero".into(), e(0, 200, 700));
    lzo.insert("random".into(), e(4096, 2000, 1500));
    // zram's lzo-rle (6.1, 7.3) and lz4 (6.12): what zswap refuses goes
    // there, with the same lengths.
    let same = t["lzo"].clone();
    t.insert("lzo-rle".into(), same.clone());
    t.insert("lz4".into(), same);
    t
}

fn run(text: &str) -> Result<RunResult, SimError> {
    try_run_compress(text, table())
}

/// `mb` MiB of `content` (None: token pages) written under a `limit`
/// memcg with zswap (`zswap` keys) in front of a zram swap device, then
/// `after` steps.
fn spec(zswap: &str, cgroup: &str, mb: u64, content: Option<&str>, after: &str) -> String {
    spec_on("6.1", "zram", zswap, cgroup, mb, content, after)
}

/// `spec` on kernel `kernel` with a swap device of kind `device`.
fn spec_on(
    kernel: &str,
    device: &str,
    zswap: &str,
    cgroup: &str,
    mb: u64,
    content: Option<&str>,
    after: &str,
) -> String {
    let content = content.map_or(String::new(), |c| format!(", content = {c}"));
    format!(
        r#"
[machine]
memory = "512M"
kernel = "{kernel}"
[sysfs]
"module/zswap/parameters/enabled" = true
{zswap}
[[swap]]
device = "{device}"
size = "512M"
[cgroup.w]
{cgroup}
[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "a", kind = "anon", size = "{mb}M"{content} }},
  {{ op = "touch", region = "a", order = "seq", write = 1.0 }},
  {after}
]
"#
    )
}

fn stat(r: &RunResult, key: &str) -> i64 {
    r.cgroups["w"].memory_stat[key]
}

#[test]
fn reclaim_stores_every_page_in_zswap_and_faults_read_them_back() {
    let r = run(&spec(
        "",
        "memory_max = \"32M\"",
        64,
        None,
        r#"{ op = "touch", region = "a", order = "seq", write = 0.0 },"#,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    // Nothing reaches zram: every page reclaim wrote went to zswap, every
    // swap-in came from it.
    assert_eq!(vm(&r, "pswpout"), 0);
    assert_eq!(vm(&r, "pswpin"), 0);
    assert!(vm(&r, "pgsteal_anon") > 8192);
    assert_eq!(vm(&r, "zswpout"), vm(&r, "pgsteal_anon"));
    assert_eq!(vm(&r, "zswpin"), vm(&r, "pgmajfault"));
    // A store ends the folio's writeback at once: NR_WRITTEN counts it.
    assert_eq!(vm(&r, "nr_written"), vm(&r, "zswpout"));
    assert_eq!(stat(&r, "zswpout"), vm(&r, "zswpout"));
    assert_eq!(stat(&r, "zswpin"), vm(&r, "zswpin"));
    // Each slot still in use holds one entry, charged 44 bytes.
    let z = r.zswap.expect("zswap's counters");
    let stored = z.stored_pages as i64;
    assert_eq!(stored * 4096, r.cgroups["w"].memory_swap_current as i64);
    assert_eq!(stat(&r, "zswap"), stored * 44);
    assert_eq!(stat(&r, "zswapped"), stored * 4096);
    assert_eq!(z.same_filled_pages, 0);
    // Two one-chunk objects to a zbud page; frees may leave pages half.
    let pages = z.pool_total_size / 4096;
    assert!(
        pages >= z.stored_pages / 2 && pages <= z.stored_pages,
        "{pages}"
    );
}

#[test]
fn same_filled_pages_keep_only_their_value_unless_turned_off() {
    let pageout = r#"{ op = "madvise", region = "a", advice = "pageout" },"#;
    let r = run(&spec("", "", 16, Some("\"zero\""), pageout)).unwrap_or_else(|e| panic!("{e}"));
    let z = r.zswap.expect("zswap's counters");
    assert_eq!(z.stored_pages, 4096);
    assert_eq!(z.same_filled_pages, 4096);
    assert_eq!(z.pool_total_size, 0);
    assert_eq!(stat(&r, "zswap"), 0);
    assert_eq!(stat(&r, "zswapped"), 4096 * 4096);
    // Off: each is compressed as a page of zeros (the token page's 44
    // bytes, one chunk: two to a zbud page).
    let off = "\"module/zswap/parameters/same_filled_pages_enabled\" = false";
    let r = run(&spec(off, "", 16, Some("\"zero\""), pageout)).unwrap_or_else(|e| panic!("{e}"));
    let z = r.zswap.expect("zswap's counters");
    assert_eq!((z.stored_pages, z.same_filled_pages), (4096, 0));
    assert_eq!(z.pool_total_size, 2048 * 4096);
    assert_eq!(stat(&r, "zswap"), 4096 * 44);
}

#[test]
fn memory_zswap_max_refuses_stores_once_its_pages_are_used() {
    // 1000-byte objects: the 66th store takes the memcg to 66,000 bytes,
    // 16 whole pages, and from then on obj_cgroup_may_zswap refuses.
    let pageout = r#"{ op = "madvise", region = "a", advice = "pageout" },"#;
    let r = run(&spec(
        "",
        "memory_zswap_max = \"64K\"",
        16,
        Some("\"text\""),
        pageout,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(vm(&r, "zswpout"), 66);
    assert_eq!(vm(&r, "pswpout"), 4096 - 66);
    assert_eq!(stat(&r, "zswap"), 66_000);
    // 0 refuses every store.
    let r = run(&spec(
        "",
        "memory_zswap_max = 0",
        16,
        Some("\"text\""),
        pageout,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(vm(&r, "zswpout"), 0);
    assert_eq!(vm(&r, "pswpout"), 4096);
}

#[test]
fn a_full_pool_sends_pages_on_to_the_swap_device() {
    // 1 % of 512 MiB: the pool may hold 1,300-odd pages (totalram less
    // the kernel's own). zsmalloc puts four 1000-byte objects in a page
    // (its 1008... class), so about 5,200 of the 8,192 pages paged out fit.
    let zswap = r#""module/zswap/parameters/zpool" = "zsmalloc"
"module/zswap/parameters/max_pool_percent" = 1"#;
    let pageout = r#"{ op = "madvise", region = "a", advice = "pageout" },"#;
    let r = run(&spec(zswap, "", 32, Some("\"text\""), pageout)).unwrap_or_else(|e| panic!("{e}"));
    let z = r.zswap.expect("zswap's counters");
    // Each page reclaimed went to zswap or, refused, to zram.
    assert_eq!(vm(&r, "zswpout") + vm(&r, "pswpout"), 8192);
    // A pageout frees nothing, so once over its limit the pool stays
    // there: every later store counts a limit hit and is refused.
    assert_eq!(z.pool_limit_hit, vm(&r, "pswpout") as u64, "{z:?}");
    assert_eq!(vm(&r, "zswpout") as u64, z.stored_pages);
    // The worker was queued: zsmalloc cannot write back in 6.1.
    assert!(z.reject_reclaim_fail >= 1);
    let pages = z.pool_total_size / 4096;
    assert!(
        (4 * pages).abs_diff(z.stored_pages) < 8,
        "{pages} {}",
        z.stored_pages
    );
}

#[test]
fn incompressible_pages_are_refused_by_zbud() {
    let pageout = r#"{ op = "madvise", region = "a", advice = "pageout" },"#;
    let r = run(&spec("", "", 4, Some("\"random\""), pageout)).unwrap_or_else(|e| panic!("{e}"));
    let z = r.zswap.expect("zswap's counters");
    assert_eq!(z.reject_compress_poor, 1024);
    assert_eq!(vm(&r, "zswpout"), 0);
    assert_eq!(vm(&r, "pswpout"), 1024);
}

#[test]
fn a_root_page_is_stored_but_charged_to_nobody() {
    let text = spec("", "", 8, None, "")
        .replace("cgroup = \"w\"\n", "")
        .replace(
            "  \n]",
            r#"  { op = "madvise", region = "a", advice = "pageout" },
]"#,
        );
    let r = run(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(vm(&r, "zswpout"), 2048);
    assert_eq!(r.cgroups["w"].memory_stat["zswap"], 0);
    assert_eq!(r.cgroups["w"].memory_current, 0);
}

#[test]
fn without_zswap_settings_the_output_has_no_zswap_lines() {
    let text = spec("", "memory_max = \"8M\"", 16, None, "")
        .replace("\"module/zswap/parameters/enabled\" = true\n", "");
    let r = run(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(r.zswap.is_none());
    for key in ["zswpin", "zswpout"] {
        assert!(!r.vmstat.contains_key(key), "{key}");
        assert!(!r.cgroups["w"].memory_stat.contains_key(key), "{key}");
    }
    // Configured but off: the lines are there, and zero.
    let text = spec("", "memory_max = \"8M\"", 16, None, "").replace("= true", "= false");
    let r = run(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(vm(&r, "zswpout"), 0);
    assert!(vm(&r, "pswpout") > 0);
    assert_eq!(r.zswap.map(|z| z.stored_pages), Some(0));
}

#[test]
fn after_the_pool_fills_stores_wait_for_the_accept_threshold() {
    // zsmalloc at 1 % of RAM (about 1,260 pages; 90 % of it about 1,134),
    // four 1000-byte objects a page. 32 MiB paged out fills the pool and
    // sends the rest to zram (every refusal a limit hit). Reading the
    // first 1 MiB back frees 256 entries (6.1's zram skip-swapcache read
    // frees each slot), about 64 pool pages: the pool is under its limit
    // but over the accept threshold, so paging those pages out again is
    // refused without a limit hit (zswap_pool_reached_full).
    let zswap = r#""module/zswap/parameters/zpool" = "zsmalloc"
"module/zswap/parameters/max_pool_percent" = 1"#;
    let after = r#"{ op = "phase", name = "out" },
  { op = "madvise", region = "a", advice = "pageout" },
  { op = "phase", name = "read" },
  { op = "touch", region = "a", order = "seq", write = 0.0, length = "1M" },
  { op = "phase", name = "again" },
  { op = "madvise", region = "a", advice = "pageout" },"#;
    let r = run(&spec(zswap, "", 32, Some("\"text\""), after)).unwrap_or_else(|e| panic!("{e}"));
    let z = r.zswap.expect("zswap's counters");
    let phase = |name: &str, key: &str| {
        let p = r.tasks[0]
            .phases
            .iter()
            .find(|p| p.name == name)
            .expect(name);
        p.vmstat.get(key).copied().unwrap_or(0)
    };
    assert_eq!(phase("out", "zswpout") + phase("out", "pswpout"), 8192);
    assert_eq!(z.pool_limit_hit as i64, phase("out", "pswpout"), "{z:?}");
    assert_eq!(phase("read", "zswpin"), 256);
    assert_eq!(phase("again", "zswpout"), 0, "{z:?}");
    assert_eq!(phase("again", "pswpout"), 256);
}

#[test]
fn a_full_zbud_pool_writes_its_oldest_page_back_to_the_swap_device() {
    // zbud at 1 % of RAM, two 1008-byte objects (header and data) a page.
    // The store that finds the pool full queues the shrink worker, which
    // preempts the reclaimer at its next folio and evicts zbud's LRU tail:
    // both its objects decompressed into swap-cache pages and written to
    // zram. zswap_pool_total_size still counts that page until an update,
    // so the next store finds the pool full again and the worker evicts a
    // second page; then the pool is at its limit, under which stores wait
    // for the accept threshold, uncounted.
    let zswap = r#""module/zswap/parameters/max_pool_percent" = 1"#;
    let pageout = r#"{ op = "madvise", region = "a", advice = "pageout" },
  { op = "touch", region = "a", order = "seq", write = 0.0 },"#;
    let r = run(&spec(zswap, "", 32, Some("\"text\""), pageout)).unwrap_or_else(|e| panic!("{e}"));
    let z = r.zswap.expect("zswap's counters");
    assert_eq!(z.pool_limit_hit, 2, "{z:?}");
    assert_eq!(z.written_back_pages, 4, "{z:?}");
    assert_eq!(z.reject_reclaim_fail, 0);
    // Each page reclaimed went to zswap or, refused, to zram; the four
    // written back went to zram too.
    assert_eq!(vm(&r, "zswpout") + vm(&r, "pswpout"), 8192 + 4);
    // Reading the region back: zswap gives back every page it still
    // holds, zram every one refused; the four written back are still in
    // the swap cache (clean, written), so their faults read nothing.
    assert_eq!(vm(&r, "zswpin"), vm(&r, "zswpout") - 4);
    assert_eq!(vm(&r, "pswpin"), vm(&r, "pswpout") - 4);
    // Every page holds what was written (the run's integrity check).
    assert_eq!(r.integrity.violations, 0);
}

/// Reads a phase's vmstat delta.
fn phase(r: &RunResult, name: &str, key: &str) -> i64 {
    let p = r.tasks[0]
        .phases
        .iter()
        .find(|p| p.name == name)
        .expect(name);
    p.vmstat.get(key).copied().unwrap_or(0)
}

#[test]
fn a_load_into_the_swap_cache_takes_the_entry_from_6_12() {
    // 16 MiB of text paged out to zswap in front of a virtio disk, read
    // back (each fault through the swap cache), paged out again. 6.1
    // keeps each entry after its load, and the second pageout drops the
    // clean swap-cache pages without a store. 6.12's exclusive load frees
    // the entry and dirties the page, so the second pageout stores every
    // page again.
    let after = r#"{ op = "phase", name = "out" },
  { op = "madvise", region = "a", advice = "pageout" },
  { op = "phase", name = "read" },
  { op = "touch", region = "a", order = "seq", write = 0.0 },
  { op = "phase", name = "again" },
  { op = "madvise", region = "a", advice = "pageout" },"#;
    let text = Some("\"text\"");
    let r61 =
        run(&spec_on("6.1", "virtio", "", "", 16, text, after)).unwrap_or_else(|e| panic!("{e}"));
    let r612 =
        run(&spec_on("6.12", "virtio", "", "", 16, text, after)).unwrap_or_else(|e| panic!("{e}"));
    for r in [&r61, &r612] {
        assert_eq!(phase(r, "out", "zswpout"), 4096);
        assert_eq!(phase(r, "read", "zswpin"), 4096);
        assert_eq!(vm(r, "pswpout") + vm(r, "pswpin"), 0);
    }
    assert_eq!(phase(&r61, "again", "zswpout"), 0);
    assert_eq!(r61.zswap.expect("zswap").stored_pages, 4096);
    assert_eq!(phase(&r612, "again", "zswpout"), 4096);
    assert_eq!(r612.zswap.expect("zswap").stored_pages, 4096);
    // 6.12's store ends no writeback: NR_WRITTEN does not count it.
    assert_eq!(vm(&r612, "nr_written"), 0);
    assert_eq!(vm(&r61, "nr_written"), 4096);
}

#[test]
fn the_6_12_shrink_worker_rotates_referenced_entries_then_writes_back() {
    // A 128 MiB machine, zsmalloc at 1 % of RAM (four 1000-byte objects a
    // page), in front of a virtio disk: 128 regions of 128 KiB of text
    // paged out one at a time, each followed by a sleep, so the worker a
    // refused store queued runs before the task's next slice. Every entry
    // is stored referenced: the worker's first runs only take the bit off
    // the LRU's head entry and rotate it (16 failures a run, nothing
    // written back); once the rotations have gone round the pool, a run
    // writes back the oldest until the pool is at or under 90 % of its
    // limit, and stores are taken again.
    let mut steps = String::new();
    for i in 0..128 {
        steps += &format!(
            "  {{ op = \"mmap\", name = \"r{i}\", kind = \"anon\", size = \"128K\", content = \"text\" }},\n  {{ op = \"touch\", region = \"r{i}\", order = \"seq\", write = 1.0 }},\n"
        );
    }
    for i in 0..128 {
        steps += &format!(
            "  {{ op = \"madvise\", region = \"r{i}\", advice = \"pageout\" }},\n  {{ op = \"sleep\", duration = \"5ms\" }},\n"
        );
    }
    let text = format!(
        r#"
[machine]
memory = "128M"
kernel = "6.12"
[sysfs]
"module/zswap/parameters/enabled" = true
"module/zswap/parameters/max_pool_percent" = 1
[[swap]]
device = "virtio"
size = "64M"
[cgroup.w]
[task.main]
cgroup = "w"
steps = [
{steps}]
"#
    );
    let r = run(&text).unwrap_or_else(|e| panic!("{e}"));
    let z = r.zswap.expect("zswap's counters");
    let wb = vm(&r, "zswpwb");
    assert!(wb > 0, "{z:?}");
    assert_eq!(wb as u64, z.written_back_pages);
    assert_eq!(stat(&r, "zswpwb"), wb);
    assert_eq!(z.reject_reclaim_fail, 0);
    // Each page reclaimed went to zswap or, refused, to the disk; those
    // written back went to the disk too.
    assert_eq!(vm(&r, "zswpout") + vm(&r, "pswpout") - wb, 4096);
    // Rotations before any writeback: at least one refused store per
    // 16 entries the pool held when it filled.
    let held = z.stored_pages;
    assert!(z.pool_limit_hit * 16 >= held, "{z:?}");
    assert_eq!(r.integrity.violations, 0);
}

#[test]
fn memory_zswap_max_writes_back_its_own_memcg_from_6_12() {
    // 6.1 refuses stores past memory.zswap.max; 6.12 first writes back
    // one of the memcg's entries (shrink_memcg) and refuses only if that
    // wrote nothing, which it does while the LRU's head is referenced.
    let pageout = r#"{ op = "madvise", region = "a", advice = "pageout" },"#;
    let max = "memory_zswap_max = \"64K\"";
    let on = |kernel: &str| {
        let text = spec_on(kernel, "virtio", "", max, 4, Some("\"text\""), pageout);
        run(&text).unwrap_or_else(|e| panic!("{kernel}: {e}"))
    };
    let (r61, r612) = (on("6.1"), on("6.12"));
    assert_eq!(vm(&r61, "zswpout"), 66);
    assert_eq!(vm(&r61, "pswpout"), 1024 - 66);
    let wb = vm(&r612, "zswpwb");
    assert!(wb > 0);
    assert_eq!(vm(&r612, "zswpout") + vm(&r612, "pswpout") - wb, 1024);
    // Under the limit at the end, give or take the last store's page.
    assert!(
        stat(&r612, "zswap") <= 65_536 + 4096,
        "{}",
        stat(&r612, "zswap")
    );
}

#[test]
fn the_shrinker_writes_back_in_memcg_reclaim_when_enabled() {
    // 48 MiB of text (1000 bytes a page) written under memory.max 32M,
    // a 2.5 s sleep, then 16 MiB more; zswap in front of a virtio disk,
    // its pool far from full: the shrink worker never runs and
    // memory.zswap.max is unset, so only the shrinker (shrink_slab after
    // each pass over the memcg's LRUs) writes entries back, and only with
    // shrinker_enabled. Its first scans take the referenced bits; later
    // ones write the oldest back. 6.12 counts from the memcg's statistics
    // flushed past their threshold; 7.3 from what the 2-second periodic
    // flush left, so before that flush (the first 48 MiB) it counts
    // nothing. (A small pool may get no scan at all: at reclaim's first
    // priority, 12, a count under 4096 makes no work.)
    let more = r#"{ op = "phase", name = "more" },
  { op = "sleep", duration = "2500ms" },
  { op = "mmap", name = "b", kind = "anon", size = "16M", content = "text" },
  { op = "touch", region = "b", order = "seq", write = 1.0 },"#;
    for kernel in ["6.12", "7.3"] {
        let go = |on: bool| {
            let knob = format!(r#""module/zswap/parameters/shrinker_enabled" = {on}"#);
            let limit = "memory_max = \"32M\"";
            let text = spec_on(kernel, "virtio", &knob, limit, 48, Some("\"text\""), more);
            run(&text).unwrap_or_else(|e| panic!("{kernel}: {e}"))
        };
        let (off, on) = (go(false), go(true));
        assert_eq!(vm(&off, "zswpwb"), 0, "{kernel}");
        assert_eq!(vm(&off, "pswpout"), 0, "{kernel}");
        let wb = vm(&on, "zswpwb");
        let before = wb - phase(&on, "more", "zswpwb");
        assert!(phase(&on, "more", "zswpwb") > 0, "{kernel}");
        if kernel == "7.3" {
            assert_eq!(before, 0, "{kernel}");
        }
        // Nothing refused: what reached the disk is what was written back.
        assert_eq!(vm(&on, "pswpout"), wb, "{kernel}");
        assert_eq!(stat(&on, "zswpwb"), wb, "{kernel}");
        let z = on.zswap.expect("zswap's counters");
        assert_eq!(z.written_back_pages, wb as u64, "{kernel}");
        assert_eq!(z.stored_pages as i64, vm(&on, "zswpout") - wb, "{kernel}");
        assert_eq!(z.pool_limit_hit, 0, "{kernel}");
        assert_eq!(on.integrity.violations, 0, "{kernel}");
    }
}

#[test]
fn memory_zswap_writeback_0_keeps_the_memcgs_pages_off_the_device() {
    // 40 MiB of text under memory.max 32M, one page in ten random (which
    // zswap refuses: 6.12's compressor fails past a page, and 7.3 keeps a
    // page whole only where it could be written back), the shrinker on
    // and memory.zswap.writeback 0: nothing reaches the disk. A refused
    // page goes back to the active list, dirty (AOP_WRITEPAGE_ACTIVATE,
    // no write counted); the shrinker and the worker write nothing back.
    // With writeback allowed 6.12's refused pages go to the disk, and 7.3
    // stores them whole.
    let mix = r#"[{ kind = "text", weight = 9 }, { kind = "random", weight = 1 }]"#;
    let after = r#"{ op = "touch", region = "a", order = "seq", write = 0.0 },"#;
    for kernel in ["6.12", "7.3"] {
        let go = |writeback: bool| {
            let knob = r#""module/zswap/parameters/shrinker_enabled" = true"#;
            let cg = format!("memory_max = \"32M\"\nmemory_zswap_writeback = {writeback}");
            let text = spec_on(kernel, "virtio", knob, &cg, 40, Some(mix), after);
            run(&text).unwrap_or_else(|e| panic!("{kernel}: {e}"))
        };
        let (on, off) = (go(true), go(false));
        match kernel {
            "6.12" => assert!(vm(&on, "pswpout") > 0, "{kernel}"),
            _ => assert!(on.zswap.expect("zswap").stored_incompressible_pages > 0),
        }
        for key in ["pswpout", "pswpin", "zswpwb"] {
            assert_eq!(vm(&off, key), 0, "{kernel} {key}");
        }
        assert!(vm(&off, "zswpout") > 0, "{kernel}");
        let z = off.zswap.expect("zswap's counters");
        assert!(z.reject_compress_fail > 0, "{kernel}");
        // Each refused page went back to the active list.
        assert!(
            vm(&off, "pgactivate") as u64 >= z.reject_compress_fail,
            "{kernel}"
        );
        assert_eq!(
            off.knobs
                .get("cgroup:w/memory.zswap.writeback")
                .map(String::as_str),
            Some("0")
        );
        assert_eq!(off.integrity.violations, 0, "{kernel}");
    }
}

#[test]
fn large_folios_are_stored_page_by_page_on_7_3_and_refused_on_6_12() {
    let zswap = r#""kernel/mm/transparent_hugepage/hugepages-64kB/enabled" = "always""#;
    let pageout = r#"{ op = "madvise", region = "a", advice = "pageout" },
  { op = "touch", region = "a", order = "seq", write = 0.0 },"#;
    for (kernel, stored) in [("6.12", false), ("7.3", true)] {
        let text = spec_on(kernel, "zram", zswap, "", 4, Some("\"text\""), pageout);
        let r = run(&text).unwrap_or_else(|e| panic!("{kernel}: {e}"));
        // Per-size counters are in the output only when not zero.
        let opt = |k: &str| r.vmstat.get(k).copied().unwrap_or(0);
        let large = opt("hugepages-64kB/stats/zswpout");
        if stored {
            assert_eq!(large, 64, "{kernel}");
            assert_eq!(vm(&r, "zswpout"), 1024, "{kernel}");
        } else {
            assert_eq!((large, vm(&r, "zswpout")), (0, 0), "{kernel}");
            assert_eq!(vm(&r, "pswpout"), 1024, "{kernel}");
        }
        // Swapped in page by page once zswap was enabled.
        assert_eq!(opt("hugepages-64kB/stats/swpin"), 0, "{kernel}");
        assert_eq!(r.integrity.violations, 0);
    }
}

#[test]
fn incompressible_pages_are_stored_whole_on_7_3() {
    // Random bytes do not compress below a page: 7.3 stores each as it is
    // (a whole page of zsmalloc's); 6.12's compression fails on each.
    let pageout = r#"{ op = "madvise", region = "a", advice = "pageout" },"#;
    let random = |kernel: &str| {
        let text = spec_on(kernel, "virtio", "", "", 4, Some("\"random\""), pageout);
        run(&text).unwrap_or_else(|e| panic!("{kernel}: {e}"))
    };
    let r = random("7.3");
    let z = r.zswap.expect("zswap's counters");
    assert_eq!(z.stored_incompressible_pages, 1024, "{z:?}");
    assert_eq!(z.pool_total_size, 1024 * 4096, "{z:?}");
    assert_eq!(stat(&r, "zswap"), 1024 * 4096);
    assert_eq!((vm(&r, "zswpout"), vm(&r, "pswpout")), (1024, 0));
    let r = random("6.12");
    let z = r.zswap.expect("zswap's counters");
    assert_eq!((z.reject_compress_fail, z.reject_alloc_fail), (1024, 0));
    assert_eq!((vm(&r, "zswpout"), vm(&r, "pswpout")), (0, 1024));
}

#[test]
fn knobs_a_release_lacks_are_refused() {
    let bad = [
        (
            "6.12",
            r#""module/zswap/parameters/same_filled_pages_enabled" = false"#,
            "6.10 took zswap's same-filled pages out",
        ),
        (
            "7.3",
            r#""module/zswap/parameters/zpool" = "zbud""#,
            "zsmalloc only",
        ),
        (
            "6.1",
            r#""module/zswap/parameters/shrinker_enabled" = false"#,
            "shrinker came in 6.8",
        ),
    ];
    for (kernel, knob, why) in bad {
        let text = spec_on(kernel, "zram", knob, "", 4, None, "");
        let e = mmsim_spec::parse_str(&text, "test.toml", &[])
            .err()
            .unwrap_or_else(|| panic!("{kernel} {knob} parsed"));
        assert!(e.to_string().contains(why), "{kernel} {knob}: {e}");
    }
}

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
    // zram's lzo-rle (what zswap refuses goes there) with the same lengths.
    let same = t["lzo"].clone();
    t.insert("lzo-rle".into(), same);
    t
}

fn run(text: &str) -> Result<RunResult, SimError> {
    try_run_compress(text, table())
}

/// `mb` MiB of `content` (None: token pages) written under a `limit`
/// memcg with zswap (`zswap` keys) in front of a zram swap device, then
/// `after` steps.
fn spec(zswap: &str, cgroup: &str, mb: u64, content: Option<&str>, after: &str) -> String {
    let content = content.map_or(String::new(), |c| format!(", content = {c}"));
    format!(
        r#"
[machine]
memory = "512M"
kernel = "6.1"
[sysfs]
"module/zswap/parameters/enabled" = true
{zswap}
[[swap]]
device = "zram"
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

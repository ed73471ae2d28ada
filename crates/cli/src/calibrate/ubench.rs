//! The user-space microbenchmarks of `mmsim calibrate`: one primitive
//! each, timed at n and at 2n repetitions so that fixed costs cancel.
//!
//! - `clear_page`: a 4 KiB memset to 0 of pages not in any cache: the pool
//!   is 4× the last-level cache or more, walked in order, so each page was
//!   evicted since it was last written. glibc's memset uses `rep stosb` at
//!   this size, as the kernel's `clear_page_erms` does. The pool is
//!   THP-backed where the kernel allows (MADV_HUGEPAGE), as the kernel's
//!   direct map is, so the walk is not a TLB benchmark.
//! - `copy_page`: a 4 KiB memcpy from one cold pool to another (COW, a RAM
//!   disk's bio, read(2) of a file too large for the cache).
//! - `copy_page_l2`: a 4 KiB memcpy into one hot page from a source set of
//!   half the L2 (sysfs `cache/index*` of level 2), walked in turn after a
//!   pass that loads it: a copy whose source the copying CPU streamed a
//!   moment ago (read(2) of a small file read again, the simulator's
//!   l2cache.rs).
//! - `zero_scan`: zram's `page_same_filled` test of a hot zero page (a
//!   word-by-word compare of 4 KiB), and `fill`: the 4 KiB memset its
//!   read of a same-filled slot does. The zram bench's zero pages pay
//!   these instead of compression: calibrate adds them back.
//! - `syscall`: getppid(2), a system call that does nothing but enter and
//!   leave the kernel (glibc does not cache it).

use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;

const PAGE: usize = 4096;

/// One run of the user-space benchmarks: ns at n and at 2n repetitions.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct UserBench {
    pub llc_bytes: u64,
    pub pool_pages: u64,
    pub clear_page_ns: [u64; 2],
    pub copy_page_ns: [u64; 2],
    pub hot_reps: u64,
    pub zero_scan_ns: [u64; 2],
    pub fill_ns: [u64; 2],
    /// getppid(2) calls, hot_reps and 2·hot_reps of them.
    pub syscall_ns: [u64; 2],
    /// A CPU's L2: size and associativity (0: not recorded, runs before
    /// 2026-12-01).
    #[serde(default)]
    pub l2_bytes: u64,
    #[serde(default)]
    pub l2_ways: u64,
    /// Copies from a source set of half the L2 into a hot page,
    /// hot_reps and 2·hot_reps of them (None: not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_l2_ns: Option<[u64; 2]>,
}

impl UserBench {
    /// Per-repetition cost of each primitive: the slope between n and 2n.
    pub fn per_op(&self) -> [(&'static str, f64); 5] {
        let slope = |t: [u64; 2], n: u64| (t[1] as f64 - t[0] as f64) / n as f64;
        [
            ("clear_page", slope(self.clear_page_ns, self.pool_pages)),
            ("copy_page", slope(self.copy_page_ns, self.pool_pages)),
            ("zero_scan", slope(self.zero_scan_ns, self.hot_reps)),
            ("fill", slope(self.fill_ns, self.hot_reps)),
            ("syscall", slope(self.syscall_ns, self.hot_reps)),
        ]
    }

    /// A copy from L2 (None: the run did not measure it).
    pub fn copy_l2_per_op(&self) -> Option<f64> {
        let t = self.copy_l2_ns?;
        Some((t[1] as f64 - t[0] as f64) / self.hot_reps as f64)
    }
}

/// A cache of `level` (data or unified) from sysfs: its size in bytes
/// and its ways.
pub fn cache_geometry(level: u32) -> Option<(u64, u64)> {
    (0..8).find_map(|i| {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
        let lvl: u32 = read("level")?.trim().parse().ok()?;
        let kind = read("type")?;
        if lvl != level || kind.trim() == "Instruction" {
            return None;
        }
        let ways: u64 = read("ways_of_associativity")?.trim().parse().ok()?;
        Some((size_bytes(read("size")?.trim())?, ways))
    })
}

/// A sysfs cache size ("2048K", "32M").
fn size_bytes(s: &str) -> Option<u64> {
    let (num, mul) = match s.strip_suffix('K') {
        Some(n) => (n, 1024),
        None => match s.strip_suffix('M') {
            Some(n) => (n, 1 << 20),
            None => (s, 1),
        },
    };
    num.parse::<u64>().ok().map(|n| n * mul)
}

/// The last-level cache's size from sysfs (the largest cache index).
pub fn llc_bytes() -> u64 {
    (0..8)
        .filter_map(|i| {
            let p = format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
            size_bytes(std::fs::read_to_string(p).ok()?.trim())
        })
        .max()
        .unwrap_or(32 << 20)
}

/// An anonymous, pre-faulted pool of `pages` pages.
pub(super) fn pool(pages: usize) -> Result<memmap2::MmapMut, String> {
    let mut m = memmap2::MmapMut::map_anon(pages * PAGE)
        .map_err(|e| format!("cannot map a {} MiB pool: {e}", (pages * PAGE) >> 20))?;
    let _ = m.advise(memmap2::Advice::HugePage);
    for p in m.chunks_mut(PAGE) {
        p[0] = 1;
    }
    Ok(m)
}

/// Time to apply `op` to pages `[0, n)` of the pool(s), in order.
fn timed(n: usize, mut op: impl FnMut(usize)) -> u64 {
    let t = Instant::now();
    for i in 0..n {
        op(i);
    }
    t.elapsed().as_nanos() as u64
}

/// Runs every user-space benchmark once.
pub fn run() -> Result<UserBench, String> {
    let llc = llc_bytes();
    // n pages span at least 4× the LLC; the pools hold 2n.
    let n = ((4 * llc) as usize / PAGE).max(16384);
    let mut src = pool(2 * n)?;
    let mut dst = pool(2 * n)?;
    // Evict: walk the other pool between passes.
    let clear = |m: &mut memmap2::MmapMut, k: usize| {
        timed(k, |i| {
            // SAFETY: i < 2n pages of the pool.
            unsafe { std::ptr::write_bytes(m.as_mut_ptr().add(i * PAGE), 0, PAGE) };
            black_box(&m[i * PAGE]);
        })
    };
    let c1 = clear(&mut dst, n);
    let _ = clear(&mut src, 2 * n);
    let c2 = clear(&mut dst, 2 * n);
    let copy = |s: &memmap2::MmapMut, d: &mut memmap2::MmapMut, k: usize| {
        timed(k, |i| {
            d[i * PAGE..(i + 1) * PAGE].copy_from_slice(&s[i * PAGE..(i + 1) * PAGE]);
            black_box(&d[i * PAGE]);
        })
    };
    let p1 = copy(&src, &mut dst, n);
    let _ = clear(&mut src, 2 * n);
    let p2 = copy(&dst, &mut src, 2 * n);
    drop((src, dst));

    let reps = 200_000u64;
    let mut page = vec![0u64; PAGE / 8];
    let scan = |page: &[u64], k: u64| {
        timed(k as usize, |_| {
            // page_same_filled: every word equal to the first.
            let p = black_box(page);
            let first = p[0];
            black_box(p.iter().all(|&w| w == first));
        })
    };
    let s1 = scan(&page, reps);
    let s2 = scan(&page, 2 * reps);
    let fill = |page: &mut [u64], k: u64| {
        timed(k as usize, |_| {
            let p = black_box(&mut *page);
            p.fill(black_box(0));
        })
    };
    let f1 = fill(&mut page, reps);
    let f2 = fill(&mut page, 2 * reps);
    let getppid = |k: u64| {
        timed(k as usize, |_| {
            black_box(std::os::unix::process::parent_id());
        })
    };
    let y1 = getppid(reps);
    let y2 = getppid(2 * reps);
    let (l2_bytes, l2_ways) = cache_geometry(2).unwrap_or((0, 0));
    let copy_l2_ns = match l2_bytes {
        0 => None,
        _ => Some(copy_from_l2(l2_bytes, reps)?),
    };
    Ok(UserBench {
        llc_bytes: llc,
        pool_pages: n as u64,
        clear_page_ns: [c1, c2],
        copy_page_ns: [p1, p2],
        hot_reps: reps,
        zero_scan_ns: [s1, s2],
        fill_ns: [f1, f2],
        syscall_ns: [y1, y2],
        l2_bytes,
        l2_ways,
        copy_l2_ns,
    })
}

/// 4 KiB copies into one hot page from a set of half the L2, `reps` and
/// `2·reps` of them, the set walked in turn after a pass that loads it.
fn copy_from_l2(l2_bytes: u64, reps: u64) -> Result<[u64; 2], String> {
    let pages = (l2_bytes as usize / 2 / PAGE).max(1);
    let src = pool(pages)?;
    let mut dst = vec![0u8; PAGE];
    let mut copy = |k: u64| {
        timed(k as usize, |i| {
            let i = i % pages;
            dst.copy_from_slice(&src[i * PAGE..(i + 1) * PAGE]);
            black_box(&dst);
        })
    };
    copy(pages as u64);
    Ok([copy(reps), copy(2 * reps)])
}

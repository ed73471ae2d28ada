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
}

/// The last-level cache's size from sysfs (the largest cache index).
pub fn llc_bytes() -> u64 {
    (0..8)
        .filter_map(|i| {
            let p = format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
            let s = std::fs::read_to_string(p).ok()?;
            let s = s.trim();
            let (num, mul) = match s.strip_suffix('K') {
                Some(n) => (n, 1024),
                None => match s.strip_suffix('M') {
                    Some(n) => (n, 1 << 20),
                    None => (s, 1),
                },
            };
            num.parse::<u64>().ok().map(|n| n * mul)
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
    Ok(UserBench {
        llc_bytes: llc,
        pool_pages: n as u64,
        clear_page_ns: [c1, c2],
        copy_page_ns: [p1, p2],
        hot_reps: reps,
        zero_scan_ns: [s1, s2],
        fill_ns: [f1, f2],
        syscall_ns: [y1, y2],
    })
}

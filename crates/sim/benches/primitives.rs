//! Host microbenchmarks behind cost_model.rs's constants: clearing and copying a
//! 4 KiB page that is not in cache, and LZO1X-1 (de)compression of a page
//! shaped like the ones mmsim and its native runner write (zero but for a
//! 4-byte content token). Prints ns per operation.
//!
//!   cargo bench -p mmsim-sim --bench primitives
//!
//! LZO1X-1 (minilzo, the algorithm the kernel's lzo1x_1_compress derives
//! from) bounds zram's default lzo-rle from above on such pages: lzo-rle adds
//! run-length encoding of zero runs, which only makes them cheaper.

use std::hint::black_box;
use std::time::Instant;

const PAGE: usize = 4096;
/// A 256 MiB pool walked page by page, so every page is cold in cache.
const POOL_PAGES: usize = 65536;

/// ns per call of `f`: the minimum and the median of 7 rounds of `n` calls
/// (the minimum is the least disturbed by other load on the machine).
fn per_op(n: usize, mut f: impl FnMut(usize)) -> (f64, f64) {
    let mut rounds: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for i in 0..n {
                f(i);
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    rounds.sort_by(|a, b| a.total_cmp(b));
    (rounds[0], rounds[3])
}

fn main() {
    let mut pool = vec![1u8; POOL_PAGES * PAGE];
    let src = vec![3u8; PAGE];
    let clear = per_op(POOL_PAGES, |i| {
        let p = &mut pool[i * PAGE..(i + 1) * PAGE];
        p.fill(0);
        black_box(p);
    });
    let copy = per_op(POOL_PAGES, |i| {
        let p = &mut pool[(POOL_PAGES - 1 - i) * PAGE..(POOL_PAGES - i) * PAGE];
        p.copy_from_slice(black_box(&src));
        black_box(p);
    });
    let mut lzo = minilzo_rs::LZO::init().expect("minilzo");
    let mut page = vec![0u8; PAGE];
    let mut out = Vec::new();
    let n = 100_000;
    let compress = per_op(n, |i| {
        page[..4].copy_from_slice(&(i as u32).to_le_bytes());
        out = lzo.compress(black_box(&page)).expect("compress");
    });
    let decompress = per_op(n, |_| {
        black_box(
            lzo.decompress_safe(black_box(&out), PAGE)
                .expect("decompress"),
        );
    });
    println!("ns per operation: minimum and median of 7 rounds");
    println!(
        "clear 4 KiB (cold)           {:6.0} {:6.0}   cost_model.rs CLEAR_PAGE_NS",
        clear.0, clear.1
    );
    println!(
        "copy 4 KiB (cold dst)        {:6.0} {:6.0}   cost_model.rs COPY_PAGE_NS",
        copy.0, copy.1
    );
    println!(
        "LZO1X-1 compress, token page {:6.0} {:6.0}   ({} bytes out)  cost_model.rs ZRAM_COMPRESS_NS",
        compress.0,
        compress.1,
        out.len()
    );
    println!("LZO1X-1 decompress           {:6.0} {:6.0}   (minilzo copies zero runs byte by byte; lzo-rle does not)", decompress.0, decompress.1);
}

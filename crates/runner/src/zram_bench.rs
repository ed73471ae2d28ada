//! `--native --zram-bench PAGES`: what the kernel's zram charges a page,
//! measured on its own, for `mmsim calibrate`. The spec's zram swap is set
//! up (journalled, undone on every exit path) and swapped off again, so
//! zram0 is a raw block device; then 4 KiB O_DIRECT writes and reads go
//! straight to `zram_submit_bio` → `zram_write_page`/`zram_read_page`:
//!
//! - pages as the runner's touches leave them (a native-endian u32 token
//!   ≥ 1 at offset 0, 4092 zero bytes): compressed with the device's
//!   algorithm and stored in zsmalloc;
//! - zero pages: zram's same-filled path, which stores nothing. The same
//!   syscall and bio path as the token pages, so the difference is the
//!   compression and the store less a 4 KiB scan (and, reading, the
//!   decompression less a 4 KiB fill), which calibrate adds back from its
//!   own user-space measurement.
//!
//! Each kind is timed at PAGES and at 2·PAGES fresh slots, so fixed costs
//! cancel in the difference. mm_stat's mem_used_total after the token
//! writes gives the pool bytes per stored page.

use mmsim_spec::content::Kind;
use mmsim_spec::output::{ZramBench, ZramContentBench, ZramContentEntry};
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::Instant;

const PAGE: usize = 4096;

/// A page-aligned buffer (O_DIRECT needs one).
struct Aligned(*mut u8);

impl Aligned {
    fn new() -> Result<Aligned, String> {
        let mut p = std::ptr::null_mut();
        // SAFETY: posix_memalign writes a valid pointer on success.
        if unsafe { libc::posix_memalign(&mut p, PAGE, PAGE) } != 0 {
            return Err("cannot allocate an aligned page".into());
        }
        // SAFETY: PAGE bytes were just allocated.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, PAGE) };
        Ok(Aligned(p as *mut u8))
    }

    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: PAGE bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.0, PAGE) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated by posix_memalign.
        unsafe { libc::free(self.0 as *mut libc::c_void) };
    }
}

/// One 4 KiB I/O at slot `s` went through whole.
fn whole_page(r: std::io::Result<usize>, s: u64) -> Result<(), String> {
    match r {
        Ok(PAGE) => Ok(()),
        Ok(k) => Err(format!("short zram I/O at slot {s}: {k} bytes")),
        Err(e) => Err(format!("zram I/O at slot {s}: {e}")),
    }
}

/// Times one pass over slots `[first, first + n)`.
fn pass(
    dev: &std::fs::File,
    buf: &mut Aligned,
    first: u64,
    n: u64,
    write: bool,
    token: bool,
) -> Result<u64, String> {
    let t = Instant::now();
    for s in first..first + n {
        let off = s * PAGE as u64;
        let r = if write {
            let b = buf.slice();
            if token {
                b[..4].copy_from_slice(&((s as u32) | 1).to_ne_bytes());
            }
            dev.write_at(b, off)
        } else {
            dev.read_at(buf.slice(), off)
        };
        whole_page(r, s)?;
    }
    Ok(t.elapsed().as_nanos() as u64)
}

/// Runs the bench on the spec's first swap device (set up, then swapped
/// off); the caller's `Setup` undoes it all.
pub fn run(node: &crate::setup::SwapNode, pages: u64) -> Result<ZramBench, String> {
    node.swapoff()
        .map_err(|e| format!("swapoff {}: {e}", node.path))?;
    let name = node.path.trim_start_matches("/dev/");
    let sys =
        |f: &str| std::fs::read_to_string(format!("/sys/block/{name}/{f}")).unwrap_or_default();
    let disk_pages = sys("size").trim().parse::<u64>().unwrap_or(0) * 512 / PAGE as u64;
    if disk_pages < 6 * pages {
        return Err(format!(
            "zram bench: {} has {disk_pages} pages, expected at least 6 × {pages}",
            node.path
        ));
    }
    let dev = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&node.path)
        .map_err(|e| format!("open {}: {e}", node.path))?;
    let mut buf = Aligned::new()?;
    // Token pages in slots [0, 3n), zero pages in [3n, 6n).
    let (n, z) = (pages, 3 * pages);
    let wt = [
        pass(&dev, &mut buf, 0, n, true, true)?,
        pass(&dev, &mut buf, n, 2 * n, true, true)?,
    ];
    let pool_bytes = sys("mm_stat")
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    buf.slice().fill(0);
    let wz = [
        pass(&dev, &mut buf, z, n, true, false)?,
        pass(&dev, &mut buf, z + n, 2 * n, true, false)?,
    ];
    let rt = [
        pass(&dev, &mut buf, 0, n, false, true)?,
        pass(&dev, &mut buf, n, 2 * n, false, true)?,
    ];
    let rz = [
        pass(&dev, &mut buf, z, n, false, false)?,
        pass(&dev, &mut buf, z + n, 2 * n, false, false)?,
    ];
    let algo = sys("comp_algorithm");
    Ok(ZramBench {
        comp_algorithm: crate::setup::current_value(&algo),
        pages,
        write_token_ns: wt,
        write_zero_ns: wz,
        read_token_ns: rt,
        read_zero_ns: rz,
        pool_bytes,
        token_pages: 3 * pages,
    })
}

/// The kinds the content bench writes: the token pages (the reference
/// every other is differenced against), each named kind, and ratios from
/// 1.5 to 32.
fn content_kinds() -> Vec<(String, Option<Kind>)> {
    let mut v = vec![("token".to_string(), None)];
    for k in [Kind::Zero, Kind::Same, Kind::Text, Kind::Random] {
        v.push((k.name(), Some(k)));
    }
    for r in [150, 200, 300, 400, 800, 1600, 3200] {
        v.push((Kind::Ratio(r).name(), Some(Kind::Ratio(r))));
    }
    v
}

/// Times one pass over slots `[first, first + n)` writing pages of
/// `kind` (None: token pages) or reading.
fn content_pass(
    dev: &std::fs::File,
    buf: &mut Aligned,
    (first, n): (u64, u64),
    write: Option<Option<Kind>>,
) -> Result<u64, String> {
    // The page bytes are made before the clock starts: 16 per kind, as the
    // runner's templates.
    let mut pages = vec![0u8; 16 * PAGE];
    if let Some(Some(k)) = write {
        for (i, p) in pages.chunks_exact_mut(PAGE).enumerate() {
            mmsim_spec::content::fill(k, i as u64, 1, p);
        }
    }
    let t = Instant::now();
    for s in first..first + n {
        let off = s * PAGE as u64;
        let r = match write {
            Some(kind) => {
                let b = buf.slice();
                match kind {
                    Some(Kind::Same) => mmsim_spec::content::fill_same((s as u32) | 1, b),
                    Some(_) => {
                        let i = (s % 16) as usize * PAGE;
                        b.copy_from_slice(&pages[i..i + PAGE]);
                    }
                    None => {
                        b.fill(0);
                        b[..4].copy_from_slice(&((s as u32) | 1).to_ne_bytes());
                    }
                }
                dev.write_at(b, off)
            }
            None => dev.read_at(buf.slice(), off),
        };
        whole_page(r, s)?;
    }
    Ok(t.elapsed().as_nanos() as u64)
}

/// `--native --zram-content-bench PAGES`: every compressor this kernel's
/// zram offers, every content kind: n and 2n fresh slots written, then
/// read, each timed, mm_stat after the writes (the device reset, its
/// compressor set and its disksize written again for each pair). The
/// page bytes are the runner's own (mmsim_spec::content::fill). The
/// copy of a page into the I/O buffer is inside the timed loop for every
/// kind alike (token pages are zeroed and stamped), so differences
/// between kinds are zram's.
pub fn run_content(node: &crate::setup::SwapNode, pages: u64) -> Result<ZramContentBench, String> {
    node.swapoff()
        .map_err(|e| format!("swapoff {}: {e}", node.path))?;
    let name = node.path.trim_start_matches("/dev/").to_string();
    let sys = |f: &str| format!("/sys/block/{name}/{f}");
    let read = |f: &str| std::fs::read_to_string(sys(f)).unwrap_or_default();
    let write = |f: &str, v: &str| {
        std::fs::write(sys(f), v).map_err(|e| format!("write {v} to {}: {e}", sys(f)))
    };
    let disksize = read("disksize").trim().to_string();
    let offered = read("comp_algorithm");
    let original = crate::setup::current_value(&offered);
    let algos: Vec<String> = offered
        .replace(['[', ']'], " ")
        .split_whitespace()
        .map(String::from)
        .collect();
    let mut entries = Vec::new();
    let mut buf = Aligned::new()?;
    for algo in &algos {
        for (kind_name, kind) in content_kinds() {
            write("reset", "1")?;
            write("comp_algorithm", algo)?;
            write("disksize", &disksize)?;
            let dev = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(&node.path)
                .map_err(|e| format!("open {}: {e}", node.path))?;
            let n = pages;
            let write_ns = [
                content_pass(&dev, &mut buf, (0, n), Some(kind))?,
                content_pass(&dev, &mut buf, (n, 2 * n), Some(kind))?,
            ];
            let mm = mmsim_spec::output::ZramMmStat::parse(0, read("mm_stat").trim())
                .ok_or("cannot read mm_stat")?;
            let read_ns = [
                content_pass(&dev, &mut buf, (0, n), None)?,
                content_pass(&dev, &mut buf, (n, 2 * n), None)?,
            ];
            entries.push(ZramContentEntry {
                compressor: algo.clone(),
                kind: kind_name,
                write_ns,
                read_ns,
                mm_stat: mm,
            });
        }
    }
    write("reset", "1")?;
    write("comp_algorithm", &original)?;
    write("disksize", &disksize)?;
    Ok(ZramContentBench {
        date: String::new(),
        pages,
        entries,
    })
}

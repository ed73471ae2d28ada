//! `read` and `write`: pread(2) and pwrite(2) of a file's pages, each page
//! checked against (or given) its content token.

use crate::exec::Child;
use crate::region::{open_file, PAGE};
use crate::setup::SharedFile;

pub(super) fn run(
    c: &mut Child,
    write: bool,
    file: usize,
    offset: u64,
    length: u64,
    chunk: u64,
) -> Result<(), String> {
    let f = c
        .files
        .get(file)
        .ok_or_else(|| format!("there is no file {file}"))?;
    let (checked, bad) = file_io(f, write, offset, length, chunk)?;
    c.checked += checked;
    c.violations += bad;
    Ok(())
}

/// A `read` or `write` step: pread(2) or pwrite(2) of the file's pages
/// `[offset, offset + length)`, `chunk` pages per call, through one buffer
/// of `chunk` pages (this process's own memory, allocated once per step).
/// A write gives each page its next content token (an atomic fetch-and-add
/// on the file's token array, as a `touch` write of a mapping does) in its
/// first 4 bytes, the rest zeros; a read checks each page's first 4 bytes
/// against the array (a page never written reads 0). Returns (pages
/// checked, violations). Races with concurrent writers as `touch` does.
pub(crate) fn file_io(
    f: &SharedFile,
    write: bool,
    offset: u64,
    length: u64,
    chunk: u64,
) -> Result<(u64, u64), String> {
    use std::os::unix::fs::FileExt;
    if offset + length > f.pages {
        return Err(format!(
            "pages {offset}..{} of {}, which has {} pages",
            offset + length,
            f.path,
            f.pages
        ));
    }
    let h = open_file(f)?;
    let chunk = chunk.clamp(1, length.max(1)) as usize;
    // Zeros; a write only ever changes each page's first 4 bytes.
    let mut buf = vec![0u8; chunk * PAGE];
    let (mut checked, mut bad) = (0, 0);
    let mut page = offset as usize;
    let end = (offset + length) as usize;
    while page < end {
        let n = chunk.min(end - page);
        let bytes = &mut buf[..n * PAGE];
        let at = (page * PAGE) as u64;
        if write {
            for i in 0..n {
                let t = f.tokens.next(page + i);
                bytes[i * PAGE..i * PAGE + 4].copy_from_slice(&t.to_ne_bytes());
            }
            h.write_all_at(bytes, at)
                .map_err(|e| format!("pwrite of pages {page}..{} of {}: {e}", page + n, f.path))?;
        } else {
            h.read_exact_at(bytes, at)
                .map_err(|e| format!("pread of pages {page}..{} of {}: {e}", page + n, f.path))?;
            for i in 0..n {
                let found = u32::from_ne_bytes(bytes[i * PAGE..i * PAGE + 4].try_into().unwrap());
                checked += 1;
                bad += (found != f.tokens.get(page + i)) as u64;
            }
        }
        page += n;
    }
    Ok((checked, bad))
}

//! `stream`: successive windows of a file mapped, read page by page (with
//! the per-page work) and unmapped.

use super::time::spin;
use crate::exec::Child;
use crate::region::{touch, unmap_region};
use mmsim_spec::MapKind;

pub(super) fn run(
    c: &mut Child,
    file: usize,
    offset: u64,
    length: u64,
    window: u64,
    work: u64,
) -> Result<(), String> {
    let end = offset + length;
    let mut next = offset;
    // MAP_SHARED, read only: a disk file's page cache, or a tmpfs file's
    // shmem pages.
    let kind = match c.files.get(file).and_then(|f| f.disk) {
        Some(_) => MapKind::File,
        None => MapKind::Shmem,
    };
    while next < end {
        let n = window.min(end - next);
        let mut r = c.map(kind, n, Some(file), next, false)?;
        for p in 0..n as usize {
            let (checked, bad) = touch(&mut r, p, false);
            c.checked += checked;
            c.violations += bad;
            spin(work);
        }
        unmap_region(r);
        next += n;
    }
    Ok(())
}

//! `fsync`: fsync(2) of a file.

use crate::exec::Child;
use crate::region::open_file;

pub(super) fn run(c: &mut Child, file: usize) -> Result<(), String> {
    let f = c
        .files
        .get(file)
        .ok_or_else(|| format!("there is no file {file}"))?;
    open_file(f).and_then(|h| {
        h.sync_all()
            .map_err(|e| format!("fsync of {}: {e}", f.path))
    })
}

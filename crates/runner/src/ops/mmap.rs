//! `mmap`: a region mapped (`Child::map`), under its name.

use crate::exec::Child;
use mmsim_spec::MapKind;

pub(super) fn run(
    c: &mut Child,
    name: &str,
    kind: MapKind,
    pages: u64,
    file: Option<usize>,
    offset: u64,
    exec: bool,
) -> Result<(), String> {
    let r = c.map(kind, pages, file, offset, exec)?;
    c.regions.insert(name.to_string(), r);
    Ok(())
}

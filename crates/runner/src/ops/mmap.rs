//! `mmap`: a region mapped (`Child::map`), under its name.

use crate::exec::Child;
use crate::region::RegionContent;
use mmsim_spec::content::Content;
use mmsim_spec::MapKind;

pub(super) fn run(
    c: &mut Child,
    name: &str,
    (kind, pages, file, offset, exec): (MapKind, u64, Option<usize>, u64, bool),
    content: Option<&Content>,
) -> Result<(), String> {
    let mut r = c.map(kind, pages, file, offset, exec)?;
    r.content = content.map(|ct| std::sync::Arc::new(RegionContent::new(name, ct, pages)));
    c.regions.insert(name.to_string(), r);
    Ok(())
}

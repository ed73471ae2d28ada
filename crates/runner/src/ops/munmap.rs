//! `munmap`: munmap(2) of a region, and its key-value server's data.

use crate::exec::Child;
use crate::region::unmap_region;

pub(super) fn run(c: &mut Child, region: &str) -> Result<(), String> {
    let r = c
        .regions
        .remove(region)
        .ok_or_else(|| format!("no region {region}"))?;
    c.kv_dbs.remove(region);
    unmap_region(r);
    Ok(())
}

//! `phase`: closes the open phase (its time and /proc/vmstat delta) and
//! opens the next.

use crate::exec::Child;
use crate::procfs;

pub(super) fn run(c: &mut Child, name: &str) -> Result<(), String> {
    c.close_phase();
    c.open_requests = 0;
    c.open = Some((name.to_string(), c.now(), procfs::vmstat()));
    Ok(())
}

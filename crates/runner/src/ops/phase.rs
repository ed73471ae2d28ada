//! `phase`: closes the open phase (its time and /proc/vmstat delta) and
//! opens the next.

use crate::exec::{Child, OpenPhase};
use crate::procfs;

pub(super) fn run(c: &mut Child, name: &str) -> Result<(), String> {
    c.close_phase();
    c.open_requests = 0;
    c.open = Some(OpenPhase {
        name: name.to_string(),
        start: c.now(),
        vmstat: procfs::vmstat(),
        pressure: procfs::pressure(None),
    });
    Ok(())
}

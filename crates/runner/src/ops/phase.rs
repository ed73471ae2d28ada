//! `phase`: closes the open phase (its time and /proc/vmstat delta) and
//! opens the next.

use crate::exec::{Child, OpenPhase};
use crate::procfs;

pub(super) fn run(c: &mut Child, name: &str) -> Result<(), String> {
    c.close_phase();
    c.open_requests = 0;
    // The counters are read before the phase's clock starts (and after it
    // stops, close_phase): one read of /proc/vmstat and the ~150 mTHP
    // stats files in sysfs takes ~1.5 ms here, and with both reads inside
    // the window an empty phase measured 2.7-3.9 ms natively (AMD EPYC
    // guest, Linux 6.18), a tenth of the suite's shortest phases.
    let (vmstat, pressure) = (procfs::vmstat(), procfs::pressure(None));
    c.open = Some(OpenPhase {
        name: name.to_string(),
        start: c.now(),
        vmstat,
        pressure,
    });
    Ok(())
}

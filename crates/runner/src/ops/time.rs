//! `sleep` and `compute`: time without memory accesses, off the CPU and
//! on it.

use std::time::Duration;

/// `sleep`: the process sleeps.
pub(super) fn sleep(ns: u64) -> Result<(), String> {
    std::thread::sleep(Duration::from_nanos(ns));
    Ok(())
}

/// `compute`: user CPU time.
pub(super) fn compute(ns: u64) -> Result<(), String> {
    spin(ns);
    Ok(())
}

/// Burns `ns` of CPU time (a stream's per-page work, e.g. hashing): spins
/// on the monotonic clock.
pub(crate) fn spin(ns: u64) {
    if ns == 0 {
        return;
    }
    let t0 = std::time::Instant::now();
    while (t0.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

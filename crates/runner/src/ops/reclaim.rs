//! `reclaim`: a write to the cgroup's memory.reclaim.

use crate::setup::cgroup_dir;

/// Writes `pages` (and `swappiness=`) to memory.reclaim. EAGAIN (less was
/// reclaimable than asked) is the workload's to ignore, as proactive
/// reclaimers do: the steps go on, as the simulator's do.
pub(super) fn run(cgroup: &str, pages: u64, swappiness: Option<u32>) -> Result<(), String> {
    if let crate::cgroup::Mode::V1(_) = crate::cgroup::mode() {
        return Err("a reclaim step writes memory.reclaim, which cgroup v1 (this kernel's memory controller) does not have".into());
    }
    let mut value = (pages * 4096).to_string();
    if let Some(s) = swappiness {
        value += &format!(" swappiness={s}");
    }
    let path = format!("{}/memory.reclaim", cgroup_dir(cgroup));
    match std::fs::write(&path, &value) {
        Err(e) if e.raw_os_error() != Some(libc::EAGAIN) => {
            Err(format!("cannot write \"{value}\" to {path}: {e}"))
        }
        _ => Ok(()),
    }
}

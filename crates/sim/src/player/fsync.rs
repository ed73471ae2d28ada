//! `fsync`: fsync(2) of a file.

use super::Player;
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;

/// tmpfs has noop_fsync; a regular file's task sleeps until its pages
/// are written. Counts the pages it may visit.
pub(super) fn start(p: &mut Player, k: &mut Kernel, file: usize) -> Option<SliceEnd> {
    p.done_work += p.file_pages.get(file).copied().unwrap_or(0).max(1);
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    if k.inodes[file].is_shmem() {
        return None;
    }
    let done = k.filemap_fsync(file as u32)?;
    (done > k.now()).then_some(SliceEnd::Sleep(done))
}

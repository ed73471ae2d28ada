//! `drop_caches`: echo 3 > /proc/sys/vm/drop_caches.

use super::Player;
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;

/// Counts every file's pages (what it may visit).
pub(super) fn start(p: &mut Player, k: &mut Kernel) -> Option<SliceEnd> {
    p.done_work += p.file_pages.iter().sum::<u64>().max(1);
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    k.drop_caches();
    k.drop_slab();
    None
}

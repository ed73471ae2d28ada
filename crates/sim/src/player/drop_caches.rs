//! `drop_caches`: echo 3 > /proc/sys/vm/drop_caches.

use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::SliceEnd;

pub(super) fn start(k: &mut Kernel) -> Option<SliceEnd> {
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    k.drop_caches();
    k.drop_slab();
    None
}

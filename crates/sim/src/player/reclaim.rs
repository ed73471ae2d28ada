//! `reclaim`: a write to a cgroup's memory.reclaim.

use super::{at_step, Player};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;
use crate::SimError;
use mmsim_spec::Step;

/// memory.reclaim came in 5.19, its `swappiness=` after 6.1: a spec that
/// asks for either where the preset's kernel has none is refused (the
/// real write would fail: no such file, EINVAL). The write failing with
/// EAGAIN (less reclaimable than asked) is a workload's to ignore, as
/// proactive reclaimers do: the steps go on.
pub(super) fn start(
    p: &mut Player,
    k: &mut Kernel,
    step: &Step,
    (cgroup, pages, swappiness): (&str, u64, Option<u32>),
) -> Result<Option<SliceEnd>, SimError> {
    if !k.release.memory_reclaim {
        let e = "found a reclaim step, expected none on this kernel: memory.reclaim came in 5.19";
        return Err(at_step(step, SimError::Spec(e.into())));
    }
    if swappiness.is_some() && !k.release.memory_reclaim_batches {
        let e = "found swappiness, expected none on this kernel: 6.1's memory.reclaim takes an amount only (6.12's takes swappiness=)";
        return Err(at_step(step, SimError::Spec(e.into())));
    }
    p.done_work += 1;
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    let memcg = k
        .memcg_by_name(cgroup)
        .expect("the parser checked the cgroup");
    k.memory_reclaim(memcg, pages, swappiness);
    Ok(None)
}

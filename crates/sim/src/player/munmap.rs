//! `munmap`: a region goes, and with it any key-value server's data in it.

use super::{unknown_region, Player};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;
use crate::SimError;
use mmsim_spec::Step;

pub(super) fn start(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    step: &Step,
    region: &str,
) -> Result<Option<SliceEnd>, SimError> {
    // Counts the PTEs it visits.
    p.done_work += p.region_pages(i, k, region).max(1);
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    let t = &mut p.tasks[i];
    let vma = t
        .regions
        .remove(region)
        .ok_or_else(|| unknown_region(step, region))?;
    t.kv_dbs.remove(region);
    k.munmap(vma);
    Ok(None)
}

//! `madvise`: madvise(2) over a page range of a region.

use super::{at_step, Player};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;
use crate::SimError;
use mmsim_spec::{Op, Step};

pub(super) fn start(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    step: &Step,
) -> Result<Option<SliceEnd>, SimError> {
    let Op::Madvise {
        region,
        advice,
        offset,
        length,
    } = &step.op
    else {
        unreachable!("madvise::start runs madvise steps")
    };
    // Counts the PTEs of its range.
    let range = length.unwrap_or(p.region_pages(i, k, region).saturating_sub(*offset));
    p.done_work += range.max(1);
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    let vma = p.region(i, step, region)?;
    let pages = k.vmas[vma as usize].pages;
    let n = length.unwrap_or(pages - offset);
    k.madvise(vma, *offset as usize, n as usize, *advice)
        .map_err(|e| at_step(step, SimError::Spec(format!("madvise: {e}"))))?;
    Ok(None)
}

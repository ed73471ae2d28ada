//! `compute`: user CPU time without memory accesses, slice by slice.

use super::{Activity, Player};
use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};

pub(super) fn start(p: &mut Player, i: usize, ns: u64) -> Option<SliceEnd> {
    if ns > 0 {
        p.tasks[i].activity = Some(Activity::Compute(ns));
    }
    None
}

/// The compute's CPU time, up to the end of the slice.
pub(super) fn run(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &Slice,
    left: u64,
) -> Option<SliceEnd> {
    let run = left.min(k.work_in(slice.end().saturating_sub(k.now())));
    k.charge_user(run);
    // mmsim_spec::work counts a compute's 10 µs slices.
    let rest = left - run;
    p.done_work += left / mmsim_spec::work::NS_PER_OP - rest / mmsim_spec::work::NS_PER_OP;
    if rest == 0 {
        return None;
    }
    p.tasks[i].activity = Some(Activity::Compute(rest));
    Some(SliceEnd::Preempted)
}

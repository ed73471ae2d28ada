//! `repeat`: the body's steps, `times` passes over them.

use super::{Frame, Player};
use crate::sched::rq::SliceEnd;
use mmsim_spec::Step;

pub(super) fn start<'s>(
    p: &mut Player<'s>,
    i: usize,
    times: u64,
    steps: &'s [Step],
) -> Option<SliceEnd> {
    // A repeat of nothing is skipped, not looped over (mmsim_spec::work
    // counts it as no work).
    if !mmsim_spec::work::does_nothing(steps) {
        p.tasks[i].frames.push(Frame {
            steps,
            next: 0,
            again: times - 1,
        });
    }
    None
}

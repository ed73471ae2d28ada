//! `wait`: wait(2) until every child the task forked or spawned exits.

use super::Player;
use crate::sched::rq::SliceEnd;

pub(super) fn start(p: &mut Player, i: usize) -> Option<SliceEnd> {
    p.done_work += 1;
    (p.tasks[i].live_children > 0).then_some(SliceEnd::Wait)
}

//! `sleep`: the task gives up its CPU for a while.

use super::Player;
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;

pub(super) fn start(p: &mut Player, k: &Kernel, ns: u64) -> Option<SliceEnd> {
    p.done_work += 1;
    Some(SliceEnd::Sleep(k.now().saturating_add(ns)))
}

//! `sleep`: the task gives up its CPU for a while.

use crate::kernel::Kernel;
use crate::sched::SliceEnd;

pub(super) fn start(k: &Kernel, ns: u64) -> Option<SliceEnd> {
    Some(SliceEnd::Sleep(k.now().saturating_add(ns)))
}

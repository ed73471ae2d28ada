//! `wait`: the task waits until every child it forked or spawned, and
//! every thread it started, has exited.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::Fields;
use crate::parse::regions::{RegionCheck, Regions};

pub(super) struct Wait;

impl StepOp for Wait {
    fn word(&self) -> &'static str {
        "wait"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op"]
    }

    fn required(&self) -> &'static [&'static str] {
        &[]
    }

    fn build(&self, _cx: &mut StepCx, _f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Wait)
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Wait)
    }

    /// The threads have exited: the task may unmap what they shared.
    fn check(
        &self,
        cx: &mut RegionCheck,
        _key: &str,
        _op: &Op,
        _regions: &mut Regions,
    ) -> Result<(), SpecError> {
        cx.shared_with_threads.clear();
        Ok(())
    }
}

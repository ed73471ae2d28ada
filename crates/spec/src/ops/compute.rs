//! `compute`: user CPU time without memory accesses (a compiler's work).

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::{duration, Fields};
use crate::work::{Sizes, WorkCx, NS_PER_OP};

pub(super) struct Compute;

impl StepOp for Compute {
    fn word(&self) -> &'static str {
        "compute"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "duration"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["duration"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "duration" => "a duration such as \"250ms\"",
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Compute {
            ns: duration(cx.rep, f.req("duration"), &f.path("duration"))?,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Compute { .. })
    }

    /// One per shortest scheduling slice: a task computing beside others
    /// may run in slices this short.
    fn work(&self, cx: &WorkCx, op: &Op, _sizes: &mut Sizes) -> u128 {
        let Op::Compute { ns } = op else {
            unreachable!("not a compute")
        };
        ((*ns / NS_PER_OP) as u128).saturating_add(cx.khugepaged_work(*ns))
    }
}

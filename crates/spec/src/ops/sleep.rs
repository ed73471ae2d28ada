//! `sleep`: the task waits, using no CPU.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::{duration, Fields};
use crate::work::{Sizes, WorkCx};

pub(super) struct Sleep;

impl StepOp for Sleep {
    fn word(&self) -> &'static str {
        "sleep"
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
        Ok(Op::Sleep {
            ns: duration(cx.rep, f.req("duration"), &f.path("duration"))?,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Sleep { .. })
    }

    /// One event, and khugepaged's scans over its time (work.rs).
    fn work(&self, cx: &WorkCx, op: &Op, _sizes: &mut Sizes) -> u128 {
        let Op::Sleep { ns } = op else {
            unreachable!("not a sleep")
        };
        cx.khugepaged_work(*ns)
    }
}

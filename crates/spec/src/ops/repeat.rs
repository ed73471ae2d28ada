//! `repeat`: a body of steps run `times` over.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::{integer, Fields};
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{does_nothing, Sizes, WorkCx};

pub(super) struct Repeat;

impl StepOp for Repeat {
    fn word(&self) -> &'static str {
        "repeat"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "times", "steps"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["steps"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "steps" => "an array of step tables",
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        let times = match f.get("times") {
            None => 1,
            Some(t) => integer(
                cx.rep,
                t,
                &f.path("times"),
                1,
                i64::MAX,
                "a whole number of at least 1",
            )? as u64,
        };
        let steps = cx.body(f)?;
        Ok(Op::Repeat { times, steps })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Repeat { .. })
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Repeat { times, steps } = op else {
            unreachable!("not a repeat")
        };
        let body = format!("{key}.steps");
        // Every iteration after the first starts from the state the first
        // one left (a body maps, unmaps and remaps the same names each
        // time), so two walks see every state.
        let before = regions.clone();
        cx.body(&body, steps, regions)?;
        if *times >= 2 && *regions != before {
            cx.body(&body, steps, regions)?;
        }
        Ok(())
    }

    /// The body's work `times` over; nothing for a body that does nothing
    /// (the engines skip it).
    fn work(&self, cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let Op::Repeat { times, steps } = op else {
            unreachable!("not a repeat")
        };
        if does_nothing(steps) {
            0
        } else {
            (*times as u128).saturating_mul(cx.steps(steps, sizes))
        }
    }
}

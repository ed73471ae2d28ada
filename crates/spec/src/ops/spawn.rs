//! `spawn`: a new program (fork and exec) with a fresh address space, in
//! the task's cgroup, runs a body of steps beside the task and exits.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::Fields;
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{Sizes, WorkCx};

pub(super) struct Spawn;

impl StepOp for Spawn {
    fn word(&self) -> &'static str {
        "spawn"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "steps"]
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
        Ok(Op::Spawn { steps: cx.body(f)? })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Spawn { .. })
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        _regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Spawn { steps } = op else {
            unreachable!("not a spawn")
        };
        // A new program starts with no regions.
        cx.body(&format!("{key}.steps"), steps, &mut Regions::new())
    }

    fn work(&self, cx: &WorkCx, op: &Op, _sizes: &mut Sizes) -> u128 {
        let Op::Spawn { steps } = op else {
            unreachable!("not a spawn")
        };
        cx.steps(steps, &mut Sizes::new())
    }
}

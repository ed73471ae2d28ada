//! `fork`: a child process with a copy-on-write copy of the address space
//! runs a body of steps beside its parent, then exits.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::Fields;
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{Sizes, WorkCx};

pub(super) struct Fork;

impl StepOp for Fork {
    fn word(&self) -> &'static str {
        "fork"
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
        Ok(Op::Fork { steps: cx.body(f)? })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Fork { .. })
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Fork { steps } = op else {
            unreachable!("not a fork")
        };
        // The child starts with a copy of the parent's regions.
        let mut child = regions.clone();
        cx.body(&format!("{key}.steps"), steps, &mut child)
    }

    /// copy_page_range over every region so far, then the child's steps.
    fn work(&self, cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let Op::Fork { steps } = op else {
            unreachable!("not a fork")
        };
        let mapped: u128 = sizes.values().map(|&p| p as u128).sum();
        mapped.saturating_add(cx.steps(steps, &mut sizes.clone()))
    }
}

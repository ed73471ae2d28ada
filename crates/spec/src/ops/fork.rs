//! `fork` and `spawn`: a child process runs a body of steps beside its
//! parent, then exits. A fork's child starts with a copy-on-write copy of
//! the address space; a spawn's (fork and exec) with a fresh one, in the
//! task's cgroup.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::{Op, Step};
use crate::parse::fields::Fields;
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{Sizes, WorkCx};

/// `fork` (exec false) or `spawn` (exec true).
pub(super) struct Fork {
    pub exec: bool,
}

impl Fork {
    /// The body of a step this module built.
    fn body<'a>(&self, op: &'a Op) -> &'a [Step] {
        match (op, self.exec) {
            (Op::Fork { steps }, false) | (Op::Spawn { steps }, true) => steps,
            _ => unreachable!("not a {}", self.word()),
        }
    }
}

impl StepOp for Fork {
    fn word(&self) -> &'static str {
        if self.exec {
            "spawn"
        } else {
            "fork"
        }
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
        let steps = cx.body(f)?;
        Ok(if self.exec {
            Op::Spawn { steps }
        } else {
            Op::Fork { steps }
        })
    }

    fn owns(&self, op: &Op) -> bool {
        match op {
            Op::Fork { .. } => !self.exec,
            Op::Spawn { .. } => self.exec,
            _ => false,
        }
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        // A fork's child starts with a copy of the parent's regions, a new
        // program with none.
        let mut child = if self.exec {
            Regions::new()
        } else {
            regions.clone()
        };
        cx.process_body(&format!("{key}.steps"), self.body(op), &mut child)
    }

    /// fork: copy_page_range over every region so far, then the child's
    /// steps; spawn: the new program's steps.
    fn work(&self, cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let steps = self.body(op);
        if self.exec {
            return cx.steps(steps, &mut Sizes::new());
        }
        let mapped: u128 = sizes.values().map(|&p| p as u128).sum();
        mapped.saturating_add(cx.steps(steps, &mut sizes.clone()))
    }
}

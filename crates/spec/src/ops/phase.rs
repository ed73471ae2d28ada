//! `phase`: a mark that starts a named phase of the results (counters and
//! time from here to the next mark).

use super::{name_field, StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::Fields;
use crate::work::{Sizes, WorkCx};

pub(super) struct Phase;

impl StepOp for Phase {
    fn word(&self) -> &'static str {
        "phase"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "name"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["name"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "name" => "a string: a phase name of letters, digits, '_' or '-'",
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Phase {
            name: name_field(cx.rep, f, self, "name")?,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Phase { .. })
    }

    /// With `--check`, the invariant check's walk of every frame.
    fn work(&self, cx: &WorkCx, _op: &Op, _sizes: &mut Sizes) -> u128 {
        cx.phase
    }
}

//! `drop_caches`: `echo 3 > /proc/sys/vm/drop_caches`.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::Fields;
use crate::work::{Sizes, WorkCx};

pub(super) struct DropCaches;

impl StepOp for DropCaches {
    fn word(&self) -> &'static str {
        "drop_caches"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op"]
    }

    fn required(&self) -> &'static [&'static str] {
        &[]
    }

    fn build(&self, _cx: &mut StepCx, _f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::DropCaches)
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::DropCaches)
    }

    /// Every page of every file may be cached.
    fn work(&self, cx: &WorkCx, _op: &Op, _sizes: &mut Sizes) -> u128 {
        cx.all_file_pages as u128
    }
}

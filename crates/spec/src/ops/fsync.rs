//! `fsync`: fsync(2) of a `[[file]]`.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::{file_index, Fields};
use crate::work::{Sizes, WorkCx};

pub(super) struct Fsync;

impl StepOp for Fsync {
    fn word(&self) -> &'static str {
        "fsync"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "file"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["file"]
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Fsync {
            file: file_index(cx.rep, f, cx.files)?,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Fsync { .. })
    }

    /// Every page of the file may be dirty.
    fn work(&self, cx: &WorkCx, op: &Op, _sizes: &mut Sizes) -> u128 {
        let Op::Fsync { file } = op else {
            unreachable!("not an fsync")
        };
        cx.file_pages.get(*file).copied().unwrap_or(0) as u128
    }
}

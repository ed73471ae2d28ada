//! `stream`: map, read and unmap successive windows of a file's pages (a
//! hasher streaming a large file through mmap), with user CPU time spent
//! on each page.

use super::file_io::build_file_io;
use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::{duration, Fields};
use crate::work::{Sizes, WorkCx, NS_PER_OP};

pub(super) struct Stream;

impl StepOp for Stream {
    fn word(&self) -> &'static str {
        "stream"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "file", "offset", "length", "window", "work"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["file"]
    }

    /// Windows of 32 MiB by default.
    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        let Op::FileIo {
            file,
            offset,
            length,
            chunk,
            ..
        } = build_file_io(cx.rep, f, false, cx.files, "window", 8192)?
        else {
            unreachable!("build_file_io builds FileIo")
        };
        let work = match f.get("work") {
            None => 0,
            Some(w) => duration(cx.rep, w, &f.path("work"))?,
        };
        Ok(Op::Stream {
            file,
            offset,
            length,
            window: chunk,
            work,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Stream { .. })
    }

    /// Every page read, and the slices of its per-page work.
    fn work(&self, _cx: &WorkCx, op: &Op, _sizes: &mut Sizes) -> u128 {
        let Op::Stream { length, work, .. } = op else {
            unreachable!("not a stream")
        };
        (*length as u128).saturating_mul(1 + (*work / NS_PER_OP) as u128)
    }
}

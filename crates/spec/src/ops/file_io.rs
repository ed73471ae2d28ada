//! `read` and `write`: read(2) or write(2) of a `[[file]]`'s pages in
//! calls of `chunk` pages each (pread/pwrite).

use super::{StepCx, StepOp};
use crate::error::{Reporter, SpecError};
use crate::model::{File, Op};
use crate::parse::fields::{file_index, page_range, size, Fields};
use crate::units::PAGE_SIZE;
use crate::work::{Sizes, WorkCx};

/// `write` if `write`, else `read`.
pub(super) struct FileIo {
    pub write: bool,
}

impl StepOp for FileIo {
    fn word(&self) -> &'static str {
        if self.write {
            "write"
        } else {
            "read"
        }
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "file", "offset", "length", "chunk"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["file"]
    }

    /// 128 KiB calls by default.
    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        build_file_io(cx.rep, f, self.write, cx.files, "chunk", 32)
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::FileIo { write, .. } if *write == self.write)
    }

    /// Every page read or written.
    fn work(&self, _cx: &WorkCx, op: &Op, _sizes: &mut Sizes) -> u128 {
        let Op::FileIo { length, .. } = op else {
            unreachable!("not a read or write")
        };
        *length as u128
    }
}

/// `read`, `write` and `stream`: a page range of a file (default: the
/// whole file), in chunks of `chunk_key` (default `default_chunk` pages).
pub(super) fn build_file_io(
    rep: &Reporter,
    f: &Fields,
    write: bool,
    files: &[File],
    chunk_key: &str,
    default_chunk: u64,
) -> Result<Op, SpecError> {
    let file = file_index(rep, f, files)?;
    let file_pages = files[file].size / PAGE_SIZE;
    let (offset, length) = page_range(rep, f)?;
    let length = length.unwrap_or(file_pages.saturating_sub(offset));
    if offset >= file_pages || offset + length > file_pages {
        let key = if offset >= file_pages {
            "offset"
        } else {
            "length"
        };
        return Err(rep.at(
            f.get(key).map_or(f.at, |n| n.at),
            f.path(key),
            format!(
                "found the pages {offset}..{}, expected them inside file \"{}\" of {file_pages} pages",
                offset + length,
                files[file].name
            ),
        ));
    }
    let chunk = match f.get(chunk_key) {
        None => default_chunk,
        Some(c) => {
            let b = size(rep, c, &f.path(chunk_key))?;
            if b == 0 || !b.is_multiple_of(PAGE_SIZE) {
                return Err(rep.at(
                    c.at,
                    f.path(chunk_key),
                    format!(
                        "found {b} bytes, expected a whole number of 4 KiB pages, at least one"
                    ),
                ));
            }
            b / PAGE_SIZE
        }
    };
    Ok(Op::FileIo {
        write,
        file,
        offset,
        length,
        chunk,
    })
}

//! `mmap`: a new region, private or shared, anonymous or of a `[[file]]`.

use super::{name_field, StepCx, StepOp};
use crate::error::{Reporter, SpecError};
use crate::model::{File, FileOn, MapKind, Op};
use crate::parse::fields::{boolean, size, string, Fields, SIZE_WORDS};
use crate::parse::regions::{RegionCheck, Regions};
use crate::parse::MAX_MAP_BYTES;
use crate::units::PAGE_SIZE;
use crate::work::{Sizes, WorkCx};

pub(super) struct Mmap;

impl StepOp for Mmap {
    fn word(&self) -> &'static str {
        "mmap"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "name", "kind", "size", "file", "offset", "exec"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["name", "kind", "size"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "name" => "a string: a new region name of letters, digits, '_' or '-'",
            "kind" => "a string: one of anon, shmem, shared_anon, file, file_private",
            "size" => SIZE_WORDS,
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        let rep = cx.rep;
        let name = name_field(rep, f, self, "name")?;
        let kind = match string(rep, f.req("kind"), &f.path("kind"), self.words("kind"))? {
            "anon" => MapKind::Anon,
            "shmem" => MapKind::Shmem,
            "shared_anon" => MapKind::SharedAnon,
            "file" => MapKind::File,
            "file_private" => MapKind::FilePrivate,
            other => {
                return Err(rep.at(
                    f.req("kind").at,
                    f.path("kind"),
                    format!("found \"{other}\", expected one of anon, shmem, shared_anon, file, file_private"),
                ));
            }
        };
        let sz = f.req("size");
        let bytes = size(rep, sz, &f.path("size"))?;
        if bytes == 0 {
            return Err(rep.at(
                sz.at,
                f.path("size"),
                "found 0, expected a size of at least one page",
            ));
        }
        if bytes > MAX_MAP_BYTES {
            return Err(rep.at(
                sz.at,
                f.path("size"),
                format!("found {bytes} bytes, expected at most 128T (x86-64's user address space)"),
            ));
        }
        let pages = bytes.div_ceil(PAGE_SIZE);
        let (file, offset) = mmap_file(rep, f, kind, pages, cx.files)?;
        let exec = match f.get("exec") {
            None => false,
            Some(n) if file.is_none() || kind == MapKind::Shmem => {
                return Err(rep.at(
                    n.at,
                    f.path("exec"),
                    format!(
                        "found exec on kind \"{}\", expected it only with kind = \"file\" or \"file_private\" (a program's text)",
                        kind.name()
                    ),
                ))
            }
            Some(n) => boolean(rep, n, &f.path("exec"))?,
        };
        Ok(Op::Mmap {
            name,
            kind,
            pages,
            file,
            offset,
            exec,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Mmap { .. })
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Mmap { name, pages, .. } = op else {
            unreachable!("not an mmap")
        };
        if regions.contains_key(name) {
            return Err(cx.err(
                key,
                "name",
                format!("found \"{name}\", which is already mapped; expected a new region name"),
            ));
        }
        regions.insert(name.clone(), *pages);
        Ok(())
    }

    fn work(&self, _cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let Op::Mmap { name, pages, .. } = op else {
            unreachable!("not an mmap")
        };
        sizes.insert(name.clone(), *pages);
        1
    }
}

/// The file and offset of a mapping: `shmem` needs a `[[file]]` on tmpfs,
/// `file` and `file_private` one on a disk, and the range must lie inside
/// it; other kinds take neither key.
fn mmap_file(
    rep: &Reporter,
    f: &Fields,
    kind: MapKind,
    pages: u64,
    files: &[File],
) -> Result<(Option<usize>, u64), SpecError> {
    if matches!(kind, MapKind::Anon | MapKind::SharedAnon) {
        for key in ["file", "offset"] {
            if let Some(n) = f.get(key) {
                return Err(rep.at(
                    n.at,
                    f.path(key),
                    format!(
                        "found {key}, which kind \"{}\" does not take; expected it only with kind = \"shmem\", \"file\" or \"file_private\"",
                        kind.name()
                    ),
                ));
            }
        }
        return Ok((None, 0));
    }
    let on_tmpfs = kind == MapKind::Shmem;
    let known: Vec<&str> = files
        .iter()
        .filter(|x| (x.on == FileOn::Tmpfs) == on_tmpfs)
        .map(|x| x.name.as_str())
        .collect();
    let words = format!(
        "a string: the name of a [[file]] {} ({})",
        if on_tmpfs {
            "on tmpfs"
        } else {
            "on a [[disk]]"
        },
        if known.is_empty() {
            "none defined".to_string()
        } else {
            known.join(", ")
        }
    );
    let node = f.get("file").ok_or_else(|| f.missing("file", &words))?;
    let name = string(rep, node, &f.path("file"), &words)?;
    let idx = files.iter().position(|x| x.name == name).ok_or_else(|| {
        rep.at(
            node.at,
            f.path("file"),
            format!("found \"{name}\", expected {words}"),
        )
    })?;
    if (files[idx].on == FileOn::Tmpfs) != on_tmpfs {
        let hint = if on_tmpfs {
            "a file on a disk is mapped with kind = \"file\" or \"file_private\""
        } else {
            "a tmpfs file is mapped with kind = \"shmem\" (MAP_PRIVATE of tmpfs files is not modelled yet)"
        };
        return Err(rep.at(
            node.at,
            f.path("file"),
            format!("found \"{name}\" ({hint}), expected {words}"),
        ));
    }
    let offset = match f.get("offset") {
        None => 0,
        Some(o) => {
            let b = size(rep, o, &f.path("offset"))?;
            if !b.is_multiple_of(PAGE_SIZE) {
                return Err(rep.at(
                    o.at,
                    f.path("offset"),
                    format!("found {b} bytes, expected a multiple of 4096"),
                ));
            }
            b / PAGE_SIZE
        }
    };
    let file_pages = files[idx].size / PAGE_SIZE;
    if offset + pages > file_pages {
        return Err(rep.at(
            f.get("size").expect("required").at,
            f.path("size"),
            format!(
                "found the file pages {offset}..{}, expected them inside file \"{name}\" of {file_pages} pages",
                offset + pages
            ),
        ));
    }
    Ok((Some(idx), offset))
}

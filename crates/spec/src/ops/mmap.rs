//! `mmap`: a new region, private or shared, anonymous or of a `[[file]]`.

use super::{name_field, StepCx, StepOp};
use crate::content::{ratio_hundredths, Content, Kind};
use crate::error::{Reporter, SpecError};
use crate::model::{File, FileOn, MapKind, Op};
use crate::parse::fields::{
    boolean, integer, number, size, string, type_error, Fields, SIZE_WORDS,
};
use crate::parse::regions::{RegionCheck, Regions};
use crate::parse::MAX_MAP_BYTES;
use crate::tree::{Node, Val};
use crate::units::PAGE_SIZE;
use crate::work::{Sizes, WorkCx};

pub(super) struct Mmap;

impl StepOp for Mmap {
    fn word(&self) -> &'static str {
        "mmap"
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "op", "name", "kind", "size", "file", "offset", "exec", "content",
        ]
    }

    fn required(&self) -> &'static [&'static str] {
        &["name", "kind", "size"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "name" => "a string: a new region name of letters, digits, '_' or '-'",
            "kind" => "a string: one of anon, shmem, shared_anon, file, file_private",
            "size" => SIZE_WORDS,
            "content" => CONTENT_WORDS,
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
        let content = match f.get("content") {
            None => None,
            Some(n) if matches!(kind, MapKind::File | MapKind::FilePrivate) => {
                return Err(rep.at(
                    n.at,
                    f.path("content"),
                    format!(
                        "found content on kind \"{}\", expected it only on kind = \"anon\", \"shmem\" or \"shared_anon\" (the pages that swap; a file's pages are written back to its disk as they are)",
                        kind.name()
                    ),
                ))
            }
            Some(n) => Some(content(rep, n, &f.path("content"))?),
        };
        Ok(Op::Mmap {
            name,
            kind,
            pages,
            file,
            offset,
            exec,
            content,
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

const CONTENT_WORDS: &str = "a page content: \"zero\", \"same\", \"text\" or \"random\"; a table { ratio = R } with R from 1.0 to 32.0; or an array of those, each a table with a `weight` (a positive integer), e.g. [{ kind = \"text\", weight = 3 }, { ratio = 2.0, weight = 1 }]";

/// `content`: one kind, or a mix with weights.
fn content(rep: &Reporter, node: &Node, key: &str) -> Result<Content, SpecError> {
    match &node.val {
        Val::Array(items) if !items.is_empty() => {
            let mut parts: Vec<(Kind, u32)> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let k = format!("{key}[{i}]");
                let f = Fields::of(rep, k.clone(), item, CONTENT_WORDS)?;
                f.only(&["kind", "ratio", "weight"], "a content part")?;
                let kind = content_kind(rep, &f, item, &k)?;
                let w = f.require("weight", "a positive integer")?;
                let weight = integer(
                    rep,
                    w,
                    &f.path("weight"),
                    1,
                    1 << 20,
                    "an integer from 1 to 1048576",
                )?;
                if parts.iter().any(|p| p.0 == kind) {
                    return Err(rep.at(
                        item.at,
                        k,
                        format!(
                            "found the kind {} twice, expected each kind once in a mix",
                            kind.name()
                        ),
                    ));
                }
                parts.push((kind, weight as u32));
            }
            Ok(Content { parts })
        }
        Val::Str(_) | Val::Table(_) => {
            let kind = match &node.val {
                Val::Table(_) => {
                    let f = Fields::of(rep, key.to_string(), node, CONTENT_WORDS)?;
                    f.only(&["kind", "ratio"], "content")?;
                    content_kind(rep, &f, node, key)?
                }
                _ => named_kind(rep, node, key)?,
            };
            Ok(Content::one(kind))
        }
        _ => Err(type_error(rep, node, key, CONTENT_WORDS)),
    }
}

/// A table's kind: `kind = "text"` or `ratio = R`, exactly one.
fn content_kind(rep: &Reporter, f: &Fields, node: &Node, key: &str) -> Result<Kind, SpecError> {
    match (f.get("kind"), f.get("ratio")) {
        (Some(k), None) => named_kind(rep, k, &f.path("kind")),
        (None, Some(r)) => {
            let words = "a number from 1.0 to 32.0 (the page's size over its compressed size)";
            let v = number(rep, r, &f.path("ratio"), words)?;
            ratio_hundredths(v)
                .map(Kind::Ratio)
                .ok_or_else(|| type_error(rep, r, &f.path("ratio"), words))
        }
        _ => Err(rep.at(
            node.at,
            key.to_string(),
            "found a content table with neither or both of `kind` and `ratio`, expected exactly one",
        )),
    }
}

fn named_kind(rep: &Reporter, node: &Node, key: &str) -> Result<Kind, SpecError> {
    let words = "a string: one of zero, same, text, random (or a table { ratio = R })";
    let s = string(rep, node, key, words)?;
    match Kind::parse(s) {
        Some(k) if !matches!(k, Kind::Ratio(_)) => Ok(k),
        _ => Err(type_error(rep, node, key, words)),
    }
}

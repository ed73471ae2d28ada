//! Reading the values of a table: its keys, and each value checked for
//! its type and range, with the error naming the key and its line.

use crate::error::{Reporter, SpecError};
use crate::model::File;
use crate::tree::{self, join, At, Node, Table, Val};
use crate::units::{self, Limit, PAGE_SIZE};

/// A table being read: its key path, where it is, and its entries.
pub(crate) struct Fields<'a> {
    pub(crate) rep: &'a Reporter<'a>,
    pub(crate) key: String,
    pub(crate) at: At,
    pub(crate) table: &'a Table,
}

impl<'a> Fields<'a> {
    /// `node` must be a table; `expected` says what kind, for the error.
    pub(crate) fn of(
        rep: &'a Reporter<'a>,
        key: String,
        node: &'a Node,
        expected: &str,
    ) -> Result<Self, SpecError> {
        match node.table() {
            Some(table) => Ok(Fields {
                rep,
                key,
                at: node.at,
                table,
            }),
            None => Err(rep.at(
                node.at,
                key,
                format!("found {}, expected {expected}", node.show()),
            )),
        }
    }

    pub(crate) fn path(&self, field: &str) -> String {
        join(&self.key, field)
    }

    /// Every key must be one of `allowed`; `owner` names the table for the
    /// message ("[machine]", "op \"mmap\"").
    pub(crate) fn only(&self, allowed: &[&str], owner: &str) -> Result<(), SpecError> {
        for (name, e) in &self.table.entries {
            if !allowed.contains(&name.as_str()) {
                return Err(self.rep.at(
                    e.key_at,
                    self.path(name),
                    format!(
                        "found the key `{}`, which {owner} does not take; expected one of {}",
                        tree::quote(name),
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn get(&self, field: &str) -> Option<&'a Node> {
        self.table.entries.get(field).map(|e| &e.node)
    }

    /// A key `required` includes, known to be there.
    pub(crate) fn req(&self, field: &str) -> &'a Node {
        self.get(field).expect("required field checked")
    }

    pub(crate) fn require(&self, field: &str, expected: &str) -> Result<&'a Node, SpecError> {
        self.get(field).ok_or_else(|| self.missing(field, expected))
    }

    pub(crate) fn missing(&self, field: &str, expected: &str) -> SpecError {
        self.rep.at(
            self.at,
            self.path(field),
            format!(
                "`{}` is missing the required key `{}`; expected {expected}",
                self.key,
                tree::quote(field)
            ),
        )
    }
}

pub(crate) fn type_error(rep: &Reporter, node: &Node, key: &str, expected: &str) -> SpecError {
    rep.at(
        node.at,
        key,
        format!("found {}, expected {expected}", node.show()),
    )
}

pub(crate) fn string<'a>(
    rep: &Reporter,
    node: &'a Node,
    key: &str,
    expected: &str,
) -> Result<&'a str, SpecError> {
    match &node.val {
        Val::Str(s) => Ok(s),
        _ => Err(type_error(rep, node, key, expected)),
    }
}

pub(crate) fn boolean(rep: &Reporter, node: &Node, key: &str) -> Result<bool, SpecError> {
    match node.val {
        Val::Bool(b) => Ok(b),
        _ => Err(type_error(rep, node, key, "a boolean: true or false")),
    }
}

/// An integer in `lo..=hi`; `expected` describes the range in words.
pub(crate) fn integer(
    rep: &Reporter,
    node: &Node,
    key: &str,
    lo: i64,
    hi: i64,
    expected: &str,
) -> Result<i64, SpecError> {
    match node.val {
        Val::Int(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(type_error(rep, node, key, expected)),
    }
}

/// A number (integer or float) as f64.
pub(crate) fn number(
    rep: &Reporter,
    node: &Node,
    key: &str,
    expected: &str,
) -> Result<f64, SpecError> {
    match node.val {
        Val::Int(n) => Ok(n as f64),
        Val::Float(f) => Ok(f),
        _ => Err(type_error(rep, node, key, expected)),
    }
}

pub(crate) const SIZE_WORDS: &str =
    "a size: bytes as an integer, or a string with a unit K, M, G or T (powers of 1024), e.g. \"200M\"";

pub(crate) fn size(rep: &Reporter, node: &Node, key: &str) -> Result<u64, SpecError> {
    match &node.val {
        Val::Int(n) => u64::try_from(*n).map_err(|_| {
            rep.at(
                node.at,
                key,
                format!("found {n}, expected a size of at least 0 bytes"),
            )
        }),
        Val::Str(s) => units::parse_size(s).map_err(|m| rep.at(node.at, key, m)),
        _ => Err(type_error(rep, node, key, SIZE_WORDS)),
    }
}

pub(crate) fn duration(rep: &Reporter, node: &Node, key: &str) -> Result<u64, SpecError> {
    match &node.val {
        Val::Int(n) => u64::try_from(*n)
            .map_err(|_| rep.at(node.at, key, format!("found {n}, expected a duration of at least 0 ns"))),
        Val::Str(s) => units::parse_duration(s).map_err(|m| rep.at(node.at, key, m)),
        _ => Err(type_error(
            rep,
            node,
            key,
            "a duration: nanoseconds as an integer, or a string with a unit ns, us, ms or s, e.g. \"250ms\"",
        )),
    }
}

pub(crate) fn limit(rep: &Reporter, node: &Node, key: &str) -> Result<Limit, SpecError> {
    let expected = "a size such as \"100M\" or \"max\"";
    match &node.val {
        Val::Str(s) if s.trim() == "max" => Ok(Limit::Max),
        Val::Str(s) => units::parse_size(s)
            .map(Limit::Bytes)
            .map_err(|_| type_error(rep, node, key, expected)),
        Val::Int(n) => u64::try_from(*n).map(Limit::Bytes).map_err(|_| {
            rep.at(
                node.at,
                key,
                format!("found {n}, expected {expected}, at least 0 bytes"),
            )
        }),
        _ => Err(type_error(rep, node, key, expected)),
    }
}

pub(crate) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub(crate) const NAME_WORDS: &str = "a non-empty name of letters, digits, '_' or '-'";

/// A step's `offset` and `length` (bytes, whole pages) as pages.
pub(crate) fn page_range(rep: &Reporter, f: &Fields) -> Result<(u64, Option<u64>), SpecError> {
    let pages_of = |field: &str| -> Result<Option<u64>, SpecError> {
        let Some(n) = f.get(field) else {
            return Ok(None);
        };
        let b = size(rep, n, &f.path(field))?;
        if !b.is_multiple_of(PAGE_SIZE) {
            return Err(rep.at(
                n.at,
                f.path(field),
                format!("found {b} bytes, expected a multiple of 4096"),
            ));
        }
        Ok(Some(b / PAGE_SIZE))
    };
    let offset = pages_of("offset")?.unwrap_or(0);
    let length = pages_of("length")?;
    if length == Some(0) {
        let at = f.get("length").expect("length given").at;
        return Err(rep.at(at, f.path("length"), "found 0, expected at least one page"));
    }
    Ok((offset, length))
}

/// A step's `write`: the fraction of accesses that write.
pub(crate) fn write_fraction(rep: &Reporter, f: &Fields) -> Result<f64, SpecError> {
    let Some(w) = f.get("write") else {
        return Ok(0.0);
    };
    let words = "a number from 0 to 1 (the fraction of accesses that write)";
    let v = number(rep, w, &f.path("write"), words)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(rep.at(
            w.at,
            f.path("write"),
            format!("found {}, expected a fraction from 0 to 1", w.show()),
        ));
    }
    Ok(v)
}

/// A step's `seed` for its random streams.
pub(crate) fn stream_seed_field(rep: &Reporter, f: &Fields) -> Result<u64, SpecError> {
    f.get("seed")
        .map(|s| {
            integer(
                rep,
                s,
                &f.path("seed"),
                0,
                i64::MAX,
                "a whole number from 0 to 2^63-1",
            )
            .map(|v| v as u64)
        })
        .transpose()
        .map(|s| s.unwrap_or(0))
}

/// The `[[file]]` a step's `file` key names.
pub(crate) fn file_index(rep: &Reporter, f: &Fields, files: &[File]) -> Result<usize, SpecError> {
    let known: Vec<&str> = files.iter().map(|x| x.name.as_str()).collect();
    let words = format!(
        "a string: the name of a [[file]] ({})",
        if known.is_empty() {
            "none defined".to_string()
        } else {
            known.join(", ")
        }
    );
    let node = f.get("file").ok_or_else(|| f.missing("file", &words))?;
    let name = string(rep, node, &f.path("file"), &words)?;
    files.iter().position(|x| x.name == name).ok_or_else(|| {
        rep.at(
            node.at,
            f.path("file"),
            format!("found \"{name}\", expected {words}"),
        )
    })
}

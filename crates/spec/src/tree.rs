//! The spec as a plain tree of TOML values, each remembering where it came
//! from: a byte offset in the file, or the `--set` argument that gave it.
//!
//! The file is read once with `toml_edit`, which keeps the span of every
//! key, value, inline table and table header, however the table was written
//! (a `[header]`, dotted keys, an implicit parent of `[[a.b.c]]`, an inline
//! table nested in an array nested in an inline table). `--set` overrides are
//! then applied to this tree, so they never shift the lines of the file.

use indexmap::IndexMap;
use toml_edit::{ImDocument, Item, Key, Value};

/// Where a node or a key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum At {
    /// A byte offset in the spec file.
    Text(usize),
    /// The `--set` argument with this index.
    Set(usize),
}

#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub val: Val,
    pub at: At,
}

#[derive(Debug, Clone)]
pub(crate) enum Val {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Datetime(String),
    Array(Vec<Node>),
    Table(Table),
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    pub entries: IndexMap<String, Entry>,
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Where the key is written (for an unknown key).
    pub key_at: At,
    pub node: Node,
}

impl Node {
    pub fn table(&self) -> Option<&Table> {
        match &self.val {
            Val::Table(t) => Some(t),
            _ => None,
        }
    }

    /// The value as a message shows what was found: strings quoted, numbers
    /// and booleans as written, arrays and tables by kind.
    pub fn show(&self) -> String {
        match &self.val {
            Val::Str(s) => format!("{s:?}"),
            Val::Int(n) => n.to_string(),
            // A float looks like one (`2.0`, not `2`); NaN and infinities
            // as Rust prints them.
            Val::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 => {
                format!("{f:.1}")
            }
            Val::Float(f) => f.to_string(),
            Val::Bool(b) => b.to_string(),
            Val::Datetime(d) => format!("the date-time {d}"),
            Val::Array(_) => "an array".into(),
            Val::Table(_) => "a table".into(),
        }
    }

    /// What kind of value this is, with an article ("a string").
    pub fn kind(&self) -> &'static str {
        match &self.val {
            Val::Str(_) => "a string",
            Val::Int(_) => "an integer",
            Val::Float(_) => "a float",
            Val::Bool(_) => "a boolean",
            Val::Datetime(_) => "a date-time",
            Val::Array(_) => "an array",
            Val::Table(_) => "a table",
        }
    }
}

/// The document's root table as a tree; the root is at offset 0 (line 1).
pub(crate) fn from_document(doc: &ImDocument<&str>) -> Node {
    from_item(doc.as_item(), 0)
}

/// Converts a `--set` value; every node of it is at `At::Set(set)`.
pub(crate) fn from_set_value(v: &Value, set: usize) -> Node {
    let mut n = from_value(v, 0);
    mark(&mut n, At::Set(set));
    n
}

fn mark(n: &mut Node, at: At) {
    n.at = at;
    match &mut n.val {
        Val::Array(a) => a.iter_mut().for_each(|x| mark(x, at)),
        Val::Table(t) => {
            for e in t.entries.values_mut() {
                e.key_at = at;
                mark(&mut e.node, at);
            }
        }
        _ => {}
    }
}

fn start(span: Option<std::ops::Range<usize>>, fallback: usize) -> usize {
    span.map_or(fallback, |s| s.start)
}

fn key_start(k: &Key, fallback: usize) -> usize {
    start(k.span(), fallback)
}

/// `fallback`: where to place a node without a span of its own (an
/// implicit table: the key that names it).
fn from_item(item: &Item, fallback: usize) -> Node {
    match item {
        Item::Value(v) => from_value(v, fallback),
        Item::Table(t) => {
            let at = start(t.span(), fallback);
            let mut table = Table::default();
            for (name, _) in t.iter() {
                let (k, it) = t.get_key_value(name).expect("key just listed");
                let kat = key_start(k, at);
                table.entries.insert(
                    name.to_string(),
                    Entry {
                        key_at: At::Text(kat),
                        node: from_item(it, kat),
                    },
                );
            }
            Node {
                val: Val::Table(table),
                at: At::Text(at),
            }
        }
        Item::ArrayOfTables(a) => {
            let at = start(a.span(), fallback);
            let items = a
                .iter()
                .map(|t| from_item(&Item::Table(t.clone()), at))
                .collect();
            Node {
                val: Val::Array(items),
                at: At::Text(at),
            }
        }
        Item::None => Node {
            val: Val::Table(Table::default()),
            at: At::Text(fallback),
        },
    }
}

fn from_value(v: &Value, fallback: usize) -> Node {
    let at = start(v.span(), fallback);
    let val = match v {
        Value::String(s) => Val::Str(s.value().clone()),
        Value::Integer(n) => Val::Int(*n.value()),
        Value::Float(f) => Val::Float(*f.value()),
        Value::Boolean(b) => Val::Bool(*b.value()),
        Value::Datetime(d) => Val::Datetime(d.value().to_string()),
        Value::Array(a) => Val::Array(a.iter().map(|x| from_value(x, at)).collect()),
        Value::InlineTable(t) => {
            let mut table = Table::default();
            for (name, _) in t.iter() {
                let (k, it) = t.get_key_value(name).expect("key just listed");
                let kat = key_start(k, at);
                let node = match it.as_value() {
                    Some(v) => from_value(v, kat),
                    None => from_item(it, kat),
                };
                table.entries.insert(
                    name.to_string(),
                    Entry {
                        key_at: At::Text(kat),
                        node,
                    },
                );
            }
            Val::Table(table)
        }
    };
    Node {
        val,
        at: At::Text(at),
    }
}

/// A key as TOML writes it: bare if it can be, else quoted.
pub(crate) fn quote(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_string()
    } else {
        let mut s = String::from("\"");
        for c in key.chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '\r' => s.push_str("\\r"),
                c if c.is_control() => s.push_str(&format!("\\u{:04X}", c as u32)),
                c => s.push(c),
            }
        }
        s.push('"');
        s
    }
}

/// `parent.key`, quoting `key` as needed.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        quote(key)
    } else {
        format!("{parent}.{}", quote(key))
    }
}

//! `--set KEY=VALUE`: override any table key of a spec before it is read.
//!
//! KEY is a dotted TOML key path (`features.shmem_skip_swapcache`,
//! `sysctl."vm.swappiness"`, `cgroup.w.memory_max`); VALUE is a TOML value
//! (`true`, `100`, `"50M"`), or, if it does not parse as one, a bare string
//! (`50M`). Missing tables on the path are created.
//!
//! Overrides are applied to the parsed tree ([`crate::tree`]), not to the
//! text, so the lines of the file stay what they are; every node a `--set`
//! gives is marked with it, and an error there names the `--set`.

use crate::error::{SetKey, SpecError};
use crate::tree::{self, At, Entry, Node, Table, Val};

/// Applies `sets` in order to `root`. Returns the KEY of each, for the
/// errors of later validation.
pub(crate) fn apply(root: &mut Node, sets: &[String]) -> Result<Vec<SetKey>, SpecError> {
    let mut keys = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let key = set.split_once('=').map_or(set.trim(), |(k, _)| k.trim());
        let canonical = apply_one(root, set, i).map_err(|message| SpecError {
            file: "--set".to_string(),
            line: 0,
            column: 0,
            key: key.to_string(),
            message,
        })?;
        keys.push(SetKey {
            written: key.to_string(),
            canonical,
        });
    }
    Ok(keys)
}

/// Returns the key path as the crate writes it.
fn apply_one(root: &mut Node, set: &str, index: usize) -> Result<String, String> {
    let Some((path, value)) = set.split_once('=') else {
        return Err("found no '=', expected KEY=VALUE".into());
    };
    let path = path.trim();
    let (plain, indices) = split_indices(path)?;
    let keys = toml_edit::Key::parse(&plain).map_err(|e| {
        let why = e.message().trim();
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        };
        format!(
            "found the key path {path:?}, which is not a TOML key path{why}; expected bare or quoted keys joined by dots, such as features.shmem_skip_swapcache or sysctl.\"vm.swappiness\" (an array of tables' entry as swap[0].size)"
        )
    })?;
    let value: toml_edit::Value = value
        .trim()
        .parse()
        .unwrap_or_else(|_| toml_edit::Value::from(value.trim().to_string()));
    let value = tree::from_set_value(&value, index);
    let (last, parents) = keys
        .split_last()
        .ok_or("found an empty key, expected KEY=VALUE")?;
    let at = At::Set(index);
    let mut node = root;
    let mut walked = String::new();
    for (depth, k) in parents.iter().enumerate() {
        walked = tree::join(&walked, k.get());
        let Val::Table(table) = &mut node.val else {
            unreachable!("only tables are descended into")
        };
        if let Some(i) = indices.get(&depth) {
            node = array_entry(table, k.get(), *i, &walked)?;
            walked = format!("{walked}[{i}]");
            continue;
        }
        let entry = table
            .entries
            .entry(k.get().to_string())
            .or_insert_with(|| Entry {
                key_at: at,
                node: Node {
                    val: Val::Table(Table::default()),
                    at,
                },
            });
        match &entry.node.val {
            Val::Table(_) => {}
            Val::Array(_) => {
                return Err(format!(
                    "found `{walked}`, which is an array, not a table; expected a key path through tables only (--set cannot address array elements)"
                ))
            }
            _ => {
                return Err(format!(
                    "found `{walked}`, which is {}, not a table; expected a key path through tables only",
                    entry.node.kind()
                ))
            }
        }
        node = &mut entry.node;
    }
    if indices.contains_key(&parents.len()) {
        return Err(format!(
            "found `{path}`, which names a whole entry of an array of tables; expected a key inside it, such as swap[0].size"
        ));
    }
    let Val::Table(table) = &mut node.val else {
        unreachable!("only tables are descended into")
    };
    table.entries.insert(
        last.get().to_string(),
        Entry {
            key_at: at,
            node: value,
        },
    );
    Ok(tree::join(&walked, last.get()))
}

/// `path` without its `[N]` indices (outside quotes), and each index by
/// the position of the key it follows: `swap[0].size` is `swap.size`
/// with index 0 on key 0.
fn split_indices(path: &str) -> Result<(String, std::collections::HashMap<usize, usize>), String> {
    let mut plain = String::new();
    let mut indices = std::collections::HashMap::new();
    let (mut key, mut quote) = (0, None);
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '.') => key += 1,
            (None, '[') => {
                let digits: String = chars.by_ref().take_while(|&d| d != ']').collect();
                let i = digits.trim().parse().map_err(|_| {
                    format!("found `[{digits}]` in the key path {path:?}, expected an index such as [0]")
                })?;
                indices.insert(key, i);
                continue;
            }
            _ => {}
        }
        plain.push(c);
    }
    Ok((plain, indices))
}

/// Entry `i` of the array of tables `key` in `table` (`walked` is its
/// path, for errors).
fn array_entry<'t>(
    table: &'t mut Table,
    key: &str,
    i: usize,
    walked: &str,
) -> Result<&'t mut Node, String> {
    let Some(Entry { node, .. }) = table.entries.get_mut(key) else {
        return Err(format!(
            "found `{walked}[{i}]`, but the spec has no `{walked}`; expected an index into an array of tables it has, such as its [[swap]] devices"
        ));
    };
    let kind = node.kind();
    let Val::Array(items) = &mut node.val else {
        return Err(format!(
            "found `{walked}[{i}]`, but `{walked}` is {kind}; expected an array of tables"
        ));
    };
    let n = items.len();
    let item = items.get_mut(i).ok_or_else(|| {
        format!(
            "found `{walked}[{i}]`, but `{walked}` has {n} entries; expected an index below {n}"
        )
    })?;
    if !matches!(item.val, Val::Table(_)) {
        return Err(format!(
            "found `{walked}[{i}]`, which is {}, not a table; expected an array of tables",
            item.kind()
        ));
    }
    Ok(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree_of(text: &str) -> Node {
        let doc = toml_edit::ImDocument::parse(text).unwrap();
        tree::from_document(&doc)
    }

    fn get<'a>(n: &'a Node, path: &[&str]) -> &'a Node {
        path.iter()
            .fold(n, |n, k| &n.table().unwrap().entries[*k].node)
    }

    #[test]
    fn sets_nested_and_quoted_keys() {
        let mut root = tree_of("[machine]\nmemory = \"512M\"\n[sysctl]\n\"vm.swappiness\" = 60\n");
        let keys = apply(
            &mut root,
            &[
                "sysctl.\"vm.swappiness\"=100".into(),
                "features.wp_reuse_swapcache=false".into(),
                " machine.memory = 1G".into(),
            ],
        )
        .unwrap();
        let written: Vec<&str> = keys.iter().map(|k| k.written.as_str()).collect();
        assert_eq!(
            written,
            [
                "sysctl.\"vm.swappiness\"",
                "features.wp_reuse_swapcache",
                "machine.memory"
            ]
        );
        let n = get(&root, &["sysctl", "vm.swappiness"]);
        assert!(matches!(n.val, Val::Int(100)));
        assert_eq!(n.at, At::Set(0));
        let n = get(&root, &["features", "wp_reuse_swapcache"]);
        assert!(matches!(n.val, Val::Bool(false)));
        assert_eq!(get(&root, &["features"]).at, At::Set(1));
        let n = get(&root, &["machine", "memory"]);
        assert!(matches!(&n.val, Val::Str(s) if s == "1G"));
        // The table the file wrote keeps its place.
        assert_eq!(get(&root, &["machine"]).at, At::Text(0));
    }

    #[test]
    fn rejects_malformed() {
        let text = "[machine]\nmemory = \"512M\"\n";
        let e = apply(&mut tree_of(text), &["machine.memory".into()]).unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line, e.key.as_str()),
            ("--set", 0, "machine.memory")
        );
        let e = apply(&mut tree_of(text), &["machine.memory.x=1".into()]).unwrap_err();
        assert_eq!(e.key, "machine.memory.x");
        assert_eq!(
            e.message,
            "found `machine.memory`, which is a string, not a table; expected a key path through tables only"
        );
        let e = apply(&mut tree_of(text), &["a..b=1".into()]).unwrap_err();
        assert_eq!(e.key, "a..b");
        assert!(
            !e.message.contains(": ;") && !e.message.contains("key path: "),
            "{}",
            e.message
        );
        let e = apply(&mut tree_of(text), &["=1".into()]).unwrap_err();
        assert_eq!(e.key, "");
        assert!(e.message.contains("not a TOML key path"), "{}", e.message);
    }

    #[test]
    fn sets_a_key_of_an_array_of_tables_entry() {
        let text = "[[swap]]\ndevice = \"zram\"\nsize = \"64M\"\n[[swap]]\ndevice = \"nvme\"\nsize = \"1G\"\n";
        let mut root = tree_of(text);
        let keys = apply(
            &mut root,
            &["swap[1].size=2G".into(), "swap[0].\"size\"=128M".into()],
        )
        .unwrap();
        assert_eq!(keys[0].canonical, "swap[1].size");
        let Val::Array(items) = &get(&root, &["swap"]).val else {
            panic!("swap is an array")
        };
        let size = |i: usize| match &items[i].table().unwrap().entries["size"].node.val {
            Val::Str(s) => s.clone(),
            v => panic!("{v:?}"),
        };
        assert_eq!((size(0), size(1)), ("128M".to_string(), "2G".to_string()));
        let e = apply(&mut tree_of(text), &["swap[2].size=1G".into()]).unwrap_err();
        assert!(
            e.message
                .contains("has 2 entries; expected an index below 2"),
            "{}",
            e.message
        );
        let e = apply(&mut tree_of(text), &["swap[0]=1".into()]).unwrap_err();
        assert!(e.message.contains("a whole entry"), "{}", e.message);
        let e = apply(&mut tree_of(text), &["swap[x].size=1".into()]).unwrap_err();
        assert!(
            e.message.contains("expected an index such as [0]"),
            "{}",
            e.message
        );
        let e = apply(&mut tree_of("[machine]\n"), &["disk[0].size=1G".into()]).unwrap_err();
        assert!(e.message.contains("has no `disk`"), "{}", e.message);
        // Brackets inside a quoted key are the key's own.
        let mut root = tree_of("[sysfs]\n");
        apply(&mut root, &["sysfs.\"a[0]\"=1".into()]).unwrap();
        assert!(get(&root, &["sysfs"])
            .table()
            .unwrap()
            .entries
            .contains_key("a[0]"));
    }
}

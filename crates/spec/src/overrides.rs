//! `--set KEY=VALUE`: override any table key of a spec before it is read.
//!
//! KEY is a dotted TOML key path (`features.shmem_skip_swapcache`,
//! `sysctl."vm.swappiness"`, `cgroup.w.memory_max`); VALUE is a TOML value
//! (`true`, `100`, `"50M"`), or, if it does not parse as one, a bare string
//! (`50M`). Missing tables on the path are created.

use crate::error::SpecError;
use toml_edit::{DocumentMut, Item, Table, Value};

pub fn apply(text: &str, file: &str, sets: &[String]) -> Result<String, SpecError> {
    if sets.is_empty() {
        return Ok(text.to_string());
    }
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| SpecError {
        file: file.to_string(),
        line: e.span().map(|s| text[..s.start].matches('\n').count() + 1).unwrap_or(0),
        key: String::new(),
        message: e.message().trim().to_string(),
    })?;
    for set in sets {
        apply_one(&mut doc, set).map_err(|message| SpecError {
            file: "--set".to_string(),
            line: 0,
            key: set.clone(),
            message,
        })?;
    }
    Ok(doc.to_string())
}

fn apply_one(doc: &mut DocumentMut, set: &str) -> Result<(), String> {
    let Some((path, value)) = set.split_once('=') else {
        return Err("found no '=', expected KEY=VALUE".into());
    };
    let keys = toml_edit::Key::parse(path.trim()).map_err(|e| format!("found the key path \"{path}\", which is not a TOML key: {}", e.message().trim()))?;
    let value: Value = value
        .trim()
        .parse()
        .unwrap_or_else(|_| Value::from(value.trim().to_string()));
    let (last, parents) = keys.split_last().ok_or("found an empty key, expected KEY=VALUE")?;
    let mut table: &mut Table = doc.as_table_mut();
    let mut walked = Vec::new();
    for k in parents {
        walked.push(k.get().to_string());
        let entry = table.entry(k.get()).or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        });
        if let Some(inline) = entry.as_inline_table_mut() {
            let t = std::mem::take(inline).into_table();
            *entry = Item::Table(t);
        }
        table = entry
            .as_table_mut()
            .ok_or_else(|| format!("found `{}` is not a table, expected a path through tables", walked.join(".")))?;
    }
    table.insert(last.get(), Item::Value(value));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_nested_and_quoted_keys() {
        let text = "[machine]\nmemory = \"512M\"\n[sysctl]\n\"vm.swappiness\" = 60\n";
        let out = apply(
            text,
            "t.toml",
            &["sysctl.\"vm.swappiness\"=100".into(), "features.wp_reuse_swapcache=false".into(), "machine.memory=1G".into()],
        )
        .unwrap();
        let v: toml::Value = toml::from_str(&out).unwrap();
        assert_eq!(v["sysctl"]["vm.swappiness"].as_integer(), Some(100));
        assert_eq!(v["features"]["wp_reuse_swapcache"].as_bool(), Some(false));
        assert_eq!(v["machine"]["memory"].as_str(), Some("1G"));
    }

    #[test]
    fn rejects_malformed() {
        let text = "[machine]\nmemory = \"512M\"\n";
        assert!(apply(text, "t", &["machine.memory".into()]).is_err());
        assert!(apply(text, "t", &["machine.memory.x=1".into()]).is_err());
    }
}

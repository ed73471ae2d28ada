//! The mmsim workload spec (docs/design.md "Workload spec"): one TOML file that
//! describes the machine, the kernel's knobs and the work. Shared by the
//! simulator and the native runner so that both read a file one way and
//! draw the same access streams.

pub mod content;
mod error;
pub mod kv;
pub mod model;
mod ops;
pub mod output;
mod overrides;
mod parse;
pub mod rng;
pub mod stream;
pub mod sysctls;
pub mod trace;
mod tree;
pub mod units;
pub mod work;
pub mod zipf;

pub use error::SpecError;
pub use model::*;
pub use ops::OPS;
pub use parse::sysfs::sysfs_since;
pub use parse::{MAX_ACCESSES, MAX_MAP_BYTES};
pub use sysctls::SYSCTLS;
pub use units::{Limit, PAGE_SIZE};

/// Reads, overrides (`--set KEY=VALUE`) and validates a spec file.
pub fn load(path: &std::path::Path, sets: &[String]) -> Result<Spec, SpecError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| SpecError {
        file: file.clone(),
        line: 0,
        column: 0,
        key: String::new(),
        message: format!("cannot read the spec: {e}"),
    })?;
    parse_bytes(&bytes, &file, sets)
}

/// Validates a spec's bytes, which must be UTF-8 (as TOML is); `file`
/// names it in messages.
pub fn parse_bytes(bytes: &[u8], file: &str, sets: &[String]) -> Result<Spec, SpecError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_str(text, file, sets),
        Err(e) => Err(utf8_error(bytes, file, &e)),
    }
}

/// Where a spec stops being UTF-8: line, column and the offending bytes.
fn utf8_error(bytes: &[u8], file: &str, e: &std::str::Utf8Error) -> SpecError {
    let good = &bytes[..e.valid_up_to()];
    let line_start = good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
    // The valid prefix of the line is UTF-8, so its characters count.
    let column = std::str::from_utf8(&good[line_start..]).map_or(0, |s| s.chars().count()) + 1;
    let bad = &bytes[e.valid_up_to()..];
    let n = e.error_len().unwrap_or(bad.len()).min(4);
    let found: String = bad[..n].iter().map(|b| format!("\\x{b:02x}")).collect();
    SpecError {
        file: file.to_string(),
        line,
        column,
        key: String::new(),
        message: format!(
            "found the byte{} {found}, which is not UTF-8 (a Latin-1 file?); expected UTF-8 text, as TOML requires",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// Validates spec text; `file` names it in messages.
pub fn parse_str(text: &str, file: &str, sets: &[String]) -> Result<Spec, SpecError> {
    parse::parse(text, file, sets)
}

/// Guest `name`'s sections of spec `text` (`[vm.NAME]` without its
/// `host` table) as a spec file of their own: what a real guest's runner
/// reads (the native comparison boots it under QEMU). `text` is a spec
/// that parsed; Err says why not.
pub fn guest_text(text: &str, name: &str) -> Result<String, String> {
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    let table = doc
        .get("vm")
        .and_then(|v| v.get(name))
        .and_then(toml_edit::Item::as_table_like)
        .ok_or_else(|| format!("the spec has no [vm.{name}] table"))?;
    let mut out = toml_edit::DocumentMut::new();
    for (k, v) in table.iter().filter(|(k, _)| *k != "host") {
        out.insert(k, v.clone());
    }
    // A block device's host file is the host's business (its drive).
    for section in ["swap", "disk"] {
        if let Some(list) = out
            .get_mut(section)
            .and_then(|v| v.as_array_of_tables_mut())
        {
            for t in list.iter_mut() {
                t.remove("host_file");
                t.remove("cache");
            }
        }
    }
    Ok(out.to_string())
}

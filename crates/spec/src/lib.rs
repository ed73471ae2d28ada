//! The mmsim workload spec (DESIGN.md "Workload spec"): one TOML file that
//! describes the machine, the kernel's knobs and the work. Shared by the
//! simulator and the native runner so that both read a file one way and
//! draw the same access streams.

mod error;
pub mod kv;
pub mod model;
pub mod output;
mod overrides;
mod parse;
pub mod rng;
pub mod stream;
mod tree;
pub mod units;

pub use error::SpecError;
pub use model::*;
pub use parse::{MAX_ACCESSES, MAX_MAP_BYTES, OPS, SYSCTLS};
pub use units::{Limit, PAGE_SIZE};

/// Reads, overrides (`--set KEY=VALUE`) and validates a spec file.
pub fn load(path: &std::path::Path, sets: &[String]) -> Result<Spec, SpecError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SpecError {
        file: file.clone(),
        line: 0,
        key: String::new(),
        message: format!("cannot read the spec: {e}"),
    })?;
    parse_str(&text, &file, sets)
}

/// Validates spec text; `file` names it in messages.
pub fn parse_str(text: &str, file: &str, sets: &[String]) -> Result<Spec, SpecError> {
    parse::parse(text, file, sets)
}

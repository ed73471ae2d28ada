//! Any bytes as a spec file: the parser ends with a spec or a clear error
//! (file, line, no raw control characters), and a spec that parses runs
//! to a result or a clear error. The corpus starts from every spec in the
//! repository, so libFuzzer's mutations are mutations of real specs.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    match mmsim_spec::parse_bytes(data, "fuzz.toml", &[]) {
        Ok(spec) => common::run_checked(&spec),
        Err(e) => {
            let m = e.to_string();
            assert!(m.starts_with("fuzz.toml"), "{m}");
            assert!(!m.chars().any(|c| c.is_control()), "{m:?}");
        }
    }
});

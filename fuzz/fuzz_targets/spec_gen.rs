//! Bytes drive mmsim_testkit::specgen, which writes a spec mixing every op
//! (the generator the soak and the property tests use); the simulator runs
//! it with the invariant checker on.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let text = mmsim_testkit::specgen::generate(data);
    if let Ok(spec) = mmsim_spec::parse_str(&text, "gen.toml", &[]) {
        common::run_checked(&spec);
    }
});

//! Prints the spec `mmsim_testkit::specgen` makes from a file's bytes: how a
//! `spec_gen` fuzz input (or any byte string) becomes a spec to run,
//! minimise and keep as a reproducer.
//!
//! ```sh
//! cargo run -p mmsim-testkit --example specgen -- fuzz/artifacts/spec_gen/crash-… > repro.toml
//! ```

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: specgen FILE");
        std::process::exit(2);
    };
    match std::fs::read(&path) {
        Ok(bytes) => print!("{}", mmsim_testkit::specgen::generate(&bytes)),
        Err(e) => {
            eprintln!("specgen: {path}: {e}");
            std::process::exit(2);
        }
    }
}

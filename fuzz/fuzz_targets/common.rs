//! What both targets check of a spec that parses: the simulator ends with
//! a result or a clear error, never a panic, an invariant violation or a
//! lost page; small limits keep each input to milliseconds.

use mmsim_sim::{run, RunOptions, SimError};

/// Page operations one input may ask for.
const MAX_WORK: u64 = 2_000_000;
/// Host memory one input's tables may take.
const MAX_HOST_BYTES: u64 = 256 << 20;

pub fn run_checked(spec: &mmsim_spec::Spec) {
    let opts = RunOptions {
        check: true,
        max_work: Some(MAX_WORK),
        max_host_bytes: Some(MAX_HOST_BYTES),
        ..Default::default()
    };
    match run(spec, opts) {
        Ok(r) => assert_eq!(r.integrity.violations, 0, "a page's content was lost"),
        Err(SimError::Invariant(m)) => panic!("invariant violated: {m}"),
        Err(SimError::Oom) => panic!("a bare VM_FAULT_OOM escaped the scheduler"),
        Err(e) => {
            // A clear error: printable, and an exit status of 2.
            let m = e.to_string();
            assert!(!m.chars().any(|c| c.is_control() && c != '\n'), "{m:?}");
            assert_eq!(e.exit_code(), 2, "{m}");
        }
    }
}

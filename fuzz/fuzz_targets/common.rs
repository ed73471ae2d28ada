//! What both targets check of a spec that parses: the simulator ends with
//! a result or a clear error, never a panic, an invariant violation or a
//! lost page (`mmsim_testkit::specgen::judge`); small limits keep each input to
//! milliseconds.

use mmsim_testkit::specgen::{judge, Verdict};
use mmsim_sim::RunOptions;

/// Page operations one input may ask for.
const MAX_WORK: u64 = 2_000_000;
/// Simulated time one input may reach: the kernel's own work (reclaim
/// sorting a memcg's pages on every retry) is not in MAX_WORK, and a 6.1
/// MGLRU memcg full of dirty page cache took 5 s of it, 68 s of the fuzz
/// build's time.
const MAX_SIM_NS: u64 = 500_000_000;
/// Host memory one input's tables may take.
const MAX_HOST_BYTES: u64 = 256 << 20;

pub fn run_checked(spec: &mmsim_spec::Spec) {
    let opts = RunOptions {
        check: true,
        max_work: Some(MAX_WORK),
        max_sim_ns: Some(MAX_SIM_NS),
        max_host_bytes: Some(MAX_HOST_BYTES),
        ..Default::default()
    };
    if let Verdict::Failed(why) = judge(spec, opts) {
        panic!("{why}");
    }
}

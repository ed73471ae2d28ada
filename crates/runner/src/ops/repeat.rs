//! `repeat`: the body's steps, `times` over.

use crate::exec::Child;
use mmsim_spec::Step;

pub(super) fn run<'s>(c: &mut Child<'s>, times: u64, steps: &'s [Step]) -> Result<(), String> {
    // A repeat of nothing is skipped, as in the simulator.
    if mmsim_spec::work::does_nothing(steps) {
        return Ok(());
    }
    for _ in 0..times {
        c.run(steps)?;
    }
    Ok(())
}

//! `set`: a sysctl or sysfs write in the middle of the run.

use super::{at_step, Player};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;
use crate::SimError;
use mmsim_spec::Step;

pub(super) fn start(
    p: &mut Player,
    k: &mut Kernel,
    step: &Step,
    setting: &mmsim_spec::Setting,
) -> Result<Option<SliceEnd>, SimError> {
    p.done_work += 1;
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    k.write_setting(setting).map_err(|e| at_step(step, e))?;
    Ok(None)
}

//! `swapon` and `swapoff` of a `[[swap]]` device.

use super::{at_step, Player};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::mm::swapfile::SwapoffError;
use crate::sched::rq::SliceEnd;
use crate::SimError;
use mmsim_spec::Step;

pub(super) fn swapoff(
    p: &mut Player,
    k: &mut Kernel,
    step: &Step,
    device: usize,
) -> Result<Option<SliceEnd>, SimError> {
    // Counts the device's slots (what try_to_unuse scans).
    p.done_work += p
        .swap_devs
        .get(device)
        .map_or(1, |d| (d.size / 4096).max(1));
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    let rotational = p.swap_devs[device].rotational();
    k.swapoff(device, rotational).map_err(|e| match e {
        // The OOM killer chose the swapoff task itself: it dies.
        SwapoffError::NoMemory if k.current_is_dying() => SimError::Oom,
        e => swap_error(step, "swapoff", device, e),
    })?;
    Ok(None)
}

pub(super) fn swapon(
    p: &mut Player,
    k: &mut Kernel,
    step: &Step,
    device: usize,
) -> Result<Option<SliceEnd>, SimError> {
    p.done_work += 1;
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    k.swapon(device, &p.swap_devs[device])
        .map_err(|e| swap_error(step, "swapon", device, e))?;
    Ok(None)
}

fn swap_error(step: &Step, op: &str, device: usize, e: SwapoffError) -> SimError {
    match e {
        SwapoffError::NotOn if op == "swapon" => at_step(
            step,
            SimError::Spec(format!(
                "found a swapon of swap device {device}, which is already on (EBUSY); expected a swapoff of it before"
            )),
        ),
        SwapoffError::NotOn => at_step(
            step,
            SimError::Spec(format!(
                "found a swapoff of swap device {device}, which is not on (EINVAL); expected a swapon of it before"
            )),
        ),
        SwapoffError::NoMemory => at_step(
            step,
            SimError::Unmodelled(format!(
                "swapoff of swap device {device} could not get memory for a page it brought back although the OOM killer ran (its victim's memory is freed only once swapoff's walk is done): Linux's swapoff then fails with ENOMEM and leaves the device on, which mmsim does not model; expected more memory (machine.memory, the cgroup's memory_max) while swapoff runs"
            )),
        ),
        SwapoffError::NoProgress(passes) => at_step(
            step,
            SimError::Unmodelled(format!(
                "swapoff of swap device {device} freed no slot in {passes} passes over every mm: the memory cgroup's reclaim sends each page swapoff brings in back to the slot it came from (a page another process still maps keeps its swap entry), so the kernel would go round until swapoff is killed; expected more memory for the cgroup (memory_max) while swapoff runs"
            )),
        ),
    }
}

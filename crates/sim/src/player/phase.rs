//! `phase`: a mark that closes the task's open phase and opens the next
//! (the invariant checker runs there under `--check`).

use super::{close_phase, PhaseRun, Player};
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;
use crate::vmstat::VmStat;
use crate::SimError;

pub(super) fn start(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    name: &str,
) -> Result<Option<SliceEnd>, SimError> {
    // Counts what a check walks: every frame of the machine.
    p.done_work += if p.check { p.frames } else { 1 };
    if p.check {
        crate::check::check_all(k)?;
        k.integrity.invariant_checks += 1;
    }
    let t = &mut p.tasks[i];
    close_phase(t, k);
    let psi_start = k.psi_show(0);
    t.phases.push(PhaseRun {
        name: name.to_string(),
        start: k.now(),
        end: 0,
        vm_start: k.vm.clone(),
        vm_delta: VmStat::default(),
        kv: None,
        trace_requests: 0,
        lru_gen: Vec::new(),
        psi_start,
        pressure: Default::default(),
    });
    t.open_phase = Some(t.phases.len() - 1);
    Ok(None)
}

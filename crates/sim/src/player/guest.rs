//! A VMM task running its guest (vm.rs): guest slices, each followed by
//! the host accesses of the frames it touched, until the host slice ends,
//! the guest idles, or its last task exits.

use super::{after_access, Access, Player};
use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};
use crate::sched::Stepped;
use crate::vm::{Guest, GUEST_RAM};
use crate::SimError;

pub(super) fn run(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    g: usize,
) -> Result<Option<SliceEnd>, SimError> {
    let mut guest = p.guests[g].take().expect("a guest runs in one VMM");
    let r = run_guest(p, i, k, slice, &mut guest);
    p.guests[g] = Some(guest);
    r
}

fn run_guest(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    guest: &mut Guest,
) -> Result<Option<SliceEnd>, SimError> {
    let ktask = p.tasks[i].ktask;
    let ram = match guest.ram {
        Some(v) => v,
        None => {
            let v = *p.tasks[i]
                .regions
                .get(GUEST_RAM)
                .expect("the VMM's steps map the guest's RAM");
            guest.ram = Some(v);
            v
        }
    };
    let pages = k.vmas[ram as usize].pages;
    loop {
        // The last guest slice's frames, made by the VMM's loads and
        // stores (TCG): the vCPU waits for each.
        while let Some((pfn, write)) = guest.next_access() {
            if pfn as u64 >= pages {
                return Err(SimError::Invariant(format!(
                    "guest frame {pfn} is beyond its RAM of {pages} pages"
                )));
            }
            match p.play_access(k, ram, pfn as usize, write)? {
                Access::Sleep(until) => return Ok(Some(SliceEnd::Sleep(until))),
                Access::Done => guest.access_made(),
                Access::Again => {}
            }
            if let Some(end) = after_access(k, ktask, slice) {
                return Ok(Some(end));
            }
        }
        if guest.done {
            return Ok(None);
        }
        let now = k.now();
        // A slice to u64::MAX has no end (a sleep that long runs last).
        let cap = slice.end();
        if now >= cap && cap != u64::MAX {
            return Ok(Some(SliceEnd::Preempted));
        }
        match guest.run_slice(now, cap)? {
            Stepped::Ran { start, end } => {
                // A halted vCPU until `start` (within the host slice:
                // the VMM keeps its CPU), then the guest's own time.
                let ran = end.saturating_sub(now.max(start));
                let halted = start.saturating_sub(now);
                k.charge_guest_run(ran, halted);
            }
            // The guest's vCPU halts (HLT: the VMM thread sleeps) until
            // its next entity is ready.
            Stepped::Idle(next) => return Ok(Some(SliceEnd::Sleep(next))),
            Stepped::Done => {}
        }
    }
}

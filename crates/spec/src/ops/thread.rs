//! `thread`: a thread of the task (clone with CLONE_VM, as pthreads
//! makes) runs a body of steps beside it in the same address space and
//! cgroup, then exits. It starts with its creator's regions; neither may
//! unmap one of those while the other may still use it (the creator may
//! after a `wait`, which joins its threads). Regions the thread maps are
//! its own to name, and stay mapped in the process after it exits.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::Fields;
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{Sizes, WorkCx};

pub(super) struct Thread;

impl StepOp for Thread {
    fn word(&self) -> &'static str {
        "thread"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "steps"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["steps"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "steps" => "an array of step tables",
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Thread { steps: cx.body(f)? })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Thread { .. })
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Thread { steps } = op else {
            unreachable!("not a thread")
        };
        let names: Vec<String> = regions.keys().cloned().collect();
        // In the thread's body every region it starts with is shared.
        let inherited = std::mem::replace(&mut cx.inherited, names.clone());
        let shared = std::mem::take(&mut cx.shared_with_threads);
        let mut own = regions.clone();
        let r = cx.body(&format!("{key}.steps"), steps, &mut own);
        cx.inherited = inherited;
        cx.shared_with_threads = shared;
        r?;
        // Until its next wait, the creator shares them with the thread.
        for n in names {
            if !cx.shared_with_threads.contains(&n) {
                cx.shared_with_threads.push(n);
            }
        }
        Ok(())
    }

    /// The thread's steps, on the regions it shares.
    fn work(&self, cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let Op::Thread { steps } = op else {
            unreachable!("not a thread")
        };
        cx.steps(steps, &mut sizes.clone())
    }
}

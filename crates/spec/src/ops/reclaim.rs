//! `reclaim`: proactive reclaim from a cgroup, as writing its
//! memory.reclaim does (`echo "64M swappiness=0" > memory.reclaim`).

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::{integer, size, string, Fields, SIZE_WORDS};
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{Sizes, WorkCx};

pub(super) struct Reclaim;

impl StepOp for Reclaim {
    fn word(&self) -> &'static str {
        "reclaim"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "cgroup", "amount", "swappiness"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["cgroup", "amount"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "cgroup" => "a string: the NAME of a [cgroup.NAME] table",
            "amount" => SIZE_WORDS,
            "swappiness" => {
                "an integer from 0 to 200 (memory.reclaim's swappiness=, 6.12 and later)"
            }
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        let rep = cx.rep;
        let cgroup = string(
            rep,
            f.req("cgroup"),
            &f.path("cgroup"),
            self.words("cgroup"),
        )?;
        let node = f.req("amount");
        let amount = size(rep, node, &f.path("amount"))?;
        if amount < 4096 {
            return Err(rep.at(
                node.at,
                f.path("amount"),
                format!("found {amount} bytes, expected at least one page (4K): memory.reclaim of less reclaims nothing"),
            ));
        }
        let swappiness = match f.get("swappiness") {
            None => None,
            Some(n) => Some(integer(
                rep,
                n,
                &f.path("swappiness"),
                0,
                200,
                self.words("swappiness"),
            )? as u32),
        };
        Ok(Op::Reclaim {
            cgroup: cgroup.to_string(),
            pages: amount / 4096,
            swappiness,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Reclaim { .. })
    }

    /// The cgroup exists.
    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        _regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Reclaim { cgroup, .. } = op else {
            unreachable!("not a reclaim")
        };
        super::check_cgroup(cx, key, "cgroup", cgroup)
    }

    /// It reclaims at most what the steps before it put in memory, which
    /// they counted: the step itself counts one.
    fn work(&self, _cx: &WorkCx, _op: &Op, _sizes: &mut Sizes) -> u128 {
        1
    }
}

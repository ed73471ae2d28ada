//! `swapoff` and `swapon`: swapoff(2) of a `[[swap]]` device, and
//! swapon(2) of it again.

use super::{StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::{integer, Fields};
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{Sizes, WorkCx};

/// `swapon` if `on`, else `swapoff`.
pub(super) struct Swap {
    pub on: bool,
}

impl StepOp for Swap {
    fn word(&self) -> &'static str {
        if self.on {
            "swapon"
        } else {
            "swapoff"
        }
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "device"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["device"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "device" => "an integer: the number of a [[swap]] device, counting from 0",
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        let device = integer(
            cx.rep,
            f.req("device"),
            &f.path("device"),
            0,
            i64::MAX,
            self.words("device"),
        )? as usize;
        Ok(if self.on {
            Op::Swapon { device }
        } else {
            Op::Swapoff { device }
        })
    }

    fn owns(&self, op: &Op) -> bool {
        match op {
            Op::Swapon { .. } => self.on,
            Op::Swapoff { .. } => !self.on,
            _ => false,
        }
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        _regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let (Op::Swapoff { device } | Op::Swapon { device }) = op else {
            unreachable!("not a swapoff or swapon")
        };
        if *device >= cx.nswap {
            return Err(cx.err(
                key,
                "device",
                format!(
                    "found {device}, expected the number of a [[swap]] device: {}",
                    if cx.nswap == 0 {
                        "none is defined".to_string()
                    } else {
                        format!("0 to {}", cx.nswap - 1)
                    }
                ),
            ));
        }
        Ok(())
    }

    /// swapoff scans every slot of the device; swapon counts one.
    fn work(&self, cx: &WorkCx, op: &Op, _sizes: &mut Sizes) -> u128 {
        match op {
            Op::Swapoff { device } => cx.swap_slots.get(*device).copied().unwrap_or(0) as u128,
            _ => 1,
        }
    }
}

//! `munmap`: a region unmapped.

use super::{region_field, StepCx, StepOp};
use crate::error::SpecError;
use crate::model::Op;
use crate::parse::fields::Fields;
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{Sizes, WorkCx};

pub(super) struct Munmap;

impl StepOp for Munmap {
    fn word(&self) -> &'static str {
        "munmap"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "region"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["region"]
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Munmap {
            region: region_field(cx.rep, f, self)?,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Munmap { .. })
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Munmap { region } = op else {
            unreachable!("not a munmap")
        };
        if !regions.contains_key(region) {
            return Err(cx.unknown_region(key, region, regions));
        }
        cx.may_unmap(key, region)?;
        regions.shift_remove(region);
        Ok(())
    }

    /// Every PTE of the region.
    fn work(&self, _cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let Op::Munmap { region } = op else {
            unreachable!("not a munmap")
        };
        sizes.get(region).copied().unwrap_or(0) as u128
    }
}

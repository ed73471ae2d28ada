//! `madvise`: advice over a page range of a region (or, for the access and
//! THP hints, the whole region).

use super::{region_field, StepCx, StepOp};
use crate::error::SpecError;
use crate::model::{Advice, Op};
use crate::parse::fields::{page_range, string, type_error, Fields};
use crate::parse::regions::{RegionCheck, Regions};
use crate::work::{Sizes, WorkCx};

pub(super) struct Madvise;

const ADVICE_WORDS: &str =
    "a string: one of pageout, cold, dontneed, free, willneed, sequential, random, normal, hugepage, nohugepage";

impl StepOp for Madvise {
    fn word(&self) -> &'static str {
        "madvise"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "region", "advice", "offset", "length"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["region", "advice"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "advice" => ADVICE_WORDS,
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        let rep = cx.rep;
        let a = f.req("advice");
        let advice = match string(rep, a, &f.path("advice"), ADVICE_WORDS)? {
            "pageout" => Advice::Pageout,
            "cold" => Advice::Cold,
            "dontneed" => Advice::Dontneed,
            "free" => Advice::Free,
            "willneed" => Advice::Willneed,
            "sequential" => Advice::Sequential,
            "random" => Advice::Random,
            "normal" => Advice::Normal,
            "hugepage" => Advice::Hugepage,
            "nohugepage" => Advice::Nohugepage,
            _ => return Err(type_error(rep, a, &f.path("advice"), ADVICE_WORDS)),
        };
        let (offset, length) = page_range(rep, f)?;
        // The access and THP hints are flags of the whole mapping.
        if matches!(
            advice,
            Advice::Sequential
                | Advice::Random
                | Advice::Normal
                | Advice::Hugepage
                | Advice::Nohugepage
        ) {
            if let Some(k) = ["offset", "length"]
                .into_iter()
                .find(|k| f.get(k).is_some())
            {
                return Err(rep.at(
                    f.req(k).at,
                    f.path(k),
                    format!(
                        "found {k} with advice \"{}\", which applies to the whole region; expected no {k}",
                        advice.name()
                    ),
                ));
            }
        }
        Ok(Op::Madvise {
            region: region_field(rep, f, self)?,
            advice,
            offset,
            length,
        })
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Madvise { .. })
    }

    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Madvise {
            region,
            offset,
            length,
            ..
        } = op
        else {
            unreachable!("not a madvise")
        };
        cx.range(key, region, *offset, *length, regions)
    }

    /// Every PTE of the range.
    fn work(&self, _cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let Op::Madvise {
            region,
            offset,
            length,
            ..
        } = op
        else {
            unreachable!("not a madvise")
        };
        let pages = sizes.get(region).copied().unwrap_or(0);
        length.unwrap_or(pages.saturating_sub(*offset)) as u128
    }
}

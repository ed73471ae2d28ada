//! `touch`: accesses to the pages of a region, in an order (sequential,
//! reverse, shuffled, uniform or Zipf-distributed random), some writes.

use super::{region_field, StepCx, StepOp};
use crate::error::{Reporter, SpecError};
use crate::model::{self, Op, Order};
use crate::parse::fields::{
    integer, number, page_range, stream_seed_field, string, type_error, write_fraction, Fields,
};
use crate::parse::regions::{RegionCheck, Regions};
use crate::parse::MAX_ACCESSES;
use crate::work::{Sizes, WorkCx};

pub(super) struct Touch;

impl StepOp for Touch {
    fn word(&self) -> &'static str {
        "touch"
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "op", "region", "order", "theta", "count", "passes", "write", "offset", "length",
            "seed",
        ]
    }

    fn required(&self) -> &'static [&'static str] {
        &["region"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "order" => "a string: one of seq, rev, shuffle, uniform, zipf",
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Touch(build_touch(cx.rep, f)?))
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Touch(t) if t.trace.is_none())
    }

    /// The range lies inside the region, and `passes` over it make at
    /// most MAX_ACCESSES accesses.
    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Touch(t) = op else {
            unreachable!("not a touch")
        };
        cx.range(key, &t.region, t.offset, t.length, regions)?;
        let n = range_pages(t, regions[&t.region]);
        if t.count.is_none() && t.passes.checked_mul(n).is_none_or(|a| a > MAX_ACCESSES) {
            return Err(cx.err(
                key,
                "passes",
                format!(
                    "found {} passes over {n} pages, {} accesses; expected at most 2^48 (281474976710656) accesses in one touch",
                    t.passes,
                    t.passes as u128 * n as u128
                ),
            ));
        }
        Ok(())
    }

    fn work(&self, _cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let Op::Touch(t) = op else {
            unreachable!("not a touch")
        };
        accesses(t, sizes)
    }
}

/// The pages a touch's range covers, in a region of `pages`: its
/// `length`, else the region from its offset on.
pub(crate) fn range_pages(t: &model::Touch, pages: u64) -> u64 {
    t.length.unwrap_or(pages.saturating_sub(t.offset))
}

/// The accesses of a `touch` (or `trace`): its count, or its passes over
/// its range.
pub(crate) fn accesses(t: &model::Touch, sizes: &Sizes) -> u128 {
    let len = range_pages(t, sizes.get(&t.region).copied().unwrap_or(0));
    t.count
        .map_or((t.passes as u128).saturating_mul(len as u128), |c| {
            c as u128
        })
}

/// A `touch` step's accesses: their order, count and writes.
fn build_touch(rep: &Reporter, f: &Fields) -> Result<model::Touch, SpecError> {
    let region = region_field(rep, f, &Touch)?;
    let order = match f.get("order") {
        None => Order::Seq,
        Some(o) => {
            let words = Touch.words("order");
            match string(rep, o, &f.path("order"), words)? {
                "seq" => Order::Seq,
                "rev" => Order::Rev,
                "shuffle" => Order::Shuffle,
                "uniform" => Order::Uniform,
                "zipf" => Order::Zipf,
                _ => {
                    return Err(type_error(
                        rep,
                        o,
                        &f.path("order"),
                        "one of seq, rev, shuffle, uniform, zipf",
                    ))
                }
            }
        }
    };
    let theta_words = "a number above 0 and at most 10";
    let theta =
        match (order, f.get("theta")) {
            (Order::Zipf, Some(th)) => {
                let v = number(rep, th, &f.path("theta"), theta_words)?;
                if !(v > 0.0 && v.is_finite() && v <= 10.0) {
                    return Err(rep.at(
                        th.at,
                        f.path("theta"),
                        format!("found {}, expected {theta_words}", th.show()),
                    ));
                }
                v
            }
            (Order::Zipf, None) => 0.99,
            (_, Some(th)) => return Err(rep.at(
                th.at,
                f.path("theta"),
                "found theta, which only order = \"zipf\" takes; expected no theta with this order",
            )),
            (_, None) => 0.0,
        };
    let write = write_fraction(rep, f)?;
    let accesses = |field: &str| -> Result<Option<u64>, SpecError> {
        f.get(field)
            .map(|n| {
                integer(
                    rep,
                    n,
                    &f.path(field),
                    1,
                    MAX_ACCESSES as i64,
                    "a whole number of at least 1 and at most 2^48 (281474976710656)",
                )
                .map(|v| v as u64)
            })
            .transpose()
    };
    let count = accesses("count")?;
    let passes = accesses("passes")?;
    if let (Some(_), Some(p)) = (count, f.get("passes")) {
        return Err(rep.at(
            p.at,
            f.path("passes"),
            "found both count and passes, expected one of them",
        ));
    }
    let (offset, length) = page_range(rep, f)?;
    Ok(model::Touch {
        region,
        order,
        theta,
        count,
        passes: passes.unwrap_or(1),
        write,
        offset,
        length,
        seed: stream_seed_field(rep, f)?,
        trace: None,
    })
}

//! How `mmsim reproduce` judges one effect: on the factor the patch moves
//! a figure by, compared in logarithms, not on the relative change.
//!
//! For each effect, q = patched / baseline, the seed's and mmsim's, and
//! its logarithm l = ln q (l_seed, l_sim). The relative change
//! r = q − 1 is what the tables print.
//!
//! - A change under [`NO_CHANGE`] (3 %) in magnitude, |r| < 3 %, is no
//!   change, on either side.
//! - The magnitude is **within** when l_sim has l_seed's sign and
//!   |l_seed| / 1.5 ≤ |l_sim| ≤ 1.5 · |l_seed|: mmsim's factor is within
//!   a power of 1.5 of the seed's, either way. A fall to a ninth is
//!   within for a fall to anything from 1/27 to 1/4.3 (a fall of 89 %
//!   needs one of 77 % to 96 %): on the relative change, as the rule was
//!   judged before, any fall beyond 59 % was within, since no fall
//!   exceeds 100 %. When the seed's change is under 3 %, within means
//!   |r_sim| < 3 %, as before.
//! - Zeros. A figure that falls to exactly 0 has l = −∞ (one that rises
//!   from 0, +∞). mmsim's figures are exact (a deterministic count or
//!   time), so mmsim's 0 against a seed's finite fall is a fall beyond any
//!   factor: too large. A seed's published 0 carries only the precision
//!   it was printed with, so mmsim's figure is within when it also falls
//!   to 0 or below [`RESOLUTION`] (a thousandth) of its baseline — and
//!   for a seed's rise from 0, when mmsim's rises from 0 or more than a
//!   thousandfold. A figure that changes sign has fallen beyond any factor
//!   too (l = −∞; the seeds' figures are never negative).
//! - The direction is **right** when mmsim moves the figure the way the
//!   seed did (lower, higher, or no change where the seed's expected
//!   direction is "none"). An effect is **reproduced** when both hold.

/// A relative change under this, in magnitude, is no change.
pub const NO_CHANGE: f64 = 0.03;
/// mmsim's factor is within when its logarithm is within this factor of
/// the seed's, either way.
pub const FACTOR: f64 = 1.5;
/// A seed's figure printed as 0 is under this fraction of its baseline:
/// the seeds print three or four significant digits, so a patched figure
/// that prints as 0 beside its baseline is below about a thousandth of
/// it. mmsim's factor matches a seed's fall to 0 when it is at most this
/// (and a rise from 0 when it is at least its inverse).
pub const RESOLUTION: f64 = 1e-3;

/// The relative change from `baseline` to `patched`: patched / baseline − 1.
/// Equal values are no change (0 → 0 too); from a baseline of 0 any other
/// value is an infinite change.
pub fn change(baseline: f64, patched: f64) -> f64 {
    if baseline == patched {
        0.0
    } else if baseline == 0.0 {
        if patched > 0.0 {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        }
    } else {
        patched / baseline - 1.0
    }
}

/// ln(patched / baseline), with the same sign as [`change`]: equal values
/// are 0; a fall to 0 or past it (a change of sign) is −∞; a rise from 0
/// is +∞ (a fall from 0 to a negative value, −∞).
pub fn log_change(baseline: f64, patched: f64) -> f64 {
    // Equal values and a baseline of 0 are `change`'s cases: 0 and ±∞.
    let r = change(baseline, patched);
    if r == 0.0 || r.is_infinite() {
        return r;
    }
    let q = patched / baseline;
    if q > 0.0 {
        q.ln()
    } else if q.is_nan() {
        f64::NAN
    } else {
        f64::NEG_INFINITY
    }
}

/// The relative change of a logarithmic one: e^l − 1 (−1 for −∞).
fn relative(l: f64) -> f64 {
    l.exp_m1()
}

/// Where a patch moves a figure.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Direction {
    Lower,
    Higher,
    /// A change under [`NO_CHANGE`].
    NoChange,
}

impl Direction {
    /// The direction of a relative change.
    pub fn of(r: f64) -> Direction {
        if r.is_nan() || r.abs() < NO_CHANGE {
            Direction::NoChange
        } else if r < 0.0 {
            Direction::Lower
        } else {
            Direction::Higher
        }
    }

    /// An experiment's expected direction: "lower", "higher" or "none".
    pub fn parse_expected(s: &str) -> Option<Direction> {
        match s {
            "lower" => Some(Direction::Lower),
            "higher" => Some(Direction::Higher),
            "none" => Some(Direction::NoChange),
            _ => None,
        }
    }

    /// The word for an expected direction: "lower", "higher", "none".
    pub fn expected_word(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
            Direction::NoChange => "none",
        }
    }

    /// The word for what mmsim saw: "lower", "higher", "no change" —
    /// distinct from the expected "none".
    pub fn observed_word(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
            Direction::NoChange => "no change",
        }
    }
}

/// How mmsim's change compares with the seed's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Magnitude {
    /// Within the band of the seed's change.
    Within,
    /// The seed changed and mmsim did not (a change under 3 %).
    NoChange,
    /// The same sign, |l_sim| below |l_seed| / 1.5.
    Smaller,
    /// |l_sim| above 1.5 · |l_seed| (a fall to 0 against a finite one),
    /// or a change where the seed saw none.
    Larger,
    /// The opposite sign.
    Opposite,
}

impl Magnitude {
    pub fn word(self) -> &'static str {
        match self {
            Magnitude::Within => "within",
            Magnitude::NoChange => "none seen",
            Magnitude::Smaller => "too small",
            Magnitude::Larger => "too large",
            Magnitude::Opposite => "opposite",
        }
    }
}

/// The band of mmsim's relative change that is within: (lowest, highest)
/// r_sim, ends included, for the seed's relative change r_seed; except
/// for a seed change under 3 %, whose band is the open (−3 %, 3 %). A
/// seed's fall to 0 (r_seed = −1) has the band from −1 to
/// [`RESOLUTION`] − 1, a rise from 0 (+∞) the one from 1 / RESOLUTION − 1
/// up.
pub fn band(r_seed: f64) -> (f64, f64) {
    if r_seed.abs() < NO_CHANGE {
        return (-NO_CHANGE, NO_CHANGE);
    }
    let l = if r_seed <= -1.0 {
        f64::NEG_INFINITY
    } else {
        r_seed.ln_1p()
    };
    if l == f64::NEG_INFINITY {
        (-1.0, RESOLUTION - 1.0)
    } else if l == f64::INFINITY {
        (1.0 / RESOLUTION - 1.0, f64::INFINITY)
    } else if l > 0.0 {
        (relative(l / FACTOR), relative(l * FACTOR))
    } else {
        (relative(l * FACTOR), relative(l / FACTOR))
    }
}

/// How mmsim's factor compares with the seed's, from their logarithms
/// ([`log_change`]).
pub fn magnitude(l_seed: f64, l_sim: f64) -> Magnitude {
    if l_sim.is_nan() {
        return Magnitude::NoChange;
    }
    let small = |l: f64| relative(l).abs() < NO_CHANGE;
    if small(l_seed) {
        return if small(l_sim) {
            Magnitude::Within
        } else {
            Magnitude::Larger
        };
    }
    // The band's ends are inside it, whatever the rounding of the
    // logarithms and quotients that led there.
    let (s, m) = (l_seed.abs(), l_sim.abs());
    let (lo, hi) = if s.is_infinite() {
        // A seed's figure falling to 0 or rising from it: mmsim's must go
        // at least a thousandfold (or to 0, or from it) the same way.
        (-RESOLUTION.ln() * (1.0 - 1e-9), f64::INFINITY)
    } else {
        (s / FACTOR * (1.0 - 1e-9), s * FACTOR * (1.0 + 1e-9))
    };
    if small(l_sim) && m < lo {
        Magnitude::NoChange
    } else if l_sim.signum() != l_seed.signum() {
        Magnitude::Opposite
    } else if m < lo {
        Magnitude::Smaller
    } else if m > hi {
        Magnitude::Larger
    } else {
        Magnitude::Within
    }
}

/// One effect judged.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Verdict {
    /// The relative changes, patched / baseline − 1.
    pub r_seed: f64,
    pub r_sim: f64,
    /// Their logarithms, ln(patched / baseline), which the magnitude
    /// compares.
    pub ln_seed: f64,
    pub ln_sim: f64,
    pub expected: Direction,
    pub observed: Direction,
    pub direction_matches: bool,
    pub magnitude: Magnitude,
    pub reproduced: bool,
}

/// Judges an effect from the seed's and mmsim's (baseline, patched).
pub fn judge(expected: Direction, seed: (f64, f64), sim: (f64, f64)) -> Verdict {
    let r_seed = change(seed.0, seed.1);
    let r_sim = change(sim.0, sim.1);
    let ln_seed = log_change(seed.0, seed.1);
    let ln_sim = log_change(sim.0, sim.1);
    let observed = Direction::of(r_sim);
    let direction_matches = observed == expected;
    let magnitude = magnitude(ln_seed, ln_sim);
    Verdict {
        r_seed,
        r_sim,
        ln_seed,
        ln_sim,
        expected,
        observed,
        direction_matches,
        magnitude,
        reproduced: direction_matches && magnitude == Magnitude::Within,
    }
}

/// A relative change as a signed percentage: "+41.9%", "-4.5%", "0%",
/// "+∞".
pub fn percent(r: f64) -> String {
    if r == 0.0 {
        return "0%".into();
    }
    if r.is_infinite() {
        return if r > 0.0 {
            "+∞".into()
        } else {
            "-∞".into()
        };
    }
    let p = 100.0 * r;
    if p.abs() < 0.05 {
        "0.0%".into()
    } else if p.abs() >= 100.0 {
        format!("{p:+.0}%")
    } else {
        format!("{p:+.1}%")
    }
}

/// A value for people: an integer (a counter, or any whole number) without
/// decimals; a number from 1000 up rounded to a whole; any other to four
/// significant digits, without trailing zeros when it has no more digits
/// than that (a seed's published 0.32 stays 0.32, mmsim's 0.3200… does not
/// lose its zeros).
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "∞".into()
        } else {
            "-∞".into()
        };
    }
    if v == v.round() && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let a = v.abs();
    if a >= 1000.0 {
        return format!("{v:.0}");
    }
    let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.decimals$}");
    let scaled = a * 10f64.powi(decimals as i32);
    if (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0) {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

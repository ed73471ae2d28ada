//! How `mmsim reproduce` judges one effect: on the relative change the
//! patch makes, not on the ratio of values.
//!
//! For each effect, r = patched / baseline − 1, the seed's (r_seed) and
//! mmsim's (r_sim). A change under [`NO_CHANGE`] (3 %) in magnitude is no
//! change, on either side. The magnitude is **within** when r_sim lies in
//! the band of r_seed: the same sign and |r_seed| / 1.5 ≤ |r_sim| ≤
//! 1.5 · |r_seed|; when the seed's change is under 3 %, within means
//! |r_sim| < 3 %. The direction is **right** when mmsim moves the figure the
//! way the seed did (lower, higher, or no change where the seed's expected
//! direction is "none"). An effect is **reproduced** when both hold.
//!
//! This file depends on nothing but `std`, so the tests can include it.

/// A relative change under this, in magnitude, is no change.
pub const NO_CHANGE: f64 = 0.03;
/// mmsim's change is within when its magnitude is within this factor of
/// the seed's, either way.
pub const FACTOR: f64 = 1.5;

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
    /// The same sign, smaller than |r_seed| / 1.5.
    Smaller,
    /// Larger than 1.5 · |r_seed|, or a change where the seed saw none.
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

/// The band of mmsim's change that is within: (lowest, highest) r_sim,
/// ends included except for a seed change under 3 %, whose band is the
/// open (−3 %, 3 %).
pub fn band(r_seed: f64) -> (f64, f64) {
    if r_seed.abs() < NO_CHANGE {
        (-NO_CHANGE, NO_CHANGE)
    } else if r_seed > 0.0 {
        (r_seed / FACTOR, r_seed * FACTOR)
    } else {
        (r_seed * FACTOR, r_seed / FACTOR)
    }
}

/// How r_sim compares with r_seed.
pub fn magnitude(r_seed: f64, r_sim: f64) -> Magnitude {
    if r_sim.is_nan() {
        return Magnitude::NoChange;
    }
    if r_seed.abs() < NO_CHANGE {
        return if r_sim.abs() < NO_CHANGE {
            Magnitude::Within
        } else {
            Magnitude::Larger
        };
    }
    // The band's ends are inside it, whatever the rounding of the
    // quotients that led there.
    let (s, m) = (r_seed.abs(), r_sim.abs());
    let (lo, hi) = (s / FACTOR * (1.0 - 1e-9), s * FACTOR * (1.0 + 1e-9));
    if m < NO_CHANGE && m < lo {
        Magnitude::NoChange
    } else if r_sim.signum() != r_seed.signum() {
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
    pub r_seed: f64,
    pub r_sim: f64,
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
    let observed = Direction::of(r_sim);
    let direction_matches = observed == expected;
    let magnitude = magnitude(r_seed, r_sim);
    Verdict {
        r_seed,
        r_sim,
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

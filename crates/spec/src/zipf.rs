//! Zipf-distributed ranks for `order = "zipf"` touches, by rejection-inversion
//! (W. Hörmann, G. Derflinger, "Rejection-inversion to generate variates
//! from monotone discrete distributions", ACM TOMACS 6(3), 1996).
//!
//! Each draw costs a `log1p` and an `exp` (about 120 instructions, a tenth
//! of a zipf workload's host time). A stream that draws many times from few
//! ranks builds a [`Table`] once: the range of the uniform variate `u` that
//! the inversion maps to each rank, shrunk by a guard far wider than the
//! functions' rounding error, so that a `u` inside it gives the rank the
//! inversion would give, bit for bit. A `u` outside every range (the
//! rejection test's zone, the guards, the ends) takes the inversion itself.
//! Either way the stream's draws are the same: the table changes only the
//! host time.

use std::cmp::Ordering;

use crate::rng::Rng;

/// Zipf over ranks 1..=n with exponent theta.
pub struct Zipf {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
    table: Option<Table>,
}

/// A table is built when a stream draws at least this many times per rank:
/// building costs two `h_integral` per rank, a draw it serves saves a
/// `log1p` and an `exp`.
const TABLE_DRAWS_PER_RANK: u64 = 4;

/// The most ranks a table covers: 3 MiB a stream.
const TABLE_MAX_RANKS: u64 = 1 << 17;

/// A rank's range (two f64) and its two guide slices (u32).
const TABLE_BYTES_PER_RANK: u64 = 24;

/// The largest exponent a table serves. The inversion's relative error
/// grows as 1/(1 - theta) (1e-13 at 0.999); the guards below are 1e-9.
const TABLE_MAX_EXPONENT: f64 = 0.999;

impl Zipf {
    pub fn new(n: u64, theta: f64) -> Self {
        let mut z = Zipf {
            n: n as f64,
            exponent: theta,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
            table: None,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// A sampler for a stream that will draw `draws` times: with a table
    /// when that pays (see [`TABLE_DRAWS_PER_RANK`]).
    pub fn for_draws(n: u64, theta: f64, draws: u64) -> Self {
        let mut z = Zipf::new(n, theta);
        if Self::wants_table(n, theta, draws) {
            z.table = Table::build(&z);
        }
        z
    }

    /// The host memory of the table a stream of `draws` over `n` ranks
    /// builds (0: none), for `work::host_bytes`.
    pub fn table_bytes(n: u64, theta: f64, draws: u64) -> u64 {
        if Self::wants_table(n, theta, draws) {
            n * TABLE_BYTES_PER_RANK
        } else {
            0
        }
    }

    fn wants_table(n: u64, theta: f64, draws: u64) -> bool {
        (2..=TABLE_MAX_RANKS).contains(&n)
            && draws / n >= TABLE_DRAWS_PER_RANK
            && theta <= TABLE_MAX_EXPONENT
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.unit() * (self.h_integral_x1 - self.h_integral_n);
            if let Some(k) = self.table.as_ref().and_then(|t| t.rank(u)) {
                return k;
            }
            if let Some(k) = self.invert(u) {
                return k;
            }
        }
    }

    /// The inversion of one uniform variate: its rank, or None when the
    /// rejection test refuses it.
    fn invert(&self, u: f64) -> Option<u64> {
        let x = self.h_integral_inverse(u);
        let mut k = libm::floor(x + 0.5);
        if k < 1.0 {
            k = 1.0;
        } else if k > self.n {
            k = self.n;
        }
        if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
            return Some(k as u64);
        }
        None
    }

    fn h(&self, x: f64) -> f64 {
        libm::exp(-self.exponent * libm::log(x))
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = libm::log(x);
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.exponent);
        if t < -1.0 {
            t = -1.0;
        }
        libm::exp(helper1(t) * x)
    }
}

/// For each rank k, the variates `u` whose inversion `x` lies in
/// [k - s + g, k + 0.5 - g]: there `floor(x + 0.5)` is k and the rejection
/// test accepts without its second half, whatever the last bits of `x`.
/// The guard g = 1e-7 + 1e-9 k is four orders of magnitude above the
/// relative error of `h_integral` and its inverse for an exponent up to
/// [`TABLE_MAX_EXPONENT`] (both are a few `log`/`exp` roundings, amplified
/// by at most 1/(1 - theta)).
struct Table {
    /// `[lo, hi]` of rank `i + 1`; a rank with no safe range has lo > hi.
    range: Vec<[f64; 2]>,
    /// For each of `guide.len()` equal slices of `u`'s span, a rank index
    /// at or near the first whose `hi` reaches the slice.
    guide: Vec<u32>,
    u_min: f64,
    scale: f64,
}

impl Table {
    fn build(z: &Zipf) -> Option<Table> {
        let n = z.n as usize;
        let mut range = Vec::with_capacity(n);
        for k in 1..=n {
            let k = k as f64;
            let g = 1e-7 + 1e-9 * k;
            range.push([z.h_integral(k - z.s + g), z.h_integral(k + 0.5 - g)]);
        }
        // The ranges must rise with the rank (and be numbers), or the
        // guide's scan could stop at the wrong one: leave such a
        // distribution to the inversion.
        let rising = |w: &[[f64; 2]]| w[0][1].partial_cmp(&w[1][1]) == Some(Ordering::Less);
        if !range.windows(2).all(rising) {
            return None;
        }
        let u_min = z.h_integral_x1;
        let slices = 2 * n;
        let scale = slices as f64 / (z.h_integral_n - u_min);
        if !scale.is_finite() || scale <= 0.0 {
            return None;
        }
        let mut guide = Vec::with_capacity(slices);
        let mut i = 0;
        for j in 0..slices {
            let start = u_min + j as f64 / scale;
            while i < n && range[i][1] < start {
                i += 1;
            }
            guide.push(i as u32);
        }
        Some(Table {
            range,
            guide,
            u_min,
            scale,
        })
    }

    /// The rank of `u` when `u` lies in a rank's safe range.
    #[inline]
    fn rank(&self, u: f64) -> Option<u64> {
        let slice = ((u - self.u_min) * self.scale) as usize;
        let mut i = self.guide[slice.min(self.guide.len() - 1)] as usize;
        // The slice is computed in floating point: step back over any rank
        // whose range still reaches u, then forward to the first that does.
        while i > 0 && self.range[i - 1][1] >= u {
            i -= 1;
        }
        while i < self.range.len() && self.range[i][1] < u {
            i += 1;
        }
        let [lo, _] = *self.range.get(i)?;
        (u >= lo).then_some(i as u64 + 1)
    }
}

/// log1p(x)/x, continuous at 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::log1p(x) / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// expm1(x)/x, continuous at 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::expm1(x) / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's answer, wherever it gives one, is the inversion's.
    /// Variates are taken at every range's edges (a few ulps either side)
    /// and at random, for exponents across the table's span.
    #[test]
    fn table_ranks_are_the_inversions() {
        let mut rng = Rng::new(17);
        for &(n, theta) in &[
            (2u64, 0.5),
            (3, 0.99),
            (1000, 0.05),
            (1000, 0.9),
            (4096, 0.99),
            (32768, 0.9),
            (100_000, 0.999),
        ] {
            let z = Zipf::for_draws(n, theta, n * TABLE_DRAWS_PER_RANK);
            let t = z.table.as_ref().expect("a table");
            let check = |u: f64| match t.rank(u) {
                Some(k) => {
                    assert_eq!(Some(k), z.invert(u), "n {n} theta {theta} u {u}");
                    true
                }
                None => false,
            };
            for &[lo, hi] in &t.range {
                for edge in [lo, hi] {
                    let mut u = edge;
                    for _ in 0..4 {
                        u = u.next_down();
                    }
                    for _ in 0..8 {
                        check(u);
                        u = u.next_up();
                    }
                }
            }
            // Only the rejection test's zone and the guards are left over.
            let random = (0..20_000)
                .filter(|_| check(z.h_integral_n + rng.unit() * (z.h_integral_x1 - z.h_integral_n)))
                .count();
            assert!(random > 19_000, "n {n} theta {theta}: served {random}");
        }
    }

    /// A stream's draws are the same with and without the table.
    #[test]
    fn table_keeps_the_draws() {
        for &(n, theta, seed) in &[(500u64, 0.99, 1u64), (32768, 0.9, 7), (77, 0.3, 3)] {
            let plain = Zipf::new(n, theta);
            let fast = Zipf::for_draws(n, theta, 1 << 20);
            assert!(plain.table.is_none() && fast.table.is_some());
            let (mut a, mut b) = (Rng::new(seed), Rng::new(seed));
            for _ in 0..100_000 {
                assert_eq!(plain.sample(&mut a), fast.sample(&mut b));
            }
        }
    }

    /// No table where it would not pay or could not be exact.
    #[test]
    fn table_only_where_it_pays() {
        assert!(Zipf::for_draws(1000, 0.9, 3999).table.is_none());
        assert!(Zipf::for_draws(1000, 1.0, 1 << 20).table.is_none());
        assert!(Zipf::for_draws(1, 0.9, 1 << 20).table.is_none());
        assert!(Zipf::for_draws(TABLE_MAX_RANKS + 1, 0.9, u64::MAX)
            .table
            .is_none());
    }
}

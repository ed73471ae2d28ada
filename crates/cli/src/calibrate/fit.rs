//! The calibration's fit: every timed quantity is one equation, there are
//! more equations than unknowns, and the unknowns are solved by weighted
//! non-negative least squares (Lawson and Hanson's NNLS, the `nnls`
//! crate). Each unknown's uncertainty comes from the runs' spread: the
//! fit is repeated on bootstrap resamples of the runs.
//!
//! Why least squares and not one exact home per unknown: with as many
//! homes as unknowns, noise in one home moves its unknown without limit
//! and can push it below zero (a path "cheaper than the constants it is
//! known to pay"), which made calibrate refuse on machines other than the
//! one it was written on. With several sizes per path and several paths
//! per constant, each constant is pinned by every phase that pays it, a
//! disagreement between them shows as a residual, and a constant no phase
//! separates from zero is reported with the bound the data allow instead
//! of a refusal.

use ndarray::{Array1, Array2};
use std::collections::BTreeMap;

/// Bootstrap resamples of the runs.
pub const RESAMPLES: usize = 200;
/// The bootstrap's seed: a calibration solves the same way every time.
const SEED: u64 = 0x6d6d_7369_6d5f_6361;
/// The uncertainty interval: the central 95 % of the resamples' values.
const LOW_Q: f64 = 0.025;
const HIGH_Q: f64 = 0.975;
/// A row's noise is never taken below this share of its value: the
/// timer's and the phase marks' resolution, and what a handful of runs
/// cannot show.
const MIN_REL_NOISE: f64 = 0.01;

/// One equation: Σ_j a[j] · x_j = value − known, where value is a
/// weighted sum of timed quantities of one run: a difference of two
/// phase times, so that fixed costs cancel, or one time alone.
#[derive(Clone, Debug)]
pub struct Row {
    /// What it measures, for the report (e.g. `pageout/in_c-in_b`).
    pub name: String,
    /// How much of each unknown it charges (count × share of the bundle).
    pub a: Vec<f64>,
    /// What its fixed constants (not solved for) charge, ns.
    pub known: f64,
    /// Per run: the value, and how long the run took to measure it (the
    /// sum of the quantities' times), or None where the run did not.
    pub runs: Vec<Option<Sample>>,
}

/// One run's measurement of a row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub value: f64,
    /// The time the run spent in the quantities the value is made of.
    pub spent: f64,
}

impl Row {
    /// The row's value from a set of runs: that of the run which spent
    /// the least time measuring it. Interference on a shared machine (a
    /// vCPU's steal time, another tenant's cache traffic) only ever adds
    /// time, and it drifts over seconds, so the least disturbed run is
    /// the one to believe, and a difference is taken within one run: the
    /// minimum of each phase over different runs would difference two
    /// machine states (it made differences negative here).
    fn value(&self, runs: &[usize]) -> Option<f64> {
        runs.iter()
            .filter_map(|&r| self.runs[r])
            .min_by(|a, b| a.spent.total_cmp(&b.spent))
            .map(|s| s.value)
    }

    /// Its noise: the runs' median absolute deviation (scaled to a
    /// standard deviation), never under [`MIN_REL_NOISE`] of its value.
    fn noise(&self) -> f64 {
        let mut v: Vec<f64> = self.runs.iter().flatten().map(|s| s.value).collect();
        let m = median(&mut v);
        let floor = MIN_REL_NOISE * m.abs();
        let mut dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
        (1.4826 * median(&mut dev)).max(floor).max(1e-9)
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The weighted NNLS solution from the given runs' minima: min Σ_i
/// ((a_i·x − b_i)/σ_i)² over x ≥ 0. Rows no chosen run measured are left
/// out. Columns are scaled to unit norm first (the counts range from 1 to
/// millions), and back after.
///
/// None for an unknown the equations the runs measured cannot separate:
/// no equation prices it (runs recorded before its phases existed say
/// nothing of it), or it is only ever priced together with others in the
/// same proportions (its column lies in the span of theirs), where the
/// least squares could put any share of the sum on it. `hold` gives, for
/// an unknown whose home may be missing from the runs (a residual added
/// after them), the value to hold it at when they cannot separate it: it
/// is then known, not solved (None too), and what it shared a path with
/// is solved as before it existed. An index past `hold`'s end holds
/// nothing.
pub fn solve_supported(
    rows: &[Row],
    unknowns: usize,
    runs: &[usize],
    hold: &[Option<f64>],
) -> Vec<Option<f64>> {
    let used: Vec<(&Row, f64)> = rows
        .iter()
        .filter_map(|r| r.value(runs).map(|v| (r, v)))
        .collect();
    if used.is_empty() {
        return vec![None; unknowns];
    }
    let mut a = Array2::<f64>::zeros((used.len(), unknowns));
    let mut b = Array1::<f64>::zeros(used.len());
    for (i, (r, v)) in used.iter().enumerate() {
        let s = r.noise();
        for (j, &c) in r.a.iter().enumerate() {
            a[(i, j)] = c / s;
        }
        b[i] = (v - r.known) / s;
    }
    let (mut unit, mut norms) = unit_columns(&a);
    let mut separable = identifiable(&unit);
    let held: Vec<(usize, f64)> = separable
        .iter()
        .zip(hold)
        .enumerate()
        .filter_map(|(j, (&ok, &h))| h.filter(|_| !ok).map(|h| (j, h)))
        .collect();
    for &(j, h) in &held {
        b.scaled_add(-h, &a.column(j));
        a.column_mut(j).fill(0.0);
    }
    if !held.is_empty() {
        (unit, norms) = unit_columns(&a);
        separable = identifiable(&unit);
    }
    let (x, _) = nnls::nnls(unit.view(), b.view());
    x.iter()
        .zip(&norms)
        .zip(&separable)
        .map(|((x, &n), &ok)| (n > 0.0 && ok).then(|| x / n))
        .collect()
}

/// `a` with each non-zero column scaled to unit norm, and the norms.
fn unit_columns(a: &Array2<f64>) -> (Array2<f64>, Vec<f64>) {
    let mut a = a.clone();
    let norms: Vec<f64> = (0..a.ncols())
        .map(|j| a.column(j).iter().map(|x| x * x).sum::<f64>().sqrt())
        .collect();
    for (j, &n) in norms.iter().enumerate() {
        if n > 0.0 {
            a.column_mut(j).mapv_inplace(|x| x / n);
        }
    }
    (a, norms)
}

/// Relative size below which a pivot counts as zero in [`rank`]: the
/// columns are of unit norm, and exact collinearity (the same counts in
/// every row) leaves rounding residue of ~1e-15.
const RANK_TOL: f64 = 1e-9;

/// The rank of `a` (Gaussian elimination with full pivoting; the fit's
/// matrices are at most a few dozen square).
fn rank(mut a: Array2<f64>) -> usize {
    let (m, n) = a.dim();
    let mut r = 0;
    while r < m.min(n) {
        let mut best = (r, r, 0.0f64);
        for i in r..m {
            for j in r..n {
                if a[(i, j)].abs() > best.2 {
                    best = (i, j, a[(i, j)].abs());
                }
            }
        }
        if best.2 <= RANK_TOL {
            break;
        }
        for j in 0..n {
            a.swap((r, j), (best.0, j));
        }
        for i in 0..m {
            a.swap((i, r), (i, best.1));
        }
        for i in r + 1..m {
            let f = a[(i, r)] / a[(r, r)];
            for j in r..n {
                a[(i, j)] -= f * a[(r, j)];
            }
        }
        r += 1;
    }
    r
}

/// Per column of `a` (unit-norm columns, zero where nothing prices it):
/// whether the rows pin it, i.e. dropping it lowers the rank.
fn identifiable(a: &Array2<f64>) -> Vec<bool> {
    let full = rank(a.clone());
    (0..a.ncols())
        .map(|j| {
            let mut without = a.clone();
            without.column_mut(j).fill(0.0);
            rank(without) < full
        })
        .collect()
}

/// Each unknown's value from every run, and its bootstrap distribution.
pub struct Fit {
    pub value: Vec<f64>,
    /// Per unknown: whether any equation the runs measured prices it
    /// (false: its value is 0 and says nothing, [`solve_supported`]).
    pub measured: Vec<bool>,
    /// Per unknown: the 2.5th and 97.5th percentiles of the resamples.
    pub interval: Vec<[f64; 2]>,
    /// Per unknown: the share of resamples that put it at zero.
    pub at_zero: Vec<f64>,
}

/// Solves from all runs, then from [`RESAMPLES`] resamples of them drawn
/// with replacement (the bootstrap: how far the runs' spread moves each
/// value). With one run, the interval is the value.
pub fn fit(rows: &[Row], unknowns: usize, nruns: usize, hold: &[Option<f64>]) -> Fit {
    let all: Vec<usize> = (0..nruns).collect();
    let supported = solve_supported(rows, unknowns, &all, hold);
    let measured = supported.iter().map(Option::is_some).collect();
    let value: Vec<f64> = supported.into_iter().map(|x| x.unwrap_or(0.0)).collect();
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); unknowns];
    if nruns > 1 {
        let mut rng = mmsim_spec::rng::Rng::new(SEED);
        for _ in 0..RESAMPLES {
            let pick: Vec<usize> = (0..nruns)
                .map(|_| rng.below(nruns as u64) as usize)
                .collect();
            // A resample that cannot separate an unknown (it drew no run
            // of the unknown's home) says nothing of it.
            for (j, x) in solve_supported(rows, unknowns, &pick, hold)
                .into_iter()
                .enumerate()
            {
                samples[j].extend(x);
            }
        }
    }
    let mut interval = Vec::new();
    let mut at_zero = Vec::new();
    for (j, s) in samples.iter_mut().enumerate() {
        if s.is_empty() {
            interval.push([value[j], value[j]]);
            at_zero.push(if value[j] == 0.0 { 1.0 } else { 0.0 });
            continue;
        }
        s.sort_by(f64::total_cmp);
        let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
        interval.push([q(LOW_Q), q(HIGH_Q)]);
        at_zero.push(s.iter().filter(|&&x| x == 0.0).count() as f64 / s.len() as f64);
    }
    Fit {
        value,
        measured,
        interval,
        at_zero,
    }
}

/// Student's t at 0.975 for 1 to 30 degrees of freedom (any table of
/// the t distribution); past 30 the 30's value, a little wide.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Fewest sessions from which [`prediction_interval`] says anything: with
/// two, Student's t (12.7) makes the interval twenty times the
/// sessions' difference, which tells a user nothing.
pub const MIN_SESSIONS: usize = 3;

/// Where another session's value is expected, from the values of the
/// sessions at hand: the 95 % prediction interval of one more draw,
/// mean ± t(0.975, S−1) · sd · √(1 + 1/S), never below zero (a cost is
/// not negative). This and not the bootstrap is what a second
/// calibration is checked against: the bootstrap resamples runs, and
/// each value is its runs' least, so a resample can never reach below
/// the least of the runs it is drawn from, while another session's
/// least falls below it about half the time; and runs of one session
/// move together with the machine's state, which only separate sessions
/// sample. None with fewer than [`MIN_SESSIONS`].
pub fn prediction_interval(xs: &[f64]) -> Option<[f64; 2]> {
    let s = xs.len();
    if s < MIN_SESSIONS {
        return None;
    }
    let n = s as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    let t = T_975[(s - 2).min(T_975.len() - 1)];
    let half = t * var.sqrt() * (1.0 + 1.0 / n).sqrt();
    Some([(mean - half).max(0.0), mean + half])
}

/// A row's fitted value (Σ a·x + known) beside its measured one.
pub fn fitted(row: &Row, x: &[f64]) -> f64 {
    row.a.iter().zip(x).map(|(a, x)| a * x).sum::<f64>() + row.known
}

/// The fit's residuals, by row name: (measured minimum, fitted).
pub fn residuals(rows: &[Row], x: &[f64], nruns: usize) -> BTreeMap<String, (f64, f64)> {
    let all: Vec<usize> = (0..nruns).collect();
    rows.iter()
        .filter_map(|r| r.value(&all).map(|v| (r.name.clone(), (v, fitted(r, x)))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, a: Vec<f64>, runs: Vec<f64>) -> Row {
        Row {
            name: name.into(),
            a,
            known: 0.0,
            runs: runs
                .into_iter()
                .map(|v| Some(Sample { value: v, spent: v }))
                .collect(),
        }
    }

    /// An overdetermined, consistent system is solved exactly.
    #[test]
    fn a_consistent_overdetermined_system_is_solved_exactly() {
        let x = [3.0, 500.0, 20.0];
        let a = [
            vec![1000.0, 1.0, 0.0],
            vec![2000.0, 1.0, 0.0],
            vec![0.0, 0.0, 65536.0],
            vec![0.0, 0.0, 131072.0],
            vec![1000.0, 0.0, 1000.0],
        ];
        let rows: Vec<Row> = a
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let v: f64 = a.iter().zip(x).map(|(p, q)| p * q).sum();
                row(&format!("r{i}"), a.clone(), vec![v, v * 1.001, v * 1.02])
            })
            .collect();
        let f = fit(&rows, 3, 3, &[]);
        for (got, want) in f.value.iter().zip(x) {
            assert!((got - want).abs() < 1e-6 * want, "{got} for {want}");
        }
        for (j, i) in f.interval.iter().enumerate() {
            assert!(
                i[0] <= f.value[j] + 1e-9 && f.value[j] <= i[1] + 1e-9,
                "{i:?}"
            );
        }
    }

    /// Where the exact solve of a square system would go below zero, the
    /// fit stops at zero, says how often the resamples did, and the other
    /// unknowns take up what the data hold.
    #[test]
    fn a_constant_the_data_put_below_zero_is_held_at_zero_and_flagged() {
        // Row 2 says y = 100 for x0 + x1 with x0 = 120: x1 would be −20.
        let rows = vec![
            row("x0", vec![1.0, 0.0], vec![120.0, 121.0, 125.0]),
            row("sum", vec![1.0, 1.0], vec![100.0, 101.0, 104.0]),
        ];
        let f = fit(&rows, 2, 3, &[]);
        assert_eq!(f.value[1], 0.0);
        assert!(f.value[0] > 100.0 && f.value[0] < 120.0, "{:?}", f.value);
        assert_eq!(f.at_zero[1], 1.0);
        assert_eq!(f.at_zero[0], 0.0);
    }

    /// x0 and x1 only ever priced together, in the same proportion (their
    /// sum 300), over two runs; x2 (100) on its own.
    fn priced_together() -> Vec<Row> {
        vec![
            row(
                "x0+x1",
                vec![1000.0, 1000.0, 0.0],
                vec![300_000.0, 301_000.0],
            ),
            row(
                "2(x0+x1)",
                vec![2000.0, 2000.0, 0.0],
                vec![600_000.0, 602_000.0],
            ),
            row("x2", vec![0.0, 0.0, 500.0], vec![50_000.0, 50_500.0]),
        ]
    }

    /// Two unknowns only ever priced together, in the same proportion,
    /// are not solved (any split of their sum fits); a third priced on
    /// its own is, and a row that separates the two makes them solvable.
    #[test]
    fn unknowns_only_priced_together_are_not_solved() {
        let together = priced_together();
        let x = solve_supported(&together, 3, &[0, 1], &[]);
        assert_eq!(x[0], None);
        assert_eq!(x[1], None);
        assert!((x[2].unwrap() - 100.0).abs() < 1e-6, "{x:?}");
        let mut apart = together.clone();
        apart.push(row("a", vec![1000.0, 0.0, 0.0], vec![100_000.0, 100_100.0]));
        let x = solve_supported(&apart, 3, &[0, 1], &[]);
        assert!((x[0].unwrap() - 100.0).abs() < 1e-6, "{x:?}");
        assert!((x[1].unwrap() - 200.0).abs() < 1e-6, "{x:?}");
    }

    /// An unknown that may be held (a residual whose home the runs lack)
    /// is held at its value where the runs cannot separate it, and the
    /// constant it shares its path with is solved as before; where they
    /// can, it is solved.
    #[test]
    fn an_unseparable_residual_is_held_and_the_rest_solved() {
        // x0 (a path's cost) is only ever priced beside x1 (a residual
        // added later, whose home is missing); x2 on its own.
        let rows = priced_together();
        let hold = [None, Some(50.0), None];
        let x = solve_supported(&rows, 3, &[0, 1], &hold);
        assert_eq!(x[1], None);
        assert!((x[0].unwrap() - 250.0).abs() < 1e-6, "{x:?}");
        assert!((x[2].unwrap() - 100.0).abs() < 1e-6, "{x:?}");
        let mut homed = rows.clone();
        homed.push(row(
            "home",
            vec![0.0, 1000.0, 0.0],
            vec![120_000.0, 121_000.0],
        ));
        let x = solve_supported(&homed, 3, &[0, 1], &hold);
        assert!((x[1].unwrap() - 120.0).abs() < 1e-6, "{x:?}");
        assert!((x[0].unwrap() - 180.0).abs() < 1e-6, "{x:?}");
    }

    /// Noisier runs widen the interval; the minimum is what is solved.
    #[test]
    fn the_interval_follows_the_runs_spread() {
        let tight = vec![row("a", vec![1.0], vec![100.0, 100.5, 101.0, 100.2, 100.8])];
        let loose = vec![row("a", vec![1.0], vec![100.0, 130.0, 115.0, 160.0, 108.0])];
        let (t, l) = (fit(&tight, 1, 5, &[]), fit(&loose, 1, 5, &[]));
        assert_eq!(t.value[0], 100.0);
        assert_eq!(l.value[0], 100.0);
        let w = |f: &Fit| f.interval[0][1] - f.interval[0][0];
        assert!(w(&l) > 5.0 * w(&t), "{:?} {:?}", t.interval, l.interval);
        // Deterministic: the same runs give the same interval.
        assert_eq!(fit(&loose, 1, 5, &[]).interval, l.interval);
    }

    /// The value is the least disturbed run's, whatever its own size.
    #[test]
    fn the_least_disturbed_run_gives_the_value() {
        let r = Row {
            name: "d".into(),
            a: vec![1.0],
            known: 0.0,
            runs: vec![
                Some(Sample {
                    value: 200.0,
                    spent: 400.0,
                }),
                Some(Sample {
                    value: 150.0,
                    spent: 390.0,
                }),
                Some(Sample {
                    value: 100.0,
                    spent: 500.0,
                }),
            ],
        };
        assert_eq!(r.value(&[0, 1, 2]), Some(150.0));
        assert_eq!(r.value(&[0, 2]), Some(200.0));
    }

    /// The prediction interval of one more session: Student's t on the
    /// sessions' spread, wider than their range, never below zero, and
    /// nothing from fewer than three sessions.
    #[test]
    fn another_sessions_value_is_predicted_from_the_sessions_spread() {
        assert_eq!(prediction_interval(&[100.0, 120.0]), None);
        // Mean 100, sd √(200/3), S = 4: t(0.975, 3) = 3.182, √1.25.
        let [lo, hi] = prediction_interval(&[90.0, 100.0, 110.0, 100.0]).unwrap();
        let half = 3.182 * (200.0f64 / 3.0).sqrt() * 1.25f64.sqrt();
        assert!((hi - (100.0 + half)).abs() < 1e-9 && (lo - (100.0 - half)).abs() < 1e-9);
        assert!(lo < 90.0 && hi > 110.0);
        // Equal sessions: no spread to predict from.
        assert_eq!(prediction_interval(&[7.0, 7.0, 7.0]), Some([7.0, 7.0]));
        // A constant near zero with a wide spread stops at zero.
        assert_eq!(prediction_interval(&[0.0, 50.0, 0.0]).unwrap()[0], 0.0);
    }

    /// An unknown only unmeasured rows price is None, not zero.
    #[test]
    fn an_unknown_no_measured_row_prices_is_unsupported() {
        let mut r = row("b", vec![0.0, 2.0], vec![10.0, 10.0]);
        r.runs[0] = None;
        let rows = vec![row("a", vec![1.0, 0.0], vec![5.0, 5.0]), r];
        assert_eq!(solve_supported(&rows, 2, &[0], &[]), vec![Some(5.0), None]);
        assert_eq!(
            solve_supported(&rows, 2, &[1], &[]),
            vec![Some(5.0), Some(5.0)]
        );
    }

    /// A row a run did not measure is left out of that run's solve.
    #[test]
    fn missing_measurements_are_left_out() {
        let mut r = row("b", vec![2.0], vec![10.0, 10.0]);
        r.runs[1] = None;
        let rows = vec![row("a", vec![1.0], vec![5.0, 5.0]), r];
        assert_eq!(solve_supported(&rows, 1, &[1], &[]), vec![Some(5.0)]);
    }
}

//! `mmsim run`'s progress bar: for a run still going after
//! `SHOW_AFTER` of host time, a bar on stderr with the page operations
//! done of those the spec asks for (`mmsim_spec::work`), the simulated
//! time reached and indicatif's ETA. None with `--quiet` or when stderr is
//! not a terminal, so the output of a piped or scripted run is unchanged.
//!
//! The simulator calls the hook once per scheduling slice (`Progress`);
//! the hook reads the clock and, once the bar shows, sets its position
//! (indicatif redraws at most 20 times a second).

use mmsim_sim::Progress;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How long a run goes before its bar shows: runs shorter than this print
/// nothing. `MMSIM_PROGRESS_AFTER_MS` sets another (the tests' 0).
pub const SHOW_AFTER: Duration = Duration::from_secs(2);

/// Whether a run may show a bar at all.
pub fn wanted(quiet: bool, stderr_is_terminal: bool) -> bool {
    !quiet && stderr_is_terminal
}

/// The delay before the bar, from `MMSIM_PROGRESS_AFTER_MS` if set to a
/// number of milliseconds.
fn show_after(var: Option<&str>) -> Duration {
    var.and_then(|v| v.trim().parse().ok())
        .map_or(SHOW_AFTER, Duration::from_millis)
}

/// A count of operations, short: 950, 12.3 k, 4.56 M, 1.20 G.
pub fn count(n: u64) -> String {
    const UNITS: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    let x = n as f64;
    for (size, unit) in UNITS {
        if x >= size {
            let v = x / size;
            return if v >= 100.0 {
                format!("{v:.0} {unit}")
            } else if v >= 10.0 {
                format!("{v:.1} {unit}")
            } else {
                format!("{v:.2} {unit}")
            };
        }
    }
    n.to_string()
}

/// The text beside the bar: work done of the total, and simulated time.
pub fn message(p: &Progress) -> String {
    format!(
        "{}/{} page ops, {:.3} s simulated",
        count(p.done.min(p.total)),
        count(p.total),
        p.sim_ns as f64 / 1e9
    )
}

/// The hook for `RunOptions::progress`, or None when no bar may show.
pub fn run_hook<'a>(quiet: bool) -> Option<Box<dyn FnMut(Progress) + 'a>> {
    if !wanted(quiet, std::io::stderr().is_terminal()) {
        return None;
    }
    let after = show_after(std::env::var("MMSIM_PROGRESS_AFTER_MS").ok().as_deref());
    let started = Instant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    Some(Box::new(move |p: Progress| {
        if bar.is_none() {
            if started.elapsed() < after || p.total == 0 {
                return;
            }
            let b = indicatif::ProgressBar::with_draw_target(
                Some(p.total),
                indicatif::ProgressDrawTarget::stderr(),
            )
            .with_elapsed(started.elapsed())
            // Cleared when the run ends and the simulator drops the hook.
            .with_finish(indicatif::ProgressFinish::AndClear);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} simulating {percent:>3}% [{wide_bar}] {msg}, ETA {eta}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            bar = Some(b);
        }
        if let Some(b) = &bar {
            b.set_message(message(&p));
            b.set_position(p.done.min(p.total));
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_only_on_a_terminal_and_not_when_quiet() {
        assert!(wanted(false, true));
        assert!(!wanted(true, true));
        assert!(!wanted(false, false));
        assert!(!wanted(true, false));
    }

    #[test]
    fn the_delay_is_two_seconds_unless_the_variable_says() {
        assert_eq!(show_after(None), Duration::from_secs(2));
        assert_eq!(show_after(Some("0")), Duration::ZERO);
        assert_eq!(show_after(Some(" 250 ")), Duration::from_millis(250));
        assert_eq!(show_after(Some("soon")), SHOW_AFTER);
    }

    #[test]
    fn counts_are_short() {
        assert_eq!(count(950), "950");
        assert_eq!(count(12_345), "12.3 k");
        assert_eq!(count(4_560_000), "4.56 M");
        assert_eq!(count(1_200_000_000), "1.20 G");
        assert_eq!(count(345_000_000_000), "345 G");
    }

    #[test]
    fn the_message_tells_work_and_simulated_time() {
        let p = Progress {
            done: 1_500_000,
            total: 3_000_000_000,
            sim_ns: 12_345_678_901,
        };
        assert_eq!(message(&p), "1.50 M/3.00 G page ops, 12.346 s simulated");
        // A kvstore's accesses may run past the estimate: never past 100%.
        let over = Progress {
            done: 5_000,
            total: 4_000,
            sim_ns: 0,
        };
        assert_eq!(message(&over), "4.00 k/4.00 k page ops, 0.000 s simulated");
    }
}

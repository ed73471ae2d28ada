//! Host throughput of the simulator against the docs/design.md "Targets":
//! resident touches per second (sequential over 1 GiB, uniform over 4 GiB)
//! and faults per second on the fault-heavy paths (zram swap-in plus memcg
//! reclaim, and global reclaim by kswapd and direct reclaim).
//!
//! Every case builds its spec in code (`mmsim_spec::parse_str`) and runs it
//! whole with `mmsim_sim::run(&spec, RunOptions::default())`, so what is
//! timed is the public API a user calls.
//!
//! Method (docs/performance.md states it too):
//! - Resident touches: a *marginal* measurement. Each iteration runs the
//!   full spec (mmap, one sequential first-write pass that faults every
//!   page in, then N resident touches) and the same spec without the N
//!   touches, and reports the difference. Boot (the frame table and free
//!   lists), the first-write faults and exit (munmap) cancel, so criterion's
//!   time and throughput are those of the N resident touches alone.
//! - Fault-heavy cases: the whole run is timed and the throughput is the
//!   run's `pgfault` (minor plus major faults). Boot of the small machines
//!   used is a few ms, reported in the summary as the base run.
//!
//! Clock: the benchmark thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so
//! that other processes on a shared machine do not count against the
//! simulator; set MMSIM_BENCH_WALL=1 to time wall-clock instead. The
//! targets are per core, so CPU time is the figure they compare with.
//!
//! Run with `cargo bench -p mmsim-sim --bench throughput`; a summary with
//! the base times and the whole-run rates is printed at the end.

use criterion::{criterion_group, Criterion, SamplingMode, Throughput};
use mmsim_sim::{run, RunOptions};
use mmsim_spec::Spec;
use std::cell::RefCell;
use std::time::{Duration, Instant};

fn spec(text: &str) -> Spec {
    mmsim_spec::parse_str(text, "bench.toml", &[])
        .unwrap_or_else(|e| panic!("bench spec: {e}\n{text}"))
}

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
}

/// CLOCK_THREAD_CPUTIME_ID on Linux.
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;

/// The clock benchmarks are timed with: this thread's CPU time, or wall
/// time with MMSIM_BENCH_WALL=1.
fn now() -> Duration {
    thread_local! {
        static WALL: Option<Instant> =
            std::env::var_os("MMSIM_BENCH_WALL").map(|_| Instant::now());
    }
    if let Some(t0) = WALL.with(|w| *w) {
        return t0.elapsed();
    }
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec (two longs on x86-64 Linux).
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs a spec once and returns (host time, pgfault, pgmajfault). Panics on
/// a run error or a content-integrity violation: a fast wrong answer is no
/// benchmark.
fn run_timed(s: &Spec) -> (Duration, u64, u64) {
    let t0 = now();
    let r = run(s, RunOptions::default()).expect("bench run");
    let dt = now() - t0;
    assert_eq!(
        r.integrity.violations, 0,
        "integrity violations in a bench run"
    );
    let get = |k: &str| r.vmstat.get(k).copied().unwrap_or(0) as u64;
    let out = (dt, get("pgfault"), get("pgmajfault"));
    drop(r);
    out
}

const MACHINE_NO_THP: &str = r#"
[sysfs]
"kernel/mm/transparent_hugepage/enabled" = "never"
"#;

/// A resident-touch spec: an 8 GiB machine, no cgroup, no swap; `region`
/// mapped and written once in order (one fault per page), then `extra`
/// (if any) as further touch steps.
fn resident_spec(region: &str, extra: &str) -> String {
    format!(
        r#"
[machine]
memory = "8G"
cpus = 1
kernel = "6.1"
{MACHINE_NO_THP}
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "{region}" }},
  {{ op = "touch", region = "heap", order = "seq", write = 1.0 }},
  {extra}
]
"#
    )
}

/// Summary lines collected while benchmarking, printed at the end.
struct Note {
    case: &'static str,
    unit: &'static str,
    elements: u64,
    full: Vec<Duration>,
    base: Vec<Duration>,
    extra: String,
}

thread_local! {
    static NOTES: RefCell<Vec<Note>> = const { RefCell::new(Vec::new()) };
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    if v.is_empty() {
        Duration::ZERO
    } else {
        v[v.len() / 2]
    }
}

/// A marginal resident-touch case: criterion times full − base per
/// iteration, with `touches` elements of throughput.
fn marginal(
    c: &mut Criterion,
    case: &'static str,
    region: &str,
    touch: &str,
    touches: u64,
    seconds: u64,
) {
    let base = spec(&resident_spec(region, ""));
    let full = spec(&resident_spec(region, touch));
    // Check once, outside the timing, that the extra steps fault nothing:
    // the marginal part is resident touches only.
    let (_, f_base, _) = run_timed(&base);
    let (_, f_full, _) = run_timed(&full);
    assert_eq!(f_base, f_full, "{case}: the extra touches must not fault");
    let mut g = c.benchmark_group("resident");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(seconds))
        .throughput(Throughput::Elements(touches));
    let mut fulls = Vec::new();
    let mut bases = Vec::new();
    g.bench_function(case, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (tf, _, _) = run_timed(&full);
                let (tb, _, _) = run_timed(&base);
                fulls.push(tf);
                bases.push(tb);
                total += tf.saturating_sub(tb);
            }
            total
        })
    });
    g.finish();
    NOTES.with(|n| {
        n.borrow_mut().push(Note {
            case,
            unit: "touches",
            elements: touches,
            full: fulls,
            base: bases,
            extra: format!("first-write faults in base and full: {f_base}"),
        })
    });
}

fn resident_seq(c: &mut Criterion) {
    // 1 GiB = 262144 pages; 100 further passes = 26.2M resident touches.
    let passes = 100u64;
    let touches = passes * 262_144;
    marginal(
        c,
        "seq_read_1GiB",
        "1G",
        &format!(
            r#"{{ op = "touch", region = "heap", order = "seq", write = 0.0, passes = {passes} }},"#
        ),
        touches,
        8,
    );
    marginal(
        c,
        "seq_write_1GiB",
        "1G",
        &format!(
            r#"{{ op = "touch", region = "heap", order = "seq", write = 1.0, passes = {passes} }},"#
        ),
        touches,
        8,
    );
}

fn resident_uniform(c: &mut Criterion) {
    // 4 GiB = 1048576 pages, written once (1M faults, in base and full
    // alike), then 16M uniform draws over the whole region.
    let count = 16_000_000u64;
    marginal(
        c,
        "uniform_read_4GiB",
        "4G",
        &format!(
            r#"{{ op = "touch", region = "heap", order = "uniform", write = 0.0, count = {count}, seed = 1 }},"#
        ),
        count,
        20,
    );
    marginal(
        c,
        "uniform_write_4GiB",
        "4G",
        &format!(
            r#"{{ op = "touch", region = "heap", order = "uniform", write = 1.0, count = {count}, seed = 1 }},"#
        ),
        count,
        20,
    );
}

/// A whole-run fault case: throughput in pgfault per second.
fn whole_run(c: &mut Criterion, case: &'static str, text: &str, base_text: &str, seconds: u64) {
    let s = spec(text);
    let base = spec(base_text);
    let (_, faults, majfaults) = run_timed(&s);
    let mut g = c.benchmark_group("faults");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(seconds))
        .throughput(Throughput::Elements(faults));
    let mut fulls = Vec::new();
    g.bench_function(case, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (t, f, _) = run_timed(&s);
                assert_eq!(f, faults, "{case}: runs must be deterministic");
                fulls.push(t);
                total += t;
            }
            total
        })
    });
    g.finish();
    let bases: Vec<Duration> = (0..5).map(|_| run_timed(&base).0).collect();
    NOTES.with(|n| {
        n.borrow_mut().push(Note {
            case,
            unit: "faults",
            elements: faults,
            full: fulls,
            base: bases,
            extra: format!(
                "pgfault {faults}, pgmajfault {majfaults}; base = boot + mmap, no touches"
            ),
        })
    });
}

/// anon_seq (examples/anon_seq.toml) made longer: 200 MiB under a 100 MiB
/// memory.max with zram, five rounds of a write pass and a read pass. Every
/// access faults: zram swap-ins (major), write-protect reuse after a read
/// swap-in (minor), and memcg-limit reclaim to make room for each.
fn fault_zram_memcg(c: &mut Criterion) {
    let head = |steps: &str| {
        format!(
            r#"
[machine]
memory = "512M"
cpus = 1
kernel = "6.1"
{MACHINE_NO_THP}
[[swap]]
device = "zram"
size = "512M"

[cgroup.w]
memory_max = "100M"

[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "200M" }},
  {steps}
]
"#
        )
    };
    let steps = r#"{ op = "repeat", times = 5, steps = [
    { op = "touch", region = "heap", order = "seq", write = 1.0 },
    { op = "touch", region = "heap", order = "seq", write = 0.0 },
  ] },"#;
    whole_run(c, "zram_memcg_200M_in_100M", &head(steps), &head(""), 6);
}

/// Global reclaim: no cgroup, a 1 GiB machine and a 1.5 GiB working set on
/// 2 GiB of zram; kswapd does most of the reclaim, direct reclaim the rest.
fn fault_global(c: &mut Criterion) {
    let head = |steps: &str| {
        format!(
            r#"
[machine]
memory = "1G"
cpus = 1
kernel = "6.1"
{MACHINE_NO_THP}
[[swap]]
device = "zram"
size = "2G"

[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "1536M" }},
  {steps}
]
"#
        )
    };
    let steps = r#"{ op = "repeat", times = 2, steps = [
    { op = "touch", region = "heap", order = "seq", write = 1.0 },
    { op = "touch", region = "heap", order = "seq", write = 0.0 },
  ] },"#;
    whole_run(c, "global_1536M_in_1G", &head(steps), &head(""), 10);
}

fn summary() {
    let clock = if std::env::var_os("MMSIM_BENCH_WALL").is_some() {
        "wall time"
    } else {
        "thread CPU time"
    };
    println!("\n== mmsim throughput summary ({clock}; medians over the measured runs) ==");
    NOTES.with(|n| {
        for note in n.borrow().iter().filter(|n| !n.full.is_empty()) {
            let full = median(&note.full);
            let base = median(&note.base);
            let secs = |d: Duration| d.as_secs_f64();
            if note.unit == "touches" {
                let marg = secs(full.saturating_sub(base));
                println!(
                    "{:<26} full {:>8.3} s  base {:>7.3} s  marginal {:>7.3} s  {:>7.2} M {}/s marginal; {}",
                    note.case,
                    secs(full),
                    secs(base),
                    marg,
                    note.elements as f64 / marg / 1e6,
                    note.unit,
                    note.extra
                );
            } else {
                println!(
                    "{:<26} run {:>8.3} s  base {:>7.3} s  {:>7.2} M {}/s whole run, {:>7.2} M/s without base; {}",
                    note.case,
                    secs(full),
                    secs(base),
                    note.elements as f64 / secs(full) / 1e6,
                    note.unit,
                    note.elements as f64 / secs(full.saturating_sub(base)) / 1e6,
                    note.extra
                );
            }
        }
    });
}

criterion_group!(
    benches,
    resident_seq,
    resident_uniform,
    fault_zram_memcg,
    fault_global
);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}

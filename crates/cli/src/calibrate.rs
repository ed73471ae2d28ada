//! `mmsim calibrate`: measures the cost model's constants on the running
//! machine and writes a machine profile (docs/calibrate.md).
//!
//! Each unknown has one *home*: a difference of phase times of one
//! calibration spec (calibrate/*.toml) on the real kernel, two sizes of
//! the same operation so that fixed costs cancel. Which constants a phase
//! charges, and how often, is not worked out by hand: the simulator runs
//! the spec once per constant with that constant raised by `DELTA`, and
//! the phase's time grows by count × DELTA (one running task, synchronous
//! zram: time is linear in the costs). With as many homes as unknowns the
//! system A·x = b is square and solved exactly, per run: nothing is fitted.
//! Constants no stock-kernel path separates are solved as their sum (a
//! bundle) and split in cost.rs's ratio. The user-space primitives and the
//! zram device are measured directly (ubench.rs, the runner's zram bench)
//! and enter the system as known values.

pub mod ubench;

use mmsim_sim::costs::{Basis, CostEntry, Costs, MachineInfo, MachineProfile, Provenance};
use mmsim_sim::output::{RunResult, ZramBench};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How much one perturbation raises a constant, ns.
const DELTA: u64 = 1 << 10;

/// Pages per size of the zram bench.
const ZRAM_BENCH_PAGES: u64 = 16384;

/// A calibrated unknown: one constant, or a bundle of constants in fixed
/// ratio, and the phase-time combination that is its home.
pub struct Unknown {
    pub name: &'static str,
    /// Its constants and their shares of it (cost.rs's ratio).
    pub fields: &'static [(&'static str, u64)],
    pub spec: &'static str,
    /// (phase, weight): the home is Σ weight · phase time.
    pub home: &'static [(&'static str, f64)],
    pub method: &'static str,
}

/// The kernel-path unknowns, each with its home.
pub const UNKNOWNS: &[Unknown] = &[
    Unknown {
        name: "touch",
        fields: &[("touch", 1)],
        spec: "touch",
        home: &[("b", 1.0), ("a", -1.0)],
        method: "calibrate/touch.toml: 2M minus 1M uniform touches of a resident 256 MiB anon region",
    },
    Unknown {
        name: "fault_entry",
        fields: &[("fault_entry", 1)],
        spec: "zero_read",
        home: &[("read_b", 1.0), ("read_a", -1.0)],
        method: "calibrate/zero_read.toml: zero-page read faults, 256 minus 128 MiB",
    },
    Unknown {
        name: "tlb_flush",
        fields: &[("tlb_flush", 1)],
        spec: "zero_read",
        home: &[("write_b", 1.0), ("write_a", -1.0)],
        method: "calibrate/zero_read.toml: write faults over zero-page PTEs (COW from the zero page), 256 minus 128 MiB",
    },
    Unknown {
        name: "new_anon_page",
        fields: &[("alloc_page", 100), ("memcg_charge", 40), ("lru_add", 60)],
        spec: "first_touch",
        home: &[("b", 1.0), ("a", -1.0)],
        method: "calibrate/first_touch.toml: first-touch write faults in a memory cgroup, 256 minus 128 MiB; a bundle (every new anon page pays all three) split 100:40:60",
    },
    Unknown {
        name: "free_page",
        fields: &[("free_page", 1)],
        spec: "first_touch",
        home: &[("munmap_b", 1.0), ("munmap_a", -1.0)],
        method: "calibrate/first_touch.toml: munmap of resident private anon, 256 minus 128 MiB",
    },
    Unknown {
        name: "rmap",
        fields: &[("mapcount", 1), ("rmap_stat", 3)],
        spec: "munmap_shmem",
        home: &[("b", 1.0), ("a", -1.0)],
        method: "calibrate/munmap_shmem.toml: munmap of resident tmpfs mappings, 256 minus 128 MiB; a bundle (order-0 rmap removal pays both) split 1:3",
    },
    Unknown {
        name: "pte",
        fields: &[("pte", 1)],
        spec: "cold_zero",
        home: &[("b", 1.0), ("a", -1.0)],
        method: "calibrate/cold_zero.toml: MADV_COLD over zero-page PTEs, 512 minus 256 MiB",
    },
    Unknown {
        name: "copy_pte",
        fields: &[("copy_pte", 1)],
        spec: "fork",
        home: &[("b", 1.0), ("a", -1.0)],
        method: "calibrate/fork.toml: fork with 256 minus with 128 MiB of resident anon",
    },
    Unknown {
        name: "fork",
        fields: &[("fork", 1)],
        spec: "fork",
        home: &[("a", 2.0), ("b", -1.0)],
        method: "calibrate/fork.toml: the intercept of fork's time over its resident size (2·t128M − t256M), including the runner's per-fork pipe and reader thread",
    },
    Unknown {
        name: "pagecache_lookup",
        fields: &[("pagecache_lookup", 1)],
        spec: "read",
        home: &[("read_128k_b", 1.0), ("read_128k_a", -1.0)],
        method: "calibrate/read.toml: read(2) in 128 KiB calls of resident tmpfs, 256 minus 128 MiB",
    },
    Unknown {
        name: "map_pages",
        fields: &[("map_pages", 1)],
        spec: "read",
        home: &[("mmap_b", 1.0), ("mmap_a", -1.0)],
        method: "calibrate/read.toml: read touches of resident tmpfs through a shared mapping (fault-around), 256 minus 128 MiB",
    },
    Unknown {
        name: "swap_out",
        fields: &[("unmap_one", 250), ("shrink_folio", 50)],
        spec: "pageout",
        home: &[("out_b", 1.0), ("out_a", -1.0)],
        method: "calibrate/pageout.toml: MADV_PAGEOUT of private anon to zram, 128 minus 64 MiB; a bundle (every page reclaimed pays both) split 250:50, which also carries the swap-out's work beyond the reference swap_slot",
    },
    Unknown {
        name: "swap_read",
        fields: &[("swap_read", 1)],
        spec: "pageout",
        home: &[("in_b", 1.0), ("in_a", -1.0)],
        method: "calibrate/pageout.toml: read faults swapping private anon in from zram, 128 minus 64 MiB",
    },
    Unknown {
        name: "shmem_swapin",
        fields: &[("shmem_swapin", 1)],
        spec: "shmem_swapin",
        home: &[("b", 1.0), ("a", -1.0)],
        method: "calibrate/shmem_swapin.toml: read faults swapping tmpfs pages in through the swap cache, 128 minus 64 MiB",
    },
    Unknown {
        name: "memcg_reclaim",
        fields: &[("memcg_reclaim", 1)],
        spec: "memcg_reclaim",
        home: &[("b", 1.0)],
        method: "calibrate/memcg_reclaim.toml: 256 MiB written under a 32 MiB memory.max swapping to zram, phase b alone (its fixed costs are microseconds against ~400 ms, while a difference with phase a would add a's own run-to-run swings, up to 2× on this path; the timing suite's zram_memcg swapout_write is the same path, so it is no independent check of this constant)",
    },
];

/// Constants measured directly (not through the system), with methods.
pub const DIRECT: &[(&str, &str)] = &[
    ("clear_page", "user space: 4 KiB memset of cold pages (a pool ≥ 4× the LLC), 2n minus n pages"),
    ("copy_page", "user space: 4 KiB memcpy between cold pools, 2n minus n pages"),
    ("syscall", "user space: getppid(2) calls, 2n minus n: entry and exit alone (a read(2) or write(2) call's VFS work is not priced apart: calibrate/read.toml's 4 KiB minus 128 KiB calls differ by a few ns a call here)"),
    ("zram_compress", "the kernel's zram: O_DIRECT 4 KiB writes of runner-content pages minus of zero pages to raw zram0, 2n minus n slots, plus user space's same-filled scan of a hot page"),
    ("zram_decompress", "the kernel's zram: O_DIRECT 4 KiB reads of runner-content slots minus of same-filled slots, 2n minus n, plus user space's 4 KiB memset of a hot page"),
    ("zram_stored_bytes", "the kernel's zram: mm_stat mem_used_total over pages stored after the zram bench's writes"),
];

/// Not measured, and why.
pub const REFERENCE_ONLY: &[(&str, &str)] = &[
    ("split_tail", "not measured: ~10 µs per 512-page split against ~1 ms of its swap-out, below the noise; the runner forces THP off"),
    ("folio_tail", "not measured: 511 × 5 ns per THP against 512 clear_pages, below the noise; the runner forces THP off"),
    ("page_counter", "not measured: once per 64 charged pages, under 1 ns a page"),
    ("page_cache_add", "not measured: native runs have no disk for a page-cache file that is not shmem"),
    ("unuse_scan", "not measured: ~2 ns per PTE, below the noise of any swapoff phase"),
    ("kv_request", "not measured: redis-server's own work; the runner has none"),
    ("exec", "not measured: no runner step execs (spawn forks only)"),
    ("folio_referenced", "not measured: every stock path that scans the LRU also pays the reclaim's own per-page work (memcg_reclaim), which no path separates from it"),
    ("lru_move", "not measured: as folio_referenced, with which it is always charged"),
    ("swap_slot", "not measured: swap-out and swap-in pay it in different shares, and each path's own work beyond it goes to that path's residual (the swap-out bundle, swap_read, shmem_swapin)"),
];

/// The calibration specs.
pub fn spec_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = UNKNOWNS.iter().map(|u| u.spec).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn spec_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.toml"))
}

/// Each timed phase's time in the simulator with `costs`.
fn sim_run(spec: &mmsim_spec::Spec, costs: Costs) -> Result<RunResult, String> {
    let opts = mmsim_sim::RunOptions {
        costs: mmsim_sim::costs::CostProfile {
            costs,
            label: "calibrate".into(),
            cpu: None,
        },
        ..Default::default()
    };
    mmsim_sim::run(spec, opts).map_err(|e| format!("{}: {e}", spec.file))
}

fn sim_times(spec: &mmsim_spec::Spec, costs: Costs) -> Result<BTreeMap<String, u64>, String> {
    Ok(phase_times(&sim_run(spec, costs)?))
}

/// The main task's timed phases: name → ns (`wait*` phases wait for
/// other tasks and are not kernel paths).
pub fn phase_times(r: &RunResult) -> BTreeMap<String, u64> {
    r.tasks
        .iter()
        .filter(|t| t.name == "main")
        .flat_map(|t| t.phases.iter())
        .filter(|p| !p.name.starts_with("wait"))
        .map(|p| (p.name.clone(), p.end_ns - p.start_ns))
        .collect()
}

/// How often each constant is charged in each phase of one spec:
/// phase → field → count.
pub type Counts = BTreeMap<String, BTreeMap<&'static str, f64>>;

/// The count matrix of one spec, by perturbation, and its run with the
/// `base` costs (counts do not depend on them where time is linear; the
/// check below proves it for these specs). Err if a phase's time is not
/// linear in the costs.
pub fn counts(spec: &mmsim_spec::Spec, base: Costs) -> Result<(Counts, RunResult), String> {
    let run = sim_run(spec, base)?;
    let t0 = phase_times(&run);
    let mut out: Counts = t0.keys().map(|p| (p.clone(), BTreeMap::new())).collect();
    for &(field, unit) in Costs::FIELDS {
        if unit != "ns" {
            continue;
        }
        let mut c = base;
        *c.get_mut(field).expect("a field") += DELTA;
        let t1 = sim_times(spec, c)?;
        for (phase, &t) in &t0 {
            // A count may be fractional (swap_slot's half at a swap
            // cache deletion); the sum below checks it is exact.
            let d = t1[phase] as i128 - t as i128;
            if d < 0 {
                return Err(format!(
                    "{}: phase {phase}: raising {field} by {DELTA} ns shortened it by {} ns",
                    spec.file, -d
                ));
            }
            if d != 0 {
                out.get_mut(phase)
                    .expect("phase")
                    .insert(field, d as f64 / DELTA as f64);
            }
        }
    }
    // Σ count · cost reproduces each phase's time exactly.
    for (phase, &t) in &t0 {
        let sum: f64 = out[phase]
            .iter()
            .map(|(f, n)| n * base.get(f).expect("a field") as f64)
            .sum();
        if sum != t as f64 {
            return Err(format!(
                "{}: phase {phase}: time is not linear in the costs: the counts give {sum} ns, the run {t} ns",
                spec.file
            ));
        }
    }
    Ok((out, run))
}

/// Σ weight · count over the home's phases, per field.
fn home_counts(u: &Unknown, counts: &Counts) -> Result<BTreeMap<&'static str, f64>, String> {
    let mut m = BTreeMap::new();
    for &(phase, w) in u.home {
        let c = counts
            .get(phase)
            .ok_or_else(|| format!("calibrate/{}.toml has no phase {phase}", u.spec))?;
        for (&f, &n) in c {
            *m.entry(f).or_insert(0.0) += w * n;
        }
    }
    Ok(m)
}

/// The linear system: row i is unknown i's home. `a[i][j]` is how much of
/// unknown j (one ns of the bundle, split in its ratio) the home charges;
/// `known[i]` is what its other, fixed constants charge, per ns of
/// their values: `known[i][field]`.
pub struct System {
    pub a: Vec<Vec<f64>>,
    pub fixed: Vec<BTreeMap<&'static str, f64>>,
}

fn share(u: &Unknown, field: &str) -> Option<f64> {
    let total: u64 = u.fields.iter().map(|f| f.1).sum();
    u.fields
        .iter()
        .find(|f| f.0 == field)
        .map(|f| f.1 as f64 / total as f64)
}

pub fn system(all: &BTreeMap<&str, Counts>) -> Result<System, String> {
    let mut a = Vec::new();
    let mut fixed = Vec::new();
    for u in UNKNOWNS {
        let hc = home_counts(u, &all[u.spec])?;
        let mut row = vec![0.0; UNKNOWNS.len()];
        let mut rest = BTreeMap::new();
        for (f, n) in hc {
            match UNKNOWNS.iter().position(|v| share(v, f).is_some()) {
                Some(j) => row[j] += n * share(&UNKNOWNS[j], f).expect("share"),
                None => {
                    rest.insert(f, n);
                }
            }
        }
        a.push(row);
        fixed.push(rest);
    }
    Ok(System { a, fixed })
}

/// Solves a·x = b by Gaussian elimination with partial pivoting; None if
/// singular.
pub fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let p = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[p][col].abs() < 1e-9 {
            return None;
        }
        a.swap(col, p);
        b.swap(col, p);
        for r in col + 1..n {
            let f = a[r][col] / a[col][col];
            if f != 0.0 {
                let (top, rest) = a.split_at_mut(r);
                for (x, y) in rest[0][col..].iter_mut().zip(&top[col][col..]) {
                    *x -= f * y;
                }
                b[r] -= f * b[col];
            }
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|c| a[r][c] * x[c]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    Some(x)
}

/// One run's measurements.
pub struct RunData {
    pub user: ubench::UserBench,
    pub zram: ZramBench,
    /// Calibration spec name → the native runner's document.
    pub specs: BTreeMap<String, RunResult>,
}

/// The timed quantities of one run, or the minimum of each over runs:
/// interference on a shared machine only ever adds time, so the fastest
/// of several runs is the least disturbed (as the timing suite reports).
#[derive(Clone, Debug)]
pub struct Measured {
    pub user: ubench::UserBench,
    pub zram: ZramBench,
    /// Calibration spec → phase → ns.
    pub phases: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Measured {
    pub fn of(r: &RunData) -> Measured {
        Measured {
            user: r.user.clone(),
            zram: r.zram.clone(),
            phases: r
                .specs
                .iter()
                .map(|(n, d)| (n.clone(), phase_times(d)))
                .collect(),
        }
    }

    /// Each timed quantity's minimum over `runs` (at least one).
    pub fn min_of(runs: &[Measured]) -> Measured {
        let mut m = runs[0].clone();
        let min2 = |a: &mut [u64; 2], b: [u64; 2]| {
            a[0] = a[0].min(b[0]);
            a[1] = a[1].min(b[1]);
        };
        for r in &runs[1..] {
            min2(&mut m.user.clear_page_ns, r.user.clear_page_ns);
            min2(&mut m.user.copy_page_ns, r.user.copy_page_ns);
            min2(&mut m.user.zero_scan_ns, r.user.zero_scan_ns);
            min2(&mut m.user.fill_ns, r.user.fill_ns);
            min2(&mut m.zram.write_token_ns, r.zram.write_token_ns);
            min2(&mut m.zram.write_zero_ns, r.zram.write_zero_ns);
            min2(&mut m.zram.read_token_ns, r.zram.read_token_ns);
            min2(&mut m.zram.read_zero_ns, r.zram.read_zero_ns);
            for (spec, phases) in &mut m.phases {
                for (phase, t) in phases.iter_mut() {
                    if let Some(&u) = r.phases.get(spec).and_then(|p| p.get(phase)) {
                        *t = (*t).min(u);
                    }
                }
            }
        }
        m
    }
}

/// The directly measured constants.
fn direct_values(m: &Measured) -> BTreeMap<&'static str, f64> {
    let u: BTreeMap<&str, f64> = m.user.per_op().into_iter().collect();
    let z = &m.zram;
    let slope = |t: [u64; 2]| (t[1] as f64 - t[0] as f64) / z.pages as f64;
    BTreeMap::from([
        ("clear_page", u["clear_page"]),
        ("copy_page", u["copy_page"]),
        ("syscall", u["syscall"]),
        (
            "zram_compress",
            slope(z.write_token_ns) - slope(z.write_zero_ns) + u["zero_scan"],
        ),
        (
            "zram_decompress",
            slope(z.read_token_ns) - slope(z.read_zero_ns) + u["fill"],
        ),
        (
            "zram_stored_bytes",
            z.pool_bytes as f64 / z.token_pages as f64,
        ),
    ])
}

/// Every constant's value from `m`: the direct ones, then the system
/// solved with them and the reference-only constants fixed.
pub fn solve_measured(m: &Measured, sys: &System) -> Result<BTreeMap<&'static str, f64>, String> {
    let mut values = direct_values(m);
    for (f, _) in REFERENCE_ONLY {
        values.insert(f, Costs::REFERENCE.get(f).expect("a field") as f64);
    }
    let mut b = Vec::new();
    for (i, u) in UNKNOWNS.iter().enumerate() {
        let t = m
            .phases
            .get(u.spec)
            .ok_or_else(|| format!("no native run of calibrate/{}.toml", u.spec))?;
        let mut real = 0.0;
        for &(phase, w) in u.home {
            let ns = t.get(phase).ok_or_else(|| {
                format!(
                    "calibrate/{}.toml: the native run has no phase {phase}",
                    u.spec
                )
            })?;
            real += w * *ns as f64;
        }
        let known: f64 = sys.fixed[i].iter().map(|(f, n)| n * values[f]).sum();
        b.push(real - known);
    }
    let x = solve(sys.a.clone(), b).ok_or("the calibration system is singular")?;
    for (u, xj) in UNKNOWNS.iter().zip(x) {
        for &(f, _) in u.fields {
            values.insert(f, xj * share(u, f).expect("share"));
        }
    }
    Ok(values)
}

/// Every constant's values, one line each: the value, then the values
/// leaving out each run, then each session's.
pub fn value_table(
    value: &BTreeMap<&'static str, f64>,
    jack: &[BTreeMap<&'static str, f64>],
) -> String {
    Costs::FIELDS
        .iter()
        .map(|(f, unit)| {
            let v: Vec<String> = jack.iter().map(|r| format!("{:.1}", r[f])).collect();
            format!("  {f:<18} {:>10.1} {unit}  [{}]", value[f], v.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The smallest per-unit value a home resolves: 1% of its phase-time
/// difference, per unit of its unknown. Machine noise is about that size.
fn resolution(m: &Measured, sys: &System, i: usize) -> f64 {
    let u = &UNKNOWNS[i];
    let t = &m.phases[u.spec];
    let span: f64 = u.home.iter().map(|&(p, w)| (w * t[p] as f64).abs()).sum();
    0.01 * span / sys.a[i][i].abs()
}

/// The profile from the runs: each value solved from every quantity's
/// minimum over the runs. Its spread is the range of the values solved
/// leaving one run out at a time (a jackknife: how far one run moves it)
/// and, when the runs come from several calibration sessions, from each
/// session alone (how far the machine drifts between calibrations). A
/// single run's own solve is far noisier than a minimum over several,
/// which is what a calibration reports. It counts `provenance.sessions`.
pub fn profile(
    runs: &[Measured],
    sessions: &[String],
    sys: &System,
    machine: MachineInfo,
    mut provenance: Provenance,
) -> Result<MachineProfile, String> {
    let best = Measured::min_of(runs);
    let mut value = solve_measured(&best, sys)?;
    let mut others = Vec::new();
    if runs.len() > 1 {
        for k in 0..runs.len() {
            let rest: Vec<Measured> = runs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != k)
                .map(|(_, r)| r.clone())
                .collect();
            others.push(solve_measured(&Measured::min_of(&rest), sys)?);
        }
    }
    // Each session solved alone: how far the machine drifts between
    // calibrations, which runs of one session (moving together) hide.
    let mut ids: Vec<&String> = sessions.iter().collect();
    ids.sort();
    ids.dedup();
    provenance.sessions = ids.len() as u32;
    if ids.len() > 1 {
        for id in ids {
            let own: Vec<Measured> = runs
                .iter()
                .zip(sessions)
                .filter(|(_, s)| *s == id)
                .map(|(r, _)| r.clone())
                .collect();
            others.push(solve_measured(&Measured::min_of(&own), sys)?);
        }
    }
    // A solved value below zero is a path cheaper than the constants it
    // is known to pay: a model-structure question, never clamped away,
    // unless it is within the home's resolution of zero.
    let mut notes: BTreeMap<&str, String> = BTreeMap::new();
    for (i, u) in UNKNOWNS.iter().enumerate() {
        let x: f64 = u.fields.iter().map(|f| value[f.0]).sum();
        if x >= 0.0 {
            continue;
        }
        let res = resolution(&best, sys, i);
        if -x > res {
            return Err(format!(
                "{} solved to {x:.1} ns, below zero by more than its home resolves ({res:.1} ns): the path is cheaper than the constants it is known to pay, a model-structure question to answer, not to clamp; no profile written. Every value (all runs, then leaving out each run, then each session):\n{}",
                u.name,
                value_table(&value, &others)
            ));
        }
        for &(f, _) in u.fields {
            value.insert(f, 0.0);
            notes.insert(
                f,
                format!(" (solved to {x:.1} ns, within the {res:.1} ns its home resolves: 0)"),
            );
        }
    }
    let mut cost = BTreeMap::new();
    for &(field, unit) in Costs::FIELDS {
        let all: Vec<f64> = std::iter::once(value[field])
            .chain(others.iter().map(|j| j[field]))
            .collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(0.0);
        let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (basis, method) = if let Some((_, m)) = REFERENCE_ONLY.iter().find(|r| r.0 == field) {
            (Basis::Reference, m.to_string())
        } else if let Some((_, m)) = DIRECT.iter().find(|r| r.0 == field) {
            (Basis::Measured, m.to_string())
        } else {
            let u = UNKNOWNS
                .iter()
                .find(|u| share(u, field).is_some())
                .expect("every field has a basis");
            let basis = if u.fields.len() > 1 {
                Basis::Bundle
            } else {
                Basis::Measured
            };
            (basis, u.method.to_string())
        };
        let round = |x: f64| x.round() as u64;
        cost.insert(
            field.to_string(),
            CostEntry {
                value: round(value[field]),
                unit: unit.to_string(),
                spread: [round(lo), round(hi)],
                basis,
                method: method + notes.get(field).map_or("", |n| n.as_str()),
            },
        );
    }
    let p = MachineProfile {
        format: 1,
        machine,
        provenance,
        cost,
        checks: BTreeMap::new(),
    };
    // What calibrate writes, a run can load.
    MachineProfile::parse(&p.to_toml())?;
    Ok(p)
}

#[derive(clap::Args, Clone, Debug)]
pub struct CalibrateArgs {
    /// The folder of calibration specs.
    #[arg(long, default_value = "calibrate")]
    pub dir: PathBuf,
    /// Native runs; each value is solved from every timed quantity's
    /// minimum over them (docs/calibrate.md).
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Write the profile here (atomically; `-`: standard output).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also keep every run's measurements under DIR/run-N/ (a session
    /// added to those DIR holds; the profile is solved from them all).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Solve from measurements recorded with --record instead of running
    /// anything natively.
    #[arg(long, value_name = "DIR", conflicts_with = "record")]
    pub from: Option<PathBuf>,
    /// Print the count matrix (which constants each calibration phase
    /// charges, from the simulator) and stop; needs no root.
    #[arg(long)]
    pub dry_run: bool,
    /// A static mmsim-runner (default: $MMSIM_RUNNER, else built).
    #[arg(long)]
    pub runner: Option<PathBuf>,
    /// Compare the values with this profile's spreads instead of writing
    /// a profile (exit 1 if any lies outside).
    #[arg(long, value_name = "PROFILE", conflicts_with = "output")]
    pub check: Option<PathBuf>,
}

/// The simulator's side of every calibration spec: count matrices, and
/// the runs with the reference costs (for the counter guard).
pub type SimSide = (
    BTreeMap<&'static str, Counts>,
    BTreeMap<&'static str, RunResult>,
);

/// Every calibration spec's count matrix and reference run.
pub fn all_counts(dir: &Path) -> Result<SimSide, String> {
    let (mut all, mut runs) = (BTreeMap::new(), BTreeMap::new());
    for name in spec_names() {
        let path = spec_path(dir, name);
        let spec = mmsim_spec::load(&path, &[]).map_err(|e| e.to_string())?;
        let (c, run) = counts(&spec, Costs::REFERENCE)?;
        all.insert(name, c);
        runs.insert(name, run);
    }
    Ok((all, runs))
}

fn print_dry_run(all: &BTreeMap<&str, Counts>, sys: &System) {
    println!("count matrix: how often each home charges each constant (Σ weight · count)");
    for (i, u) in UNKNOWNS.iter().enumerate() {
        let hc = home_counts(u, &all[u.spec]).unwrap_or_default();
        let parts: Vec<String> = hc
            .iter()
            .filter(|(_, n)| **n != 0.0)
            .map(|(f, n)| format!("{f} {n}"))
            .collect();
        println!("  {:<17} {:<13} {}", u.name, u.spec, parts.join(", "));
        let own = sys.a[i][i];
        println!("  {:<17} own count {own}", "");
    }
}

pub fn calibrate_cmd(a: &CalibrateArgs) -> ExitCode {
    if a.runs == 0 {
        eprintln!("mmsim calibrate: --runs: found 0, expected at least 1");
        return ExitCode::from(2);
    }
    match calibrate(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, e)) => {
            eprintln!("mmsim calibrate: {e}");
            ExitCode::from(code)
        }
    }
}

fn calibrate(a: &CalibrateArgs) -> Result<(), (u8, String)> {
    let (all, sim_runs) = all_counts(&a.dir).map_err(|e| (2, e))?;
    let sys = system(&all).map_err(|e| (2, e))?;
    if a.dry_run {
        print_dry_run(&all, &sys);
        return Ok(());
    }
    let (runs, machine) = match (&a.from, &a.record) {
        (Some(d), _) => load_recorded(d).map_err(|e| (2, e))?,
        // Recorded: solve from every session the folder holds.
        (None, Some(d)) => {
            measure(a)?;
            load_recorded(d).map_err(|e| (1, e))?
        }
        (None, None) => measure(a)?,
    };
    for w in guard(&sim_runs, &runs) {
        eprintln!("mmsim calibrate: counters differ: {w}");
    }
    let measured: Vec<Measured> = runs.iter().map(Measured::of).collect();
    let sessions: Vec<String> = runs.iter().map(session_of).collect();
    let provenance = Provenance {
        // The command that made the profile, as it was typed.
        command: std::iter::once("mmsim".to_string())
            .chain(std::env::args().skip(1))
            .collect::<Vec<_>>()
            .join(" "),
        mmsim: env!("CARGO_PKG_VERSION").into(),
        date: recorded_date(&runs),
        runs: runs.len() as u32,
        sessions: 0, // counted by profile()
    };
    let p = profile(&measured, &sessions, &sys, machine, provenance).map_err(|e| (1, e))?;
    if let Some(old) = &a.check {
        return check_against(&p, old);
    }
    let text = p.to_toml();
    match &a.output {
        Some(o) if o != Path::new("-") => crate::write_atomically(o, text.trim_end().as_bytes())
            .map_err(|e| (1, format!("cannot write {}: {e}", o.display())))?,
        _ => print!("{text}"),
    }
    Ok(())
}

/// `--check OLD`: each measured or bundle value of `new` beside OLD's
/// value and spread; Err (exit 1) if any lies outside OLD's spread.
fn check_against(new: &MachineProfile, old: &Path) -> Result<(), (u8, String)> {
    let text = std::fs::read_to_string(old).map_err(|e| (2, format!("{}: {e}", old.display())))?;
    let old_p = MachineProfile::parse(&text).map_err(|e| (2, format!("{}: {e}", old.display())))?;
    let mut out = Vec::new();
    println!(
        "constant           {:>10} {:>10}  its spread",
        "profile", "now"
    );
    for (name, e) in &new.cost {
        let Some(o) = old_p.cost.get(name).filter(|_| e.basis != Basis::Reference) else {
            continue;
        };
        let inside = (o.spread[0]..=o.spread[1]).contains(&e.value);
        println!(
            "{name:<18} {:>10} {:>10}  [{}, {}]{}",
            o.value,
            e.value,
            o.spread[0],
            o.spread[1],
            if inside { "" } else { "  outside" }
        );
        if !inside {
            out.push(name.clone());
        }
    }
    if out.is_empty() {
        return Ok(());
    }
    Err((
        1,
        format!("outside {}'s spread: {}", old.display(), out.join(", ")),
    ))
}

/// The date of the last recording (calibrate adds it to the runner's
/// documents as `native:date`).
fn recorded_date(runs: &[RunData]) -> String {
    runs.last()
        .and_then(|r| r.specs.values().next())
        .and_then(|d| d.knobs.get("native:date").cloned())
        .unwrap_or_default()
}

/// The calibration session a run belongs to: its start, UTC, which
/// calibrate adds to the runner's documents as `native:session`.
fn session_of(r: &RunData) -> String {
    r.specs
        .values()
        .next()
        .and_then(|d| d.knobs.get("native:session").cloned())
        .unwrap_or_default()
}

/// Counters a calibration phase's native run and the simulator must
/// agree on: if they do not, the kernel took another path than the model
/// and the phase's time prices that path.
const GUARDED: &[&str] = &[
    "pgfault",
    "pgmajfault",
    "pswpin",
    "pswpout",
    "pgscan_anon",
    "pgsteal_anon",
];

/// Where the first run's counters differ from the simulator's (`sim`,
/// the count matrices' reference runs: these single-task specs count the
/// same with any costs) by more than 1% (and 64 events): one line each.
pub fn guard(sim: &BTreeMap<&str, RunResult>, runs: &[RunData]) -> Vec<String> {
    let mut out = Vec::new();
    let Some(first) = runs.first() else {
        return out;
    };
    for (&name, sim) in sim {
        let Some(real) = first.specs.get(name) else {
            continue;
        };
        let main = |r: &RunResult| r.tasks.iter().find(|t| t.name == "main").cloned();
        let (Some(st), Some(rt)) = (main(sim), main(real)) else {
            continue;
        };
        for (sp, rp) in st.phases.iter().zip(&rt.phases) {
            for &k in GUARDED {
                let (a, b) = (
                    rp.vmstat.get(k).copied().unwrap_or(0),
                    sp.vmstat.get(k).copied().unwrap_or(0),
                );
                if a.abs_diff(b) as f64 > (0.01 * a.max(b) as f64).max(64.0) {
                    out.push(format!(
                        "calibrate/{name}.toml phase {}: {k} real {a}, simulated {b}",
                        rp.name
                    ));
                }
            }
        }
    }
    out
}

/// Runs everything natively, `a.runs` times, recording if asked. Err
/// carries the exit status: 2 when the runner refused (not root, swap on).
fn measure(a: &CalibrateArgs) -> Result<(Vec<RunData>, MachineInfo), (u8, String)> {
    let runner = mmsim_oracle::runner_path(a.runner.clone()).map_err(|e| (2, e.to_string()))?;
    let mut out = Vec::new();
    let date = date_now("+%Y-%m-%d");
    let session = date_now("+%Y-%m-%dT%H:%M:%SZ");
    // A session adds to runs recorded before (run-N numbering goes on).
    let first = a.record.as_deref().map_or(0, recorded_runs);
    for run in 0..a.runs {
        eprintln!("mmsim calibrate: run {} of {}", run + 1, a.runs);
        let user = ubench::run().map_err(|e| (1, e))?;
        let zram_text =
            mmsim_oracle::native::zram_bench(&runner, &spec_path(&a.dir, "zram"), ZRAM_BENCH_PAGES)
                .map_err(|e| (1, e.to_string()))?
                .map_err(|refusal| (2, refusal))?;
        let zram: ZramBench = serde_json::from_str(&zram_text)
            .map_err(|e| (1, format!("the zram bench's document: {e}")))?;
        let mut specs = BTreeMap::new();
        for name in spec_names() {
            let path = spec_path(&a.dir, name);
            match mmsim_oracle::native::run_once(&runner, &path, &[])
                .map_err(|e| (1, e.to_string()))?
            {
                mmsim_oracle::native::Outcome::Done(mut doc) => {
                    doc.knobs.insert("native:date".into(), date.clone());
                    doc.knobs.insert("native:session".into(), session.clone());
                    specs.insert(name.to_string(), *doc);
                }
                mmsim_oracle::native::Outcome::Refused(e) => return Err((2, e)),
            }
        }
        let r = RunData { user, zram, specs };
        if let Some(dir) = &a.record {
            record(dir, first + run, &r).map_err(|e| (1, e))?;
        }
        out.push(r);
    }
    let machine = machine_of(&out);
    Ok((out, machine))
}

fn machine_of(runs: &[RunData]) -> MachineInfo {
    let doc = runs.first().and_then(|r| r.specs.values().next());
    MachineInfo {
        cpu: doc
            .and_then(|d| d.knobs.get("native:cpu").cloned())
            .unwrap_or_default(),
        cpus: doc.map_or(0, |d| d.machine.cpus),
        kernel: doc.map(|d| d.engine.version.clone()).unwrap_or_default(),
    }
}

/// How many runs `--record DIR` already holds.
fn recorded_runs(dir: &Path) -> usize {
    (0..)
        .take_while(|n| dir.join(format!("run-{n}")).is_dir())
        .count()
}

/// The time now in date(1)'s `format`, UTC.
fn date_now(format: &str) -> String {
    std::process::Command::new("date")
        .args(["-u", format])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Writes one run's documents under DIR/run-N/.
fn record(dir: &Path, run: usize, r: &RunData) -> Result<(), String> {
    let d = dir.join(format!("run-{run}"));
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    let w = |name: String, text: String| {
        crate::write_atomically(&d.join(&name), text.as_bytes())
            .map_err(|e| format!("{}: {e}", d.join(name).display()))
    };
    w(
        "user.json".into(),
        serde_json::to_string_pretty(&r.user).expect("serialises"),
    )?;
    w(
        "zram.json".into(),
        serde_json::to_string_pretty(&r.zram).expect("serialises"),
    )?;
    for (name, doc) in &r.specs {
        w(
            format!("{name}.json"),
            serde_json::to_string_pretty(doc).expect("serialises"),
        )?;
    }
    Ok(())
}

/// Reads runs recorded by `--record DIR`.
pub fn load_recorded(dir: &Path) -> Result<(Vec<RunData>, MachineInfo), String> {
    let read = |p: PathBuf| -> Result<String, String> {
        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let mut out = Vec::new();
    for run in 0.. {
        let d = dir.join(format!("run-{run}"));
        if !d.is_dir() {
            break;
        }
        let parse_err = |f: &str, e: serde_json::Error| format!("{}/{f}: {e}", d.display());
        let user = serde_json::from_str(&read(d.join("user.json"))?)
            .map_err(|e| parse_err("user.json", e))?;
        let zram = serde_json::from_str(&read(d.join("zram.json"))?)
            .map_err(|e| parse_err("zram.json", e))?;
        let mut specs = BTreeMap::new();
        for name in spec_names() {
            let f = format!("{name}.json");
            let doc: RunResult =
                serde_json::from_str(&read(d.join(&f))?).map_err(|e| parse_err(&f, e))?;
            specs.insert(name.to_string(), doc);
        }
        out.push(RunData { user, zram, specs });
    }
    if out.is_empty() {
        return Err(format!("{}: no recorded runs (run-0/ …)", dir.display()));
    }
    let machine = machine_of(&out);
    Ok((out, machine))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solve_recovers_a_known_solution() {
        let a = vec![
            vec![2.0, 1.0, 0.0],
            vec![1.0, 3.0, 1.0],
            vec![0.0, 1.0, 4.0],
        ];
        let x = [1.0, -2.0, 3.0];
        let b: Vec<f64> = a
            .iter()
            .map(|r| r.iter().zip(x).map(|(p, q)| p * q).sum())
            .collect();
        let s = solve(a, b).unwrap();
        for (p, q) in s.iter().zip(x) {
            assert!((p - q).abs() < 1e-9, "{s:?}");
        }
        assert!(solve(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_none());
    }

    fn calibrate_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../calibrate")
    }

    /// Calibrating against the simulator itself, run with known costs,
    /// recovers those costs: the count matrix, the homes and the solve
    /// are consistent, and the system is not singular.
    #[test]
    fn calibrating_the_simulator_recovers_its_costs() {
        let (all, _) = all_counts(&calibrate_dir()).unwrap();
        let sys = system(&all).unwrap();
        for (i, u) in UNKNOWNS.iter().enumerate() {
            assert!(
                sys.a[i][i] >= 1.0,
                "{}: its home charges it {}",
                u.name,
                sys.a[i][i]
            );
        }
        // The truth: every solved constant doubled (bundles keep their
        // ratio; a zero one set to 100), the direct ones set apart, the
        // rest at reference.
        let mut truth = Costs::REFERENCE;
        for u in UNKNOWNS {
            for &(f, _) in u.fields {
                let v = truth.get_mut(f).unwrap();
                *v = if *v == 0 { 100 } else { *v * 2 };
            }
        }
        truth.clear_page = 300;
        truth.copy_page = 500;
        truth.zram_compress = 900;
        truth.zram_decompress = 400;
        truth.syscall = 400;
        let n = 1000;
        let (bio, scan, fill) = (1500, 250, 70);
        let user = ubench::UserBench {
            llc_bytes: 0,
            pool_pages: n,
            clear_page_ns: [n * 300, 2 * n * 300],
            copy_page_ns: [n * 500, 2 * n * 500],
            hot_reps: n,
            zero_scan_ns: [n * scan, 2 * n * scan],
            fill_ns: [n * fill, 2 * n * fill],
            syscall_ns: [n * 400, 2 * n * 400],
        };
        let zram = ZramBench {
            comp_algorithm: "lzo-rle".into(),
            pages: n,
            write_token_ns: [n * (bio + 900), 2 * n * (bio + 900)],
            write_zero_ns: [n * (bio + scan), 2 * n * (bio + scan)],
            read_token_ns: [n * (bio + 400), 2 * n * (bio + 400)],
            read_zero_ns: [n * (bio + fill), 2 * n * (bio + fill)],
            pool_bytes: 68 * 3 * n,
            token_pages: 3 * n,
        };
        let mut phases = BTreeMap::new();
        for name in spec_names() {
            let spec = mmsim_spec::load(&spec_path(&calibrate_dir(), name), &[]).unwrap();
            phases.insert(name.to_string(), sim_times(&spec, truth).unwrap());
        }
        let m = Measured { user, zram, phases };
        let got = solve_measured(&m, &sys).unwrap();
        for &(f, _) in Costs::FIELDS {
            let want = truth.get(f).unwrap() as f64;
            assert!(
                (got[f] - want).abs() < 1e-6 * want.max(1.0),
                "{f}: {} for {want}",
                got[f]
            );
        }
    }

    #[test]
    fn every_constant_has_exactly_one_basis() {
        for &(f, _) in Costs::FIELDS {
            let n = UNKNOWNS.iter().filter(|u| share(u, f).is_some()).count()
                + DIRECT.iter().filter(|d| d.0 == f).count()
                + REFERENCE_ONLY.iter().filter(|d| d.0 == f).count();
            assert_eq!(n, 1, "{f}");
        }
    }
}

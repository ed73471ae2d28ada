//! Side-by-side comparison of real-kernel runs with a simulated run.

use mmsim_spec::output::{LruGenGen, RunResult};
use serde::Serialize;

/// The counters a fidelity score is computed over: the mm events the
/// simulator models. Others (e.g. pgfree, nr_* gauges) are shown but not
/// scored: the real kernel's own activity moves them.
pub const SCORED: &[&str] = &[
    "pgfault",
    "pgmajfault",
    "pgreuse",
    "pswpin",
    "pswpout",
    "pgscan_anon",
    "pgscan_file",
    "pgsteal_anon",
    "pgsteal_file",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgrefill",
    "pgactivate",
    "pgdeactivate",
    "workingset_refault_anon",
    "workingset_activate_anon",
    "workingset_restore_anon",
    "workingset_refault_file",
    "swap_ra",
    "swap_ra_hit",
    "allocstall_dma32",
    "allocstall_normal",
    "allocstall_movable",
    "pageoutrun",
];

/// Counters whose real and simulated values both stay below this are left
/// out of the score: at that size they are the real system's noise.
pub const NOISE_FLOOR: f64 = 100.0;

#[derive(Serialize, Debug, Clone)]
pub struct CounterRow {
    pub name: String,
    pub real_median: f64,
    pub real_min: i64,
    pub real_max: i64,
    pub sim: i64,
    /// (sim − real median) / real median; None when the real median is 0.
    pub rel_error: Option<f64>,
    pub scored: bool,
}

#[derive(Serialize, Debug, Clone)]
pub struct PhaseRow {
    pub task: String,
    pub phase: String,
    pub real_median_ns: f64,
    /// The fastest real run: on a shared machine, the one least disturbed.
    pub real_min_ns: f64,
    pub real_max_ns: f64,
    pub sim_ns: u64,
}

/// The multi-gen LRU's generations of one memcg at the end of a phase:
/// each real run's (where its debugfs was read) and mmsim's.
#[derive(Serialize, Debug, Clone)]
pub struct LruGenRow {
    pub task: String,
    pub phase: String,
    pub memcg: String,
    pub real: Vec<Vec<LruGenGen>>,
    pub sim: Vec<LruGenGen>,
}

#[derive(Serialize, Debug, Clone)]
pub struct Comparison {
    pub spec: String,
    pub kernel: String,
    pub runs: usize,
    /// The real runs were on the machine's own kernel (wall time at
    /// hardware speed), not under QEMU.
    pub native: bool,
    pub counters: Vec<CounterRow>,
    pub phases: Vec<PhaseRow>,
    /// The multi-gen LRU's generations at each phase end, for the memcgs
    /// that hold pages (empty with the classic LRU).
    pub lru_gen: Vec<LruGenRow>,
    /// Median and worst absolute relative error over the scored counters.
    pub median_error: Option<f64>,
    pub worst_error: Option<f64>,
    pub worst_counter: Option<String>,
}

pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn compare(real: &[RunResult], sim: &RunResult) -> Comparison {
    let mut names: Vec<String> = sim.vmstat.keys().cloned().collect();
    for r in real {
        for k in r.vmstat.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names.sort_by_key(|n| {
        (
            SCORED.iter().position(|s| s == n).unwrap_or(usize::MAX),
            n.clone(),
        )
    });
    let mut counters = Vec::new();
    for name in names {
        let mut vals: Vec<f64> = real
            .iter()
            .map(|r| *r.vmstat.get(&name).unwrap_or(&0) as f64)
            .collect();
        let real_min = vals.iter().cloned().fold(f64::INFINITY, f64::min) as i64;
        let real_max = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max) as i64;
        let m = median(&mut vals);
        let s = *sim.vmstat.get(&name).unwrap_or(&0);
        let rel_error = (m != 0.0).then(|| (s as f64 - m) / m);
        let scored =
            SCORED.contains(&name.as_str()) && (m >= NOISE_FLOOR || s as f64 >= NOISE_FLOOR);
        counters.push(CounterRow {
            name,
            real_median: m,
            real_min: if real.is_empty() { 0 } else { real_min },
            real_max: if real.is_empty() { 0 } else { real_max },
            sim: s,
            rel_error,
            scored,
        });
    }
    let mut phases = Vec::new();
    for t in &sim.tasks {
        for p in &t.phases {
            let mut v: Vec<f64> = real
                .iter()
                .filter_map(|r| r.tasks.iter().find(|x| x.name == t.name))
                .filter_map(|x| x.phases.iter().find(|q| q.name == p.name))
                .map(|q| (q.end_ns - q.start_ns) as f64)
                .collect();
            let min = v.iter().copied().fold(f64::INFINITY, f64::min);
            let max = v.iter().copied().fold(0.0, f64::max);
            phases.push(PhaseRow {
                task: t.name.clone(),
                phase: p.name.clone(),
                real_min_ns: if v.is_empty() { 0.0 } else { min },
                real_max_ns: max,
                real_median_ns: median(&mut v),
                sim_ns: p.end_ns - p.start_ns,
            });
        }
    }
    let lru_gen = lru_gen_rows(real, sim);
    let mut errs: Vec<(f64, String)> = counters
        .iter()
        .filter(|c| c.scored)
        .map(|c| (c.rel_error.map_or(1.0, f64::abs), c.name.clone()))
        .collect();
    let worst = errs.iter().cloned().max_by(|a, b| a.0.total_cmp(&b.0));
    let mut e: Vec<f64> = errs.iter_mut().map(|x| x.0).collect();
    Comparison {
        spec: sim.spec.clone(),
        kernel: real
            .first()
            .map(|r| r.engine.version.clone())
            .unwrap_or_default(),
        runs: real.len(),
        native: real
            .first()
            .is_some_and(|r| r.engine.name == "linux-native"),
        counters,
        phases,
        lru_gen,
        median_error: (!e.is_empty()).then(|| median(&mut e)),
        worst_error: worst.as_ref().map(|w| w.0),
        worst_counter: worst.map(|w| w.1),
    }
}

/// Each phase end's generations per memcg, side by side, where mmsim has
/// them (the runs without debugfs contribute none).
fn lru_gen_rows(real: &[RunResult], sim: &RunResult) -> Vec<LruGenRow> {
    let mut rows = Vec::new();
    for t in &sim.tasks {
        for p in &t.phases {
            for lv in p
                .lru_gen
                .iter()
                .filter(|l| l.gens.iter().any(|g| g.anon + g.file > 0))
            {
                let real = real
                    .iter()
                    .filter_map(|r| r.tasks.iter().find(|x| x.name == t.name))
                    .filter_map(|x| x.phases.iter().find(|q| q.name == p.name))
                    .filter_map(|q| q.lru_gen.iter().find(|l| l.memcg == lv.memcg))
                    .map(|l| l.gens.clone())
                    .collect();
                rows.push(LruGenRow {
                    task: t.name.clone(),
                    phase: p.name.clone(),
                    memcg: lv.memcg.clone(),
                    real,
                    sim: lv.gens.clone(),
                });
            }
        }
    }
    rows
}

/// Generations as `seq:anon+file` from the oldest, e.g. `9:4001+0`.
fn gens_text(gens: &[LruGenGen]) -> String {
    gens.iter()
        .map(|g| format!("{}:{}+{}", g.seq, g.anon, g.file))
        .collect::<Vec<_>>()
        .join(" ")
}

fn pct(e: Option<f64>) -> String {
    e.map_or("—".to_string(), |e| format!("{:+.1}%", e * 100.0))
}

/// The readable table `mmsim compare` prints.
pub fn render(c: &Comparison, all: bool) -> String {
    let mut s = format!(
        "{} — real: {} × {}, simulated: mmsim\n\n",
        c.spec, c.kernel, c.runs
    );
    s += &format!(
        "{:<28} {:>12} {:>23} {:>12} {:>9}\n",
        "counter", "real median", "real min–max", "mmsim", "error"
    );
    for r in &c.counters {
        if !all && !r.scored {
            continue;
        }
        s += &format!(
            "{:<28} {:>12} {:>23} {:>12} {:>9}\n",
            r.name,
            r.real_median,
            format!("{}–{}", r.real_min, r.real_max),
            r.sim,
            pct(r.rel_error)
        );
    }
    if !c.phases.is_empty() && c.native {
        s += &format!(
            "\n{:<24} {:>16} {:>20} {:>16} {:>9}\n",
            "phase", "real min (wall)", "real spread", "mmsim (sim.)", "sim/real"
        );
        for p in &c.phases {
            s += &format!(
                "{:<24} {:>13.3} ms {:>20} {:>13.3} ms {:>9}\n",
                format!("{}/{}", p.task, p.phase),
                p.real_min_ns / 1e6,
                format!("{:.3}–{:.3} ms", p.real_min_ns / 1e6, p.real_max_ns / 1e6),
                p.sim_ns as f64 / 1e6,
                if p.real_min_ns > 0.0 {
                    format!("{:.2}", p.sim_ns as f64 / p.real_min_ns)
                } else {
                    "—".into()
                }
            );
        }
        s += "(real: this machine's own kernel at hardware speed, the fastest run and the spread; its release is not 6.1)\n";
    } else if !c.phases.is_empty() {
        s += &format!(
            "\n{:<24} {:>16} {:>16}\n",
            "phase", "real (wall)", "mmsim (sim.)"
        );
        for p in &c.phases {
            s += &format!(
                "{:<24} {:>13.3} ms {:>13.3} ms\n",
                format!("{}/{}", p.task, p.phase),
                p.real_median_ns / 1e6,
                p.sim_ns as f64 / 1e6
            );
        }
        s += "(real phase times are wall time under QEMU TCG emulation: compare their ratios, not their values)\n";
    }
    if !c.lru_gen.is_empty() {
        s += "\nlru_gen at phase ends (seq:anon+file pages, oldest first; /sys/kernel/debug/lru_gen)\n";
        for g in &c.lru_gen {
            s += &format!("{}/{} memcg {}\n", g.task, g.phase, g.memcg);
            for (i, r) in g.real.iter().enumerate() {
                s += &format!("  real run {}  {}\n", i + 1, gens_text(r));
            }
            s += &format!("  mmsim       {}\n", gens_text(&g.sim));
        }
    }
    s += &format!(
        "\nfidelity: median error {}, worst {} ({})\n",
        c.median_error
            .map_or("—".into(), |e| format!("{:.1}%", e * 100.0)),
        c.worst_error
            .map_or("—".into(), |e| format!("{:.1}%", e * 100.0)),
        c.worst_counter.clone().unwrap_or_default()
    );
    s
}

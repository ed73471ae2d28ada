//! `mmsim fidelity`: every fidelity spec's simulated counters against its
//! recorded real-kernel results, within the tolerances the spec declares;
//! and the markdown table of docs/fidelity.md.

use crate::oracle_cmd::{recorded, results_dir};
use mmsim_oracle::compare::{self, median, NOISE_FLOOR};
use mmsim_spec::Preset;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub struct Check {
    pub counter: String,
    pub real_median: f64,
    pub real_min: i64,
    pub real_max: i64,
    pub sim: i64,
    pub tolerance: f64,
    pub ok: bool,
    /// A declared miss on this kernel (`[fidelity.miss."RELEASE"]`): why.
    pub miss: Option<String>,
}

impl Check {
    /// What `--check` holds: within tolerance, or a declared miss that
    /// still misses (one that now passes is stale and fails).
    pub fn holds(&self) -> bool {
        self.ok != self.miss.is_some()
    }
}

pub struct SpecReport {
    pub spec: PathBuf,
    pub runs: usize,
    pub kernel: String,
    pub checks: Vec<Check>,
    pub median_error: Option<f64>,
    pub worst: Option<(f64, String)>,
}

/// Within tolerance: |sim − real| ≤ tol × max(real, NOISE_FLOOR), so a
/// counter that is tiny on the real kernel is judged on an absolute scale.
pub fn within(real: f64, sim: f64, tol: f64) -> bool {
    (sim - real).abs() <= tol * real.max(NOISE_FLOOR)
}

/// A check passes within tolerance of the real median, or, where the real
/// runs themselves differ by more than the tolerance (a timing-sensitive
/// counter: the kernel does not reproduce it that closely), anywhere in
/// the range of the real runs.
pub fn passes(median: f64, min: f64, max: f64, sim: f64, tol: f64) -> bool {
    within(median, sim, tol)
        || (max - min > tol * median.max(NOISE_FLOOR) && (min..=max).contains(&sim))
}

/// A counter of a run: a /proc/vmstat name; `interrupts/ROW`, a
/// /proc/interrupts row summed over the CPUs (`interrupts/TLB`: the
/// TLB-shootdown IPIs); `memory_events/CGROUP/EVENT`, a cgroup's
/// memory.events line (`memory_swap_events/CGROUP/EVENT`: its
/// memory.swap.events line); `memory_stat/CGROUP/KEY`, a memory.stat line at
/// the end of the workload; `oom_kill/TASK`, 1 if the OOM killer ended the
/// task, else 0, and `oom_kill/TASK/anon_rss_kb` (or `file_rss_kb`,
/// `shmem_rss_kb`, `pgtables_kb`), what its kill logged (0 if none);
/// `zram/N/FIELD`, a field of the mm_stat of `[[swap]]` entry N at the end
/// (present when a region states its content); `zswap/FILE`, a file of
/// zswap's debugfs at the end (present when the spec sets zswap).
fn counter(r: &mmsim_spec::output::RunResult, name: &str) -> i64 {
    if let Some((n, field)) = name.strip_prefix("zram/").and_then(|x| x.split_once('/')) {
        return zram_counter(r, n, field);
    }
    if let Some(file) = name.strip_prefix("zswap/") {
        return r.zswap.and_then(|z| z.field(file)).unwrap_or(0) as i64;
    }
    if let Some(row) = name.strip_prefix("interrupts/") {
        return r.interrupts.get(row).copied().unwrap_or(0) as i64;
    }
    if let Some(rest) = name.strip_prefix("oom_kill/") {
        return oom_kill_counter(r, rest);
    }
    if let Some((cg, ev)) = name
        .strip_prefix("memory_events/")
        .and_then(|x| x.split_once('/'))
    {
        let events = r.cgroups.get(cg).map(|c| &c.memory_events);
        return events.and_then(|e| e.get(ev)).copied().unwrap_or(0) as i64;
    }
    if let Some((cg, ev)) = name
        .strip_prefix("memory_swap_events/")
        .and_then(|x| x.split_once('/'))
    {
        let events = r.cgroups.get(cg).map(|c| &c.memory_swap_events);
        return events.and_then(|e| e.get(ev)).copied().unwrap_or(0) as i64;
    }
    if let Some((cg, key)) = name
        .strip_prefix("memory_stat/")
        .and_then(|x| x.split_once('/'))
    {
        let stat = r.cgroups.get(cg).map(|c| &c.memory_stat);
        return stat.and_then(|s| s.get(key)).copied().unwrap_or(0);
    }
    r.vmstat.get(name).copied().unwrap_or(0)
}

/// `zram/N/FIELD` (0 where the run has no such device or field).
fn zram_counter(r: &mmsim_spec::output::RunResult, n: &str, field: &str) -> i64 {
    let Some(z) = r.zram.iter().find(|z| n.parse() == Ok(z.swap)) else {
        return 0;
    };
    z.field(field).unwrap_or(0) as i64
}

/// What an OOM kill's log line gives, by `oom_kill/TASK/FIELD`.
const OOM_KILL_FIELDS: [&str; 4] = ["anon_rss_kb", "file_rss_kb", "shmem_rss_kb", "pgtables_kb"];

/// `oom_kill/TASK` (a task name may hold '/') or `oom_kill/TASK/FIELD`.
fn oom_kill_counter(r: &mmsim_spec::output::RunResult, rest: &str) -> i64 {
    let (task, field) = match rest.rsplit_once('/') {
        Some((t, f)) if OOM_KILL_FIELDS.contains(&f) => (t, Some(f)),
        _ => (rest, None),
    };
    let kill = r
        .tasks
        .iter()
        .find(|t| t.name == task)
        .and_then(|t| t.oom_kill.as_ref());
    let Some(k) = kill else { return 0 };
    let v = match field {
        None => return 1,
        Some("anon_rss_kb") => k.anon_rss_kb,
        Some("file_rss_kb") => k.file_rss_kb,
        Some("shmem_rss_kb") => k.shmem_rss_kb,
        Some(_) => k.pgtables_kb,
    };
    v.unwrap_or(0) as i64
}

/// Counts judged exactly (whether a task was killed, memory.events):
/// mmsim's must be one the real runs gave, however small.
fn exact(name: &str) -> bool {
    let field = name
        .rsplit_once('/')
        .is_some_and(|(_, f)| OOM_KILL_FIELDS.contains(&f));
    (name.starts_with("oom_kill/") && !field) || name.starts_with("memory_events/")
}

/// The spec's simulated counters on `preset` against what was recorded
/// on that preset's release; None where nothing was.
pub fn evaluate(spec_path: &Path, preset: Preset) -> Result<Option<SpecReport>, String> {
    let real = recorded(spec_path, preset);
    if real.is_empty() {
        return Ok(None);
    }
    let set = [format!("machine.kernel=\"{preset}\"")];
    let spec = mmsim_spec::load(spec_path, &set).map_err(|e| e.to_string())?;
    let sim = mmsim_sim::run(&spec, crate::sim_options())
        .map_err(|e| format!("{}: {e}", spec_path.display()))?;
    let c = compare::compare(&real, &sim);
    let checks = spec
        .fidelity
        .counters
        .iter()
        .map(|(name, tol)| {
            let mut v: Vec<f64> = real.iter().map(|r| counter(r, name) as f64).collect();
            let m = median(&mut v);
            let s = counter(&sim, name);
            let (lo, hi) = (
                v.first().copied().unwrap_or(0.0),
                v.last().copied().unwrap_or(0.0),
            );
            Check {
                counter: name.clone(),
                real_median: m,
                real_min: lo as i64,
                real_max: hi as i64,
                sim: s,
                tolerance: *tol,
                ok: match exact(name) {
                    true => (lo..=hi).contains(&(s as f64)),
                    false => passes(m, lo, hi, s as f64, *tol),
                },
                miss: spec.fidelity.miss(preset, name).map(str::to_string),
            }
        })
        .collect();
    Ok(Some(SpecReport {
        spec: spec_path.to_path_buf(),
        runs: real.len(),
        kernel: c.kernel.clone(),
        checks,
        median_error: c.median_error,
        worst: c.worst_error.zip(c.worst_counter),
    }))
}

pub fn specs_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

pub fn markdown(reports: &[SpecReport], missing: &[PathBuf]) -> String {
    let mut s = String::new();
    if reports.is_empty() {
        return s;
    }
    s += "| spec | counter | real median (min–max) | mmsim | error | tolerance | |\n";
    s += "|---|---|---|---|---|---|---|\n";
    for r in reports {
        let name = r.spec.file_stem().unwrap_or_default().to_string_lossy();
        for c in &r.checks {
            let err = if c.real_median > 0.0 {
                pct((c.sim as f64 - c.real_median) / c.real_median)
            } else {
                "—".into()
            };
            let _ = writeln!(
                s,
                "| {name} | {} | {} ({}–{}) | {} | {err} | {:.0}% | {} |",
                c.counter,
                c.real_median,
                c.real_min,
                c.real_max,
                c.sim,
                c.tolerance * 100.0,
                match (c.ok, &c.miss) {
                    (true, None) => "ok",
                    (false, None) => "**out**",
                    (false, Some(_)) => "miss (below)",
                    (true, Some(_)) => "**declared miss passes**",
                }
            );
        }
    }
    let declared: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            let name = r.spec.file_stem().unwrap_or_default().to_string_lossy();
            r.checks.iter().filter_map(move |c| {
                c.miss
                    .as_ref()
                    .map(|why| format!("- {name} {}: {why}", c.counter))
            })
        })
        .collect();
    if !declared.is_empty() {
        s += "\nDeclared misses on this kernel (the spec's `[fidelity.miss]`):\n\n";
        s += &declared.join("\n");
        s += "\n";
    }
    s += "\nScore per spec, over every scored counter (`mmsim compare --recorded SPEC` shows them all):\n\n";
    s += "| spec | real runs | kernel | median error | worst error (counter) |\n|---|---|---|---|---|\n";
    for r in reports {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            r.spec.file_stem().unwrap_or_default().to_string_lossy(),
            r.runs,
            r.kernel,
            r.median_error
                .map_or("—".into(), |e| format!("{:.1}%", e * 100.0)),
            r.worst
                .as_ref()
                .map_or("—".into(), |(e, n)| format!("{:.1}% ({n})", e * 100.0))
        );
    }
    for m in missing {
        let _ = writeln!(
            s,
            "\n{}: no recorded results in {}",
            m.display(),
            results_dir(m).display()
        );
    }
    s
}

fn expressible(spec: &Path, preset: Preset) -> bool {
    mmsim_spec::load(spec, &[format!("machine.kernel=\"{preset}\"")]).is_ok()
}

/// One section per kernel: its release, the table, and (for 6.1, where
/// every spec is meant to be recorded) the specs that are not.
fn kernel_section(preset: Preset, reports: &[SpecReport], missing: &[PathBuf]) -> String {
    let release = reports.first().map_or("", |r| r.kernel.as_str());
    let mut s = format!(
        "\n### Linux {preset} ({release}): {} specs\n\n",
        reports.len()
    );
    s += &markdown(reports, missing);
    s
}

/// The generated part of docs/fidelity.md sits between these markers.
pub const BEGIN: &str = "<!-- BEGIN mmsim fidelity -->";
pub const END: &str = "<!-- END mmsim fidelity -->";

/// `mmsim fidelity`: each kernel's table (every preset with recordings,
/// or those `kernels` names). Specs a preset cannot express are never
/// recorded for it; 6.1's table lists every spec without a recording.
pub fn fidelity_cmd(
    dir: &Path,
    check: bool,
    write: Option<&Path>,
    kernels: Vec<Preset>,
) -> ExitCode {
    let presets = if kernels.is_empty() {
        Preset::ALL.to_vec()
    } else {
        kernels
    };
    let mut table = String::new();
    let mut out = Vec::new();
    for preset in presets {
        let mut reports = Vec::new();
        let mut missing = Vec::new();
        for spec in specs_in(dir) {
            match evaluate(&spec, preset) {
                Ok(Some(r)) => reports.push(r),
                // A spec its preset cannot express (per-size shmem THP
                // before 6.12) is no missing recording.
                Ok(None) if preset == Preset::V6_1 && expressible(&spec, preset) => {
                    missing.push(spec)
                }
                Ok(None) => {}
                Err(e) => {
                    eprintln!("mmsim: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        if reports.is_empty() && missing.is_empty() {
            continue;
        }
        table += &kernel_section(preset, &reports, &missing);
        out.extend(reports.iter().flat_map(|r| {
            r.checks
                .iter()
                .filter(|c| !c.holds())
                .map(move |c| format!("{} {} ({preset})", r.spec.display(), c.counter))
        }));
    }
    if let Some(path) = write {
        let code = write_between_markers(path, &table);
        if code != ExitCode::SUCCESS {
            return code;
        }
    } else {
        print!("{table}");
    }
    if check && !out.is_empty() {
        eprintln!("mmsim: out of tolerance: {}", out.join(", "));
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// `mmsim fidelity --timing`: the timing suite's table, printed or
/// written into FILE between the markers.
pub fn timing_cmd(dir: &Path, check: bool, write: Option<&Path>) -> ExitCode {
    let machine = crate::timing::machine(dir);
    warn_other_cpu(dir, &machine);
    let specs = specs_in(&dir.join("timing"));
    let not_recorded = match crate::timing::not_recorded(dir, &machine, &specs) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(2);
        }
    };
    let mut rows = Vec::new();
    let mut zram = Vec::new();
    let mut skipped = Vec::new();
    for spec in specs {
        let name = crate::timing::spec_name(&spec);
        if let Some(why) = not_recorded.get(&name) {
            skipped.push((name, why.clone()));
            continue;
        }
        match crate::timing::phases(&spec, &machine) {
            Ok((mut r, mut z)) => {
                rows.append(&mut r);
                zram.append(&mut z);
            }
            Err(e) => {
                eprintln!("mmsim: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let table = crate::timing::markdown(&rows, &zram, &skipped);
    let code = match write {
        Some(path) => write_between(path, &timing_markers(&machine), &table),
        None => {
            print!("{table}");
            ExitCode::SUCCESS
        }
    };
    let out: Vec<String> = rows
        .iter()
        .filter(|r| !r.within())
        .map(|r| format!("{} {} ({:.2})", r.spec, r.phase, r.ratio()))
        .collect();
    let psi_out: Vec<String> = rows
        .iter()
        .filter_map(|r| r.pressure.as_ref().map(|p| (r, p)))
        .filter(|(_, p)| !p.within())
        .map(|(r, p)| {
            format!(
                "{} {} ({:.2}, {:.2})",
                r.spec,
                r.phase,
                p.some_ratio(),
                p.full_ratio()
            )
        })
        .collect();
    if check && !psi_out.is_empty() {
        eprintln!(
            "mmsim: memory pressure out of tolerance: {}",
            psi_out.join(", ")
        );
    }
    if check && !out.is_empty() {
        eprintln!("mmsim: phase time out of tolerance: {}", out.join(", "));
    }
    let zram_out: Vec<String> = zram
        .iter()
        .filter(|z| !z.within())
        .map(|z| format!("{} swap {} ({:.3})", z.spec, z.swap, z.ratio()))
        .collect();
    if check && !zram_out.is_empty() {
        eprintln!(
            "mmsim: zram compr_data_size out of tolerance: {}",
            zram_out.join(", ")
        );
    }
    if check && !(out.is_empty() && psi_out.is_empty() && zram_out.is_empty()) {
        return ExitCode::from(1);
    }
    code
}

/// Warns when the machine profile was measured on another CPU than the
/// timing suite's recordings: its times then say how that CPU's costs
/// predict this one's.
fn warn_other_cpu(dir: &Path, machine: &str) {
    let Some(cpu) = crate::sim_options().costs.cpu else {
        return;
    };
    let recorded = specs_in(&dir.join("timing"))
        .iter()
        .flat_map(|s| crate::timing::recorded_native(s, machine))
        .find_map(|r| r.knobs.get("native:cpu").cloned());
    if let Some(rec) = recorded.filter(|r| *r != cpu) {
        eprintln!(
            "mmsim: warning: the machine profile was measured on \"{cpu}\", the timing suite recorded on \"{rec}\""
        );
    }
}

/// Puts `table` into the markdown file `path` between its markers (at its
/// end if it has none), atomically.
fn write_between_markers(path: &Path, table: &str) -> ExitCode {
    write_between(path, &(BEGIN.to_string(), END.to_string()), table)
}

/// The markers of one machine's timing table in docs/timing.md: each CPU
/// model whose recordings the suite holds has its own table.
pub fn timing_markers(machine: &str) -> (String, String) {
    (
        format!("<!-- BEGIN mmsim fidelity --timing {machine} -->"),
        format!("<!-- END mmsim fidelity --timing {machine} -->"),
    )
}

/// Puts `table` into the markdown file `path` between `markers` (at its
/// end if it has none), atomically.
fn write_between(path: &Path, markers: &(String, String), table: &str) -> ExitCode {
    let (begin, end) = markers;
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let new = match (old.find(begin.as_str()), old.find(end.as_str())) {
        (Some(a), Some(b)) if a < b => format!(
            "{}{begin}\n{table}{end}{}",
            &old[..a],
            &old[b + end.len()..]
        ),
        _ => format!("{old}\n{begin}\n{table}{end}\n"),
    };
    if let Err(e) = crate::write_atomically(path, new.trim_end().as_bytes()) {
        eprintln!("mmsim: {}: {e}", path.display());
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::{counter, exact, passes, within};

    /// A run whose task `p/fork0` was killed with 1,000 kB of anon-rss.
    fn run_with_a_kill() -> mmsim_spec::output::RunResult {
        let kill = r#"{ "constraint": "memcg", "oom_memcg": "w", "at_ns": 5,
            "anon_rss_kb": 1000, "oom_score_adj": 0 }"#;
        let doc = format!(
            r#"{{ "format": 1, "engine": {{ "name": "mmsim", "version": "0" }}, "spec": "s",
            "knobs": {{}}, "machine": {{ "memory_bytes": 0, "cpus": 1, "mem_total_bytes": 0,
            "mem_free_at_start_bytes": 0, "min_free_kbytes": 0, "zones": [] }},
            "elapsed_ns": 0, "vmstat": {{}}, "profile": {{}},
            "integrity": {{ "pages_checked": 0, "violations": 0 }},
            "cgroups": {{ "w": {{ "memory_current": 0, "memory_swap_current": 0,
              "memory_stat": {{ "anon": 4096 }}, "memory_events": {{ "oom_kill": 2 }},
              "memory_swap_events": {{ "max": 3, "fail": 5 }} }} }},
            "tasks": [
              {{ "name": "p", "cgroup": "w", "start_ns": 0, "end_ns": 9, "phases": [] }},
              {{ "name": "p/fork0", "cgroup": "w", "start_ns": 0, "end_ns": 9, "phases": [],
                "oom_kill": {kill} }} ] }}"#
        );
        serde_json::from_str(&doc).expect("a run document")
    }

    #[test]
    fn oom_kill_counters_name_tasks_with_slashes_and_fields() {
        let r = run_with_a_kill();
        assert_eq!(counter(&r, "oom_kill/p"), 0);
        assert_eq!(counter(&r, "oom_kill/p/fork0"), 1);
        assert_eq!(counter(&r, "oom_kill/p/fork0/anon_rss_kb"), 1000);
        // Absent from the log: 0.
        assert_eq!(counter(&r, "oom_kill/p/fork0/pgtables_kb"), 0);
        assert_eq!(counter(&r, "memory_events/w/oom_kill"), 2);
        assert_eq!(counter(&r, "memory_events/x/oom_kill"), 0);
        assert_eq!(counter(&r, "memory_stat/w/anon"), 4096);
        assert_eq!(counter(&r, "memory_stat/x/anon"), 0);
        assert_eq!(counter(&r, "memory_swap_events/w/fail"), 5);
        assert_eq!(counter(&r, "memory_swap_events/w/max"), 3);
        assert_eq!(counter(&r, "memory_swap_events/x/max"), 0);
        // Whether a task died is judged exactly; its RSS by tolerance.
        assert!(exact("oom_kill/p/fork0") && exact("memory_events/w/oom"));
        assert!(!exact("oom_kill/p/fork0/anon_rss_kb") && !exact("pgfault"));
    }

    #[test]
    fn a_counter_the_kernel_does_not_reproduce_passes_inside_its_range() {
        // Real runs 8419..40582 around 28462: 10932 is far from the median
        // but inside what the kernel itself did.
        assert!(passes(28462.0, 8419.0, 40582.0, 10932.0, 0.2));
        assert!(!passes(28462.0, 8419.0, 40582.0, 8000.0, 0.2));
        // Runs that agree keep the median rule.
        assert!(!passes(1000.0, 990.0, 1010.0, 1005.0 + 300.0, 0.05));
        assert!(!passes(1000.0, 990.0, 1010.0, 995.0 - 100.0, 0.05));
        assert!(passes(1000.0, 990.0, 1010.0, 1040.0, 0.05));
    }

    #[test]
    fn tolerance_rule() {
        assert!(within(1000.0, 1049.0, 0.05));
        assert!(!within(1000.0, 1051.0, 0.05));
        // Below the noise floor the scale is absolute: 100 × tol.
        assert!(within(0.0, 5.0, 0.05));
        assert!(!within(0.0, 6.0, 0.05));
    }
}

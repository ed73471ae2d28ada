//! The figures an effect measures, read from one run: the `measure`
//! strings of experiment.toml.

use mmsim_sim::output::RunResult;
use mmsim_spec::Spec;

/// `vm:NAME:REST`: guest NAME's part of a measure or a histogram's site.
pub fn guest_part(what: &str) -> Option<(&str, &str)> {
    what.strip_prefix("vm:")?.split_once(':')
}

/// The run a measure or a histogram's site reads, and the rest of it:
/// `vm:NAME:...` names guest NAME's run (its own document in the host's,
/// and its spec), anything else the run itself.
pub fn scope<'a>(
    r: &'a RunResult,
    spec: &'a Spec,
    what: &'a str,
) -> Result<(&'a RunResult, &'a Spec, &'a str), String> {
    if !what.starts_with("vm:") {
        return Ok((r, spec, what));
    }
    let (name, rest) = guest_part(what)
        .ok_or_else(|| format!("found {what:?}, expected vm:NAME: and a measure"))?;
    let guest = spec.vms.iter().find(|v| v.name == name);
    match (r.vms.get(name), guest) {
        (Some(r), Some(v)) => Ok((r, &v.guest, rest)),
        _ => Err(format!("found {what:?}, but the run has no guest {name:?}")),
    }
}

/// What one measure reads from a run (`scope` first: a guest's run).
pub fn measure(r: &RunResult, spec: &Spec, what: &str) -> Result<f64, String> {
    let (r, spec, what) = scope(r, spec, what)?;
    let parts: Vec<&str> = what.split(':').collect();
    match parts.as_slice() {
        ["phase_s", phase] => r
            .tasks
            .iter()
            .flat_map(|t| t.phases.iter())
            .find(|p| p.name == *phase)
            .map(|p| (p.end_ns - p.start_ns) as f64 / 1e9)
            .ok_or_else(|| format!("no phase {phase:?} in the run")),
        ["vmstat", name] => Ok(r.vmstat.get(*name).copied().unwrap_or(0) as f64),
        ["vmstat", phase, name] => {
            // A counter's change over one phase, summed over the tasks
            // that have it.
            let ps: Vec<_> = r
                .tasks
                .iter()
                .flat_map(|t| t.phases.iter())
                .filter(|p| p.name == *phase)
                .collect();
            if ps.is_empty() {
                return Err(format!("no phase {phase:?} in the run"));
            }
            Ok(ps
                .iter()
                .map(|p| p.vmstat.get(*name).copied().unwrap_or(0))
                .sum::<i64>() as f64)
        }
        [kind @ ("spawn_max_s" | "spawn_mean_s"), task] => {
            // The run times of the programs task TASK launched.
            let prefix = format!("{task}/spawn");
            let times: Vec<f64> = r
                .tasks
                .iter()
                .filter(|t| t.name.starts_with(&prefix))
                .map(|t| (t.end_ns - t.start_ns) as f64 / 1e9)
                .collect();
            if times.is_empty() {
                return Err(format!("task {task:?} launched no program"));
            }
            Ok(if *kind == "spawn_max_s" {
                times.iter().cloned().fold(0.0, f64::max)
            } else {
                times.iter().sum::<f64>() / times.len() as f64
            })
        }
        ["mb_per_s", phase, file] => {
            // The file's bytes over the phase's time: what a program that
            // reads the file in that phase reports as its throughput.
            let f = spec
                .files
                .iter()
                .find(|f| f.name == *file)
                .ok_or_else(|| format!("no file {file:?} in the spec, in {what:?}"))?;
            let s = measure(r, spec, &format!("phase_s:{phase}"))?;
            Ok(f.size as f64 / 1e6 / s)
        }
        ["loops_per_s", phase] => {
            // The iterations of the `repeat` that follows the phase mark in
            // the first task, over the phase's time: what a loop run for
            // one second counts.
            let steps = &spec.tasks.first().ok_or("the spec has no task")?.steps;
            let at = steps
                .iter()
                .position(|s| matches!(&s.op, mmsim_spec::Op::Phase { name } if name == phase))
                .ok_or_else(|| format!("no phase {phase:?} in the first task"))?;
            let times = steps[at..]
                .iter()
                .find_map(|s| match s.op {
                    mmsim_spec::Op::Repeat { times, .. } => Some(times),
                    _ => None,
                })
                .ok_or_else(|| format!("no repeat after phase {phase:?}"))?;
            Ok(times as f64 / measure(r, spec, &format!("phase_s:{phase}"))?)
        }
        ["profile_share", fs] => {
            // perf's "children" share: time in f and its callees, over
            // all the simulated CPU time (f counted once where it nests);
            // `A+B` adds two functions' shares (one side's function and
            // the other side's replacement).
            let total: u64 = r
                .profile_tree
                .iter()
                .filter(|row| !row.path.contains(';'))
                .map(|row| row.total_ns)
                .sum();
            let inside: u64 = fs
                .split('+')
                .map(|f| {
                    r.profile_tree
                        .iter()
                        .filter(|row| {
                            let mut parts = row.path.rsplit(';');
                            parts.next() == Some(f) && parts.all(|p| p != f)
                        })
                        .map(|row| row.total_ns)
                        .sum::<u64>()
                })
                .sum();
            if total == 0 {
                return Err("the run has no profile".into());
            }
            Ok(100.0 * inside as f64 / total as f64)
        }
        ["kv", what, phase] => {
            // memtier's figures, averaged over the tasks, the host's and
            // its guests' (the seed's "Index(average)" over its instances:
            // its redis servers ran in VMs).
            let per: Vec<f64> = r
                .tasks
                .iter()
                .chain(r.vms.values().flat_map(|g| g.tasks.iter()))
                .flat_map(|t| t.phases.iter())
                .filter(|p| p.name == *phase)
                .filter_map(|p| p.kv)
                .map(|k| match *what {
                    "ops_per_sec" => Ok(k.ops_per_sec()),
                    "hits_per_sec" => Ok(k.hits_per_sec()),
                    "misses_per_sec" => Ok(k.misses_per_sec()),
                    "latency_ms" => Ok(k.latency_ms()),
                    "kb_per_sec" => Ok(k.kb_per_sec()),
                    other => Err(format!("found the kv figure {other:?}, expected ops_per_sec, hits_per_sec, misses_per_sec, latency_ms or kb_per_sec")),
                })
                .collect::<Result<_, _>>()?;
            if per.is_empty() {
                return Err(format!("no kvstore in phase {phase:?}"));
            }
            Ok(per.iter().sum::<f64>() / per.len() as f64)
        }
        [kind @ ("hist_share_le" | "hist_share_ge"), site, n] => {
            let n: u64 = n.parse().map_err(|_| format!("bad bucket {n:?} in {what:?}"))?;
            let h = r.histograms.get(*site).cloned().unwrap_or_default();
            let total: u64 = h.iter().map(|b| b.count).sum();
            // Power-of-two buckets: [lo, hi) holds values of lo.
            let hit: u64 = h
                .iter()
                .filter(|b| if *kind == "hist_share_le" { b.lo <= n } else { b.lo >= n })
                .map(|b| b.count)
                .sum();
            Ok(if total == 0 { 0.0 } else { hit as f64 / total as f64 })
        }
        _ => Err(format!(
            "found the measure {what:?}, expected phase_s:PHASE, vmstat:COUNTER, kv:FIGURE:PHASE, spawn_max_s:TASK, spawn_mean_s:TASK, mb_per_s:PHASE:FILE, loops_per_s:PHASE, profile_share:FUNCTION, hist_share_le:SITE:N or hist_share_ge:SITE:N, each also as vm:NAME:MEASURE for guest NAME's"
        )),
    }
}

//! `[fidelity]`: the tolerances of the simulation against recorded
//! real-kernel results.

use super::fields::{number, type_error, Fields};
use crate::error::{Reporter, SpecError};
use crate::model::{Fidelity, Preset};
use crate::tree::{self, Node, Val};

/// `[fidelity]`: `tolerance = { counter = fraction, ... }`, how far the
/// simulation may be from the recorded real-kernel median, per counter;
/// `time_tolerance = { phase = fraction, ... }`, how far a phase's
/// simulated time may be from its fastest recorded native run.
pub(super) fn build_fidelity(rep: &Reporter, node: &Node) -> Result<Fidelity, SpecError> {
    let f = Fields::of(rep, "fidelity".into(), node, "a table [fidelity]")?;
    f.only(&["tolerance", "time_tolerance", "miss"], "[fidelity]")?;
    // /proc/vmstat names, the per-size `hugepages-64kB/stats/swpout`,
    // /proc/interrupts rows as `interrupts/TLB`, memory.events lines as
    // `memory_events/CGROUP/oom_kill` (memory.swap.events lines as
    // `memory_swap_events/CGROUP/fail`), OOM kills as `oom_kill/TASK`.
    let counter = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/');
    let phase = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let counters = fractions(
        rep,
        &f,
        "tolerance",
        &counter,
        "a /proc/vmstat name such as pgfault (or a per-size statistic such as hugepages-64kB/stats/swpout, interrupts/TLB for the TLB-shootdown IPIs, memory_events/CGROUP/EVENT, memory_swap_events/CGROUP/EVENT, memory_stat/CGROUP/KEY, oom_kill/TASK, zram/N/FIELD for a field of zram swap device N's mm_stat, or zswap/FILE for a file of zswap's debugfs)",
    )?;
    Ok(Fidelity {
        misses: misses(rep, &f, &counters)?,
        counters,
        times: fractions(rep, &f, "time_tolerance", &phase, "a phase name")?,
    })
}

/// `[fidelity.miss."RELEASE"]`: counter = "why", for counters of the
/// tolerance table that release's kernel is known not to match.
fn misses(
    rep: &Reporter,
    f: &Fields,
    counters: &[(String, f64)],
) -> Result<Vec<(Preset, String, String)>, SpecError> {
    let Some(t) = f.get("miss") else {
        return Ok(Vec::new());
    };
    let by_kernel = Fields::of(
        rep,
        f.path("miss"),
        t,
        "a table of preset = { counter = \"why\" }, e.g. [fidelity.miss.\"5.10\"]",
    )?;
    let mut out = Vec::new();
    for (name, e) in &by_kernel.table.entries {
        let key = by_kernel.path(name);
        let preset = Preset::parse(name).ok_or_else(|| {
            rep.at(
                e.key_at,
                key.clone(),
                format!(
                    "found the preset `{}`, expected one of 5.10, 6.1, 6.12, 7.3",
                    tree::quote(name)
                ),
            )
        })?;
        let cf = Fields::of(rep, key.clone(), &e.node, "a table of counter = \"why\"")?;
        for (counter, c) in &cf.table.entries {
            let ckey = cf.path(counter);
            if !counters.iter().any(|(n, _)| n == counter) {
                return Err(rep.at(
                    c.key_at,
                    ckey,
                    format!(
                        "found `{}`, expected a counter of [fidelity] tolerance",
                        tree::quote(counter)
                    ),
                ));
            }
            let Val::Str(why) = &c.node.val else {
                return Err(type_error(rep, &c.node, &ckey, "a string saying why"));
            };
            out.push((preset, counter.clone(), why.clone()));
        }
    }
    Ok(out)
}

/// A `[fidelity]` table of name = fraction.
fn fractions(
    rep: &Reporter,
    f: &Fields,
    table: &str,
    valid: &dyn Fn(char) -> bool,
    what: &str,
) -> Result<Vec<(String, f64)>, SpecError> {
    let Some(t) = f.get(table) else {
        return Ok(Vec::new());
    };
    let tf = Fields::of(
        rep,
        f.path(table),
        t,
        &format!(
            "a table of name = fraction, e.g. {{ {} = 0.05 }}",
            if table == "tolerance" {
                "pgfault"
            } else {
                "first_touch"
            }
        ),
    )?;
    let mut out = Vec::new();
    for (name, e) in &tf.table.entries {
        let key = tf.path(name);
        if name.is_empty() || !name.chars().all(valid) {
            return Err(rep.at(
                e.key_at,
                key,
                format!("found the name `{}`, expected {what}", tree::quote(name)),
            ));
        }
        let v = number(
            rep,
            &e.node,
            &key,
            "a fraction above 0 and at most 10, e.g. 0.05 for 5%",
        )?;
        if !(v > 0.0 && v <= 10.0) {
            return Err(rep.at(
                e.node.at,
                key,
                format!("found {v}, expected a fraction above 0 and at most 10, e.g. 0.05 for 5%"),
            ));
        }
        out.push((name.clone(), v));
    }
    Ok(out)
}

//! `[cgroup.NAME]` and `[task.NAME]`: the tasks and their steps.

use super::fields::{boolean, integer, limit, string, type_error, valid_name, Fields};
use super::regions::{RegionCheck, Regions};
use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::ops::{self, StepCx, OPS};
use crate::tree::{join, At, Node, Val};
use crate::units::Limit;
use std::collections::HashMap;

pub(super) fn build_cgroup(
    rep: &Reporter,
    name: &str,
    node: &Node,
    preset: Preset,
) -> Result<Cgroup, SpecError> {
    let key = join("cgroup", name);
    if !valid_name(name) {
        return Err(rep.at(
            node.at,
            key,
            format!("found the cgroup name {name:?}, expected letters, digits, '_' or '-'"),
        ));
    }
    let c = Fields::of(
        rep,
        key,
        node,
        "a table of cgroup settings, such as [cgroup.w]",
    )?;
    c.only(
        &[
            "memory_max",
            "memory_high",
            "memory_min",
            "memory_low",
            "memory_swap_max",
            "memory_zswap_max",
            "memory_zswap_writeback",
            "memory_oom_group",
        ],
        "a [cgroup.NAME] table",
    )?;
    let lim_or = |field: &str, default: Limit| -> Result<Limit, SpecError> {
        match c.get(field) {
            None => Ok(default),
            Some(v) => limit(rep, v, &c.path(field)),
        }
    };
    let lim = |field: &str| lim_or(field, Limit::Max);
    Ok(Cgroup {
        name: name.to_string(),
        memory_max: lim("memory_max")?,
        memory_high: lim("memory_high")?,
        memory_min: lim_or("memory_min", Limit::Bytes(0))?,
        memory_low: lim_or("memory_low", Limit::Bytes(0))?,
        memory_swap_max: lim("memory_swap_max")?,
        memory_zswap_max: lim("memory_zswap_max")?,
        memory_zswap_writeback: match c.get("memory_zswap_writeback") {
            None => true,
            Some(v) if preset < Preset::V6_12 => {
                return Err(rep.at(
                    v.at,
                    c.path("memory_zswap_writeback"),
                    format!("found memory_zswap_writeback with machine.kernel = \"{preset}\", which has no memory.zswap.writeback (6.8 brought it); expected machine.kernel = \"6.12\" or later, or no memory_zswap_writeback"),
                ))
            }
            Some(v) => boolean(rep, v, &c.path("memory_zswap_writeback"))?,
        },
        memory_oom_group: match c.get("memory_oom_group") {
            None => false,
            Some(v) => boolean(rep, v, &c.path("memory_oom_group"))?,
        },
    })
}

/// Where each step and each field of a step is (by key path), for the
/// checks that run over the built steps.
pub(crate) type Locations = HashMap<String, At>;

pub(super) fn build_task(
    rep: &Reporter,
    name: &str,
    node: &Node,
    cgroups: &[Cgroup],
    nswap: usize,
    files: &[File],
) -> Result<Task, SpecError> {
    let key = join("task", name);
    if !valid_name(name) {
        return Err(rep.at(
            node.at,
            key,
            format!("found the task name {name:?}, expected letters, digits, '_' or '-'"),
        ));
    }
    let t = Fields::of(
        rep,
        key,
        node,
        "a table of task settings, such as [task.main]",
    )?;
    t.only(
        &["cgroup", "instances", "oom_score_adj", "steps"],
        "a [task.NAME] table",
    )?;
    let cgroup = match t.get("cgroup") {
        None => None,
        Some(c) => {
            let path = t.path("cgroup");
            let want = string(rep, c, &path, "a string: the NAME of a [cgroup.NAME] table")?;
            Some(cgroups.iter().position(|g| g.name == want).ok_or_else(|| {
                let known: Vec<&str> = cgroups.iter().map(|g| g.name.as_str()).collect();
                rep.at(
                    c.at,
                    path,
                    format!(
                        "found \"{want}\", expected the name of a [cgroup.NAME] table ({})",
                        if known.is_empty() {
                            "none defined".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                )
            })?)
        }
    };
    let instances = match t.get("instances") {
        None => 1,
        Some(n) => integer(
            rep,
            n,
            &t.path("instances"),
            1,
            u32::MAX as i64,
            "a whole number of at least 1 and at most 4294967295",
        )? as u32,
    };
    let oom_score_adj = match t.get("oom_score_adj") {
        None => 0,
        Some(n) => integer(
            rep,
            n,
            &t.path("oom_score_adj"),
            -1000,
            1000,
            "a whole number from -1000 (never killed) to 1000 (killed first)",
        )? as i16,
    };
    let steps_node = t.require(
        "steps",
        "an array of step tables: steps = [ { op = ... }, ... ] or [[task.NAME.steps]] tables",
    )?;
    let steps_key = t.path("steps");
    let mut cx = StepCx {
        rep,
        files,
        locs: Locations::new(),
    };
    let steps = build_steps(&mut cx, steps_node, &steps_key)?;
    let mut check = RegionCheck::new(rep, &cx.locs, nswap, cgroups);
    check.walk(&steps_key, &steps, &mut Regions::new())?;
    Ok(Task {
        name: name.to_string(),
        cgroup,
        instances,
        oom_score_adj,
        steps,
    })
}

/// The steps of the array `node` at `key` (a task's, or a repeat, fork or
/// spawn body).
pub(crate) fn build_steps(cx: &mut StepCx, node: &Node, key: &str) -> Result<Vec<Step>, SpecError> {
    let Val::Array(items) = &node.val else {
        return Err(type_error(
            cx.rep,
            node,
            key,
            "an array of step tables, such as [ { op = \"phase\", name = \"run\" } ]",
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, s)| build_step(cx, s, &format!("{key}[{i}]")))
        .collect()
}

/// One step: its table's `op` names the module that builds it, once the
/// table's keys are known to be ones the op takes, with those it requires.
fn build_step(cx: &mut StepCx, node: &Node, key: &str) -> Result<Step, SpecError> {
    let rep = cx.rep;
    let f = Fields::of(
        rep,
        key.to_string(),
        node,
        "a table such as { op = \"touch\", region = \"heap\" }",
    )?;
    cx.locs.insert(key.to_string(), node.at);
    for (name, e) in &f.table.entries {
        cx.locs.insert(f.path(name), e.node.at);
    }
    let one_of = || format!("one of {}", OPS.as_str());
    let op_node = f.get("op").ok_or_else(|| f.missing("op", &one_of()))?;
    let op_key = f.path("op");
    let op = match &op_node.val {
        Val::Str(s) => ops::by_word(s),
        _ => None,
    }
    .ok_or_else(|| type_error(rep, op_node, &op_key, &one_of()))?;
    f.only(op.keys(), &format!("op \"{}\"", op.word()))?;
    for r in op.required() {
        if f.get(r).is_none() {
            return Err(f.missing(r, op.words(r)));
        }
    }
    Ok(Step {
        line: rep.line(node.at),
        key: key.to_string(),
        op: op.build(cx, &f)?,
    })
}

//! `fork` and `spawn`: a child process running the step's steps beside
//! the task; `spawn` is fork then exec, with a fresh address space.

use super::{new_ktask, Player, TaskRun};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};
use crate::SimError;
use mmsim_spec::Step;
use std::collections::HashMap;

/// fork(2): a child task with a copy-on-write copy of the address space
/// (`spawn`: a fresh one), runnable at once, running `steps`.
pub(super) fn start<'s>(
    p: &mut Player<'s>,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    steps: &'s [Step],
    spawn: bool,
) -> Result<Option<SliceEnd>, SimError> {
    // fork counts the PTEs of every region (what copy_page_range
    // visits); spawn's fresh address space, one.
    let ptes: u64 = match spawn {
        false => p.tasks[i]
            .regions
            .keys()
            .map(|r| p.region_pages(i, k, r))
            .sum(),
        true => 1,
    };
    p.done_work += ptes.max(1);
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    let parent_ktask = p.tasks[i].ktask;
    let (mm, memcg) = (k.tasks[parent_ktask].mm, k.tasks[parent_ktask].memcg);
    let (child_mm, pairs) = if spawn {
        // fork, then exec: the new program's address space is fresh.
        k.charge_cost(cost_model::Fn::CopyPageRange, k.costs.fork + k.costs.exec);
        let mm = k.mm_alloc(memcg);
        k.khugepaged_exec(mm);
        (mm, Vec::new())
    } else {
        k.dup_mm(mm, memcg)?
    };
    // The child inherits oom_score_adj (copy_signal).
    let adj = k.tasks[parent_ktask].oom_score_adj;
    k.tasks.push(new_ktask(child_mm, memcg, adj, k.tasks.len()));
    let parent = &p.tasks[i];
    let (kind, nth) = if spawn {
        ("spawn", parent.nspawns)
    } else {
        (
            "fork",
            parent.forks.len() as u32 - parent.nspawns - parent.nthreads,
        )
    };
    let name = format!("{}/{kind}{nth}", parent.name);
    let mut child = TaskRun::new(
        name,
        parent.cgroup.clone(),
        k.tasks.len() - 1,
        parent.instance,
        steps,
    );
    child.start = k.now();
    child.spawned = spawn;
    child.parent = Some(i);
    if !spawn {
        child.regions = child_regions(&parent.regions, &pairs);
        child.kv_dbs = parent.kv_dbs.clone();
    }
    let id = p.tasks.len();
    p.tasks.push(child);
    slice.fork(k.now());
    let parent = &mut p.tasks[i];
    parent.forks.push(id);
    parent.nspawns += spawn as u32;
    parent.live_children += 1;
    Ok(None)
}

/// The parent's regions, each naming the child's copy of its VMA.
fn child_regions(regions: &HashMap<String, u32>, pairs: &[(u32, u32)]) -> HashMap<String, u32> {
    regions
        .iter()
        .map(|(name, v)| {
            let child = pairs.iter().find(|(pv, _)| pv == v).expect("copied VMA").1;
            (name.clone(), child)
        })
        .collect()
}

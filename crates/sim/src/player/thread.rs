//! `thread`: clone(CLONE_VM | CLONE_THREAD …), as pthread_create makes a
//! thread: a task in its creator's mm and cgroup, on its creator's
//! regions, runnable at once.

use super::{new_ktask, Player, TaskRun};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};
use crate::SimError;
use mmsim_spec::Step;

/// Starts a thread of task `i` running `steps`. Simplification: the
/// clone is charged as one syscall (`costs.syscall`); no microbenchmark
/// of thread creation is in the machine profile yet, and a workload
/// starts its threads once.
pub(super) fn start<'s>(
    p: &mut Player<'s>,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    steps: &'s [Step],
) -> Result<Option<SliceEnd>, SimError> {
    p.done_work += 1;
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    let creator = &p.tasks[i];
    let ktask = &k.tasks[creator.ktask];
    // One signal_struct: the process's oom_score_adj; one thread group.
    let (mm, memcg, adj, tgid) = (ktask.mm, ktask.memcg, ktask.oom_score_adj, ktask.tgid);
    k.tasks.push(new_ktask(mm, memcg, adj, tgid));
    let name = match creator.vmm {
        // The VMM's one thread: QEMU's I/O thread (player/guest.rs).
        Some(_) => format!("{}/iothread", creator.name),
        None => format!("{}/thread{}", creator.name, creator.nthreads),
    };
    let vmm_io = creator.vmm;
    let mut thread = TaskRun::new(
        name,
        creator.cgroup.clone(),
        k.tasks.len() - 1,
        creator.instance,
        steps,
    );
    thread.start = k.now();
    thread.parent = Some(i);
    thread.thread = true;
    thread.vmm_io = vmm_io;
    // The same VMAs under the same names.
    thread.regions = creator.regions.clone();
    thread.kv_dbs = creator.kv_dbs.clone();
    let id = p.tasks.len();
    if let Some(g) = vmm_io {
        p.vm_io[g].thread = Some(id);
    }
    p.tasks.push(thread);
    slice.fork(k.now());
    let creator = &mut p.tasks[i];
    creator.forks.push(id);
    creator.nthreads += 1;
    creator.live_children += 1;
    Ok(None)
}

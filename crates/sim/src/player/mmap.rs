//! `mmap`: a new region of the task's address space.

use super::Player;
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::SliceEnd;
use crate::SimError;
use mmsim_spec::{MapKind, Op, Step};

pub(super) fn start(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    step: &Step,
) -> Result<Option<SliceEnd>, SimError> {
    p.done_work += 1;
    let Op::Mmap {
        name,
        pages,
        kind,
        file,
        offset,
        exec,
        content,
    } = &step.op
    else {
        unreachable!("mmap::start runs mmap steps")
    };
    let mm = k.tasks[p.tasks[i].ktask].mm;
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
    if matches!(
        kind,
        MapKind::Anon | MapKind::FilePrivate | MapKind::SharedAnon
    ) {
        vm_enough_memory(k, step, *pages)?;
    }
    let vma = match kind {
        MapKind::Anon => k.mmap_anon(mm, *pages),
        MapKind::Shmem => k.mmap_shmem(mm, file.expect("validated") as u32, *offset, *pages),
        MapKind::SharedAnon => {
            let huge = k.shm_mnt_huge();
            let inode = k.shmem_inode_create(*pages, true, huge);
            k.mmap_shmem(mm, inode, 0, *pages)
        }
        MapKind::File | MapKind::FilePrivate => k.mmap_file(
            mm,
            file.expect("validated") as u32,
            *offset,
            *pages,
            *kind == MapKind::File,
            *exec,
        ),
    };
    if let Some(c) = content {
        let rc = k
            .contents
            .register(name, c)
            .map_err(|e| super::at_step(step, e))?;
        k.vmas[vma as usize].content = rc;
    }
    p.tasks[i].regions.insert(name.clone(), vma);
    Ok(None)
}

/// `__vm_enough_memory` under vm.overcommit_memory = 0 (OVERCOMMIT_GUESS,
/// the default): a mapping that commits memory (private writable, or
/// shared anonymous) larger than all RAM and swap fails with ENOMEM.
fn vm_enough_memory(k: &Kernel, step: &Step, pages: u64) -> Result<(), SimError> {
    let ram: u64 = k.zones.iter().map(|z| z.managed).sum();
    let swap = k.swapfile.total_swap_pages().max(0) as u64;
    if pages <= ram + swap {
        return Ok(());
    }
    Err(super::at_step(
        step,
        SimError::Spec(format!(
            "found a mapping of {} MiB, more than the machine's RAM and swap together ({} MiB): Linux's heuristic overcommit (vm.overcommit_memory = 0) refuses it with ENOMEM; expected a smaller mapping (or several)",
            pages >> 8,
            (ram + swap) >> 8
        )),
    ))
}

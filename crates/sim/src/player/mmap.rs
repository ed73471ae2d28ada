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
    } = &step.op
    else {
        unreachable!("mmap::start runs mmap steps")
    };
    let mm = k.tasks[p.tasks[i].ktask].mm;
    k.charge_cost(cost_model::Fn::User, k.costs.syscall);
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
    p.tasks[i].regions.insert(name.clone(), vma);
    Ok(None)
}

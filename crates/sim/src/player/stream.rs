//! `stream`: a file read through a sliding window of mmap(2)s, each page
//! hashed (user CPU time) after its access.

use super::{after_access, Access, Activity, Player};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};
use crate::SimError;
use mmsim_spec::{Op, Step};

/// A `stream` step in progress: the window mapped now, the next access in
/// it, and where the next window starts.
pub(super) struct StreamRun {
    inode: u32,
    /// User CPU time per page read (the hashing).
    work: u64,
    next: u64,
    end: u64,
    window: u64,
    vma: Option<u32>,
    pos: u64,
    pages: u64,
}

pub(super) fn start(p: &mut Player, i: usize, step: &Step) -> Option<SliceEnd> {
    let Op::Stream {
        file,
        offset,
        length,
        window,
        work,
    } = &step.op
    else {
        unreachable!("stream::start runs stream steps")
    };
    p.tasks[i].activity = Some(Activity::Stream(StreamRun {
        inode: *file as u32,
        next: *offset,
        end: offset + length,
        window: *window,
        work: *work,
        vma: None,
        pos: 0,
        pages: 0,
    }));
    None
}

/// Windows of the stream until it ends or the slice does.
pub(super) fn run(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    mut sr: StreamRun,
) -> Result<Option<SliceEnd>, SimError> {
    let ktask = p.tasks[i].ktask;
    let mm = k.tasks[ktask].mm;
    loop {
        if sr.vma.is_none() || sr.pos == sr.pages {
            if let Some(v) = sr.vma.take() {
                k.charge_cost(cost_model::Fn::User, k.costs.syscall);
                k.munmap(v);
            }
            if sr.next >= sr.end {
                return Ok(None);
            }
            let n = sr.window.min(sr.end - sr.next);
            k.charge_cost(cost_model::Fn::User, k.costs.syscall);
            sr.vma = Some(k.mmap_file(mm, sr.inode, sr.next, n, true, false));
            (sr.pos, sr.pages) = (0, n);
            sr.next += n;
        }
        let vma = sr.vma.expect("a window is mapped");
        match p.play_access(k, vma, sr.pos as usize, false)? {
            Access::Sleep(until) => {
                p.tasks[i].activity = Some(Activity::Stream(sr));
                return Ok(Some(SliceEnd::Sleep(until)));
            }
            Access::Done => {
                sr.pos += 1;
                k.charge_user(sr.work);
                p.done_work += sr.work / mmsim_spec::work::NS_PER_OP;
            }
            Access::Again => {}
        }
        if let Some(end) = after_access(k, ktask, slice) {
            p.tasks[i].activity = Some(Activity::Stream(sr));
            return Ok(Some(end));
        }
    }
}

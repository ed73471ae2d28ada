//! `read` and `write`: read(2) or write(2) calls of `chunk` pages over a
//! file, page by page through the page cache (or tmpfs).

use super::{after_access, Activity, Player};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::mm::memory::FaultError;
use crate::sched::rq::{Slice, SliceEnd};
use crate::SimError;
use mmsim_spec::{Op, Step};

/// A `read` or `write` step in progress: the next page, the end of the
/// current call, and the open file's readahead state.
pub(super) struct FileIoRun {
    inode: u32,
    shmem: bool,
    write: bool,
    next: u64,
    end: u64,
    chunk: u64,
    call_end: u64,
    ra: crate::mm::readahead::FileRa,
}

pub(super) fn start(p: &mut Player, i: usize, k: &Kernel, step: &Step) -> Option<SliceEnd> {
    let Op::FileIo {
        write,
        file,
        offset,
        length,
        chunk,
    } = &step.op
    else {
        unreachable!("file_io::start runs read and write steps")
    };
    let inode = *file as u32;
    let f = &k.inodes[inode as usize];
    let ra_pages = f.disk.map_or(0, |d| k.disks[d as usize].ra_pages);
    p.tasks[i].activity = Some(Activity::FileIo(FileIoRun {
        inode,
        shmem: f.is_shmem(),
        write: *write,
        next: *offset,
        end: offset + length,
        chunk: *chunk,
        call_end: *offset,
        ra: crate::mm::readahead::FileRa::new(ra_pages),
    }));
    None
}

/// Pages of the read or write until it ends or the slice does; a page
/// that must wait for I/O puts the task to sleep and is tried again when
/// it wakes.
pub(super) fn run(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    mut io: FileIoRun,
) -> Result<Option<SliceEnd>, SimError> {
    let ktask = p.tasks[i].ktask;
    let memcg = k.tasks[ktask].memcg;
    while io.next < io.end {
        if io.next == io.call_end {
            k.charge_cost(cost_model::Fn::User, k.costs.syscall);
            io.call_end = (io.next + io.chunk).min(io.end);
        }
        k.process_io_completions(k.now());
        let r = if io.shmem {
            k.shmem_file_io_page(io.inode, io.next, io.write, memcg)
        } else if io.write {
            k.filemap_write_page(io.inode, io.next, memcg)
        } else {
            k.filemap_read_page(io.inode, io.next, io.call_end, &mut io.ra, memcg)
        };
        match r {
            Ok(()) => io.next += 1,
            Err(FaultError::Wait(t) | FaultError::Retry(t)) => {
                p.tasks[i].activity = Some(Activity::FileIo(io));
                return Ok(Some(SliceEnd::Sleep(t.max(k.now()))));
            }
            Err(e) => return Err(e.into()),
        }
        p.done_work += 1;
        if let Some(end) = after_access(k, ktask, slice) {
            p.tasks[i].activity = Some(Activity::FileIo(io));
            return Ok(Some(end));
        }
    }
    Ok(None)
}

//! `read` and `write`: read(2) or write(2) calls of `chunk` pages over a
//! file, page by page through the page cache (or tmpfs).

use super::{after_access, Activity, Player};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::mm::memory::{FaultError, MAX_FAULT_ATTEMPTS};
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
    /// Waits for I/O on the page at `next` so far (`MAX_FAULT_ATTEMPTS`).
    attempts: u32,
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
        attempts: 0,
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
            Ok(()) => {
                io.next += 1;
                io.attempts = 0;
            }
            Err(FaultError::Wait(t) | FaultError::Retry(t)) => {
                // The fault path's bound (mmsim's own: the kernel has
                // none): a page read in and reclaimed again before the call
                // copies it, over and over. filemap_update_page drops its
                // reference while it waits for a readahead's I/O, as here;
                // how soon the woken task runs (on one CPU mmsim lets the
                // running slice end first) decides whether reclaim gets
                // there before it.
                io.attempts += 1;
                if io.attempts >= MAX_FAULT_ATTEMPTS {
                    return Err(SimError::Unmodelled(format!(
                        "a {} of a file page waited for its I/O {MAX_FAULT_ATTEMPTS} times in a row, each time finding the page reclaimed again before the call could copy it (other tasks' reclaim took it back): the working set thrashes, and mmsim stops rather than go round further; expected more memory for the workload (machine.memory, a cgroup's memory_max)",
                        if io.write { "write(2)" } else { "read(2)" }
                    )));
                }
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

//! Each step op executed with real syscalls, one module per op (the spec
//! side of each is in mmsim_spec's `ops/`). `run_step` hands a step to
//! its op's module: adding an op to the runner is its file here and its
//! arm there.

mod drop_caches;
mod file_io;
mod fork;
mod fsync;
mod kvstore;
mod madvise;
mod mmap;
mod munmap;
mod phase;
mod reclaim;
mod repeat;
mod set;
mod stream;
mod swap;
mod thread;
mod time;
mod touch;

#[cfg(test)]
pub(crate) use file_io::file_io;
pub(crate) use thread::{Spawner, Threaded};

use crate::exec::Child;
use mmsim_spec::{Op, Step};

/// Runs one step in process `c`.
pub(crate) fn run_step<'s>(c: &mut Child<'s>, s: &'s Step) -> Result<(), String> {
    // What an op reports of itself is prefixed with its step's line.
    let at = |e: String| format!("line {}: {e}", s.line);
    match &s.op {
        Op::Mmap {
            name,
            kind,
            pages,
            file,
            offset,
            exec,
            content,
        } => mmap::run(
            c,
            name,
            (*kind, *pages, *file, *offset, *exec),
            content.as_ref(),
        )
        .map_err(at),
        Op::Munmap { region } => munmap::run(c, region).map_err(at),
        Op::Touch(t) => touch::run(c, t).map_err(at),
        Op::Madvise {
            region,
            advice,
            offset,
            length,
        } => madvise::run(c, region, *advice, *offset, *length).map_err(at),
        Op::FileIo {
            write,
            file,
            offset,
            length,
            chunk,
        } => file_io::run(c, *write, *file, *offset, *length, *chunk).map_err(at),
        Op::Fsync { file } => fsync::run(c, *file).map_err(at),
        Op::Stream {
            file,
            offset,
            length,
            window,
            work,
        } => stream::run(c, *file, *offset, *length, *window, *work).map_err(at),
        Op::KvStore(kv) => kvstore::run(c, kv).map_err(at),
        Op::Swapoff { device } => swap::run(c, *device, false).map_err(at),
        Op::Swapon { device } => swap::run(c, *device, true).map_err(at),
        Op::Set(setting) => set::run(setting).map_err(at),
        Op::DropCaches => drop_caches::run().map_err(at),
        Op::Reclaim {
            cgroup,
            pages,
            swappiness,
        } => reclaim::run(cgroup, *pages, *swappiness).map_err(at),
        Op::Sleep { ns } => time::sleep(*ns),
        Op::Compute { ns } => time::compute(*ns),
        Op::Phase { name } => phase::run(c, name),
        // These name their lines themselves: a fork's, spawn's or thread's
        // own, the line of the fork or thread whose child failed for a
        // wait, that of the step that failed in a repeat's body.
        Op::Fork { steps } => c.fork(steps, s.line, false),
        Op::Spawn { steps } => c.fork(steps, s.line, true),
        Op::Thread { steps } => c.thread(steps, s.line),
        Op::Wait => c.wait_all(),
        Op::Repeat { times, steps } => repeat::run(c, *times, steps),
    }
}

//! `fork` and `spawn`: a child process that runs a body of steps beside
//! this one and reports to it.

use crate::exec::{Child, Forked, Started};
use mmsim_spec::Step;
use std::io::Read;
use std::os::fd::FromRawFd;

/// A pipe's read end that reading does not close.
struct ReadEnd(std::mem::ManuallyDrop<std::fs::File>);

impl Read for ReadEnd {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (*self.0).read(buf)
    }
}

impl<'s> Child<'s> {
    /// fork(2): the child continues with a copy of this process's regions
    /// and tokens (private regions copy-on-write, shared ones shared), runs
    /// `steps`, reports and exits; this process goes on at once and reads
    /// the child's report on a thread, so the child never blocks writing
    /// it. For a `spawn` step the child then drops every region it
    /// inherited, as exec would give it a fresh address space (the runner's
    /// own memory stays: it does not exec). Only the forking thread goes
    /// on in the child; the others' regions stay mapped there, unused.
    pub(crate) fn fork(
        &mut self,
        steps: &'s [Step],
        line: usize,
        spawn: bool,
    ) -> Result<(), String> {
        let (kind, k) = if spawn {
            self.spawns += 1;
            ("spawn", self.spawns - 1)
        } else {
            self.forks += 1;
            ("fork", self.forks - 1)
        };
        let mut fds = [0; 2];
        // SAFETY: fds is a two-element array.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(format!(
                "line {line}: pipe: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: the child only runs this process's code and then _exit()s.
        // Other threads (report readers, the task's threads) do not exist in
        // the child; glibc's fork keeps malloc usable there, and the runner
        // takes no lock of its own that one of them could hold at the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: both ends are ours.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            return Err(format!("line {line}: fork: {e}"));
        }
        if pid == 0 {
            // Dies with its parent: a killed runner leaves no task behind
            // holding swap or a cgroup the teardown must remove.
            // SAFETY: prctl(PR_SET_PDEATHSIG) has no memory-safety preconditions.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            // The child: its own pipe to report on; the parent's pipe ends
            // and its children's pipes are not its business.
            // SAFETY: fds inherited from the parent, unused here.
            unsafe {
                libc::close(fds[0]);
                libc::close(self.report_fd);
                for s in &self.pending {
                    if let Started::Process(f) = s {
                        libc::close(f.fd);
                    }
                }
            }
            // The reader threads and the task's threads do not exist in this
            // process. Its own threads start in the copy of the task's scope,
            // which it never leaves (it exits inside `fork`), so the scope's
            // count of the threads that are not here is never waited on.
            std::mem::forget(std::mem::take(&mut self.pending));
            self.report_fd = fds[1];
            self.reports.clear();
            self.name = format!("{}/{kind}{k}", self.name);
            self.forks = 0;
            self.spawns = 0;
            self.threads = 0;
            if spawn {
                self.unmap_all();
            }
            self.phases.clear();
            self.open = None;
            self.checked = 0;
            self.violations = 0;
            self.kv = None;
            self.open_kv = None;
            self.open_requests = 0;
            let report =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.main(steps, None)));
            match report {
                Ok(r) => self.report_and_exit(&r),
                // SAFETY: never unwind into the parent's frames.
                Err(_) => unsafe { libc::_exit(101) },
            }
        }
        // SAFETY: the parent's copy of the write end.
        unsafe { libc::close(fds[1]) };
        let fd = fds[0];
        // The read end stays open until the child is waited for
        // (`wait_process` closes it), not until its report is read: a
        // child forked later closes the read ends of the reports still
        // pending, and a number closed early could by then be that
        // child's own pipe.
        // SAFETY: fd is the pipe's read end; it is closed by the parent's
        // wait, after the reader is joined (ManuallyDrop: not by it).
        let f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
        let reader = crate::exec::read_report(ReadEnd(f), self.t0);
        self.pending.push(Started::Process(Forked {
            pid,
            fd,
            line,
            name: format!("{}/{kind}{k}", self.name),
            cgroup: self.cgroup.clone(),
            start_ns: self.now(),
            reader,
        }));
        Ok(())
    }
}

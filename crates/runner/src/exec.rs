//! Executes a spec's tasks with real syscalls: one process per task
//! instance, joined to its cgroup, touching one 4 KiB page per access in
//! exactly the order the simulator uses, with content tokens checked on
//! every access and /proc/vmstat snapshotted at every phase mark. A `fork`
//! step forks a real child process, which runs its steps on its copy of the
//! address space and reports like a task of its own. A `thread` step starts
//! a real thread of the process (std::thread, in a scope the task process
//! runs in), which runs its steps on the same regions and reports like a
//! forked child; `wait` and the task's end join threads as they wait for
//! children, and their reports keep the order the two were started in.
//!
//! Private anonymous regions keep their tokens in the process (copied on
//! fork like the memory), as atomics its threads share. Shared regions — a
//! file (on tmpfs or a disk) mapped MAP_SHARED, a MAP_SHARED|MAP_ANONYMOUS
//! region — keep them in shared memory (`SharedTokens`), one per page of
//! the shared object, so a process checks what any process last wrote
//! there. A MAP_PRIVATE mapping of a disk file reads the file's tokens
//! until the process writes a page, and its own (copied on fork, shared
//! with its threads) from then on.

use crate::ops::{Spawner, Threaded};
use crate::procfs;
use crate::region::{unmap_region, Region};
use crate::setup::{cgroup_dir, SharedFile, SwapNode};
use mmsim_spec::output::{CgroupResult, KvResult, PhaseResult, Pressure, TaskResult};
use mmsim_spec::{Op, Spec, Step};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::thread::JoinHandle;
use std::time::Instant;

/// What a task process (or a process a `fork` step made) sends back to its
/// parent.
#[derive(Serialize, Deserialize)]
pub struct Report {
    pub task: TaskResult,
    pub pages_checked: u64,
    pub violations: u64,
    /// Every spec cgroup, read when this task finished its steps.
    pub cgroups: BTreeMap<String, CgroupResult>,
    /// zram's mm_stat then, when a region states its content.
    #[serde(default)]
    pub zram: Vec<mmsim_spec::output::ZramMmStat>,
    /// zswap's debugfs counters then, when the spec sets zswap.
    pub zswap: Option<mmsim_spec::output::ZswapStats>,
    pub error: Option<String>,
    /// The reports of the processes this one forked or spawned and of the
    /// threads it started, in the order they were started.
    #[serde(default)]
    pub forks: Vec<Report>,
}

/// A process forked by a `fork` step and not yet waited for.
pub(crate) struct Forked {
    pub(crate) pid: libc::pid_t,
    /// The read end of its report pipe (owned by `reader`).
    pub(crate) fd: libc::c_int,
    /// The `fork` step's line.
    pub(crate) line: usize,
    /// The child's task name, cgroup and start: its report if the OOM
    /// killer ends it.
    pub(crate) name: String,
    pub(crate) cgroup: String,
    pub(crate) start_ns: u64,
    /// The report's text, and when the pipe closed (ns since t0: the
    /// child's exit, if it sent nothing).
    pub(crate) reader: JoinHandle<(String, u64)>,
}

/// A child process or a thread started and not yet waited for.
pub(crate) enum Started<'s> {
    Process(Forked),
    Thread(Threaded<'s>),
}

/// A task process, a process a `fork` or `spawn` step made, or a thread a
/// `thread` step started: what it runs its steps with, and what it reports.
pub(crate) struct Child<'s> {
    pub(crate) spec: &'s Spec,
    pub(crate) swaps: &'s [SwapNode],
    pub(crate) files: &'s [SharedFile],
    pub(crate) t0: Instant,
    pub(crate) instance: u32,
    pub(crate) name: String,
    pub(crate) cgroup: String,
    pub(crate) regions: HashMap<String, Region>,
    pub(crate) phases: Vec<PhaseResult>,
    pub(crate) open: Option<OpenPhase>,
    pub(crate) checked: u64,
    pub(crate) violations: u64,
    /// `fork` steps this process has run (names its children fork0, …).
    pub(crate) forks: u32,
    /// `spawn` steps this process has run (names its children spawn0, …).
    pub(crate) spawns: u32,
    /// `thread` steps it has run (names its threads thread0, …).
    pub(crate) threads: u32,
    /// Children and threads started and not yet waited for, in start order.
    pub(crate) pending: Vec<Started<'s>>,
    /// Reports of the children and threads waited for, in start order.
    pub(crate) reports: Vec<Report>,
    /// The write end of the pipe this process reports on (-1 in a thread,
    /// which hands its report back when it is joined).
    pub(crate) report_fd: libc::c_int,
    /// Starts threads in the scope the task process runs in (None in unit
    /// tests that start none).
    pub(crate) spawner: Option<&'s dyn Spawner<'s>>,
    /// The regions of the threads joined so far that they mapped
    /// themselves: they stay mapped until the process exits.
    pub(crate) left: Vec<Region>,
    /// The client statistics of finished kvstore steps.
    pub(crate) kv: Option<KvResult>,
    /// Each region's key-value server data, kept between kvstore steps
    /// (copied into a forked child with the memory).
    pub(crate) kv_dbs: HashMap<String, mmsim_spec::kv::KvDb>,
    /// The kvstore figures of the open phase.
    pub(crate) open_kv: Option<KvResult>,
    /// Requests the open phase's trace steps replayed.
    pub(crate) open_requests: u64,
}

impl<'s> Child<'s> {
    /// A process of `spec` that has run nothing yet, with no regions, as
    /// instance 0 of an unnamed task outside any cgroup, with no pipe.
    pub(crate) fn new(
        spec: &'s Spec,
        swaps: &'s [SwapNode],
        files: &'s [SharedFile],
        t0: Instant,
        spawner: Option<&'s dyn Spawner<'s>>,
    ) -> Child<'s> {
        Child {
            spec,
            swaps,
            files,
            t0,
            instance: 0,
            name: String::new(),
            cgroup: String::new(),
            regions: HashMap::new(),
            phases: Vec::new(),
            open: None,
            checked: 0,
            violations: 0,
            forks: 0,
            spawns: 0,
            threads: 0,
            pending: Vec::new(),
            reports: Vec::new(),
            report_fd: -1,
            spawner,
            left: Vec::new(),
            kv: None,
            kv_dbs: HashMap::new(),
            open_kv: None,
            open_requests: 0,
        }
    }

    pub(crate) fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    /// Runs `steps`, waits for every child and thread, and returns the
    /// report.
    pub(crate) fn main(&mut self, steps: &'s [Step], error: Option<String>) -> Report {
        let start = self.now();
        self.main_from(start, steps, error)
    }

    /// `main` for a task that started at `start` (a VMM, whose QEMU ran
    /// before its empty steps).
    pub(crate) fn main_from(
        &mut self,
        start: u64,
        steps: &'s [Step],
        mut error: Option<String>,
    ) -> Report {
        if error.is_none() {
            error = self.run(steps).err();
        }
        // A process waits for its children and threads before it reports,
        // so that every child's report is part of its own, and no thread
        // touches a region after its process (or creating thread) is done.
        if let Err(e) = self.wait_all() {
            error.get_or_insert(e);
        }
        // The task ends before its last phase's counters are read.
        let end = self.now();
        self.close_phase_at(end);
        let cgroups = cgroups_now(self.spec);
        let zram = match crate::region::has_content(self.spec) {
            true => crate::setup::zram_mm_stat(),
            false => Vec::new(),
        };
        let zswap = self
            .spec
            .sysfs
            .zswap
            .configured
            .then(crate::setup::zswap_debugfs)
            .flatten();
        Report {
            task: TaskResult {
                name: self.name.clone(),
                cgroup: self.cgroup.clone(),
                start_ns: start,
                end_ns: end,
                phases: std::mem::take(&mut self.phases),
                kv: self.kv,
                oom_kill: None,
            },
            pages_checked: self.checked,
            violations: self.violations,
            cgroups,
            zram,
            zswap,
            error,
            forks: std::mem::take(&mut self.reports),
        }
    }

    /// Builds the key-value servers of the task's kvstore steps with
    /// their bookkeeping present, before the task joins its cgroup (see
    /// KvDb::prefault): charged outside the cgroup, never reclaimed.
    pub(crate) fn prefault_kv_dbs(&mut self, steps: &[mmsim_spec::Step]) {
        mmsim_spec::for_each_op_in(steps, &mut |op| {
            if let Op::KvStore(kv) = op {
                self.kv_dbs.entry(kv.region.clone()).or_insert_with(|| {
                    let mut db = mmsim_spec::kv::KvDb::new(kv);
                    db.prefault();
                    db
                });
            }
        });
    }

    /// Sends `report` on this process's pipe and leaves without running
    /// anything of the parent's (atexit handlers, destructors).
    pub(crate) fn report_and_exit(&self, report: &Report) -> ! {
        // SAFETY: report_fd is this process's write end, owned here.
        let mut out = unsafe { std::fs::File::from_raw_fd(self.report_fd) };
        let _ = out.write_all(serde_json::to_string(report).expect("report").as_bytes());
        drop(out);
        // SAFETY: _exit has no preconditions.
        unsafe { libc::_exit(0) }
    }

    /// Runs `steps` in order, each by its op's module (`crate::ops`).
    pub(crate) fn run(&mut self, steps: &'s [Step]) -> Result<(), String> {
        for s in steps {
            crate::ops::run_step(self, s)?;
        }
        Ok(())
    }

    /// Unmaps every region, those its joined threads left too (a spawned
    /// program starts without them).
    pub(crate) fn unmap_all(&mut self) {
        self.kv_dbs.clear();
        for (_, r) in std::mem::take(&mut self.regions) {
            unmap_region(r);
        }
        for r in std::mem::take(&mut self.left) {
            unmap_region(r);
        }
    }

    /// wait(2) for every child forked so far and joins every thread
    /// started so far, in start order, collecting their reports.
    pub(crate) fn wait_all(&mut self) -> Result<(), String> {
        let mut error = None;
        for s in std::mem::take(&mut self.pending) {
            let r = match s {
                Started::Process(f) => self.wait_process(f),
                Started::Thread(t) => self.join_thread(t),
            };
            if let Err(e) = r {
                error.get_or_insert(e);
            }
        }
        error.map_or(Ok(()), Err)
    }

    /// wait(2) for a forked child, and its report.
    fn wait_process(&mut self, f: Forked) -> Result<(), String> {
        let (text, eof_ns) = f.reader.join().unwrap_or_default();
        // SAFETY: the pipe's read end, which the joined reader left open.
        unsafe { libc::close(f.fd) };
        let (line, pid) = (f.line, f.pid);
        let who = (f.name, f.cgroup, f.start_ns);
        let r = reap_report(pid, &text, eof_ns, who, self.spec)
            .map_err(|e| format!("line {line}: the process forked here (pid {pid}) {e}"))?;
        self.reports.push(r);
        Ok(())
    }

    pub(crate) fn close_phase(&mut self) {
        let end_ns = self.now();
        self.close_phase_at(end_ns);
    }

    /// Closes the open phase, which ended at `end_ns`: its counters are
    /// read after that (phase.rs says why), pressure first, so that the
    /// pressure window ends as near the phase's end as it can.
    pub(crate) fn close_phase_at(&mut self, end_ns: u64) {
        if let Some(OpenPhase {
            name,
            start,
            vmstat: before,
            pressure: psi,
        }) = self.open.take()
        {
            let pressure = procfs::pressure_since(psi);
            let after = procfs::vmstat();
            self.phases.push(PhaseResult {
                name,
                start_ns: start,
                end_ns,
                vmstat: procfs::delta(&after, &before),
                kv: self.open_kv.take(),
                trace_requests: std::mem::take(&mut self.open_requests),
                lru_gen: procfs::lru_gen(),
                pressure,
            });
        }
    }
}

/// The phase a task has open: its name, its start, and /proc/vmstat and
/// /proc/pressure then.
pub(crate) struct OpenPhase {
    pub(crate) name: String,
    pub(crate) start: u64,
    pub(crate) vmstat: BTreeMap<String, i64>,
    pub(crate) pressure: Option<Pressure>,
}

/// waitpid(2) for child `pid`, then its report `text`; a child SIGKILL
/// ended before it reported (the OOM killer) gets one written for it from
/// `who` (its task name, cgroup and start), its pipe's close at `eof_ns`
/// and the kernel log. Err: why there is none ("sent no report …").
fn reap_report(
    pid: libc::pid_t,
    text: &str,
    eof_ns: u64,
    (name, cgroup, start_ns): (String, String, u64),
    spec: &Spec,
) -> Result<Report, String> {
    let mut status = 0;
    // SAFETY: pid is our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match serde_json::from_str::<Report>(text) {
        Ok(r) => Ok(r),
        Err(_) if killed(status) => {
            let cgroups = cgroups_now(spec);
            Ok(crate::oom::killed_report(
                pid, name, cgroup, start_ns, eof_ns, cgroups,
            ))
        }
        Err(e) => Err(format!("sent no report ({e}); {}", describe_status(status))),
    }
}

/// The status of a process SIGKILL ended (the OOM killer's signal).
fn killed(status: libc::c_int) -> bool {
    libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL
}

/// A waitpid status in words.
fn describe_status(status: libc::c_int) -> String {
    if libc::WIFEXITED(status) {
        format!("it exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!(
            "it was killed by signal {}{}",
            libc::WTERMSIG(status),
            if libc::WTERMSIG(status) == libc::SIGKILL {
                " (the OOM killer?)"
            } else {
                ""
            }
        )
    } else {
        format!("wait status {status}")
    }
}

/// Runs every task instance in its own process; returns their reports,
/// each task followed by the processes it forked or spawned and the threads
/// it started (depth first, in start order).
pub fn run_tasks(
    spec: &Spec,
    swaps: &[SwapNode],
    files: &[SharedFile],
    vmms: &crate::vmm::Vmms,
    t0: Instant,
) -> Result<Vec<Report>, String> {
    let mut children = Vec::new();
    for task in &spec.tasks {
        for i in 0..task.instances {
            let name = if task.instances == 1 {
                task.name.clone()
            } else {
                format!("{}#{i}", task.name)
            };
            let cgroup = task
                .cgroup
                .map(|c| spec.cgroups[c].name.clone())
                .unwrap_or_default();
            let (task_name, task_cgroup) = (name.clone(), cgroup.clone());
            let mut fds = [0; 2];
            // SAFETY: fds is a two-element array.
            if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
                let e = format!("pipe: {}", std::io::Error::last_os_error());
                kill_all(&children);
                return Err(e);
            }
            // SAFETY: single-threaded; the child only runs our code and exits.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                let e = format!("fork: {}", std::io::Error::last_os_error());
                kill_all(&children);
                return Err(e);
            }
            if pid == 0 {
                // Dies with its parent: a killed runner leaves no task behind
                // holding swap or a cgroup the teardown must remove.
                // SAFETY: prctl(PR_SET_PDEATHSIG) has no memory-safety preconditions.
                unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
                // SAFETY: the read end is the runner's.
                unsafe { libc::close(fds[0]) };
                // The task's threads run in this scope, which outlives them
                // all. It never returns: the process exits inside it.
                std::thread::scope(|scope| -> std::convert::Infallible {
                    let mut c = Child {
                        instance: i,
                        name,
                        cgroup,
                        report_fd: fds[1],
                        ..Child::new(spec, swaps, files, t0, Some(scope))
                    };
                    let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        c.prefault_kv_dbs(&task.steps);
                        let mut error = set_oom_score_adj(task.oom_score_adj)
                            .and_then(|()| join_cgroup(&c.cgroup))
                            .err();
                        // A guest's VMM task: QEMU, in its cgroup.
                        let start = c.now();
                        if let (None, Some(argv)) = (&error, vmms.get(&task.name)) {
                            error = crate::vmm::run(&task.name, argv).err();
                        }
                        c.main_from(start, &task.steps, error)
                    }));
                    match report {
                        Ok(r) => c.report_and_exit(&r),
                        // SAFETY: never unwind into the runner's frames.
                        Err(_) => unsafe { libc::_exit(101) },
                    }
                });
            }
            // SAFETY: the parent's copy of the write end.
            unsafe { libc::close(fds[1]) };
            children.push(TaskProcess {
                pid,
                fd: fds[0],
                name: task_name,
                cgroup: task_cgroup,
                start_ns: t0.elapsed().as_nanos() as u64,
            });
        }
    }
    // Read every report at once, so no child waits to write a long report
    // (and stays resident) until the children before it have finished.
    let readers: Vec<(TaskProcess, JoinHandle<(String, u64)>)> = children
        .into_iter()
        .map(|c| {
            // SAFETY: fd is the pipe's read end, owned here.
            let f = unsafe { std::fs::File::from_raw_fd(c.fd) };
            (c, read_report(f, t0))
        })
        .collect();
    let mut results = Vec::new();
    for (c, reader) in readers {
        let (text, eof_ns) = reader.join().unwrap_or_default();
        let pid = c.pid;
        let who = (c.name, c.cgroup, c.start_ns);
        results.push(
            reap_report(pid, &text, eof_ns, who, spec)
                .map_err(|e| format!("task process {pid} {e}")),
        );
    }
    let mut flat = Vec::new();
    for r in results {
        flatten(r?, &mut flat);
    }
    Ok(flat)
}

/// A report, then its children's and threads' reports, depth first.
fn flatten(mut r: Report, out: &mut Vec<Report>) {
    let forks = std::mem::take(&mut r.forks);
    out.push(r);
    for f in forks {
        flatten(f, out);
    }
}

fn join_cgroup(cgroup: &str) -> Result<(), String> {
    if cgroup.is_empty() {
        return Ok(());
    }
    let procs = format!("{}/cgroup.procs", cgroup_dir(cgroup));
    std::fs::write(&procs, std::process::id().to_string())
        .map_err(|e| format!("cannot join {procs}: {e}"))
}

/// Every spec cgroup's state now.
fn cgroups_now(spec: &Spec) -> BTreeMap<String, CgroupResult> {
    spec.cgroups
        .iter()
        .map(|g| {
            (
                g.name.clone(),
                procfs::cgroup_snapshot(&cgroup_dir(&g.name)),
            )
        })
        .collect()
}

/// Reads a child's report on a thread until its pipe closes, and notes
/// when (the child's exit, for one the OOM killer ended).
pub(crate) fn read_report(
    mut f: impl Read + Send + 'static,
    t0: Instant,
) -> JoinHandle<(String, u64)> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = f.read_to_string(&mut text);
        (text, t0.elapsed().as_nanos() as u64)
    })
}

/// /proc/self/oom_score_adj, which forks and threads inherit; nothing to
/// write for 0 (every process's default).
fn set_oom_score_adj(adj: i16) -> Result<(), String> {
    if adj == 0 {
        return Ok(());
    }
    std::fs::write("/proc/self/oom_score_adj", adj.to_string())
        .map_err(|e| format!("cannot write oom_score_adj {adj} to /proc/self/oom_score_adj: {e}"))
}

/// A task process started by `run_tasks`, and what its report would say
/// if the OOM killer ends it before it sends one.
struct TaskProcess {
    pid: libc::pid_t,
    /// The read end of its report pipe.
    fd: libc::c_int,
    name: String,
    cgroup: String,
    start_ns: u64,
}

/// Kills and reaps the task processes already started.
fn kill_all(children: &[TaskProcess]) {
    for c in children {
        // SAFETY: our own children and pipe ends.
        unsafe {
            libc::kill(c.pid, libc::SIGKILL);
            libc::waitpid(c.pid, std::ptr::null_mut(), 0);
            libc::close(c.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::file_io;
    use crate::region::{touch, PageTokens, Tokens, PAGE, PRIVATE_TOKEN_BIT};
    use crate::shared::SharedTokens;
    use mmsim_spec::MapKind;
    use std::sync::Arc;

    fn region(pages: usize) -> (Region, Vec<u32>) {
        let mut mem = vec![0u32; pages * PAGE / 4];
        let r = Region {
            addr: mem.as_mut_ptr() as *mut u8,
            pages: pages as u64,
            tokens: Tokens::Private(Arc::new(PageTokens::new(pages))),
            content: None,
        };
        (r, mem)
    }

    /// A shared anonymous region of `pages` pages with its token array, as
    /// `Child::map` makes it for `shared_anon`.
    fn shared_region(pages: usize) -> Region {
        // SAFETY: a fresh shared anonymous mapping.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        Region {
            addr: addr as *mut u8,
            pages: pages as u64,
            tokens: Tokens::Shared {
                tokens: SharedTokens::map(pages).unwrap(),
                base: 0,
                owned: true,
            },
            content: None,
        }
    }

    #[test]
    fn shared_tokens_are_checked_across_views() {
        // Two regions over the same pages and the same token array (two
        // mappings of one file at different offsets, say).
        let mut a = shared_region(8);
        let Tokens::Shared { tokens, .. } = a.tokens else {
            unreachable!()
        };
        let mut b = Region {
            // SAFETY: page 2 of a's mapping.
            addr: unsafe { a.addr.add(2 * PAGE) },
            pages: 6,
            tokens: Tokens::Shared {
                tokens,
                base: 2,
                owned: false,
            },
            content: None,
        };
        assert_eq!(touch(&mut a, 3, true), (0, 0));
        assert_eq!(touch(&mut b, 1, false), (1, 0));
        assert_eq!(touch(&mut b, 1, true), (0, 0));
        assert_eq!(touch(&mut a, 3, false), (1, 0));
        assert_eq!(tokens.get(3), 2);
        // Someone else's token in the page is a violation.
        // SAFETY: page 3 of the mapping.
        unsafe { *(a.addr.add(3 * PAGE) as *mut u32) = 1 };
        assert_eq!(touch(&mut b, 1, false), (1, 1));
        // SAFETY: the whole mapping.
        unsafe { libc::munmap(a.addr as *mut libc::c_void, 8 * PAGE) };
        tokens.unmap();
    }

    #[test]
    fn a_forked_process_writes_what_its_parent_reads() {
        let mut r = shared_region(4);
        touch(&mut r, 0, true);
        touch(&mut r, 1, true);
        // SAFETY: the child only touches shared memory and _exit()s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let (c0, bad0) = touch(&mut r, 0, false);
            touch(&mut r, 1, true);
            touch(&mut r, 2, true);
            // SAFETY: _exit has no preconditions.
            unsafe { libc::_exit(if (c0, bad0) == (1, 0) { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        for p in 0..4 {
            assert_eq!(touch(&mut r, p, false), (1, 0), "page {p}");
        }
        let Tokens::Shared { tokens, .. } = r.tokens else {
            unreachable!()
        };
        assert_eq!((tokens.get(0), tokens.get(1), tokens.get(2)), (1, 2, 1));
    }

    #[test]
    fn file_reads_check_what_writes_and_mappings_wrote() {
        let path = format!("/tmp/mmsim-runner-test-{}", std::process::id());
        let pages = 10;
        let h = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        h.set_len((pages * PAGE) as u64).unwrap();
        let f = SharedFile {
            path: path.clone(),
            pages: pages as u64,
            tokens: SharedTokens::map(pages).unwrap(),
            disk: None,
        };
        // Pages 2..9 written in chunks of 3 (the last call is short).
        assert_eq!(file_io(&f, true, 2, 7, 3), Ok((0, 0)));
        assert_eq!(file_io(&f, true, 4, 1, 32), Ok((0, 0)));
        assert_eq!(
            (f.tokens.get(1), f.tokens.get(2), f.tokens.get(4)),
            (0, 1, 2)
        );
        assert_eq!(file_io(&f, false, 0, 10, 4), Ok((10, 0)));
        // A MAP_SHARED mapping of the file sees the same tokens.
        let mut r = Region {
            // SAFETY: a fresh shared mapping of the whole file.
            addr: unsafe {
                use std::os::fd::AsRawFd;
                libc::mmap(
                    std::ptr::null_mut(),
                    pages * PAGE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    h.as_raw_fd(),
                    0,
                )
            } as *mut u8,
            pages: pages as u64,
            tokens: Tokens::Shared {
                tokens: f.tokens,
                base: 0,
                owned: false,
            },
            content: None,
        };
        assert_ne!(r.addr as *mut libc::c_void, libc::MAP_FAILED);
        assert_eq!(touch(&mut r, 4, false), (1, 0));
        assert_eq!(touch(&mut r, 0, true), (0, 0));
        assert_eq!(file_io(&f, false, 0, 10, 32), Ok((10, 0)));
        // Someone else's token in the file is a violation.
        // SAFETY: page 5 of the mapping.
        unsafe { *(r.addr.add(5 * PAGE) as *mut u32) = 77 };
        assert_eq!(file_io(&f, false, 5, 1, 1), Ok((1, 1)));
        assert!(file_io(&f, false, 5, 6, 1).is_err());
        // SAFETY: the whole mapping.
        unsafe { libc::munmap(r.addr as *mut libc::c_void, pages * PAGE) };
        f.tokens.unmap();
        std::fs::remove_file(&path).unwrap();
    }

    /// A file of `pages` pages in /tmp holding what a disk file holds at
    /// start, with its (zeroed) token array.
    fn disk_like_file(tag: &str, pages: usize) -> SharedFile {
        use std::os::unix::fs::FileExt;
        let path = format!("/tmp/mmsim-runner-{tag}-{}", std::process::id());
        let h = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        let page = crate::setup::initial_page();
        for p in 0..pages {
            h.write_all_at(&page, (p * PAGE) as u64).unwrap();
        }
        SharedFile {
            path,
            pages: pages as u64,
            tokens: SharedTokens::map(pages).unwrap(),
            disk: Some(0),
        }
    }

    /// `Child::map` of a disk file, without a Child.
    fn map_file(f: &SharedFile, kind: MapKind, offset: u64, pages: u64) -> Region {
        let spec = mmsim_spec::parse_str(
            "[machine]\nmemory = \"512M\"\n[task.main]\nsteps = []\n",
            "t.toml",
            &[],
        )
        .unwrap();
        let c = test_child(&spec, std::slice::from_ref(f));
        c.map(kind, pages, Some(0), offset, true).unwrap()
    }

    /// A process of `spec`'s first task that has run nothing yet.
    fn test_child<'s>(spec: &'s mmsim_spec::Spec, files: &'s [SharedFile]) -> Child<'s> {
        Child::new(spec, &[], files, Instant::now(), None)
    }

    #[test]
    fn a_trace_replays_its_requests_with_the_region_checked() {
        let dir = std::env::temp_dir().join(format!("mmsim-runner-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("t.csv");
        // Each page written, then read back twice.
        let mut csv = String::new();
        for round in ["w", "r", "r"] {
            for p in 0..8 {
                csv += &format!("{p},{round}\n");
            }
        }
        std::fs::write(&trace, csv).unwrap();
        let text = format!(
            "[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n  {{ op = \"mmap\", name = \"r\", kind = \"anon\", size = \"32K\" }},\n  {{ op = \"phase\", name = \"p\" }},\n  {{ op = \"trace\", region = \"r\", file = \"{}\", write_col = 2 }},\n]\n",
            trace.display()
        );
        let spec = mmsim_spec::parse_str(&text, "t.toml", &[]).unwrap();
        let mut c = test_child(&spec, &[]);
        c.run(&spec.tasks[0].steps).unwrap();
        c.close_phase();
        assert_eq!(c.phases[0].trace_requests, 24);
        // The 16 reads check what the 8 writes left.
        assert_eq!((c.checked, c.violations), (16, 0));
    }

    #[test]
    fn a_disk_file_starts_with_data_reading_token_zero() {
        let f = disk_like_file("initial", 4);
        let mut r = map_file(&f, MapKind::File, 0, 4);
        for p in 0..4 {
            assert_eq!(touch(&mut r, p, false), (1, 0), "page {p}");
            // SAFETY: inside page p of the mapping.
            assert_eq!(unsafe { *r.addr.add(p * PAGE + 100) }, 0xa5);
        }
        assert_eq!(file_io(&f, false, 0, 4, 2), Ok((4, 0)));
        // A write through the shared mapping reaches the file.
        touch(&mut r, 2, true);
        assert_eq!(f.tokens.get(2), 1);
        assert_eq!(file_io(&f, false, 0, 4, 4), Ok((4, 0)));
        unmap_region(r);
        f.tokens.unmap();
        std::fs::remove_file(&f.path).unwrap();
    }

    #[test]
    fn a_private_file_mapping_reads_the_file_until_written() {
        let f = disk_like_file("private", 8);
        // File pages 2..8 mapped privately, executable.
        let mut r = map_file(&f, MapKind::FilePrivate, 2, 6);
        assert_eq!(touch(&mut r, 0, false), (1, 0));
        // A write to the file shows in pages not yet copied.
        assert_eq!(file_io(&f, true, 2, 2, 2), Ok((0, 0)));
        assert_eq!(touch(&mut r, 0, false), (1, 0));
        assert_eq!(touch(&mut r, 1, false), (1, 0));
        // A write through the mapping copies the page: the file keeps its
        // token and data, the mapping reads its own.
        assert_eq!(touch(&mut r, 1, true), (0, 0));
        assert_eq!(touch(&mut r, 4, true), (0, 0));
        assert_eq!((f.tokens.get(3), f.tokens.get(6)), (1, 0));
        assert_eq!(file_io(&f, false, 0, 8, 8), Ok((8, 0)));
        assert_eq!(touch(&mut r, 1, false), (1, 0));
        let Tokens::FilePrivate { own, .. } = &r.tokens else {
            unreachable!()
        };
        assert_eq!(own.get(1), PRIVATE_TOKEN_BIT | 1);
        // A later write to the file no longer shows in the copied page,
        // still in the others.
        assert_eq!(file_io(&f, true, 2, 4, 1), Ok((0, 0)));
        assert_eq!(f.tokens.get(3), 2);
        for p in 0..6 {
            assert_eq!(touch(&mut r, p, false), (1, 0), "page {p}");
        }
        // The file's token in a copied page is a violation.
        // SAFETY: page 4 of the mapping.
        unsafe { *(r.addr.add(4 * PAGE) as *mut u32) = f.tokens.get(6) };
        assert_eq!(touch(&mut r, 4, false), (1, 1));
        unmap_region(r);
        f.tokens.unmap();
        std::fs::remove_file(&f.path).unwrap();
    }

    #[test]
    fn a_forked_child_inherits_private_file_pages_copy_on_write() {
        let f = disk_like_file("privfork", 4);
        let mut r = map_file(&f, MapKind::FilePrivate, 0, 4);
        touch(&mut r, 0, true);
        // SAFETY: the child only touches its mapping, reads the file and
        // _exit()s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let mut ok = touch(&mut r, 0, false) == (1, 0);
            touch(&mut r, 0, true);
            touch(&mut r, 1, true);
            ok &= touch(&mut r, 0, false) == (1, 0) && touch(&mut r, 1, false) == (1, 0);
            ok &= file_io(&f, false, 0, 4, 4) == Ok((4, 0));
            // SAFETY: _exit has no preconditions.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        // The child's writes changed neither this process's copies nor the
        // file.
        for p in 0..4 {
            assert_eq!(touch(&mut r, p, false), (1, 0), "page {p}");
        }
        assert_eq!(f.tokens.get(1), 0);
        let Tokens::FilePrivate { own, .. } = &r.tokens else {
            unreachable!()
        };
        assert_eq!([own.get(0), own.get(1)], [PRIVATE_TOKEN_BIT | 1, 0]);
        unmap_region(r);
        f.tokens.unmap();
        std::fs::remove_file(&f.path).unwrap();
    }

    #[test]
    fn shared_token_counters_skip_zero_when_they_wrap() {
        let t = SharedTokens::map(1).unwrap();
        // SAFETY: token 0 of the mapping.
        unsafe { *(t.ptr_for_test() as *mut u32) = u32::MAX };
        assert_eq!(t.next(0), 1);
        t.unmap();
    }

    #[test]
    fn tokens_are_checked() {
        let (mut r, mut mem) = region(4);
        assert_eq!(touch(&mut r, 1, true), (0, 0));
        assert_eq!(touch(&mut r, 1, false), (1, 0));
        assert_eq!(touch(&mut r, 2, false), (1, 0));
        mem[PAGE / 4] = 0; // page 1 lost its contents
        assert_eq!(touch(&mut r, 1, false), (1, 1));
    }

    #[test]
    fn lazily_freed_pages_read_old_or_zero() {
        let (mut r, mut mem) = region(130);
        for p in [0, 1, 100] {
            touch(&mut r, p, true);
        }
        let Tokens::Private(t) = &r.tokens else {
            unreachable!()
        };
        let t = Arc::clone(t);
        t.set_lazy(0..130, true);
        assert!(t.is_lazy(100) && t.is_lazy(129));
        // Not yet discarded: the old token.
        assert_eq!(touch(&mut r, 0, false), (1, 0));
        // Discarded: zeros, and from then on only zeros.
        mem[PAGE / 4] = 0;
        assert_eq!(touch(&mut r, 1, false), (1, 0));
        assert!(!t.is_lazy(1));
        mem[PAGE / 4] = 1;
        assert_eq!(touch(&mut r, 1, false), (1, 1));
        // Written again: the new token only.
        touch(&mut r, 100, true);
        assert!(!t.is_lazy(100));
        mem[100 * PAGE / 4] = 0;
        assert_eq!(touch(&mut r, 100, false), (1, 1));
        // A page never written reads zero either way.
        assert_eq!(touch(&mut r, 129, false), (1, 0));
        drop(mem);
    }

    #[test]
    fn a_task_process_reports_its_threads_after_it_in_start_order() {
        let spec = mmsim_spec::parse_str(
            r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "r", kind = "anon", size = "64K" },
  { op = "thread", steps = [ { op = "touch", region = "r", write = 1 } ] },
  { op = "wait" },
  { op = "fork", steps = [ { op = "thread", steps = [ { op = "touch", region = "r" } ] } ] },
  { op = "thread", steps = [ { op = "touch", region = "r" } ] },
  { op = "touch", region = "r" },
]
"#,
            "t.toml",
            &[],
        )
        .unwrap();
        let reports = run_tasks(&spec, &[], &[], &Default::default(), Instant::now()).unwrap();
        let names: Vec<&str> = reports.iter().map(|r| r.task.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "main",
                "main/thread0",
                "main/fork0",
                "main/fork0/thread0",
                "main/thread1"
            ]
        );
        let checked: Vec<(u64, u64)> = (reports.iter())
            .map(|r| (r.pages_checked, r.violations))
            .collect();
        assert_eq!(checked, [(16, 0), (0, 0), (0, 0), (16, 0), (16, 0)]);
        assert!(reports.iter().all(|r| r.error.is_none()));
    }

    #[test]
    fn lazy_ranges_set_and_clear_whole_and_partial_words() {
        let t = PageTokens::new(200);
        assert!(!t.is_lazy(5));
        t.set_lazy(3..140, true);
        let lazy: Vec<usize> = (0..200).filter(|&p| t.is_lazy(p)).collect();
        assert_eq!(lazy, (3..140).collect::<Vec<_>>());
        t.clear(60..130);
        let lazy: Vec<usize> = (0..200).filter(|&p| t.is_lazy(p)).collect();
        assert_eq!(lazy, (3..60).chain(130..140).collect::<Vec<_>>());
        t.set_lazy(0..200, false);
        assert!((0..200).all(|p| !t.is_lazy(p)));
    }
}

//! Executes a spec's tasks with real syscalls: one process per task
//! instance, joined to its cgroup, touching one 4 KiB page per access in
//! exactly the order the simulator uses, with content tokens checked on
//! every access and /proc/vmstat snapshotted at every phase mark.

use crate::procfs;
use crate::setup::cgroup_dir;
use mmsim_spec::output::{CgroupResult, PhaseResult, TaskResult};
use mmsim_spec::stream::{access_is_write, access_page, TouchStream};
use mmsim_spec::{Op, Spec, Step};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::time::Instant;

const PAGE: usize = 4096;

/// What a task process sends back to the runner.
#[derive(Serialize, Deserialize)]
pub struct Report {
    pub task: TaskResult,
    pub pages_checked: u64,
    pub violations: u64,
    /// Every spec cgroup, read when this task finished its steps.
    pub cgroups: BTreeMap<String, CgroupResult>,
    pub error: Option<String>,
}

struct Region {
    addr: *mut u8,
    pages: u64,
    /// What this process last wrote to each page (0 = never written).
    versions: Vec<u32>,
}

struct Child<'s> {
    spec: &'s Spec,
    t0: Instant,
    instance: u32,
    regions: HashMap<String, Region>,
    phases: Vec<PhaseResult>,
    open: Option<(String, u64, BTreeMap<String, i64>)>,
    checked: u64,
    violations: u64,
}

impl Child<'_> {
    fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    fn run(&mut self, steps: &[Step]) -> Result<(), String> {
        for s in steps {
            match &s.op {
                Op::Mmap { name, pages, .. } => {
                    let len = *pages as usize * PAGE;
                    // SAFETY: a fresh private anonymous mapping.
                    let addr = unsafe {
                        libc::mmap(
                            std::ptr::null_mut(),
                            len,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        )
                    };
                    if addr == libc::MAP_FAILED {
                        return Err(format!(
                            "line {}: mmap of {len} bytes failed: {}",
                            s.line,
                            std::io::Error::last_os_error()
                        ));
                    }
                    self.regions.insert(
                        name.clone(),
                        Region {
                            addr: addr as *mut u8,
                            pages: *pages,
                            versions: vec![0; *pages as usize],
                        },
                    );
                }
                Op::Munmap { region } => {
                    let r = self
                        .regions
                        .remove(region)
                        .ok_or_else(|| format!("line {}: no region {region}", s.line))?;
                    // SAFETY: the whole mapping made by mmap above.
                    unsafe { libc::munmap(r.addr as *mut libc::c_void, r.pages as usize * PAGE) };
                }
                Op::Fork { .. }
                | Op::Wait
                | Op::Madvise { .. }
                | Op::Swapoff { .. }
                | Op::Swapon { .. } => {
                    return Err(format!(
                        "line {}: the runner cannot run this op yet",
                        s.line
                    ))
                }
                Op::Touch(t) => {
                    let instance = self.instance;
                    let r = self
                        .regions
                        .get_mut(&t.region)
                        .ok_or_else(|| format!("line {}: no region {}", s.line, t.region))?;
                    let n = t.length.unwrap_or(r.pages - t.offset);
                    let mut stream = TouchStream::new(t, t.offset, n, instance);
                    let mut buf = Vec::with_capacity(4096);
                    loop {
                        buf.clear();
                        if stream.next_batch(&mut buf, 4096) == 0 {
                            break;
                        }
                        for &a in &buf {
                            let (checked, bad) =
                                touch(r, access_page(a) as usize, access_is_write(a));
                            self.checked += checked;
                            self.violations += bad;
                        }
                    }
                }
                Op::Sleep { ns } => std::thread::sleep(std::time::Duration::from_nanos(*ns)),
                Op::Phase { name } => {
                    self.close_phase();
                    self.open = Some((name.clone(), self.now(), procfs::vmstat()));
                }
                Op::Repeat { times, steps } => {
                    for _ in 0..*times {
                        self.run(steps)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn close_phase(&mut self) {
        if let Some((name, start, before)) = self.open.take() {
            let after = procfs::vmstat();
            self.phases.push(PhaseResult {
                name,
                start_ns: start,
                end_ns: self.now(),
                vmstat: procfs::delta(&after, &before),
            });
        }
    }
}

/// One access. A read checks the page's content token; a write stores the
/// next token with a plain store, so the hardware makes exactly one write
/// access (one write fault on a missing page). An atomic exchange would
/// check writes too, but QEMU's TCG performs it as a read probe and then a
/// write, which faults twice.
#[inline]
fn touch(r: &mut Region, page: usize, write: bool) -> (u64, u64) {
    // SAFETY: page < r.pages, inside the mapping.
    let p = unsafe { r.addr.add(page * PAGE) } as *mut u32;
    if write {
        let next = r.versions[page].wrapping_add(1).max(1);
        r.versions[page] = next;
        // SAFETY: aligned, mapped, ours.
        unsafe { std::ptr::write_volatile(p, next) };
        return (0, 0);
    }
    // SAFETY: aligned, mapped, ours.
    let found = unsafe { std::ptr::read_volatile(p) };
    (1, (found != r.versions[page]) as u64)
}

/// Runs every task instance in its own process; returns their reports.
pub fn run_tasks(spec: &Spec, t0: Instant) -> Result<Vec<Report>, String> {
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
                // SAFETY: fds[1] is the pipe's write end, owned by this process.
                let mut out = unsafe { std::fs::File::from_raw_fd(fds[1]) };
                let report = child_main(spec, &task.steps, &name, &cgroup, i, t0);
                let _ = out.write_all(serde_json::to_string(&report).expect("report").as_bytes());
                drop(out);
                // SAFETY: leave without running the parent's atexit handlers.
                unsafe { libc::_exit(0) };
            }
            // SAFETY: the parent's copy of the write end.
            unsafe { libc::close(fds[1]) };
            children.push((pid, fds[0]));
        }
    }
    // Read every report at once, so no child waits to write a long report
    // (and stays resident) until the children before it have finished.
    let readers: Vec<(libc::pid_t, std::thread::JoinHandle<String>)> = children
        .into_iter()
        .map(|(pid, fd)| {
            // SAFETY: fd is the pipe's read end, owned here.
            let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
            let reader = std::thread::spawn(move || {
                let mut text = String::new();
                let _ = f.read_to_string(&mut text);
                text
            });
            (pid, reader)
        })
        .collect();
    let mut results = Vec::new();
    for (pid, reader) in readers {
        let text = reader.join().unwrap_or_default();
        let mut status = 0;
        // SAFETY: pid is our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        results.push(
            serde_json::from_str::<Report>(&text)
                .map_err(|e| format!("task process {pid} sent no report ({e}); status {status}")),
        );
    }
    results.into_iter().collect()
}

/// Kills and reaps the task processes already started.
fn kill_all(children: &[(libc::pid_t, libc::c_int)]) {
    for &(pid, fd) in children {
        // SAFETY: our own children and pipe ends.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            libc::close(fd);
        }
    }
}

fn child_main(
    spec: &Spec,
    steps: &[Step],
    name: &str,
    cgroup: &str,
    instance: u32,
    t0: Instant,
) -> Report {
    let mut error = None;
    if !cgroup.is_empty() {
        let procs = format!("{}/cgroup.procs", cgroup_dir(cgroup));
        if let Err(e) = std::fs::write(&procs, std::process::id().to_string()) {
            error = Some(format!("cannot join {procs}: {e}"));
        }
    }
    let mut c = Child {
        spec,
        t0,
        instance,
        regions: HashMap::new(),
        phases: Vec::new(),
        open: None,
        checked: 0,
        violations: 0,
    };
    let start = c.now();
    if error.is_none() {
        error = c.run(steps).err();
    }
    c.close_phase();
    let end = c.now();
    let cgroups = c
        .spec
        .cgroups
        .iter()
        .map(|g| {
            (
                g.name.clone(),
                procfs::cgroup_snapshot(&cgroup_dir(&g.name)),
            )
        })
        .collect();
    Report {
        task: TaskResult {
            name: name.to_string(),
            cgroup: cgroup.to_string(),
            start_ns: start,
            end_ns: end,
            phases: std::mem::take(&mut c.phases),
        },
        pages_checked: c.checked,
        violations: c.violations,
        cgroups,
        error,
    }
}

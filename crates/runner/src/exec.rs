//! Executes a spec's tasks with real syscalls: one process per task
//! instance, joined to its cgroup, touching one 4 KiB page per access in
//! exactly the order the simulator uses, with content tokens checked on
//! every access and /proc/vmstat snapshotted at every phase mark. A `fork`
//! step forks a real child process, which runs its steps on its copy of the
//! address space and reports like a task of its own.
//!
//! Private anonymous regions keep their tokens in the process (copied on
//! fork like the memory). Shared regions — a file (on tmpfs or a disk)
//! mapped MAP_SHARED, a MAP_SHARED|MAP_ANONYMOUS region — keep them in
//! shared memory (`SharedTokens`), one per page of the shared object, so a
//! process checks what any process last wrote there. A MAP_PRIVATE mapping
//! of a disk file reads the file's tokens until the process writes a page,
//! and its own (copied on fork) from then on.

use crate::procfs;
use crate::setup::{cgroup_dir, SharedFile, SwapNode};
use crate::shared::SharedTokens;
use mmsim_spec::output::{CgroupResult, KvResult, PhaseResult, TaskResult};
use mmsim_spec::stream::{access_is_write, access_page, TouchStream};
use mmsim_spec::{Advice, MapKind, Op, Spec, Step};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::thread::JoinHandle;
use std::time::Instant;

const PAGE: usize = 4096;

/// What a task process (or a process a `fork` step made) sends back to its
/// parent.
#[derive(Serialize, Deserialize)]
pub struct Report {
    pub task: TaskResult,
    pub pages_checked: u64,
    pub violations: u64,
    /// Every spec cgroup, read when this task finished its steps.
    pub cgroups: BTreeMap<String, CgroupResult>,
    pub error: Option<String>,
    /// The reports of the processes this one forked, in fork order.
    #[serde(default)]
    pub forks: Vec<Report>,
}

struct Region {
    addr: *mut u8,
    pages: u64,
    tokens: Tokens,
    /// One bit per page: freed by MADV_FREE and not written since, so it
    /// reads either its last token or zero (if reclaim discarded it). Empty
    /// until the region's first MADV_FREE (which only private anonymous
    /// regions take).
    lazy: Vec<u64>,
}

/// The content tokens a region's pages are checked against.
enum Tokens {
    /// Private anonymous: what this process last wrote to each page (0 =
    /// never written, or dropped by MADV_DONTNEED).
    Private(Vec<u32>),
    /// Shared: the shared object's token array, the region's page `i`
    /// being the object's page `base + i`; `owned` for a shared anonymous
    /// region's own array (unmapped with the region), not for a file's
    /// (the runner's, for the whole run).
    Shared {
        tokens: SharedTokens,
        base: usize,
        owned: bool,
    },
    /// MAP_PRIVATE of a file: page `i` reads the file's token `base + i`
    /// (its page-cache page, whatever any process last wrote to the file)
    /// until this process writes it through the mapping; the write fault
    /// copies the page (copy-on-write) and from then on it reads the
    /// process's own token in `own[i]` (0 = not copied). The file's array
    /// is never changed through such a mapping. A forked child inherits
    /// `own` with the memory, copy-on-write like a private anonymous
    /// region.
    FilePrivate {
        file: SharedTokens,
        base: usize,
        own: Vec<u32>,
    },
}

/// The private tokens of a MAP_PRIVATE file mapping carry this bit, so
/// that one written through to the file by mistake never equals a token
/// the file's array hands out (those count up from 1 per page).
const PRIVATE_TOKEN_BIT: u32 = 1 << 31;

impl Region {
    /// A private region's tokens.
    #[inline]
    fn versions(&mut self) -> &mut [u32] {
        match &mut self.tokens {
            Tokens::Private(v) => v,
            Tokens::Shared { .. } | Tokens::FilePrivate { .. } => {
                unreachable!("only a private anonymous region has versions")
            }
        }
    }

    fn is_lazy(&self, page: usize) -> bool {
        self.lazy
            .get(page / 64)
            .is_some_and(|w| w & (1 << (page % 64)) != 0)
    }

    fn set_lazy(&mut self, pages: std::ops::Range<usize>, on: bool) {
        if self.lazy.is_empty() {
            if !on {
                return;
            }
            self.lazy = vec![0; (self.pages as usize).div_ceil(64)];
        }
        for p in pages {
            if on {
                self.lazy[p / 64] |= 1 << (p % 64);
            } else {
                self.lazy[p / 64] &= !(1 << (p % 64));
            }
        }
    }
}

/// A private region's token array, locked in memory: the harness's
/// bookkeeping (one u32 per page of the region) must not be reclaimed and
/// faulted back in. A token page swapped out and read back by a read of
/// the region, then written by a write, would count a pgreuse (and a
/// pswpin) the simulator, which has no such array, does not see. mlock
/// charges the pages as the kernel would anyway (1/1024 of the region)
/// and only keeps them off the LRU.
fn locked_tokens(pages: usize) -> Vec<u32> {
    let v = vec![0u32; pages];
    if !v.is_empty() {
        // The array stays out of THPs (under THP "always" mlock would
        // fault it in as huge pages and show in the workload's THP
        // counters): MADV_NOHUGEPAGE over its pages, from the page that
        // holds its first byte. A kernel without THP refuses (EINVAL);
        // the result is not needed.
        let start = v.as_ptr() as usize & !(PAGE - 1);
        let end = (v.as_ptr() as usize + v.len() * 4).next_multiple_of(PAGE);
        // SAFETY: advice over pages of v's own allocation.
        unsafe {
            libc::madvise(
                start as *mut libc::c_void,
                end - start,
                libc::MADV_NOHUGEPAGE,
            )
        };
        // SAFETY: the range is v's own buffer; a failed mlock (no
        // CAP_IPC_LOCK outside the guest) leaves it unlocked and harmless.
        unsafe { libc::mlock(v.as_ptr() as *const libc::c_void, v.len() * 4) };
    }
    v
}

/// A process forked by a `fork` step and not yet waited for.
struct Forked {
    pid: libc::pid_t,
    /// The read end of its report pipe (owned by `reader`).
    fd: libc::c_int,
    /// The `fork` step's line.
    line: usize,
    reader: JoinHandle<String>,
}

struct Child<'s> {
    spec: &'s Spec,
    swaps: &'s [SwapNode],
    files: &'s [SharedFile],
    t0: Instant,
    instance: u32,
    name: String,
    cgroup: String,
    regions: HashMap<String, Region>,
    phases: Vec<PhaseResult>,
    open: Option<(String, u64, BTreeMap<String, i64>)>,
    checked: u64,
    violations: u64,
    /// `fork` steps this process has run (names its children fork0, …).
    forks: u32,
    /// `spawn` steps this process has run (names its children spawn0, …).
    spawns: u32,
    pending: Vec<Forked>,
    /// Reports of the children waited for, in fork order.
    reports: Vec<Report>,
    /// The write end of the pipe this process reports on.
    report_fd: libc::c_int,
    /// The client statistics of finished kvstore steps.
    kv: Option<KvResult>,
    /// Each region's key-value server data, kept between kvstore steps
    /// (copied into a forked child with the memory).
    kv_dbs: HashMap<String, mmsim_spec::kv::KvDb>,
    /// The kvstore figures of the open phase.
    open_kv: Option<KvResult>,
    /// Requests the open phase's trace steps replayed.
    open_requests: u64,
}

impl Child<'_> {
    fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    /// Runs `steps`, waits for every child, and returns the report.
    fn main(&mut self, steps: &[Step], mut error: Option<String>) -> Report {
        let start = self.now();
        if error.is_none() {
            error = self.run(steps).err();
        }
        // A process waits for its children before it reports, so that
        // every child's report is part of its own.
        if let Err(e) = self.wait_all() {
            error.get_or_insert(e);
        }
        self.close_phase();
        let end = self.now();
        let cgroups = self
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
                name: self.name.clone(),
                cgroup: self.cgroup.clone(),
                start_ns: start,
                end_ns: end,
                phases: std::mem::take(&mut self.phases),
                kv: self.kv,
            },
            pages_checked: self.checked,
            violations: self.violations,
            cgroups,
            error,
            forks: std::mem::take(&mut self.reports),
        }
    }

    /// Builds the key-value servers of the task's kvstore steps with
    /// their bookkeeping present, before the task joins its cgroup (see
    /// KvDb::prefault): charged outside the cgroup, never reclaimed.
    fn prefault_kv_dbs(&mut self, steps: &[mmsim_spec::Step]) {
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
    fn report_and_exit(&self, report: &Report) -> ! {
        // SAFETY: report_fd is this process's write end, owned here.
        let mut out = unsafe { std::fs::File::from_raw_fd(self.report_fd) };
        let _ = out.write_all(serde_json::to_string(report).expect("report").as_bytes());
        drop(out);
        // SAFETY: _exit has no preconditions.
        unsafe { libc::_exit(0) }
    }

    fn run(&mut self, steps: &[Step]) -> Result<(), String> {
        for s in steps {
            match &s.op {
                Op::Mmap {
                    name,
                    kind,
                    pages,
                    file,
                    offset,
                    exec,
                } => {
                    let r = self
                        .map(*kind, *pages, *file, *offset, *exec)
                        .map_err(|e| format!("line {}: {e}", s.line))?;
                    self.regions.insert(name.clone(), r);
                }
                Op::Munmap { region } => {
                    let r = self
                        .regions
                        .remove(region)
                        .ok_or_else(|| format!("line {}: no region {region}", s.line))?;
                    self.kv_dbs.remove(region);
                    unmap_region(r);
                }
                Op::Touch(t) => {
                    let instance = self.instance;
                    let r = self
                        .regions
                        .get_mut(&t.region)
                        .ok_or_else(|| format!("line {}: no region {}", s.line, t.region))?;
                    let n = t.length.unwrap_or(r.pages - t.offset);
                    let at = |e: mmsim_spec::trace::TraceError| format!("line {}: {e}", s.line);
                    let mut stream = TouchStream::new(t, t.offset, n, instance).map_err(at)?;
                    // The trace's own page cache must not share the run's
                    // memory cgroup with the workload.
                    stream.drop_behind();
                    let mut buf = Vec::with_capacity(4096);
                    loop {
                        buf.clear();
                        let got = stream.next_batch(&mut buf, 4096).map_err(at)?;
                        if got == 0 {
                            break;
                        }
                        if stream.is_trace() {
                            self.open_requests += got as u64;
                        }
                        for &a in &buf {
                            let (checked, bad) =
                                touch(r, access_page(a) as usize, access_is_write(a));
                            self.checked += checked;
                            self.violations += bad;
                        }
                    }
                }
                Op::FileIo {
                    write,
                    file,
                    offset,
                    length,
                    chunk,
                } => {
                    let f = self
                        .files
                        .get(*file)
                        .ok_or_else(|| format!("line {}: there is no file {file}", s.line))?;
                    let (checked, bad) = file_io(f, *write, *offset, *length, *chunk)
                        .map_err(|e| format!("line {}: {e}", s.line))?;
                    self.checked += checked;
                    self.violations += bad;
                }
                Op::Fsync { file } => {
                    let f = self
                        .files
                        .get(*file)
                        .ok_or_else(|| format!("line {}: there is no file {file}", s.line))?;
                    open_file(f)
                        .and_then(|h| {
                            h.sync_all()
                                .map_err(|e| format!("fsync of {}: {e}", f.path))
                        })
                        .map_err(|e| format!("line {}: {e}", s.line))?;
                }
                Op::Stream {
                    file,
                    offset,
                    length,
                    window,
                    work,
                } => {
                    let end = offset + length;
                    let mut next = *offset;
                    // MAP_SHARED, read only: a disk file's page cache, or
                    // a tmpfs file's shmem pages.
                    let kind = match self.files.get(*file).and_then(|f| f.disk) {
                        Some(_) => MapKind::File,
                        None => MapKind::Shmem,
                    };
                    while next < end {
                        let n = (*window).min(end - next);
                        let mut r = self
                            .map(kind, n, Some(*file), next, false)
                            .map_err(|e| format!("line {}: {e}", s.line))?;
                        for p in 0..n as usize {
                            let (c, bad) = touch(&mut r, p, false);
                            self.checked += c;
                            self.violations += bad;
                            spin(*work);
                        }
                        unmap_region(r);
                        next += n;
                    }
                }
                Op::Set(setting) => {
                    write_setting(setting).map_err(|e| format!("line {}: {e}", s.line))?
                }
                Op::DropCaches => {
                    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
                        format!(
                            "line {}: cannot write \"3\" to /proc/sys/vm/drop_caches: {e}",
                            s.line
                        )
                    })?;
                }
                Op::KvStore(kv) => {
                    let r = self
                        .regions
                        .get_mut(&kv.region)
                        .ok_or_else(|| format!("line {}: no region {}", s.line, kv.region))?;
                    let mut db = self
                        .kv_dbs
                        .remove(&kv.region)
                        .unwrap_or_else(|| mmsim_spec::kv::KvDb::new(kv));
                    if !db.matches(kv) {
                        return Err(format!(
                            "line {}: kvstore on region {} with other keys or value_size than the server an earlier step started there",
                            s.line, kv.region
                        ));
                    }
                    let st = run_kvstore(
                        r,
                        kv,
                        &mut db,
                        self.instance,
                        (&mut self.checked, &mut self.violations),
                        self.t0,
                    )
                    .map_err(|e| format!("line {}: {e}", s.line))?;
                    self.kv_dbs.insert(kv.region.clone(), db);
                    if self.open.is_some() {
                        self.open_kv.get_or_insert_with(KvResult::default).add(&st);
                    }
                    self.kv.get_or_insert_with(KvResult::default).add(&st);
                }
                Op::Madvise {
                    region,
                    advice,
                    offset,
                    length,
                } => {
                    let r = self
                        .regions
                        .get_mut(region)
                        .ok_or_else(|| format!("line {}: no region {region}", s.line))?;
                    let first = *offset as usize;
                    let n = length.unwrap_or(r.pages - offset) as usize;
                    let advice_flag = match advice {
                        Advice::Sequential => libc::MADV_SEQUENTIAL,
                        Advice::Random => libc::MADV_RANDOM,
                        Advice::Normal => libc::MADV_NORMAL,
                        Advice::Pageout => libc::MADV_PAGEOUT,
                        Advice::Cold => libc::MADV_COLD,
                        Advice::Dontneed => libc::MADV_DONTNEED,
                        Advice::Free => libc::MADV_FREE,
                        Advice::Willneed => libc::MADV_WILLNEED,
                        Advice::Hugepage => libc::MADV_HUGEPAGE,
                        Advice::Nohugepage => libc::MADV_NOHUGEPAGE,
                    };
                    // SAFETY: a page range inside the region's mapping.
                    let rc = unsafe {
                        libc::madvise(
                            r.addr.add(first * PAGE) as *mut libc::c_void,
                            n * PAGE,
                            advice_flag,
                        )
                    };
                    if rc != 0 {
                        let e = std::io::Error::last_os_error();
                        let hint = match (advice, &r.tokens) {
                            (Advice::Free, Tokens::Shared { .. } | Tokens::FilePrivate { .. }) => {
                                " (MADV_FREE takes only private anonymous memory)"
                            }
                            _ => "",
                        };
                        return Err(format!(
                            "line {}: madvise({}) of {region} pages {first}..{}: {e}{hint}",
                            s.line,
                            advice.name(),
                            first + n,
                        ));
                    }
                    match (advice, &mut r.tokens) {
                        // Private anonymous pages are dropped: zero-fill next.
                        (Advice::Dontneed, Tokens::Private(versions)) => {
                            versions[first..first + n].fill(0);
                            r.set_lazy(first..first + n, false);
                        }
                        // Shared pages are only unmapped here: the data
                        // stays in the shared object (page cache or swap).
                        (Advice::Dontneed, Tokens::Shared { .. }) => {}
                        // Private copies are dropped: the file's page is
                        // read again next.
                        (Advice::Dontneed, Tokens::FilePrivate { own, .. }) => {
                            own[first..first + n].fill(0);
                        }
                        // Lazily freed: either value until written again.
                        (Advice::Free, _) => r.set_lazy(first..first + n, true),
                        (
                            Advice::Pageout
                            | Advice::Cold
                            | Advice::Willneed
                            | Advice::Sequential
                            | Advice::Random
                            | Advice::Normal
                            | Advice::Hugepage
                            | Advice::Nohugepage,
                            _,
                        ) => {}
                    }
                }
                Op::Swapoff { device } | Op::Swapon { device } => {
                    let on = matches!(s.op, Op::Swapon { .. });
                    let node = self.swaps.get(*device).ok_or_else(|| {
                        format!("line {}: there is no swap device {device}", s.line)
                    })?;
                    let r = if on { node.swapon() } else { node.swapoff() };
                    r.map_err(|e| {
                        let hint = match e.raw_os_error() {
                            Some(libc::EINVAL) if !on => " (is it off already?)",
                            Some(libc::EBUSY) if on => " (is it on already?)",
                            _ => "",
                        };
                        format!(
                            "line {}: {} {} (swap[{device}]): {e}{hint}",
                            s.line,
                            if on { "swapon" } else { "swapoff" },
                            node.path
                        )
                    })?;
                }
                Op::Fork { steps } => self.fork(steps, s.line, false)?,
                Op::Spawn { steps } => self.fork(steps, s.line, true)?,
                Op::Wait => self.wait_all()?,
                Op::Sleep { ns } => std::thread::sleep(std::time::Duration::from_nanos(*ns)),
                Op::Compute { ns } => spin(*ns),
                Op::Phase { name } => {
                    self.close_phase();
                    self.open_requests = 0;
                    self.open = Some((name.clone(), self.now(), procfs::vmstat()));
                }
                // A repeat of nothing is skipped, as in the simulator.
                Op::Repeat { steps, .. } if mmsim_spec::work::does_nothing(steps) => {}
                Op::Repeat { times, steps } => {
                    for _ in 0..*times {
                        self.run(steps)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// mmap(2) of a region of `pages` pages: private anonymous; a
    /// `[[file]]` (from file page `offset`) MAP_SHARED (`shmem` on tmpfs,
    /// `file` on a disk), checked against the file's token array, or
    /// MAP_PRIVATE (`file_private`), checked against it until written; or
    /// shared anonymous, with a token array of its own in shared memory,
    /// mapped here (charged to this process's cgroup), which the processes
    /// this one forks share. PROT_READ|PROT_WRITE, and PROT_EXEC if `exec`.
    fn map(
        &self,
        kind: MapKind,
        pages: u64,
        file: Option<usize>,
        offset: u64,
        exec: bool,
    ) -> Result<Region, String> {
        let len = pages as usize * PAGE;
        let mut fd = None;
        let (flags, tokens) = match kind {
            MapKind::Anon => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                Tokens::Private(locked_tokens(pages as usize)),
            ),
            MapKind::Shmem | MapKind::File | MapKind::FilePrivate => {
                let f = file
                    .and_then(|i| self.files.get(i))
                    .ok_or_else(|| format!("a {} mapping without its file", kind.name()))?;
                if (kind == MapKind::Shmem) != f.disk.is_none() {
                    return Err(format!(
                        "a {} mapping of {}, which is {}",
                        kind.name(),
                        f.path,
                        if f.disk.is_none() {
                            "on tmpfs"
                        } else {
                            "on a disk"
                        }
                    ));
                }
                if offset + pages > f.pages {
                    return Err(format!(
                        "pages {offset}..{} of {}, which has {} pages",
                        offset + pages,
                        f.path,
                        f.pages
                    ));
                }
                fd = Some(open_file(f)?);
                if kind == MapKind::FilePrivate {
                    (
                        libc::MAP_PRIVATE,
                        Tokens::FilePrivate {
                            file: f.tokens,
                            base: offset as usize,
                            own: vec![0; pages as usize],
                        },
                    )
                } else {
                    (
                        libc::MAP_SHARED,
                        Tokens::Shared {
                            tokens: f.tokens,
                            base: offset as usize,
                            owned: false,
                        },
                    )
                }
            }
            MapKind::SharedAnon => {
                let tokens = SharedTokens::map(pages as usize)
                    .map_err(|e| format!("cannot map the region's token array: {e}"))?;
                (
                    libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                    Tokens::Shared {
                        tokens,
                        base: 0,
                        owned: true,
                    },
                )
            }
        };
        let raw_fd = fd.as_ref().map_or(-1, |f| {
            use std::os::fd::AsRawFd;
            f.as_raw_fd()
        });
        let prot = libc::PROT_READ | libc::PROT_WRITE | if exec { libc::PROT_EXEC } else { 0 };
        let thp = self
            .spec
            .sysfs
            .anon_large_possible(self.spec.features.anon_mthp);
        let at = if kind == MapKind::Anon && thp {
            aligned_hole(len)?
        } else {
            std::ptr::null_mut()
        };
        let fixed = if at.is_null() { 0 } else { libc::MAP_FIXED };
        // SAFETY: a fresh mapping, or one over the hole reserved for it;
        // the file (if any) is open for reading and writing, and the
        // mapping outlives the descriptor.
        let addr = unsafe {
            libc::mmap(
                at,
                len,
                prot,
                flags | fixed,
                raw_fd,
                (offset as usize * PAGE) as libc::off_t,
            )
        };
        drop(fd);
        if addr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            if let Tokens::Shared {
                tokens,
                owned: true,
                ..
            } = tokens
            {
                tokens.unmap();
            }
            return Err(format!("mmap of {len} bytes ({}) failed: {e}", kind.name()));
        }
        Ok(Region {
            addr: addr as *mut u8,
            pages,
            tokens,
            lazy: Vec::new(),
        })
    }

    /// Unmaps every region (a spawned program starts without them).
    fn unmap_all(&mut self) {
        self.kv_dbs.clear();
        for (_, r) in std::mem::take(&mut self.regions) {
            unmap_region(r);
        }
    }

    /// fork(2): the child continues with a copy of this process's regions
    /// and tokens (private regions copy-on-write, shared ones shared), runs
    /// `steps`, reports and exits; this process goes on at once and reads
    /// the child's report on a thread, so the child never blocks writing
    /// it. For a `spawn` step the child then drops every region it
    /// inherited, as exec would give it a fresh address space (the runner's
    /// own memory stays: it does not exec).
    fn fork(&mut self, steps: &[Step], line: usize, spawn: bool) -> Result<(), String> {
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
        // Other threads (report readers) do not exist in the child; glibc's
        // fork keeps malloc usable there.
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
                for f in &self.pending {
                    libc::close(f.fd);
                }
            }
            // The reader threads do not exist in this process.
            std::mem::forget(std::mem::take(&mut self.pending));
            self.report_fd = fds[1];
            self.reports.clear();
            self.name = format!("{}/{kind}{k}", self.name);
            self.forks = 0;
            self.spawns = 0;
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
        let reader = std::thread::spawn(move || {
            // SAFETY: fd is the pipe's read end, owned by this thread.
            let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
            let mut text = String::new();
            let _ = f.read_to_string(&mut text);
            text
        });
        self.pending.push(Forked {
            pid,
            fd,
            line,
            reader,
        });
        Ok(())
    }

    /// wait(2) for every child forked so far, collecting their reports.
    fn wait_all(&mut self) -> Result<(), String> {
        let mut error = None;
        for f in std::mem::take(&mut self.pending) {
            let text = f.reader.join().unwrap_or_default();
            let mut status = 0;
            // SAFETY: pid is our child.
            unsafe { libc::waitpid(f.pid, &mut status, 0) };
            match serde_json::from_str::<Report>(&text) {
                Ok(r) => self.reports.push(r),
                Err(e) => {
                    error.get_or_insert(format!(
                        "line {}: the process forked here (pid {}) sent no report ({e}); {}",
                        f.line,
                        f.pid,
                        describe_status(status)
                    ));
                }
            }
        }
        error.map_or(Ok(()), Err)
    }

    fn close_phase(&mut self) {
        if let Some((name, start, before)) = self.open.take() {
            let after = procfs::vmstat();
            self.phases.push(PhaseResult {
                name,
                start_ns: start,
                end_ns: self.now(),
                vmstat: procfs::delta(&after, &before),
                kv: self.open_kv.take(),
                trace_requests: std::mem::take(&mut self.open_requests),
                lru_gen: procfs::lru_gen(),
            });
        }
    }
}

/// Burns `ns` of CPU time (a stream's per-page work, e.g. hashing): spins
/// on the monotonic clock.
fn spin(ns: u64) {
    if ns == 0 {
        return;
    }
    let t0 = std::time::Instant::now();
    while (t0.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

/// munmap(2) of a region, and of its own token array if it has one. A
/// file's pages stay in the file; a shared anonymous region's stay while a
/// forked process still maps them.
/// With anonymous THP on, a private anonymous region starts on a 2 MiB
/// boundary, as mmsim places it (6.1 does not align anonymous mappings,
/// so its THPs would depend on where mmap put the region), with
/// PROT_NONE guards on both sides that keep it from merging with a
/// neighbour (which would change which 2 MiB blocks lie inside the VMA).
/// Returns the reserved hole's aligned start; the guards stay mapped
/// (they hold no memory) until the process exits.
fn aligned_hole(len: usize) -> Result<*mut libc::c_void, String> {
    const PMD: usize = 2 << 20;
    let span = len + 2 * PMD;
    // SAFETY: a fresh inaccessible reservation.
    let r = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if r == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "reserving {span} bytes for a 2 MiB-aligned region failed: {e}"
        ));
    }
    // At least one guard page below; the rest of the span above.
    let start = (r as usize + PAGE).next_multiple_of(PMD);
    Ok(start as *mut libc::c_void)
}

fn unmap_region(r: Region) {
    // SAFETY: the whole mapping made by `map`, no longer used.
    unsafe { libc::munmap(r.addr as *mut libc::c_void, r.pages as usize * PAGE) };
    if let Tokens::Shared {
        tokens,
        owned: true,
        ..
    } = r.tokens
    {
        tokens.unmap();
    }
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

/// One access. A read checks the page's content token; a write stores the
/// next token with a plain store, so the hardware makes exactly one write
/// access (one write fault on a missing page). An atomic exchange would
/// check writes too, but QEMU's TCG performs it as a read probe and then a
/// write, which faults twice.
///
/// On a shared region the next token comes from an atomic fetch-and-add on
/// the shared token array (unique among all processes), and is then stored
/// to the page. Two processes writing one page at the same moment race
/// between the two stores (the page may end up with the older token), and
/// a read racing with a write may see the page and the array disagree:
/// either shows as a violation. Specs that share pages between concurrent
/// tasks should order their accesses (e.g. with `sleep` or `wait`).
#[inline]
fn touch(r: &mut Region, page: usize, write: bool) -> (u64, u64) {
    // SAFETY: page < r.pages, inside the mapping.
    let p = unsafe { r.addr.add(page * PAGE) } as *mut u32;
    if let Tokens::FilePrivate { file, base, own } = &mut r.tokens {
        if write {
            let next = own[page].wrapping_add(1) | PRIVATE_TOKEN_BIT;
            own[page] = next;
            // SAFETY: aligned, mapped, ours.
            unsafe { std::ptr::write_volatile(p, next) };
            return (0, 0);
        }
        let expected = match own[page] {
            0 => file.get(*base + page),
            t => t,
        };
        // SAFETY: aligned, mapped, ours.
        let found = unsafe { std::ptr::read_volatile(p) };
        return (1, (found != expected) as u64);
    }
    if let Tokens::Shared { tokens, base, .. } = &r.tokens {
        if write {
            let next = tokens.next(base + page);
            // SAFETY: aligned, mapped, ours.
            unsafe { std::ptr::write_volatile(p, next) };
            return (0, 0);
        }
        // SAFETY: aligned, mapped, ours.
        let found = unsafe { std::ptr::read_volatile(p) };
        return (1, (found != tokens.get(base + page)) as u64);
    }
    if write {
        let next = r.versions()[page].wrapping_add(1).max(1);
        r.versions()[page] = next;
        // SAFETY: aligned, mapped, ours.
        unsafe { std::ptr::write_volatile(p, next) };
        if !r.lazy.is_empty() {
            r.set_lazy(page..page + 1, false);
        }
        return (0, 0);
    }
    // SAFETY: aligned, mapped, ours.
    let found = unsafe { std::ptr::read_volatile(p) };
    if found == r.versions()[page] {
        return (1, 0);
    }
    if found == 0 && r.is_lazy(page) {
        // Reclaim discarded the lazily freed page: it reads zeros from now
        // on, until written.
        r.versions()[page] = 0;
        r.set_lazy(page..page + 1, false);
        return (1, 0);
    }
    (1, 1)
}

/// Opens a `[[file]]` for reading and writing.
fn open_file(f: &SharedFile) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&f.path)
        .map_err(|e| format!("cannot open {}: {e}", f.path))
}

/// A `read` or `write` step: pread(2) or pwrite(2) of the file's pages
/// `[offset, offset + length)`, `chunk` pages per call, through one buffer
/// of `chunk` pages (this process's own memory, allocated once per step).
/// A write gives each page its next content token (an atomic fetch-and-add
/// on the file's token array, as a `touch` write of a mapping does) in its
/// first 4 bytes, the rest zeros; a read checks each page's first 4 bytes
/// against the array (a page never written reads 0). Returns (pages
/// checked, violations). Races with concurrent writers as `touch` does.
fn file_io(
    f: &SharedFile,
    write: bool,
    offset: u64,
    length: u64,
    chunk: u64,
) -> Result<(u64, u64), String> {
    use std::os::unix::fs::FileExt;
    if offset + length > f.pages {
        return Err(format!(
            "pages {offset}..{} of {}, which has {} pages",
            offset + length,
            f.path,
            f.pages
        ));
    }
    let h = open_file(f)?;
    let chunk = chunk.clamp(1, length.max(1)) as usize;
    // Zeros; a write only ever changes each page's first 4 bytes.
    let mut buf = vec![0u8; chunk * PAGE];
    let (mut checked, mut bad) = (0, 0);
    let mut page = offset as usize;
    let end = (offset + length) as usize;
    while page < end {
        let n = chunk.min(end - page);
        let bytes = &mut buf[..n * PAGE];
        let at = (page * PAGE) as u64;
        if write {
            for i in 0..n {
                let t = f.tokens.next(page + i);
                bytes[i * PAGE..i * PAGE + 4].copy_from_slice(&t.to_ne_bytes());
            }
            h.write_all_at(bytes, at)
                .map_err(|e| format!("pwrite of pages {page}..{} of {}: {e}", page + n, f.path))?;
        } else {
            h.read_exact_at(bytes, at)
                .map_err(|e| format!("pread of pages {page}..{} of {}: {e}", page + n, f.path))?;
            for i in 0..n {
                let found = u32::from_ne_bytes(bytes[i * PAGE..i * PAGE + 4].try_into().unwrap());
                checked += 1;
                bad += (found != f.tokens.get(page + i)) as u64;
            }
        }
        page += n;
    }
    Ok((checked, bad))
}

/// A `kvstore` step: the same request stream as the simulator's, its page
/// accesses made as `touch` makes them, timed by the wall clock (a batch's
/// latency is from its first request to its last).
fn run_kvstore(
    r: &mut Region,
    kv: &mmsim_spec::KvStore,
    db: &mut mmsim_spec::kv::KvDb,
    instance: u32,
    (checked, violations): (&mut u64, &mut u64),
    t0: Instant,
) -> Result<KvResult, String> {
    let now = || t0.elapsed().as_nanos() as u64;
    let mut stream = mmsim_spec::kv::KvStream::new(kv, instance);
    let mut st = KvResult::default();
    let mut buf = Vec::with_capacity(8);
    let started = now();
    let (mut batch_start, mut in_batch) = (started, 0u64);
    while let Some(req) = {
        buf.clear();
        stream.next_request(db, &mut buf)
    } {
        if db.pages_used() > r.pages {
            return Err(format!(
                "kvstore: the server's heap ({} keys set) outgrew region {} of {} pages",
                db.live_keys(),
                kv.region,
                r.pages
            ));
        }
        for &a in &buf {
            let (c, bad) = touch(r, access_page(a) as usize, access_is_write(a));
            *checked += c;
            *violations += bad;
        }
        st.record(req.set, req.hit, req.bytes);
        in_batch += 1;
        if in_batch == kv.pipeline {
            let t = now();
            st.latency_sum_ns += in_batch * (t - batch_start);
            (batch_start, in_batch) = (t, 0);
        }
    }
    let t = now();
    st.latency_sum_ns += in_batch * (t - batch_start);
    st.elapsed_ns = t - started;
    Ok(st)
}

/// Runs every task instance in its own process; returns their reports,
/// each task followed by the processes it forked (depth first, in fork
/// order).
pub fn run_tasks(
    spec: &Spec,
    swaps: &[SwapNode],
    files: &[SharedFile],
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
                let mut c = Child {
                    spec,
                    swaps,
                    files,
                    t0,
                    instance: i,
                    name,
                    cgroup,
                    regions: HashMap::new(),
                    phases: Vec::new(),
                    open: None,
                    checked: 0,
                    violations: 0,
                    forks: 0,
                    spawns: 0,
                    pending: Vec::new(),
                    reports: Vec::new(),
                    report_fd: fds[1],
                    kv: None,
                    kv_dbs: HashMap::new(),
                    open_kv: None,
                    open_requests: 0,
                };
                let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    c.prefault_kv_dbs(&task.steps);
                    let error = join_cgroup(&c.cgroup).err();
                    c.main(&task.steps, error)
                }));
                match report {
                    Ok(r) => c.report_and_exit(&r),
                    // SAFETY: never unwind into the runner's frames.
                    Err(_) => unsafe { libc::_exit(101) },
                }
            }
            // SAFETY: the parent's copy of the write end.
            unsafe { libc::close(fds[1]) };
            children.push((pid, fds[0]));
        }
    }
    // Read every report at once, so no child waits to write a long report
    // (and stays resident) until the children before it have finished.
    let readers: Vec<(libc::pid_t, JoinHandle<String>)> = children
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
        results.push(serde_json::from_str::<Report>(&text).map_err(|e| {
            format!(
                "task process {pid} sent no report ({e}); {}",
                describe_status(status)
            )
        }));
    }
    let mut flat = Vec::new();
    for r in results {
        flatten(r?, &mut flat);
    }
    Ok(flat)
}

/// A report, then its forks' reports, depth first.
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

/// A `set` step: the knob's file or the cgroup's, written now (the setup
/// journaled a knob's old value, so the teardown restores it).
fn write_setting(s: &mmsim_spec::Setting) -> Result<(), String> {
    use mmsim_spec::Setting;
    let (path, value) = match s {
        Setting::MemoryMax { cgroup, limit } | Setting::MemoryHigh { cgroup, limit } => {
            let high = matches!(s, Setting::MemoryHigh { .. });
            let bytes = match limit {
                mmsim_spec::Limit::Max => None,
                mmsim_spec::Limit::Bytes(b) => Some(*b),
            };
            match crate::cgroup::limit_write(high, bytes)? {
                Some((file, v)) => (format!("{}/{file}", cgroup_dir(cgroup)), v),
                None => return Ok(()),
            }
        }
        _ => {
            let (knob, v) = s.knob().expect("not a cgroup's");
            (crate::setup::knob_path(&knob).expect("a knob's file"), v)
        }
    };
    std::fs::write(&path, &value).map_err(|e| format!("cannot write \"{value}\" to {path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(pages: usize) -> (Region, Vec<u32>) {
        let mut mem = vec![0u32; pages * PAGE / 4];
        let r = Region {
            addr: mem.as_mut_ptr() as *mut u8,
            pages: pages as u64,
            tokens: Tokens::Private(vec![0; pages]),
            lazy: Vec::new(),
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
            lazy: Vec::new(),
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
            lazy: Vec::new(),
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
            lazy: Vec::new(),
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
        Child {
            spec,
            swaps: &[],
            files,
            t0: Instant::now(),
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
            pending: Vec::new(),
            reports: Vec::new(),
            report_fd: -1,
            kv: None,
            kv_dbs: HashMap::new(),
            open_kv: None,
            open_requests: 0,
        }
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
        assert_eq!(own[1], PRIVATE_TOKEN_BIT | 1);
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
        assert_eq!(own[..2], [PRIVATE_TOKEN_BIT | 1, 0]);
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
        r.set_lazy(0..130, true);
        assert!(r.is_lazy(100) && r.is_lazy(129));
        // Not yet discarded: the old token.
        assert_eq!(touch(&mut r, 0, false), (1, 0));
        // Discarded: zeros, and from then on only zeros.
        mem[PAGE / 4] = 0;
        assert_eq!(touch(&mut r, 1, false), (1, 0));
        assert!(!r.is_lazy(1));
        mem[PAGE / 4] = 1;
        assert_eq!(touch(&mut r, 1, false), (1, 1));
        // Written again: the new token only.
        touch(&mut r, 100, true);
        assert!(!r.is_lazy(100));
        mem[100 * PAGE / 4] = 0;
        assert_eq!(touch(&mut r, 100, false), (1, 1));
        // A page never written reads zero either way.
        assert_eq!(touch(&mut r, 129, false), (1, 0));
        drop(mem);
    }
}

//! `--native --rstat-bench REPS`: what one memcg's rstat flush costs per
//! CPU it folds, for `mmsim calibrate` (`memcg_rstat_flush`).
//!
//! A child process in the spec's cgroup (set up and undone by the
//! runner's journal) times reads of its memory.stat, which flush the
//! memcg's statistics first when enough updates are pending (6.1:
//! `mem_cgroup_flush_stats`; 6.8 and later per memcg, over 64 × CPUs
//! updates). Each repetition times three reads, the reader always on the
//! first CPU:
//!
//! - `a`: a second read, nothing pending: the read alone;
//! - `b`: after PAGES pages were mapped, first written and unmapped on the
//!   first CPU (a few updates each: the charge, LRU moves, the
//!   uncharge): the read, and the flush of the memcg from that CPU;
//! - `c`: the same pages, half written on each CPU: the flush folds the
//!   memcg from both CPUs.
//!
//! `c − b` is one more CPU's fold of the memcg (the same updates, the same
//! memory touched), what calibrate takes as `memcg_rstat_flush`; `b − a`,
//! the first fold with the flush's fixed work, is kept for the record.
//! Medians over the repetitions.

use mmsim_spec::output::RstatBench;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::time::Instant;

const PAGE: usize = 4096;

/// The first two CPUs this process may run on.
fn two_cpus() -> Result<[usize; 2], String> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a cpu_set_t of the size passed.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return Err(format!(
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: CPU_ISSET reads the set within its size.
    let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .take(2)
        .collect();
    match allowed[..] {
        [a, b] => Ok([a, b]),
        _ => Err("the rstat bench needs two CPUs".into()),
    }
}

fn pin(cpu: usize) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu < CPU_SETSIZE (it came from the affinity mask).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: set is a cpu_set_t of the size passed.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
        return Err(format!(
            "pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// `pages` anonymous pages mapped, first written on `cpu`, unmapped.
fn touch(cpu: usize, pages: usize) -> Result<(), String> {
    pin(cpu)?;
    let len = pages * PAGE;
    // SAFETY: a fresh private anonymous mapping, unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    for i in 0..pages {
        // SAFETY: inside the mapping.
        unsafe { std::ptr::write_volatile((p as *mut u8).add(i * PAGE), 1) };
    }
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(p, len) };
    Ok(())
}

/// One timed read of memory.stat, whole.
fn read_stat(path: &str, buf: &mut Vec<u8>) -> Result<u64, String> {
    let t = Instant::now();
    buf.clear();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(buf))
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(t.elapsed().as_nanos() as u64)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// The measurement, in the calling process (which is in the memcg).
fn measure(stat: &str, reps: usize, pages: usize) -> Result<RstatBench, String> {
    let cpus = two_cpus()?;
    let mut buf = Vec::with_capacity(1 << 16);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        pin(cpus[0])?;
        read_stat(stat, &mut buf)?;
        a.push(read_stat(stat, &mut buf)?);
        touch(cpus[0], pages)?;
        pin(cpus[0])?;
        b.push(read_stat(stat, &mut buf)?);
        touch(cpus[0], pages / 2)?;
        touch(cpus[1], pages / 2)?;
        pin(cpus[0])?;
        c.push(read_stat(stat, &mut buf)?);
    }
    Ok(RstatBench {
        cpus,
        pages: pages as u64,
        reps: reps as u64,
        read_ns: [median(a), median(b), median(c)],
    })
}

/// Runs the bench in a child process that joins `cgroup_dir`; the
/// runner itself stays where it is.
pub fn run(cgroup_dir: &str, reps: usize) -> Result<RstatBench, String> {
    const PAGES: usize = 512;
    let mut fds = [0; 2];
    // SAFETY: fds is a two-element array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the runner is single-threaded here; the child runs only
    // this module's code and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: prctl(PR_SET_PDEATHSIG) has no memory-safety preconditions;
        // the read end is the parent's.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::close(fds[0]);
        }
        let stat = format!("{cgroup_dir}/memory.stat");
        let r = std::fs::write(
            format!("{cgroup_dir}/cgroup.procs"),
            std::process::id().to_string(),
        )
        .map_err(|e| format!("cannot join {cgroup_dir}: {e}"))
        .and_then(|()| measure(&stat, reps, PAGES));
        let doc = match r {
            Ok(b) => serde_json::to_string(&b).expect("serialises"),
            Err(e) => format!("error: {e}"),
        };
        // SAFETY: the write end, owned by this process from here.
        let mut w = unsafe { std::fs::File::from_raw_fd(fds[1]) };
        let _ = w.write_all(doc.as_bytes());
        drop(w);
        // SAFETY: never return into the runner's frames.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: the parent's copy of the write end; the read end is ours.
    let mut r = unsafe {
        libc::close(fds[1]);
        std::fs::File::from_raw_fd(fds[0])
    };
    let mut doc = String::new();
    let read = r.read_to_string(&mut doc);
    let mut status = 0;
    // SAFETY: pid is our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    read.map_err(|e| format!("the rstat bench's pipe: {e}"))?;
    if let Some(e) = doc.strip_prefix("error: ") {
        return Err(e.to_string());
    }
    serde_json::from_str(&doc).map_err(|e| format!("the rstat bench's result {doc:?}: {e}"))
}

//! The many-CPU microbenchmarks of `mmsim calibrate`: what two CPUs cost
//! each other. Each runs two threads pinned to two CPUs of one socket on
//! different cores (`pair`), and is timed at n and at 2n repetitions so
//! that thread start and pinning cancel in the slope.
//!
//! - `cacheline_transfer`: two threads take turns incrementing one
//!   counter alone on its cache line (each waits for the other's value,
//!   then writes): every increment moves the line from the other core.
//!   The time per increment is one transfer (half a round trip, as
//!   core-to-core latency tables give it).
//! - `lock_handoff`: a ticket spinlock (fair, as 6.1's qspinlock is to
//!   its waiters) taken n times by each thread in turn, the protected data
//!   on a second line; minus the same lock taken 2n times by one thread
//!   alone. The difference per acquisition is what passing the lock and
//!   its data to the waiting CPU costs.
//! - `ipi`: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which sends an
//!   IPI to every other CPU running a thread of the process and waits
//!   for each to run it, as `flush_tlb_mm_range`'s
//!   `smp_call_function_many_cond` does; with a thread of the process
//!   spinning on the other CPU, minus with that thread asleep (no IPI).
//!   `ipi_handler` is the receiver's side: how much longer the spinning
//!   thread takes for a fixed loop while IPIs arrive, per IPI received.
//! - `mem_bw_pair`: each thread copies its own pools, each 4x the
//!   last-level cache, first one thread alone, then both at once; the
//!   per-CPU bandwidth of the pair as a share of the lone one's; and
//!   `mem_bw`, what the pair moved together (bytes read plus written, as
//!   STREAM counts them) a second: the socket's bandwidth as two of its
//!   cores reach it (membw.rs).

use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

/// One run of the many-CPU benchmarks.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SmpBench {
    /// The two CPUs used, and whether they are SMT siblings of one core
    /// (only when the machine has no two cores).
    pub cpus: [usize; 2],
    pub siblings: bool,
    /// Increments passed between the CPUs, n and 2n of them.
    pub transfers: u64,
    pub pingpong_ns: [u64; 2],
    /// Lock acquisitions, n and 2n: in turn by two CPUs, by one alone.
    pub lock_reps: u64,
    pub lock_pair_ns: [u64; 2],
    pub lock_alone_ns: [u64; 2],
    /// membarrier calls, n and 2n: with the other CPU in the process,
    /// without.
    pub ipi_reps: u64,
    pub ipi_ns: [u64; 2],
    pub no_ipi_ns: [u64; 2],
    /// The receiver's fixed loop alone; how much longer it took while
    /// IPIs arrived, and how many were sent meanwhile.
    pub victim_quiet_ns: u64,
    pub victim_storm_ns: u64,
    pub victim_ipis: u64,
    /// Bytes each thread copies; the time alone, and the pair's (the
    /// later of the two to finish).
    pub copy_bytes: u64,
    pub copy_alone_ns: u64,
    pub copy_pair_ns: u64,
}

impl SmpBench {
    /// Each constant this bench measures, from this run alone.
    pub fn values(&self) -> [(&'static str, f64); 6] {
        let slope = |t: [u64; 2], n: u64| (t[1] as f64 - t[0] as f64) / n as f64;
        let victim = self.victim_storm_ns as f64 / self.victim_ipis.max(1) as f64;
        let pair_share = self.copy_alone_ns as f64 / self.copy_pair_ns.max(1) as f64;
        [
            (
                "cacheline_transfer",
                slope(self.pingpong_ns, self.transfers),
            ),
            (
                "lock_handoff",
                slope(self.lock_pair_ns, self.lock_reps)
                    - slope(self.lock_alone_ns, self.lock_reps),
            ),
            (
                "ipi",
                slope(self.ipi_ns, self.ipi_reps) - slope(self.no_ipi_ns, self.ipi_reps),
            ),
            ("ipi_handler", victim),
            ("mem_bw_pair", 1000.0 * pair_share.min(1.0)),
            // Bytes read plus written by both (STREAM's count), MB/s.
            (
                "mem_bw",
                1000.0 * (4 * self.copy_bytes) as f64 / self.copy_pair_ns.max(1) as f64,
            ),
        ]
    }
}

/// A value on a cache line of its own (two lines: the adjacent-line
/// prefetcher pairs them).
#[repr(align(128))]
struct Line(AtomicU64);

/// Two CPUs of one socket on different cores, from sysfs; SMT siblings
/// only when there is no other core. None on a one-CPU machine.
pub fn pair() -> Option<([usize; 2], bool)> {
    let read = |cpu: usize, f: &str| {
        std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{f}"))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
    };
    let online: Vec<usize> = (0..4096)
        .take_while(|c| std::path::Path::new(&format!("/sys/devices/system/cpu/cpu{c}")).exists())
        .filter(|&c| allowed(c))
        .collect();
    let first = *online.first()?;
    let (pkg, core) = (read(first, "physical_package_id"), read(first, "core_id"));
    let other_core = online.iter().copied().find(|&c| {
        c != first && read(c, "physical_package_id") == pkg && read(c, "core_id") != core
    });
    match other_core {
        Some(c) => Some(([first, c], false)),
        None => online
            .iter()
            .copied()
            .find(|&c| c != first)
            .map(|c| ([first, c], true)),
    }
}

/// Whether this process may run on `cpu`.
fn allowed(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
            && cpu < libc::CPU_SETSIZE as usize
            && libc::CPU_ISSET(cpu, &set)
    }
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) -> Result<(), String> {
    // SAFETY: as above; pid 0 is the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    match rc {
        0 => Ok(()),
        _ => Err(format!(
            "cannot pin a thread to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        )),
    }
}

/// Runs `f` on a thread of its own pinned to `cpu` (the caller stays
/// unpinned); its result.
fn alone<T: Send>(cpu: usize, f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(|| pin(cpu).map(|_| f()))
            .join()
            .map_err(|_| "a benchmark thread panicked".to_string())?
    })
}

/// Runs `a` pinned to cpus[0] and `b` to cpus[1], released at once;
/// the ns `a` took.
fn timed_pair<A, B>(cpus: [usize; 2], a: A, b: B) -> Result<u64, String>
where
    A: FnOnce() -> Result<(), String> + Send,
    B: FnOnce() + Send,
{
    let start = Barrier::new(2);
    let start = &start;
    // Both on threads of their own: the caller stays unpinned.
    let panicked = |_| "a benchmark thread panicked".to_string();
    std::thread::scope(|s| {
        let hb = s.spawn(move || {
            pin(cpus[1])?;
            start.wait();
            b();
            Ok(())
        });
        let ha = s.spawn(move || {
            pin(cpus[0])?;
            start.wait();
            let t = Instant::now();
            a()?;
            Ok(t.elapsed().as_nanos() as u64)
        });
        let ra: Result<u64, String> = ha.join().map_err(panicked)?;
        hb.join().map_err(panicked)?.and(ra)
    })
}

/// Each timing is the least of this many tries: a vCPU's host steals
/// time in bursts, and the least is the one it stole least from.
const TRIES: usize = 3;

/// The least of `TRIES` results of `f`.
fn least<T: Ord>(mut f: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let mut best = f()?;
    for _ in 1..TRIES {
        best = best.min(f()?);
    }
    Ok(best)
}

/// Runs every many-CPU benchmark once; None on a one-CPU machine.
pub fn run() -> Result<Option<SmpBench>, String> {
    let Some((cpus, siblings)) = pair() else {
        return Ok(None);
    };
    let transfers = 1_000_000;
    let pp1 = least(|| pingpong(cpus, transfers))?;
    let pp2 = least(|| pingpong(cpus, 2 * transfers))?;
    let lock_reps = 1_000_000;
    let lp1 = least(|| lock_pair(cpus, lock_reps))?;
    let lp2 = least(|| lock_pair(cpus, 2 * lock_reps))?;
    let la1 = least(|| lock_alone(cpus[0], lock_reps))?;
    let la2 = least(|| lock_alone(cpus[0], 2 * lock_reps))?;
    let ipi_reps = 20_000;
    membarrier_register()?;
    let i1 = least(|| ipis(cpus, ipi_reps, true))?;
    let i2 = least(|| ipis(cpus, 2 * ipi_reps, true))?;
    let n1 = least(|| ipis(cpus, ipi_reps, false))?;
    let n2 = least(|| ipis(cpus, 2 * ipi_reps, false))?;
    let quiet = least(|| victim_quiet(cpus[1]))?;
    // The storm whose extra time per IPI sent is least.
    let mut storms = Vec::with_capacity(TRIES);
    for _ in 0..TRIES {
        storms.push(victim_storm(cpus, quiet)?);
    }
    let per_ipi = |&(t, n): &(u64, u64)| t as f64 / n.max(1) as f64;
    let (storm, received) = storms
        .into_iter()
        .min_by(|a, b| per_ipi(a).total_cmp(&per_ipi(b)))
        .expect("TRIES > 0");
    let (bytes, alone) = least(|| bandwidth_alone(cpus[0]))?;
    let together = least(|| bandwidth_pair(cpus))?;
    Ok(Some(SmpBench {
        cpus,
        siblings,
        transfers,
        pingpong_ns: [pp1, pp2],
        lock_reps,
        lock_pair_ns: [lp1, lp2],
        lock_alone_ns: [la1, la2],
        ipi_reps,
        ipi_ns: [i1, i2],
        no_ipi_ns: [n1, n2],
        victim_quiet_ns: quiet,
        victim_storm_ns: storm,
        victim_ipis: received,
        copy_bytes: bytes,
        copy_alone_ns: alone,
        copy_pair_ns: together,
    }))
}

/// `n` increments of one line, passed back and forth; the elapsed ns.
fn pingpong(cpus: [usize; 2], n: u64) -> Result<u64, String> {
    let line = Line(AtomicU64::new(0));
    let turn = |parity: u64| {
        let mut v = parity;
        while v < n {
            while line.0.load(Ordering::Acquire) != v {
                std::hint::spin_loop();
            }
            line.0.store(v + 1, Ordering::Release);
            v += 2;
        }
    };
    timed_pair(
        cpus,
        || {
            turn(0);
            // The last increment is the other side's when n is even.
            while line.0.load(Ordering::Acquire) < n {
                std::hint::spin_loop();
            }
            Ok(())
        },
        || turn(1),
    )
}

/// A ticket spinlock: fair, each waiter served in arrival order.
struct TicketLock {
    next: Line,
    owner: Line,
}

impl TicketLock {
    fn new() -> Self {
        TicketLock {
            next: Line(AtomicU64::new(0)),
            owner: Line(AtomicU64::new(0)),
        }
    }

    fn lock(&self) {
        let me = self.next.0.fetch_add(1, Ordering::Relaxed);
        while self.owner.0.load(Ordering::Acquire) != me {
            std::hint::spin_loop();
        }
    }

    fn unlock(&self) {
        let o = self.owner.0.load(Ordering::Relaxed);
        self.owner.0.store(o + 1, Ordering::Release);
    }
}

/// `reps` acquisitions by one thread, the critical section one write to
/// the protected line.
fn locked_loop(lock: &TicketLock, data: &Line, reps: u64) {
    for _ in 0..reps {
        lock.lock();
        let v = data.0.load(Ordering::Relaxed);
        data.0.store(v + 1, Ordering::Relaxed);
        lock.unlock();
    }
}

/// `n` acquisitions split between the two CPUs, taken in turn.
fn lock_pair(cpus: [usize; 2], n: u64) -> Result<u64, String> {
    let (lock, data) = (TicketLock::new(), Line(AtomicU64::new(0)));
    let done = Barrier::new(2);
    timed_pair(
        cpus,
        || {
            locked_loop(&lock, &data, n / 2);
            done.wait();
            Ok(())
        },
        || {
            locked_loop(&lock, &data, n - n / 2);
            done.wait();
        },
    )
}

/// `n` acquisitions by one thread alone on `cpu`.
fn lock_alone(cpu: usize, n: u64) -> Result<u64, String> {
    let (lock, data) = (TicketLock::new(), Line(AtomicU64::new(0)));
    alone(cpu, || {
        let t = Instant::now();
        locked_loop(&lock, &data, n);
        t.elapsed().as_nanos() as u64
    })
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

fn membarrier(cmd: libc::c_int) -> Result<(), String> {
    // SAFETY: membarrier takes a command and two integer arguments.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) };
    match rc {
        0 => Ok(()),
        _ => Err(format!(
            "membarrier({cmd}): {} (a kernel without CONFIG_MEMBARRIER cannot time IPIs)",
            std::io::Error::last_os_error()
        )),
    }
}

fn membarrier_register() -> Result<(), String> {
    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
}

/// `n` membarrier calls from cpus[0]; the other CPU runs a thread of
/// this process (`remote`) or has none (its thread exits at the start).
fn ipis(cpus: [usize; 2], n: u64, remote: bool) -> Result<u64, String> {
    let stop = AtomicBool::new(false);
    timed_pair(
        cpus,
        || {
            let r = (0..n).try_for_each(|_| membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED));
            stop.store(true, Ordering::Release);
            r
        },
        || {
            while remote && !stop.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
        },
    )
}

const SPINS: u64 = 50_000_000;

/// The receiver's fixed loop; its elapsed ns.
fn spin() -> u64 {
    let t = Instant::now();
    let mut x = 0u64;
    for i in 0..SPINS {
        x = black_box(x.wrapping_add(i));
    }
    t.elapsed().as_nanos() as u64
}

/// The loop alone on `cpu`.
fn victim_quiet(cpu: usize) -> Result<u64, String> {
    alone(cpu, spin)
}

/// The loop on cpus[1] while cpus[0] sends membarrier IPIs: its ns
/// beyond `quiet` (0 if none), and how many IPIs were sent meanwhile.
fn victim_storm(cpus: [usize; 2], quiet: u64) -> Result<(u64, u64), String> {
    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let storm = timed_pair(
        [cpus[1], cpus[0]],
        || {
            spin();
            stop.store(true, Ordering::Release);
            Ok(())
        },
        || {
            let mut k = 0;
            while !stop.load(Ordering::Acquire) {
                if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED).is_err() {
                    break;
                }
                k += 1;
            }
            sent.store(k, Ordering::Release);
        },
    )?;
    Ok((storm.saturating_sub(quiet), sent.load(Ordering::Acquire)))
}

/// An anonymous pool of `bytes`, every page faulted in (ubench's).
fn pool(bytes: usize) -> Result<memmap2::MmapMut, String> {
    super::ubench::pool(bytes / 4096)
}

/// Copies `src` into `dst` in 4 KiB pages; the elapsed ns.
fn copy_all(src: &memmap2::MmapMut, dst: &mut memmap2::MmapMut) -> u64 {
    let t = Instant::now();
    for (d, s) in dst.chunks_mut(4096).zip(src.chunks(4096)) {
        d.copy_from_slice(s);
    }
    black_box(&dst[0]);
    t.elapsed().as_nanos() as u64
}

/// The bytes each thread copies: 4x the last-level cache, 64 MiB at least.
fn copy_bytes() -> usize {
    (4 * super::ubench::llc_bytes() as usize).max(64 << 20)
}

/// (bytes, ns) of one thread copying alone on `cpu`.
fn bandwidth_alone(cpu: usize) -> Result<(u64, u64), String> {
    let bytes = copy_bytes();
    let (src, mut dst) = (pool(bytes)?, pool(bytes)?);
    // Warm the page tables; the pools are each other's eviction.
    copy_all(&src, &mut dst);
    alone(cpu, || (bytes as u64, copy_all(&src, &mut dst)))
}

/// The ns until both of two threads, each copying its own pools on its
/// CPU at once, are done.
fn bandwidth_pair(cpus: [usize; 2]) -> Result<u64, String> {
    let bytes = copy_bytes();
    let (s0, mut d0) = (pool(bytes)?, pool(bytes)?);
    let (s1, mut d1) = (pool(bytes)?, pool(bytes)?);
    // Warm the page tables; the pools are each other's eviction.
    copy_all(&s0, &mut d0);
    copy_all(&s1, &mut d1);
    let other = AtomicU64::new(0);
    let first = timed_pair(
        cpus,
        || {
            copy_all(&s0, &mut d0);
            Ok(())
        },
        || other.store(copy_all(&s1, &mut d1), Ordering::Release),
    )?;
    Ok(first.max(other.load(Ordering::Acquire)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prints one run's values (`cargo test -p mmsim-cli --release smp --
    /// --ignored --nocapture`); timing, so not in the suite.
    #[test]
    #[ignore]
    fn print_one_run() {
        let b = run().expect("runs").expect("two CPUs");
        println!("{b:#?}");
        for (name, v) in b.values() {
            println!("{name} = {v:.1}");
        }
    }

    #[test]
    fn the_values_follow_from_the_timings() {
        let b = SmpBench {
            cpus: [0, 2],
            siblings: false,
            transfers: 1000,
            pingpong_ns: [100_000, 180_000],
            lock_reps: 1000,
            lock_pair_ns: [150_000, 290_000],
            lock_alone_ns: [20_000, 35_000],
            ipi_reps: 100,
            ipi_ns: [300_000, 560_000],
            no_ipi_ns: [50_000, 90_000],
            victim_quiet_ns: 1_000_000,
            victim_storm_ns: 500_000,
            victim_ipis: 250,
            copy_bytes: 1 << 20,
            copy_alone_ns: 800,
            copy_pair_ns: 1000,
        };
        let v: std::collections::BTreeMap<_, _> = b.values().into_iter().collect();
        assert_eq!(v["cacheline_transfer"], 80.0);
        assert_eq!(v["lock_handoff"], 140.0 - 15.0);
        assert_eq!(v["ipi"], 2600.0 - 400.0);
        assert_eq!(v["ipi_handler"], 2000.0);
        assert_eq!(v["mem_bw_pair"], 800.0);
    }

    #[test]
    fn the_pair_is_two_allowed_cpus() {
        // Holds on any machine: None with one CPU, two distinct CPUs else.
        if let Some(([a, b], _)) = pair() {
            assert_ne!(a, b);
            assert!(allowed(a) && allowed(b));
        }
    }
}

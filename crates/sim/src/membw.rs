//! Memory bandwidth a socket's CPUs share.
//!
//! A page operation that streams through DRAM (`clear_page`, `copy_page`,
//! brd's copies, read(2) and write(2) copies, zram's and zswap's
//! compression) costs its measured time when one core does it alone.
//! Cores of one socket share its memory controllers: when together they
//! ask for more bytes a nanosecond than the socket delivers, each
//! operation takes longer. The model is fluid (processor sharing): with
//! CPUs `i` of a socket busy at once, each spending `m_i` ns of lone time
//! a slice in memory operations that move `b_i` bytes and `o_i` ns in
//! everything else, memory operations stretch by the `s >= 1` at which
//! the socket delivers what they draw:
//!
//! ```text
//!     sum_i  b_i / (o_i + s * m_i)  =  C      (s = 1 if the sum at 1 is <= C)
//! ```
//!
//! A slice's `s` comes from the CPUs busy when it starts (those whose
//! slice covers its start, or with a task ready to run there) and what
//! each did in its latest slice, its own CPU's included, as SMT's sibling
//! test does (`set_sibling_busy`). A CPU alone on its socket is never
//! stretched: its costs are its lone costs.
//!
//! Bytes are counted as STREAM counts them, read plus written, without
//! the reads a write-allocate cache adds (`PAGE_BYTES`): the socket's capacity `C` is measured the same way
//! (`Costs::mem_bw`: the calibrate bench's copies by two cores at once;
//! or a documented STREAM figure of the machine in `machine.memory_bandwidth`).
//!
//! Simplifications, each stated where its numbers are reported
//! (docs/model.md "Memory bandwidth"): user accesses (`touch`: a line a
//! page) and device DMA draw nothing; a guest's kernel draws nothing of
//! its host's sockets; a slice's CPUs are the ones known at its start.

use crate::cost_model::Fn;
use crate::kernel::{Kernel, CPU_SCALE_ALONE};

/// DRAM bytes of one side of a 4 KiB page operation: a page read from
/// DRAM or written to it. Clearing a page writes one; copying between
/// two pages out of cache reads one and writes the other; a copy one
/// side of which is in cache (read(2)'s and write(2)'s user buffer,
/// reused; a source in this CPU's L2; a template page) moves one.
/// Compression reads the page and writes its compressed length;
/// decompression the reverse.
pub const PAGE_BYTES: u64 = 4096;

/// The largest stretch a slice's memory operations take (64 times): a
/// bound on the solver, far above what any socket's CPUs can ask.
const MAX_SCALE: u64 = 64 * CPU_SCALE_ALONE;

/// What a CPU's slice drew.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// DRAM bytes its memory operations moved.
    pub bytes: u64,
    /// Their time at `s = 1` (with SMT's stretch), ns.
    pub mem_ns: u64,
    /// Their time as charged, ns.
    pub mem_wall_ns: u64,
    /// Everything else of the slice, ns.
    pub other_ns: u64,
}

/// Each socket's bandwidth, and what each CPU drew.
#[derive(Clone, Debug)]
pub struct MemBw {
    /// Bytes a ns (GB/s) each socket delivers; 0: not modelled (one CPU
    /// a socket, or a guest's kernel).
    capacity: f64,
    /// Each CPU's latest slice.
    last: Vec<Traffic>,
    /// The current slice's, so far.
    cur: Traffic,
    /// The current slice's stretch of memory operations, in 1024ths.
    scale: u64,
    /// The drawing CPUs of a slice's socket (kept: no allocation a slice).
    terms: Vec<Traffic>,
}

impl MemBw {
    /// `mb_per_s` per socket for `cpus` CPUs, whose sockets `socket_cpus`
    /// CPUs each: nothing to model unless a socket has two CPUs.
    pub fn new(mb_per_s: u64, cpus: usize, socket_cpus: usize) -> Self {
        let modelled = socket_cpus >= 2 && mb_per_s > 0;
        MemBw {
            capacity: if modelled {
                mb_per_s as f64 / 1000.0
            } else {
                0.0
            },
            last: vec![Traffic::default(); cpus],
            cur: Traffic::default(),
            scale: CPU_SCALE_ALONE,
            terms: Vec::new(),
        }
    }

    /// The current slice's stretch, in 1024ths.
    pub fn scale(&self) -> u64 {
        self.scale
    }

    /// A slice starts on `cpu` while `others` (of its socket) are busy.
    pub fn begin_slice(&mut self, cpu: usize, others: impl Iterator<Item = usize>) {
        self.cur = Traffic::default();
        self.scale = CPU_SCALE_ALONE;
        if self.capacity == 0.0 {
            return;
        }
        let last = &self.last;
        self.terms.clear();
        self.terms.extend(
            [last[cpu]; 1]
                .into_iter()
                .chain(others.map(|c| last[c]))
                .filter(|t| t.bytes > 0 && t.mem_ns + t.other_ns > 0),
        );
        // Only a socket's second drawer can slow the first.
        if self.terms.len() >= 2 {
            self.scale = stretch(&self.terms, self.capacity);
        }
    }

    /// The slice on `cpu` ended after `wall_ns`.
    pub fn end_slice(&mut self, cpu: usize, wall_ns: u64) {
        let mut t = std::mem::take(&mut self.cur);
        t.other_ns = wall_ns.saturating_sub(t.mem_wall_ns);
        self.last[cpu] = t;
        self.scale = CPU_SCALE_ALONE;
    }

    /// A memory operation of `ns` (SMT's stretch in) moving `bytes`: its
    /// time as charged.
    fn draw(&mut self, ns: u64, bytes: u64) -> u64 {
        let wall = match self.scale {
            CPU_SCALE_ALONE => ns,
            s => ns * s / CPU_SCALE_ALONE,
        };
        self.cur.bytes += bytes;
        self.cur.mem_ns += ns;
        self.cur.mem_wall_ns += wall;
        wall
    }
}

/// The `s` (in 1024ths, rounded up) at which `terms` draw `capacity`
/// bytes a ns. What they draw falls as `s` grows, and is convex in it:
/// Newton's method from `s = 1`, where they draw more, climbs to the root
/// from below without passing it, in a few steps.
fn stretch(terms: &[Traffic], capacity: f64) -> u64 {
    // What the terms draw at `s`, and its derivative.
    let drawn = |s: f64| -> (f64, f64) {
        terms.iter().fold((0.0, 0.0), |(d, dd), t| {
            let (b, m) = (t.bytes as f64, t.mem_ns as f64);
            let x = t.other_ns as f64 + s * m;
            (d + b / x, dd - b * m / (x * x))
        })
    };
    let mut s = 1.0;
    let max = MAX_SCALE as f64 / CPU_SCALE_ALONE as f64;
    for _ in 0..64 {
        let (d, dd) = drawn(s);
        if d <= capacity || dd == 0.0 {
            break;
        }
        let next = (s - (d - capacity) / dd).min(max);
        if next - s < 1e-9 {
            s = next;
            break;
        }
        s = next;
    }
    ((s * CPU_SCALE_ALONE as f64).ceil() as u64).clamp(CPU_SCALE_ALONE, MAX_SCALE)
}

impl Kernel {
    /// `charge_user` of a user-space memory operation (a page written
    /// from a template or filled) moving `bytes`.
    #[inline]
    pub fn charge_user_mem(&mut self, ns: u64, bytes: u64) {
        let ns = self.scaled(ns);
        let wall = self.membw.draw(ns, bytes);
        self.pending_ns += wall;
        self.fn_time_ns[Fn::User as usize] += wall;
        self.user_access_ns += wall;
    }

    /// Accounts a memory operation: `ns` of a lone thread's work moving
    /// `bytes` through DRAM, longer while an SMT sibling is busy and while
    /// the socket's other CPUs draw more than it delivers.
    #[inline]
    pub fn charge_mem(&mut self, f: Fn, ns: u64, bytes: u64) {
        let ns = self.scaled(ns);
        let wall = self.membw.draw(ns, bytes);
        self.charge_wall(f, wall);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(bytes: u64, mem_ns: u64, other_ns: u64) -> Traffic {
        Traffic {
            bytes,
            mem_ns,
            mem_wall_ns: mem_ns,
            other_ns,
        }
    }

    #[test]
    fn cpus_that_draw_less_than_the_socket_gives_are_not_stretched() {
        // Two CPUs at 8 bytes a ns each against 20.
        let terms = [t(8000, 1000, 0), t(8000, 1000, 0)];
        assert_eq!(stretch(&terms, 20.0), CPU_SCALE_ALONE);
    }

    #[test]
    fn cpus_that_only_copy_share_the_socket_evenly() {
        // Two CPUs asking 16 bytes a ns each of a socket giving 16: each
        // gets 8, twice its lone time.
        let terms = [t(16_000, 1000, 0), t(16_000, 1000, 0)];
        assert_eq!(stretch(&terms, 16.0), 2 * CPU_SCALE_ALONE);
    }

    #[test]
    fn only_the_memory_operations_stretch() {
        // Half of each slice is memory work drawing 32 bytes a ns while
        // it runs (16 on average): at s = 2 each draws 16000 / 1500.
        let terms = [t(16_000, 500, 500), t(16_000, 500, 500)];
        let s = stretch(&terms, 2.0 * 16_000.0 / 1500.0);
        assert!(s.abs_diff(2 * CPU_SCALE_ALONE) <= 1, "{s}");
    }

    #[test]
    fn a_cpu_alone_on_its_socket_keeps_its_lone_costs() {
        let mut bw = MemBw::new(1000, 2, 2);
        bw.last[0] = t(1 << 30, 1000, 0);
        bw.begin_slice(0, std::iter::empty());
        assert_eq!(bw.scale(), CPU_SCALE_ALONE);
        // With the other CPU drawing as much, the two share 1 GB/s.
        bw.last[1] = t(1 << 30, 1000, 0);
        bw.begin_slice(0, [1].into_iter());
        assert_eq!(bw.scale(), MAX_SCALE);
        assert_eq!(bw.draw(100, 2 * PAGE_BYTES), 100 * 64);
        bw.end_slice(0, 10_000);
        assert_eq!(
            bw.last[0],
            t(2 * PAGE_BYTES, 100, 10_000 - 6400).with_wall(6400)
        );
    }

    #[test]
    fn one_cpu_a_socket_is_not_modelled() {
        let mut bw = MemBw::new(1000, 2, 1);
        bw.last = vec![t(1 << 30, 1000, 0); 2];
        bw.begin_slice(0, [1].into_iter());
        assert_eq!(bw.scale(), CPU_SCALE_ALONE);
    }

    impl Traffic {
        fn with_wall(mut self, wall: u64) -> Self {
            self.mem_wall_ns = wall;
            self
        }
    }
}

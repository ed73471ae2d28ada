//! Access streams of a `touch` step, generated lazily in batches and never
//! materialised whole. The simulator and the native runner both draw from
//! here, so both touch exactly the same pages in the same order.
//!
//! Orders (n = pages in the touched range, indices relative to its start):
//! - `seq`: 0, 1, …, n−1, once per pass.
//! - `rev`: n−1, …, 0, once per pass.
//! - `shuffle`: a fresh pseudo-random permutation of 0..n per pass: a 4-round
//!   Feistel network over the smallest even power of two ≥ n, keyed by
//!   (seed, instance, pass), with cycle-walking to stay below n.
//! - `uniform`: independent uniform draws in 0..n.
//! - `zipf`: independent draws of rank k ∈ 1..=n with P(k) ∝ k^−theta, by
//!   Hörmann & Derflinger's rejection-inversion (libm, so bit-identical on
//!   every platform; `crate::zipf`, whose table serves a stream that draws
//!   many times from few ranks with the same draws, faster); page = k − 1,
//!   so the hottest pages open the range.
//! - `trace` (the `trace` step): the requests of a file, in its order
//!   (`crate::trace`); obj_id → page by the step's `map`.
//!
//! The number of accesses is `count` if given, else `passes × n` (a trace's
//! `count` is its records, or fewer if the step says so); a `seq`,
//! `rev` or `shuffle` stream with a `count` keeps cycling passes until it has
//! made `count` accesses. Each access is a write with probability `write`
//! (decided by a stream of its own, so the write fraction never changes
//! which pages are touched); 0 and 1 draw nothing. A trace with a write
//! column says for itself.

use crate::model::{Order, Touch};
use crate::rng::{splitmix64, stream_seed, Rng};
use crate::trace::{TraceError, TraceMap, TraceReader};
use crate::zipf::Zipf;

const SALT_ORDER: u64 = 0x6f_7264_6572;
const SALT_WRITE: u64 = 0x77_7269_7465;
const SALT_PASS: u64 = 0x7061_7373;

/// One access: `page << 1 | write`.
pub type Access = u64;

#[inline]
pub fn access_page(a: Access) -> u64 {
    a >> 1
}

#[inline]
pub fn access_is_write(a: Access) -> bool {
    a & 1 == 1
}

pub struct TouchStream {
    first: u64,
    n: u64,
    remaining: u64,
    pos_in_pass: u64,
    pass: u64,
    seed: u64,
    instance: u32,
    order: OrderGen,
    write: WriteGen,
}

enum OrderGen {
    Seq,
    Rev,
    Shuffle(Feistel),
    Uniform(Rng),
    Zipf(Box<Zipf>, Rng),
    Trace(Box<TraceReader>, TraceMap),
}

enum WriteGen {
    Never,
    Always,
    Fraction { threshold: u64, rng: Rng },
}

impl TouchStream {
    /// `first` and `n`: the touched sub-range of the region, in pages. Only
    /// a trace fails: its file cannot be opened.
    pub fn new(t: &Touch, first: u64, n: u64, instance: u32) -> Result<Self, TraceError> {
        let seed = t.seed;
        let total = t.count.unwrap_or_else(|| t.passes.saturating_mul(n));
        let order = match t.order {
            Order::Trace => {
                let src = t.trace.as_deref().ok_or_else(|| TraceError {
                    path: Default::default(),
                    at: String::new(),
                    message: "a trace step without a file (a bug in mmsim)".into(),
                })?;
                OrderGen::Trace(
                    Box::new(TraceReader::open(&src.path, &src.format)?),
                    src.map,
                )
            }
            Order::Seq => OrderGen::Seq,
            Order::Rev => OrderGen::Rev,
            Order::Shuffle => {
                OrderGen::Shuffle(Feistel::new(n, stream_seed(seed, instance, SALT_PASS)))
            }
            Order::Uniform => OrderGen::Uniform(Rng::new(stream_seed(seed, instance, SALT_ORDER))),
            Order::Zipf => OrderGen::Zipf(
                Box::new(Zipf::for_draws(n, t.theta, total)),
                Rng::new(stream_seed(seed, instance, SALT_ORDER)),
            ),
        };
        let write = if t.write <= 0.0 {
            WriteGen::Never
        } else if t.write >= 1.0 {
            WriteGen::Always
        } else {
            WriteGen::Fraction {
                threshold: (t.write * (1u64 << 53) as f64) as u64,
                rng: Rng::new(stream_seed(seed, instance, SALT_WRITE)),
            }
        };
        Ok(TouchStream {
            first,
            n,
            remaining: if n == 0 { 0 } else { total },
            pos_in_pass: 0,
            pass: 0,
            seed,
            instance,
            order,
            write,
        })
    }

    /// Asks a trace's reader to drop the file's pages from the host's page
    /// cache as it goes (`TraceReader::drop_behind`); nothing for the
    /// generated orders.
    pub fn drop_behind(&mut self) {
        if let OrderGen::Trace(r, _) = &mut self.order {
            r.drop_behind();
        }
    }

    /// Whether the accesses are a trace's requests.
    pub fn is_trace(&self) -> bool {
        matches!(self.order, OrderGen::Trace(..))
    }

    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Appends up to `max` accesses to `buf` (pages relative to the region).
    /// Returns how many; 0 once the stream is exhausted. Only a trace
    /// fails: its file changed since the spec was read.
    pub fn next_batch(&mut self, buf: &mut Vec<Access>, max: usize) -> Result<usize, TraceError> {
        let k = (max as u64).min(self.remaining) as usize;
        if let OrderGen::Trace(r, map) = &mut self.order {
            for _ in 0..k {
                let page = trace_page(r, *map, self.n)?;
                let w = match page.1 {
                    Some(w) => w,
                    None => next_write(&mut self.write),
                };
                buf.push(self.first.wrapping_add(page.0) << 1 | w as u64);
            }
        } else {
            for _ in 0..k {
                let page = self.next_page();
                let w = next_write(&mut self.write) as u64;
                buf.push(self.first.wrapping_add(page) << 1 | w);
            }
        }
        self.remaining -= k as u64;
        Ok(k)
    }

    #[inline]
    fn next_page(&mut self) -> u64 {
        let i = self.pos_in_pass;
        let page = match &mut self.order {
            OrderGen::Seq => i,
            OrderGen::Rev => self.n - 1 - i,
            OrderGen::Shuffle(f) => f.permute(i),
            OrderGen::Uniform(r) => r.below(self.n),
            OrderGen::Zipf(z, r) => z.sample(r) - 1,
            OrderGen::Trace(..) => unreachable!("next_batch reads traces"),
        };
        self.pos_in_pass += 1;
        if self.pos_in_pass == self.n {
            self.pos_in_pass = 0;
            self.pass += 1;
            if let OrderGen::Shuffle(f) = &mut self.order {
                let key = stream_seed(self.seed, self.instance, SALT_PASS ^ splitmix64(self.pass));
                *f = Feistel::new(self.n, key);
            }
        }
        page
    }
}

#[inline]
fn next_write(w: &mut WriteGen) -> bool {
    match w {
        WriteGen::Never => false,
        WriteGen::Always => true,
        WriteGen::Fraction { threshold, rng } => (rng.next_u64() >> 11) < *threshold,
    }
}

/// The next request of a trace as a page of the `n`-page range, and the
/// trace's own write flag. The spec's scan saw every record, so an end or
/// an out-of-range id here means the file changed since.
#[inline]
fn trace_page(
    r: &mut TraceReader,
    map: TraceMap,
    n: u64,
) -> Result<(u64, Option<bool>), TraceError> {
    let req = r.next_request()?.ok_or_else(|| {
        r.error_at_last("found the end of the file before the records the spec counted; expected the file unchanged since the spec was read")
    })?;
    let page = match map {
        TraceMap::Modulo => req.obj_id % n,
        TraceMap::Refuse if req.obj_id < n => req.obj_id,
        TraceMap::Refuse => {
            return Err(r.error_at_last(&format!(
                "found obj_id {}, beyond the {n} pages replayed; expected ids below {n} (or map = \"modulo\")",
                req.obj_id
            )))
        }
    };
    Ok((page, req.write))
}

/// A keyed pseudo-random permutation of `0..n`.
struct Feistel {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Feistel {
    fn new(n: u64, key: u64) -> Self {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        let bits = bits + (bits & 1);
        let mut keys = [0; 4];
        let mut k = key;
        for slot in keys.iter_mut() {
            k = splitmix64(k);
            *slot = k;
        }
        Feistel {
            n,
            half_bits: bits / 2,
            keys,
        }
    }

    fn round(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for k in self.keys {
            let f = splitmix64(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        l << self.half_bits | r
    }

    fn permute(&self, i: u64) -> u64 {
        let mut x = self.round(i);
        while x >= self.n {
            x = self.round(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Touch;

    fn touch(order: Order) -> Touch {
        Touch {
            region: "r".into(),
            order,
            theta: 0.99,
            count: None,
            passes: 1,
            write: 0.0,
            offset: 0,
            length: None,
            seed: 1,
            trace: None,
        }
    }

    fn collect(t: &Touch, n: u64) -> Vec<Access> {
        let mut s = TouchStream::new(t, 0, n, 0).unwrap();
        let mut v = Vec::new();
        while s.next_batch(&mut v, 7).unwrap() > 0 {}
        v
    }

    #[test]
    fn seq_and_rev() {
        let v = collect(&touch(Order::Seq), 5);
        assert_eq!(
            v.iter().map(|&a| access_page(a)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        let v = collect(&touch(Order::Rev), 5);
        assert_eq!(
            v.iter().map(|&a| access_page(a)).collect::<Vec<_>>(),
            [4, 3, 2, 1, 0]
        );
    }

    #[test]
    fn shuffle_is_a_permutation_per_pass() {
        for n in [1u64, 2, 3, 17, 1000, 4097] {
            let mut t = touch(Order::Shuffle);
            t.passes = 2;
            let v = collect(&t, n);
            assert_eq!(v.len() as u64, 2 * n);
            for pass in v.chunks(n as usize) {
                let mut p: Vec<u64> = pass.iter().map(|&a| access_page(a)).collect();
                p.sort_unstable();
                assert_eq!(p, (0..n).collect::<Vec<_>>());
            }
            if n > 16 {
                assert_ne!(v[..n as usize], v[n as usize..], "passes must differ");
            }
        }
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let mut t = touch(Order::Zipf);
        t.count = Some(100_000);
        let v = collect(&t, 1000);
        let mut hist = vec![0u32; 1000];
        for a in v {
            hist[access_page(a) as usize] += 1;
        }
        // Rank 1 vs rank 10 should be about 10^0.99 ≈ 9.8 times as frequent.
        let ratio = hist[0] as f64 / hist[9] as f64;
        assert!((7.0..13.0).contains(&ratio), "ratio {ratio}");
        assert!(hist[0] > hist[999]);
    }

    #[test]
    fn write_fraction() {
        let mut t = touch(Order::Uniform);
        t.count = Some(10_000);
        t.write = 0.25;
        let v = collect(&t, 100);
        let w = v.iter().filter(|&&a| access_is_write(a)).count();
        assert!((2200..2800).contains(&w), "{w}");
        // The write fraction does not change which pages are touched.
        t.write = 0.75;
        let v2 = collect(&t, 100);
        assert!(v
            .iter()
            .zip(&v2)
            .all(|(a, b)| access_page(*a) == access_page(*b)));
    }

    #[test]
    fn count_cycles_passes() {
        let mut t = touch(Order::Seq);
        t.count = Some(7);
        let v = collect(&t, 3);
        assert_eq!(
            v.iter().map(|&a| access_page(a)).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2, 0]
        );
    }
}

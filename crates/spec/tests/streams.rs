//! Determinism and shape of `touch` access streams (`mmsim_spec::stream`).
//!
//! `reference` re-implements every stream from its written definition
//! (docs/spec.md "Access streams"), so these tests also prove that the
//! document describes the code exactly: another engine built from it draws
//! the same pages in the same order.

use mmsim_spec::model::{Order, Touch};
use mmsim_spec::stream::{access_is_write, access_page, Access, TouchStream};
use proptest::prelude::*;

const ORDERS: [Order; 5] = [
    Order::Seq,
    Order::Rev,
    Order::Shuffle,
    Order::Uniform,
    Order::Zipf,
];

fn touch(order: Order) -> Touch {
    Touch {
        region: "r".into(),
        order,
        theta: if order == Order::Zipf { 0.99 } else { 0.0 },
        count: None,
        passes: 1,
        write: 0.0,
        offset: 0,
        length: None,
        seed: 42,
        trace: None,
    }
}

/// The whole stream of `t` over pages `first..first + n`, drawn `batch` at a time.
fn collect(t: &Touch, first: u64, n: u64, instance: u32, batch: usize) -> Vec<Access> {
    let mut s = TouchStream::new(t, first, n, instance).unwrap();
    let mut v = Vec::new();
    loop {
        let before = s.remaining();
        let got = s.next_batch(&mut v, batch).unwrap();
        assert_eq!(s.remaining(), before - got as u64);
        if got == 0 {
            break;
        }
    }
    v
}

fn pages(v: &[Access]) -> Vec<u64> {
    v.iter().map(|&a| access_page(a)).collect()
}

fn bytes(v: &[Access]) -> Vec<u8> {
    v.iter().flat_map(|a| a.to_le_bytes()).collect()
}

/// FNV-1a over the little-endian bytes of a stream.
fn fnv1a(v: &[Access]) -> u64 {
    bytes(v).iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn same_spec_same_stream() {
    for order in ORDERS {
        let mut t = touch(order);
        t.passes = 3;
        t.write = 0.3;
        let a = collect(&t, 5, 777, 2, 100);
        let b = collect(&t.clone(), 5, 777, 2, 100);
        assert_eq!(a.len(), 3 * 777);
        assert_eq!(bytes(&a), bytes(&b), "{order:?}");
    }
}

/// Pinned digests: a change here changes every workload's stream, on every
/// engine, and must be deliberate (and documented in docs/spec.md).
#[test]
fn streams_are_pinned() {
    let mut got = Vec::new();
    for order in ORDERS {
        let mut t = touch(order);
        t.seed = 7;
        t.count = Some(5000);
        t.write = 0.5;
        got.push((order, fnv1a(&collect(&t, 3, 1000, 1, 256))));
    }
    let want = [
        (Order::Seq, 0xf5c3_4236_8cca_0224_u64),
        (Order::Rev, 0x22e8_2a27_bf9d_3d70),
        (Order::Shuffle, 0xdf0f_fd50_e5fa_527c),
        (Order::Uniform, 0xa1ed_8126_edc7_1502),
        (Order::Zipf, 0xc233_f655_c382_6d70),
    ];
    assert_eq!(
        got,
        want,
        "digests: {}",
        got.iter()
            .map(|(o, h)| format!("{o:?} {h:#018x}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[test]
fn instances_differ_for_random_orders() {
    for order in [Order::Shuffle, Order::Uniform, Order::Zipf] {
        let t = touch(order);
        let streams: Vec<Vec<u64>> = (0..4)
            .map(|i| pages(&collect(&t, 0, 4096, i, 512)))
            .collect();
        for i in 0..streams.len() {
            for j in i + 1..streams.len() {
                assert_ne!(streams[i], streams[j], "{order:?}: instances {i} and {j}");
            }
        }
        // And so do seeds.
        let mut t2 = t.clone();
        t2.seed += 1;
        assert_ne!(
            pages(&collect(&t2, 0, 4096, 0, 512)),
            streams[0],
            "{order:?}: seeds"
        );
    }
}

#[test]
fn instances_do_not_change_seq_and_rev() {
    for order in [Order::Seq, Order::Rev] {
        let t = touch(order);
        assert_eq!(
            collect(&t, 0, 100, 0, 9),
            collect(&t, 0, 100, 17, 9),
            "{order:?}"
        );
    }
}

#[test]
fn write_decisions_differ_by_instance() {
    let mut t = touch(Order::Seq);
    t.write = 0.5;
    let a = collect(&t, 0, 4096, 0, 64);
    let b = collect(&t, 0, 4096, 1, 64);
    assert_eq!(pages(&a), pages(&b));
    assert_ne!(a, b);
}

#[test]
fn sub_range_is_respected() {
    // A region of 10_000 pages, touching 4096 pages from page 1000 on: the
    // caller passes the Touch's offset and length as `first` and `n`.
    for order in ORDERS {
        let mut t = touch(order);
        t.offset = 1000;
        t.length = Some(4096);
        t.count = Some(20_000);
        let (first, n) = (t.offset, t.length.unwrap());
        let v = collect(&t, first, n, 3, 1000);
        assert_eq!(v.len(), 20_000);
        assert!(
            v.iter()
                .all(|&a| (first..first + n).contains(&access_page(a))),
            "{order:?}"
        );
        if matches!(order, Order::Seq | Order::Rev | Order::Shuffle) {
            // Whole passes cover the sub-range exactly.
            let mut p = pages(&v[..n as usize]);
            p.sort_unstable();
            assert_eq!(p, (first..first + n).collect::<Vec<_>>(), "{order:?}");
        }
    }
    let t = touch(Order::Seq);
    assert_eq!(pages(&collect(&t, 10, 3, 0, 2)), [10, 11, 12]);
    let t = touch(Order::Rev);
    assert_eq!(pages(&collect(&t, 10, 3, 0, 2)), [12, 11, 10]);
}

#[test]
fn batches_concatenate_to_the_same_stream() {
    for order in ORDERS {
        let mut t = touch(order);
        t.count = Some(10_007);
        t.write = 0.4;
        let whole = collect(&t, 0, 997, 1, usize::MAX);
        assert_eq!(whole.len(), 10_007);
        for batch in [1, 2, 7, 64, 996, 997, 998, 4096, 10_007, 20_000] {
            assert_eq!(
                collect(&t, 0, 997, 1, batch),
                whole,
                "{order:?} batch {batch}"
            );
        }
        // Irregular batch sizes too.
        let mut s = TouchStream::new(&t, 0, 997, 1).unwrap();
        let mut v = Vec::new();
        let mut k = 0usize;
        while s.remaining() > 0 {
            k = (k * 31 + 17) % 1500;
            s.next_batch(&mut v, k).unwrap();
        }
        assert_eq!(v, whole, "{order:?} irregular batches");
    }
}

#[test]
fn next_batch_appends_and_stops() {
    let t = touch(Order::Seq);
    let mut s = TouchStream::new(&t, 0, 5, 0).unwrap();
    let mut v = vec![u64::MAX];
    assert_eq!(s.next_batch(&mut v, 3).unwrap(), 3);
    assert_eq!(s.next_batch(&mut v, 3).unwrap(), 2);
    assert_eq!(s.next_batch(&mut v, 3).unwrap(), 0);
    assert_eq!(s.remaining(), 0);
    assert_eq!(v[0], u64::MAX, "next_batch appends; it does not clear");
    assert_eq!(pages(&v[1..]), [0, 1, 2, 3, 4]);
}

#[test]
fn empty_range_is_an_empty_stream() {
    for order in ORDERS {
        let mut t = touch(order);
        t.count = Some(10);
        let s = TouchStream::new(&t, 0, 0, 0).unwrap();
        assert_eq!(s.remaining(), 0);
        assert!(collect(&t, 0, 0, 0, 8).is_empty());
    }
}

#[test]
fn count_and_passes_set_the_length() {
    for order in ORDERS {
        let mut t = touch(order);
        t.passes = 4;
        assert_eq!(collect(&t, 0, 33, 0, 10).len(), 132, "{order:?}");
        t.count = Some(50);
        assert_eq!(collect(&t, 0, 33, 0, 10).len(), 50, "{order:?}");
    }
    // rev with a count keeps cycling passes.
    let mut t = touch(Order::Rev);
    t.count = Some(7);
    assert_eq!(pages(&collect(&t, 0, 3, 0, 2)), [2, 1, 0, 2, 1, 0, 2]);
}

/// `passes × n` beyond 64 bits does not overflow (validation bounds it at
/// 2^48 for a spec; a hand-built `Touch` saturates).
#[test]
fn huge_passes_saturate() {
    for order in ORDERS {
        let mut t = touch(order);
        t.passes = u64::MAX / 2;
        let mut s = TouchStream::new(&t, 0, 3, 0).unwrap();
        assert_eq!(s.remaining(), u64::MAX, "{order:?}");
        let mut v = Vec::new();
        assert_eq!(s.next_batch(&mut v, 6).unwrap(), 6);
        assert_eq!(s.remaining(), u64::MAX - 6);
        assert!(pages(&v).iter().all(|&p| p < 3));
    }
}

#[test]
fn write_fraction_extremes_and_encoding() {
    for order in ORDERS {
        let mut t = touch(order);
        t.count = Some(1000);
        t.write = 0.0;
        assert!(collect(&t, 0, 64, 0, 100)
            .iter()
            .all(|&a| !access_is_write(a)));
        t.write = 1.0;
        let v = collect(&t, 0, 64, 0, 100);
        assert!(v.iter().all(|&a| access_is_write(a)));
        assert!(v.iter().all(|&a| a == access_page(a) << 1 | 1));
    }
}

#[test]
fn write_fraction_is_close_and_independent_of_pages() {
    let mut t = touch(Order::Zipf);
    t.count = Some(100_000);
    for w in [0.01, 0.5, 0.9] {
        t.write = w;
        let v = collect(&t, 0, 1000, 0, 4096);
        let frac = v.iter().filter(|&&a| access_is_write(a)).count() as f64 / v.len() as f64;
        assert!((frac - w).abs() < 0.01, "write {w}: {frac}");
    }
    t.write = 0.0;
    let none = pages(&collect(&t, 0, 1000, 0, 4096));
    t.write = 0.5;
    assert_eq!(pages(&collect(&t, 0, 1000, 0, 4096)), none);
}

#[test]
fn shuffle_passes_differ() {
    let mut t = touch(Order::Shuffle);
    t.passes = 3;
    let v = pages(&collect(&t, 0, 500, 0, 64));
    assert_ne!(v[..500], v[500..1000]);
    assert_ne!(v[500..1000], v[1000..]);
    // And a shuffle is not the identity.
    assert_ne!(v[..500], (0..500).collect::<Vec<_>>()[..]);
}

#[test]
fn uniform_covers_the_range_evenly() {
    let mut t = touch(Order::Uniform);
    t.count = Some(200_000);
    let n = 100u64;
    let mut hist = vec![0u32; n as usize];
    for a in collect(&t, 0, n, 0, 4096) {
        hist[access_page(a) as usize] += 1;
    }
    // 2000 expected per page, sd ≈ 44.
    assert!(hist.iter().all(|&c| (1750..2250).contains(&c)), "{hist:?}");
}

/// Zipf frequency decreases with rank, averaged over buckets of ranks
/// [1], [2, 3], [4, 7], …, and the top ranks match k^-theta / H(n, theta).
fn check_zipf(theta: f64) {
    let n = 1000u64;
    let samples = 400_000u64;
    let mut t = touch(Order::Zipf);
    t.theta = theta;
    t.count = Some(samples);
    let mut hist = vec![0u64; n as usize];
    for a in collect(&t, 0, n, 0, 4096) {
        hist[access_page(a) as usize] += 1;
    }
    let mut means = Vec::new();
    let mut lo = 0usize;
    while lo < n as usize {
        let hi = (2 * lo + 1).min(n as usize);
        means.push(hist[lo..hi].iter().sum::<u64>() as f64 / (hi - lo) as f64);
        lo = hi;
    }
    assert!(
        means.windows(2).all(|w| w[0] > w[1]),
        "theta {theta}: bucket means {means:?}"
    );
    let norm: f64 = (1..=n).map(|k| (k as f64).powf(-theta)).sum();
    for k in 1..=5u64 {
        let expected = samples as f64 * (k as f64).powf(-theta) / norm;
        let got = hist[k as usize - 1] as f64;
        assert!(
            (got / expected - 1.0).abs() < 0.06,
            "theta {theta} rank {k}: {got} vs {expected}"
        );
    }
}

#[test]
fn zipf_theta_0_5() {
    check_zipf(0.5);
}

#[test]
fn zipf_theta_1_2() {
    check_zipf(1.2);
}

#[test]
fn zipf_theta_1_exactly() {
    check_zipf(1.0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every whole pass of a shuffle is a permutation of the range, and a
    /// trailing partial pass (count not a multiple of n) repeats no page.
    #[test]
    fn shuffle_is_a_permutation_per_pass(
        n in 1u64..5000,
        passes in 1u64..4,
        extra_frac in 0.0f64..1.0,
        seed in any::<u64>(),
        instance in any::<u32>(),
        first in 0u64..1_000_000,
        batch in 1usize..3000,
    ) {
        let extra = (extra_frac * n as f64) as u64;
        let mut t = touch(Order::Shuffle);
        t.seed = seed;
        t.count = Some(passes * n + extra);
        let v = pages(&collect(&t, first, n, instance, batch));
        prop_assert_eq!(v.len() as u64, passes * n + extra);
        let range: Vec<u64> = (first..first + n).collect();
        for pass in v.chunks(n as usize) {
            let mut p = pass.to_vec();
            p.sort_unstable();
            if pass.len() as u64 == n {
                prop_assert_eq!(&p, &range);
            } else {
                p.dedup();
                prop_assert_eq!(p.len(), pass.len());
                prop_assert!(p.iter().all(|x| range.contains(x)));
            }
        }
    }

    /// The stream is the documented one (see `reference`), for any order,
    /// seed, instance, write fraction and length.
    #[test]
    fn matches_the_written_definition(
        order in prop::sample::select(ORDERS.to_vec()),
        n in 1u64..3000,
        count in prop::option::of(1u64..8000),
        passes in 1u64..3,
        write in prop_oneof![Just(0.0), Just(1.0), 0.0f64..1.0],
        theta in 0.01f64..3.0,
        seed in any::<u64>(),
        instance in any::<u32>(),
        first in 0u64..100_000,
    ) {
        let mut t = touch(order);
        t.seed = seed;
        t.count = count;
        t.passes = passes;
        t.write = write;
        if order == Order::Zipf {
            t.theta = theta;
        }
        let got = collect(&t, first, n, instance, 1024);
        let want = reference::stream(&t, first, n, instance);
        prop_assert_eq!(got, want);
    }
}

#[test]
fn reference_matches_for_fixed_cases() {
    for order in ORDERS {
        for (n, count, passes, write, instance) in [
            (1u64, None, 3u64, 0.5, 0u32),
            (2, Some(9), 1, 0.25, 1),
            (4, None, 2, 1.0, 2),
            (5, None, 2, 0.0, 3),
            (4097, Some(20_000), 1, 0.75, 4),
            (1 << 20, Some(5000), 1, 0.1, 5),
        ] {
            let mut t = touch(order);
            t.count = count;
            t.passes = passes;
            t.write = write;
            assert_eq!(
                collect(&t, 7, n, instance, 333),
                reference::stream(&t, 7, n, instance),
                "{order:?} n={n}"
            );
        }
    }
}

/// The streams exactly as docs/spec.md defines them, written without the
/// crate's code (xoshiro256++ and SplitMix64 included), for comparison.
mod reference {
    use mmsim_spec::model::{Order, Touch};

    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
    const SALT_ORDER: u64 = u64::from_be_bytes(*b"\0\0\0order");
    const SALT_WRITE: u64 = u64::from_be_bytes(*b"\0\0\0write");
    const SALT_PASS: u64 = u64::from_be_bytes(*b"\0\0\0\0pass");

    pub fn splitmix64(x: u64) -> u64 {
        let mut z = x.wrapping_add(GOLDEN);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn stream_seed(seed: u64, instance: u32, salt: u64) -> u64 {
        splitmix64(seed ^ splitmix64(instance as u64 ^ salt))
    }

    /// xoshiro256++, its state the first four outputs of SplitMix64 from `seed`.
    struct Rng([u64; 4]);

    impl Rng {
        fn new(seed: u64) -> Self {
            Rng([0u64, 1, 2, 3].map(|i| splitmix64(seed.wrapping_add(i.wrapping_mul(GOLDEN)))))
        }

        fn next(&mut self) -> u64 {
            let s = &mut self.0;
            let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
            let t = s[1] << 17;
            s[2] ^= s[0];
            s[3] ^= s[1];
            s[1] ^= s[2];
            s[0] ^= s[3];
            s[2] ^= t;
            s[3] = s[3].rotate_left(45);
            out
        }

        fn below(&mut self, n: u64) -> u64 {
            let mut m = self.next() as u128 * n as u128;
            if (m as u64) < n {
                let threshold = n.wrapping_neg() % n;
                while (m as u64) < threshold {
                    m = self.next() as u128 * n as u128;
                }
            }
            (m >> 64) as u64
        }

        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / 9_007_199_254_740_992.0
        }
    }

    fn feistel(n: u64, key: u64, i: u64) -> u64 {
        let mut bits = 2;
        while (1u64 << bits) < n {
            bits += 2;
        }
        let half = bits / 2;
        let mut keys = [0u64; 4];
        let mut k = key;
        for slot in &mut keys {
            k = splitmix64(k);
            *slot = k;
        }
        let mask = (1u64 << half) - 1;
        let net = |x: u64| {
            let (mut l, mut r) = (x >> half, x & mask);
            for k in keys {
                let f = splitmix64(r ^ k) & mask;
                (l, r) = (r, l ^ f);
            }
            l << half | r
        };
        let mut x = net(i);
        while x >= n {
            x = net(x);
        }
        x
    }

    fn helper1(x: f64) -> f64 {
        if x.abs() > 1e-8 {
            libm::log1p(x) / x
        } else {
            1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
        }
    }

    fn helper2(x: f64) -> f64 {
        if x.abs() > 1e-8 {
            libm::expm1(x) / x
        } else {
            1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
        }
    }

    struct Zipf {
        n: f64,
        theta: f64,
        hx1: f64,
        hn: f64,
        s: f64,
    }

    impl Zipf {
        fn h(&self, x: f64) -> f64 {
            libm::exp(-self.theta * libm::log(x))
        }
        fn big_h(&self, x: f64) -> f64 {
            let l = libm::log(x);
            helper2((1.0 - self.theta) * l) * l
        }
        fn big_h_inv(&self, x: f64) -> f64 {
            let t = (x * (1.0 - self.theta)).max(-1.0);
            libm::exp(helper1(t) * x)
        }
        fn new(n: u64, theta: f64) -> Self {
            let mut z = Zipf {
                n: n as f64,
                theta,
                hx1: 0.0,
                hn: 0.0,
                s: 0.0,
            };
            z.hx1 = z.big_h(1.5) - 1.0;
            z.hn = z.big_h(n as f64 + 0.5);
            z.s = 2.0 - z.big_h_inv(z.big_h(2.5) - z.h(2.0));
            z
        }
        fn sample(&self, rng: &mut Rng) -> u64 {
            loop {
                let u = self.hn + rng.unit() * (self.hx1 - self.hn);
                let x = self.big_h_inv(u);
                let k = libm::floor(x + 0.5).clamp(1.0, self.n);
                if k - x <= self.s || u >= self.big_h(k + 0.5) - self.h(k) {
                    return k as u64;
                }
            }
        }
    }

    pub fn stream(t: &Touch, first: u64, n: u64, instance: u32) -> Vec<u64> {
        if n == 0 {
            return Vec::new();
        }
        let total = t.count.unwrap_or(t.passes * n);
        let mut order_rng = Rng::new(stream_seed(t.seed, instance, SALT_ORDER));
        let mut write_rng = Rng::new(stream_seed(t.seed, instance, SALT_WRITE));
        let zipf = Zipf::new(n, t.theta);
        let threshold = (t.write * 9_007_199_254_740_992.0) as u64;
        let mut out = Vec::with_capacity(total as usize);
        for j in 0..total {
            let (pass, i) = (j / n, j % n);
            let page = match t.order {
                Order::Seq => i,
                Order::Rev => n - 1 - i,
                Order::Shuffle => {
                    let salt = if pass == 0 {
                        SALT_PASS
                    } else {
                        SALT_PASS ^ splitmix64(pass)
                    };
                    feistel(n, stream_seed(t.seed, instance, salt), i)
                }
                Order::Uniform => order_rng.below(n),
                Order::Zipf => zipf.sample(&mut order_rng) - 1,
                Order::Trace => unreachable!("the reference draws the generated orders only"),
            };
            let write = if t.write <= 0.0 {
                false
            } else if t.write >= 1.0 {
                true
            } else {
                (write_rng.next() >> 11) < threshold
            };
            out.push((first + page) << 1 | write as u64);
        }
        out
    }
}

//! Event histograms with power-of-two buckets, as bpftrace's `hist()`
//! prints them: bucket k counts values in [2^k, 2^(k+1)), bucket 0 also 0.

use mmsim_spec::output::HistBucket;

#[derive(Clone)]
pub struct Log2Hist {
    buckets: [u64; 64],
}

impl Default for Log2Hist {
    fn default() -> Self {
        Log2Hist { buckets: [0; 64] }
    }
}

impl Log2Hist {
    #[inline]
    pub fn record(&mut self, v: u64) {
        let k = if v == 0 {
            0
        } else {
            63 - v.leading_zeros() as usize
        };
        self.buckets[k] += 1;
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Non-empty buckets from the lowest to the highest used, inclusive.
    pub fn buckets(&self) -> Vec<HistBucket> {
        let used: Vec<usize> = (0..64).filter(|&k| self.buckets[k] > 0).collect();
        let (Some(&lo), Some(&hi)) = (used.first(), used.last()) else {
            return Vec::new();
        };
        (lo..=hi)
            .map(|k| HistBucket {
                lo: if k == 0 { 0 } else { 1 << k },
                hi: 1u64.checked_shl(k as u32 + 1).unwrap_or(u64::MAX),
                count: self.buckets[k],
            })
            .collect()
    }
}

/// The event sites mmsim records.
#[derive(Default, Clone)]
pub struct Histograms {
    /// Simulated time of each page fault, from `handle_mm_fault` entry to
    /// return (direct reclaim and charging included), minor and major.
    pub fault_minor_ns: Log2Hist,
    pub fault_major_ns: Log2Hist,
    /// Simulated time of each swap-in fault that read from the device.
    pub swapin_ns: Log2Hist,
    /// Each swap readahead window `__swapin_nr_pages` chose, in pages.
    pub swapin_nr_pages: Log2Hist,
    /// Each spawned program's run time, from its start to its exit.
    pub spawn_runtime_ns: Log2Hist,
    /// The size in pages of each folio added to a regular file's page
    /// cache (1 on ext2; XFS readahead's large folios).
    pub pagecache_folio_pages: Log2Hist,
}

impl Histograms {
    pub fn named(&self) -> [(&'static str, &Log2Hist); 6] {
        [
            ("fault_latency_ns{kind=minor}", &self.fault_minor_ns),
            ("fault_latency_ns{kind=major}", &self.fault_major_ns),
            ("swapin_latency_ns", &self.swapin_ns),
            ("swapin_nr_pages", &self.swapin_nr_pages),
            ("spawn_runtime_ns", &self.spawn_runtime_ns),
            ("pagecache_folio_pages", &self.pagecache_folio_pages),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        let mut h = Log2Hist::default();
        for v in [0, 1, 3, 4, 7, 1000] {
            h.record(v);
        }
        let b = h.buckets();
        assert_eq!(h.count(), 6);
        assert_eq!((b[0].lo, b[0].hi, b[0].count), (0, 2, 2)); // 0 and 1
        assert_eq!((b[1].lo, b[1].hi, b[1].count), (2, 4, 1)); // 3
        assert_eq!((b[2].lo, b[2].hi, b[2].count), (4, 8, 2)); // 4, 7
        let last = b.last().unwrap();
        assert_eq!((last.lo, last.hi, last.count), (512, 1024, 1));
        assert!(Log2Hist::default().buckets().is_empty());
    }
}

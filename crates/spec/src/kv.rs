//! The `kvstore` op: a key-value server (Redis-like: one hash table, values
//! in a heap) driven by a memtier-like client, as a stream of page accesses
//! both engines make in the same order. The model, exactly (docs/spec.md
//! "kvstore"):
//!
//! - The region holds the hash table, `buckets` = the next power of two of
//!   `keys`, 8 bytes per bucket, from page 0, then the heap of value slots
//!   of `slot` bytes: slot `n` covers bytes `[n × slot, (n + 1) × slot)` of
//!   the heap.
//! - A SET writes its value into a fresh slot, as Redis does (it builds a
//!   new value object, stores it, then frees the old one): the slot freed
//!   most recently if any (jemalloc hands a size class's freed regions
//!   back last-in first-out), else the next never-used slot. An overwritten
//!   key's old slot is then freed. So a page last *read* by GETs of one key
//!   is later *written* with another key's value.
//! - `slot` = `value_size` + 64 bytes of entry, key and object headers,
//!   rounded up to a multiple of 512 (jemalloc's size classes step by 512
//!   between 2 and 4 KiB).
//! - Key `k` (1..=keys) hashes to bucket `splitmix64(k) mod buckets`.
//! - Requests come in groups of `sets + gets` (the ratio): the sets first,
//!   then the gets, each on a key drawn uniformly from 1..=keys (memtier's
//!   random pattern) by the stream generator of docs/spec.md with salt
//!   `SALT_KV`.
//! - GET k: read the bucket's page; if k is set, read every page of its
//!   slot (a hit), else nothing more (a miss).
//! - SET k: read the bucket's page; if k is new, write the bucket's page
//!   (the insertion) and take the next slot; write every page of the slot.

use crate::rng::{splitmix64, stream_seed, Rng};
use crate::stream::Access;

const SALT_KV: u64 = 0x6b76_7374_6f72_6521;
/// Bytes of dictEntry, key sds and value robj headers beside each value.
pub const KV_ENTRY_OVERHEAD: u64 = 64;
/// Protocol bytes of a request or reply besides the value (RESP framing,
/// command name, the memtier key), for the KB/s figure.
pub const KV_PROTOCOL_BYTES: u64 = 60;

/// What one request did, for the client-side statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvRequest {
    pub set: bool,
    /// GET only: the key was set.
    pub hit: bool,
    /// Bytes on the wire, both ways.
    pub bytes: u64,
}

/// The server's data: which keys are set and where. It lives as long as
/// the region: later `kvstore` steps on the region find the keys earlier
/// ones set.
#[derive(Clone)]
pub struct KvDb {
    keys: u64,
    buckets: u64,
    table_pages: u64,
    slot: u64,
    value_size: u64,
    /// Heap slot + 1 of each key (0: not set).
    slot_of: Vec<u32>,
    /// Slots handed out so far (the heap's high-water mark).
    inserted: u64,
    /// Freed slots, the most recent last.
    free: Vec<u32>,
    /// Keys set.
    live: u64,
}

impl KvDb {
    pub fn new(kv: &crate::model::KvStore) -> Self {
        let buckets = kv.keys.next_power_of_two();
        KvDb {
            keys: kv.keys,
            buckets,
            table_pages: (buckets * 8).div_ceil(4096),
            slot: kv_slot_bytes(kv.value_size),
            value_size: kv.value_size,
            slot_of: vec![0; kv.keys as usize + 1],
            inserted: 0,
            free: Vec::new(),
            live: 0,
        }
    }

    /// Makes every page of the server's bookkeeping present now, and the
    /// free list as large as it can grow. The native runner calls it
    /// before the task joins its memory cgroup: this bookkeeping stands
    /// for what the model puts in the region's bucket pages, so it must
    /// not be charged to the cgroup, reclaimed and faulted back in (a
    /// read fault then a write to it is a pgreuse the model has no page
    /// for).
    pub fn prefault(&mut self) {
        self.free.reserve(self.keys as usize);
        // 1024 u32s to a page; black_box keeps the stores of zero.
        for chunk in self.slot_of.chunks_mut(1024) {
            chunk[0] = std::hint::black_box(0);
        }
        for x in self.free.spare_capacity_mut().iter_mut().step_by(1024) {
            x.write(std::hint::black_box(0));
        }
    }

    /// A slot for a new value: the last one freed, else a new one.
    fn alloc_slot(&mut self) -> u64 {
        self.free.pop().map_or_else(
            || {
                self.inserted += 1;
                self.inserted - 1
            },
            |s| s as u64,
        )
    }

    /// A later step must describe the same server.
    pub fn matches(&self, kv: &crate::model::KvStore) -> bool {
        self.keys == kv.keys && self.value_size == kv.value_size
    }

    /// Pages the table and the slots taken so far cover.
    pub fn pages_used(&self) -> u64 {
        self.table_pages + (self.inserted * self.slot).div_ceil(4096)
    }

    /// Keys set.
    pub fn live_keys(&self) -> u64 {
        self.live
    }
}

/// One step's requests against a [`KvDb`].
pub struct KvStream {
    remaining: u64,
    sets: u64,
    gets: u64,
    in_group: u64,
    rng: Rng,
}

/// The slot size for a value size (see the module documentation).
pub fn kv_slot_bytes(value_size: u64) -> u64 {
    (value_size + KV_ENTRY_OVERHEAD).div_ceil(512) * 512
}

/// Pages a kvstore over `keys` keys needs to hold them all.
pub fn kv_pages_needed(keys: u64, value_size: u64) -> u64 {
    let buckets = keys.next_power_of_two();
    (buckets * 8).div_ceil(4096) + (keys * kv_slot_bytes(value_size)).div_ceil(4096)
}

impl KvStream {
    pub fn new(kv: &crate::model::KvStore, instance: u32) -> Self {
        KvStream {
            remaining: kv.requests,
            sets: kv.sets,
            gets: kv.gets,
            in_group: 0,
            rng: Rng::new(stream_seed(kv.seed, instance, SALT_KV)),
        }
    }

    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The next request: its accesses appended to `out` (page << 1 | write,
    /// pages relative to the region), or None when all are done.
    pub fn next_request(&mut self, db: &mut KvDb, out: &mut Vec<Access>) -> Option<KvRequest> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let set = self.in_group < self.sets;
        self.in_group = (self.in_group + 1) % (self.sets + self.gets);
        let key = 1 + self.rng.below(db.keys);
        db.request(key, set, out)
    }
}

impl KvDb {
    fn request(&mut self, key: u64, set: bool, out: &mut Vec<Access>) -> Option<KvRequest> {
        let bucket_page = (splitmix64(key) % self.buckets) * 8 / 4096;
        out.push(bucket_page << 1);
        let slot = self.slot_of[key as usize];
        if !set {
            if slot == 0 {
                return Some(KvRequest {
                    set: false,
                    hit: false,
                    bytes: 2 * KV_PROTOCOL_BYTES,
                });
            }
            self.push_slot(slot as u64 - 1, false, out);
            return Some(KvRequest {
                set: false,
                hit: true,
                bytes: 2 * KV_PROTOCOL_BYTES + self.value_size,
            });
        }
        let n = self.alloc_slot();
        self.slot_of[key as usize] = (n + 1) as u32;
        if slot == 0 {
            out.push(bucket_page << 1 | 1);
            self.live += 1;
        }
        self.push_slot(n, true, out);
        if slot != 0 {
            self.free.push(slot - 1);
        }
        Some(KvRequest {
            set: true,
            hit: false,
            bytes: 2 * KV_PROTOCOL_BYTES + self.value_size,
        })
    }

    fn push_slot(&self, n: u64, write: bool, out: &mut Vec<Access>) {
        let first = n * self.slot / 4096;
        let last = ((n + 1) * self.slot - 1) / 4096;
        for p in first..=last {
            out.push((self.table_pages + p) << 1 | write as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KvStore;

    fn kv(keys: u64, requests: u64) -> KvStore {
        KvStore {
            region: "r".into(),
            keys,
            value_size: 2048,
            requests,
            sets: 1,
            gets: 10,
            pipeline: 256,
            seed: 1,
        }
    }

    #[test]
    fn slot_size_rounds_value_and_headers_to_512() {
        assert_eq!(kv_slot_bytes(2048), 2560);
        assert_eq!(kv_slot_bytes(100), 512);
        // 1000 keys: 1024 buckets of 8 bytes (2 pages) + 1000 × 2560 bytes.
        assert_eq!(kv_pages_needed(1000, 2048), 2 + 625);
    }

    #[test]
    fn first_set_inserts_then_gets_hit() {
        let mut s = KvStream::new(&kv(1, 12), 0);
        let mut db = KvDb::new(&kv(1, 12));
        let mut out = Vec::new();
        let r = s.next_request(&mut db, &mut out).unwrap();
        assert!(r.set);
        // Bucket read, bucket write, the slot's pages (2560 bytes: page 0).
        assert_eq!(out, vec![0, 1, 1 << 1 | 1]);
        for _ in 0..10 {
            out.clear();
            let r = s.next_request(&mut db, &mut out).unwrap();
            assert!(!r.set && r.hit);
            assert_eq!(out, vec![0, 1 << 1]);
        }
        // The next group starts with a set of the same (only) key: an
        // overwrite, no insertion, into a new slot (bytes 2560..5120 of the
        // heap: its pages 0 and 1); the old slot is freed.
        out.clear();
        assert!(s.next_request(&mut db, &mut out).unwrap().set);
        assert_eq!(out, vec![0, 1 << 1 | 1, 2 << 1 | 1]);
        assert!(s.next_request(&mut db, &mut out).is_none());
        assert_eq!(db.live_keys(), 1);
    }

    #[test]
    fn ratio_and_misses() {
        let mut s = KvStream::new(&kv(1_000_000, 11_000), 3);
        let mut db = KvDb::new(&kv(1_000_000, 11_000));
        let mut out = Vec::new();
        let (mut sets, mut hits) = (0, 0);
        while let Some(r) = s.next_request(&mut db, &mut out) {
            sets += r.set as u64;
            hits += r.hit as u64;
        }
        assert_eq!(sets, 1000);
        // 1000 of a million keys set: GETs almost always miss.
        assert!(hits < 20, "{hits}");
    }
}

#[cfg(test)]
mod db_tests {
    use super::*;
    use crate::model::KvStore;

    #[test]
    fn a_later_step_finds_the_keys_an_earlier_one_set() {
        let load = KvStore {
            region: "r".into(),
            keys: 100,
            value_size: 2048,
            requests: 1000,
            sets: 1,
            gets: 0,
            pipeline: 1,
            seed: 1,
        };
        let mut db = KvDb::new(&load);
        let mut out = Vec::new();
        let mut s = KvStream::new(&load, 0);
        while s.next_request(&mut db, &mut out).is_some() {}
        // 1000 random sets over 100 keys leave every key set, in 101 slots
        // (one freed slot is always waiting for the next value).
        assert_eq!(db.live_keys(), 100);
        assert_eq!(db.pages_used(), 1 + (101 * 2560u64).div_ceil(4096));
        let read = KvStore {
            sets: 0,
            gets: 1,
            seed: 2,
            ..load
        };
        assert!(db.matches(&read));
        let mut s = KvStream::new(&read, 0);
        let mut hits = 0;
        while let Some(r) = s.next_request(&mut db, &mut out) {
            hits += r.hit as u64;
        }
        assert_eq!(hits, 1000);
    }
}

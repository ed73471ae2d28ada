//! `kvstore`: a key-value server in a region, driven by a memtier-like
//! client (`crate::kv`).

use super::{region_field, StepCx, StepOp};
use crate::error::{Reporter, SpecError};
use crate::model::{self, Op};
use crate::parse::fields::{integer, size, string, type_error, Fields};
use crate::parse::regions::{RegionCheck, Regions};
use crate::parse::MAX_ACCESSES;
use crate::work::{Sizes, WorkCx};

pub(super) struct KvStore;

impl StepOp for KvStore {
    fn word(&self) -> &'static str {
        "kvstore"
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "op",
            "region",
            "keys",
            "value_size",
            "requests",
            "ratio",
            "pipeline",
            "seed",
        ]
    }

    fn required(&self) -> &'static [&'static str] {
        &["region", "keys", "value_size", "requests"]
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::KvStore(build_kvstore(cx.rep, f)?))
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::KvStore(_))
    }

    /// The region holds the table and every key the requests can insert.
    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::KvStore(kv) = op else {
            unreachable!("not a kvstore")
        };
        let Some(&pages) = regions.get(&kv.region) else {
            return Err(cx.unknown_region(key, &kv.region, regions));
        };
        let shared = cx.inherited.iter().chain(&cx.shared_with_threads);
        if shared.into_iter().any(|n| *n == kv.region) {
            // One server's data driven from two tasks at once is not
            // modelled: each engine would keep it its own way.
            return Err(cx.err(
                key,
                "region",
                format!(
                    "found a kvstore on region \"{}\", which a thread shares (a thread with the task that started it, or the task with a thread it has not waited for); expected a region of the thread's own, or a wait step before it",
                    kv.region
                ),
            ));
        }
        let max_sets = (kv.requests / (kv.sets + kv.gets)) * kv.sets
            + (kv.requests % (kv.sets + kv.gets)).min(kv.sets);
        let table = (kv.keys.next_power_of_two() * 8).div_ceil(4096);
        let heap = (kv.keys.min(max_sets) * crate::kv::kv_slot_bytes(kv.value_size)).div_ceil(4096);
        let need = table + heap;
        if pages < need {
            return Err(cx.err(
                key,
                "region",
                format!(
                    "found region \"{}\" of {pages} pages, expected at least {need} pages: the hash table of {} keys and the {} values the requests can insert",
                    kv.region,
                    kv.keys,
                    kv.keys.min(max_sets)
                ),
            ));
        }
        Ok(())
    }

    /// Each request and each key: its value's pages and one more.
    fn work(&self, _cx: &WorkCx, op: &Op, _sizes: &mut Sizes) -> u128 {
        let Op::KvStore(kv) = op else {
            unreachable!("not a kvstore")
        };
        let value_pages = kv.value_size.div_ceil(crate::PAGE_SIZE).max(1) as u128;
        (kv.requests as u128 + kv.keys as u128).saturating_mul(value_pages + 1)
    }
}

/// The server's keys and values, and the client's requests.
fn build_kvstore(rep: &Reporter, f: &Fields) -> Result<model::KvStore, SpecError> {
    let req = |field: &str| f.req(field);
    let whole = |field: &str, lo: i64, words: &str| -> Result<u64, SpecError> {
        integer(
            rep,
            req(field),
            &f.path(field),
            lo,
            MAX_ACCESSES as i64,
            words,
        )
        .map(|v| v as u64)
    };
    let keys = whole("keys", 1, "a whole number of keys from 1 to 2^32 - 2")?;
    if keys >= u32::MAX as u64 - 1 {
        return Err(type_error(
            rep,
            req("keys"),
            &f.path("keys"),
            "a whole number of keys from 1 to 2^32 - 2",
        ));
    }
    let requests = whole(
        "requests",
        1,
        "a whole number of requests, at least 1 and at most 2^48",
    )?;
    let vs = req("value_size");
    let value_size = size(rep, vs, &f.path("value_size"))?;
    if value_size == 0 || value_size > 1 << 20 {
        return Err(rep.at(
            vs.at,
            f.path("value_size"),
            format!("found {value_size} bytes, expected a value size from 1 byte to 1M"),
        ));
    }
    let (sets, gets) = match f.get("ratio") {
        None => (1, 10),
        Some(r) => {
            let words = "a string \"SETS:GETS\" such as \"1:10\" (not both zero)";
            let text = string(rep, r, &f.path("ratio"), words)?;
            let parsed = text
                .split_once(':')
                .and_then(|(a, b)| {
                    Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?))
                })
                .filter(|&(a, b)| a + b > 0 && a <= 1_000_000 && b <= 1_000_000);
            parsed.ok_or_else(|| type_error(rep, r, &f.path("ratio"), words))?
        }
    };
    let pipeline = match f.get("pipeline") {
        None => 1,
        Some(p) => integer(
            rep,
            p,
            &f.path("pipeline"),
            1,
            1 << 20,
            "a whole number from 1 to 1048576",
        )? as u64,
    };
    let seed = match f.get("seed") {
        None => 0,
        Some(s) => integer(
            rep,
            s,
            &f.path("seed"),
            0,
            i64::MAX,
            "a whole number from 0 to 2^63-1",
        )? as u64,
    };
    Ok(model::KvStore {
        region: region_field(rep, f, &KvStore)?,
        keys,
        value_size,
        requests,
        sets,
        gets,
        pipeline,
        seed,
    })
}

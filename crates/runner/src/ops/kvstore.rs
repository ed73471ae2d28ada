//! `kvstore`: the key-value server of a region (kept between the steps
//! that drive it), driven by the same request stream as the simulator's.

use crate::exec::Child;
use crate::region::{touch, Region};
use mmsim_spec::output::KvResult;
use mmsim_spec::stream::{access_is_write, access_page};
use std::time::Instant;

pub(super) fn run(c: &mut Child, kv: &mmsim_spec::KvStore) -> Result<(), String> {
    let r = c
        .regions
        .get_mut(&kv.region)
        .ok_or_else(|| format!("no region {}", kv.region))?;
    let mut db = c
        .kv_dbs
        .remove(&kv.region)
        .unwrap_or_else(|| mmsim_spec::kv::KvDb::new(kv));
    if !db.matches(kv) {
        return Err(format!(
            "kvstore on region {} with other keys or value_size than the server an earlier step started there",
            kv.region
        ));
    }
    let st = run_kvstore(
        r,
        kv,
        &mut db,
        c.instance,
        (&mut c.checked, &mut c.violations),
        c.t0,
    )?;
    c.kv_dbs.insert(kv.region.clone(), db);
    if c.open.is_some() {
        c.open_kv.get_or_insert_with(KvResult::default).add(&st);
    }
    c.kv.get_or_insert_with(KvResult::default).add(&st);
    Ok(())
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

//! `kvstore`: a key-value server in a region, driven by a memtier-like
//! client (`mmsim_spec::kv`), request by request.

use super::{after_access, at_step, Access, Activity, Player};
use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};
use crate::SimError;
use mmsim_spec::kv::{KvDb, KvRequest, KvStream};
use mmsim_spec::output::KvResult;
use mmsim_spec::stream::{access_is_write, access_page};
use mmsim_spec::Step;

/// A `kvstore` step in progress: its request stream, the current
/// request's accesses, and the client's statistics.
pub(super) struct KvRun<'s> {
    stream: KvStream,
    db: KvDb,
    region: String,
    /// The kvstore step, for messages.
    step: &'s Step,
    vma: u32,
    buf: Vec<u64>,
    pos: usize,
    cur: Option<KvRequest>,
    pipeline: u64,
    in_batch: u64,
    batch_start: u64,
    started: u64,
    stats: KvResult,
}

impl KvRun<'_> {
    fn finish(&mut self, r: KvRequest, now: u64) {
        self.stats.record(r.set, r.hit, r.bytes);
        self.in_batch += 1;
        if self.in_batch == self.pipeline {
            self.close_batch(now);
        }
    }

    /// The batch's replies are out: each of its requests waited from the
    /// batch's start until now.
    fn close_batch(&mut self, now: u64) {
        self.stats.latency_sum_ns += self.in_batch * (now - self.batch_start);
        self.in_batch = 0;
        self.batch_start = now;
    }
}

/// Starts the server on the region, with the data an earlier kvstore
/// step left there.
pub(super) fn start<'s>(
    p: &mut Player<'s>,
    i: usize,
    k: &mut Kernel,
    step: &'s Step,
    kv: &mmsim_spec::KvStore,
) -> Result<Option<SliceEnd>, SimError> {
    let vma = p.region(i, step, &kv.region)?;
    let now = k.now();
    let t = &mut p.tasks[i];
    let db = t.kv_dbs.remove(&kv.region).unwrap_or_else(|| KvDb::new(kv));
    if !db.matches(kv) {
        return Err(at_step(
            step,
            SimError::Spec(format!(
                "found a kvstore on region \"{}\" with other keys or value_size than the server an earlier kvstore step started there; expected the same keys and value_size",
                kv.region
            )),
        ));
    }
    t.activity = Some(Activity::KvStore(KvRun {
        stream: KvStream::new(kv, t.instance),
        db,
        region: kv.region.clone(),
        step,
        vma,
        buf: Vec::with_capacity(8),
        pos: 0,
        cur: None,
        pipeline: kv.pipeline,
        in_batch: 0,
        batch_start: now,
        started: now,
        stats: KvResult::default(),
    }));
    Ok(None)
}

/// Runs requests of the kvstore until the slice ends; at its end, the
/// client's statistics go to the task and its phase, the data stays.
pub(super) fn run<'s>(
    p: &mut Player<'s>,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    mut kr: KvRun<'s>,
) -> Result<Option<SliceEnd>, SimError> {
    let result = kv_loop(p, i, k, slice, &mut kr);
    if !matches!(result, Ok(None)) {
        p.tasks[i].activity = Some(Activity::KvStore(kr));
        return result;
    }
    // The last, partial batch's replies.
    kr.close_batch(k.now());
    kr.stats.elapsed_ns += k.now() - kr.started;
    let t = &mut p.tasks[i];
    t.kv_stats
        .get_or_insert_with(Default::default)
        .add(&kr.stats);
    if let Some(ph) = t.open_phase {
        t.phases[ph]
            .kv
            .get_or_insert_with(Default::default)
            .add(&kr.stats);
    }
    t.kv_dbs.insert(kr.region, kr.db);
    result
}

/// Requests until the kvstore ends (Ok(None)) or the slice does.
fn kv_loop(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    kr: &mut KvRun,
) -> Result<Option<SliceEnd>, SimError> {
    let ktask = p.tasks[i].ktask;
    loop {
        if kr.pos == kr.buf.len() {
            if let Some(req) = kr.cur.take() {
                // The server's work on the request beyond its page
                // accesses: parsing, lookup, reply.
                k.charge_user(k.costs.kv_request);
                kr.finish(req, k.now());
            }
            kr.buf.clear();
            kr.pos = 0;
            match kr.stream.next_request(&mut kr.db, &mut kr.buf) {
                None => return Ok(None),
                Some(req) => kr.cur = Some(req),
            }
            check_heap(k, kr)?;
        }
        let a = kr.buf[kr.pos];
        match p.play_access(k, kr.vma, access_page(a) as usize, access_is_write(a))? {
            Access::Sleep(until) => return Ok(Some(SliceEnd::Sleep(until))),
            Access::Done => kr.pos += 1,
            Access::Again => {}
        }
        if let Some(end) = after_access(k, ktask, slice) {
            return Ok(Some(end));
        }
    }
}

/// The server's heap must fit its region.
fn check_heap(k: &Kernel, kr: &KvRun) -> Result<(), SimError> {
    let pages = k.vmas[kr.vma as usize].pages;
    if kr.db.pages_used() <= pages {
        return Ok(());
    }
    Err(at_step(kr.step, SimError::Spec(format!(
        "kvstore: the server's heap ({} keys set) outgrew region \"{}\" of {} pages; expected a larger region or fewer keys",
        kr.db.live_keys(),
        kr.region,
        pages
    ))))
}

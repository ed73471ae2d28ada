//! `touch` and `trace`: a stream of page accesses to a region, made in
//! batches until it ends or the slice does.

use super::{after_access, at_step, Access, Activity, Player};
use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};
use crate::SimError;
use mmsim_spec::stream::{access_is_write, access_page, TouchStream};
use mmsim_spec::Step;

/// Accesses generated per batch from a touch stream.
const BATCH: usize = 4096;

/// A `touch` or `trace` step in progress: its stream and the current
/// batch of accesses.
pub(super) struct TouchRun<'s> {
    stream: TouchStream,
    /// The touch or trace step, for a trace that fails mid-replay.
    step: &'s Step,
    vma: u32,
    buf: Vec<u64>,
    pos: usize,
}

pub(super) fn start<'s>(
    p: &mut Player<'s>,
    i: usize,
    k: &mut Kernel,
    step: &'s Step,
    touch: &mmsim_spec::Touch,
) -> Result<Option<SliceEnd>, SimError> {
    let vma = p.region(i, step, &touch.region)?;
    let pages = k.vmas[vma as usize].pages;
    let n = touch.length.unwrap_or(pages - touch.offset);
    let stream = TouchStream::new(touch, touch.offset, n, p.tasks[i].instance)
        .map_err(|e| at_step(step, SimError::Spec(e.to_string())))?;
    p.tasks[i].activity = Some(Activity::Touch(TouchRun {
        stream,
        step,
        vma,
        buf: Vec::with_capacity(BATCH),
        pos: 0,
    }));
    Ok(None)
}

/// Runs accesses of the touch until the slice ends; the touch stays in
/// progress unless it ended.
pub(super) fn run<'s>(
    p: &mut Player<'s>,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    mut tr: TouchRun<'s>,
) -> Result<Option<SliceEnd>, SimError> {
    let result = touch_loop(p, i, k, slice, &mut tr);
    if !matches!(result, Ok(None)) {
        p.tasks[i].activity = Some(Activity::Touch(tr));
    }
    result
}

/// Accesses until the touch ends (Ok(None)) or the slice does.
fn touch_loop(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    tr: &mut TouchRun,
) -> Result<Option<SliceEnd>, SimError> {
    let ktask = p.tasks[i].ktask;
    loop {
        if tr.pos == tr.buf.len() {
            tr.buf.clear();
            tr.pos = 0;
            let got = tr
                .stream
                .next_batch(&mut tr.buf, BATCH)
                .map_err(|e| at_step(tr.step, SimError::Spec(e.to_string())))?;
            if got == 0 {
                return Ok(None);
            }
            if tr.stream.is_trace() {
                let t = &mut p.tasks[i];
                if let Some(ph) = t.open_phase {
                    t.phases[ph].trace_requests += got as u64;
                }
            }
        }
        if let Some(end) = resident_run(p, ktask, k, slice, tr) {
            return Ok(Some(end));
        }
        if tr.pos == tr.buf.len() {
            continue;
        }
        let a = tr.buf[tr.pos];
        match p.play_access(k, tr.vma, access_page(a) as usize, access_is_write(a))? {
            Access::Sleep(until) => return Ok(Some(SliceEnd::Sleep(until))),
            Access::Done => tr.pos += 1,
            Access::Again => {}
        }
        if let Some(end) = after_access(k, ktask, slice) {
            return Ok(Some(end));
        }
    }
}

/// The accesses from `tr.pos` that hit resident pages, made in one
/// call (`Kernel::access_resident_run`). After a hit, `after_access`
/// has nothing to do but end the slice when its time is up, as long as
/// no return-to-user work (memory.high debt, a kill), kswapd or
/// khugepaged wakeup is pending (only a fault makes those); so the run
/// stops at the access where that check would end the slice, and the
/// slice ends the same.
fn resident_run(
    p: &mut Player,
    ktask: usize,
    k: &mut Kernel,
    slice: &Slice,
    tr: &mut TouchRun,
) -> Option<SliceEnd> {
    if k.kswapd_wake_at.is_some() || k.khugepaged.wakeup_pending() || k.tasks[ktask].ti_work != 0 {
        return None;
    }
    // The accesses after which now() >= slice end: after_access's end.
    let now = k.now();
    let slice_end = slice.end();
    let touch = k.costs.touch;
    let max = if now >= slice_end {
        1
    } else if touch == 0 {
        usize::MAX
    } else {
        usize::try_from((slice_end - now).div_ceil(touch)).unwrap_or(usize::MAX)
    };
    let n = k.access_resident_run(tr.vma, &tr.buf[tr.pos..], max);
    tr.pos += n;
    p.done_work += n as u64;
    (n > 0 && n == max).then_some(SliceEnd::Preempted)
}

//! `touch` and `trace`: the accesses of the step's stream, the same as
//! the simulator's, each checked against the page's content token.

use crate::exec::Child;
use crate::region::touch;
use mmsim_spec::stream::{access_is_write, access_page, TouchStream};

pub(super) fn run(c: &mut Child, t: &mmsim_spec::Touch) -> Result<(), String> {
    let instance = c.instance;
    let r = c
        .regions
        .get_mut(&t.region)
        .ok_or_else(|| format!("no region {}", t.region))?;
    let n = t.length.unwrap_or(r.pages - t.offset);
    let at = |e: mmsim_spec::trace::TraceError| e.to_string();
    let mut stream = TouchStream::new(t, t.offset, n, instance).map_err(at)?;
    // The trace's own page cache must not share the run's memory cgroup
    // with the workload.
    stream.drop_behind();
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let got = stream.next_batch(&mut buf, 4096).map_err(at)?;
        if got == 0 {
            break;
        }
        if stream.is_trace() {
            c.open_requests += got as u64;
        }
        for &a in &buf {
            let (checked, bad) = touch(r, access_page(a) as usize, access_is_write(a));
            c.checked += checked;
            c.violations += bad;
        }
    }
    Ok(())
}

//! The progress hook: after each slice it hears the page operations done
//! of those the spec asks for (`mmsim_spec::work`), rising, and reaching
//! that count exactly when the run ends; the simulated time it hears is
//! the run's.

mod common;
use common::*;
use mmsim_sim::{run, Progress, RunOptions};
use std::cell::RefCell;

fn heard(text: &str, check: bool) -> (Vec<Progress>, u128, u64) {
    let s = spec(text);
    let seen = RefCell::new(Vec::new());
    let r = run(
        &s,
        RunOptions {
            check,
            progress: Some(Box::new(|p| seen.borrow_mut().push(p))),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (
        seen.into_inner(),
        mmsim_spec::work::work_checked(&s, check).total,
        r.elapsed_ns,
    )
}

#[test]
fn progress_rises_to_the_work_the_spec_asks_for() {
    // Every kind of step the count weighs: accesses, a compute's slices,
    // a fork's PTEs, munmap, madvise, file pages read and dropped, a
    // stream's hashing, swapoff's slots, repeats, a second instance and a second task.
    let text = r#"
[machine]
memory = "256M"
cpus = 2
[[swap]]
device = "zram"
size = "64M"
[[disk]]
name = "d"
device = "nvme"
size = "64M"
[[file]]
name = "f"
size = "2M"
on = "d"
[task.a]
instances = 2
steps = [
  { op = "mmap", name = "h", kind = "anon", size = "4M" },
  { op = "phase", name = "one" },
  { op = "repeat", times = 3, steps = [ { op = "touch", region = "h", write = 1.0 } ] },
  { op = "touch", region = "h", order = "zipf", count = 700 },
  { op = "compute", duration = "1234567ns" },
  { op = "fork", steps = [ { op = "touch", region = "h", count = 10 } ] },
  { op = "wait" },
  { op = "madvise", region = "h", advice = "dontneed", length = "1M" },
  { op = "read", file = "f" },
  { op = "stream", file = "f", work = "25us" },
  { op = "fsync", file = "f" },
  { op = "drop_caches" },
  { op = "munmap", region = "h" },
  { op = "sleep", duration = "1ms" },
]
[task.b]
steps = [
  { op = "swapoff", device = 0 },
  { op = "swapon", device = 0 },
]
"#;
    for check in [false, true] {
        let (seen, total, elapsed) = heard(text, check);
        assert!(seen.len() > 2, "{seen:?}");
        assert!(seen.iter().all(|p| p.total as u128 == total));
        assert!(
            seen.windows(2)
                .all(|w| w[0].done <= w[1].done && w[0].sim_ns <= w[1].sim_ns),
            "{seen:?}"
        );
        let last = seen.last().unwrap();
        assert_eq!(last.done as u128, total, "check {check}");
        assert_eq!(last.sim_ns, elapsed);
        // Partway, partway done.
        let mid = seen[seen.len() / 2];
        assert!(mid.done > 0 && mid.done < mid.total, "{mid:?}");
    }
}

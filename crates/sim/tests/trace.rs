//! The `trace` step replays a file's requests through the same access path
//! as a `touch`: a trace holding exactly a touch's accesses gives the same
//! run, counter for counter and nanosecond for nanosecond.

mod common;

use mmsim_spec::stream::{access_is_write, access_page, TouchStream};
use mmsim_spec::{Op, Touch};
use std::fmt::Write;

const STEPS: &str = r#"
  { op = "mmap", name = "heap", kind = "anon", size = "64M" },
  { op = "phase", name = "replay" },
  STEP,
"#;

fn touch_of(spec: &mmsim_spec::Spec) -> Touch {
    spec.tasks[0]
        .steps
        .iter()
        .find_map(|s| match &s.op {
            Op::Touch(t) => Some(t.clone()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn a_trace_of_a_touchs_accesses_replays_it_exactly() {
    let touch = r#"{ op = "touch", region = "heap", order = "zipf", theta = 0.6, count = 60000, write = 0.3, seed = 5 }"#;
    let text = common::memcg_spec("12M", "", &STEPS.replace("STEP", touch));
    let t = touch_of(&common::spec(&text));
    // The touch's accesses as a csv with a write column.
    let mut csv = String::from("id,rw\n");
    let mut s = TouchStream::new(&t, 0, 16384, 0).unwrap();
    let mut v = Vec::new();
    while s.next_batch(&mut v, 1000).unwrap() > 0 {}
    for a in &v {
        let _ = writeln!(
            csv,
            "{},{}",
            access_page(*a),
            if access_is_write(*a) { "w" } else { "r" }
        );
    }
    let dir = std::env::temp_dir().join(format!("mmsim-sim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("zipf.csv");
    std::fs::write(&path, csv).unwrap();
    let trace = format!(
        r#"{{ op = "trace", region = "heap", file = "{}", header = true, write_col = 2 }}"#,
        path.display()
    );
    let a = common::run_checked(&text);
    let b = common::run_checked(&common::memcg_spec(
        "12M",
        "",
        &STEPS.replace("STEP", &trace),
    ));
    assert!(common::vm(&a, "pswpout") > 1000, "the replay must reclaim");
    assert_eq!(a.vmstat, b.vmstat);
    assert_eq!(a.elapsed_ns, b.elapsed_ns);
    assert_eq!(a.tasks[0].phases[0].vmstat, b.tasks[0].phases[0].vmstat);
    assert_eq!(a.tasks[0].phases[0].trace_requests, 0);
    assert_eq!(b.tasks[0].phases[0].trace_requests, 60000);
    assert_eq!(a.integrity, b.integrity);
}

#[test]
fn a_trace_that_changes_during_the_run_is_a_spec_error() {
    let dir = std::env::temp_dir().join(format!("mmsim-sim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ids.txt");
    std::fs::write(&path, "1\n2\n3\n").unwrap();
    let trace = format!(
        r#"{{ op = "trace", region = "heap", file = "{}" }}"#,
        path.display()
    );
    let spec = common::spec(&common::memcg_spec(
        "12M",
        "",
        &STEPS.replace("STEP", &trace),
    ));
    std::fs::write(&path, "1\n2\n").unwrap();
    let e = mmsim_sim::run(&spec, Default::default()).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("ids.txt, line") && msg.contains("the end of the file"),
        "{msg}"
    );
}

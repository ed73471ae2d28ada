//! Memory bandwidth a socket's CPUs share (membw.rs): page clears and
//! copies stretch when the socket's busy CPUs draw more than it delivers,
//! and never for a CPU alone on its socket.

mod common;
use common::*;

/// `tasks` processes on a machine of `cpus` CPUs in `sockets` sockets,
/// each first-touching (writing) its own 32 MiB: a clear_page a fault.
fn writers(cpus: usize, sockets: usize, tasks: usize, bandwidth: Option<u64>) -> String {
    let bw = bandwidth.map_or(String::new(), |b| format!("memory_bandwidth = {b}\n"));
    let mut s = format!("[machine]\nmemory = \"1G\"\ncpus = {cpus}\nsockets = {sockets}\n{bw}");
    for t in 0..tasks {
        s += &format!(
            r#"[task.t{t}]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "32M" }},
  {{ op = "touch", region = "heap", write = 1.0 }},
]
"#
        );
    }
    s
}

/// Each task's end, ns.
fn ends(text: &str) -> Vec<u64> {
    run_checked(text).tasks.iter().map(|t| t.end_ns).collect()
}

#[test]
fn cpus_that_draw_more_than_their_socket_delivers_slow_each_other() {
    // Ample bandwidth: two writers take about as long as one alone (their
    // shared lines and the zone's lock cost a few percent).
    let alone = ends(&writers(2, 1, 1, Some(100_000_000)))[0];
    let ample = ends(&writers(2, 1, 2, Some(100_000_000)));
    for e in &ample {
        assert!(e.abs_diff(alone) * 10 < alone, "{ample:?} against {alone}");
    }
    // 1 GB/s for the socket: each clear_page (4 KiB in 590 ns alone, about
    // 7 GB/s while it runs) now waits for the other CPU's.
    let starved = ends(&writers(2, 1, 2, Some(1000)));
    for (s, a) in starved.iter().zip(&ample) {
        assert!(*s > a + a / 2, "{starved:?} against {ample:?}");
    }
}

#[test]
fn a_cpu_alone_on_its_socket_keeps_its_lone_costs() {
    // Its costs are measured alone: whatever the socket delivers.
    let alone = ends(&writers(2, 1, 1, Some(1000)));
    assert_eq!(alone, ends(&writers(2, 1, 1, Some(100_000_000))));
    // Two writers on two sockets of one CPU each share nothing.
    let apart = ends(&writers(2, 2, 2, Some(1000)));
    assert_eq!(apart, ends(&writers(2, 2, 2, Some(100_000_000))));
}

#[test]
fn a_larger_socket_is_modelled_only_with_a_stated_bandwidth() {
    // The profile's mem_bw is two cores' figure: four CPUs on a socket
    // without memory_bandwidth run as if it were ample.
    let unstated = ends(&writers(4, 1, 4, None));
    assert_eq!(unstated, ends(&writers(4, 1, 4, Some(100_000_000))));
    let starved = ends(&writers(4, 1, 4, Some(1000)));
    assert!(starved.iter().zip(&unstated).all(|(s, u)| s > u));
}

//! fork, spawn, wait, madvise, swapoff/swapon and kvstore steps.

use super::*;

#[test]
fn fork_wait_madvise_swapoff_parse() {
    let s = parse(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1G"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "fork", steps = [
      { op = "touch", region = "heap", write = 1.0 },
      { op = "munmap", region = "heap" },
  ] },
  { op = "wait" },
  { op = "madvise", region = "heap", advice = "pageout", offset = "4M", length = "1M" },
  { op = "swapoff", device = 0 },
  { op = "swapon", device = 0 },
]
"#,
    )
    .unwrap();
    let ops = &s.tasks[0].steps;
    assert!(matches!(&ops[1].op, Op::Fork { steps } if steps.len() == 2));
    assert_eq!(ops[2].op, Op::Wait);
    assert_eq!(
        ops[3].op,
        Op::Madvise {
            region: "heap".into(),
            advice: mmsim_spec::Advice::Pageout,
            offset: 1024,
            length: Some(256),
        }
    );
    assert_eq!(ops[4].op, Op::Swapoff { device: 0 });
    assert_eq!(ops[5].op, Op::Swapon { device: 0 });
}

#[test]
fn forked_child_munmap_leaves_parent_region() {
    // The child's munmap is its own: the parent still has the region.
    parse(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "fork", steps = [ { op = "munmap", region = "heap" } ] },
  { op = "touch", region = "heap" },
]
"#,
    )
    .unwrap();
}

#[test]
fn forked_child_region_unknown() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "fork", steps = [ { op = "touch", region = "heap" } ] },
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn madvise_advice_garbage() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "madvise", region = "heap", advice = "forget" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].advice",
        &["\"forget\"", "pageout, cold, dontneed, free, willneed"],
    );
}

#[test]
fn madvise_range_outside_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "madvise", region = "heap", advice = "cold", offset = "4M", length = "8M" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].length",
        &["1024..3072", "2048 pages"],
    );
}

#[test]
fn madvise_missing_advice() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "madvise", region = "heap" },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].advice", &["pageout"]);
}

#[test]
fn swapoff_without_that_device() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1G"
[task.main]
steps = [ { op = "swapoff", device = 1 } ]
"#,
    );
    check(&e, 7, "task.main.steps[0].device", &["found 1", "0 to 0"]);
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [ { op = "swapon", device = 0 } ]
"#,
    );
    check(
        &e,
        4,
        "task.main.steps[0].device",
        &["found 0", "none is defined"],
    );
}

#[test]
fn wait_takes_no_keys() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [ { op = "wait", for = "child" } ]
"#,
    );
    check(&e, 4, "task.main.steps[0].for", &["for"]);
}

#[test]
fn kvstore_parses_with_defaults() {
    let s = parse(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "ram", kind = "anon", size = "64M" },
  { op = "kvstore", region = "ram", keys = 1000, value_size = "2K", requests = 5000 },
]
"#,
    )
    .unwrap();
    let Op::KvStore(kv) = &s.tasks[0].steps[1].op else {
        panic!("not a kvstore");
    };
    assert_eq!((kv.sets, kv.gets, kv.pipeline, kv.seed), (1, 10, 1, 0));
    assert_eq!(kv.value_size, 2048);
}

#[test]
fn kvstore_region_too_small() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "ram", kind = "anon", size = "1M" },
  { op = "kvstore", region = "ram", keys = 100000, value_size = "2K", requests = 110000 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].region",
        &["256 pages", "hash table of 100000 keys"],
    );
}

#[test]
fn kvstore_bad_ratio() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "ram", kind = "anon", size = "64M" },
  { op = "kvstore", region = "ram", keys = 10, value_size = "2K", requests = 5, ratio = "0:0" },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].ratio", &["\"0:0\"", "SETS:GETS"]);
}

const THREAD_HEAD: &str = r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
"#;

#[test]
fn a_thread_runs_on_its_creators_regions() {
    let s = parse(&format!(
        r#"{THREAD_HEAD}  {{ op = "thread", steps = [
      {{ op = "touch", region = "heap", write = 1.0 }},
      {{ op = "mmap", name = "own", kind = "anon", size = "1M" }},
      {{ op = "munmap", region = "own" }},
  ] }},
  {{ op = "wait" }},
  {{ op = "munmap", region = "heap" }},
]
"#
    ))
    .unwrap();
    let ops = &s.tasks[0].steps;
    assert!(matches!(&ops[1].op, Op::Thread { steps } if steps.len() == 3));
}

#[test]
fn a_thread_may_not_unmap_what_it_shares_with_its_creator() {
    let e = rejected(&format!(
        r#"{THREAD_HEAD}  {{ op = "thread", steps = [
      {{ op = "munmap", region = "heap" }},
  ] }},
]
"#
    ));
    check(
        &e,
        7,
        "task.main.steps[1].steps[0].region",
        &["\"heap\"", "shares with the task that started it"],
    );
}

#[test]
fn a_creator_may_unmap_a_shared_region_only_after_wait() {
    let e = rejected(&format!(
        r#"{THREAD_HEAD}  {{ op = "thread", steps = [ {{ op = "touch", region = "heap" }} ] }},
  {{ op = "repeat", times = 2, steps = [ {{ op = "munmap", region = "heap" }} ] }},
]
"#
    ));
    check(
        &e,
        7,
        "task.main.steps[2].steps[0].region",
        &[
            "\"heap\"",
            "a thread this task started still shares",
            "wait",
        ],
    );
    // A forked child is a process of its own: the creator's threads do
    // not share its copies.
    parse(&format!(
        r#"{THREAD_HEAD}  {{ op = "thread", steps = [ {{ op = "touch", region = "heap" }} ] }},
  {{ op = "fork", steps = [ {{ op = "munmap", region = "heap" }} ] }},
  {{ op = "wait" }},
]
"#
    ))
    .unwrap();
}

#[test]
fn a_kvstore_on_a_region_a_thread_shares_is_refused() {
    let e = rejected(&format!(
        r#"{THREAD_HEAD}  {{ op = "thread", steps = [
      {{ op = "kvstore", region = "heap", keys = 100, value_size = "1K", requests = 10 }},
  ] }},
]
"#
    ));
    check(
        &e,
        7,
        "task.main.steps[1].steps[0].region",
        &["kvstore", "\"heap\"", "thread shares"],
    );
    // The thread's own region is its own server's.
    parse(&format!(
        r#"{THREAD_HEAD}  {{ op = "thread", steps = [
      {{ op = "mmap", name = "db", kind = "anon", size = "4M" }},
      {{ op = "kvstore", region = "db", keys = 100, value_size = "1K", requests = 10 }},
  ] }},
  {{ op = "wait" }},
  {{ op = "kvstore", region = "heap", keys = 100, value_size = "1K", requests = 10 }},
]
"#
    ))
    .unwrap();
}

#[test]
fn reclaim_steps_name_a_cgroup_an_amount_and_a_swappiness_in_range() {
    let text = |step: &str| {
        format!(
            "[machine]\nmemory = \"512M\"\n[cgroup.w]\n[task.main]\ncgroup = \"w\"\nsteps = [ {step} ]\n"
        )
    };
    let s = parse(&text(
        r#"{ op = "reclaim", cgroup = "w", amount = "64M", swappiness = 0 }"#,
    ))
    .expect("parses");
    assert_eq!(
        s.tasks[0].steps[0].op,
        mmsim_spec::Op::Reclaim {
            cgroup: "w".into(),
            pages: 16384,
            swappiness: Some(0)
        }
    );
    let e = rejected(&text(r#"{ op = "reclaim", cgroup = "x", amount = "64M" }"#));
    check(
        &e,
        6,
        "task.main.steps[0].cgroup",
        &["the cgroup \"x\"", "w"],
    );
    let e = rejected(&text(r#"{ op = "reclaim", cgroup = "w", amount = "1K" }"#));
    check(
        &e,
        6,
        "task.main.steps[0].amount",
        &["1024 bytes", "at least one page"],
    );
    let e = rejected(&text(
        r#"{ op = "reclaim", cgroup = "w", amount = "1M", swappiness = 201 }"#,
    ));
    check(&e, 6, "task.main.steps[0].swappiness", &["0 to 200"]);
    let e = rejected(&text(r#"{ op = "reclaim", cgroup = "w" }"#));
    check(
        &e,
        6,
        "task.main.steps[0].amount",
        &["missing the required key"],
    );
}

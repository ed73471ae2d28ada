//! Regions a step names, the ranges inside them, touch's keys and repeats.

use super::*;

#[test]
fn mmap_size_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = 0 },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].size",
        &["found 0", "at least one page"],
    );
}

#[test]
fn unmapped_region_in_touch() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "stack" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].region",
        &["\"stack\"", "earlier mmap", "heap"],
    );
}

#[test]
fn touch_before_mmap() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "touch", region = "heap" },
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn touch_after_munmap() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "munmap", region = "heap" },
  { op = "touch", region = "heap" },
]
"#,
    );
    check(
        &e,
        7,
        "task.main.steps[2].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn regions_are_per_task() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.a]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
]
[task.b]
steps = [
  { op = "touch", region = "heap" },
]
"#,
    );
    check(
        &e,
        9,
        "task.b.steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn munmap_of_unknown_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "munmap", region = "heap2" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].region",
        &["\"heap2\"", "earlier mmap", "heap"],
    );
}

#[test]
fn duplicate_mmap_name() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "phase", name = "x" },
  { op = "mmap", name = "heap", kind = "anon", size = "4M" },
]
"#,
    );
    check(
        &e,
        7,
        "task.main.steps[2].name",
        &["\"heap\"", "already mapped", "new region name"],
    );
}

#[test]
fn touch_offset_outside_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", offset = "8M" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].offset",
        &["2048..2048", "\"heap\"", "2048 pages"],
    );
}

#[test]
fn touch_length_outside_region() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", offset = "4M", length = "8M" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].length",
        &["1024..3072", "\"heap\"", "2048 pages"],
    );
}

#[test]
fn theta_on_non_zipf_order() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", order = "uniform", theta = 0.5 },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].theta", &["theta", "\"zipf\""]);
}

#[test]
fn theta_out_of_range() {
    for (theta, found) in [
        ("11.0", "11"),
        ("0.0", "found 0"),
        ("-1.0", "-1"),
        ("nan", "NaN"),
        ("inf", "inf"),
    ] {
        let text = format!(
            r#"[machine]
memory = "512M"
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "8M" }},
  {{ op = "touch", region = "heap", order = "zipf", theta = {theta} }},
]
"#
        );
        let e = rejected(&text);
        check(
            &e,
            6,
            "task.main.steps[1].theta",
            &[found, "above 0", "at most 10"],
        );
    }
}

#[test]
fn unknown_order() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", order = "random" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].order",
        &["\"random\"", "seq, rev, shuffle, uniform, zipf"],
    );
}

#[test]
fn write_fraction_above_one() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", write = 1.5 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].write",
        &["1.5", "fraction from 0 to 1"],
    );
}

#[test]
fn both_count_and_passes() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", count = 10, passes = 2 },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].passes", &["count", "passes"]);
}

#[test]
fn count_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", count = 0 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].count",
        &["found 0", "at least 1"],
    );
}

#[test]
fn passes_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", passes = 0 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].passes",
        &["found 0", "at least 1"],
    );
}

#[test]
fn offset_not_page_multiple() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", offset = 100 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].offset",
        &["100 bytes", "multiple of 4096"],
    );
}

#[test]
fn length_not_page_multiple_or_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", length = "6K" },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].length",
        &["6144 bytes", "multiple of 4096"],
    );
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", length = 0 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].length",
        &["found 0", "at least one page"],
    );
}

#[test]
fn repeat_times_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "repeat", times = 0, steps = [] },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].times",
        &["found 0", "at least 1"],
    );
}

/// The key path of an error inside a repeat names both steps. (Its line is
/// checked separately in `nested_repeat_error_line_is_the_inner_step`.)
#[test]
fn nested_repeat_error_names_inner_step() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "repeat", times = 2, steps = [
      { op = "phase", name = "p" },
      { op = "repeat", steps = [
          { op = "touch", region = "heap", order = "zigzag" },
      ] },
  ] },
]
"#,
    );
    assert_eq!(e.file, "t.toml");
    assert_eq!(e.key, "task.main.steps[1].steps[1].steps[0].order", "{e}");
    assert!(
        e.message.contains("\"zigzag\"") && e.message.contains("seq, rev"),
        "{e}"
    );
}

#[test]
fn nested_repeat_error_line_is_the_inner_step() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "repeat", times = 2, steps = [
      { op = "phase", name = "p" },
      { op = "touch", region = "heap", order = "zigzag" },
  ] },
]
"#,
    );
    check(
        &e,
        8,
        "task.main.steps[1].steps[1].order",
        &["\"zigzag\"", "seq, rev"],
    );
}

#[test]
fn nested_repeat_region_error_names_inner_step() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "phase", name = "a" },
  { op = "phase", name = "b" },
  { op = "repeat", steps = [
    { op = "touch", region = "nope" },
  ] },
]
"#,
    );
    check(
        &e,
        9,
        "task.main.steps[3].steps[0].region",
        &["\"nope\"", "heap"],
    );
}

#[test]
fn repeat_body_is_checked_for_every_iteration() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "repeat", times = 3, steps = [
    { op = "mmap", name = "tmp", kind = "anon", size = "1M" },
    { op = "touch", region = "tmp" },
  ] },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[0].steps[0].name",
        &["\"tmp\"", "already mapped"],
    );
}

#[test]
fn bad_sleep_duration() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "sleep", duration = "5min" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].duration",
        &["\"5min\"", "ns, us, ms or s"],
    );
}

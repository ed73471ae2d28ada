//! --set KEY=VALUE, and the lines and keys errors report.

use super::valid::FULL;
use super::*;

#[test]
fn set_without_equals() {
    let e = parse_set(
        &with_task("[machine]\nmemory = \"512M\"\n"),
        &["machine.memory"],
    )
    .unwrap_err();
    check_in(&e, "--set", 0, "machine.memory", &["no '='", "KEY=VALUE"]);
    assert_eq!(
        e.to_string(),
        "--set: key `machine.memory`: found no '=', expected KEY=VALUE"
    );
}

#[test]
fn set_through_a_non_table() {
    let e = parse_set(
        &with_task("[machine]\nmemory = \"512M\"\n"),
        &["machine.memory.x=1"],
    )
    .unwrap_err();
    // The key of a --set error is the KEY of the --set that failed.
    check_in(
        &e,
        "--set",
        0,
        "machine.memory.x",
        &["`machine.memory`", "not a table"],
    );
}

#[test]
fn set_with_a_bad_key_path() {
    let e = parse_set(&with_task("[machine]\nmemory = \"512M\"\n"), &["a..b=1"]).unwrap_err();
    check_in(&e, "--set", 0, "a..b", &["\"a..b\"", "not a TOML key"]);
}

#[test]
fn set_value_error_names_the_set() {
    let e = parse_set(
        &with_task("[machine]\nmemory = \"512M\"\n"),
        &["sysctl.\"vm.swappiness\"=300"],
    )
    .unwrap_err();
    check_in(
        &e,
        "--set",
        0,
        "sysctl.\"vm.swappiness\"",
        &["300", "0 to 200"],
    );
}

#[test]
fn set_into_an_array_of_tables() {
    // [[swap]] is an array of tables: --set cannot address its entries.
    let text =
        with_task("[machine]\nmemory = \"512M\"\n[[swap]]\ndevice = \"zram\"\nsize = \"1M\"\n");
    let e = parse_set(&text, &["swap.size=2M"]).unwrap_err();
    check_in(&e, "--set", 0, "swap.size", &["`swap`", "not a table"]);
}

#[test]
fn set_on_a_spec_with_a_syntax_error() {
    let e = parse_set("[machine]\nmemory = \"512M\n", &["machine.cpus=2"]).unwrap_err();
    assert_eq!(e.file, "t.toml");
    assert_eq!(e.line, 2, "{e}");
}

#[test]
fn set_does_not_move_the_lines_of_the_file() {
    // A --set that adds a key to a table of the file must not shift the
    // lines of later errors.
    let text = r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "touch", region = "heap" },
]
"#;
    let e = parse_set(text, &["machine.cpus=2", "machine.kernel=\"6.1\""]).unwrap_err();
    check(
        &e,
        5,
        "task.main.steps[0].region",
        &["\"heap\"", "none mapped"],
    );
}

#[test]
fn set_error_under_the_set_key_names_the_set_and_the_key() {
    let text = "[machine]\nmemory = \"512M\"\n";
    // A task created by --set lacks steps: the error is the --set's.
    let e = parse_set(text, &["task.x.instances=2"]).unwrap_err();
    check_in(
        &e,
        "--set",
        0,
        "task.x.instances",
        &["missing", "`steps`", "`task.x.steps`"],
    );
    // Steps given by --set: the error names the step inside it.
    let e = parse_set(
        text,
        &[r#"task.main.steps=[{ op = "phase", name = "a" }, { op = "touch", region = "r" }]"#],
    )
    .unwrap_err();
    check_in(
        &e,
        "--set",
        0,
        "task.main.steps",
        &["\"r\"", "none mapped", "`task.main.steps[1].region`"],
    );
    // The key is reported as written, whatever its quoting.
    let e = parse_set(&with_task(text), &["sysctl.'vm.swappiness'=300"]).unwrap_err();
    check_in(
        &e,
        "--set",
        0,
        "sysctl.'vm.swappiness'",
        &["found 300", "0 to 200"],
    );
    assert!(!e.message.contains("(at"), "{e}");
}

#[test]
fn set_messages_are_sentences() {
    let text = with_task("[machine]\nmemory = \"512M\"\n");
    let e = parse_set(&text, &["machine.memory.x=1"]).unwrap_err();
    assert_eq!(
        e.message,
        "found `machine.memory`, which is a string, not a table; expected a key path through tables only"
    );
    let e = parse_set(&text, &["a..b=1"]).unwrap_err();
    assert!(
        !e.message.contains(": ;") && !e.message.ends_with(": "),
        "{e}"
    );
    assert!(e.message.contains("expected"), "{e}");
}

#[test]
fn dotted_and_implicit_tables_report_their_lines() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup]
w.memory_max = "1M"
w.memory_limit = "1M"
"#,
    ));
    check(
        &e,
        5,
        "cgroup.w.memory_limit",
        &["memory_limit", "memory_max"],
    );
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup]
"a b".memory_max = "1M"
"#,
    ));
    check(&e, 4, "cgroup.\"a b\"", &["\"a b\"", "letters, digits"]);
    // [[task.x.steps]] without [task.x]: the task is where its name is.
    let e = rejected(
        r#"[machine]
memory = "512M"

[[task."x y".steps]]
op = "phase"
name = "p"
"#,
    );
    check(&e, 4, "task.\"x y\"", &["\"x y\"", "letters, digits"]);
}

#[test]
fn steps_as_array_of_tables_report_the_field_line() {
    let e = rejected(
        r#"[machine]
memory = "512M"

[[task.main.steps]]
op = "mmap"
name = "heap"
kind = "anon"
size = "8M"

[[task.main.steps]]
op = "touch"
region = "heap"
write = 2
"#,
    );
    check(&e, 13, "task.main.steps[1].write", &["found 2", "0 to 1"]);
    // A missing field: the line of the step's header.
    let e = rejected(
        r#"[machine]
memory = "512M"

[[task.main.steps]]
op = "mmap"
name = "heap"
size = "8M"
"#,
    );
    check(
        &e,
        4,
        "task.main.steps[0].kind",
        &["missing", "anon, shmem"],
    );
}

#[test]
fn nested_steps_keep_their_own_lines() {
    let s = parse(FULL).unwrap();
    let Op::Repeat { steps, .. } = &s.tasks[0].steps[8].op else {
        panic!()
    };
    assert_eq!(steps.iter().map(|s| s.line).collect::<Vec<_>>(), [48, 49]);
}

#[test]
fn step_field_types_in_words() {
    for (field, found, words) in [
        ("count = 1.5", "found 1.5", "a whole number"),
        ("count = 2.0", "found 2.0,", "a whole number"),
        ("count = -2", "found -2", "a whole number"),
        ("passes = \"2\"", "found \"2\"", "a whole number"),
        ("seed = -1", "found -1", "a whole number from 0"),
        ("seed = true", "found true", "a whole number"),
        ("order = 1", "found 1", "a string"),
        ("offset = 1.5", "found 1.5", "a size"),
        ("write = [1]", "found an array", "a number from 0 to 1"),
    ] {
        let text = format!(
            r#"[machine]
memory = "512M"
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "8M" }},
  {{ op = "touch", region = "heap", {field} }},
]
"#
        );
        let e = rejected(&text);
        let key = format!("task.main.steps[1].{}", field.split(' ').next().unwrap());
        check(&e, 6, &key, &[found, words]);
        for jargon in ["u64", "f64", "i64", "invalid type"] {
            assert!(!e.message.contains(jargon), "{e}");
        }
    }
}

#[test]
fn missing_step_fields_by_op() {
    for (step, field, expected) in [
        ("{ op = \"munmap\" }", "region", "region"),
        ("{ op = \"sleep\" }", "duration", "duration"),
        ("{ op = \"phase\" }", "name", "string"),
        (
            "{ op = \"repeat\", times = 2 }",
            "steps",
            "array of step tables",
        ),
        ("{ op = \"touch\", order = \"seq\" }", "region", "region"),
    ] {
        let text = format!("[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n  {step},\n]\n");
        let e = rejected(&text);
        check(
            &e,
            5,
            &format!("task.main.steps[0].{field}"),
            &["missing", &format!("`{field}`"), expected],
        );
    }
}

#[test]
fn region_and_phase_names_are_validated() {
    for (step, key, found) in [
        (
            r#"{ op = "mmap", name = "a b", kind = "anon", size = "8M" }"#,
            "name",
            "\"a b\"",
        ),
        (
            r#"{ op = "mmap", name = "", kind = "anon", size = "8M" }"#,
            "name",
            "\"\"",
        ),
        (r#"{ op = "phase", name = "x/y" }"#, "name", "\"x/y\""),
        (r#"{ op = "phase", name = "" }"#, "name", "\"\""),
    ] {
        let text = format!("[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n  {step},\n]\n");
        let e = rejected(&text);
        check(
            &e,
            5,
            &format!("task.main.steps[0].{key}"),
            &[found, "letters, digits, '_' or '-'", "non-empty"],
        );
    }
}

#[test]
fn access_counts_are_bounded() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", count = 281474976710657 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].count",
        &["281474976710657", "2^48"],
    );
    // passes × pages, which would overflow 64 bits here.
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "1T" },
  { op = "touch", region = "heap", passes = 281474976710656 },
]
"#,
    );
    check(
        &e,
        6,
        "task.main.steps[1].passes",
        &[
            "281474976710656 passes over 268435456 pages",
            "at most 2^48",
        ],
    );
    // At the bound exactly is fine.
    parse(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "1G" },
  { op = "touch", region = "heap", passes = 1073741824 },
  { op = "touch", region = "heap", count = 281474976710656 },
]
"#,
    )
    .unwrap();
    // An mmap beyond x86-64's user address space.
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "129T" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].size",
        &["141836999983104 bytes", "128T"],
    );
}

#[test]
fn repeat_state_after_the_first_iteration_is_checked() {
    // The second iteration touches a region remapped smaller by the first.
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "repeat", times = 2, steps = [
    { op = "touch", region = "heap", offset = "6M" },
    { op = "munmap", region = "heap" },
    { op = "mmap", name = "heap", kind = "anon", size = "4M" },
  ] },
]
"#,
    );
    check(
        &e,
        7,
        "task.main.steps[1].steps[0].offset",
        &["1536..1536", "1024 pages"],
    );
    // Once is fine, and so is a body that leaves the state as it found it.
    parse(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "repeat", times = 1, steps = [
    { op = "touch", region = "heap", offset = "6M" },
    { op = "munmap", region = "heap" },
    { op = "mmap", name = "heap", kind = "anon", size = "4M" },
  ] },
  { op = "repeat", times = 1000000, steps = [
    { op = "mmap", name = "tmp", kind = "anon", size = "1M" },
    { op = "touch", region = "tmp" },
    { op = "munmap", region = "tmp" },
  ] },
]
"#,
    )
    .unwrap();
}

#[test]
fn deeply_nested_repeats_are_checked_quickly() {
    // Each level remaps "r" with its own size, so every body changes the
    // state; checking must still not take 2^depth walks.
    let depth = 30;
    let mut body = String::from(r#"{ op = "touch", region = "r" }"#);
    for d in 0..depth {
        body = format!(
            r#"{{ op = "repeat", times = 2, steps = [ {{ op = "munmap", region = "r" }}, {{ op = "mmap", name = "r", kind = "anon", size = {} }}, {body} ] }}"#,
            4096 * (d + 1)
        );
    }
    let text = format!(
        "[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n  {{ op = \"mmap\", name = \"r\", kind = \"anon\", size = \"1M\" }},\n  {body},\n]\n"
    );
    let t = std::time::Instant::now();
    parse(&text).unwrap();
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
}

#[test]
fn syntax_errors_name_the_header_on_their_line() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup.w]
[cgroup.w]
"#,
    ));
    check(&e, 4, "cgroup.w", &["duplicate key `w`"]);
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "1M"
[[swap]]
device = "zram" size = "1M"
"#,
    ));
    check(&e, 7, "swap[1].device", &["expected", "found `size`"]);
}

//! [cgroup.NAME] and [task.NAME] tables.

use super::*;

#[test]
fn cgroup_referenced_by_task_does_not_exist() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
cgroup = "w"
steps = []
"#,
    );
    check(
        &e,
        4,
        "task.main.cgroup",
        &["\"w\"", "[cgroup.NAME]", "none defined"],
    );
}

#[test]
fn cgroup_referenced_by_task_lists_known_cgroups() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[cgroup.a]
[cgroup.b]
memory_max = "1G"
[task.main]
cgroup = "c"
steps = []
"#,
    );
    check(&e, 7, "task.main.cgroup", &["\"c\"", "a, b"]);
}

#[test]
fn invalid_cgroup_name() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup."a b"]
memory_max = "1M"
"#,
    ));
    check(
        &e,
        3,
        "cgroup.\"a b\"",
        &["\"a b\"", "letters, digits, '_' or '-'"],
    );
}

#[test]
fn bad_cgroup_limit() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup.w]
memory_max = "lots"
"#,
    ));
    check(&e, 4, "cgroup.w.memory_max", &["\"lots\"", "\"max\""]);
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup.w]
memory_swap_max = -1
"#,
    ));
    check(&e, 4, "cgroup.w.memory_swap_max", &["-1", "\"max\""]);
}

#[test]
fn memory_zswap_writeback_is_a_boolean_from_6_12() {
    let cg = |kernel: &str, v: &str| {
        with_task(&format!(
            "[machine]\nmemory = \"512M\"\nkernel = \"{kernel}\"\n[cgroup.w]\nmemory_zswap_writeback = {v}\n"
        ))
    };
    let e = rejected(&cg("6.1", "false"));
    check(
        &e,
        5,
        "cgroup.w.memory_zswap_writeback",
        &["6.1", "6.8 brought it", "\"6.12\" or later"],
    );
    let e = rejected(&cg("6.12", "0"));
    check(&e, 5, "cgroup.w.memory_zswap_writeback", &["0", "boolean"]);
    let s = parse(&cg("7.3", "false")).expect("valid");
    assert!(!s.cgroups[0].memory_zswap_writeback);
    let s = parse(&cg("7.3", "true")).expect("valid");
    assert!(s.cgroups[0].memory_zswap_writeback);
}

#[test]
fn unknown_cgroup_key() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[cgroup.w]
memory_limit = "1M"
"#,
    ));
    check(
        &e,
        4,
        "cgroup.w.memory_limit",
        &[
            "memory_limit",
            "memory_max",
            "memory_min",
            "memory_low",
            "memory_high",
            "memory_swap_max",
            "memory_oom_group",
        ],
    );
}

#[test]
fn cgroup_by_dotted_keys_is_valid_toml() {
    let spec = parse(&with_task(
        r#"[machine]
memory = "512M"
[cgroup]
w.memory_max = "1M"
"#,
    ))
    .unwrap();
    assert_eq!(spec.cgroups[0].memory_max, Limit::Bytes(1 << 20));
}

#[test]
fn steps_as_array_of_tables_without_task_header() {
    let spec = parse(
        r#"[machine]
memory = "512M"

[[task.main.steps]]
op = "mmap"
name = "heap"
kind = "anon"
size = "8M"
"#,
    )
    .unwrap();
    assert_eq!(spec.tasks[0].steps.len(), 1);
}

// -------------------------------------------------------------------- task

#[test]
fn invalid_task_name() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task."x/y"]
steps = []
"#,
    );
    check(
        &e,
        3,
        "task.\"x/y\"",
        &["\"x/y\"", "letters, digits, '_' or '-'"],
    );
}

#[test]
fn instances_zero() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
instances = 0
steps = []
"#,
    );
    check(&e, 4, "task.main.instances", &["found 0", "at least 1"]);
}

#[test]
fn no_tasks_at_all() {
    let e = rejected(
        r#"[machine]
memory = "512M"
"#,
    );
    check(&e, 0, "task", &["no tasks", "[task.NAME]"]);
}

#[test]
fn task_without_steps() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
instances = 2
"#,
    );
    check(&e, 3, "task.main.steps", &["missing", "steps"]);
}

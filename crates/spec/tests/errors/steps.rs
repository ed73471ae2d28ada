//! Steps: the op, its keys and their types.

use super::*;

#[test]
fn missing_op() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { name = "heap" },
]
"#,
    );
    check(&e, 5, "task.main.steps[0].op", &["missing", &OPS]);
}

#[test]
fn unknown_op() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "phase", name = "a" },
  { op = "teleport" },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].op", &["\"teleport\"", &OPS]);
}

#[test]
fn op_of_wrong_type() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = 3 },
]
"#,
    );
    check(&e, 5, "task.main.steps[0].op", &["found 3", &OPS]);
}

#[test]
fn step_not_a_table() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  "touch",
]
"#,
    );
    check(&e, 5, "task.main.steps[0]", &["\"touch\"", "a table"]);
}

#[test]
fn unknown_step_field() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M", huge = true },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].huge",
        &["huge", "name", "kind", "size"],
    );
}

#[test]
fn missing_step_field() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", size = "8M" },
]
"#,
    );
    check(&e, 5, "task.main.steps[0].kind", &["missing", "kind"]);
}

#[test]
fn bad_size_in_step() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8Q" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].size",
        &["\"8Q\"", "K, M, G or T"],
    );
}

#[test]
fn step_field_of_wrong_type() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "8M" },
  { op = "touch", region = "heap", write = "half" },
]
"#,
    );
    check(&e, 6, "task.main.steps[1].write", &["\"half\"", "number"]);
}

#[test]
fn mmap_kind_unknown_and_file_mapping_without_a_disk_file() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "f", kind = "hugetlb", size = "8M" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].kind",
        &[
            "\"hugetlb\"",
            "anon, shmem, shared_anon, file, file_private",
        ],
    );
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "f", kind = "file", size = "8M" },
]
"#,
    );
    check(
        &e,
        5,
        "task.main.steps[0].file",
        &["missing", "[[file]] on a [[disk]]", "none defined"],
    );
}

//! TOML syntax errors.

use super::*;

#[test]
fn toml_syntax_error_duplicate_key() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
memory = "1G"
"#,
    ));
    check(&e, 3, "machine.memory", &["duplicate key `memory`"]);
}

#[test]
fn toml_syntax_error_in_steps() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "mmap", name = "heap" kind = "anon" },
]
"#,
    );
    check(&e, 5, "task.main", &["inline table", "expected"]);
}

#[test]
fn toml_syntax_error_unterminated_string() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M
"#,
    ));
    check(&e, 2, "machine.memory", &["string"]);
}

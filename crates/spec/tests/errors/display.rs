//! How an error is displayed.

use super::*;

#[test]
fn display_format() {
    let e = rejected(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  { op = "teleport" },
]
"#,
    );
    assert_eq!(
        e.to_string(),
        format!(
            "t.toml:5: key `task.main.steps[0].op`: found \"teleport\", expected one of {}",
            *OPS
        )
    );
    let e = rejected("[machine]\nmemory = \"512M\"\n");
    assert_eq!(
        e.to_string(),
        "t.toml: key `task`: found no tasks, expected at least one [task.NAME] table"
    );
    let e = SpecError {
        file: "f".into(),
        line: 3,
        column: 0,
        key: String::new(),
        message: "m".into(),
    };
    assert_eq!(e.to_string(), "f:3: m");
}

#[test]
fn unreadable_file() {
    let e =
        mmsim_spec::load(std::path::Path::new("/nonexistent/mmsim/spec.toml"), &[]).unwrap_err();
    assert_eq!(e.file, "/nonexistent/mmsim/spec.toml");
    assert_eq!(e.line, 0);
    assert_eq!(e.key, "");
    assert!(e.message.starts_with("cannot read the spec"), "{e}");
}

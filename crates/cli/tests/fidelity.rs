//! The fidelity suite: every spec in fidelity/ against its recorded
//! real-kernel results, within the tolerances the spec declares; and
//! docs/fidelity.md's table regenerated from the same data.

use std::process::Command;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn fidelity_specs_are_within_their_tolerances() {
    let out = Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .current_dir(root())
        .args(["fidelity", "fidelity", "--check"])
        .output()
        .expect("runs mmsim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every spec has recorded results: none is silently skipped.
    assert!(!stdout.contains("no recorded results"), "{stdout}");
    assert!(stdout.contains("| anon_seq | pgfault |"), "{stdout}");
}

#[test]
fn docs_fidelity_md_is_current() {
    let doc = std::fs::read_to_string(root().join("docs/fidelity.md")).expect("docs/fidelity.md");
    let out = Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .current_dir(root())
        .args(["fidelity", "fidelity"])
        .output()
        .expect("runs mmsim");
    let table = String::from_utf8_lossy(&out.stdout);
    let begin = "<!-- BEGIN mmsim fidelity -->\n";
    let a = doc.find(begin).expect("begin marker") + begin.len();
    let b = doc.find("<!-- END mmsim fidelity -->").expect("end marker");
    assert_eq!(
        &doc[a..b],
        table.as_ref(),
        "docs/fidelity.md is stale: run `mmsim fidelity --write docs/fidelity.md`"
    );
}

//! The `trace` step: what the spec accepts and refuses, and that a replay
//! yields the file's requests as pages of the region.

use mmsim_spec::stream::{access_is_write, access_page, TouchStream};
use mmsim_spec::trace::{TraceFormat, TraceMap};
use mmsim_spec::{Op, Order, Touch};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mmsim-trace-spec-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn oracle_general(path: &Path, ids: &[u64]) {
    let mut v = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        v.extend_from_slice(&(i as u32).to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v.extend_from_slice(&4096u32.to_le_bytes());
        v.extend_from_slice(&(-1i64).to_le_bytes());
    }
    std::fs::write(path, v).unwrap();
}

/// A spec with a 16-page region and one trace step with `fields`, written
/// beside the trace so relative paths resolve against its folder.
fn spec(name: &str, fields: &str) -> Result<mmsim_spec::Spec, mmsim_spec::SpecError> {
    let text = format!(
        "[machine]\nmemory = \"64M\"\n\n[task.main]\nsteps = [\n  {{ op = \"mmap\", name = \"r\", kind = \"anon\", size = \"64K\" }},\n  {{ op = \"trace\", region = \"r\", {fields} }},\n]\n"
    );
    let p = dir().join(name);
    std::fs::write(&p, text).unwrap();
    mmsim_spec::load(&p, &[])
}

fn the_touch(s: &mmsim_spec::Spec) -> &Touch {
    match &s.tasks[0].steps[1].op {
        Op::Touch(t) => t,
        other => panic!("{other:?}"),
    }
}

fn replay(t: &Touch, n: u64) -> Vec<u64> {
    let mut s = TouchStream::new(t, t.offset, n, 0).unwrap();
    let mut v = Vec::new();
    while s.next_batch(&mut v, 5).unwrap() > 0 {}
    v
}

#[test]
fn oracle_general_replays_its_ids_in_order() {
    let ids = [3u64, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
    oracle_general(&dir().join("pi.oracleGeneral"), &ids);
    let s = spec("pi.toml", "file = \"pi.oracleGeneral\"").unwrap();
    let t = the_touch(&s);
    assert_eq!(t.order, Order::Trace);
    assert_eq!(t.count, Some(11));
    let src = t.trace.as_deref().unwrap();
    assert_eq!(src.format, TraceFormat::OracleGeneral);
    assert_eq!(src.map, TraceMap::Refuse);
    assert_eq!(src.path, dir().join("pi.oracleGeneral"));
    let got = replay(t, 16);
    assert_eq!(got.iter().map(|&a| access_page(a)).collect::<Vec<_>>(), ids);
    assert!(got.iter().all(|&a| !access_is_write(a)));
}

#[test]
fn offset_modulo_and_count() {
    let ids = [0u64, 7, 8, 100];
    oracle_general(&dir().join("m.oracleGeneral"), &ids);
    let s = spec(
        "m.toml",
        "file = \"m.oracleGeneral\", map = \"modulo\", offset = \"32K\", count = 3",
    )
    .unwrap();
    let t = the_touch(&s);
    // Pages 8..16 of the region: ids mod 8, after the offset.
    let got = replay(t, 8);
    assert_eq!(
        got.iter().map(|&a| access_page(a)).collect::<Vec<_>>(),
        [8, 15, 8]
    );
}

#[test]
fn refuse_names_the_largest_id_and_its_record() {
    oracle_general(&dir().join("big.oracleGeneral"), &[1, 2, 16, 3, 16]);
    let e = spec("big.toml", "file = \"big.oracleGeneral\"").unwrap_err();
    assert_eq!(e.line, 7);
    assert!(e.key.ends_with("steps[1].map"), "{e}");
    assert!(
        e.message.contains("found obj_id 16 at record 3")
            && e.message.contains("beyond the 16 pages"),
        "{e}"
    );
}

#[test]
fn csv_write_column_and_write_fraction() {
    std::fs::write(dir().join("w.csv"), "t;id;op\n1;2;get\n2;3;set\n3;2;GET\n").unwrap();
    let s = spec(
        "w.toml",
        "file = \"w.csv\", header = true, delimiter = \";\", obj_id_col = 2, write_col = 3",
    )
    .unwrap();
    let got = replay(the_touch(&s), 16);
    assert_eq!(got, [2 << 1, 3 << 1 | 1, 2 << 1]);
    std::fs::write(dir().join("all.txt"), "1\n2\n3\n").unwrap();
    let s = spec("all.toml", "file = \"all.txt\", write = 1.0").unwrap();
    assert!(replay(the_touch(&s), 16)
        .iter()
        .all(|&a| access_is_write(a)));
}

#[test]
fn bad_steps_are_refused_with_their_key() {
    std::fs::write(dir().join("x.txt"), "1\n").unwrap();
    std::fs::write(dir().join("x.dat"), "1\n").unwrap();
    let cases = [
        ("file = \"missing.txt\"", "file", "cannot open it"),
        (
            "file = \"x.dat\"",
            "format",
            "missing the required key `format`",
        ),
        (
            "file = \"x.txt\", format = \"parquet\"",
            "format",
            "one of oracleGeneral, csv, txt",
        ),
        (
            "file = \"x.txt\", header = true",
            "header",
            "only format = \"csv\" takes",
        ),
        (
            "file = \"x.txt\", count = 2",
            "count",
            "from 1 to the trace's 1 records",
        ),
        (
            "file = \"x.txt\", map = \"fold\"",
            "map",
            "refuse (obj_id is the page",
        ),
        (
            "file = \"x.txt\", format = \"csv\", delimiter = \"ab\"",
            "delimiter",
            "one ASCII character",
        ),
        (
            "file = \"x.txt\", format = \"csv\", write_col = 2, write = 0.5",
            "write",
            "found both write and write_col",
        ),
        (
            "file = \"x.txt\", format = \"csv\", write_col = 2",
            "file",
            "found 1 column, expected at least 2",
        ),
        ("file = \"\"", "file", "the trace file's path"),
    ];
    for (i, (fields, key, msg)) in cases.iter().enumerate() {
        let e = spec(&format!("bad{i}.toml"), fields).unwrap_err();
        assert!(e.key.ends_with(&format!("steps[1].{key}")), "{fields}: {e}");
        assert!(e.message.contains(msg), "{fields}: {e}");
        assert_eq!(e.line, 7, "{fields}");
    }
}

#[test]
fn a_file_changed_after_the_spec_was_read_is_an_error_not_a_panic() {
    let p = dir().join("shrink.oracleGeneral");
    oracle_general(&p, &[1, 2, 3, 4]);
    let s = spec("shrink.toml", "file = \"shrink.oracleGeneral\"").unwrap();
    oracle_general(&p, &[1, 2]);
    let mut st = TouchStream::new(the_touch(&s), 0, 16, 0).unwrap();
    let e = st.next_batch(&mut Vec::new(), 10).unwrap_err();
    assert!(e.message.contains("found the end of the file"), "{e}");
    oracle_general(&p, &[1, 99, 3, 4]);
    let mut st = TouchStream::new(the_touch(&s), 0, 16, 0).unwrap();
    let e = st.next_batch(&mut Vec::new(), 10).unwrap_err();
    assert_eq!(e.at, "record 2 (byte 24)");
    assert!(e.message.contains("found obj_id 99"), "{e}");
}

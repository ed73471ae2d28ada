//! Page content (`content` on mmap) and zram's compressor.

use super::*;
use mmsim_spec::content::{Content, Kind};

fn mmap_with(content: &str) -> String {
    format!(
        r#"[machine]
memory = "512M"
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "8M", content = {content} }},
]
"#
    )
}

fn content_of(s: &Spec) -> Option<Content> {
    match &s.tasks[0].steps[0].op {
        Op::Mmap { content, .. } => content.clone(),
        _ => None,
    }
}

#[test]
fn one_kind_a_ratio_or_a_mix() {
    let one = parse(&mmap_with(r#""text""#)).unwrap();
    assert_eq!(content_of(&one), Some(Content::one(Kind::Text)));
    let ratio = parse(&mmap_with("{ ratio = 2.5 }")).unwrap();
    assert_eq!(content_of(&ratio), Some(Content::one(Kind::Ratio(250))));
    let mix = parse(&mmap_with(
        r#"[{ kind = "zero", weight = 1 }, { ratio = 3, weight = 2 }]"#,
    ))
    .unwrap();
    assert_eq!(
        content_of(&mix),
        Some(Content {
            parts: vec![(Kind::Zero, 1), (Kind::Ratio(300), 2)]
        })
    );
}

#[test]
fn unknown_kind_and_ratio_out_of_range() {
    let key = "task.main.steps[0].content";
    check(
        &rejected(&mmap_with(r#""json""#)),
        5,
        key,
        &["\"json\"", "zero, same, text, random"],
    );
    check(
        &rejected(&mmap_with("{ ratio = 0.5 }")),
        5,
        &format!("{key}.ratio"),
        &["0.5", "1.0 to 32.0"],
    );
    check(
        &rejected(&mmap_with(r#"{ kind = "text", ratio = 2.0 }"#)),
        5,
        key,
        &["exactly one"],
    );
    check(
        &rejected(&mmap_with("7")),
        5,
        key,
        &["found 7", "a page content"],
    );
}

#[test]
fn a_mix_needs_weights_and_each_kind_once() {
    let key = "task.main.steps[0].content";
    check(
        &rejected(&mmap_with(r#"[{ kind = "text" }]"#)),
        5,
        &format!("{key}[0].weight"),
        &["weight", "positive integer"],
    );
    check(
        &rejected(&mmap_with(
            r#"[{ kind = "text", weight = 1 }, { kind = "text", weight = 2 }]"#,
        )),
        5,
        &format!("{key}[1]"),
        &["twice"],
    );
    check(
        &rejected(&mmap_with(r#"[{ kind = "text", weight = 0 }]"#)),
        5,
        &format!("{key}[0].weight"),
        &["found 0"],
    );
}

#[test]
fn content_only_where_pages_swap() {
    let text = r#"[machine]
memory = "512M"
[[disk]]
name = "d"
device = "virtio"
size = "64M"
fs = "ext2"
[[file]]
name = "f"
size = "8M"
on = "d"
[task.main]
steps = [
  { op = "mmap", name = "m", kind = "file", file = "f", size = "8M", content = "text" },
]
"#;
    check(
        &rejected(text),
        14,
        "task.main.steps[0].content",
        &["kind \"file\"", "anon", "shmem"],
    );
}

#[test]
fn compressor_on_zram_only() {
    let zram = with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "64M"
compressor = "lz4"
"#,
    );
    assert_eq!(
        parse(&zram).unwrap().swap[0].compressor(Preset::V6_1),
        "lz4"
    );
    let default = parse(&zram.replace("compressor = \"lz4\"\n", "")).unwrap();
    assert_eq!(default.swap[0].compressor(Preset::V6_1), "lzo-rle");
    assert_eq!(default.swap[0].compressor(Preset::V6_12), "lz4");
    check(
        &rejected(&zram.replace("lz4", "snappy")),
        6,
        "swap[0].compressor",
        &["\"snappy\"", "lzo-rle"],
    );
    check(
        &rejected(&zram.replace("\"zram\"", "\"nvme\"")),
        6,
        "swap[0].compressor",
        &["only on device = \"zram\""],
    );
}

#[test]
fn mem_limit_on_zram_and_unmodelled_zram_settings() {
    let zram = with_task(
        r#"[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "64M"
mem_limit = "16M"
"#,
    );
    assert_eq!(parse(&zram).unwrap().swap[0].mem_limit, Some(4096));
    check(
        &rejected(&zram.replace("\"zram\"", "\"nvme\"")),
        6,
        "swap[0].mem_limit",
        &["only on device = \"zram\""],
    );
    check(
        &rejected(&zram.replace("mem_limit = \"16M\"", "recomp_algorithm = \"zstd\"")),
        6,
        "swap[0].recomp_algorithm",
        &["does not model", "recompression"],
    );
}

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
        .env("MMSIM_PROFILE", "default")
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
        .env("MMSIM_PROFILE", "default")
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

/// The multi-gen LRU's generations at each phase end, as the real kernel's
/// /sys/kernel/debug/lru_gen showed them in the recorded runs: for the
/// memory-cgroup specs mmsim's youngest sequence number is the one most
/// runs reached, and each generation holds within 10% of the runs' median
/// or 2% of the memcg's pages, whichever is more (the oldest generation
/// of a run cut short mid-eviction varies by that much between runs).
#[test]
fn mglru_generations_agree_with_the_real_kernels_debugfs() {
    for spec in [
        "mglru_anon_zipf",
        "mglru_anon_seq",
        "mglru_mixed",
        "mglru_walk_anon_zipf",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mmsim"))
            .env("MMSIM_PROFILE", "default")
            .current_dir(root())
            .args(["compare", "--recorded", "--json"])
            .arg(format!("fidelity/{spec}.toml"))
            .output()
            .expect("runs mmsim");
        assert!(out.status.success(), "{spec}");
        let c: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let rows = c["lru_gen"].as_array().expect("lru_gen rows");
        assert!(!rows.is_empty(), "{spec}: no generations compared");
        for row in rows {
            let what = format!("{spec} {} {}", row["phase"], row["memcg"]);
            let sim = row["sim"].as_array().unwrap();
            let real = row["real"].as_array().unwrap();
            assert_eq!(real.len(), 3, "{what}: debugfs read in every run");
            let max_seq =
                |g: &serde_json::Value| g.as_array().unwrap().last().unwrap()["seq"].as_u64();
            let agree = real
                .iter()
                .filter(|r| max_seq(r) == max_seq(&row["sim"]))
                .count();
            let pages: u64 = sim
                .iter()
                .map(|g| g["anon"].as_u64().unwrap() + g["file"].as_u64().unwrap())
                .sum();
            assert!(
                agree >= 2,
                "{what}: mmsim {:?} against {real:?}",
                max_seq(&row["sim"])
            );
            for g in sim {
                let seq = g["seq"].as_u64();
                for ty in ["anon", "file"] {
                    let mut vals: Vec<u64> = real
                        .iter()
                        .filter_map(|r| {
                            r.as_array()
                                .unwrap()
                                .iter()
                                .find(|x| x["seq"].as_u64() == seq)
                        })
                        .map(|x| x[ty].as_u64().unwrap())
                        .collect();
                    if vals.len() < 2 {
                        continue;
                    }
                    vals.sort_unstable();
                    let median = vals[vals.len() / 2] as f64;
                    let s = g[ty].as_u64().unwrap() as f64;
                    assert!(
                        (s - median).abs() <= (0.10 * median).max(0.02 * pages as f64),
                        "{what} seq {seq:?} {ty}: mmsim {s} against {vals:?}"
                    );
                }
            }
        }
    }
}

//! Property test over `mmsim_testkit::specgen`, the generator the fuzz target
//! `spec_gen` and the soak command use: any spec it makes ends with a
//! result whose invariants held all along and whose pages all read back
//! what was written, or with a clear error of the spec's (exit 2). The
//! generator draws, with small probabilities, what fuzzing found bugs in
//! (a test below makes sure it still does): shared file mappings written
//! on a small machine while the flusher runs, fork inside a memcg of a few
//! MiB, swapoff on one CPU while another swaps, 2 to 4 CPUs; and it draws
//! every preset and what each models (the multi-gen LRU, anonymous THP and
//! mTHP, khugepaged), `set` steps and `trace` steps, and what decides the
//! OOM killer's victims (oom_score_adj, memory.oom.group).

use mmsim_sim::RunOptions;
use mmsim_testkit::specgen::{generate_with_traces, judge, Verdict};
use proptest::prelude::*;
use std::path::PathBuf;

/// The generated trace files' folder (cargo's scratch space for tests).
fn traces() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("generated-traces");
    std::fs::create_dir_all(&dir).expect("a folder for the traces");
    dir
}

/// Page operations one case may ask for (keeps each case to milliseconds).
const MAX_WORK: u64 = 3_000_000;

fn run_case(text: &str) -> Result<(), String> {
    let Ok(spec) = mmsim_spec::parse_str(text, "gen.toml", &[]) else {
        return Ok(()); // a parse error is the parser's to judge (errors.rs)
    };
    let opts = RunOptions {
        check: true,
        max_work: Some(MAX_WORK),
        ..Default::default()
    };
    match judge(&spec, opts) {
        Verdict::Failed(why) => Err(why),
        Verdict::Ran | Verdict::Refused(_) => Ok(()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn generated_specs_keep_every_invariant(bytes in prop::collection::vec(any::<u8>(), 8..1024)) {
        let text = generate_with_traces(&bytes, &traces());
        if let Err(e) = run_case(&text) {
            panic!("{e}\n{text}");
        }
    }
}

/// Specs from fixed byte strings: deterministic, so the draws below are
/// the same on every run.
fn corpus(n: u32) -> Vec<String> {
    let dir = traces();
    (0..n)
        .map(|i| {
            let mut x = 0x9e37_79b9_u32.wrapping_mul(i + 1);
            let bytes: Vec<u8> = (0..768)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            generate_with_traces(&bytes, &dir)
        })
        .collect()
}

#[test]
fn the_generator_still_draws_what_fuzzing_found() {
    let specs = corpus(2000);
    let count = |f: &dyn Fn(&mmsim_spec::Spec) -> bool| {
        specs
            .iter()
            .filter_map(|t| mmsim_spec::parse_str(t, "gen.toml", &[]).ok())
            .filter(|s| f(s))
            .count()
    };
    use mmsim_spec::{MapKind, Op};
    fn any_step(s: &mmsim_spec::Spec, f: &dyn Fn(&Op) -> bool) -> bool {
        fn walk(steps: &[mmsim_spec::Step], f: &dyn Fn(&Op) -> bool) -> bool {
            steps.iter().any(|s| {
                f(&s.op)
                    || match &s.op {
                        Op::Repeat { steps, .. } | Op::Fork { steps } | Op::Spawn { steps } => {
                            walk(steps, f)
                        }
                        _ => false,
                    }
            })
        }
        s.tasks.iter().any(|t| walk(&t.steps, f))
    }
    let shared_file_written_small = count(&|s| {
        s.machine.memory <= 128 << 20
            && any_step(s, &|o| {
                matches!(
                    o,
                    Op::Mmap {
                        kind: MapKind::File,
                        ..
                    }
                )
            })
            && any_step(s, &|o| matches!(o, Op::Touch(t) if t.write > 0.0))
    });
    let fork_in_small_memcg = count(&|s| {
        s.cgroups
            .iter()
            .any(|c| c.memory_max.pages().is_some_and(|p| p <= 2048))
            && s.tasks.iter().any(|t| t.cgroup.is_some())
            && any_step(s, &|o| matches!(o, Op::Fork { .. }))
    });
    let swapoff_beside_others = count(&|s| {
        s.machine.cpus >= 2
            && s.tasks.len() >= 2
            && any_step(s, &|o| matches!(o, Op::Swapoff { .. }))
    });
    let many_cpus = count(&|s| s.machine.cpus >= 2);
    let mglru_walks = count(&|s| s.sysfs.lru_gen & 3 == 3);
    let mglru_rmap_only = count(&|s| s.sysfs.lru_gen & 3 == 1);
    use mmsim_spec::{MthpAnon, Order, Preset, ThpEnabled};
    let preset = |p: Preset| count(&|s| s.machine.kernel == p);
    let thp = count(&|s| s.sysfs.thp_enabled != ThpEnabled::Never);
    // Below 2 MiB (the PMD size's knob defaults to inherit).
    let mthp = count(&|s| s.sysfs.anon_mthp[..7].iter().any(|&w| w != MthpAnon::Never));
    let khugepaged = |p: Preset| {
        count(&|s| s.machine.kernel == p && s.sysfs.khugepaged.scan_sleep_millisecs.is_some())
    };
    let set = count(&|s| any_step(s, &|o| matches!(o, Op::Set(_))));
    let trace = count(&|s| any_step(s, &|o| matches!(o, Op::Touch(t) if t.order == Order::Trace)));
    let oom_group = count(&|s| s.cgroups.iter().any(|c| c.memory_oom_group));
    let oom_score_adj = count(&|s| s.tasks.iter().any(|t| t.oom_score_adj != 0));
    let content_zram = count(&|s| {
        s.swap.iter().any(|d| d.kind == mmsim_spec::SwapKind::Zram)
            && any_step(s, &|o| {
                matches!(
                    o,
                    Op::Mmap {
                        content: Some(_),
                        ..
                    }
                )
            })
    });
    let zram_mem_limit = count(&|s| s.swap.iter().any(|d| d.mem_limit.is_some()));
    for (what, n) in [
        (
            "shared file mappings written on a machine of 128 MiB or less",
            shared_file_written_small,
        ),
        ("fork inside a memcg of at most 8 MiB", fork_in_small_memcg),
        (
            "swapoff beside another task on 2+ CPUs",
            swapoff_beside_others,
        ),
        ("2 to 4 CPUs", many_cpus),
        ("the multi-gen LRU with page-table walks", mglru_walks),
        ("the multi-gen LRU aging by rmap only", mglru_rmap_only),
        ("the 5.10 preset", preset(Preset::V5_10)),
        ("the 6.1 preset", preset(Preset::V6_1)),
        ("the 6.12 preset", preset(Preset::V6_12)),
        ("the 7.3 preset", preset(Preset::V7_3)),
        ("anonymous THP (6.1)", thp),
        ("anonymous mTHP (6.12, 7.3)", mthp),
        ("6.1's khugepaged with its knobs", khugepaged(Preset::V6_1)),
        ("7.3's khugepaged with its knobs", khugepaged(Preset::V7_3)),
        ("set steps", set),
        ("trace steps", trace),
        ("memory.oom.group", oom_group),
        ("oom_score_adj", oom_score_adj),
        ("page content with zram swap", content_zram),
        ("zram's mem_limit", zram_mem_limit),
    ] {
        // Small probabilities, but not zero: a few in every 2000.
        assert!(n >= 5, "{what}: {n} of 2000 generated specs");
    }
}

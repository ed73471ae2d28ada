//! Soak: runs randomized specs with the invariant checker on until a
//! number of page operations is done, and reports anything that panics,
//! breaks an invariant, loses a page's content or runs away.
//!
//! ```sh
//! cargo run --release -p mmsim-testkit --example soak -- --ops 1000000000
//! cargo run --release -p mmsim-testkit --example soak -- --specs 20000 --mutate examples --mutate fidelity
//! ```
//!
//! Specs come from `mmsim_testkit::specgen` (fresh, `trace` steps included:
//! their files go to a temporary folder the soak owns and removes at its
//! end), or, with `--mutate DIR`, from the specs in DIR with a few random
//! edits each (numbers, keys, lines). Each worker thread draws its specs from `--seed` and its
//! number, so a run is repeatable. A failing spec is written to `--out`
//! (default `soak-failures/`) with its error in a header comment, and
//! each trace file it replays beside it (the spec names it relatively);
//! `--verbose` prints why each refused spec was refused. `--profile P`
//! prices the runs with a machine profile (as mmsim's --profile). `--guests` runs
//! each generated spec as a guest (TCG or KVM, at random) of a host that
//! may swap its RAM (`specgen::hosted`; guests the simulator refuses count as refused). A spec
//! still running after `--timeout` seconds counts as a hang: it is written
//! out and the soak stops. Exit status 1 if anything failed.

use mmsim_sim::RunOptions;
use mmsim_testkit::specgen::{judge, Verdict};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    ops: u128,
    specs: u64,
    seed: u64,
    threads: usize,
    mutate: Vec<PathBuf>,
    out: PathBuf,
    timeout: u64,
    max_work: u64,
    verbose: bool,
    guests: bool,
    /// `--profile`: the machine profile the runs are priced with (as
    /// mmsim's --profile: a file, `default`, `reference`, `auto`); none:
    /// RunOptions' default (the default profile). Costs move the CPUs'
    /// interleavings, so each profile checks other schedules.
    profile: Option<mmsim_sim::machine_profile::CostProfile>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        ops: u128::MAX,
        specs: u64::MAX,
        seed: 1,
        threads: 2,
        mutate: Vec::new(),
        out: PathBuf::from("soak-failures"),
        timeout: 120,
        max_work: 20_000_000,
        verbose: false,
        guests: false,
        profile: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| {
            v.replace('_', "")
                .parse::<u64>()
                .map_err(|e| format!("{flag}: {e}"))
        };
        match flag.as_str() {
            "--ops" => a.ops = num(value()?)? as u128,
            "--specs" => a.specs = num(value()?)?,
            "--seed" => a.seed = num(value()?)?,
            "--threads" => a.threads = num(value()?)?.max(1) as usize,
            "--timeout" => a.timeout = num(value()?)?,
            "--max-work" => a.max_work = num(value()?)?,
            "--mutate" => a.mutate.push(PathBuf::from(value()?)),
            "--out" => a.out = PathBuf::from(value()?),
            "--verbose" => a.verbose = true,
            "--guests" => a.guests = true,
            "--profile" => {
                let name = value()?;
                let p = mmsim_sim::machine_profile::CostProfile::load(&name)
                    .map_err(|e| format!("--profile {name}: {e}"))?;
                a.profile = Some(p);
            }
            _ => {
                return Err(format!(
                    "unknown flag {flag}; see the comment atop examples/soak.rs"
                ))
            }
        }
    }
    if a.ops == u128::MAX && a.specs == u64::MAX {
        a.ops = 1_000_000_000;
    }
    Ok(a)
}

/// splitmix64: the soak's only randomness, seeded per worker.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A few random edits of a spec's text: a number changed, a line dropped,
/// doubled or swapped, a string value replaced, a byte inserted.
fn mutate(text: &str, rng: &mut Rng) -> String {
    const NUMBERS: &[&str] = &[
        "0",
        "1",
        "2",
        "3",
        "7",
        "64",
        "4096",
        "1000000",
        "4294967295",
        "281474976710656",
        "-1",
        "0.5",
        "\"4K\"",
        "\"1M\"",
        "\"64M\"",
        "\"1G\"",
        "\"max\"",
    ];
    const WORDS: &[&str] = &[
        "seq",
        "rev",
        "shuffle",
        "uniform",
        "zipf",
        "pageout",
        "cold",
        "dontneed",
        "free",
        "willneed",
        "hugepage",
        "zram",
        "nvme",
        "virtio",
        "hdd",
        "ram",
        "tmpfs",
        "anon",
        "shmem",
        "shared_anon",
        "file",
        "file_private",
        "always",
        "never",
        "advise",
        "xfs",
        "ext2",
    ];
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len() as u64) as usize;
        match rng.below(6) {
            0 => {
                // Replace one number on the line.
                let l = &lines[i];
                let starts: Vec<usize> = l
                    .char_indices()
                    .filter(|&(j, c)| {
                        c.is_ascii_digit()
                            && (j == 0 || !l.as_bytes()[j - 1].is_ascii_alphanumeric())
                    })
                    .map(|(j, _)| j)
                    .collect();
                if let Some(&s) = starts.get(rng.below(starts.len().max(1) as u64) as usize) {
                    let e = l[s..]
                        .find(|c: char| !c.is_ascii_digit() && c != '_')
                        .map_or(l.len(), |n| s + n);
                    let n = NUMBERS[rng.below(NUMBERS.len() as u64) as usize];
                    lines[i] = format!("{}{}{}", &l[..s], n.trim_matches('"'), &l[e..]);
                }
            }
            1 => {
                lines.remove(i);
            }
            2 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            3 => {
                let j = rng.below(lines.len() as u64) as usize;
                lines.swap(i, j);
            }
            4 => {
                // Replace one quoted value on the line.
                let l = &lines[i];
                let quotes: Vec<usize> = l.match_indices('"').map(|(j, _)| j).collect();
                if quotes.len() >= 2 {
                    let k = rng.below(quotes.len() as u64 / 2) as usize * 2;
                    let w = WORDS[rng.below(WORDS.len() as u64) as usize];
                    lines[i] = format!("{}{w}{}", &l[..quotes[k] + 1], &l[quotes[k + 1]..]);
                }
            }
            _ => {
                let l = &mut lines[i];
                let mut at = rng.below(l.len() as u64 + 1) as usize;
                while !l.is_char_boundary(at) {
                    at -= 1;
                }
                let c = b"{}[]=,\"#.x0\t"[rng.below(12) as usize] as char;
                l.insert(at, c);
            }
        }
    }
    lines.join("\n") + "\n"
}

fn specs_in(dirs: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if p.extension().is_some_and(|e| e == "toml") {
                if let Ok(t) = std::fs::read_to_string(&p) {
                    out.push(t);
                }
            }
        }
    }
    out
}

#[derive(Default)]
struct Totals {
    specs: AtomicU64,
    ran: AtomicU64,
    refused: AtomicU64,
    ops: AtomicU64,
    failures: AtomicU64,
}

enum Outcome {
    Ran(u128),
    Refused(String),
    Failed(String),
}

fn one(
    text: &str,
    max_work: u64,
    profile: Option<&mmsim_sim::machine_profile::CostProfile>,
) -> Outcome {
    let spec = match mmsim_spec::parse_str(text, "soak.toml", &[]) {
        Ok(s) => s,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let work = mmsim_spec::work::work(&spec).total;
    let mut opts = RunOptions {
        check: true,
        max_work: Some(max_work),
        max_host_bytes: Some(2 << 30),
        ..Default::default()
    };
    if let Some(p) = profile {
        opts.costs = p.clone();
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| judge(&spec, opts))) {
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Outcome::Failed(format!("panic: {msg}"))
        }
        Ok(Verdict::Failed(why)) => Outcome::Failed(why),
        Ok(Verdict::Refused(why)) => Outcome::Refused(why),
        Ok(Verdict::Ran) => Outcome::Ran(work),
    }
}

/// Writes a failing spec to `out` with `why` in its header. A trace file
/// the spec replays from the soak's own folder `traces` is copied beside
/// it and named relatively, so the file replays after the soak is gone.
fn save(out: &Path, traces: &Path, name: &str, why: &str, text: &str) {
    let _ = std::fs::create_dir_all(out);
    let header: String = why.lines().map(|l| format!("# {l}\n")).collect();
    let prefix = format!("{}/", traces.display());
    let mut text = text.to_string();
    while let Some(at) = text.find(&prefix) {
        let end = text[at..].find('"').map_or(text.len(), |e| at + e);
        let file = text[at + prefix.len()..end].to_string();
        let _ = std::fs::copy(traces.join(&file), out.join(&file));
        text.replace_range(at..end, &file);
    }
    let _ = std::fs::write(out.join(name), format!("{header}{text}"));
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("soak: {e}");
            std::process::exit(2);
        }
    };
    let pool = Arc::new(specs_in(&args.mutate));
    // The generated specs' trace files: this process's own folder.
    let traces = Arc::new(std::env::temp_dir().join(format!("mmsim-soak-{}", std::process::id())));
    if let Err(e) = std::fs::create_dir_all(traces.as_path()) {
        eprintln!("soak: {}: {e}", traces.display());
        std::process::exit(2);
    }
    if !args.mutate.is_empty() && pool.is_empty() {
        eprintln!("soak: no .toml specs in {:?}", args.mutate);
        std::process::exit(2);
    }
    // Silence the default panic message; the soak reports panics itself.
    std::panic::set_hook(Box::new(|_| {}));
    let totals = Arc::new(Totals::default());
    let stop = Arc::new(AtomicBool::new(false));
    let current: Arc<Vec<Mutex<(Instant, String)>>> = Arc::new(
        (0..args.threads)
            .map(|_| Mutex::new((Instant::now(), String::new())))
            .collect(),
    );
    let started = Instant::now();
    let args = Arc::new(args);
    let workers: Vec<_> = (0..args.threads)
        .map(|w| {
            let (args, pool, totals, stop, current, traces) = (
                args.clone(),
                pool.clone(),
                totals.clone(),
                stop.clone(),
                current.clone(),
                traces.clone(),
            );
            std::thread::spawn(move || {
                let mut rng = Rng(args.seed.wrapping_mul(1_000_003).wrapping_add(w as u64));
                while !stop.load(Ordering::Relaxed) {
                    let n = totals.specs.fetch_add(1, Ordering::Relaxed);
                    if n >= args.specs || totals.ops.load(Ordering::Relaxed) as u128 >= args.ops {
                        break;
                    }
                    let text = if pool.is_empty() {
                        let len = 16 + rng.below(1024) as usize;
                        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                        let text = mmsim_testkit::specgen::generate_with_traces(&bytes, &traces);
                        match args.guests {
                            true => {
                                let host_mb = [256, 512, 1024][rng.below(3) as usize];
                                let vms_max = ["max", "32M", "64M", "128M"][rng.below(4) as usize];
                                let accel = ["tcg", "kvm"][rng.below(2) as usize];
                                mmsim_testkit::specgen::hosted(&text, host_mb, vms_max, accel)
                            }
                            false => text,
                        }
                    } else {
                        mutate(&pool[rng.below(pool.len() as u64) as usize], &mut rng)
                    };
                    *current[w].lock().unwrap() = (Instant::now(), text.clone());
                    match one(&text, args.max_work, args.profile.as_ref()) {
                        Outcome::Ran(ops) => {
                            totals.ran.fetch_add(1, Ordering::Relaxed);
                            totals.ops.fetch_add(ops as u64, Ordering::Relaxed);
                        }
                        Outcome::Refused(why) => {
                            totals.refused.fetch_add(1, Ordering::Relaxed);
                            if args.verbose {
                                eprintln!("soak: spec {n}: {why}");
                            }
                        }
                        Outcome::Failed(why) => {
                            let k = totals.failures.fetch_add(1, Ordering::Relaxed);
                            eprintln!(
                                "soak: spec {n} failed: {}",
                                why.lines().next().unwrap_or("")
                            );
                            save(
                                &args.out,
                                &traces,
                                &format!("fail-{k}-{n}.toml"),
                                &why,
                                &text,
                            );
                        }
                    }
                    current[w].lock().unwrap().1.clear();
                }
            })
        })
        .collect();
    let timeout = Duration::from_secs(args.timeout);
    let mut last_report = Instant::now();
    while !workers.iter().all(|w| w.is_finished()) {
        std::thread::sleep(Duration::from_millis(200));
        for (w, c) in current.iter().enumerate() {
            let (since, text) = c.lock().unwrap().clone();
            if !text.is_empty() && since.elapsed() > timeout {
                save(
                    &args.out,
                    &traces,
                    &format!("hang-{w}.toml"),
                    &format!("still running after {} s", args.timeout),
                    &text,
                );
                eprintln!(
                    "soak: worker {w} hangs; its spec is in {}",
                    args.out.display()
                );
                let _ = std::fs::remove_dir_all(traces.as_path());
                std::process::exit(1);
            }
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            last_report = Instant::now();
            eprintln!(
                "soak: {} specs, {} page operations, {} failures, {:.0} s",
                totals.ran.load(Ordering::Relaxed) + totals.refused.load(Ordering::Relaxed),
                totals.ops.load(Ordering::Relaxed),
                totals.failures.load(Ordering::Relaxed),
                started.elapsed().as_secs_f64()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = std::fs::remove_dir_all(traces.as_path());
    let (ran, refused) = (
        totals.ran.load(Ordering::Relaxed),
        totals.refused.load(Ordering::Relaxed),
    );
    let failures = totals.failures.load(Ordering::Relaxed);
    println!(
        "soak: {} specs ({ran} ran with --check, {refused} ended with a clear error), {} page operations, {failures} failures, {:.1} s",
        ran + refused,
        totals.ops.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    std::process::exit(if failures > 0 { 1 } else { 0 });
}

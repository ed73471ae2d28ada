//! mmsim-runner: executes an mmsim spec on the running Linux kernel with
//! real syscalls and prints the same JSON document as `mmsim run --json`,
//! with the kernel's release as the engine. Needs root (knobs, zram swap,
//! cgroups). Built static so it runs as-is in the oracle's initramfs:
//!
//!   RUSTFLAGS="-C target-feature=+crt-static" cargo build --release \
//!     -p mmsim-runner --target x86_64-unknown-linux-gnu
//!
//! With `--native` it runs on the machine's own kernel (crate::native):
//! it refuses what it cannot set up faithfully and undo, and with
//! `--journal FILE` records every change as it makes it, so that
//! `--teardown FILE` undoes a runner that was killed.

mod cgroup;
mod exec;
mod native;
mod oom;
mod ops;
mod procfs;
mod region;
mod rstat_bench;
mod setup;
mod shared;
mod vmm;
mod zram_bench;

use mmsim_spec::output::{Engine, IntegrityResult, MachineInfo, RunResult};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage: mmsim-runner SPEC [--set KEY=VALUE]... [--output FILE] [--native [--journal FILE] [--zram-bench PAGES [--zram-content-bench] | --rstat-bench REPS] [--vmm NAME=FILE]... [--preload FILE]...]\n       mmsim-runner --teardown JOURNAL";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut spec_path = None;
    let mut sets = Vec::new();
    let mut output = None;
    let mut native = false;
    let mut journal = None;
    let mut zram_bench = None;
    let mut content_bench = false;
    let mut rstat_reps = None;
    let mut vmms = vmm::Vmms::new();
    let mut preload = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--set" => sets.push(it.next().unwrap_or_default()),
            "--output" | "-o" => output = it.next(),
            "--native" => native = true,
            "--journal" => journal = it.next(),
            "--zram-content-bench" => content_bench = true,
            "--vmm" => {
                if let Err(e) = vmm::parse_arg(&it.next().unwrap_or_default(), &mut vmms) {
                    eprintln!("mmsim-runner: {e}\n{USAGE}");
                    return ExitCode::from(2);
                }
            }
            "--preload" => preload.push(it.next().unwrap_or_default()),
            "--zram-bench" => match it.next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) if n > 0 => zram_bench = Some(n),
                _ => {
                    eprintln!(
                        "mmsim-runner: --zram-bench: expected a number of pages > 0\n{USAGE}"
                    );
                    return ExitCode::from(2);
                }
            },
            "--rstat-bench" => match it.next().and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n > 0 => rstat_reps = Some(n),
                _ => {
                    eprintln!(
                        "mmsim-runner: --rstat-bench: expected a number of repetitions > 0\n{USAGE}"
                    );
                    return ExitCode::from(2);
                }
            },
            "--teardown" => {
                let Some(j) = it.next() else {
                    eprintln!("{USAGE}");
                    return ExitCode::from(2);
                };
                return match native::teardown(&j) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("mmsim-runner: teardown: {e}");
                        ExitCode::from(1)
                    }
                };
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if spec_path.is_none() && !a.starts_with('-') => spec_path = Some(a),
            _ => {
                eprintln!("mmsim-runner: unexpected argument {a}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(path) = spec_path else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let spec = match mmsim_spec::load(std::path::Path::new(&path), &sets) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mmsim-runner: {e}");
            return ExitCode::from(2);
        }
    };
    let preset = spec.machine.kernel;
    if spec.features != preset.features() {
        eprintln!("mmsim-runner: {path}: the real kernel's mechanisms are fixed; run it with every feature at its value in machine.kernel = \"{preset}\"");
        return ExitCode::from(2);
    }
    if let Err(e) = setup::refuse_missing_knobs(&spec, &kernel_release()) {
        eprintln!("mmsim-runner: {path}: {e}");
        return ExitCode::from(2);
    }
    if !spec.machine.hw_pte_young {
        eprintln!("mmsim-runner: {path}: machine.hw_pte_young = false: the guest's x86 MMU sets accessed bits in hardware; the spec runs in the simulator only");
        return ExitCode::from(2);
    }
    if spec.machine.stats_flush_phase != 0 {
        eprintln!("mmsim-runner: {path}: machine.stats_flush_phase: the real kernel's memcg statistics flush worker runs where the machine's boot put it; the spec runs in the simulator only");
        return ExitCode::from(2);
    }
    if spec.machine.memory_bandwidth.is_some() {
        eprintln!("mmsim-runner: {path}: machine.memory_bandwidth: the real machine's memory delivers what it delivers; the spec runs in the simulator only");
        return ExitCode::from(2);
    }
    // The same work limit as the simulator's default: a spec that would
    // run for days is refused before it touches the machine.
    let work = mmsim_spec::work::work(&spec);
    if work.total > mmsim_spec::work::DEFAULT_MAX_WORK as u128 {
        let l = work.largest.expect("work comes from steps");
        eprintln!(
            "mmsim-runner: {path}:{}: key `{}`: found a spec asking for {} page operations, expected at most {}",
            l.line,
            l.key,
            work.total,
            mmsim_spec::work::DEFAULT_MAX_WORK
        );
        return ExitCode::from(2);
    }
    if let Some(e) = vmm::refusal(&spec, native, &vmms) {
        eprintln!("mmsim-runner: {path}: {e}");
        return ExitCode::from(2);
    }
    if native {
        if let Err(e) = native::preflight(&spec) {
            eprintln!("mmsim-runner: {path}: {e}");
            return ExitCode::from(2);
        }
    }
    if let Some(pages) = zram_bench {
        if !native || spec.swap.is_empty() {
            eprintln!(
                "mmsim-runner: {path}: --zram-bench needs --native and a spec with a zram [[swap]]"
            );
            return ExitCode::from(2);
        }
        return bench_output(
            bench_zram(&spec, journal.as_deref(), pages, content_bench),
            output,
        );
    }
    if let Some(reps) = rstat_reps {
        if !native || spec.cgroups.len() != 1 {
            eprintln!(
                "mmsim-runner: {path}: --rstat-bench needs --native and a spec with one cgroup"
            );
            return ExitCode::from(2);
        }
        return bench_output(bench_rstat(&spec, journal.as_deref(), reps), output);
    }
    let guests = Guests {
        vmms: &vmms,
        preload: &preload,
    };
    match run(&spec, native, journal.as_deref(), &guests) {
        Ok(result) => {
            let doc = serde_json::to_string_pretty(&result).expect("serialises") + "\n";
            if let Some(out) = output {
                let code = write_output(&out, &doc);
                if code != ExitCode::SUCCESS {
                    return code;
                }
            } else {
                let _ = std::io::stdout().write_all(doc.as_bytes());
            }
            if result.integrity.violations > 0 {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mmsim-runner: {e}");
            ExitCode::from(1)
        }
    }
}

/// A bench's document, to `output` (atomically) or standard output; or
/// its error.
fn bench_output(doc: Result<String, String>, output: Option<String>) -> ExitCode {
    match (doc, output) {
        (Ok(doc), Some(out)) => write_output(&out, &doc),
        (Ok(doc), None) => {
            println!("{doc}");
            ExitCode::SUCCESS
        }
        (Err(e), _) => {
            eprintln!("mmsim-runner: {e}");
            ExitCode::from(1)
        }
    }
}

/// Writes the result document atomically.
fn write_output(out: &str, doc: &str) -> ExitCode {
    let tmp = format!("{out}.tmp");
    if let Err(e) = std::fs::write(&tmp, doc).and_then(|_| std::fs::rename(&tmp, out)) {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("mmsim-runner: cannot write {out}: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The zram bench (zram_bench.rs) on the spec's zram, set up and undone.
fn bench_zram(
    spec: &mmsim_spec::Spec,
    journal: Option<&str>,
    pages: u64,
    content: bool,
) -> Result<String, String> {
    let mut setup = setup::Setup::apply(spec, journal)?;
    let doc = match content {
        false => zram_bench::run(&setup.devices[0], pages)
            .map(|r| serde_json::to_string_pretty(&r).expect("serialises")),
        true => zram_bench::run_content(&setup.devices[0], pages)
            .map(|r| serde_json::to_string_pretty(&r).expect("serialises")),
    };
    setup.teardown();
    doc
}

/// The rstat bench (rstat_bench.rs) in the spec's cgroup, set up and
/// undone.
fn bench_rstat(
    spec: &mmsim_spec::Spec,
    journal: Option<&str>,
    reps: usize,
) -> Result<String, String> {
    let mut setup = setup::Setup::apply(spec, journal)?;
    let dir = setup::cgroup_dir(&spec.cgroups[0].name);
    let doc =
        rstat_bench::run(&dir, reps).map(|r| serde_json::to_string_pretty(&r).expect("serialises"));
    setup.teardown();
    doc
}

/// A native run's guests: each one's QEMU command line, and the files
/// to read into the page cache before they start (vmm.rs).
struct Guests<'a> {
    vmms: &'a vmm::Vmms,
    preload: &'a [String],
}

fn run(
    spec: &mmsim_spec::Spec,
    native: bool,
    journal: Option<&str>,
    guests: &Guests,
) -> Result<RunResult, String> {
    let spec = &vmm::with_vmm_tasks(spec);
    let mut setup = setup::Setup::apply(spec, journal)?;
    if native {
        // Every run starts from the same page cache: none of the host's
        // (the guest's is fresh at boot).
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        std::fs::write("/proc/sys/vm/drop_caches", "3")
            .map_err(|e| format!("cannot drop the caches: {e}"))?;
        vmm::preload(guests.preload)?;
    }
    let machine = MachineInfo {
        memory_bytes: spec.machine.memory,
        // SAFETY: sysconf has no preconditions.
        cpus: unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as u32,
        topology: procfs::cpu_topology().and_then(mmsim_spec::Topology::unless_flat),
        mem_total_bytes: procfs::meminfo("MemTotal"),
        mem_free_at_start_bytes: procfs::meminfo("MemFree"),
        min_free_kbytes: procfs::read_u64("/proc/sys/vm/min_free_kbytes"),
        zones: procfs::zoneinfo(),
    };
    let before = procfs::vmstat();
    let tlb_before = procfs::tlb_shootdowns();
    let psi_before = procfs::pressure(None);
    let t0 = Instant::now();
    let reports = exec::run_tasks(spec, &setup.devices, &setup.files, guests.vmms, t0);
    let elapsed = t0.elapsed().as_nanos() as u64;
    let after = procfs::vmstat();
    let tlb = procfs::tlb_shootdowns().saturating_sub(tlb_before);
    let pressure = procfs::pressure_since(psi_before);
    setup.teardown();
    let reports = reports?;
    if let Some(e) = reports.iter().find_map(|r| r.error.clone()) {
        return Err(e);
    }
    // The cgroups as the last task to finish its steps read them (a task
    // the OOM killer ended read nothing of its own: one only if all were).
    let last = reports
        .iter()
        .max_by_key(|r| (r.task.oom_kill.is_none(), r.task.end_ns));
    let mut knobs: BTreeMap<String, String> = setup.knobs.iter().cloned().collect();
    for (name, on) in spec.features.list() {
        knobs.insert(format!("feature:{name}"), on.to_string());
    }
    if native {
        knobs.insert("native:cpu".into(), native::cpu_model());
        knobs.insert(
            "native:cgroup".into(),
            match cgroup::mode() {
                cgroup::Mode::V2(root) => format!("v2 {root}"),
                cgroup::Mode::V1(root) => format!("v1 {root}"),
            },
        );
    }
    Ok(RunResult {
        format: 1,
        engine: Engine {
            name: if native { "linux-native" } else { "linux" }.into(),
            version: kernel_release(),
        },
        spec: spec.file.clone(),
        knobs,
        machine,
        elapsed_ns: elapsed,
        integrity: IntegrityResult {
            pages_checked: reports.iter().map(|r| r.pages_checked).sum(),
            violations: reports.iter().map(|r| r.violations).sum(),
            invariant_checks: None,
        },
        cgroups: last.map(|r| r.cgroups.clone()).unwrap_or_default(),
        zram: last.map(|r| r.zram.clone()).unwrap_or_default(),
        zswap: last.and_then(|r| r.zswap),
        tasks: reports.into_iter().map(|r| r.task).collect(),
        vmstat: procfs::delta(&after, &before),
        profile: BTreeMap::new(),
        histograms: BTreeMap::new(),
        profile_tree: Vec::new(),
        kvm: BTreeMap::new(),
        pressure,
        interrupts: match tlb {
            0 => BTreeMap::new(),
            n => BTreeMap::from([("TLB".to_string(), n)]),
        },
        vms: BTreeMap::new(),
    })
}

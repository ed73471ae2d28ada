//! `mmsim calibrate`: measures the cost model's constants on the running
//! machine and writes a machine profile (docs/calibrate.md).
//!
//! Each unknown has one *home*: a difference of phase times of one
//! calibration spec (calibrate/*.toml) on the real kernel, two sizes of
//! the same operation so that fixed costs cancel. Which constants a phase
//! charges, and how often, is not worked out by hand: the simulator runs
//! the spec once per constant with that constant raised by `DELTA`, and
//! the phase's time grows by count × DELTA (one running task, synchronous
//! zram: time is linear in the costs). With as many homes as unknowns the
//! system A·x = b is square and solved exactly, per run: nothing is fitted.
//! Constants no stock-kernel path separates are solved as their sum (a
//! bundle) and split in cost_model.rs's ratio. The user-space primitives and the
//! zram device are measured directly (ubench.rs, the runner's zram bench)
//! and enter the system as known values.

pub mod fit;
pub mod smp;
pub mod ubench;

use mmsim_sim::machine_profile::{
    Basis, CostEntry, Costs, MachineInfo, MachineProfile, Provenance,
};
use mmsim_sim::output::{RstatBench, RunResult, ZramBench};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How much one perturbation raises a constant, ns.
const DELTA: u64 = 1 << 10;

/// Pages per size of the zram bench.
const ZRAM_BENCH_PAGES: u64 = 16384;

/// A calibrated unknown: one constant, or a bundle of constants in fixed
/// ratio that no stock-kernel path separates.
pub struct Unknown {
    pub name: &'static str,
    /// Its constants and their shares of it (cost_model.rs's ratio).
    pub fields: &'static [(&'static str, u64)],
    /// The phases that price it most directly, for the profile's method.
    pub method: &'static str,
}

/// The unknowns. Every calibration phase and every user-space or zram
/// microbenchmark is one equation in them (fit.rs); the method names the
/// phases that weigh most on each.
pub const UNKNOWNS: &[Unknown] = &[
    Unknown {
        name: "touch",
        fields: &[("touch", 1)],
        method: "calibrate/touch.toml: 1M and 2M uniform touches of a resident 256 MiB anon region",
    },
    Unknown {
        name: "fault_entry",
        fields: &[("fault_entry", 1)],
        method: "calibrate/zero_read.toml: zero-page read faults, 128 and 256 MiB",
    },
    Unknown {
        name: "tlb_flush",
        fields: &[("tlb_flush", 1)],
        method: "calibrate/zero_read.toml: write faults over zero-page PTEs (COW from the zero page), 128 and 256 MiB",
    },
    Unknown {
        name: "new_anon_page",
        fields: &[("alloc_page", 100), ("memcg_charge", 40), ("lru_add", 60)],
        method: "calibrate/first_touch.toml: first-touch write faults in a memory cgroup, 128 and 256 MiB; a bundle (every new anon page pays all three) split 100:40:60",
    },
    Unknown {
        name: "free_page",
        fields: &[("free_page", 1)],
        method: "calibrate/free_anon.toml: munmap of resident private anon in a memory cgroup, 128, 256 and 384 MiB, with per-CPU free lists of four batches (vm.percpu_pagelist_high_fraction) so that every page reaches the buddy allocator, as 6.1's do past a few MiB (runs recorded before it: calibrate/first_touch.toml's munmaps, 128, 256 and 384 MiB, the lists as the kernel sizes them)",
    },
    Unknown {
        name: "rmap",
        fields: &[("mapcount", 1), ("rmap_stat", 3)],
        method: "calibrate/munmap_shmem.toml: munmap of resident tmpfs mappings, 128 and 256 MiB; a bundle (order-0 rmap removal pays both) split 1:3",
    },
    Unknown {
        name: "pte",
        fields: &[("pte", 1)],
        method: "calibrate/cold_zero.toml: MADV_COLD over zero-page PTEs, 256 and 512 MiB",
    },
    Unknown {
        name: "copy_pte",
        fields: &[("copy_pte", 1)],
        method: "calibrate/fork.toml: fork with 128 and with 256 MiB of resident anon",
    },
    Unknown {
        name: "fork",
        fields: &[("fork", 1)],
        method: "calibrate/fork.toml: fork's time beside its resident size, including the runner's per-fork pipe and reader thread",
    },
    Unknown {
        name: "pagecache_lookup",
        fields: &[("pagecache_lookup", 1)],
        method: "calibrate/read.toml: read(2) in 128 KiB and 4 KiB calls of resident tmpfs, 128 and 256 MiB",
    },
    Unknown {
        name: "map_pages",
        fields: &[("map_pages", 1)],
        method: "calibrate/read.toml: read touches of resident tmpfs through a shared mapping (fault-around), 128 and 256 MiB",
    },
    Unknown {
        name: "swap_out",
        fields: &[("unmap_one", 250), ("shrink_folio", 50)],
        method: "calibrate/pageout.toml: MADV_PAGEOUT of private anon to zram, 64, 128 and 192 MiB, and calibrate/memcg_reclaim.toml's reclaim; a bundle (every page reclaimed pays both) split 250:50 beyond unmap_one's own PTE clear and TLB flush (pte + tlb_flush), which also carries the swap-out's work beyond the reference swap_slot",
    },
    Unknown {
        name: "swap_read",
        fields: &[("swap_read", 1)],
        method: "calibrate/pageout.toml: read faults swapping private anon in from zram, 64, 128 and 192 MiB, and calibrate/swap_cache.toml's of slots of count 1",
    },
    Unknown {
        name: "shmem_swapin",
        fields: &[("shmem_swapin", 1)],
        method: "calibrate/shmem_swapin.toml: read faults swapping tmpfs pages in from zram one page a fault (vm.page-cluster 0, the path 6.18's shmem takes from a synchronous device), 64 and 128 MiB",
    },
    Unknown {
        name: "shmem_write",
        fields: &[("shmem_write", 1)],
        method: "calibrate/read.toml: write(2) over resident tmpfs files in 128 KiB calls, 128, 256 and 384 MiB",
    },
    Unknown {
        name: "shmem_shared_fault",
        fields: &[("shmem_shared_fault", 1)],
        method: "calibrate/munmap_shmem.toml: write faults filling shared mappings of empty tmpfs files, 128, 256 and 384 MiB",
    },
    Unknown {
        name: "swap_slot_free",
        fields: &[("swap_slot_free", 1)],
        method: "calibrate/swap_zap.toml: munmap of private anon paged out to zram (each swap PTE its slot's only reference), 64, 128 and 192 MiB",
    },
    Unknown {
        name: "swap_cache_add",
        fields: &[("swap_cache_add", 1)],
        method: "calibrate/swap_cache.toml: read faults on private anon in zram whose slots a fork shares (through the swap cache, one page a fault) against slots of count 1 (past it), 64, 128 and 192 MiB",
    },
    Unknown {
        name: "swap_cache_del",
        fields: &[("swap_cache_del", 1)],
        method: "calibrate/swap_cache.toml: munmap of private anon the swap cache holds (each folio leaves it and frees its slot) against plain anon, 64, 128 and 192 MiB",
    },
    Unknown {
        name: "memcg_reclaim",
        fields: &[("memcg_reclaim", 1)],
        method: "calibrate/memcg_reclaim.toml: 128 and 256 MiB written under a 32 MiB memory.max swapping to zram",
    },
    Unknown {
        name: "clear_page",
        fields: &[("clear_page", 1)],
        method: "user space: 4 KiB memset of cold pages (a pool ≥ 4× the LLC), 2n minus n pages; and every phase that allocates a page",
    },
    Unknown {
        name: "copy_page",
        fields: &[("copy_page", 1)],
        method: "user space: 4 KiB memcpy between cold pools, 2n minus n pages; and calibrate/read.toml's read(2) copies",
    },
    Unknown {
        name: "syscall",
        fields: &[("syscall", 1)],
        method: "user space: getppid(2) calls, 2n minus n: entry and exit alone; and calibrate/read.toml's 4 KiB against 128 KiB calls",
    },
    Unknown {
        name: "zram_compress",
        fields: &[("zram_compress", 1)],
        method: "the kernel's zram: O_DIRECT 4 KiB writes of runner-content pages minus of zero pages to raw zram0, 2n minus n slots, plus user space's same-filled scan of a hot page; and every swap-out phase",
    },
    Unknown {
        name: "zram_decompress",
        fields: &[("zram_decompress", 1)],
        method: "the kernel's zram: O_DIRECT 4 KiB reads of runner-content slots minus of same-filled slots, 2n minus n, plus user space's 4 KiB memset of a hot page; and every swap-in phase",
    },
];

/// Constants measured directly, outside the fit, with methods.
pub const DIRECT: &[(&str, &str)] = &[(
    "zram_stored_bytes",
    "the kernel's zram: mm_stat mem_used_total over pages stored after the zram bench's writes",
)];

/// Constants the many-CPU benches measure (smp.rs), outside the fit.
pub const SMP: &[(&str, &str)] = &[
    ("cacheline_transfer", "user space: two threads on two cores of one socket take turns incrementing a counter alone on its cache line; ns per increment, 2n minus n"),
    ("lock_handoff", "user space: a ticket spinlock taken in turn by two threads on two cores, its data on a second line, minus the same lock taken by one thread alone; ns per acquisition, 2n minus n"),
    ("ipi", "the kernel's IPIs: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which IPIs and waits for every other CPU running the process, with a thread of it spinning on another core minus with none; ns per call, 2n minus n"),
    ("ipi_handler", "the kernel's IPIs: a spin loop's extra time on the receiving core while the other sends membarrier IPIs, per IPI sent"),
    ("mem_bw_pair", "user space: a 4 KiB-page memcpy over pools 4x the LLC by one thread alone, and by two threads on two cores at once; the pair's per-thread bandwidth over the lone thread's, in thousandths (at most 1000)"),
    ("mem_bw", "user space: two threads on two cores of one socket each copy 4 KiB pages over their own pools 4x the LLC at once; the bytes both read plus wrote (STREAM's count) over the time until both are done, MB/s: the socket's bandwidth as two cores reach it"),
    ("memcg_rstat_flush", "the kernel's memcg rstat flush (mmsim-runner --rstat-bench, calibrate/rstat.toml): a process in a memory cgroup maps, writes and unmaps 512 pages, on one CPU or half on each of two, then reads memory.stat (which flushes) on the first; the median read after both CPUs' updates minus after the first CPU's: one more CPU's fold of the memcg, over 1000 repetitions"),
];

/// A many-CPU constant's value in one run, if the run measured it.
fn smp_value(field: &str, r: &RunData) -> Option<f64> {
    if field == "memcg_rstat_flush" {
        return r.rstat.as_ref().map(|b| b.fold_ns());
    }
    let v = r.smp.as_ref()?.values();
    Some(v.iter().find(|x| x.0 == field).expect("a bench value").1)
}

/// Repetitions of the rstat bench per run.
const RSTAT_REPS: u64 = 1000;

/// A many-CPU constant: the median of the runs that measured it, its
/// spread their range; cost_model.rs's value where none did.
fn smp_entry(field: &'static str, unit: &str, method: &str, runs: &[RunData]) -> CostEntry {
    let mut v: Vec<f64> = runs
        .iter()
        .filter_map(|r| smp_value(field, r))
        .map(|x| x.max(0.0))
        .collect();
    let round = |x: f64| x.round() as u64;
    if v.is_empty() {
        let reference = Costs::REFERENCE.get(field).expect("a field");
        return CostEntry {
            value: reference,
            unit: unit.to_string(),
            spread: [reference, reference],
            basis: Basis::Reference,
            method: format!("not measured: these runs have no many-CPU bench (one CPU, or recorded before calibrate had it); the development machine's value (cost_model.rs). Its method there: {method}"),
        };
    }
    v.sort_by(f64::total_cmp);
    let median = round(v[v.len() / 2]);
    CostEntry {
        value: median,
        unit: unit.to_string(),
        spread: [round(v[0]).min(median), round(v[v.len() - 1]).max(median)],
        basis: Basis::Measured,
        method: format!("{method}; the median of {} runs", v.len()),
    }
}

/// Not measured, and why.
pub const REFERENCE_ONLY: &[(&str, &str)] = &[
    ("split_tail", "not measured: ~10 µs per 512-page split against ~1 ms of its swap-out, below the noise; the runner forces THP off"),
    ("folio_tail", "not measured: 511 × 5 ns per THP against 512 clear_pages, below the noise; the runner forces THP off"),
    ("page_counter", "not measured: once per 64 charged pages, under 1 ns a page"),
    ("page_cache_add", "not measured: native runs have no disk for a page-cache file that is not shmem"),
    ("unuse_scan", "not measured: ~2 ns per PTE, below the noise of any swapoff phase"),
    ("kv_request", "not measured: redis-server's own work; the runner has none"),
    ("exec", "not measured: no runner step execs (spawn forks only)"),
    ("smt_throughput", "not measured: no SMT siblings on the machines calibrated; documented instead: a core's two threads deliver up to 1.30 times one thread's throughput on server benchmarks (Marr et al., Intel Technology Journal 6(1), 2002)"),
    ("cross_socket", "not measured: the machines calibrated have one socket; documented instead: a cache line bounced by compare-and-swap between two threads of a two-socket Intel Xeon Platinum 8375C (Ice Lake-SP, AWS c6i.metal) takes a median 108 ns across the sockets against 51 ns within one (nviennot's core-to-core-latency, github.com/nviennot/core-to-core-latency, README); the transfer's and the hand-off's cost between sockets, in thousandths of theirs within one"),
    ("kvm_exit", "not measured: KVM does not run on the machines calibrated (KVM guests without nested VMX); documented instead: kvm-unit-tests' vmcall test takes 1,529 cycles on a Skylake-SP server (Wanpeng Li, \"KVM: VMX: Micro-optimize vmexit time when not exposing PMU\", kvm@vger.kernel.org, March 2020), 612 ns at 2.5 GHz"),
    ("kvm_page_fault", "not measured: KVM does not run on the machines calibrated; documented instead: the least EPT_VIOLATION time perf kvm stat shows, 0.50 us (Andrea Arcangeli, \"Re: [PATCH 12/14] KVM: retpolines: x86: eliminate retpoline from vmx.c exit handlers\", kvm@vger.kernel.org, 15 October 2019; the CPU is not named): KVM's handling of a violation whose host page is there, the host's fault priced apart"),
    ("folio_referenced", "not measured: every stock path that scans the LRU also pays the reclaim's own per-page work (memcg_reclaim), which no path separates from it"),
    ("lru_move", "not measured: as folio_referenced, with which it is always charged"),
    ("swap_slot", "not measured: the slot's allocation on swap-out and shmem swap-in's fixed share are paid only beside each path's own residual (the swap-out bundle, shmem_swapin), which no stock path separates; the swap cache's insert and deletion are priced apart (swap_cache_add, swap_cache_del)"),
];

/// The calibration specs whose phases are equations of the fit
/// (calibrate/zram.toml only sizes the zram bench's device).
pub const SPECS: &[&str] = &[
    "cold_zero",
    "first_touch",
    "fork",
    "free_anon",
    "memcg_reclaim",
    "munmap_shmem",
    "pageout",
    "read",
    "shmem_swapin",
    "swap_cache",
    "swap_zap",
    "touch",
    "zero_read",
];

/// Calibration specs added after the first recordings: a run recorded
/// before one existed lacks its document, and its equations are left out
/// of that run's solve (as a phase added later is).
const ADDED_LATER: &[&str] = &["free_anon", "swap_cache", "swap_zap"];

/// The calibration specs.
pub fn spec_names() -> Vec<&'static str> {
    SPECS.to_vec()
}

pub(crate) fn spec_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.toml"))
}

/// Each timed phase's time in the simulator with `costs`.
fn sim_run(spec: &mmsim_spec::Spec, costs: Costs) -> Result<RunResult, String> {
    let opts = mmsim_sim::RunOptions {
        costs: mmsim_sim::machine_profile::CostProfile {
            costs,
            label: "calibrate".into(),
            cpu: None,
            compress: Default::default(),
            // The calibration specs stream sets far beyond an L2, and
            // their counts are of `Costs`' fields.
            l2: None,
        },
        ..Default::default()
    };
    mmsim_sim::run(spec, opts).map_err(|e| format!("{}: {e}", spec.file))
}

fn sim_times(spec: &mmsim_spec::Spec, costs: Costs) -> Result<BTreeMap<String, u64>, String> {
    Ok(phase_times(&sim_run(spec, costs)?))
}

/// The main task's timed phases: name → ns (`wait*` phases wait for
/// other tasks and are not kernel paths).
pub fn phase_times(r: &RunResult) -> BTreeMap<String, u64> {
    r.tasks
        .iter()
        .filter(|t| t.name == "main")
        .flat_map(|t| t.phases.iter())
        .filter(|p| !p.name.starts_with("wait"))
        .map(|p| (p.name.clone(), p.end_ns - p.start_ns))
        .collect()
}

/// How often each constant is charged in each phase of one spec:
/// phase → field → count.
pub type Counts = BTreeMap<String, BTreeMap<&'static str, f64>>;

/// The count matrix of one spec, by perturbation, and its run with the
/// `base` costs (counts do not depend on them where time is linear; the
/// check below proves it for these specs). Err if a phase's time is not
/// linear in the costs.
pub fn counts(spec: &mmsim_spec::Spec, base: Costs) -> Result<(Counts, RunResult), String> {
    let run = sim_run(spec, base)?;
    let t0 = phase_times(&run);
    let mut out: Counts = t0.keys().map(|p| (p.clone(), BTreeMap::new())).collect();
    for &(field, unit) in Costs::FIELDS {
        if unit != "ns" {
            continue;
        }
        let mut c = base;
        *c.get_mut(field).expect("a field") += DELTA;
        let t1 = sim_times(spec, c)?;
        for (phase, &t) in &t0 {
            // A count may be fractional (swap_slot's half at a swap
            // cache deletion); the sum below checks it is exact.
            let d = t1[phase] as i128 - t as i128;
            if d < 0 {
                return Err(format!(
                    "{}: phase {phase}: raising {field} by {DELTA} ns shortened it by {} ns",
                    spec.file, -d
                ));
            }
            if d != 0 {
                out.get_mut(phase)
                    .expect("phase")
                    .insert(field, d as f64 / DELTA as f64);
            }
        }
    }
    // Σ count · cost reproduces each phase's time exactly.
    for (phase, &t) in &t0 {
        let sum: f64 = out[phase]
            .iter()
            .map(|(f, n)| n * base.get(f).expect("a field") as f64)
            .sum();
        if sum != t as f64 {
            return Err(format!(
                "{}: phase {phase}: time is not linear in the costs: the counts give {sum} ns, the run {t} ns",
                spec.file
            ));
        }
    }
    Ok((out, run))
}

/// The share of unknown `u` that constant `field` is, if it is one of its.
fn share(u: &Unknown, field: &str) -> Option<f64> {
    let total: u64 = u.fields.iter().map(|f| f.1).sum();
    u.fields
        .iter()
        .find(|f| f.0 == field)
        .map(|f| f.1 as f64 / total as f64)
}

/// One equation's coefficients: how much of each unknown (one ns of the
/// bundle, split in its ratio) a phase charges, and what it charges of
/// the constants kept at their reference values, ns.
fn coefficients(counts: &BTreeMap<&'static str, f64>) -> (Vec<f64>, f64) {
    let mut a = vec![0.0; UNKNOWNS.len()];
    let mut known = 0.0;
    for (&f, &n) in counts {
        match UNKNOWNS.iter().position(|u| share(u, f).is_some()) {
            Some(j) => a[j] += n * share(&UNKNOWNS[j], f).expect("share"),
            None => known += n * Costs::REFERENCE.get(f).expect("a field") as f64,
        }
        for &inner in includes(f) {
            let j = unknown_of(inner);
            a[j] += n * share(&UNKNOWNS[j], inner).expect("share");
        }
    }
    (a, known)
}

/// Constants that contain others: an unmap includes its PTE clear and
/// TLB flush (`ptep_clear_flush`; a profile with unmap_one below pte +
/// tlb_flush is refused when loaded). The fit solves unmap_one as pte +
/// tlb_flush + its share of the swap_out bundle, so no fit can write a
/// profile that breaks it.
const INCLUDES: &[(&str, &[&str])] = &[("unmap_one", &["pte", "tlb_flush"])];

fn includes(field: &str) -> &'static [&'static str] {
    INCLUDES.iter().find(|i| i.0 == field).map_or(&[], |i| i.1)
}

/// The unknown a fitted constant belongs to.
fn unknown_of(field: &str) -> usize {
    UNKNOWNS
        .iter()
        .position(|u| share(u, field).is_some())
        .expect("a fitted constant")
}

/// The calibration equations: (spec, [(phase, weight)]). Each path is
/// timed at three sizes and enters as the two differences of consecutive
/// sizes, so a phase's fixed costs (the syscall, the VMA, the phase mark)
/// cancel and the two differences are two measurements of the same
/// per-page work; fork's and memcg reclaim's phases enter alone (fork's
/// fixed cost is the `fork` constant; memcg reclaim's fixed costs are
/// microseconds against its hundreds of milliseconds, while a difference
/// would add a phase's own run-to-run swings, up to 2× on this path).
pub const EQUATIONS: &[(&str, &[(&str, f64)])] = &[
    ("cold_zero", &[("b", 1.0), ("a", -1.0)]),
    ("cold_zero", &[("c", 1.0), ("b", -1.0)]),
    ("first_touch", &[("b", 1.0), ("a", -1.0)]),
    ("first_touch", &[("c", 1.0), ("b", -1.0)]),
    ("first_touch", &[("munmap_b", 1.0), ("munmap_a", -1.0)]),
    ("first_touch", &[("munmap_c", 1.0), ("munmap_b", -1.0)]),
    ("free_anon", &[("b", 1.0), ("a", -1.0)]),
    ("free_anon", &[("c", 1.0), ("b", -1.0)]),
    ("fork", &[("a", 1.0)]),
    ("fork", &[("b", 1.0)]),
    ("memcg_reclaim", &[("a", 1.0)]),
    ("memcg_reclaim", &[("b", 1.0)]),
    ("munmap_shmem", &[("b", 1.0), ("a", -1.0)]),
    ("munmap_shmem", &[("c", 1.0), ("b", -1.0)]),
    ("munmap_shmem", &[("touch_b", 1.0), ("touch_a", -1.0)]),
    ("munmap_shmem", &[("touch_c", 1.0), ("touch_b", -1.0)]),
    ("pageout", &[("out_b", 1.0), ("out_a", -1.0)]),
    ("pageout", &[("out_c", 1.0), ("out_b", -1.0)]),
    ("pageout", &[("in_b", 1.0), ("in_a", -1.0)]),
    ("pageout", &[("in_c", 1.0), ("in_b", -1.0)]),
    ("read", &[("read_128k_b", 1.0), ("read_128k_a", -1.0)]),
    ("read", &[("read_128k_c", 1.0), ("read_128k_b", -1.0)]),
    ("read", &[("read_4k_b", 1.0), ("read_4k_a", -1.0)]),
    ("read", &[("read_4k_c", 1.0), ("read_4k_b", -1.0)]),
    ("read", &[("mmap_b", 1.0), ("mmap_a", -1.0)]),
    ("read", &[("mmap_c", 1.0), ("mmap_b", -1.0)]),
    ("read", &[("write_128k_b", 1.0), ("write_128k_a", -1.0)]),
    ("read", &[("write_128k_c", 1.0), ("write_128k_b", -1.0)]),
    ("shmem_swapin", &[("b", 1.0), ("a", -1.0)]),
    ("shmem_swapin", &[("c", 1.0), ("b", -1.0)]),
    ("swap_cache", &[("one_b", 1.0), ("one_a", -1.0)]),
    ("swap_cache", &[("one_c", 1.0), ("one_b", -1.0)]),
    ("swap_cache", &[("in_b", 1.0), ("in_a", -1.0)]),
    ("swap_cache", &[("in_c", 1.0), ("in_b", -1.0)]),
    ("swap_cache", &[("del_b", 1.0), ("del_a", -1.0)]),
    ("swap_cache", &[("del_c", 1.0), ("del_b", -1.0)]),
    ("swap_cache", &[("free_b", 1.0), ("free_a", -1.0)]),
    ("swap_cache", &[("free_c", 1.0), ("free_b", -1.0)]),
    ("swap_zap", &[("zap_b", 1.0), ("zap_a", -1.0)]),
    ("swap_zap", &[("zap_c", 1.0), ("zap_b", -1.0)]),
    ("touch", &[("b", 1.0), ("a", -1.0)]),
    ("touch", &[("c", 1.0), ("b", -1.0)]),
    ("zero_read", &[("read_b", 1.0), ("read_a", -1.0)]),
    ("zero_read", &[("read_c", 1.0), ("read_b", -1.0)]),
    ("zero_read", &[("write_b", 1.0), ("write_a", -1.0)]),
    ("zero_read", &[("write_c", 1.0), ("write_b", -1.0)]),
];

/// Equations a later spec measures better: (equation, spec). A run that
/// holds the spec's document leaves the equation out; older runs keep it.
/// first_touch's munmaps crossed 6.18's per-CPU free-list growth (the
/// first few hundred MiB freed stop in the lists, later frees reach the
/// buddy allocator), so their two differences priced different paths;
/// free_anon holds the lists small, as 6.1's are.
const SUPERSEDED: &[(&str, &str)] = &[
    ("first_touch/munmap_b-munmap_a", "free_anon"),
    ("first_touch/munmap_c-munmap_b", "free_anon"),
];

fn superseded_by(equation: &str) -> Option<&'static str> {
    SUPERSEDED.iter().find(|s| s.0 == equation).map(|s| s.1)
}

/// The user-space and zram microbenchmarks, each one equation.
const BENCHES: &[&str] = &[
    "clear_page",
    "copy_page",
    "syscall",
    "zram_compress",
    "zram_decompress",
];

/// An equation's name: spec/phase or spec/phase-phase.
fn equation_name(spec: &str, terms: &[(&str, f64)]) -> String {
    let t: Vec<&str> = terms.iter().map(|t| t.0).collect();
    format!("{spec}/{}", t.join("-"))
}

/// Every equation of the fit, with each run's measurements (recordings
/// made before a size was added lack its phase: those equations are left
/// out of their solve).
pub fn rows(all: &BTreeMap<&'static str, Counts>, runs: &[RunData]) -> Vec<fit::Row> {
    let mut out = Vec::new();
    let times: Vec<BTreeMap<String, BTreeMap<String, u64>>> = runs
        .iter()
        .map(|r| {
            r.specs
                .iter()
                .map(|(n, d)| (n.clone(), phase_times(d)))
                .collect()
        })
        .collect();
    for &(spec, terms) in EQUATIONS {
        let name = equation_name(spec, terms);
        let mut counts: BTreeMap<&'static str, f64> = BTreeMap::new();
        for &(phase, w) in terms {
            let Some(c) = all.get(spec).and_then(|p| p.get(phase)) else {
                continue;
            };
            for (&f, &n) in c {
                *counts.entry(f).or_insert(0.0) += w * n;
            }
        }
        let (a, known) = coefficients(&counts);
        let later = superseded_by(&name);
        let runs = times
            .iter()
            .map(|t| {
                if later.is_some_and(|l| t.contains_key(l)) {
                    return None;
                }
                let p = t.get(spec)?;
                let mut s = fit::Sample {
                    value: 0.0,
                    spent: 0.0,
                };
                for &(phase, w) in terms {
                    let ns = *p.get(phase)? as f64;
                    s.value += w * ns;
                    s.spent += ns;
                }
                Some(s)
            })
            .collect();
        out.push(fit::Row {
            name,
            a,
            known,
            runs,
        });
    }
    for &bench in BENCHES {
        let (a, known) = coefficients(&BTreeMap::from([(bench, 1.0)]));
        out.push(fit::Row {
            name: format!("ubench/{bench}"),
            a,
            known,
            runs: runs.iter().map(|r| Some(bench_value(r, bench))).collect(),
        });
    }
    out
}

/// A microbenchmark's per-operation ns in one run, and the time the run
/// spent measuring it.
fn bench_value(r: &RunData, bench: &str) -> fit::Sample {
    let u: BTreeMap<&str, f64> = r.user.per_op().into_iter().collect();
    let (z, b) = (&r.zram, &r.user);
    let slope = |t: [u64; 2]| (t[1] as f64 - t[0] as f64) / z.pages as f64;
    let sum = |ts: &[[u64; 2]]| ts.iter().map(|t| (t[0] + t[1]) as f64).sum::<f64>();
    let (value, spent) = match bench {
        "zram_compress" => (
            slope(z.write_token_ns) - slope(z.write_zero_ns) + u["zero_scan"],
            sum(&[z.write_token_ns, z.write_zero_ns, b.zero_scan_ns]),
        ),
        "zram_decompress" => (
            slope(z.read_token_ns) - slope(z.read_zero_ns) + u["fill"],
            sum(&[z.read_token_ns, z.read_zero_ns, b.fill_ns]),
        ),
        "clear_page" => (u[bench], sum(&[b.clear_page_ns])),
        "copy_page" => (u[bench], sum(&[b.copy_page_ns])),
        _ => (u[bench], sum(&[b.syscall_ns])),
    };
    fit::Sample { value, spent }
}

/// zram's stored bytes per page, from the first run (a size, not a time:
/// outside the fit).
fn stored_bytes(runs: &[RunData]) -> f64 {
    runs.first().map_or(0.0, |r| {
        r.zram.pool_bytes as f64 / r.zram.token_pages as f64
    })
}

/// Every constant's value from the unknowns' values `x`.
fn values_of(x: &[f64], runs: &[RunData]) -> BTreeMap<&'static str, f64> {
    let mut values = BTreeMap::new();
    for (f, _) in REFERENCE_ONLY {
        values.insert(*f, Costs::REFERENCE.get(f).expect("a field") as f64);
    }
    values.insert("zram_stored_bytes", stored_bytes(runs));
    for (u, xj) in UNKNOWNS.iter().zip(x) {
        for &(f, _) in u.fields {
            values.insert(f, xj * share(u, f).expect("share"));
        }
    }
    for &(outer, inner) in INCLUDES {
        let extra: f64 = inner.iter().map(|f| values[f]).sum();
        *values.get_mut(outer).expect("a fitted constant") += extra;
    }
    values
}

/// One run's measurements.
pub struct RunData {
    pub user: ubench::UserBench,
    pub zram: ZramBench,
    /// The many-CPU benches (None: one CPU, or recorded before they
    /// existed).
    pub smp: Option<smp::SmpBench>,
    /// The memcg rstat flush bench (None: one CPU, or recorded before
    /// it existed).
    pub rstat: Option<RstatBench>,
    /// Calibration spec name → the native runner's document.
    pub specs: BTreeMap<String, RunResult>,
}

/// An unknown the data cannot tell from zero: the fit put it at zero in
/// at least this share of the bootstrap's resamples.
const UNRESOLVED_AT_ZERO: f64 = 0.025;

/// What the fit says of the runs: the profile's values and their
/// uncertainty, and the report a user reads.
pub struct Solved {
    pub values: BTreeMap<&'static str, f64>,
    /// Per constant: the low and high end of its uncertainty.
    pub spread: BTreeMap<&'static str, [f64; 2]>,
    /// Constants the data cannot tell from zero.
    pub unresolved: Vec<&'static str>,
    /// Constants no recorded run measures (kept at their reference).
    pub unmeasured: Vec<&'static str>,
    /// Each equation: measured (the runs' minimum), fitted.
    pub residuals: BTreeMap<String, (f64, f64)>,
}

/// Residuals whose homes were added after the first recordings: where a
/// set of runs lacks the home and so cannot separate one from the path
/// it shares (a slot's release from `swap_read`, before swap_zap), it is
/// held at its reference value and the path is solved as it was before
/// the residual existed.
const LATER_RESIDUALS: &[&str] = &[
    "shmem_write",
    "shmem_shared_fault",
    "swap_slot_free",
    "swap_cache_add",
    "swap_cache_del",
];

/// Per unknown, the value [`fit::solve_supported`] holds it at where the
/// runs cannot separate it: a later residual's reference value.
fn held_at_reference() -> Vec<Option<f64>> {
    UNKNOWNS
        .iter()
        .map(|u| {
            LATER_RESIDUALS
                .contains(&u.name)
                .then(|| Costs::REFERENCE.get(u.fields[0].0).expect("a field") as f64)
        })
        .collect()
}

/// The distinct calibration sessions among the runs', in order.
fn session_ids(sessions: &[String]) -> Vec<&String> {
    let mut ids: Vec<&String> = sessions.iter().collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Solves the runs: every value from every run (fit.rs), its uncertainty
/// the bootstrap's 95 % interval widened to take in each calibration
/// session solved alone (runs of one session move together with the
/// machine's state; only separate sessions show its drift) and, from
/// three sessions on, the 95 % prediction interval of another session's
/// value (fit::prediction_interval): what `--check` holds a new session
/// to.
pub fn solve_runs(
    all: &BTreeMap<&'static str, Counts>,
    runs: &[RunData],
    sessions: &[String],
) -> Solved {
    let rows = rows(all, runs);
    let n = UNKNOWNS.len();
    let hold = held_at_reference();
    let f = fit::fit(&rows, n, runs.len(), &hold);
    let mut lo = f.interval.iter().map(|i| i[0]).collect::<Vec<_>>();
    let mut hi = f.interval.iter().map(|i| i[1]).collect::<Vec<_>>();
    let ids = session_ids(sessions);
    if ids.len() > 1 {
        let alone: Vec<Vec<Option<f64>>> = ids
            .iter()
            .map(|id| {
                let own: Vec<usize> = (0..runs.len()).filter(|&i| sessions[i] == **id).collect();
                fit::solve_supported(&rows, n, &own, &hold)
            })
            .collect();
        for j in 0..n {
            // Only the sessions that measured it (older recordings may
            // lack a path added since).
            let xs: Vec<f64> = alone.iter().filter_map(|x| x[j]).collect();
            let pi = fit::prediction_interval(&xs);
            for x in xs.iter().copied().chain(pi.into_iter().flatten()) {
                lo[j] = lo[j].min(x);
                hi[j] = hi[j].max(x);
            }
        }
    }
    for j in 0..n {
        lo[j] = lo[j].min(f.value[j]);
        hi[j] = hi[j].max(f.value[j]);
    }
    let (vlo, vhi) = (values_of(&lo, runs), values_of(&hi, runs));
    let mut values = values_of(&f.value, runs);
    let mut spread: BTreeMap<&'static str, [f64; 2]> =
        values.keys().map(|&k| (k, [vlo[k], vhi[k]])).collect();
    // An unknown no recorded run prices (its phases were added after the
    // runs were recorded) keeps its reference value: not measured.
    let unmeasured: Vec<&'static str> = UNKNOWNS
        .iter()
        .zip(&f.measured)
        .filter(|(_, &m)| !m)
        .flat_map(|(u, _)| u.fields.iter().map(|f| f.0))
        .collect();
    for &f in &unmeasured {
        let r = Costs::REFERENCE.get(f).expect("a field") as f64;
        values.insert(f, r);
        spread.insert(f, [r, r]);
    }
    let unresolved = UNKNOWNS
        .iter()
        .zip(&f.at_zero)
        .filter(|(_, &z)| z >= UNRESOLVED_AT_ZERO)
        .flat_map(|(u, _)| u.fields.iter().map(|f| f.0))
        .filter(|f| !unmeasured.contains(f))
        .collect();
    Solved {
        values,
        spread,
        unresolved,
        unmeasured,
        residuals: fit::residuals(&rows, &f.value, runs.len()),
    }
}

/// The fit's report: each equation's measured and fitted time.
pub fn residual_table(s: &Solved) -> String {
    let mut out =
        String::from("equation                         measured       fitted   fitted/measured\n");
    for (name, (m, f)) in &s.residuals {
        out += &format!(
            "  {name:<30} {:>12.0} {:>12.0}   {:.3}\n",
            m,
            f,
            if *m != 0.0 { f / m } else { f64::NAN }
        );
    }
    out
}

/// The profile from the runs. A constant the data cannot tell from zero
/// is written with basis `bound`: its value is the fit's, its spread's
/// top the largest value the runs allow; calibrate never refuses because
/// noise crossed zero.
pub fn profile(
    all: &BTreeMap<&'static str, Counts>,
    runs: &[RunData],
    sessions: &[String],
    machine: MachineInfo,
    mut provenance: Provenance,
) -> Result<(MachineProfile, Solved), String> {
    provenance.sessions = session_ids(sessions).len() as u32;
    let s = solve_runs(all, runs, sessions);
    let mut cost = BTreeMap::new();
    for &(field, unit) in Costs::FIELDS {
        if let Some((_, m)) = SMP.iter().find(|r| r.0 == field) {
            cost.insert(field.to_string(), smp_entry(field, unit, m, runs));
            continue;
        }
        let (basis, method) = if let Some((_, m)) = REFERENCE_ONLY.iter().find(|r| r.0 == field) {
            (Basis::Reference, m.to_string())
        } else if let Some((_, m)) = DIRECT.iter().find(|r| r.0 == field) {
            (Basis::Measured, m.to_string())
        } else {
            let u = UNKNOWNS
                .iter()
                .find(|u| share(u, field).is_some())
                .expect("every field has a basis");
            // solve_runs holds an unmeasured constant at its reference.
            if s.unmeasured.contains(&field) {
                let method = format!(
                    "not measured: no recorded run has its phases (added after the runs were recorded), so the reference value; its home: {}",
                    u.method
                );
                (Basis::Reference, method)
            } else if s.unresolved.contains(&field) {
                (Basis::Bound, u.method.to_string())
            } else if u.fields.len() > 1 {
                (Basis::Bundle, u.method.to_string())
            } else {
                (Basis::Measured, u.method.to_string())
            }
        };
        let round = |x: f64| x.round().max(0.0) as u64;
        let [lo, hi] = s.spread[field];
        let value = round(s.values[field]);
        let method = if basis == Basis::Bound {
            format!(
                "{method} (not resolved from zero by these runs: at most {} {unit})",
                round(hi)
            )
        } else {
            method
        };
        cost.insert(
            field.to_string(),
            CostEntry {
                value,
                unit: unit.to_string(),
                spread: [round(lo).min(value), round(hi).max(value)],
                basis,
                method,
            },
        );
    }
    let mut machine = machine;
    if let Some((e, bytes, ways)) = copy_page_l2(runs) {
        cost.insert("copy_page_l2".into(), e);
        (machine.l2_bytes, machine.l2_ways) = (Some(bytes), Some(ways));
    }
    let p = MachineProfile {
        format: 1,
        machine,
        provenance,
        cost,
        checks: BTreeMap::new(),
        compress: Default::default(),
    };
    // What calibrate writes, a run can load.
    MachineProfile::parse(&p.to_toml())?;
    Ok((p, s))
}

/// `copy_page_l2` from the runs that measured it (ubench.rs), with the
/// L2's size and ways they recorded: the median, its spread the runs'
/// range. None if no run did (recorded before 2026-12-01, or no L2 in
/// sysfs): the profile then prices every copy as `copy_page`.
fn copy_page_l2(runs: &[RunData]) -> Option<(CostEntry, u64, u32)> {
    let measured: Vec<&ubench::UserBench> = runs
        .iter()
        .map(|r| &r.user)
        .filter(|u| mmsim_sim::machine_profile::l2_geometry_ok(u.l2_bytes, u.l2_ways))
        .filter(|u| u.copy_l2_ns.is_some())
        .collect();
    let first = measured.first()?;
    let mut v: Vec<f64> = measured
        .iter()
        .filter_map(|u| u.copy_l2_per_op())
        .map(|x| x.max(0.0))
        .collect();
    v.sort_by(f64::total_cmp);
    let round = |x: f64| x.round() as u64;
    let median = round(v[v.len() / 2]);
    let e = CostEntry {
        value: median,
        unit: "ns".into(),
        spread: [round(v[0]).min(median), round(v[v.len() - 1]).max(median)],
        basis: Basis::Measured,
        method: format!(
            "user space: 4 KiB memcpy into a hot page from a source set of half the L2 ({} KiB, {}-way, sysfs cache/index2), loaded by a first pass, 2n minus n copies; the median of {} runs",
            first.l2_bytes >> 10,
            first.l2_ways,
            v.len()
        ),
    };
    Some((e, first.l2_bytes, first.l2_ways as u32))
}

#[derive(clap::Args, Clone, Debug)]
pub struct CalibrateArgs {
    /// The folder of calibration specs.
    #[arg(long, default_value = "calibrate")]
    pub dir: PathBuf,
    /// Native runs; each value is solved from every timed quantity's
    /// minimum over them (docs/calibrate.md).
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Write the profile here (atomically; `-`: standard output).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also keep every run's measurements under DIR/run-N/ (a session
    /// added to those DIR holds; the profile is solved from them all, and
    /// from three sessions on its spreads say where another session's
    /// values will fall).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Solve from measurements recorded with --record instead of running
    /// anything natively.
    #[arg(long, value_name = "DIR", conflicts_with = "record")]
    pub from: Option<PathBuf>,
    /// Print the count matrix (which constants each calibration phase
    /// charges, from the simulator) and stop; needs no root.
    #[arg(long)]
    pub dry_run: bool,
    /// A static mmsim-runner (default: $MMSIM_RUNNER, else built).
    #[arg(long)]
    pub runner: Option<PathBuf>,
    /// Compare the values with this profile's spreads instead of writing
    /// a profile (exit 1 if any lies outside): a new session checked
    /// against a profile of three sessions or more.
    #[arg(long, value_name = "PROFILE", conflicts_with = "output")]
    pub check: Option<PathBuf>,
    /// Measure only zram's compressors on every page content (natively,
    /// --runs times) and write PROFILE again with its `compress` table
    /// measured (to -o if given); --record and --from keep and reuse the
    /// runs under DIR/zram-content/.
    #[arg(long, value_name = "PROFILE", conflicts_with = "check")]
    pub zram_content: Option<PathBuf>,
}

/// The simulator's side of every calibration spec: count matrices, and
/// the runs with the reference costs (for the counter guard).
pub type SimSide = (
    BTreeMap<&'static str, Counts>,
    BTreeMap<&'static str, RunResult>,
);

/// The paths of the kernel the runs were recorded on, where they differ
/// from the 6.1 model's and a calibration spec walks them: the simulator
/// prices what that kernel ran, not what 6.1 would have.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostKernel {
    /// 6.14's shmem swap-in past the swap cache from a synchronous device
    /// (seed 001's mechanism, `features.shmem_skip_swapcache`):
    /// calibrate/shmem_swapin.toml's faults read each page that way there,
    /// without the swap cache's insert and deletion that 6.1 pays.
    pub shmem_skip_swapcache: bool,
    /// 6.8's memcg rstat flush (`features.memcg_rstat_per_memcg`): a
    /// threshold per memcg, and reclaim that flushes only when the
    /// 2-second worker is late, so the memcg reclaim phases pay no flush
    /// where 6.1's do.
    pub memcg_rstat_per_memcg: bool,
}

impl HostKernel {
    /// From a release string as uname(2) gives it (`6.18.44-fc-v595`);
    /// one that does not parse is taken as 6.1.
    pub fn from_release(release: &str) -> Self {
        let v = mmsim_oracle::version_key(release);
        HostKernel {
            shmem_skip_swapcache: v.as_slice() >= &[6, 14][..],
            memcg_rstat_per_memcg: v.as_slice() >= &[6, 8][..],
        }
    }

    /// The running kernel's (for `--dry-run`, which has no runs).
    pub fn running() -> Self {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        Self::from_release(release.trim())
    }

    /// The spec as this kernel runs it: the later mechanisms it has, on.
    pub(crate) fn apply(self, spec: &mut mmsim_spec::Spec) {
        spec.features.shmem_skip_swapcache |= self.shmem_skip_swapcache;
        spec.features.memcg_rstat_per_memcg |= self.memcg_rstat_per_memcg;
    }
}

/// Every calibration spec's count matrix and reference run, the
/// simulator walking `host`'s paths.
pub fn all_counts(dir: &Path, host: HostKernel) -> Result<SimSide, String> {
    let (mut all, mut runs) = (BTreeMap::new(), BTreeMap::new());
    for name in spec_names() {
        let path = spec_path(dir, name);
        let mut spec = mmsim_spec::load(&path, &[]).map_err(|e| e.to_string())?;
        host.apply(&mut spec);
        let (c, run) = counts(&spec, Costs::REFERENCE)?;
        all.insert(name, c);
        runs.insert(name, run);
    }
    Ok((all, runs))
}

fn print_dry_run(all: &BTreeMap<&'static str, Counts>) {
    println!("count matrix: how much of each unknown every equation charges");
    for row in rows(all, &[]) {
        let parts: Vec<String> = UNKNOWNS
            .iter()
            .zip(&row.a)
            .filter(|(_, n)| **n != 0.0)
            .map(|(u, n)| format!("{} {n}", u.name))
            .collect();
        println!("  {:<30} {}", row.name, parts.join(", "));
        println!("  {:<30} reference constants {} ns", "", row.known);
    }
}

pub fn calibrate_cmd(a: &CalibrateArgs) -> ExitCode {
    if a.runs == 0 {
        eprintln!("mmsim calibrate: --runs: found 0, expected at least 1");
        return ExitCode::from(2);
    }
    match calibrate(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, e)) => {
            eprintln!("mmsim calibrate: {e}");
            ExitCode::from(code)
        }
    }
}

fn calibrate(a: &CalibrateArgs) -> Result<(), (u8, String)> {
    if let Some(profile) = &a.zram_content {
        return crate::calibrate_content::calibrate_content(a, profile);
    }
    if a.dry_run {
        let (all, _) = all_counts(&a.dir, HostKernel::running()).map_err(|e| (2, e))?;
        print_dry_run(&all);
        return Ok(());
    }
    // The specs are checked before any native run is spent on them.
    let checked = match a.from {
        None => {
            let host = HostKernel::running();
            Some((host, all_counts(&a.dir, host).map_err(|e| (2, e))?))
        }
        Some(_) => None,
    };
    let (runs, machine) = match (&a.from, &a.record) {
        (Some(d), _) => load_recorded(d).map_err(|e| (2, e))?,
        // Recorded: solve from every session the folder holds.
        (None, Some(d)) => {
            measure(a)?;
            load_recorded(d).map_err(|e| (1, e))?
        }
        (None, None) => measure(a)?,
    };
    let host = HostKernel::from_release(&machine.kernel);
    let (all, sim_runs) = match checked {
        Some((h, side)) if h == host => side,
        _ => all_counts(&a.dir, host).map_err(|e| (2, e))?,
    };
    for w in guard(&sim_runs, &runs) {
        eprintln!("mmsim calibrate: counters differ: {w}");
    }
    let sessions: Vec<String> = runs.iter().map(session_of).collect();
    let provenance = Provenance {
        // The command that made the profile, as it was typed.
        command: std::iter::once("mmsim".to_string())
            .chain(std::env::args().skip(1))
            .collect::<Vec<_>>()
            .join(" "),
        mmsim: env!("CARGO_PKG_VERSION").into(),
        date: recorded_date(&runs),
        runs: runs.len() as u32,
        sessions: 0, // counted by profile()
    };
    let (mut p, solved) =
        profile(&all, &runs, &sessions, machine, provenance).map_err(|e| (1, e))?;
    if let Some(dir) = a.from.as_ref().or(a.record.as_ref()) {
        p.compress = crate::calibrate_content::table_from(dir, &p)?;
    }
    eprint!(
        "mmsim calibrate: the fit, each equation measured (the runs' minimum, ns) and fitted:\n{}",
        residual_table(&solved)
    );
    for f in &solved.unresolved {
        eprintln!(
            "mmsim calibrate: {f}: not resolved from zero by these runs (at most {:.0} ns); written with basis \"bound\"",
            solved.spread[f][1]
        );
    }
    if let Some(old) = &a.check {
        return check_against(&p, old);
    }
    if (p.provenance.sessions as usize) < fit::MIN_SESSIONS {
        eprintln!(
            "mmsim calibrate: {} session(s): each spread says how far these runs move, not where another \
             session's value will fall; record at least {} (`--record DIR`, minutes apart)",
            p.provenance.sessions,
            fit::MIN_SESSIONS
        );
    }
    let text = p.to_toml();
    match &a.output {
        Some(o) if o != Path::new("-") => crate::write_atomically(o, text.trim_end().as_bytes())
            .map_err(|e| (1, format!("cannot write {}: {e}", o.display())))?,
        _ => print!("{text}"),
    }
    Ok(())
}

/// `--check OLD`: each measured or bundle value of `new` beside OLD's
/// value and spread; Err (exit 1) if any lies outside OLD's spread.
fn check_against(new: &MachineProfile, old: &Path) -> Result<(), (u8, String)> {
    let text = std::fs::read_to_string(old).map_err(|e| (2, format!("{}: {e}", old.display())))?;
    let old_p = MachineProfile::parse(&text).map_err(|e| (2, format!("{}: {e}", old.display())))?;
    let mut out = Vec::new();
    println!(
        "constant           {:>10} {:>10}  its spread",
        "profile", "now"
    );
    for (name, e) in &new.cost {
        let Some(o) = old_p.cost.get(name).filter(|_| e.basis != Basis::Reference) else {
            continue;
        };
        let inside = (o.spread[0]..=o.spread[1]).contains(&e.value);
        println!(
            "{name:<18} {:>10} {:>10}  [{}, {}]{}",
            o.value,
            e.value,
            o.spread[0],
            o.spread[1],
            if inside { "" } else { "  outside" }
        );
        if !inside {
            out.push(name.clone());
        }
    }
    if out.is_empty() {
        return Ok(());
    }
    Err((
        1,
        format!("outside {}'s spread: {}", old.display(), out.join(", ")),
    ))
}

/// The date of the last recording (calibrate adds it to the runner's
/// documents as `native:date`).
fn recorded_date(runs: &[RunData]) -> String {
    runs.last()
        .and_then(|r| r.specs.values().next())
        .and_then(|d| d.knobs.get("native:date").cloned())
        .unwrap_or_default()
}

/// The calibration session a run belongs to: its start, UTC, which
/// calibrate adds to the runner's documents as `native:session`.
fn session_of(r: &RunData) -> String {
    r.specs
        .values()
        .next()
        .and_then(|d| d.knobs.get("native:session").cloned())
        .unwrap_or_default()
}

/// Counters a calibration phase's native run and the simulator must
/// agree on: if they do not, the kernel took another path than the model
/// and the phase's time prices that path.
const GUARDED: &[&str] = &[
    "pgfault",
    "pgmajfault",
    "pswpin",
    "pswpout",
    "pgscan_anon",
    "pgsteal_anon",
];

/// Counters the guard does not compare on a calibration spec, and why:
/// what the kernel counts there is the runner's own work, not the path
/// the phase prices.
pub const GUARD_EXCLUDED: &[(&str, &str, &str)] = &[(
    "fork",
    "pgfault",
    "the parent runner's own copy-on-write faults after each fork (its stack, heap and the reader thread's, about 75 a fork on 6.18): fixed per fork, so they land in the fork constant, which is what the phase prices",
)];

/// Where the first run's counters differ from the simulator's (`sim`,
/// the count matrices' reference runs: these single-task specs count the
/// same with any costs) by more than 1% (and 64 events): one line each.
pub fn guard(sim: &BTreeMap<&str, RunResult>, runs: &[RunData]) -> Vec<String> {
    let mut out = Vec::new();
    let Some(first) = runs.first() else {
        return out;
    };
    for (&name, sim) in sim {
        let Some(real) = first.specs.get(name) else {
            continue;
        };
        let main = |r: &RunResult| r.tasks.iter().find(|t| t.name == "main").cloned();
        let (Some(st), Some(rt)) = (main(sim), main(real)) else {
            continue;
        };
        for rp in &rt.phases {
            // By name: recordings made before a size was added lack its
            // phase.
            let Some(sp) = st.phases.iter().find(|p| p.name == rp.name) else {
                continue;
            };
            // A phase no equation reads prices nothing (swap_cache's fork,
            // with the runner's own copy-on-write faults after it).
            let fitted = EQUATIONS
                .iter()
                .any(|(s, terms)| *s == name && terms.iter().any(|t| t.0 == rp.name));
            if !fitted {
                continue;
            }
            for &k in GUARDED {
                if GUARD_EXCLUDED.iter().any(|e| e.0 == name && e.1 == k) {
                    continue;
                }
                let (a, b) = (
                    rp.vmstat.get(k).copied().unwrap_or(0),
                    sp.vmstat.get(k).copied().unwrap_or(0),
                );
                if a.abs_diff(b) as f64 > (0.01 * a.max(b) as f64).max(64.0) {
                    out.push(format!(
                        "calibrate/{name}.toml phase {}: {k} real {a}, simulated {b}",
                        rp.name
                    ));
                }
            }
        }
    }
    out
}

/// The runner's memcg rstat flush bench in calibrate/rstat.toml's cgroup.
fn rstat_bench(runner: &Path, dir: &Path) -> Result<RstatBench, (u8, String)> {
    let text = mmsim_oracle::native::rstat_bench(runner, &spec_path(dir, "rstat"), RSTAT_REPS)
        .map_err(|e| (1, e.to_string()))?
        .map_err(|refusal| (2, refusal))?;
    serde_json::from_str(&text).map_err(|e| (1, format!("the rstat bench's document: {e}")))
}

/// Runs everything natively, `a.runs` times, recording if asked. Err
/// carries the exit status: 2 when the runner refused (not root, swap on).
fn measure(a: &CalibrateArgs) -> Result<(Vec<RunData>, MachineInfo), (u8, String)> {
    let runner = mmsim_oracle::runner_path(a.runner.clone()).map_err(|e| (2, e.to_string()))?;
    let mut out = Vec::new();
    let date = date_now("+%Y-%m-%d");
    let session = date_now("+%Y-%m-%dT%H:%M:%SZ");
    // A session adds to runs recorded before (run-N numbering goes on).
    let first = a.record.as_deref().map_or(0, recorded_runs);
    for run in 0..a.runs {
        eprintln!("mmsim calibrate: run {} of {}", run + 1, a.runs);
        let user = ubench::run().map_err(|e| (1, e))?;
        let smp = smp::run().map_err(|e| (1, e))?;
        let rstat = match smp.is_some() {
            true => Some(rstat_bench(&runner, &a.dir)?),
            false => None,
        };
        let zram_text = mmsim_oracle::native::zram_bench(
            &runner,
            &spec_path(&a.dir, "zram"),
            ZRAM_BENCH_PAGES,
            false,
        )
        .map_err(|e| (1, e.to_string()))?
        .map_err(|refusal| (2, refusal))?;
        let zram: ZramBench = serde_json::from_str(&zram_text)
            .map_err(|e| (1, format!("the zram bench's document: {e}")))?;
        let mut specs = BTreeMap::new();
        for name in spec_names() {
            let path = spec_path(&a.dir, name);
            match mmsim_oracle::native::run_once(&runner, &path, &[])
                .map_err(|e| (1, e.to_string()))?
            {
                mmsim_oracle::native::Outcome::Done(mut doc) => {
                    doc.knobs.insert("native:date".into(), date.clone());
                    doc.knobs.insert("native:session".into(), session.clone());
                    specs.insert(name.to_string(), *doc);
                }
                mmsim_oracle::native::Outcome::Refused(e) => return Err((2, e)),
            }
        }
        let r = RunData {
            user,
            zram,
            smp,
            rstat,
            specs,
        };
        if let Some(dir) = &a.record {
            record(dir, first + run, &r).map_err(|e| (1, e))?;
        }
        out.push(r);
    }
    let machine = machine_of(&out);
    Ok((out, machine))
}

fn machine_of(runs: &[RunData]) -> MachineInfo {
    let doc = runs.first().and_then(|r| r.specs.values().next());
    MachineInfo {
        cpu: doc
            .and_then(|d| d.knobs.get("native:cpu").cloned())
            .unwrap_or_default(),
        cpus: doc.map_or(0, |d| d.machine.cpus),
        kernel: doc.map(|d| d.engine.version.clone()).unwrap_or_default(),
        // profile() adds the L2 where the runs measured copy_page_l2.
        l2_bytes: None,
        l2_ways: None,
    }
}

/// How many runs `--record DIR` already holds.
fn recorded_runs(dir: &Path) -> usize {
    (0..)
        .take_while(|n| dir.join(format!("run-{n}")).is_dir())
        .count()
}

/// The time now in date(1)'s `format`, UTC.
pub(crate) fn date_now(format: &str) -> String {
    std::process::Command::new("date")
        .args(["-u", format])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Writes one run's documents under DIR/run-N/.
fn record(dir: &Path, run: usize, r: &RunData) -> Result<(), String> {
    let d = dir.join(format!("run-{run}"));
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    let w = |name: String, text: String| {
        crate::write_atomically(&d.join(&name), text.as_bytes())
            .map_err(|e| format!("{}: {e}", d.join(name).display()))
    };
    w(
        "user.json".into(),
        serde_json::to_string_pretty(&r.user).expect("serialises"),
    )?;
    w(
        "zram.json".into(),
        serde_json::to_string_pretty(&r.zram).expect("serialises"),
    )?;
    if let Some(smp) = &r.smp {
        w(
            "smp.json".into(),
            serde_json::to_string_pretty(smp).expect("serialises"),
        )?;
    }
    if let Some(rstat) = &r.rstat {
        w(
            "rstat.json".into(),
            serde_json::to_string_pretty(rstat).expect("serialises"),
        )?;
    }
    for (name, doc) in &r.specs {
        w(
            format!("{name}.json"),
            serde_json::to_string_pretty(doc).expect("serialises"),
        )?;
    }
    Ok(())
}

/// Reads runs recorded by `--record DIR`.
pub fn load_recorded(dir: &Path) -> Result<(Vec<RunData>, MachineInfo), String> {
    let read = |p: PathBuf| -> Result<String, String> {
        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let mut out = Vec::new();
    for run in 0.. {
        let d = dir.join(format!("run-{run}"));
        if !d.is_dir() {
            break;
        }
        let parse_err = |f: &str, e: serde_json::Error| format!("{}/{f}: {e}", d.display());
        let user = serde_json::from_str(&read(d.join("user.json"))?)
            .map_err(|e| parse_err("user.json", e))?;
        let zram = serde_json::from_str(&read(d.join("zram.json"))?)
            .map_err(|e| parse_err("zram.json", e))?;
        let mut specs = BTreeMap::new();
        for name in spec_names() {
            let f = format!("{name}.json");
            if ADDED_LATER.contains(&name) && !d.join(&f).exists() {
                continue;
            }
            let doc: RunResult =
                serde_json::from_str(&read(d.join(&f))?).map_err(|e| parse_err(&f, e))?;
            specs.insert(name.to_string(), doc);
        }
        // Runs recorded before the many-CPU benches have no smp.json.
        let smp = match read(d.join("smp.json")) {
            Ok(text) => Some(serde_json::from_str(&text).map_err(|e| parse_err("smp.json", e))?),
            Err(_) => None,
        };
        // And those before the rstat bench no rstat.json.
        let rstat = match read(d.join("rstat.json")) {
            Ok(text) => Some(serde_json::from_str(&text).map_err(|e| parse_err("rstat.json", e))?),
            Err(_) => None,
        };
        out.push(RunData {
            user,
            zram,
            smp,
            rstat,
            specs,
        });
    }
    if out.is_empty() {
        return Err(format!("{}: no recorded runs (run-0/ …)", dir.display()));
    }
    let machine = machine_of(&out);
    Ok((out, machine))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibrate_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../calibrate")
    }

    /// The count matrices of the committed specs as a 6.18 kernel walks
    /// them (the recorded runs' kernel), computed once for the tests.
    fn counts_618() -> BTreeMap<&'static str, Counts> {
        sim_side_618().0
    }

    /// The simulator's side of the committed specs on 6.18, computed once.
    fn sim_side_618() -> SimSide {
        static SIDE: std::sync::OnceLock<SimSide> = std::sync::OnceLock::new();
        SIDE.get_or_init(|| {
            all_counts(
                &calibrate_dir(),
                HostKernel::from_release("6.18.44-fc-v595"),
            )
            .unwrap()
        })
        .clone()
    }

    /// The counter guard compares the phases the equations read, and
    /// reports a difference there; a phase no equation reads (swap_cache's
    /// fork, where the runner's own copy-on-write faults land) is not
    /// compared.
    #[test]
    fn the_counter_guard_reads_the_fitted_phases_only() {
        let (_, sim) = sim_side_618();
        let mut runs = vec![simulated_run(truth(), 1.0)];
        assert_eq!(guard(&sim, &runs), Vec::<String>::new());
        let bump = |runs: &mut Vec<RunData>, phase: &str, k: &str, by: i64| {
            let doc = runs[0].specs.get_mut("swap_cache").expect("swap_cache");
            let main = doc
                .tasks
                .iter_mut()
                .find(|t| t.name == "main")
                .expect("main");
            let p = main
                .phases
                .iter_mut()
                .find(|p| p.name == phase)
                .expect(phase);
            *p.vmstat.entry(k.to_string()).or_insert(0) += by;
        };
        bump(&mut runs, "fork", "pgfault", 82);
        assert_eq!(guard(&sim, &runs), Vec::<String>::new());
        bump(&mut runs, "in_b", "pgmajfault", 4096);
        let w = guard(&sim, &runs);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("swap_cache.toml phase in_b: pgmajfault"),
            "{w:?}"
        );
    }

    /// Calibration spec `name`'s counts as 6.18 and as 6.1 walk it.
    fn counts_618_and_61(name: &str) -> (Counts, Counts) {
        let spec = |release: &str| {
            let mut s = mmsim_spec::load(&spec_path(&calibrate_dir(), name), &[]).unwrap();
            HostKernel::from_release(release).apply(&mut s);
            counts(&s, Costs::REFERENCE).unwrap().0
        };
        (spec("6.18"), spec("6.1"))
    }

    /// The recorded kernel's release decides which memcg statistics flush
    /// the simulator prices: 6.8 on flushes in reclaim only when the
    /// 2-second worker is late, so memcg_reclaim's phases price no flush
    /// on 6.18, where 6.1's flush every 64 × (CPUs + 1) updates.
    #[test]
    fn the_recorded_kernel_decides_whether_reclaim_flushes_memcg_statistics() {
        assert!(HostKernel::from_release("6.18.44-fc-v595").memcg_rstat_per_memcg);
        assert!(HostKernel::from_release("6.8.0").memcg_rstat_per_memcg);
        assert!(!HostKernel::from_release("6.7.12").memcg_rstat_per_memcg);
        assert!(!HostKernel::from_release("6.1.0-56-amd64").memcg_rstat_per_memcg);
        let (new, old) = counts_618_and_61("memcg_reclaim");
        for phase in ["a", "b"] {
            let flushes = |c: &Counts| c[phase].get("memcg_rstat_flush").copied().unwrap_or(0.0);
            assert_eq!(flushes(&new), 0.0, "{phase}");
            assert!(flushes(&old) > 0.0, "{phase}");
            assert!(new[phase]["memcg_reclaim"] > 0.0, "{phase}");
        }
    }

    /// The recorded kernel's release decides the shmem swap-in path the
    /// simulator prices: 6.14 on skips the swap cache from zram, so
    /// shmem_swapin's phases pay no insert or deletion there, as 6.1's do.
    #[test]
    fn the_recorded_kernel_decides_which_shmem_swapin_path_is_priced() {
        assert!(HostKernel::from_release("6.18.44-fc-v595").shmem_skip_swapcache);
        assert!(HostKernel::from_release("6.14.0").shmem_skip_swapcache);
        assert!(!HostKernel::from_release("6.13.12-amd64").shmem_skip_swapcache);
        assert!(!HostKernel::from_release("6.1.0-56-amd64").shmem_skip_swapcache);
        assert!(!HostKernel::from_release("").shmem_skip_swapcache);
        let (new, old) = counts_618_and_61("shmem_swapin");
        for phase in ["a", "b", "c"] {
            assert_eq!(new[phase].get("swap_cache_add"), None, "{phase}");
            assert_eq!(new[phase].get("swap_cache_del"), None, "{phase}");
            assert!(old[phase]["swap_cache_add"] > 0.0, "{phase}");
            assert!(old[phase]["swap_cache_del"] > 0.0, "{phase}");
            assert_eq!(new[phase]["shmem_swapin"], old[phase]["shmem_swapin"]);
        }
    }

    /// One "run" of the calibration made by the simulator itself with
    /// the costs `truth` (the zram bench and user space priced from them).
    /// A slower run (`jitter` > 1) is slower in everything it times, as
    /// a vCPU that loses time to its host is.
    fn simulated_run(truth: Costs, jitter: f64) -> RunData {
        let n = 1000;
        let t = |c: u64| {
            let one = n as f64 * c as f64 * jitter;
            [one as u64, (2.0 * one) as u64]
        };
        let (bio, scan, fill) = (1500, 250, 70);
        let user = ubench::UserBench {
            llc_bytes: 0,
            pool_pages: n,
            clear_page_ns: t(truth.clear_page),
            copy_page_ns: t(truth.copy_page),
            hot_reps: n,
            zero_scan_ns: t(scan),
            fill_ns: t(fill),
            syscall_ns: t(truth.syscall),
            l2_bytes: 0,
            l2_ways: 0,
            copy_l2_ns: None,
        };
        let zram = ZramBench {
            comp_algorithm: "lzo-rle".into(),
            pages: n,
            write_token_ns: t(bio + truth.zram_compress),
            write_zero_ns: t(bio + scan),
            read_token_ns: t(bio + truth.zram_decompress),
            read_zero_ns: t(bio + fill),
            pool_bytes: 68 * 3 * n,
            token_pages: 3 * n,
        };
        let mut specs = BTreeMap::new();
        for name in spec_names() {
            let mut spec = mmsim_spec::load(&spec_path(&calibrate_dir(), name), &[]).unwrap();
            HostKernel::from_release("6.18.44-fc-v595").apply(&mut spec);
            let mut run = sim_run(&spec, truth).unwrap();
            for t in &mut run.tasks {
                for p in &mut t.phases {
                    let d = (p.end_ns - p.start_ns) as f64 * jitter;
                    p.end_ns = p.start_ns + d as u64;
                }
            }
            specs.insert(name.to_string(), run);
        }
        RunData {
            user,
            zram,
            smp: None,
            rstat: None,
            specs,
        }
    }

    /// Every solved constant doubled from its reference value (bundles
    /// keep their ratio; a zero one set to 100), the rest at reference;
    /// unmap_one is its PTE flush plus its share of the bundle.
    fn truth() -> Costs {
        let mut truth = Costs::REFERENCE;
        for u in UNKNOWNS {
            for &(f, _) in u.fields {
                let v = truth.get_mut(f).unwrap();
                *v = if *v == 0 { 100 } else { *v * 2 };
            }
        }
        truth.shrink_folio = 100;
        truth.unmap_one = truth.pte + truth.tlb_flush + 500;
        truth
    }

    /// The profile of simulated runs, with no machine or provenance.
    fn profile_of(
        all: &BTreeMap<&'static str, Counts>,
        runs: &[RunData],
        sessions: &[String],
    ) -> (MachineProfile, Solved) {
        profile(
            all,
            runs,
            sessions,
            MachineInfo::default(),
            Provenance::default(),
        )
        .unwrap()
    }

    /// However the runs fall, the fit cannot write an unmap cheaper than
    /// the PTE clear and TLB flush it includes (a profile mmsim would
    /// refuse to load).
    #[test]
    fn an_unmap_always_includes_its_pte_flush() {
        let x: Vec<f64> = UNKNOWNS
            .iter()
            .map(|u| if u.name == "swap_out" { 0.0 } else { 50.0 })
            .collect();
        let v = values_of(&x, &[]);
        assert_eq!(v["unmap_one"], v["pte"] + v["tlb_flush"]);
        let (a, _) = coefficients(&BTreeMap::from([("unmap_one", 1.0)]));
        assert_eq!(a[unknown_of("pte")], 1.0);
        assert_eq!(a[unknown_of("tlb_flush")], 1.0);
    }

    /// Calibrating against the simulator itself, run with known costs,
    /// recovers those costs: the equations, the counts and the fit are
    /// consistent, and every unknown is resolved.
    #[test]
    fn calibrating_the_simulator_recovers_its_costs() {
        let all = counts_618();
        let truth = truth();
        // Runs slower by up to 3 % (interference only adds time): the
        // minimum, the first run, is the truth.
        let runs: Vec<RunData> = [1.0, 1.03, 1.01]
            .iter()
            .map(|&j| simulated_run(truth, j))
            .collect();
        let sessions = vec![String::new(); runs.len()];
        let s = solve_runs(&all, &runs, &sessions);
        assert!(s.unresolved.is_empty(), "{:?}", s.unresolved);
        for &(f, unit) in Costs::FIELDS {
            // The many-CPU constants are measured outside the fit.
            if unit != "ns" || SMP.iter().any(|d| d.0 == f) {
                continue;
            }
            let want = truth.get(f).unwrap() as f64;
            let got = s.values[f];
            // The phase times are whole ns: a fraction of a ns per page.
            assert!(
                (got - want).abs() < 0.5 + 1e-3 * want,
                "{f}: {got} for {want}"
            );
            let [lo, hi] = s.spread[f];
            assert!(lo <= got && got <= hi, "{f}: {got} outside [{lo}, {hi}]");
        }
        for (name, (m, f)) in &s.residuals {
            assert!(
                (f / m - 1.0).abs() < 1e-3,
                "{name}: measured {m}, fitted {f}"
            );
        }
    }

    /// A phase that says its path is cheaper than the constants it is
    /// known to pay no longer stops calibrate: the unknown it alone
    /// prices is held at zero, flagged, and written with basis "bound".
    #[test]
    fn a_path_cheaper_than_its_constants_is_flagged_not_refused() {
        let all = counts_618();
        let truth = truth();
        let mut runs: Vec<RunData> = [1.0, 1.02]
            .iter()
            .map(|&j| simulated_run(truth, j))
            .collect();
        // shmem_swapin's phases alone price shmem_swapin: take 10 % off
        // them, far more than shmem_swapin's share.
        for r in &mut runs {
            for t in &mut r.specs.get_mut("shmem_swapin").unwrap().tasks {
                for p in &mut t.phases {
                    p.end_ns = p.start_ns + (p.end_ns - p.start_ns) * 9 / 10;
                }
            }
        }
        let sessions = vec![String::new(); runs.len()];
        let (p, s) = profile_of(&all, &runs, &sessions);
        assert!(s.unresolved.contains(&"shmem_swapin"), "{:?}", s.unresolved);
        let e = &p.cost["shmem_swapin"];
        assert_eq!(e.basis, Basis::Bound);
        assert_eq!(e.value, 0);
        assert!(e.method.contains("not resolved from zero"), "{}", e.method);
        // The constants priced elsewhere are still recovered.
        assert_eq!(p.cost["touch"].value, truth.touch);
    }

    /// `copy_page_l2` is the median of the runs that measured it, with
    /// the L2 they recorded; runs recorded before it leave it out, and
    /// the profile then has no L2 model.
    #[test]
    fn copy_page_l2_is_the_median_of_the_runs_that_measured_it() {
        let all = counts_618();
        let truth = truth();
        let l2 = |ns: u64| {
            let mut r = simulated_run(truth, 1.0);
            r.user.l2_bytes = 2 << 20;
            r.user.l2_ways = 16;
            r.user.copy_l2_ns = Some([1_000_000, 1_000_000 + ns * r.user.hot_reps]);
            r
        };
        let sessions: Vec<String> = ["a", "b", "c", "c"].map(String::from).to_vec();
        let old = [simulated_run(truth, 1.0), simulated_run(truth, 1.0)];
        let (p, _) = profile_of(&all, &old, &sessions[..2]);
        assert_eq!(p.l2(), None);
        assert!(!p.cost.contains_key("copy_page_l2"));
        let runs = [simulated_run(truth, 1.0), l2(47), l2(74), l2(68)];
        let (p, _) = profile_of(&all, &runs, &sessions);
        let e = &p.cost["copy_page_l2"];
        assert_eq!(
            (e.value, e.spread, e.basis),
            (68, [47, 74], Basis::Measured)
        );
        assert!(
            e.method.contains("2048 KiB, 16-way") && e.method.contains("3 runs"),
            "{}",
            e.method
        );
        assert_eq!(
            (p.machine.l2_bytes, p.machine.l2_ways),
            (Some(2 << 20), Some(16))
        );
        // The other constants are as without it.
        let (q, _) = profile_of(
            &all,
            &runs.map(|mut r| {
                r.user.copy_l2_ns = None;
                r
            }),
            &sessions,
        );
        assert!(q.cost.iter().all(|(k, v)| p.cost[k] == *v));
    }

    /// Runs recorded before a path's phases were added say nothing of its
    /// unknown: with none that has them it keeps its reference value,
    /// said so, and the others are still recovered; with some that have
    /// them it is solved from those.
    #[test]
    fn an_unknown_no_recorded_run_prices_keeps_its_reference() {
        let all = counts_618();
        let truth = truth();
        let old = |j: f64| {
            let mut r = simulated_run(truth, j);
            for t in &mut r.specs.get_mut("read").unwrap().tasks {
                t.phases.retain(|p| !p.name.starts_with("write_128k"));
            }
            r
        };
        let runs: Vec<RunData> = [1.01, 1.02].iter().map(|&j| old(j)).collect();
        let sessions = vec!["a".to_string(), "b".to_string()];
        let (p, s) = profile_of(&all, &runs, &sessions);
        assert_eq!(s.unmeasured, vec!["shmem_write"]);
        let e = &p.cost["shmem_write"];
        assert_eq!(e.basis, Basis::Reference);
        assert_eq!(e.value, Costs::REFERENCE.shmem_write);
        assert!(e.method.contains("not measured"), "{}", e.method);
        // Every run 1 % slow: the copy within a few ns.
        assert!(p.cost["copy_page"].value.abs_diff(truth.copy_page) <= truth.copy_page / 50);
        // One new session beside the old ones, the least disturbed: the
        // new path is measured from it.
        let mut runs = runs;
        runs.push(simulated_run(truth, 1.0));
        let sessions = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let s = solve_runs(&all, &runs, &sessions);
        assert!(s.unmeasured.is_empty());
        let got = s.values["shmem_write"];
        assert!((got - truth.shmem_write as f64).abs() < 1.0, "{got}");
    }

    /// first_touch's munmaps price free_page only in runs recorded before
    /// free_anon, which supersedes them (`SUPERSEDED`).
    #[test]
    fn a_later_spec_supersedes_an_equation_in_the_runs_that_hold_it() {
        let all = counts_618();
        let mut old = simulated_run(truth(), 1.0);
        old.specs.remove("free_anon");
        let new = simulated_run(truth(), 1.0);
        let rows = rows(&all, &[old, new]);
        let row = |name: &str| rows.iter().find(|r| r.name == name).expect(name);
        for name in [
            "first_touch/munmap_b-munmap_a",
            "first_touch/munmap_c-munmap_b",
        ] {
            assert!(row(name).runs[0].is_some(), "{name}: kept before free_anon");
            assert!(row(name).runs[1].is_none(), "{name}: left out beside it");
        }
        let r = row("free_anon/c-b");
        assert!(r.runs[0].is_none() && r.runs[1].is_some());
        assert!(
            r.a[unknown_of("free_page")] > 0.0,
            "free_anon prices free_page"
        );
    }

    /// A many-CPU constant is the median of the runs that have the bench;
    /// with none it is the reference value, said so.
    #[test]
    fn a_many_cpu_constant_is_the_median_of_its_runs() {
        let truth = truth();
        let bench = |pingpong_2n: u64| smp::SmpBench {
            cpus: [0, 1],
            siblings: false,
            transfers: 1000,
            pingpong_ns: [100_000, pingpong_2n],
            lock_reps: 1000,
            lock_pair_ns: [0, 200_000],
            lock_alone_ns: [0, 20_000],
            ipi_reps: 10,
            ipi_ns: [0, 30_000],
            no_ipi_ns: [0, 5_000],
            victim_quiet_ns: 1_000_000,
            victim_storm_ns: 12_000,
            victim_ipis: 10,
            copy_bytes: 1 << 20,
            copy_alone_ns: 900,
            copy_pair_ns: 1000,
        };
        let mut runs: Vec<RunData> = (0..3).map(|_| simulated_run(truth, 1.0)).collect();
        let (method, unit) = (SMP[0].1, "ns");
        let e = smp_entry("cacheline_transfer", unit, method, &runs);
        assert_eq!(e.basis, Basis::Reference);
        assert_eq!(e.value, Costs::REFERENCE.cacheline_transfer);
        for (r, t) in runs.iter_mut().zip([190_000, 230_000, 210_000]) {
            r.smp = Some(bench(t));
        }
        let e = smp_entry("cacheline_transfer", unit, method, &runs);
        assert_eq!(
            (e.basis, e.value, e.spread),
            (Basis::Measured, 110, [90, 130])
        );
        let e = smp_entry("lock_handoff", unit, SMP[1].1, &runs);
        assert_eq!(e.value, 200 - 20);
        let e = smp_entry("ipi", unit, SMP[2].1, &runs);
        assert_eq!(e.value, 2500);
        let e = smp_entry("ipi_handler", unit, SMP[3].1, &runs);
        assert_eq!(e.value, 1200);
        let e = smp_entry("mem_bw_pair", "permille", SMP[4].1, &runs);
        assert_eq!(e.value, 900);
        // The rstat bench: runs without it leave the reference value.
        // Two threads x 2 x 1 MiB (read and written) in 1000 ns.
        let e = smp_entry("mem_bw", "MB/s", SMP[5].1, &runs);
        assert_eq!(e.value, 4 * (1 << 20) * 1000 / 1000);
        let e = smp_entry("memcg_rstat_flush", unit, SMP[6].1, &runs);
        assert_eq!(e.basis, Basis::Reference);
        for (r, c) in runs.iter_mut().zip([14_000, 15_500, 15_000]) {
            r.rstat = Some(RstatBench {
                cpus: [0, 1],
                pages: 512,
                reps: 1000,
                read_ns: [10_000, 12_500, c],
            });
        }
        let e = smp_entry("memcg_rstat_flush", unit, SMP[6].1, &runs);
        assert_eq!(
            (e.basis, e.value, e.spread),
            (Basis::Measured, 2500, [1500, 3000])
        );
    }

    #[test]
    fn every_constant_has_exactly_one_basis() {
        for &(f, _) in Costs::FIELDS {
            let n = UNKNOWNS.iter().filter(|u| share(u, f).is_some()).count()
                + DIRECT.iter().filter(|d| d.0 == f).count()
                + SMP.iter().filter(|d| d.0 == f).count()
                + REFERENCE_ONLY.iter().filter(|d| d.0 == f).count();
            assert_eq!(n, 1, "{f}");
        }
    }
}

//! What a spec asks of the engine that runs it, counted before it runs:
//! the page operations (work) and the host memory the simulator's tables
//! take. Both engines refuse a spec past a limit up front, naming the step
//! that asks for the most, rather than spin for hours or abort when the
//! host runs out of memory.
//!
//! A page operation is one page a step walks: an access of a `touch`, a
//! page read or written by `read`/`write`/`stream`, a PTE `munmap`,
//! `madvise` or `fork` visits, a swap slot `swapoff` scans, a page
//! `drop_caches` or `fsync` may visit, and each 10 µs of a `compute` (the
//! simulator's shortest scheduling slice: a computing task beside others
//! may be run in slices this short; a `sleep` is one event). A stretch
//! of time (`sleep`, `compute`) also counts khugepaged's scans over it: a
//! wakeup every `scan_sleep_millisecs` (at least 1 ms here) of
//! `pages_to_scan` PTEs' worth, whatever the THP knobs, if the machine's
//! tasks map anything (khugepaged scans only mms with regions; a bound:
//! a years-long sleep beside khugepaged is refused, not run for hours).
//! Every other step counts one. A
//! `repeat` counts its body's work `times` over; an empty body (or one of
//! empty repeats only) counts nothing, and the engines skip it.

use crate::model::{Op, Spec, Step};
use std::collections::HashMap;

/// The default limit on page operations: about ten minutes of simulation
/// on one core at the simulator's slower paths. `--max-work` raises it.
pub const DEFAULT_MAX_WORK: u64 = 10_000_000_000;

/// Host bytes the simulator keeps per page of a mapping (its PTE and the
/// content token the user expects).
pub const HOST_BYTES_PER_MAPPED_PAGE: u64 = 12;
/// Per page of a file (page-cache slot, expected and on-disk tokens).
pub const HOST_BYTES_PER_FILE_PAGE: u64 = 16;
/// Per swap slot (swap_map, swap cache and memcg owner entries, the
/// device's stored token).
pub const HOST_BYTES_PER_SWAP_SLOT: u64 = 12;
/// Per page frame the workload uses (the folio record and its token).
pub const HOST_BYTES_PER_FRAME: u64 = 40;
/// Per page frame with more than one CPU: its `struct page` cache line's
/// last writers and latest transfer (the simulator's `PageLine`).
pub const HOST_BYTES_PER_PAGE_LINE: u64 = 40;
/// Per memcg and CPU: the memcg statistics' per-CPU state (5.10's
/// remainder of each of 64 memory.stat items, the rstat tree's mark,
/// 6.8's count).
pub const HOST_BYTES_PER_MEMCG_CPU: u64 = 264;
/// Per guest frame of a guest under KVM: its SPTE in the host's model of
/// the VM's EPT (crates/sim kvm.rs).
pub const HOST_BYTES_PER_SPTE: u64 = 1;
/// Simulated time that counts as one page operation in `compute`: the
/// simulator's shortest scheduling slice (cost::QUANTUM_NS).
pub const NS_PER_OP: u64 = 10_000;

/// One step's (or key's) share, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// Dotted key path of the step, e.g. `task.main.steps[2]`, or of the
    /// key, e.g. `swap[0].size`.
    pub key: String,
    /// Its line in the spec file; 0 where the spec has none to name (a
    /// key the model keeps no line of, or one given by `--set`).
    pub line: usize,
    pub amount: u128,
}

/// The work a spec asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    /// Page operations, over every task instance.
    pub total: u128,
    /// The top-level step (of some task) that asks for the most.
    pub largest: Option<Share>,
}

/// Counts the page operations `spec` asks for.
pub fn work(spec: &Spec) -> Work {
    work_checked(spec, false)
}

/// The same, for a run that checks the kernel's invariants at every phase
/// mark (`--check`): each mark then also walks every frame of the machine.
pub fn work_checked(spec: &Spec, checking: bool) -> Work {
    let mut ctx = WorkCx::new(spec);
    if checking {
        ctx.phase = (spec.machine.memory / crate::PAGE_SIZE) as u128;
    }
    let mut total: u128 = 0;
    let mut largest: Option<Share> = None;
    for t in &spec.tasks {
        let mut sizes = HashMap::new();
        for s in &t.steps {
            let w = ctx.step(s, &mut sizes).saturating_mul(t.instances as u128);
            total = total.saturating_add(w);
            if largest.as_ref().is_none_or(|l| w > l.amount) {
                largest = Some(Share {
                    key: s.key.clone(),
                    line: s.line,
                    amount: w,
                });
            }
        }
    }
    // A guest's page operations, each also a host access of its RAM (its
    // VMM's loads and stores), and its VMM's writes of its own memory as
    // it starts. (The VMM's reads of TCG's cache, once per 4 ms of guest
    // execution, are not counted: 16 MiB of cache is 4096 reads per 4 ms,
    // fewer than the guest's own accesses in that time.)
    for vm in &spec.vms {
        let w = work_checked(&vm.guest, checking);
        let vmm = ((vm.vmm_memory + vm.tb_size) / crate::PAGE_SIZE) as u128;
        total = total
            .saturating_add(w.total.saturating_mul(2))
            .saturating_add(vmm);
        if let Some(l) = w.largest {
            if largest.as_ref().is_none_or(|b| 2 * l.amount > b.amount) {
                largest = Some(Share {
                    amount: 2 * l.amount,
                    ..l
                });
            }
        }
    }
    Work { total, largest }
}

/// Whether `steps` do nothing at all: empty, or repeats of nothing. The
/// engines skip such a `repeat` instead of looping over an empty body.
pub fn does_nothing(steps: &[Step]) -> bool {
    steps.iter().all(|s| match &s.op {
        Op::Repeat { times, steps } => *times == 0 || does_nothing(steps),
        _ => false,
    })
}

/// The host memory the simulator's tables take for `spec`, bytes, with
/// the part that is largest: the mappings (named by their largest mmap
/// step), each file's pages (`file[i].size`), each swap device's slots
/// (`swap[i].size`), and the frames the work can touch (at most the
/// machine's: `machine.memory`), each at its line (0 for a `--set`).
pub fn host_bytes(spec: &Spec) -> (u128, Share) {
    let mut parts = Vec::new();
    let mut maps = StepsPart::default();
    for t in &spec.tasks {
        walk_mmaps(&t.steps, 1, &mut |step, pages, n| {
            let b = (pages as u128) * (HOST_BYTES_PER_MAPPED_PAGE as u128) * n;
            maps.part.amount = maps.part.amount.saturating_add(b * t.instances as u128);
            maps.name_by(step, b);
        });
    }
    parts.push(maps.part);
    parts.push(zipf_tables(spec));
    for (i, f) in spec.files.iter().enumerate() {
        parts.push(Share {
            key: format!("file[{i}].size"),
            line: f.size_line,
            amount: (f.size / crate::PAGE_SIZE) as u128 * HOST_BYTES_PER_FILE_PAGE as u128,
        });
    }
    for (i, s) in spec.swap.iter().enumerate() {
        parts.push(Share {
            key: format!("swap[{i}].size"),
            line: s.size_line,
            amount: (s.size / crate::PAGE_SIZE) as u128 * HOST_BYTES_PER_SWAP_SLOT as u128,
        });
    }
    // The memcgs (the spec's and the root) times the CPUs.
    parts.push(Share {
        key: "machine.cpus".into(),
        line: 0,
        amount: (spec.cgroups.len() as u128 + 1)
            * spec.machine.cpus as u128
            * HOST_BYTES_PER_MEMCG_CPU as u128,
    });
    let frames = (spec.machine.memory / crate::PAGE_SIZE) as u128;
    let per_frame = match spec.machine.cpus {
        1 => HOST_BYTES_PER_FRAME,
        _ => HOST_BYTES_PER_FRAME + HOST_BYTES_PER_PAGE_LINE,
    };
    parts.push(Share {
        key: "machine.memory".into(),
        line: spec.machine.memory_line,
        amount: frames.min(work(spec).total) * per_frame as u128,
    });
    // A guest's own tables (its frames, mappings, swap), named under it,
    // and its VMM's mappings on the host (guest RAM, QEMU's own memory).
    for vm in &spec.vms {
        let vmm_pages = (vm.guest.machine.memory + vm.vmm_memory + vm.tb_size) / crate::PAGE_SIZE;
        let ept = match vm.accel {
            crate::Accel::Kvm => vm.guest.machine.memory / crate::PAGE_SIZE * HOST_BYTES_PER_SPTE,
            crate::Accel::Tcg => 0,
        };
        parts.push(Share {
            key: format!("vm.{}.machine.memory", vm.name),
            line: vm.guest.machine.memory_line,
            amount: vmm_pages as u128 * HOST_BYTES_PER_MAPPED_PAGE as u128 + ept as u128,
        });
        let (bytes, part) = host_bytes(&vm.guest);
        // A step's key is the guest's already (parse/vm.rs); a section's
        // is put under it.
        let under = format!("vm.{}.", vm.name);
        let key = match part.key.starts_with(&under) {
            true => part.key,
            false => format!("{under}{}", part.key),
        };
        parts.push(Share {
            key,
            amount: bytes,
            ..part
        });
    }
    let total = parts
        .iter()
        .map(|p| p.amount)
        .fold(0u128, u128::saturating_add);
    // The first of the largest (max_by_key would take the last).
    let largest = parts
        .into_iter()
        .rev()
        .max_by_key(|p| p.amount)
        .expect("the mappings' part at least");
    (total, largest)
}

/// The zipf samplers' tables (`crate::zipf`): a task's largest, once per
/// process it runs as (a task holds one touch's stream at a time), named
/// by the largest one's touch step.
fn zipf_tables(spec: &Spec) -> Share {
    let mut tables = StepsPart::default();
    for t in &spec.tasks {
        let mut sizes = Sizes::new();
        let mut task = 0u128;
        zipf_walk(&t.steps, 1, &mut sizes, &mut |step, bytes| {
            task = task.max(bytes);
            tables.name_by(step, bytes);
        });
        tables.part.amount = tables
            .part
            .amount
            .saturating_add(task * t.instances as u128);
    }
    tables.part
}

/// A part of the host memory that steps take, named by the step that
/// takes the most (the first of them); "task", line 0, while none does.
struct StepsPart {
    part: Share,
    largest: u128,
}

impl Default for StepsPart {
    fn default() -> Self {
        StepsPart {
            part: Share {
                key: "task".into(),
                line: 0,
                amount: 0,
            },
            largest: 0,
        }
    }
}

impl StepsPart {
    /// `step` takes `bytes`: it names the part if no step took more.
    fn name_by(&mut self, step: &Step, bytes: u128) {
        if bytes > self.largest {
            self.largest = bytes;
            self.part.key = step.key.clone();
            self.part.line = step.line;
        }
    }
}

fn zipf_walk(steps: &[Step], n: u128, sizes: &mut Sizes, f: &mut impl FnMut(&Step, u128)) {
    for s in steps {
        match &s.op {
            Op::Mmap { name, pages, .. } => {
                sizes.insert(name.clone(), *pages);
            }
            Op::Touch(t) if t.order == crate::Order::Zipf => {
                let ranks = crate::ops::range_pages(t, sizes.get(&t.region).copied().unwrap_or(0));
                let draws = u64::try_from(crate::ops::accesses(t, sizes)).unwrap_or(u64::MAX);
                let bytes = crate::zipf::Zipf::table_bytes(ranks, t.theta, draws);
                f(s, bytes as u128 * n);
            }
            Op::Repeat { steps, .. } => zipf_walk(steps, n, sizes, f),
            // A child or thread draws beside its creator: both streams count.
            Op::Fork { steps } | Op::Spawn { steps } | Op::Thread { steps } => {
                zipf_walk(steps, n.saturating_mul(2), &mut sizes.clone(), f)
            }
            _ => {}
        }
    }
}

/// Calls `f(step, pages, multiplicity)` for every mmap step, where
/// the multiplicity counts the forks and spawns the step runs in (each a
/// process of its own), not repeats (a region remapped under the same
/// name replaces the old one).
fn walk_mmaps(steps: &[Step], n: u128, f: &mut impl FnMut(&Step, u64, u128)) {
    for s in steps {
        match &s.op {
            Op::Mmap { pages, .. } => f(s, *pages, n),
            Op::Repeat { times, steps } => {
                let forks = if *times == 0 { 0 } else { 1 };
                walk_mmaps(steps, n * forks, f)
            }
            Op::Fork { steps } | Op::Spawn { steps } => walk_mmaps(steps, n.saturating_mul(2), f),
            // A thread's mappings are its process's: once per process.
            Op::Thread { steps } => walk_mmaps(steps, n, f),
            _ => {}
        }
    }
}

/// The pages of the regions mapped so far, by name.
pub(crate) type Sizes = HashMap<String, u64>;

/// What the ops' counts (`StepOp::work`) need of the spec.
pub(crate) struct WorkCx {
    /// What a phase mark costs (the invariant check's walk, if checking).
    pub phase: u128,
    /// khugepaged's period (ns) and the PTEs it scans at each wakeup.
    pub khugepaged: (u64, u64),
    pub file_pages: Vec<u64>,
    pub all_file_pages: u64,
    pub swap_slots: Vec<u64>,
}

impl WorkCx {
    fn new(spec: &Spec) -> WorkCx {
        let file_pages: Vec<u64> = spec
            .files
            .iter()
            .map(|f| f.size / crate::PAGE_SIZE)
            .collect();
        let k = &spec.sysfs.khugepaged;
        let period_ms = k.scan_sleep_millisecs().max(1) as u64;
        // khugepaged_enter_vma registers an mm for a region: none, no scan.
        let mut maps = false;
        for t in &spec.tasks {
            crate::model::for_each_op_in(&t.steps, &mut |op| {
                maps |= matches!(op, Op::Mmap { .. });
            });
        }
        let pages = if maps { k.pages_to_scan() as u64 } else { 0 };
        WorkCx {
            phase: 0,
            khugepaged: (period_ms * 1_000_000, pages),
            all_file_pages: file_pages.iter().sum(),
            file_pages,
            swap_slots: spec
                .swap
                .iter()
                .map(|s| s.size / crate::PAGE_SIZE)
                .collect(),
        }
    }

    /// khugepaged's scans over `ns` of time (see the module's comment).
    pub(crate) fn khugepaged_work(&self, ns: u64) -> u128 {
        let (period, pages) = self.khugepaged;
        (ns / period) as u128 * pages as u128
    }

    pub(crate) fn steps(&self, steps: &[Step], sizes: &mut Sizes) -> u128 {
        steps
            .iter()
            .map(|s| self.step(s, sizes))
            .fold(0u128, u128::saturating_add)
    }

    /// The page operations of one step: its op's count, at least one.
    fn step(&self, s: &Step, sizes: &mut Sizes) -> u128 {
        crate::ops::of(&s.op).work(self, &s.op, sizes).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(steps: &str) -> Spec {
        crate::parse_str(
            &format!("[machine]\nmemory = \"128M\"\n[task.a]\nsteps = [\n{steps}\n]\n"),
            "t.toml",
            &[],
        )
        .expect("spec")
    }

    #[test]
    fn time_counts_khugepageds_scans_over_it() {
        let sysfs =
            "[sysfs]\n\"kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs\" = 100\n";
        let text = |sleep: &str| {
            format!(
                "[machine]\nmemory = \"128M\"\n{sysfs}[task.a]\nsteps = [\n{{ op = \"sleep\", duration = \"{sleep}\" }},\n]\n\
                 [task.b]\nsteps = [ {{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"4M\" }} ]\n"
            )
        };
        let w = |sleep: &str| work(&crate::parse_str(&text(sleep), "t.toml", &[]).expect("spec"));
        // 3 s at a wakeup every 100 ms, 4096 PTEs each (and b's mmap).
        assert_eq!(w("3s").total, 30 * 4096 + 1);
        assert_eq!(w("50ms").total, 2, "no wakeup: one event");
        // A soak's years-long sleep: past the default limit.
        let long = w("4294967295s");
        assert!(long.total > DEFAULT_MAX_WORK as u128, "{}", long.total);
        assert_eq!(long.largest.expect("the sleep").key, "task.a.steps[0]");
        // With nothing mapped khugepaged has no mm: the sleep is one event.
        let alone = spec("{ op = \"sleep\", duration = \"18446744073709551615ns\" },");
        assert_eq!(work(&alone).total, 1);
    }

    #[test]
    fn touches_count_their_accesses() {
        let s = spec(
            "{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"4M\" },\n\
             { op = \"touch\", region = \"h\", passes = 3 },\n\
             { op = \"touch\", region = \"h\", order = \"zipf\", count = 5000 },",
        );
        let w = work(&s);
        assert_eq!(w.total, 1 + 3 * 1024 + 5000);
        let l = w.largest.expect("a step");
        assert_eq!(
            (l.key.as_str(), l.line, l.amount),
            ("task.a.steps[2]", 7, 5000)
        );
    }

    #[test]
    fn repeats_multiply_and_empty_ones_count_nothing() {
        let s = spec(
            "{ op = \"repeat\", times = 100000000, steps = [ { op = \"repeat\", times = 100000000, steps = [] } ] },\n\
             { op = \"repeat\", times = 1000, steps = [ { op = \"phase\", name = \"p\" } ] },",
        );
        let w = work(&s);
        // The empty nest counts 1 (its own step), the phases 1000.
        assert_eq!(w.total, 1 + 1000);
        match &s.tasks[0].steps[0].op {
            Op::Repeat { steps, .. } => assert!(does_nothing(steps)),
            _ => unreachable!(),
        }
    }

    #[test]
    fn with_checks_a_phase_mark_walks_the_machine() {
        let s = spec(
            "{ op = \"repeat\", times = 1000, steps = [ { op = \"phase\", name = \"p\" } ] },",
        );
        assert_eq!(work(&s).total, 1000);
        // 128 MiB: 32768 frames a check.
        assert_eq!(work_checked(&s, true).total, 1000 * 32768);
    }

    #[test]
    fn long_computations_count_their_slices() {
        let s = spec("{ op = \"compute\", duration = \"4294967295ms\" },");
        // Its slices (nothing mapped: khugepaged has no mm to scan).
        let ns: u128 = 4_294_967_295_000_000;
        assert_eq!(work(&s).total, ns / NS_PER_OP as u128);
        assert!(work(&s).total > DEFAULT_MAX_WORK as u128);
    }

    #[test]
    fn huge_repeat_counts_are_not_lost_to_overflow() {
        let s = spec(
            "{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"4K\" },\n\
             { op = \"repeat\", times = 281474976710656, steps = [ { op = \"repeat\", times = 281474976710656, steps = [ { op = \"touch\", region = \"h\" } ] } ] },",
        );
        assert!(work(&s).total > DEFAULT_MAX_WORK as u128);
    }

    #[test]
    fn host_memory_grows_with_mappings_not_machine_memory() {
        let small = spec(
            "{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"4K\" },\n\
             { op = \"touch\", region = \"h\", count = 1 },",
        );
        let (bytes, _) = host_bytes(&small);
        assert!(bytes < 1 << 10, "{bytes}");
        let big = spec("{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"64G\" },");
        let (bytes, part) = host_bytes(&big);
        // The mapping, one frame, and the root memcg's per-CPU statistics.
        assert_eq!(bytes, (64u128 << 18) * 12 + 40 + 264);
        assert_eq!(part.key, "task.a.steps[0]");
    }

    #[test]
    fn host_memory_counts_each_memcg_on_each_cpu() {
        let text = "[machine]\nmemory = \"64M\"\ncpus = 1024\n[cgroup.a]\n[cgroup.b]\n\
                    [task.a]\nsteps = []\n";
        let s = crate::parse_str(text, "t.toml", &[]).expect("spec");
        let (bytes, part) = host_bytes(&s);
        assert_eq!(bytes, 3 * 1024 * HOST_BYTES_PER_MEMCG_CPU as u128);
        assert_eq!(part.key, "machine.cpus");
    }

    #[test]
    fn a_kvm_guest_counts_its_ept() {
        let text = |accel: &str| {
            format!(
                "[machine]\nmemory = \"1G\"\n[vm.g.host]\naccel = \"{accel}\"\n\
                 [vm.g.machine]\nmemory = \"256M\"\n[vm.g.task.t]\nsteps = []\n"
            )
        };
        let bytes = |accel: &str| {
            let s = crate::parse_str(&text(accel), "t.toml", &[]).expect("spec");
            host_bytes(&s).0
        };
        // TCG's translation cache is mapped and written (frames the host
        // holds); KVM has none, and an SPTE per guest frame instead.
        let tb_pages = (16u128 << 20) / 4096;
        let tb = tb_pages * (HOST_BYTES_PER_MAPPED_PAGE + HOST_BYTES_PER_FRAME) as u128;
        let sptes = (256u128 << 20) / 4096 * HOST_BYTES_PER_SPTE as u128;
        assert_eq!(bytes("tcg") + sptes, bytes("kvm") + tb);
    }

    #[test]
    fn zipf_tables_count_per_concurrent_stream() {
        // 512 ranks drawn 4096 times: a table of 512 × 24 bytes, in the
        // parent and in the forked child; too few draws build none.
        let with_theta = |theta: &str| {
            spec(&format!(
                "{{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"2M\" }},\n\
                 {{ op = \"touch\", region = \"h\", order = \"zipf\", theta = 0.9, count = 1000 }},\n\
                 {{ op = \"fork\", steps = [ {{ op = \"touch\", region = \"h\", order = \"zipf\", theta = {theta}, length = \"2M\", count = 4096 }} ] }},"
            ))
        };
        let s = with_theta("0.99");
        let part = zipf_tables(&s);
        assert_eq!(part.amount, 2 * 512 * 24);
        assert_eq!(part.key, "task.a.steps[2].steps[0]");
        // Above the table's largest exponent: none, and the rest unchanged.
        let none = with_theta("1.0");
        assert_eq!(zipf_tables(&none).amount, 0);
        assert_eq!(host_bytes(&s).0 - host_bytes(&none).0, 2 * 512 * 24);
    }

    #[test]
    fn the_largest_host_part_names_its_key_and_a_line_only_where_there_is_one() {
        let with = |extra: &str| {
            crate::parse_str(
                &format!(
                    "[machine]\nmemory = \"8G\"\n{extra}[task.a]\nsteps = [\n{{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"4K\" }},\n{{ op = \"touch\", region = \"h\", count = 3000000 }},\n]\n"
                ),
                "t.toml",
                &[],
            )
            .expect("spec")
        };
        // The frames 3 M accesses can touch: machine.memory, line 2.
        let (_, part) = host_bytes(&with(""));
        assert_eq!((part.key.as_str(), part.line), ("machine.memory", 2));
        assert_eq!(part.amount, 2_097_152 * 40);
        // With more than one CPU, each frame's struct page line too.
        let (_, part) = host_bytes(&with("cpus = 2\n"));
        assert_eq!(part.amount, 2_097_152 * (40 + 40));
        // The second, larger swap device: its size, line 8.
        let swap = "[[swap]]\ndevice = \"zram\"\nsize = \"1G\"\n[[swap]]\ndevice = \"zram\"\nsize = \"1T\"\n";
        let (_, part) = host_bytes(&with(swap));
        assert_eq!((part.key.as_str(), part.line), ("swap[1].size", 8));
        assert_eq!(part.amount, (1u128 << 28) * 12);
        let file = "[[file]]\nname = \"f\"\nsize = \"1T\"\non = \"tmpfs\"\n";
        let (_, part) = host_bytes(&with(file));
        assert_eq!((part.key.as_str(), part.line), ("file[0].size", 5));
        // From --set, machine.memory has no line.
        let set = crate::parse_str(
            "[machine]\nmemory = \"8G\"\n[task.a]\nsteps = [\n{ op = \"mmap\", name = \"h\", kind = \"anon\", size = \"4K\" },\n{ op = \"touch\", region = \"h\", count = 3000000 },\n]\n",
            "t.toml",
            &["machine.memory=\"16G\"".to_string()],
        )
        .expect("spec");
        let (_, part) = host_bytes(&set);
        assert_eq!((part.key.as_str(), part.line), ("machine.memory", 0));
    }
}

//! mmsim's simulated Linux 6.1 memory-management subsystem.
//!
//! `run` executes a validated spec and returns the document docs/design.md
//! "Output" describes. Layout follows the kernel: mm/memory.rs holds the
//! fault paths, mm/vmscan.rs reclaim, and so on.

pub mod cacheline;
pub mod call_paths;
pub mod check;
pub mod cost_model;
pub mod dev;
pub mod histogram;
pub mod kernel;
pub mod kvm;
pub mod l2cache;
pub mod machine_profile;
pub mod membw;
pub mod mm;
pub mod player;
pub mod release;
pub mod rwsem;
pub mod sched;
pub mod spinlock;
pub mod vm;
pub mod vmstat;

use kernel::Kernel;
pub use mmsim_spec::output;
use mmsim_spec::Spec;
use output::*;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// The workload ran out of memory (VM_FAULT_OOM).
    Oom,
    /// The spec asks for something this version does not model.
    Unmodelled(String),
    /// The spec is inconsistent in a way only running it shows.
    Spec(String),
    /// An invariant of the simulated kernel does not hold (a bug in mmsim).
    Invariant(String),
    /// The spec asks for more work or host memory than the run's limits.
    Limit(String),
    /// An error at a line of the spec (and a key, if not empty).
    At {
        line: usize,
        key: String,
        error: Box<SimError>,
    },
}

impl SimError {
    /// `error`, told as an error at `line` of the spec and at `key` (none
    /// if empty).
    pub fn at(line: usize, key: impl Into<String>, error: SimError) -> SimError {
        SimError::At {
            line,
            key: key.into(),
            error: Box::new(error),
        }
    }

    /// The exit status the command gives this error: 2 for what the spec
    /// asks (unmodelled, inconsistent, over a limit), 1 for a failure of
    /// the run itself.
    pub fn exit_code(&self) -> u8 {
        match self {
            SimError::Unmodelled(_) | SimError::Spec(_) | SimError::Limit(_) => 2,
            SimError::Oom | SimError::Invariant(_) => 1,
            SimError::At { error, .. } => error.exit_code(),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Oom => write!(f, "the workload ran out of memory (VM_FAULT_OOM); the memcg OOM killer is not modelled"),
            SimError::Unmodelled(w) => write!(f, "not modelled yet: {w}"),
            SimError::Spec(w) => write!(f, "{w}"),
            SimError::Invariant(w) => write!(f, "invariant violated (a bug in mmsim): {w}"),
            SimError::Limit(w) => write!(f, "{w}"),
            SimError::At { line, key, error } => {
                // Line 0: a key the spec gives no line for (a `--set`).
                if *line > 0 {
                    write!(f, "line {line}: ")?;
                }
                if !key.is_empty() {
                    write!(f, "key `{key}`: ")?;
                }
                write!(f, "{error}")
            }
        }
    }
}

impl std::error::Error for SimError {}

/// Where a run is, as `RunOptions::progress` hears it after each
/// scheduling slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Page operations done (`mmsim_spec::work`'s units; a kvstore's are
    /// its accesses, so `done` may end a little off `total`).
    pub done: u64,
    /// Page operations the spec asks for.
    pub total: u64,
    /// Simulated time reached, ns.
    pub sim_ns: u64,
}

#[derive(Default)]
pub struct RunOptions<'a> {
    /// Check the kernel's invariants at every phase mark, when the last
    /// task finishes its steps, and after the run.
    pub check: bool,
    /// Called after each scheduling slice (at most every few simulated
    /// milliseconds; the page accesses themselves only bump a counter).
    pub progress: Option<Box<dyn FnMut(Progress) + 'a>>,
    /// The most page operations the spec may ask for
    /// (`mmsim_spec::work`); None: `work::DEFAULT_MAX_WORK`.
    pub max_work: Option<u64>,
    /// The most host memory the simulator's tables may need, bytes
    /// (`mmsim_spec::work::host_bytes`); None: no limit.
    pub max_host_bytes: Option<u64>,
    /// The machine profile: what each primitive costs (default: the
    /// committed profile, `machine_profile::DEFAULT_PROFILE`).
    pub costs: machine_profile::CostProfile,
    /// Stop with a limit error once a slice ends past this simulated time,
    /// ns; None: no bound. Work the spec asks for is bounded before the
    /// run (`max_work`); what the kernel does for it is not (a memcg full
    /// of pages reclaim cannot free sorts them again on every retry), so
    /// this bounds a run whose kernel work goes on long (the fuzz targets
    /// use it; `mmsim run --max-time`).
    pub max_sim_ns: Option<u64>,
}

/// The host's available memory (MemAvailable), the most a run's tables
/// may take (`RunOptions::max_host_bytes`); None where /proc/meminfo does
/// not say.
pub fn host_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb << 10)
}

/// Refuses a spec that asks for more work or host memory than `opts`
/// allow, before anything is spent, naming the step that asks most.
pub fn check_work(spec: &Spec, opts: &RunOptions) -> Result<(), SimError> {
    use mmsim_spec::work;
    let max = opts.max_work.unwrap_or(work::DEFAULT_MAX_WORK);
    let w = work::work_checked(spec, opts.check);
    if w.total > max as u128 {
        let l = w.largest.expect("work comes from steps");
        return Err(SimError::at(
            l.line,
            l.key,
            SimError::Limit(format!(
                "found a spec asking for {} page operations ({} at this step), expected at most {max}: the work limit (raise it with --max-work)",
                w.total, l.amount
            )),
        ));
    }
    if let Some(max) = opts.max_host_bytes {
        let (bytes, part) = work::host_bytes(spec);
        if bytes > max as u128 {
            let e = SimError::Limit(format!(
                "found a spec whose tables would take {} MiB of host memory ({} MiB for `{}`), expected at most {} MiB: the host's available memory",
                bytes >> 20,
                part.amount >> 20,
                part.key,
                max >> 20
            ));
            return Err(SimError::at(part.line, part.key, e));
        }
    }
    Ok(())
}

/// Feature flags whose mechanisms the simulator cannot switch yet: the
/// paths they change do not exist in this version.
/// 6.1 may give a huge-capable shmem object (a tmpfs file whose mount
/// has `huge=` other than never, shared anonymous memory once
/// shmem_enabled is always, within_size or advise, or either under
/// `force`) a PMD-size folio whose last pages lie beyond i_size (it then
/// sits on the shrinker's list); mmsim holds an inode's pages only up to
/// its size, so such an object must be a whole number of 2 MiB blocks.
fn check_shmem_huge(spec: &Spec) -> Result<(), SimError> {
    use mmsim_spec::{FileOn, ShmemEnabled, TmpfsHuge};
    const PMD: u64 = 2 << 20;
    let force = spec.sysfs.shmem_enabled == Some(ShmemEnabled::Force);
    let deny = spec.sysfs.shmem_enabled == Some(ShmemEnabled::Deny);
    if deny {
        return Ok(());
    }
    if let Some(f) = spec.files.iter().find(|f| {
        f.on == FileOn::Tmpfs && (force || f.huge != TmpfsHuge::Never) && f.size % PMD != 0
    }) {
        return Err(SimError::Unmodelled(format!(
            "file {}: a huge-capable tmpfs file of {} KiB (6.1 can give it a 2 MiB folio reaching past its end, which mmsim does not hold; sizes that are multiples of 2 MiB are modelled)",
            f.name,
            f.size >> 10
        )));
    }
    let anon_huge = spec.sysfs.shmem_enabled.is_some_and(|w| w.allows_large());
    let mut odd = None;
    spec.for_each_op(&mut |op| {
        if let mmsim_spec::Op::Mmap {
            kind: mmsim_spec::MapKind::SharedAnon,
            pages,
            ..
        } = op
        {
            if anon_huge && (pages * 4096) % PMD != 0 {
                odd = Some(*pages);
            }
        }
    });
    if let Some(p) = odd {
        return Err(SimError::Unmodelled(format!(
            "a shared anonymous mapping of {} KiB under shmem_enabled \"{}\" (6.1 can give it a 2 MiB folio reaching past its end, which mmsim does not hold; sizes that are multiples of 2 MiB are modelled)",
            p * 4,
            spec.sysfs.shmem_enabled.map_or("", |w| w.name())
        )));
    }
    Ok(())
}

/// MAX_SWAPFILES on x86-64 6.1 (32 types less the migration, hwpoison and
/// device-private ones).
const MAX_SWAPFILES: usize = 29;
/// The largest mapping mmsim holds: it keeps 12 bytes of host memory per
/// mapped page (PTE and content token), allocated at mmap.
const MAX_MAP_PAGES: u64 = 1 << 28;

/// A zram compressor the preset's kernel does not offer is refused, as
/// that kernel's comp_algorithm refuses it.
fn check_zram_compressor(spec: &Spec) -> Result<(), SimError> {
    let preset = spec.machine.kernel;
    let Some(offers) = mmsim_spec::SwapDevice::zram_offers(preset) else {
        return Ok(());
    };
    for (i, d) in spec.swap.iter().enumerate() {
        let c = d.compressor(preset);
        if d.kind == mmsim_spec::SwapKind::Zram && !offers.contains(&c) {
            return Err(SimError::Spec(format!(
                "swap[{i}]: found compressor {c:?}, which zram on {preset}'s kernel does not offer; expected one of {}",
                offers.join(", ")
            )));
        }
    }
    Ok(())
}

/// What a valid spec can still ask beyond what this simulator holds.
fn check_limits(spec: &Spec) -> Result<(), SimError> {
    if spec.swap.len() > MAX_SWAPFILES {
        return Err(SimError::Spec(format!(
            "{} swap devices, but the kernel takes at most {MAX_SWAPFILES}",
            spec.swap.len()
        )));
    }
    let reserved =
        kernel::boot_reserved_bytes(spec.machine.memory, spec.machine.cpus, spec.machine.kernel);
    let frames = spec.machine.memory.saturating_sub(reserved) / 4096;
    let memory_error = |e| SimError::at(spec.machine.memory_line, "machine.memory", e);
    if frames < 4096 {
        return Err(memory_error(SimError::Spec(format!(
            "found {} MiB, of which the kernel's reservation for {} CPUs (the memmap, the kernel image, per-CPU areas: {} MiB) leaves {} MiB; expected enough for at least 16 MiB to manage",
            spec.machine.memory >> 20,
            spec.machine.cpus,
            reserved >> 20,
            frames >> 8
        ))));
    }
    let brd = kernel::brd_pages(spec);
    if brd > 0 {
        // What a RAM disk holds must fit beside the kernel's own use, with
        // 16 MiB to spare (the workload's and the watermarks' least).
        let room = frames.saturating_sub(kernel::boot_used_bytes(spec) / 4096 + 4096);
        if brd > room {
            return Err(memory_error(SimError::Spec(format!(
                "found {} MiB, which leaves {} MiB beside the kernel, and the RAM disks ([[disk]] device = \"ram\") hold {} MiB in memory (their files and file-system metadata: brd keeps every written block in a page); expected more machine.memory or smaller files on RAM disks",
                spec.machine.memory >> 20,
                room >> 8,
                brd >> 8
            ))));
        }
    }
    if frames >= u32::MAX as u64 {
        return Err(memory_error(SimError::Unmodelled(
            "machines of 16 TiB or more (frame numbers are 32-bit)".into(),
        )));
    }
    let mut too_big = None;
    spec.for_each_op(&mut |op| {
        if let mmsim_spec::Op::Mmap { pages, .. } = op {
            if *pages > MAX_MAP_PAGES {
                too_big = Some(*pages);
            }
        }
    });
    if let Some(p) = too_big {
        return Err(SimError::Unmodelled(format!(
            "a mapping of {} GiB: mappings over {} GiB (mmsim keeps 12 bytes of host memory per mapped page)",
            p >> 18,
            MAX_MAP_PAGES >> 18
        )));
    }
    Ok(())
}

/// Runs a spec in the simulator.
pub fn run(spec: &Spec, opts: RunOptions) -> Result<RunResult, SimError> {
    for s in std::iter::once(spec).chain(spec.vms.iter().map(|v| &*v.guest)) {
        check_shmem_huge(s)?;
        check_zram_compressor(s)?;
        check_limits(s)?;
    }
    check_work(spec, &opts)?;
    match spec.vms.is_empty() {
        true => run_machine(spec, opts),
        false => run_with_guests(spec, opts),
    }
}

/// A machine booted for a spec: its kernel (with the contents its regions
/// state), its scheduler and player, and what the output reads at boot.
pub(crate) struct Booted<'s> {
    pub kernel: Box<Kernel>,
    pub sched: sched::Scheduler<'s>,
    pub machine: MachineInfo,
    pub vm_start: vmstat::VmStat,
}

/// Boots `spec`'s machine. A guest's kernel (`guest`) logs the frames it
/// touches and its block requests from then on, for its VMM (vm.rs).
pub(crate) fn boot<'s>(
    spec: &'s Spec,
    costs: &machine_profile::CostProfile,
    check: bool,
    guest: bool,
) -> Result<Booted<'s>, SimError> {
    let mut kernel = Box::new(Kernel::new(spec, costs.costs)?);
    kernel.setup_page_contents(spec, &costs.compress)?;
    kernel.setup_zswap(&costs.compress)?;
    // A guest's frames are host pages: the host's model keeps their
    // caches, not the guest's.
    let threads = spec.machine.topology.threads_per_core as usize;
    kernel.l2 = (!guest)
        .then_some(costs.l2)
        .flatten()
        .and_then(|m| l2cache::L2Cache::new(m, spec.machine.cpus as usize, threads))
        .map(Box::new);
    // A guest's vCPUs draw on the host's sockets, which its kernel does
    // not see: not modelled there (membw.rs).
    if !guest {
        let topo = spec.machine.topology;
        let per_socket = (topo.cores_per_socket * topo.threads_per_core) as usize;
        // The profile measures what two cores of a socket reach together:
        // a larger socket's bandwidth is the spec's to state.
        let bw = match spec.machine.memory_bandwidth {
            Some(bw) => bw,
            None if per_socket <= 2 => costs.costs.mem_bw,
            None => 0,
        };
        kernel.membw = membw::MemBw::new(bw, spec.machine.cpus as usize, per_socket);
    }
    let machine = machine_info(&kernel, spec);
    if guest {
        kernel.frame_log = Some(kernel::FrameLog::default());
        kernel.blk_log = Some(Vec::new());
        let managed: u64 = kernel.zones.iter().map(|z| z.managed).sum();
        let present = spec.machine.memory / mmsim_spec::PAGE_SIZE;
        kernel.guest_meta =
            kernel::GuestMeta::new(managed as mm::folio::Pfn, present as mm::folio::Pfn);
    }
    let vm_start = kernel.vm.clone();
    let mut sched = sched::Scheduler::new(spec, &mut kernel);
    sched.player.check = check;
    Ok(Booted {
        kernel,
        sched,
        machine,
        vm_start,
    })
}

/// What a run reads as its last task finishes its steps, and the
/// invariant checks of the end (`--check`).
#[derive(Default)]
pub(crate) struct AtEnd {
    cgroups: BTreeMap<String, CgroupResult>,
    zram: Vec<ZramMmStat>,
    zswap: Option<mmsim_spec::output::ZswapStats>,
    check_err: Option<SimError>,
    checks: u64,
}

impl AtEnd {
    /// `Scheduler::run`'s `at_end`: the cgroups and zram as the last task
    /// finishes its steps, and with `check` the invariants then.
    pub(crate) fn read(&mut self, k: &mut Kernel, check: bool) {
        self.cgroups = cgroup_results(k);
        self.zram = k.zram_mm_stat();
        self.zswap = k.zswap_stats();
        if check {
            self.check_err = check::check_all(k).err();
            self.checks += 1;
        }
    }

    /// After the run: an invariant the end found broken, else with
    /// `check` the invariants once more, and every check counted.
    fn finish(&mut self, k: &mut Kernel, check: bool) -> Result<(), SimError> {
        if let Some(e) = self.check_err.take() {
            return Err(e);
        }
        if check {
            check::check_all(k)?;
            k.integrity.invariant_checks += self.checks + 1;
        }
        Ok(())
    }
}

/// The progress bar's callback and total work (`work_spec`'s, a host's
/// with its guests'), and the bound on simulated time, for a run's
/// scheduler.
fn with_progress<'s, 'a: 's>(
    sched: &mut sched::Scheduler<'s>,
    work_spec: &Spec,
    opts: &mut RunOptions<'a>,
) {
    sched.on_progress = opts.progress.take();
    sched.max_sim_ns = opts.max_sim_ns.unwrap_or(u64::MAX);
    if sched.on_progress.is_some() {
        let total = mmsim_spec::work::work_checked(work_spec, opts.check).total;
        sched.total_work = u64::try_from(total).unwrap_or(u64::MAX);
    }
}

/// Runs a spec without guests.
fn run_machine(spec: &Spec, mut opts: RunOptions) -> Result<RunResult, SimError> {
    let mut m = boot(spec, &opts.costs, opts.check, false)?;
    with_progress(&mut m.sched, spec, &mut opts);
    let mut at_end = AtEnd::default();
    let elapsed = m.sched.run(&mut m.kernel, |k| at_end.read(k, opts.check))?;
    at_end.finish(&mut m.kernel, opts.check)?;
    Ok(result_of(spec, &mut m, elapsed, at_end, &opts))
}

/// Runs a host and its guests (vm.rs): the host's spec gains a VMM task
/// per guest, whose slices run the guest.
fn run_with_guests(spec: &Spec, mut opts: RunOptions) -> Result<RunResult, SimError> {
    let host = vm::host_spec(spec);
    let mut m = boot(&host, &opts.costs, opts.check, false)?;
    with_progress(&mut m.sched, spec, &mut opts);
    let first_vmm = host.tasks.len() - host.vms.len();
    for (g, v) in host.vms.iter().enumerate() {
        let mut guest = vm::Guest::new(v, &opts.costs, opts.check)
            .map_err(|e| SimError::at(0, format!("vm.{}", v.name), e))?;
        guest.attach_host_io(&m.kernel, v);
        let player = &mut m.sched.player;
        player.guests.push(Some(Box::new(guest)));
        let (swap, disk) = v.backings();
        player.vm_io.push(vm::VmIo {
            swap,
            disk,
            ..Default::default()
        });
        // One instance each: the VMM tasks are the player's last.
        player.tasks[first_vmm + g].vmm = Some(g);
    }
    let mut at_end = AtEnd::default();
    let elapsed = m.sched.run(&mut m.kernel, |k| at_end.read(k, opts.check))?;
    at_end.finish(&mut m.kernel, opts.check)?;
    let mut guests = Vec::new();
    let slots = std::mem::take(&mut m.sched.player.guests);
    for (v, slot) in host.vms.iter().zip(slots) {
        let mut g = slot.expect("every guest is back in its slot");
        let g_end = &mut g.at_end;
        g_end
            .finish(&mut g.m.kernel, opts.check)
            .map_err(|e| SimError::at(0, format!("vm.{}", v.name), e))?;
        let at_end = std::mem::take(g_end);
        let mut r = result_of(&v.guest, &mut g.m, g.elapsed, at_end, &opts);
        if let Some(slot) = g.kvm_slot {
            let stats = m.kernel.kvm[slot].stats.named();
            r.kvm = stats.iter().map(|&(n, v)| (n.to_string(), v)).collect();
        }
        guests.push((v.name.clone(), r));
    }
    let mut r = result_of(&host, &mut m, elapsed, at_end, &opts);
    r.vms = guests.into_iter().collect();
    Ok(r)
}

/// The output of a machine's run: its tasks, counters and profile.
fn result_of(
    spec: &Spec,
    m: &mut Booted,
    elapsed: u64,
    at_end: AtEnd,
    opts: &RunOptions,
) -> RunResult {
    let (k, sched) = (&mut *m.kernel, &m.sched);
    let tasks = sched
        .player
        .output_order()
        .into_iter()
        .map(|i| &sched.player.tasks[i])
        .map(|t| TaskResult {
            name: t.name.clone(),
            cgroup: t.cgroup.clone(),
            start_ns: t.start,
            end_ns: t.end,
            phases: t
                .phases
                .iter()
                .map(|p| PhaseResult {
                    name: p.name.clone(),
                    start_ns: p.start,
                    end_ns: p.end,
                    vmstat: vm_map(&p.vm_delta, spec),
                    kv: p.kv,
                    trace_requests: p.trace_requests,
                    lru_gen: p.lru_gen.clone(),
                    pressure: Some(p.pressure),
                })
                .collect(),
            kv: t.kv_stats,
            oom_kill: k.oom_kill_of(t.ktask).map(|x| oom_kill_result(k, x)),
        })
        .collect();
    let profile = cost_model::FN_NAMES
        .iter()
        .zip(k.fn_time_ns.iter())
        .filter(|(_, &ns)| ns > 0)
        .map(|(n, &ns)| (n.to_string(), ns))
        .collect();
    // The tasks have exited by `elapsed`: /proc/pressure read then.
    let pressure = Some(k.psi.show(0, elapsed));
    RunResult {
        pressure,
        zram: at_end.zram,
        zswap: at_end.zswap,
        format: 1,
        engine: Engine {
            name: "mmsim".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        spec: spec.file.clone(),
        knobs: knobs_in_force(spec, &opts.costs),
        machine: m.machine.clone(),
        elapsed_ns: elapsed,
        tasks,
        vmstat: vm_map(&k.vm.delta(&m.vm_start), spec),
        cgroups: at_end.cgroups,
        integrity: IntegrityResult {
            pages_checked: k.integrity.pages_checked,
            violations: k.integrity.violations,
            invariant_checks: opts.check.then_some(k.integrity.invariant_checks),
        },
        profile,
        profile_tree: k.call_paths.rows(k.user_access_ns),
        histograms: k
            .hist
            .named()
            .iter()
            .filter(|(_, h)| h.count() > 0)
            .map(|(n, h)| (n.to_string(), h.buckets()))
            .collect(),
        interrupts: [("CAL", k.call_function_ipis()), ("TLB", k.tlb_shootdowns())]
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(row, n)| (row.to_string(), n))
            .collect(),
        kvm: BTreeMap::new(),
        vms: BTreeMap::new(),
    }
}

/// The spec's sysctl and sysfs knobs, every feature flag, and every
/// cgroup limit: enough to tell two runs' settings apart.
fn knobs_in_force(spec: &Spec, costs: &machine_profile::CostProfile) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = spec.knobs.iter().cloned().collect();
    m.insert("mmsim:cost-profile".into(), costs.label.clone());
    for (name, on) in spec.features.list() {
        m.insert(format!("feature:{name}"), on.to_string());
    }
    let limit = |l: mmsim_spec::Limit| match l {
        mmsim_spec::Limit::Max => "max".to_string(),
        mmsim_spec::Limit::Bytes(b) => b.to_string(),
    };
    for cg in &spec.cgroups {
        m.insert(
            format!("cgroup:{}/memory.max", cg.name),
            limit(cg.memory_max),
        );
        m.insert(
            format!("cgroup:{}/memory.high", cg.name),
            limit(cg.memory_high),
        );
        // Protection is listed where set, as the runner writes it.
        for (file, l) in [("memory.min", cg.memory_min), ("memory.low", cg.memory_low)] {
            if l != mmsim_spec::Limit::Bytes(0) {
                m.insert(format!("cgroup:{}/{file}", cg.name), limit(l));
            }
        }
        for (file, l) in [
            ("memory.swap.max", cg.memory_swap_max),
            ("memory.zswap.max", cg.memory_zswap_max),
        ] {
            if l != mmsim_spec::Limit::Max {
                m.insert(format!("cgroup:{}/{file}", cg.name), limit(l));
            }
        }
        if !cg.memory_zswap_writeback {
            m.insert(
                format!("cgroup:{}/memory.zswap.writeback", cg.name),
                "0".into(),
            );
        }
    }
    for d in &spec.disks {
        m.insert(
            format!("disk:{}", d.name),
            format!(
                "{} {} {} read_ahead_kb={}",
                d.kind.name(),
                d.size,
                d.fs.name(),
                d.read_ahead_kb
            ),
        );
    }
    for f in &spec.files {
        let v = match f.on {
            mmsim_spec::FileOn::Tmpfs => format!("tmpfs {} huge={}", f.size, f.huge.name()),
            mmsim_spec::FileOn::Disk(d) => format!("on {} {}", spec.disks[d].name, f.size),
        };
        m.insert(format!("file:{}", f.name), v);
    }
    let mut shared = spec.files.iter().any(|f| f.on == mmsim_spec::FileOn::Tmpfs);
    spec.for_each_op(&mut |op| {
        if let mmsim_spec::Op::Mmap { kind, .. } = op {
            shared |= matches!(
                kind,
                mmsim_spec::MapKind::Shmem | mmsim_spec::MapKind::SharedAnon
            );
        }
    });
    if shared && spec.sysfs.shmem_enabled.is_none() {
        // The oracle sets shmem THP off for what mmsim models, and says so
        // (a value the spec sets is among spec.knobs already).
        m.insert(
            "sysfs:kernel/mm/transparent_hugepage/shmem_enabled".into(),
            "never".into(),
        );
    }
    for (i, s) in spec.swap.iter().enumerate() {
        m.insert(format!("swap:{i}"), format!("{} {}", s.kind.name(), s.size));
        if s.kind != mmsim_spec::SwapKind::Zram {
            m.insert(
                format!("swap:{i}:rotational"),
                (s.rotational() as u8).to_string(),
            );
        }
        for (key, v) in [
            ("read_latency", s.read_latency),
            ("write_latency", s.write_latency),
        ] {
            if let Some(ns) = v {
                m.insert(format!("swap:{i}:{key}"), format!("{ns}ns"));
            }
        }
    }
    m
}

fn vm_map(v: &vmstat::VmStat, spec: &Spec) -> BTreeMap<String, i64> {
    let absent = vmstat::vmstat_absent(spec.machine.kernel);
    let zswap = spec.sysfs.zswap.configured;
    v.iter()
        .filter(|(n, _)| !absent.contains(n))
        .filter(|(n, _)| zswap || !vmstat::ZSWAP_LINES.contains(n))
        .map(|(n, x)| (n.to_string(), x))
        .collect()
}

fn machine_info(k: &Kernel, spec: &Spec) -> MachineInfo {
    let managed: u64 = k.zones.iter().map(|z| z.managed).sum();
    MachineInfo {
        memory_bytes: spec.machine.memory,
        cpus: spec.machine.cpus,
        topology: spec.machine.topology.unless_flat(),
        mem_total_bytes: managed * 4096,
        mem_free_at_start_bytes: k.nr_free_pages() * 4096,
        min_free_kbytes: k.min_free_kbytes,
        zones: k
            .zones
            .iter()
            .map(|z| ZoneInfo {
                name: z.name().into(),
                managed_pages: z.managed,
                min: z.watermark[0],
                low: z.watermark[1],
                high: z.watermark[2],
            })
            .collect(),
    }
}

fn oom_kill_result(k: &Kernel, x: &mm::oom_kill::OomKill) -> mmsim_spec::output::OomKillResult {
    use mm::oom_kill::Constraint;
    let (constraint, oom_memcg) = match x.constraint {
        Constraint::None => ("global", None),
        Constraint::Memcg(m) => ("memcg", Some(k.memcgs[m as usize].name.clone())),
    };
    mmsim_spec::output::OomKillResult {
        constraint: constraint.into(),
        oom_memcg,
        at_ns: x.at,
        anon_rss_kb: Some(x.anon_rss * 4),
        file_rss_kb: Some(x.file_rss * 4),
        shmem_rss_kb: Some(x.shmem_rss * 4),
        pgtables_kb: Some(x.pgtables * 4),
        oom_score_adj: x.oom_score_adj,
    }
}

fn cgroup_results(k: &mut Kernel) -> BTreeMap<String, CgroupResult> {
    let absent = vmstat::memory_stat_absent(k.preset);
    let mut out = BTreeMap::new();
    for i in 1..k.memcgs.len() {
        let psi = k.psi_show(i as u16);
        let stat = k.memory_stat_show(i as u16);
        let m = &k.memcgs[i];
        let ev = m.events;
        out.insert(
            m.name.clone(),
            CgroupResult {
                memory_current: m.memory.usage * 4096,
                // cgroup v2's memory.peak came in 5.19.
                memory_peak: k.release.memory_peak.then_some(m.memory.peak * 4096),
                memory_swap_current: m.swap.usage * 4096,
                memory_stat: stat
                    .lines()
                    .filter(|(n, _)| !absent.contains(n))
                    .filter(|(n, _)| k.zswap.params.configured || !vmstat::ZSWAP_LINES.contains(n))
                    .map(|(n, v)| (n.to_string(), v))
                    .collect(),
                memory_events: [
                    ("low", ev.low),
                    ("high", ev.high),
                    ("max", ev.max),
                    ("oom", ev.oom),
                    ("oom_kill", ev.oom_kill),
                    ("oom_group_kill", ev.oom_group_kill),
                ]
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
                memory_swap_events: [("high", 0), ("max", ev.swap_max), ("fail", ev.swap_fail)]
                    .into_iter()
                    .map(|(n, v)| (n.to_string(), v))
                    .collect(),
                memory_pressure: Some(psi.memory),
                io_pressure: Some(psi.io),
                cpu_pressure: Some(psi.cpu),
            },
        );
    }
    out
}

//! Random workload specs for the fuzz targets, the property tests and the
//! soak command: bytes in, spec text out. One generator serves all three,
//! so a reproducer a fuzzer finds is a byte string any of them can replay.
//!
//! Every draw reads the next bytes (zeros once they run out), so a short
//! input makes a small spec and libFuzzer's mutations map to nearby specs.
//! The specs are small (machines of 64 to 384 MiB, regions of a few MiB)
//! so each runs in milliseconds, but they mix every op and reach, with
//! small probabilities, what fuzzing has found bugs in: shared file
//! mappings written on a small machine while the flusher runs, fork inside
//! memcgs of a few MiB, swapoff on one CPU while another swaps, 2 to 4
//! CPUs. Most generated specs are valid; a few are not, on purpose, and
//! must end with a clear error.
//!
//! `generate_with_traces` also draws `trace` steps: it writes each trace
//! file it draws (its content drawn from the bytes too) into a folder the
//! caller owns, named by a hash of its content, and the spec names it by
//! its absolute path.

use mmsim_sim::{run, RunOptions, SimError};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// How a run of a generated or fuzzed spec ended, judged by the one rule
/// the fuzz targets, the property test and the soak share.
#[derive(Debug)]
pub enum Verdict {
    /// It ran to its end, its invariants checked (with `check`) and held,
    /// every page read back what was written.
    Ran,
    /// It ended with a clear error of the spec's: exit status 2, no raw
    /// control character in the message.
    Refused(String),
    /// A bug in mmsim.
    Failed(String),
}

/// Runs `spec` with `opts` and judges how it ended. A panic is not caught
/// here: a fuzzer or a test wants it as it is.
pub fn judge(spec: &mmsim_spec::Spec, opts: RunOptions) -> Verdict {
    let checking = opts.check;
    match run(spec, opts) {
        Ok(r) if r.integrity.violations > 0 => {
            Verdict::Failed(format!("{} content violations", r.integrity.violations))
        }
        Ok(r) if checking && r.integrity.invariant_checks.unwrap_or(0) == 0 => {
            Verdict::Failed("the invariant checker never ran".into())
        }
        Ok(_) => Verdict::Ran,
        Err(SimError::Invariant(m)) => Verdict::Failed(format!("invariant violated: {m}")),
        Err(SimError::Oom) => Verdict::Failed("a bare VM_FAULT_OOM escaped the scheduler".into()),
        Err(e) => {
            let m = e.to_string();
            if m.chars().any(|c| c.is_control() && c != '\n') {
                Verdict::Failed(format!("a message with raw control characters: {m:?}"))
            } else if e.exit_code() != 2 {
                Verdict::Failed(format!(
                    "not an error of the spec's (exit {}): {m}",
                    e.exit_code()
                ))
            } else {
                Verdict::Refused(m)
            }
        }
    }
}

/// Draws from a byte string.
pub struct Draw<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Draw<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Draw { bytes, pos: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// 0..n (n ≥ 1).
    pub fn below(&mut self, n: u32) -> u32 {
        let v = if n <= 256 {
            self.byte() as u32
        } else {
            u32::from_le_bytes([self.byte(), self.byte(), self.byte(), 0])
        };
        v % n.max(1)
    }

    /// True with probability `pct`/100 (for the byte's 256 values).
    pub fn chance(&mut self, pct: u32) -> bool {
        (self.byte() as u32) * 100 < pct * 256
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u32) as usize]
    }

    pub fn exhausted(&self) -> bool {
        self.pos >= self.bytes.len()
    }
}

/// A region mapped in the current scope: its name and pages.
#[derive(Clone)]
struct Region {
    name: String,
    pages: u64,
    /// MAP_PRIVATE | MAP_ANONYMOUS (the only memory MADV_FREE takes).
    private_anon: bool,
}

struct Gen<'a, 'b> {
    d: &'b mut Draw<'a>,
    /// Files: (name, pages, on tmpfs).
    files: Vec<(String, u64, bool)>,
    nswap: usize,
    /// Memory cgroups c0.. (a set step names one).
    ncg: u32,
    /// The release preset (what a reclaim step may ask of it).
    kernel: &'static str,
    next_region: u32,
    /// This task may swap devices off and on (one task does, so the
    /// devices are never switched twice the same way).
    swapper: bool,
    /// Where `trace` steps' files go; None: no trace step is drawn.
    traces: Option<&'b Path>,
    /// The steps being drawn belong to a task with a thread it has not
    /// waited for: they may unmap nothing (the thread shares the regions).
    threads_live: bool,
    /// The steps being drawn are a thread's: its regions are shared.
    in_thread: bool,
}

/// A spec from `bytes` (any bytes make some spec text), without `trace`
/// steps (they need files).
pub fn generate(bytes: &[u8]) -> String {
    generate_in(bytes, None)
}

/// A spec from `bytes` that may replay traces: each trace file it draws
/// is written into `dir` (which must exist), where the spec names it by
/// its absolute path. The same bytes make the same spec and files.
pub fn generate_with_traces(bytes: &[u8], dir: &Path) -> String {
    generate_in(bytes, Some(dir))
}

/// `[machine]`: its size, CPUs, young bits and release preset.
fn draw_machine(d: &mut Draw, out: &mut String) -> (u64, &'static str) {
    let small = d.chance(30);
    let memory = if small {
        d.pick(&[64u64, 80, 96, 128])
    } else {
        d.pick(&[128u64, 192, 256, 384])
    };
    let cpus = if d.chance(40) { 1 + d.below(4) } else { 1 };
    writeln!(out, "[machine]\nmemory = \"{memory}M\"\ncpus = {cpus}").unwrap();
    // SMT: pairs of CPUs as one core's two threads.
    if cpus.is_multiple_of(2) && d.chance(30) {
        writeln!(out, "threads_per_core = 2").unwrap();
    }
    if d.chance(10) {
        writeln!(out, "hw_pte_young = false").unwrap();
    }
    // Another release's preset (its decisions, counters and footprint).
    let kernel = if d.chance(30) {
        d.pick(&["5.10", "6.12", "7.3"])
    } else {
        "6.1"
    };
    writeln!(out, "kernel = \"{kernel}\"").unwrap();
    (memory, kernel)
}

/// `[sysctl]`, sometimes.
fn draw_sysctls(d: &mut Draw, out: &mut String) {
    if d.chance(40) {
        out.push_str("[sysctl]\n");
        if d.chance(50) {
            writeln!(
                out,
                "\"vm.swappiness\" = {}",
                d.pick(&[0, 10, 60, 100, 200])
            )
            .unwrap();
        }
        if d.chance(30) {
            writeln!(out, "\"vm.page-cluster\" = {}", d.below(6)).unwrap();
        }
    }
}

/// `[sysfs]`: readahead, the multi-gen LRU, THP and mTHP as the release
/// has them.
fn draw_sysfs(d: &mut Draw, out: &mut String, kernel: &str) {
    // 5.10's shmem THP is not modelled (refused).
    let thp = d.chance(15) && kernel != "5.10";
    if d.chance(30) || thp {
        out.push_str("[sysfs]\n");
        if d.chance(50) {
            writeln!(out, "\"kernel/mm/swap/vma_ra_enabled\" = {}", d.chance(50)).unwrap();
        }
        // The multi-gen LRU is modelled as 6.1 has it.
        if kernel == "6.1" && d.chance(40) {
            let caps = d.pick(&["\"0x0001\"", "\"y\"", "3", "5"]);
            writeln!(out, "\"kernel/mm/lru_gen/enabled\" = {caps}").unwrap();
            if d.chance(20) {
                let ttl = d.pick(&[0u32, 1, 100, 1000]);
                writeln!(out, "\"kernel/mm/lru_gen/min_ttl_ms\" = {ttl}").unwrap();
            }
        }
        // Anonymous mTHP, as 6.12 and 7.3 have it: one or two sizes below
        // 2 MiB.
        if (kernel == "6.12" || kernel == "7.3") && d.chance(40) {
            for _ in 0..1 + d.below(2) {
                let kb = d.pick(&[16, 32, 64, 128, 256, 512, 1024]);
                let w = d.pick(&["always", "always", "madvise", "never", "inherit"]);
                writeln!(
                    out,
                    "\"kernel/mm/transparent_hugepage/hugepages-{kb}kB/enabled\" = \"{w}\""
                )
                .unwrap();
            }
            // 7.3's khugepaged collapses into those sizes.
            if kernel == "7.3" && d.chance(50) {
                khugepaged_knobs(d, out);
            }
        }
        // Shared anonymous mTHP (features.shmem_mthp, on by default on
        // 6.12 and 7.3): one size's shmem_enabled.
        if (kernel == "6.12" || kernel == "7.3") && d.chance(20) {
            let kb = d.pick(&[16, 64, 128, 512, 2048]);
            let w = d.pick(&["always", "inherit", "within_size", "advise", "never"]);
            writeln!(
                out,
                "\"kernel/mm/transparent_hugepage/hugepages-{kb}kB/shmem_enabled\" = \"{w}\""
            )
            .unwrap();
        }
        // Anonymous THP is modelled as 6.1 has it.
        if kernel == "6.1" && d.chance(30) {
            let w = d.pick(&["always", "always", "madvise"]);
            writeln!(out, "\"kernel/mm/transparent_hugepage/enabled\" = \"{w}\"").unwrap();
            if d.chance(30) {
                let g = d.pick(&["always", "defer", "defer+madvise", "madvise", "never"]);
                writeln!(out, "\"kernel/mm/transparent_hugepage/defrag\" = \"{g}\"").unwrap();
            }
            if d.chance(20) {
                writeln!(
                    out,
                    "\"kernel/mm/transparent_hugepage/use_zero_page\" = {}",
                    d.below(2)
                )
                .unwrap();
            }
            if d.chance(40) {
                khugepaged_knobs(d, out);
            }
        }
        // zswap: 6.1's zbud (which writes back when its pool fills) or
        // zsmalloc; 6.12's and 7.3's write back from their LRUs, with a
        // pool small enough to fill, and from reclaim (the shrinker).
        if kernel != "5.10" && d.chance(30) {
            let z = "module/zswap/parameters";
            writeln!(out, "\"{z}/enabled\" = {}", d.chance(85)).unwrap();
            writeln!(out, "\"{z}/compressor\" = \"{}\"", d.pick(&["lzo", "lz4"])).unwrap();
            if kernel != "7.3" {
                let zpool = d.pick(&["zbud", "zsmalloc"]);
                writeln!(out, "\"{z}/zpool\" = \"{zpool}\"").unwrap();
            }
            if d.chance(50) {
                let pct = d.pick(&[0u32, 1, 2, 20, 50]);
                writeln!(out, "\"{z}/max_pool_percent\" = {pct}").unwrap();
            }
            if d.chance(20) {
                let pct = d.pick(&[0u32, 50, 90, 100]);
                writeln!(out, "\"{z}/accept_threshold_percent\" = {pct}").unwrap();
            }
            if kernel != "6.1" {
                if d.chance(40) {
                    writeln!(out, "\"{z}/shrinker_enabled\" = {}", d.chance(75)).unwrap();
                }
            } else if d.chance(20) {
                writeln!(out, "\"{z}/same_filled_pages_enabled\" = {}", d.chance(50)).unwrap();
            }
            if kernel == "6.1" && d.chance(10) {
                writeln!(
                    out,
                    "\"{z}/non_same_filled_pages_enabled\" = {}",
                    d.chance(50)
                )
                .unwrap();
            }
        }
        if thp {
            let w = d.pick(&["always", "advise", "within_size", "never", "deny", "force"]);
            writeln!(
                out,
                "\"kernel/mm/transparent_hugepage/shmem_enabled\" = \"{w}\""
            )
            .unwrap();
        }
    }
}

/// `[features]`: the seeds' mechanisms and the later releases' large-folio
/// ones, each on or off.
fn draw_features(d: &mut Draw, out: &mut String, kernel: &str) {
    if d.chance(15) {
        out.push_str("[features]\n");
        writeln!(out, "batched_rmap_unmap = {}", d.chance(50)).unwrap();
        writeln!(out, "wp_reuse_swapcache = {}", d.chance(50)).unwrap();
        writeln!(out, "madv_pageout_split = {}", d.chance(50)).unwrap();
        writeln!(out, "memcg_rstat_per_memcg = {}", d.chance(50)).unwrap();
        // The later releases' large-folio mechanisms, each off as the
        // release before it had them.
        if kernel == "6.12" || kernel == "7.3" {
            for f in [
                "anon_mthp_swapout",
                "anon_large_swapin",
                "shmem_large_swapout",
                "shmem_skip_swapcache",
            ] {
                if d.chance(30) {
                    writeln!(out, "{f} = {}", d.chance(50)).unwrap();
                }
            }
        }
    }
}

/// `[[swap]]` devices: none, one or two.
fn draw_swaps(d: &mut Draw, out: &mut String) -> usize {
    let nswap = if d.chance(80) {
        1 + d.below(2) as usize
    } else {
        0
    };
    for _ in 0..nswap {
        let dev = d.pick(&["zram", "zram", "nvme", "virtio", "hdd"]);
        let size = d.pick(&[8u64, 32, 64, 256]);
        writeln!(out, "[[swap]]\ndevice = \"{dev}\"\nsize = \"{size}M\"").unwrap();
        // zram's compressor (lz4: every preset's kernel offers it) and a
        // mem_limit that a swapping workload reaches.
        if dev == "zram" && d.chance(20) {
            writeln!(out, "compressor = \"lz4\"").unwrap();
        }
        if dev == "zram" && d.chance(15) {
            let limit = d.pick(&[1u64, 4, 16]);
            writeln!(out, "mem_limit = \"{limit}M\"").unwrap();
        }
    }
    nswap
}

/// A disk sometimes, and up to two files on tmpfs or on it: (name, pages,
/// on tmpfs).
fn draw_files(d: &mut Draw, out: &mut String, memory: u64) -> Vec<(String, u64, bool)> {
    let mut files = Vec::new();
    let disk = d.chance(40);
    if disk {
        let ram = memory >= 256 && d.chance(25);
        let dev = if ram {
            "ram"
        } else {
            d.pick(&["nvme", "virtio", "hdd"])
        };
        let xfs = d.chance(25) && dev != "ram";
        let size = if xfs { 300 } else { 64 };
        writeln!(
            out,
            "[[disk]]\nname = \"d0\"\ndevice = \"{dev}\"\nsize = \"{size}M\""
        )
        .unwrap();
        if xfs {
            out.push_str("fs = \"xfs\"\n");
        }
    }
    for i in 0..d.below(3) {
        let tmpfs = !disk || d.chance(40);
        let pages = 512 * (1 + d.below(8) as u64);
        let on = if tmpfs { "tmpfs" } else { "d0" };
        writeln!(
            out,
            "[[file]]\nname = \"f{i}\"\nsize = \"{}K\"\non = \"{on}\"",
            pages * 4
        )
        .unwrap();
        files.push((format!("f{i}"), pages, tmpfs));
    }
    files
}

/// Up to two memory cgroups with their limits (and memory.oom.group,
/// protection, memory.swap.max, memory.zswap.max and, 6.12 on,
/// memory.zswap.writeback).
fn draw_cgroups(d: &mut Draw, out: &mut String, kernel: &str) -> u32 {
    let ncg = d.below(3);
    for c in 0..ncg {
        let max = d.pick(&[4u64, 6, 8, 16, 32, 64]);
        writeln!(out, "[cgroup.c{c}]\nmemory_max = \"{max}M\"").unwrap();
        if d.chance(20) {
            writeln!(out, "memory_high = \"{}M\"", max * 3 / 4 + 1).unwrap();
        }
        if d.chance(15) {
            writeln!(out, "memory_oom_group = true").unwrap();
        }
        if d.chance(15) {
            let which = d.pick(&["memory_low", "memory_min"]);
            writeln!(out, "{which} = \"{}M\"", d.pick(&[1u64, 4, 16, 64])).unwrap();
        }
        if d.chance(15) {
            let swap_max = d.pick(&["0", "100K", "1M", "4M", "16M"]);
            writeln!(out, "memory_swap_max = \"{swap_max}\"").unwrap();
        }
        if d.chance(10) {
            let zswap_max = d.pick(&["0", "16K", "256K", "4M"]);
            writeln!(out, "memory_zswap_max = \"{zswap_max}\"").unwrap();
        }
        if matches!(kernel, "6.12" | "7.3") && d.chance(10) {
            writeln!(out, "memory_zswap_writeback = false").unwrap();
        }
    }
    ncg
}

fn generate_in(bytes: &[u8], traces: Option<&Path>) -> String {
    let mut d = Draw::new(bytes);
    let mut out = String::new();
    let (memory, kernel) = draw_machine(&mut d, &mut out);
    draw_sysctls(&mut d, &mut out);
    draw_sysfs(&mut d, &mut out, kernel);
    draw_features(&mut d, &mut out, kernel);
    let nswap = draw_swaps(&mut d, &mut out);
    let files = draw_files(&mut d, &mut out, memory);
    let ncg = draw_cgroups(&mut d, &mut out, kernel);
    let mut g = Gen {
        d: &mut d,
        files,
        nswap,
        ncg,
        kernel,
        next_region: 0,
        swapper: false,
        traces,
        threads_live: false,
        in_thread: false,
    };
    for t in 0..1 + g.d.below(3) {
        writeln!(out, "[task.t{t}]").unwrap();
        if ncg > 0 && g.d.chance(60) {
            writeln!(out, "cgroup = \"c{}\"", g.d.below(ncg)).unwrap();
        }
        let instances = if g.d.chance(25) { 2 + g.d.below(2) } else { 1 };
        if instances > 1 {
            writeln!(out, "instances = {instances}").unwrap();
        }
        if g.d.chance(15) {
            let adj = g.d.pick(&[-1000, -500, 500, 1000]);
            writeln!(out, "oom_score_adj = {adj}").unwrap();
        }
        g.swapper = t == 0 && instances == 1;
        let mut regions = Vec::new();
        let n = 2 + g.d.below(8);
        let steps = g.steps(&mut regions, n, 0, true);
        writeln!(out, "steps = [\n{steps}]").unwrap();
    }
    out
}

/// `guest` (a spec's text, such as `generate` writes) as guest g0 of a
/// 2-CPU host of `host_mb` MiB with zram swap, its VMM (under `accel`:
/// "tcg" or "kvm") in a host cgroup limited to `vms_max`: each of the
/// guest's section headers goes
/// under `[vm.g0]`, its `cpus` become 1, and each of its block devices
/// (a `[[swap]]` or `[[disk]]` not in RAM) gets a host file of its size
/// (`host_file`: virtio-blk on a host file), on the host's tmpfs or on a
/// host NVMe disk, opened with QEMU's `cache` writeback or none: both
/// drawn from the guest's text, so the same guest is hosted the same way.
pub fn hosted(guest: &str, host_mb: u64, vms_max: &str, accel: &str) -> String {
    let draw = guest.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let (on_disk, direct) = (draw & 1 == 1, draw & 2 == 2);
    let mut out = format!(
        "[machine]\nmemory = \"{host_mb}M\"\ncpus = 2\n[[swap]]\ndevice = \"zram\"\nsize = \"{host_mb}M\"\n\
         [cgroup.vms]\nmemory_max = \"{vms_max}\"\n[vm.g0.host]\ncgroup = \"vms\"\naccel = \"{accel}\"\n"
    );
    // The section being copied is a block device's: its size gets a file.
    let mut block = false;
    let mut images = Vec::new();
    for line in guest.lines() {
        // One vCPU, the guests the simulator models.
        if line.starts_with("cpus = ") {
            writeln!(out, "cpus = 1").unwrap();
            continue;
        }
        if line.starts_with("threads_per_core") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("[[") {
            block = rest.starts_with("swap]]") || rest.starts_with("disk]]");
            writeln!(out, "[[vm.g0.{rest}").unwrap();
        } else if let Some(rest) = line.strip_prefix('[') {
            block = false;
            writeln!(out, "[vm.g0.{rest}").unwrap();
        } else {
            if line.starts_with("device = ") {
                block &= !line.contains("\"zram\"") && !line.contains("\"ram\"");
            }
            writeln!(out, "{line}").unwrap();
            if let Some(size) = line.strip_prefix("size = ").filter(|_| block) {
                writeln!(out, "host_file = \"img{}\"", images.len()).unwrap();
                if direct {
                    writeln!(out, "cache = \"none\"").unwrap();
                }
                images.push(size.to_string());
            }
        }
    }
    let on = match on_disk && !images.is_empty() {
        true => {
            writeln!(
                out,
                "[[disk]]\nname = \"hd\"\ndevice = \"nvme\"\nsize = \"64G\""
            )
            .unwrap();
            "hd"
        }
        false => "tmpfs",
    };
    for (i, size) in images.iter().enumerate() {
        writeln!(
            out,
            "[[file]]\nname = \"img{i}\"\nsize = {size}\non = \"{on}\""
        )
        .unwrap();
    }
    out
}

/// Writes a trace file into `dir` named by its content's hash (FNV-1a),
/// once: specs drawn on several threads may share a file, and the same
/// bytes always name the same file.
fn write_trace(dir: &Path, format: &str, content: &[u8]) -> PathBuf {
    let hash = content.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let path = dir.join(format!("trace-{hash:016x}.{format}"));
    if !path.exists() {
        // Written aside and renamed, so a reader never sees part of it.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".trace-{}-{n}.tmp", std::process::id()));
        std::fs::write(&tmp, content).expect("write a generated trace");
        std::fs::rename(&tmp, &path).expect("rename a generated trace");
    }
    path
}

/// khugepaged's knobs, each drawn or left: scans often enough to run
/// inside a short spec.
fn khugepaged_knobs(d: &mut Draw, out: &mut String) {
    let knobs: [(&str, &[u32]); 7] = [
        ("scan_sleep_millisecs", &[1, 4, 10, 100]),
        ("pages_to_scan", &[512, 4096, 65536]),
        ("max_ptes_none", &[0, 64, 511]),
        ("max_ptes_swap", &[0, 64, 511]),
        ("max_ptes_shared", &[0, 256, 511]),
        ("alloc_sleep_millisecs", &[0, 10, 60000]),
        ("defrag", &[0, 1]),
    ];
    for (name, values) in knobs {
        if d.chance(60) {
            let v = d.pick(values);
            writeln!(
                out,
                "\"kernel/mm/transparent_hugepage/khugepaged/{name}\" = {v}"
            )
            .unwrap();
        }
    }
}

impl Gen<'_, '_> {
    /// `n` steps in a scope whose regions are `regions`; `depth` bounds
    /// nesting; `may_map`: mmap and munmap allowed (not in a repeat).
    fn steps(&mut self, regions: &mut Vec<Region>, n: u32, depth: u32, may_map: bool) -> String {
        let mut out = String::new();
        for _ in 0..n {
            if self.d.exhausted() && !out.is_empty() {
                break;
            }
            let s = self.step(regions, depth, may_map);
            out.push_str(&s);
            out.push_str(",\n");
        }
        out
    }

    fn region_step(&mut self, regions: &mut [Region]) -> Option<(String, u64, bool)> {
        if regions.is_empty() {
            return None;
        }
        let r = &regions[self.d.below(regions.len() as u32) as usize];
        Some((r.name.clone(), r.pages, r.private_anon))
    }

    /// `, offset = …, length = …` inside `pages`, or nothing.
    fn range(&mut self, pages: u64) -> String {
        if pages < 2 || self.d.chance(50) {
            return String::new();
        }
        let first = self.d.below(pages as u32) as u64;
        let len = 1 + self.d.below((pages - first) as u32) as u64;
        format!(", offset = \"{}K\", length = \"{}K\"", first * 4, len * 4)
    }

    fn mmap(&mut self, regions: &mut Vec<Region>) -> String {
        let name = format!("r{}", self.next_region);
        self.next_region += 1;
        let disk_files: Vec<usize> = (0..self.files.len())
            .filter(|&i| !self.files[i].2)
            .collect();
        let tmpfs_files: Vec<usize> = (0..self.files.len()).filter(|&i| self.files[i].2).collect();
        let kind = self.d.below(5);
        let (text, pages) = match kind {
            2 if !tmpfs_files.is_empty() => {
                let f = &self.files[self.d.pick(&tmpfs_files)];
                (
                    format!(
                        "kind = \"shmem\", file = \"{}\", size = \"{}K\"",
                        f.0,
                        f.1 * 4
                    ),
                    f.1,
                )
            }
            3 if !disk_files.is_empty() => {
                let f = &self.files[self.d.pick(&disk_files)];
                let kind = if self.d.chance(70) {
                    "file"
                } else {
                    "file_private"
                };
                (
                    format!(
                        "kind = \"{kind}\", file = \"{}\", size = \"{}K\"",
                        f.0,
                        f.1 * 4
                    ),
                    f.1,
                )
            }
            4 => {
                let pages = 512 * (1 + self.d.below(8) as u64);
                (
                    format!("kind = \"shared_anon\", size = \"{}K\"", pages * 4),
                    pages,
                )
            }
            _ => {
                let pages = 64 * (1 + self.d.below(64) as u64);
                (format!("kind = \"anon\", size = \"{}K\"", pages * 4), pages)
            }
        };
        regions.push(Region {
            name: name.clone(),
            pages,
            private_anon: text.starts_with("kind = \"anon\""),
        });
        // What the pages hold, for zram's compressor (the pages that swap).
        let swappable = !text.contains("\"file");
        let content = match swappable && self.d.chance(25) {
            true => format!(", content = {}", self.content()),
            false => String::new(),
        };
        format!("{{ op = \"mmap\", name = \"{name}\", {text}{content} }}")
    }

    /// A page content: one kind, a ratio, or a mix.
    fn content(&mut self) -> String {
        let one = |d: &mut Draw| -> String {
            match d.below(6) {
                0 => "kind = \"zero\"".into(),
                1 => "kind = \"same\"".into(),
                2 => "kind = \"text\"".into(),
                3 => "kind = \"random\"".into(),
                _ => format!("ratio = {}", d.pick(&["1.5", "2.0", "2.5", "4.0", "8.0"])),
            }
        };
        if self.d.chance(70) {
            return format!("{{ {} }}", one(self.d));
        }
        let (a, b) = (one(self.d), one(self.d));
        if a == b {
            return format!("{{ {a} }}");
        }
        let (wa, wb) = (1 + self.d.below(4), 1 + self.d.below(4));
        format!("[{{ {a}, weight = {wa} }}, {{ {b}, weight = {wb} }}]")
    }

    fn touch(&mut self, name: &str, pages: u64) -> String {
        let order = self.d.pick(&["seq", "rev", "shuffle", "uniform", "zipf"]);
        let write = self.d.pick(&["0", "0.3", "1"]);
        let seed = self.d.below(1000);
        let amount = match order {
            "uniform" | "zipf" => format!(", count = {}", 1 + self.d.below(4 * pages as u32 + 1)),
            _ => String::new(),
        };
        let range = if amount.is_empty() {
            self.range(pages)
        } else {
            String::new()
        };
        format!(
            "{{ op = \"touch\", region = \"{name}\", order = \"{order}\", write = {write}, seed = {seed}{amount}{range} }}"
        )
    }

    /// A `trace` step replaying into region `name` of `pages` pages: a
    /// file of up to 4,096 requests in one of the three formats, its ids
    /// inside the range or (with `map = "modulo"`) wider, written into
    /// `dir` under a name its content decides.
    fn trace(&mut self, dir: &Path, name: &str, pages: u64) -> String {
        let format = self.d.pick(&["txt", "csv", "oracleGeneral"]);
        let n = 1 + self.d.below(4096) as u64;
        let modulo = self.d.chance(25);
        let span = if modulo { pages * 4 } else { pages };
        // The ids from a generator seeded by the bytes (a few bytes for a
        // whole file), skewed towards low pages half the time.
        let mut x = u64::from(self.d.below(1 << 24)) | 1;
        let skewed = self.d.chance(50);
        let write_col = format == "csv" && self.d.chance(50);
        let mut ids = Vec::with_capacity(n as usize);
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = if skewed {
                (x % span) * (x >> 40 & 0xff) / 256
            } else {
                x % span
            };
            ids.push((id, x >> 32 & 3 == 0));
        }
        let content: Vec<u8> = match format {
            "oracleGeneral" => ids
                .iter()
                .enumerate()
                .flat_map(|(i, &(id, _))| {
                    let mut r = Vec::with_capacity(24);
                    r.extend_from_slice(&(i as u32).to_le_bytes());
                    r.extend_from_slice(&id.to_le_bytes());
                    r.extend_from_slice(&4096u32.to_le_bytes());
                    r.extend_from_slice(&(-1i64).to_le_bytes());
                    r
                })
                .collect(),
            "csv" => {
                let mut t = String::from("time,obj_id,op\n");
                for (i, &(id, w)) in ids.iter().enumerate() {
                    let op = if w { "set" } else { "get" };
                    writeln!(t, "{i},{id},{op}").unwrap();
                }
                t.into_bytes()
            }
            _ => ids
                .iter()
                .map(|&(id, _)| format!("{id}\n"))
                .collect::<String>()
                .into_bytes(),
        };
        let path = write_trace(dir, format, &content);
        let mut step = format!(
            "{{ op = \"trace\", region = \"{name}\", file = \"{}\"",
            path.display()
        );
        if format == "csv" {
            step.push_str(", header = true, obj_id_col = 2");
            if write_col {
                step.push_str(", write_col = 3");
            }
        }
        if !write_col {
            let write = self.d.pick(&["0", "0.3", "1"]);
            write!(step, ", write = {write}, seed = {}", self.d.below(1000)).unwrap();
        }
        if modulo {
            step.push_str(", map = \"modulo\"");
        }
        if self.d.chance(20) {
            write!(step, ", count = {}", 1 + self.d.below(n as u32)).unwrap();
        }
        step.push_str(" }");
        step
    }

    fn step(&mut self, regions: &mut Vec<Region>, depth: u32, may_map: bool) -> String {
        if may_map && (regions.is_empty() || self.d.chance(12)) {
            return self.mmap(regions);
        }
        let kind = self.d.below(20);
        match (kind, self.region_step(regions)) {
            (0..=6, Some((name, pages, _))) => match self.traces {
                Some(dir) if self.d.chance(15) => self.trace(dir, &name, pages),
                _ => self.touch(&name, pages),
            },
            (7, Some((name, pages, private_anon))) => self.madvise(&name, pages, private_anon),
            (8, Some(_)) if depth < 2 && self.d.chance(30) => {
                // A thread on the task's regions: it maps and unmaps
                // nothing of its own, and the task unmaps nothing until
                // its next wait.
                self.threads_live = false;
                let n = 1 + self.d.below(4);
                let in_thread = std::mem::replace(&mut self.in_thread, true);
                let body = self.steps(&mut regions.clone(), n, depth + 1, false);
                self.in_thread = in_thread;
                self.threads_live = true;
                format!("{{ op = \"thread\", steps = [\n{body}] }}")
            }
            (8, Some(_)) if depth < 2 => {
                let mut child = regions.clone();
                let n = 1 + self.d.below(4);
                let live = std::mem::take(&mut self.threads_live);
                let in_thread = std::mem::take(&mut self.in_thread);
                let body = self.steps(&mut child, n, depth + 1, true);
                self.threads_live = live;
                self.in_thread = in_thread;
                format!("{{ op = \"fork\", steps = [\n{body}] }}")
            }
            (9, _) if depth < 2 => {
                let n = self.d.below(3);
                let body = self.steps(regions, n, depth + 1, false);
                let times = 1 + self.d.below(3);
                format!("{{ op = \"repeat\", times = {times}, steps = [\n{body}] }}")
            }
            (10, _) if depth < 2 => {
                let n = 1 + self.d.below(3);
                let live = std::mem::take(&mut self.threads_live);
                let in_thread = std::mem::take(&mut self.in_thread);
                let body = self.steps(&mut Vec::new(), n, depth + 1, true);
                self.threads_live = live;
                self.in_thread = in_thread;
                format!("{{ op = \"spawn\", steps = [\n{body}] }}")
            }
            (11, _) if self.nswap > 0 && self.swapper && depth == 0 => {
                // Off, then on again later in the same task.
                let dev = self.d.below(self.nswap as u32);
                self.swapper = false;
                let between = match self.region_step(regions) {
                    Some((name, pages, _)) => format!("{},\n", self.touch(&name, pages)),
                    None => String::new(),
                };
                format!(
                    "{{ op = \"swapoff\", device = {dev} }},\n{between}{{ op = \"swapon\", device = {dev} }}"
                )
            }
            (12 | 13, _) if !self.files.is_empty() => {
                let f = self.files[self.d.below(self.files.len() as u32) as usize].clone();
                let op = if kind == 12 { "write" } else { "read" };
                let range = self.range(f.1);
                let chunk = self.d.pick(&[4u64, 16, 64, 128]);
                format!(
                    "{{ op = \"{op}\", file = \"{}\"{range}, chunk = \"{chunk}K\" }}",
                    f.0
                )
            }
            (14, _) if !self.files.is_empty() => {
                let f = self.files[self.d.below(self.files.len() as u32) as usize].clone();
                match self.d.below(3) {
                    0 => format!("{{ op = \"fsync\", file = \"{}\" }}", f.0),
                    1 => format!("{{ op = \"stream\", file = \"{}\", window = \"1M\" }}", f.0),
                    _ => "{ op = \"drop_caches\" }".to_string(),
                }
            }
            (15, Some((name, _, _))) if may_map && !self.threads_live && self.d.chance(50) => {
                regions.retain(|r| r.name != name);
                format!("{{ op = \"munmap\", region = \"{name}\" }}")
            }
            // No kvstore on a region a thread shares.
            (16, Some((name, pages, _)))
                if pages >= 256 && !self.in_thread && !self.threads_live =>
            {
                // One server shape per region: later steps must match it.
                let requests = 1 + self.d.below(2000);
                format!(
                    "{{ op = \"kvstore\", region = \"{name}\", keys = 100, value_size = \"1K\", requests = {requests} }}"
                )
            }
            (17, _) if self.d.chance(50) => self.set(),
            (17, _) => format!(
                "{{ op = \"sleep\", duration = \"{}us\" }}",
                1 + self.d.below(500)
            ),
            (18, _) => format!("{{ op = \"phase\", name = \"p{}\" }}", self.d.below(4)),
            (19, _) => {
                self.threads_live = false;
                "{ op = \"wait\" }".to_string()
            }
            (_, Some((name, pages, _))) => self.touch(&name, pages),
            (_, None) => format!(
                "{{ op = \"compute\", duration = \"{}us\" }}",
                1 + self.d.below(100)
            ),
        }
    }

    /// A `set` step: a cgroup's limit (reclaiming down to a lower one at
    /// once) or a sysctl or sysfs knob.
    fn set(&mut self) -> String {
        // Or proactive reclaim (memory.reclaim came in 5.19, its
        // swappiness= after 6.1).
        if self.ncg > 0 && self.kernel != "5.10" && self.d.chance(25) {
            let c = self.d.below(self.ncg);
            let amount = self.d.pick(&[1u64, 4, 16, 64]);
            let swappiness = if self.kernel != "6.1" && self.d.chance(50) {
                format!(", swappiness = {}", self.d.below(201))
            } else {
                String::new()
            };
            return format!(
                "{{ op = \"reclaim\", cgroup = \"c{c}\", amount = \"{amount}M\"{swappiness} }}"
            );
        }
        let (key, value) = match self.d.below(6) {
            0 | 1 if self.ncg > 0 => {
                let c = self.d.below(self.ncg);
                let field =
                    self.d
                        .pick(&["memory_max", "memory_max", "memory_high", "memory_swap_max"]);
                let value = match self.d.pick(&[0u64, 4, 8, 16, 32, 64]) {
                    0 => "\"max\"".to_string(),
                    m => format!("\"{m}M\""),
                };
                (format!("\"cgroup.c{c}.{field}\""), value)
            }
            2 => (
                "'sysctl.\"vm.swappiness\"'".into(),
                self.d.below(201).to_string(),
            ),
            3 => (
                "'sysctl.\"vm.page-cluster\"'".into(),
                self.d.below(5).to_string(),
            ),
            // The watermarks recomputed mid-run (a higher min_free_kbytes
            // may wake kswapd at once, or leave a small machine out of
            // memory: a clear error).
            4 if self.d.chance(50) => (
                "'sysctl.\"vm.watermark_scale_factor\"'".into(),
                self.d.pick(&[1u32, 10, 100, 1000, 3000]).to_string(),
            ),
            4 if self.d.chance(50) => (
                "'sysctl.\"vm.min_free_kbytes\"'".into(),
                self.d.pick(&[128u32, 1024, 4096, 16384]).to_string(),
            ),
            _ => (
                "'sysfs.\"kernel/mm/swap/vma_ra_enabled\"'".into(),
                self.d.chance(50).to_string(),
            ),
        };
        format!("{{ op = \"set\", key = {key}, value = {value} }}")
    }

    fn madvise(&mut self, name: &str, pages: u64, private_anon: bool) -> String {
        let advice = self.d.pick(&[
            "pageout",
            "pageout",
            "cold",
            "dontneed",
            "free",
            "willneed",
            "sequential",
            "random",
            "normal",
            "hugepage",
            "nohugepage",
        ]);
        let advice = if advice == "free" && !private_anon {
            "pageout"
        } else {
            advice
        };
        // The others apply to whole regions only.
        let ranged = ["pageout", "cold", "dontneed", "free", "willneed"].contains(&advice);
        let range = if ranged {
            self.range(pages)
        } else {
            String::new()
        };
        format!("{{ op = \"madvise\", region = \"{name}\", advice = \"{advice}\"{range} }}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_generated_specs_are_valid() {
        let mut valid = 0;
        for seed in 0..200u32 {
            let bytes: Vec<u8> = (0..512u32)
                .map(|i| (seed.wrapping_mul(2654435761) ^ i.wrapping_mul(40503)).to_le_bytes()[1])
                .collect();
            let text = generate(&bytes);
            match mmsim_spec::parse_str(&text, "gen.toml", &[]) {
                Ok(_) => valid += 1,
                Err(e) => eprintln!("{e}\n{text}"),
            }
        }
        assert!(
            valid >= 180,
            "only {valid} of 200 generated specs are valid"
        );
    }

    #[test]
    fn the_same_bytes_make_the_same_spec() {
        let bytes = [7u8, 200, 3, 99, 42, 0, 255, 17, 5, 9, 130];
        assert_eq!(generate(&bytes), generate(&bytes));
        assert!(generate(&[]).contains("[machine]"));
    }
}

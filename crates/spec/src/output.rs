//! The result of a run: the document `mmsim run --json` prints and the
//! native runner produces for a real kernel (docs/output.md).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Output format version.
    pub format: u32,
    pub engine: Engine,
    pub spec: String,
    /// Every knob in force: `section:key` → value.
    pub knobs: BTreeMap<String, String>,
    pub machine: MachineInfo,
    /// Simulated (or wall, for a real kernel) time of the whole run, ns.
    pub elapsed_ns: u64,
    pub tasks: Vec<TaskResult>,
    /// /proc/vmstat differences over the whole run, by kernel name.
    pub vmstat: BTreeMap<String, i64>,
    pub cgroups: BTreeMap<String, CgroupResult>,
    pub integrity: IntegrityResult,
    /// Simulated time per kernel function, ns (absent for a real kernel).
    pub profile: BTreeMap<String, u64>,
    /// The profile by call path, callers before callees (docs/output.md).
    #[serde(default)]
    pub profile_tree: Vec<ProfileRow>,
    /// Event histograms by site (docs/output.md); empty for a real kernel.
    #[serde(default)]
    pub histograms: BTreeMap<String, Vec<HistBucket>>,
    /// /proc/interrupts rows' differences over the whole run, summed over
    /// the CPUs, by row name (`TLB`: TLB-shootdown IPIs taken); rows that
    /// did not move are left out (so is the whole map when none did).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interrupts: BTreeMap<String, u64>,
    /// Pressure stall information of the whole machine, as
    /// /proc/pressure/{memory,io,cpu} show it: the stall over the run
    /// (`total_us`: the end's total less the start's) and the averages
    /// read at the end. Absent where the kernel has no PSI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure: Option<Pressure>,
    /// zram's `mm_stat` of each zram swap device as the last task ends,
    /// when a region of the spec states its content (docs/output.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zram: Vec<ZramMmStat>,
    /// zswap's debugfs counters (/sys/kernel/debug/zswap/) as the last
    /// task ends, when the spec sets a zswap parameter (docs/output.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zswap: Option<ZswapStats>,
    /// KVM's statistics of a guest run under KVM (`accel = "kvm"`), by
    /// their names in /sys/kernel/debug/kvm/ (`exits`, `pf_taken`,
    /// `pf_fixed`, `remote_tlb_flush`), in that guest's document; empty
    /// (left out) otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kvm: BTreeMap<String, u64>,
    /// Each guest's own run (`[vm.NAME]`), by name: its tasks, counters
    /// and cgroups, as the guest's kernel shows them. Its VMM is a task of
    /// this (the host's) run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vms: BTreeMap<String, RunResult>,
}

/// /sys/block/zramN/mm_stat, bytes where the kernel gives bytes.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZramMmStat {
    /// The `[[swap]]` entry's index in the spec.
    pub swap: usize,
    pub orig_data_size: u64,
    pub compr_data_size: u64,
    pub mem_used_total: u64,
    pub mem_used_max: u64,
    pub same_pages: u64,
    pub huge_pages: u64,
}

impl ZramMmStat {
    /// A field by its mm_stat name (fidelity's `zram/N/FIELD`, sweep's
    /// `zramN.FIELD`); None for a name it does not have.
    pub fn field(&self, name: &str) -> Option<u64> {
        Some(match name {
            "orig_data_size" => self.orig_data_size,
            "compr_data_size" => self.compr_data_size,
            "mem_used_total" => self.mem_used_total,
            "mem_used_max" => self.mem_used_max,
            "same_pages" => self.same_pages,
            "huge_pages" => self.huge_pages,
            _ => return None,
        })
    }

    /// Parses mm_stat's line (orig_data_size compr_data_size
    /// mem_used_total mem_limit mem_used_max same_pages pages_compacted
    /// huge_pages ...).
    pub fn parse(swap: usize, line: &str) -> Option<ZramMmStat> {
        let v: Vec<u64> = line
            .split_whitespace()
            .map(|w| w.parse().ok())
            .collect::<Option<_>>()?;
        (v.len() >= 8).then(|| ZramMmStat {
            swap,
            orig_data_size: v[0],
            compr_data_size: v[1],
            mem_used_total: v[2],
            mem_used_max: v[4],
            same_pages: v[5],
            huge_pages: v[7],
        })
    }
}

/// /sys/kernel/debug/zswap/: the pool's size and what it holds, and why
/// stores were refused.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZswapStats {
    /// Bytes of the pool's pages.
    pub pool_total_size: u64,
    pub stored_pages: u64,
    pub same_filled_pages: u64,
    pub pool_limit_hit: u64,
    pub written_back_pages: u64,
    pub reject_reclaim_fail: u64,
    pub reject_alloc_fail: u64,
    pub reject_kmemcache_fail: u64,
    pub reject_compress_poor: u64,
    pub duplicate_entry: u64,
    /// Pages stored as they are, not compressing below a page (6.18+;
    /// absent from the document where 0, as before 6.18).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stored_incompressible_pages: u64,
    /// Stores refused because the page did not compress into a page
    /// (6.12; absent from the document where 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reject_compress_fail: u64,
}

impl ZswapStats {
    /// The debugfs files, in this order (fidelity's `zswap/FILE`).
    pub const FILES: [&'static str; 12] = [
        "pool_total_size",
        "stored_pages",
        "same_filled_pages",
        "pool_limit_hit",
        "written_back_pages",
        "reject_reclaim_fail",
        "reject_alloc_fail",
        "reject_kmemcache_fail",
        "reject_compress_poor",
        "duplicate_entry",
        "stored_incompressible_pages",
        "reject_compress_fail",
    ];

    fn slot(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "pool_total_size" => &mut self.pool_total_size,
            "stored_pages" => &mut self.stored_pages,
            "same_filled_pages" => &mut self.same_filled_pages,
            "pool_limit_hit" => &mut self.pool_limit_hit,
            "written_back_pages" => &mut self.written_back_pages,
            "reject_reclaim_fail" => &mut self.reject_reclaim_fail,
            "reject_alloc_fail" => &mut self.reject_alloc_fail,
            "reject_kmemcache_fail" => &mut self.reject_kmemcache_fail,
            "reject_compress_poor" => &mut self.reject_compress_poor,
            "duplicate_entry" => &mut self.duplicate_entry,
            "stored_incompressible_pages" => &mut self.stored_incompressible_pages,
            "reject_compress_fail" => &mut self.reject_compress_fail,
            _ => return None,
        })
    }

    /// The files later releases added, in a document (and a sweep's
    /// columns) only where a run counted something.
    pub const ONLY_WHERE_SET: [&'static str; 2] =
        ["stored_incompressible_pages", "reject_compress_fail"];

    /// A counter by its debugfs file name; None for a name it lacks.
    pub fn field(&self, name: &str) -> Option<u64> {
        let mut c = *self;
        c.slot(name).map(|v| *v)
    }

    /// Sets a counter by its debugfs file name (false: no such file).
    pub fn set(&mut self, name: &str, v: u64) -> bool {
        self.slot(name).map(|s| *s = v).is_some()
    }
}

/// The three pressure files of a group (the machine or a cgroup).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct Pressure {
    pub memory: PressureResource,
    pub io: PressureResource,
    pub cpu: PressureResource,
}

/// One pressure file: its `some` and `full` lines. The machine's cpu
/// `full` is all zeros, as the kernel prints it (undefined there).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct PressureResource {
    pub some: PressureLine,
    pub full: PressureLine,
}

/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=0`: the averages (per
/// cent of wall time stalled, decaying over 10, 60 and 300 s, with the
/// kernel's two decimals) and the stalled time, µs.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct PressureLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_us: u64,
}

impl Pressure {
    /// `self` with each total less `start`'s (the stall between two
    /// reads); the averages are `self`'s.
    pub fn since(&self, start: &Pressure) -> Pressure {
        let line = |a: PressureLine, b: PressureLine| PressureLine {
            total_us: a.total_us.saturating_sub(b.total_us),
            ..a
        };
        let res = |a: PressureResource, b: PressureResource| PressureResource {
            some: line(a.some, b.some),
            full: line(a.full, b.full),
        };
        Pressure {
            memory: res(self.memory, start.memory),
            io: res(self.io, start.io),
            cpu: res(self.cpu, start.cpu),
        }
    }

    /// The resource by its file's name (`memory`, `io`, `cpu`).
    pub fn resource(&self, name: &str) -> Option<&PressureResource> {
        match name {
            "memory" => Some(&self.memory),
            "io" => Some(&self.io),
            "cpu" => Some(&self.cpu),
            _ => None,
        }
    }
}

/// One call path of the profile: `path` is the functions from the
/// outermost to this one, `;`-separated (folded-stack form).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ProfileRow {
    pub path: String,
    /// Time with this function innermost.
    pub self_ns: u64,
    /// Time in this function and its callees.
    pub total_ns: u64,
}

/// One power-of-two bucket: `count` events with `lo ≤ value < hi`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistBucket {
    pub lo: u64,
    pub hi: u64,
    pub count: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Engine {
    /// "mmsim" or "linux".
    pub name: String,
    /// mmsim's version, or the kernel's release.
    pub version: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MachineInfo {
    pub memory_bytes: u64,
    pub cpus: u32,
    /// The CPUs' arrangement, when not one socket without SMT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<crate::Topology>,
    /// MemTotal as the kernel reports it, bytes.
    pub mem_total_bytes: u64,
    /// Free memory when the workload started, bytes.
    pub mem_free_at_start_bytes: u64,
    pub min_free_kbytes: u64,
    pub zones: Vec<ZoneInfo>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ZoneInfo {
    pub name: String,
    pub managed_pages: u64,
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TaskResult {
    /// `name` for one instance, `name#i` for several.
    pub name: String,
    pub cgroup: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub phases: Vec<PhaseResult>,
    /// The client's view of the task's `kvstore` steps (all of them
    /// together), as memtier reports it; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<KvResult>,
    /// The OOM killer ended the task (it, or the process it is a thread
    /// of, was the victim); absent for a task that ran to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_kill: Option<OomKillResult>,
}

/// An OOM kill, as the kernel's log tells it ("oom-kill:constraint=…"
/// and "Killed process … anon-rss:…").
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct OomKillResult {
    /// "memcg": a cgroup's memory.max could not be met
    /// (CONSTRAINT_MEMCG); "global": the machine's memory and swap
    /// (CONSTRAINT_NONE).
    pub constraint: String,
    /// The cgroup at its limit (memcg only; the kernel's `oom_memcg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_memcg: Option<String>,
    /// When the kill was made (for a real run: when the runner saw the
    /// task end, a little after).
    pub at_ns: u64,
    /// The victim process's memory at the kill, KiB (absent from a real
    /// run whose kernel log was not readable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anon_rss_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_rss_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shmem_rss_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgtables_kb: Option<u64>,
    pub oom_score_adj: i16,
}

/// One lruvec of /sys/kernel/debug/lru_gen.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LruGenLruvec {
    /// The memcg's cgroup path ("/" for the root).
    pub memcg: String,
    /// `mem_cgroup_id` (the root's is 1).
    pub id: u16,
    pub node: u32,
    /// The live generations, oldest (anon's min_seq) first.
    pub gens: Vec<LruGenGen>,
}

/// One generation: its sequence number, age and size.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct LruGenGen {
    pub seq: u64,
    /// Milliseconds since the generation was created.
    pub age_ms: u64,
    /// Pages of anon and file memory in it.
    pub anon: u64,
    pub file: u64,
}

impl LruGenLruvec {
    /// Parses /sys/kernel/debug/lru_gen: a `memcg ID PATH` line per memcg,
    /// a ` node NID` line per node, then `SEQ AGE_MS ANON FILE` per
    /// generation. Lines that fit none of these are skipped.
    pub fn parse_debugfs(text: &str) -> Vec<LruGenLruvec> {
        let mut out: Vec<LruGenLruvec> = Vec::new();
        let (mut memcg, mut id) = (String::new(), 0);
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["memcg", i, path] => {
                    (memcg, id) = (path.to_string(), i.parse().unwrap_or(0));
                }
                ["memcg", i] => (memcg, id) = (String::new(), i.parse().unwrap_or(0)),
                ["node", nid] => out.push(LruGenLruvec {
                    memcg: memcg.clone(),
                    id,
                    node: nid.parse().unwrap_or(0),
                    gens: Vec::new(),
                }),
                [seq, age, anon, file, ..] => {
                    let num = |w: &str| w.trim_end_matches(['x', ' ']).parse::<u64>().ok();
                    if let (Some(lv), Some(seq), Some(age_ms), Some(anon), Some(file)) =
                        (out.last_mut(), num(seq), num(age), num(anon), num(file))
                    {
                        lv.gens.push(LruGenGen {
                            seq,
                            age_ms,
                            anon,
                            file,
                        });
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The lruvec in debugfs's text form.
    pub fn debugfs_text(&self) -> String {
        let mut s = format!(
            "memcg {:5} {}\n node {:5}\n",
            self.id, self.memcg, self.node
        );
        // seq, age (ms), anon pages, file pages, as debugfs aligns them.
        for g in &self.gens {
            s += &format!(
                " {:10} {:10} {:10}  {:10} \n",
                g.seq, g.age_ms, g.anon, g.file
            );
        }
        s
    }
}

/// memtier_benchmark's figures for a task's `kvstore` requests.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct KvResult {
    pub requests: u64,
    pub sets: u64,
    pub gets: u64,
    pub hits: u64,
    pub misses: u64,
    /// Bytes sent and received.
    pub bytes: u64,
    /// Time spent in kvstore steps, ns.
    pub elapsed_ns: u64,
    /// Sum over requests of the time from its batch's start (the client
    /// sends `pipeline` requests) to the batch's last reply, ns.
    pub latency_sum_ns: u64,
}

impl KvResult {
    /// Counts one finished request.
    pub fn record(&mut self, set: bool, hit: bool, bytes: u64) {
        self.requests += 1;
        self.bytes += bytes;
        if set {
            self.sets += 1;
        } else {
            self.gets += 1;
            if hit {
                self.hits += 1;
            } else {
                self.misses += 1;
            }
        }
    }

    /// Adds another step's figures (its time to the elapsed time).
    pub fn add(&mut self, o: &KvResult) {
        self.requests += o.requests;
        self.sets += o.sets;
        self.gets += o.gets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.bytes += o.bytes;
        self.elapsed_ns += o.elapsed_ns;
        self.latency_sum_ns += o.latency_sum_ns;
    }

    fn per_sec(&self, n: u64) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            n as f64 * 1e9 / self.elapsed_ns as f64
        }
    }
    pub fn ops_per_sec(&self) -> f64 {
        self.per_sec(self.requests)
    }
    pub fn hits_per_sec(&self) -> f64 {
        self.per_sec(self.hits)
    }
    pub fn misses_per_sec(&self) -> f64 {
        self.per_sec(self.misses)
    }
    /// memtier's KB/sec (1024 bytes).
    pub fn kb_per_sec(&self) -> f64 {
        self.per_sec(self.bytes) / 1024.0
    }
    /// Mean latency per request, ms.
    pub fn latency_ms(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.latency_sum_ns as f64 / self.requests as f64 / 1e6
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PhaseResult {
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
    /// /proc/vmstat differences between the phase's start and end.
    pub vmstat: BTreeMap<String, i64>,
    /// The client's view of the kvstore steps that ran in the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<KvResult>,
    /// Requests the phase's `trace` steps replayed (absent without one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trace_requests: u64,
    /// The multi-gen LRU's generations at the phase's end, one entry per
    /// lruvec as /sys/kernel/debug/lru_gen lists them (empty with the
    /// classic LRU, or where the real kernel's debugfs is not mounted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lru_gen: Vec<LruGenLruvec>,
    /// The machine's pressure over the phase (totals: the stall between
    /// its start and end; averages as read at its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure: Option<Pressure>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CgroupResult {
    /// memory.current when the workload's last step finished, bytes.
    pub memory_current: u64,
    /// Largest memory.current seen, bytes; absent on a kernel without
    /// memory.peak (cgroup v2 before 5.19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak: Option<u64>,
    pub memory_swap_current: u64,
    /// memory.stat at the same moment (sizes in bytes).
    pub memory_stat: BTreeMap<String, i64>,
    pub memory_events: BTreeMap<String, u64>,
    /// memory.swap.events (high, max, fail); absent where it was not read
    /// (cgroup v1, results recorded before it was).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory_swap_events: BTreeMap<String, u64>,
    /// The cgroup's memory.pressure, io.pressure and cpu.pressure at the
    /// same moment (totals since the run began); absent without cgroup
    /// v2's pressure files.
    #[serde(
        default,
        rename = "memory.pressure",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_pressure: Option<PressureResource>,
    #[serde(
        default,
        rename = "io.pressure",
        skip_serializing_if = "Option::is_none"
    )]
    pub io_pressure: Option<PressureResource>,
    #[serde(
        default,
        rename = "cpu.pressure",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_pressure: Option<PressureResource>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntegrityResult {
    pub pages_checked: u64,
    pub violations: u64,
    /// Times the simulator checked the kernel's invariants (`--check`),
    /// all of which held; absent without `--check` and from real kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invariant_checks: Option<u64>,
}

/// `mmsim-runner --native --zram-bench PAGES`: the kernel's zram measured
/// on its own, for `mmsim calibrate` (the runner's zram_bench.rs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ZramBench {
    /// The device's compressor (comp_algorithm).
    pub comp_algorithm: String,
    /// n: each kind is timed over n and over 2n fresh slots.
    pub pages: u64,
    /// O_DIRECT 4 KiB writes of runner-content pages (a u32 token, then
    /// zeros), ns for n and for 2n slots.
    pub write_token_ns: [u64; 2],
    /// The same of zero pages (zram's same-filled path).
    pub write_zero_ns: [u64; 2],
    pub read_token_ns: [u64; 2],
    pub read_zero_ns: [u64; 2],
    /// mm_stat's mem_used_total after the token writes, bytes.
    pub pool_bytes: u64,
    /// Token pages stored then (3n).
    pub token_pages: u64,
}

/// `mmsim-runner --native --rstat-bench REPS`: reads of a memcg's
/// memory.stat timed with nothing pending, after updates on one CPU and
/// after the same updates split over two (the runner's rstat_bench.rs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RstatBench {
    /// The reader's CPU, then the other.
    pub cpus: [usize; 2],
    /// Pages mapped, written and unmapped before each flushing read.
    pub pages: u64,
    pub reps: u64,
    /// Median ns of a read: nothing pending, after the first CPU's
    /// updates, after both CPUs'.
    pub read_ns: [u64; 3],
}

impl RstatBench {
    /// One more CPU's fold of the memcg in a flush (`memcg_rstat_flush`).
    pub fn fold_ns(&self) -> f64 {
        self.read_ns[2] as f64 - self.read_ns[1] as f64
    }
}

/// `mmsim-runner --native --zram-content-bench PAGES`: each compressor
/// and page content through the kernel's zram (zram_bench.rs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ZramContentBench {
    /// The day it ran (YYYY-MM-DD), set by `mmsim calibrate`.
    #[serde(default)]
    pub date: String,
    /// n: each pair writes n and 2n fresh slots (3n pages stored).
    pub pages: u64,
    pub entries: Vec<ZramContentEntry>,
}

/// One compressor and content kind ("token": the runner's token pages).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ZramContentEntry {
    pub compressor: String,
    pub kind: String,
    /// O_DIRECT 4 KiB writes of n and of 2n fresh slots, ns.
    pub write_ns: [u64; 2],
    /// Reads of the same slots, ns.
    pub read_ns: [u64; 2],
    /// mm_stat after the writes (3n pages stored).
    pub mm_stat: ZramMmStat,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

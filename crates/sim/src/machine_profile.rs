//! The machine profile: what each kernel primitive costs, chosen at run
//! time. `Costs::REFERENCE` holds cost_model.rs's documented values (each with its
//! derivation there); a profile file written by `mmsim calibrate` holds
//! values measured on one machine, each with its method and spread.
//!
//! The simulator reads costs through `Kernel::costs`, a plain struct of
//! `u64`s held by value: one L1 load per charge, deterministic per (spec,
//! profile). The scheduler's CFS parameters are not costs and stay `const`.

use crate::cost_model;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Defines `Costs`, its reference values and its field table from one list.
macro_rules! costs {
    ($($field:ident : $unit:literal = $reference:expr;)*) => {
        /// The cost of each primitive, ns (bytes where the unit says so).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct Costs { $(pub $field: u64,)* }

        impl Costs {
            /// cost_model.rs's documented values.
            pub const REFERENCE: Costs = Costs { $($field: $reference,)* };
            /// Every field's name and unit, in declaration order.
            pub const FIELDS: &'static [(&'static str, &'static str)] =
                &[$((stringify!($field), $unit),)*];

            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $(stringify!($field) => Some(self.$field),)*
                    _ => None,
                }
            }

            pub fn get_mut(&mut self, name: &str) -> Option<&mut u64> {
                match name {
                    $(stringify!($field) => Some(&mut self.$field),)*
                    _ => None,
                }
            }
        }
    };
}

costs! {
    touch: "ns" = cost_model::TOUCH_NS;
    fault_entry: "ns" = cost_model::FAULT_ENTRY_NS;
    clear_page: "ns" = cost_model::CLEAR_PAGE_NS;
    copy_page: "ns" = cost_model::COPY_PAGE_NS;
    alloc_page: "ns" = cost_model::ALLOC_PAGE_NS;
    free_page: "ns" = cost_model::FREE_PAGE_NS;
    split_tail: "ns" = cost_model::SPLIT_TAIL_NS;
    folio_tail: "ns" = cost_model::FOLIO_TAIL_NS;
    memcg_charge: "ns" = cost_model::MEMCG_CHARGE_NS;
    page_counter: "ns" = cost_model::PAGE_COUNTER_NS;
    lru_add: "ns" = cost_model::LRU_ADD_NS;
    mapcount: "ns" = cost_model::MAPCOUNT_NS;
    rmap_stat: "ns" = cost_model::RMAP_STAT_NS;
    pte: "ns" = cost_model::PTE_NS;
    tlb_flush: "ns" = cost_model::TLB_FLUSH_NS;
    lru_move: "ns" = cost_model::LRU_MOVE_NS;
    folio_referenced: "ns" = cost_model::FOLIO_REFERENCED_NS;
    unmap_one: "ns" = cost_model::UNMAP_ONE_NS;
    page_cache_add: "ns" = cost_model::PAGE_CACHE_ADD_NS;
    swap_slot: "ns" = cost_model::SWAP_SLOT_NS;
    zram_compress: "ns" = cost_model::ZRAM_COMPRESS_NS;
    zram_decompress: "ns" = cost_model::ZRAM_DECOMPRESS_NS;
    zram_stored_bytes: "bytes" = cost_model::ZRAM_STORED_BYTES;
    shrink_folio: "ns" = cost_model::SHRINK_FOLIO_NS;
    fork: "ns" = cost_model::FORK_NS;
    exec: "ns" = cost_model::EXEC_NS;
    copy_pte: "ns" = cost_model::COPY_PTE_NS;
    unuse_scan: "ns" = cost_model::UNUSE_SCAN_NS;
    kv_request: "ns" = cost_model::KV_REQUEST_NS;
    syscall: "ns" = cost_model::SYSCALL_NS;
    pagecache_lookup: "ns" = cost_model::PAGECACHE_LOOKUP_NS;
    map_pages: "ns" = cost_model::MAP_PAGES_NS;
    swap_read: "ns" = cost_model::SWAP_READ_NS;
    shmem_swapin: "ns" = cost_model::SHMEM_SWAPIN_NS;
    shmem_write: "ns" = cost_model::SHMEM_WRITE_NS;
    shmem_shared_fault: "ns" = cost_model::SHMEM_SHARED_FAULT_NS;
    swap_slot_free: "ns" = cost_model::SWAP_SLOT_FREE_NS;
    swap_cache_add: "ns" = cost_model::SWAP_CACHE_ADD_NS;
    swap_cache_del: "ns" = cost_model::SWAP_CACHE_DEL_NS;
    memcg_reclaim: "ns" = cost_model::MEMCG_RECLAIM_NS;
    smt_throughput: "permille" = cost_model::SMT_THROUGHPUT_PERMILLE;
    cacheline_transfer: "ns" = cost_model::CACHELINE_TRANSFER_NS;
    lock_handoff: "ns" = cost_model::LOCK_HANDOFF_NS;
    cross_socket: "permille" = cost_model::CROSS_SOCKET_PERMILLE;
    ipi: "ns" = cost_model::IPI_NS;
    ipi_handler: "ns" = cost_model::IPI_HANDLER_NS;
    mem_bw_pair: "permille" = cost_model::MEM_BW_PAIR_PERMILLE;
    mem_bw: "MB/s" = cost_model::MEM_BW_MBPS;
    memcg_rstat_flush: "ns" = cost_model::MEMCG_RSTAT_FLUSH_NS;
    kvm_exit: "ns" = cost_model::KVM_EXIT_NS;
    kvm_page_fault: "ns" = cost_model::KVM_PAGE_FAULT_NS;
}

impl Costs {
    /// An order-0 rmap add or remove with its lruvec stat update.
    pub fn rmap(&self) -> u64 {
        self.mapcount + self.rmap_stat
    }

    /// `ptep_clear_flush` of one PTE of a single-threaded mm.
    pub fn ptep_clear_flush(&self) -> u64 {
        self.pte + self.tlb_flush
    }

    /// `try_to_unmap_one`'s own work on a file folio besides its PTE flush
    /// (cost_model::UNMAP_WALK_NS). A profile where the PTE flush costs more than
    /// the whole unmap is refused when loaded, so this never saturates.
    pub fn unmap_walk(&self) -> u64 {
        self.unmap_one.saturating_sub(self.ptep_clear_flush())
    }
}

impl Default for Costs {
    fn default() -> Self {
        Costs::REFERENCE
    }
}

/// Where a profile's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Solved from its own microbenchmark.
    Measured,
    /// A share of a measured sum of constants no stock-kernel path
    /// separates, split in the documented ratio.
    Bundle,
    /// Not measured: cost_model.rs's documented value, for the reason `method`
    /// gives.
    Reference,
    /// Fitted, but the calibration runs cannot tell it from zero: the
    /// value is the fit's, the spread's top the largest the runs allow.
    Bound,
}

/// One constant of a profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostEntry {
    pub value: u64,
    pub unit: String,
    /// Its uncertainty: the low and high end of the values the runs
    /// allow (docs/calibrate.md "Uncertainty").
    pub spread: [u64; 2],
    pub basis: Basis,
    pub method: String,
}

/// Constants a profile may leave out, with their units: a profile
/// without one prices as before it was measured (l2cache.rs:
/// `copy_page_l2`, with the L2's geometry in `[machine]`).
pub const OPTIONAL: &[(&str, &str)] = &[("copy_page_l2", "ns")];

/// The largest L2 a profile may describe: the model keeps 4 bytes per
/// page of it per CPU, bounded before any run spends them (private L2s
/// are 0.25-4 MiB today).
pub const MAX_L2_BYTES: u64 = 64 << 20;

/// Whether an L2 of `bytes` in `ways` ways can be modelled: at least one
/// 4 KiB page per way (a set of pages) and at most `MAX_L2_BYTES`, so
/// its state is bounded before it is allocated (l2cache.rs).
pub fn l2_geometry_ok(bytes: u64, ways: u64) -> bool {
    let min = 4096u64.checked_mul(ways);
    ways > 0 && min.is_some_and(|min| bytes >= min) && bytes <= MAX_L2_BYTES
}

/// The machine a profile was measured on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineInfo {
    pub cpu: String,
    pub cpus: u32,
    pub kernel: String,
    /// A CPU's private L2 cache: its size and associativity (sysfs
    /// `cache/index2`), recorded by calibrate since it measures
    /// `copy_page_l2`; absent in profiles measured before (l2cache.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_ways: Option<u32>,
}

/// How a profile was made.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub command: String,
    pub mmsim: String,
    /// The last recording's date.
    pub date: String,
    pub runs: u32,
    /// Calibration sessions the runs come from (each `mmsim calibrate`
    /// with `--record` into the same folder adds one).
    #[serde(default)]
    pub sessions: u32,
}

/// A timing path predicted from the profile beside its real time:
/// informational, never solved for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckEntry {
    pub predicted_ns: u64,
    pub real_ns: u64,
    pub spread: [u64; 2],
}

/// A machine profile file (`mmsim calibrate -o FILE`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineProfile {
    pub format: u32,
    pub machine: MachineInfo,
    pub provenance: Provenance,
    pub cost: BTreeMap<String, CostEntry>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checks: BTreeMap<String, CheckEntry>,
    /// What each page content costs zram with each compressor:
    /// compressor → content kind (mmsim_spec::content::Kind::name) →
    /// entry. Measured by `mmsim calibrate --zram-content`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub compress: CompressTable,
}

/// compressor → kind → what zram makes of such a page.
pub type CompressTable = BTreeMap<String, BTreeMap<String, CompressEntry>>;

/// One page content through one compressor, in the kernel's zram.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompressEntry {
    /// compr_data_size per page stored (0: same-filled, nothing stored).
    pub bytes: u64,
    /// zram's write of one page (compression and store), ns.
    pub compress_ns: u64,
    /// zram's read of one page (decompression), ns.
    pub decompress_ns: u64,
    pub method: String,
}

/// What zram makes of a page of one kind: its compressed length and the
/// time of a write and of a read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCost {
    pub comp_len: u32,
    pub compress_ns: u64,
    pub decompress_ns: u64,
}

impl KindCost {
    /// DRAM bytes a compression or decompression of the kind moves: the
    /// page on one side, its compressed form (at most a page) on the
    /// other (membw.rs).
    pub fn compressed_bytes(&self) -> u64 {
        crate::membw::PAGE_BYTES + (self.comp_len as u64).min(crate::membw::PAGE_BYTES)
    }
}

/// What `compressor` makes of a page without stated content (the
/// runner's 4-byte token and zeros), the row `mmsim calibrate
/// --zram-content` records as "token".
pub fn token_cost(table: &CompressTable, compressor: &str) -> Result<KindCost, String> {
    table
        .get(compressor)
        .and_then(|t| t.get("token"))
        .map(|e| KindCost {
            comp_len: e.bytes as u32,
            compress_ns: e.compress_ns,
            decompress_ns: e.decompress_ns,
        })
        .ok_or_else(|| format!("the machine profile has no measurement of token pages (the runner's pages without content) through {compressor:?}; zswap needs one: `sudo mmsim calibrate --zram-content` measures the compressors this machine's kernel has"))
}

/// A kind's cost with `compressor` from `table`. A ratio the table has
/// not measured is interpolated linearly in its random share (1/ratio)
/// between the nearest measured ratios (random content is ratio 1), as
/// the generator's bytes are: zeros, then 4096/ratio random bytes.
pub fn kind_cost(
    table: &CompressTable,
    compressor: &str,
    kind: mmsim_spec::content::Kind,
) -> Result<KindCost, String> {
    use mmsim_spec::content::Kind;
    let Some(t) = table.get(compressor) else {
        let have: Vec<&str> = table.keys().map(|k| k.as_str()).collect();
        return Err(format!(
            "the machine profile has no measurement of zram's compressor {compressor:?} (it has {}); page content needs one: `sudo mmsim calibrate --zram-content` measures the compressors this machine's kernel has",
            if have.is_empty() { "none".to_string() } else { have.join(", ") }
        ));
    };
    let cost = |e: &CompressEntry| KindCost {
        comp_len: e.bytes as u32,
        compress_ns: e.compress_ns,
        decompress_ns: e.decompress_ns,
    };
    if let Some(e) = t.get(&kind.name()) {
        return Ok(cost(e));
    }
    let Kind::Ratio(r) = kind else {
        return Err(format!(
            "the machine profile has no measurement of content {} through {compressor:?}",
            kind.name()
        ));
    };
    // (random share, cost) of every measured ratio, random included.
    let mut pts: Vec<(f64, KindCost)> = t
        .iter()
        .filter_map(|(name, e)| match Kind::parse(name)? {
            Kind::Random => Some((1.0, cost(e))),
            Kind::Ratio(m) => Some((100.0 / m as f64, cost(e))),
            _ => None,
        })
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let f = 100.0 / r as f64;
    let hi = pts.iter().position(|p| p.0 >= f);
    let (Some(hi), true) = (hi, pts.first().is_some_and(|p| p.0 <= f)) else {
        return Err(format!(
            "content {} through {compressor:?}: the machine profile measured ratios from {} to 1.00 (random); expected a ratio within them",
            kind.name(),
            pts.last().map_or("none".into(), |_| format!("{:.2}", 1.0 / pts[0].0))
        ));
    };
    let (a, b) = (pts[hi - 1], pts[hi]);
    let w = (f - a.0) / (b.0 - a.0);
    let lerp = |x: u64, y: u64| (x as f64 + (y as f64 - x as f64) * w).round() as u64;
    Ok(KindCost {
        comp_len: lerp(a.1.comp_len as u64, b.1.comp_len as u64) as u32,
        compress_ns: lerp(a.1.compress_ns, b.1.compress_ns),
        decompress_ns: lerp(a.1.decompress_ns, b.1.decompress_ns),
    })
}

/// The profile a run uses on a CPU no committed profile was measured on.
pub const DEFAULT_PROFILE: &str = include_str!("../profiles/default.toml");

/// The committed profiles, one per CPU model calibrated (docs/calibrate.md
/// "Profiles per machine"): `auto` picks the one whose `machine.cpu` is
/// this machine's CPU model name.
pub const PROFILES: &[(&str, &str)] = &[
    ("default.toml", DEFAULT_PROFILE),
    (
        "intel-xeon-2-50ghz.toml",
        include_str!("../profiles/intel-xeon-2-50ghz.toml"),
    ),
    (
        "intel-xeon.toml",
        include_str!("../profiles/intel-xeon.toml"),
    ),
];

/// A folder and file name for a CPU model name: lower case, the
/// trademark signs and the words "processor" and "cpu" dropped, every
/// other run of non-alphanumerics one dash ("Intel(R) Xeon(R) Processor @
/// 2.50GHz" → "intel-xeon-2-50ghz", "AMD EPYC" → "amd-epyc"). Profiles
/// (profiles/NAME.toml), calibration recordings and the timing suite's
/// native recordings are kept apart per CPU model under it.
pub fn machine_slug(cpu: &str) -> String {
    let lower = cpu.to_lowercase();
    let mut words = Vec::new();
    for w in lower
        .replace("(r)", " ")
        .replace("(tm)", " ")
        .split(|c: char| !c.is_ascii_alphanumeric())
    {
        if !w.is_empty() && w != "processor" && w != "cpu" {
            words.push(w.to_string());
        }
    }
    if words.is_empty() {
        "unknown-cpu".into()
    } else {
        words.join("-")
    }
}

/// This machine's CPU model name, as /proc/cpuinfo's first `model name`
/// line gives it (the native runner records the same as `native:cpu`).
pub fn cpu_model() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()?
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
        })
}

impl MachineProfile {
    /// Parses and checks a profile's text; errors name the key and, where
    /// the TOML parser knows it, the line.
    pub fn parse(text: &str) -> Result<MachineProfile, String> {
        let p: MachineProfile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!("line {}: ", text[..s.start].lines().count().max(1)))
                .unwrap_or_default();
            format!("{line}{}", e.message())
        })?;
        p.validate().map(|_| p)
    }

    fn validate(&self) -> Result<(), String> {
        if self.format != 1 {
            return Err(format!("key format: found {}, expected 1", self.format));
        }
        for (name, _) in Costs::FIELDS {
            if !self.cost.contains_key(*name) {
                return Err(format!(
                    "key cost.{name}: missing (a profile names every constant)"
                ));
            }
        }
        for (name, e) in &self.cost {
            let known = Costs::FIELDS.iter().chain(OPTIONAL);
            let Some(&(_, unit)) = known.clone().find(|(f, _)| f == name) else {
                let names: Vec<&str> = known.map(|(f, _)| *f).collect();
                return Err(format!(
                    "key cost.{name}: found an unknown constant, expected one of {}",
                    names.join(", ")
                ));
            };
            if e.unit != unit {
                return Err(format!(
                    "key cost.{name}.unit: found {:?}, expected {unit:?}",
                    e.unit
                ));
            }
            if e.spread[0] > e.value || e.value > e.spread[1] {
                return Err(format!(
                    "key cost.{name}.value: found {}, expected within its spread [{}, {}]",
                    e.value, e.spread[0], e.spread[1]
                ));
            }
            if e.basis == Basis::Reference && Costs::REFERENCE.get(name).is_none() {
                return Err(format!(
                    "key cost.{name}.basis: found \"reference\", expected \"measured\" (cost_model.rs has no value for it; leave it out instead)"
                ));
            }
            let reference = Costs::REFERENCE.get(name).unwrap_or_default();
            if e.basis == Basis::Reference && e.value != reference {
                return Err(format!(
                    "key cost.{name}.value: found {}, expected {reference} (basis \"reference\" is cost_model.rs's value)",
                    e.value
                ));
            }
        }
        self.validate_l2()?;
        let c = self.costs();
        if c.ptep_clear_flush() > c.unmap_one {
            return Err(format!(
                "key cost.unmap_one: found {}, expected at least pte + tlb_flush = {} (an unmap includes its PTE flush)",
                c.unmap_one,
                c.ptep_clear_flush()
            ));
        }
        Ok(())
    }

    /// `copy_page_l2` comes with the L2's geometry, one page set at least.
    fn validate_l2(&self) -> Result<(), String> {
        let m = &self.machine;
        let copy = self.cost.contains_key("copy_page_l2");
        match (copy, m.l2_bytes, m.l2_ways) {
            (false, None, None) => Ok(()),
            (true, Some(_), Some(0)) => {
                Err("key machine.l2_ways: found 0, expected at least 1".into())
            }
            (true, Some(bytes), Some(ways)) if l2_geometry_ok(bytes, ways.into()) => Ok(()),
            (true, Some(bytes), Some(ways)) => Err(format!(
                "key machine.l2_bytes: found {bytes} with l2_ways {ways}, expected at least one 4 KiB page per way and at most {MAX_L2_BYTES} bytes (a CPU's private L2)"
            )),
            _ => Err(format!(
                "key cost.copy_page_l2: found it {}, machine.l2_bytes {} and machine.l2_ways {}; expected all three or none",
                if copy { "present" } else { "absent" },
                if m.l2_bytes.is_some() { "present" } else { "absent" },
                if m.l2_ways.is_some() { "present" } else { "absent" },
            )),
        }
    }

    /// The L2 model the profile measured (None: it prices every copy as
    /// `copy_page`).
    pub fn l2(&self) -> Option<crate::l2cache::L2Model> {
        Some(crate::l2cache::L2Model {
            bytes: self.machine.l2_bytes?,
            ways: self.machine.l2_ways?,
            copy_page_l2: self.cost.get("copy_page_l2")?.value,
        })
    }

    /// The profile's values.
    pub fn costs(&self) -> Costs {
        let mut c = Costs::REFERENCE;
        for (name, e) in &self.cost {
            if let Some(v) = c.get_mut(name) {
                *v = e.value;
            }
        }
        c
    }

    /// A short name for the run's knobs: where and when it was measured.
    pub fn label(&self) -> String {
        format!(
            "{} {} ({})",
            self.machine.cpu, self.machine.kernel, self.provenance.date
        )
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a profile always serialises")
    }
}

/// The costs a run uses, and the label its knobs record.
#[derive(Clone, Debug, PartialEq)]
pub struct CostProfile {
    pub costs: Costs,
    pub label: String,
    /// The CPU it was measured on (None: cost_model.rs's reference values).
    pub cpu: Option<String>,
    /// zram's cost per page content and compressor (empty: none measured).
    pub compress: std::sync::Arc<CompressTable>,
    /// Which pages a CPU's L2 holds, and a copy from it (None: not
    /// measured; every copy costs `copy_page`).
    pub l2: Option<crate::l2cache::L2Model>,
}

impl CostProfile {
    /// cost_model.rs's documented values.
    pub fn reference() -> CostProfile {
        CostProfile {
            costs: Costs::REFERENCE,
            label: "reference".into(),
            cpu: None,
            compress: Default::default(),
            l2: None,
        }
    }

    /// What a run takes from profile `p`, labelled `NAME: where and
    /// when it was measured`.
    fn of(p: MachineProfile, name: &str) -> CostProfile {
        CostProfile {
            costs: p.costs(),
            label: format!("{name}: {}", p.label()),
            l2: p.l2(),
            cpu: Some(p.machine.cpu),
            compress: std::sync::Arc::new(p.compress),
        }
    }

    /// The committed default profile (profiles/default.toml).
    pub fn default_profile() -> CostProfile {
        static DEFAULT: std::sync::LazyLock<CostProfile> = std::sync::LazyLock::new(|| {
            let p = MachineProfile::parse(DEFAULT_PROFILE)
                .expect("profiles/default.toml is checked by the tests");
            CostProfile::of(p, "default")
        });
        DEFAULT.clone()
    }

    /// The committed profile measured on a CPU of this model name, if
    /// any.
    pub fn committed_for(cpu: &str) -> Option<CostProfile> {
        PROFILES.iter().find_map(|(file, text)| {
            let p =
                MachineProfile::parse(text).expect("committed profiles are checked by the tests");
            (p.machine.cpu == cpu).then(|| CostProfile::of(p, file))
        })
    }

    /// `auto`: the committed profile of this machine's CPU model, else
    /// the default; the label says which and why.
    pub fn auto() -> CostProfile {
        let cpu = cpu_model().unwrap_or_default();
        match CostProfile::committed_for(&cpu) {
            Some(mut p) => {
                p.label = format!("auto: {} (this machine's CPU)", p.label);
                p
            }
            None => {
                let mut p = CostProfile::default_profile();
                p.label = format!(
                    "auto: {} (no committed profile for this machine's CPU \"{cpu}\")",
                    p.label
                );
                p
            }
        }
    }

    /// What a run uses when not told: `$MMSIM_PROFILE` (any `--profile`
    /// value) if set, else `auto`.
    pub fn from_env() -> Result<CostProfile, String> {
        match std::env::var("MMSIM_PROFILE") {
            Ok(v) if !v.is_empty() => {
                CostProfile::load(&v).map_err(|e| format!("MMSIM_PROFILE: {e}"))
            }
            _ => Ok(CostProfile::auto()),
        }
    }

    /// `auto`, `reference`, `default`, or a profile file.
    pub fn load(arg: &str) -> Result<CostProfile, String> {
        match arg {
            "auto" => Ok(CostProfile::auto()),
            "reference" => Ok(CostProfile::reference()),
            "default" => Ok(CostProfile::default_profile()),
            path => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
                let p = MachineProfile::parse(&text).map_err(|e| format!("{path}: {e}"))?;
                Ok(CostProfile::of(p, path))
            }
        }
    }
}

impl Default for CostProfile {
    fn default() -> Self {
        CostProfile::default_profile()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_matches_the_documented_constants() {
        let c = Costs::REFERENCE;
        assert_eq!(c.touch, cost_model::TOUCH_NS);
        assert_eq!(c.rmap(), cost_model::RMAP_NS);
        assert_eq!(c.ptep_clear_flush(), cost_model::PTEP_CLEAR_FLUSH_NS);
        assert_eq!(c.unmap_walk(), cost_model::UNMAP_WALK_NS);
        for (name, _) in Costs::FIELDS {
            assert!(c.get(name).is_some(), "{name}");
        }
        let mut names: Vec<&str> = Costs::FIELDS.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Costs::FIELDS.len(), "field names are unique");
    }

    fn reference_profile() -> MachineProfile {
        MachineProfile {
            format: 1,
            machine: MachineInfo::default(),
            provenance: Provenance::default(),
            cost: Costs::FIELDS
                .iter()
                .map(|(n, u)| {
                    let v = Costs::REFERENCE.get(n).unwrap();
                    let e = CostEntry {
                        value: v,
                        unit: u.to_string(),
                        spread: [v, v],
                        basis: Basis::Reference,
                        method: "cost_model.rs".into(),
                    };
                    (n.to_string(), e)
                })
                .collect(),
            checks: BTreeMap::new(),
            compress: Default::default(),
        }
    }

    #[test]
    fn a_profile_round_trips_and_bad_ones_name_the_key() {
        let p = reference_profile();
        let text = p.to_toml();
        assert_eq!(MachineProfile::parse(&text).unwrap(), p);
        assert_eq!(p.costs(), Costs::REFERENCE);

        let missing = text.replace("[cost.touch]", "[cost.nonesuch]");
        let e = MachineProfile::parse(&missing).unwrap_err();
        assert!(e.contains("cost.touch") && e.contains("missing"), "{e}");

        let mut q = p.clone();
        q.cost.get_mut("pte").unwrap().unit = "ms".into();
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(e.contains("cost.pte.unit") && e.contains("\"ms\""), "{e}");

        let mut q = p.clone();
        q.cost.get_mut("pte").unwrap().value = 21;
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(e.contains("cost.pte.value") && e.contains("spread"), "{e}");

        let mut q = p.clone();
        let e = q.cost.get_mut("pte").unwrap();
        e.value = 21;
        e.spread = [21, 21];
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(e.contains("basis \"reference\""), "{e}");

        let e = MachineProfile::parse(&text.replace("format = 1", "format = 1\nsched_latency = 3"))
            .unwrap_err();
        assert!(e.contains("unknown field `sched_latency`"), "{e}");

        let mut q = p.clone();
        for (f, v) in [("unmap_one", 100), ("pte", 50), ("tlb_flush", 100)] {
            let e = q.cost.get_mut(f).unwrap();
            e.value = v;
            e.spread = [v, v];
            e.basis = Basis::Measured;
        }
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(e.contains("cost.unmap_one"), "{e}");
    }

    #[test]
    fn copy_page_l2_comes_with_the_l2s_geometry() {
        let p = reference_profile();
        assert_eq!(p.l2(), None, "no L2 model unless measured");
        let mut q = p.clone();
        q.cost.insert(
            "copy_page_l2".into(),
            CostEntry {
                value: 70,
                unit: "ns".into(),
                spread: [47, 74],
                basis: Basis::Measured,
                method: "a test".into(),
            },
        );
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(
            e.contains("cost.copy_page_l2") && e.contains("machine.l2_bytes absent"),
            "{e}"
        );
        q.machine.l2_bytes = Some(2 << 20);
        q.machine.l2_ways = Some(1024);
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(
            e.contains("machine.l2_bytes") && e.contains("per way"),
            "{e}"
        );
        q.machine.l2_ways = Some(0);
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(
            e.contains("machine.l2_ways") && e.contains("found 0"),
            "{e}"
        );
        q.machine.l2_ways = Some(16);
        q.cost.get_mut("copy_page_l2").unwrap().basis = Basis::Reference;
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(e.contains("cost.copy_page_l2.basis"), "{e}");
        q.cost.get_mut("copy_page_l2").unwrap().basis = Basis::Measured;
        q.machine.l2_bytes = Some(1 << 40);
        let e = MachineProfile::parse(&q.to_toml()).unwrap_err();
        assert!(
            e.contains("machine.l2_bytes") && e.contains("at most"),
            "{e}"
        );
        q.machine.l2_bytes = Some(2 << 20);
        let parsed = MachineProfile::parse(&q.to_toml()).unwrap();
        let m = parsed.l2().expect("measured");
        assert_eq!((m.bytes, m.ways, m.copy_page_l2), (2 << 20, 16, 70));
        assert_eq!(CostProfile::of(parsed, "t").l2, Some(m));
        let mut r = p.clone();
        r.machine.l2_bytes = Some(2 << 20);
        r.machine.l2_ways = Some(16);
        let e = MachineProfile::parse(&r.to_toml()).unwrap_err();
        assert!(
            e.contains("cost.copy_page_l2") && e.contains("absent"),
            "{e}"
        );
    }

    #[test]
    fn machine_slugs_name_the_model_plainly() {
        assert_eq!(
            machine_slug("Intel(R) Xeon(R) Processor @ 2.50GHz"),
            "intel-xeon-2-50ghz"
        );
        assert_eq!(machine_slug("AMD EPYC"), "amd-epyc");
        assert_eq!(machine_slug("Intel(R) Xeon(R) Processor"), "intel-xeon");
        assert_eq!(
            machine_slug("AMD EPYC 7B13 64-Core Processor"),
            "amd-epyc-7b13-64-core"
        );
        assert_eq!(machine_slug(""), "unknown-cpu");
    }

    #[test]
    fn every_committed_profile_parses_and_is_picked_for_its_cpu() {
        let mut cpus = Vec::new();
        for (file, text) in PROFILES {
            let p = MachineProfile::parse(text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(!p.machine.cpu.is_empty(), "{file}");
            let picked = CostProfile::committed_for(&p.machine.cpu).unwrap();
            assert_eq!(picked.costs, p.costs(), "{file}");
            assert!(picked.label.starts_with(file), "{}", picked.label);
            if *file != "default.toml" {
                assert_eq!(*file, format!("{}.toml", machine_slug(&p.machine.cpu)));
            }
            cpus.push(p.machine.cpu);
        }
        let n = cpus.len();
        cpus.sort();
        cpus.dedup();
        assert_eq!(cpus.len(), n, "one committed profile per CPU model");
        assert!(CostProfile::committed_for("a CPU nobody calibrated").is_none());
    }

    #[test]
    fn the_default_profile_parses() {
        let p = MachineProfile::parse(DEFAULT_PROFILE).unwrap();
        assert!(!p.provenance.command.is_empty(), "{p:?}");
        assert_eq!(CostProfile::default_profile().costs, p.costs());
    }
}

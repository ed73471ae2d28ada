//! TOML → validated [`Spec`]. Every error carries file, line and key.

use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::units::{Duration, Limit, Size, PAGE_SIZE};
use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    machine: RawMachine,
    #[serde(default)]
    features: RawFeatures,
    #[serde(default)]
    sysctl: IndexMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    sysfs: IndexMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    swap: Vec<RawSwap>,
    #[serde(default)]
    cgroup: IndexMap<String, Spanned<RawCgroup>>,
    #[serde(default)]
    task: IndexMap<String, Spanned<RawTask>>,
}

fn one_u32() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    memory: Spanned<Size>,
    #[serde(default = "one_u32")]
    cpus: u32,
    kernel: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFeatures {
    wp_reuse_swapcache: Option<bool>,
    shmem_skip_swapcache: Option<bool>,
    used_once_mapped_file: Option<bool>,
    batched_rmap_unmap: Option<bool>,
    swapoff_readahead_stats: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwap {
    device: Spanned<String>,
    size: Spanned<Size>,
    priority: Option<i32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCgroup {
    memory_max: Option<Limit>,
    memory_high: Option<Limit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    cgroup: Option<Spanned<String>>,
    #[serde(default = "one_u32")]
    instances: u32,
    steps: Vec<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMmap {
    #[allow(dead_code)]
    op: String,
    name: String,
    kind: String,
    size: Size,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMunmap {
    #[allow(dead_code)]
    op: String,
    region: String,
}

fn one_u64() -> u64 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTouch {
    #[allow(dead_code)]
    op: String,
    region: String,
    #[serde(default = "seq")]
    order: String,
    theta: Option<f64>,
    count: Option<u64>,
    passes: Option<u64>,
    #[serde(default)]
    write: f64,
    offset: Option<Size>,
    length: Option<Size>,
    #[serde(default)]
    seed: u64,
}

fn seq() -> String {
    "seq".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSleep {
    #[allow(dead_code)]
    op: String,
    duration: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    #[allow(dead_code)]
    op: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepeat {
    #[allow(dead_code)]
    op: String,
    #[serde(default = "one_u64")]
    times: u64,
    steps: Vec<toml::Value>,
}

pub const OPS: &str = "mmap, munmap, touch, sleep, phase, repeat";

/// Parses and validates `text`, read from `file`.
pub fn parse(text: &str, file: &str) -> Result<Spec, SpecError> {
    let rep = Reporter::new(file, text);
    let raw: RawSpec = toml::from_str(text).map_err(|e| toml_error(&rep, text, &e))?;
    build(&rep, raw)
}

fn toml_error(rep: &Reporter, text: &str, e: &toml::de::Error) -> SpecError {
    let offset = e.span().map(|s| s.start).unwrap_or(0);
    let mut err = rep.at(offset, key_at(text, offset), e.message().trim().replace('\n', " "));
    if e.span().is_none() {
        err.line = 0;
    }
    err
}

/// The dotted key whose line holds `offset`: the last `[table]` header
/// before it, and the key left of `=` on the line, if there is one.
fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    let header = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    let local = line.split_once('=').map(|(k, _)| k.trim().to_string()).filter(|k| !k.starts_with('{') && !k.is_empty());
    match (header, local) {
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (Some(h), None) => h,
        (None, Some(k)) => k,
        (None, None) => String::new(),
    }
}

fn build(rep: &Reporter, raw: RawSpec) -> Result<Spec, SpecError> {
    let mut knobs = Vec::new();
    let machine = build_machine(rep, &raw.machine)?;
    let features = build_features(&raw.features);
    let sysctl = build_sysctl(rep, &raw.sysctl, &mut knobs)?;
    let sysfs = build_sysfs(rep, &raw.sysfs, &mut knobs)?;
    let swap = raw
        .swap
        .iter()
        .enumerate()
        .map(|(i, s)| build_swap(rep, i, s))
        .collect::<Result<Vec<_>, _>>()?;
    let mut cgroups = Vec::new();
    for (name, cg) in &raw.cgroup {
        cgroups.push(build_cgroup(rep, name, cg)?);
    }
    let mut tasks = Vec::new();
    for (name, t) in &raw.task {
        tasks.push(build_task(rep, name, t, &cgroups)?);
    }
    if tasks.is_empty() {
        return Err(SpecError {
            file: rep.file.to_string(),
            line: 0,
            key: "task".into(),
            message: "found no tasks, expected at least one [task.NAME] table".into(),
        });
    }
    Ok(Spec {
        file: rep.file.to_string(),
        machine,
        features,
        sysctl,
        sysfs,
        knobs,
        swap,
        cgroups,
        tasks,
    })
}

fn build_machine(rep: &Reporter, m: &RawMachine) -> Result<Machine, SpecError> {
    let memory = m.memory.get_ref().0;
    if memory < 64 << 20 || memory % PAGE_SIZE != 0 {
        return Err(rep.at(
            m.memory.span().start,
            "machine.memory",
            format!("found {memory} bytes, expected a whole number of 4 KiB pages, at least 64M"),
        ));
    }
    if m.cpus == 0 || m.cpus > 1024 {
        return Err(rep.at(
            0,
            "machine.cpus",
            format!("found {}, expected 1 to 1024", m.cpus),
        ));
    }
    let kernel = match &m.kernel {
        None => "6.1".to_string(),
        Some(k) if k.get_ref() == "6.1" => "6.1".to_string(),
        Some(k) => {
            return Err(rep.at(
                k.span().start,
                "machine.kernel",
                format!("found \"{}\", expected \"6.1\" (the only behaviour preset)", k.get_ref()),
            ))
        }
    };
    Ok(Machine {
        memory,
        cpus: m.cpus,
        kernel,
    })
}

fn build_features(f: &RawFeatures) -> Features {
    let d = Features::LINUX_6_1;
    Features {
        wp_reuse_swapcache: f.wp_reuse_swapcache.unwrap_or(d.wp_reuse_swapcache),
        shmem_skip_swapcache: f.shmem_skip_swapcache.unwrap_or(d.shmem_skip_swapcache),
        used_once_mapped_file: f.used_once_mapped_file.unwrap_or(d.used_once_mapped_file),
        batched_rmap_unmap: f.batched_rmap_unmap.unwrap_or(d.batched_rmap_unmap),
        swapoff_readahead_stats: f.swapoff_readahead_stats.unwrap_or(d.swapoff_readahead_stats),
    }
}

/// The sysctls the simulator models, with their range.
pub const SYSCTLS: &[(&str, i64, i64)] = &[
    ("vm.swappiness", 0, 200),
    ("vm.watermark_scale_factor", 1, 3000),
    ("vm.min_free_kbytes", 128, 1 << 30),
];

fn build_sysctl(
    rep: &Reporter,
    raw: &IndexMap<String, Spanned<toml::Value>>,
    knobs: &mut Vec<(String, String)>,
) -> Result<Sysctl, SpecError> {
    let mut s = Sysctl {
        swappiness: 60,
        watermark_scale_factor: 10,
        min_free_kbytes: None,
    };
    for (key, v) in raw {
        let path = format!("sysctl.\"{key}\"");
        let Some(&(_, lo, hi)) = SYSCTLS.iter().find(|(k, _, _)| k == key) else {
            let known: Vec<&str> = SYSCTLS.iter().map(|k| k.0).collect();
            return Err(rep.at(
                v.span().start,
                path,
                format!("found the sysctl \"{key}\", which mmsim does not model; expected one of {}", known.join(", ")),
            ));
        };
        let n = match v.get_ref() {
            toml::Value::Integer(n) if (lo..=hi).contains(n) => *n,
            other => {
                return Err(rep.at(
                    v.span().start,
                    path,
                    format!("found {other}, expected an integer from {lo} to {hi}"),
                ))
            }
        };
        match key.as_str() {
            "vm.swappiness" => s.swappiness = n as u32,
            "vm.watermark_scale_factor" => s.watermark_scale_factor = n as u32,
            _ => s.min_free_kbytes = Some(n as u64),
        }
    }
    knobs.push(("sysctl:vm.swappiness".into(), s.swappiness.to_string()));
    knobs.push(("sysctl:vm.watermark_scale_factor".into(), s.watermark_scale_factor.to_string()));
    if let Some(m) = s.min_free_kbytes {
        knobs.push(("sysctl:vm.min_free_kbytes".into(), m.to_string()));
    }
    Ok(s)
}

const THP_ENABLED: &str = "kernel/mm/transparent_hugepage/enabled";
const LRU_GEN_ENABLED: &str = "kernel/mm/lru_gen/enabled";

fn build_sysfs(
    rep: &Reporter,
    raw: &IndexMap<String, Spanned<toml::Value>>,
    knobs: &mut Vec<(String, String)>,
) -> Result<Sysfs, SpecError> {
    for (key, v) in raw {
        let path = format!("sysfs.\"{key}\"");
        let value = match v.get_ref() {
            toml::Value::String(s) => s.clone(),
            toml::Value::Boolean(b) => (if *b { "y" } else { "n" }).to_string(),
            toml::Value::Integer(n) => n.to_string(),
            other => {
                return Err(rep.at(v.span().start, path, format!("found {other}, expected a string, boolean or integer")))
            }
        };
        let ok = match key.as_str() {
            THP_ENABLED => value == "never",
            LRU_GEN_ENABLED => matches!(value.as_str(), "n" | "0" | "0x0000"),
            _ => {
                return Err(rep.at(
                    v.span().start,
                    path,
                    format!("found the sysfs knob \"{key}\", which mmsim does not model; expected one of {THP_ENABLED}, {LRU_GEN_ENABLED}"),
                ))
            }
        };
        if !ok {
            let expected = if key == THP_ENABLED {
                "\"never\" (anonymous THP is not modelled yet)"
            } else {
                "false (MGLRU is not modelled; the classic two-list LRU is)"
            };
            return Err(rep.at(v.span().start, path, format!("found \"{value}\", expected {expected}")));
        }
    }
    // Debian's 6.1 defaults THP to always; the simulator models the kernel
    // without anon THP, so the oracle must run with it off (DESIGN.md Oracle).
    knobs.push((format!("sysfs:{THP_ENABLED}"), "never".into()));
    knobs.push((format!("sysfs:{LRU_GEN_ENABLED}"), "n".into()));
    Ok(Sysfs { thp_never: true })
}

fn build_swap(rep: &Reporter, i: usize, s: &RawSwap) -> Result<SwapDevice, SpecError> {
    let kind = match s.device.get_ref().as_str() {
        "zram" => SwapKind::Zram,
        other => {
            let why = if matches!(other, "nvme" | "virtio" | "hdd") {
                " (block-device swap is not modelled yet)"
            } else {
                ""
            };
            return Err(rep.at(
                s.device.span().start,
                format!("swap[{i}].device"),
                format!("found \"{other}\"{why}, expected \"zram\""),
            ));
        }
    };
    let size = s.size.get_ref().0;
    if size < 2 * PAGE_SIZE || size % PAGE_SIZE != 0 {
        return Err(rep.at(
            s.size.span().start,
            format!("swap[{i}].size"),
            format!("found {size} bytes, expected a whole number of 4 KiB pages, at least 8K"),
        ));
    }
    Ok(SwapDevice {
        kind,
        size,
        priority: s.priority,
    })
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn build_cgroup(rep: &Reporter, name: &str, cg: &Spanned<RawCgroup>) -> Result<Cgroup, SpecError> {
    if !valid_name(name) {
        return Err(rep.at(
            cg.span().start,
            format!("cgroup.{name}"),
            format!("found the cgroup name \"{name}\", expected letters, digits, '_' or '-'"),
        ));
    }
    let c = cg.get_ref();
    Ok(Cgroup {
        name: name.to_string(),
        memory_max: c.memory_max.unwrap_or(Limit::Max),
        memory_high: c.memory_high.unwrap_or(Limit::Max),
    })
}

fn build_task(rep: &Reporter, name: &str, t: &Spanned<RawTask>, cgroups: &[Cgroup]) -> Result<Task, SpecError> {
    let line_of = t.span().start;
    if !valid_name(name) {
        return Err(rep.at(
            line_of,
            format!("task.{name}"),
            format!("found the task name \"{name}\", expected letters, digits, '_' or '-'"),
        ));
    }
    let raw = t.get_ref();
    let cgroup = match &raw.cgroup {
        None => None,
        Some(c) => Some(cgroups.iter().position(|g| &g.name == c.get_ref()).ok_or_else(|| {
            let known: Vec<&str> = cgroups.iter().map(|g| g.name.as_str()).collect();
            rep.at(
                c.span().start,
                format!("task.{name}.cgroup"),
                format!(
                    "found \"{}\", expected the name of a [cgroup.NAME] table ({})",
                    c.get_ref(),
                    if known.is_empty() { "none defined".to_string() } else { known.join(", ") }
                ),
            )
        })?),
    };
    if raw.instances == 0 {
        return Err(rep.at(line_of, format!("task.{name}.instances"), "found 0, expected at least 1"));
    }
    let mut steps = Vec::new();
    for (i, s) in raw.steps.iter().enumerate() {
        let line = rep.lines.line(s.span().start);
        let key = format!("task.{name}.steps[{i}]");
        steps.push(build_step(rep, line, &key, s.get_ref())?);
    }
    let mut regions = IndexMap::new();
    check_regions(rep, name, &steps, &mut regions)?;
    Ok(Task {
        name: name.to_string(),
        cgroup,
        instances: raw.instances,
        steps,
    })
}

fn line_error(rep: &Reporter, line: usize, key: &str, message: impl Into<String>) -> SpecError {
    SpecError {
        file: rep.file.to_string(),
        line,
        key: key.to_string(),
        message: message.into(),
    }
}

fn step_fields<'de, T: Deserialize<'de>>(rep: &Reporter, line: usize, key: &str, v: &toml::Value) -> Result<T, SpecError> {
    T::deserialize(v.clone()).map_err(|e| line_error(rep, line, key, e.message().trim().to_string()))
}

fn build_step(rep: &Reporter, line: usize, key: &str, v: &toml::Value) -> Result<Step, SpecError> {
    let Some(table) = v.as_table() else {
        return Err(line_error(rep, line, key, format!("found {v}, expected a table such as {{ op = \"touch\", ... }}")));
    };
    let op = match table.get("op") {
        Some(toml::Value::String(s)) => s.as_str(),
        Some(other) => return Err(line_error(rep, line, &format!("{key}.op"), format!("found {other}, expected one of {OPS}"))),
        None => return Err(line_error(rep, line, &format!("{key}.op"), format!("missing, expected one of {OPS}"))),
    };
    let op = match op {
        "mmap" => {
            let m: RawMmap = step_fields(rep, line, key, v)?;
            let kind = match m.kind.as_str() {
                "anon" => MapKind::Anon,
                other => {
                    return Err(line_error(
                        rep,
                        line,
                        &format!("{key}.kind"),
                        format!("found \"{other}\", expected \"anon\" (file, shmem and shared mappings are not modelled yet)"),
                    ))
                }
            };
            let pages = m.size.pages();
            if pages == 0 {
                return Err(line_error(rep, line, &format!("{key}.size"), "found 0, expected a size of at least one page"));
            }
            Op::Mmap { name: m.name, kind, pages }
        }
        "munmap" => {
            let m: RawMunmap = step_fields(rep, line, key, v)?;
            Op::Munmap { region: m.region }
        }
        "touch" => Op::Touch(build_touch(rep, line, key, v)?),
        "sleep" => {
            let s: RawSleep = step_fields(rep, line, key, v)?;
            Op::Sleep { ns: s.duration.0 }
        }
        "phase" => {
            let p: RawPhase = step_fields(rep, line, key, v)?;
            Op::Phase { name: p.name }
        }
        "repeat" => {
            let r: RawRepeat = step_fields(rep, line, key, v)?;
            if r.times == 0 {
                return Err(line_error(rep, line, &format!("{key}.times"), "found 0, expected at least 1"));
            }
            let steps = r
                .steps
                .iter()
                .enumerate()
                .map(|(i, s)| build_step(rep, line, &format!("{key}.steps[{i}]"), s))
                .collect::<Result<Vec<_>, _>>()?;
            Op::Repeat { times: r.times, steps }
        }
        other => {
            return Err(line_error(rep, line, &format!("{key}.op"), format!("found \"{other}\", expected one of {OPS}")));
        }
    };
    Ok(Step { line, op })
}

fn build_touch(rep: &Reporter, line: usize, key: &str, v: &toml::Value) -> Result<Touch, SpecError> {
    let t: RawTouch = step_fields(rep, line, key, v)?;
    let order = match t.order.as_str() {
        "seq" => Order::Seq,
        "rev" => Order::Rev,
        "shuffle" => Order::Shuffle,
        "uniform" => Order::Uniform,
        "zipf" => Order::Zipf,
        other => {
            return Err(line_error(
                rep,
                line,
                &format!("{key}.order"),
                format!("found \"{other}\", expected one of seq, rev, shuffle, uniform, zipf"),
            ))
        }
    };
    let theta = match (order, t.theta) {
        (Order::Zipf, Some(th)) if th > 0.0 && th.is_finite() && th <= 10.0 => th,
        (Order::Zipf, Some(th)) => {
            return Err(line_error(rep, line, &format!("{key}.theta"), format!("found {th}, expected a number above 0 and at most 10")))
        }
        (Order::Zipf, None) => 0.99,
        (_, Some(_)) => {
            return Err(line_error(rep, line, &format!("{key}.theta"), "found theta, which only order = \"zipf\" takes"))
        }
        (_, None) => 0.0,
    };
    if !(0.0..=1.0).contains(&t.write) {
        return Err(line_error(rep, line, &format!("{key}.write"), format!("found {}, expected a fraction from 0 to 1", t.write)));
    }
    if t.count.is_some() && t.passes.is_some() {
        return Err(line_error(rep, line, &format!("{key}.passes"), "found both count and passes, expected one of them"));
    }
    if t.count == Some(0) || t.passes == Some(0) {
        return Err(line_error(rep, line, key, "found a count or passes of 0, expected at least 1"));
    }
    let page_of = |s: Option<Size>, what: &str| -> Result<Option<u64>, SpecError> {
        match s {
            Some(Size(b)) if b % PAGE_SIZE != 0 => Err(line_error(
                rep,
                line,
                &format!("{key}.{what}"),
                format!("found {b} bytes, expected a multiple of 4096"),
            )),
            Some(Size(b)) => Ok(Some(b / PAGE_SIZE)),
            None => Ok(None),
        }
    };
    let offset = page_of(t.offset, "offset")?.unwrap_or(0);
    let length = page_of(t.length, "length")?;
    if length == Some(0) {
        return Err(line_error(rep, line, &format!("{key}.length"), "found 0, expected at least one page"));
    }
    Ok(Touch {
        region: t.region,
        order,
        theta,
        count: t.count,
        passes: t.passes.unwrap_or(1),
        write: t.write,
        offset,
        length,
        seed: t.seed,
    })
}

/// Every region a step names must be mapped by an earlier step of the task,
/// and a touched sub-range must lie inside it.
fn check_regions(rep: &Reporter, task: &str, steps: &[Step], regions: &mut IndexMap<String, u64>) -> Result<(), SpecError> {
    for (i, s) in steps.iter().enumerate() {
        let key = format!("task.{task}.steps[{i}]");
        match &s.op {
            Op::Mmap { name, pages, .. } => {
                if regions.insert(name.clone(), *pages).is_some() {
                    return Err(line_error(rep, s.line, &format!("{key}.name"), format!("found \"{name}\", which is already mapped; expected a new region name")));
                }
            }
            Op::Munmap { region } => {
                if regions.shift_remove(region).is_none() {
                    return Err(unknown_region(rep, s.line, &key, region, regions));
                }
            }
            Op::Touch(t) => {
                let Some(&pages) = regions.get(&t.region) else {
                    return Err(unknown_region(rep, s.line, &key, &t.region, regions));
                };
                let end = t.offset + t.length.unwrap_or(pages.saturating_sub(t.offset));
                if t.offset >= pages || end > pages {
                    return Err(line_error(
                        rep,
                        s.line,
                        &format!("{key}.offset"),
                        format!("found the range of pages {}..{end}, expected it inside region \"{}\" of {pages} pages", t.offset, t.region),
                    ));
                }
            }
            Op::Repeat { steps, .. } => check_regions(rep, task, steps, regions)?,
            Op::Sleep { .. } | Op::Phase { .. } => {}
        }
    }
    Ok(())
}

fn unknown_region(rep: &Reporter, line: usize, key: &str, region: &str, regions: &IndexMap<String, u64>) -> SpecError {
    let known: Vec<&str> = regions.keys().map(|k| k.as_str()).collect();
    line_error(
        rep,
        line,
        &format!("{key}.region"),
        format!(
            "found \"{region}\", expected a region mapped by an earlier mmap step ({})",
            if known.is_empty() { "none mapped".to_string() } else { known.join(", ") }
        ),
    )
}

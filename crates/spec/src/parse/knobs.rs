//! `[sysctl]` and `[sysfs]`: the kernel's knobs, checked as the kernel's
//! own handlers check what is written to them, and the list of every knob
//! in force (`Spec::knobs`).

use super::devices::NO_SHMEM_THP_5_10;
use super::fields::{integer, type_error, Fields};
use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::sysctls::{sysctl, SysctlKnob, SYSCTLS};
use crate::tree::{Node, Val};

/// `[sysctl]`: each key a row of the table (`crate::sysctls`), checked
/// against its range; every sysctl in force joins `knobs`.
pub(crate) fn build_sysctl(
    rep: &Reporter,
    node: &Node,
    knobs: &mut Vec<(String, String)>,
) -> Result<Sysctl, SpecError> {
    let f = Fields::of(
        rep,
        "sysctl".into(),
        node,
        "a table [sysctl] of sysctls such as \"vm.swappiness\" = 60",
    )?;
    let mut s = Sysctl::defaults();
    for (key, e) in &f.table.entries {
        let path = f.path(key);
        let Some(k) = sysctl(key) else {
            let known: Vec<&str> = SYSCTLS.iter().map(|k| k.name).collect();
            return Err(rep.at(
                e.key_at,
                path,
                format!(
                    "found the sysctl \"{key}\", which mmsim does not model; expected one of {}",
                    known.join(", ")
                ),
            ));
        };
        (k.put)(&mut s, sysctl_value(rep, k, &e.node, &path)?);
    }
    for k in SYSCTLS {
        if let Some(v) = (k.get)(&s) {
            knobs.push((format!("sysctl:{}", k.name), v.to_string()));
        }
    }
    Ok(s)
}

/// A value of sysctl `k`, in its range.
pub(crate) fn sysctl_value(
    rep: &Reporter,
    k: &SysctlKnob,
    node: &Node,
    path: &str,
) -> Result<u64, SpecError> {
    let (lo, hi) = (k.min, k.max);
    let n = integer(
        rep,
        node,
        path,
        lo,
        hi,
        &format!("an integer from {lo} to {hi}"),
    )?;
    Ok(n as u64)
}

const THP_ENABLED: &str = "kernel/mm/transparent_hugepage/enabled";
const SHMEM_ENABLED: &str = "kernel/mm/transparent_hugepage/shmem_enabled";
const THP_DEFRAG: &str = "kernel/mm/transparent_hugepage/defrag";
const THP_USE_ZERO_PAGE: &str = "kernel/mm/transparent_hugepage/use_zero_page";
const KHUGEPAGED: &str = "kernel/mm/transparent_hugepage/khugepaged/";
const LRU_GEN_ENABLED: &str = "kernel/mm/lru_gen/enabled";
const LRU_GEN_MIN_TTL: &str = "kernel/mm/lru_gen/min_ttl_ms";

/// `kstrtouint(buf, 0, ..)`: decimal, 0x hex or 0 octal, a newline allowed.
fn parse_kstrtouint(s: &str) -> Option<u32> {
    let t = s.strip_suffix('\n').unwrap_or(s);
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if t.len() > 1 && t.starts_with('0') {
        u32::from_str_radix(&t[1..], 8).ok()
    } else {
        t.parse().ok()
    }
}

/// One knob under khugepaged/, checked as 6.1's store function checks it
/// (base-10 `kstrtouint`/`kstrtoul`). Err(None): no such knob.
fn khugepaged_knob(
    rep: &Reporter,
    v: &Node,
    path: &str,
    name: &str,
    k: &mut KhugepagedKnobs,
) -> Result<(), Option<SpecError>> {
    let n = match &v.val {
        Val::Int(n) => u32::try_from(*n).ok(),
        Val::Str(s) => s.strip_suffix('\n').unwrap_or(s).parse::<u32>().ok(),
        Val::Bool(b) if name == "defrag" => Some(*b as u32),
        _ => None,
    };
    let (lo, hi, what) = match name {
        "defrag" => (0, 1, "0 or 1"),
        "pages_to_scan" => (1, u32::MAX, "a count of pages from 1 to 4294967295"),
        // 0 is the kernel's "scan again at once": khugepaged would spin
        // for as long as the workload runs. mmsim bounds its work.
        "scan_sleep_millisecs" => (1, u32::MAX, "milliseconds from 1 to 4294967295 (0, no sleep between scans, is refused: khugepaged would rescan without end)"),
        "alloc_sleep_millisecs" => (0, u32::MAX, "milliseconds from 0 to 4294967295"),
        "max_ptes_none" | "max_ptes_swap" | "max_ptes_shared" => (0, 511, "an integer from 0 to 511"),
        _ => return Err(None),
    };
    let n = n
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| Some(type_error(rep, v, path, what)))?;
    match name {
        "defrag" => k.defrag = Some(n == 1),
        "pages_to_scan" => k.pages_to_scan = Some(n),
        "scan_sleep_millisecs" => k.scan_sleep_millisecs = Some(n),
        "alloc_sleep_millisecs" => k.alloc_sleep_millisecs = Some(n),
        "max_ptes_none" => k.max_ptes_none = Some(n),
        "max_ptes_swap" => k.max_ptes_swap = Some(n),
        _ => k.max_ptes_shared = Some(n),
    }
    Ok(())
}

/// What `store_enabled` makes of a value: "n…" none, "y…" every
/// capability, else the bits of an unsigned integer (those beyond the
/// three capabilities ignored).
fn lru_gen_caps(v: &Val) -> Option<u8> {
    let caps = match v {
        Val::Bool(b) => {
            if *b {
                u32::MAX
            } else {
                0
            }
        }
        Val::Int(n) => u32::try_from(*n).ok()?,
        Val::Str(s) => match s.as_bytes().first()?.to_ascii_lowercase() {
            b'n' => 0,
            b'y' => u32::MAX,
            _ => parse_kstrtouint(s)?,
        },
        _ => return None,
    };
    Some((caps & 7) as u8)
}
pub(crate) const VMA_RA_ENABLED: &str = "kernel/mm/swap/vma_ra_enabled";

/// `kstrtobool`, as the sysfs file parses what is written to it.
pub(crate) fn kstrtobool(v: &str) -> Option<bool> {
    match v.as_bytes().first()?.to_ascii_lowercase() {
        b'y' | b't' | b'1' => Some(true),
        b'n' | b'f' | b'0' => Some(false),
        b'o' => match v.as_bytes().get(1)?.to_ascii_lowercase() {
            b'n' => Some(true),
            b'f' => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A knob that takes one word of `all` (a TOML string), or an error
/// listing them.
fn one_of<T: Copy, const N: usize>(
    rep: &Reporter,
    v: &Node,
    path: &str,
    all: [T; N],
    name: fn(T) -> &'static str,
) -> Result<T, SpecError> {
    let words: Vec<String> = all.iter().map(|&w| format!("\"{}\"", name(w))).collect();
    let expected = format!("one of {}", words.join(", "));
    match &v.val {
        Val::Str(s) => all
            .into_iter()
            .find(|&w| name(w) == s)
            .ok_or_else(|| type_error(rep, v, path, &expected)),
        _ => Err(type_error(rep, v, path, &expected)),
    }
}

/// The order of a `hugepages-<size>kB/enabled` knob (orders 2 to 9).
fn mthp_anon_order(key: &str) -> Option<usize> {
    let kb: u64 = key
        .strip_prefix("kernel/mm/transparent_hugepage/hugepages-")?
        .strip_suffix("kB/enabled")?
        .parse()
        .ok()?;
    (2..=9).find(|&o| 4u64 << o == kb)
}

/// The order of a `hugepages-<size>kB/shmem_enabled` knob (orders 2 to 9).
fn mthp_shmem_order(key: &str) -> Option<usize> {
    let kb: u64 = key
        .strip_prefix("kernel/mm/transparent_hugepage/hugepages-")?
        .strip_suffix("kB/shmem_enabled")?
        .parse()
        .ok()?;
    (2..=9).find(|&o| 4u64 << o == kb)
}

pub(crate) fn build_sysfs(
    rep: &Reporter,
    node: &Node,
    knobs: &mut Vec<(String, String)>,
    features: &Features,
    preset: Preset,
) -> Result<Sysfs, SpecError> {
    let f = Fields::of(
        rep,
        "sysfs".into(),
        node,
        "a table [sysfs] of knobs such as \"kernel/mm/transparent_hugepage/enabled\" = \"never\"",
    )?;
    let mut s = Sysfs {
        thp_enabled: ThpEnabled::Never,
        thp_defrag: None,
        thp_use_zero_page: None,
        khugepaged: KhugepagedKnobs::default(),
        vma_ra_enabled: true,
        lru_gen: 0,
        lru_gen_min_ttl_ms: 0,
        shmem_enabled: None,
        shmem_mthp: std::array::from_fn(|i| MthpShmem::default_for(i + 2)),
        anon_mthp: std::array::from_fn(|i| MthpAnon::default_for(i + 2)),
    };
    let mut min_ttl = None;
    let env = SysfsEnv {
        rep,
        features,
        preset,
    };
    for (key, e) in &f.table.entries {
        sysfs_knob(&env, key, e, f.path(key), &mut s, &mut min_ttl, knobs)?;
    }
    push_sysfs_knobs(&s, min_ttl, preset, knobs);
    s.lru_gen_min_ttl_ms = min_ttl.unwrap_or(0);
    Ok(s)
}

/// What checking a sysfs knob depends on besides its value.
struct SysfsEnv<'a> {
    rep: &'a Reporter<'a>,
    features: &'a Features,
    preset: Preset,
}

/// One `[sysfs]` key, checked as the release's store function checks it
/// and whether the preset has it, stored into `s` (the per-size THP knobs
/// join `knobs` in the spec's order).
fn sysfs_knob(
    env: &SysfsEnv,
    key: &str,
    e: &crate::tree::Entry,
    path: String,
    s: &mut Sysfs,
    min_ttl: &mut Option<u32>,
    knobs: &mut Vec<(String, String)>,
) -> Result<(), SpecError> {
    let (rep, features, preset) = (env.rep, env.features, env.preset);
    let v = &e.node;
    let value = match &v.val {
        Val::Str(s) => s.clone(),
        Val::Bool(b) => (if *b { "y" } else { "n" }).to_string(),
        Val::Int(n) => n.to_string(),
        _ => return Err(type_error(rep, v, &path, "a string, boolean or integer")),
    };
    match key {
        THP_ENABLED => {
            let expected = "one of \"always\", \"madvise\", \"never\"";
            let Val::Str(_) = &v.val else {
                return Err(type_error(rep, v, &path, expected));
            };
            let w = ThpEnabled::ALL
                .into_iter()
                .find(|w| w.name() == value)
                .ok_or_else(|| type_error(rep, v, &path, expected))?;
            if w != ThpEnabled::Never && preset != Preset::V6_1 {
                return Err(rep.at(v.at, path, format!("found anonymous THP (\"{value}\") with machine.kernel = \"{preset}\"; mmsim models anonymous THP as Linux 6.1 has it (later releases allocate anonymous memory in multi-size folios, not modelled yet); expected \"never\", or machine.kernel = \"6.1\"")));
            }
            s.thp_enabled = w;
        }
        THP_DEFRAG | THP_USE_ZERO_PAGE if preset != Preset::V6_1 => {
            return Err(rep.at(
                e.key_at,
                path,
                format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; it matters only to anonymous THP, which mmsim models as Linux 6.1 has it; expected machine.kernel = \"6.1\" for it"),
            ))
        }
        THP_DEFRAG => {
            s.thp_defrag = Some(one_of(rep, v, &path, ThpDefrag::ALL, ThpDefrag::name)?);
        }
        THP_USE_ZERO_PAGE => {
            // use_zero_page_store: kstrtoul, 0 or 1.
            let b = match value.as_str() {
                "0" | "n" => false,
                "1" | "y" => true,
                _ => return Err(type_error(rep, v, &path, "0 or 1 (or a boolean)")),
            };
            s.thp_use_zero_page = Some(b);
        }
        k if k.starts_with(KHUGEPAGED) => {
            if !matches!(preset, Preset::V6_1 | Preset::V7_3) {
                return Err(rep.at(
                    e.key_at,
                    path,
                    format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; khugepaged is modelled as Linux 6.1 has it (PMD-size THP) and as 7.3 has it (mTHP collapse); expected machine.kernel = \"6.1\" or \"7.3\" for it"),
                ));
            }
            khugepaged_knob(rep, v, &path, &k[KHUGEPAGED.len()..], &mut s.khugepaged)
                .map_err(|m| match m {
                    Some(m) => m,
                    None => rep.at(e.key_at, path.clone(), format!("found the sysfs knob \"{key}\", which 6.1's khugepaged does not have; expected one of {KHUGEPAGED}{{defrag, pages_to_scan, scan_sleep_millisecs, alloc_sleep_millisecs, max_ptes_none, max_ptes_swap, max_ptes_shared}}")),
                })?;
        }
        SHMEM_ENABLED => {
            let words: Vec<String> = ShmemEnabled::ALL
                .iter()
                .map(|w| format!("\"{}\"", w.name()))
                .collect();
            let expected = format!("one of {} (6.1's shmem_enabled)", words.join(", "));
            let Val::Str(_) = &v.val else {
                return Err(type_error(rep, v, &path, &expected));
            };
            match ShmemEnabled::ALL.iter().find(|w| w.name() == value) {
                Some(&w) if w.allows_large() && preset < Preset::V6_1 => {
                    return Err(rep.at(v.at, path, NO_SHMEM_THP_5_10.to_string()))
                }
                Some(&w) => {
                    s.shmem_enabled = Some(w);
                }
                None => return Err(type_error(rep, v, &path, &expected)),
            }
        }
        k if mthp_anon_order(k).is_some() => {
            let order = mthp_anon_order(k).expect("matched");
            anon_mthp_knob(env, key, e, &path, order, s)?;
            knobs.push((format!("sysfs:{key}"), value.clone()));
        }
        k if mthp_shmem_order(k).is_some() => {
            if !features.shmem_mthp {
                return Err(rep.at(
                    e.key_at,
                    path,
                    format!("found the sysfs knob \"{key}\", which Linux {preset} does not have (per-size shmem THP came in 6.11); expected it only with features.shmem_mthp = true (machine.kernel = \"6.12\" or later has it)"),
                ));
            }
            let w = one_of(rep, v, &path, MthpShmem::ALL, MthpShmem::name)?;
            s.shmem_mthp[mthp_shmem_order(k).expect("matched") - 2] = w;
            knobs.push((format!("sysfs:{key}"), value.clone()));
        }
        LRU_GEN_ENABLED if preset < Preset::V6_1 => {
            return Err(rep.at(
                e.key_at,
                path,
                format!("found the sysfs knob \"{key}\", which Linux {preset} does not have (the multi-gen LRU came in 6.1); expected no lru_gen knob with machine.kernel = \"{preset}\""),
            ))
        }
        LRU_GEN_ENABLED | LRU_GEN_MIN_TTL if preset > Preset::V6_1 => {
            return Err(rep.at(
                e.key_at,
                path,
                format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; the multi-gen LRU is modelled as Linux 6.1 has it (later releases changed its memcg and aging paths); expected machine.kernel = \"6.1\" for an lru_gen spec"),
            ))
        }
        LRU_GEN_ENABLED => {
            let caps = lru_gen_caps(&v.val).ok_or_else(|| {
                type_error(rep, v, &path, "true, false, \"y\", \"n\" or the capability bits as an integer or \"0x0007\"-style string (0x0001 the multi-gen LRU, 0x0002 page-table walks, 0x0004 non-leaf young bits)")
            })?;
            s.lru_gen = caps;
        }
        LRU_GEN_MIN_TTL => {
            let ms = match &v.val {
                Val::Int(n) => u32::try_from(*n).ok(),
                Val::Str(s) => parse_kstrtouint(s),
                _ => None,
            };
            *min_ttl = Some(ms.ok_or_else(|| {
                type_error(rep, v, &path, "milliseconds, an integer from 0 to 4294967295")
            })?);
        }
        VMA_RA_ENABLED => match kstrtobool(&value) {
            Some(b) => {
                s.vma_ra_enabled = b;
            }
            None => return Err(type_error(rep, v, &path, "a boolean (true or false)")),
        },
        _ => {
            return Err(rep.at(
                e.key_at,
                path,
                format!(
                    "found the sysfs knob \"{key}\", which mmsim does not model; expected one of {THP_ENABLED}, {THP_DEFRAG}, {THP_USE_ZERO_PAGE}, {KHUGEPAGED}…, {SHMEM_ENABLED}, {LRU_GEN_ENABLED}, {LRU_GEN_MIN_TTL}, {VMA_RA_ENABLED} (or, with features.shmem_mthp, kernel/mm/transparent_hugepage/hugepages-<16..2048>kB/shmem_enabled; with features.anon_mthp, hugepages-<16..2048>kB/enabled)"
                ),
            ))
        }
    }
    Ok(())
}

/// A `hugepages-<size>kB/enabled` knob of order `order`: only where the
/// release has per-size anonymous THP, and PMD size only as 6.1 has it.
fn anon_mthp_knob(
    env: &SysfsEnv,
    key: &str,
    e: &crate::tree::Entry,
    path: &str,
    order: usize,
    s: &mut Sysfs,
) -> Result<(), SpecError> {
    let (rep, preset, v) = (env.rep, env.preset, &e.node);
    let w = one_of(rep, v, path, MthpAnon::ALL, MthpAnon::name)?;
    let why = if !env.features.anon_mthp {
        Some(format!("Linux {preset} does not have it (per-size anonymous THP came in 6.8); expected it only with features.anon_mthp = true (machine.kernel = \"6.12\" has it)"))
    } else if order == 9 && matches!(w, MthpAnon::Always | MthpAnon::Madvise) {
        Some("PMD-size anonymous THP is modelled as Linux 6.1 has it, not on later releases; expected \"never\" or \"inherit\" (with enabled = \"never\") for hugepages-2048kB".to_string())
    } else {
        None
    };
    if let Some(why) = why {
        return Err(rep.at(
            e.key_at,
            path,
            format!("found the sysfs knob \"{key}\": {why}"),
        ));
    }
    s.anon_mthp[order - 2] = w;
    Ok(())
}

/// The sysfs knobs in force, in the order they are written: THP's
/// enabled always; the others only where a spec set them or the
/// release has them.
fn push_sysfs_knobs(
    s: &Sysfs,
    min_ttl: Option<u32>,
    preset: Preset,
    knobs: &mut Vec<(String, String)>,
) {
    // Debian's 6.1 boots with THP always; a spec that does not ask for it
    // runs with it off, in both engines (docs/design.md Oracle).
    knobs.push((format!("sysfs:{THP_ENABLED}"), s.thp_enabled.name().into()));
    // Only when set: left alone they keep their boot values.
    if let Some(w) = s.thp_defrag {
        knobs.push((format!("sysfs:{THP_DEFRAG}"), w.name().into()));
    }
    if let Some(b) = s.thp_use_zero_page {
        knobs.push((format!("sysfs:{THP_USE_ZERO_PAGE}"), (b as u8).to_string()));
    }
    for (name, value) in s.khugepaged.set() {
        knobs.push((format!("sysfs:{KHUGEPAGED}{name}"), value));
    }
    // Only when set: left alone it is 6.1's boot default `never`, and the
    // engines record it as such for specs that use shmem.
    if let Some(w) = s.shmem_enabled {
        knobs.push((format!("sysfs:{SHMEM_ENABLED}"), w.name().into()));
    }
    // Releases before 6.1 have no MGLRU to turn off.
    if preset >= Preset::V6_1 {
        let v = if s.lru_gen == 0 {
            "n".to_string()
        } else {
            format!("0x{:04x}", s.lru_gen)
        };
        knobs.push((format!("sysfs:{LRU_GEN_ENABLED}"), v));
    }
    if let Some(ms) = min_ttl {
        knobs.push((format!("sysfs:{LRU_GEN_MIN_TTL}"), ms.to_string()));
    }
    knobs.push((
        format!("sysfs:{VMA_RA_ENABLED}"),
        s.vma_ra_enabled.to_string(),
    ));
}

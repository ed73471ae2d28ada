//! `[sysfs]`: the sysfs knobs mmsim models, one row each in [`SYSFS`]:
//! its path under /sys, the releases that have it and those mmsim models
//! it on, how a value is checked (as the release's store function checks
//! it) and where it is kept (`Sysfs`), and what it changes. The list of
//! every knob in force (`Spec::knobs`) takes them in a fixed order.

use super::devices::NO_SHMEM_THP_5_10;
use super::fields::{type_error, Fields};
use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::tree::{Node, Val};

const THP_ENABLED: &str = "kernel/mm/transparent_hugepage/enabled";
const SHMEM_ENABLED: &str = "kernel/mm/transparent_hugepage/shmem_enabled";
const THP_DEFRAG: &str = "kernel/mm/transparent_hugepage/defrag";
const THP_USE_ZERO_PAGE: &str = "kernel/mm/transparent_hugepage/use_zero_page";
const KHUGEPAGED: &str = "kernel/mm/transparent_hugepage/khugepaged/";
const LRU_GEN_ENABLED: &str = "kernel/mm/lru_gen/enabled";
const LRU_GEN_MIN_TTL: &str = "kernel/mm/lru_gen/min_ttl_ms";
const ZSWAP: &str = "module/zswap/parameters/";
/// The compressors Debian's 6.1 kernel offers zswap (`crypto_has_acomp`:
/// CONFIG_CRYPTO_LZO and _DEFLATE built in, _LZ4, _LZ4HC and _ZSTD as
/// modules; no 842).
const ZSWAP_COMPRESSORS: [&str; 6] = ["lzo", "lzo-rle", "lz4", "lz4hc", "zstd", "deflate"];

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
        zswap: Zswap::default(),
    };
    let env = SysfsEnv {
        rep,
        features,
        preset,
    };
    let mut kept = Kept {
        s: &mut s,
        min_ttl: None,
        knobs,
    };
    for (key, e) in &f.table.entries {
        sysfs_knob(&env, key, e, f.path(key), &mut kept)?;
    }
    let min_ttl = kept.min_ttl;
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

/// One sysfs knob (or a family of them: khugepaged's, the per-size THP
/// files).
pub(crate) struct SysfsKnob {
    /// Its path under /sys, or the start of the family's paths.
    path: &'static str,
    /// Whether a `[sysfs]` key names it.
    names: fn(&str) -> bool,
    /// Listed by name where a message lists the knobs mmsim models (the
    /// per-size families are described in words instead).
    listed: bool,
    /// The release that brought it (None: every release mmsim models
    /// has it), named when a real kernel lacks its file.
    since: Option<&'static str>,
    /// Why mmsim refuses it on the spec's release (the message), or None
    /// where the release has it and mmsim models it there.
    refuse: fn(&str, Preset, &Features) -> Option<String>,
    /// Checks the value (the key's entry) and keeps it.
    store: fn(&SysfsEnv, &str, &crate::tree::Entry, &str, &mut Kept) -> Result<(), SpecError>,
}

/// Every sysfs knob mmsim models, in the order messages list them.
pub(crate) const SYSFS: &[SysfsKnob] = &[
    // Anonymous THP faults and khugepaged (6.1's PMD-size THP; other presets
    // take only "never").
    SysfsKnob {
        path: THP_ENABLED,
        names: |k| k == THP_ENABLED,
        listed: true,
        since: None,
        refuse: |_, _, _| None,
        store: store_thp_enabled,
    },
    // Whether an anonymous THP fault compacts and reclaims (6.1).
    SysfsKnob {
        path: THP_DEFRAG,
        names: |k| k == THP_DEFRAG,
        listed: true,
        since: None,
        refuse: only_6_1_thp,
        store: |env, _, e, path, kept| {
            let d = one_of(env.rep, &e.node, path, ThpDefrag::ALL, ThpDefrag::name)?;
            kept.s.thp_defrag = Some(d);
            Ok(())
        },
    },
    // Read faults of THP-eligible regions map the huge zero page (6.1).
    SysfsKnob {
        path: THP_USE_ZERO_PAGE,
        names: |k| k == THP_USE_ZERO_PAGE,
        listed: true,
        since: None,
        refuse: only_6_1_thp,
        store: |env, _, e, path, kept| {
            // use_zero_page_store: kstrtoul, 0 or 1.
            let b = match value_text(env.rep, &e.node, path)?.as_str() {
                "0" | "n" => false,
                "1" | "y" => true,
                _ => return Err(type_error(env.rep, &e.node, path, "0 or 1 (or a boolean)")),
            };
            kept.s.thp_use_zero_page = Some(b);
            Ok(())
        },
    },
    // khugepaged's scans and collapses (6.1's THP, 7.3's mTHP collapse).
    SysfsKnob {
        path: KHUGEPAGED,
        names: |k| k.starts_with(KHUGEPAGED),
        listed: true,
        since: None,
        refuse: |key, preset, _| {
            (!matches!(preset, Preset::V6_1 | Preset::V7_3)).then(|| format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; khugepaged is modelled as Linux 6.1 has it (PMD-size THP) and as 7.3 has it (mTHP collapse); expected machine.kernel = \"6.1\" or \"7.3\" for it"))
        },
        store: store_khugepaged,
    },
    // Large folios for shmem objects without a tmpfs huge= (shared
    // anonymous memory).
    SysfsKnob {
        path: SHMEM_ENABLED,
        names: |k| k == SHMEM_ENABLED,
        listed: true,
        since: None,
        refuse: |_, _, _| None,
        store: store_shmem_enabled,
    },
    // The reclaim algorithm: the multi-gen LRU and its capabilities.
    SysfsKnob {
        path: LRU_GEN_ENABLED,
        names: |k| k == LRU_GEN_ENABLED,
        listed: true,
        since: Some("the multi-gen LRU came in 6.1"),
        refuse: |key, preset, f| {
            if preset < Preset::V6_1 {
                return Some(format!("found the sysfs knob \"{key}\", which Linux {preset} does not have (the multi-gen LRU came in 6.1); expected no lru_gen knob with machine.kernel = \"{preset}\""));
            }
            only_6_1_lru_gen(key, preset, f)
        },
        store: |env, _, e, path, kept| {
            let caps = lru_gen_caps(&e.node.val).ok_or_else(|| {
                type_error(env.rep, &e.node, path, "true, false, \"y\", \"n\" or the capability bits as an integer or \"0x0007\"-style string (0x0001 the multi-gen LRU, 0x0002 page-table walks, 0x0004 non-leaf young bits)")
            })?;
            kept.s.lru_gen = caps;
            Ok(())
        },
    },
    // The multi-gen LRU's thrashing protection (kswapd's OOM kill).
    SysfsKnob {
        path: LRU_GEN_MIN_TTL,
        names: |k| k == LRU_GEN_MIN_TTL,
        listed: true,
        since: Some("the multi-gen LRU came in 6.1"),
        refuse: only_6_1_lru_gen,
        store: |env, _, e, path, kept| {
            let ms = match &e.node.val {
                Val::Int(n) => u32::try_from(*n).ok(),
                Val::Str(s) => parse_kstrtouint(s),
                _ => None,
            };
            kept.min_ttl = Some(ms.ok_or_else(|| {
                type_error(
                    env.rep,
                    &e.node,
                    path,
                    "milliseconds, an integer from 0 to 4294967295",
                )
            })?);
            Ok(())
        },
    },
    // Swap readahead by VMA rather than by cluster.
    SysfsKnob {
        path: VMA_RA_ENABLED,
        names: |k| k == VMA_RA_ENABLED,
        listed: true,
        since: None,
        refuse: |_, _, _| None,
        store: |env, _, e, path, kept| {
            match kstrtobool(&value_text(env.rep, &e.node, path)?) {
                Some(b) => kept.s.vma_ra_enabled = b,
                None => {
                    return Err(type_error(
                        env.rep,
                        &e.node,
                        path,
                        "a boolean (true or false)",
                    ))
                }
            }
            Ok(())
        },
    },
    // The anonymous fault's and swap-in's folio orders (mTHP).
    SysfsKnob {
        path: "kernel/mm/transparent_hugepage/hugepages-",
        names: |k| mthp_anon_order(k).is_some(),
        listed: false,
        since: Some("per-size anonymous THP came in 6.8"),
        refuse: |_, _, _| None,
        store: |env, key, e, path, kept| {
            let order = mthp_anon_order(key).expect("named");
            anon_mthp_knob(env, key, e, path, order, kept.s)?;
            kept.knobs
                .push((format!("sysfs:{key}"), value_text(env.rep, &e.node, path)?));
            Ok(())
        },
    },
    // The folio orders of shmem faults and writes.
    SysfsKnob {
        path: "kernel/mm/transparent_hugepage/hugepages-",
        names: |k| mthp_shmem_order(k).is_some(),
        listed: false,
        since: Some("per-size shmem THP came in 6.11"),
        refuse: |key, preset, f| {
            (!f.shmem_mthp).then(|| format!("found the sysfs knob \"{key}\", which Linux {preset} does not have (per-size shmem THP came in 6.11); expected it only with features.shmem_mthp = true (machine.kernel = \"6.12\" or later has it)"))
        },
        store: |env, key, e, path, kept| {
            let w = one_of(env.rep, &e.node, path, MthpShmem::ALL, MthpShmem::name)?;
            kept.s.shmem_mthp[mthp_shmem_order(key).expect("named") - 2] = w;
            kept.knobs
                .push((format!("sysfs:{key}"), value_text(env.rep, &e.node, path)?));
            Ok(())
        },
    },
    // zswap: the compressed cache in front of swap.
    SysfsKnob {
        path: ZSWAP,
        names: |k| k.starts_with(ZSWAP),
        listed: true,
        since: None,
        refuse: |key, preset, _| {
            (preset < Preset::V6_1).then(|| format!("found the zswap knob \"{key}\" with machine.kernel = \"{preset}\"; zswap is modelled as Linux 6.1, 6.12 and 7.3 have it; expected machine.kernel = \"6.1\" or later for a zswap spec"))
        },
        store: store_zswap,
    },
];

/// Why a file of the running kernel's sysfs may be missing: the release
/// that brought the knob at `path` (under /sys/), if mmsim models it.
pub fn sysfs_since(path: &str) -> Option<&'static str> {
    SYSFS
        .iter()
        .find(|k| (k.names)(path))
        .or_else(|| SYSFS.iter().find(|k| path.starts_with(k.path)))
        .and_then(|k| k.since)
}

/// A knob of anonymous THP, which mmsim models on 6.1 only.
fn only_6_1_thp(key: &str, preset: Preset, _: &Features) -> Option<String> {
    (preset != Preset::V6_1).then(|| format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; it matters only to anonymous THP, which mmsim models as Linux 6.1 has it; expected machine.kernel = \"6.1\" for it"))
}

/// A knob of the multi-gen LRU, which mmsim models as 6.1 has it.
fn only_6_1_lru_gen(key: &str, preset: Preset, _: &Features) -> Option<String> {
    (preset > Preset::V6_1).then(|| format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; the multi-gen LRU is modelled as Linux 6.1 has it (later releases changed its memcg and aging paths); expected machine.kernel = \"6.1\" for an lru_gen spec"))
}

/// What the knobs keep as they are read.
struct Kept<'a> {
    s: &'a mut Sysfs,
    min_ttl: Option<u32>,
    knobs: &'a mut Vec<(String, String)>,
}

/// A knob's value as the text written to its file (a boolean as "y" or
/// "n").
fn value_text(rep: &Reporter, v: &Node, path: &str) -> Result<String, SpecError> {
    match &v.val {
        Val::Str(s) => Ok(s.clone()),
        Val::Bool(b) => Ok((if *b { "y" } else { "n" }).to_string()),
        Val::Int(n) => Ok(n.to_string()),
        _ => Err(type_error(rep, v, path, "a string, boolean or integer")),
    }
}

/// One `[sysfs]` key: its row, refused where mmsim does not model it on
/// the spec's release, else checked and kept.
fn sysfs_knob(
    env: &SysfsEnv,
    key: &str,
    e: &crate::tree::Entry,
    path: String,
    kept: &mut Kept,
) -> Result<(), SpecError> {
    let rep = env.rep;
    value_text(rep, &e.node, &path)?;
    let Some(row) = SYSFS.iter().find(|k| (k.names)(key)) else {
        let listed: Vec<String> = SYSFS
            .iter()
            .filter(|k| k.listed)
            .map(|k| match k.path.ends_with('/') {
                true => format!("{}…", k.path),
                false => k.path.to_string(),
            })
            .collect();
        return Err(rep.at(
            e.key_at,
            path,
            format!(
                "found the sysfs knob \"{key}\", which mmsim does not model; expected one of {} (or, with features.shmem_mthp, kernel/mm/transparent_hugepage/hugepages-<16..2048>kB/shmem_enabled; with features.anon_mthp, hugepages-<16..2048>kB/enabled)",
                listed.join(", ")
            ),
        ));
    };
    if let Some(why) = (row.refuse)(key, env.preset, env.features) {
        return Err(rep.at(e.key_at, path, why));
    }
    (row.store)(env, key, e, &path, kept)
}

/// `enabled`: a word of `ThpEnabled`; anything but "never" only on 6.1.
fn store_thp_enabled(
    env: &SysfsEnv,
    _: &str,
    e: &crate::tree::Entry,
    path: &str,
    kept: &mut Kept,
) -> Result<(), SpecError> {
    let (rep, v, preset) = (env.rep, &e.node, env.preset);
    let expected = "one of \"always\", \"madvise\", \"never\"";
    let Val::Str(value) = &v.val else {
        return Err(type_error(rep, v, path, expected));
    };
    let w = ThpEnabled::ALL
        .into_iter()
        .find(|w| w.name() == value)
        .ok_or_else(|| type_error(rep, v, path, expected))?;
    if w != ThpEnabled::Never && preset != Preset::V6_1 {
        return Err(rep.at(v.at, path.to_string(), format!("found anonymous THP (\"{value}\") with machine.kernel = \"{preset}\"; mmsim models anonymous THP as Linux 6.1 has it (later releases allocate anonymous memory in multi-size folios, not modelled yet); expected \"never\", or machine.kernel = \"6.1\"")));
    }
    kept.s.thp_enabled = w;
    Ok(())
}

/// A knob under module/zswap/parameters/, checked as 6.1's parameter
/// ops check it: `param_set_bool` (kstrtobool), `param_set_uint`, and
/// the compressor and zpool by name.
fn store_zswap(
    env: &SysfsEnv,
    key: &str,
    e: &crate::tree::Entry,
    path: &str,
    kept: &mut Kept,
) -> Result<(), SpecError> {
    let (rep, v, preset) = (env.rep, &e.node, env.preset);
    let z = &mut kept.s.zswap;
    if !z.configured {
        *z = Zswap::boot(preset);
    }
    let text = value_text(rep, v, path)?;
    let absent = |why: &str| {
        Err(rep.at(
            e.key_at,
            path.to_string(),
            format!("found the zswap knob \"{key}\", which Linux {preset} does not have ({why})"),
        ))
    };
    let boolean = || {
        kstrtobool(&text)
            .ok_or_else(|| type_error(rep, v, path, "a boolean (true or false, \"Y\" or \"N\")"))
    };
    let uint = || {
        let n = match &v.val {
            Val::Int(n) => u32::try_from(*n).ok(),
            _ => text.strip_suffix('\n').unwrap_or(&text).parse().ok(),
        };
        n.ok_or_else(|| {
            type_error(
                rep,
                v,
                path,
                "a percentage, an integer from 0 to 4294967295",
            )
        })
    };
    let name = &key[ZSWAP.len()..];
    match name {
        "same_filled_pages_enabled" | "non_same_filled_pages_enabled" if preset > Preset::V6_1 => {
            return absent("6.10 took zswap's same-filled pages out: 6.12's swap zeromap keeps zero pages, and zswap compresses every other");
        }
        "shrinker_enabled" if preset < Preset::V6_12 => {
            return absent("zswap's shrinker came in 6.8");
        }
        "zpool" if preset >= Preset::V7_3 => {
            return absent("6.18 took the zpool layer out: zswap stores in zsmalloc only");
        }
        _ => {}
    }
    match name {
        "enabled" => z.enabled = boolean()?,
        "same_filled_pages_enabled" => z.same_filled_pages_enabled = boolean()?,
        "non_same_filled_pages_enabled" => z.non_same_filled_pages_enabled = boolean()?,
        "shrinker_enabled" => z.shrinker_enabled = boolean()?,
        "max_pool_percent" => z.max_pool_percent = uint()?,
        "accept_threshold_percent" => z.accept_threshold_percent = uint()?,
        "compressor" => {
            let Some(&c) = ZSWAP_COMPRESSORS.iter().find(|&&c| c == text) else {
                let all: Vec<String> = ZSWAP_COMPRESSORS
                    .iter()
                    .map(|c| format!("\"{c}\""))
                    .collect();
                return Err(type_error(
                    rep,
                    v,
                    path,
                    &format!(
                        "one of {} (the compressors Debian's 6.1 offers zswap)",
                        all.join(", ")
                    ),
                ));
            };
            z.compressor = c;
        }
        "zpool" => {
            if text == "z3fold" {
                return Err(rep.at(v.at, path.to_string(), "found zpool \"z3fold\", which mmsim does not model; expected \"zbud\" (6.1's default) or \"zsmalloc\"".to_string()));
            }
            z.zpool = one_of(rep, v, path, Zpool::ALL, Zpool::name)?;
        }
        _ => {
            let names = zswap_knob_names(preset).join(", ");
            return Err(rep.at(e.key_at, path.to_string(), format!("found the zswap knob \"{key}\", which {preset}'s zswap does not have; expected one of {ZSWAP}{{{names}}}")));
        }
    }
    z.configured = true;
    Ok(())
}

/// The zswap parameters `preset` has, in the order they are written
/// (`enabled` last: the pool is made with the compressor and zpool
/// written before it).
fn zswap_knob_names(preset: Preset) -> Vec<&'static str> {
    let mut n = vec!["compressor"];
    if preset < Preset::V7_3 {
        n.push("zpool");
    }
    n.extend(["max_pool_percent", "accept_threshold_percent"]);
    if preset == Preset::V6_1 {
        n.extend(["same_filled_pages_enabled", "non_same_filled_pages_enabled"]);
    } else {
        n.push("shrinker_enabled");
    }
    n.push("enabled");
    n
}

/// A knob under khugepaged/.
fn store_khugepaged(
    env: &SysfsEnv,
    key: &str,
    e: &crate::tree::Entry,
    path: &str,
    kept: &mut Kept,
) -> Result<(), SpecError> {
    let rep = env.rep;
    khugepaged_knob(rep, &e.node, path, &key[KHUGEPAGED.len()..], &mut kept.s.khugepaged)
        .map_err(|m| match m {
            Some(m) => m,
            None => rep.at(e.key_at, path.to_string(), format!("found the sysfs knob \"{key}\", which 6.1's khugepaged does not have; expected one of {KHUGEPAGED}{{defrag, pages_to_scan, scan_sleep_millisecs, alloc_sleep_millisecs, max_ptes_none, max_ptes_swap, max_ptes_shared}}")),
        })
}

/// `shmem_enabled`: a word of `ShmemEnabled`; a large one not on 5.10.
fn store_shmem_enabled(
    env: &SysfsEnv,
    _: &str,
    e: &crate::tree::Entry,
    path: &str,
    kept: &mut Kept,
) -> Result<(), SpecError> {
    let (rep, v, preset) = (env.rep, &e.node, env.preset);
    let words: Vec<String> = ShmemEnabled::ALL
        .iter()
        .map(|w| format!("\"{}\"", w.name()))
        .collect();
    let expected = format!("one of {} (6.1's shmem_enabled)", words.join(", "));
    let Val::Str(value) = &v.val else {
        return Err(type_error(rep, v, path, &expected));
    };
    match ShmemEnabled::ALL.iter().find(|w| w.name() == value) {
        Some(&w) if w.allows_large() && preset < Preset::V6_1 => {
            Err(rep.at(v.at, path.to_string(), NO_SHMEM_THP_5_10.to_string()))
        }
        Some(&w) => {
            kept.s.shmem_enabled = Some(w);
            Ok(())
        }
        None => Err(type_error(rep, v, path, &expected)),
    }
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
    push_zswap_knobs(&s.zswap, preset, knobs);
}

/// zswap's parameters when the spec sets any, every one (so a machine
/// whose zswap was left otherwise runs as the spec says), `enabled` last:
/// the pool is made with the compressor and zpool written before it. As
/// the kernel shows them: booleans "Y" or "N".
fn push_zswap_knobs(z: &Zswap, preset: Preset, knobs: &mut Vec<(String, String)>) {
    if !z.configured {
        return;
    }
    let yn = |b: bool| if b { "Y" } else { "N" }.to_string();
    for name in zswap_knob_names(preset) {
        let value = match name {
            "compressor" => z.compressor.to_string(),
            "zpool" => z.zpool.name().to_string(),
            "max_pool_percent" => z.max_pool_percent.to_string(),
            "accept_threshold_percent" => z.accept_threshold_percent.to_string(),
            "same_filled_pages_enabled" => yn(z.same_filled_pages_enabled),
            "non_same_filled_pages_enabled" => yn(z.non_same_filled_pages_enabled),
            "shrinker_enabled" => yn(z.shrinker_enabled),
            _ => yn(z.enabled),
        };
        knobs.push((format!("sysfs:{ZSWAP}{name}"), value));
    }
}

#[cfg(test)]
mod tests {
    use super::sysfs_since;

    #[test]
    fn a_missing_knob_names_the_release_that_brought_it() {
        let lru = sysfs_since("kernel/mm/lru_gen/min_ttl_ms");
        assert_eq!(lru, Some("the multi-gen LRU came in 6.1"));
        let anon = sysfs_since("kernel/mm/transparent_hugepage/hugepages-64kB/enabled");
        assert_eq!(anon, Some("per-size anonymous THP came in 6.8"));
        let shmem = sysfs_since("kernel/mm/transparent_hugepage/hugepages-64kB/shmem_enabled");
        assert_eq!(shmem, Some("per-size shmem THP came in 6.11"));
        // Every release mmsim models has THP's enabled; an unknown file
        // has no row.
        assert_eq!(sysfs_since("kernel/mm/transparent_hugepage/enabled"), None);
        assert_eq!(sysfs_since("kernel/mm/ksm/run"), None);
    }
}

//! `set`: a knob or a cgroup's limit changed at this point of the steps,
//! as a workload does with `echo V > …` between its phases.

use super::{StepCx, StepOp};
use crate::error::{Reporter, SpecError};
use crate::model::{Op, Setting};
use crate::parse::fields::{limit, string, type_error, Fields};
use crate::parse::knobs::sysctl_value;
use crate::parse::regions::{RegionCheck, Regions};
use crate::parse::sysfs::{kstrtobool, VMA_RA_ENABLED};
use crate::sysctls::{sysctl, SYSCTLS};
use crate::tree::{self, Node, Val};
use crate::work::{Sizes, WorkCx};
use std::sync::LazyLock;

pub(super) struct Set;

impl StepOp for Set {
    fn word(&self) -> &'static str {
        "set"
    }

    fn keys(&self) -> &'static [&'static str] {
        &["op", "key", "value"]
    }

    fn required(&self) -> &'static [&'static str] {
        &["key", "value"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "key" => SET_KEYS.as_str(),
            "value" => "the value the key takes in the spec's own table",
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Set(setting(cx.rep, f, f.req("key"), f.req("value"))?))
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Set(_))
    }

    /// The cgroup whose limit it changes exists.
    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        _regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Set(
            Setting::MemoryMax { cgroup, .. }
            | Setting::MemoryHigh { cgroup, .. }
            | Setting::MemorySwapMax { cgroup, .. },
        ) = op
        else {
            return Ok(());
        };
        super::check_cgroup(cx, key, "key", cgroup)
    }

    /// Lowering a limit reclaims at most what the machine holds, counted
    /// by the steps that put it there: the step itself counts one.
    fn work(&self, _cx: &WorkCx, _op: &Op, _sizes: &mut Sizes) -> u128 {
        1
    }
}

/// What a `set` step's key may name, in words: the cgroup limits, every
/// sysctl of the table, and vma_ra_enabled.
static SET_KEYS: LazyLock<String> = LazyLock::new(|| {
    let sysctls: String = SYSCTLS
        .iter()
        .map(|k| format!("sysctl.\"{}\", ", k.name))
        .collect();
    format!("a string: a key path a set step can change, as --set writes it: cgroup.NAME.memory_max, cgroup.NAME.memory_high, cgroup.NAME.memory_swap_max, {}or sysfs.\"{VMA_RA_ENABLED}\"", sysctls)
});

/// A `set` step's key and value, checked as the spec's own table checks
/// that key (the cgroup's existence is checked with the regions).
fn setting(rep: &Reporter, f: &Fields, key: &Node, value: &Node) -> Result<Setting, SpecError> {
    let kpath = f.path("key");
    let vpath = f.path("value");
    let text = string(rep, key, &kpath, &SET_KEYS)?;
    let parts: Vec<String> = toml_edit::Key::parse(text)
        .map(|ks| ks.iter().map(|k| k.get().to_string()).collect())
        .unwrap_or_default();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let bad = || {
        rep.at(
            key.at,
            kpath.clone(),
            format!("found \"{}\", expected {}", tree::quote(text), *SET_KEYS),
        )
    };
    Ok(match parts.as_slice() {
        ["cgroup", name, field @ ("memory_max" | "memory_high" | "memory_swap_max")] => {
            let limit = limit(rep, value, &vpath)?;
            let cgroup = name.to_string();
            match *field {
                "memory_max" => Setting::MemoryMax { cgroup, limit },
                "memory_high" => Setting::MemoryHigh { cgroup, limit },
                _ => Setting::MemorySwapMax { cgroup, limit },
            }
        }
        ["sysctl", name] => {
            let Some(k) = sysctl(name) else {
                return Err(bad());
            };
            (k.setting)(sysctl_value(rep, k, value, &vpath)?)
        }
        ["sysfs", VMA_RA_ENABLED] => {
            let b = match &value.val {
                Val::Bool(b) => Some(*b),
                Val::Str(s) => kstrtobool(s),
                Val::Int(n) => kstrtobool(&n.to_string()),
                _ => None,
            };
            Setting::VmaRaEnabled(
                b.ok_or_else(|| type_error(rep, value, &vpath, "a boolean (true or false)"))?,
            )
        }
        _ => return Err(bad()),
    })
}

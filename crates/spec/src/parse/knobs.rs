//! `[sysctl]`: the kernel's sysctls, checked against their rows in
//! `crate::sysctls`, and their part of the list of every knob in force
//! (`Spec::knobs`). `[sysfs]` is in `sysfs.rs`.

use super::fields::{integer, Fields};
use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::sysctls::{sysctl, SysctlKnob, SYSCTLS};
use crate::tree::Node;

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

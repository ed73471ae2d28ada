//! `set`: a knob or a cgroup's limit written between steps.

use crate::setup::cgroup_dir;

/// A `set` step: the knob's file or the cgroup's, written now (the setup
/// journaled a knob's old value, so the teardown restores it).
pub(super) fn run(s: &mmsim_spec::Setting) -> Result<(), String> {
    use mmsim_spec::Setting;
    let (path, value) = match s {
        Setting::MemoryMax { cgroup, limit } | Setting::MemoryHigh { cgroup, limit } => {
            let high = matches!(s, Setting::MemoryHigh { .. });
            let bytes = match limit {
                mmsim_spec::Limit::Max => None,
                mmsim_spec::Limit::Bytes(b) => Some(*b),
            };
            match crate::cgroup::limit_write(high, bytes)? {
                Some((file, v)) => (format!("{}/{file}", cgroup_dir(cgroup)), v),
                None => return Ok(()),
            }
        }
        Setting::MemorySwapMax { cgroup, limit } => {
            let v = match limit {
                mmsim_spec::Limit::Max => "max".to_string(),
                mmsim_spec::Limit::Bytes(b) => b.to_string(),
            };
            match crate::cgroup::swap_max(&v)? {
                Some((file, v)) => (format!("{}/{file}", cgroup_dir(cgroup)), v),
                // Back to "max" on v2, or v1, which never had it.
                None if matches!(crate::cgroup::mode(), crate::cgroup::Mode::V2(_)) => {
                    (format!("{}/memory.swap.max", cgroup_dir(cgroup)), v)
                }
                None => return Ok(()),
            }
        }
        _ => {
            let (knob, v) = s.knob().expect("not a cgroup's");
            (crate::setup::knob_path(&knob).expect("a knob's file"), v)
        }
    };
    std::fs::write(&path, &value).map_err(|e| format!("cannot write \"{value}\" to {path}: {e}"))
}

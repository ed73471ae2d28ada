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
        _ => {
            let (knob, v) = s.knob().expect("not a cgroup's");
            (crate::setup::knob_path(&knob).expect("a knob's file"), v)
        }
    };
    std::fs::write(&path, &value).map_err(|e| format!("cannot write \"{value}\" to {path}: {e}"))
}

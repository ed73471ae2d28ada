//! Running on the machine's own kernel (`--native`), not in the oracle's
//! throwaway guest: the runner changes the host's swap, cgroups and knobs,
//! so it first checks that it can do so faithfully and undo it all, and
//! refuses (exit 2) otherwise.
//!
//! Refused: not root; swap already on (the spec's devices must be the only
//! ones, and the teardown must leave /proc/swaps as it found it); a swap
//! device other than zram, or more than one (the host has no devices to
//! give the spec; zram0 is used and reset); a `[[disk]]` (no disks to
//! give it either); cgroups without a memory controller; zram missing or
//! in use.

use mmsim_spec::{Spec, SwapKind};

/// Why the spec cannot run natively on this machine, if it cannot.
pub fn preflight(spec: &Spec) -> Result<(), String> {
    spec_refusal(spec)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("--native: not root; the native runner sets up swap, cgroups and kernel knobs, which needs root".into());
    }
    let swaps = swaps_on();
    if !swaps.is_empty() {
        return Err(format!(
            "--native: swap is already on ({}); the spec's swap devices must be the machine's only ones and the run must leave /proc/swaps as it found it: swapoff them first",
            swaps.join(", ")
        ));
    }
    if !spec.swap.is_empty() {
        if !std::path::Path::new("/sys/block/zram0").exists() {
            return Err("--native: the spec swaps on zram, but /sys/block/zram0 does not exist (modprobe zram)".into());
        }
        let size = std::fs::read_to_string("/sys/block/zram0/disksize").unwrap_or_default();
        if size.trim() != "0" {
            return Err("--native: zram0 is in use (disksize is not 0); reset it first (echo 1 > /sys/block/zram0/reset)".into());
        }
    }
    if !spec.cgroups.is_empty() {
        if !crate::cgroup::available() {
            return Err("--native: the spec has cgroups, but this kernel has no memory controller mounted (cgroup v2 with memory, or v1's /sys/fs/cgroup/memory)".into());
        }
        for cg in &spec.cgroups {
            let high = match cg.memory_high {
                mmsim_spec::Limit::Max => None,
                mmsim_spec::Limit::Bytes(b) => Some(b),
            };
            crate::cgroup::limits(None, high)
                .map_err(|e| format!("--native: cgroup.{}.{e}", cg.name))?;
            crate::cgroup::oom_group(cg.memory_oom_group)
                .map_err(|e| format!("--native: cgroup.{}.{e}", cg.name))?;
            crate::cgroup::swap_max(&limit_text(cg.memory_swap_max))
                .map_err(|e| format!("--native: cgroup.{}.{e}", cg.name))?;
            crate::cgroup::zswap_max(&limit_text(cg.memory_zswap_max))
                .map_err(|e| format!("--native: cgroup.{}.{e}", cg.name))?;
            crate::cgroup::zswap_writeback(cg.memory_zswap_writeback)
                .map_err(|e| format!("--native: cgroup.{}.{e}", cg.name))?;
        }
        for s in crate::setup::settings(spec) {
            if let mmsim_spec::Setting::MemoryHigh { cgroup, limit } = s {
                crate::cgroup::limit_write(true, limit.pages().map(|p| p << 12))
                    .map_err(|e| format!("--native: a set step of cgroup.{cgroup}.{e}"))?;
            }
            if let mmsim_spec::Setting::MemorySwapMax { cgroup, limit } = s {
                crate::cgroup::swap_max(&limit_text(*limit))
                    .map_err(|e| format!("--native: a set step of cgroup.{cgroup}.{e}"))?;
            }
        }
    }
    Ok(())
}

/// A limit as a cgroup file takes it.
fn limit_text(l: mmsim_spec::Limit) -> String {
    match l {
        mmsim_spec::Limit::Max => "max".to_string(),
        mmsim_spec::Limit::Bytes(b) => b.to_string(),
    }
}

/// What of the spec a native run cannot give it, whatever the machine.
pub fn spec_refusal(spec: &Spec) -> Result<(), String> {
    if let Some(i) = spec.swap.iter().position(|d| d.kind != SwapKind::Zram) {
        return Err(format!(
            "--native: swap[{i}] is a {} device; natively only zram can be given to the spec (this machine has no spare disks), expected device = \"zram\"",
            spec.swap[i].kind.name()
        ));
    }
    if spec.swap.len() > 1 {
        return Err("--native: more than one [[swap]]; natively the spec gets zram0 only".into());
    }
    if !spec.disks.is_empty() {
        return Err("--native: [[disk]] needs a disk of its own, which a native run cannot give it (the oracle under QEMU can)".into());
    }
    Ok(())
}

/// The devices in /proc/swaps.
pub fn swaps_on() -> Vec<String> {
    std::fs::read_to_string("/proc/swaps")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Undoes what a killed runner's journal says it changed.
pub fn teardown(journal: &str) -> Result<(), String> {
    let mut j = crate::setup::Journal::load(journal)?;
    j.teardown();
    std::fs::remove_file(journal).map_err(|e| format!("cannot remove {journal}: {e}"))?;
    let left = swaps_on();
    if !left.is_empty() {
        return Err(format!(
            "swap still on after the teardown: {}",
            left.join(", ")
        ));
    }
    Ok(())
}

/// The CPU model, for the result (`/proc/cpuinfo`'s first "model name").
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> Spec {
        mmsim_spec::parse_str(
            &format!("[machine]\nmemory = \"512M\"\n{extra}\n[task.t]\nsteps = []\n"),
            "t.toml",
            &[],
        )
        .expect("spec")
    }

    #[test]
    fn what_a_native_run_cannot_give_is_refused() {
        assert!(spec_refusal(&spec("[[swap]]\ndevice = \"zram\"\nsize = \"64M\"")).is_ok());
        let e = spec_refusal(&spec("[[swap]]\ndevice = \"nvme\"\nsize = \"64M\"")).unwrap_err();
        assert!(e.contains("swap[0] is a nvme device"), "{e}");
        let two = "[[swap]]\ndevice = \"zram\"\nsize = \"64M\"\n[[swap]]\ndevice = \"zram\"\nsize = \"64M\"";
        assert!(spec_refusal(&spec(two))
            .unwrap_err()
            .contains("more than one"));
        let disk = "[[disk]]\nname = \"d\"\ndevice = \"nvme\"\nsize = \"64M\"";
        assert!(spec_refusal(&spec(disk)).unwrap_err().contains("[[disk]]"));
    }
}

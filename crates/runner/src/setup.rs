//! Puts the machine into the state the spec describes: knobs, swap devices
//! (zram), cgroup v2 groups; and takes it back out afterwards.

use mmsim_spec::{Limit, Spec, SwapKind};
use std::ffi::CString;
use std::fs;
use std::io::{Seek, SeekFrom, Write};

pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// <linux/swap.h>: swapon(2) flags.
const SWAP_FLAG_PREFER: libc::c_int = 0x8000;
const SWAP_FLAG_PRIO_MASK: libc::c_int = 0x7fff;

pub struct Setup {
    /// Knob files and the values they had before.
    restore: Vec<(String, String)>,
    swaps: Vec<String>,
    cgroups: Vec<String>,
    /// Every knob in force, read back after setting: `section:key` → value.
    pub knobs: Vec<(String, String)>,
}

fn write(path: &str, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("cannot write \"{value}\" to {path}: {e}"))
}

/// The file of a `sysctl:` or `sysfs:` knob.
fn knob_path(knob: &str) -> Option<String> {
    if let Some(name) = knob.strip_prefix("sysctl:") {
        return Some(format!("/proc/sys/{}", name.replace('.', "/")));
    }
    knob.strip_prefix("sysfs:").map(|p| format!("/sys/{p}"))
}

/// The bracketed choice of a sysfs multiple-choice file ("always [never]").
fn current_value(text: &str) -> String {
    let t = text.trim();
    match (t.find('['), t.find(']')) {
        (Some(a), Some(b)) if a < b => t[a + 1..b].to_string(),
        _ => t.to_string(),
    }
}

pub fn cgroup_dir(name: &str) -> String {
    format!("{CGROUP_ROOT}/mmsim-{name}")
}

impl Setup {
    pub fn apply(spec: &Spec) -> Result<Setup, String> {
        let mut s = Setup {
            restore: Vec::new(),
            swaps: Vec::new(),
            cgroups: Vec::new(),
            knobs: Vec::new(),
        };
        if let Err(e) = s.apply_all(spec) {
            s.teardown();
            return Err(e);
        }
        Ok(s)
    }

    fn apply_all(&mut self, spec: &Spec) -> Result<(), String> {
        for (knob, value) in &spec.knobs {
            let path = knob_path(knob).ok_or_else(|| format!("unknown knob {knob}"))?;
            // A mechanism the kernel was built without is as off as asked.
            if !std::path::Path::new(&path).exists()
                && matches!(value.as_str(), "n" | "never" | "0")
            {
                self.knobs
                    .push((knob.clone(), format!("{value} (not built in)")));
                continue;
            }
            let old = fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
            write(&path, value)?;
            self.restore.push((path.clone(), current_value(&old)));
            let now = current_value(&fs::read_to_string(&path).unwrap_or_default());
            self.knobs.push((knob.clone(), now));
        }
        for (i, dev) in spec.swap.iter().enumerate() {
            match dev.kind {
                SwapKind::Zram => self.zram_swapon(i, dev.size, dev.priority)?,
                other => {
                    return Err(format!(
                        "swap[{i}]: the runner cannot set up {} swap yet",
                        other.name()
                    ))
                }
            }
            self.knobs.push((
                format!("swap:{i}"),
                format!("{} {}", dev.kind.name(), dev.size),
            ));
        }
        if !spec.cgroups.is_empty() {
            write(&format!("{CGROUP_ROOT}/cgroup.subtree_control"), "+memory")?;
        }
        for cg in &spec.cgroups {
            let dir = cgroup_dir(&cg.name);
            if !std::path::Path::new(&dir).exists() {
                fs::create_dir(&dir).map_err(|e| format!("cannot create cgroup {dir}: {e}"))?;
            }
            self.cgroups.push(dir.clone());
            let limit = |l: Limit| match l {
                Limit::Max => "max".to_string(),
                Limit::Bytes(b) => b.to_string(),
            };
            write(&format!("{dir}/memory.max"), &limit(cg.memory_max))?;
            write(&format!("{dir}/memory.high"), &limit(cg.memory_high))?;
            self.knobs.push((
                format!("cgroup:{}/memory.max", cg.name),
                limit(cg.memory_max),
            ));
            self.knobs.push((
                format!("cgroup:{}/memory.high", cg.name),
                limit(cg.memory_high),
            ));
        }
        Ok(())
    }

    /// A zram device of `size` bytes with a swap header, swapped on.
    fn zram_swapon(&mut self, i: usize, size: u64, prio: Option<i32>) -> Result<(), String> {
        let mut n = i;
        let free = |n: usize| read_trim(&format!("/sys/block/zram{n}/disksize")) == "0";
        if !std::path::Path::new(&format!("/sys/block/zram{n}")).exists() || !free(n) {
            let added = read_trim("/sys/class/zram-control/hot_add");
            n = added
                .parse()
                .map_err(|_| "no zram device available (is the zram module loaded?)".to_string())?;
        }
        write(&format!("/sys/block/zram{n}/disksize"), &size.to_string())?;
        let dev = format!("/dev/zram{n}");
        mkswap(&dev, size)?;
        let mut flags = 0;
        if let Some(p) = prio {
            flags = SWAP_FLAG_PREFER | ((p as libc::c_int) & SWAP_FLAG_PRIO_MASK);
        }
        let c = CString::new(dev.clone()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::swapon(c.as_ptr(), flags) } != 0 {
            return Err(format!("swapon {dev}: {}", std::io::Error::last_os_error()));
        }
        self.swaps.push(dev);
        Ok(())
    }

    /// Undoes everything, best effort, in reverse order.
    pub fn teardown(&mut self) {
        for dir in self.cgroups.drain(..).rev() {
            let _ = fs::remove_dir(&dir);
        }
        for dev in self.swaps.drain(..).rev() {
            let c = CString::new(dev.clone()).expect("path");
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::swapoff(c.as_ptr()) };
            let name = dev.trim_start_matches("/dev/");
            let _ = fs::write(format!("/sys/block/{name}/reset"), "1");
        }
        for (path, old) in self.restore.drain(..).rev() {
            let _ = fs::write(&path, old);
        }
    }
}

fn read_trim(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Writes a version-1 swap header (what mkswap writes, without a UUID).
fn mkswap(dev: &str, size: u64) -> Result<(), String> {
    let pages = size / 4096;
    let mut page = vec![0u8; 4096];
    page[1024..1028].copy_from_slice(&1u32.to_le_bytes());
    page[1028..1032].copy_from_slice(&((pages - 1) as u32).to_le_bytes());
    page[4096 - 10..].copy_from_slice(b"SWAPSPACE2");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(dev)
        .map_err(|e| format!("open {dev}: {e}"))?;
    f.seek(SeekFrom::Start(0))
        .and_then(|_| f.write_all(&page))
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("mkswap {dev}: {e}"))
}

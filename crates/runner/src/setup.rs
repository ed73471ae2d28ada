//! Puts the machine into the state the spec describes: knobs, swap devices
//! (zram, or the virtio-blk, NVMe and IDE disks the oracle gave the guest),
//! cgroup v2 groups; and takes it back out afterwards.

use mmsim_spec::{Limit, Spec, SwapDevice, SwapKind};
use std::ffi::CString;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// <linux/swap.h>: swapon(2) flags.
const SWAP_FLAG_PREFER: libc::c_int = 0x8000;
const SWAP_FLAG_PRIO_MASK: libc::c_int = 0x7fff;

/// A swap device as set up, for the `swapoff` and `swapon` steps.
#[derive(Debug, Clone)]
pub struct SwapNode {
    /// The device node, e.g. /dev/vda.
    pub path: String,
    /// swapon(2)'s flags: the spec's priority, if it gives one.
    pub flags: libc::c_int,
}

impl SwapNode {
    pub fn swapon(&self) -> std::io::Result<()> {
        let c = CString::new(self.path.clone()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::swapon(c.as_ptr(), self.flags) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn swapoff(&self) -> std::io::Result<()> {
        let c = CString::new(self.path.clone()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::swapoff(c.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// swapon(2) flags for a spec priority.
fn swap_flags(prio: Option<i32>) -> libc::c_int {
    match prio {
        Some(p) => SWAP_FLAG_PREFER | ((p as libc::c_int) & SWAP_FLAG_PRIO_MASK),
        None => 0,
    }
}

/// How long the runner waits for a disk the oracle attached to show up
/// (modules probe asynchronously: NVMe scans namespaces from a workqueue,
/// libata probes its ports in the background).
const DISK_WAIT: Duration = Duration::from_secs(30);

pub struct Setup {
    /// Knob files and the values they had before.
    restore: Vec<(String, String)>,
    /// Swap devices swapped on, in order: the node and whether it is a
    /// zram device (reset after swapoff).
    swaps: Vec<(String, bool)>,
    /// Every `[[swap]]` device, by spec index.
    pub devices: Vec<SwapNode>,
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
            devices: Vec::new(),
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
            // The n-th device of its kind.
            let nth = spec.swap[..i].iter().filter(|d| d.kind == dev.kind).count();
            let node = match dev.kind {
                SwapKind::Zram => self.zram_swapon(i, dev.size, dev.priority)?,
                _ => self.disk_swapon(i, nth, dev)?,
            };
            self.devices.push(node);
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
    fn zram_swapon(&mut self, i: usize, size: u64, prio: Option<i32>) -> Result<SwapNode, String> {
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
        let node = SwapNode {
            path: dev.clone(),
            flags: swap_flags(prio),
        };
        node.swapon()
            .map_err(|e| format!("swap[{i}]: swapon {}: {e}", node.path))?;
        self.swaps.push((dev, true));
        check_proc_swaps(i, &node.path)?;
        Ok(node)
    }

    /// The disk the oracle attached for `[[swap]]` number `i` (the `nth`
    /// of its kind): its queue's rotational flag as the spec says, a swap
    /// header, swapon(2).
    fn disk_swapon(&mut self, i: usize, nth: usize, dev: &SwapDevice) -> Result<SwapNode, String> {
        let name = find_disk(dev.kind, i, nth)?;
        let rot_path = format!("/sys/block/{name}/queue/rotational");
        if let Some(r) = dev.rotational {
            let old = read_trim(&rot_path);
            write(&rot_path, if r { "1" } else { "0" })?;
            self.restore.push((rot_path.clone(), old));
        }
        // In force at swapon, set or not: it decides SWP_SOLIDSTATE and
        // whether VMA swap readahead is used at all.
        self.knobs
            .push((format!("swap:{i}:rotational"), read_trim(&rot_path)));
        let path = format!("/dev/{name}");
        wait_for(&path, || std::path::Path::new(&path).exists())
            .map_err(|e| format!("swap[{i}]: {e}"))?;
        let sectors: u64 = read_trim(&format!("/sys/block/{name}/size"))
            .parse()
            .unwrap_or(0);
        if sectors * 512 < dev.size {
            return Err(format!(
                "swap[{i}]: {path} has {} bytes, the spec's swap needs {}",
                sectors * 512,
                dev.size
            ));
        }
        mkswap(&path, dev.size)?;
        let node = SwapNode {
            path: path.clone(),
            flags: swap_flags(dev.priority),
        };
        node.swapon()
            .map_err(|e| format!("swap[{i}]: swapon {}: {e}", node.path))?;
        self.swaps.push((path, false));
        check_proc_swaps(i, &node.path)?;
        Ok(node)
    }

    /// Undoes everything, best effort, in reverse order.
    pub fn teardown(&mut self) {
        for dir in self.cgroups.drain(..).rev() {
            let _ = fs::remove_dir(&dir);
        }
        for (dev, zram) in self.swaps.drain(..).rev() {
            let c = CString::new(dev.clone()).expect("path");
            // SAFETY: a valid NUL-terminated path. A `swapoff` step may have
            // turned it off already (EINVAL): that is fine.
            unsafe { libc::swapoff(c.as_ptr()) };
            if zram {
                let name = dev.trim_start_matches("/dev/");
                let _ = fs::write(format!("/sys/block/{name}/reset"), "1");
            }
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

/// Polls `ready` until it holds or DISK_WAIT has passed.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > DISK_WAIT {
            return Err(format!(
                "{what} did not appear within {} s",
                DISK_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The block device name (under /sys/block) of the disk the oracle
/// attached for `[[swap]]` number `i`, the `nth` device of its kind.
/// virtio-blk and NVMe disks carry the serial `mmsim<i>`; NVMe controllers
/// probe asynchronously, so their numbering need not follow the command
/// line. IDE disks sit on the PIIX controller at index `nth` (primary
/// master, primary slave, secondary master, secondary slave): SCSI address
/// `nth/2:0:nth%2:0` under libata.
fn find_disk(kind: SwapKind, i: usize, nth: usize) -> Result<String, String> {
    let serial = format!("mmsim{i}");
    let (prefix, what) = match kind {
        SwapKind::Virtio => ("vd", format!("the virtio-blk disk with serial {serial}")),
        SwapKind::Nvme => ("nvme", format!("the NVMe disk with serial {serial}")),
        SwapKind::Hdd => ("sd", format!("IDE disk {nth} (ata{})", nth / 2 + 1)),
        SwapKind::Zram => unreachable!("zram is not a disk"),
    };
    let matches = |name: &str| -> bool {
        match kind {
            SwapKind::Virtio => read_trim(&format!("/sys/block/{name}/serial")) == serial,
            SwapKind::Nvme => read_trim(&format!("/sys/block/{name}/device/serial")) == serial,
            _ => fs::read_link(format!("/sys/block/{name}/device"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().to_string()))
                .is_some_and(|a| a == format!("{}:0:{}:0", nth / 2, nth % 2)),
        }
    };
    let mut found = None;
    wait_for(&format!("swap[{i}]: {what}"), || {
        found = fs::read_dir("/sys/block")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().to_string())
            // nvmeXcYnZ is a hidden multipath path device, not a disk.
            .filter(|n| n.starts_with(prefix) && !n[prefix.len()..].contains('c'))
            .find(|n| matches(n));
        found.is_some()
    })?;
    Ok(found.expect("found"))
}

/// swapon succeeded; /proc/swaps must now list the device.
fn check_proc_swaps(i: usize, path: &str) -> Result<(), String> {
    let swaps = fs::read_to_string("/proc/swaps").unwrap_or_default();
    if swaps
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().next() == Some(path))
    {
        Ok(())
    } else {
        Err(format!(
            "swap[{i}]: swapon {path} succeeded but /proc/swaps does not list it:\n{swaps}"
        ))
    }
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

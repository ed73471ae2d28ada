//! Puts the machine into the state the spec describes: knobs, swap devices
//! (zram, or the virtio-blk, NVMe and IDE disks the oracle gave the guest),
//! cgroup v2 groups, `[[file]]`s on a tmpfs of the run's own; and takes it
//! back out afterwards.

use crate::shared::SharedTokens;
use mmsim_spec::{FileOn, Limit, MapKind, Op, Spec, Step, SwapDevice, SwapKind};
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

/// Where the run's tmpfs is mounted.
pub const TMPFS_DIR: &str = "/mnt/mmsim-tmpfs";
/// shmem's THP policy for the internal mount (shared anonymous mappings)
/// and, at `force` or `deny`, for every tmpfs.
const SHMEM_ENABLED: &str = "kernel/mm/transparent_hugepage/shmem_enabled";

/// A `[[file]]` as set up: its path on the run's tmpfs and its content
/// tokens, one per file page, in memory every task process shares.
#[derive(Debug, Clone)]
pub struct SharedFile {
    pub path: String,
    pub pages: u64,
    pub tokens: SharedTokens,
}

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
    /// Every `[[file]]`, by spec index, created on the tmpfs.
    pub files: Vec<SharedFile>,
    /// The tmpfs is mounted at TMPFS_DIR; and whether the runner made that
    /// directory (removed again after).
    tmpfs: Option<bool>,
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
            files: Vec::new(),
            tmpfs: None,
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
        if let Some(i) = spec
            .swap
            .iter()
            .position(|d| d.read_latency.is_some() || d.write_latency.is_some())
        {
            return Err(format!(
                "swap[{i}]: read_latency and write_latency are simulator model parameters; a real device's latency cannot be set"
            ));
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
        if uses_shmem(spec) {
            self.shmem_thp_never()?;
        }
        if !spec.files.is_empty() {
            self.make_files(spec)?;
        }
        Ok(())
    }

    /// Large shmem folios are not modelled: shmem_enabled must be `never`
    /// (its default) for shared anonymous mappings, and neither `force` nor
    /// `deny` may override the run's tmpfs mount. Recorded as a knob.
    fn shmem_thp_never(&mut self) -> Result<(), String> {
        let key = format!("sysfs:{SHMEM_ENABLED}");
        let path = format!("/sys/{SHMEM_ENABLED}");
        if !std::path::Path::new(&path).exists() {
            self.knobs.push((key, "never (not built in)".into()));
            return Ok(());
        }
        let old = current_value(&read_trim(&path));
        if old != "never" {
            write(&path, "never")?;
            self.restore.push((path.clone(), old));
        }
        self.knobs.push((key, current_value(&read_trim(&path))));
        Ok(())
    }

    /// Mounts a tmpfs (huge=never, as large as the files together) at
    /// TMPFS_DIR and creates every `[[file]]` on it, sparse, with its size;
    /// maps each file's token array (in this process, before the task
    /// processes are forked: the root cgroup pays for it). Each file is
    /// recorded as knob `file:NAME` = `tmpfs SIZE huge=never`.
    fn make_files(&mut self, spec: &Spec) -> Result<(), String> {
        let made_dir = !std::path::Path::new(TMPFS_DIR).exists();
        if made_dir {
            fs::create_dir_all(TMPFS_DIR).map_err(|e| format!("cannot create {TMPFS_DIR}: {e}"))?;
        }
        let total: u64 = spec.files.iter().map(|f| f.size).sum();
        let opts = format!("size={total},huge=never,mode=0700");
        let src = CString::new("mmsim-tmpfs").expect("name");
        let fstype = CString::new("tmpfs").expect("name");
        let dir = CString::new(TMPFS_DIR).expect("path");
        let data = CString::new(opts.clone()).expect("options");
        // SAFETY: valid NUL-terminated strings.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                dir.as_ptr(),
                fstype.as_ptr(),
                0,
                data.as_ptr() as *const libc::c_void,
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if made_dir {
                let _ = fs::remove_dir(TMPFS_DIR);
            }
            return Err(format!("cannot mount tmpfs ({opts}) at {TMPFS_DIR}: {e}"));
        }
        self.tmpfs = Some(made_dir);
        for f in &spec.files {
            if f.on != FileOn::Tmpfs {
                return Err(format!(
                    "file {}: files on disks are not supported by the runner yet",
                    f.name
                ));
            }
            let path = format!("{TMPFS_DIR}/{}", f.name);
            let pages = f.size / 4096;
            let tokens = SharedTokens::map(pages as usize)
                .map_err(|e| format!("file {}: cannot map its token array: {e}", f.name))?;
            let file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path);
            let file = match file {
                Ok(file) => file,
                Err(e) => {
                    tokens.unmap();
                    return Err(format!("file {}: cannot create {path}: {e}", f.name));
                }
            };
            // From here on teardown removes it.
            self.files.push(SharedFile {
                path: path.clone(),
                pages,
                tokens,
            });
            // ftruncate(2): sparse, pages appear on first touch.
            file.set_len(f.size)
                .map_err(|e| format!("file {}: cannot size {path}: {e}", f.name))?;
            self.knobs.push((
                format!("file:{}", f.name),
                format!("tmpfs {} huge=never", f.size),
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

    /// Undoes everything, best effort, in reverse order. The files go
    /// first, so that swapoff need not bring their swapped pages back.
    pub fn teardown(&mut self) {
        for f in self.files.drain(..).rev() {
            let _ = fs::remove_file(&f.path);
            f.tokens.unmap();
        }
        if let Some(made_dir) = self.tmpfs.take() {
            let dir = CString::new(TMPFS_DIR).expect("path");
            // SAFETY: a valid NUL-terminated path; our own mount.
            unsafe { libc::umount2(dir.as_ptr(), libc::MNT_DETACH) };
            if made_dir {
                let _ = fs::remove_dir(TMPFS_DIR);
            }
        }
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

/// Whether the spec has files or maps shared memory anywhere.
pub fn uses_shmem(spec: &Spec) -> bool {
    fn walk(steps: &[Step]) -> bool {
        steps.iter().any(|s| match &s.op {
            Op::Mmap { kind, .. } => *kind != MapKind::Anon,
            Op::Repeat { steps, .. } | Op::Fork { steps } | Op::Spawn { steps } => walk(steps),
            _ => false,
        })
    }
    !spec.files.is_empty() || spec.tasks.iter().any(|t| walk(&t.steps))
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

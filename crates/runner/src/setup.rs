//! Puts the machine into the state the spec describes: knobs, swap devices
//! (zram, or the virtio-blk, NVMe and IDE disks the oracle gave the guest),
//! `[[disk]]`s (those disks, or brd's RAM disks) with an ext2 or XFS file
//! system each, cgroup v2 groups,
//! `[[file]]`s on a tmpfs of the run's own or on those disks; and takes it
//! back out afterwards.

use crate::shared::SharedTokens;
use mmsim_spec::{Disk, FileOn, Fs, Limit, MapKind, Op, Spec, SwapDevice, SwapKind, TmpfsHuge};
use std::ffi::CString;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// <linux/swap.h>: swapon(2) flags.
const SWAP_FLAG_PREFER: libc::c_int = 0x8000;
const SWAP_FLAG_PRIO_MASK: libc::c_int = 0x7fff;

/// The spec's zram swap devices (`[[swap]]` index, block device name),
/// for the tasks' reads of mm_stat (forked after setup, they inherit it).
static ZRAM_DEVICES: std::sync::Mutex<Vec<(usize, String)>> = std::sync::Mutex::new(Vec::new());

/// mm_stat of every zram swap device of the spec, now.
pub fn zram_mm_stat() -> Vec<mmsim_spec::output::ZramMmStat> {
    let d = ZRAM_DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    d.iter()
        .filter_map(|(i, name)| {
            let line = read_trim(&format!("/sys/block/{name}/mm_stat"));
            mmsim_spec::output::ZramMmStat::parse(*i, &line)
        })
        .collect()
}

/// zswap's debugfs counters now (/sys/kernel/debug/zswap/), those this
/// kernel has; None where debugfs shows none of them.
pub fn zswap_debugfs() -> Option<mmsim_spec::output::ZswapStats> {
    let mut z = mmsim_spec::output::ZswapStats::default();
    let mut any = false;
    for f in mmsim_spec::output::ZswapStats::FILES {
        let text = read_trim(&format!("/sys/kernel/debug/zswap/{f}"));
        if let Ok(v) = text.parse() {
            any |= z.set(f, v);
        }
    }
    any.then_some(z)
}

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

/// shmem's THP policy for the internal mount (shared anonymous mappings)
/// and, at `force` or `deny`, for every tmpfs.
const SHMEM_ENABLED: &str = "kernel/mm/transparent_hugepage/shmem_enabled";

/// Where a `[[disk]]`'s file system is mounted: DISK_DIR_PREFIX + name.
pub const DISK_DIR_PREFIX: &str = "/mnt/mmsim-";

/// A `[[file]]` as set up: its path (on the run's tmpfs or on a disk), its
/// content tokens, one per file page, in memory every task process shares,
/// and the `[[disk]]` it is on (None: tmpfs).
#[derive(Debug, Clone)]
pub struct SharedFile {
    pub path: String,
    pub pages: u64,
    pub tokens: SharedTokens,
    pub disk: Option<usize>,
}

/// What a setup changed on the machine, in order: all a teardown needs.
/// With `--journal FILE` it is written to FILE after every change, so a
/// runner that is killed can be undone by another (`--teardown FILE`).
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Journal {
    /// Knob files and the values they had before.
    restore: Vec<(String, String)>,
    /// Swap devices swapped on, in order: the node and whether it is a
    /// zram device (reset after swapoff).
    swaps: Vec<(String, bool)>,
    cgroups: Vec<String>,
    /// The tmpfs mounts, one per distinct `huge=` of the tmpfs files: the
    /// mount point and whether the runner made that directory (removed
    /// again after).
    tmpfs: Vec<(String, bool)>,
    /// The disks' file systems as mounted, in spec order: the mount point
    /// and whether the runner made that directory.
    mounts: Vec<(String, bool)>,
}

impl Journal {
    /// Reads a journal a runner left.
    pub fn load(path: &str) -> Result<Journal, String> {
        let text = fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("{path}: not a runner's journal: {e}"))
    }

    fn save(&self, path: &str) {
        let tmp = format!("{path}.tmp");
        let text = serde_json::to_string(self).expect("a journal serialises");
        if fs::write(&tmp, text)
            .and_then(|_| fs::rename(&tmp, path))
            .is_err()
        {
            eprintln!("mmsim-runner: cannot write the journal {path}");
        }
    }

    /// Takes everything back out, last change first: every process still
    /// in the spec's cgroups killed first (a killed runner's tasks), the
    /// mounts, the cgroups, the swap devices (zram reset), the knobs.
    pub fn teardown(&mut self) {
        for dir in &self.cgroups {
            kill_cgroup(dir);
        }
        for (dir, made_dir) in self.tmpfs.drain(..).rev() {
            umount(&dir, made_dir);
        }
        for (dir, made_dir) in self.mounts.drain(..).rev() {
            umount(&dir, made_dir);
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

/// SIGKILLs every process in cgroup `dir` and waits (up to 10 s) until it
/// is empty, so the group can be removed and its swap released.
fn kill_cgroup(dir: &str) {
    let procs = format!("{dir}/cgroup.procs");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<libc::pid_t> = fs::read_to_string(&procs)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in pids {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub struct Setup {
    /// What to undo, and where it is journaled.
    j: Journal,
    journal: Option<String>,
    /// Every `[[swap]]` device, by spec index.
    pub devices: Vec<SwapNode>,
    /// Every knob in force, read back after setting: `section:key` → value.
    pub knobs: Vec<(String, String)>,
    /// Every `[[file]]`, by spec index, created on the tmpfs.
    pub files: Vec<SharedFile>,
}

fn write(path: &str, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("cannot write \"{value}\" to {path}: {e}"))
}

/// The file of a `sysctl:` or `sysfs:` knob.
pub(crate) fn knob_path(knob: &str) -> Option<String> {
    if let Some(name) = knob.strip_prefix("sysctl:") {
        return Some(format!("/proc/sys/{}", name.replace('.', "/")));
    }
    knob.strip_prefix("sysfs:").map(|p| format!("/sys/{p}"))
}

/// The value a knob of a mechanism the kernel was built without already
/// has: writing it there is nothing to do.
fn off_value(value: &str) -> bool {
    matches!(value, "n" | "never" | "0")
}

/// Refuses, before anything is changed, a spec that writes a knob this
/// kernel does not have (an off value for a mechanism the kernel was
/// built without is what it already is, and is recorded as such), or
/// whose behaviour preset names another release than the one running.
pub fn refuse_missing_knobs(spec: &Spec, release: &str) -> Result<(), String> {
    if let Some(p) = mmsim_spec::Preset::of_release(release) {
        if p != spec.machine.kernel {
            return Err(format!(
                "machine.kernel = \"{}\" describes another release than this kernel ({release}); expected machine.kernel = \"{p}\" (the oracle sets it from --kernel)",
                spec.machine.kernel
            ));
        }
    }
    let written = spec
        .knobs
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str()))
        .chain(
            settings(spec)
                .into_iter()
                .filter_map(|s| s.knob())
                .map(|(k, _)| (k, "")),
        );
    for (knob, value) in written {
        let Some(path) = knob_path(&knob) else {
            continue;
        };
        if std::path::Path::new(&path).exists() || off_value(value) {
            continue;
        }
        // The release that brought the knob, from the spec's table of them.
        let why = path
            .strip_prefix("/sys/")
            .and_then(mmsim_spec::sysfs_since)
            .unwrap_or("this release does not have it");
        return Err(format!(
            "found the knob {knob}, but this kernel ({release}) has no {path} ({why}); expected a spec this release can run, or a kernel that has the knob (--kernel)"
        ));
    }
    Ok(())
}

/// The bracketed choice of a sysfs multiple-choice file ("always [never]").
pub(crate) fn current_value(text: &str) -> String {
    let t = text.trim();
    match (t.find('['), t.find(']')) {
        (Some(a), Some(b)) if a < b => t[a + 1..b].to_string(),
        _ => t.to_string(),
    }
}

pub fn cgroup_dir(name: &str) -> String {
    crate::cgroup::dir(name)
}

impl Setup {
    /// Applies the spec; with `journal`, records every change there as it
    /// is made (removed again by a complete teardown).
    pub fn apply(spec: &Spec, journal: Option<&str>) -> Result<Setup, String> {
        let mut s = Setup {
            j: Journal::default(),
            journal: journal.map(str::to_string),
            devices: Vec::new(),
            knobs: Vec::new(),
            files: Vec::new(),
        };
        s.save();
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
            if !std::path::Path::new(&path).exists() && off_value(value) {
                self.knobs
                    .push((knob.clone(), format!("{value} (not built in)")));
                continue;
            }
            let old = fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
            write(&path, value)?;
            self.j.restore.push((path.clone(), current_value(&old)));
            self.save();
            let now = current_value(&fs::read_to_string(&path).unwrap_or_default());
            self.knobs.push((knob.clone(), now));
        }
        // Knobs `set` steps write later: journaled now with their value, so
        // the teardown restores them however the run ends.
        for setting in settings(spec) {
            let Some((knob, _)) = setting.knob() else {
                continue;
            };
            let path = knob_path(&knob).expect("a setting's knob has a file");
            if self.j.restore.iter().any(|(p, _)| *p == path) {
                continue;
            }
            let old = fs::read_to_string(&path).map_err(|e| {
                format!("a set step writes {knob}, but this kernel has no {path}: {e}")
            })?;
            self.j.restore.push((path, current_value(&old)));
            self.save();
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
                SwapKind::Zram => self.zram_swapon(i, dev)?,
                _ => self.disk_swapon(i, nth, dev)?,
            };
            self.devices.push(node);
            self.knobs.push((
                format!("swap:{i}"),
                format!("{} {}", dev.kind.name(), dev.size),
            ));
        }
        if !spec.cgroups.is_empty() {
            crate::cgroup::enable(write)?;
        }
        for cg in &spec.cgroups {
            let dir = cgroup_dir(&cg.name);
            if !std::path::Path::new(&dir).exists() {
                fs::create_dir(&dir).map_err(|e| format!("cannot create cgroup {dir}: {e}"))?;
            }
            self.j.cgroups.push(dir.clone());
            self.save();
            let limit = |l: Limit| match l {
                Limit::Max => "max".to_string(),
                Limit::Bytes(b) => b.to_string(),
            };
            let bytes = |l: Limit| match l {
                Limit::Max => None,
                Limit::Bytes(b) => Some(b),
            };
            let files = crate::cgroup::limits(bytes(cg.memory_max), bytes(cg.memory_high))
                .map_err(|e| format!("cgroup.{}.{e}", cg.name))?;
            for (file, value) in files {
                write(&format!("{dir}/{file}"), &value)?;
            }
            if let Some((file, value)) = crate::cgroup::oom_group(cg.memory_oom_group)
                .map_err(|e| format!("cgroup.{}.{e}", cg.name))?
            {
                write(&format!("{dir}/{file}"), &value)?;
            }
            let (min, low) = (limit(cg.memory_min), limit(cg.memory_low));
            for (file, value) in crate::cgroup::protection(&min, &low)
                .map_err(|e| format!("cgroup.{}.{e}", cg.name))?
            {
                write(&format!("{dir}/{file}"), &value)?;
                self.knobs
                    .push((format!("cgroup:{}/{file}", cg.name), value.clone()));
            }
            let swap_max = crate::cgroup::swap_max(&limit(cg.memory_swap_max));
            let zswap_max = crate::cgroup::zswap_max(&limit(cg.memory_zswap_max));
            let zswap_wb = crate::cgroup::zswap_writeback(cg.memory_zswap_writeback);
            for set in [swap_max, zswap_max, zswap_wb] {
                if let Some((file, value)) = set.map_err(|e| format!("cgroup.{}.{e}", cg.name))? {
                    write(&format!("{dir}/{file}"), &value)?;
                    self.knobs
                        .push((format!("cgroup:{}/{file}", cg.name), value.clone()));
                }
            }
            self.knobs.push((
                format!("cgroup:{}/memory.max", cg.name),
                limit(cg.memory_max),
            ));
            self.knobs.push((
                format!("cgroup:{}/memory.high", cg.name),
                limit(cg.memory_high),
            ));
        }
        // A shmem_enabled the spec sets was written (and read back) with
        // the other knobs above.
        if uses_shmem(spec) && spec.sysfs.shmem_enabled.is_none() {
            self.shmem_thp_never()?;
        }
        for huge in TmpfsHuge::ALL {
            if spec
                .files
                .iter()
                .any(|f| f.on == FileOn::Tmpfs && f.huge == huge)
            {
                self.mount_tmpfs(spec, huge)?;
            }
        }
        for (i, disk) in spec.disks.iter().enumerate() {
            self.mount_disk(spec, i, disk)?;
        }
        self.make_files(spec)?;
        if !spec.disks.is_empty() {
            // The disk files start on disk, none of their pages cached:
            // write everything back, then drop the clean page cache (and
            // the shadow entries that reclaim of the written pages left).
            // SAFETY: sync has no preconditions.
            unsafe { libc::sync() };
            write("/proc/sys/vm/drop_caches", "3")?;
        }
        Ok(())
    }

    /// When the spec leaves shmem_enabled alone: it must be `never` (its
    /// 6.1 default, what the simulator assumes) for shared anonymous
    /// mappings, and neither `force` nor `deny` may override the tmpfs
    /// mounts' `huge=`. Recorded as a knob.
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
            self.j.restore.push((path.clone(), old));
            self.save();
        }
        self.knobs.push((key, current_value(&read_trim(&path))));
        Ok(())
    }

    /// Mounts a tmpfs with `huge`, as large as the tmpfs files with that
    /// `huge` together, at `huge.runner_dir()`, and checks in
    /// /proc/self/mounts that the kernel took the option.
    fn mount_tmpfs(&mut self, spec: &Spec, huge: TmpfsHuge) -> Result<(), String> {
        let dir = huge.runner_dir();
        let made_dir = !std::path::Path::new(&dir).exists();
        if made_dir {
            fs::create_dir_all(&dir).map_err(|e| format!("cannot create {dir}: {e}"))?;
        }
        let total: u64 = spec
            .files
            .iter()
            .filter(|f| f.on == FileOn::Tmpfs && f.huge == huge)
            .map(|f| f.size)
            .sum();
        let opts = format!("size={total},huge={},mode=0700", huge.name());
        if let Err(e) = mount("mmsim-tmpfs", &dir, "tmpfs", 0, Some(&opts)) {
            if made_dir {
                let _ = fs::remove_dir(&dir);
            }
            return Err(format!("cannot mount tmpfs ({opts}) at {dir}: {e}"));
        }
        self.j.tmpfs.push((dir.clone(), made_dir));
        self.save();
        // shmem_show_options shows huge= unless it is never.
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let shown = mounts
            .lines()
            .map(|l| l.split(' ').collect::<Vec<_>>())
            .rfind(|w| w.len() > 3 && w[1] == dir)
            .map(|w| {
                w[3].split(',')
                    .find_map(|o| o.strip_prefix("huge="))
                    .unwrap_or("never")
                    .to_string()
            });
        match shown {
            Some(h) if h == huge.name() => Ok(()),
            Some(h) => Err(format!(
                "tmpfs at {dir}: mounted with huge={}, but /proc/self/mounts shows huge={h}",
                huge.name()
            )),
            None => Err(format!(
                "tmpfs at {dir}: mounted, but /proc/self/mounts does not list it"
            )),
        }
    }

    /// The disk the oracle attached for `[[disk]]` number `i`: a file system
    /// of the spec's kind (ext2 or XFS) with 4 KiB blocks made on it,
    /// mounted (noatime) at DISK_DIR_PREFIX + name, its queue's
    /// read_ahead_kb set as the spec says. Recorded as knobs `disk:NAME` =
    /// `KIND SIZE FS read_ahead_kb=N` (N read back), `disk:NAME:fs` = how
    /// the file system was made and mounted, and `disk:NAME:free` = the
    /// bytes statfs(2) says an unprivileged file may take (f_bavail) once
    /// it is mounted.
    fn mount_disk(&mut self, spec: &Spec, i: usize, disk: &Disk) -> Result<(), String> {
        let what = format!("disk[{i}] ({})", disk.name);
        // IDE disks sit behind the block swap devices' on the controller.
        let nth = if disk.kind == SwapKind::Hdd {
            spec.swap.iter().filter(|d| d.kind == SwapKind::Hdd).count()
                + spec.disks[..i]
                    .iter()
                    .filter(|d| d.kind == SwapKind::Hdd)
                    .count()
        } else {
            0
        };
        let name = if disk.kind == SwapKind::Ram {
            ram_disk(spec, i, &what)?
        } else {
            find_disk(disk.kind, &format!("mmsimd{i}"), nth, &what)?
        };
        let dev = format!("/dev/{name}");
        wait_for(&dev, || std::path::Path::new(&dev).exists())
            .map_err(|e| format!("{what}: {e}"))?;
        let sectors: u64 = read_trim(&format!("/sys/block/{name}/size"))
            .parse()
            .unwrap_or(0);
        if sectors * 512 < disk.size {
            let hint = if disk.kind == SwapKind::Ram {
                format!(" (load brd with {})", brd_params(spec))
            } else {
                String::new()
            };
            return Err(format!(
                "{what}: {dev} has {} bytes, the spec's disk needs {}{hint}",
                sectors * 512,
                disk.size
            ));
        }
        let mkfs = match disk.fs {
            Fs::Ext2 => mke2fs(&dev, disk.size),
            Fs::Xfs => mkfs_xfs(&dev, disk.size),
        }
        .map_err(|e| format!("{what}: {e}"))?;
        let fstype = disk.fs.name();
        let dir = format!("{DISK_DIR_PREFIX}{}", disk.name);
        let made_dir = !std::path::Path::new(&dir).exists();
        if made_dir {
            fs::create_dir_all(&dir).map_err(|e| format!("{what}: cannot create {dir}: {e}"))?;
        }
        // ext2 is served by the ext4 driver (CONFIG_EXT4_USE_FOR_EXT2) on
        // Debian's kernels. noatime: no inode writes for reads.
        if let Err(e) = mount(&dev, &dir, fstype, libc::MS_NOATIME, None) {
            if made_dir {
                let _ = fs::remove_dir(&dir);
            }
            let module = match disk.fs {
                Fs::Ext2 => "ext4",
                Fs::Xfs => "xfs",
            };
            return Err(format!(
                "{what}: cannot mount {dev} ({fstype}) at {dir}: {e} (is the {module} module loaded?)"
            ));
        }
        self.j.mounts.push((dir.clone(), made_dir));
        self.save();
        let free = statfs_free(&dir).map_err(|e| format!("{what}: statfs {dir}: {e}"))?;
        let ra_path = format!("/sys/block/{name}/queue/read_ahead_kb");
        write(&ra_path, &disk.read_ahead_kb.to_string())?;
        let ra = read_trim(&ra_path);
        if ra != disk.read_ahead_kb.to_string() {
            return Err(format!(
                "{what}: wrote {} to {ra_path}, it reads \"{ra}\"",
                disk.read_ahead_kb
            ));
        }
        // The simulator writes the same string (crates/sim/src/lib.rs).
        self.knobs.push((
            format!("disk:{}", disk.name),
            format!(
                "{} {} {fstype} read_ahead_kb={ra}",
                disk.kind.name(),
                disk.size
            ),
        ));
        self.knobs.push((
            format!("disk:{}:fs", disk.name),
            format!("{mkfs}; mount -t {fstype} -o noatime {dev} {dir}"),
        ));
        self.knobs
            .push((format!("disk:{}:free", disk.name), free.to_string()));
        Ok(())
    }

    /// Creates every `[[file]]`, in spec order, and maps its token array
    /// (in this process, before the task processes are forked: the root
    /// cgroup pays for it). A tmpfs file is sparse: pages appear on first
    /// touch; recorded as knob `file:NAME` = `tmpfs SIZE huge=H`. A file
    /// on a disk is written whole (see `fill`) and fsync'ed; recorded as
    /// `file:NAME` = `on DISK SIZE`.
    fn make_files(&mut self, spec: &Spec) -> Result<(), String> {
        for f in &spec.files {
            let (path, disk) = match f.on {
                FileOn::Tmpfs => (f.runner_tmpfs_path().expect("on tmpfs"), None),
                FileOn::Disk(d) => {
                    let disk = spec
                        .disks
                        .get(d)
                        .ok_or_else(|| format!("file {}: there is no disk {d}", f.name))?;
                    (
                        format!("{DISK_DIR_PREFIX}{}/{}", disk.name, f.name),
                        Some(d),
                    )
                }
            };
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
            // From here on teardown unmaps its tokens (and removes a tmpfs
            // file).
            self.files.push(SharedFile {
                path: path.clone(),
                pages,
                tokens,
                disk,
            });
            match disk {
                None => {
                    // ftruncate(2): sparse, pages appear on first touch.
                    file.set_len(f.size)
                        .map_err(|e| format!("file {}: cannot size {path}: {e}", f.name))?;
                    self.knobs.push((
                        format!("file:{}", f.name),
                        format!("tmpfs {} huge={}", f.size, f.huge.name()),
                    ));
                }
                Some(d) => {
                    fill(&file, f.size)
                        .map_err(|e| format!("file {}: cannot write {path}: {e}", f.name))?;
                    self.knobs.push((
                        format!("file:{}", f.name),
                        format!("on {} {}", spec.disks[d].name, f.size),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A zram device of `size` bytes with a swap header, swapped on.
    fn zram_swapon(&mut self, i: usize, spec_dev: &SwapDevice) -> Result<SwapNode, String> {
        let (size, prio) = (spec_dev.size, spec_dev.priority);
        let mut n = i;
        let free = |n: usize| read_trim(&format!("/sys/block/zram{n}/disksize")) == "0";
        if !std::path::Path::new(&format!("/sys/block/zram{n}")).exists() || !free(n) {
            let added = read_trim("/sys/class/zram-control/hot_add");
            n = added
                .parse()
                .map_err(|_| "no zram device available (is the zram module loaded?)".to_string())?;
        }
        if let Some(c) = &spec_dev.compressor {
            // comp_algorithm is taken only before disksize.
            let path = format!("/sys/block/zram{n}/comp_algorithm");
            let offered = read_trim(&path);
            if !offered
                .replace(['[', ']'], " ")
                .split_whitespace()
                .any(|w| w == c)
            {
                return Err(format!(
                    "swap[{i}]: compressor {c:?}: this kernel's zram offers {offered}"
                ));
            }
            write(&path, c)?;
        }
        let algo = read_trim(&format!("/sys/block/zram{n}/comp_algorithm"));
        self.knobs
            .push((format!("swap:{i}:comp_algorithm"), current_value(&algo)));
        write(&format!("/sys/block/zram{n}/disksize"), &size.to_string())?;
        if let Some(pages) = spec_dev.mem_limit {
            // mem_limit is taken after disksize (a reset clears it).
            write(
                &format!("/sys/block/zram{n}/mem_limit"),
                &(pages * 4096).to_string(),
            )?;
        }
        ZRAM_DEVICES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((i, format!("zram{n}")));
        let dev = format!("/dev/zram{n}");
        mkswap(&dev, size)?;
        let node = SwapNode {
            path: dev.clone(),
            flags: swap_flags(prio),
        };
        node.swapon()
            .map_err(|e| format!("swap[{i}]: swapon {}: {e}", node.path))?;
        self.j.swaps.push((dev, true));
        self.save();
        check_proc_swaps(i, &node.path)?;
        Ok(node)
    }

    /// The disk the oracle attached for `[[swap]]` number `i` (the `nth`
    /// of its kind): its queue's rotational flag as the spec says, a swap
    /// header, swapon(2).
    fn disk_swapon(&mut self, i: usize, nth: usize, dev: &SwapDevice) -> Result<SwapNode, String> {
        let name = find_disk(dev.kind, &format!("mmsim{i}"), nth, &format!("swap[{i}]"))?;
        let rot_path = format!("/sys/block/{name}/queue/rotational");
        if let Some(r) = dev.rotational {
            let old = read_trim(&rot_path);
            write(&rot_path, if r { "1" } else { "0" })?;
            self.j.restore.push((rot_path.clone(), old));
            self.save();
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
        self.j.swaps.push((path, false));
        self.save();
        check_proc_swaps(i, &node.path)?;
        Ok(node)
    }

    /// Undoes everything, best effort, in reverse order. The files go
    /// first, so that swapoff need not bring their swapped pages back.
    pub fn teardown(&mut self) {
        for f in self.files.drain(..).rev() {
            // A disk's files go with its file system (made afresh by every
            // run): removing them would only read their indirect blocks.
            if f.disk.is_none() {
                let _ = fs::remove_file(&f.path);
            }
            f.tokens.unmap();
        }
        self.j.teardown();
        if let Some(path) = self.journal.take() {
            let _ = fs::remove_file(path);
        }
    }

    fn save(&self) {
        if let Some(path) = &self.journal {
            self.j.save(path);
        }
    }
}

impl Drop for Setup {
    /// A panic or an early return still takes the machine back.
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Whether the spec has tmpfs files or maps shared memory anywhere (files
/// on disks are page cache, not shmem).
pub fn uses_shmem(spec: &Spec) -> bool {
    let mut shared = spec.files.iter().any(|f| f.on == FileOn::Tmpfs);
    spec.for_each_op(&mut |op| {
        shared |= matches!(
            op,
            Op::Mmap {
                kind: MapKind::Shmem | MapKind::SharedAnon,
                ..
            }
        );
    });
    shared
}

/// Every `set` step's setting, in any task, fork, spawn or repeat.
pub fn settings(spec: &Spec) -> Vec<&mmsim_spec::Setting> {
    let mut out = Vec::new();
    spec.for_each_op(&mut |op| {
        if let Op::Set(setting) = op {
            out.push(setting);
        }
    });
    out
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

/// The parameters brd needs for the spec's RAM disks (`Spec::brd_params`,
/// what the oracle's /init passes to insmod).
fn brd_params(spec: &Spec) -> String {
    spec.brd_params().unwrap_or_default()
}

/// The RAM disk (brd) for `[[disk]]` number `i`: /dev/ramK for the K-th
/// RAM disk of the spec. brd makes its disks when it loads (the oracle's
/// /init loads it with `brd_params`); on a host, load it so beforehand.
fn ram_disk(spec: &Spec, i: usize, what: &str) -> Result<String, String> {
    let k = spec.disks[..i]
        .iter()
        .filter(|d| d.kind == SwapKind::Ram)
        .count();
    let name = format!("ram{k}");
    if !std::path::Path::new(&format!("/sys/block/{name}")).exists() {
        return Err(format!(
            "{what}: there is no RAM disk /dev/{name} (/sys/block/{name}); the brd module must be loaded with {} (modprobe brd {})",
            brd_params(spec),
            brd_params(spec)
        ));
    }
    Ok(name)
}

/// The block device name (under /sys/block) of a disk the oracle
/// attached (`what` names it in messages), the `nth` IDE disk if it is one.
/// virtio-blk and NVMe disks carry a serial: `mmsim<i>` for `[[swap]]`
/// number i, `mmsimd<i>` for `[[disk]]` number i; NVMe controllers probe
/// asynchronously, so their numbering need not follow the command line.
/// IDE disks sit on the PIIX controller at index `nth` (primary master,
/// primary slave, secondary master, secondary slave): SCSI address
/// `nth/2:0:nth%2:0` under libata.
fn find_disk(kind: SwapKind, serial: &str, nth: usize, what: &str) -> Result<String, String> {
    let (prefix, desc) = match kind {
        SwapKind::Virtio => ("vd", format!("the virtio-blk disk with serial {serial}")),
        SwapKind::Nvme => ("nvme", format!("the NVMe disk with serial {serial}")),
        SwapKind::Hdd => ("sd", format!("IDE disk {nth} (ata{})", nth / 2 + 1)),
        SwapKind::Zram => unreachable!("zram is not a disk"),
        SwapKind::Ram => unreachable!("a RAM disk is found by ram_disk"),
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
    wait_for(&format!("{what}: {desc}"), || {
        found = fs::read_dir("/sys/block")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().to_string())
            // nvmeXcYnZ is a hidden multipath path device, not a disk
            // (and vdc is a virtio disk).
            .filter(|n| {
                n.starts_with(prefix)
                    && !(kind == SwapKind::Nvme && n[prefix.len()..].contains('c'))
            })
            .find(|n| matches(n));
        found.is_some()
    })?;
    Ok(found.expect("found"))
}

/// mount(2).
fn mount(
    src: &str,
    dir: &str,
    fstype: &str,
    flags: libc::c_ulong,
    opts: Option<&str>,
) -> std::io::Result<()> {
    let src = CString::new(src).expect("source");
    let dir = CString::new(dir).expect("path");
    let fstype = CString::new(fstype).expect("type");
    let data = opts.map(|o| CString::new(o).expect("options"));
    // SAFETY: valid NUL-terminated strings (or a null data pointer).
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            dir.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |d| d.as_ptr() as *const libc::c_void),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Unmounts our own mount at `dir` (lazily if it is busy) and removes the
/// directory if the runner made it.
fn umount(dir: &str, made_dir: bool) {
    let c = CString::new(dir).expect("path");
    // SAFETY: a valid NUL-terminated path; our own mount.
    unsafe {
        if libc::umount2(c.as_ptr(), 0) != 0 {
            libc::umount2(c.as_ptr(), libc::MNT_DETACH);
        }
    }
    if made_dir {
        let _ = fs::remove_dir(dir);
    }
}

/// Makes an ext2 file system with 4 KiB blocks on `dev` (the first `size`
/// bytes of it): with busybox's mke2fs if there is one (the oracle's
/// initramfs has only that), else e2fsprogs'. Returns the command, for the
/// record.
fn mke2fs(dev: &str, size: u64) -> Result<String, String> {
    let blocks = (size / 4096).to_string();
    let kib = (size / 1024).to_string();
    let tries: [(&str, Vec<&str>); 3] = [
        (
            "/bin/busybox",
            vec!["mke2fs", "-F", "-b", "4096", dev, &kib],
        ),
        (
            "/sbin/mke2fs",
            vec!["-F", "-q", "-t", "ext2", "-b", "4096", dev, &blocks],
        ),
        (
            "/usr/sbin/mke2fs",
            vec!["-F", "-q", "-t", "ext2", "-b", "4096", dev, &blocks],
        ),
    ];
    let mut errors = Vec::new();
    for (prog, args) in tries {
        if !std::path::Path::new(prog).exists() {
            continue;
        }
        // Its chatter must not reach the runner's stdout (the result).
        match std::process::Command::new(prog)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
        {
            Ok(o) if o.status.success() => {
                return Ok(format!("{prog} {}", args.join(" ")));
            }
            Ok(o) => errors.push(format!(
                "{prog} {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&o.stdout).trim(),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => errors.push(format!("{prog}: {e}")),
        }
    }
    if errors.is_empty() {
        return Err("no mke2fs (neither /bin/busybox nor e2fsprogs' /sbin/mke2fs)".into());
    }
    Err(format!("mke2fs failed: {}", errors.join("; ")))
}

/// Where xfsprogs keeps mkfs.xfs (the oracle's initramfs has it at the
/// host's path, with its shared libraries).
const MKFS_XFS: [&str; 2] = ["/usr/sbin/mkfs.xfs", "/sbin/mkfs.xfs"];

/// Makes an XFS file system with 4 KiB blocks on the first `size` bytes of
/// `dev`: xfsprogs' defaults otherwise (Debian 12's 6.1: 4 allocation
/// groups, an internal 64 MiB log below 128 GiB, crc, finobt, reflink),
/// no discard (-K). Returns the command, for the record.
fn mkfs_xfs(dev: &str, size: u64) -> Result<String, String> {
    let prog = MKFS_XFS
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or("no mkfs.xfs (install xfsprogs; the oracle puts it in its initramfs)")?;
    let dsize = format!("size={size}");
    let args = ["-f", "-q", "-K", "-b", "size=4096", "-d", &dsize, dev];
    // Its chatter must not reach the runner's stdout (the result).
    match std::process::Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Ok(format!("{prog} {}", args.join(" "))),
        Ok(o) => Err(format!(
            "{prog} {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout).trim(),
            // Only the first line: the usage text follows a refusal.
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("")
        )),
        Err(e) => Err(format!("{prog}: {e}")),
    }
}

/// The bytes an unprivileged file may take on the file system at `dir`
/// (statfs(2): f_bavail blocks of f_bsize).
fn statfs_free(dir: &str) -> std::io::Result<u64> {
    let c = CString::new(dir).expect("path");
    // SAFETY: a valid NUL-terminated path and a zeroed out-parameter.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail * st.f_bsize as u64)
}

/// What a disk file holds at start on every page: nonzero bytes, except
/// the content token's slot (the first 4 bytes), which reads 0 ("never
/// written"). Pages are never sparse: reading one is real disk I/O.
pub fn initial_page() -> Vec<u8> {
    let mut page = vec![0xa5u8; 4096];
    page[..4].fill(0);
    page
}

/// Writes a disk file's `size` bytes of initial data, every page as
/// `initial_page`, through the page cache, and fsyncs it. Every FILL_SYNC
/// bytes the written range is written back and dropped from the page cache
/// (POSIX_FADV_DONTNEED), so that setup does not push the guest into
/// reclaim.
fn fill(file: &fs::File, size: u64) -> std::io::Result<()> {
    const CHUNK: usize = 1 << 20;
    const FILL_SYNC: u64 = 16 << 20;
    let page = initial_page();
    let buf: Vec<u8> = page.iter().copied().cycle().take(CHUNK).collect();
    let mut at = 0u64;
    let mut synced = 0u64;
    while at < size {
        let n = (CHUNK as u64).min(size - at) as usize;
        file.write_all_at(&buf[..n], at)?;
        at += n as u64;
        if at - synced >= FILL_SYNC || at == size {
            file.sync_data()?;
            // SAFETY: a valid descriptor; advice only.
            unsafe {
                libc::posix_fadvise(
                    file.as_raw_fd(),
                    synced as libc::off_t,
                    (at - synced) as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
            synced = at;
        }
    }
    file.sync_all()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_on(kernel: &str) -> Spec {
        mmsim_spec::parse_str(
            &format!(
                "[machine]\nmemory = \"512M\"\nkernel = \"{kernel}\"\n[task.t]\nsteps = [{{ op = \"mmap\", name = \"a\", kind = \"anon\", size = \"4K\" }}]\n"
            ),
            "t.toml",
            &[],
        )
        .unwrap()
    }

    #[test]
    fn a_spec_for_another_release_is_refused() {
        let e = refuse_missing_knobs(&spec_on("6.1"), "5.10.0-32-amd64").unwrap_err();
        assert!(
            e.contains("machine.kernel = \"6.1\"") && e.contains("\"5.10\""),
            "{e}"
        );
        // A release without a preset (a native run's host) runs any.
        let s = spec_on("6.1");
        let missing = |(k, _): &(String, String)| {
            knob_path(k).is_some_and(|p| !std::path::Path::new(&p).exists())
        };
        // Every knob the 6.1 spec writes either exists here or is an off
        // value the kernel already has.
        if !s.knobs.iter().any(|k| missing(k) && !off_value(&k.1)) {
            assert!(refuse_missing_knobs(&s, "6.18.44-host").is_ok());
        }
        assert!(refuse_missing_knobs(&spec_on("5.10"), "5.10.0-32-amd64").is_ok());
    }

    #[test]
    fn ram_disks_are_the_spec_s_ram_disks_in_order() {
        let spec = mmsim_spec::parse_str(
            r#"
[machine]
memory = "1G"
[[disk]]
name = "a"
device = "ram"
size = "16M"
[[disk]]
name = "v"
device = "virtio"
size = "16M"
[[disk]]
name = "b"
device = "ram"
size = "300M"
fs = "xfs"
[task.main]
steps = []
"#,
            "t.toml",
            &[],
        )
        .unwrap();
        // What the oracle's /init gives insmod (crates/oracle module_args).
        assert_eq!(brd_params(&spec), "rd_nr=2 rd_size=307200");
        // The second RAM disk is /dev/ram1 whatever lies between; a
        // missing one names the parameters brd needs.
        match ram_disk(&spec, 2, "disk[2] (b)") {
            Ok(name) => assert_eq!(name, "ram1"),
            Err(e) => assert!(
                e.contains("/dev/ram1") && e.contains("modprobe brd rd_nr=2 rd_size=307200"),
                "{e}"
            ),
        }
    }
}

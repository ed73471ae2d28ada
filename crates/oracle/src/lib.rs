//! The real-kernel oracle: runs a spec on Linux under QEMU with the native
//! runner in a busybox initramfs and brings back the runner's result
//! document (the same JSON `mmsim run --json` prints).
//!
//! The kernel comes from /boot/vmlinuz-* (or `--kernel`), its modules from
//! /lib/modules/RELEASE (or `--modules`). The initramfs — busybox, the
//! static runner, the modules the spec needs, /init — is built once and
//! cached under ~/.cache/mmsim, keyed by the hash of its content; the spec
//! travels in a second small archive appended to it.

pub mod compare;
mod cpio;
pub mod guests;
pub mod native;

use mmsim_spec::output::RunResult;
use mmsim_spec::{Fs, Spec, SwapKind};
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub enum OracleError {
    /// Something the oracle needs is not installed.
    Missing(String),
    /// The guest ran but did not produce a result.
    Guest {
        message: String,
        console: String,
    },
    Io(String),
}

impl fmt::Display for OracleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OracleError::Missing(m) => write!(f, "{m}"),
            OracleError::Guest { message, console } => {
                let tail: Vec<&str> = console.lines().rev().take(25).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                write!(
                    f,
                    "{message}\n--- guest console (last lines) ---\n{}",
                    tail.join("\n")
                )
            }
            OracleError::Io(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for OracleError {}

const PACKAGES: &str = "apt-get install qemu-system-x86 linux-image-amd64 busybox-static xfsprogs";

/// Where everything the oracle uses lives.
#[derive(Debug, Clone)]
pub struct Oracle {
    pub kernel: PathBuf,
    pub release: String,
    pub modules: PathBuf,
    pub qemu: PathBuf,
    pub busybox: PathBuf,
    pub runner: PathBuf,
    pub cache: PathBuf,
    pub timeout: Duration,
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The newest /boot/vmlinuz-*, by version order of the release string.
fn newest_kernel() -> Option<PathBuf> {
    kernels_in(&[PathBuf::from("/boot")]).pop()
}

/// The vmlinuz-* images in `dirs`, oldest release first.
fn kernels_in(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .collect();
    v.sort_by_key(|p| version_key(&p.file_name().unwrap_or_default().to_string_lossy()));
    v
}

/// A release's numbers in order, for sorting releases by version.
pub fn version_key(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse().ok())
        .collect()
}

/// Where mmsim caches initramfs images and the kernels
/// `scripts/get-kernel` fetches: $XDG_CACHE_HOME/mmsim, else
/// ~/.cache/mmsim.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("mmsim")
}

/// The kernel images a release name may mean: /boot's and those
/// `scripts/get-kernel` unpacked under the cache (kernels/NAME/boot/).
fn installed_kernels() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("/boot")];
    if let Ok(rd) = std::fs::read_dir(cache_dir().join("kernels")) {
        dirs.extend(rd.filter_map(|e| e.ok()).map(|e| e.path().join("boot")));
    }
    kernels_in(&dirs)
}

/// `--kernel RELEASE`: the newest installed image whose release is RELEASE
/// or starts with it ("5.10" finds vmlinuz-5.10.0-32-amd64).
fn kernel_by_release(release: &str) -> Result<PathBuf, OracleError> {
    let all = installed_kernels();
    let matches = |p: &PathBuf, exact: bool| {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        let r = name.trim_start_matches("vmlinuz-");
        if exact {
            r == release
        } else {
            r.starts_with(release) && r[release.len()..].starts_with(|c: char| !c.is_ascii_digit())
        }
    };
    all.iter()
        .rev()
        .find(|p| matches(p, true))
        .or_else(|| all.iter().rev().find(|p| matches(p, false)))
        .cloned()
        .ok_or_else(|| {
            let have: Vec<String> = all
                .iter()
                .map(|p| p.file_name().unwrap_or_default().to_string_lossy().trim_start_matches("vmlinuz-").to_string())
                .collect();
            OracleError::Missing(format!(
                "--kernel {release}: found no kernel image of that release (installed: {}); expected a path to a kernel image, or a release `scripts/get-kernel SUITE` fetched or /boot holds",
                if have.is_empty() { "none".to_string() } else { have.join(", ") }
            ))
        })
}

/// The kernel a spec's `machine.kernel` boots without `--kernel`: one of
/// that release. For 6.1, the default preset, /boot's newest kernel
/// stands in when no 6.1 is installed (said on stderr); another preset
/// needs its own release.
fn kernel_for_preset(preset: mmsim_spec::Preset) -> Result<PathBuf, OracleError> {
    if let Ok(k) = kernel_by_release(preset.name()) {
        return Ok(k);
    }
    if preset != mmsim_spec::Preset::V6_1 {
        return Err(OracleError::Missing(format!(
            "machine.kernel = \"{preset}\": no {preset} kernel is installed; expected one fetched by `scripts/get-kernel {}`, or --kernel",
            preset.suite()
        )));
    }
    let k = newest_kernel().ok_or_else(|| {
        OracleError::Missing(format!(
            "no kernel in /boot (vmlinuz-*); install one: {PACKAGES}"
        ))
    })?;
    eprintln!(
        "mmsim: no 6.1 kernel installed; booting {} (`scripts/get-kernel bookworm` fetches 6.1)",
        k.display()
    );
    Ok(k)
}

impl Oracle {
    /// Finds the kernel (`kernel`, else one of the spec's preset's
    /// release), modules, QEMU, busybox and the static runner.
    pub fn detect(
        kernel: Option<PathBuf>,
        preset: mmsim_spec::Preset,
        modules: Option<PathBuf>,
        runner: Option<PathBuf>,
    ) -> Result<Oracle, OracleError> {
        let kernel = match kernel {
            Some(k) if k.is_file() => k,
            // A path that is not there is an error; a bare name a release.
            Some(k) if k.components().count() > 1 || k.is_absolute() => {
                return Err(OracleError::Missing(format!(
                    "no kernel image at {}",
                    k.display()
                )))
            }
            Some(k) => kernel_by_release(&k.to_string_lossy())?,
            None => kernel_for_preset(preset)?,
        };
        let release = kernel
            .file_name()
            .and_then(|n| {
                n.to_string_lossy()
                    .strip_prefix("vmlinuz-")
                    .map(str::to_string)
            })
            .unwrap_or_default();
        // An unpacked kernel's modules are beside its boot/ directory.
        let modules = modules.unwrap_or_else(|| {
            let beside = kernel
                .parent()
                .and_then(Path::parent)
                .map(|root| root.join("lib/modules").join(&release));
            match beside {
                Some(m) if !kernel.starts_with("/boot") && m.is_dir() => m,
                _ => PathBuf::from(format!("/lib/modules/{release}")),
            }
        });
        if !modules.join("modules.dep").is_file() {
            return Err(OracleError::Missing(format!(
                "no kernel modules for {} at {} (modules.dep); pass --modules DIR or install the matching linux-image package",
                kernel.display(),
                modules.display()
            )));
        }
        let qemu = which("qemu-system-x86_64").ok_or_else(|| {
            OracleError::Missing(format!("qemu-system-x86_64 is not installed; {PACKAGES}"))
        })?;
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file() && is_static(p))
            .ok_or_else(|| {
                OracleError::Missing(format!("a static busybox is not installed; {PACKAGES}"))
            })?;
        let runner = match runner.or_else(|| std::env::var_os("MMSIM_RUNNER").map(PathBuf::from)) {
            Some(r) => r,
            None => build_runner()?,
        };
        let cache = cache_dir();
        Ok(Oracle {
            kernel,
            release,
            modules,
            qemu,
            busybox,
            runner,
            cache,
            timeout: Duration::from_secs(3600),
        })
    }

    /// Runs `spec` (read from `spec_text`, with `sets` applied by the
    /// runner) once on the real kernel.
    pub fn run(
        &self,
        spec: &Spec,
        spec_text: &str,
        sets: &[String],
    ) -> Result<RunResult, OracleError> {
        if !spec.vms.is_empty() {
            return Err(OracleError::Missing(
                "the spec has guests ([vm.NAME]), which the oracle under QEMU does not boot (QEMU in QEMU); a native run does (guests.rs)".into(),
            ));
        }
        if let Some(why) = not_whole_mib(spec.machine.memory) {
            return Err(OracleError::Missing(format!("machine.memory: {why}")));
        }
        let initrd = self.initrd(spec, spec_text, sets)?;
        let work = tempdir(&self.cache)?;
        let result = self.boot_in(spec, &initrd, &work);
        // The work folder (the disks' images too) goes whatever
        // happened in the guest.
        let _ = std::fs::remove_dir_all(&work);
        result
    }

    fn boot_in(&self, spec: &Spec, initrd: &[u8], work: &Path) -> Result<RunResult, OracleError> {
        let initrd_path = work.join("initrd.cpio");
        let out_path = work.join("result.txt");
        std::fs::write(&initrd_path, initrd).map_err(|e| OracleError::Io(e.to_string()))?;
        let disks = disk_args(spec, work)?;
        let console = self.boot(spec, &initrd_path, &out_path, &disks)?;
        read_result(&out_path, &console)
    }

    /// `spec`'s whole initramfs: the cached base (busybox, the runner,
    /// the modules it needs), then the run's archive (the spec's text,
    /// `sets`, module parameters) and its trace files.
    fn initrd(
        &self,
        spec: &Spec,
        spec_text: &str,
        sets: &[String],
    ) -> Result<Vec<u8>, OracleError> {
        std::fs::create_dir_all(&self.cache)
            .map_err(|e| OracleError::Io(format!("cannot create {}: {e}", self.cache.display())))?;
        let mut initrd = read(&self.base_initramfs(spec)?)?;
        initrd.extend(run_archive(spec_text, sets, &module_args(spec)));
        initrd.extend(trace_archive(spec)?);
        Ok(initrd)
    }

    /// The cached initramfs for the modules `spec` needs.
    fn base_initramfs(&self, spec: &Spec) -> Result<PathBuf, OracleError> {
        let mods = self.module_chain(&wanted_modules(spec))?;
        let busybox = read(&self.busybox)?;
        let runner = read(&self.runner)?;
        // Host programs the runner runs, at their own paths, with their
        // shared libraries and the dynamic loader.
        let programs = if spec.disks.iter().any(|d| d.fs == Fs::Xfs) {
            mkfs_xfs_files(&MKFS_XFS)?
        } else {
            Vec::new()
        };
        let mut h = Sha256::new();
        h.update(INIT.as_bytes());
        h.update(&busybox);
        h.update(&runner);
        for (name, data) in mods.iter().chain(&programs) {
            h.update(name.as_bytes());
            h.update(data);
        }
        let key: String = h
            .finalize()
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect();
        let path = self.cache.join(format!("initramfs-{key}.cpio"));
        if path.is_file() {
            return Ok(path);
        }
        let mut c = cpio::Cpio::new();
        let mut dirs = vec!["bin", "dev", "proc", "sys", "tmp", "modules"];
        for d in &dirs {
            c.dir(d);
        }
        c.char_dev("dev/console", 5, 1);
        c.file("bin/busybox", 0o755, &busybox);
        for applet in [
            "sh", "mount", "insmod", "mkdir", "cat", "echo", "poweroff", "sleep", "ls",
        ] {
            c.symlink(&format!("bin/{applet}"), "busybox");
        }
        c.file("init", 0o755, INIT.as_bytes());
        c.file("runner", 0o755, &runner);
        let order: Vec<String> = mods.iter().map(|(n, _)| n.clone()).collect();
        for (name, data) in &mods {
            c.file(&format!("modules/{name}"), 0o644, data);
        }
        c.file("modules/order", 0o644, (order.join("\n") + "\n").as_bytes());
        // The kernel's unpacker makes no missing parent directories.
        for (path, data) in &programs {
            for (at, _) in path.match_indices('/') {
                let parent = &path[..at];
                if !dirs.contains(&parent) {
                    c.dir(parent);
                    dirs.push(parent);
                }
            }
            c.file(path, 0o755, data);
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, c.finish())
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| OracleError::Io(format!("{}: {e}", path.display())))?;
        Ok(path)
    }

    /// The .ko files for `wanted` and their dependencies, in load order.
    fn module_chain(&self, wanted: &[&str]) -> Result<Vec<(String, Vec<u8>)>, OracleError> {
        let dep = std::fs::read_to_string(self.modules.join("modules.dep"))
            .map_err(|e| OracleError::Io(e.to_string()))?;
        let builtin = std::fs::read_to_string(self.modules.join("modules.builtin")).ok();
        let mut out: Vec<(String, Vec<u8>)> = Vec::new();
        for w in wanted {
            let ko = format!("/{w}.ko");
            let Some(line) = dep
                .lines()
                .find(|l| l.split(':').next().is_some_and(|m| m.ends_with(&ko)))
            else {
                // Built into the kernel (virtio_pci is from 6.12): listed in
                // modules.builtin, or, where a package ships no such list
                // (Debian's 7.x), taken as built in; a driver that is
                // neither shows as its device missing in the guest.
                match &builtin {
                    Some(b) if !b.is_empty() && !b.lines().any(|l| l.ends_with(&ko)) => {
                        return Err(OracleError::Missing(format!(
                            "module {w}.ko not found in {} (neither in modules.dep nor in modules.builtin)",
                            self.modules.display()
                        )))
                    }
                    _ => continue,
                }
            };
            let (m, deps) = line.split_once(':').unwrap_or((line, ""));
            // modprobe loads the dependency list from its end.
            let mut chain: Vec<&str> = deps.split_whitespace().rev().collect();
            chain.push(m.trim());
            for rel in chain {
                let name = Path::new(rel)
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string();
                if out.iter().any(|(n, _)| *n == name) {
                    continue;
                }
                if !name.ends_with(".ko") {
                    return Err(OracleError::Missing(format!("compressed module {rel}: decompress the modules (xz -d) and pass --modules")));
                }
                out.push((name, read(&self.modules.join(rel))?));
            }
        }
        Ok(out)
    }

    /// QEMU's arguments for booting `spec` with `initrd`, the result on
    /// the second serial port into `out`, with accelerator options
    /// `accel` (disks not included).
    fn qemu_args(&self, spec: &Spec, initrd: &Path, out: &Path, accel: &str) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "-m".into(),
            format!("{}M", spec.machine.memory >> 20),
            "-smp".into(),
            smp(&spec.machine),
            // QEMU's default CPU model: `-cpu max` costs ~2 MB of MemTotal
            // and is no faster under TCG.
            "-accel".into(),
            accel.into(),
        ];
        a.extend(
            ["-display", "none", "-monitor", "none", "-no-reboot"]
                .into_iter()
                .chain(["-serial", "stdio", "-serial"])
                .map(String::from),
        );
        a.push(format!("file:{}", out.display()));
        a.extend([
            "-kernel".into(),
            self.kernel.display().to_string(),
            "-initrd".into(),
            initrd.display().to_string(),
            "-append".into(),
            "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init".into(),
        ]);
        a
    }

    fn boot(
        &self,
        spec: &Spec,
        initrd: &Path,
        out: &Path,
        disks: &[String],
    ) -> Result<String, OracleError> {
        let mut cmd = Command::new(&self.qemu);
        cmd.args(self.qemu_args(spec, initrd, out, "tcg"))
            .args(disks)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().map_err(|e| {
            OracleError::Missing(format!("cannot start {}: {e}", self.qemu.display()))
        })?;
        let started = Instant::now();
        let pid = child.id();
        let timeout = self.timeout;
        let watchdog = std::thread::spawn(move || {
            while started.elapsed() < timeout {
                std::thread::sleep(Duration::from_millis(200));
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    return;
                }
            }
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        });
        let output = child
            .wait_with_output()
            .map_err(|e| OracleError::Io(e.to_string()))?;
        let _ = watchdog.join();
        let mut console = String::from_utf8_lossy(&output.stdout).replace('\r', "");
        console.push_str(&String::from_utf8_lossy(&output.stderr));
        if started.elapsed() >= self.timeout {
            return Err(OracleError::Guest {
                message: format!(
                    "the guest did not finish within {} s",
                    self.timeout.as_secs()
                ),
                console,
            });
        }
        Ok(console)
    }
}

/// The modules the spec's swap devices and disks need (their dependencies
/// come from modules.dep): zram; virtio-blk on the virtio PCI transport;
/// NVMe; an IDE disk on the PIIX controller through libata and the SCSI
/// disk driver; brd for RAM disks (its parameters: `module_args`); and
/// for `[[disk]]`s the ext4 driver, which mounts their
/// ext2 file systems (CONFIG_EXT4_USE_FOR_EXT2), with crc32c_generic first:
/// ext4 and jbd2 ask the crypto API for "crc32c", which finds no module
/// loader in the initramfs.
fn wanted_modules(spec: &Spec) -> Vec<&'static str> {
    let mut wanted = Vec::new();
    for kind in [
        SwapKind::Zram,
        SwapKind::Virtio,
        SwapKind::Nvme,
        SwapKind::Hdd,
        SwapKind::Ram,
    ] {
        if spec.swap.iter().any(|d| d.kind == kind) || spec.disks.iter().any(|d| d.kind == kind) {
            wanted.extend_from_slice(match kind {
                SwapKind::Zram => &["zram"][..],
                SwapKind::Virtio => &["virtio_pci", "virtio_blk"],
                SwapKind::Nvme => &["nvme"],
                SwapKind::Hdd => &["ata_piix", "sd_mod"],
                SwapKind::Ram => &["brd"],
            });
        }
    }
    if spec.disks.iter().any(|d| d.fs == Fs::Ext2) {
        wanted.extend_from_slice(&["crc32c_generic", "ext4"]);
    }
    if spec.disks.iter().any(|d| d.fs == Fs::Xfs) {
        // xfs needs libcrc32c, whose init asks the crypto API for
        // "crc32c" and fails without a provider: crc32c_generic first.
        wanted.extend_from_slice(&["crc32c_generic", "xfs"]);
    }
    wanted.extend(zswap_modules(&spec.sysfs.zswap));
    wanted
}

/// What zswap's parameters need loaded before they are written (the
/// initramfs has no module loader for zswap's `request_module`): the
/// compressor's crypto module where Debian builds it as one (lzo is
/// built in everywhere, deflate in 6.1), and zsmalloc (built in from
/// 6.12, as zbud is everywhere; modules.builtin says which).
fn zswap_modules(z: &mmsim_spec::Zswap) -> Vec<&'static str> {
    let mut m = Vec::new();
    if !z.configured {
        return m;
    }
    if let c @ ("lz4" | "lz4hc" | "zstd" | "deflate") = z.compressor {
        m.push(c);
    }
    if z.zpool == mmsim_spec::Zpool::Zsmalloc {
        m.push("zsmalloc");
    }
    m
}

/// Parameters for the modules /init loads, which depend on the spec (so
/// they travel in the per-run archive, as `modules/NAME.ko.args`, and the
/// cached initramfs stays the same): brd makes `rd_nr` RAM disks of
/// `rd_size` KiB each when it loads (6.1 has no other way to create them),
/// so one per RAM `[[disk]]`, all of the largest one's size (a smaller
/// disk's file system takes its first `size` bytes, as on the other
/// devices). Debian's defaults (CONFIG_BLK_DEV_RAM_COUNT=16,
/// CONFIG_BLK_DEV_RAM_SIZE=16384) would make 16 disks of 16 MiB.
fn module_args(spec: &Spec) -> Vec<(String, String)> {
    spec.brd_params()
        .map(|p| vec![("brd.ko".to_string(), p)])
        .unwrap_or_default()
}

/// Where the host's xfsprogs keeps mkfs.xfs.
const MKFS_XFS: [&str; 2] = ["/usr/sbin/mkfs.xfs", "/sbin/mkfs.xfs"];

/// The host's mkfs.xfs (dynamically linked; the first of `places` that
/// exists) and every shared object `ldd`
/// says it loads, the dynamic loader included: (path in the initramfs,
/// without the leading `/`, content), so the binary runs in the guest at
/// the host's paths.
fn mkfs_xfs_files(places: &[&str]) -> Result<Vec<(String, Vec<u8>)>, OracleError> {
    let bin = places
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            OracleError::Missing(format!(
                "a [[disk]] has fs = \"xfs\", and mkfs.xfs is not installed (apt-get install xfsprogs); {PACKAGES}"
            ))
        })?;
    let libs = ldd(bin)?;
    let mut files = vec![(rel(bin), read(bin)?)];
    for lib in libs {
        // read() follows symlinks: the library lands at the path the
        // loader looks for.
        files.push((rel(&lib), read(&lib)?));
    }
    Ok(files)
}

/// The shared libraries `bin` loads, the dynamic loader with them.
fn ldd(bin: &Path) -> Result<Vec<PathBuf>, OracleError> {
    let out = Command::new("ldd")
        .arg(bin)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            OracleError::Missing(format!(
                "cannot run ldd on {} (to find its shared libraries): {e}; apt-get install libc-bin",
                bin.display()
            ))
        })?;
    if !out.status.success() {
        return Err(OracleError::Missing(format!(
            "ldd {} failed: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    ldd_paths(&String::from_utf8_lossy(&out.stdout)).map_err(|line| {
        OracleError::Missing(format!(
            "ldd {}: a shared library is missing on this host: {line}",
            bin.display()
        ))
    })
}

/// A host path as an initramfs path (no leading `/`).
fn rel(p: &Path) -> String {
    p.to_string_lossy().trim_start_matches('/').to_string()
}

/// The files in `ldd` output: `name => /path (addr)` and `/path (addr)`
/// lines (the dynamic loader); the vDSO has no file. A `not found` line is
/// returned as the error.
fn ldd_paths(out: &str) -> Result<Vec<PathBuf>, String> {
    let mut paths = Vec::new();
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("not found") {
            return Err(line.to_string());
        }
        let target = line.split_once("=>").map_or(line, |(_, t)| t).trim();
        let path = target.split_whitespace().next().unwrap_or("");
        if path.starts_with('/') && !paths.iter().any(|p: &PathBuf| p == Path::new(path)) {
            paths.push(PathBuf::from(path));
        }
    }
    Ok(paths)
}

/// The pc machine's PIIX IDE controller has two channels of two drives.
const MAX_IDE_DISKS: usize = 4;

/// One disk per block swap device, in spec order, then one per `[[disk]]`
/// other than RAM disks (brd makes those in the guest's memory),
/// each backed by a sparse image of the device's size in `work`: QEMU's
/// arguments for them. virtio-blk and NVMe disks carry the serial
/// `mmsim<i>` (i = the `[[swap]]` index) or `mmsimd<i>` (i = the
/// `[[disk]]` index), by which the runner finds them; IDE disks take PIIX
/// positions 0, 1, 2, 3 in order, the swap devices' first (the runner
/// finds them by position). The host's page cache is bypassed
/// (cache=none), so the guest's I/O reaches the image. The runner makes the
/// `[[disk]]`s' file systems itself.
fn disk_args(spec: &Spec, work: &Path) -> Result<Vec<String>, OracleError> {
    drive_args(spec, &mut |_, file, size| {
        let img = work.join(format!("{file}.img"));
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(size))
            .map_err(|e| OracleError::Io(format!("{}: {e}", img.display())))?;
        Ok((img.display().to_string(), "none"))
    })
}

/// The backing of one drive: given the device (`Dev`), its image's stem
/// and its size, the file QEMU opens and its `cache=` mode.
type Backing<'a> = dyn FnMut(Dev, &str, u64) -> Result<(String, &'static str), OracleError> + 'a;

/// A drive's device in the spec: `[[swap]]` number I or `[[disk]]`
/// number I.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dev {
    Swap(usize),
    Disk(usize),
}

/// QEMU's drives for the spec's block swap devices and disks, in spec
/// order (swap devices first), each backed as `backing` says.
fn drive_args(spec: &Spec, backing: &mut Backing) -> Result<Vec<String>, OracleError> {
    let mut args = Vec::new();
    let mut ide = 0;
    let swaps = spec
        .swap
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kind != SwapKind::Zram)
        .map(|(i, d)| {
            (
                Dev::Swap(i),
                format!("swap[{i}]"),
                format!("swap{i}"),
                format!("sw{i}"),
                format!("mmsim{i}"),
                d.kind,
                d.size,
            )
        });
    let disks = spec
        .disks
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kind != SwapKind::Ram)
        .map(|(i, d)| {
            (
                Dev::Disk(i),
                format!("disk[{i}] ({})", d.name),
                format!("disk{i}"),
                format!("dk{i}"),
                format!("mmsimd{i}"),
                d.kind,
                d.size,
            )
        });
    for (dev, what, file, id, serial, kind, size) in swaps.chain(disks) {
        if kind == SwapKind::Hdd && ide == MAX_IDE_DISKS {
            return Err(OracleError::Missing(format!(
                "{what}: the oracle's machine has room for {MAX_IDE_DISKS} IDE (hdd) disks, swap devices and [[disk]]s together"
            )));
        }
        let (path, cache) = backing(dev, &file, size)?;
        let file = path.replace(',', ",,");
        match kind {
            SwapKind::Virtio => args.extend([
                "-drive".to_string(),
                format!("file={file},if=none,id={id},format=raw,cache={cache}"),
                "-device".to_string(),
                format!("virtio-blk-pci,drive={id},serial={serial}"),
            ]),
            SwapKind::Nvme => args.extend([
                "-drive".to_string(),
                format!("file={file},if=none,id={id},format=raw,cache={cache}"),
                "-device".to_string(),
                format!("nvme,drive={id},serial={serial}"),
            ]),
            _ => {
                // An `if=ide` drive at index 2 also keeps QEMU from putting
                // its default CD-ROM there.
                args.extend([
                    "-drive".to_string(),
                    format!("file={file},if=ide,index={ide},format=raw,cache={cache}"),
                ]);
                ide += 1;
            }
        }
    }
    Ok(args)
}

fn read(p: &Path) -> Result<Vec<u8>, OracleError> {
    std::fs::read(p).map_err(|e| OracleError::Io(format!("{}: {e}", p.display())))
}

fn is_static(p: &Path) -> bool {
    // A static ELF has no PT_INTERP program header; look for the
    // interpreter path in the first pages as a cheap test.
    std::fs::read(p)
        .map(|b| !b.windows(14).take(8192).any(|w| w == b"/lib64/ld-linu"))
        .unwrap_or(false)
}

fn tempdir(base: &Path) -> Result<PathBuf, OracleError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let d = base.join(format!("run-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).map_err(|e| OracleError::Io(format!("{}: {e}", d.display())))?;
    Ok(d)
}

/// The guest's /init: mount the basics, load modules (each with the
/// parameters in `/modules/NAME.ko.args`, if the run's archive has that
/// file), run the spec, and write the runner's document to the second
/// serial port.
const INIT: &str = r#"#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
for m in $(cat /modules/order); do insmod /modules/$m $(cat /modules/$m.args 2>/dev/null) || echo "mmsim: insmod $m failed"; done
echo MMSIM-BEGIN > /dev/ttyS1
sh /run.sh > /dev/ttyS1
echo "MMSIM-END $?" > /dev/ttyS1
poweroff -f
"#;

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The per-run archive: the spec, the runner's command line, and the
/// parameters of modules that depend on the spec (`module_args`; the base
/// archive made the `modules` folder).
fn run_archive(spec_text: &str, sets: &[String], module_args: &[(String, String)]) -> Vec<u8> {
    let mut c = cpio::Cpio::new();
    c.file("spec.toml", 0o644, spec_text.as_bytes());
    for (module, args) in module_args {
        c.file(
            &format!("modules/{module}.args"),
            0o644,
            format!("{args}\n").as_bytes(),
        );
    }
    let mut cmd = String::from("exec /runner /spec.toml");
    for s in sets {
        cmd.push_str(" --set ");
        cmd.push_str(&shell_quote(s));
    }
    c.file("run.sh", 0o755, format!("{cmd}\n").as_bytes());
    c.finish()
}

/// The most guest memory the trace files of a run may take: they live in
/// the initramfs, whose pages the guest cannot reclaim, so they shrink
/// the memory the workload meets. A sixteenth keeps that small beside the
/// run; a larger trace is refused (replay it natively, or cut it with the
/// step's `count` into a smaller file).
const TRACE_SHARE_OF_MEMORY: u64 = 16;

/// The trace files the spec replays, at the paths the guest's runner opens
/// (`mmsim_spec::trace::guest_path`).
fn trace_archive(spec: &Spec) -> Result<Vec<u8>, OracleError> {
    let sources = mmsim_spec::trace::sources(spec);
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let mut seen = std::collections::BTreeMap::new();
    for src in sources {
        seen.entry(mmsim_spec::trace::guest_path(&src.written))
            .or_insert(src);
    }
    let total: u64 = seen.values().map(|s| s.summary.bytes).sum();
    // newc archives give a file at most 2^32 - 1 bytes.
    let limit = (spec.machine.memory / TRACE_SHARE_OF_MEMORY).min(u32::MAX as u64);
    if total > limit {
        return Err(OracleError::Missing(format!(
            "the spec's trace files take {} MiB, more than a sixteenth of machine.memory ({} MiB): the guest would hold them in unreclaimable initramfs pages; replay them natively (oracle run --native) or use a smaller trace",
            total >> 20,
            limit >> 20
        )));
    }
    let mut c = cpio::Cpio::new();
    let mut dirs = std::collections::BTreeSet::new();
    for (guest, src) in seen {
        let parts: Vec<&str> = guest.trim_start_matches('/').split('/').collect();
        for i in 1..parts.len() {
            let d = parts[..i].join("/");
            if dirs.insert(d.clone()) {
                c.dir(&d);
            }
        }
        c.file(guest.trim_start_matches('/'), 0o644, &read(&src.path)?);
    }
    Ok(c.finish())
}

/// Why QEMU's `-m` cannot take `memory` bytes, if it cannot.
fn not_whole_mib(memory: u64) -> Option<String> {
    (!memory.is_multiple_of(1 << 20))
        .then(|| format!("{memory} bytes is not a whole number of MiB, which QEMU's -m needs"))
}

/// The runner's document a guest wrote to its second serial port (the
/// file `out`); `console` says why when there is none.
fn read_result(out: &Path, console: &str) -> Result<RunResult, OracleError> {
    let text = std::fs::read_to_string(out)
        .unwrap_or_default()
        .replace('\r', "");
    parse_result(&text, console)
}

fn parse_result(out: &str, console: &str) -> Result<RunResult, OracleError> {
    let guest = |m: &str| OracleError::Guest {
        message: m.to_string(),
        console: console.to_string(),
    };
    let begin = out
        .find("MMSIM-BEGIN\n")
        .ok_or_else(|| guest("the guest never started the runner"))?;
    let body = &out[begin + "MMSIM-BEGIN\n".len()..];
    // The last marker: a task or phase may itself be named MMSIM-END.
    let end = body
        .rfind("MMSIM-END ")
        .ok_or_else(|| guest("the guest stopped before the runner finished"))?;
    let status = body[end..]
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("MMSIM-END")
        .trim()
        .to_string();
    let json = &body[..end];
    if status != "0" && status != "1" || json.trim().is_empty() {
        return Err(guest(&format!("the runner failed (exit status {status})")));
    }
    serde_json::from_str(json).map_err(|e| {
        guest(&format!(
            "the runner's output is not a result document: {e}"
        ))
    })
}

/// Builds the static runner from this source tree with cargo.
/// The static runner: `explicit`, else $MMSIM_RUNNER, else built with
/// cargo.
pub fn runner_path(explicit: Option<PathBuf>) -> Result<PathBuf, OracleError> {
    match explicit.or_else(|| std::env::var_os("MMSIM_RUNNER").map(PathBuf::from)) {
        Some(p) if p.is_file() => Ok(p),
        Some(p) => Err(OracleError::Missing(format!(
            "the runner {} does not exist",
            p.display()
        ))),
        None => build_runner(),
    }
}

fn build_runner() -> Result<PathBuf, OracleError> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = "x86_64-unknown-linux-gnu";
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { root.join(d) })
        .unwrap_or_else(|| root.join("target"));
    let bin = target_dir.join(format!("{target}/release/mmsim-runner"));
    let status = Command::new("cargo")
        .current_dir(&root)
        .env("RUSTFLAGS", "-C target-feature=+crt-static -C strip=debuginfo")
        .args(["build", "--quiet", "--release", "-p", "mmsim-runner", "--target", target])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| OracleError::Missing(format!("cannot run cargo to build the static runner: {e}; set MMSIM_RUNNER to a static mmsim-runner binary")))?;
    if !status.success() || !bin.is_file() {
        return Err(OracleError::Missing(
            "building the static runner failed; see scripts/build-runner".into(),
        ));
    }
    Ok(bin)
}

/// QEMU's `-smp`: the CPU count alone for one socket without SMT (QEMU's
/// own default arrangement, as the recorded runs booted), else the whole
/// topology.
fn smp(m: &mmsim_spec::Machine) -> String {
    let t = &m.topology;
    if t.is_flat() {
        return m.cpus.to_string();
    }
    format!(
        "{},sockets={},cores={},threads={}",
        m.cpus, t.sockets, t.cores_per_socket, t.threads_per_core
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smp_is_the_cpu_count_unless_a_topology_is_given() {
        let spec = |m: &str| {
            mmsim_spec::parse_str(
                &format!("[machine]\nmemory = \"512M\"\n{m}\n[task.t]\nsteps = []\n"),
                "t.toml",
                &[],
            )
            .unwrap()
        };
        assert_eq!(smp(&spec("cpus = 4").machine), "4");
        assert_eq!(
            smp(&spec("sockets = 2\ncores_per_socket = 3\nthreads_per_core = 2").machine),
            "12,sockets=2,cores=3,threads=2"
        );
    }

    #[test]
    fn parses_the_guest_output() {
        let out = "noise\nMMSIM-BEGIN\n{\"format\":1}\nMMSIM-END 0\n";
        // Not a full document: the error must say so, not panic.
        let e = parse_result(out, "").unwrap_err();
        assert!(e.to_string().contains("not a result document"));
        let e = parse_result("MMSIM-BEGIN\nx\nMMSIM-END 2\n", "").unwrap_err();
        assert!(e.to_string().contains("exit status 2"));
        let e = parse_result("MMSIM-BEGIN\nMMSIM-END 1\n", "").unwrap_err();
        assert!(e.to_string().contains("exit status 1"));
        assert!(parse_result("", "").is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");
    }

    #[test]
    fn one_disk_per_block_swap_device_in_spec_order() {
        let spec = mmsim_spec::parse_str(
            r#"
[machine]
memory = "512M"
[[swap]]
device = "nvme"
size = "64M"
[[swap]]
device = "zram"
size = "64M"
[[swap]]
device = "virtio"
size = "1M"
[[swap]]
device = "hdd"
size = "8K"
[task.main]
steps = []
"#,
            "t.toml",
            &[],
        )
        .unwrap();
        assert_eq!(
            wanted_modules(&spec),
            [
                "zram",
                "virtio_pci",
                "virtio_blk",
                "nvme",
                "ata_piix",
                "sd_mod"
            ]
        );
        let work = std::env::temp_dir().join(format!("mmsim-disks-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let args = disk_args(&spec, &work).unwrap();
        let w = work.display();
        assert_eq!(
            args,
            [
                "-drive".to_string(),
                format!("file={w}/swap0.img,if=none,id=sw0,format=raw,cache=none"),
                "-device".into(),
                "nvme,drive=sw0,serial=mmsim0".into(),
                "-drive".into(),
                format!("file={w}/swap2.img,if=none,id=sw2,format=raw,cache=none"),
                "-device".into(),
                "virtio-blk-pci,drive=sw2,serial=mmsim2".into(),
                "-drive".into(),
                format!("file={w}/swap3.img,if=ide,index=0,format=raw,cache=none"),
            ]
        );
        assert_eq!(
            std::fs::metadata(work.join("swap0.img")).unwrap().len(),
            64 << 20
        );
        assert_eq!(
            std::fs::metadata(work.join("swap3.img")).unwrap().len(),
            8192
        );
        assert!(!work.join("swap1.img").exists());
        std::fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn one_disk_per_disk_after_the_swap_devices() {
        let spec = mmsim_spec::parse_str(
            r#"
[machine]
memory = "512M"
[[swap]]
device = "hdd"
size = "8K"
[[disk]]
name = "data"
device = "virtio"
size = "16M"
[[disk]]
name = "old"
device = "hdd"
size = "20M"
[[disk]]
name = "fast"
device = "nvme"
size = "24M"
[[file]]
name = "f"
size = "1M"
on = "data"
[task.main]
steps = []
"#,
            "t.toml",
            &[],
        )
        .unwrap();
        assert_eq!(
            wanted_modules(&spec),
            [
                "virtio_pci",
                "virtio_blk",
                "nvme",
                "ata_piix",
                "sd_mod",
                "crc32c_generic",
                "ext4"
            ]
        );
        let work = std::env::temp_dir().join(format!("mmsim-fsdisks-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let args = disk_args(&spec, &work).unwrap();
        let w = work.display();
        assert_eq!(
            args,
            [
                "-drive".to_string(),
                format!("file={w}/swap0.img,if=ide,index=0,format=raw,cache=none"),
                "-drive".into(),
                format!("file={w}/disk0.img,if=none,id=dk0,format=raw,cache=none"),
                "-device".into(),
                "virtio-blk-pci,drive=dk0,serial=mmsimd0".into(),
                "-drive".into(),
                format!("file={w}/disk1.img,if=ide,index=1,format=raw,cache=none"),
                "-drive".into(),
                format!("file={w}/disk2.img,if=none,id=dk2,format=raw,cache=none"),
                "-device".into(),
                "nvme,drive=dk2,serial=mmsimd2".into(),
            ]
        );
        for (img, size) in [
            ("disk0.img", 16 << 20),
            ("disk1.img", 20 << 20),
            ("disk2.img", 24 << 20),
        ] {
            assert_eq!(std::fs::metadata(work.join(img)).unwrap().len(), size);
        }
        std::fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn ram_disks_load_brd_with_their_count_and_size_and_get_no_drive() {
        let spec = mmsim_spec::parse_str(
            r#"
[machine]
memory = "1G"
[[disk]]
name = "small"
device = "ram"
size = "64M"
[[disk]]
name = "data"
device = "virtio"
size = "16M"
[[disk]]
name = "x"
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
        assert_eq!(
            wanted_modules(&spec),
            [
                "virtio_pci",
                "virtio_blk",
                "brd",
                "crc32c_generic",
                "ext4",
                "crc32c_generic",
                "xfs"
            ]
        );
        // Two RAM disks of the larger one's size, in KiB.
        let args = module_args(&spec);
        assert_eq!(
            args,
            [("brd.ko".to_string(), "rd_nr=2 rd_size=307200".to_string())]
        );
        // /init finds them beside the module, in the per-run archive.
        let archive = run_archive("", &[], &args);
        let text = String::from_utf8_lossy(&archive);
        assert!(text.contains("modules/brd.ko.args"), "{text}");
        assert!(text.contains("rd_nr=2 rd_size=307200\n"), "{text}");
        assert!(INIT.contains("insmod /modules/$m $(cat /modules/$m.args 2>/dev/null)"));
        // Only the virtio disk is a drive, still with its [[disk]] index.
        let work = std::env::temp_dir().join(format!("mmsim-ramdisks-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let drives = disk_args(&spec, &work).unwrap();
        let w = work.display();
        assert_eq!(
            drives,
            [
                "-drive".to_string(),
                format!("file={w}/disk1.img,if=none,id=dk1,format=raw,cache=none"),
                "-device".into(),
                "virtio-blk-pci,drive=dk1,serial=mmsimd1".into(),
            ]
        );
        assert!(!work.join("disk0.img").exists() && !work.join("disk2.img").exists());
        std::fs::remove_dir_all(&work).unwrap();
        // No RAM disk, no parameters.
        let none = mmsim_spec::parse_str(
            "[machine]\nmemory = \"512M\"\n[task.main]\nsteps = []\n",
            "t.toml",
            &[],
        )
        .unwrap();
        assert!(module_args(&none).is_empty());
    }

    #[test]
    fn xfs_disks_load_xfs_and_ext2_disks_ext4() {
        let spec = |fs: &str| {
            mmsim_spec::parse_str(
                &format!(
                    r#"
[machine]
memory = "512M"
[[disk]]
name = "data"
device = "virtio"
size = "300M"
fs = "{fs}"
[task.main]
steps = []
"#
                ),
                "t.toml",
                &[],
            )
            .unwrap()
        };
        assert_eq!(
            wanted_modules(&spec("xfs")),
            ["virtio_pci", "virtio_blk", "crc32c_generic", "xfs"]
        );
        assert_eq!(
            wanted_modules(&spec("ext2")),
            ["virtio_pci", "virtio_blk", "crc32c_generic", "ext4"]
        );
    }

    #[test]
    fn ldd_output_gives_the_files_to_copy() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibblkid.so.1 => /lib/x86_64-linux-gnu/libblkid.so.1 (0x00007f4b)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f4a)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f4c)\n";
        assert_eq!(
            ldd_paths(out).unwrap(),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libblkid.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        let missing = "\tlibinih.so.1 => not found\n";
        assert_eq!(ldd_paths(missing).unwrap_err(), "libinih.so.1 => not found");
    }

    #[test]
    fn no_mkfs_xfs_names_the_package() {
        let e = mkfs_xfs_files(&["/nonexistent/mkfs.xfs"]).unwrap_err();
        assert!(matches!(e, OracleError::Missing(_)));
        assert!(e.to_string().contains("apt-get install xfsprogs"), "{e}");
    }

    #[test]
    fn kernel_versions_sort_numerically() {
        assert!(version_key("vmlinuz-6.1.0-56-amd64") > version_key("vmlinuz-6.1.0-9-amd64"));
    }

    /// `--kernel RELEASE` finds an image scripts/get-kernel unpacked, by
    /// its release or a prefix of it that ends at a version boundary.
    #[test]
    fn a_kernel_is_found_by_its_release() {
        let dir = std::env::temp_dir().join(format!("mmsim-kernels-{}", std::process::id()));
        for r in ["5.10.0-32-amd64", "6.12.95+deb12-amd64"] {
            let boot = dir.join("mmsim/kernels").join(r).join("boot");
            std::fs::create_dir_all(&boot).unwrap();
            std::fs::write(boot.join(format!("vmlinuz-{r}")), b"").unwrap();
        }
        // The only test in this crate that reads the cache's location.
        std::env::set_var("XDG_CACHE_HOME", &dir);
        let found = |r: &str| kernel_by_release(r).map(|p| p.file_name().unwrap().to_owned());
        assert_eq!(found("5.10").unwrap(), "vmlinuz-5.10.0-32-amd64");
        assert_eq!(
            found("6.12.95+deb12-amd64").unwrap(),
            "vmlinuz-6.12.95+deb12-amd64"
        );
        // 5.1 is not 5.10.
        let e = found("5.1").unwrap_err().to_string();
        assert!(
            e.contains("--kernel 5.1") && e.contains("5.10.0-32-amd64"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}

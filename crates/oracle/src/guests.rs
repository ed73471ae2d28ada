//! Guests on this machine's kernel (`mmsim oracle run --native` of a spec
//! with `[vm.NAME]`): each guest is a real QEMU (TCG) booting its spec's
//! kernel with the runner on the guest's own sections, started by the
//! native runner as the guest's VMM task in its host cgroup
//! (crates/runner/src/vmm.rs). The host's counters come from the native
//! runner, each guest's from its runner, read from QEMU's second serial
//! port after the run, under `vms.NAME`.
//!
//! QEMU runs with `-accel tcg,tb-size=` the guest's `tb_size`, as the
//! simulator's VMM models it, and the files it maps (its binary and
//! libraries, firmware, the guest's kernel and initramfs) are read into
//! the page cache before it starts, from outside its cgroup, so the
//! cgroup is charged QEMU's anonymous memory only.

use crate::{native, Oracle, OracleError};
use mmsim_spec::{Spec, Vm};
use std::path::{Path, PathBuf};

/// A guest ready to boot: its initramfs, and where QEMU's argv, its
/// console and the runner's result go.
struct Prepared {
    name: String,
    initrd: PathBuf,
    argv: PathBuf,
    out: PathBuf,
    console: PathBuf,
}

/// What a guest needs that a native run cannot give it: a host file on a
/// disk behind one of its block devices (a native run has no disks),
/// memory that is not whole MiB (QEMU's -m), or KVM on a machine without
/// /dev/kvm.
pub fn refusal(spec: &Spec) -> Option<String> {
    refusal_with(spec, std::path::Path::new("/dev/kvm").exists())
}

fn refusal_with(spec: &Spec, have_kvm: bool) -> Option<String> {
    for vm in &spec.vms {
        if vm.accel == mmsim_spec::Accel::Kvm && !have_kvm {
            return Some(format!(
                "vm.{}.host.accel: found \"kvm\" on a machine without /dev/kvm (no hardware virtualization, or no KVM module); expected a machine with KVM, or accel = \"tcg\"",
                vm.name
            ));
        }
        let on_disk = (vm.swap_files.iter().chain(&vm.disk_files))
            .flatten()
            .find(|&&f| spec.files[f].runner_tmpfs_path().is_none());
        if let Some(&f) = on_disk {
            return Some(format!(
                "vm.{}: a block device is backed by host file {:?} on a disk, which a native run cannot give (it has no disks); expected a host [[file]] on tmpfs (on = \"tmpfs\")",
                vm.name, spec.files[f].name
            ));
        }
        if let Some(why) = crate::not_whole_mib(vm.guest.machine.memory) {
            return Some(format!("vm.{}.machine.memory: {why}", vm.name));
        }
    }
    None
}

/// QEMU's drives for guest `vm`'s block devices: each on the host file
/// backing it, where the native runner makes it on its tmpfs, with the
/// device's `cache` mode (QEMU's default cache=writeback goes through the
/// host's page cache, as the model's I/O thread does; cache=none opens it
/// O_DIRECT).
fn guest_drives(spec: &Spec, vm: &Vm) -> Result<Vec<String>, OracleError> {
    let (swap, disk) = vm.backings();
    crate::drive_args(&vm.guest, &mut |dev, _, _| {
        let (file, direct) = match dev {
            crate::Dev::Swap(i) => swap[i],
            crate::Dev::Disk(i) => disk[i],
        }
        .expect("a guest's block device has its host file (validated)");
        let path = spec.files[file]
            .runner_tmpfs_path()
            .expect("refusal() let only tmpfs host files through");
        Ok((path, if direct { "none" } else { "writeback" }))
    })
}

/// The `--set`s that are the guest's (`vm.NAME.KEY=V`), as its own.
fn guest_sets(sets: &[String], name: &str) -> Vec<String> {
    let prefix = format!("vm.{name}.");
    sets.iter()
        .filter_map(|s| s.strip_prefix(&prefix).map(str::to_string))
        .collect()
}

impl Oracle {
    /// Guest `vm`'s initramfs and QEMU command line, in `work`.
    fn prepare(
        &self,
        spec: &Spec,
        vm: &Vm,
        text: &str,
        sets: &[String],
        work: &Path,
    ) -> Result<Prepared, OracleError> {
        let guest_text = mmsim_spec::guest_text(text, &vm.name).map_err(OracleError::Io)?;
        let initrd = self.initrd(&vm.guest, &guest_text, &guest_sets(sets, &vm.name))?;
        let file = |ext: &str| work.join(format!("{}.{ext}", vm.name));
        let (initrd_path, out, console) = (file("cpio"), file("out"), file("console"));
        std::fs::write(&initrd_path, initrd).map_err(|e| OracleError::Io(e.to_string()))?;
        let accel = match vm.accel {
            mmsim_spec::Accel::Tcg => format!("tcg,tb-size={}", vm.tb_size >> 20),
            mmsim_spec::Accel::Kvm => "kvm".to_string(),
        };
        let mut argv = vec![self.qemu.display().to_string()];
        argv.extend(self.qemu_args(&vm.guest, &initrd_path, &out, &accel));
        argv.extend(guest_drives(spec, vm)?);
        argv.push(format!("#console={}", console.display()));
        let argv_path = file("argv");
        std::fs::write(&argv_path, argv.join("\n") + "\n")
            .map_err(|e| OracleError::Io(e.to_string()))?;
        Ok(Prepared {
            name: vm.name.clone(),
            initrd: initrd_path,
            argv: argv_path,
            out,
            console,
        })
    }

    /// The files QEMU maps or reads as it starts, whatever the guest: to
    /// be in the page cache before it does (each guest's kernel and
    /// initramfs besides).
    fn qemu_files(&self) -> Result<Vec<PathBuf>, OracleError> {
        let mut files = vec![self.qemu.clone()];
        files.extend(crate::ldd(&self.qemu)?);
        // Firmware and option ROMs (SeaBIOS, the VGA BIOS, the NIC's
        // iPXE ROM, linuxboot_dma.bin), wherever Debian puts them.
        for dir in [
            "/usr/share/seabios",
            "/usr/share/qemu",
            "/usr/lib/ipxe/qemu",
        ] {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let found = entries.filter_map(|e| e.ok().map(|e| e.path()));
            files.extend(found.filter(|p| p.is_file()));
        }
        Ok(files)
    }
}

/// A spec with guests to run natively: at `path`, read as `spec` from
/// `text`, with `sets`.
pub struct Run<'a> {
    pub runner: &'a Path,
    pub path: &'a Path,
    pub spec: &'a Spec,
    pub text: &'a str,
    pub sets: &'a [String],
}

/// Runs `r` once on this machine's kernel; `oracle` finds each guest's
/// kernel and QEMU.
pub fn run_once(
    r: &Run,
    oracle: &dyn Fn(&Vm) -> Result<Oracle, OracleError>,
) -> Result<native::Outcome, OracleError> {
    if let Some(refused) = refusal(r.spec) {
        return Ok(native::Outcome::Refused(refused));
    }
    let work = crate::tempdir(&crate::cache_dir())?;
    let result = run_in(r, oracle, &work);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn run_in(
    r: &Run,
    oracle: &dyn Fn(&Vm) -> Result<Oracle, OracleError>,
    work: &Path,
) -> Result<native::Outcome, OracleError> {
    let Run {
        runner,
        path: spec_path,
        spec,
        text,
        sets,
    } = *r;
    let mut extra = Vec::new();
    let mut guests = Vec::new();
    let mut preload = Vec::new();
    for vm in &spec.vms {
        let o = oracle(vm)?;
        let p = o.prepare(spec, vm, text, sets, work)?;
        extra.push("--vmm".to_string());
        extra.push(format!("{}={}", p.name, p.argv.display()));
        if preload.is_empty() {
            preload = o.qemu_files()?;
        }
        preload.extend([o.kernel.clone(), p.initrd.clone()]);
        guests.push(p);
    }
    // In one order whatever the directories listed; once each.
    preload.sort();
    preload.dedup();
    for f in preload {
        extra.push("--preload".to_string());
        extra.push(f.display().to_string());
    }
    let mut doc = match native::run_once_with(runner, spec_path, sets, &extra)? {
        native::Outcome::Done(d) => d,
        refused => return Ok(refused),
    };
    for g in guests {
        let console = std::fs::read_to_string(&g.console).unwrap_or_default();
        let mut r = crate::read_result(&g.out, &console).map_err(|e| match e {
            OracleError::Guest { message, console } => OracleError::Guest {
                message: format!("vm.{}: {message}", g.name),
                console,
            },
            e => e,
        })?;
        r.spec = format!("{}#vm.{}", spec.file, g.name);
        // QEMU's own anonymous memory at its peak, as the runner sampled
        // it (crates/runner vmm.rs), beside the model's vmm_memory and
        // tb_size.
        let stats = std::fs::read_to_string(g.console.with_extension("console.stats"));
        if let Some(kib) = stats
            .ok()
            .as_deref()
            .and_then(|t| t.trim().strip_prefix("private_peak_kib "))
        {
            doc.knobs.insert(
                format!("native:vm.{}:qemu_private_peak_kib", g.name),
                kib.to_string(),
            );
        }
        doc.vms.insert(g.name, r);
    }
    Ok(native::Outcome::Done(doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guests_sets_are_its_own_keys() {
        let sets = [
            "vm.g1.cgroup.app.memory_max=64M",
            "cgroup.vms.memory_max=1G",
            "vm.g2.x=1",
        ]
        .map(String::from);
        assert_eq!(guest_sets(&sets, "g1"), ["cgroup.app.memory_max=64M"]);
    }

    #[test]
    fn guests_on_host_files_on_disks_are_refused_natively() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/guest_virtio.toml"
        ))
        .unwrap();
        let spec = mmsim_spec::parse_str(&text, "v.toml", &[]).unwrap();
        let r = refusal(&spec).expect("refused");
        assert!(r.contains("host file \"g1swap\" on a disk"), "{r}");
        // On tmpfs, the drive opens the runner's file, through the host's
        // page cache.
        let tmpfs = text.replace("on = \"hd\"", "on = \"tmpfs\"");
        let spec = mmsim_spec::parse_str(&tmpfs, "v.toml", &[]).unwrap();
        assert_eq!(refusal(&spec), None);
        let d = guest_drives(&spec, &spec.vms[0]).unwrap();
        assert!(
            d.contains(
                &"file=/mnt/mmsim-tmpfs/g1swap,if=none,id=sw0,format=raw,cache=writeback"
                    .to_string()
            ),
            "{d:?}"
        );
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/guest_tcg.toml"
        ))
        .unwrap();
        let spec = mmsim_spec::parse_str(&text, "t.toml", &[]).unwrap();
        assert_eq!(refusal(&spec), None);
    }

    #[test]
    fn a_kvm_guest_runs_natively_only_where_there_is_kvm() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/guest_tcg.toml"
        ))
        .unwrap()
        .replace("accel = \"tcg\"", "accel = \"kvm\"");
        let spec = mmsim_spec::parse_str(&text, "k.toml", &[]).unwrap();
        let r = refusal_with(&spec, false).expect("refused without /dev/kvm");
        assert!(
            r.starts_with("vm.g1.host.accel") && r.contains("/dev/kvm"),
            "{r}"
        );
        assert_eq!(refusal_with(&spec, true), None);
    }
}

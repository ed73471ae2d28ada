//! Guests natively (`--vmm NAME=FILE`): the VMM task of guest NAME is a
//! real QEMU, started in the guest's host cgroup as the task's child, and
//! the task ends when QEMU does. mmsim's side (crates/oracle's
//! `guests.rs`) builds QEMU's command line, boots the guest kernel with
//! the runner on the guest's own spec, and reads the guest's result from
//! QEMU's second serial port after the run.

use mmsim_spec::{Spec, Task};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Each guest's QEMU command line, by guest name.
pub type Vmms = BTreeMap<String, Vec<String>>;

/// `NAME=FILE` of `--vmm`: FILE holds QEMU's argv, one argument per line.
pub fn parse_arg(arg: &str, vmms: &mut Vmms) -> Result<(), String> {
    let (name, file) = arg
        .split_once('=')
        .ok_or_else(|| format!("--vmm: found {arg:?}, expected NAME=FILE"))?;
    let text = std::fs::read_to_string(file).map_err(|e| format!("--vmm {name}: {file}: {e}"))?;
    let argv: Vec<String> = text.lines().map(str::to_string).collect();
    if argv.is_empty() {
        return Err(format!("--vmm {name}: {file} names no program"));
    }
    vmms.insert(name.to_string(), argv);
    Ok(())
}

/// Why the spec's guests cannot run, if they cannot: each needs its VMM
/// command, which only a native run gets.
pub fn refusal(spec: &Spec, native: bool, vmms: &Vmms) -> Option<String> {
    let vm = spec.vms.iter().find(|v| !vmms.contains_key(&v.name))?;
    Some(match native {
        false => "the spec has guests ([vm.NAME]), which the oracle under QEMU does not boot (QEMU in QEMU); `mmsim oracle run --native` runs each as a QEMU process on this machine's kernel".into(),
        true => format!("guest vm.{} has no VMM command (--vmm {}=FILE; `mmsim oracle run --native` gives it)", vm.name, vm.name),
    })
}

/// The spec with one VMM task per guest after its own, as the simulator's
/// host has (crates/sim/src/vm.rs `host_spec`): no steps, its process
/// runs QEMU.
pub fn with_vmm_tasks(spec: &Spec) -> Spec {
    let mut host = spec.clone();
    for vm in &spec.vms {
        host.tasks.push(Task {
            name: vm.name.clone(),
            cgroup: vm.cgroup,
            instances: 1,
            oom_score_adj: 0,
            steps: Vec::new(),
        });
    }
    host
}

/// Runs `argv` (QEMU) to its end from the VMM task's process (already in
/// the guest's host cgroup), its output to the file QEMU's argv names
/// after its last argument `#console=PATH`. It dies with the task.
pub fn run(name: &str, argv: &[String]) -> Result<(), String> {
    let (args, console) = match argv.last().and_then(|a| a.strip_prefix("#console=")) {
        Some(c) => (&argv[..argv.len() - 1], Some(c)),
        None => (argv, None),
    };
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..]).stdin(Stdio::null());
    if let Some(path) = console {
        let f = std::fs::File::create(path).map_err(|e| format!("vm.{name}: {path}: {e}"))?;
        let g = f.try_clone().map_err(|e| format!("vm.{name}: {e}"))?;
        cmd.stdout(f).stderr(g);
    }
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let status = cmd
        .status()
        .map_err(|e| format!("vm.{name}: cannot start {}: {e}", args[0]))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("vm.{name}: QEMU ended with {status}")),
    }
}

/// Reads each file into the page cache from the runner's own cgroup, so
/// that QEMU's mappings of them (its binary, libraries, firmware, the
/// guest's kernel and initramfs) are not charged to the guest's host
/// cgroup: that cgroup then holds QEMU's anonymous memory, as the
/// simulator's VMM does (memcg charges a page cache page to the cgroup
/// that brought it in).
pub fn preload(files: &[String]) -> Result<(), String> {
    for f in files {
        let mut file = std::fs::File::open(f).map_err(|e| format!("--preload {f}: {e}"))?;
        std::io::copy(&mut file, &mut std::io::sink())
            .map_err(|e| format!("--preload {f}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/guest_tcg.toml"
        ))
        .unwrap();
        mmsim_spec::parse_str(&text, "t.toml", &[]).unwrap()
    }

    #[test]
    fn a_guest_runs_only_natively_with_its_vmm_command() {
        let s = spec();
        let mut vmms = Vmms::new();
        assert!(refusal(&s, false, &vmms).unwrap().contains("QEMU in QEMU"));
        assert!(refusal(&s, true, &vmms).unwrap().contains("--vmm g1=FILE"));
        let dir = std::env::temp_dir().join(format!("mmsim-vmm-{}", std::process::id()));
        std::fs::write(&dir, "/usr/bin/qemu-system-x86_64\n-m\n256M\n").unwrap();
        parse_arg(&format!("g1={}", dir.display()), &mut vmms).unwrap();
        let _ = std::fs::remove_file(&dir);
        assert_eq!(vmms["g1"], ["/usr/bin/qemu-system-x86_64", "-m", "256M"]);
        assert_eq!(refusal(&s, true, &vmms), None);
        assert!(parse_arg("g1", &mut vmms)
            .unwrap_err()
            .contains("NAME=FILE"));
        // The host gains the VMM task, in the guest's host cgroup.
        let h = with_vmm_tasks(&s);
        let t = h.tasks.last().unwrap();
        assert_eq!(
            (t.name.as_str(), t.cgroup, t.steps.len()),
            ("g1", Some(0), 0)
        );
    }
}

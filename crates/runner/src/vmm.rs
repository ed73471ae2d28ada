//! Guests natively (`--vmm NAME=FILE`): the VMM task of guest NAME is a
//! real QEMU, started in the guest's host cgroup as the task's child, and
//! the task ends when QEMU does. mmsim's side (crates/oracle's
//! `guests.rs`) builds QEMU's command line, boots the guest kernel with
//! the runner on the guest's own spec, and reads the guest's result from
//! QEMU's second serial port after the run.

use mmsim_spec::Spec;
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
    host.tasks
        .extend(spec.vms.iter().map(|vm| vm.vmm_task(Vec::new())));
    host
}

/// Runs `argv` (QEMU) to its end from the VMM task's process (already in
/// the guest's host cgroup), its output to the file QEMU's argv names
/// after its last argument `#console=PATH`. It dies with the task. While
/// it runs, QEMU's own anonymous memory (resident and swapped, outside
/// guest RAM: what the model's `vmm_memory` and `tb_size` stand for) is
/// sampled from /proc/PID/smaps every 200 ms; its peak goes to
/// PATH.stats (`private_peak_kib N`), for the oracle to record.
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
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("vm.{name}: cannot start {}: {e}", args[0]))?;
    let ram = guest_ram_bytes(args);
    let mut peak = 0;
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| format!("vm.{name}: {e}"))? {
            break st;
        }
        if let Some(kib) = private_kib(child.id(), ram) {
            peak = peak.max(kib);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    if let Some(path) = console {
        let _ = std::fs::write(
            format!("{path}.stats"),
            format!("private_peak_kib {peak}\n"),
        );
    }
    match status.success() {
        true => Ok(()),
        false => Err(format!("vm.{name}: QEMU ended with {status}")),
    }
}

/// The guest's RAM in bytes, from QEMU's `-m NM`.
fn guest_ram_bytes(args: &[String]) -> u64 {
    let at = args.iter().position(|a| a == "-m");
    at.and_then(|i| args.get(i + 1))
        .and_then(|m| m.strip_suffix('M'))
        .and_then(|m| m.parse::<u64>().ok())
        .map_or(0, |m| m << 20)
}

/// Process `pid`'s anonymous memory outside the mapping of `ram` bytes
/// (guest RAM), resident and swapped, in KiB (None: gone).
fn private_kib(pid: u32, ram: u64) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    Some(smaps_private_kib(&text, ram))
}

/// `private_kib` of an smaps text.
fn smaps_private_kib(text: &str, ram: u64) -> u64 {
    let mut total = 0;
    let mut guest_ram = false;
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let Some(first) = w.next() else { continue };
        if let Some((a, b)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let size =
                u64::from_str_radix(b, 16).unwrap_or(0) - u64::from_str_radix(a, 16).unwrap_or(0);
            guest_ram = size == ram;
        } else if !guest_ram && (first == "Anonymous:" || first == "Swap:") {
            total += w.next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total
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

    #[test]
    fn qemus_own_memory_leaves_guest_ram_out() {
        let smaps = "\
55b730550000-55b730957000 r-xp 00000000 00:10 1 /usr/bin/qemu-system-x86_64
Rss:                4124 kB
Anonymous:             0 kB
Swap:                  0 kB
7f31b7e00000-7f31c7e00000 rw-p 00000000 00:00 0
Anonymous:        196608 kB
Swap:               1024 kB
7f31c8000000-7f31c9000000 rw-p 00000000 00:00 0
Anonymous:         16384 kB
Swap:                512 kB
";
        assert_eq!(smaps_private_kib(smaps, 256 << 20), 16896);
        let argv = ["qemu", "-m", "256M"].map(String::from);
        assert_eq!(guest_ram_bytes(&argv), 256 << 20);
    }
}

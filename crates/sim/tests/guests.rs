//! Guests (`[vm.NAME]`, crates/sim/src/vm.rs): a guest kernel whose RAM is
//! its VMM's anonymous mapping on the host, run under TCG.

mod common;
use common::*;
use mmsim_sim::output::RunResult;

/// The guest's body: 256 MiB, its own zram, 128 MiB written and read
/// back under a 96 MiB memcg of its own.
const GUEST: &str = r#"[machine]
memory = "256M"
cpus = 1

[[swap]]
device = "zram"
size = "128M"

[cgroup.app]
memory_max = "96M"

[task.main]
cgroup = "app"
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "128M" },
  { op = "phase", name = "write" },
  { op = "touch", region = "heap", order = "seq", write = 1.0 },
  { op = "phase", name = "read" },
  { op = "touch", region = "heap", order = "seq", write = 0.0 },
]
"#;

/// GUEST as guest g1 of a 1 GiB, 2-CPU host with zram swap, its VMM in a
/// host cgroup limited to `vms_max`.
fn hosted(vms_max: &str) -> String {
    let mut s = format!(
        "[machine]\nmemory = \"1G\"\ncpus = 2\n\n[[swap]]\ndevice = \"zram\"\nsize = \"512M\"\n\n\
         [cgroup.vms]\nmemory_max = \"{vms_max}\"\n\n[vm.g1.host]\ncgroup = \"vms\"\naccel = \"tcg\"\n"
    );
    // The guest's sections, each under [vm.g1].
    for line in GUEST.lines() {
        s += &match line.strip_prefix("[[") {
            Some(rest) => format!("[[vm.g1.{rest}\n"),
            None => match line.strip_prefix('[') {
                Some(rest) => format!("[vm.g1.{rest}\n"),
                None => format!("{line}\n"),
            },
        };
    }
    s
}

fn guest(r: &RunResult) -> &RunResult {
    &r.vms["g1"]
}

#[test]
fn a_guest_counts_as_on_a_machine_of_its_own_when_the_host_has_room() {
    // The guest's kernel makes the same decisions wherever its RAM lives:
    // its reclaim is its memcg's (no kswapd, no time-driven aging), so
    // every counter matches; only its time has the host's faults in it.
    let alone = run_checked(GUEST);
    let r = run_checked(&hosted("max"));
    let g = guest(&r);
    // Its machine as it booted: free memory at start is boot's, not the
    // end's.
    assert_eq!(g.machine, alone.machine);
    assert_eq!(g.vmstat, alone.vmstat);
    assert_eq!(
        g.cgroups["app"].memory_stat,
        alone.cgroups["app"].memory_stat
    );
    assert!(vm(g, "pswpout") > 0, "the guest swaps to its own zram");
    // The host never reclaims: the VMM's faults are first touches.
    assert_eq!(vm(&r, "pswpout"), 0);
    assert_eq!(vm(&r, "pgmajfault"), 0);
    // Each guest phase waited for the host's first touches of its frames.
    let phase = |r: &RunResult, i: usize| {
        let p = &r.tasks[0].phases[i];
        p.end_ns - p.start_ns
    };
    assert!(phase(g, 0) > phase(&alone, 0));
}

#[test]
fn the_vmm_holds_what_the_guest_touched() {
    let r = run_checked(&hosted("max"));
    let g = guest(&r);
    let vmm = &r.cgroups["vms"];
    // Guest RAM the VMM has touched: boot's (the frames the guest kernel
    // keeps: RAM less MemTotal) and at least what the guest's memcg
    // holds, at most all of it.
    let boot = g.machine.memory_bytes - g.machine.mem_total_bytes;
    assert!(boot > 0);
    assert!(vmm.memory_current >= boot + g.cgroups["app"].memory_current);
    assert!(vmm.memory_current <= 256 << 20);
    assert_eq!(r.tasks.len(), 1);
    assert_eq!(r.tasks[0].name, "g1");
    assert_eq!(r.tasks[0].cgroup, "vms");
}

#[test]
fn a_host_short_of_memory_swaps_guest_ram_and_the_guest_waits() {
    // 64 MiB for a guest that uses about 100: the host reclaims guest
    // frames into its zram, and the guest's accesses fault them back.
    let roomy = run_checked(&hosted("max"));
    let r = run_checked(&hosted("64M"));
    assert!(
        vm(&r, "pswpout") > 10_000,
        "host pswpout {}",
        vm(&r, "pswpout")
    );
    assert!(vm(&r, "pgmajfault") > 10_000);
    // A guest read of a page the host swapped in maps it read-only (TCG:
    // a read fault), so the guest's next write reuses it (do_wp_page).
    assert!(vm(&r, "pgreuse") > 0);
    // The guest's own counters do not move (its decisions do not see the
    // host), its time does.
    let g = guest(&r);
    assert_eq!(g.vmstat, guest(&roomy).vmstat);
    assert!(g.elapsed_ns > guest(&roomy).elapsed_ns);
    assert!(r.cgroups["vms"].memory_current <= 64 << 20);
}

#[test]
fn guest_runs_are_deterministic() {
    let a = run_checked(&hosted("64M"));
    let b = run_checked(&hosted("64M"));
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn a_guest_sleeping_for_ever_ends_as_a_machine_of_its_own_does() {
    // The longest sleep: the guest's task is picked last, at u64::MAX,
    // and the run ends there, with no clock overflow and no spin.
    let r = run_checked(
        "[machine]\nmemory = \"512M\"\n[vm.g1.host]\naccel = \"tcg\"\n[vm.g1.machine]\nmemory = \"128M\"\n\
         [vm.g1.task.t]\nsteps = [ { op = \"sleep\", duration = \"18446744073709551615ns\" } ]\n",
    );
    assert_eq!(guest(&r).tasks[0].end_ns, u64::MAX);
}

/// A host of 1 GiB with a virtio disk holding the guest's images, and a
/// guest of 256 MiB whose swap (and, with `disk`, a disk of files) are
/// virtio-blk on those host files.
fn with_images(vms_max: &str, guest_task: &str, disk: bool) -> String {
    let mut s = format!(
        r#"[machine]
memory = "1G"
cpus = 2

[[disk]]
name = "hd"
device = "virtio"
size = "1G"

[[file]]
name = "g1swap"
size = "256M"
on = "hd"

[[file]]
name = "g1data"
size = "64M"
on = "hd"

[cgroup.vms]
memory_max = "{vms_max}"

[vm.g1.host]
cgroup = "vms"
accel = "tcg"

[vm.g1.machine]
memory = "256M"
cpus = 1

[[vm.g1.swap]]
device = "virtio"
size = "256M"
host_file = "g1swap"

[vm.g1.cgroup.app]
memory_max = "64M"
"#
    );
    if disk {
        s += "\n[[vm.g1.disk]]\nname = \"data\"\ndevice = \"virtio\"\nsize = \"64M\"\nhost_file = \"g1data\"\n\n\
              [[vm.g1.file]]\nname = \"f\"\nsize = \"32M\"\non = \"data\"\n";
    }
    s + guest_task
}

const SWAPPER: &str = r#"
[vm.g1.task.main]
cgroup = "app"
steps = [
  { op = "mmap", name = "heap", kind = "anon", size = "96M" },
  { op = "touch", region = "heap", order = "seq", write = 1.0 },
  { op = "touch", region = "heap", order = "seq", write = 0.0 },
]
"#;

#[test]
fn a_guest_swaps_through_its_vmm_into_the_host_page_cache() {
    let r = run_checked(&with_images("max", SWAPPER, false));
    let g = guest(&r);
    assert!(
        vm(g, "pswpout") > 5_000,
        "guest pswpout {}",
        vm(g, "pswpout")
    );
    assert!(vm(g, "pswpin") > 0);
    // QEMU's I/O thread wrote each swapped page into the image through the
    // host's page cache, charged to the VMM's cgroup, and read it back.
    let names: Vec<&str> = r.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["g1", "g1/iothread"]);
    let vms = &r.cgroups["vms"].memory_stat;
    assert!(vms["file"] > 0, "the image's pages in the VMM's cgroup");
    // No page of the image was read from the host disk: every swap-in
    // finds the page the swap-out wrote in the host's page cache.
    assert_eq!(vm(&r, "pgmajfault"), 0);
    assert!(
        vm(&r, "pgpgin") < 1024,
        "host pgpgin {} KiB",
        vm(&r, "pgpgin")
    );
}

#[test]
fn a_guest_reads_its_files_from_the_image_on_the_host_disk() {
    let reader = r#"
[vm.g1.task.main]
steps = [
  { op = "read", file = "f" },
]
"#;
    let r = run_checked(&with_images("max", reader, true));
    let g = guest(&r);
    // 32 MiB read from the guest's disk: the host read the image's pages
    // from its own disk (its readahead may read past them), in KiB.
    assert!(vm(g, "pgpgin") >= 32 << 10);
    assert!(
        vm(&r, "pgpgin") >= 32 << 10,
        "host pgpgin {}",
        vm(&r, "pgpgin")
    );
    assert!(r.cgroups["vms"].memory_stat["file"] >= 32 << 20);
}

/// A guest reading its 32 MiB file from a virtio disk whose image lies on
/// the host's HDD (opened with QEMU's `cache` mode), after a host task
/// read `warm` (the image, or another file of its size) into the host's
/// page cache.
fn reading_after(warm: &str, cache: &str) -> f64 {
    let text = format!(
        r#"[machine]
memory = "1G"
cpus = 2

[[disk]]
name = "hd"
device = "hdd"
size = "1G"

[[file]]
name = "g1data"
size = "64M"
on = "hd"

[[file]]
name = "other"
size = "64M"
on = "hd"

[task.warmer]
steps = [ {{ op = "read", file = "{warm}" }} ]

[vm.g1.host]
accel = "kvm"

[vm.g1.machine]
memory = "256M"
cpus = 1

[[vm.g1.disk]]
name = "data"
device = "virtio"
size = "64M"
host_file = "g1data"
cache = "{cache}"

[[vm.g1.file]]
name = "f"
size = "32M"
on = "data"

[vm.g1.task.main]
steps = [
  {{ op = "sleep", duration = "1s" }},
  {{ op = "phase", name = "read" }},
  {{ op = "read", file = "f" }},
]
"#
    );
    let r = run_checked(&text);
    let p = &guest(&r).tasks[0].phases[0];
    assert_eq!(p.name, "read");
    (p.end_ns - p.start_ns) as f64 / 1e6
}

#[test]
fn a_guest_request_completes_when_the_host_has_served_it() {
    // QEMU's cache=writeback: a guest read is a pread of the image. With
    // the image in the host's page cache every request is a copy and the
    // round trip (25 µs + 32 pages' copies per 128 KiB window, ~256
    // windows: under 20 ms beside the guest's own work). Without it each
    // waits for the host's HDD: 32 MiB at its 200 MB/s is 168 ms of
    // transfer the guest cannot run ahead of.
    let warm = reading_after("g1data", "writeback");
    let cold = reading_after("other", "writeback");
    assert!(cold >= 160.0, "cold {cold} ms");
    assert!(warm <= 60.0, "warm {warm} ms");
}

#[test]
fn a_device_opened_o_direct_bypasses_the_host_page_cache() {
    // cache=none: every guest request is a bio to the host's disk, so the
    // host caches no page of the images, counts the guest's I/O as its
    // own pgpgin and pgpgout, and a read of data the host read before
    // still waits for its disk.
    let text = with_images("max", SWAPPER, false).replace(
        "host_file = \"g1swap\"",
        "host_file = \"g1swap\"\ncache = \"none\"",
    );
    let r = run_checked(&text);
    let g = guest(&r);
    assert!(
        vm(g, "pswpout") > 5_000,
        "guest pswpout {}",
        vm(g, "pswpout")
    );
    assert_eq!(r.cgroups["vms"].memory_stat["file"], 0);
    assert_eq!(vm(&r, "pgpgout"), vm(g, "pgpgout"));
    assert_eq!(vm(&r, "pgpgin"), vm(g, "pgpgin"));
    let cold = reading_after("other", "none");
    let warm = reading_after("g1data", "none");
    assert!(
        warm >= 160.0 && cold >= 160.0,
        "warm {warm} ms, cold {cold} ms"
    );
}

#[test]
fn a_vmm_short_of_memory_writes_the_image_back_and_reclaims_it() {
    // 224 MiB for the VMM: its own memory (43 MiB), guest RAM (boot's,
    // ~82 MiB, and the task's) and the image's page cache. The host has
    // no swap: it reclaims the image's pages, writing the dirty ones back
    // to its disk first.
    let r = run_checked(&with_images("224M", SWAPPER, false));
    assert!(r.tasks.iter().all(|t| t.oom_kill.is_none()));
    assert!(
        vm(&r, "pgsteal_file") > 10_000,
        "{}",
        vm(&r, "pgsteal_file")
    );
    // Written back: at least the pages reclaimed, in KiB.
    assert!(vm(&r, "pgpgout") >= 4 * vm(&r, "pgsteal_file"));
    assert_eq!(vm(&r, "pswpout"), 0);
    assert!(r.cgroups["vms"].memory_current <= 224 << 20);
}

#[test]
fn the_host_s_oom_killer_ends_a_vmm_and_its_guest_with_it() {
    // 96 MiB and no host swap: guest RAM cannot leave, the VMM's cgroup
    // runs out, and the OOM killer ends the VMM (both its threads); the
    // guest's run stops where it was.
    let r = run_checked(&with_images("96M", SWAPPER, false));
    assert!(r.tasks.iter().all(|t| t.oom_kill.is_some()));
    assert_eq!(r.cgroups["vms"].memory_events["oom_kill"], 1);
    assert!(guest(&r).tasks[0].phases.is_empty());
}

#[test]
fn virtio_blk_guests_are_deterministic() {
    let a = run_checked(&with_images("224M", SWAPPER, false));
    let b = run_checked(&with_images("224M", SWAPPER, false));
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn a_guest_step_that_fails_at_run_time_is_named_under_the_guest() {
    // A guest mapping more than its RAM and swap: ENOMEM at the step.
    let text = "[machine]\nmemory = \"512M\"\n[vm.g1.host]\naccel = \"tcg\"\n[vm.g1.machine]\nmemory = \"128M\"\n\
                [vm.g1.task.t]\nsteps = [ { op = \"mmap\", name = \"a\", kind = \"anon\", size = \"1G\" } ]\n";
    let e = try_run(text).expect_err("ENOMEM");
    match e {
        mmsim_sim::SimError::At { line, key, .. } => {
            assert_eq!((line, key.as_str()), (8, "vm.g1.task.t.steps[0]"));
        }
        other => panic!("expected an error at the step, got {other:?}"),
    }
}

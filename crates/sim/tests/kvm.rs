//! Guests under KVM (`accel = "kvm"`, crates/sim/src/kvm.rs): the guest
//! reaches its RAM through the EPT, which KVM fills from the VMM's page
//! tables at each EPT violation and empties at each change the host makes
//! to them (the MMU notifier). Every run here is checked (`--check`), which
//! holds each SPTE to the host PTE beneath it.

mod common;
use common::*;
use mmsim_sim::output::RunResult;

/// The VMM's own memory besides guest RAM, in pages (QEMU's heap, the
/// `vmm_memory` default), each a first-touch fault on the host.
const VMM_PAGES: i64 = (27 << 20) / 4096;

/// The guest's task: 128 MiB written, then read.
const WRITE_READ: &str = r#"
  { op = "mmap", name = "heap", kind = "anon", size = "128M" },
  { op = "touch", region = "heap", order = "seq", write = 1.0 },
  { op = "touch", region = "heap", order = "seq", write = 0.0 },
"#;

/// The guest's task: 128 MiB written, then 16 MiB at a time read and
/// written again (a page the host brought back for the read is written
/// soon after, as a key-value store's get and set).
fn read_then_write() -> String {
    let mut s = String::from(
        "  { op = \"mmap\", name = \"heap\", kind = \"anon\", size = \"128M\" },\n  \
         { op = \"touch\", region = \"heap\", order = \"seq\", write = 1.0 },\n",
    );
    for mib in (0..128).step_by(16) {
        for write in ["0.0", "1.0"] {
            s += &format!(
                "  {{ op = \"touch\", region = \"heap\", offset = \"{mib}M\", length = \"16M\", write = {write} }},\n"
            );
        }
    }
    s
}

/// What a run varies: the guest's accelerator, the host's kernel, swap
/// device, THP setting and CPUs, the VMM's cgroup limit, and a host task
/// of its own in that cgroup.
struct Host<'a> {
    accel: &'a str,
    kernel: &'a str,
    swap: &'a str,
    thp: &'a str,
    cpus: u32,
    vms_max: &'a str,
    hog: bool,
}

const HOST: Host = Host {
    accel: "kvm",
    kernel: "6.1",
    swap: "zram",
    thp: "never",
    cpus: 2,
    vms_max: "max",
    hog: false,
};

/// A 1 GiB host as `h` says, with one 256 MiB guest of one vCPU whose task
/// runs `steps`.
fn spec(h: &Host, steps: &str) -> String {
    let hog = match h.hog {
        true => "[task.hog]\ncgroup = \"vms\"\nsteps = [\n  { op = \"mmap\", name = \"h\", kind = \"anon\", size = \"192M\" },\n  \
                 { op = \"touch\", region = \"h\", order = \"seq\", write = 1.0, passes = 3 },\n]\n\n",
        false => "",
    };
    format!(
        "[machine]\nmemory = \"1G\"\ncpus = {}\nkernel = \"{}\"\n\n\
         [sysfs]\n\"kernel/mm/transparent_hugepage/enabled\" = \"{}\"\n\n\
         [[swap]]\ndevice = \"{}\"\nsize = \"512M\"\n\n\
         [cgroup.vms]\nmemory_max = \"{}\"\n\n{hog}\
         [vm.g1.host]\ncgroup = \"vms\"\naccel = \"{}\"\n\n\
         [vm.g1.machine]\nmemory = \"256M\"\ncpus = 1\n\n\
         [vm.g1.task.main]\nsteps = [{steps}]\n",
        h.cpus, h.kernel, h.thp, h.swap, h.vms_max, h.accel
    )
}

fn kvm(r: &RunResult, stat: &str) -> i64 {
    r.vms["g1"].kvm[stat] as i64
}

fn interrupts(r: &RunResult, row: &str) -> i64 {
    r.interrupts.get(row).copied().unwrap_or(0) as i64
}

#[test]
fn each_ept_violation_is_one_host_fault_when_the_host_has_room() {
    let r = run_checked(&spec(&HOST, WRITE_READ));
    let tcg = run_checked(&spec(
        &Host {
            accel: "tcg",
            ..HOST
        },
        WRITE_READ,
    ));
    // No host reclaim: an SPTE, once installed, stays, so every violation
    // is a frame's first access and its host fault (a first touch, or the
    // copy of the zero page a read mapped).
    assert!(kvm(&r, "pf_taken") > 32_768, "{:?}", r.vms["g1"].kvm);
    assert_eq!(kvm(&r, "exits"), kvm(&r, "pf_taken"));
    assert_eq!(kvm(&r, "pf_fixed"), kvm(&r, "pf_taken"));
    assert_eq!(vm(&r, "pgfault"), VMM_PAGES + kvm(&r, "pf_taken"));
    // An SPTE goes only when the host changes its PTE, and nothing does:
    // the guest writes each frame before it reads it (its allocator clears
    // a page before handing it out), so no zero page is copied either.
    assert_eq!(kvm(&r, "remote_tlb_flush"), 0);
    assert!(r.interrupts.is_empty());
    // The guest's kernel decides as it would under TCG.
    assert_eq!(r.vms["g1"].vmstat, tcg.vms["g1"].vmstat);
    assert!(tcg.vms["g1"].kvm.is_empty());
    // QEMU under KVM has no translation cache (16 MiB under TCG).
    let held = |r: &RunResult| r.cgroups["vms"].memory_current;
    assert!(held(&tcg) - held(&r) >= 16 << 20);
}

#[test]
fn a_host_thp_is_mapped_by_one_2mib_spte() {
    let thp = Host {
        thp: "madvise",
        ..HOST
    };
    let r = run_checked(&spec(&thp, WRITE_READ));
    // QEMU madvises guest RAM MADV_HUGEPAGE: each 2 MiB block's first
    // write allocates a THP, and KVM maps the block with one SPTE.
    let thps = vm(&r, "thp_fault_alloc");
    assert!(thps > 64, "{thps}");
    assert_eq!(kvm(&r, "pf_taken"), thps);
    assert_eq!(kvm(&r, "pf_fixed"), thps);
    assert_eq!(vm(&r, "pgfault"), VMM_PAGES + thps);
}

#[test]
fn host_reclaim_zaps_sptes_and_the_vcpu_faults_them_back() {
    let roomy = run_checked(&spec(&HOST, WRITE_READ));
    let tight = Host {
        vms_max: "64M",
        ..HOST
    };
    let r = run_checked(&spec(&tight, WRITE_READ));
    assert!(vm(&r, "pswpout") > 10_000);
    // Each page reclaim unmaps had an SPTE: KVM zaps it and flushes.
    assert!(kvm(&r, "remote_tlb_flush") > 10_000);
    // zram swaps in synchronously: no violation waits for the host, and
    // the VMM reclaims on its own CPU, out of guest mode: no kicks.
    assert_eq!(kvm(&r, "pf_fixed"), kvm(&r, "pf_taken"));
    assert_eq!(kvm(&r, "exits"), kvm(&r, "pf_taken"));
    assert_eq!(interrupts(&r, "CAL"), 0);
    // Every host swap-in is a violation's fault (zram has no readahead).
    assert!(vm(&r, "pswpin") <= kvm(&r, "pf_taken") - kvm(&roomy, "pf_taken"));
    assert_eq!(r.vms["g1"].vmstat, roomy.vms["g1"].vmstat);
    assert!(r.vms["g1"].elapsed_ns > roomy.vms["g1"].elapsed_ns);
}

#[test]
fn thp_splits_and_reclaim_keep_the_ept_in_step() {
    let h = Host {
        thp: "madvise",
        vms_max: "64M",
        ..HOST
    };
    let r = run_checked(&spec(&h, WRITE_READ));
    // Reclaim splits the THPs it swaps out; the split zaps the 2 MiB SPTE
    // (the checks at each step hold every SPTE to its host PTE).
    assert!(vm(&r, "thp_split_pmd") > 0);
    assert!(kvm(&r, "remote_tlb_flush") >= vm(&r, "thp_split_pmd"));
}

#[test]
fn a_flush_kicks_the_vcpu_in_guest_mode_on_another_cpu() {
    // A host task in the VMM's cgroup reclaims guest RAM from the other
    // CPU while the vCPU runs: each flush that finds it there sends a
    // call-function IPI, and the vCPU exits for it.
    let h = Host {
        vms_max: "200M",
        hog: true,
        ..HOST
    };
    let r = run_checked(&spec(&h, WRITE_READ));
    let kicks = interrupts(&r, "CAL");
    assert!(kicks > 0, "{:?}", r.interrupts);
    assert_eq!(kvm(&r, "exits"), kvm(&r, "pf_taken") + kicks);
    assert!(kvm(&r, "remote_tlb_flush") >= kicks);
    // On one CPU the vCPU is never in guest mode while another reclaims.
    let one = run_checked(&spec(&Host { cpus: 1, ..h }, WRITE_READ));
    assert!(kvm(&one, "remote_tlb_flush") > 0);
    assert_eq!(interrupts(&one, "CAL"), 0);
    assert_eq!(kvm(&one, "exits"), kvm(&one, "pf_taken"));
}

#[test]
fn a_read_that_waits_for_host_io_comes_back_writable() {
    // NVMe host swap: a violation whose host fault must wait for the read
    // is not waited for in the exit (FOLL_NOWAIT); KVM's async page fault
    // worker faults the page in with FOLL_WRITE, so it comes back
    // writable and the guest's write after its read takes no
    // write-protect fault. Under TCG the read maps it read-only, and
    // 6.1's do_wp_page reuses every one of those pages.
    let h = Host {
        swap: "nvme",
        vms_max: "64M",
        ..HOST
    };
    let steps = read_then_write();
    let r = run_checked(&spec(&h, &steps));
    let tcg = run_checked(&spec(&Host { accel: "tcg", ..h }, &steps));
    assert_eq!(vm(&tcg, "pgreuse"), 32_768, "each page read then written");
    let waited = kvm(&r, "pf_taken") - kvm(&r, "pf_fixed");
    assert!(waited > 1_000, "{:?}", r.vms["g1"].kvm);
    assert!(vm(&r, "pgreuse") < vm(&tcg, "pgreuse") - waited / 2);
    // zram reads synchronously: nothing waits.
    let zram = run_checked(&spec(&Host { swap: "zram", ..h }, &steps));
    assert_eq!(kvm(&zram, "pf_taken"), kvm(&zram, "pf_fixed"));
}

#[test]
fn kvm_guests_are_deterministic() {
    let h = Host {
        swap: "nvme",
        vms_max: "200M",
        hog: true,
        ..HOST
    };
    let a = run_checked(&spec(&h, WRITE_READ));
    let b = run_checked(&spec(&h, WRITE_READ));
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn the_guest_waits_for_each_host_fault_inside_the_phase_that_made_it() {
    // The vCPU stops at its first access the host must handle, so the
    // host's work on guest RAM happens inside the guest's time: the guest
    // ends with its VMM's last slice, under KVM and under TCG alike (a
    // guest that ran a whole slice of hits first ended 0.41 of the way
    // through its VMM's run before 2026-11-30).
    for accel in ["kvm", "tcg"] {
        let h = Host {
            accel,
            swap: "nvme",
            vms_max: "64M",
            ..HOST
        };
        let r = run_checked(&spec(&h, &read_then_write()));
        let vmm = &r.tasks[0];
        let g = &r.vms["g1"];
        assert!(
            g.elapsed_ns * 100 >= (vmm.end_ns - vmm.start_ns) * 95,
            "{accel}: guest {} ns, VMM {} ns",
            g.elapsed_ns,
            vmm.end_ns - vmm.start_ns
        );
    }
}

/// A KVM guest whose one task sleeps `d` ten times: ten halts of its vCPU.
fn sleeper(d: &str) -> RunResult {
    run_checked(&format!(
        "[machine]\nmemory = \"512M\"\ncpus = 2\n[vm.g.host]\naccel = \"kvm\"\n\
         [vm.g.machine]\nmemory = \"128M\"\n[vm.g.task.t]\nsteps = [\n  \
         {{ op = \"repeat\", times = 10, steps = [ {{ op = \"sleep\", duration = \"{d}\" }} ] }},\n]\n"
    ))
}

#[test]
fn a_halted_vcpu_polls_a_window_that_grows_to_its_short_halts() {
    // kvm_vcpu_halt's window starts at 0 and grows (10 us, then doubling)
    // after each halt it missed that was under halt_poll_ns (200 us):
    // halts of 30 us block, block after 10 us and block after 20 us of
    // polling, then the 40 us window catches the other seven.
    let r = sleeper("30us");
    let kvm = &r.vms["g"].kvm;
    assert_eq!(kvm["halt_exits"], 10);
    assert_eq!(kvm["halt_attempted_poll"], 9);
    assert_eq!(kvm["halt_successful_poll"], 7);
    assert_eq!(kvm["halt_wakeup"], 3);
    assert_eq!(kvm["halt_poll_fail_ns"], 10_000 + 20_000);
    // Each caught halt polls until the sleep ends: under 30 us each.
    let success = kvm["halt_poll_success_ns"];
    assert!((7 * 25_000..=7 * 30_000).contains(&success), "{success}");
    // Halts of 1 ms are longer than halt_poll_ns: the window stays 0 and
    // every halt blocks at once.
    let kvm = &sleeper("1ms").vms["g"].kvm;
    assert_eq!(kvm["halt_exits"], 10);
    assert_eq!(kvm["halt_attempted_poll"], 0);
    assert_eq!(kvm["halt_wakeup"], 10);
}

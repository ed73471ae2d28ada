//! KVM's two-dimensional paging on x86 (virt/kvm/kvm_main.c,
//! arch/x86/kvm/mmu/) for a guest whose memory slot is its VMM's
//! anonymous mapping (vm.rs, `accel = "kvm"`), as Linux 6.1 has it.
//!
//! The guest reaches a frame through its EPT entry (an SPTE). A frame
//! without one, or a write through a read-only one, is an EPT violation:
//! a VM exit into `kvm_mmu_page_fault`, which asks the host for the page
//! (`hva_to_pfn`: get_user_pages of the VMM's address, which faults in the
//! host like any access of the mapping, with FOLL_WRITE only for a write,
//! mm/gup.rs) and installs an SPTE: writable when the host's PTE is (a
//! read fault is mapped writable if GUP-fast with FOLL_WRITE succeeds),
//! 2 MiB when the host maps a PMD there (`kvm_mmu_max_mapping_level`).
//! A host fault that would wait for I/O is not waited for in the exit:
//! with FOLL_NOWAIT the read starts and KVM hands the address to its async
//! page fault worker, whose get_user_pages has FOLL_WRITE
//! (`async_pf_execute`), so a swapped-out page comes back writable, and the
//! vCPU faults again once it is in (player/guest.rs).
//!
//! The host's changes to the mapping reach KVM through the MMU notifier
//! (`kvm_mmu_notifier_invalidate_range_start`): reclaim's unmap, a zap, a
//! THP split or collapse, a copy-on-write's new page. KVM zaps the SPTEs
//! of the range (a 2 MiB SPTE whole) and, if it zapped any, flushes the
//! vCPUs' TLBs (`kvm_flush_remote_tlbs`): an IPI (/proc/interrupts' CAL
//! row) to a vCPU in guest mode on another CPU, which exits for it.
//!
//! Accessed and dirty bits: the guest's accesses set the SPTE's (EPT A/D
//! bits). The classic LRU's `folio_referenced` asks KVM through the
//! notifier (`ptep_clear_flush_young_notify`), and a zapped writable
//! SPTE dirties its page (`kvm_set_pfn_dirty`), so the model sets the host
//! PTE's bits instead, which gives the same decisions. The multi-gen
//! LRU's page-table walk would not see them: a KVM guest on a host whose
//! multi-gen LRU is on is refused (crates/spec).
//!
//! Halts: a guest with nothing to run halts its vCPU (HLT exits), and
//! `kvm_vcpu_halt` polls before the vCPU's thread blocks: for the vCPU's
//! own window, which starts at 0, grows (to 10 µs, then doubling) after a
//! halt shorter than `halt_poll_ns` (200 µs on x86) that outlasted it, and
//! falls back to 0 after one longer than that. A wakeup within the window
//! is a successful poll (the thread never left its CPU); else the poll's
//! time is spent and the thread sleeps. The statistics are KVM's
//! (`halt_attempted_poll`, `halt_successful_poll`, `halt_poll_success_ns`,
//! `halt_poll_fail_ns`, `halt_wakeup`). Simplification: the poll also
//! stops where the VMM's host slice ends, as `kvm_vcpu_can_poll` stops it
//! when another task wants the CPU (`need_resched`).
//!
//! Costs: the machines the profiles come from cannot run KVM (they are KVM
//! guests without nested VMX), so the exit and the fault's handling are
//! documented figures (the profile's `kvm_exit`, `kvm_page_fault`); the
//! host's fault and the IPI are priced as the host's own.

use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::mm::pgtable::{pte_present, HPAGE_PMD_NR, PTE_PMD, PTE_WRITE};

/// An SPTE maps the frame.
const SPTE_PRESENT: u8 = 1;
/// The SPTE lets writes through.
const SPTE_WRITABLE: u8 = 2;
/// Part of a 2 MiB SPTE: the aligned block's 512 frames are mapped and
/// zapped together.
const SPTE_HUGE: u8 = 4;

/// An SPTE `s` lets an access through without an exit.
#[inline]
pub fn spte_lets_through(s: u8, write: bool) -> bool {
    s & SPTE_PRESENT != 0 && (!write || s & SPTE_WRITABLE != 0)
}

/// `halt_poll_ns`: x86's KVM_HALT_POLL_NS_DEFAULT, the longest a halted
/// vCPU polls.
pub const HALT_POLL_NS: u64 = 200_000;
/// `halt_poll_ns_grow_start` and `halt_poll_ns_grow`. `halt_poll_ns_shrink`
/// is 0: a shrink resets the window to 0.
const HALT_POLL_NS_GROW_START: u64 = 10_000;
const HALT_POLL_NS_GROW: u64 = 2;

/// One VM's memory slot and EPT, from the host's side.
pub struct Kvm {
    /// The VMM's mapping of guest RAM: gfn N is its page N.
    pub vma: u32,
    /// The VMM's mm.
    mm: u32,
    /// Each gfn's SPTE (`SPTE_*` bits; 0: none).
    spte: Vec<u8>,
    /// The host CPU whose vCPU thread last entered the guest (None while
    /// the vCPU halts or sleeps): a remote TLB flush kicks it if that CPU
    /// still runs the VMM.
    pub vcpu_cpu: Option<usize>,
    /// The vCPU's halt-polling window (`vcpu->halt_poll_ns`).
    halt_poll_ns: u64,
    pub stats: KvmStats,
}

/// KVM's statistics (/sys/kernel/debug/kvm/PID-FD/), by their names.
#[derive(Clone, Copy, Debug, Default)]
pub struct KvmStats {
    /// VM exits: EPT violations and the exits remote flushes force.
    pub exits: u64,
    /// EPT violations handled (`kvm_mmu_page_fault`).
    pub pf_taken: u64,
    /// Those that installed an SPTE.
    pub pf_fixed: u64,
    /// `kvm_flush_remote_tlbs` calls.
    pub remote_tlb_flush: u64,
    /// HLT exits (counted in `exits` too).
    pub halt_exits: u64,
    /// Halts that polled, and those whose wakeup came within the poll.
    pub halt_attempted_poll: u64,
    pub halt_successful_poll: u64,
    /// Time spent polling in those two kinds of halt.
    pub halt_poll_success_ns: u64,
    pub halt_poll_fail_ns: u64,
    /// Wakeups of a blocked vCPU.
    pub halt_wakeup: u64,
}

impl KvmStats {
    /// The statistics by name, as the guest's document lists them.
    pub fn named(&self) -> [(&'static str, u64); 10] {
        [
            ("exits", self.exits),
            ("halt_attempted_poll", self.halt_attempted_poll),
            ("halt_exits", self.halt_exits),
            ("halt_poll_fail_ns", self.halt_poll_fail_ns),
            ("halt_poll_success_ns", self.halt_poll_success_ns),
            ("halt_successful_poll", self.halt_successful_poll),
            ("halt_wakeup", self.halt_wakeup),
            ("pf_fixed", self.pf_fixed),
            ("pf_taken", self.pf_taken),
            ("remote_tlb_flush", self.remote_tlb_flush),
        ]
    }
}

impl Kernel {
    /// `KVM_SET_USER_MEMORY_REGION` of the VMM's mapping `vma` as the
    /// guest's RAM: its slot (an index of `self.kvm`).
    pub fn kvm_create_vm(&mut self, vma: u32) -> usize {
        let v = &self.vmas[vma as usize];
        self.kvm.push(Kvm {
            vma,
            mm: v.mm,
            spte: vec![0; v.pages as usize],
            vcpu_cpu: None,
            halt_poll_ns: 0,
            stats: KvmStats::default(),
        });
        self.kvm.len() - 1
    }

    /// The guest's access of `gfn` goes through its SPTE without an exit.
    #[inline]
    pub fn kvm_spte_lets_through(&self, slot: usize, gfn: usize, write: bool) -> bool {
        spte_lets_through(self.kvm[slot].spte[gfn], write)
    }

    /// The VM's SPTEs, lent to its guest kernel for a slice (vm.rs): the
    /// host does nothing meanwhile.
    pub fn kvm_lend_ept(&mut self, slot: usize) -> Vec<u8> {
        std::mem::take(&mut self.kvm[slot].spte)
    }

    /// The SPTEs back from the guest's slice.
    pub fn kvm_return_ept(&mut self, slot: usize, spte: Vec<u8>) {
        self.kvm[slot].spte = spte;
    }

    /// An access through the SPTE: its accessed (and dirty) bit, set on the
    /// host PTE in their stead (the module's comment), and the content
    /// token. No host time: the guest's own clock already ran it.
    pub fn kvm_guest_access(&mut self, slot: usize, gfn: usize, write: bool) {
        let vma = self.kvm[slot].vma;
        let pte = self.vmas[vma as usize].ptes[gfn];
        debug_assert!(pte_present(pte), "an SPTE outlived its host PTE");
        self.hit_present(vma, gfn, pte, write);
    }

    /// An EPT violation: the VM exit and KVM's handling of it; the host's
    /// page is asked for next (`get_user_pages_fault`), then
    /// `kvm_map_spte`.
    pub fn kvm_ept_violation(&mut self, slot: usize) {
        let st = &mut self.kvm[slot].stats;
        st.exits += 1;
        st.pf_taken += 1;
        self.charge_cost(Fn::VmxVcpuRun, self.costs.kvm_exit);
        self.charge_cost(Fn::KvmMmuPageFault, self.costs.kvm_page_fault);
    }

    /// The SPTE of `gfn` from the host PTE `hva_to_pfn` left: writable if
    /// the host's is, and the whole 2 MiB block when the host maps it
    /// with a PMD (`kvm_mmu_hugepage_adjust`: the memslot covers the
    /// block and the host's mapping level is 2 MiB).
    pub fn kvm_map_spte(&mut self, slot: usize, gfn: usize) {
        let vma = self.kvm[slot].vma;
        let pte = self.vmas[vma as usize].ptes[gfn];
        debug_assert!(pte_present(pte), "hva_to_pfn left the page mapped");
        let bits = SPTE_PRESENT
            | if pte & PTE_WRITE != 0 {
                SPTE_WRITABLE
            } else {
                0
            };
        // gfn and host address agree modulo 2 MiB only if the mapping
        // starts on a 2 MiB boundary (`kvm_alloc_memslot_metadata`
        // disallows huge SPTEs otherwise).
        let aligned = self.vmas[vma as usize]
            .start_vpn
            .is_multiple_of(HPAGE_PMD_NR);
        let kvm = &mut self.kvm[slot];
        kvm.stats.pf_fixed += 1;
        let n = HPAGE_PMD_NR as usize;
        let first = gfn - gfn % n;
        if pte & PTE_PMD != 0 && aligned && first + n <= kvm.spte.len() {
            kvm.spte[first..first + n].fill(bits | SPTE_HUGE);
        } else {
            kvm.spte[gfn] = bits;
        }
    }

    /// The vCPU of `slot` enters the guest on the current CPU.
    pub fn kvm_vcpu_enter(&mut self, slot: usize) {
        self.kvm[slot].vcpu_cpu = Some(self.cur_cpu);
    }

    /// How long the vCPU of `slot` polls if it halts now
    /// (`kvm_vcpu_halt`): its window, at most `halt_poll_ns`.
    pub fn kvm_halt_poll_window(&mut self, slot: usize) -> u64 {
        let v = &mut self.kvm[slot];
        v.halt_poll_ns = v.halt_poll_ns.min(HALT_POLL_NS);
        v.halt_poll_ns
    }

    /// A halt of the vCPU of `slot` (a HLT exit) that lasted `halt_ns` and
    /// polled for `polled` of them (its window was `window`), its thread
    /// blocked (`waited`) or not: the exit and the polling are the VMM
    /// thread's time on its CPU, the statistics count them, and the
    /// window adapts (`kvm_vcpu_halt`; a wakeup on x86 is always valid).
    pub fn kvm_halt_done(
        &mut self,
        slot: usize,
        window: u64,
        polled: u64,
        halt_ns: u64,
        waited: bool,
    ) {
        self.charge_cost(Fn::VmxVcpuRun, self.costs.kvm_exit);
        // Polling spins for clock time: SMT does not stretch it.
        self.charge_wall(Fn::KvmVcpuHalt, polled);
        let v = &mut self.kvm[slot];
        v.stats.exits += 1;
        v.stats.halt_exits += 1;
        if window > 0 {
            v.stats.halt_attempted_poll += 1;
            match waited {
                false => {
                    v.stats.halt_successful_poll += 1;
                    v.stats.halt_poll_success_ns += polled;
                }
                true => v.stats.halt_poll_fail_ns += polled,
            }
        }
        if waited {
            v.stats.halt_wakeup += 1;
        }
        if halt_ns <= v.halt_poll_ns {
            // The window was long enough.
        } else if v.halt_poll_ns != 0 && halt_ns > HALT_POLL_NS {
            // A long block: shrink_halt_poll_ns, to 0.
            v.halt_poll_ns = 0;
        } else if v.halt_poll_ns < HALT_POLL_NS && halt_ns < HALT_POLL_NS {
            // A short halt the window missed: grow_halt_poll_ns.
            v.halt_poll_ns = (v.halt_poll_ns * HALT_POLL_NS_GROW).max(HALT_POLL_NS_GROW_START);
        }
    }

    /// The vCPU of `slot` halts or its thread sleeps: out of guest mode.
    pub fn kvm_vcpu_leave(&mut self, slot: usize) {
        self.kvm[slot].vcpu_cpu = None;
    }

    /// `mmu_notifier_invalidate_range_start` for pages `first..first + n`
    /// of `vma`: KVM zaps the SPTEs of a guest whose RAM they are.
    #[inline]
    pub fn mmu_notifier_invalidate_range(&mut self, vma: u32, first: usize, n: usize) {
        if self.kvm.is_empty() {
            return;
        }
        if let Some(slot) = self.kvm.iter().position(|k| k.vma == vma) {
            self.kvm_unmap_gfn_range(slot, first, n);
        }
    }

    /// `kvm_unmap_gfn_range`: the range's SPTEs zapped (a 2 MiB SPTE
    /// whole), then, if any was, `kvm_flush_remote_tlbs`.
    fn kvm_unmap_gfn_range(&mut self, slot: usize, first: usize, n: usize) {
        let kvm = &mut self.kvm[slot];
        let block = HPAGE_PMD_NR as usize;
        let end = (first + n).min(kvm.spte.len());
        let mut zapped = false;
        let mut gfn = first;
        while gfn < end {
            let s = kvm.spte[gfn];
            if s & SPTE_HUGE != 0 {
                let b = gfn - gfn % block;
                kvm.spte[b..b + block].fill(0);
                zapped = true;
                gfn = b + block;
            } else {
                zapped |= s != 0;
                kvm.spte[gfn] = 0;
                gfn += 1;
            }
        }
        if zapped {
            self.kvm_flush_remote_tlbs(slot);
        }
    }

    /// `kvm_flush_remote_tlbs`: every vCPU is asked to flush; one in
    /// guest mode on another CPU gets an IPI (`kvm_kick_many_cpus`,
    /// a call-function IPI) and exits for it, and the sender waits for
    /// its acknowledgement (KVM_REQUEST_WAIT): an IPI's round trip and the
    /// target's exit. The target's exit is charged at its next slice
    /// (tlb.rs `run_pending_ipis`).
    fn kvm_flush_remote_tlbs(&mut self, slot: usize) {
        let me = self.cur_cpu;
        let kvm = &mut self.kvm[slot];
        kvm.stats.remote_tlb_flush += 1;
        let Some(c) = kvm.vcpu_cpu.filter(|&c| c != me) else {
            return;
        };
        let cpu = &self.cpus[c];
        if cpu.loaded_mm != Some(kvm.mm) || cpu.is_lazy {
            // Its thread was switched out since it entered the guest.
            return;
        }
        kvm.stats.exits += 1;
        let cpu = &mut self.cpus[c];
        cpu.irq_call_count += 1;
        cpu.kvm_kicks += 1;
        self.charge_cost(Fn::KvmFlushRemoteTlbs, self.costs.ipi + self.costs.kvm_exit);
    }

    /// `kvm_mmu_notifier_release`: the VMM's mm goes (exit_mmap), and every
    /// SPTE of its guests with it.
    pub fn kvm_release_mm(&mut self, mm: u32) {
        for kvm in self.kvm.iter_mut().filter(|k| k.mm == mm) {
            kvm.spte.fill(0);
            kvm.vcpu_cpu = None;
        }
    }

    /// Call-function IPIs taken (/proc/interrupts' CAL row): the kicks of
    /// KVM's remote TLB flushes.
    pub fn call_function_ipis(&self) -> u64 {
        self.cpus.iter().map(|c| c.irq_call_count).sum()
    }

    /// `--check`: every SPTE stands on a host PTE that maps its gfn as it
    /// allows, and a 2 MiB SPTE on a host PMD (a missed invalidation would
    /// leave one behind).
    pub fn check_kvm(&self) -> Result<(), String> {
        for kvm in &self.kvm {
            let ptes = &self.vmas[kvm.vma as usize].ptes;
            for (gfn, &s) in kvm.spte.iter().enumerate() {
                if s == 0 {
                    continue;
                }
                let pte = ptes[gfn];
                if !pte_present(pte)
                    || (s & SPTE_WRITABLE != 0 && pte & PTE_WRITE == 0)
                    || (s & SPTE_HUGE != 0 && pte & PTE_PMD == 0)
                {
                    return Err(format!(
                        "the EPT maps guest frame {gfn} (SPTE {s:#x}) where the host's PTE is {pte:#x}: a host change KVM was not told of"
                    ));
                }
            }
        }
        Ok(())
    }
}

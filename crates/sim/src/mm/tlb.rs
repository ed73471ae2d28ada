//! arch/x86/mm/tlb.c: which CPUs have each mm loaded (`mm_cpumask`), as
//! `switch_mm_irqs_off` keeps it. A CPU that switches to a task of
//! another mm leaves the previous mm's mask and joins the next one's; a
//! kernel thread (kswapd, khugepaged) or the idle task borrows the
//! previous mm (lazy TLB mode), so the CPU stays in its mask. The mask is
//! what a TLB flush of the mm (`flush_tlb_mm_range`) sends its IPIs to:
//! every CPU in it but the flushing one, except those in lazy TLB mode
//! when no page table was freed (`native_flush_tlb_multi`); a lazy CPU
//! that gets one leaves the mm for init_mm (`flush_tlb_func`). Each IPI
//! counts on the CPU that takes it (`irq_tlb_count`: /proc/interrupts'
//! TLB row). Reclaim gathers the CPUs of the mms it unmaps from and
//! flushes them once per list (`try_to_unmap_flush`).
//!
//! The local flush is charged where the callers charge it
//! (`costs.tlb_flush`). A flush that sends IPIs costs its sender one IPI
//! round trip (`costs.ipi`, native_flush_tlb_multi: send, then wait for
//! every target's handler) and each target its handler (`costs.ipi_handler`,
//! flush_tlb_func), both measured by calibrate's many-CPU bench.
//! Simplifications: the round trip is the same for any number of targets
//! (the bench has one; more targets send more ICR writes, which it cannot
//! show), and a target's handler time lands at the start of its next slice
//! (slices run one after another, so the slice an IPI interrupted may
//! already have run); an IPI that found its target idle costs it nothing.
//! One that arrived inside a memory stall the target ran (reclaim) is
//! charged inside a stall there, so it counts in PSI as it does on Linux,
//! where the interrupted task stays TSK_MEMSTALL through the handler. The
//! stall is charged to the entity that runs next there (its cgroup's
//! pressure, where Linux charges the interrupted task's), and only IPIs
//! that arrived during the target's last slice are matched against its
//! stalls (one from a sender further behind counts as running time, as
//! does one that arrives ahead of the target's clock, not knowing what it
//! will interrupt); a stall that sleeps on I/O inside (swapoff's reads)
//! counts the IPIs of its sleep too.

use crate::cost_model::Fn;
use crate::kernel::Kernel;

/// A set of CPUs (`struct cpumask`): up to the 1024 a spec may have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuMask {
    bits: Vec<u64>,
}

impl CpuMask {
    pub fn set(&mut self, cpu: usize) {
        let w = cpu / 64;
        if self.bits.len() <= w {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] |= 1 << (cpu % 64);
    }

    pub fn clear(&mut self, cpu: usize) {
        if let Some(w) = self.bits.get_mut(cpu / 64) {
            *w &= !(1 << (cpu % 64));
        }
    }

    pub fn test(&self, cpu: usize) -> bool {
        self.bits
            .get(cpu / 64)
            .is_some_and(|w| w & (1 << (cpu % 64)) != 0)
    }

    /// `cpumask_weight`: how many CPUs are in it.
    pub fn weight(&self) -> u32 {
        self.bits.iter().map(|w| w.count_ones()).sum()
    }

    /// The CPUs in it, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut left = word;
            std::iter::from_fn(move || {
                (left != 0).then(|| {
                    let bit = left.trailing_zeros() as usize;
                    left &= left - 1;
                    w * 64 + bit
                })
            })
        })
    }

    /// Whether a CPU other than `cpu` is in it (`cpumask_any_but`).
    #[inline]
    pub fn any_but(&self, cpu: usize) -> bool {
        self.weight() > self.test(cpu) as u32
    }
}

/// The pages one `struct mmu_gather` holds before a zap must flush
/// (`__tlb_remove_page_size` returns true): its bundle of
/// MMU_GATHER_BUNDLE (8) and MAX_GATHER_BATCH_COUNT (10000 / 510 = 19)
/// batch pages of MAX_GATHER_BATCH ((4096 − 16) / 8 = 510) entries.
pub const MMU_GATHER_PAGES: u32 = 8 + 19 * 510;

/// `struct tlbflush_unmap_batch`: the CPUs reclaim's deferred flush
/// goes to, and whether a PTE it holds was dirty (`writable`).
#[derive(Debug, Default)]
pub struct TlbUbc {
    cpumask: CpuMask,
    writable: bool,
}

/// A zap's `struct mmu_gather`: what it cleared and gathered since its
/// last flush.
pub struct MmuGather {
    mm: u32,
    /// Pages gathered for freeing after the flush.
    pages: u32,
    /// A present PTE or PMD was cleared (`cleared_ptes`, `cleared_pmds`).
    cleared: bool,
    /// Page tables were freed (`freed_tables`).
    pub freed_tables: bool,
}

impl Kernel {
    /// `switch_mm_irqs_off`: CPU `cpu` switches to a task of `mm`; the mm
    /// it had loaded (a user mm, possibly borrowed by a kernel thread
    /// since) leaves its mask. The CPU leaves lazy TLB mode.
    pub fn switch_mm(&mut self, cpu: usize, mm: u32) {
        self.cpus[cpu].is_lazy = false;
        let prev = self.cpus[cpu].loaded_mm;
        if prev == Some(mm) {
            return;
        }
        if let Some(p) = prev {
            self.mms[p as usize].cpumask.clear(cpu);
        }
        self.mms[mm as usize].cpumask.set(cpu);
        self.cpus[cpu].loaded_mm = Some(mm);
    }

    /// `enter_lazy_tlb`: a kernel thread or the idle task runs on `cpu`,
    /// borrowing the mm it had loaded.
    pub fn enter_lazy_tlb(&mut self, cpu: usize) {
        self.cpus[cpu].is_lazy = true;
    }

    /// `tlb_gather_mmu` for a zap of `mm`'s PTEs.
    pub fn tlb_gather_mmu(&self, mm: u32) -> MmuGather {
        MmuGather {
            mm,
            pages: 0,
            cleared: false,
            freed_tables: false,
        }
    }

    /// A present PTE (or PMD) cleared by the zap; `page`: it mapped a page
    /// the gather frees after the flush (not the zero page). A full
    /// gather flushes at once. Simplification: that mid-zap flush is not
    /// charged time (one per 9,698 pages; the zap's final flush is, where
    /// the caller charges it).
    #[inline]
    pub fn tlb_remove_tlb_entry(&mut self, tlb: &mut MmuGather, page: bool) {
        tlb.cleared = true;
        if page {
            self.release_pages_next();
            tlb.pages += 1;
            if tlb.pages == MMU_GATHER_PAGES {
                self.tlb_flush_mmu(tlb);
            }
        }
    }

    /// `tlb_finish_mmu`: the last flush, if anything was cleared or freed.
    pub fn tlb_finish_mmu(&mut self, mut tlb: MmuGather) {
        if tlb.cleared || tlb.freed_tables {
            self.tlb_flush_mmu(&mut tlb);
        }
    }

    /// `tlb_flush_mmu`: flush the gathered range, free the gathered pages.
    fn tlb_flush_mmu(&mut self, tlb: &mut MmuGather) {
        self.flush_tlb_mm_range(tlb.mm, tlb.freed_tables);
        self.release_pages_end();
        tlb.pages = 0;
        tlb.cleared = false;
    }

    /// `flush_tlb_mm_range` from the current CPU: an IPI to every other
    /// CPU in the mm's mask that has it loaded and is not lazy, and to the
    /// lazy ones too when page tables were freed.
    #[inline]
    pub fn flush_tlb_mm_range(&mut self, mm: u32, freed_tables: bool) {
        let me = self.cur_cpu;
        if self.cpus.len() == 1 || !self.mms[mm as usize].cpumask.any_but(me) {
            return;
        }
        // `should_flush_tlb`: a lazy CPU only when page tables were freed.
        let targets: Vec<usize> = self.mms[mm as usize]
            .cpumask
            .iter()
            .filter(|&c| c != me && (freed_tables || !self.cpus[c].is_lazy))
            .collect();
        // A lazy CPU that takes one switches to init_mm, leaving the mask.
        for &c in &targets {
            if self.cpus[c].is_lazy {
                if let Some(m) = self.cpus[c].loaded_mm.take() {
                    self.mms[m as usize].cpumask.clear(c);
                }
            }
        }
        self.native_flush_tlb_multi(&targets);
    }

    /// `native_flush_tlb_multi`: a flush IPI to each target, counted there
    /// and its handler owed; the sender waits one round trip for them all.
    fn native_flush_tlb_multi(&mut self, targets: &[usize]) {
        if targets.is_empty() {
            return;
        }
        let now = self.now();
        for &c in targets {
            self.cpus[c].irq_tlb_count += 1;
            self.cpus[c].ipi_pending.push(now);
        }
        self.charge_cost(Fn::FlushTlbMulti, self.costs.ipi);
    }

    /// At the start of a slice on `cpu` (at `start`; its last slice ended
    /// at `prev_end`): the handlers of the IPIs it took, charged to what
    /// runs now, except those that arrived while it was idle. One that
    /// arrived inside a memory stall the CPU ran (reclaim) prolonged that
    /// stall, as an interrupt does on Linux (the task stays TSK_MEMSTALL
    /// through it): its handler is owed to `charge_stalled_ipis`, which
    /// charges it inside a stall once the next entity is on the CPU (the
    /// same time, accounted as stalled; moved to this slice's start).
    pub fn run_pending_ipis(&mut self, cpu: usize, prev_end: u64, start: u64) {
        let kicks = std::mem::take(&mut self.cpus[cpu].kvm_kicks);
        if kicks > 0 {
            // The vCPU kicked out of the guest for a remote TLB flush:
            // its exit and entry (kvm.rs).
            self.charge_cost(Fn::VmxVcpuRun, kicks * self.costs.kvm_exit);
        }
        let c = &mut self.cpus[cpu];
        if c.ipi_pending.is_empty() {
            c.memstall_spans.clear();
            return;
        }
        let (mut busy, mut stalled) = (0, 0);
        for &t in c
            .ipi_pending
            .iter()
            .filter(|&t| !(prev_end..start).contains(t))
        {
            if c.memstall_spans.iter().any(|&(a, b)| a <= t && t < b) {
                stalled += 1;
            } else {
                busy += 1;
            }
        }
        c.ipi_pending.clear();
        c.memstall_spans.clear();
        c.ipi_stalled += stalled;
        if busy > 0 {
            self.charge_cost(Fn::FlushTlbFunc, busy * self.costs.ipi_handler);
        }
    }

    /// The handlers `run_pending_ipis` found inside a memory stall, charged
    /// now inside one of the entity just switched in on `cpu`.
    pub fn charge_stalled_ipis(&mut self, cpu: usize) {
        let n = std::mem::take(&mut self.cpus[cpu].ipi_stalled);
        if n > 0 {
            let psi = self.psi_memstall_enter();
            self.charge_cost(Fn::FlushTlbFunc, n * self.costs.ipi_handler);
            self.psi_memstall_leave(psi);
        }
    }

    /// `set_tlb_ubc_flush_pending`: reclaim unmapped a page of `mm`; if
    /// another CPU has it loaded (`should_defer_flush`), the flush waits
    /// for the list's `try_to_unmap_flush` and goes to its CPUs then (a
    /// flush of this CPU alone is done at once: no IPI).
    /// A dirty PTE (`writable`) makes the flush due before the folio's
    /// write-out starts (`try_to_unmap_flush_dirty`).
    #[inline]
    pub fn tlb_ubc_add(&mut self, mm: u32, writable: bool) {
        // One CPU: no other can hold the mm.
        if self.cpus.len() > 1 && self.mms[mm as usize].cpumask.any_but(self.cur_cpu) {
            self.tlb_ubc_gather(mm, writable);
        }
    }

    fn tlb_ubc_gather(&mut self, mm: u32, writable: bool) {
        self.tlb_ubc.writable |= writable;
        let me = self.cur_cpu;
        for c in self.mms[mm as usize].cpumask.iter() {
            if c != me {
                self.tlb_ubc.cpumask.set(c);
            }
        }
    }

    /// `try_to_unmap_flush` (`arch_tlbbatch_flush`): one IPI to each
    /// gathered CPU that is not lazy (the flush names no mm).
    pub fn try_to_unmap_flush(&mut self) {
        let batch = std::mem::take(&mut self.tlb_ubc);
        if batch.cpumask.weight() == 0 {
            return;
        }
        let targets: Vec<usize> = batch
            .cpumask
            .iter()
            .filter(|&c| !self.cpus[c].is_lazy)
            .collect();
        self.native_flush_tlb_multi(&targets);
    }

    /// `try_to_unmap_flush_dirty`: the batched flush now, if a PTE it
    /// holds was dirty (a folio about to be written out).
    #[inline]
    pub fn try_to_unmap_flush_dirty(&mut self) {
        if self.tlb_ubc.writable {
            self.try_to_unmap_flush();
        }
    }

    /// TLB-shootdown IPIs taken by every CPU so far (/proc/interrupts'
    /// TLB row, summed).
    pub fn tlb_shootdowns(&self) -> u64 {
        self.cpus.iter().map(|c| c.irq_tlb_count).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::CpuMask;
    use crate::cost_model::Fn;
    use crate::kernel::Kernel;
    use crate::sched::psi::{PsiOut, PsiWho};

    fn kernel(cpus: u32) -> Kernel {
        crate::kernel::test_kernel(cpus, "6.1")
    }

    /// kswapd's balance_pgdat stall runs across its slices: the span a
    /// CPU keeps ends when kswapd leaves it and starts again where it
    /// runs next, so what runs on CPU 1 meanwhile is not in it.
    #[test]
    fn a_stall_run_across_slices_is_cut_at_each_switch() {
        let mut k = kernel(2);
        k.cur_cpu = 1;
        (k.clock_base, k.pending_ns) = (1_000, 0);
        k.psi_switch_in(PsiWho::Kthread(0), 1, 1_000, 1_000);
        assert!(!k.psi_memstall_enter());
        k.charge_cost(Fn::FlushTlbFunc, 4_000);
        k.psi_switch_out(PsiWho::Kthread(0), k.now(), PsiOut::Preempted);
        assert_eq!(k.cpus[1].memstall_spans, [(1_000, 5_000)]);
        assert_eq!(k.cpus[1].memstall_since, None);
        k.cur_cpu = 0;
        (k.clock_base, k.pending_ns) = (9_000, 0);
        k.psi_switch_in(PsiWho::Kthread(0), 0, 9_000, 9_000);
        assert_eq!(k.cpus[0].memstall_since, Some(9_000));
        k.charge_cost(Fn::FlushTlbFunc, 2_000);
        k.psi_memstall_leave(false);
        assert_eq!(k.cpus[0].memstall_spans, [(9_000, 11_000)]);
        assert!(k.cpus[1].memstall_since.is_none());
    }

    /// CPU 1 ran a reclaim stall from 1 to 5 µs and took 10,000 flush
    /// IPIs inside it and one after it: the one after is its next
    /// entity's time, the others prolong a memory stall (as an interrupt
    /// of a TSK_MEMSTALL task does), though all take the same time. (So
    /// many that the stall outweighs a jiffy: psi weighs each CPU's share
    /// by its non-idle jiffies.)
    #[test]
    fn an_ipi_that_interrupts_a_memory_stall_is_stalled_time() {
        let mut k = kernel(2);
        let h = k.costs.ipi_handler;
        k.cur_cpu = 1;
        k.cpus[1].memstall_spans.push((1_000, 5_000));
        k.cpus[1].ipi_pending.extend([2_000; 10_000]);
        k.cpus[1].ipi_pending.push(6_000);
        k.clock_base = 10_000;
        k.pending_ns = 0;
        k.run_pending_ipis(1, 8_000, 10_000);
        assert_eq!(k.pending_ns, h);
        assert_eq!(k.cpus[1].ipi_stalled, 10_000);
        assert!(k.cpus[1].memstall_spans.is_empty() && k.cpus[1].ipi_pending.is_empty());
        k.psi_switch_in(PsiWho::Kthread(0), 1, 10_000, 10_000);
        k.charge_stalled_ipis(1);
        assert_eq!(k.pending_ns, 10_001 * h);
        let now = k.now();
        let p = k.psi.show(0, now);
        assert_eq!(p.memory.some.total_us, 10_000 * h / 1_000);
        assert_eq!(k.cpus[1].ipi_stalled, 0);
        // The stall it was charged in is a span an IPI could interrupt.
        assert_eq!(
            k.cpus[1].memstall_spans,
            [(10_000 + h, 10_000 + 10_001 * h)]
        );
    }

    #[test]
    fn a_mask_holds_cpus_across_words() {
        let mut m = CpuMask::default();
        assert_eq!(m.weight(), 0);
        m.set(1);
        m.set(70);
        m.set(1023);
        assert!(m.test(1) && m.test(70) && m.test(1023) && !m.test(0) && !m.test(64));
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![1, 70, 1023]);
        m.clear(70);
        m.clear(5000);
        assert_eq!(m.weight(), 2);
    }
}

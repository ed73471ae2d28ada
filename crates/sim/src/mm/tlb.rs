//! arch/x86/mm/tlb.c: which CPUs have each mm loaded (`mm_cpumask`), as
//! `switch_mm_irqs_off` keeps it. A CPU that switches to a task of
//! another mm leaves the previous mm's mask and joins the next one's; a
//! kernel thread (kswapd, khugepaged) or the idle task borrows the
//! previous mm (lazy TLB mode), so the CPU stays in its mask. The mask is
//! what a TLB flush of the mm (`flush_tlb_mm_range`) sends its IPIs to:
//! every CPU in it but the flushing one.

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
        (0..self.bits.len() * 64).filter(|&c| self.test(c))
    }
}

impl Kernel {
    /// `switch_mm_irqs_off`: CPU `cpu` switches to a task of `mm`; the mm
    /// it had loaded (a user mm, possibly borrowed by a kernel thread
    /// since) leaves its mask.
    pub fn switch_mm(&mut self, cpu: usize, mm: u32) {
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
}

#[cfg(test)]
mod tests {
    use super::CpuMask;

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

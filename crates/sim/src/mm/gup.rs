//! mm/gup.c for one page of the caller's own mm, asked for from the kernel
//! (KVM's `hva_to_pfn`, kvm.rs): the page is taken as its PTE maps it when
//! that allows the access (`follow_page_pte`, and GUP-fast likewise),
//! else faulted in (`faultin_page`: handle_mm_fault, a write fault for
//! FOLL_WRITE), counted as any fault is (PGFAULT in handle_mm_fault).
//! Nothing is accessed: the caller maps the page itself.
//! Simplification: such a fault is priced as a user fault, whose exception
//! entry stands for get_user_pages' own walk and call into the fault
//! (`fault_entry`: a few hundred ns either way).

use super::pgtable::{pte_present, Pte, PTE_WRITE};
use crate::kernel::Kernel;
use crate::SimError;

/// The PTE lets get_user_pages take the page: present, and writable for
/// FOLL_WRITE (`can_follow_write_pte` aside: no FOLL_FORCE here).
#[inline]
fn gup_allows(pte: Pte, write: bool) -> bool {
    pte_present(pte) && (!write || pte & PTE_WRITE != 0)
}

impl Kernel {
    /// get_user_pages of page `idx` of `vma`, with FOLL_WRITE if `write`.
    /// As `user_access` otherwise: a fault that must wait leaves
    /// `fault.blocked_until`, and one that returned without mapping the
    /// page asks for the call again (`fault.again`).
    pub fn get_user_pages_fault(
        &mut self,
        vma: u32,
        idx: usize,
        write: bool,
    ) -> Result<(), SimError> {
        if gup_allows(self.vmas[vma as usize].ptes[idx], write) {
            return Ok(());
        }
        if self.faultin(vma, idx, write)? && !gup_allows(self.vmas[vma as usize].ptes[idx], write) {
            self.fault.again = true;
        }
        Ok(())
    }
}

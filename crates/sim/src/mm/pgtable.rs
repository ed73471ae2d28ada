//! PTEs: one u64 per virtual page in a VMA's dense PTE array.
//!
//! Present: flags in the low bits, the frame number in the high 32 bits.
//! Swap: PTE_SWAP set, the swap entry in the high 32 bits.
//! None: 0.

use super::folio::Pfn;
use super::swapfile::SwpEntry;

pub type Pte = u64;

pub const PTE_PRESENT: u64 = 1 << 0;
pub const PTE_WRITE: u64 = 1 << 1;
/// The accessed bit: x86 sets it in hardware on any access.
pub const PTE_YOUNG: u64 = 1 << 2;
/// The dirty bit: x86 sets it in hardware on a write through a writable PTE.
pub const PTE_DIRTY: u64 = 1 << 3;
/// Maps the shared zero page (a special PTE: no struct page refcounting).
pub const PTE_ZERO: u64 = 1 << 4;
/// A swap entry (not present).
pub const PTE_SWAP: u64 = 1 << 5;
/// `pte_swp_exclusive`: the page was PageAnonExclusive when swapped out.
pub const PTE_SWP_EXCLUSIVE: u64 = 1 << 6;

/// One of the 512 entries standing for a PMD that maps a PMD-size folio
/// whole (`pmd_trans_huge`): the block's entries all carry it, each with
/// its page's frame; the block has no PTE table. Its young and dirty bits
/// are the PMD's, read as the OR over the entries and cleared on all.
pub const PTE_PMD: u64 = 1 << 7;
/// Pages a PMD maps (HPAGE_PMD_NR).
pub const HPAGE_PMD_NR: u64 = 512;

#[inline]
pub fn pte_none(p: Pte) -> bool {
    p == 0
}
#[inline]
pub fn pte_present(p: Pte) -> bool {
    p & PTE_PRESENT != 0
}

/// Whether the MMU lets an access through `pte` without a fault: the page
/// present, writable if the access writes, and the PTE young (or the CPU
/// sets the accessed bit itself, `hw_young`).
#[inline]
pub fn pte_lets_through(pte: Pte, write: bool, hw_young: bool) -> bool {
    pte_present(pte) && (!write || pte & PTE_WRITE != 0) && (pte & PTE_YOUNG != 0 || hw_young)
}
#[inline]
pub fn is_swap_pte(p: Pte) -> bool {
    p & PTE_SWAP != 0
}
#[inline]
pub fn pte_pfn(p: Pte) -> Pfn {
    (p >> 32) as Pfn
}
#[inline]
pub fn pte_swp_entry(p: Pte) -> SwpEntry {
    (p >> 32) as SwpEntry
}
#[inline]
pub fn mk_pte(pfn: Pfn, flags: u64) -> Pte {
    (pfn as u64) << 32 | flags | PTE_PRESENT
}
#[inline]
pub fn swp_entry_to_pte(e: SwpEntry, exclusive: bool) -> Pte {
    (e as u64) << 32 | PTE_SWAP | if exclusive { PTE_SWP_EXCLUSIVE } else { 0 }
}

//! mm/swap_state.c: the swap cache. Each device's xarray is a flat array
//! indexed by slot: 0 empty, `pfn << 2 | 2` a folio, `shadow` (bit 0 set)
//! a workingset shadow.

use super::folio::*;
use super::swapfile::{swp_offset, swp_type, SwpEntry};
use crate::cost;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

impl Kernel {
    fn cache_slot(&mut self, entry: SwpEntry) -> &mut u64 {
        &mut self.swap[swp_type(entry)].cache[swp_offset(entry) as usize]
    }

    /// `add_to_swap_cache`: the folio takes the slot; returns the shadow it
    /// replaced, if any.
    pub fn add_to_swap_cache(&mut self, pfn: Pfn, entry: SwpEntry) -> Option<u64> {
        let old = std::mem::replace(self.cache_slot(entry), (pfn as u64) << 2 | 2);
        debug_assert!(old & 3 != 2, "slot already caches a folio");
        let f = self.folios.get_mut(pfn);
        f.refcount += 1;
        f.set(PG_SWAPCACHE);
        f.swap = entry;
        let memcg = f.memcg;
        self.vm.add(Vm::NrFilePages, 1);
        self.vm.add(Vm::NrSwapcached, 1);
        self.memcg_stat(memcg, Mc::Swapcached, 1);
        (old & 1 == 1).then_some(old)
    }

    /// `__delete_from_swap_cache`: leave `shadow` (or nothing) behind. The
    /// caller drops the cache's reference and the slot's HAS_CACHE.
    pub fn delete_from_swap_cache_locked(&mut self, pfn: Pfn, shadow: u64) {
        let f = self.folios.get_mut(pfn);
        let entry = f.swap;
        f.clear(PG_SWAPCACHE);
        f.swap = 0;
        let memcg = f.memcg;
        *self.cache_slot(entry) = shadow;
        self.vm.add(Vm::NrFilePages, -1);
        self.vm.add(Vm::NrSwapcached, -1);
        self.memcg_stat(memcg, Mc::Swapcached, -1);
        self.charge_cost(cost::Fn::AddToSwap, cost::SWAP_SLOT_NS / 2);
    }

    /// `delete_from_swap_cache`: remove, release the slot's cache bit, drop
    /// the cache's reference.
    pub fn delete_from_swap_cache(&mut self, pfn: Pfn) {
        let entry = self.folios.get(pfn).swap;
        self.delete_from_swap_cache_locked(pfn, 0);
        self.put_swap_folio(entry);
        self.folio_put(pfn);
    }

    /// `get_shadow_from_swap_cache`.
    pub fn get_shadow_from_swap_cache(&self, entry: SwpEntry) -> Option<u64> {
        let v = self.swap[swp_type(entry)].cache[swp_offset(entry) as usize];
        (v & 1 == 1).then_some(v)
    }

    /// `folio_free_swap`: drop the swap copy of a folio that no PTE needs:
    /// only if not under writeback and the slot's count is 0. The folio
    /// becomes dirty, its only copy now in RAM.
    pub fn folio_free_swap(&mut self, pfn: Pfn) -> bool {
        let f = self.folios.get(pfn);
        if !f.test(PG_SWAPCACHE) || f.test(PG_WRITEBACK) {
            return false;
        }
        let entry = f.swap;
        if self.swap[swp_type(entry)].swap_count(swp_offset(entry)) != 0 {
            return false;
        }
        self.delete_from_swap_cache(pfn);
        self.folios.get_mut(pfn).set(PG_DIRTY);
        true
    }

    /// `free_swap_and_cache` (zap of a swap PTE): drop the reference; if
    /// only the swap cache still holds the slot and its folio is unmapped
    /// or swap is full, free the cached folio's swap too.
    pub fn free_swap_and_cache(&mut self, entry: SwpEntry) {
        self.swap_free(entry);
        let (ty, off) = (swp_type(entry), swp_offset(entry));
        if self.swap[ty].swap_map[off as usize] == super::swapfile::SWAP_HAS_CACHE {
            if let Some(pfn) = self.swap_folio_of(entry) {
                let f = self.folios.get(pfn);
                if f.mapcount == 0 || self.vm_swap_full() {
                    self.folio_free_swap(pfn);
                }
            }
        }
    }
}

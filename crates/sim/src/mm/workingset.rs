//! mm/workingset.c: shadow entries and refault detection.
//!
//! A shadow packs (memcg id of the eviction lruvec, eviction age, the
//! folio's PG_workingset). `bucket_order` is 0 on 64-bit machines of any
//! size modelled here, so ages are kept whole.

use super::folio::*;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

/// Shadow encoding in a swap-cache slot: bit 0 set marks a value entry.
pub fn pack_shadow(memcg: u16, age: u64, workingset: bool) -> u64 {
    (age << 18) | (memcg as u64) << 2 | (workingset as u64) << 1 | 1
}

pub fn unpack_shadow(s: u64) -> (u16, u64, bool) {
    (((s >> 2) & 0xffff) as u16, s >> 18, (s >> 1) & 1 == 1)
}

impl Kernel {
    /// `workingset_age_nonresident`: the lruvec and all its ancestors.
    pub fn workingset_age_nonresident(&mut self, memcg: u16, nr: u64) {
        let mut cur = Some(memcg);
        while let Some(m) = cur {
            self.lruvecs[m as usize].nonresident_age += nr;
            cur = self.memcgs[m as usize].parent;
        }
    }

    /// The classic `workingset_eviction`: the shadow to leave behind for a folio
    /// reclaimed on behalf of `target` (the root for global reclaim).
    pub(crate) fn workingset_eviction_classic(&mut self, pfn: Pfn, target: u16) -> u64 {
        let f = self.folios.get(pfn);
        let (nr, ws) = (f.nr_pages() as u64, f.test(PG_WORKINGSET));
        let age = self.lruvecs[target as usize].nonresident_age;
        self.workingset_age_nonresident(target, nr);
        pack_shadow(target, age, ws)
    }

    /// The classic `workingset_refault`: a folio comes back where a shadow was. If it
    /// was evicted less than the workingset size ago, it starts active.
    pub(crate) fn workingset_refault_classic(&mut self, pfn: Pfn, shadow: u64) {
        let (evict_memcg, eviction, workingset) = unpack_shadow(shadow);
        if evict_memcg as usize >= self.memcgs.len() {
            return;
        }
        let f = *self.folios.get(pfn);
        let file = f.is_file_lru();
        let nr = f.nr_pages() as u64;
        let refault = self.lruvecs[evict_memcg as usize].nonresident_age;
        let distance = refault.wrapping_sub(eviction);
        let (rf, act, rest) = if file {
            (
                Vm::WorkingsetRefaultFile,
                Vm::WorkingsetActivateFile,
                Vm::WorkingsetRestoreFile,
            )
        } else {
            (
                Vm::WorkingsetRefaultAnon,
                Vm::WorkingsetActivateAnon,
                Vm::WorkingsetRestoreAnon,
            )
        };
        let (mrf, mact, mrest) = if file {
            (
                Mc::WorkingsetRefaultFile,
                Mc::WorkingsetActivateFile,
                Mc::WorkingsetRestoreFile,
            )
        } else {
            (
                Mc::WorkingsetRefaultAnon,
                Mc::WorkingsetActivateAnon,
                Mc::WorkingsetRestoreAnon,
            )
        };
        self.mod_node_page_state(rf, nr as i64);
        self.memcg_stat(f.memcg, mrf, nr as i64);
        self.mem_cgroup_flush_stats_ratelimited(evict_memcg);
        let mut ws_size = self.lruvec_page_state(evict_memcg, LRU_ACTIVE_FILE);
        if !file {
            ws_size += self.lruvec_page_state(evict_memcg, LRU_INACTIVE_FILE);
        }
        if self.mem_cgroup_get_nr_swap_pages(f.memcg) > 0 {
            ws_size += self.lruvec_page_state(evict_memcg, LRU_ACTIVE_ANON);
            if file {
                ws_size += self.lruvec_page_state(evict_memcg, LRU_INACTIVE_ANON);
            }
        }
        if distance > ws_size {
            return;
        }
        self.folios.get_mut(pfn).set(PG_ACTIVE);
        self.workingset_age_nonresident(f.memcg, nr);
        self.mod_node_page_state(act, nr as i64);
        self.memcg_stat(f.memcg, mact, nr as i64);
        if workingset {
            self.folios.get_mut(pfn).set(PG_WORKINGSET);
            self.lru_note_cost(f.memcg, file, nr);
            self.mod_node_page_state(rest, nr as i64);
            self.memcg_stat(f.memcg, mrest, nr as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_roundtrip() {
        let s = pack_shadow(7, 123_456_789, true);
        assert_eq!(s & 1, 1);
        assert_eq!(unpack_shadow(s), (7, 123_456_789, true));
        assert_eq!(unpack_shadow(pack_shadow(0, 0, false)), (0, 0, false));
    }
}

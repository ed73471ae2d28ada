//! mm/swap.c: the per-CPU lru_add batch, `lru_add_drain`, `lru_note_cost`.

use super::folio::*;
use crate::cost_model;
use crate::kernel::Kernel;

/// PAGEVEC_SIZE: folios a per-CPU batch holds before it is flushed, to
/// 6.1.
pub const PAGEVEC_SIZE: usize = 15;
/// PAGEVEC_SIZE from 6.12 (FOLIO_BATCH_SIZE in 7.3).
pub const PAGEVEC_SIZE_6_12: usize = 31;

impl Kernel {
    /// The preset's lru_add batch size.
    fn lru_add_batch(&self) -> usize {
        if self.release.lru_add_batch_31 {
            PAGEVEC_SIZE_6_12
        } else {
            PAGEVEC_SIZE
        }
    }

    /// `folio_add_lru`: queue in this CPU's lru_add batch (taking a
    /// reference); a full batch is flushed onto the LRU lists. Until then
    /// the folio is invisible to reclaim, as in the kernel.
    pub fn folio_add_lru(&mut self, pfn: Pfn) {
        self.charge_cost(cost_model::Fn::LruAdd, self.costs.lru_add);
        // A fault's folios start in the youngest generation. (The kernel
        // also excludes PF_MEMALLOC reclaimers; no reclaim path here adds
        // folios through folio_add_lru inside a fault.)
        if self.lru_gen_enabled()
            && self.fault.in_lru_fault()
            && !self.folios.get(pfn).test(PG_UNEVICTABLE)
        {
            self.folios.get_mut(pfn).set(PG_ACTIVE);
        }
        let f = self.folios.get_mut(pfn);
        debug_assert!(!f.test(PG_LRU | PG_LRU_BATCH));
        f.refcount += 1;
        f.set(PG_LRU_BATCH);
        let cpu = self.cur_cpu;
        self.cpus[cpu].lru_add.push(pfn);
        // Large folios never wait in a batch.
        if self.cpus[cpu].lru_add.len() >= self.lru_add_batch() || self.folios.get(pfn).order > 0 {
            self.lru_add_drain_cpu(cpu);
        }
    }

    /// `lru_add_drain_all`: every CPU's lru_add batch onto the LRU.
    pub(crate) fn lru_add_drain_all(&mut self) {
        for cpu in 0..self.cpus.len() {
            self.lru_add_drain_cpu(cpu);
        }
    }

    /// `lru_add_fn` over a CPU's batch, then drop the batch references.
    pub fn lru_add_drain_cpu(&mut self, cpu: usize) {
        let batch = std::mem::take(&mut self.cpus[cpu].lru_add);
        // folio_batch_move_lru: lru_lock taken again where the batch
        // moves on to another lruvec.
        let smp = self.cpus.len() > 1;
        let mut lock = None;
        for &pfn in &batch {
            if smp {
                let memcg = self.folios.get(pfn).memcg;
                self.spin_lock_switch(&mut lock, crate::cacheline::Line::LruLock(memcg));
            }
            let f = self.folios.get_mut(pfn);
            f.clear(PG_LRU_BATCH);
            f.set(PG_LRU);
            self.lruvec_add_folio(pfn);
            self.folio_put(pfn);
        }
        // lru_add_fn's work is priced in the fault's bundle (folio_add_lru
        // with the rest): the holds are empty, the drain only waits.
        self.spin_unlock(lock);
        let mut batch = batch;
        batch.clear();
        self.cpus[cpu].lru_add = batch;
    }

    /// The classic `folio_mark_accessed`: a first access sets PG_referenced; a second
    /// activates an inactive folio (`folio_activate`, applied at once here
    /// rather than through the per-CPU activate batch; a folio still in the
    /// lru_add batch is marked active for its drain) and ages the
    /// nonresident clock (`workingset_activation`). The events count pages:
    /// a large folio activated counts all of its.
    pub(crate) fn folio_mark_accessed_classic(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        if !f.test(PG_REFERENCED) {
            self.folios.get_mut(pfn).set(PG_REFERENCED);
            return;
        }
        if f.test(PG_UNEVICTABLE) || f.test(PG_ACTIVE) {
            return;
        }
        let nr = f.nr_pages() as i64;
        if f.test(PG_LRU) {
            self.lruvec_del_folio(pfn);
            self.folios.get_mut(pfn).set(PG_ACTIVE);
            self.lruvec_add_folio(pfn);
            self.vm.add(crate::vmstat::Vm::Pgactivate, nr);
            self.memcg_stat(f.memcg, crate::vmstat::Mc::Pgactivate, nr);
        } else {
            self.folios.get_mut(pfn).set(PG_ACTIVE);
        }
        self.folios.get_mut(pfn).clear(PG_REFERENCED);
        self.workingset_age_nonresident(f.memcg, nr as u64);
    }

    /// `folio_activate` → `folio_activate_fn`: an inactive folio on the
    /// LRU to the active list (under the multi-gen LRU, the youngest
    /// generation). Applied at once rather than through the per-CPU
    /// activate batch, as folio_mark_accessed does here.
    pub fn folio_activate(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        if !f.test(PG_LRU) || f.test(PG_ACTIVE) || f.test(PG_UNEVICTABLE) {
            return;
        }
        let nr = f.nr_pages() as i64;
        self.lruvec_del_folio(pfn);
        self.folios.get_mut(pfn).set(PG_ACTIVE);
        self.lruvec_add_folio(pfn);
        self.vm.add(crate::vmstat::Vm::Pgactivate, nr);
        self.memcg_stat(f.memcg, crate::vmstat::Mc::Pgactivate, nr);
    }

    /// `lru_add_drain`: the local CPU's batches.
    pub fn lru_add_drain(&mut self) {
        self.lru_add_drain_cpu(self.cur_cpu);
    }

    /// `lru_note_cost`: charge reclaim cost to a type, on the lruvec and
    /// every ancestor, halving both when they outgrow a quarter of the LRU.
    pub fn lru_note_cost(&mut self, memcg: u16, file: bool, nr_pages: u64) {
        let mut cur = Some(memcg);
        while let Some(m) = cur {
            let lrusize: u64 = (0..4).map(|l| self.lruvec_page_state(m, l)).sum();
            let lv = &mut self.lruvecs[m as usize];
            if file {
                lv.file_cost += nr_pages;
            } else {
                lv.anon_cost += nr_pages;
            }
            if lv.file_cost + lv.anon_cost > lrusize / 4 {
                lv.file_cost /= 2;
                lv.anon_cost /= 2;
            }
            cur = self.memcgs[m as usize].parent;
        }
    }

    /// `lruvec_page_state` for an LRU size: the memcg's hierarchical count
    /// (for the root, the whole node). Simplification: the kernel reads
    /// rstat-flushed values that may lag by up to 2 s or 64×CPUs updates;
    /// we read exact ones.
    pub fn lruvec_page_state(&self, memcg: u16, lru: u8) -> u64 {
        const NODE: [crate::vmstat::Vm; 5] = [
            crate::vmstat::Vm::NrInactiveAnon,
            crate::vmstat::Vm::NrActiveAnon,
            crate::vmstat::Vm::NrInactiveFile,
            crate::vmstat::Vm::NrActiveFile,
            crate::vmstat::Vm::NrUnevictable,
        ];
        if memcg == crate::mm::memcontrol::ROOT_MEMCG {
            return self.vm.get(NODE[lru as usize]) as u64;
        }
        if !self.memcgs[memcg as usize].has_children {
            return self.lruvecs[memcg as usize].size(lru);
        }
        (0..self.memcgs.len())
            .filter(|&i| self.is_descendant(i as u16, memcg))
            .map(|i| self.lruvecs[i].size(lru))
            .sum()
    }
}

//! mm/swap.c: the per-CPU lru_add batch, `lru_add_drain`, `lru_note_cost`.

use super::folio::*;
use crate::cost_model;
use crate::kernel::Kernel;

/// `release_pages`' hold of an lruvec's lock across the pages a TLB
/// gather frees (mm/swap.c): kept while consecutive freed folios belong to
/// one lruvec, dropped after SWAP_CLUSTER_MAX pages of the batch and at a
/// large folio (whose `__folio_put_large` takes the lock itself); the
/// gather's flush ends it. A folio freed outside a gather takes the lock
/// alone (`__page_cache_release`). The kernel frees the batch after the
/// flush; mmsim drops the gather's reference at the PTE, which no one
/// reads in between. Followed only with more than one CPU.
#[derive(Debug, Default)]
pub struct ReleaseBatch {
    /// A gathered page's reference is being dropped (`tlb_folio_put`).
    in_batch: bool,
    /// The lruvec (memcg) whose lock `release_pages` holds.
    held: Option<u16>,
    /// Pages of the batch since the lock was taken.
    lock_batch: u64,
}

/// PAGEVEC_SIZE: folios a per-CPU batch holds before it is flushed, to
/// 6.1.
pub const PAGEVEC_SIZE: usize = 15;
/// PAGEVEC_SIZE from 6.12 (FOLIO_BATCH_SIZE in 7.3).
pub const PAGEVEC_SIZE_6_12: usize = 31;

impl Kernel {
    /// The TLB gather's reference on a zapped page dropped: by
    /// `release_pages`, after the flush (`ReleaseBatch`).
    #[inline]
    pub fn tlb_folio_put(&mut self, pfn: Pfn) {
        if self.cpus.len() == 1 {
            return self.folio_put(pfn);
        }
        self.release_batch.in_batch = true;
        self.folio_put(pfn);
        self.release_batch.in_batch = false;
    }

    /// `tlb_folio_put` of `n` references of one large folio (a zap batch).
    pub fn tlb_folio_put_refs(&mut self, pfn: Pfn, n: u32) {
        self.release_batch.in_batch = self.cpus.len() > 1;
        self.folio_put_refs(pfn, n);
        self.release_batch.in_batch = false;
    }

    /// `release_pages`' loop reaching one more page of the gather: after
    /// SWAP_CLUSTER_MAX pages the held lock is dropped.
    #[inline]
    pub fn release_pages_next(&mut self) {
        let r = &mut self.release_batch;
        if r.held.is_some() {
            r.lock_batch += 1;
            if r.lock_batch == super::vmscan::SWAP_CLUSTER_MAX {
                r.held = None;
            }
        }
    }

    /// `release_pages` is done: the gather's flush freed its batch.
    #[inline]
    pub fn release_pages_end(&mut self) {
        self.release_batch.held = None;
    }

    /// The lruvec lock a freed LRU folio's deletion takes (more than one
    /// CPU): `release_pages`' relock, kept for the gather's next folio of
    /// the same lruvec, or `__page_cache_release`'s, taken alone. The
    /// deletion's work is priced in the free's bundle, so the hold is
    /// empty: the lock's line comes over and other CPUs' holds (reclaim's
    /// isolation and putback) are waited out.
    #[cold]
    #[inline(never)]
    pub fn lru_lock_for_free(&mut self, memcg: u16, order: u8) {
        let r = &mut self.release_batch;
        let f = match (r.in_batch, order) {
            (true, 0) if r.held == Some(memcg) => return,
            (true, 0) => {
                r.held = Some(memcg);
                r.lock_batch = 0;
                cost_model::Fn::ReleasePages
            }
            // __folio_put_large: release_pages drops its lock first.
            (true, _) => {
                r.held = None;
                cost_model::Fn::PageCacheRelease
            }
            (false, _) => cost_model::Fn::PageCacheRelease,
        };
        let line = crate::cacheline::Line::LruLock(memcg);
        self.traced(f, |k| k.spin_lock_empty(line));
    }

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
    /// (for the root, the whole node) as the last rstat flush left it
    /// (mm/memcg_rstat.rs); exact where the release has no such lag.
    pub fn lruvec_page_state(&self, memcg: u16, lru: u8) -> u64 {
        if self.rstat.lags() {
            let item = crate::mm::lruvec::LRU_MC[lru as usize];
            return self.rstat.state[memcg as usize].get(item).max(0) as u64;
        }
        if memcg == crate::mm::memcontrol::ROOT_MEMCG {
            let node = crate::mm::lruvec::LRU_VM[lru as usize].0;
            return self.vm.get(node) as u64;
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

#[cfg(test)]
mod tests {
    use crate::cacheline::Line;
    use crate::kernel::{test_at as at, test_kernel as kernel, Kernel};

    const HANDOFF: u64 = 100;

    /// CPU 1 writes memcg 1's lru_lock line at `t`.
    fn other_cpu_takes_it(k: &mut Kernel, t: u64) {
        at(k, 1, t);
        k.spin_lock_empty(Line::LruLock(1));
    }

    /// CPU 0 frees an order-`order` LRU folio of memcg 1 at `t` as the
    /// gather's page (`in_batch`) or alone: the time its lock took.
    fn free_at(k: &mut Kernel, t: u64, in_batch: bool, order: u8) -> u64 {
        at(k, 0, t);
        k.release_pages_next();
        k.release_batch.in_batch = in_batch;
        k.lru_lock_for_free(1, order);
        k.release_batch.in_batch = false;
        k.now() - t
    }

    #[test]
    fn release_pages_keeps_its_lruvec_lock_for_a_cluster_of_pages() {
        let mut k = kernel(2, "6.1");
        k.costs.lock_handoff = HANDOFF;
        other_cpu_takes_it(&mut k, 0);
        assert_eq!(free_at(&mut k, 1_000, true, 0), HANDOFF, "taken");
        // Held: the other CPU's write in between moves nothing here.
        other_cpu_takes_it(&mut k, 1_200);
        assert_eq!(free_at(&mut k, 1_300, true, 0), 0, "kept");
        // The 32nd page since it was taken drops it; the next relocks.
        for p in 2..super::super::vmscan::SWAP_CLUSTER_MAX {
            assert_eq!(free_at(&mut k, 1_300 + p, true, 0), 0, "page {p}");
        }
        assert_eq!(free_at(&mut k, 1_400, true, 0), HANDOFF, "relocked");
        // A large folio takes it alone and drops release_pages' hold.
        other_cpu_takes_it(&mut k, 1_500);
        assert_eq!(free_at(&mut k, 1_600, true, 2), HANDOFF);
        other_cpu_takes_it(&mut k, 1_700);
        assert_eq!(free_at(&mut k, 1_800, true, 0), HANDOFF);
        // The gather's flush ends release_pages: the next batch relocks.
        k.release_pages_end();
        other_cpu_takes_it(&mut k, 1_900);
        assert_eq!(free_at(&mut k, 2_000, true, 0), HANDOFF);
    }

    #[test]
    fn a_folio_freed_alone_takes_the_lock_each_time() {
        let mut k = kernel(2, "6.1");
        k.costs.lock_handoff = HANDOFF;
        for t in [0, 1_000, 2_000] {
            other_cpu_takes_it(&mut k, t);
            assert_eq!(free_at(&mut k, t + 500, false, 0), HANDOFF, "at {t}");
        }
    }
}

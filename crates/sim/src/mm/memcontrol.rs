//! Memory cgroups (v2): page counters, charging with the per-CPU stock,
//! memory.max reclaim in the charging task, memory.high reclaim and
//! throttling on return to user space, swap accounting.

use super::oom_kill::{Constraint, MemcgEvent, Oom};
use super::swapfile::{swp_offset, swp_type, SwpEntry};
use crate::kernel::Kernel;
use crate::vmstat::{Mc, MemcgStat};
use crate::SimError;

/// MEMCG_CHARGE_BATCH: pages pre-charged into a CPU's stock at a time.
pub const MEMCG_CHARGE_BATCH: u64 = 64;
/// MAX_RECLAIM_RETRIES.
pub const MAX_RECLAIM_RETRIES: u32 = 16;
/// CONFIG_HZ of Debian's 6.1 kernel.
pub const HZ: u64 = 250;
const MEMCG_DELAY_PRECISION_SHIFT: u32 = 20;
const MEMCG_DELAY_SCALING_SHIFT: u32 = 14;
const MEMCG_MAX_HIGH_DELAY_JIFFIES: u64 = 2 * HZ;

pub const ROOT_MEMCG: u16 = 0;

#[derive(Clone, Copy, Default, Debug)]
pub struct PageCounter {
    pub usage: u64,
    /// None = "max".
    pub max: Option<u64>,
    pub high: Option<u64>,
    /// Highest usage seen (memory.peak).
    pub peak: u64,
    /// memory.min and memory.low (u64::MAX: "max"), and the effective
    /// protection reclaim last computed (`emin`, `elow`).
    pub min: u64,
    pub low: u64,
    pub emin: u64,
    pub elow: u64,
}

#[derive(Clone, Copy, Default, Debug)]
pub struct MemcgEvents {
    pub low: u64,
    pub high: u64,
    pub max: u64,
    pub oom: u64,
    pub oom_kill: u64,
    pub oom_group_kill: u64,
    /// memory.swap.events: a swap charge refused by memory.swap.max, and
    /// every folio_alloc_swap that gave the memcg no slot (either way).
    pub swap_max: u64,
    pub swap_fail: u64,
}

pub struct Memcg {
    pub name: String,
    pub parent: Option<u16>,
    /// Whether any memcg names this one as its parent (hierarchical sums
    /// then need a walk).
    pub has_children: bool,
    pub memory: PageCounter,
    pub swap: PageCounter,
    pub stat: MemcgStat,
    pub events: MemcgEvents,
    /// memory.oom.group.
    pub oom_group: bool,
    /// `objcg->nr_charged_bytes`: bytes left over when a CPU's object
    /// stock moved to another objcg, there for the next stock to take.
    pub nr_charged_bytes: u32,
    /// memory.zswap.max in pages (None: "max").
    pub zswap_max: Option<u64>,
    /// memory.zswap.writeback (6.8+).
    pub zswap_writeback: bool,
}

impl Memcg {
    pub fn new(name: &str, parent: Option<u16>) -> Self {
        Memcg {
            name: name.to_string(),
            parent,
            has_children: false,
            memory: PageCounter::default(),
            swap: PageCounter::default(),
            stat: MemcgStat::default(),
            events: MemcgEvents::default(),
            oom_group: false,
            nr_charged_bytes: 0,
            zswap_max: None,
            zswap_writeback: true,
        }
    }
}

/// A CPU's `memcg_stock_pcp`: pages charged in advance to one memcg.
#[derive(Clone, Copy, Default)]
pub struct MemcgStock {
    pub cached: Option<u16>,
    pub nr_pages: u64,
}

/// The byte half of a CPU's `memcg_stock_pcp`: bytes charged in advance
/// to one memcg's objcg (`cached_objcg`, `nr_bytes`). Simplification:
/// only zswap charges bytes here; the slab objects the kernel also
/// charges through it (`__GFP_ACCOUNT`) are not modelled, so the stock
/// changes hands only between zswap's memcgs.
#[derive(Clone, Copy, Default)]
pub struct ObjStock {
    pub cached: Option<u16>,
    pub nr_bytes: u32,
}

/// `mem_cgroup_uncharge_list`, and when the other CPUs see it.
///
/// Reclaim frees the folios of one `shrink_folio_list` pass together at
/// its end (`mem_cgroup_uncharge_list`, then `free_unref_page_list`): the
/// memcg's page counter drops only then. A task on another CPU that
/// charges while the pass is still running finds the memcg full and
/// reclaims too, as concurrent reclaimers in one memcg do on the real
/// kernel. The simulator applies the state changes of a slice in the order
/// the slices run, not in time order, so each uncharge is kept here with
/// the pass's start and end, and a charge or margin test from a CPU whose
/// clock is inside the pass still counts the pages (`unseen`). A clock
/// before the pass's start sees its end: the slices that ran the pass ran
/// its charges before and after it too, so only a pass in progress can be
/// told apart (a clock far behind, as a forked child's while its parent
/// ends its slice, would otherwise see the uncharges of many passes hidden
/// and none of the charges between them).
#[derive(Default)]
pub struct UnchargeList {
    /// Inside a `shrink_folio_list` pass since this time: uncharges wait
    /// for its end.
    gathering: Option<u64>,
    /// The pass's uncharges so far: (memcg, pages).
    /// (memcg, pages, folios): a run of one memcg's folios is one
    /// `uncharge_batch`.
    gathered: Vec<(u16, u64, u64)>,
    /// Done uncharges, one per page-counter level, not yet visible to a
    /// clock before their time. Empty on one CPU: every later observer's
    /// clock is past the pass's end there.
    in_flight: Vec<InFlight>,
}

struct InFlight {
    memcg: u16,
    nr: u64,
    /// The pass's start and end.
    from: u64,
    at: u64,
}

impl UnchargeList {
    /// Pages of `memcg`'s counter that a clock at `now` still sees charged.
    fn unseen(&self, memcg: u16, now: u64) -> u64 {
        self.in_flight
            .iter()
            .filter(|u| u.memcg == memcg && u.from <= now && now < u.at)
            .map(|u| u.nr)
            .sum()
    }

    /// Forgets the uncharges every clock has passed: the scheduler's
    /// earliest ready entity starts at `now`.
    pub fn retire(&mut self, now: u64) {
        if !self.in_flight.is_empty() {
            self.in_flight.retain(|u| u.at > now);
        }
    }
}

/// Outcome of a charge.
#[derive(Debug, PartialEq, Eq)]
pub enum Charge {
    Ok,
    /// memory.max could not be met even after reclaim: the memcg OOM path.
    Oom,
}

fn calculate_overage(usage: u64, high: u64) -> u64 {
    if usage <= high {
        return 0;
    }
    let high = high.max(1);
    ((usage - high) << MEMCG_DELAY_PRECISION_SHIFT) / high
}

fn calculate_high_delay(nr_pages: u64, max_overage: u64) -> u64 {
    if max_overage == 0 {
        return 0;
    }
    let mut penalty = max_overage.saturating_mul(max_overage).saturating_mul(HZ);
    penalty >>= MEMCG_DELAY_PRECISION_SHIFT;
    penalty >>= MEMCG_DELAY_SCALING_SHIFT;
    penalty * nr_pages / MEMCG_CHARGE_BATCH
}

impl Kernel {
    pub fn is_root(&self, memcg: u16) -> bool {
        memcg == ROOT_MEMCG
    }

    /// The memcg and its ancestors, excluding the root.
    pub(super) fn ancestors(&self, memcg: u16) -> impl Iterator<Item = u16> + '_ {
        let mut cur = Some(memcg);
        std::iter::from_fn(move || {
            let m = cur?;
            if m == ROOT_MEMCG {
                return None;
            }
            cur = self.memcgs[m as usize].parent;
            Some(m)
        })
    }

    /// `page_counter_try_charge` on memory: all levels or none. Returns the
    /// memcg whose limit refused.
    fn page_counter_try_charge(&mut self, memcg: u16, nr: u64) -> Result<(), u16> {
        let mut cur = memcg;
        while cur != ROOT_MEMCG {
            let c = &self.memcgs[cur as usize].memory;
            if c.max.is_some_and(|max| self.usage_seen(cur) + nr > max) {
                return Err(cur);
            }
            cur = self.memcgs[cur as usize].parent.unwrap_or(ROOT_MEMCG);
        }
        self.page_counter_charge(memcg, nr);
        Ok(())
    }

    /// A memcg's memory usage as the current CPU sees it now: with the
    /// uncharges of another CPU's reclaim pass still running.
    fn usage_seen(&self, memcg: u16) -> u64 {
        let c = &self.memcgs[memcg as usize].memory;
        if self.uncharge_list.in_flight.is_empty() {
            return c.usage;
        }
        c.usage + self.uncharge_list.unseen(memcg, self.now())
    }

    /// Start of a `shrink_folio_list` pass: its folios' uncharges wait
    /// for its end.
    pub(crate) fn mem_cgroup_uncharge_list_begin(&mut self) {
        debug_assert!(self.uncharge_list.gathering.is_none());
        self.uncharge_list.gathering = Some(self.now());
    }

    /// End of the pass: `mem_cgroup_uncharge_list`, seen by other CPUs
    /// from now on.
    pub(crate) fn mem_cgroup_uncharge_list_end(&mut self) {
        let from = self.uncharge_list.gathering.take().unwrap_or(0);
        let now = self.now();
        let shared = self.cpus.len() > 1;
        let mut gathered = std::mem::take(&mut self.uncharge_list.gathered);
        for &(memcg, nr, folios) in &gathered {
            self.page_counter_uncharge(memcg, nr);
            // uncharge_batch's PGPGOUT, one per folio.
            self.memcg_rstat_updated(memcg, folios as i64);
            let mut level = Some(memcg).filter(|_| shared);
            while let Some(m) = level.filter(|&m| m != ROOT_MEMCG) {
                self.uncharge_list.in_flight.push(InFlight {
                    memcg: m,
                    nr,
                    from,
                    at: now,
                });
                level = self.memcgs[m as usize].parent;
            }
        }
        gathered.clear();
        self.uncharge_list.gathered = gathered;
    }

    /// The atomic add to each level's usage below the root: its cache
    /// line, shared by every CPU that charges or uncharges the memcg.
    #[inline(never)]
    fn page_counter_lines(&mut self, memcg: u16) {
        use crate::cacheline::Line;
        let ns = self.costs.cacheline_transfer;
        let mut cur = Some(memcg);
        while let Some(m) = cur.filter(|&m| m != ROOT_MEMCG) {
            self.write_line(
                Line::MemcgCounter(m),
                crate::cost_model::Fn::MemcgCharge,
                ns,
            );
            cur = self.memcgs[m as usize].parent;
        }
    }

    #[inline]
    pub fn page_counter_uncharge(&mut self, memcg: u16, nr: u64) {
        let mut cur = Some(memcg);
        while let Some(m) = cur {
            if m == ROOT_MEMCG {
                break;
            }
            let c = &mut self.memcgs[m as usize].memory;
            debug_assert!(c.usage >= nr, "memcg {m} usage underflow");
            c.usage -= nr;
            cur = self.memcgs[m as usize].parent;
        }
        if self.cpus.len() > 1 {
            self.page_counter_lines(memcg);
        }
    }

    fn consume_stock(&mut self, memcg: u16, nr: u64) -> bool {
        if nr > MEMCG_CHARGE_BATCH {
            return false;
        }
        let stock = &mut self.cpus[self.cur_cpu].stock;
        if stock.cached == Some(memcg) && stock.nr_pages >= nr {
            stock.nr_pages -= nr;
            return true;
        }
        false
    }

    fn drain_stock(&mut self, cpu: usize) {
        let stock = self.cpus[cpu].stock;
        if let Some(old) = stock.cached {
            if stock.nr_pages > 0 {
                self.page_counter_uncharge(old, stock.nr_pages);
            }
        }
        self.cpus[cpu].stock = MemcgStock::default();
    }

    fn refill_stock(&mut self, memcg: u16, nr: u64) {
        let cpu = self.cur_cpu;
        if self.cpus[cpu].stock.cached != Some(memcg) {
            self.drain_stock(cpu);
            self.cpus[cpu].stock.cached = Some(memcg);
        }
        self.cpus[cpu].stock.nr_pages += nr;
        if self.cpus[cpu].stock.nr_pages > MEMCG_CHARGE_BATCH {
            self.drain_stock(cpu);
        }
    }

    /// `obj_cgroup_charge` of `size` bytes to `memcg`'s objcg from the
    /// current CPU's stock, else whole pages (`obj_cgroup_charge_pages`,
    /// forced past the limit: zswap charges in reclaim, PF_MEMALLOC)
    /// with the rest of the last page left in the stock.
    pub(crate) fn obj_cgroup_charge(&mut self, memcg: u16, size: u32) {
        let stock = &mut self.cpus[self.cur_cpu].obj_stock;
        if stock.cached == Some(memcg) && stock.nr_bytes >= size {
            stock.nr_bytes -= size;
            return;
        }
        let nr_pages = size.div_ceil(4096) as u64;
        self.try_charge_memalloc(memcg, nr_pages);
        if !size.is_multiple_of(4096) {
            self.refill_obj_stock(memcg, 4096 - size % 4096, false);
        }
    }

    /// `obj_cgroup_uncharge`: the bytes go back to the stock.
    pub(crate) fn obj_cgroup_uncharge(&mut self, memcg: u16, size: u32) {
        self.refill_obj_stock(memcg, size, true);
    }

    /// `refill_obj_stock`: bytes into the current CPU's stock, taking it
    /// over from another objcg (`drain_obj_stock`); past a page, whole
    /// pages are uncharged when `allow_uncharge` (or the stock changed
    /// hands).
    fn refill_obj_stock(&mut self, memcg: u16, nr_bytes: u32, mut allow_uncharge: bool) {
        let cpu = self.cur_cpu;
        if self.cpus[cpu].obj_stock.cached != Some(memcg) {
            self.drain_obj_stock(cpu);
            let left = std::mem::take(&mut self.memcgs[memcg as usize].nr_charged_bytes);
            self.cpus[cpu].obj_stock = ObjStock {
                cached: Some(memcg),
                nr_bytes: left,
            };
            allow_uncharge = true;
        }
        let stock = &mut self.cpus[cpu].obj_stock;
        stock.nr_bytes += nr_bytes;
        let mut nr_pages = 0;
        if allow_uncharge && stock.nr_bytes > 4096 {
            nr_pages = stock.nr_bytes / 4096;
            stock.nr_bytes %= 4096;
        }
        if nr_pages > 0 {
            // obj_cgroup_uncharge_pages: into the page stock.
            self.refill_stock(memcg, nr_pages as u64);
        }
    }

    /// `drain_obj_stock`: the whole pages of a CPU's byte stock are
    /// uncharged, the rest left with its objcg.
    fn drain_obj_stock(&mut self, cpu: usize) {
        let ObjStock { cached, nr_bytes } = std::mem::take(&mut self.cpus[cpu].obj_stock);
        let Some(old) = cached else { return };
        let (pages, rest) = (nr_bytes / 4096, nr_bytes % 4096);
        if pages > 0 {
            // obj_cgroup_uncharge_pages → refill_stock on this CPU.
            let cur = std::mem::replace(&mut self.cur_cpu, cpu);
            self.refill_stock(old, pages as u64);
            self.cur_cpu = cur;
        }
        self.memcgs[old as usize].nr_charged_bytes += rest;
    }

    /// `try_charge_memcg` from a PF_MEMALLOC context: the stock or the
    /// page counter (a batch, then the pages alone), else charged past the
    /// limit (`force`: "prevent unbounded recursion when reclaim
    /// operations need to allocate memory").
    pub(crate) fn try_charge_memalloc(&mut self, memcg: u16, nr: u64) {
        self.charge_cost(crate::cost_model::Fn::MemcgCharge, self.costs.memcg_charge);
        if self.is_root(memcg) || self.consume_stock(memcg, nr) {
            return;
        }
        let batch = MEMCG_CHARGE_BATCH.max(nr);
        for b in [batch, nr] {
            if self.page_counter_try_charge(memcg, b).is_ok() {
                self.done_restock(memcg, nr, b);
                return;
            }
        }
        self.page_counter_charge(memcg, nr);
    }

    /// `page_counter_charge`: every level, limits or not.
    #[inline]
    fn page_counter_charge(&mut self, memcg: u16, nr: u64) {
        let mut cur = memcg;
        while cur != ROOT_MEMCG {
            let c = &mut self.memcgs[cur as usize].memory;
            c.usage += nr;
            c.peak = c.peak.max(c.usage);
            cur = self.memcgs[cur as usize].parent.unwrap_or(ROOT_MEMCG);
        }
        if self.cpus.len() > 1 {
            self.page_counter_lines(memcg);
        }
        self.charge_cost(crate::cost_model::Fn::MemcgCharge, self.costs.page_counter);
    }

    /// `drain_all_stock`: every CPU's non-empty stock of a memcg in
    /// `root`'s subtree; the local one now, the others by a work item on
    /// their CPU (`schedule_work_on`), i.e. after this charge's retry.
    fn drain_all_stock(&mut self, root: u16) {
        for cpu in 0..self.cpus.len() {
            let stock = self.cpus[cpu].stock;
            let pages = stock
                .cached
                .is_some_and(|m| stock.nr_pages > 0 && self.is_descendant(m, root));
            // obj_stock_flush_required
            let objcg = self.cpus[cpu].obj_stock.cached;
            if !pages && !objcg.is_some_and(|m| self.is_descendant(m, root)) {
                continue;
            }
            if cpu == self.cur_cpu {
                self.drain_local_stock(cpu);
            } else {
                self.cpus[cpu].stock_drain_pending = true;
                self.stock_drains_pending = true;
            }
        }
    }

    /// Runs every CPU's queued stock drain (`drain_local_stock` in a
    /// kworker), CPU by CPU; nothing to look at while none is queued.
    pub fn run_pending_stock_drains(&mut self) {
        if !std::mem::take(&mut self.stock_drains_pending) {
            return;
        }
        for cpu in 0..self.cpus.len() {
            if std::mem::take(&mut self.cpus[cpu].stock_drain_pending) {
                self.drain_local_stock(cpu);
            }
        }
    }

    /// `drain_local_stock`: the byte stock, then the page stock.
    fn drain_local_stock(&mut self, cpu: usize) {
        self.drain_obj_stock(cpu);
        self.drain_stock(cpu);
    }

    /// `memcg_memory_event`: counted in the memcg and, as cgroup v2 does
    /// without memory_localevents, in each ancestor below the root.
    pub fn memcg_memory_event(&mut self, memcg: u16, ev: MemcgEvent) {
        let mut cur = memcg;
        while cur != ROOT_MEMCG {
            let e = &mut self.memcgs[cur as usize].events;
            *match ev {
                MemcgEvent::Low => &mut e.low,
                MemcgEvent::High => &mut e.high,
                MemcgEvent::Max => &mut e.max,
                MemcgEvent::Oom => &mut e.oom,
                MemcgEvent::OomKill => &mut e.oom_kill,
                MemcgEvent::OomGroupKill => &mut e.oom_group_kill,
                MemcgEvent::SwapMax => &mut e.swap_max,
                MemcgEvent::SwapFail => &mut e.swap_fail,
            } += 1;
            cur = self.memcgs[cur as usize].parent.unwrap_or(ROOT_MEMCG);
        }
    }

    pub fn is_descendant(&self, memcg: u16, root: u16) -> bool {
        let mut cur = Some(memcg);
        while let Some(m) = cur {
            if m == root {
                return true;
            }
            cur = self.memcgs[m as usize].parent;
        }
        false
    }

    /// The memcg of `[cgroup.NAME]`.
    pub fn memcg_by_name(&self, name: &str) -> Option<u16> {
        self.memcgs
            .iter()
            .position(|m| m.name == name)
            .map(|i| i as u16)
    }

    /// `memory_max_write`: the new limit, then reclaim down to it, with
    /// MAX_RECLAIM_RETRIES reclaims that free nothing before the memcg's
    /// OOM killer runs, until the usage fits, nothing is left to kill or
    /// the writer itself is killed. The limit stays set either way.
    pub fn memory_max_write(&mut self, memcg: u16, max: Option<u64>) -> Result<(), SimError> {
        self.memcgs[memcg as usize].memory.max = max;
        let Some(max) = max else { return Ok(()) };
        let mut drained = false;
        let mut nr_reclaims = MAX_RECLAIM_RETRIES;
        loop {
            let usage = self.memcgs[memcg as usize].memory.usage;
            if usage <= max || self.current_is_dying() {
                return Ok(());
            }
            if !drained {
                self.drain_all_stock(memcg);
                drained = true;
                continue;
            }
            if nr_reclaims > 0 {
                let freed = self.traced(crate::cost_model::Fn::TryToFreeMemCgroupPages, |k| {
                    k.try_to_free_mem_cgroup_pages(memcg, usage - max)
                });
                if freed == 0 {
                    nr_reclaims -= 1;
                }
                continue;
            }
            self.memcg_memory_event(memcg, MemcgEvent::Oom);
            if self.mem_cgroup_out_of_memory(memcg, 1)? != Oom::Progress {
                return Ok(());
            }
        }
    }

    /// `mem_cgroup_calculate_protection`: a memcg's effective memory.min
    /// and memory.low for a reclaim of `target`'s subtree. mmsim's
    /// cgroups are the root's children, which take their own values (the
    /// kernel distributes a parent's protection among its children only
    /// below the top level, `effective_protection`). The target's own
    /// values and those of an empty memcg are left as they were: 6.1 then
    /// reads them stale (`mem_cgroup_below_min`), 6.3 and later ignore the
    /// target's (`mem_cgroup_unprotected`), as 5.10 did.
    pub(crate) fn mem_cgroup_calculate_protection(&mut self, target: u16, memcg: u16) {
        if memcg == target || self.is_root(memcg) {
            return;
        }
        let m = &mut self.memcgs[memcg as usize];
        debug_assert!(m.parent == Some(ROOT_MEMCG));
        let c = &mut m.memory;
        if c.usage == 0 {
            return;
        }
        c.emin = c.min;
        c.elow = c.low;
    }

    /// Whether the memcg's memory.min protects all its usage.
    pub(crate) fn mem_cgroup_below_min(&self, target: u16, memcg: u16) -> bool {
        if self.mem_cgroup_unprotected(target, memcg) {
            return false;
        }
        let c = &self.memcgs[memcg as usize].memory;
        c.emin >= c.usage
    }

    /// Whether its memory.low does.
    pub(crate) fn mem_cgroup_below_low(&self, target: u16, memcg: u16) -> bool {
        if self.mem_cgroup_unprotected(target, memcg) {
            return false;
        }
        let c = &self.memcgs[memcg as usize].memory;
        c.elow >= c.usage
    }

    /// The root has no protection; nor, after 6.1, has the reclaim's
    /// target.
    fn mem_cgroup_unprotected(&self, target: u16, memcg: u16) -> bool {
        self.is_root(memcg) || (memcg == target && !self.release.memcg_protection_stale_target)
    }

    /// `mem_cgroup_protection`: the effective (min, low) get_scan_count
    /// scales a memcg's scan by; none for the reclaim's target.
    pub(crate) fn mem_cgroup_protection(&self, target: u16, memcg: u16) -> (u64, u64) {
        if target == memcg {
            return (0, 0);
        }
        let c = &self.memcgs[memcg as usize].memory;
        (c.emin, c.elow)
    }

    /// `memory_reclaim`: a write of `nr_to_reclaim` pages to memory.reclaim.
    /// Each round asks `try_to_free_mem_cgroup_pages` for what is left
    /// (6.12: a quarter of it), allowing MAX_RECLAIM_RETRIES rounds that
    /// reclaim nothing, the last after draining every CPU's lru_add batch;
    /// false when it gives up (the write fails with EAGAIN). Not a memory
    /// stall (no psi_memstall_enter on this path), and the proactive flag
    /// changes nothing mmsim models in 6.1 (vmpressure only).
    pub fn memory_reclaim(
        &mut self,
        memcg: u16,
        nr_to_reclaim: u64,
        swappiness: Option<u32>,
    ) -> bool {
        let mut nr_retries = MAX_RECLAIM_RETRIES;
        let mut nr_reclaimed = 0;
        while nr_reclaimed < nr_to_reclaim {
            let left = nr_to_reclaim - nr_reclaimed;
            let batch = if self.release.memory_reclaim_batches {
                left / 4
            } else {
                left
            };
            if nr_retries == 0 {
                self.lru_add_drain_all();
            }
            let reclaimed = self.traced(crate::cost_model::Fn::TryToFreeMemCgroupPages, |k| {
                k.try_to_free_mem_cgroup_pages_with(memcg, batch, swappiness)
            });
            if reclaimed == 0 {
                if nr_retries == 0 {
                    return false;
                }
                nr_retries -= 1;
            }
            nr_reclaimed += reclaimed;
        }
        true
    }

    /// `memory_high_write`: the new threshold, then reclaim down to it.
    /// The kernel tests its retries after each reclaim, so it gives up
    /// after MAX_RECLAIM_RETRIES + 1 reclaims that free nothing.
    pub fn memory_high_write(&mut self, memcg: u16, high: Option<u64>) {
        self.memcgs[memcg as usize].memory.high = high;
        if let Some(high) = high {
            self.reclaim_down_to(memcg, high, MAX_RECLAIM_RETRIES + 1);
        }
    }

    /// `memory_high_write`'s loop: drain the CPUs' stocks once, then
    /// reclaim until the usage is at most `target`, allowing `retries`
    /// reclaims that free nothing. Whether the usage got there.
    fn reclaim_down_to(&mut self, memcg: u16, target: u64, mut retries: u32) -> bool {
        let mut drained = false;
        loop {
            let usage = self.memcgs[memcg as usize].memory.usage;
            if usage <= target {
                return true;
            }
            if !drained {
                self.drain_all_stock(memcg);
                drained = true;
                continue;
            }
            if retries == 0 {
                return false;
            }
            let freed = self.traced(crate::cost_model::Fn::TryToFreeMemCgroupPages, |k| {
                k.try_to_free_mem_cgroup_pages(memcg, usage - target)
            });
            if freed == 0 {
                retries -= 1;
            }
        }
    }

    fn mem_cgroup_margin(&self, memcg: u16) -> u64 {
        let c = &self.memcgs[memcg as usize].memory;
        match c.max {
            None => u64::MAX,
            Some(max) => max.saturating_sub(self.usage_seen(memcg)),
        }
    }

    /// `try_charge_memcg` and the commit of a folio's charge: `nr` pages
    /// to `memcg` from the current task, reclaiming from the memcg over
    /// its limit as the kernel does; a charged folio counts PGPGIN
    /// (`mem_cgroup_charge_statistics`).
    pub fn try_charge(&mut self, memcg: u16, nr: u64) -> Charge {
        let c = self.try_charge_pages(memcg, nr);
        if c == Charge::Ok {
            self.mem_cgroup_charge_statistics(memcg);
        }
        c
    }

    /// A page table's kmem charge (`__memcg_kmem_charge_page`): the
    /// charge, and `memcg_account_kmem`'s update below the root (the root
    /// has no objcg: its page tables are charged to no memcg).
    pub fn try_charge_kmem(&mut self, memcg: u16, nr: u64) -> Charge {
        let c = self.try_charge_pages(memcg, nr);
        if c == Charge::Ok && !self.is_root(memcg) {
            self.memcg_rstat_updated(memcg, nr as i64);
        }
        c
    }

    /// `try_charge_memcg`.
    fn try_charge_pages(&mut self, memcg: u16, nr: u64) -> Charge {
        // A charge the stock covers is a leaf of the caller in the profile
        // (merged with the traced slow path of the same name).
        if !self.is_root(memcg) && self.consume_stock(memcg, nr) {
            self.charge_cost(crate::cost_model::Fn::MemcgCharge, self.costs.memcg_charge);
            return Charge::Ok;
        }
        self.traced(crate::cost_model::Fn::MemcgCharge, |k| {
            k.try_charge_memcg(memcg, nr, false)
        })
    }

    /// `try_charge_memcg` with __GFP_NORETRY (a THP's charge under defrag
    /// `always` without MADV_HUGEPAGE): one round of reclaim and a stock
    /// drain, then it fails.
    pub fn try_charge_noretry(&mut self, memcg: u16, nr: u64) -> Charge {
        let c = self.try_charge_noretry_pages(memcg, nr);
        if c == Charge::Ok {
            self.mem_cgroup_charge_statistics(memcg);
        }
        c
    }

    fn try_charge_noretry_pages(&mut self, memcg: u16, nr: u64) -> Charge {
        if !self.is_root(memcg) && self.consume_stock(memcg, nr) {
            self.charge_cost(crate::cost_model::Fn::MemcgCharge, self.costs.memcg_charge);
            return Charge::Ok;
        }
        self.traced(crate::cost_model::Fn::MemcgCharge, |k| {
            k.try_charge_memcg(memcg, nr, true)
        })
    }

    /// A THP or mTHP charge with the allocation's gfp (`vma_thp_gfp_mask`).
    pub fn try_charge_thp(
        &mut self,
        memcg: u16,
        nr: u64,
        mode: super::huge_anon::ThpCharge,
    ) -> Charge {
        match mode {
            super::huge_anon::ThpCharge::NoReclaim => self.try_charge_nowait(memcg, nr),
            super::huge_anon::ThpCharge::NoRetry => self.try_charge_noretry(memcg, nr),
            super::huge_anon::ThpCharge::Reclaim => self.try_charge(memcg, nr),
        }
    }

    /// `try_charge_memcg` for a gfp that cannot block: the stock or the
    /// page counter, else it fails at once (no reclaim, no max event).
    pub fn try_charge_nowait(&mut self, memcg: u16, nr: u64) -> Charge {
        let c = self.try_charge_nowait_pages(memcg, nr);
        if c == Charge::Ok {
            self.mem_cgroup_charge_statistics(memcg);
        }
        c
    }

    fn try_charge_nowait_pages(&mut self, memcg: u16, nr: u64) -> Charge {
        self.charge_cost(crate::cost_model::Fn::MemcgCharge, self.costs.memcg_charge);
        if self.is_root(memcg) || self.consume_stock(memcg, nr) {
            return Charge::Ok;
        }
        let batch = MEMCG_CHARGE_BATCH.max(nr);
        for b in [batch, nr] {
            if self.page_counter_try_charge(memcg, b).is_ok() {
                self.done_restock(memcg, nr, b);
                return Charge::Ok;
            }
        }
        Charge::Oom
    }

    fn try_charge_memcg(&mut self, memcg: u16, nr: u64, noretry: bool) -> Charge {
        self.charge_cost(crate::cost_model::Fn::MemcgCharge, self.costs.memcg_charge);
        if self.is_root(memcg) {
            return Charge::Ok;
        }
        let mut batch = MEMCG_CHARGE_BATCH.max(nr);
        let mut nr_retries = MAX_RECLAIM_RETRIES;
        let mut drained = false;
        let mut passed_oom = false;
        loop {
            if self.consume_stock(memcg, nr) {
                return Charge::Ok;
            }
            let over = match self.page_counter_try_charge(memcg, batch) {
                Ok(()) => {
                    self.done_restock(memcg, nr, batch);
                    return Charge::Ok;
                }
                Err(m) => m,
            };
            if batch > nr {
                batch = nr;
                continue;
            }
            self.memcg_memory_event(over, MemcgEvent::Max);
            let psi = self.psi_memstall_enter();
            let reclaimed = self.traced(crate::cost_model::Fn::TryToFreeMemCgroupPages, |k| {
                k.try_to_free_mem_cgroup_pages(over, nr)
            });
            self.psi_memstall_leave(psi);
            if self.mem_cgroup_margin(over) >= nr {
                continue;
            }
            if !drained {
                self.drain_all_stock(over);
                drained = true;
                continue;
            }
            if noretry {
                return Charge::Oom;
            }
            // PAGE_ALLOC_COSTLY_ORDER = 3: small charges retry on any progress.
            if reclaimed > 0 && nr <= 8 {
                continue;
            }
            if nr_retries > 0 {
                nr_retries -= 1;
                continue;
            }
            // Avoid an endless loop for a task the OOM killer chose.
            if passed_oom && self.current_is_dying() {
                return Charge::Oom;
            }
            match self.mem_cgroup_oom(over, nr) {
                Ok(Oom::Progress) => {
                    passed_oom = true;
                    nr_retries = MAX_RECLAIM_RETRIES;
                }
                // A victim has yet to exit: Linux goes on retrying; here
                // the charge fails and a fault sleeps until the victims
                // have run (oom_kill.rs).
                Ok(Oom::Waiting) => {
                    self.oom.set_waiting();
                    return Charge::Oom;
                }
                // No task may be killed.
                Ok(Oom::Nothing) => return Charge::Oom,
                Err(e) => {
                    self.unmodelled.get_or_insert(e.to_string());
                    return Charge::Oom;
                }
            }
        }
    }

    /// `mem_cgroup_oom`: above PAGE_ALLOC_COSTLY_ORDER (a THP's charge) it
    /// does nothing (no event: the caller falls back to small pages);
    /// else the OOM event and the memcg's OOM killer.
    fn mem_cgroup_oom(&mut self, memcg: u16, nr: u64) -> Result<Oom, SimError> {
        if nr > 8 {
            return Ok(Oom::Nothing);
        }
        self.memcg_memory_event(memcg, MemcgEvent::Oom);
        self.mem_cgroup_out_of_memory(memcg, nr)
    }

    /// `mem_cgroup_out_of_memory`: nothing to do if the margin already
    /// fits the charge (another task freed memory); a dying current task
    /// is let through; else `out_of_memory` within the memcg.
    fn mem_cgroup_out_of_memory(&mut self, memcg: u16, nr: u64) -> Result<Oom, SimError> {
        if self.mem_cgroup_margin(memcg) >= nr {
            return Ok(Oom::Progress);
        }
        self.out_of_memory(Constraint::Memcg(memcg))
    }

    /// After a successful page-counter charge: restock, and note pages
    /// charged above memory.high for `mem_cgroup_handle_over_high`.
    fn done_restock(&mut self, memcg: u16, nr: u64, batch: u64) {
        if batch > nr {
            self.refill_stock(memcg, batch - nr);
        }
        let over_high = self.ancestors(memcg).any(|m| {
            let c = &self.memcgs[m as usize].memory;
            c.high.is_some_and(|h| self.usage_seen(m) > h)
        });
        if over_high {
            self.current_task_over_high(batch);
        }
    }

    /// `mem_cgroup_handle_over_high`, run on return to user space: reclaim
    /// from every level above memory.high, then a throttling sleep that
    /// grows with the square of the overage. Returns the sleep in ns.
    pub fn mem_cgroup_handle_over_high(&mut self, memcg: u16, nr_pages: u64) -> u64 {
        if nr_pages == 0 {
            return 0;
        }
        let mut nr_retries = MAX_RECLAIM_RETRIES;
        let mut in_retry = false;
        loop {
            let reclaimed = self.reclaim_high(memcg, if in_retry { 32 } else { nr_pages });
            let max_overage = self
                .ancestors(memcg)
                .map(|m| {
                    let c = &self.memcgs[m as usize].memory;
                    c.high
                        .map_or(0, |h| calculate_overage(self.usage_seen(m), h))
                })
                .max()
                .unwrap_or(0);
            let penalty =
                calculate_high_delay(nr_pages, max_overage).min(MEMCG_MAX_HIGH_DELAY_JIFFIES);
            if penalty <= HZ / 100 {
                return 0;
            }
            if reclaimed > 0 || nr_retries > 0 {
                if reclaimed == 0 {
                    nr_retries -= 1;
                }
                in_retry = true;
                continue;
            }
            return penalty * (1_000_000_000 / HZ);
        }
    }

    fn reclaim_high(&mut self, memcg: u16, nr_pages: u64) -> u64 {
        let levels: Vec<u16> = self.ancestors(memcg).collect();
        let mut reclaimed = 0;
        for m in levels {
            let c = &self.memcgs[m as usize].memory;
            if c.high.is_none_or(|h| self.usage_seen(m) <= h) {
                continue;
            }
            self.memcg_memory_event(m, MemcgEvent::High);
            let psi = self.psi_memstall_enter();
            reclaimed += self.traced(crate::cost_model::Fn::TryToFreeMemCgroupPages, |k| {
                k.try_to_free_mem_cgroup_pages(m, nr_pages)
            });
            self.psi_memstall_leave(psi);
        }
        reclaimed
    }

    /// `mem_cgroup_uncharge` of a freed folio.
    #[inline]
    pub fn mem_cgroup_uncharge(&mut self, memcg: u16, nr: u64) {
        if self.is_root(memcg) {
            // The root's page counter is not charged; its PGPGOUT is.
            self.memcg_rstat_updated(memcg, 1);
            return;
        }
        if self.uncharge_list.gathering.is_none() {
            self.page_counter_uncharge(memcg, nr);
            self.memcg_rstat_updated(memcg, 1);
            return;
        }
        let list = &mut self.uncharge_list.gathered;
        match list.last_mut() {
            Some((m, n, f)) if *m == memcg => {
                *n += nr;
                *f += 1;
            }
            _ => list.push((memcg, nr, 1)),
        }
    }

    /// `__mem_cgroup_try_charge_swap` (v2), the end of every
    /// `folio_alloc_swap`: no slot found is a swap.events fail; slots the
    /// memcg's or an ancestor's memory.swap.max refuses are a max and a
    /// fail (both in the folio's memcg, as memcg_memory_event counts them)
    /// and go back (`put_swap_folio`). The root is never charged.
    #[inline]
    pub fn mem_cgroup_try_charge_swap(
        &mut self,
        memcg: u16,
        entry: Option<SwpEntry>,
        nr: u32,
    ) -> Option<SwpEntry> {
        let Some(entry) = entry else {
            self.memcg_memory_event(memcg, MemcgEvent::SwapFail);
            return None;
        };
        if !self.swap_counter_try_charge(memcg, nr as u64) {
            self.memcg_memory_event(memcg, MemcgEvent::SwapMax);
            self.memcg_memory_event(memcg, MemcgEvent::SwapFail);
            self.put_unused_swap(entry, nr);
            return None;
        }
        // swap_cgroup_record: a large run never crosses devices.
        let off = swp_offset(entry) as usize;
        self.swap[swp_type(entry)].cgroup[off..off + nr as usize].fill(memcg);
        // mod_memcg_state(MEMCG_SWAP): the root's too.
        self.memcg_rstat_updated(memcg, nr as i64);
        Some(entry)
    }

    /// `page_counter_try_charge` on swap: all levels below the root or
    /// none.
    fn swap_counter_try_charge(&mut self, memcg: u16, nr: u64) -> bool {
        let over = self.ancestors(memcg).any(|m| {
            let c = &self.memcgs[m as usize].swap;
            c.max.is_some_and(|max| c.usage + nr > max)
        });
        if !over {
            self.swap_counter_add(memcg, nr as i64);
        }
        !over
    }

    /// The swap counters of the memcg and its ancestors below the root,
    /// moved by `nr` pages (a charge, or an uncharge when negative).
    fn swap_counter_add(&mut self, memcg: u16, nr: i64) {
        let mut cur = Some(memcg);
        while let Some(m) = cur.filter(|&m| m != ROOT_MEMCG) {
            let c = &mut self.memcgs[m as usize].swap;
            debug_assert!(c.usage as i64 + nr >= 0, "swap counter underflow");
            c.usage = (c.usage as i64 + nr) as u64;
            cur = self.memcgs[m as usize].parent;
        }
    }

    /// `mem_cgroup_get_nr_swap_pages`: the free swap, less where the memcg
    /// or an ancestor has less room under its memory.swap.max (0 at
    /// least: callers ask "> 0" and "< MIN_LRU_BATCH").
    pub fn mem_cgroup_get_nr_swap_pages(&self, memcg: u16) -> u64 {
        let room = self.ancestors(memcg).filter_map(|m| {
            let c = &self.memcgs[m as usize].swap;
            c.max.map(|max| max as i64 - c.usage as i64)
        });
        room.fold(self.swapfile.nr_swap_pages(), i64::min).max(0) as u64
    }

    /// `mem_cgroup_swap_full`: swap is half full, globally
    /// (`vm_swap_full`) or in the memcg or an ancestor against its
    /// memory.swap.max (no memory.swap.high is modelled: "max").
    pub fn mem_cgroup_swap_full(&self, memcg: u16) -> bool {
        self.swapfile.vm_swap_full()
            || self.ancestors(memcg).any(|m| {
                let c = &self.memcgs[m as usize].swap;
                c.max.is_some_and(|max| c.usage * 2 >= max)
            })
    }

    pub fn mem_cgroup_uncharge_swap(&mut self, memcg: u16, nr: u64) {
        self.swap_counter_add(memcg, -(nr as i64));
        self.memcg_rstat_updated(memcg, nr as i64);
    }

    /// Adds to a memcg's own memory.stat (summed over the hierarchy when read).
    #[inline(always)]
    pub fn memcg_stat(&mut self, memcg: u16, item: Mc, n: i64) {
        self.memcgs[memcg as usize].stat.add(item, n);
        self.memcg_stat_updated(memcg, item, n);
    }

    /// memory.stat as the kernel prints it: the memcg's own and all its
    /// descendants' counts.
    pub fn memory_stat(&self, memcg: u16) -> MemcgStat {
        let mut s = MemcgStat::default();
        for (i, m) in self.memcgs.iter().enumerate() {
            if self.is_descendant(i as u16, memcg) {
                s.add_all(&m.stat);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overage_and_delay() {
        assert_eq!(calculate_overage(100, 100), 0);
        // 10% over: overage = 0.1 * 2^20.
        let o = calculate_overage(110, 100);
        assert_eq!(o, (10u64 << 20) / 100);
        // penalty = o² * HZ >> 34, scaled by nr_pages / 64.
        assert_eq!(calculate_high_delay(64, o), (o * o * HZ) >> 34);
        assert_eq!(calculate_high_delay(64, 0), 0);
    }
}

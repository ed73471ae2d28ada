//! 5.10's memcg statistics: per-CPU batches folded into atomics
//! (mm/memcontrol.c of Debian's 5.10.223: `__mod_memcg_state`,
//! `__mod_memcg_lruvec_state`, `__count_memcg_events`).
//!
//! Before rstat (5.15), an update adds to the updating CPU's own count of
//! the counter, and only when that count passes `MEMCG_CHARGE_BATCH` (32;
//! 32 pages' worth for a byte counter) is it added to the memcg's and
//! every ancestor's atomic counter (`atomic_long_add` per level; a node
//! item's lruvec copy is batched the same way into its own atomics),
//! which is what `memcg_page_state`, `lruvec_page_state` and memory.stat
//! read. So every counter a reader sees lags by up to 32 per CPU, and
//! stays so at the end of a run: nothing folds the remainders while the
//! memcg is online. There is no flush and no flush cost; the atomics'
//! lines move between the CPUs that pass their batches.
//!
//! The model keeps, per CPU × memcg × memory.stat item, the kernel's
//! per-CPU remainder, and the atomics in `MemcgRstat::state` (the same
//! hierarchical counters 6.1's flush leaves there, which the readers
//! read). memory.stat's pgscan and pgsteal are 5.10's sums of the
//! kswapd and direct events, each batched on its own.
//!
//! Simplifications: the run starts with every remainder 0 (boot's updates
//! are not the run's; a real machine's remainders at the start move what
//! memory.stat shows by at most 32 per CPU and counter); each atomic is
//! its own line (the kernel's arrays put eight to a line, whose false
//! sharing is not priced); the batched events the model does not report
//! (PGPGIN, PGPGOUT, the kmem and swap charges) are not batched here.

use crate::cacheline::Line;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, MemcgStat, NR_MC_ITEMS};

/// 5.10's `MEMCG_CHARGE_BATCH`.
const MEMCG_CHARGE_BATCH_5_10: i64 = 32;

/// A node item (`enum node_stat_item`): 5.10 also batches it into the
/// memcg's lruvec atomics (`__mod_memcg_lruvec_state`). The rest of the
/// state items (page tables, zswap) and the events are memcg-only.
fn is_node_item(item: Mc) -> bool {
    (item as usize) < Mc::Pgscan as usize
        && !matches!(item, Mc::Pagetables | Mc::Zswap | Mc::Zswapped)
}

impl Kernel {
    /// 5.10's batches: no remainder yet on any CPU.
    pub(crate) fn memcg_batch_init(&mut self) {
        let n = self.memcgs.len() * self.cpus.len() * NR_MC_ITEMS;
        self.rstat.residue = vec![0; n];
        self.rstat.batch = true;
    }

    /// `__mod_memcg_state` / `__count_memcg_events` of 5.10 for a
    /// memory.stat item: the CPU's remainder, or past the batch, the
    /// memcg's and its ancestors' atomics.
    #[inline(never)]
    pub(crate) fn memcg_stat_batched(&mut self, memcg: u16, item: Mc, val: i64) {
        let n = self.memcgs.len();
        let slot = (self.cur_cpu * n + memcg as usize) * NR_MC_ITEMS + item as usize;
        let x = self.rstat.residue[slot] as i64 + val;
        let threshold = match item {
            Mc::Zswap => MEMCG_CHARGE_BATCH_5_10 << 12, // memcg_stat_item_in_bytes
            _ => MEMCG_CHARGE_BATCH_5_10,
        };
        if x.abs() <= threshold {
            self.rstat.residue[slot] = x as i32;
            return;
        }
        self.rstat.residue[slot] = 0;
        let lruvec = is_node_item(item);
        let mut cur = Some(memcg);
        while let Some(m) = cur {
            self.rstat.state[m as usize].add(item, x);
            self.memcg_vmstat_line(m, item as u8);
            if lruvec {
                self.memcg_vmstat_line(m, NR_MC_ITEMS as u8 + item as u8);
            }
            cur = self.memcgs[m as usize].parent;
        }
    }

    /// The `atomic_long_add` to one of a memcg's counters (`item`, or
    /// NR_MC_ITEMS + item for its lruvec's copy): its line moves when
    /// another CPU wrote it last.
    fn memcg_vmstat_line(&mut self, memcg: u16, item: u8) {
        let ns = self.costs.cacheline_transfer;
        let f = crate::cost_model::Fn::ModLruvecState;
        self.write_line(Line::MemcgVmstat { memcg, item }, f, ns);
    }

    /// 5.10's memory.stat from the atomics: pgscan and pgsteal are the
    /// sums of the kswapd and direct events as each stands.
    pub(crate) fn memory_stat_batched(&self, memcg: u16) -> MemcgStat {
        let mut s = self.rstat.state[memcg as usize].clone();
        let sum = |a: Mc, b: Mc| s.get(a) + s.get(b);
        let (scan, steal) = (
            sum(Mc::PgscanKswapd, Mc::PgscanDirect),
            sum(Mc::PgstealKswapd, Mc::PgstealDirect),
        );
        s.add(Mc::Pgscan, scan - s.get(Mc::Pgscan));
        s.add(Mc::Pgsteal, steal - s.get(Mc::Pgsteal));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{test_at as at, test_kernel_of};

    /// A 5.10 machine of `cpus` with one cgroup `g` (memcg 1).
    fn with_cgroup(cpus: u32) -> Kernel {
        let mut k = test_kernel_of(&format!(
            "[machine]\nmemory = \"256M\"\ncpus = {cpus}\nkernel = \"5.10\"\n\
             [cgroup.g]\n[task.t]\ncgroup = \"g\"\nsteps = []\n"
        ));
        at(&mut k, 0, 0);
        k
    }

    #[test]
    fn readers_see_a_cpus_updates_once_they_pass_32() {
        let mut k = with_cgroup(2);
        assert!(k.rstat.batch && !k.rstat.on());
        (0..32).for_each(|_| k.memcg_stat(1, Mc::InactiveAnon, 1));
        assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 0, "32 is not past");
        assert_eq!(k.lruvec_page_state(0, 0), 0);
        k.memcg_stat(1, Mc::InactiveAnon, 1);
        assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 33);
        assert_eq!(k.memcg_page_state(0, Mc::InactiveAnon), 33, "and the root");
        // The other CPU's own remainder, in either direction.
        at(&mut k, 1, 0);
        k.memcg_stat(1, Mc::InactiveAnon, -20);
        assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 33);
        k.memcg_stat(1, Mc::InactiveAnon, -13);
        assert_eq!(k.memcg_page_state(1, Mc::InactiveAnon), 0);
        // The exact count is kept apart.
        assert_eq!(k.memcgs[1].stat.get(Mc::InactiveAnon), 0);
    }

    #[test]
    fn memory_stat_sums_the_batched_scan_events() {
        let mut k = with_cgroup(1);
        k.memcg_stat(1, Mc::PgscanKswapd, 40);
        k.memcg_stat(1, Mc::PgscanDirect, 20);
        k.memcg_stat(1, Mc::Pgscan, 60);
        let s = k.memory_stat_show(1);
        assert_eq!(s.get(Mc::Pgscan), 40, "the direct 20 wait on their CPU");
        assert_eq!(s.get(Mc::Pgfault), 0);
    }

    #[test]
    fn only_5_10_batches() {
        for preset in ["6.1", "6.12", "7.3"] {
            let k = crate::kernel::test_kernel(1, preset);
            assert!(!k.rstat.batch, "{preset}");
        }
    }
}

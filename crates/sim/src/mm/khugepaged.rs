//! mm/khugepaged.c as Linux 6.1 has it, for anonymous memory (7.3's
//! collapse into mTHP orders is in khugepaged_mthp.rs, on this thread and
//! scan loop): the
//! khugepaged kernel thread that scans registered mms for 2 MiB ranges
//! mapped by PTEs and collapses each into a THP mapped by one PMD.
//!
//! An mm is registered (`__khugepaged_enter`, MMF_VM_HUGEPAGE) when a THP
//! fault or MADV_HUGEPAGE finds one of its VMAs eligible, and at fork when
//! its parent was; it leaves the list when it exits. khugepaged sleeps
//! until the list has an mm, then wakes every `scan_sleep_millisecs` and
//! scans `pages_to_scan` PTEs' worth of address space (`khugepaged_do_scan`),
//! resuming where it stopped. A range is collapsed when it has few enough
//! empty, swapped-out and shared PTEs and at least one young, writable one
//! (`hpage_collapse_scan_pmd`); `collapse_huge_page` then allocates and
//! charges a THP, swaps in the swapped-out pages, isolates the small
//! pages, copies them (zeroes for the holes) and maps the THP.
//!
//! Not modelled, and refused where it would matter: the collapse of shmem
//! and file ranges (`collapse_file`, `hpage_collapse_scan_file`) and of
//! executable file mappings (CONFIG_READ_ONLY_THP_FOR_FS); MADV_COLLAPSE
//! (the spec has no such advice). Direct reclaim and compaction for the
//! huge page are not modelled, as for the fault path: the allocation
//! succeeds at the low watermark or fails (`thp_collapse_alloc_failed`).

use super::folio::*;
use super::huge_memory::pmd_block;
use super::mmap::{VM_EXEC, VM_HUGEPAGE, VM_NOHUGEPAGE, VM_WRITE};
use super::pgtable::*;
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::mm::memory::FaultError;
use crate::vmstat::{Mc, Vm};
use mmsim_spec::{KhugepagedKnobs, ThpEnabled};

#[path = "khugepaged_mthp.rs"]
mod mthp;

/// khugepaged's knobs (kernel/mm/transparent_hugepage/khugepaged/).
#[derive(Debug, Clone, Copy)]
pub struct KhugepagedCtl {
    /// TRANSPARENT_HUGEPAGE_DEFRAG_KHUGEPAGED_FLAG: GFP_TRANSHUGE (may
    /// reclaim) rather than GFP_TRANSHUGE_LIGHT.
    pub defrag: bool,
    pub pages_to_scan: u32,
    pub scan_sleep_ms: u32,
    pub alloc_sleep_ms: u32,
    pub max_ptes_none: u32,
    pub max_ptes_swap: u32,
    pub max_ptes_shared: u32,
}

impl KhugepagedCtl {
    /// `khugepaged_init`'s values (the defrag flag is among those
    /// `hugepage_init` clears under 512 MiB), then the spec's writes.
    pub fn new(k: &KhugepagedKnobs, big_enough: bool) -> Self {
        let nr = HPAGE_PMD_NR as u32;
        KhugepagedCtl {
            defrag: k.defrag.unwrap_or(big_enough),
            pages_to_scan: k.pages_to_scan(),
            scan_sleep_ms: k.scan_sleep_millisecs(),
            alloc_sleep_ms: k.alloc_sleep_millisecs.unwrap_or(60_000),
            max_ptes_none: k.max_ptes_none.unwrap_or(nr - 1),
            max_ptes_swap: k.max_ptes_swap.unwrap_or(nr / 8),
            max_ptes_shared: k.max_ptes_shared.unwrap_or(nr / 2),
        }
    }
}

/// Where the thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// `wait_event(khugepaged_wait, khugepaged_wait_event())`: no mm to
    /// scan (also its state before the first registration).
    #[default]
    Waiting,
    /// Woken, or its sleep is over: the next step starts a scan.
    Start,
    /// In `khugepaged_do_scan`.
    Scanning {
        progress: u64,
        pass_through_head: u32,
        wait: bool,
    },
}

/// What the scheduler does with khugepaged after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KhugepagedNext {
    /// More to do now.
    Run,
    /// Asleep until then (a timed sleep, or a wait for a page lock).
    SleepUntil(u64),
    /// Asleep until an mm registers.
    Sleep,
}

/// `enum scan_result`, the outcomes mmsim can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    Succeed,
    /// No page table, or a PMD already maps a THP.
    PmdNull,
    PmdMapped,
    ExceedNonePte,
    ExceedSwapPte,
    ExceedSharedPte,
    PteNonPresent,
    PageRo,
    LackReferencedPage,
    PageLru,
    PageLock,
    PageAnon,
    PageCount,
    DelPageLru,
    AllocHugePageFail,
    CgroupChargeFail,
    VmaCheck,
    /// 7.3: a block already mapped by a folio of the order or larger.
    PteMappedHugepage,
    /// 7.3: a lazily freed page not written since.
    PageLazyfree,
    Fail,
}

/// khugepaged's state: the registered mms and the scan cursor.
#[derive(Debug, Default)]
pub struct Khugepaged {
    /// `khugepaged_scan.mm_head`: registered mms, oldest first.
    mm_head: Vec<u32>,
    /// `khugepaged_scan.mm_slot`: the mm being scanned.
    scan_mm: Option<u32>,
    /// `khugepaged_scan.address`, as a virtual page number.
    scan_address: u64,
    state: State,
    /// Set by a collapse that must wait for a page's read: the time the
    /// page is unlocked.
    wait_until: Option<u64>,
    /// sysfs khugepaged/pages_collapsed and full_scans.
    pub pages_collapsed: u64,
    pub full_scans: u64,
    /// Set when an mm's registration (or the end of an empty scan) wakes
    /// the thread (`khugepaged_wait`): the time, until the scheduler
    /// takes it.
    wake_at: Option<u64>,
}

impl Khugepaged {
    /// Whether a wakeup waits for the scheduler.
    #[inline]
    pub fn wakeup_pending(&self) -> bool {
        self.wake_at.is_some()
    }

    /// The pending wakeup's time, once: the scheduler makes the thread
    /// runnable then.
    #[inline]
    pub fn take_wakeup(&mut self) -> Option<u64> {
        self.wake_at.take()
    }
}

/// `msecs_to_jiffies` in ns: whole jiffies, rounded up.
fn jiffies_ns(ms: u32) -> u64 {
    const JIFFY_NS: u64 = 1_000_000_000 / super::memcontrol::HZ;
    (ms as u64 * 1_000_000).div_ceil(JIFFY_NS) * JIFFY_NS
}

impl Kernel {
    /// `khugepaged_enter_vma`: registers the VMA's mm if THP is on and the
    /// VMA is one khugepaged would scan.
    pub fn khugepaged_enter_vma(&mut self, vma: u32) {
        if self.release.khugepaged_mthp {
            return self.khugepaged_enter_vma_mthp(vma);
        }
        let mm = self.vmas[vma as usize].mm;
        if !self.mms[mm as usize].khugepaged_slot
            && self.thp.enabled != ThpEnabled::Never
            && self.khugepaged_vma_check(vma)
        {
            self.khugepaged_enter(mm);
        }
    }

    /// 7.3's `khugepaged_enter_vma` (MADV_HUGEPAGE is its one caller
    /// mmsim has there: 7.3 no longer registers at a fault): with
    /// anonymous THP of any size on (`hugepage_enabled`), a VMA that
    /// allows an order once it has had a fault (`collapse_possible`)
    /// registers its mm. (7.3 also registers an mm when a VMA merge or a
    /// brk grows an anonymous VMA that has an anon_vma; mmsim's regions
    /// are separate mappings that never merge.)
    fn khugepaged_enter_vma_mthp(&mut self, vma: u32) {
        let mm = self.vmas[vma as usize].mm;
        if !self.mms[mm as usize].khugepaged_slot
            && self.hugepage_enabled()
            && self.collapse_possible_orders(vma) != 0
        {
            self.khugepaged_enter(mm);
        }
    }

    /// A new program's mm on 7.3: its heap, grown by brk once in use,
    /// merges into an anonymous VMA that has an anon_vma
    /// (`vma_merge_new_range` → `khugepaged_enter_vma`), which registers
    /// the mm whenever anonymous THP of some size is on. Every process
    /// with a malloc heap does this as it starts (the real-kernel runner
    /// does: its first scan comes at start, measured by
    /// fidelity/mthp_khugepaged_73.toml); mmsim has no heap, so the
    /// registration is made at the mm's creation. 6.1 registers at a THP
    /// fault or MADV_HUGEPAGE, as modelled above.
    /// The thread, woken by the first such registration, scans while the
    /// process is still starting, before any region of the workload
    /// exists: it finds nothing and sleeps `scan_sleep_millisecs`.
    pub fn khugepaged_exec(&mut self, mm: u32) {
        if !self.release.khugepaged_register_at_exec
            || !self.hugepage_enabled()
            || self.mms[mm as usize].khugepaged_slot
        {
            return;
        }
        let idle = self.khugepaged.mm_head.is_empty() && self.khugepaged.state == State::Waiting;
        self.khugepaged_enter(mm);
        if idle {
            // The wake-up's empty scan is over: the next one comes after a
            // sleep.
            self.khugepaged.full_scans += 1;
            self.khugepaged.wake_at =
                Some(self.now() + jiffies_ns(self.thp.khugepaged.scan_sleep_ms));
        }
    }

    /// `khugepaged_fork`: a child of a registered mm is registered too.
    pub fn khugepaged_fork(&mut self, child: u32, parent: u32) {
        if self.mms[parent as usize].khugepaged_slot {
            self.khugepaged_enter(child);
        }
    }

    /// `__khugepaged_enter`: onto the end of the list; the first mm wakes
    /// the thread (a thread in its timed sleep sleeps on).
    fn khugepaged_enter(&mut self, mm: u32) {
        if std::mem::replace(&mut self.mms[mm as usize].khugepaged_slot, true) {
            return;
        }
        let wakeup = self.khugepaged.mm_head.is_empty();
        self.khugepaged.mm_head.push(mm);
        if wakeup && self.khugepaged.state == State::Waiting {
            self.khugepaged.state = State::Start;
            self.khugepaged.wake_at = Some(self.now());
        }
    }

    /// `khugepaged_exit` (from `__mmput`): an mm not being scanned leaves
    /// the list now; the one under the cursor leaves when the scan next
    /// looks at it (`collect_mm_slot`).
    pub fn khugepaged_exit(&mut self, mm: u32) {
        self.mms[mm as usize].exited = true;
        if !self.mms[mm as usize].khugepaged_slot || self.khugepaged.scan_mm == Some(mm) {
            return;
        }
        self.khugepaged.mm_head.retain(|&m| m != mm);
        self.mms[mm as usize].khugepaged_slot = false;
    }

    /// `hugepage_vma_check(vma, vm_flags, smaps = false, in_pf = false,
    /// enforce_sysfs = true)` as khugepaged asks it: an anonymous VMA that
    /// holds a whole aligned 2 MiB block, without MADV_NOHUGEPAGE, with
    /// THP `always` (or `madvise` and MADV_HUGEPAGE), that has an
    /// anon_vma (has had an anonymous fault).
    fn khugepaged_vma_check(&mut self, vma: u32) -> bool {
        if self.release.khugepaged_mthp && self.vmas[vma as usize].inode == NIL {
            return self.collapse_possible_orders(vma) != 0;
        }
        let v = &self.vmas[vma as usize];
        if !v.live || v.flags & VM_NOHUGEPAGE != 0 {
            return false;
        }
        let end = v.start_vpn + v.pages;
        // transhuge_vma_suitable(vma, vm_end - HPAGE_PMD_SIZE).
        if end < HPAGE_PMD_NR || (end - HPAGE_PMD_NR) & !(HPAGE_PMD_NR - 1) < v.start_vpn {
            return false;
        }
        if v.inode != NIL {
            let inode = v.inode;
            let (shmem, exec) = (
                self.inodes[inode as usize].is_shmem(),
                v.flags & VM_EXEC != 0,
            );
            if (shmem && self.shmem_is_huge(Some(vma), inode, 0)) || (!shmem && exec) {
                self.unmodelled.get_or_insert_with(|| {
                    "khugepaged reached a shmem mapping with huge pages enabled, or an executable file mapping; mmsim models khugepaged's collapse of anonymous memory only (collapse_file is not modelled): expected shmem_enabled/huge= never, no exec file mapping, or transparent_hugepage/enabled = never".into()
                });
            }
            return false;
        }
        let allowed = match self.thp.enabled {
            ThpEnabled::Always => true,
            ThpEnabled::Madvise => v.flags & VM_HUGEPAGE != 0,
            ThpEnabled::Never => false,
        };
        allowed && v.anon_used
    }

    /// One step of the thread: start a scan, or one round of
    /// `khugepaged_do_scan`'s loop (one mm's share, up to the next
    /// collapse attempt).
    pub fn khugepaged_step(&mut self) -> KhugepagedNext {
        match self.khugepaged.state {
            State::Waiting => KhugepagedNext::Sleep,
            State::Start => {
                self.lru_add_drain_all();
                self.khugepaged.state = State::Scanning {
                    progress: 0,
                    pass_through_head: 0,
                    wait: true,
                };
                KhugepagedNext::Run
            }
            State::Scanning { .. } => self.traced(Fn::Khugepaged, |k| k.khugepaged_do_scan_round()),
        }
    }

    fn khugepaged_has_work(&self) -> bool {
        !self.khugepaged.mm_head.is_empty() && self.hugepage_enabled()
    }

    /// One pass of `khugepaged_do_scan`'s loop.
    fn khugepaged_do_scan_round(&mut self) -> KhugepagedNext {
        let State::Scanning {
            mut progress,
            mut pass_through_head,
            mut wait,
        } = self.khugepaged.state
        else {
            unreachable!("called while scanning")
        };
        let pages = self.thp.khugepaged.pages_to_scan as u64;
        if self.khugepaged.scan_mm.is_none() {
            pass_through_head += 1;
        }
        let mut result = Scan::Succeed;
        if self.khugepaged_has_work() && pass_through_head < 2 {
            progress += self.khugepaged_scan_mm_slot(pages - progress, &mut result);
        } else {
            progress = pages;
        }
        if let Some(t) = self.khugepaged.wait_until.take() {
            // A collapse waited for a page's read (folio_lock_or_retry)
            // and gave up; the scan goes on when the read is done.
            self.khugepaged.state = State::Scanning {
                progress,
                pass_through_head,
                wait,
            };
            return if progress >= pages {
                self.khugepaged_wait_work_from(t)
            } else {
                KhugepagedNext::SleepUntil(t)
            };
        }
        if progress >= pages {
            return self.khugepaged_wait_work_from(self.now());
        }
        if result == Scan::AllocHugePageFail {
            // khugepaged_alloc_sleep once; a second failure ends the scan.
            if !wait {
                return self.khugepaged_wait_work_from(self.now());
            }
            wait = false;
            self.khugepaged.state = State::Scanning {
                progress,
                pass_through_head,
                wait,
            };
            return KhugepagedNext::SleepUntil(
                self.now() + jiffies_ns(self.thp.khugepaged.alloc_sleep_ms),
            );
        }
        self.khugepaged.state = State::Scanning {
            progress,
            pass_through_head,
            wait,
        };
        KhugepagedNext::Run
    }

    /// `khugepaged_wait_work` from time `at`: sleep `scan_sleep_millisecs`
    /// while there is an mm to scan, else until one registers.
    fn khugepaged_wait_work_from(&mut self, at: u64) -> KhugepagedNext {
        if self.khugepaged_has_work() {
            self.khugepaged.state = State::Start;
            return KhugepagedNext::SleepUntil(at + jiffies_ns(self.thp.khugepaged.scan_sleep_ms));
        }
        self.khugepaged.state = State::Waiting;
        KhugepagedNext::Sleep
    }

    /// `khugepaged_scan_mm_slot`: scan the cursor's mm from the cursor's
    /// address until `pages` of progress, a collapse attempt, or the end
    /// of the mm (then the cursor moves to the next mm). mmap_read_trylock
    /// always succeeds: no task holds mmap_lock between simulated steps.
    fn khugepaged_scan_mm_slot(&mut self, pages: u64, result: &mut Scan) -> u64 {
        *result = Scan::Fail;
        let mm = match self.khugepaged.scan_mm {
            Some(mm) => mm,
            None => {
                let mm = self.khugepaged.mm_head[0];
                self.khugepaged.scan_address = 0;
                self.khugepaged.scan_mm = Some(mm);
                mm
            }
        };
        let mut progress = 1;
        let exited = self.mms[mm as usize].exited;
        // Whether the walk stopped on a VMA (the mm is not done).
        let mut on_vma = false;
        if !exited {
            let mut vmas = self.mms[mm as usize].vmas.clone();
            vmas.sort_unstable_by_key(|&v| self.vmas[v as usize].start_vpn);
            'vmas: for vma in vmas {
                let v = &self.vmas[vma as usize];
                let (start, end) = (v.start_vpn, v.start_vpn + v.pages);
                if end <= self.khugepaged.scan_address {
                    continue;
                }
                if !self.khugepaged_vma_check(vma) {
                    progress += 1;
                    continue;
                }
                let hstart = start.next_multiple_of(HPAGE_PMD_NR);
                let hend = end & !(HPAGE_PMD_NR - 1);
                if self.khugepaged.scan_address > hend {
                    progress += 1;
                    continue;
                }
                self.khugepaged.scan_address = self.khugepaged.scan_address.max(hstart);
                while self.khugepaged.scan_address < hend {
                    let addr = self.khugepaged.scan_address;
                    // 6.1 counts a PMD's progress whole; 7.3 the PTEs it
                    // looked at (one for a PMD without a table).
                    let (r, mmap_locked, scanned) = if self.release.khugepaged_mthp {
                        self.collapse_scan_pmd(mm, vma, addr)
                    } else {
                        let (r, locked) = self.hpage_collapse_scan_pmd(mm, vma, addr);
                        (r, locked, HPAGE_PMD_NR)
                    };
                    *result = r;
                    if r == Scan::Succeed {
                        self.khugepaged.pages_collapsed += 1;
                    }
                    self.khugepaged.scan_address += HPAGE_PMD_NR;
                    progress += scanned;
                    if !mmap_locked || progress >= pages {
                        on_vma = true;
                        break 'vmas;
                    }
                }
            }
        }
        if exited || !on_vma {
            let head = &self.khugepaged.mm_head;
            let pos = head
                .iter()
                .position(|&m| m == mm)
                .expect("scanned mm is listed");
            if let Some(&next) = head.get(pos + 1) {
                self.khugepaged.scan_mm = Some(next);
                self.khugepaged.scan_address = 0;
            } else {
                self.khugepaged.scan_mm = None;
                self.khugepaged.full_scans += 1;
            }
            // collect_mm_slot.
            if exited {
                self.khugepaged.mm_head.remove(pos);
                self.mms[mm as usize].khugepaged_slot = false;
            }
        }
        progress
    }

    /// The `page_count == total_mapcount (+ the swap cache's)` test: no
    /// pin beyond the mappings.
    fn is_refcount_suitable(&self, head: Pfn) -> bool {
        let f = self.folios.get(head);
        let swapcache = f.test(PG_SWAPCACHE) as u32 * f.nr_pages();
        f.refcount == self.folio_mapcount(head) + swapcache
    }

    /// `hpage_collapse_scan_pmd` of the block at virtual page `addr`:
    /// count its empty, swapped-out and shared PTEs against the limits,
    /// check each page, and collapse if it is worth it. Returns the result
    /// and whether mmap_lock is still held (false after a collapse
    /// attempt).
    fn hpage_collapse_scan_pmd(&mut self, mm: u32, vma: u32, addr: u64) -> (Scan, bool) {
        let first = (addr - self.vmas[vma as usize].start_vpn) as usize;
        let r = self.find_pmd_or_thp_or_none(vma, first);
        if r != Scan::Succeed {
            return (r, true);
        }
        let ctl = self.thp.khugepaged;
        let (mut none_or_zero, mut unmapped, mut shared, mut referenced) = (0, 0, 0, 0);
        let mut writable = false;
        // pte_offset_map_lock over the table's scan: an empty hold, its
        // PTEs priced at once here.
        self.pte_lock_empty(vma, first, Fn::HpageCollapseScanPmd);
        self.charge_cost(Fn::Khugepaged, self.costs.pte * HPAGE_PMD_NR);
        for i in first..first + HPAGE_PMD_NR as usize {
            let pte = self.vmas[vma as usize].ptes[i];
            if is_swap_pte(pte) {
                unmapped += 1;
                if unmapped > ctl.max_ptes_swap {
                    self.vm.inc(Vm::ThpScanExceedSwapPte);
                    return (Scan::ExceedSwapPte, true);
                }
                continue;
            }
            if pte_none(pte) || pte & PTE_ZERO != 0 {
                none_or_zero += 1;
                if none_or_zero > ctl.max_ptes_none {
                    self.vm.inc(Vm::ThpScanExceedNonePte);
                    return (Scan::ExceedNonePte, true);
                }
                continue;
            }
            writable |= pte & PTE_WRITE != 0;
            let page = pte_pfn(pte);
            if self.folios.page_mapcount(page) > 1 {
                shared += 1;
                if shared > ctl.max_ptes_shared {
                    self.vm.inc(Vm::ThpScanExceedSharePte);
                    return (Scan::ExceedSharedPte, true);
                }
            }
            let head = self.folios.head_of(page);
            let f = self.folios.get(head);
            let r = if !f.test(PG_LRU) {
                Scan::PageLru
            } else if f.test(PG_LOCKED) {
                Scan::PageLock
            } else if !f.test(PG_ANON) {
                Scan::PageAnon
            } else if !self.is_refcount_suitable(head) {
                Scan::PageCount
            } else {
                Scan::Succeed
            };
            if r != Scan::Succeed {
                return (r, true);
            }
            if pte & PTE_YOUNG != 0 || f.test(PG_REFERENCED) {
                referenced += 1;
            }
        }
        if !writable {
            return (Scan::PageRo, true);
        }
        if referenced == 0 || (unmapped > 0 && referenced < HPAGE_PMD_NR / 2) {
            return (Scan::LackReferencedPage, true);
        }
        let r = self.traced(Fn::CollapseHugePage, |k| {
            k.collapse_huge_page(mm, vma, first, unmapped)
        });
        (r, false)
    }

    /// `find_pmd_or_thp_or_none`: a PTE table to scan, none, or a PMD
    /// mapping a THP already.
    fn find_pmd_or_thp_or_none(&self, vma: u32, first: usize) -> Scan {
        let v = &self.vmas[vma as usize];
        if v.ptes[first] & PTE_PMD != 0 {
            return Scan::PmdMapped;
        }
        if v.pte_tables[pmd_block(v.start_vpn, first).1] == NIL {
            return Scan::PmdNull;
        }
        Scan::Succeed
    }

    /// `collapse_huge_page` of the block at page `first` of `vma`.
    fn collapse_huge_page(&mut self, mm: u32, vma: u32, first: usize, unmapped: u32) -> Scan {
        let memcg = self.mms[mm as usize].memcg;
        let hpage = match self.alloc_charge_hpage(memcg) {
            Ok(p) => p,
            Err(r) => return r,
        };
        let r = self.collapse_revalidated(vma, first, unmapped, hpage);
        if r != Scan::Succeed {
            // out_nolock: mem_cgroup_uncharge, put_page.
            self.mem_cgroup_uncharge(memcg, HPAGE_PMD_NR);
            self.free_folio_pages(hpage);
        }
        r
    }

    /// `alloc_charge_hpage`: an order-9 folio charged to the mm's memcg.
    fn alloc_charge_hpage(&mut self, memcg: u16) -> Result<Pfn, Scan> {
        let Some(hpage) = self.alloc_large_folio(9) else {
            self.vm.inc(Vm::ThpCollapseAllocFailed);
            return Err(Scan::AllocHugePageFail);
        };
        self.vm.inc(Vm::ThpCollapseAlloc);
        self.folios.get_mut(hpage).memcg = memcg;
        // mem_cgroup_charge with khugepaged's gfp: GFP_TRANSHUGE may
        // reclaim from the memcg; GFP_TRANSHUGE_LIGHT may not.
        let charged = if self.thp.khugepaged.defrag {
            self.try_charge(memcg, HPAGE_PMD_NR)
        } else {
            self.try_charge_nowait(memcg, HPAGE_PMD_NR)
        };
        if charged != super::memcontrol::Charge::Ok {
            self.free_folio_pages(hpage);
            return Err(Scan::CgroupChargeFail);
        }
        self.memcg_stat(memcg, Mc::ThpCollapseAlloc, 1);
        Ok(hpage)
    }

    /// The rest of `collapse_huge_page` once the THP is charged: the VMA
    /// and PMD checked again (the charge may have reclaimed), the
    /// swapped-out pages read in, then under mmap_lock for writing the
    /// PTE table detached, its pages isolated and copied, and the THP
    /// mapped by the PMD with the old table as its deposit.
    fn collapse_revalidated(&mut self, vma: u32, first: usize, unmapped: u32, hpage: Pfn) -> Scan {
        if !self.khugepaged_vma_check(vma) {
            return Scan::VmaCheck;
        }
        let r = self.find_pmd_or_thp_or_none(vma, first);
        if r != Scan::Succeed {
            return r;
        }
        if unmapped > 0 {
            let r = self.collapse_huge_page_swapin(vma, first);
            if r != Scan::Succeed {
                return r;
            }
        }
        // The rest under mmap_write_lock (6.4+: the VMA write-locked too):
        // the process's faults on other CPUs wait for the copy.
        let mm = self.vmas[vma as usize].mm;
        self.mmap_write_lock(mm, vma);
        let r = self.collapse_write_locked(vma, first, hpage);
        self.mmap_write_unlock(mm);
        r
    }

    /// The part of `collapse_huge_page` under mmap_lock held for writing:
    /// the PTE table detached and flushed, its pages isolated and copied,
    /// the THP mapped.
    fn collapse_write_locked(&mut self, vma: u32, first: usize, hpage: Pfn) -> Scan {
        // anon_vma_lock_write over the flush and the isolation: other
        // CPUs' rmap walks of these pages fail or sleep meanwhile. Once
        // the pages are isolated no walk can reach them, and the copy runs
        // unlocked.
        let anon_vma = self.anon_vma_lock_write(self.vmas[vma as usize].anon_vma);
        self.mmu_notifier_invalidate_range(vma, first, HPAGE_PMD_NR as usize);
        // pmdp_collapse_flush, under the PMD table's lock.
        let ptl = self.pmd_lock(vma, first, Fn::CollapseHugePage);
        self.charge_cost(Fn::CollapseHugePage, self.costs.tlb_flush);
        self.flush_tlb_mm_range(self.vmas[vma as usize].mm, false);
        self.spin_unlock(ptl);
        let mut compound = self.take_scratch();
        let r = self.collapse_huge_page_isolate(vma, first, &mut compound);
        self.anon_vma_unlock_write(anon_vma);
        if r != Scan::Succeed {
            self.give_scratch(compound);
            return r;
        }
        self.collapse_huge_page_copy(vma, first, hpage, &compound);
        self.give_scratch(compound);
        // The THP's rmap, LRU add and PMD set under the PMD table's lock.
        let ptl = self.pmd_lock(vma, first, Fn::CollapseHugePage);
        self.collapse_map_pmd(vma, first, hpage);
        self.spin_unlock(ptl);
        Scan::Succeed
    }

    /// `__collapse_huge_page_swapin`: `do_swap_page` (no pgfault; a major
    /// fault when read) for each swapped-out page of the block. A page
    /// whose read is in flight makes the collapse wait for it and give up
    /// (VM_FAULT_RETRY: SCAN_PAGE_LOCK).
    fn collapse_huge_page_swapin(&mut self, vma: u32, first: usize) -> Scan {
        let mut swapped_in = 0;
        for i in first..first + HPAGE_PMD_NR as usize {
            let pte = self.vmas[vma as usize].ptes[i];
            if !is_swap_pte(pte) {
                continue;
            }
            match self.traced(Fn::DoSwapPage, |k| k.do_swap_page(vma, i, pte, false)) {
                Ok(()) => swapped_in += 1,
                Err(FaultError::Retry(t) | FaultError::Wait(t)) => {
                    self.khugepaged.wait_until = Some(t);
                    return Scan::PageLock;
                }
                Err(_) => return Scan::Fail,
            }
        }
        if swapped_in > 0 {
            self.lru_add_drain();
        }
        Scan::Succeed
    }

    /// `__collapse_huge_page_isolate`: every page of the block off the LRU
    /// (a PTE-mapped THP once, into `compound`), the limits checked again.
    /// On failure the pages isolated so far go back (`release_pte_pages`).
    /// The pages' locks are not modelled: nothing else runs inside a step.
    fn collapse_huge_page_isolate(
        &mut self,
        vma: u32,
        first: usize,
        compound: &mut Vec<Pfn>,
    ) -> Scan {
        let ctl = self.thp.khugepaged;
        let (mut none_or_zero, mut shared, mut referenced) = (0, 0, 0);
        let mut writable = false;
        let mut small = self.take_scratch();
        let mut r = Scan::Succeed;
        for i in first..first + HPAGE_PMD_NR as usize {
            let pte = self.vmas[vma as usize].ptes[i];
            if pte_none(pte) || pte & PTE_ZERO != 0 {
                none_or_zero += 1;
                if none_or_zero > ctl.max_ptes_none {
                    self.vm.inc(Vm::ThpScanExceedNonePte);
                    r = Scan::ExceedNonePte;
                    break;
                }
                continue;
            }
            if !pte_present(pte) {
                r = Scan::PteNonPresent;
                break;
            }
            let page = pte_pfn(pte);
            if self.folios.page_mapcount(page) > 1 {
                shared += 1;
                if shared > ctl.max_ptes_shared {
                    self.vm.inc(Vm::ThpScanExceedSharePte);
                    r = Scan::ExceedSharedPte;
                    break;
                }
            }
            let head = self.folios.head_of(page);
            r = self.collapse_isolate_folio(head, compound, &mut small);
            if r != Scan::Succeed {
                break;
            }
            if pte & PTE_YOUNG != 0 || self.folios.get(head).test(PG_REFERENCED) {
                referenced += 1;
            }
            writable |= pte & PTE_WRITE != 0;
        }
        if r == Scan::Succeed && !writable {
            r = Scan::PageRo;
        } else if r == Scan::Succeed && referenced == 0 {
            r = Scan::LackReferencedPage;
        }
        if r != Scan::Succeed {
            for &head in small.iter().chain(compound.iter()) {
                self.release_pte_page(head);
            }
        }
        self.give_scratch(small);
        r
    }

    /// The isolation step of `__collapse_huge_page_isolate` for folio
    /// `head` (a large folio once: one already in `compound` passes):
    /// unlocked, with no reference beyond its mappings, off the LRU, into
    /// `compound` or `small`.
    fn collapse_isolate_folio(
        &mut self,
        head: Pfn,
        compound: &mut Vec<Pfn>,
        small: &mut Vec<Pfn>,
    ) -> Scan {
        let f = *self.folios.get(head);
        if f.order > 0 && compound.contains(&head) {
            return Scan::Succeed;
        }
        if f.test(PG_LOCKED) {
            return Scan::PageLock;
        }
        if !self.is_refcount_suitable(head) {
            return Scan::PageCount;
        }
        if !f.test(PG_LRU) {
            return Scan::DelPageLru;
        }
        self.charge_cost(Fn::CollapseHugePage, self.costs.lru_move);
        self.isolate_lru_folio(head);
        self.mod_node_page_state(Vm::NrIsolatedAnon, f.nr_pages() as i64);
        if f.order > 0 {
            compound.push(head);
        } else {
            small.push(head);
        }
        Scan::Succeed
    }

    /// `release_pte_page`: back from isolation onto the LRU.
    fn release_pte_page(&mut self, head: Pfn) {
        let nr = self.folios.get(head).nr_pages() as i64;
        self.mod_node_page_state(Vm::NrIsolatedAnon, -nr);
        self.folio_putback_lru(head);
    }

    /// `__collapse_huge_page_copy`: each page's content into the THP (a
    /// hole or the zero page gives a cleared page, and one more anonymous
    /// page of RSS), each small page released and unmapped, then the
    /// PTE-mapped THPs put back (freed when nothing maps them).
    fn collapse_huge_page_copy(&mut self, vma: u32, first: usize, hpage: Pfn, compound: &[Pfn]) {
        let mm = self.vmas[vma as usize].mm as usize;
        for (n, i) in (first..first + HPAGE_PMD_NR as usize).enumerate() {
            let pte = self.vmas[vma as usize].ptes[i];
            let dst = hpage + n as Pfn;
            if pte_none(pte) || pte & PTE_ZERO != 0 {
                self.charge_mem(Fn::CollapseHugePage, self.costs.clear_page, PAGE_BYTES);
                self.l2_write(dst, 1);
                self.folios.version[dst as usize] = 0;
                self.mms[mm].rss_anon += 1;
                self.vmas[vma as usize].ptes[i] = 0;
                continue;
            }
            let src = pte_pfn(pte);
            let (copy, bytes) = self.copy_page_cost(src);
            self.charge_mem(Fn::CollapseHugePage, copy, bytes + PAGE_BYTES);
            self.l2_write(dst, 1);
            // copy_user_highpage reads the source (the THP was written
            // when allocated).
            self.guest_frame(src, false);
            self.folios.version[dst as usize] = self.folios.version[src as usize];
            let head = self.folios.head_of(src);
            if self.folios.get(head).order == 0 {
                self.release_pte_page(head);
            }
            self.vmas[vma as usize].ptes[i] = 0;
            self.page_remove_rmap(src, vma);
            // free_page_and_swap_cache.
            self.free_swap_cache(head);
            self.folio_put(head);
        }
        for &head in compound {
            self.free_swap_cache(head);
            self.release_pte_page(head);
        }
    }

    /// The THP mapped by the block's PMD: `page_add_new_anon_rmap`, onto
    /// the LRU, the old PTE table deposited, the PMD dirty, young and
    /// writable if the VMA is.
    fn collapse_map_pmd(&mut self, vma: u32, first: usize, hpage: Pfn) {
        self.folios
            .get_mut(hpage)
            .set(PG_SWAPBACKED | PG_UPTODATE | PG_ANON | PG_ANON_EXCLUSIVE);
        self.page_add_new_anon_rmap_pmd(hpage, vma, first);
        self.folio_add_lru(hpage);
        let write = if self.vmas[vma as usize].flags & VM_WRITE != 0 {
            PTE_WRITE
        } else {
            0
        };
        let ptes = &mut self.vmas[vma as usize].ptes[first..first + HPAGE_PMD_NR as usize];
        for (i, pte) in ptes.iter_mut().enumerate() {
            *pte = mk_pte(hpage + i as u32, PTE_PMD | write | PTE_YOUNG | PTE_DIRTY);
        }
    }
}

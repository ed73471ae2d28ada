//! mm/memory.c: the page-fault paths for private anonymous memory —
//! `handle_mm_fault`, `do_anonymous_page` (with the shared zero page),
//! `do_swap_page` (the SWP_SYNCHRONOUS_IO path that skips the swap cache),
//! `do_wp_page` with `wp_page_reuse` and `wp_page_copy`.

use super::folio::*;
use super::page_alloc::Gfp;
use super::page_content::kind_id;
use super::pgtable::*;
use super::swapfile::{swp_offset, swp_type, SwpEntry, SWAP_HAS_CACHE, SWP_SYNCHRONOUS_IO};
use crate::cost_model::Fn;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::vmstat::{Mc, Vm};
use crate::SimError;

/// Why a fault could not be satisfied.
#[derive(Debug, PartialEq, Eq)]
pub enum FaultError {
    /// VM_FAULT_OOM: no memory, or the memcg could not be charged.
    Oom,
    /// A path this version of the simulator does not model yet.
    Unmodelled(&'static str),
    /// One access's fault was retried MAX_FAULT_ATTEMPTS times: every page
    /// it read was reclaimed before the task could map it.
    Thrashing,
    /// VM_FAULT_RETRY: the fault waited for a locked folio (I/O in flight)
    /// until the given time; the access is retried then.
    Retry(u64),
    /// The fault sleeps inside until the given time and then completes:
    /// modelled as a retry that does not count as a new fault.
    Wait(u64),
}

impl From<FaultError> for SimError {
    fn from(e: FaultError) -> SimError {
        match e {
            FaultError::Oom => SimError::Oom,
            FaultError::Unmodelled(what) => SimError::Unmodelled(what.to_string()),
            FaultError::Thrashing => SimError::Unmodelled(format!(
                "an access's fault was retried {MAX_FAULT_ATTEMPTS} times, each time finding the page its last attempt read reclaimed again before the task could map it (other tasks' faults in the same memory cgroup or machine took it back): the working set thrashes, and the kernel would go round the same way with no progress; expected more memory for the workload (machine.memory, a cgroup's memory_max) or swap"
            )),
            FaultError::Retry(_) | FaultError::Wait(_) => unreachable!("a wait is not an error"),
        }
    }
}

type Fault = Result<(), FaultError>;

/// Attempts one access's fault may take (each waiting for a read or a
/// write in flight) before the run stops as thrashing. mmsim's own bound:
/// the kernel retries without one. An access needs a handful at most
/// unless the pages it waits for are reclaimed as fast as they come in.
pub const MAX_FAULT_ATTEMPTS: u32 = 10_000;

/// What a fault, or a zap, carries between the functions it calls: the
/// kernel keeps it in `struct vm_fault`, in `current` and on the zap's
/// stack. One context serves the machine because one simulated CPU runs
/// at a time and a fault or zap never spans a context switch; the files
/// that set a part read it back through the methods below.
#[derive(Debug, Default)]
pub struct FaultCtx {
    /// A fault that must wait (VM_FAULT_RETRY after waiting for a locked
    /// folio) sets when: the task sleeps until then and retries.
    blocked_until: Option<u64>,
    /// `vmf->prealloc_pte`: the PTE table a shmem read fault allocated
    /// before fault-around, until a mapping installs it or the fault ends.
    prealloc_pte: Option<Pfn>,
    /// `current->in_lru_fault`: a fault of a VMA not read sequentially or
    /// at random is running (lru_gen_enter_fault).
    in_lru_fault: bool,
    /// 6.12's zap of a large anonymous folio's PTEs as one batch, open.
    zap_anon: Option<super::anon_mthp::ZapAnonBatch>,
    /// A user page fault is being handled (the OOM killer's victims then
    /// exit in their own time: oom_kill.rs).
    in_fault: bool,
    /// The last access's fault returned without mapping its page: the
    /// player goes back to user space and makes the access again.
    pub(super) again: bool,
    /// The last access's fault returned VM_FAULT_RETRY to wait for a
    /// folio's I/O (`blocked_until` holds its end), where a caller that
    /// asked not to wait (FOLL_NOWAIT: KVM's async page faults) gets the
    /// I/O started and nothing else.
    retry: bool,
}

impl FaultCtx {
    /// Whether the last access's wait is a VM_FAULT_RETRY for I/O, once.
    #[inline]
    pub fn take_retry(&mut self) -> bool {
        std::mem::take(&mut self.retry)
    }

    /// The time the last access's fault must wait until, once: the
    /// player puts the task to sleep and retries the access then.
    #[inline]
    pub fn take_blocked_until(&mut self) -> Option<u64> {
        self.blocked_until.take()
    }

    /// Whether the last access must be made again (once).
    #[inline]
    pub fn take_again(&mut self) -> bool {
        std::mem::take(&mut self.again)
    }

    /// The fault's preallocated PTE table, taken by the mapping that
    /// installs it or freed at the fault's end.
    #[inline]
    pub(crate) fn take_prealloc_pte(&mut self) -> Option<Pfn> {
        self.prealloc_pte.take()
    }

    pub(crate) fn set_prealloc_pte(&mut self, table: Pfn) {
        debug_assert!(self.prealloc_pte.is_none());
        self.prealloc_pte = Some(table);
    }

    #[inline]
    pub(crate) fn in_fault(&self) -> bool {
        self.in_fault
    }

    #[inline]
    pub(crate) fn in_lru_fault(&self) -> bool {
        self.in_lru_fault
    }

    pub(crate) fn set_in_lru_fault(&mut self, on: bool) {
        self.in_lru_fault = on;
    }

    /// The open zap batch (anon_mthp.rs's).
    #[inline]
    pub(crate) fn zap_anon(&mut self) -> &mut Option<super::anon_mthp::ZapAnonBatch> {
        &mut self.zap_anon
    }
}

impl Kernel {
    /// A user access to page `idx` of `vma`: the MMU's view first (young
    /// and dirty bits set in hardware), a fault when the PTE does not
    /// allow the access — or, on an MMU without hardware accessed bits,
    /// when the PTE is old. Every read checks the page's content token; a
    /// write stores the next one (a plain store, as the native runner
    /// makes it: one write access).
    #[inline]
    pub fn user_access(&mut self, vma: u32, idx: usize, write: bool) -> Result<(), SimError> {
        let pte = self.vmas[vma as usize].ptes[idx];
        if self.pte_lets_through(pte, write) {
            self.access_present(vma, idx, pte, write);
            return Ok(());
        }
        if self.faultin(vma, idx, write)? {
            let pte = self.vmas[vma as usize].ptes[idx];
            if self.pte_lets_through(pte, write) {
                self.access_present(vma, idx, pte, write);
            } else {
                // The fault went back to user space without mapping
                // the page (a `pte_same` that failed: reclaim took
                // it meanwhile). The instruction runs again after
                // `exit_to_user_mode`, where a fatal signal, a
                // reschedule or memory.high's throttling come first.
                self.fault.again = true;
            }
        }
        Ok(())
    }

    /// `handle_mm_fault` of page `idx` of `vma` for an access its PTE does
    /// not let through: true if the fault returned (the caller looks at
    /// the PTE again); false if the task waits first (`fault.blocked_until`,
    /// the access made again after) or the fault is to be made again.
    #[inline(always)]
    pub(crate) fn faultin(&mut self, vma: u32, idx: usize, write: bool) -> Result<bool, SimError> {
        // One CPU: no other can hold mmap_lock or share its line.
        let r = if self.cpus.len() > 1 {
            match self.handle_mm_fault_locked(vma, idx, write) {
                Some(r) => r,
                None => return Ok(false),
            }
        } else {
            self.handle_mm_fault(vma, idx, write)
        };
        match r {
            Ok(()) => Ok(true),
            Err(FaultError::Retry(until)) => {
                // The task sleeps; the scheduler retries the access.
                self.fault.blocked_until = Some(until);
                self.fault.retry = true;
                Ok(false)
            }
            Err(FaultError::Wait(until)) => {
                let t = self.cur_task.expect("faults come from tasks");
                self.tasks[t].fault_waited = true;
                self.fault.blocked_until = Some(until);
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The leading accesses of `run` (touch-stream accesses, at most
    /// `max`) that hit, made in one loop with the time charged once for
    /// all of them; returns how many. The first access that would fault is
    /// left for `user_access`. A hit only sets the PTE's bits (and the
    /// PMD's young bit), moves the content token and adds `costs.touch`:
    /// nothing else in the kernel sees it, so the result is the same as
    /// one `user_access` each.
    pub fn access_resident_run(&mut self, vma: u32, run: &[u64], max: usize) -> usize {
        use mmsim_spec::stream::{access_is_write, access_page};
        if self.frame_log.is_some() {
            return self.access_resident_run_guest(vma, run, max);
        }
        let mut n = 0;
        for &a in &run[..run.len().min(max)] {
            let (idx, write) = (access_page(a) as usize, access_is_write(a));
            let pte = self.vmas[vma as usize].ptes[idx];
            if !self.pte_lets_through(pte, write) {
                break;
            }
            self.hit_present(vma, idx, pte, write);
            n += 1;
        }
        // n charges of costs.touch, summed: the same u64 additions.
        self.charge_user(self.costs.touch * n as u64);
        self.l2_user_lines(n as u64);
        n
    }

    /// `access_resident_run` in a guest: each hit's frames logged as it is
    /// made, and the run stops after the first the host must handle (the
    /// vCPU stops there: `FrameLog`). Out of the host's loop: a machine of
    /// its own pays one test per run.
    #[cold]
    fn access_resident_run_guest(&mut self, vma: u32, run: &[u64], max: usize) -> usize {
        use mmsim_spec::stream::{access_is_write, access_page};
        let mut n = 0;
        for &a in &run[..run.len().min(max)] {
            let (idx, write) = (access_page(a) as usize, access_is_write(a));
            let pte = self.vmas[vma as usize].ptes[idx];
            if !self.pte_lets_through(pte, write) {
                break;
            }
            self.hit_present(vma, idx, pte, write);
            self.guest_user_frame(vma, idx, pte, write);
            n += 1;
            if self.frame_log.as_ref().is_some_and(|l| l.exit) {
                break;
            }
        }
        self.charge_user(self.costs.touch * n as u64);
        self.l2_user_lines(n as u64);
        n
    }

    /// A guest's user access of page `idx` of `vma` through `pte`: TCG's
    /// soft MMU walks the guest's page tables (the last level's table is
    /// read), then loads or stores. The zero page is not logged: it is a
    /// frame of the guest kernel's image, which boot wrote, and the
    /// kernel's later touches of its image are not modelled (vm.rs).
    #[inline]
    fn guest_user_frame(&mut self, vma: u32, idx: usize, pte: Pte, write: bool) {
        if self.frame_log.is_none() {
            return;
        }
        self.guest_walk(vma, idx);
        // The user's own load or store: no struct page.
        if let Some(log) = self.frame_log.as_mut().filter(|_| pte & PTE_ZERO == 0) {
            crate::kernel::log_frame(log, pte_pfn(pte), write);
        }
    }

    /// The page-table walk of a guest's access of page `idx` of `vma`:
    /// its PTE table, or the PMD table where a PMD maps it.
    #[cold]
    fn guest_walk(&mut self, vma: u32, idx: usize) {
        let mut table = self.vmas[vma as usize].pte_tables[self.pmd_table(vma, idx)];
        if table == NIL {
            table = self.pmd_table_pfn(vma, idx);
        }
        if table != NIL {
            if let Some(log) = &mut self.frame_log {
                self.guest_meta.touch(log, table, false);
            }
        }
    }

    /// Whether this machine's MMU lets an access through `pte` without a
    /// fault (pgtable.rs `pte_lets_through`).
    #[inline]
    fn pte_lets_through(&self, pte: Pte, write: bool) -> bool {
        pte_lets_through(pte, write, self.hw_pte_young)
    }

    #[inline]
    fn access_present(&mut self, vma: u32, idx: usize, pte: Pte, write: bool) {
        self.guest_user_frame(vma, idx, pte, write);
        self.hit_present(vma, idx, pte, write);
        self.charge_user(self.costs.touch);
        self.l2_user_lines(1);
    }

    /// An access the MMU lets through: the PTE's young and dirty bits, and
    /// the content token checked (read) or moved on (write).
    #[inline(always)]
    pub(crate) fn hit_present(&mut self, vma: u32, idx: usize, pte: Pte, write: bool) {
        let v = &mut self.vmas[vma as usize];
        v.ptes[idx] = pte | PTE_YOUNG | if write { PTE_DIRTY } else { 0 };
        if self.track_pmd_young {
            // The page walk to a PTE sets the PMD entry's accessed bit too.
            let table = ((v.start_vpn + idx as u64) >> 9) - (v.start_vpn >> 9);
            let tp = v.pte_tables[table as usize];
            if tp != NIL {
                self.folios.get_mut(tp).set(PG_PMD_YOUNG);
            }
        }
        let v = &mut self.vmas[vma as usize];
        // What the user expects: shared pages' expectations live with the
        // inode, so every mapping of it agrees.
        // A private file mapping follows the file until it copies a page.
        let (inode, page) = (v.inode, v.pgoff as usize + idx);
        let private = inode == NIL || v.flags & super::mmap::VM_SHARED == 0;
        let own = if private {
            v.user_version[idx]
        } else {
            super::mmap::FOLLOW_FILE
        };
        let expected = if own != super::mmap::FOLLOW_FILE {
            own
        } else {
            self.inodes[inode as usize].user_version[page]
        };
        if write {
            // A first write, or a token with a kind: the region may state
            // its content (mm/page_content.rs); else the count moves on.
            let next = match expected == 0 || kind_id(expected) != 0 {
                true => self.token_written(vma, idx, expected),
                false => expected.wrapping_add(1).max(1),
            };
            if private {
                self.vmas[vma as usize].user_version[idx] = next;
            } else {
                self.inodes[inode as usize].user_version[page] = next;
            }
            self.folios.version[pte_pfn(pte) as usize] = next;
        } else {
            let found = if pte & PTE_ZERO != 0 {
                0
            } else {
                self.folios.version[pte_pfn(pte) as usize]
            };
            self.integrity.pages_checked += 1;
            if found != expected && !self.contents.reads_as(found, expected) {
                self.integrity.violations += 1;
            }
        }
    }

    /// do_user_addr_fault with more than one CPU: mmap_read_lock (6.4+:
    /// the VMA's lock), asleep while a writer on another CPU holds it
    /// (None: the access is retried then), its count's cache line written
    /// as it is taken and dropped.
    #[inline(never)]
    fn handle_mm_fault_locked(&mut self, vma: u32, idx: usize, write: bool) -> Option<Fault> {
        let mm = self.vmas[vma as usize].mm;
        if let Some(until) = self.mmap_read_lock_wait(mm, vma) {
            self.fault.blocked_until = Some(until);
            return None;
        }
        self.fault_lock_line(vma, Fn::DownReadTrylock);
        let r = self.handle_mm_fault(vma, idx, write);
        self.fault_lock_line(vma, Fn::UpRead);
        Some(r)
    }

    /// `handle_mm_fault`, timed for the fault latency histograms: a fault
    /// that waits and is retried is one fault from its first entry to the
    /// end of the retry, major if any attempt read from swap.
    fn handle_mm_fault(&mut self, vma: u32, idx: usize, write: bool) -> Fault {
        let now = self.now();
        self.process_io_completions(now);
        let task = self.cur_task.expect("faults come from tasks");
        let (t0, was_major) = self.tasks[task].fault_start.unwrap_or((now, false));
        let majors = self.vm.get(Vm::Pgmajfault);
        let reads = self.vm.get(Vm::Pswpin);
        self.lru_gen_enter_fault(vma);
        self.fault.in_fault = true;
        let mut r = self.traced(Fn::HandleMmFault, |k| k.handle_pte_fault(vma, idx, write));
        self.fault.in_fault = false;
        self.fault.in_lru_fault = false;
        // (A wait left over from a syscall's failed charge costs at most
        // one more attempt: the scheduler wakes a waiter at once when no
        // victim is left.)
        if let Err(FaultError::Oom) = r {
            if self.oom.take_waiting() && !self.current_is_dying() {
                // The OOM killer's victims have yet to exit: the fault
                // sleeps inside (not another fault when it goes on) until
                // they have (the scheduler wakes it) and is retried.
                self.tasks[task].oom_wait = Some(self.now());
                r = Err(FaultError::Wait(u64::MAX));
            }
        }
        let major = was_major || self.vm.get(Vm::Pgmajfault) > majors;
        let read = self.vm.get(Vm::Pswpin) > reads;
        if let Err(FaultError::Retry(_) | FaultError::Wait(_)) = r {
            self.tasks[task].fault_attempts += 1;
            if self.tasks[task].fault_attempts >= MAX_FAULT_ATTEMPTS {
                return Err(FaultError::Thrashing);
            }
            self.tasks[task].fault_start = Some((t0, major));
            self.tasks[task].fault_read |= read;
            return r;
        }
        if self.release.pgfault_completed_only && r.is_ok() {
            let memcg = self.vma_memcg(vma);
            self.count_pgfault(memcg);
        }
        self.tasks[task].fault_start = None;
        self.tasks[task].fault_attempts = 0;
        let read = std::mem::take(&mut self.tasks[task].fault_read) || read;
        let ns = self.now() - t0;
        if major {
            self.hist.fault_major_ns.record(ns);
        } else {
            self.hist.fault_minor_ns.record(ns);
        }
        if read {
            self.hist.swapin_ns.record(ns);
        }
        r
    }

    fn count_pgfault(&mut self, memcg: u16) {
        self.vm.inc(Vm::Pgfault);
        self.memcg_stat(memcg, Mc::Pgfault, 1);
    }

    /// 5.10's `fault_dirty_shared_page` after a write fault on a shared
    /// mapping: when it dirtied the page (or the file has page_mkwrite,
    /// as ext4 and xfs do), it drops mmap_lock to balance dirty pages and
    /// returns VM_FAULT_RETRY; the retried fault, counted again at
    /// handle_mm_fault's entry, finds the PTE done. 6.1 returns
    /// VM_FAULT_COMPLETED there instead ("mm: avoid unnecessary page
    /// fault retires on shared memory types", 5.19).
    pub fn fault_dirty_shared_retry(&mut self, vma: u32, dirtied_or_mkwrite: bool) {
        if self.release.fault_dirty_shared_completes
            || !dirtied_or_mkwrite
            || self.vmas[vma as usize].flags & super::mmap::VM_SHARED == 0
        {
            return;
        }
        self.charge_cost(Fn::FaultEntry, self.costs.fault_entry);
        let memcg = self.vma_memcg(vma);
        self.count_pgfault(memcg);
    }

    /// `handle_mm_fault` → `handle_pte_fault`'s dispatch.
    fn handle_pte_fault(&mut self, vma: u32, idx: usize, write: bool) -> Fault {
        let memcg = self.vma_memcg(vma);
        let task = self.cur_task.expect("faults come from tasks");
        if !std::mem::take(&mut self.tasks[task].fault_waited) {
            self.charge_cost(Fn::FaultEntry, self.costs.fault_entry);
            // To 6.1 handle_mm_fault counts every entry, so a retried
            // fault counts again; 6.12 counts completed faults only
            // (mm_account_fault, see handle_mm_fault).
            if !self.release.pgfault_completed_only {
                self.count_pgfault(memcg);
            }
        }
        let inode = self.vmas[vma as usize].inode;
        // The PMD level matters only with THP on or a PMD already there
        // (a cheap test first: this is every anonymous fault's path).
        if inode == NIL
            && (self.thp.enabled != mmsim_spec::ThpEnabled::Never
                || self.vmas[vma as usize].ptes[idx] & PTE_PMD != 0)
            && self.anon_pmd_fault(vma, idx, write)?
        {
            return Ok(());
        }
        // A shmem fault that may map a PMD takes only the PMD table now;
        // finish_fault allocates the PTE table if it maps a PTE.
        let pmd_first =
            inode != NIL && self.shmem_thp_possible && self.inodes[inode as usize].is_shmem();
        let table = if pmd_first {
            self.pmd_alloc(vma, idx)
        } else {
            self.pte_alloc(vma, idx)
        };
        if table.is_err() {
            return Err(FaultError::Oom);
        }
        // The PTE table's lock, taken by every PTE-level fault
        // (handle_pte_fault's, do_anonymous_page's, do_swap_page's, the
        // fault-around's filemap_map_pages, finish_fault's): the fault's
        // work is priced in its bundle, so the hold is empty. A shmem fault
        // that may map a PMD takes it in finish_fault (shmem.rs).
        if !pmd_first {
            self.pte_lock_empty(vma, idx, Fn::HandlePteFault);
        }
        let pte = self.vmas[vma as usize].ptes[idx];
        if pte_present(pte) && (!write || pte & PTE_WRITE != 0) {
            // An MMU without hardware accessed bits trapped on an old PTE:
            // handle_pte_fault's tail makes it young
            // (ptep_set_access_flags) and the access runs again.
            debug_assert!(!self.hw_pte_young && pte & PTE_YOUNG == 0);
            self.charge_cost(Fn::HandleMmFault, self.costs.pte);
            self.vmas[vma as usize].ptes[idx] = pte | PTE_YOUNG;
            return Ok(());
        }
        if inode != NIL && self.inodes[inode as usize].is_shmem() {
            debug_assert!(pte_none(pte), "shmem PTEs are writable");
            return self.do_shmem_fault(vma, idx, write);
        }
        if inode != NIL {
            return self.do_file_pte_fault(vma, idx, pte, write);
        }
        if pte_none(pte) {
            return self.traced(Fn::DoAnonymousPage, |k| {
                k.do_anonymous_page(vma, idx, write)
            });
        }
        if is_swap_pte(pte) {
            return self.traced(Fn::DoSwapPage, |k| k.do_swap_page(vma, idx, pte, write));
        }
        debug_assert!(write && pte & PTE_WRITE == 0);
        self.traced(Fn::DoWpPage, |k| k.do_wp_page(vma, idx, pte))
    }

    /// `__handle_mm_fault`'s PMD level for a private anonymous VMA: an
    /// empty PMD may take a THP or the huge zero page; a PMD mapping is
    /// written through (`wp_huge_pmd`) or made young. True: the fault is
    /// done; false: it goes on at PTE level (VM_FAULT_FALLBACK, or no
    /// PMD involved).
    fn anon_pmd_fault(&mut self, vma: u32, idx: usize, write: bool) -> Result<bool, FaultError> {
        let pte = self.vmas[vma as usize].ptes[idx];
        if pte & PTE_PMD != 0 {
            if write && pte & PTE_WRITE == 0 {
                return Ok(self.traced(Fn::DoWpPage, |k| k.do_huge_pmd_wp_page(vma, idx)));
            }
            // huge_pmd_set_accessed: an MMU without accessed bits
            // trapped on an old PMD.
            self.charge_cost(Fn::HandleMmFault, self.costs.pte);
            let (first, _) = super::huge_memory::pmd_block(self.vmas[vma as usize].start_vpn, idx);
            let dirty = if write { PTE_DIRTY } else { 0 };
            for p in &mut self.vmas[vma as usize].ptes[first..first + HPAGE_PMD_NR as usize] {
                *p |= PTE_YOUNG | dirty;
            }
            return Ok(true);
        }
        if !self.thp_fault_allowed(vma) {
            return Ok(false);
        }
        self.pmd_alloc(vma, idx).map_err(|_| FaultError::Oom)?;
        if !self.pmd_none(vma, idx) {
            return Ok(false);
        }
        self.traced(Fn::DoAnonymousPage, |k| {
            k.do_huge_pmd_anonymous_page(vma, idx, write)
        })
        .map_err(|_| FaultError::Oom)
    }

    /// `handle_pte_fault` on a VMA mapping a regular file: an empty PTE
    /// goes to `do_fault`; a write to a read-only PTE makes a shared page
    /// writable (`wp_page_shared`) or copies a private mapping's file page;
    /// a private mapping's own (anon) pages fault as anon pages do.
    fn do_file_pte_fault(&mut self, vma: u32, idx: usize, pte: Pte, write: bool) -> Fault {
        if pte_none(pte) {
            return self.traced(Fn::DoFault, |k| k.do_file_fault(vma, idx, write));
        }
        if is_swap_pte(pte) {
            return self.traced(Fn::DoSwapPage, |k| k.do_swap_page(vma, idx, pte, write));
        }
        debug_assert!(write && pte & PTE_WRITE == 0);
        if self.vmas[vma as usize].flags & super::mmap::VM_SHARED != 0 {
            self.traced(Fn::DoWpPage, |k| k.wp_page_shared(vma, idx, pte));
            return Ok(());
        }
        if !self
            .folios
            .get(self.folios.head_of(pte_pfn(pte)))
            .test(PG_ANON)
        {
            return self.traced(Fn::DoWpPage, |k| {
                k.charge_cost(Fn::DoWpPage, k.costs.pte);
                k.wp_page_copy(vma, idx, Some(pte_pfn(pte)))
            });
        }
        self.traced(Fn::DoWpPage, |k| k.do_wp_page(vma, idx, pte))
    }

    /// `do_cow_fault`: a write to an unmapped page of a private file
    /// mapping copies the file page (its folio returned by `filemap_fault`
    /// with a reference) into a new anon page, which is mapped; the file
    /// page is not.
    pub fn do_cow_fault(&mut self, vma: u32, idx: usize, file_pfn: Pfn) -> Fault {
        let memcg = self.vma_memcg(vma);
        let new = match self.alloc_anon_folio(memcg) {
            Ok(p) => p,
            Err(e) => {
                self.folio_put(file_pfn);
                return Err(e);
            }
        };
        let index = self.vmas[vma as usize].pgoff + idx as u64;
        let page = self.folios.folio_page(file_pfn, index);
        let (copy, bytes) = self.copy_page_cost(page);
        self.charge_mem(Fn::DoFault, copy, bytes + PAGE_BYTES);
        self.charge_cost(Fn::DoFault, self.costs.pte);
        self.l2_write(new, 1);
        self.folios.version[new as usize] = self.folios.version[page as usize];
        self.vmas[vma as usize].anon_used = true;
        self.page_add_anon_rmap(new, vma, idx, true);
        self.folio_add_lru(new);
        self.vmas[vma as usize].ptes[idx] = mk_pte(new, PTE_WRITE | PTE_YOUNG | PTE_DIRTY);
        self.folio_put(file_pfn);
        Ok(())
    }

    fn vma_memcg(&self, vma: u32) -> u16 {
        self.mms[self.vmas[vma as usize].mm as usize].memcg
    }

    /// A new order-0 anon folio charged to `memcg`, or OOM.
    pub(super) fn alloc_anon_folio(&mut self, memcg: u16) -> Result<Pfn, FaultError> {
        let pfn = self
            .alloc_page(Gfp::HighUserMovable)
            .ok_or(FaultError::Oom)?;
        self.folios.get_mut(pfn).memcg = memcg;
        if self.try_charge(memcg, 1) != super::memcontrol::Charge::Ok {
            self.free_page(pfn);
            return Err(FaultError::Oom);
        }
        self.folios.get_mut(pfn).set(PG_SWAPBACKED | PG_UPTODATE);
        Ok(pfn)
    }

    /// `page_add_new_anon_rmap` / `page_add_anon_rmap` for an order-0 page.
    /// The first mapping sets the folio's anon_vma: the VMA's own for an
    /// exclusive page, else the root of its fork tree, which every process
    /// that may share the page is linked into (`__page_set_anon_rmap`).
    pub fn page_add_anon_rmap(&mut self, pfn: Pfn, vma: u32, idx: usize, exclusive: bool) {
        self.charge_cost(Fn::AddRmap, self.costs.rmap());
        self.write_mapped_page_lines(pfn, Fn::AddRmap);
        let head = self.folios.head_of(pfn);
        if head != pfn || self.folios.get(head).order > 0 {
            return self.page_add_anon_rmap_large(pfn, vma, exclusive);
        }
        let v = &self.vmas[vma as usize];
        let av = if exclusive {
            v.anon_vma
        } else {
            self.anon_vmas[v.anon_vma as usize].root
        };
        let index = (v.pgoff + idx as u64) as u32;
        let f = self.folios.get_mut(pfn);
        if f.mapcount == 0 {
            f.set(PG_ANON);
            f.mapping = av;
            f.index = index;
        }
        if exclusive {
            f.set(PG_ANON_EXCLUSIVE);
        }
        f.mapcount += 1;
        if f.mapcount == 1 {
            let memcg = f.memcg;
            self.mod_node_page_state(Vm::NrAnonPages, 1);
            self.memcg_stat(memcg, Mc::Anon, 1);
        }
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_anon += 1;
    }

    /// `page_add_anon_rmap` of one page of an anonymous THP mapped back by
    /// a PTE (a swap-in or swapoff finding the THP still in the swap
    /// cache): the folio keeps its anon_vma and index; the page's first
    /// mapping counts in NR_ANON_MAPPED.
    fn page_add_anon_rmap_large(&mut self, page: Pfn, vma: u32, exclusive: bool) {
        let head = self.folios.head_of(page);
        let first = self.folios.page_mapcount_add(page, 1) == 1;
        self.mm_id_add(head, 1, self.vmas[vma as usize].mm);
        if first {
            let memcg = self.folios.get(head).memcg;
            self.mod_node_page_state(Vm::NrAnonPages, 1);
            self.memcg_stat(memcg, Mc::Anon, 1);
        }
        if exclusive {
            self.folios.get_mut(page).set(PG_ANON_EXCLUSIVE);
        }
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].rss_anon += 1;
    }

    fn do_anonymous_page(&mut self, vma: u32, idx: usize, write: bool) -> Fault {
        if !write {
            // The shared zero page: no folio, no charge, no LRU.
            self.charge_cost(Fn::DoAnonymousPage, self.costs.pte);
            self.vmas[vma as usize].ptes[idx] = mk_pte(NIL, PTE_ZERO | PTE_YOUNG);
            return Ok(());
        }
        // anon_vma_prepare: khugepaged looks only at VMAs with one.
        self.vmas[vma as usize].anon_used = true;
        if self.thp.mthp.any() && self.do_anonymous_page_mthp(vma, idx) {
            return Ok(());
        }
        let memcg = self.vma_memcg(vma);
        let pfn = self.alloc_anon_folio(memcg)?;
        self.charge_mem(Fn::DoAnonymousPage, self.costs.clear_page, PAGE_BYTES);
        self.charge_cost(Fn::DoAnonymousPage, self.costs.pte);
        self.l2_write(pfn, 1);
        self.folios.version[pfn as usize] = 0;
        self.page_add_anon_rmap(pfn, vma, idx, true);
        self.folio_add_lru(pfn);
        self.vmas[vma as usize].ptes[idx] = mk_pte(pfn, PTE_WRITE | PTE_YOUNG | PTE_DIRTY);
        Ok(())
    }

    /// `do_swap_page`: the folio from the swap cache, or read it — past
    /// the cache from a SWP_SYNCHRONOUS_IO device when the slot has one
    /// user, else through `swapin_readahead` — then lock it (waiting for
    /// its read: VM_FAULT_RETRY), map it, and settle the slot.
    pub(super) fn do_swap_page(&mut self, vma: u32, idx: usize, pte: Pte, write: bool) -> Fault {
        let entry = pte_swp_entry(pte);
        let (ty, off) = (swp_type(entry), swp_offset(entry));
        let memcg = self.vma_memcg(vma);
        let (pfn, skip_swapcache) = match self.lookup_swap_cache(entry, Some((vma, idx))) {
            Some(pfn) => (pfn, false),
            None => {
                let si = &self.swap[ty];
                let sync = si.flags & SWP_SYNCHRONOUS_IO != 0;
                // 7.3 reads a slot of count 1 through the swap cache too
                // (swapin_sync) and frees the cache at once
                // (should_try_to_free_swap): the same end state and
                // counters as the skip path, which stands for it here.
                let only_user = sync && si.swap_count(off) == 1;
                if only_user
                    && self.features.anon_large_swapin
                    && self.release.large_swapin_skip_swapcache
                    && self.thp.mthp.any()
                    && self.do_swap_page_mthp(vma, idx, pte, write).is_some()
                {
                    return Ok(());
                }
                let large = (sync
                    && self.features.anon_large_swapin
                    && self.release.swapin_sync
                    && self.thp.mthp.any())
                .then(|| self.swapin_sync_mthp(vma, idx, pte))
                .flatten();
                let (pfn, skip) = if let Some(pfn) = large {
                    (pfn, false)
                } else if only_user {
                    (self.swapin_skip_swapcache(entry, memcg)?, true)
                } else if sync && self.release.swapin_sync {
                    let pfn = self.swapin_sync(entry, memcg).ok_or(FaultError::Oom)?;
                    (pfn, false)
                } else {
                    let pfn = self
                        .swapin_readahead(entry, vma, idx, memcg)
                        .ok_or(FaultError::Oom)?;
                    (pfn, false)
                };
                self.vm.inc(Vm::Pgmajfault);
                self.memcg_stat(memcg, Mc::Pgmajfault, 1);
                (pfn, skip)
            }
        };
        // lock_page_or_retry: a read in flight makes the fault wait for it,
        // drop its reference and start over.
        if let Some(done) = self.folio_io_done_at(pfn) {
            self.psi_folio_wait(pfn);
            self.folio_put(pfn);
            return Err(FaultError::Retry(done));
        }
        if self.release.swapin_map_large_swapcache
            && !skip_swapcache
            && self.folios.get(pfn).order > 0
        {
            if let Some(first) = self.swapcache_mthp_range(vma, idx, pfn, entry) {
                return self.map_swapcache_mthp(vma, first, pfn, pte, write);
            }
        }
        self.charge_cost(Fn::DoSwapPage, self.costs.pte);
        // A THP swapped out whole and still in the swap cache: 6.1 maps
        // the one page the entry names (the folio stays large). The page
        // is found with the folio (6.1's do_swap_page: `page =
        // folio_file_page(folio, swp_offset(entry))` right after
        // swap_cache_get_folio), before swap_free and folio_free_swap
        // below: once the folio leaves the swap cache (swap half full) it
        // has no swap entry left to count the page from.
        let page = self.swap_cache_page(pfn, entry);
        let reuse = if self.release.pte_swp_exclusive {
            self.swapin_exclusive(pfn, entry, pte, skip_swapcache, write)
        } else {
            self.swapin_reuse_swap_page(pfn, entry, write)
        };
        let mm = self.vmas[vma as usize].mm as usize;
        self.mms[mm].swapents -= 1;
        let mut flags = PTE_YOUNG;
        let mut write_pending = write;
        if reuse && write {
            flags |= PTE_WRITE | PTE_DIRTY;
            write_pending = false;
        } else if reuse
            && self.release.swapin_read_maps_writable
            && self.vmas[vma as usize].flags & super::mmap::VM_WRITE != 0
        {
            // 6.12 maps an exclusive page writable on a read fault too: a
            // later write takes no fault (and counts no pgreuse).
            flags |= PTE_WRITE;
        }
        self.page_add_anon_rmap(page, vma, idx, reuse);
        self.vmas[vma as usize].ptes[idx] = mk_pte(page, flags);
        if skip_swapcache {
            // swapcache_clear: the slot's last user is gone. 6.1 neither
            // claims nor clears the slot on this path (the model's claim
            // keeps the slot from reuse meanwhile): no lock.
            if self.release.skip_swapcache_prepare {
                self.lock_cluster_or_swap_info(entry);
            }
            self.put_swap_folio_locked(entry);
        }
        if write_pending {
            let pte = self.vmas[vma as usize].ptes[idx];
            return self.do_wp_page(vma, idx, pte);
        }
        Ok(())
    }

    /// 6.1's do_swap_page after the read: drop the PTE's swap reference,
    /// free the swap copy where should_try_to_free_swap says so, and
    /// decide whether the page is mapped exclusive (writable at once on a
    /// write fault): the swap PTE's PTE_SWP_EXCLUSIVE marker (5.19), or
    /// nothing else holding the folio.
    fn swapin_exclusive(
        &mut self,
        pfn: Pfn,
        entry: SwpEntry,
        pte: Pte,
        skip_swapcache: bool,
        write: bool,
    ) -> bool {
        // No modelled device needs stable writes, so a swap PTE's
        // exclusivity holds even while the folio is under writeback.
        let exclusive = skip_swapcache || pte & PTE_SWP_EXCLUSIVE != 0;
        self.swap_free(entry);
        // should_try_to_free_swap; 7.3 frees a SWP_SYNCHRONOUS_IO
        // device's cache always, and on a write to an exclusive page.
        let f = *self.folios.get(pfn);
        let free = if self.release.free_swap_sync_device {
            self.swap[swp_type(entry)].flags & SWP_SYNCHRONOUS_IO != 0 || (write && exclusive)
        } else if self.release.free_swap_large_refs {
            // 1 + folio_nr_pages: a large folio mapped one page at a time.
            write && f.refcount == 1 + f.nr_pages()
        } else {
            write && f.refcount == 2
        };
        if f.test(PG_SWAPCACHE) && (self.mem_cgroup_swap_full(f.memcg) || free) {
            self.folio_free_swap(pfn);
        }
        exclusive || self.folios.get(pfn).refcount == 1
    }

    /// 5.10's do_swap_page after the read: no exclusive marker. A write
    /// fault reuses the page when reuse_swap_page finds no other user
    /// (its mappings plus its slot's swap count, this PTE's included, at
    /// most 1) and takes it out of the swap cache; a read fault maps it
    /// shared, so a later write goes to do_wp_page, which copies while the
    /// swap cache holds a reference (seed 000). The swap copy is otherwise
    /// freed only when swap is half full (mem_cgroup_swap_full).
    fn swapin_reuse_swap_page(&mut self, pfn: Pfn, entry: SwpEntry, write: bool) -> bool {
        let f = *self.folios.get(pfn);
        let swapcount = if f.test(PG_SWAPCACHE) {
            self.swap[swp_type(entry)].swap_count(swp_offset(entry)) as u32
        } else {
            0
        };
        let reuse = write && f.mapcount + swapcount <= 1;
        self.swap_free(entry);
        // reuse_swap_page's delete_from_swap_cache happens before the
        // PTE's swap_free in 5.10; after it here, with the same result:
        // the slot is freed, the page leaves the swap cache dirty.
        let f = *self.folios.get(pfn);
        if f.test(PG_SWAPCACHE) && (reuse || self.mem_cgroup_swap_full(f.memcg)) {
            self.folio_free_swap(pfn);
        }
        reuse
    }

    /// A new order-0 folio for a swap-in: locked and not yet uptodate, the
    /// read fills it.
    pub fn alloc_swapin_folio(&mut self, memcg: u16) -> Option<Pfn> {
        let pfn = if self.zswap.pf_memalloc {
            // zswap's writeback from a store in reclaim: PF_MEMALLOC's
            // allocation (no reclaim, below the watermarks) and forced
            // charge.
            let p = self.alloc_page(Gfp::Memalloc)?;
            self.folios.get_mut(p).memcg = memcg;
            self.try_charge_memalloc(memcg, 1);
            self.folios.get_mut(p).set(PG_SWAPBACKED | PG_UPTODATE);
            p
        } else {
            self.alloc_anon_folio(memcg).ok()?
        };
        let f = self.folios.get_mut(pfn);
        f.clear(PG_UPTODATE);
        f.set(PG_LOCKED);
        Some(pfn)
    }

    /// The skip-swapcache read: claim the slot with SWAP_HAS_CACHE, a new
    /// folio charged to the swap's memcg, refault detection from the
    /// shadow, onto the LRU, and a synchronous read from zram.
    fn swapin_skip_swapcache(&mut self, entry: u32, mm_memcg: u16) -> Result<Pfn, FaultError> {
        let (ty, off) = (swp_type(entry), swp_offset(entry) as usize);
        // swapcache_prepare: nobody else can hold the slot in a sequential
        // simulation of one fault at a time.
        debug_assert_eq!(self.swap[ty].swap_map[off] & SWAP_HAS_CACHE, 0);
        if self.release.skip_swapcache_prepare {
            self.lock_cluster_or_swap_info(entry);
        }
        self.swap[ty].swap_map[off] |= SWAP_HAS_CACHE;
        let memcg = self.swapin_memcg(entry, mm_memcg);
        let pfn = match self.alloc_anon_folio(memcg) {
            Ok(p) => p,
            Err(e) => {
                self.swap[ty].swap_map[off] &= !SWAP_HAS_CACHE;
                return Err(e);
            }
        };
        if let Some(shadow) = self.get_shadow_from_swap_cache(entry) {
            self.workingset_refault(pfn, shadow);
        }
        self.folio_add_lru(pfn);
        if self.swap_read_folio_zeromap(pfn, entry) {
            return Ok(pfn);
        }
        // swap_readpage(page, true): the same memory stall as through the
        // swap cache.
        let psi = self.swap_read_memstall_enter(pfn);
        if self.frontswap_load(pfn, entry) {
            self.psi_memstall_leave(psi);
            return Ok(pfn);
        }
        self.zswap_folio_swapin(pfn);
        self.charge_cost(Fn::SwapReadpage, self.costs.swap_read);
        let version = self.zram_read_page(ty, off as u32);
        self.l2_write(pfn, 1);
        self.folios.version[pfn as usize] = version;
        self.vm.inc(Vm::Pswpin);
        let memcg = self.folios.get(pfn).memcg;
        self.memcg_stat(memcg, Mc::Pswpin, 1);
        self.psi_memstall_leave(psi);
        Ok(pfn)
    }

    /// `do_wp_page` for a write to a present, read-only PTE.
    pub(super) fn do_wp_page(&mut self, vma: u32, idx: usize, pte: Pte) -> Fault {
        self.charge_cost(Fn::DoWpPage, self.costs.pte);
        if pte & PTE_ZERO != 0 {
            return self.wp_page_copy(vma, idx, None);
        }
        let pfn = pte_pfn(pte);
        if self.wp_can_reuse_anon(pfn) {
            let large = self.folios.get(self.folios.head_of(pfn)).order > 0;
            if !self.folios.get(pfn).test(PG_ANON_EXCLUSIVE) && self.features.wp_reuse_swapcache {
                if large && self.release.large_folio_mm_id {
                    // 7.3 makes only the page exclusive: a large folio
                    // keeps its anon_vma (no folio_move_anon_rmap).
                    self.folios.get_mut(pfn).set(PG_ANON_EXCLUSIVE);
                } else {
                    self.page_move_anon_rmap(pfn, vma);
                }
            }
            self.wp_page_reuse(vma, idx, pte);
            return Ok(());
        }
        self.wp_page_copy(vma, idx, Some(pfn))
    }

    /// The anon reuse decision. With wp_reuse_swapcache (6.1): reuse a
    /// PageAnonExclusive page at once; otherwise drain the LRU batch, drop
    /// an unneeded swap-cache copy, and reuse if nothing else holds the
    /// page. Without it (5.10): reuse only if the refcount is exactly 1.
    fn wp_can_reuse_anon(&mut self, pfn: Pfn) -> bool {
        if !self.features.wp_reuse_swapcache {
            let f = self.folios.get(pfn);
            return f.refcount == 1 && f.mapcount == 1;
        }
        if self.folios.get(pfn).test(PG_ANON_EXCLUSIVE) {
            return true;
        }
        // The folio's references (a PTE-mapped THP's are many: it is
        // copied).
        let head = self.folios.head_of(pfn);
        let f = *self.folios.get(head);
        // 6.12's wp_can_reuse_anon_folio never reuses a large folio (it
        // gives it back sooner); 7.3 reuses one that only this mm maps;
        // 6.1 reuses one its last mapping holds.
        if f.order > 0 && self.release.large_folio_mm_id {
            return self.wp_can_reuse_large_anon_folio(head);
        }
        if f.order > 0 && self.release.wp_no_large_reuse {
            return false;
        }
        if f.refcount > 3 {
            return false;
        }
        if !f.test(PG_LRU) {
            self.lru_add_drain();
        }
        let f = *self.folios.get(head);
        if f.refcount > 1 + f.test(PG_SWAPCACHE) as u32 {
            return false;
        }
        // folio_trylock: the folio's line, which a process that shared the
        // page may have written dropping its mapping.
        self.write_page_line(head, Fn::DoWpPage);
        if f.test(PG_SWAPCACHE) {
            self.folio_free_swap(head);
        }
        if self.folios.get(head).refcount != 1 {
            return false;
        }
        true
    }

    /// 7.3's `__wp_can_reuse_large_anon_folio`: a large folio mapped by
    /// more than one PTE, all of one mm (FOLIO_MM_IDS_SHARED clear), with
    /// no reference but its mappings' once an unneeded swap-cache copy
    /// is dropped. A folio mapped once is copied instead, so that it can
    /// be freed.
    fn wp_can_reuse_large_anon_folio(&mut self, head: Pfn) -> bool {
        if self.folios.get(head).mapcount <= 1 || self.mm_ids_shared(head) {
            return false;
        }
        if self.folios.get(head).test(PG_SWAPCACHE) {
            // folio_trylock, folio_free_swap (which fails while a swap PTE
            // still holds a slot).
            self.folio_free_swap(head);
        }
        let f = self.folios.get(head);
        f.mapcount == f.refcount
    }

    /// `page_move_anon_rmap`: the page is this VMA's alone now.
    fn page_move_anon_rmap(&mut self, pfn: Pfn, vma: u32) {
        let av = self.vmas[vma as usize].anon_vma;
        let head = self.folios.head_of(pfn);
        self.folios.get_mut(head).mapping = av;
        self.folios.get_mut(pfn).set(PG_ANON_EXCLUSIVE);
    }

    fn wp_page_reuse(&mut self, vma: u32, idx: usize, pte: Pte) {
        self.charge_cost(Fn::DoWpPage, self.costs.pte);
        self.vmas[vma as usize].ptes[idx] = pte | PTE_WRITE | PTE_DIRTY | PTE_YOUNG;
        self.vm.inc(Vm::Pgreuse);
    }

    /// `wp_page_copy`: a new private page (zeroed for the zero page, else a
    /// copy) replaces the old mapping; the copy starts inactive and loses
    /// the old page's LRU history.
    pub fn wp_page_copy(&mut self, vma: u32, idx: usize, old: Option<Pfn>) -> Fault {
        // do_wp_page's get_page(vmf->page): the copy's allocation may
        // reclaim, and reclaim may unmap the page being copied, but
        // `__remove_mapping`'s refcount freeze fails on this reference,
        // so the page stays (in the swap cache) instead of being freed
        // into the very allocation that is waiting for it.
        let old_head = old.map(|o| self.folios.head_of(o));
        if let Some(h) = old_head {
            self.folios.get_mut(h).refcount += 1;
        }
        let done = self.wp_page_copy_ref(vma, idx, old);
        if let Some(h) = old_head {
            self.folio_put(h);
        }
        done
    }

    /// `wp_page_copy` with the old page's reference held.
    fn wp_page_copy_ref(&mut self, vma: u32, idx: usize, old: Option<Pfn>) -> Fault {
        // anon_vma_prepare: a copy of the zero page gives the VMA one too.
        self.vmas[vma as usize].anon_used = true;
        let memcg = self.vma_memcg(vma);
        let orig = self.vmas[vma as usize].ptes[idx];
        let new = self.alloc_anon_folio(memcg)?;
        if self.vmas[vma as usize].ptes[idx] != orig {
            // The allocation's reclaim unmapped the old page: the PTE is
            // not the one that faulted (`pte_same` fails), so the new page
            // goes back and the access faults again.
            self.folio_put(new);
            return Ok(());
        }
        if let Some(o) = old {
            // copy_user_highpage reads the old page (the new one is
            // written by its allocation, page_alloc.rs).
            self.guest_frame(o, false);
        }
        // The new page is written whole (membw.rs); a copy reads the old.
        let ((work, read), version) = match old {
            None => ((self.costs.clear_page, 0), 0),
            Some(o) => (self.copy_page_cost(o), self.folios.version[o as usize]),
        };
        self.l2_write(new, 1);
        self.charge_mem(Fn::DoWpPage, work, read + PAGE_BYTES);
        self.charge_cost(Fn::DoWpPage, self.costs.pte + self.costs.tlb_flush);
        self.mmu_notifier_invalidate_range(vma, idx, 1);
        // ptep_clear_flush_notify of the old PTE.
        self.flush_tlb_mm_range(self.vmas[vma as usize].mm, false);
        self.folios.version[new as usize] = version;
        self.page_add_anon_rmap(new, vma, idx, true);
        self.folio_add_lru(new);
        self.vmas[vma as usize].ptes[idx] = mk_pte(new, PTE_WRITE | PTE_DIRTY | PTE_YOUNG);
        if let Some(o) = old.filter(|&o| !self.folios.get(self.folios.head_of(o)).test(PG_ANON)) {
            // A private file mapping's page: MM_FILEPAGES to MM_ANONPAGES.
            let mm = self.vmas[vma as usize].mm as usize;
            self.mms[mm].rss_file -= 1;
            self.page_remove_file_rmap(o);
            self.folio_put(self.folios.head_of(o));
            return Ok(());
        }
        if let Some(o) = old {
            let mm = self.vmas[vma as usize].mm as usize;
            self.mms[mm].rss_anon -= 1;
            self.page_remove_rmap(o, vma);
            let head = self.folios.head_of(o);
            self.free_swap_cache(head);
            self.folio_put(head);
        }
        Ok(())
    }
}

impl Kernel {
    /// `copy_page_range` from parent VMA `src` to child VMA `dst`: anon
    /// pages become shared copy-on-write (both PTEs write-protected, the
    /// page no longer exclusive, one more map and reference), swap entries
    /// gain a reference and lose their exclusive mark, zero-page PTEs are
    /// copied.
    pub fn copy_page_range(&mut self, src: u32, dst: u32) -> Result<(), crate::SimError> {
        let n = self.vmas[src as usize].pages as usize;
        let dst_mm = self.vmas[dst as usize].mm as usize;
        for idx in 0..n {
            // copy_pte_range allocates the child's table before it reads
            // the parent's PTEs under the lock: the table's memcg charge
            // may reclaim, and reclaim may unmap the very page this PTE
            // maps, so the PTE is read after the allocation.
            let first = self.vmas[src as usize].ptes[idx];
            let start = self.vmas[src as usize].start_vpn;
            if first & PTE_PMD != 0
                && super::huge_memory::pmd_block(start, idx).0 == idx
                && self.traced(Fn::CopyPageRange, |k| k.copy_huge_pmd(src, dst, idx))?
            {
                // The block's other entries are skipped below.
                self.vmas[dst as usize].user_version[idx] =
                    self.vmas[src as usize].user_version[idx];
                continue;
            }
            let pte = self.vmas[src as usize].ptes[idx];
            if !pte_none(pte) && pte & PTE_PMD == 0 {
                self.pte_alloc(dst, idx)?;
            }
            // copy_pte_range takes the parent's table lock once per table
            // (the child's new table is no other CPU's). An empty hold:
            // the parent's mmap_lock, held for writing, keeps its threads'
            // faults out, and a reclaimer's walk of these pages meets the
            // copy only for the microseconds of a table.
            self.walk_pte_lock_empty(src, idx, 0, Fn::CopyPteRange);
            let pte = self.vmas[src as usize].ptes[idx];
            // What the child expects is the parent's as of now, not as of
            // the VMA's copy: a table allocation's reclaim may have
            // discarded a lazily freed page of the parent since
            // (try_to_unmap_lazyfree: it reads zeros from then on).
            let expected = self.vmas[src as usize].user_version[idx];
            self.vmas[dst as usize].user_version[idx] = expected;
            if pte_none(pte) {
                continue;
            }
            if pte & PTE_PMD != 0 {
                // A page of a PMD copy_huge_pmd copied at its first.
                continue;
            }
            self.charge_cost(Fn::CopyPageRange, self.costs.copy_pte);
            if is_swap_pte(pte) {
                self.swap_duplicate(pte_swp_entry(pte));
                let shared = pte & !PTE_SWP_EXCLUSIVE;
                self.vmas[src as usize].ptes[idx] = shared;
                self.vmas[dst as usize].ptes[idx] = shared;
                self.mms[dst_mm].swapents += 1;
                self.add_to_mmlist(dst_mm as u32);
                continue;
            }
            if pte & PTE_ZERO != 0 {
                self.vmas[dst as usize].ptes[idx] = pte & !PTE_YOUNG;
                continue;
            }
            let page = pte_pfn(pte);
            self.write_mapped_page_lines(page, Fn::CopyPageRange);
            let head = self.folios.head_of(page);
            if !self.folios.get(head).test(PG_ANON) {
                // page_dup_file_rmap: a private file mapping's page-cache
                // page, read-only already.
                self.folios.get_mut(head).refcount += 1;
                self.folios.page_mapcount_add(page, 1);
                self.vmas[dst as usize].ptes[idx] = pte & !PTE_YOUNG;
                self.mms[dst_mm].rss_file += 1;
                continue;
            }
            self.folios.get_mut(head).refcount += 1;
            self.folios.page_mapcount_add(page, 1);
            if self.folios.get(head).order > 0 {
                self.mm_id_add(head, 1, dst_mm as u32);
            }
            // page_try_dup_anon_rmap: no pins exist, so always shared.
            self.folios.get_mut(page).clear(PG_ANON_EXCLUSIVE);
            let wp = pte & !PTE_WRITE;
            self.vmas[src as usize].ptes[idx] = wp;
            self.vmas[dst as usize].ptes[idx] = wp & !PTE_YOUNG;
            self.mms[dst_mm].rss_anon += 1;
        }
        Ok(())
    }
}

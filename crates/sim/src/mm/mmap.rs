//! Address spaces: per-task mm, VMAs with dense PTE arrays, anon_vmas for
//! the reverse map; mmap and munmap of private anonymous memory.

use super::folio::*;
use super::pgtable::*;
use crate::cost_model;
use crate::kernel::Kernel;
use crate::vmstat::{Mc, Vm};

/// A PTE table maps 512 pages (2 MiB); a PMD table 512 PTE tables (1 GiB).
const PTE_SHIFT: u32 = 9;
const PMD_SHIFT: u32 = 18;

/// Which page table's split lock a walk or fault takes.
#[derive(Clone, Copy)]
enum TableLock {
    Pte,
    Pmd,
}

/// Tables of 2^shift pages that the range [start, start + pages) touches.
fn table_span(start: u64, pages: u64, shift: u32) -> usize {
    (((start + pages - 1) >> shift) - (start >> shift) + 1) as usize
}

pub const VM_READ: u32 = 1 << 0;
pub const VM_WRITE: u32 = 1 << 1;
pub const VM_EXEC: u32 = 1 << 2;
pub const VM_SHARED: u32 = 1 << 3;
/// madvise(MADV_SEQUENTIAL) / (MADV_RANDOM).
pub const VM_SEQ_READ: u32 = 1 << 15;
pub const VM_RAND_READ: u32 = 1 << 16;
pub const VM_LOCKED: u32 = 1 << 13;
/// madvise(MADV_HUGEPAGE) / (MADV_NOHUGEPAGE).
pub const VM_HUGEPAGE: u32 = 1 << 29;
pub const VM_NOHUGEPAGE: u32 = 1 << 30;

/// A private file mapping's `user_version` for a page not copied yet: the
/// user sees the file's contents.
pub const FOLLOW_FILE: u32 = u32::MAX;

pub struct Mm {
    pub memcg: u16,
    pub vmas: Vec<u32>,
    /// Next free virtual page number for a new mapping.
    pub next_vpn: u64,
    /// MM_ANONPAGES, MM_SWAPENTS and MM_SHMEMPAGES.
    pub rss_anon: u64,
    pub swapents: u64,
    pub rss_shmem: u64,
    /// MM_FILEPAGES: regular files' pages mapped.
    pub rss_file: u64,
    /// `mm->lru_gen.bitmap` (node 0): run since the multi-gen LRU's last
    /// page-table walk looked at it (set when a task of it is switched in).
    pub lru_gen_used: bool,
    /// On its memcg's `mm_list` (from creation until its task exits).
    pub lru_gen_listed: bool,
    /// MMF_HUGE_ZERO_PAGE: holds a reference to the huge zero page.
    pub huge_zero: bool,
    /// MMF_VM_HUGEPAGE: on khugepaged's list.
    pub khugepaged_slot: bool,
    /// Its last task has exited (mm_users is 0).
    pub exited: bool,
    /// `mm_cpumask`: the CPUs that have it loaded (tlb.rs).
    pub cpumask: super::tlb::CpuMask,
}

impl Mm {
    /// `mm_counter_file`: the RSS counter a page-cache page mapped here
    /// counts in, MM_SHMEMPAGES for a swap-backed (shmem) one, else
    /// MM_FILEPAGES.
    #[inline]
    pub fn file_counter(&mut self, swapbacked: bool) -> &mut u64 {
        if swapbacked {
            &mut self.rss_shmem
        } else {
            &mut self.rss_file
        }
    }
}

pub struct Vma {
    pub mm: u32,
    pub start_vpn: u64,
    pub pages: u64,
    /// vm_pgoff: linear index of the first page. The kernel uses the
    /// address for an anon VMA; any base serves as long as the VMAs of one
    /// anon_vma agree, and 0 keeps folio indices within 32 bits.
    pub pgoff: u64,
    pub flags: u32,
    pub anon_vma: u32,
    pub ptes: Vec<Pte>,
    /// What the user last wrote to each page (0 = never written, reads as
    /// zeros). User-space knowledge, kept beside the PTEs for the integrity
    /// check; the kernel never reads it.
    pub user_version: Vec<u32>,
    /// The PTE tables (one per 2 MiB of address space) and PMD tables (one
    /// per 1 GiB) the VMA's range has allocated, NIL where none yet.
    /// Simplification: two VMAs never share a table here (mmsim leaves a
    /// gap between mappings); sharing would save at most one table per
    /// mapping boundary.
    pub pte_tables: Vec<Pfn>,
    pub pmd_tables: Vec<Pfn>,
    pub live: bool,
    /// `swap_readahead_info`: VMA swap readahead's last fault, window and
    /// hits (packed as the kernel packs them; 0 = never set).
    pub swap_readahead_info: u64,
    /// The anon_vmas this VMA is linked into (its `anon_vma_chain`): its
    /// own first, then its ancestors'.
    pub avc: Vec<u32>,
    /// The inode a file or shmem mapping maps (NIL for private anon).
    pub inode: u32,
    /// The mapped file's readahead state (`vm_file->f_ra`).
    pub ra: super::readahead::FileRa,
    /// A private file mapping that has copied a page (its anon_vma is in
    /// use, so fork copies its page tables).
    pub anon_used: bool,
    /// What its pages hold once written (`PageContents`; 0: no content
    /// stated).
    pub content: u32,
}

/// `anon_vma`: the VMAs an anon folio's rmap walk visits. A forked
/// child's VMA gets its own anon_vma and is also linked into its parent's
/// and every ancestor's (the anon_vma_chain), so a walk from a page the
/// parent faulted in finds the child's mappings of it.
pub struct AnonVma {
    pub vmas: Vec<u32>,
    /// The anon_vma at the top of the fork tree.
    pub root: u32,
}

impl Kernel {
    /// `pte_alloc` / `pmd_alloc` for page `idx` of `vma`: the tables that
    /// map it, allocated and charged to the mm's memcg on first use
    /// (GFP_PGTABLE_USER includes __GFP_ACCOUNT).
    #[inline]
    pub fn pte_alloc(&mut self, vma: u32, idx: usize) -> Result<(), crate::SimError> {
        let v = &self.vmas[vma as usize];
        let va = v.start_vpn + idx as u64;
        let pte = ((va >> PTE_SHIFT) - (v.start_vpn >> PTE_SHIFT)) as usize;
        // A PTE table implies its PMD table: the common case is one load.
        if v.pte_tables[pte] != NIL {
            return Ok(());
        }
        debug_assert!(v.ptes[idx] & PTE_PMD == 0, "a PMD maps the block");
        self.pmd_alloc(vma, idx)?;
        // pmd_install of the fault's preallocated table, if it has one,
        // under the PMD table's lock (an empty hold: the install's work is
        // in its caller's bundle).
        let p = match self.fault.take_prealloc_pte() {
            Some(p) => p,
            None => self.alloc_pgtable(vma)?,
        };
        self.pmd_lock_empty(vma, idx, cost_model::Fn::PmdInstall);
        self.vmas[vma as usize].pte_tables[pte] = p;
        Ok(())
    }

    /// The split lock of the `t` table above page `idx` of `vma`: a PTE
    /// table's (`pte_lockptr`) or a PMD table's (`pmd_lockptr`), the
    /// spinlock in the table page's struct page. Debian's x86-64 kernels
    /// split both, NR_CPUS being far above SPLIT_PTLOCK_CPUS. mmsim gives
    /// each VMA its own tables.
    fn table_line(&self, t: TableLock, vma: u32, idx: usize) -> crate::cacheline::Line {
        match t {
            TableLock::Pte => crate::cacheline::Line::Ptl {
                vma,
                table: self.pmd_table(vma, idx) as u32,
            },
            TableLock::Pmd => {
                let v = &self.vmas[vma as usize];
                let va = v.start_vpn + idx as u64;
                crate::cacheline::Line::Pmd {
                    vma,
                    table: ((va >> PMD_SHIFT) - (v.start_vpn >> PMD_SHIFT)) as u32,
                }
            }
        }
    }

    /// The `t` table's lock from kernel function `f`, with more than one
    /// CPU, around work priced inside the section: held until
    /// `spin_unlock`.
    #[cold]
    #[inline(never)]
    fn table_lock_smp(
        &mut self,
        t: TableLock,
        vma: u32,
        idx: usize,
        f: cost_model::Fn,
    ) -> Option<crate::spinlock::SpinGuard> {
        let line = self.table_line(t, vma, idx);
        self.traced(f, |k| k.spin_lock(line))
    }

    /// The `t` table's lock from kernel function `f`, with more than one
    /// CPU, around work priced outside the section: an empty hold.
    #[cold]
    #[inline(never)]
    fn table_lock_empty_smp(&mut self, t: TableLock, vma: u32, idx: usize, f: cost_model::Fn) {
        let line = self.table_line(t, vma, idx);
        self.traced(f, |k| k.spin_lock_empty(line));
    }

    /// `pte_offset_map_lock` from kernel function `f` around work priced
    /// inside the section, held until `spin_unlock`: None with one CPU.
    #[inline(always)]
    pub fn pte_lock(
        &mut self,
        vma: u32,
        idx: usize,
        f: cost_model::Fn,
    ) -> Option<crate::spinlock::SpinGuard> {
        if self.cpus.len() == 1 {
            return None;
        }
        self.table_lock_smp(TableLock::Pte, vma, idx, f)
    }

    /// `pte_offset_map_lock` … `pte_unmap_unlock` from kernel function `f`
    /// around work priced in a bundle outside the section (a fault's, a
    /// zap's, a young bit's test): the lock's line comes over and other
    /// CPUs' holds are waited out, but no one waits for this one.
    #[inline(always)]
    pub fn pte_lock_empty(&mut self, vma: u32, idx: usize, f: cost_model::Fn) {
        if self.cpus.len() > 1 {
            self.table_lock_empty_smp(TableLock::Pte, vma, idx, f);
        }
    }

    /// A zap's walk reaching page `idx` of `vma` (`first`: where it
    /// started): `zap_pte_range` takes each PTE table's lock once for its
    /// entries. An empty hold: mmsim frees each page at its PTE, work the
    /// kernel does after the lock (`release_pages`), so the loop's time is
    /// not the section's.
    #[inline]
    pub fn zap_pte_lock(&mut self, vma: u32, idx: usize, first: usize) {
        self.walk_pte_lock_empty(vma, idx, first, cost_model::Fn::ZapPteRange);
    }

    /// A page-table walk from kernel function `f` reaching page `idx` of
    /// `vma` (`first`: where it started) takes each PTE table's lock once
    /// for its entries (a block with no table, or mapped by a PMD, has
    /// none), around work priced outside the section: an empty hold.
    #[inline]
    pub fn walk_pte_lock_empty(&mut self, vma: u32, idx: usize, first: usize, f: cost_model::Fn) {
        if self.cpus.len() > 1 {
            self.walk_pte_lock_empty_smp(vma, idx, first, f);
        }
    }

    #[cold]
    #[inline(never)]
    fn walk_pte_lock_empty_smp(&mut self, vma: u32, idx: usize, first: usize, f: cost_model::Fn) {
        let va = self.vmas[vma as usize].start_vpn + idx as u64;
        if idx != first && !va.is_multiple_of(1 << PTE_SHIFT) {
            return;
        }
        if self.has_pte_table(vma, idx) {
            self.table_lock_empty_smp(TableLock::Pte, vma, idx, f);
        }
    }

    /// `pte_offset_map_lock` from kernel function `f` for the table of
    /// page `idx` of `vma`, held until `spin_unlock`: None with one CPU,
    /// or where the block has no PTE table (none, or mapped by a PMD).
    #[inline]
    pub fn pte_table_lock(
        &mut self,
        vma: u32,
        idx: usize,
        f: cost_model::Fn,
    ) -> Option<crate::spinlock::SpinGuard> {
        match self.cpus.len() > 1 && self.has_pte_table(vma, idx) {
            true => self.table_lock_smp(TableLock::Pte, vma, idx, f),
            false => None,
        }
    }

    /// The split lock of the PMD table above page `idx` of `vma`
    /// (`pmd_lockptr`: the spinlock in the PMD table page's struct page;
    /// x86-64 splits PMD locks as it does PTE locks). `pmd_lock` from
    /// kernel function `f` around work priced inside the section, held
    /// until `spin_unlock`: None with one CPU.
    #[inline]
    pub fn pmd_lock(
        &mut self,
        vma: u32,
        idx: usize,
        f: cost_model::Fn,
    ) -> Option<crate::spinlock::SpinGuard> {
        if self.cpus.len() == 1 {
            return None;
        }
        self.table_lock_smp(TableLock::Pmd, vma, idx, f)
    }

    /// `pmd_lock` around work priced outside the section (an empty hold:
    /// it waits for another CPU's hold and moves the line, and no one
    /// waits for it). Nothing with one CPU.
    #[inline]
    pub fn pmd_lock_empty(&mut self, vma: u32, idx: usize, f: cost_model::Fn) {
        if self.cpus.len() > 1 {
            self.table_lock_empty_smp(TableLock::Pmd, vma, idx, f);
        }
    }

    /// Whether page `idx` of `vma` has a PTE table (not a PMD mapping or
    /// an empty PMD).
    pub(crate) fn has_pte_table(&self, vma: u32, idx: usize) -> bool {
        self.vmas[vma as usize].pte_tables[self.pmd_table(vma, idx)] != NIL
    }

    /// The index of the PMD table above page `idx` of `vma`.
    fn pmd_index(&self, vma: u32, idx: usize) -> usize {
        let v = &self.vmas[vma as usize];
        let va = v.start_vpn + idx as u64;
        ((va >> PMD_SHIFT) - (v.start_vpn >> PMD_SHIFT)) as usize
    }

    /// The PMD table above page `idx` of `vma` (NIL: none).
    pub(crate) fn pmd_table_pfn(&self, vma: u32, idx: usize) -> Pfn {
        self.vmas[vma as usize].pmd_tables[self.pmd_index(vma, idx)]
    }

    /// `pmd_alloc` for page `idx` of `vma`: the PMD table above it (a
    /// fault that may map a PMD allocates no PTE table first).
    pub fn pmd_alloc(&mut self, vma: u32, idx: usize) -> Result<(), crate::SimError> {
        let pmd = self.pmd_index(vma, idx);
        if self.vmas[vma as usize].pmd_tables[pmd] == NIL {
            let p = self.alloc_pgtable(vma)?;
            self.vmas[vma as usize].pmd_tables[pmd] = p;
        }
        Ok(())
    }

    pub(crate) fn alloc_pgtable(&mut self, vma: u32) -> Result<Pfn, crate::SimError> {
        let memcg = self.mms[self.vmas[vma as usize].mm as usize].memcg;
        let pfn = self
            .alloc_page(super::page_alloc::Gfp::HighUserMovable)
            .ok_or(crate::SimError::Oom)?;
        if self.try_charge_kmem(memcg, 1) != super::memcontrol::Charge::Ok {
            self.free_page(pfn);
            return Err(crate::SimError::Oom);
        }
        self.charge_mem(
            cost_model::Fn::PageAlloc,
            self.costs.clear_page,
            crate::membw::PAGE_BYTES,
        );
        self.l2_write(pfn, 1);
        let f = self.folios.get_mut(pfn);
        f.flags = PG_PGTABLE | PG_PMD_YOUNG;
        f.memcg = memcg;
        self.mod_node_page_state(Vm::NrPageTablePages, 1);
        self.pgtable_stat(memcg, 1);
        Ok(pfn)
    }

    /// `pte_alloc_one` for `vmf->prealloc_pte`: a PTE table allocated
    /// (and charged) before fault-around looks at the page cache, so that
    /// no reclaim runs between its lookups and its mappings.
    pub fn prealloc_pte_table(&mut self, vma: u32) -> Result<(), crate::SimError> {
        let table = self.alloc_pgtable(vma)?;
        self.fault.set_prealloc_pte(table);
        Ok(())
    }

    /// The end of a fault: a preallocated table no mapping used (a PMD
    /// went in instead) is freed (`pte_free`).
    #[inline]
    pub fn free_prealloc_pte(&mut self) {
        if let Some(p) = self.fault.take_prealloc_pte() {
            self.pte_free(p);
        }
    }

    /// `pte_free`: a page-table page uncharged and freed.
    pub fn pte_free(&mut self, p: Pfn) {
        let memcg = self.folios.get(p).memcg;
        self.mod_node_page_state(Vm::NrPageTablePages, -1);
        self.pgtable_stat(memcg, -1);
        if !self.is_root(memcg) {
            self.mem_cgroup_uncharge(memcg, 1);
        }
        self.free_page(p);
    }

    /// A page table's NR_PAGETABLE in its memcg. The root's tables are
    /// charged to no memcg (no objcg): the kernel updates only the node
    /// counter, so the root's count here makes no rstat update.
    fn pgtable_stat(&mut self, memcg: u16, n: i64) {
        if self.is_root(memcg) {
            self.memcgs[memcg as usize].stat.add(Mc::Pagetables, n);
        } else {
            self.memcg_stat(memcg, Mc::Pagetables, n);
        }
    }

    /// `free_pgtables`: a VMA's tables, uncharged and freed.
    /// Whether any was freed (the zap's `freed_tables`).
    fn free_pgtables(&mut self, vma: u32) -> bool {
        let v = &mut self.vmas[vma as usize];
        let tables: Vec<Pfn> = v
            .pte_tables
            .drain(..)
            .chain(v.pmd_tables.drain(..))
            .filter(|&p| p != NIL)
            .collect();
        let freed = !tables.is_empty();
        for p in tables {
            self.pte_free(p);
        }
        freed
    }

    pub fn mm_alloc(&mut self, memcg: u16) -> u32 {
        self.mms.push(Mm {
            memcg,
            vmas: Vec::new(),
            next_vpn: 0x1000,
            rss_anon: 0,
            swapents: 0,
            rss_shmem: 0,
            rss_file: 0,
            // exec_mmap's lru_gen_use_mm: it runs next.
            lru_gen_used: true,
            lru_gen_listed: false,
            huge_zero: false,
            khugepaged_slot: false,
            exited: false,
            cpumask: Default::default(),
        });
        let mm = (self.mms.len() - 1) as u32;
        self.lru_gen_add_mm(mm);
        mm
    }

    /// mmap(MAP_PRIVATE|MAP_ANONYMOUS, PROT_READ|PROT_WRITE). The anon_vma
    /// is set up here rather than at the first fault (`anon_vma_prepare`);
    /// nothing observable depends on when.
    pub fn mmap_anon(&mut self, mm: u32, pages: u64) -> u32 {
        let mut start = self.mms[mm as usize].next_vpn;
        if self.anon_large_possible {
            // 6.1 does not align anonymous mappings to 2 MiB (6.7 does,
            // for lengths in whole 2 MiB); with large anonymous folios
            // possible the oracle's runner maps each region 2 MiB-aligned
            // so that both engines see the same blocks, and so does mmsim.
            start = start.next_multiple_of(HPAGE_PMD_NR);
        }
        // A guard gap between mappings, as the kernel's top-down allocator
        // would rarely place them adjacent; keeps VMAs apart for readahead.
        self.mms[mm as usize].next_vpn = start + pages + 512;
        let av = self.anon_vmas.len() as u32;
        let id = self.vmas.len() as u32;
        self.anon_vmas.push(AnonVma {
            vmas: vec![id],
            root: av,
        });
        self.vmas.push(Vma {
            mm,
            start_vpn: start,
            pages,
            pgoff: 0,
            flags: VM_READ | VM_WRITE,
            anon_vma: av,
            ptes: vec![0; pages as usize],
            user_version: vec![0; pages as usize],
            pte_tables: vec![NIL; table_span(start, pages, PTE_SHIFT)],
            pmd_tables: vec![NIL; table_span(start, pages, PMD_SHIFT)],
            live: true,
            swap_readahead_info: 0,
            avc: vec![av],
            inode: NIL,
            ra: Default::default(),
            anon_used: false,
            content: 0,
        });
        self.mms[mm as usize].vmas.push(id);
        id
    }

    /// mmap(MAP_SHARED) of shmem inode `inode` from page `offset`: no
    /// anon_vma; the inode's i_mmap knows the VMA.
    pub fn mmap_shmem(&mut self, mm: u32, inode: u32, offset: u64, pages: u64) -> u32 {
        let align = self.shmem_mapping_align(inode, offset, pages);
        if align > 0 {
            // shmem_get_unmapped_area: the address agrees with the file
            // offset modulo the large folio size, so it can be mapped whole.
            let next = self.mms[mm as usize].next_vpn;
            let want = offset % align;
            let start = next + (want + align - next % align) % align;
            self.mms[mm as usize].next_vpn = start;
        }
        self.mmap_file(mm, inode, offset, pages, true, false)
    }

    /// mmap of inode `inode` from page `offset`, MAP_SHARED or MAP_PRIVATE
    /// (then with an anon_vma for the pages writes copy), PROT_READ |
    /// PROT_WRITE, and PROT_EXEC if `exec`. The file's readahead state
    /// starts fresh (each mapping opens the file anew).
    pub fn mmap_file(
        &mut self,
        mm: u32,
        inode: u32,
        offset: u64,
        pages: u64,
        shared: bool,
        exec: bool,
    ) -> u32 {
        let start = self.mms[mm as usize].next_vpn;
        self.mms[mm as usize].next_vpn = start + pages + 512;
        let id = self.vmas.len() as u32;
        let mut flags = VM_READ | VM_WRITE;
        if shared {
            flags |= VM_SHARED;
        }
        if exec {
            flags |= VM_EXEC;
        }
        let (anon_vma, avc, user_version) = if shared {
            (NIL, Vec::new(), Vec::new())
        } else {
            let av = self.anon_vmas.len() as u32;
            self.anon_vmas.push(AnonVma {
                vmas: vec![id],
                root: av,
            });
            (av, vec![av], vec![FOLLOW_FILE; pages as usize])
        };
        let ra_pages = self.inodes[inode as usize]
            .disk
            .map_or(0, |d| self.disks[d as usize].ra_pages);
        self.vmas.push(Vma {
            mm,
            start_vpn: start,
            pages,
            pgoff: offset,
            flags,
            anon_vma,
            ptes: vec![0; pages as usize],
            user_version,
            pte_tables: vec![NIL; table_span(start, pages, PTE_SHIFT)],
            pmd_tables: vec![NIL; table_span(start, pages, PMD_SHIFT)],
            live: true,
            swap_readahead_info: 0,
            avc,
            inode,
            ra: super::readahead::FileRa::new(ra_pages),
            anon_used: false,
            content: 0,
        });
        // vma_link: __vma_link_file under i_mmap_lock_write.
        self.i_mmap_lock_write_empty(inode);
        self.inodes[inode as usize].vmas.push(id);
        self.mms[mm as usize].vmas.push(id);
        id
    }

    /// fork's `dup_mmap`: a new mm in `memcg` with a copy of every VMA of
    /// `parent`, each with a new anon_vma chained to the parent's, and the
    /// page tables copied (`copy_page_range`). Returns the new mm and the
    /// map from parent VMA to child VMA.
    pub fn dup_mm(
        &mut self,
        parent: u32,
        memcg: u16,
    ) -> Result<(u32, Vec<(u32, u32)>), crate::SimError> {
        // copy_process's fixed work, then dup_mmap, which holds the
        // parent's mmap_lock for writing to its end: the process's other
        // threads' faults wait (mmap_lock.rs).
        self.charge_cost(cost_model::Fn::CopyPageRange, self.costs.fork);
        self.mmap_write_lock(parent, NIL);
        let child = self.mm_alloc(memcg);
        self.mms[child as usize].next_vpn = self.mms[parent as usize].next_vpn;
        let mut pairs = Vec::new();
        for pv in self.mms[parent as usize].vmas.clone() {
            let cv = self.dup_vma(pv, child);
            pairs.push((pv, cv));
            // vma_needs_copy: only mappings with an anon_vma in use; a
            // child faults shared and unwritten file pages in itself.
            let v = &self.vmas[pv as usize];
            if v.inode == NIL || (v.flags & VM_SHARED == 0 && v.anon_used) {
                self.traced(cost_model::Fn::CopyPageRange, |k| k.copy_page_range(pv, cv))?;
            }
        }
        self.khugepaged_fork(child, parent);
        // flush_tlb_mm: the parent's PTEs were write-protected.
        self.charge_cost(cost_model::Fn::CopyPageRange, self.costs.tlb_flush);
        self.flush_tlb_mm_range(parent, false);
        self.mmap_write_unlock(parent);
        Ok((child, pairs))
    }

    /// The child's copy of VMA `pv` (`vm_area_dup` + `anon_vma_fork`).
    fn dup_vma(&mut self, pv: u32, mm: u32) -> u32 {
        let id = self.vmas.len() as u32;
        let p = &self.vmas[pv as usize];
        if p.inode != NIL && (p.flags & VM_SHARED != 0 || !p.anon_used) {
            // The same inode, PTEs left to faults.
            let (inode, offset, pages) = (p.inode, p.pgoff, p.pages);
            let (shared, exec) = (p.flags & VM_SHARED != 0, p.flags & VM_EXEC != 0);
            let (ra, flags, content) = (p.ra, p.flags, p.content);
            let v = self.mmap_file(mm, inode, offset, pages, shared, exec);
            let start = self.vmas[pv as usize].start_vpn;
            let c = &mut self.vmas[v as usize];
            // At the parent's address: its table spans, not the ones
            // mmap_file sized for the child's next free address.
            c.start_vpn = start;
            c.pte_tables = vec![NIL; table_span(start, pages, PTE_SHIFT)];
            c.pmd_tables = vec![NIL; table_span(start, pages, PMD_SHIFT)];
            c.ra = ra;
            c.flags = flags;
            c.content = content;
            return v;
        }
        // anon_vma_fork: anon_vma_clone links the child into the parent's
        // chain, then the new anon_vma is linked, each under the root's
        // rwsem for writing (one hold here: both at once).
        let (pav, inode) = (p.anon_vma, p.inode);
        self.anon_vma_lock_write_empty(pav);
        // A private file mapping's copy joins the file's i_mmap too.
        self.i_mmap_lock_write_empty(inode);
        let p = &self.vmas[pv as usize];
        let av = self.anon_vmas.len() as u32;
        let root = self.anon_vmas[p.anon_vma as usize].root;
        let mut avc = vec![av];
        avc.extend_from_slice(&p.avc);
        let v = Vma {
            mm,
            start_vpn: p.start_vpn,
            pages: p.pages,
            pgoff: p.pgoff,
            flags: p.flags,
            anon_vma: av,
            ptes: vec![0; p.pages as usize],
            user_version: p.user_version.clone(),
            pte_tables: vec![NIL; p.pte_tables.len()],
            pmd_tables: vec![NIL; p.pmd_tables.len()],
            live: true,
            swap_readahead_info: 0,
            avc,
            inode: p.inode,
            ra: p.ra,
            anon_used: p.anon_used,
            content: p.content,
        };
        self.anon_vmas.push(AnonVma {
            vmas: Vec::new(),
            root,
        });
        for &a in &v.avc {
            self.anon_vmas[a as usize].vmas.push(id);
        }
        if v.inode != NIL {
            self.inodes[v.inode as usize].vmas.push(id);
        }
        self.vmas.push(v);
        self.mms[mm as usize].vmas.push(id);
        id
    }

    /// `__mmput` of an mm whose last task exits: khugepaged_exit, then
    /// `exit_mmap` (every VMA unmapped, in address order), and off the
    /// multi-gen LRU's mm list.
    pub fn exit_mmap(&mut self, mm: u32) {
        self.khugepaged_exit(mm);
        // mmu_notifier_release: a VM whose RAM this mm maps loses its EPT.
        if !self.kvm.is_empty() {
            self.kvm_release_mm(mm);
        }
        let mut vmas = self.mms[mm as usize].vmas.clone();
        vmas.sort_unstable();
        for v in vmas {
            self.munmap(v);
        }
        self.lru_gen_del_mm(mm);
        self.mms[mm as usize].exited = true;
    }

    /// munmap of a whole VMA: `zap_pte_range` over every PTE, then the VMA
    /// goes away.
    pub fn munmap(&mut self, vma: u32) {
        self.traced(cost_model::Fn::Unmap, |k| k.unmap_vma(vma));
    }

    /// `unmap_vmas` → `zap_pte_range` over the whole VMA, then remove it.
    fn unmap_vma(&mut self, vma: u32) {
        let n = self.vmas[vma as usize].pages;
        self.mmu_notifier_invalidate_range(vma, 0, n as usize);
        let mut tlb = self.tlb_gather_mmu(self.vmas[vma as usize].mm);
        let mut batch = None;
        for idx in 0..n {
            self.zap_pte_lock(vma, idx as usize, 0);
            let pte = self.vmas[vma as usize].ptes[idx as usize];
            if pte_none(pte) {
                batch = None;
                continue;
            }
            if pte_present(pte) {
                // A PMD (met at its block's first entry) gathers one folio.
                self.tlb_remove_tlb_entry(&mut tlb, pte & PTE_ZERO == 0);
            }
            if pte & PTE_PMD != 0 {
                // The block's first entry: the whole PMD goes.
                if self.vmas[vma as usize].inode == NIL {
                    self.traced(cost_model::Fn::ZapHugePmd, |k| {
                        k.zap_huge_pmd_anon(vma, idx as usize)
                    });
                } else {
                    self.traced(cost_model::Fn::ZapHugePmd, |k| {
                        k.zap_huge_pmd(vma, idx as usize)
                    });
                }
                continue;
            }
            self.vmas[vma as usize].ptes[idx as usize] = 0;
            self.zap_pte(vma, pte, &mut batch);
        }
        self.zap_anon_batch_flush();
        tlb.freed_tables = self.free_pgtables(vma);
        self.tlb_finish_mmu(tlb);
        let v = &mut self.vmas[vma as usize];
        v.live = false;
        v.ptes = Vec::new();
        v.user_version = Vec::new();
        let mm = v.mm;
        let avc = std::mem::take(&mut v.avc);
        let (anon_vma, inode) = (v.anon_vma, v.inode);
        // free_pgtables: unlink_anon_vmas under the root's rwsem and
        // unlink_file_vma under i_mmap_rwsem, both for writing.
        self.anon_vma_lock_write_empty(anon_vma);
        self.i_mmap_lock_write_empty(inode);
        self.mms[mm as usize].vmas.retain(|&x| x != vma);
        for av in avc {
            self.anon_vmas[av as usize].vmas.retain(|&x| x != vma);
        }
        if inode != NIL {
            let i = &mut self.inodes[inode as usize];
            i.vmas.retain(|&x| x != vma);
            if i.anon && i.vmas.is_empty() {
                self.shmem_evict(inode);
            }
        }
    }

    /// One PTE of `zap_pte_range`: drop the mapping or the swap reference.
    /// `batch`: the large page-cache folio the PTEs before this one
    /// mapped, and whether it was marked accessed (the caller starts each
    /// run of PTEs with None).
    pub fn zap_pte(&mut self, vma: u32, pte: Pte, batch: &mut Option<(Pfn, bool)>) {
        self.charge_cost(cost_model::Fn::Unmap, self.costs.pte);
        if self.fault.zap_anon().is_some() && !self.zap_anon_continues(pte) {
            self.zap_anon_batch_flush();
        }
        let mm = self.vmas[vma as usize].mm as usize;
        if is_swap_pte(pte) {
            self.mms[mm].swapents -= 1;
            self.free_swap_and_cache(pte_swp_entry(pte));
            return;
        }
        if pte & PTE_ZERO != 0 {
            return;
        }
        let pfn = pte_pfn(pte);
        let head = self.folios.head_of(pfn);
        if !self.folios.get(head).test(PG_ANON) {
            // zap_pte_range for a page-cache page: the dirty bit moves to
            // the folio; a young PTE marks it accessed, unless the mapping
            // is read sequentially.
            if pte & PTE_DIRTY != 0 {
                self.filemap_dirty_folio(head);
            }
            let young = pte & PTE_YOUNG != 0 && self.vmas[vma as usize].flags & VM_SEQ_READ == 0;
            if self.release.zap_present_ptes_batch && self.folios.get(head).order > 0 {
                // 6.9's zap_present_ptes: the PTEs of one large folio go
                // as a batch, marked accessed once if any was young (so a
                // folio zapped whole is not activated by its own pages).
                match batch {
                    Some((h, marked)) if *h == head => {
                        if young && !*marked {
                            *marked = true;
                            self.folio_mark_accessed(head);
                        }
                    }
                    _ => {
                        *batch = Some((head, young));
                        if young {
                            self.folio_mark_accessed(head);
                        }
                    }
                }
            } else if young {
                self.folio_mark_accessed(head);
            }
            *self.mms[mm].file_counter(self.folios.get(head).test(PG_SWAPBACKED)) -= 1;
            self.page_remove_file_rmap(pfn);
            self.tlb_folio_put(head);
            return;
        }
        self.mms[mm].rss_anon -= 1;
        if self.release.zap_present_ptes_batch && self.folios.get(head).order > 0 {
            return self.zap_anon_large_pte(pfn, head, mm as u32);
        }
        self.page_remove_rmap(pfn, vma);
        self.free_swap_cache(head);
        self.tlb_folio_put(head);
    }

    /// One PTE of `mm` mapping `page`, a page of large anonymous folio
    /// `head`, gone: true when it was the page's last (no longer
    /// AnonExclusive, out of NR_ANON_MAPPED).
    pub fn page_unmap_large(&mut self, page: Pfn, head: Pfn, mm: u32) -> bool {
        let left = self.folios.page_mapcount_add(page, -1);
        self.mm_id_sub(head, 1, mm);
        if left != 0 {
            return false;
        }
        self.folios.get_mut(page).clear(PG_ANON_EXCLUSIVE);
        let memcg = self.folios.get(head).memcg;
        self.mod_node_page_state(Vm::NrAnonPages, -1);
        self.memcg_stat(memcg, Mc::Anon, -1);
        true
    }

    /// `page_remove_rmap` of one PTE mapping an anon page (of an order-0
    /// folio, or of a PTE-mapped THP, which is then queued for a deferred
    /// split when the page is left unmapped).
    pub fn page_remove_rmap(&mut self, pfn: Pfn, vma: u32) {
        self.charge_cost(cost_model::Fn::RemoveRmap, self.costs.rmap());
        self.write_mapped_page_lines(pfn, cost_model::Fn::RemoveRmap);
        debug_assert!(self.folios.page_mapcount(pfn) > 0);
        let f = self.folios.get_mut(pfn);
        if f.flags & PG_TAIL == 0 && f.order == 0 {
            // An order-0 folio (the common case, kept in line).
            f.mapcount -= 1;
            if f.mapcount == 0 {
                let memcg = f.memcg;
                f.clear(PG_ANON_EXCLUSIVE);
                self.mod_node_page_state(Vm::NrAnonPages, -1);
                self.memcg_stat(memcg, Mc::Anon, -1);
            }
            return;
        }
        let head = self.folios.head_of(pfn);
        let mm = self.vmas[vma as usize].mm;
        if self.page_unmap_large(pfn, head, mm) {
            if !self.release.deferred_split_partially_mapped {
                self.deferred_split_huge_page(head);
            } else if self.folios.get(head).mapcount > 0 {
                // 6.12's __folio_remove_rmap: partially mapped.
                self.deferred_split_folio(head);
            }
        }
    }

    /// Drops a reference; the last one frees the folio (`folio_put`).
    pub fn folio_put(&mut self, pfn: Pfn) {
        let f = self.folios.get_mut(pfn);
        debug_assert!(f.refcount > 0);
        f.refcount -= 1;
        if f.refcount == 0 {
            self.free_folio(pfn);
        }
    }

    /// `folio_put_refs`: drops `n` references at once (a large folio's
    /// page-cache references).
    pub fn folio_put_refs(&mut self, pfn: Pfn, n: u32) {
        let f = self.folios.get_mut(pfn);
        debug_assert!(f.refcount >= n);
        f.refcount -= n;
        if f.refcount == 0 {
            self.free_folio(pfn);
        }
    }

    /// `__folio_put`: off the LRU if still there, uncharge, free.
    pub fn free_folio(&mut self, pfn: Pfn) {
        let f = *self.folios.get(pfn);
        if f.test(PG_LRU) {
            if self.cpus.len() > 1 {
                self.lru_lock_for_free(f.memcg, f.order);
            }
            self.lruvec_del_folio(pfn);
        }
        debug_assert!(!f.test(PG_SWAPCACHE));
        if f.order > 1 && f.test(PG_ANON) {
            // free_transhuge_page (6.12: free_tail_page_prepare's unqueue
            // and the per-size nr_anon).
            self.deferred_split_del(pfn);
            if self.release.mthp_stats {
                self.vm.add(
                    crate::vmstat::mthp_item(f.order, crate::vmstat::MthpStat::NrAnon),
                    -1,
                );
            }
        }
        if f.test(PG_SWAPBACKED | PG_ANON | PG_CHARGED) {
            self.mem_cgroup_uncharge(f.memcg, f.nr_pages() as u64);
        }
        self.free_folio_pages(pfn);
    }
}

//! The invariant checker (`mmsim run --check`, always on in tests).
//!
//! At a quiescent point (between user accesses) the simulated kernel must
//! account for every frame, reference, mapping, swap count and charge.

use crate::kernel::Kernel;
use crate::mm::folio::*;
use crate::mm::lru_gen::{
    folio_lru_gen, lru_gen_from_seq, LRU_GEN_BASE, MAX_NR_GENS, NR_GEN_LISTS, NR_ZONES,
};
use crate::mm::mmap::Vma;
use crate::mm::pgtable::*;
use crate::mm::swapfile::{swp_entry, SWAP_COUNT_MASK, SWAP_HAS_CACHE};
use crate::vmstat::{Mc, Vm};
use crate::SimError;
use std::collections::HashMap;

fn fail<T>(msg: String) -> Result<T, SimError> {
    Err(SimError::Invariant(msg))
}

pub fn check_all(k: &Kernel) -> Result<(), SimError> {
    check_frames(k)?;
    check_mappings(k)?;
    check_swap(k)?;
    check_memcg(k)?;
    check_pgtables(k)?;
    check_io(k)?;
    check_gen_sizes(k)?;
    check_cpumasks(k)?;
    k.check_zswap().or_else(fail)?;
    k.check_kvm().or_else(fail)?;
    Ok(())
}

/// mm_cpumask: a CPU is in an mm's mask exactly when it has that mm
/// loaded (switch_mm_irqs_off keeps the two together).
fn check_cpumasks(k: &Kernel) -> Result<(), SimError> {
    for (m, mm) in k.mms.iter().enumerate() {
        for c in mm.cpumask.iter() {
            if k.cpus.get(c).and_then(|cpu| cpu.loaded_mm) != Some(m as u32) {
                return fail(format!(
                    "mm {m}'s cpumask has CPU {c}, which has another mm loaded"
                ));
            }
        }
    }
    for (c, cpu) in k.cpus.iter().enumerate() {
        if let Some(m) = cpu.loaded_mm {
            if !k.mms[m as usize].cpumask.test(c) {
                return fail(format!(
                    "CPU {c} has mm {m} loaded, and is not in its cpumask"
                ));
            }
        }
    }
    Ok(())
}

/// In-flight I/O: every folio under writeback is a swap-cache folio with a
/// pending write completion, and nr_writeback counts them; every locked
/// folio is a new swap-cache folio whose read is pending.
fn check_io(k: &Kernel) -> Result<(), SimError> {
    let mut pending_writes: HashMap<Pfn, u32> = HashMap::new();
    let mut pending_reads: HashMap<Pfn, u32> = HashMap::new();
    for e in k.io_events.iter() {
        let (_, _, pfn, write) = e.0;
        *if write {
            pending_writes.entry(pfn).or_default()
        } else {
            pending_reads.entry(pfn).or_default()
        } += 1;
    }
    let (mut wb, mut wb_pages, mut locked) = (0, 0, 0);
    for (p, f) in live_frames(k) {
        let p = p as Pfn;
        if f.test(PG_WRITEBACK) {
            wb += 1;
            wb_pages += f.nr_pages() as i64;
            let file = f.test(PG_PAGECACHE) && !f.test(PG_SWAPBACKED);
            if !(f.test(PG_SWAPCACHE) || file) || pending_writes.get(&p) != Some(&1) {
                return fail(format!(
                    "frame {p} under writeback without its one pending write: {f:?}"
                ));
            }
        }
        if f.test(PG_LOCKED) {
            locked += 1;
            let file = f.test(PG_PAGECACHE) && !f.test(PG_SWAPBACKED);
            if !(f.test(PG_SWAPCACHE) || file)
                || f.test(PG_UPTODATE)
                || pending_reads.get(&p) != Some(&1)
                || !k.io_wait.contains_key(&p)
                || f.test(PG_WRITEBACK)
            {
                return fail(format!(
                    "locked frame {p} without its one pending read: {f:?}"
                ));
            }
        }
    }
    if wb != pending_writes.len() || k.vm.get(Vm::NrWriteback) != wb_pages {
        return fail(format!(
            "{wb} folios under writeback, {} pending writes, nr_writeback {}",
            pending_writes.len(),
            k.vm.get(Vm::NrWriteback)
        ));
    }
    if locked != pending_reads.len() || locked + wb != k.io_wait.len() {
        return fail(format!(
            "{locked} locked folios, {} pending reads, {} waited on",
            pending_reads.len(),
            k.io_wait.len()
        ));
    }
    Ok(())
}

/// Every frame is free, on exactly one LRU list, in a per-CPU batch, or
/// the kernel's; list lengths and gauges agree.
fn check_frames(k: &Kernel) -> Result<(), SimError> {
    let mut seen = vec![0u8; k.folios.len()];
    check_free_blocks(k, &mut seen)?;
    check_lru_lists(k, &mut seen)?;
    check_pcp_and_batches(k, &mut seen)?;
    check_frame_owners(k, &mut seen)?;
    check_lru_gauges(k)
}

/// The buddy lists of every zone: aligned, clean, merged, and counted in
/// nr_free.
fn check_free_blocks(k: &Kernel, seen: &mut [u8]) -> Result<(), SimError> {
    for (zi, z) in k.zones.iter().enumerate() {
        let mut count = 0;
        for (head, order) in k.free_blocks(zi) {
            let n = 1u32 << order;
            if head % n != 0 || head < z.start || head + n > z.end {
                return fail(format!(
                    "free block {head} of order {order} misaligned or outside zone {}",
                    z.name()
                ));
            }
            for p in head..head + n {
                let f = k.folios.get(p);
                let tail = p != head;
                if !f.test(PG_BUDDY) || f.refcount != 0 || f.test(PG_TAIL) != tail {
                    return fail(format!(
                        "frame {p} of free block {head} (order {order}) is not a clean buddy page: {f:?}"
                    ));
                }
                if !tail && f.order as usize != order {
                    return fail(format!(
                        "free block {head} on list {order} has order {}",
                        f.order
                    ));
                }
                seen[p as usize] += 1;
            }
            // A block whose buddy is free at the same order should have
            // merged.
            let buddy = head ^ n;
            if order < crate::mm::page_alloc::MAX_ORDER - 1 && buddy >= z.start && buddy < z.end {
                let b = k.folios.get(buddy);
                if b.test(PG_BUDDY) && !b.test(PG_TAIL) && b.order as usize == order {
                    return fail(format!(
                        "free buddies {head} and {buddy} of order {order} did not merge"
                    ));
                }
            }
            count += n as u64;
        }
        // The lazy tail of the max-order list: whole aligned blocks inside
        // the zone, their records unwritten (so not read here).
        let top = 1 << (crate::mm::page_alloc::MAX_ORDER - 1);
        if z.lazy_next > z.lazy_end
            || (z.lazy_next < z.lazy_end
                && (z.lazy_next % top != 0
                    || z.lazy_end % top != 0
                    || z.lazy_next < z.start
                    || z.lazy_end > z.end))
        {
            return fail(format!(
                "zone {}'s unwritten blocks {}..{} misaligned or outside it",
                z.name(),
                z.lazy_next,
                z.lazy_end
            ));
        }
        count += (z.lazy_end - z.lazy_next) as u64;
        if count != z.nr_free {
            return fail(format!(
                "zone {} counts {} free but lists {count}",
                z.name(),
                z.nr_free
            ));
        }
    }
    if k.vm.get(Vm::NrFreePages) as u64 != k.nr_free_pages() {
        return fail("nr_free_pages disagrees with the zones".into());
    }
    Ok(())
}

/// Every memcg's LRU lists (classic and multi-gen): linked both ways, each
/// folio where its flags say, the lengths as walked.
fn check_lru_lists(k: &Kernel, seen: &mut [u8]) -> Result<(), SimError> {
    for (m, lv) in k.lruvecs.iter().enumerate() {
        let ids = (0..NR_LRU_LISTS as u8).chain((0..NR_GEN_LISTS as u8).map(|i| LRU_GEN_BASE + i));
        for lru in ids {
            let list = lv.list(lru);
            let (mut count, mut prev, mut p) = (0u64, NIL, list.head);
            while p != NIL {
                let f = k.folios.get(p);
                if f.prev != prev || f.lru != lru || f.memcg as usize != m || !f.test(PG_LRU) {
                    return fail(format!(
                        "frame {p} misplaced on memcg {m} list {lru}: {f:?}"
                    ));
                }
                if lru < LRU_GEN_BASE && f.lru_list() != lru {
                    return fail(format!(
                        "frame {p} on list {lru} but its flags say {}",
                        f.lru_list()
                    ));
                }
                if lru >= LRU_GEN_BASE {
                    check_gen_folio(k, p, m, lru)?;
                }
                seen[p as usize] += 1;
                count += f.nr_pages() as u64;
                prev = p;
                p = f.next;
            }
            if count != list.len || prev != list.tail {
                return fail(format!(
                    "memcg {m} list {lru}: length {} tail {} but walked {count} ending {prev}",
                    list.len, list.tail
                ));
            }
        }
    }
    Ok(())
}

/// Free pages on the per-CPU lists, and folios in the per-CPU lru_add
/// batches.
fn check_pcp_and_batches(k: &Kernel, seen: &mut [u8]) -> Result<(), SimError> {
    for z in &k.zones {
        for (c, pcp) in z.pcp.iter().enumerate() {
            for &p in &pcp.list {
                let f = k.folios.get(p);
                if f.flags != PG_PCP || f.refcount != 0 || p < z.start || p >= z.end {
                    return fail(format!(
                        "frame {p} on cpu {c}'s pcp list of zone {} is not a free pcp page: {f:?}",
                        z.name()
                    ));
                }
                seen[p as usize] += 1;
            }
        }
    }
    for (c, cpu) in k.cpus.iter().enumerate() {
        for &p in &cpu.lru_add {
            if !k.folios.get(p).test(PG_LRU_BATCH) {
                return fail(format!(
                    "frame {p} in cpu {c}'s lru_add batch lacks PG_LRU_BATCH"
                ));
            }
            seen[p as usize] += 1;
        }
    }
    Ok(())
}

/// With the kernel's own frames and large folios' tails added, every frame
/// is accounted exactly once, and none is left isolated.
fn check_frame_owners(k: &Kernel, seen: &mut [u8]) -> Result<(), SimError> {
    for (p, f) in live_frames(k) {
        if f.test(PG_KERNEL | PG_PGTABLE) {
            seen[p] += 1;
        }
        if f.flags & (PG_TAIL | PG_BUDDY) == PG_TAIL {
            // A large folio's tail: accounted with its head.
            let h = k.folios.get(f.next);
            let span = f.next as usize..f.next as usize + h.nr_pages() as usize;
            if h.test(PG_TAIL | PG_BUDDY) || h.order == 0 || !span.contains(&p) {
                return fail(format!(
                    "tail frame {p} does not belong to its head {}: {h:?}",
                    f.next
                ));
            }
            // PageAnonExclusive is a page's own, on an anonymous THP's
            // tails too.
            let own = if h.test(PG_ANON) {
                PG_ANON_EXCLUSIVE
            } else {
                0
            };
            if f.flags & !own != PG_TAIL || f.refcount != 0 {
                return fail(format!("tail frame {p} carries state of its own: {f:?}"));
            }
            seen[p] += 1;
        }
        if seen[p] != 1 {
            return fail(format!("frame {p} is accounted {} times: {f:?}", seen[p]));
        }
        if f.test(PG_ISOLATED) {
            return fail(format!("frame {p} still isolated at a quiescent point"));
        }
    }
    Ok(())
}

/// The LRU size gauges against the lists' lengths.
fn check_lru_gauges(k: &Kernel) -> Result<(), SimError> {
    let lists = [
        Vm::NrInactiveAnon,
        Vm::NrActiveAnon,
        Vm::NrInactiveFile,
        Vm::NrActiveFile,
        Vm::NrUnevictable,
    ];
    for (lru, item) in lists.iter().enumerate() {
        let total: u64 =
            k.lruvecs.iter().map(|l| l.lists[lru].len).sum::<u64>() + gen_gauge(k, lru);
        if k.vm.get(*item) as u64 != total {
            return fail(format!(
                "{item:?} = {} but the lists hold {total}",
                k.vm.get(*item)
            ));
        }
    }
    Ok(())
}

/// Every page-table frame belongs to exactly one live VMA's table slot.
fn check_pgtables(k: &Kernel) -> Result<(), SimError> {
    let mut owned = vec![0u8; k.folios.len()];
    for v in k.vmas.iter().filter(|v| v.live) {
        for &p in v
            .pte_tables
            .iter()
            .chain(v.pmd_tables.iter())
            .filter(|&&p| p != NIL)
        {
            if !k.folios.get(p).test(PG_PGTABLE) {
                return fail(format!(
                    "frame {p} is a page table of a VMA but not flagged as one"
                ));
            }
            owned[p as usize] += 1;
        }
    }
    for (p, f) in live_frames(k) {
        if f.test(PG_PGTABLE) && owned[p] != 1 {
            return fail(format!("page-table frame {p} belongs to {} VMAs", owned[p]));
        }
    }
    let tables = live_frames(k).filter(|(_, f)| f.test(PG_PGTABLE)).count() as i64;
    if k.vm.get(Vm::NrPageTablePages) != tables {
        return fail(format!(
            "nr_page_table_pages {} but {tables} tables",
            k.vm.get(Vm::NrPageTablePages)
        ));
    }
    Ok(())
}

/// One entry of a PMD mapping: the block is aligned and inside the VMA,
/// has no PTE table (a private anonymous VMA's has the one deposited with
/// the PMD), and its 512 entries map the folio's pages in order (checked
/// at the block's first entry, which counts the PMD).
fn check_pmd_entry(
    k: &Kernel,
    vi: usize,
    idx: usize,
    pte: Pte,
    pmds: &mut HashMap<Pfn, u32>,
) -> Result<(), SimError> {
    let v = &k.vmas[vi];
    if !(v.start_vpn + idx as u64).is_multiple_of(HPAGE_PMD_NR) {
        return Ok(());
    }
    let head = pte_pfn(pte);
    let f = k.folios.get(head);
    let (_, table) = crate::mm::huge_memory::pmd_block(v.start_vpn, idx);
    let block = v.ptes.get(idx..idx + HPAGE_PMD_NR as usize);
    let whole = block.is_some_and(|b| {
        b.iter()
            .enumerate()
            .all(|(i, &e)| e & PTE_PMD != 0 && pte_present(e) && pte_pfn(e) == head + i as u32)
    });
    let deposit = v.inode == NIL;
    if f.order != 9 || f.test(PG_TAIL) || !whole || (v.pte_tables[table] != NIL) != deposit {
        return fail(format!(
            "vma {vi} page {idx}: a PMD entry that does not map folio {head} whole from an aligned, table-less block: {f:?}"
        ));
    }
    *pmds.entry(head).or_default() += 1;
    Ok(())
}

/// What the page tables say, walked once: the PTEs mapping each frame,
/// each mm's anon/swap, shmem and file RSS, and the PMDs mapping each
/// folio (one reference each, however many pages).
struct Mapped {
    maps: Vec<u32>,
    rss: Vec<(u64, u64)>,
    rss_shmem: Vec<u64>,
    rss_file: Vec<u64>,
    pmds: HashMap<Pfn, u32>,
}

/// Mapcounts equal the PTEs that map each folio; refcounts equal the
/// references the kernel holds; RSS counters and rmap gauges agree.
fn check_mappings(k: &Kernel) -> Result<(), SimError> {
    let mut w = Mapped {
        maps: vec![0u32; k.folios.len()],
        rss: vec![(0u64, 0u64); k.mms.len()],
        rss_shmem: vec![0u64; k.mms.len()],
        rss_file: vec![0u64; k.mms.len()],
        pmds: HashMap::new(),
    };
    for (vi, v) in k.vmas.iter().enumerate() {
        if !v.live {
            continue;
        }
        if v.inode != NIL {
            walk_file_vma(k, vi, v, &mut w)?;
        } else {
            walk_anon_vma(k, vi, v, &mut w)?;
        }
    }
    check_folio_counts(k, &w)?;
    check_rss(k, &w)
}

/// A file VMA's PTEs: page-cache pages of its inode at their index, and in
/// a private mapping the anonymous copies and their swap entries.
fn walk_file_vma(k: &Kernel, vi: usize, v: &Vma, w: &mut Mapped) -> Result<(), SimError> {
    let private = v.flags & crate::mm::mmap::VM_SHARED == 0;
    for (idx, &pte) in v.ptes.iter().enumerate() {
        if pte_none(pte) {
            continue;
        }
        if pte & PTE_PMD != 0 {
            check_pmd_entry(k, vi, idx, pte, &mut w.pmds)?;
        }
        if private && is_swap_pte(pte) {
            w.rss[v.mm as usize].1 += 1;
            continue;
        }
        let p = pte_pfn(pte);
        let head = k.folios.head_of(p);
        let f = k.folios.get(head);
        let index = v.pgoff + idx as u64;
        if private && pte_present(pte) && f.test(PG_ANON) {
            // A private file mapping's copy.
            if f.index as u64 != index
                || !k.anon_vmas[f.mapping as usize].vmas.contains(&(vi as u32))
            {
                return fail(format!(
                    "frame {p}'s rmap does not lead back to vma {vi} page {idx}"
                ));
            }
            w.maps[p as usize] += 1;
            w.rss[v.mm as usize].0 += 1;
            continue;
        }
        if !pte_present(pte)
            || !f.test(PG_PAGECACHE)
            || f.mapping != v.inode
            || f.index as u64 + (p - head) as u64 != index
            || k.filemap_folio_at(v.inode, index) != Some(head)
            || (private && pte & PTE_WRITE != 0)
        {
            return fail(format!(
                "file vma {vi} page {idx}: PTE {pte:#x} does not map the inode's page {index}: {f:?}"
            ));
        }
        w.maps[p as usize] += 1;
        if f.test(PG_SWAPBACKED) {
            w.rss_shmem[v.mm as usize] += 1;
        } else {
            w.rss_file[v.mm as usize] += 1;
        }
    }
    Ok(())
}

/// An anonymous VMA's PTEs: huge zero PMDs, anon folios whose rmap leads
/// back here, and swap entries.
fn walk_anon_vma(k: &Kernel, vi: usize, v: &Vma, w: &mut Mapped) -> Result<(), SimError> {
    for (idx, &pte) in v.ptes.iter().enumerate() {
        if pte & PTE_PMD != 0 && pte & PTE_ZERO != 0 {
            let (_, table) = crate::mm::huge_memory::pmd_block(v.start_vpn, idx);
            let page = ((v.start_vpn + idx as u64) % HPAGE_PMD_NR) as u32;
            if pte_pfn(pte) != k.huge.huge_zero_pfn() + page
                || v.pte_tables[table] == NIL
                || !k.mms[v.mm as usize].huge_zero
            {
                return fail(format!(
                    "vma {vi} page {idx}: a huge zero PMD entry {pte:#x} without its deposit or the mm's reference"
                ));
            }
            continue;
        }
        if pte & PTE_PMD != 0 {
            check_pmd_entry(k, vi, idx, pte, &mut w.pmds)?;
        }
        if pte_present(pte) && pte & PTE_ZERO == 0 {
            let p = pte_pfn(pte);
            let head = k.folios.head_of(p);
            let f = k.folios.get(head);
            if f.test(PG_BUDDY) || !f.test(PG_ANON) {
                return fail(format!(
                    "vma {vi} page {idx} maps frame {p} which is not an anon folio: {f:?}"
                ));
            }
            if f.index as u64 + (p - head) as u64 != v.pgoff + idx as u64
                || !k.anon_vmas[f.mapping as usize].vmas.contains(&(vi as u32))
            {
                return fail(format!(
                    "frame {p}'s rmap does not lead back to vma {vi} page {idx}"
                ));
            }
            w.maps[p as usize] += 1;
            w.rss[v.mm as usize].0 += 1;
        } else if is_swap_pte(pte) {
            w.rss[v.mm as usize].1 += 1;
        }
    }
    Ok(())
}

/// Every mapped folio's mapcounts and refcount against the walk, and the
/// anon and THP gauges.
fn check_folio_counts(k: &Kernel, w: &Mapped) -> Result<(), SimError> {
    let mut anon_mapped = 0;
    let mut anon_thps = 0;
    for (p, f) in live_frames(k) {
        if f.test(PG_BUDDY | PG_PCP | PG_KERNEL | PG_PGTABLE | PG_TAIL) {
            continue;
        }
        let pmd = check_folio(k, p, f, w)?;
        if f.test(PG_ANON) {
            anon_mapped += mapped_pages(k, p as Pfn);
        }
        if f.test(PG_ANON) && pmd > 0 {
            anon_thps += 1;
        }
    }
    if k.vm.get(Vm::NrAnonTransparentHugepages) != anon_thps {
        return fail(format!(
            "nr_anon_transparent_hugepages {} but {anon_thps} THPs are PMD-mapped",
            k.vm.get(Vm::NrAnonTransparentHugepages)
        ));
    }
    if k.vm.get(Vm::NrAnonPages) != anon_mapped {
        return fail(format!(
            "nr_anon_pages {} but {anon_mapped} anon pages are mapped",
            k.vm.get(Vm::NrAnonPages)
        ));
    }
    Ok(())
}

/// One folio's page and entire mapcounts, refcount and MM_ID slots; the
/// number of PMDs that map it.
fn check_folio(k: &Kernel, p: usize, f: &Folio, w: &Mapped) -> Result<u32, SimError> {
    let nr = f.nr_pages();
    let mut total = 0;
    for (i, &m) in w.maps[p..p + nr as usize].iter().enumerate() {
        let c = k.folios.page_mapcount((p + i) as Pfn);
        if c != m {
            return fail(format!(
                "frame {} (folio {p}) mapcount {c} but {m} PTEs map it",
                p + i
            ));
        }
        total += c;
    }
    if f.mapcount != total {
        return fail(format!(
            "folio {p} mapcount {} but its pages are mapped {total} times",
            f.mapcount
        ));
    }
    let pmd = w.pmds.get(&(p as Pfn)).copied().unwrap_or(0);
    if k.folios.entire_mapcount(p as Pfn) != pmd {
        return fail(format!(
            "folio {p}: entire mapcount {} but {pmd} PMDs map it",
            k.folios.entire_mapcount(p as Pfn)
        ));
    }
    // The page cache holds a reference per page; a PMD holds one for
    // its 512 mapped pages.
    let expected = f.mapcount - pmd * (HPAGE_PMD_NR as u32 - 1)
        + f.test(PG_SWAPCACHE) as u32 * nr
        + f.test(PG_PAGECACHE) as u32 * nr
        + f.test(PG_LRU_BATCH) as u32;
    if f.refcount != expected {
        return fail(format!(
            "frame {p} refcount {} but expected {expected}: {f:?}",
            f.refcount
        ));
    }
    if f.refcount == 0 {
        return fail(format!("frame {p} has no references but is not free"));
    }
    if let Some(slots) = k.mm_ids(p as Pfn) {
        // MM_ID: the slots count no more than the folio's mappings, a
        // free slot counts none, and with the shared bit clear one
        // slot holds every mapping.
        let [(m0, c0), (m1, c1)] = slots;
        let clear = !k.mm_ids_shared(p as Pfn);
        if c0 + c1 > f.mapcount
            || (m0 == NIL) != (c0 == 0)
            || (m1 == NIL) != (c1 == 0)
            || (clear && c0 != f.mapcount && c1 != f.mapcount)
        {
            return fail(format!(
                "folio {p}: MM_ID slots {slots:?} (shared {}) against {} mappings",
                !clear, f.mapcount
            ));
        }
    }
    Ok(pmd)
}

/// Each mm's RSS counters against the PTEs the walk found.
fn check_rss(k: &Kernel, w: &Mapped) -> Result<(), SimError> {
    for (i, mm) in k.mms.iter().enumerate() {
        if mm.rss_file != w.rss_file[i] {
            return fail(format!(
                "mm {i}: MM_FILEPAGES {} but PTEs map {}",
                mm.rss_file, w.rss_file[i]
            ));
        }
        if mm.rss_shmem != w.rss_shmem[i] {
            return fail(format!(
                "mm {i}: MM_SHMEMPAGES {} but PTEs map {}",
                mm.rss_shmem, w.rss_shmem[i]
            ));
        }
        if (mm.rss_anon, mm.swapents) != w.rss[i] {
            return fail(format!(
                "mm {i}: MM_ANONPAGES/MM_SWAPENTS {}/{} but PTEs say {:?}",
                mm.rss_anon, mm.swapents, w.rss[i]
            ));
        }
    }
    Ok(())
}

/// swap_map counts equal swap PTEs; SWAP_HAS_CACHE is set exactly for
/// slots with a swap-cache folio or held by the per-CPU slot caches.
fn check_swap(k: &Kernel) -> Result<(), SimError> {
    let mut refs: HashMap<u32, u32> = HashMap::new();
    for v in k.vmas.iter().filter(|v| v.live) {
        for &pte in &v.ptes {
            if is_swap_pte(pte) {
                *refs.entry(pte_swp_entry(pte)).or_default() += 1;
            }
        }
    }
    // A shmem inode's swap entry is its slot's one reference.
    for e in k.shmem_swap_entries() {
        *refs.entry(e).or_default() += 1;
    }
    let cached: std::collections::HashSet<u32> = k.slots_in_caches().collect();
    let mut swapcached = 0i64;
    let mut free = 0;
    for (ty, si) in k.swap.iter().enumerate() {
        let mut inuse = 0;
        for off in 1..si.max {
            let e = swp_entry(ty, off);
            let m = si.swap_map[off as usize];
            if m != 0 {
                inuse += 1;
            }
            let count = (m & SWAP_COUNT_MASK) as u32;
            let want = refs.get(&e).copied().unwrap_or(0);
            if count != want {
                return fail(format!(
                    "swap slot {ty}:{off} count {count} but {want} PTEs reference it"
                ));
            }
            let folio = k.swap_folio_of(e);
            let has_cache = m & SWAP_HAS_CACHE != 0;
            let expect_cache = folio.is_some() || cached.contains(&e);
            if has_cache != expect_cache {
                return fail(format!("swap slot {ty}:{off} HAS_CACHE {has_cache} but folio {folio:?}, in a slot cache {}", cached.contains(&e)));
            }
            if let Some(p) = folio {
                let f = k.folios.get(p);
                // A large folio holds a slot per page from its first.
                if !f.test(PG_SWAPCACHE) || e.wrapping_sub(f.swap) >= f.nr_pages() {
                    return fail(format!(
                        "swap cache of {ty}:{off} holds frame {p} which does not point back"
                    ));
                }
                swapcached += 1;
            }
            if cached.contains(&e) && count != 0 {
                return fail(format!("slot {ty}:{off} is in a slot cache but referenced"));
            }
        }
        if inuse != si.inuse_pages {
            return fail(format!(
                "swap {ty}: inuse_pages {} but {inuse} slots in use",
                si.inuse_pages
            ));
        }
        if si.flags & crate::mm::swapfile::SWP_WRITEOK != 0 {
            free += (si.pages - si.inuse_pages) as i64;
        } else if si.inuse_pages != 0 {
            return fail(format!(
                "swap {ty} is off but {} slots are in use",
                si.inuse_pages
            ));
        }
    }
    if free != k.swapfile.nr_swap_pages() {
        return fail(format!(
            "nr_swap_pages {} but {free} slots free",
            k.swapfile.nr_swap_pages()
        ));
    }
    let shmem_folios = || {
        live_frames(k)
            .filter(|(_, f)| f.test(PG_PAGECACHE) && f.test(PG_SWAPBACKED) && !f.test(PG_TAIL))
    };
    let shmem: i64 = shmem_folios().map(|(_, f)| f.nr_pages() as i64).sum();
    if k.vm.get(Vm::NrShmem) != shmem {
        return fail(format!(
            "nr_shmem {} but {shmem} pages are in shmem page caches",
            k.vm.get(Vm::NrShmem)
        ));
    }
    let thps = shmem_folios().filter(|(_, f)| f.order == 9).count() as i64;
    let pmdmapped = shmem_folios()
        .filter(|&(p, _)| k.folios.entire_mapcount(p as Pfn) > 0)
        .count() as i64;
    if k.vm.get(Vm::NrShmemHugepages) != thps || k.vm.get(Vm::NrShmemPmdmapped) != pmdmapped {
        return fail(format!(
            "nr_shmem_hugepages {} / nr_shmem_pmdmapped {} but {thps} shmem THPs, {pmdmapped} mapped by PMDs",
            k.vm.get(Vm::NrShmemHugepages),
            k.vm.get(Vm::NrShmemPmdmapped)
        ));
    }
    check_file_cache(k)?;
    let in_cache: i64 = live_frames(k)
        .map(|(_, f)| f)
        .filter(|f| f.test(PG_SWAPCACHE) && !f.test(PG_TAIL))
        .map(|f| f.nr_pages() as i64)
        .sum();
    if in_cache != swapcached || k.vm.get(Vm::NrSwapcached) != in_cache {
        return fail(format!(
            "nr_swapcached {} vs {in_cache} flagged folios vs {swapcached} cache entries",
            k.vm.get(Vm::NrSwapcached)
        ));
    }
    Ok(())
}

/// Every regular file's cached folio points back at its slot; dirty pages
/// are counted in nr_dirty and by their inode; a page nobody wrote since
/// its last writeback reads what the disk holds.
fn check_file_cache(k: &Kernel) -> Result<(), SimError> {
    let mut dirty = 0i64;
    for (ino, inode) in k.inodes.iter().enumerate() {
        if inode.is_shmem() {
            continue;
        }
        let mut nr_dirty = 0;
        for (index, &slot) in inode.pages.iter().enumerate() {
            if slot & 3 != crate::mm::filemap::SLOT_FOLIO {
                continue;
            }
            let p = (slot >> 2) as Pfn;
            let f = k.folios.get(p);
            let span = f.index as usize..f.index as usize + f.nr_pages() as usize;
            if !f.test(PG_PAGECACHE)
                || f.test(PG_SWAPBACKED | PG_ANON | PG_TAIL)
                || f.mapping as usize != ino
                || !span.contains(&index)
            {
                return fail(format!(
                    "inode {ino} page {index} holds frame {p} which does not point back: {f:?}"
                ));
            }
            let page = k.folios.folio_page(p, index as u64);
            if f.test(PG_DIRTY) {
                nr_dirty += 1;
            } else if !f.test(PG_LOCKED | PG_WRITEBACK)
                && k.folios.version[page as usize] != inode.disk_version[index]
            {
                return fail(format!(
                    "inode {ino} page {index} is clean but differs from the disk"
                ));
            }
        }
        if nr_dirty != inode.nr_dirty {
            return fail(format!(
                "inode {ino} counts {} dirty pages but {nr_dirty} are",
                inode.nr_dirty
            ));
        }
        dirty += nr_dirty as i64;
    }
    if k.vm.get(Vm::NrDirty) != dirty {
        return fail(format!(
            "nr_dirty {} but {dirty} file pages are dirty",
            k.vm.get(Vm::NrDirty)
        ));
    }
    Ok(())
}

/// Pages of folio `head` that some PTE or PMD maps (what NR_ANON_MAPPED
/// counts for an anon folio).
fn mapped_pages(k: &Kernel, head: Pfn) -> i64 {
    let nr = k.folios.get(head).nr_pages();
    (0..nr)
        .filter(|&i| k.folios.page_mapcount(head + i) > 0)
        .count() as i64
}

/// memory.current of every cgroup equals the folios charged to it and its
/// descendants plus what the per-CPU stocks hold for them;
/// memory.swap.current the slots recorded for them (swap_cgroup).
fn check_memcg(k: &Kernel) -> Result<(), SimError> {
    let mut swapped = vec![0u64; k.memcgs.len()];
    for si in &k.swap {
        for &m in si.cgroup.iter() {
            swapped[m as usize] += 1;
        }
    }
    let mut charged = vec![0u64; k.memcgs.len()];
    let mut anon = vec![0i64; k.memcgs.len()];
    for (p, f) in live_frames(k) {
        if f.test(PG_BUDDY | PG_PCP | PG_KERNEL | PG_TAIL) {
            continue;
        }
        charged[f.memcg as usize] += f.nr_pages() as u64;
        if f.test(PG_ANON) {
            anon[f.memcg as usize] += mapped_pages(k, p as Pfn);
        }
    }
    for cpu in &k.cpus {
        if let Some(m) = cpu.stock.cached {
            charged[m as usize] += cpu.stock.nr_pages;
        }
    }
    // Pages charged through the objcg (zswap's compressed bytes): the
    // entries' bytes, the CPUs' byte stocks and the objcg's leftover are
    // whole pages together.
    let mut obj_bytes: Vec<u64> = k.memcgs.iter().map(|m| m.nr_charged_bytes as u64).collect();
    for cpu in &k.cpus {
        if let Some(m) = cpu.obj_stock.cached {
            obj_bytes[m as usize] += cpu.obj_stock.nr_bytes as u64;
        }
    }
    for (m, b) in obj_bytes.iter_mut().enumerate().skip(1) {
        *b += k.memcgs[m].stat.get(Mc::Zswap) as u64;
        if !b.is_multiple_of(4096) {
            return fail(format!(
                "memcg {} has {b} bytes charged through its objcg, not whole pages",
                k.memcgs[m].name
            ));
        }
        charged[m] += *b / 4096;
    }
    #[allow(clippy::needless_range_loop)] // m is a memcg id, not just an index
    for m in 1..k.memcgs.len() {
        let want: u64 = (0..k.memcgs.len())
            .filter(|&d| k.is_descendant(d as u16, m as u16))
            .map(|d| charged[d])
            .sum();
        if k.memcgs[m].memory.usage != want {
            return fail(format!(
                "memcg {} memory.current {} pages but {want} are charged",
                k.memcgs[m].name, k.memcgs[m].memory.usage
            ));
        }
        let swap = &k.memcgs[m].swap;
        let want: u64 = (0..k.memcgs.len())
            .filter(|&d| k.is_descendant(d as u16, m as u16))
            .map(|d| swapped[d])
            .sum();
        // (Not bounded by memory.swap.max: a set step may lower it below
        // what is already in swap, which stays.)
        if swap.usage != want {
            return fail(format!(
                "memcg {} memory.swap.current {} pages but {want} slots are recorded for it",
                k.memcgs[m].name, swap.usage
            ));
        }
        if k.memcgs[m].stat.get(Mc::Anon) != anon[m] {
            return fail(format!(
                "memcg {} anon {} but {} mapped anon pages",
                k.memcgs[m].name,
                k.memcgs[m].stat.get(Mc::Anon),
                anon[m]
            ));
        }
    }
    Ok(())
}

/// Every frame whose record has been written: all of each zone's frames
/// but the max-order blocks boot freed that no allocation has taken.
fn live_frames(k: &Kernel) -> impl Iterator<Item = (usize, &crate::mm::folio::Folio)> {
    k.zones.iter().flat_map(move |z| {
        (z.start..z.lazy_next)
            .chain(z.lazy_end..z.end)
            .map(move |p| (p as usize, k.folios.get(p)))
    })
}

/// A folio on a generation list: the list's type and zone are the folio's,
/// its flags name a live generation and not PG_active.
fn check_gen_folio(k: &Kernel, p: Pfn, m: usize, lru: u8) -> Result<(), SimError> {
    let f = k.folios.get(p);
    let i = (lru - LRU_GEN_BASE) as usize;
    let (ty, zone) = ((i / NR_ZONES) % 2, i % NR_ZONES);
    let lg = &k.lruvecs[m].lrugen;
    let live = folio_lru_gen(f)
        .is_some_and(|g| (lg.min_seq[ty]..=lg.max_seq).any(|seq| lru_gen_from_seq(seq) == g));
    if f.is_file_lru() as usize != ty || k.zone_of(p) != zone || !live || f.test(PG_ACTIVE) {
        return fail(format!(
            "frame {p} on memcg {m}'s generation list {i} (type {ty}, zone {zone}, seqs {}..={} of {}) does not belong there: {f:?}",
            lg.min_seq[ty], lg.max_seq, lg.min_seq[1 - ty]
        ));
    }
    Ok(())
}

/// Pages the multi-gen LRU counts toward classic list `lru`'s gauge (the
/// two youngest generations are "active"), checked against the folios
/// whose flags name each generation.
fn gen_gauge(k: &Kernel, lru: usize) -> u64 {
    if lru >= 4 {
        return 0;
    }
    let (ty, active) = (lru / 2, lru % 2 == 1);
    k.lruvecs
        .iter()
        .map(|lv| {
            let lg = &lv.lrugen;
            (0..MAX_NR_GENS)
                .filter(|&g| lg.is_active(g) == active)
                .map(|g| lg.gen_size(g, ty))
                .sum::<u64>()
        })
        .sum()
}

/// Two to four generations per lruvec; each one's page count is the
/// pages of the folios whose flags name it (they may still sit on an
/// older list until sorted).
fn check_gen_sizes(k: &Kernel) -> Result<(), SimError> {
    for (m, lv) in k.lruvecs.iter().enumerate() {
        // seq_is_valid: two to four generations, anon's at least file's.
        let lg = &lv.lrugen;
        let nr_gens = |ty: usize| lg.max_seq - lg.min_seq[ty] + 1;
        if nr_gens(1) < 2 || nr_gens(1) > nr_gens(0) || nr_gens(0) > MAX_NR_GENS as u64 {
            return fail(format!(
                "memcg {m}'s generations are invalid: max_seq {}, min_seq {:?}",
                lg.max_seq, lg.min_seq
            ));
        }
        let mut counted = [[[0i64; NR_ZONES]; 2]; MAX_NR_GENS];
        for i in 0..NR_GEN_LISTS as u8 {
            let mut p = lv.list(LRU_GEN_BASE + i).head;
            while p != NIL {
                let f = k.folios.get(p);
                if let Some(g) = folio_lru_gen(f) {
                    counted[g][f.is_file_lru() as usize][k.zone_of(p)] += f.nr_pages() as i64;
                }
                p = f.next;
            }
        }
        if counted != lv.lrugen.nr_pages {
            return fail(format!(
                "memcg {m}'s generation sizes {:?} but its folios add up to {counted:?}",
                lv.lrugen.nr_pages
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The checker must fail: a run that ends clean passes, and the same
    //! kernel with one count, link or reference put wrong is caught with
    //! the invariant that names it.
    use super::*;

    /// 24 MiB written under a 16 MiB memory.max with zram swap, then a
    /// fork and a read of the first half: anon folios mapped twice, swap
    /// entries, swap-cache folios and both LRU lists in use.
    const SPEC: &str = r#"
[machine]
memory = "256M"
[[swap]]
device = "zram"
size = "64M"
[cgroup.w]
memory_max = "16M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "a", kind = "anon", size = "24M" },
  { op = "touch", region = "a", order = "seq", write = 1.0 },
  { op = "fork", steps = [ { op = "touch", region = "a", order = "seq", length = "12M", write = 0.0 } ] },
  { op = "touch", region = "a", order = "seq", length = "12M", write = 0.0 },
]
"#;

    /// Runs SPEC and calls `f` with the kernel as the last task ends,
    /// before it exits: its mappings still in place. `f` must leave the
    /// kernel as it found it.
    fn at_end(f: impl Fn(&mut Kernel)) {
        let spec = mmsim_spec::parse_str(SPEC, "check.toml", &[]).expect("spec");
        let mut k = Kernel::new(&spec, crate::machine_profile::Costs::default()).expect("kernel");
        let mut sched = crate::sched::Scheduler::new(&spec, &mut k);
        let mut called = false;
        sched
            .run(&mut k, |k| {
                f(k);
                called = true;
            })
            .expect("run");
        assert!(called);
    }

    /// Puts one thing wrong with `corrupt`, expects the invariant that
    /// names `what`, and puts it right with `repair`.
    fn caught(corrupt: impl Fn(&mut Kernel), repair: impl Fn(&mut Kernel), what: &str) {
        at_end(|k| {
            check_all(k).expect("clean before");
            corrupt(k);
            match check_all(k) {
                Err(SimError::Invariant(m)) => assert!(m.contains(what), "{m:?} lacks {what:?}"),
                other => panic!("expected an invariant naming {what:?}, got {other:?}"),
            }
            repair(k);
            check_all(k).expect("clean after");
        });
    }

    /// The first mapped anon folio.
    fn mapped_anon(k: &Kernel) -> Pfn {
        live_frames(k)
            .find(|(_, f)| f.test(PG_ANON) && !f.test(PG_TAIL) && f.mapcount > 0)
            .map(|(p, _)| p as Pfn)
            .expect("a mapped anon folio")
    }

    #[test]
    fn a_cpu_missing_from_its_mms_cpumask_is_caught() {
        let loaded = |k: &Kernel| k.cpus[0].loaded_mm.expect("CPU 0 ran a task") as usize;
        caught(
            |k| {
                let m = loaded(k);
                k.mms[m].cpumask.clear(0)
            },
            |k| {
                let m = loaded(k);
                k.mms[m].cpumask.set(0)
            },
            "has mm",
        );
    }

    #[test]
    fn a_clean_run_passes() {
        at_end(|k| {
            assert!(k.vm.get(Vm::Pswpout) > 0, "the spec must swap");
            assert!(k.vm.get(Vm::Pswpin) > 0, "the spec must swap in");
            check_all(k).expect("clean");
        });
    }

    #[test]
    fn a_wrong_rss_counter_is_caught() {
        let mm = |k: &Kernel| k.vmas.iter().find(|v| v.live).expect("a vma").mm as usize;
        caught(
            |k| {
                let m = mm(k);
                k.mms[m].rss_anon += 1
            },
            |k| {
                let m = mm(k);
                k.mms[m].rss_anon -= 1
            },
            "MM_ANONPAGES",
        );
    }

    #[test]
    fn a_leaked_reference_is_caught() {
        caught(
            |k| k.folios.get_mut(mapped_anon(k)).refcount += 1,
            |k| k.folios.get_mut(mapped_anon(k)).refcount -= 1,
            "refcount",
        );
    }

    #[test]
    fn a_mapcount_without_its_pte_is_caught() {
        caught(
            |k| k.folios.get_mut(mapped_anon(k)).mapcount += 1,
            |k| k.folios.get_mut(mapped_anon(k)).mapcount -= 1,
            "mapcount",
        );
    }

    #[test]
    fn a_wrong_free_gauge_is_caught() {
        caught(
            |k| k.vm.add(Vm::NrFreePages, 1),
            |k| k.vm.add(Vm::NrFreePages, -1),
            "nr_free_pages",
        );
    }

    #[test]
    fn a_wrong_list_length_is_caught() {
        let list = |k: &Kernel| {
            let f = k.folios.get(mapped_anon(k));
            (f.memcg as usize, f.lru as usize)
        };
        caught(
            |k| {
                let (m, lru) = list(k);
                k.lruvecs[m].lists[lru].len += 1
            },
            |k| {
                let (m, lru) = list(k);
                k.lruvecs[m].lists[lru].len -= 1
            },
            "length",
        );
    }
}

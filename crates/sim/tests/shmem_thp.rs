//! 6.1's PMD-size shmem folios: `shmem_is_huge`'s policy (tmpfs `huge=`,
//! shmem_enabled, MADV_HUGEPAGE/NOHUGEPAGE), the order-9 allocation and its
//! fallbacks, PMD mapping (`do_set_pmd`) against PTE mapping, zapping and
//! splitting PMDs, and reclaim splitting a THP before swap-out. Counts are
//! derived from the kernel's rules; every run also passes the invariant
//! checker (PMD entries, entire mapcounts, nr_shmem_hugepages and
//! nr_shmem_pmdmapped) and the content-integrity check.

mod common;
use common::*;

/// A 64 MiB object: 32 THPs of 512 pages.
const PAGES: i64 = 16384;
const THPS: i64 = 32;

fn tmpfs_spec(huge: &str, sysfs: &str, steps: &str) -> String {
    format!(
        r#"
[machine]
memory = "512M"
[sysfs]
{sysfs}
[[swap]]
device = "zram"
size = "256M"
[[file]]
name = "shm"
size = "64M"
on = "tmpfs"
huge = "{huge}"
[cgroup.w]
[task.main]
cgroup = "w"
steps = [
{steps}
]
"#
    )
}

const MAP: &str = r#"{ op = "mmap", name = "m", kind = "shmem", file = "shm", size = "64M" },"#;

#[test]
fn huge_always_maps_each_2m_block_with_one_pmd() {
    let r = run_checked(&tmpfs_spec(
        "always",
        "",
        &format!(
            r#"{MAP}
  {{ op = "phase", name = "write" }},
  {{ op = "touch", region = "m", write = 1.0 }},
  {{ op = "phase", name = "read" }},
  {{ op = "touch", region = "m" }},
  {{ op = "phase", name = "unmap" }},
  {{ op = "munmap", region = "m" }},"#
        ),
    ));
    // One fault per block: the THP is allocated and PMD-mapped at once.
    assert_eq!(phase_vm(&r, 0, "write", "pgfault"), THPS);
    assert_eq!(phase_vm(&r, 0, "write", "thp_file_alloc"), THPS);
    assert_eq!(phase_vm(&r, 0, "write", "thp_file_mapped"), THPS);
    assert_eq!(phase_vm(&r, 0, "write", "nr_shmem_pmdmapped"), THPS);
    assert_eq!(phase_vm(&r, 0, "write", "nr_mapped"), PAGES);
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 0);
    // munmap zaps the PMDs; the THPs stay in the page cache.
    assert_eq!(phase_vm(&r, 0, "unmap", "nr_shmem_pmdmapped"), -THPS);
    assert_eq!(phase_vm(&r, 0, "unmap", "nr_mapped"), -PAGES);
    assert_eq!(vm(&r, "nr_shmem_hugepages"), THPS);
    assert_eq!(vm(&r, "nr_shmem"), PAGES);
    let cg = &r.cgroups["w"];
    assert_eq!(cg.memory_stat["shmem_thp"], PAGES * 4096);
    assert_eq!(cg.memory_stat["shmem"], PAGES * 4096);
    assert_eq!(vm(&r, "thp_split_pmd") + vm(&r, "thp_file_fallback"), 0);
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
}

#[test]
fn huge_never_and_deny_give_order_0_pages() {
    let steps = format!("{MAP}\n  {{ op = \"touch\", region = \"m\", write = 1.0 }},");
    for (huge, sysfs) in [
        ("never", ""),
        (
            "always",
            "\"kernel/mm/transparent_hugepage/shmem_enabled\" = \"deny\"",
        ),
        ("advise", ""),
    ] {
        let r = run_checked(&tmpfs_spec(huge, sysfs, &steps));
        assert_eq!(vm(&r, "thp_file_alloc"), 0, "{huge} {sysfs}");
        assert_eq!(vm(&r, "pgfault"), PAGES, "{huge} {sysfs}");
        assert_eq!(vm(&r, "nr_shmem"), PAGES);
    }
}

#[test]
fn force_overrides_a_never_mount_and_nohugepage_refuses() {
    let force = "\"kernel/mm/transparent_hugepage/shmem_enabled\" = \"force\"";
    let touch = "{ op = \"touch\", region = \"m\", write = 1.0 },";
    let r = run_checked(&tmpfs_spec("never", force, &format!("{MAP}\n  {touch}")));
    assert_eq!(vm(&r, "thp_file_alloc"), THPS);
    assert_eq!(vm(&r, "thp_file_mapped"), THPS);
    let no = "{ op = \"madvise\", region = \"m\", advice = \"nohugepage\" },";
    let r = run_checked(&tmpfs_spec(
        "always",
        "",
        &format!("{MAP}\n  {no}\n  {touch}"),
    ));
    assert_eq!(vm(&r, "thp_file_alloc"), 0);
    assert_eq!(vm(&r, "pgfault"), PAGES);
}

#[test]
fn advise_and_within_size_follow_madv_hugepage() {
    let touch = "{ op = \"touch\", region = \"m\", write = 1.0 },";
    let hp = "{ op = \"madvise\", region = \"m\", advice = \"hugepage\" },";
    let r = run_checked(&tmpfs_spec(
        "advise",
        "",
        &format!("{MAP}\n  {hp}\n  {touch}"),
    ));
    assert_eq!(vm(&r, "thp_file_alloc"), THPS);
    // within_size: the 64 MiB file covers every block.
    let r = run_checked(&tmpfs_spec("within_size", "", &format!("{MAP}\n  {touch}")));
    assert_eq!(vm(&r, "thp_file_alloc"), THPS);
}

/// A mapping whose file offset is one page into a block: the address is
/// aligned to the offset (shmem_get_unmapped_area), so every block wholly
/// inside the VMA gets a PMD; the first and last blocks are only partly
/// mapped and their THPs are mapped a PTE at a time.
#[test]
fn a_partly_mapped_block_is_mapped_by_ptes() {
    let r = run_checked(&tmpfs_spec(
        "always",
        "",
        r#"{ op = "mmap", name = "m", kind = "shmem", file = "shm", offset = "4K", size = "63M" },
  { op = "touch", region = "m", write = 1.0 },"#,
    ));
    // 63 MiB (16128 pages) from page 1: blocks 1..=30 whole (30 PMDs);
    // block 0 has pages 1..512 mapped (511) and block 31 pages
    // 15872..16129 (257), each by its own write fault.
    assert_eq!(vm(&r, "thp_file_alloc"), THPS);
    assert_eq!(vm(&r, "thp_file_mapped"), 30);
    assert_eq!(vm(&r, "pgfault"), 30 + 511 + 257);
    assert_eq!(vm(&r, "nr_shmem_pmdmapped"), 0);
}

/// Reads of PTE-mapped THP pages fault around: 16 pages per fault.
#[test]
fn reads_of_a_pte_mapped_thp_fault_around() {
    let r = run_checked(&tmpfs_spec(
        "always",
        "",
        r#"{ op = "write", file = "shm" },
  { op = "mmap", name = "m", kind = "shmem", file = "shm", offset = "4K", size = "2044K" },
  { op = "phase", name = "read" },
  { op = "touch", region = "m" },"#,
    ));
    // 511 pages of block 0 from page 1: windows of 16, the first short.
    assert_eq!(phase_vm(&r, 0, "read", "pgfault"), 32);
    assert_eq!(phase_vm(&r, 0, "read", "nr_mapped"), 511);
    assert_eq!(vm(&r, "thp_file_alloc"), THPS);
}

/// write(2) allocates THPs too (no VMA: the mount's policy), and the
/// folio starts referenced (SGP_WRITE): the next write into it activates
/// all 512 pages.
#[test]
fn write_syscalls_allocate_thps_and_activate_them() {
    let r = run_checked(&tmpfs_spec(
        "always",
        "",
        r#"{ op = "phase", name = "write" },
  { op = "write", file = "shm" },
  { op = "phase", name = "read" },
  { op = "read", file = "shm" },"#,
    ));
    assert_eq!(vm(&r, "thp_file_alloc"), THPS);
    assert_eq!(phase_vm(&r, 0, "write", "pgactivate"), PAGES);
    assert_eq!(vm(&r, "pgfault"), 0);
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
}

/// A memcg too small for 512 pages: the charge fails after its reclaim
/// retries (no OOM for a costly order), the THP falls back to order 0.
#[test]
fn a_memcg_that_cannot_hold_a_thp_falls_back() {
    let text = r#"
[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "256M"
[[file]]
name = "shm"
size = "8M"
on = "tmpfs"
huge = "always"
[cgroup.w]
memory_max = "1M"
[task.main]
cgroup = "w"
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "8M" },
  { op = "touch", region = "m", write = 1.0 },
  { op = "touch", region = "m" },
]
"#;
    let r = run_checked(text);
    // Each fault on a hole tries the THP first: every page of every block
    // is a hole when first touched, since the block never fills.
    assert_eq!(vm(&r, "thp_file_alloc"), 0);
    assert_eq!(
        vm(&r, "thp_file_fallback"),
        vm(&r, "thp_file_fallback_charge")
    );
    assert_eq!(vm(&r, "thp_file_fallback_charge"), 4);
    assert!(vm(&r, "pswpout") > 0);
    assert_eq!(r.integrity.pages_checked, 2048);
}

/// MADV_PAGEOUT of PMD-mapped THPs: each is isolated whole, then reclaim
/// splits it (its PMD split too), and its 512 pages go to swap one by one.
/// They come back as order-0 pages through the swap cache.
#[test]
fn pageout_splits_thps_and_swaps_them_out_at_order_0() {
    let r = run_checked(&tmpfs_spec(
        "always",
        "",
        &format!(
            r#"{MAP}
  {{ op = "touch", region = "m", write = 1.0 }},
  {{ op = "phase", name = "pageout" }},
  {{ op = "madvise", region = "m", advice = "pageout" }},
  {{ op = "phase", name = "read" }},
  {{ op = "touch", region = "m" }},"#
        ),
    ));
    assert_eq!(phase_vm(&r, 0, "pageout", "thp_split_page"), THPS);
    assert_eq!(phase_vm(&r, 0, "pageout", "thp_split_pmd"), THPS);
    assert_eq!(phase_vm(&r, 0, "pageout", "pswpout"), PAGES);
    assert_eq!(phase_vm(&r, 0, "pageout", "nr_shmem_hugepages"), -THPS);
    assert_eq!(phase_vm(&r, 0, "read", "pswpin"), PAGES);
    assert_eq!(phase_vm(&r, 0, "read", "thp_file_alloc"), 0);
    assert_eq!(vm(&r, "nr_shmem_pmdmapped"), 0);
    assert_eq!(r.integrity.pages_checked, PAGES as u64);
}

/// A THP mapped by two tasks' PMDs is mapped twice: MADV_PAGEOUT leaves
/// it alone (page_mapcount != 1); MADV_DONTNEED of part of a block splits
/// (zaps) that task's PMD only.
#[test]
fn a_shared_thp_is_not_paged_out_and_a_partial_dontneed_splits_the_pmd() {
    let text = r#"
[machine]
memory = "512M"
[[swap]]
device = "zram"
size = "256M"
[[file]]
name = "shm"
size = "4M"
on = "tmpfs"
huge = "always"
[task.a]
steps = [
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "4M" },
  { op = "touch", region = "m", write = 1.0 },
  { op = "sleep", duration = "2s" },
]
[task.b]
steps = [
  { op = "sleep", duration = "1s" },
  { op = "mmap", name = "m", kind = "shmem", file = "shm", size = "4M" },
  { op = "touch", region = "m" },
  { op = "phase", name = "pageout" },
  { op = "madvise", region = "m", advice = "pageout" },
  { op = "phase", name = "dontneed" },
  { op = "madvise", region = "m", advice = "dontneed", offset = "1M", length = "2M" },
  { op = "phase", name = "reread" },
  { op = "touch", region = "m" },
]
"#;
    let r = run_checked(text);
    let b = r.tasks.iter().position(|t| t.name == "b").unwrap();
    assert_eq!(phase_vm(&r, b, "pageout", "pswpout"), 0);
    assert_eq!(phase_vm(&r, b, "pageout", "thp_split_page"), 0);
    // [1M, 3M) cuts both blocks: both of b's PMDs are split (zapped).
    assert_eq!(phase_vm(&r, b, "dontneed", "thp_split_pmd"), 2);
    assert_eq!(phase_vm(&r, b, "dontneed", "nr_shmem_pmdmapped"), 0);
    // b maps them again with PMDs (the blocks have no PTE tables).
    assert_eq!(phase_vm(&r, b, "reread", "pgfault"), 2);
    assert_eq!(vm(&r, "thp_file_mapped"), 6);
    assert_eq!(vm(&r, "nr_shmem_hugepages"), 2);
}

/// Shared anonymous memory takes its policy from shmem_enabled (the
/// internal mount).
#[test]
fn shmem_enabled_always_gives_shared_anon_thps() {
    let text = r#"
[machine]
memory = "512M"
[sysfs]
"kernel/mm/transparent_hugepage/shmem_enabled" = "always"
[task.main]
steps = [
  { op = "mmap", name = "m", kind = "shared_anon", size = "64M" },
  { op = "touch", region = "m", write = 1.0 },
  { op = "munmap", region = "m" },
]
"#;
    let r = run_checked(text);
    assert_eq!(vm(&r, "thp_file_alloc"), THPS);
    assert_eq!(vm(&r, "thp_file_mapped"), THPS);
    assert_eq!(vm(&r, "pgfault"), THPS);
    // The object goes with its last mapping.
    assert_eq!(vm(&r, "nr_shmem_hugepages"), 0);
    assert_eq!(vm(&r, "nr_shmem"), 0);
}

/// Fault-around over a block with cached pages and no PTE table (a THP
/// split by reclaim) allocates its table before it looks at the page
/// cache, as 6.1 does (`prealloc_pte`): the table's memcg charge may
/// reclaim, and a page reclaim freed must not be mapped after. Found by
/// the `large_shmem_folios` property (a frame freed twice).
#[test]
fn fault_around_allocates_its_table_before_its_lookups() {
    let r = run_checked(
        r#"
[machine]
memory = "512M"
[sysfs]
"kernel/mm/transparent_hugepage/shmem_enabled" = "always"
[[swap]]
device = "zram"
size = "128M"
[[file]]
name = "f"
size = "8M"
on = "tmpfs"
[cgroup.w]
memory_max = "8M"
[task.t]
cgroup = "w"
steps = [
{ op = "mmap", name = "r0", kind = "shmem", file = "f", offset = "64K", size = "8128K" },
{ op = "mmap", name = "r1", kind = "shared_anon", size = "2M" },
{ op = "fork", steps = [ { op = "touch", region = "r1", order = "seq", write = 0, seed = 0 }, ] },
{ op = "touch", region = "r1", order = "seq", write = 0, seed = 0 },
{ op = "madvise", region = "r1", advice = "pageout", offset = "0K", length = "64K" },
{ op = "touch", region = "r1", order = "seq", write = 0, seed = 0 },
{ op = "touch", region = "r0" },
{ op = "read", file = "f" },
]
"#,
    );
    assert!(vm(&r, "thp_file_alloc") > 0);
    assert!(vm(&r, "thp_split_page") > 0);
}

//! Property tests: any small workload the spec can express keeps the
//! simulated kernel's invariants (frames, mapcounts, refcounts, swap
//! counts, memcg charges) and never loses a page's content.

mod common;
use proptest::prelude::*;

fn order_text(o: u8) -> &'static str {
    ["seq", "rev", "shuffle", "uniform", "zipf"][o as usize % 5]
}

prop_compose! {
    fn touch()(order in 0u8..5, write in prop::sample::select(vec![0.0, 0.3, 1.0]), seed in 0u64..1000,
               count in 200u64..3000, region in 0usize..2)
        -> String {
        let o = order_text(order);
        let amount = if o == "seq" || o == "rev" || o == "shuffle" { String::new() } else { format!(", count = {count}") };
        format!("{{ op = \"touch\", region = \"r{region}\", order = \"{o}\", write = {write}, seed = {seed}{amount} }},")
    }
}

prop_compose! {
    /// A madvise over part of a region, or a fork whose child touches one.
    fn other_op()(kind in 0u8..12, region in 0usize..2, first_mb in 0u64..2, len_mb in 1u64..2, t in touch())
        -> String {
        let range = format!("offset = \"{first_mb}M\", length = \"{len_mb}M\"");
        match kind {
            0 => format!("{{ op = \"madvise\", region = \"r{region}\", advice = \"pageout\", {range} }},"),
            1 => format!("{{ op = \"madvise\", region = \"r{region}\", advice = \"cold\" }},"),
            2 => format!("{{ op = \"madvise\", region = \"r{region}\", advice = \"dontneed\", {range} }},"),
            3 => format!("{{ op = \"madvise\", region = \"r{region}\", advice = \"free\", {range} }},"),
            4 => format!("{{ op = \"madvise\", region = \"r{region}\", advice = \"willneed\" }},"),
            5 => format!("{{ op = \"fork\", steps = [ {t} ] }},"),
            6 => format!("{{ op = \"madvise\", region = \"r{region}\", advice = \"sequential\" }},"),
            7 => format!("{{ op = \"write\", file = \"f\", {range} }},"),
            8 => format!("{{ op = \"read\", file = \"f\", {range} }},"),
            9 => "{ op = \"stream\", file = \"f\", window = \"1M\" },".to_string(),
            10 => "{ op = \"drop_caches\" },".to_string(),
            _ => "{ op = \"wait\" },".to_string(),
        }
    }
}

prop_compose! {
    /// An op on a disk file or its mapping `r1`.
    fn file_op()(kind in 0u8..13, first_mb in 0u64..4, len_mb in 1u64..4, t in touch())
        -> String {
        let range = format!("offset = \"{first_mb}M\", length = \"{len_mb}M\"");
        match kind {
            0 => format!("{{ op = \"madvise\", region = \"r1\", advice = \"pageout\", {range} }},"),
            1 => "{ op = \"madvise\", region = \"r1\", advice = \"cold\" },".to_string(),
            2 => format!("{{ op = \"madvise\", region = \"r1\", advice = \"dontneed\", {range} }},"),
            3 => "{ op = \"madvise\", region = \"r1\", advice = \"willneed\" },".to_string(),
            4 => "{ op = \"madvise\", region = \"r1\", advice = \"random\" },".to_string(),
            5 => "{ op = \"madvise\", region = \"r1\", advice = \"sequential\" },".to_string(),
            6 => format!("{{ op = \"fork\", steps = [ {t} ] }},"),
            7 => format!("{{ op = \"write\", file = \"f\", {range} }},"),
            8 => format!("{{ op = \"read\", file = \"f\", {range}, chunk = \"8K\" }},"),
            9 => "{ op = \"stream\", file = \"f\", window = \"1M\" },".to_string(),
            10 => "{ op = \"drop_caches\" },".to_string(),
            11 => "{ op = \"fsync\", file = \"f\" },".to_string(),
            _ => "{ op = \"wait\" },".to_string(),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Files on disks (ext2, or XFS with large folios; block devices or a
    /// RAM disk): shared and private mappings, read(2), write(2), fsync,
    /// streams, drop_caches, madvise (MADV_PAGEOUT splitting large folios
    /// or paging them out whole) and fork in any order, under a memory
    /// limit that makes reclaim evict, write back and refault file pages,
    /// with or without batched rmap removal, keep the invariants (page
    /// cache, per-page mapcounts, dirty counts, writeback and reads in
    /// flight, the buddy lists) and every page's content.
    #[test]
    fn files_on_disks(
        device in prop::sample::select(vec!["virtio", "nvme", "hdd", "ram"]),
        fs in prop::sample::select(vec!["ext2", "xfs"]),
        split in any::<bool>(),
        batched in any::<bool>(),
        kind in prop::sample::select(vec!["file", "file_private"]),
        exec in any::<bool>(),
        used_once in any::<bool>(),
        ra_kb in prop::sample::select(vec![0u32, 16, 128, 512]),
        cpus in 1u32..3,
        ops in prop::collection::vec((touch(), file_op()), 1..7),
        limit_mb in 4u64..12,
    ) {
        let mut steps = format!(
            "{{ op = \"mmap\", name = \"r0\", kind = \"anon\", size = \"2M\" }},\n{{ op = \"mmap\", name = \"r1\", kind = \"{kind}\", file = \"f\", size = \"8M\", exec = {exec} }},\n{{ op = \"phase\", name = \"p\" }},\n"
        );
        for (t, o) in &ops {
            steps += t;
            steps += "\n";
            steps += o;
            steps += "\n";
        }
        steps += "{ op = \"touch\", region = \"r1\" },\n{ op = \"read\", file = \"f\" },\n";
        // XFS needs 300 MiB at least (mkfs.xfs).
        let disk_mb = if fs == "xfs" { 320 } else { 64 };
        let text = format!(r#"
[machine]
memory = "512M"
cpus = {cpus}
[features]
used_once_mapped_file = {used_once}
madv_pageout_split = {split}
batched_rmap_unmap = {batched}
[[swap]]
device = "zram"
size = "64M"
[[disk]]
name = "d"
device = "{device}"
size = "{disk_mb}M"
read_ahead_kb = {ra_kb}
fs = "{fs}"
[[file]]
name = "f"
size = "8M"
on = "d"
[cgroup.w]
memory_max = "{limit_mb}M"
[task.t]
cgroup = "w"
steps = [
{steps}]
"#);
        match common::try_run(&text) {
            Ok(r) => prop_assert_eq!(r.integrity.violations, 0),
            // A 4-5 MiB memcg whose pages are all locked for reads in flight
            // on a slow disk (an HDD behind a MADV_WILLNEED of the file)
            // fails a charge: the reclaim throttling that would wait for
            // those reads is not modelled (docs/model.md), so such a run
            // ends out of memory. The invariants held at every phase mark
            // before; any other error fails the property.
            Err(mmsim_sim::SimError::Oom) if device == "hdd" && limit_mb < 6 => {}
            Err(e) => panic!("{e}"),
        }
    }

    /// Block devices, fork, madvise and swapoff/swapon in any order keep
    /// the invariants (the swap cache, writeback and locked folios
    /// included) and every page's content.
    #[test]
    fn swap_cache_fork_madvise_swapoff(
        device in prop::sample::select(vec!["zram", "virtio", "nvme", "hdd"]),
        cpus in 1u32..3,
        sizes in (2u64..8, 2u64..8),
        ops in prop::collection::vec((touch(), other_op()), 1..6),
        swapoff_at in 0usize..6,
        limit_mb in 6u64..16,
        shared in prop::sample::select(vec!["anon", "shared_anon"]),
    ) {
        let mut steps = format!(
            "{{ op = \"mmap\", name = \"r0\", kind = \"anon\", size = \"{}M\" }},\n{{ op = \"mmap\", name = \"r1\", kind = \"{shared}\", size = \"{}M\" }},\n{{ op = \"touch\", region = \"r0\", write = 1.0 }},\n{{ op = \"touch\", region = \"r1\", write = 1.0 }},\n{{ op = \"phase\", name = \"p\" }},\n",
            sizes.0, sizes.1
        );
        for (i, (t, o)) in ops.iter().enumerate() {
            steps += t;
            steps += "\n";
            // MADV_FREE is for private anonymous memory only.
            steps += &o.replace("region = \"r1\", advice = \"free\"", "region = \"r0\", advice = \"free\"");
            steps += "\n";
            if i == swapoff_at {
                steps += "{ op = \"swapoff\", device = 0 },\n{ op = \"phase\", name = \"off\" },\n{ op = \"swapon\", device = 0 },\n";
            }
        }
        steps += "{ op = \"touch\", region = \"r0\" },\n{ op = \"touch\", region = \"r1\" },\n";
        // memory.max sits above everything the task can map (two regions
        // and a child's copies), so swapoff always finds room.
        let text = format!(r#"
[machine]
memory = "256M"
cpus = {cpus}
[[swap]]
device = "{device}"
size = "64M"
[[file]]
name = "f"
size = "4M"
on = "tmpfs"
[cgroup.w]
memory_high = "{limit_mb}M"
[task.t]
cgroup = "w"
steps = [
{steps}]
"#);
        let r = common::run_checked(&text);
        prop_assert_eq!(r.integrity.violations, 0);
    }

    #[test]
    fn invariants_and_integrity_hold(
        limit_mb in 2u64..12,
        high in any::<bool>(),
        swappiness in prop::sample::select(vec![1u32, 60, 100, 200]),
        cpus in 1u32..3,
        instances in 1u32..3,
        sizes in (1u64..8, 1u64..8),
        touches in prop::collection::vec(touch(), 1..6),
        unmap_first in any::<bool>(),
    ) {
        let limit = if high {
            format!("memory_high = \"{limit_mb}M\"")
        } else {
            format!("memory_max = \"{limit_mb}M\"")
        };
        let mut steps = format!(
            "{{ op = \"mmap\", name = \"r0\", kind = \"anon\", size = \"{}M\" }},\n{{ op = \"mmap\", name = \"r1\", kind = \"anon\", size = \"{}M\" }},\n{{ op = \"phase\", name = \"p\" }},\n",
            sizes.0, sizes.1
        );
        for t in &touches {
            steps += t;
            steps += "\n";
        }
        if unmap_first {
            steps += "{ op = \"munmap\", region = \"r0\" },\n{ op = \"touch\", region = \"r1\", order = \"seq\" },\n";
        }
        let text = format!(r#"
[machine]
memory = "256M"
cpus = {cpus}
[sysctl]
"vm.swappiness" = {swappiness}
[[swap]]
device = "zram"
size = "64M"
[cgroup.w]
{limit}
[task.t]
cgroup = "w"
instances = {instances}
steps = [
{steps}]
"#);
        let r = common::run_checked(&text);
        prop_assert_eq!(r.integrity.violations, 0);
        let cg = &r.cgroups["w"];
        if !high {
            prop_assert!(cg.memory_peak <= limit_mb << 20);
        }
    }
}

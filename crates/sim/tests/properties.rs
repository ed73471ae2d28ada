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

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

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

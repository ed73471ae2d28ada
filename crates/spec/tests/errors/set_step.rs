//! The set step: a knob or cgroup limit changed between steps.

use super::*;

const SET_HEAD: &str =
    "[machine]\nmemory = \"256M\"\n[cgroup.w]\nmemory_max = \"max\"\n[task.t]\nsteps = [\n";

fn set_step(step: &str) -> String {
    format!("{SET_HEAD}  {step},\n]\n")
}

#[test]
fn set_steps_parse_to_their_settings() {
    use mmsim_spec::Setting;
    let one = |step: &str| -> Setting {
        let spec = parse(&set_step(step)).unwrap_or_else(|e| panic!("{e}"));
        match &spec.tasks[0].steps[0].op {
            Op::Set(s) => s.clone(),
            op => panic!("{op:?}"),
        }
    };
    assert_eq!(
        one(r#"{ op = "set", key = "cgroup.w.memory_max", value = "50M" }"#),
        Setting::MemoryMax {
            cgroup: "w".into(),
            limit: Limit::Bytes(50 << 20)
        }
    );
    assert_eq!(
        one(r#"{ op = "set", key = "cgroup.w.memory_high", value = "max" }"#),
        Setting::MemoryHigh {
            cgroup: "w".into(),
            limit: Limit::Max
        }
    );
    assert_eq!(
        one(r#"{ op = "set", key = 'sysctl."vm.swappiness"', value = 100 }"#),
        Setting::Swappiness(100)
    );
    assert_eq!(
        one(r#"{ op = "set", key = 'sysctl."vm.min_free_kbytes"', value = 8192 }"#),
        Setting::MinFreeKbytes(8192)
    );
    assert_eq!(
        one(r#"{ op = "set", key = 'sysfs."kernel/mm/swap/vma_ra_enabled"', value = "n" }"#),
        Setting::VmaRaEnabled(false)
    );
    let s = one(r#"{ op = "set", key = 'sysctl."vm.page-cluster"', value = 0 }"#);
    assert_eq!(
        s.knob(),
        Some(("sysctl:vm.page-cluster".into(), "0".into()))
    );
}

#[test]
fn set_steps_with_bad_keys_or_values_are_rejected_at_their_line() {
    let e = rejected(&set_step(
        r#"{ op = "set", key = "machine.memory", value = "1G" }"#,
    ));
    check(
        &e,
        7,
        "task.t.steps[0].key",
        &["machine.memory", "cgroup.NAME.memory_max"],
    );
    let e = rejected(&set_step(
        r#"{ op = "set", key = "cgroup.x.memory_max", value = "1G" }"#,
    ));
    check(
        &e,
        7,
        "task.t.steps[0].key",
        &["\"x\"", "[cgroup.NAME]", "w"],
    );
    let e = rejected(&set_step(
        r#"{ op = "set", key = 'sysctl."vm.swappiness"', value = 201 }"#,
    ));
    check(&e, 7, "task.t.steps[0].value", &["201", "0 to 200"]);
    let e = rejected(&set_step(
        r#"{ op = "set", key = 'sysctl."vm.dirty_ratio"', value = 5 }"#,
    ));
    check(&e, 7, "task.t.steps[0].key", &["vm.dirty_ratio"]);
    let e = rejected(&set_step(
        r#"{ op = "set", key = 'sysfs."kernel/mm/swap/vma_ra_enabled"', value = "maybe" }"#,
    ));
    check(&e, 7, "task.t.steps[0].value", &["boolean"]);
    let e = rejected(&set_step(r#"{ op = "set", key = "cgroup.w.memory_max" }"#));
    check(&e, 7, "task.t.steps[0].value", &["missing"]);
}

#[test]
fn shmem_thp_is_refused_on_5_10() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
kernel = "5.10"
[sysfs]
"kernel/mm/transparent_hugepage/shmem_enabled" = "force"
"#,
    ));
    check(
        &e,
        5,
        "sysfs.\"kernel/mm/transparent_hugepage/shmem_enabled\"",
        &["5.10", "6.1's shmem THP", "\"never\""],
    );
}

#[test]
fn a_declared_miss_names_a_preset_and_a_counter_of_the_tolerances() {
    let ok = parse(&with_task(
        r#"[machine]
memory = "512M"
[fidelity]
tolerance = { pgfault = 0.05 }
[fidelity.miss."5.10"]
pgfault = "why"
"#,
    ))
    .unwrap();
    assert_eq!(ok.fidelity.miss(Preset::V5_10, "pgfault"), Some("why"));
    assert_eq!(ok.fidelity.miss(Preset::V6_1, "pgfault"), None);
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[fidelity]
tolerance = { pgfault = 0.05 }
[fidelity.miss."5.15"]
pgfault = "why"
"#,
    ));
    check(
        &e,
        5,
        "fidelity.miss.\"5.15\"",
        &["5.15", "5.10, 6.1, 6.12, 7.3"],
    );
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[fidelity]
tolerance = { pgfault = 0.05 }
[fidelity.miss."5.10"]
pswpin = "why"
"#,
    ));
    check(
        &e,
        6,
        "fidelity.miss.\"5.10\".pswpin",
        &["pswpin", "tolerance"],
    );
}

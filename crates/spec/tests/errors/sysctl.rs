//! [sysctl]: the sysctls mmsim models and their ranges.

use super::*;

#[test]
fn unknown_sysctl() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = 100
"vm.dirty_ratio" = 20
"#,
    ));
    check(
        &e,
        5,
        "sysctl.\"vm.dirty_ratio\"",
        &[
            "vm.dirty_ratio",
            "does not model",
            "vm.swappiness",
            "vm.watermark_scale_factor",
            "vm.min_free_kbytes",
        ],
    );
}

#[test]
fn swappiness_out_of_range() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = 201
"#,
    ));
    check(&e, 4, "sysctl.\"vm.swappiness\"", &["201", "0 to 200"]);
}

#[test]
fn swappiness_negative() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = -1
"#,
    ));
    check(&e, 4, "sysctl.\"vm.swappiness\"", &["-1", "0 to 200"]);
}

#[test]
fn watermark_scale_factor_out_of_range() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.watermark_scale_factor" = 0
"#,
    ));
    check(
        &e,
        4,
        "sysctl.\"vm.watermark_scale_factor\"",
        &["found 0", "1 to 3000"],
    );
}

#[test]
fn sysctl_of_wrong_type() {
    let e = rejected(&with_task(
        r#"[machine]
memory = "512M"
[sysctl]
"vm.swappiness" = "60"
"#,
    ));
    check(&e, 4, "sysctl.\"vm.swappiness\"", &["\"60\"", "an integer"]);
}

//! The sysctls mmsim models, one row each: its name, the values a spec may
//! give it, its value until a spec sets it, where the validated spec keeps
//! it (`Sysctl`) and the `set` step that changes it mid-run. Every preset
//! has every one of them; each may be set in `[sysctl]`, by `--set
//! sysctl."NAME"=V` and by a `set` step. The simulator applies them where
//! its mechanisms read `Spec::sysctl` (and `Setting` for a `set` step);
//! the runner writes each to /proc/sys/NAME (`Spec::knobs`).

use crate::model::{Setting, Sysctl};

/// One sysctl.
pub struct SysctlKnob {
    /// Its name, dotted as sysctl(8) writes it (`vm.swappiness`).
    pub name: &'static str,
    /// The values a spec may give it.
    pub min: i64,
    pub max: i64,
    /// Its value until the spec sets it; None: the kernel computes it
    /// from the machine, and a spec that leaves it alone does not write it.
    pub default: Option<u64>,
    /// Its value in the validated spec (None: left to the kernel).
    pub get: fn(&Sysctl) -> Option<u64>,
    /// Sets it in the validated spec.
    pub put: fn(&mut Sysctl, u64),
    /// The `set` step that writes `value` to it mid-run, and back: the
    /// value such a step writes to it (None: a step of another knob).
    pub setting: fn(u64) -> Setting,
    pub of_setting: fn(&Setting) -> Option<u64>,
}

/// Every sysctl mmsim models, in the order `Spec::knobs` lists them.
pub const SYSCTLS: &[SysctlKnob] = &[
    SysctlKnob {
        name: "vm.swappiness",
        min: 0,
        max: 200,
        default: Some(60),
        get: |s| Some(s.swappiness as u64),
        put: |s, n| s.swappiness = n as u32,
        setting: |n| Setting::Swappiness(n as u32),
        of_setting: |s| match s {
            Setting::Swappiness(n) => Some(*n as u64),
            _ => None,
        },
    },
    SysctlKnob {
        name: "vm.watermark_scale_factor",
        min: 1,
        max: 3000,
        default: Some(10),
        get: |s| Some(s.watermark_scale_factor as u64),
        put: |s, n| s.watermark_scale_factor = n as u32,
        setting: |n| Setting::WatermarkScaleFactor(n as u32),
        of_setting: |s| match s {
            Setting::WatermarkScaleFactor(n) => Some(*n as u64),
            _ => None,
        },
    },
    SysctlKnob {
        name: "vm.min_free_kbytes",
        min: 128,
        max: 1 << 30,
        default: None,
        get: |s| s.min_free_kbytes,
        put: |s, n| s.min_free_kbytes = Some(n),
        setting: Setting::MinFreeKbytes,
        of_setting: |s| match s {
            Setting::MinFreeKbytes(n) => Some(*n),
            _ => None,
        },
    },
    // The kernel accepts any non-negative value; mmsim stops at 10
    // (1024-page windows), well past any useful readahead.
    SysctlKnob {
        name: "vm.page-cluster",
        min: 0,
        max: 10,
        default: Some(3),
        get: |s| Some(s.page_cluster as u64),
        put: |s, n| s.page_cluster = n as u32,
        setting: |n| Setting::PageCluster(n as u32),
        of_setting: |s| match s {
            Setting::PageCluster(n) => Some(*n as u64),
            _ => None,
        },
    },
    // 0 is the kernel's own value (lists sized from the low watermark),
    // which a spec gets by leaving it; 1 to 7 the kernel refuses
    // (MIN_PERCPU_PAGELIST_HIGH_FRACTION); the file is an int.
    SysctlKnob {
        name: "vm.percpu_pagelist_high_fraction",
        min: 8,
        max: i32::MAX as i64,
        default: None,
        get: |s| {
            (s.percpu_pagelist_high_fraction != 0).then_some(s.percpu_pagelist_high_fraction as u64)
        },
        put: |s, n| s.percpu_pagelist_high_fraction = n as u32,
        setting: |n| Setting::PercpuPagelistHighFraction(n as u32),
        of_setting: |s| match s {
            Setting::PercpuPagelistHighFraction(n) => Some(*n as u64),
            _ => None,
        },
    },
];

/// The sysctl `name` names.
pub fn sysctl(name: &str) -> Option<&'static SysctlKnob> {
    SYSCTLS.iter().find(|k| k.name == name)
}

impl Sysctl {
    /// Every sysctl at its value before a spec sets it.
    pub fn defaults() -> Sysctl {
        let mut s = Sysctl {
            swappiness: 0,
            watermark_scale_factor: 0,
            min_free_kbytes: None,
            page_cluster: 0,
            percpu_pagelist_high_fraction: 0,
        };
        for k in SYSCTLS {
            if let Some(v) = k.default {
                (k.put)(&mut s, v);
            }
        }
        s
    }
}

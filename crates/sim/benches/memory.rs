//! Host memory per simulated page frame, against the docs/design.md target of at
//! most 48 bytes per frame (so that a 128 GiB machine fits in 8 GiB).
//!
//! A counting global allocator records the bytes the simulator holds on the
//! heap; each case runs in a fresh child process (this binary re-run with
//! `--case NAME`) so that its peak heap and its peak resident set (VmHWM)
//! are its own. The parent prints one line per case and then the costs
//! derived from them:
//!
//! - per frame: the heap peak of a run that boots the machine and maps
//!   4 KiB, divided by the frames the page allocator manages (MemTotal /
//!   4096) and by the machine's 4 KiB pages;
//! - per mapped page: mapping 4 GiB (untouched, then written once) minus
//!   the boot case, per page of the mapping;
//! - per swap slot: a 16 GiB zram device minus the boot case, per slot;
//! - per swapped-out page: a 1536 MiB region written on a 1 GiB machine
//!   with 2 GiB of zram, minus the same spec without touches.
//!
//! Run with `cargo bench -p mmsim-sim --bench memory`.

use mmsim_sim::{run, RunOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

struct Counting;

static CUR: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grow(n: usize) {
    let now = CUR.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            grow(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            grow(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        CUR.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                grow(new - l.size());
            } else {
                CUR.fetch_sub(l.size() - new, Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

/// (name, machine memory, swap size or "", region size, touch steps).
const CASES: &[(&str, &str, &str, &str, &str)] = &[
    ("boot_16G", "16G", "", "4K", ""),
    ("boot_64G", "64G", "", "4K", ""),
    ("boot_128G", "128G", "", "4K", ""),
    ("mapped_4G_on_16G", "16G", "", "4G", ""),
    ("written_4G_on_16G", "16G", "", "4G", WRITE_ONCE),
    ("zram_16G_on_16G", "16G", "16G", "4K", ""),
    ("swapbase_1536M_on_1G", "1G", "2G", "1536M", ""),
    ("swapped_1536M_on_1G", "1G", "2G", "1536M", WRITE_ONCE),
];

const WRITE_ONCE: &str = r#"{ op = "touch", region = "heap", order = "seq", write = 1.0 },"#;

fn spec_text(memory: &str, swap: &str, region: &str, steps: &str) -> String {
    let swap = if swap.is_empty() {
        String::new()
    } else {
        format!("[[swap]]\ndevice = \"zram\"\nsize = \"{swap}\"\n")
    };
    format!(
        r#"
[machine]
memory = "{memory}"
cpus = 1
kernel = "6.1"

[sysfs]
"kernel/mm/transparent_hugepage/enabled" = "never"

{swap}
[task.main]
steps = [
  {{ op = "mmap", name = "heap", kind = "anon", size = "{region}" }},
  {steps}
]
"#
    )
}

/// VmRSS or VmHWM of this process, bytes.
fn proc_status(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Child: run one case and print `name frames pages slots region_pages
/// heap_peak rss_peak heap_end secs`.
fn run_case(name: &str) {
    let &(_, memory, swap, region, steps) = CASES.iter().find(|c| c.0 == name).expect("known case");
    let text = spec_text(memory, swap, region, steps);
    let spec = mmsim_spec::parse_str(&text, "memory-bench.toml", &[]).expect("bench spec");
    let heap0 = CUR.load(Relaxed);
    let rss0 = proc_status("VmRSS:");
    PEAK.store(heap0, Relaxed);
    let t0 = Instant::now();
    let r = run(&spec, RunOptions::default()).expect("bench run");
    let secs = t0.elapsed().as_secs_f64();
    let heap_peak = PEAK.load(Relaxed) - heap0;
    let rss_peak = proc_status("VmHWM:").saturating_sub(rss0);
    assert_eq!(r.integrity.violations, 0);
    let frames = r.machine.mem_total_bytes / 4096;
    let pages = r.machine.memory_bytes / 4096;
    let slots = spec.swap.iter().map(|s| s.size / 4096).sum::<u64>();
    let region_pages = match &spec.tasks[0].steps[0].op {
        mmsim_spec::Op::Mmap { pages, .. } => *pages,
        _ => unreachable!("the first step maps the region"),
    };
    let heap_end = CUR.load(Relaxed).saturating_sub(heap0);
    println!("{name} {frames} {pages} {slots} {region_pages} {heap_peak} {rss_peak} {heap_end} {secs:.3}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--case") {
        run_case(&args[i + 1]);
        return;
    }
    let exe = std::env::current_exe().expect("current exe");
    println!("mmsim host memory per simulated frame (heap: counting allocator; RSS: VmHWM growth)");
    println!(
        "{:<22} {:>10} {:>10} {:>9} {:>14} {:>14} {:>10} {:>10} {:>7}",
        "case",
        "frames",
        "pages",
        "slots",
        "heap peak B",
        "RSS peak B",
        "heap/frame",
        "heap/page",
        "secs"
    );
    let mut rows = Vec::new();
    for &(name, ..) in CASES {
        let out = Command::new(&exe)
            .args(["--case", name])
            .output()
            .expect("spawn case");
        assert!(
            out.status.success(),
            "case {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8(out.stdout).expect("utf8");
        let f: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| f[i].parse::<f64>().expect("number");
        let row = Row {
            name,
            frames: n(1),
            pages: n(2),
            slots: n(3),
            region: n(4),
            heap: n(5),
            rss: n(6),
        };
        println!(
            "{:<22} {:>10} {:>10} {:>9} {:>14} {:>14} {:>10.2} {:>10.2} {:>7}",
            name,
            row.frames,
            row.pages,
            row.slots,
            row.heap,
            row.rss,
            row.heap / row.frames,
            row.heap / row.pages,
            f[8]
        );
        rows.push(row);
    }
    let get = |n: &str| rows.iter().find(|r| r.name == n).expect("row");
    let boot = get("boot_16G");
    println!();
    for b in ["boot_16G", "boot_64G", "boot_128G"] {
        let r = get(b);
        println!(
            "frame table + boot ({b}): {:.2} B heap / {:.2} B RSS per managed frame (MemTotal/4096), {:.2} B heap per machine page",
            r.heap / r.frames,
            r.rss / r.frames,
            r.heap / r.pages
        );
    }
    let m = get("mapped_4G_on_16G");
    println!(
        "per mapped page, untouched: {:.2} B heap ({:.2} B RSS)",
        (m.heap - boot.heap) / m.region,
        (m.rss - boot.rss) / m.region
    );
    let w = get("written_4G_on_16G");
    println!(
        "per mapped page, written once: {:.2} B heap ({:.2} B RSS)",
        (w.heap - boot.heap) / w.region,
        (w.rss - boot.rss) / w.region
    );
    let z = get("zram_16G_on_16G");
    println!(
        "per swap slot (zram, empty): {:.2} B heap ({:.2} B RSS)",
        (z.heap - boot.heap) / z.slots,
        (z.rss - boot.rss) / z.slots
    );
    let (sb, sw) = (get("swapbase_1536M_on_1G"), get("swapped_1536M_on_1G"));
    println!(
        "a 1536 MiB region written on a 1 GiB machine with 2 GiB zram, over the same run without touches: {:+.0} B heap ({:+.0} B RSS) in all",
        sw.heap - sb.heap,
        sw.rss - sb.rss
    );
}

struct Row {
    name: &'static str,
    frames: f64,
    pages: f64,
    slots: f64,
    region: f64,
    heap: f64,
    rss: f64,
}

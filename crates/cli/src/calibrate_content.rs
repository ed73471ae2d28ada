//! `mmsim calibrate --zram-content PROFILE`: what zram makes of each page
//! content with each compressor this machine's kernel offers, measured
//! natively (the runner's `--zram-content-bench`) and written into the
//! profile's `compress` table (docs/calibrate.md "Page content").
//!
//! Per compressor and kind: `bytes` is mm_stat's compr_data_size over the
//! pages stored (the same for every run: compression is deterministic);
//! `compress_ns` is the profile's `zram_compress` (token pages with
//! lzo-rle, solved with the other constants) plus the difference of the
//! marginal write time (2n slots less n) between this kind and the token
//! pages with lzo-rle in the same bench, over n; `decompress_ns` the same
//! for reads from `zram_decompress`. Each marginal time is the minimum
//! over the runs, as calibrate takes every timed quantity.

use crate::calibrate::{date_now, spec_path, CalibrateArgs};
use mmsim_sim::machine_profile::{CompressEntry, CompressTable, MachineProfile};
use mmsim_spec::output::{ZramContentBench, ZramContentEntry};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// n: each kind is written over n and 2n fresh slots.
const PAGES: u64 = 4096;

/// The table the zram content runs recorded under DIR/zram-content/
/// solve to with `p`'s zram constants; empty when there are none (the
/// whole calibration solved `--from` a folder keeps its table).
pub fn table_from(dir: &Path, p: &MachineProfile) -> Result<CompressTable, (u8, String)> {
    let d = dir.join("zram-content");
    if !d.is_dir() {
        return Ok(CompressTable::new());
    }
    let runs = load(&d).map_err(|e| (2, e))?;
    if runs.is_empty() {
        return Ok(CompressTable::new());
    }
    let c = p.costs();
    solve(&runs, c.zram_compress, c.zram_decompress)
}

pub fn calibrate_content(a: &CalibrateArgs, profile: &Path) -> Result<(), (u8, String)> {
    let text =
        std::fs::read_to_string(profile).map_err(|e| (2, format!("{}: {e}", profile.display())))?;
    let mut p =
        MachineProfile::parse(&text).map_err(|e| (2, format!("{}: {e}", profile.display())))?;
    let runs = match &a.from {
        Some(d) => load(&d.join("zram-content")).map_err(|e| (2, e))?,
        None => {
            let runs = measure(a)?;
            if let Some(d) = &a.record {
                record(&d.join("zram-content"), &runs).map_err(|e| (1, e))?;
            }
            runs
        }
    };
    if runs.is_empty() {
        return Err((2, "no zram content runs to solve from".into()));
    }
    let costs = p.costs();
    p.compress = solve(&runs, costs.zram_compress, costs.zram_decompress)?;
    let out = a.output.clone().unwrap_or_else(|| profile.to_path_buf());
    let doc = p.to_toml();
    if out == Path::new("-") {
        print!("{doc}");
        return Ok(());
    }
    crate::write_atomically(&out, doc.trim_end().as_bytes())
        .map_err(|e| (1, format!("{}: {e}", out.display())))?;
    eprintln!(
        "mmsim calibrate: wrote {} ({} compressors, {} runs)",
        out.display(),
        p.compress.len(),
        runs.len()
    );
    Ok(())
}

fn measure(a: &CalibrateArgs) -> Result<Vec<ZramContentBench>, (u8, String)> {
    let runner = mmsim_oracle::runner_path(a.runner.clone()).map_err(|e| (2, e.to_string()))?;
    let mut out = Vec::new();
    for run in 0..a.runs {
        eprintln!(
            "mmsim calibrate: zram content, run {} of {}",
            run + 1,
            a.runs
        );
        let doc =
            mmsim_oracle::native::zram_bench(&runner, &spec_path(&a.dir, "zram"), PAGES, true)
                .map_err(|e| (1, e.to_string()))?
                .map_err(|refusal| (2, refusal))?;
        let mut b: ZramContentBench = serde_json::from_str(&doc)
            .map_err(|e| (1, format!("the zram content bench's document: {e}")))?;
        b.date = date_now("+%Y-%m-%d");
        out.push(b);
    }
    Ok(out)
}

fn record(dir: &Path, runs: &[ZramContentBench]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let first = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    for (i, r) in runs.iter().enumerate() {
        let path = dir.join(format!("run-{}.json", first + i));
        let doc = serde_json::to_string_pretty(r).expect("serialises");
        crate::write_atomically(&path, doc.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn load(dir: &Path) -> Result<Vec<ZramContentBench>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let t = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            serde_json::from_str(&t).map_err(|e| format!("{}: {e}", f.display()))
        })
        .collect()
}

/// The marginal time of n pages (2n slots less n), ns per page.
fn marginal(t: [u64; 2], n: u64) -> f64 {
    (t[1] as f64 - t[0] as f64) / n as f64
}

/// The table from the runs (see the module's comment).
pub fn solve(
    runs: &[ZramContentBench],
    zram_compress: u64,
    zram_decompress: u64,
) -> Result<CompressTable, (u8, String)> {
    // (compressor, kind) → the entries of every run.
    let mut by: BTreeMap<(String, String), Vec<&ZramContentEntry>> = BTreeMap::new();
    for r in runs {
        for e in &r.entries {
            by.entry((e.compressor.clone(), e.kind.clone()))
                .or_default()
                .push(e);
        }
    }
    let n = runs[0].pages;
    let min_of = |es: &[&ZramContentEntry], f: &dyn Fn(&ZramContentEntry) -> [u64; 2]| {
        es.iter()
            .map(|e| marginal(f(e), n))
            .fold(f64::INFINITY, f64::min)
    };
    let reference = by
        .get(&("lzo-rle".to_string(), "token".to_string()))
        .ok_or((
            2,
            "the runs have no lzo-rle token pages to difference against".to_string(),
        ))?;
    let (w0, r0) = (
        min_of(reference, &|e| e.write_ns),
        min_of(reference, &|e| e.read_ns),
    );
    // The last run's day: the table solved again from the recordings is
    // the same, whatever day that is.
    let date = runs.iter().map(|r| r.date.as_str()).max().unwrap_or("");
    let mut table = CompressTable::new();
    // Token pages too: what zswap stores of a page without content.
    for ((comp, kind), es) in &by {
        let stored = 3 * n;
        let bytes = es[0].mm_stat.compr_data_size / stored;
        let w = zram_compress as f64 + min_of(es, &|e| e.write_ns) - w0;
        let r = zram_decompress as f64 + min_of(es, &|e| e.read_ns) - r0;
        table.entry(comp.clone()).or_default().insert(
            kind.clone(),
            CompressEntry {
                bytes,
                compress_ns: w.max(0.0).round() as u64,
                decompress_ns: r.max(0.0).round() as u64,
                method: format!(
                    "mmsim calibrate --zram-content, {date}: O_DIRECT writes and reads of {n} and {} fresh zram slots of this content with this compressor, the minimum over {} runs, less the same of token pages with lzo-rle, plus cost.zram_compress / zram_decompress; bytes: mm_stat compr_data_size over the {stored} pages stored",
                    2 * n,
                    es.len()
                ),
            },
        );
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmsim_spec::output::ZramMmStat;

    fn entry(comp: &str, kind: &str, w: [u64; 2], r: [u64; 2], compr: u64) -> ZramContentEntry {
        ZramContentEntry {
            compressor: comp.into(),
            kind: kind.into(),
            write_ns: w,
            read_ns: r,
            mm_stat: ZramMmStat {
                compr_data_size: compr,
                ..Default::default()
            },
        }
    }

    /// n = 10: token pages with lzo-rle write at 2,000 ns a page at the
    /// margin and read at 500; text at 4,000 and 1,500 in the faster run;
    /// so text costs zram_compress + 2,000 and zram_decompress + 1,000,
    /// and stores 1,000 bytes a page (30 pages, 30,000 bytes).
    #[test]
    fn each_kind_is_the_reference_plus_its_margin_over_token_pages() {
        let run = |slow: u64| ZramContentBench {
            date: format!("2026-11-2{slow}"),
            pages: 10,
            entries: vec![
                entry("lzo-rle", "token", [10_000, 30_000], [5_000, 10_000], 1_230),
                entry(
                    "lzo-rle",
                    "text",
                    [20_000, 60_000 + slow * 1_000],
                    [8_000, 23_000],
                    30_000,
                ),
            ],
        };
        let t = solve(&[run(7), run(1)], 700, 300).expect("solves");
        let e = &t["lzo-rle"]["text"];
        assert_eq!(
            (e.bytes, e.compress_ns, e.decompress_ns),
            (1_000, 2_800, 1_300)
        );
        assert!(e.method.contains("2026-11-27"), "{}", e.method);
        // Token pages are the reference itself (zswap stores them).
        let e = &t["lzo-rle"]["token"];
        assert_eq!((e.bytes, e.compress_ns, e.decompress_ns), (41, 700, 300));
        let none = solve(
            &[ZramContentBench {
                date: String::new(),
                pages: 10,
                entries: vec![],
            }],
            1,
            1,
        );
        assert!(
            none.is_err(),
            "no lzo-rle token pages to difference against"
        );
    }
}

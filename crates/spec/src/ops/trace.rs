//! `trace`: a `touch` whose accesses are the requests of a trace file
//! (oracleGeneral, csv or txt; `crate::trace`), replayed onto a region.

use super::{StepCx, StepOp};
use crate::error::{Reporter, SpecError};
use crate::model::{self, Op, Order};
use crate::parse::fields::{
    boolean, integer, page_range, stream_seed_field, string, type_error, write_fraction, Fields,
};
use crate::parse::regions::{RegionCheck, Regions};
use crate::parse::MAX_ACCESSES;
use crate::trace::{CsvColumns, TraceFormat, TraceMap, TraceSource};
use crate::tree::Node;
use crate::work::{Sizes, WorkCx};
use std::path::Path;

pub(super) struct Trace;

impl StepOp for Trace {
    fn word(&self) -> &'static str {
        "trace"
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "op",
            "region",
            "file",
            "format",
            "map",
            "obj_id_col",
            "write_col",
            "header",
            "delimiter",
            "write",
            "count",
            "offset",
            "length",
            "seed",
        ]
    }

    fn required(&self) -> &'static [&'static str] {
        &["region", "file"]
    }

    fn words(&self, field: &str) -> &'static str {
        match field {
            "file" => "a string: the trace file's path (relative to the spec's folder)",
            _ => super::words(field),
        }
    }

    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError> {
        Ok(Op::Touch(build_trace(cx.rep, f)?))
    }

    fn owns(&self, op: &Op) -> bool {
        matches!(op, Op::Touch(t) if t.trace.is_some())
    }

    /// The range lies inside the region, and with `map = "refuse"` every
    /// obj_id of the trace is a page of it.
    fn check(
        &self,
        cx: &mut RegionCheck,
        key: &str,
        op: &Op,
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let Op::Touch(t) = op else {
            unreachable!("not a trace")
        };
        cx.range(key, &t.region, t.offset, t.length, regions)?;
        let pages = regions[&t.region];
        let n = t.length.unwrap_or(pages.saturating_sub(t.offset));
        let src = t.trace.as_deref().expect("a trace step has its source");
        let m = src.summary;
        if src.map == TraceMap::Refuse && m.records > 0 && m.max_obj_id >= n {
            return Err(cx.err(
                key,
                "map",
                format!(
                    "found obj_id {} at record {} of trace {}, beyond the {n} pages replayed; expected every obj_id below {n} (a larger region), or map = \"modulo\" to fold the ids onto the pages",
                    m.max_obj_id,
                    m.max_obj_id_record,
                    src.path.display()
                ),
            ));
        }
        Ok(())
    }

    fn work(&self, _cx: &WorkCx, op: &Op, sizes: &mut Sizes) -> u128 {
        let Op::Touch(t) = op else {
            unreachable!("not a trace")
        };
        super::touch::accesses(t, sizes)
    }
}

/// A `trace` step: a `touch` whose accesses are a file's requests
/// (`crate::trace`). The file is read once here, so a bad record is an
/// error of the spec and the run's work is known.
fn build_trace(rep: &Reporter, f: &Fields) -> Result<model::Touch, SpecError> {
    let text = |key: &str, words: &str| -> Result<Option<(&Node, String)>, SpecError> {
        f.get(key)
            .map(|n| string(rep, n, &f.path(key), words).map(|s| (n, s.to_string())))
            .transpose()
    };
    let region = text("region", Trace.words("region"))?
        .expect("required field checked")
        .1;
    let (file_node, written) = text("file", Trace.words("file"))?.expect("required field checked");
    if written.is_empty() {
        return Err(type_error(
            rep,
            file_node,
            &f.path("file"),
            Trace.words("file"),
        ));
    }
    let path = trace_path(rep.file, &written);
    let format = trace_format(rep, f, &path)?;
    let map_words = "a string: refuse (obj_id is the page; larger ids are an error) or modulo (obj_id mod pages)";
    let map = match text("map", map_words)? {
        None => TraceMap::Refuse,
        Some((_, m)) if m == "refuse" => TraceMap::Refuse,
        Some((_, m)) if m == "modulo" => TraceMap::Modulo,
        Some((n, _)) => return Err(type_error(rep, n, &f.path("map"), map_words)),
    };
    let summary = crate::trace::scan(&path, &format)
        .map_err(|e| rep.at(file_node.at, f.path("file"), e.to_string()))?;
    let count = match f.get("count") {
        None => summary.records,
        Some(n) => integer(
            rep,
            n,
            &f.path("count"),
            1,
            summary.records.min(MAX_ACCESSES) as i64,
            &format!(
                "a whole number from 1 to the trace's {} records",
                summary.records
            ),
        )? as u64,
    };
    if count > MAX_ACCESSES {
        return Err(rep.at(
            file_node.at,
            f.path("file"),
            format!(
                "found {} records, expected at most 2^48 (281474976710656) accesses in one step",
                summary.records
            ),
        ));
    }
    let (offset, length) = page_range(rep, f)?;
    Ok(model::Touch {
        region,
        order: Order::Trace,
        theta: 0.0,
        count: Some(count),
        passes: 1,
        write: write_fraction(rep, f)?,
        offset,
        length,
        seed: stream_seed_field(rep, f)?,
        trace: Some(Box::new(TraceSource {
            written,
            path,
            format,
            map,
            summary,
        })),
    })
}

/// The trace file's format: `format`, or the file name's extension; a
/// csv's columns, header and delimiter.
fn trace_format(rep: &Reporter, f: &Fields, path: &Path) -> Result<TraceFormat, SpecError> {
    let text = |key: &str, words: &str| -> Result<Option<(&Node, String)>, SpecError> {
        f.get(key)
            .map(|n| string(rep, n, &f.path(key), words).map(|s| (n, s.to_string())))
            .transpose()
    };
    let format_words = "a string: one of oracleGeneral, csv, txt";
    let format_name = match text("format", format_words)? {
        Some((n, v)) => match v.as_str() {
            "oracleGeneral" | "csv" | "txt" => v,
            _ => return Err(type_error(rep, n, &f.path("format"), format_words)),
        },
        None => match path.extension().and_then(|e| e.to_str()) {
            Some("oracleGeneral") => "oracleGeneral".into(),
            Some("csv") => "csv".into(),
            Some("txt") => "txt".into(),
            _ => {
                return Err(f.missing(
                    "format",
                    "one of oracleGeneral, csv, txt (the file's name ends in none of .oracleGeneral, .csv, .txt)",
                ))
            }
        },
    };
    let csv_only = ["obj_id_col", "write_col", "header", "delimiter"];
    if format_name != "csv" {
        if let Some(k) = csv_only.iter().find(|k| f.get(k).is_some()) {
            return Err(rep.at(
                f.get(k).expect("found").at,
                f.path(k),
                format!("found {k}, which only format = \"csv\" takes; expected no {k} with format \"{format_name}\""),
            ));
        }
    }
    let column = |key: &str| -> Result<Option<usize>, SpecError> {
        f.get(key)
            .map(|n| {
                integer(
                    rep,
                    n,
                    &f.path(key),
                    1,
                    1024,
                    "a column number from 1 to 1024",
                )
                .map(|v| v as usize)
            })
            .transpose()
    };
    let format = match format_name.as_str() {
        "oracleGeneral" => TraceFormat::OracleGeneral,
        "txt" => TraceFormat::Txt,
        _ => {
            let delim_words = "a string of one ASCII character, such as \",\" or \"\\t\"";
            let delimiter = match text("delimiter", delim_words)? {
                None => b',',
                Some((_, d)) if d.len() == 1 && d.is_ascii() && d != "\n" && d != "\r" => {
                    d.as_bytes()[0]
                }
                Some((n, _)) => return Err(type_error(rep, n, &f.path("delimiter"), delim_words)),
            };
            TraceFormat::Csv(CsvColumns {
                obj_id: column("obj_id_col")?.unwrap_or(1),
                write: column("write_col")?,
                header: f
                    .get("header")
                    .map(|n| boolean(rep, n, &f.path("header")))
                    .transpose()?
                    .unwrap_or(false),
                delimiter,
            })
        }
    };
    if let (TraceFormat::Csv(CsvColumns { write: Some(_), .. }), Some(w)) =
        (&format, f.get("write"))
    {
        return Err(rep.at(
            w.at,
            f.path("write"),
            "found both write and write_col, expected one of them (write_col gives each request's own flag)",
        ));
    }
    Ok(format)
}

/// A trace's path: as written if absolute, else against the folder of the
/// spec file `spec` (the current folder for spec text not read from a
/// file).
fn trace_path(spec: &str, written: &str) -> std::path::PathBuf {
    let p = std::path::Path::new(written);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let spec = std::path::Path::new(spec);
    match spec.parent() {
        Some(dir) if spec.is_file() => dir.join(p),
        _ => p.to_path_buf(),
    }
}

//! Page traces for the `trace` step: a file of requests, one page access
//! each, streamed from disk in order and never loaded whole.
//!
//! Formats:
//! - `oracleGeneral`: libCacheSim's binary format, packed little-endian
//!   24-byte records `u32 clock_time, u64 obj_id, u32 obj_size,
//!   i64 next_access_vtime`. Only obj_id is used: a record is one access to
//!   one page whatever its size, and the clock does not pace the replay
//!   (the simulated kernel's own costs do).
//! - `csv`: delimited text, one request per line; `obj_id_col` (counting
//!   from 1) holds the obj_id as an unsigned decimal, and `write_col`, if
//!   given, whether the request writes (1/0, w/r, write/read, set/get,
//!   true/false, any case).
//! - `txt`: libCacheSim's plain text, one obj_id per line.
//!
//! An obj_id names a page of the step's range in one of two ways (`map`):
//! `refuse` (the default) takes obj_id as the page index and refuses a
//! trace with an obj_id at or beyond the range's pages; `modulo` takes
//! obj_id mod pages, so a trace with a larger id space folds onto the
//! range (and distinct objects may share a page).
//!
//! The spec reads the whole file once (`scan`) to count its records and
//! check every one, so a bad trace is refused before a run starts and the
//! run's work is known in advance; the replay then streams it again.

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Bytes of one oracleGeneral record.
pub const ORACLE_GENERAL_RECORD: u64 = 24;

/// zstd's frame magic: libCacheSim's traces are often shipped compressed.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The read buffer: large enough that reading costs a few syscalls per
/// million records.
const BUF_BYTES: usize = 1 << 20;

/// Drop the trace's pages from the host's page cache every this many bytes
/// read (see `TraceReader::drop_behind`).
const DROP_BEHIND_BYTES: u64 = 8 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceFormat {
    OracleGeneral,
    Csv(CsvColumns),
    Txt,
}

impl TraceFormat {
    pub fn name(&self) -> &'static str {
        match self {
            TraceFormat::OracleGeneral => "oracleGeneral",
            TraceFormat::Csv(_) => "csv",
            TraceFormat::Txt => "txt",
        }
    }
}

/// Where a csv trace keeps its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvColumns {
    /// The obj_id's column, counting from 1.
    pub obj_id: usize,
    /// The read/write flag's column, counting from 1.
    pub write: Option<usize>,
    /// The first line names the columns and is not a request.
    pub header: bool,
    pub delimiter: u8,
}

/// How an obj_id names a page of the replayed range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceMap {
    Refuse,
    Modulo,
}

/// A `trace` step's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSource {
    /// The path as the spec wrote it.
    pub written: String,
    /// The path resolved against the spec's folder.
    pub path: PathBuf,
    pub format: TraceFormat,
    pub map: TraceMap,
    /// What `scan` found when the spec was read.
    pub summary: TraceSummary,
}

/// A trace's size and id range, from one pass over the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceSummary {
    pub records: u64,
    pub bytes: u64,
    pub max_obj_id: u64,
    /// Where the largest obj_id first appears: its record, counting from 1.
    pub max_obj_id_record: u64,
}

/// One request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub obj_id: u64,
    /// The trace's own read/write flag, if it has one.
    pub write: Option<bool>,
}

/// A trace that cannot be read or holds something other than requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub path: PathBuf,
    /// Where in the file: "record 7 (byte 144)" or "line 12"; empty for the
    /// whole file.
    pub at: String,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trace {}", self.path.display())?;
        if !self.at.is_empty() {
            write!(f, ", {}", self.at)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for TraceError {}

/// Reads a trace one request at a time.
pub struct TraceReader {
    path: PathBuf,
    inner: Inner,
    /// Requests read so far.
    record: u64,
    drop_behind: bool,
    dropped_to: u64,
}

enum Inner {
    Binary(BufReader<File>),
    Text {
        rdr: csv::Reader<File>,
        rec: csv::ByteRecord,
        /// Columns counting from 0.
        obj_id: usize,
        write: Option<usize>,
    },
}

impl TraceReader {
    pub fn open(path: &Path, format: &TraceFormat) -> Result<Self, TraceError> {
        let whole = |message: String| TraceError {
            path: path.to_path_buf(),
            at: String::new(),
            message,
        };
        let file = File::open(path).map_err(|e| whole(format!("cannot open it: {e}")))?;
        let meta = file
            .metadata()
            .map_err(|e| whole(format!("cannot read its size: {e}")))?;
        if !meta.is_file() {
            return Err(whole(
                "found a directory or device, expected a regular file".into(),
            ));
        }
        // A zstd-compressed trace is refused with a hint rather than read
        // as garbage.
        let mut head = [0u8; 4];
        let got = (&file)
            .read(&mut head)
            .and_then(|n| (&file).seek(SeekFrom::Start(0)).map(|_| n))
            .map_err(|e| whole(format!("cannot read it: {e}")))?;
        if got == 4 && head == ZSTD_MAGIC {
            return Err(whole(
                "found a zstd-compressed file, expected it decompressed (zstd -d FILE)".into(),
            ));
        }
        let inner = match format {
            TraceFormat::OracleGeneral => {
                if !meta.len().is_multiple_of(ORACLE_GENERAL_RECORD) {
                    return Err(whole(format!(
                        "found {} bytes, expected a whole number of 24-byte oracleGeneral records (a truncated file, or another format?)",
                        meta.len()
                    )));
                }
                Inner::Binary(BufReader::with_capacity(BUF_BYTES, file))
            }
            TraceFormat::Csv(c) => Self::text(file, c.header, c.delimiter, c.obj_id, c.write),
            // A tab never splits a one-field line; fields are trimmed.
            TraceFormat::Txt => Self::text(file, false, b'\t', 1, None),
        };
        Ok(TraceReader {
            path: path.to_path_buf(),
            inner,
            record: 0,
            drop_behind: false,
            dropped_to: 0,
        })
    }

    fn text(file: File, header: bool, delimiter: u8, obj_id: usize, write: Option<usize>) -> Inner {
        let rdr = csv::ReaderBuilder::new()
            .has_headers(header)
            .delimiter(delimiter)
            .flexible(true)
            .trim(csv::Trim::All)
            .buffer_capacity(BUF_BYTES)
            .from_reader(file);
        Inner::Text {
            rdr,
            rec: csv::ByteRecord::new(),
            obj_id: obj_id - 1,
            write: write.map(|w| w - 1),
        }
    }

    /// Advise the kernel to drop the trace's pages from the page cache as
    /// the replay passes them. The native runner asks for this: it replays
    /// inside the run's memory cgroup, where the trace's own page cache
    /// would otherwise be charged beside the workload's pages.
    pub fn drop_behind(&mut self) {
        self.drop_behind = true;
    }

    /// Requests read so far.
    pub fn records(&self) -> u64 {
        self.record
    }

    /// The next request; None at the end of the file.
    #[inline]
    pub fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        let req = match &mut self.inner {
            Inner::Binary(r) => {
                let mut b = [0u8; ORACLE_GENERAL_RECORD as usize];
                match read_record(r, &mut b) {
                    Ok(false) => return Ok(None),
                    Ok(true) => Request {
                        obj_id: u64::from_le_bytes(b[4..12].try_into().expect("8 bytes")),
                        write: None,
                    },
                    Err(e) => {
                        let n = self.record + 1;
                        return Err(self.error_record(n, &format!("cannot read it: {e}")));
                    }
                }
            }
            Inner::Text {
                rdr,
                rec,
                obj_id,
                write,
            } => {
                let got = rdr.read_byte_record(rec);
                let line = rec.position().map_or(0, |p| p.line());
                match got {
                    Ok(false) => return Ok(None),
                    Ok(true) => {
                        parse_text(rec, *obj_id, *write).map_err(|m| self.error_line(line, &m))?
                    }
                    Err(e) => return Err(self.error_line(line, &format!("cannot read it: {e}"))),
                }
            }
        };
        self.record += 1;
        if self.drop_behind && self.record.is_multiple_of(65536) {
            self.advise_dontneed();
        }
        Ok(Some(req))
    }

    /// Bytes of the file consumed so far.
    fn position(&self) -> u64 {
        match &self.inner {
            Inner::Binary(_) => self.record * ORACLE_GENERAL_RECORD,
            Inner::Text { rdr, .. } => rdr.position().byte(),
        }
    }

    #[cfg(target_os = "linux")]
    fn advise_dontneed(&mut self) {
        use std::os::fd::AsRawFd;
        let pos = self.position();
        if pos < self.dropped_to + DROP_BEHIND_BYTES {
            return;
        }
        let fd = match &self.inner {
            Inner::Binary(r) => r.get_ref().as_raw_fd(),
            Inner::Text { rdr, .. } => rdr.get_ref().as_raw_fd(),
        };
        // SAFETY: fd is this reader's open file; the call only advises.
        unsafe {
            libc::posix_fadvise(fd, 0, pos as libc::off_t, libc::POSIX_FADV_DONTNEED);
        }
        self.dropped_to = pos;
    }

    #[cfg(not(target_os = "linux"))]
    fn advise_dontneed(&mut self) {}

    fn error(&self, at: String, message: &str) -> TraceError {
        TraceError {
            path: self.path.clone(),
            at,
            message: message.to_string(),
        }
    }

    fn error_line(&self, line: u64, message: &str) -> TraceError {
        self.error(format!("line {line}"), message)
    }

    /// An error at oracleGeneral record `n` (counting from 1).
    fn error_record(&self, n: u64, message: &str) -> TraceError {
        let byte = n.saturating_sub(1) * ORACLE_GENERAL_RECORD;
        self.error(format!("record {n} (byte {byte})"), message)
    }

    /// An error at the request just read.
    pub fn error_at_last(&self, message: &str) -> TraceError {
        match &self.inner {
            Inner::Binary(_) => self.error_record(self.record, message),
            Inner::Text { rec, .. } => {
                self.error_line(rec.position().map_or(0, |p| p.line()), message)
            }
        }
    }
}

/// Reads one whole record; false at a clean end of file.
#[inline]
fn read_record(r: &mut BufReader<File>, b: &mut [u8; 24]) -> std::io::Result<bool> {
    use std::io::BufRead;
    let buf = r.fill_buf()?;
    if buf.len() >= 24 {
        b.copy_from_slice(&buf[..24]);
        r.consume(24);
        return Ok(true);
    }
    if buf.is_empty() {
        return Ok(false);
    }
    // A record split across the buffer's end.
    r.read_exact(b).map(|()| true)
}

fn parse_text(
    rec: &csv::ByteRecord,
    obj_id: usize,
    write: Option<usize>,
) -> Result<Request, String> {
    let field = |col: usize, what: &str| -> Result<&[u8], String> {
        rec.get(col).ok_or_else(|| {
            format!(
                "found {} column{}, expected at least {} (the {what} is column {})",
                rec.len(),
                if rec.len() == 1 { "" } else { "s" },
                col + 1,
                col + 1
            )
        })
    };
    let id = field(obj_id, "obj_id")?;
    let obj_id = std::str::from_utf8(id)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| {
            format!(
                "found obj_id `{}`, expected an unsigned decimal integer below 2^64",
                shown(id)
            )
        })?;
    let write = match write {
        None => None,
        Some(col) => Some(parse_write(field(col, "write flag")?)?),
    };
    Ok(Request { obj_id, write })
}

fn parse_write(f: &[u8]) -> Result<bool, String> {
    let s = std::str::from_utf8(f).unwrap_or("").to_ascii_lowercase();
    match s.as_str() {
        "1" | "w" | "write" | "set" | "put" | "true" => Ok(true),
        "0" | "r" | "read" | "get" | "false" => Ok(false),
        _ => Err(format!(
            "found write flag `{}`, expected 1/0, w/r, write/read, set/get or true/false",
            shown(f)
        )),
    }
}

/// A field as it may be shown in a message: at most 40 characters, control
/// characters escaped.
fn shown(f: &[u8]) -> String {
    let s = String::from_utf8_lossy(f);
    let t: String = s.chars().take(40).collect();
    t.escape_debug().to_string()
}

/// Every trace file `spec` replays, in step order (a file a spec names
/// twice, twice).
pub fn sources(spec: &crate::model::Spec) -> Vec<&TraceSource> {
    fn walk<'a>(steps: &'a [crate::model::Step], out: &mut Vec<&'a TraceSource>) {
        use crate::model::Op;
        for s in steps {
            match &s.op {
                Op::Touch(t) => out.extend(t.trace.as_deref()),
                op => {
                    if let Some(steps) = op.body() {
                        walk(steps, out)
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for t in &spec.tasks {
        walk(&t.steps, &mut out);
    }
    out
}

/// Where a guest whose spec is `/spec.toml` looks for a trace the spec
/// wrote as `written`: the path itself if absolute, else under `/`, with
/// `.` and `..` resolved as the kernel resolves them there.
pub fn guest_path(written: &str) -> String {
    use std::path::Component;
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in Path::new(written).components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::ParentDir => {
                parts.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    let joined: Vec<String> = parts
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    format!("/{}", joined.join("/"))
}

/// Reads the whole trace once: counts its records and checks each, so a
/// run never meets a bad record half-way.
pub fn scan(path: &Path, format: &TraceFormat) -> Result<TraceSummary, TraceError> {
    let mut r = TraceReader::open(path, format)?;
    let mut s = TraceSummary::default();
    while let Some(req) = r.next_request()? {
        if req.obj_id > s.max_obj_id || s.records == 0 {
            s.max_obj_id = req.obj_id;
            s.max_obj_id_record = r.records();
        }
        s.records += 1;
    }
    s.bytes = r.position();
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mmsim-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    fn oracle_general(ids: &[u64]) -> Vec<u8> {
        let mut v = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            v.extend_from_slice(&(i as u32).to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
            v.extend_from_slice(&4096u32.to_le_bytes());
            v.extend_from_slice(&(-1i64).to_le_bytes());
        }
        v
    }

    fn all(p: &Path, f: &TraceFormat) -> Result<Vec<Request>, TraceError> {
        let mut r = TraceReader::open(p, f)?;
        let mut v = Vec::new();
        while let Some(q) = r.next_request()? {
            v.push(q);
        }
        Ok(v)
    }

    #[test]
    fn oracle_general_records() {
        let ids: Vec<u64> = (0..100_000u64).map(|i| i * 7 % 1000).collect();
        let p = temp("og.bin", &oracle_general(&ids));
        let got = all(&p, &TraceFormat::OracleGeneral).unwrap();
        assert_eq!(got.iter().map(|r| r.obj_id).collect::<Vec<_>>(), ids);
        let s = scan(&p, &TraceFormat::OracleGeneral).unwrap();
        assert_eq!(
            (s.records, s.bytes, s.max_obj_id),
            (100_000, 2_400_000, 999)
        );
        assert_eq!(s.max_obj_id_record, 858, "999 = 857 * 7 % 1000 first");
    }

    #[test]
    fn truncated_and_compressed_are_refused() {
        let mut b = oracle_general(&[1, 2]);
        b.pop();
        let p = temp("trunc.bin", &b);
        let e = scan(&p, &TraceFormat::OracleGeneral).unwrap_err();
        assert!(e.message.contains("found 47 bytes"), "{e}");
        let mut z = ZSTD_MAGIC.to_vec();
        z.resize(47, 0);
        let p = temp("z.bin", &z);
        let e = scan(&p, &TraceFormat::OracleGeneral).unwrap_err();
        assert!(e.message.contains("zstd"), "{e}");
    }

    #[test]
    fn csv_columns_header_and_flags() {
        let f = TraceFormat::Csv(CsvColumns {
            obj_id: 2,
            write: Some(3),
            header: true,
            delimiter: b',',
        });
        let p = temp("t.csv", b"time,id,op\n1, 5 ,r\n2,7,W\n3,5,set\n");
        let got = all(&p, &f).unwrap();
        assert_eq!(
            got,
            [
                Request {
                    obj_id: 5,
                    write: Some(false)
                },
                Request {
                    obj_id: 7,
                    write: Some(true)
                },
                Request {
                    obj_id: 5,
                    write: Some(true)
                },
            ]
        );
        let p = temp("bad.csv", b"time,id,op\n1,5,r\n2,x7,w\n");
        let e = scan(&p, &f).unwrap_err();
        assert_eq!(e.at, "line 3");
        assert!(e.message.contains("found obj_id `x7`"), "{e}");
        let p = temp("short.csv", b"time,id,op\n1,5\n");
        let e = scan(&p, &f).unwrap_err();
        assert!(
            e.message.contains("found 2 columns, expected at least 3"),
            "{e}"
        );
        let p = temp("flag.csv", b"time,id,op\n1,5,maybe\n");
        assert!(scan(&p, &f).unwrap_err().message.contains("`maybe`"));
    }

    #[test]
    fn txt_one_id_per_line() {
        let p = temp("t.txt", b"3\n1\n  4\n1\n");
        let s = scan(&p, &TraceFormat::Txt).unwrap();
        assert_eq!((s.records, s.max_obj_id, s.max_obj_id_record), (4, 4, 3));
        let p = temp("neg.txt", b"3\n-1\n");
        let e = scan(&p, &TraceFormat::Txt).unwrap_err();
        assert_eq!(e.at, "line 2");
    }

    #[test]
    fn guest_paths() {
        assert_eq!(guest_path("t.bin"), "/t.bin");
        assert_eq!(guest_path("./a/../b/t.bin"), "/b/t.bin");
        assert_eq!(guest_path("../../t.bin"), "/t.bin");
        assert_eq!(guest_path("/data/x/t.csv"), "/data/x/t.csv");
    }

    #[test]
    fn missing_file() {
        let e = scan(Path::new("/nonexistent/t.bin"), &TraceFormat::OracleGeneral).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("trace /nonexistent/t.bin: cannot open it"),
            "{e}"
        );
    }
}

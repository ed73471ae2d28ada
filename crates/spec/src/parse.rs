//! TOML → validated [`Spec`]. Every error carries file, line and key.
//!
//! The file is parsed once into a [`tree`](crate::tree) that keeps where each
//! key and value is written; validation walks it section by section, key by
//! key, so an error names the exact key (`task.main.steps[1].write`) and the
//! line of its value.

use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::tree::{self, join, At, Node, Table, Val};
use crate::units::{self, Limit, PAGE_SIZE};
use indexmap::IndexMap;
use std::collections::HashMap;

pub const OPS: &str = "mmap, munmap, touch, trace, madvise, sleep, compute, phase, repeat, fork, spawn, wait, swapoff, swapon, kvstore, read, write, fsync, drop_caches, stream, set";

/// The most accesses one `touch` step may make (`count`, or `passes` ×
/// pages): 2^48, far beyond any run, and small enough that every engine can
/// count them in 64 bits.
pub const MAX_ACCESSES: u64 = 1 << 48;

/// The largest `mmap`: 128 TiB, x86-64's user address space with 4-level
/// page tables.
pub const MAX_MAP_BYTES: u64 = 1 << 47;

/// Parses `text`, read from `file`, and applies `sets` (`--set KEY=VALUE`).
pub fn parse(text: &str, file: &str, sets: &[String]) -> Result<Spec, SpecError> {
    let mut rep = Reporter::new(file, text);
    let doc = toml_edit::ImDocument::parse(text).map_err(|e| toml_error(&rep, text, &e))?;
    let mut root = tree::from_document(&doc);
    rep.sets = crate::overrides::apply(&mut root, sets)?;
    build(&rep, &root)
}

fn toml_error(rep: &Reporter, text: &str, e: &toml_edit::TomlError) -> SpecError {
    let mut offset = e.span().map(|s| s.start).unwrap_or(0).min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    // A control character anywhere on the line is the likeliest cause
    // (TOML allows none but tab, even in comments), and the parser's own
    // message does not name it.
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    if let Some((i, c)) = text[line_start..line_end]
        .char_indices()
        .find(|&(_, c)| c.is_control() && c != '\t' && c != '\r')
    {
        let at = line_start + i;
        let mut err = rep.at(
            At::Text(at),
            key_at(text, at),
            format!(
                "found the control character {} (U+{:04X}), which TOML does not allow anywhere, comments included; expected printable text (tabs are allowed)",
                escape_controls(&c.to_string()),
                c as u32
            ),
        );
        err.column = text[line_start..at].chars().count() + 1;
        return err;
    }
    let what: Vec<String> = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(escape_controls)
        .collect();
    let rest = &text[offset..];
    let found = match rest.chars().next() {
        None => "the end of the file".to_string(),
        Some('\n' | '\r') => "the end of the line".to_string(),
        Some(_) => {
            let token: String = rest
                .chars()
                .take_while(|c| !c.is_whitespace())
                .take(30)
                .collect();
            format!("`{}`", escape_controls(&token))
        }
    };
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(": {}", what.join("; "))
    };
    let mut err = rep.at(
        At::Text(offset),
        key_at(text, offset),
        format!("TOML syntax error{what}; found {found}"),
    );
    if e.span().is_none() {
        err.line = 0;
    } else {
        err.column = text[line_start..offset].chars().count() + 1;
    }
    err
}

/// `s` with every control character written as an escape (`\0`, `\u{1b}`),
/// so a message never sends raw control bytes to the user's terminal.
pub(crate) fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The name of a `[table]` or `[[array.of.tables]]` header line, with the
/// index of the entry for an array of tables (`swap[1]`); None if `line` is
/// not a header.
fn header_name(line: &str, counts: &mut HashMap<String, usize>) -> Option<String> {
    let l = line.trim_start();
    let (body, array) = match l.strip_prefix("[[") {
        Some(r) => (r, true),
        None => (l.strip_prefix('[')?, false),
    };
    // The header's key runs to the first `]` outside quotes.
    let mut quote = None;
    let mut end = None;
    for (i, c) in body.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, ']') => {
                end = Some(i);
                break;
            }
            (None, _) => {}
        }
    }
    let end = end?;
    let inner = &body[..end];
    let rest = &body[end + 1..];
    let rest = if array { rest.strip_prefix(']')? } else { rest };
    let rest = rest.trim_start();
    if !(rest.is_empty() || rest.starts_with('#')) {
        return None;
    }
    let inner = inner.trim();
    // A line of a multi-line array (`[1, 2],`, `["a"]`) is not a header.
    if inner.is_empty() || inner.contains(',') || inner.contains('[') || inner.contains(']') {
        return None;
    }
    let name = match toml_edit::Key::parse(inner) {
        Ok(keys) => keys.iter().fold(String::new(), |p, k| join(&p, k.get())),
        Err(_) => inner.to_string(),
    };
    if array {
        let n = counts.entry(name.clone()).or_insert(0);
        *n += 1;
        Some(format!("{name}[{}]", *n - 1))
    } else {
        Some(name)
    }
}

/// The dotted key whose line holds `offset` (for TOML syntax errors, which
/// come before there is a tree): the `[table]` header on that line or the
/// last one before it, and the key left of `=` on the line, if there is one.
fn key_at(text: &str, offset: usize) -> String {
    let mut offset = offset.min(text.len());
    // On a blank line (an error at the end of the file), the line before.
    while offset > 0
        && text[..offset]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .trim()
            .is_empty()
        && text[offset..]
            .split('\n')
            .next()
            .unwrap_or("")
            .trim()
            .is_empty()
    {
        offset = text[..offset].rfind('\n').unwrap_or(0);
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    let mut counts = HashMap::new();
    let mut header = None;
    for l in text[..line_start].lines() {
        if let Some(h) = header_name(l, &mut counts) {
            header = Some(h);
        }
    }
    if let Some(h) = header_name(line, &mut counts) {
        return h;
    }
    if let Some(broken) = line.strip_prefix('[') {
        // A header that does not parse (`[machine`): its text.
        let name: String = broken
            .trim_start_matches('[')
            .trim()
            .chars()
            .take_while(|c| !matches!(c, ']' | '#') && !c.is_whitespace())
            .collect();
        return name;
    }
    let local = line
        .split_once('=')
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.starts_with('{') && !k.is_empty());
    match (header, local) {
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (Some(h), None) => h,
        (None, Some(k)) => k,
        (None, None) => String::new(),
    }
}

// ------------------------------------------------------------------ helpers

/// A table being read: its key path, where it is, and its entries.
struct Fields<'a> {
    rep: &'a Reporter<'a>,
    key: String,
    at: At,
    table: &'a Table,
}

impl<'a> Fields<'a> {
    /// `node` must be a table; `expected` says what kind, for the error.
    fn of(
        rep: &'a Reporter<'a>,
        key: String,
        node: &'a Node,
        expected: &str,
    ) -> Result<Self, SpecError> {
        match node.table() {
            Some(table) => Ok(Fields {
                rep,
                key,
                at: node.at,
                table,
            }),
            None => Err(rep.at(
                node.at,
                key,
                format!("found {}, expected {expected}", node.show()),
            )),
        }
    }

    fn path(&self, field: &str) -> String {
        join(&self.key, field)
    }

    /// Every key must be one of `allowed`; `owner` names the table for the
    /// message ("[machine]", "op \"mmap\"").
    fn only(&self, allowed: &[&str], owner: &str) -> Result<(), SpecError> {
        for (name, e) in &self.table.entries {
            if !allowed.contains(&name.as_str()) {
                return Err(self.rep.at(
                    e.key_at,
                    self.path(name),
                    format!(
                        "found the key `{}`, which {owner} does not take; expected one of {}",
                        tree::quote(name),
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn get(&self, field: &str) -> Option<&'a Node> {
        self.table.entries.get(field).map(|e| &e.node)
    }

    fn require(&self, field: &str, expected: &str) -> Result<&'a Node, SpecError> {
        self.get(field).ok_or_else(|| self.missing(field, expected))
    }

    fn missing(&self, field: &str, expected: &str) -> SpecError {
        self.rep.at(
            self.at,
            self.path(field),
            format!(
                "`{}` is missing the required key `{}`; expected {expected}",
                self.key,
                tree::quote(field)
            ),
        )
    }
}

fn type_error(rep: &Reporter, node: &Node, key: &str, expected: &str) -> SpecError {
    rep.at(
        node.at,
        key,
        format!("found {}, expected {expected}", node.show()),
    )
}

fn string<'a>(
    rep: &Reporter,
    node: &'a Node,
    key: &str,
    expected: &str,
) -> Result<&'a str, SpecError> {
    match &node.val {
        Val::Str(s) => Ok(s),
        _ => Err(type_error(rep, node, key, expected)),
    }
}

fn boolean(rep: &Reporter, node: &Node, key: &str) -> Result<bool, SpecError> {
    match node.val {
        Val::Bool(b) => Ok(b),
        _ => Err(type_error(rep, node, key, "a boolean: true or false")),
    }
}

/// An integer in `lo..=hi`; `expected` describes the range in words.
fn integer(
    rep: &Reporter,
    node: &Node,
    key: &str,
    lo: i64,
    hi: i64,
    expected: &str,
) -> Result<i64, SpecError> {
    match node.val {
        Val::Int(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(type_error(rep, node, key, expected)),
    }
}

/// A number (integer or float) as f64.
fn number(rep: &Reporter, node: &Node, key: &str, expected: &str) -> Result<f64, SpecError> {
    match node.val {
        Val::Int(n) => Ok(n as f64),
        Val::Float(f) => Ok(f),
        _ => Err(type_error(rep, node, key, expected)),
    }
}

const SIZE_WORDS: &str =
    "a size: bytes as an integer, or a string with a unit K, M, G or T (powers of 1024), e.g. \"200M\"";

fn size(rep: &Reporter, node: &Node, key: &str) -> Result<u64, SpecError> {
    match &node.val {
        Val::Int(n) => u64::try_from(*n).map_err(|_| {
            rep.at(
                node.at,
                key,
                format!("found {n}, expected a size of at least 0 bytes"),
            )
        }),
        Val::Str(s) => units::parse_size(s).map_err(|m| rep.at(node.at, key, m)),
        _ => Err(type_error(rep, node, key, SIZE_WORDS)),
    }
}

fn duration(rep: &Reporter, node: &Node, key: &str) -> Result<u64, SpecError> {
    match &node.val {
        Val::Int(n) => u64::try_from(*n)
            .map_err(|_| rep.at(node.at, key, format!("found {n}, expected a duration of at least 0 ns"))),
        Val::Str(s) => units::parse_duration(s).map_err(|m| rep.at(node.at, key, m)),
        _ => Err(type_error(
            rep,
            node,
            key,
            "a duration: nanoseconds as an integer, or a string with a unit ns, us, ms or s, e.g. \"250ms\"",
        )),
    }
}

fn limit(rep: &Reporter, node: &Node, key: &str) -> Result<Limit, SpecError> {
    let expected = "a size such as \"100M\" or \"max\"";
    match &node.val {
        Val::Str(s) if s.trim() == "max" => Ok(Limit::Max),
        Val::Str(s) => units::parse_size(s)
            .map(Limit::Bytes)
            .map_err(|_| type_error(rep, node, key, expected)),
        Val::Int(n) => u64::try_from(*n).map(Limit::Bytes).map_err(|_| {
            rep.at(
                node.at,
                key,
                format!("found {n}, expected {expected}, at least 0 bytes"),
            )
        }),
        _ => Err(type_error(rep, node, key, expected)),
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

const NAME_WORDS: &str = "a non-empty name of letters, digits, '_' or '-'";

// ------------------------------------------------------------------ sections

const SECTIONS: &[&str] = &[
    "machine", "features", "sysctl", "sysfs", "swap", "disk", "file", "cgroup", "task", "fidelity",
];

fn build(rep: &Reporter, root: &Node) -> Result<Spec, SpecError> {
    let top = Fields::of(rep, String::new(), root, "a table")?;
    for (name, e) in &top.table.entries {
        if !SECTIONS.contains(&name.as_str()) {
            return Err(rep.at(
                e.key_at,
                join("", name),
                format!(
                    "found the section `{}`, which mmsim does not know; expected one of {}",
                    tree::quote(name),
                    SECTIONS.join(", ")
                ),
            ));
        }
    }
    let machine = match top.get("machine") {
        Some(m) => build_machine(rep, m)?,
        None => {
            return Err(rep.at(
                root.at,
                "machine",
                "the spec is missing the required table [machine]; expected one with at least `memory`, e.g. [machine] memory = \"512M\"",
            ))
        }
    };
    let mut knobs = Vec::new();
    let features = match top.get("features") {
        Some(f) => build_features(rep, f, machine.kernel)?,
        None => machine.kernel.features(),
    };
    let empty = Node {
        val: Val::Table(Table::default()),
        at: root.at,
    };
    let sysctl = build_sysctl(rep, top.get("sysctl").unwrap_or(&empty), &mut knobs)?;
    let sysfs = build_sysfs(
        rep,
        top.get("sysfs").unwrap_or(&empty),
        &mut knobs,
        &features,
        machine.kernel,
    )?;
    let swap = match top.get("swap") {
        Some(s) => build_swaps(rep, s)?,
        None => Vec::new(),
    };
    let disks = match top.get("disk") {
        Some(d) => build_disks(rep, d)?,
        None => Vec::new(),
    };
    let files = match top.get("file") {
        Some(f) => build_files(rep, f, &disks, machine.kernel)?,
        None => Vec::new(),
    };
    let mut cgroups = Vec::new();
    if let Some(c) = top.get("cgroup") {
        let f = Fields::of(
            rep,
            "cgroup".into(),
            c,
            "a table of cgroups, such as [cgroup.w]",
        )?;
        for (name, e) in &f.table.entries {
            cgroups.push(build_cgroup(rep, name, &e.node)?);
        }
    }
    let mut tasks = Vec::new();
    if let Some(t) = top.get("task") {
        let f = Fields::of(
            rep,
            "task".into(),
            t,
            "a table of tasks, such as [task.main]",
        )?;
        for (name, e) in &f.table.entries {
            tasks.push(build_task(
                rep,
                name,
                &e.node,
                &cgroups,
                swap.len(),
                &files,
            )?);
        }
    }
    let fidelity = match top.get("fidelity") {
        Some(f) => build_fidelity(rep, f)?,
        None => Fidelity::default(),
    };
    if tasks.is_empty() {
        return Err(SpecError {
            file: rep.file.to_string(),
            line: 0,
            column: 0,
            key: "task".into(),
            message: "found no tasks, expected at least one [task.NAME] table".into(),
        });
    }
    Ok(Spec {
        file: rep.file.to_string(),
        machine,
        features,
        sysctl,
        sysfs,
        knobs,
        swap,
        disks,
        files,
        cgroups,
        tasks,
        fidelity,
    })
}

/// `[fidelity]`: `tolerance = { counter = fraction, ... }`, how far the
/// simulation may be from the recorded real-kernel median, per counter;
/// `time_tolerance = { phase = fraction, ... }`, how far a phase's
/// simulated time may be from its fastest recorded native run.
fn build_fidelity(rep: &Reporter, node: &Node) -> Result<Fidelity, SpecError> {
    let f = Fields::of(rep, "fidelity".into(), node, "a table [fidelity]")?;
    f.only(&["tolerance", "time_tolerance", "miss"], "[fidelity]")?;
    // /proc/vmstat names, and the per-size `hugepages-64kB/stats/swpout`.
    let counter = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/');
    let phase = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let counters = fractions(
        rep,
        &f,
        "tolerance",
        &counter,
        "a /proc/vmstat name such as pgfault (or a per-size statistic such as hugepages-64kB/stats/swpout)",
    )?;
    Ok(Fidelity {
        misses: misses(rep, &f, &counters)?,
        counters,
        times: fractions(rep, &f, "time_tolerance", &phase, "a phase name")?,
    })
}

/// `[fidelity.miss."RELEASE"]`: counter = "why", for counters of the
/// tolerance table that release's kernel is known not to match.
fn misses(
    rep: &Reporter,
    f: &Fields,
    counters: &[(String, f64)],
) -> Result<Vec<(Preset, String, String)>, SpecError> {
    let Some(t) = f.get("miss") else {
        return Ok(Vec::new());
    };
    let by_kernel = Fields::of(
        rep,
        f.path("miss"),
        t,
        "a table of preset = { counter = \"why\" }, e.g. [fidelity.miss.\"5.10\"]",
    )?;
    let mut out = Vec::new();
    for (name, e) in &by_kernel.table.entries {
        let key = by_kernel.path(name);
        let preset = Preset::parse(name).ok_or_else(|| {
            rep.at(
                e.key_at,
                key.clone(),
                format!(
                    "found the preset `{}`, expected one of 5.10, 6.1, 6.12, 7.3",
                    tree::quote(name)
                ),
            )
        })?;
        let cf = Fields::of(rep, key.clone(), &e.node, "a table of counter = \"why\"")?;
        for (counter, c) in &cf.table.entries {
            let ckey = cf.path(counter);
            if !counters.iter().any(|(n, _)| n == counter) {
                return Err(rep.at(
                    c.key_at,
                    ckey,
                    format!(
                        "found `{}`, expected a counter of [fidelity] tolerance",
                        tree::quote(counter)
                    ),
                ));
            }
            let Val::Str(why) = &c.node.val else {
                return Err(type_error(rep, &c.node, &ckey, "a string saying why"));
            };
            out.push((preset, counter.clone(), why.clone()));
        }
    }
    Ok(out)
}

/// A `[fidelity]` table of name = fraction.
fn fractions(
    rep: &Reporter,
    f: &Fields,
    table: &str,
    valid: &dyn Fn(char) -> bool,
    what: &str,
) -> Result<Vec<(String, f64)>, SpecError> {
    let Some(t) = f.get(table) else {
        return Ok(Vec::new());
    };
    let tf = Fields::of(
        rep,
        f.path(table),
        t,
        &format!(
            "a table of name = fraction, e.g. {{ {} = 0.05 }}",
            if table == "tolerance" {
                "pgfault"
            } else {
                "first_touch"
            }
        ),
    )?;
    let mut out = Vec::new();
    for (name, e) in &tf.table.entries {
        let key = tf.path(name);
        if name.is_empty() || !name.chars().all(valid) {
            return Err(rep.at(
                e.key_at,
                key,
                format!("found the name `{}`, expected {what}", tree::quote(name)),
            ));
        }
        let v = number(
            rep,
            &e.node,
            &key,
            "a fraction above 0 and at most 10, e.g. 0.05 for 5%",
        )?;
        if !(v > 0.0 && v <= 10.0) {
            return Err(rep.at(
                e.node.at,
                key,
                format!("found {v}, expected a fraction above 0 and at most 10, e.g. 0.05 for 5%"),
            ));
        }
        out.push((name.clone(), v));
    }
    Ok(out)
}

fn build_machine(rep: &Reporter, node: &Node) -> Result<Machine, SpecError> {
    let m = Fields::of(rep, "machine".into(), node, "a table [machine]")?;
    m.only(&["memory", "cpus", "kernel", "hw_pte_young"], "[machine]")?;
    let mem = m.require(
        "memory",
        "a size such as \"512M\" (what the machine has, a whole number of 4 KiB pages, at least 64M)",
    )?;
    let memory = size(rep, mem, "machine.memory")?;
    if memory < 64 << 20 || !memory.is_multiple_of(PAGE_SIZE) {
        return Err(rep.at(
            mem.at,
            "machine.memory",
            format!("found {memory} bytes, expected a whole number of 4 KiB pages, at least 64M"),
        ));
    }
    let cpus = match m.get("cpus") {
        None => 1,
        Some(c) => integer(
            rep,
            c,
            "machine.cpus",
            1,
            1024,
            "a whole number from 1 to 1024",
        )? as u32,
    };
    let kernel = match m.get("kernel") {
        None => Preset::V6_1,
        Some(k) => match &k.val {
            Val::Str(s) if Preset::parse(s).is_some() => Preset::parse(s).expect("checked"),
            _ => {
                return Err(type_error(
                    rep,
                    k,
                    "machine.kernel",
                    "one of \"5.10\", \"6.1\", \"6.12\", \"7.3\" (the behaviour presets)",
                ))
            }
        },
    };
    let hw_pte_young = match m.get("hw_pte_young") {
        None => true,
        Some(b) => boolean(rep, b, "machine.hw_pte_young")?,
    };
    Ok(Machine {
        memory,
        cpus,
        kernel,
        hw_pte_young,
        memory_line: rep.line(mem.at),
    })
}

const FEATURES: &[&str] = &[
    "wp_reuse_swapcache",
    "shmem_skip_swapcache",
    "used_once_mapped_file",
    "batched_rmap_unmap",
    "swapoff_readahead_stats",
    "madv_pageout_split",
    "shmem_mthp",
    "shmem_large_swapout",
    "anon_mthp",
    "anon_mthp_swapout",
    "anon_large_swapin",
];

fn build_features(rep: &Reporter, node: &Node, preset: Preset) -> Result<Features, SpecError> {
    let f = Fields::of(rep, "features".into(), node, "a table [features]")?;
    f.only(FEATURES, "[features]")?;
    let mut out = preset.features();
    for (name, e) in &f.table.entries {
        let v = boolean(rep, &e.node, &f.path(name))?;
        match name.as_str() {
            "wp_reuse_swapcache" => out.wp_reuse_swapcache = v,
            "shmem_skip_swapcache" => out.shmem_skip_swapcache = v,
            "used_once_mapped_file" => out.used_once_mapped_file = v,
            "batched_rmap_unmap" => out.batched_rmap_unmap = v,
            "madv_pageout_split" => out.madv_pageout_split = v,
            "shmem_mthp" => out.shmem_mthp = v,
            "shmem_large_swapout" => out.shmem_large_swapout = v,
            "anon_mthp" => out.anon_mthp = v,
            "anon_mthp_swapout" => out.anon_mthp_swapout = v,
            "anon_large_swapin" => out.anon_large_swapin = v,
            _ => out.swapoff_readahead_stats = v,
        }
    }
    Ok(out)
}

/// The sysctls the simulator models, with their range.
pub const SYSCTLS: &[(&str, i64, i64)] = &[
    ("vm.swappiness", 0, 200),
    ("vm.watermark_scale_factor", 1, 3000),
    ("vm.min_free_kbytes", 128, 1 << 30),
    // The kernel accepts any non-negative value; mmsim stops at 10 (1024-page
    // windows), well past any useful readahead.
    ("vm.page-cluster", 0, 10),
];

fn build_sysctl(
    rep: &Reporter,
    node: &Node,
    knobs: &mut Vec<(String, String)>,
) -> Result<Sysctl, SpecError> {
    let f = Fields::of(
        rep,
        "sysctl".into(),
        node,
        "a table [sysctl] of sysctls such as \"vm.swappiness\" = 60",
    )?;
    let mut s = Sysctl {
        swappiness: 60,
        watermark_scale_factor: 10,
        min_free_kbytes: None,
        page_cluster: 3,
    };
    for (key, e) in &f.table.entries {
        let path = f.path(key);
        let Some(&(_, lo, hi)) = SYSCTLS.iter().find(|(k, _, _)| k == key) else {
            let known: Vec<&str> = SYSCTLS.iter().map(|k| k.0).collect();
            return Err(rep.at(
                e.key_at,
                path,
                format!(
                    "found the sysctl \"{key}\", which mmsim does not model; expected one of {}",
                    known.join(", ")
                ),
            ));
        };
        let n = integer(
            rep,
            &e.node,
            &path,
            lo,
            hi,
            &format!("an integer from {lo} to {hi}"),
        )?;
        match key.as_str() {
            "vm.swappiness" => s.swappiness = n as u32,
            "vm.watermark_scale_factor" => s.watermark_scale_factor = n as u32,
            "vm.page-cluster" => s.page_cluster = n as u32,
            _ => s.min_free_kbytes = Some(n as u64),
        }
    }
    knobs.push(("sysctl:vm.swappiness".into(), s.swappiness.to_string()));
    knobs.push((
        "sysctl:vm.watermark_scale_factor".into(),
        s.watermark_scale_factor.to_string(),
    ));
    if let Some(m) = s.min_free_kbytes {
        knobs.push(("sysctl:vm.min_free_kbytes".into(), m.to_string()));
    }
    knobs.push(("sysctl:vm.page-cluster".into(), s.page_cluster.to_string()));
    Ok(s)
}

const THP_ENABLED: &str = "kernel/mm/transparent_hugepage/enabled";
const SHMEM_ENABLED: &str = "kernel/mm/transparent_hugepage/shmem_enabled";
const THP_DEFRAG: &str = "kernel/mm/transparent_hugepage/defrag";
const THP_USE_ZERO_PAGE: &str = "kernel/mm/transparent_hugepage/use_zero_page";
const KHUGEPAGED: &str = "kernel/mm/transparent_hugepage/khugepaged/";
const LRU_GEN_ENABLED: &str = "kernel/mm/lru_gen/enabled";
const LRU_GEN_MIN_TTL: &str = "kernel/mm/lru_gen/min_ttl_ms";

/// `kstrtouint(buf, 0, ..)`: decimal, 0x hex or 0 octal, a newline allowed.
fn parse_kstrtouint(s: &str) -> Option<u32> {
    let t = s.strip_suffix('\n').unwrap_or(s);
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if t.len() > 1 && t.starts_with('0') {
        u32::from_str_radix(&t[1..], 8).ok()
    } else {
        t.parse().ok()
    }
}

/// One knob under khugepaged/, checked as 6.1's store function checks it
/// (base-10 `kstrtouint`/`kstrtoul`). Err(None): no such knob.
fn khugepaged_knob(
    rep: &Reporter,
    v: &Node,
    path: &str,
    name: &str,
    k: &mut KhugepagedKnobs,
) -> Result<(), Option<SpecError>> {
    let n = match &v.val {
        Val::Int(n) => u32::try_from(*n).ok(),
        Val::Str(s) => s.strip_suffix('\n').unwrap_or(s).parse::<u32>().ok(),
        Val::Bool(b) if name == "defrag" => Some(*b as u32),
        _ => None,
    };
    let (lo, hi, what) = match name {
        "defrag" => (0, 1, "0 or 1"),
        "pages_to_scan" => (1, u32::MAX, "a count of pages from 1 to 4294967295"),
        // 0 is the kernel's "scan again at once": khugepaged would spin
        // for as long as the workload runs. mmsim bounds its work.
        "scan_sleep_millisecs" => (1, u32::MAX, "milliseconds from 1 to 4294967295 (0, no sleep between scans, is refused: khugepaged would rescan without end)"),
        "alloc_sleep_millisecs" => (0, u32::MAX, "milliseconds from 0 to 4294967295"),
        "max_ptes_none" | "max_ptes_swap" | "max_ptes_shared" => (0, 511, "an integer from 0 to 511"),
        _ => return Err(None),
    };
    let n = n
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| Some(type_error(rep, v, path, what)))?;
    match name {
        "defrag" => k.defrag = Some(n == 1),
        "pages_to_scan" => k.pages_to_scan = Some(n),
        "scan_sleep_millisecs" => k.scan_sleep_millisecs = Some(n),
        "alloc_sleep_millisecs" => k.alloc_sleep_millisecs = Some(n),
        "max_ptes_none" => k.max_ptes_none = Some(n),
        "max_ptes_swap" => k.max_ptes_swap = Some(n),
        _ => k.max_ptes_shared = Some(n),
    }
    Ok(())
}

/// What `store_enabled` makes of a value: "n…" none, "y…" every
/// capability, else the bits of an unsigned integer (those beyond the
/// three capabilities ignored).
fn lru_gen_caps(v: &Val) -> Option<u8> {
    let caps = match v {
        Val::Bool(b) => {
            if *b {
                u32::MAX
            } else {
                0
            }
        }
        Val::Int(n) => u32::try_from(*n).ok()?,
        Val::Str(s) => match s.as_bytes().first()?.to_ascii_lowercase() {
            b'n' => 0,
            b'y' => u32::MAX,
            _ => parse_kstrtouint(s)?,
        },
        _ => return None,
    };
    Some((caps & 7) as u8)
}
const VMA_RA_ENABLED: &str = "kernel/mm/swap/vma_ra_enabled";

/// `kstrtobool`, as the sysfs file parses what is written to it.
fn kstrtobool(v: &str) -> Option<bool> {
    match v.as_bytes().first()?.to_ascii_lowercase() {
        b'y' | b't' | b'1' => Some(true),
        b'n' | b'f' | b'0' => Some(false),
        b'o' => match v.as_bytes().get(1)?.to_ascii_lowercase() {
            b'n' => Some(true),
            b'f' => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// What a `set` step's key may name, in words.
const SET_KEYS: &str = "a string: a key path a set step can change, as --set writes it: cgroup.NAME.memory_max, cgroup.NAME.memory_high, sysctl.\"vm.swappiness\", sysctl.\"vm.watermark_scale_factor\", sysctl.\"vm.min_free_kbytes\", sysctl.\"vm.page-cluster\" or sysfs.\"kernel/mm/swap/vma_ra_enabled\"";

/// A `set` step's key and value, checked as the spec's own table checks
/// that key (the cgroup's existence is checked with the regions).
fn setting(rep: &Reporter, f: &Fields, key: &Node, value: &Node) -> Result<Setting, SpecError> {
    let kpath = f.path("key");
    let vpath = f.path("value");
    let text = string(rep, key, &kpath, SET_KEYS)?;
    let parts: Vec<String> = toml_edit::Key::parse(text)
        .map(|ks| ks.iter().map(|k| k.get().to_string()).collect())
        .unwrap_or_default();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let bad = || {
        rep.at(
            key.at,
            kpath.clone(),
            format!("found \"{}\", expected {SET_KEYS}", tree::quote(text)),
        )
    };
    Ok(match parts.as_slice() {
        ["cgroup", name, field @ ("memory_max" | "memory_high")] => {
            let limit = limit(rep, value, &vpath)?;
            let cgroup = name.to_string();
            if *field == "memory_max" {
                Setting::MemoryMax { cgroup, limit }
            } else {
                Setting::MemoryHigh { cgroup, limit }
            }
        }
        ["sysctl", name] => {
            let Some(&(_, lo, hi)) = SYSCTLS.iter().find(|(k, _, _)| k == name) else {
                return Err(bad());
            };
            let n = integer(
                rep,
                value,
                &vpath,
                lo,
                hi,
                &format!("an integer from {lo} to {hi}"),
            )?;
            match *name {
                "vm.swappiness" => Setting::Swappiness(n as u32),
                "vm.watermark_scale_factor" => Setting::WatermarkScaleFactor(n as u32),
                "vm.page-cluster" => Setting::PageCluster(n as u32),
                _ => Setting::MinFreeKbytes(n as u64),
            }
        }
        ["sysfs", VMA_RA_ENABLED] => {
            let b = match &value.val {
                Val::Bool(b) => Some(*b),
                Val::Str(s) => kstrtobool(s),
                Val::Int(n) => kstrtobool(&n.to_string()),
                _ => None,
            };
            Setting::VmaRaEnabled(
                b.ok_or_else(|| type_error(rep, value, &vpath, "a boolean (true or false)"))?,
            )
        }
        _ => return Err(bad()),
    })
}

/// A knob that takes one word of `all` (a TOML string), or an error
/// listing them.
fn one_of<T: Copy, const N: usize>(
    rep: &Reporter,
    v: &Node,
    path: &str,
    all: [T; N],
    name: fn(T) -> &'static str,
) -> Result<T, SpecError> {
    let words: Vec<String> = all.iter().map(|&w| format!("\"{}\"", name(w))).collect();
    let expected = format!("one of {}", words.join(", "));
    match &v.val {
        Val::Str(s) => all
            .into_iter()
            .find(|&w| name(w) == s)
            .ok_or_else(|| type_error(rep, v, path, &expected)),
        _ => Err(type_error(rep, v, path, &expected)),
    }
}

/// The order of a `hugepages-<size>kB/enabled` knob (orders 2 to 9).
fn mthp_anon_order(key: &str) -> Option<usize> {
    let kb: u64 = key
        .strip_prefix("kernel/mm/transparent_hugepage/hugepages-")?
        .strip_suffix("kB/enabled")?
        .parse()
        .ok()?;
    (2..=9).find(|&o| 4u64 << o == kb)
}

/// The order of a `hugepages-<size>kB/shmem_enabled` knob (orders 2 to 9).
fn mthp_shmem_order(key: &str) -> Option<usize> {
    let kb: u64 = key
        .strip_prefix("kernel/mm/transparent_hugepage/hugepages-")?
        .strip_suffix("kB/shmem_enabled")?
        .parse()
        .ok()?;
    (2..=9).find(|&o| 4u64 << o == kb)
}

fn build_sysfs(
    rep: &Reporter,
    node: &Node,
    knobs: &mut Vec<(String, String)>,
    features: &Features,
    preset: Preset,
) -> Result<Sysfs, SpecError> {
    let f = Fields::of(
        rep,
        "sysfs".into(),
        node,
        "a table [sysfs] of knobs such as \"kernel/mm/transparent_hugepage/enabled\" = \"never\"",
    )?;
    let mut vma_ra_enabled = true;
    let mut lru_gen = 0u8;
    let mut lru_gen_min_ttl_ms = None;
    let mut shmem_enabled = None;
    let mut thp_enabled = ThpEnabled::Never;
    let mut thp_defrag = None;
    let mut thp_use_zero_page = None;
    let mut khugepaged = KhugepagedKnobs::default();
    let mut shmem_mthp: [MthpShmem; 8] = std::array::from_fn(|i| MthpShmem::default_for(i + 2));
    let mut anon_mthp: [MthpAnon; 8] = std::array::from_fn(|i| MthpAnon::default_for(i + 2));
    for (key, e) in &f.table.entries {
        let path = f.path(key);
        let v = &e.node;
        let value = match &v.val {
            Val::Str(s) => s.clone(),
            Val::Bool(b) => (if *b { "y" } else { "n" }).to_string(),
            Val::Int(n) => n.to_string(),
            _ => return Err(type_error(rep, v, &path, "a string, boolean or integer")),
        };
        match key.as_str() {
            THP_ENABLED => {
                let expected = "one of \"always\", \"madvise\", \"never\"";
                let Val::Str(_) = &v.val else {
                    return Err(type_error(rep, v, &path, expected));
                };
                let w = ThpEnabled::ALL
                    .into_iter()
                    .find(|w| w.name() == value)
                    .ok_or_else(|| type_error(rep, v, &path, expected))?;
                if w != ThpEnabled::Never && preset != Preset::V6_1 {
                    return Err(rep.at(v.at, path, format!("found anonymous THP (\"{value}\") with machine.kernel = \"{preset}\"; mmsim models anonymous THP as Linux 6.1 has it (later releases allocate anonymous memory in multi-size folios, not modelled yet); expected \"never\", or machine.kernel = \"6.1\"")));
                }
                thp_enabled = w;
            }
            THP_DEFRAG | THP_USE_ZERO_PAGE if preset != Preset::V6_1 => {
                return Err(rep.at(
                    e.key_at,
                    path,
                    format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; it matters only to anonymous THP, which mmsim models as Linux 6.1 has it; expected machine.kernel = \"6.1\" for it"),
                ))
            }
            THP_DEFRAG => {
                thp_defrag = Some(one_of(rep, v, &path, ThpDefrag::ALL, ThpDefrag::name)?);
            }
            THP_USE_ZERO_PAGE => {
                // use_zero_page_store: kstrtoul, 0 or 1.
                let b = match value.as_str() {
                    "0" | "n" => false,
                    "1" | "y" => true,
                    _ => return Err(type_error(rep, v, &path, "0 or 1 (or a boolean)")),
                };
                thp_use_zero_page = Some(b);
            }
            k if k.starts_with(KHUGEPAGED) => {
                if !matches!(preset, Preset::V6_1 | Preset::V7_3) {
                    return Err(rep.at(
                        e.key_at,
                        path,
                        format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; khugepaged is modelled as Linux 6.1 has it (PMD-size THP) and as 7.3 has it (mTHP collapse); expected machine.kernel = \"6.1\" or \"7.3\" for it"),
                    ));
                }
                khugepaged_knob(rep, v, &path, &k[KHUGEPAGED.len()..], &mut khugepaged)
                    .map_err(|m| match m {
                        Some(m) => m,
                        None => rep.at(e.key_at, path.clone(), format!("found the sysfs knob \"{key}\", which 6.1's khugepaged does not have; expected one of {KHUGEPAGED}{{defrag, pages_to_scan, scan_sleep_millisecs, alloc_sleep_millisecs, max_ptes_none, max_ptes_swap, max_ptes_shared}}")),
                    })?;
            }
            SHMEM_ENABLED => {
                let words: Vec<String> = ShmemEnabled::ALL
                    .iter()
                    .map(|w| format!("\"{}\"", w.name()))
                    .collect();
                let expected = format!("one of {} (6.1's shmem_enabled)", words.join(", "));
                let Val::Str(_) = &v.val else {
                    return Err(type_error(rep, v, &path, &expected));
                };
                match ShmemEnabled::ALL.iter().find(|w| w.name() == value) {
                    Some(&w) if w.allows_large() && preset < Preset::V6_1 => {
                        return Err(rep.at(v.at, path, NO_SHMEM_THP_5_10.to_string()))
                    }
                    Some(&w) => {
                        shmem_enabled = Some(w);
                    }
                    None => return Err(type_error(rep, v, &path, &expected)),
                }
            }
            k if mthp_anon_order(k).is_some() => {
                let order = mthp_anon_order(k).expect("matched");
                let w = one_of(rep, v, &path, MthpAnon::ALL, MthpAnon::name)?;
                let why = if !features.anon_mthp {
                    Some(format!("Linux {preset} does not have it (per-size anonymous THP came in 6.8); expected it only with features.anon_mthp = true (machine.kernel = \"6.12\" has it)"))
                } else if order == 9 && matches!(w, MthpAnon::Always | MthpAnon::Madvise) {
                    Some("PMD-size anonymous THP is modelled as Linux 6.1 has it, not on later releases; expected \"never\" or \"inherit\" (with enabled = \"never\") for hugepages-2048kB".to_string())
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(rep.at(e.key_at, path, format!("found the sysfs knob \"{key}\": {why}")));
                }
                anon_mthp[order - 2] = w;
                knobs.push((format!("sysfs:{key}"), value.clone()));
            }
            k if mthp_shmem_order(k).is_some() => {
                if !features.shmem_mthp {
                    return Err(rep.at(
                        e.key_at,
                        path,
                        format!("found the sysfs knob \"{key}\", which Linux {preset} does not have (per-size shmem THP came in 6.11); expected it only with features.shmem_mthp = true (machine.kernel = \"6.12\" or later has it)"),
                    ));
                }
                let w = one_of(rep, v, &path, MthpShmem::ALL, MthpShmem::name)?;
                shmem_mthp[mthp_shmem_order(k).expect("matched") - 2] = w;
                knobs.push((format!("sysfs:{key}"), value.clone()));
            }
            LRU_GEN_ENABLED if preset < Preset::V6_1 => {
                return Err(rep.at(
                    e.key_at,
                    path,
                    format!("found the sysfs knob \"{key}\", which Linux {preset} does not have (the multi-gen LRU came in 6.1); expected no lru_gen knob with machine.kernel = \"{preset}\""),
                ))
            }
            LRU_GEN_ENABLED | LRU_GEN_MIN_TTL if preset > Preset::V6_1 => {
                return Err(rep.at(
                    e.key_at,
                    path,
                    format!("found the sysfs knob \"{key}\" with machine.kernel = \"{preset}\"; the multi-gen LRU is modelled as Linux 6.1 has it (later releases changed its memcg and aging paths); expected machine.kernel = \"6.1\" for an lru_gen spec"),
                ))
            }
            LRU_GEN_ENABLED => {
                let caps = lru_gen_caps(&v.val).ok_or_else(|| {
                    type_error(rep, v, &path, "true, false, \"y\", \"n\" or the capability bits as an integer or \"0x0007\"-style string (0x0001 the multi-gen LRU, 0x0002 page-table walks, 0x0004 non-leaf young bits)")
                })?;
                lru_gen = caps;
            }
            LRU_GEN_MIN_TTL => {
                let ms = match &v.val {
                    Val::Int(n) => u32::try_from(*n).ok(),
                    Val::Str(s) => parse_kstrtouint(s),
                    _ => None,
                };
                lru_gen_min_ttl_ms = Some(ms.ok_or_else(|| {
                    type_error(rep, v, &path, "milliseconds, an integer from 0 to 4294967295")
                })?);
            }
            VMA_RA_ENABLED => match kstrtobool(&value) {
                Some(b) => {
                    vma_ra_enabled = b;
                }
                None => return Err(type_error(rep, v, &path, "a boolean (true or false)")),
            },
            _ => {
                return Err(rep.at(
                    e.key_at,
                    path,
                    format!(
                        "found the sysfs knob \"{key}\", which mmsim does not model; expected one of {THP_ENABLED}, {THP_DEFRAG}, {THP_USE_ZERO_PAGE}, {KHUGEPAGED}…, {SHMEM_ENABLED}, {LRU_GEN_ENABLED}, {LRU_GEN_MIN_TTL}, {VMA_RA_ENABLED} (or, with features.shmem_mthp, kernel/mm/transparent_hugepage/hugepages-<16..2048>kB/shmem_enabled; with features.anon_mthp, hugepages-<16..2048>kB/enabled)"
                    ),
                ))
            }
        }
    }
    // Debian's 6.1 boots with THP always; a spec that does not ask for it
    // runs with it off, in both engines (docs/design.md Oracle).
    knobs.push((format!("sysfs:{THP_ENABLED}"), thp_enabled.name().into()));
    // Only when set: left alone they keep their boot values.
    if let Some(w) = thp_defrag {
        knobs.push((format!("sysfs:{THP_DEFRAG}"), w.name().into()));
    }
    if let Some(b) = thp_use_zero_page {
        knobs.push((format!("sysfs:{THP_USE_ZERO_PAGE}"), (b as u8).to_string()));
    }
    for (name, value) in khugepaged.set() {
        knobs.push((format!("sysfs:{KHUGEPAGED}{name}"), value));
    }
    // Only when set: left alone it is 6.1's boot default `never`, and the
    // engines record it as such for specs that use shmem.
    if let Some(w) = shmem_enabled {
        knobs.push((format!("sysfs:{SHMEM_ENABLED}"), w.name().into()));
    }
    // Releases before 6.1 have no MGLRU to turn off.
    if preset >= Preset::V6_1 {
        let v = if lru_gen == 0 {
            "n".to_string()
        } else {
            format!("0x{lru_gen:04x}")
        };
        knobs.push((format!("sysfs:{LRU_GEN_ENABLED}"), v));
    }
    if let Some(ms) = lru_gen_min_ttl_ms {
        knobs.push((format!("sysfs:{LRU_GEN_MIN_TTL}"), ms.to_string()));
    }
    knobs.push((
        format!("sysfs:{VMA_RA_ENABLED}"),
        vma_ra_enabled.to_string(),
    ));
    Ok(Sysfs {
        thp_enabled,
        thp_defrag,
        thp_use_zero_page,
        khugepaged,
        vma_ra_enabled,
        lru_gen,
        lru_gen_min_ttl_ms: lru_gen_min_ttl_ms.unwrap_or(0),
        shmem_enabled,
        shmem_mthp,
        anon_mthp,
    })
}

fn build_swaps(rep: &Reporter, node: &Node) -> Result<Vec<SwapDevice>, SpecError> {
    let Val::Array(items) = &node.val else {
        return Err(type_error(
            rep,
            node,
            "swap",
            "an array of tables, one [[swap]] per device",
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, s)| build_swap(rep, i, s))
        .collect()
}

fn build_swap(rep: &Reporter, i: usize, node: &Node) -> Result<SwapDevice, SpecError> {
    let s = Fields::of(
        rep,
        format!("swap[{i}]"),
        node,
        "a table such as { device = \"zram\", size = \"512M\" }",
    )?;
    s.only(
        &[
            "device",
            "size",
            "priority",
            "rotational",
            "read_latency",
            "write_latency",
        ],
        "[[swap]]",
    )?;
    let words = "a string: one of zram, nvme, virtio, hdd";
    let dev = s.require("device", words)?;
    let kind = match string(rep, dev, &s.path("device"), words)? {
        "zram" => SwapKind::Zram,
        "nvme" => SwapKind::Nvme,
        "virtio" => SwapKind::Virtio,
        "hdd" => SwapKind::Hdd,
        "ram" => {
            return Err(rep.at(
                dev.at,
                s.path("device"),
                "found \"ram\", a RAM disk (brd), which mmsim models only as a [[disk]] holding files; expected one of zram, nvme, virtio, hdd (zram is the RAM-backed swap device)",
            ));
        }
        other => {
            return Err(rep.at(
                dev.at,
                s.path("device"),
                format!("found \"{other}\", expected one of zram, nvme, virtio, hdd"),
            ));
        }
    };
    let sz = s.require(
        "size",
        "a size such as \"512M\" (a whole number of 4 KiB pages, at least 8K)",
    )?;
    let size = size(rep, sz, &s.path("size"))?;
    if size < 2 * PAGE_SIZE || !size.is_multiple_of(PAGE_SIZE) {
        return Err(rep.at(
            sz.at,
            s.path("size"),
            format!("found {size} bytes, expected a whole number of 4 KiB pages, at least 8K"),
        ));
    }
    let priority = match s.get("priority") {
        None => None,
        Some(p) => Some(integer(
            rep,
            p,
            &s.path("priority"),
            0,
            32767,
            "an integer from 0 to 32767 (swapon -p; leave it out for the kernel's decreasing negative default)",
        )? as i32),
    };
    let rotational = match s.get("rotational") {
        None => None,
        Some(r) if kind == SwapKind::Zram => {
            return Err(rep.at(
                r.at,
                s.path("rotational"),
                "found rotational on a zram device, which is always non-rotational; expected no rotational key",
            ))
        }
        Some(r) => Some(boolean(rep, r, &s.path("rotational"))?),
    };
    let latency = |key: &str| -> Result<Option<u64>, SpecError> {
        let Some(n) = s.get(key) else {
            return Ok(None);
        };
        if kind == SwapKind::Zram {
            return Err(rep.at(
                n.at,
                s.path(key),
                format!("found {key} on a zram device, which has no device model; expected it only on nvme, virtio or hdd"),
            ));
        }
        duration(rep, n, &s.path(key)).map(Some)
    };
    let read_latency = latency("read_latency")?;
    let write_latency = latency("write_latency")?;
    Ok(SwapDevice {
        kind,
        size,
        priority,
        rotational,
        read_latency,
        write_latency,
        size_line: rep.line(sz.at),
    })
}

fn build_cgroup(rep: &Reporter, name: &str, node: &Node) -> Result<Cgroup, SpecError> {
    let key = join("cgroup", name);
    if !valid_name(name) {
        return Err(rep.at(
            node.at,
            key,
            format!("found the cgroup name {name:?}, expected letters, digits, '_' or '-'"),
        ));
    }
    let c = Fields::of(
        rep,
        key,
        node,
        "a table of cgroup settings, such as [cgroup.w]",
    )?;
    c.only(&["memory_max", "memory_high"], "a [cgroup.NAME] table")?;
    let lim = |field: &str| -> Result<Limit, SpecError> {
        match c.get(field) {
            None => Ok(Limit::Max),
            Some(v) => limit(rep, v, &c.path(field)),
        }
    };
    Ok(Cgroup {
        name: name.to_string(),
        memory_max: lim("memory_max")?,
        memory_high: lim("memory_high")?,
    })
}

/// Where each step and each field of a step is (by key path), for the
/// checks that run over the built steps.
type Locations = HashMap<String, At>;

fn build_task(
    rep: &Reporter,
    name: &str,
    node: &Node,
    cgroups: &[Cgroup],
    nswap: usize,
    files: &[File],
) -> Result<Task, SpecError> {
    let key = join("task", name);
    if !valid_name(name) {
        return Err(rep.at(
            node.at,
            key,
            format!("found the task name {name:?}, expected letters, digits, '_' or '-'"),
        ));
    }
    let t = Fields::of(
        rep,
        key,
        node,
        "a table of task settings, such as [task.main]",
    )?;
    t.only(&["cgroup", "instances", "steps"], "a [task.NAME] table")?;
    let cgroup = match t.get("cgroup") {
        None => None,
        Some(c) => {
            let path = t.path("cgroup");
            let want = string(rep, c, &path, "a string: the NAME of a [cgroup.NAME] table")?;
            Some(cgroups.iter().position(|g| g.name == want).ok_or_else(|| {
                let known: Vec<&str> = cgroups.iter().map(|g| g.name.as_str()).collect();
                rep.at(
                    c.at,
                    path,
                    format!(
                        "found \"{want}\", expected the name of a [cgroup.NAME] table ({})",
                        if known.is_empty() {
                            "none defined".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                )
            })?)
        }
    };
    let instances = match t.get("instances") {
        None => 1,
        Some(n) => integer(
            rep,
            n,
            &t.path("instances"),
            1,
            u32::MAX as i64,
            "a whole number of at least 1 and at most 4294967295",
        )? as u32,
    };
    let steps_node = t.require(
        "steps",
        "an array of step tables: steps = [ { op = ... }, ... ] or [[task.NAME.steps]] tables",
    )?;
    let steps_key = t.path("steps");
    let mut locs = Locations::new();
    let steps = build_steps(rep, steps_node, &steps_key, &mut locs, files)?;
    let mut check = RegionCheck {
        rep,
        locs: &locs,
        seen: HashMap::new(),
        nswap,
        cgroups: cgroups.iter().map(|c| c.name.clone()).collect(),
    };
    check.walk(&steps_key, &steps, &mut IndexMap::new())?;
    Ok(Task {
        name: name.to_string(),
        cgroup,
        instances,
        steps,
    })
}

// --------------------------------------------------------------------- steps

fn build_steps(
    rep: &Reporter,
    node: &Node,
    key: &str,
    locs: &mut Locations,
    files: &[File],
) -> Result<Vec<Step>, SpecError> {
    let Val::Array(items) = &node.val else {
        return Err(type_error(
            rep,
            node,
            key,
            "an array of step tables, such as [ { op = \"phase\", name = \"run\" } ]",
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, s)| build_step(rep, s, &format!("{key}[{i}]"), locs, files))
        .collect()
}

/// The keys each op takes (`op` included) and which of them it requires.
fn op_fields(op: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    Some(match op {
        "mmap" => (
            &["op", "name", "kind", "size", "file", "offset", "exec"],
            &["name", "kind", "size"],
        ),
        "munmap" => (&["op", "region"], &["region"]),
        "touch" => (
            &[
                "op", "region", "order", "theta", "count", "passes", "write", "offset", "length",
                "seed",
            ],
            &["region"],
        ),
        "trace" => (
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
            ],
            &["region", "file"],
        ),
        "sleep" | "compute" => (&["op", "duration"], &["duration"]),
        "phase" => (&["op", "name"], &["name"]),
        "repeat" => (&["op", "times", "steps"], &["steps"]),
        "fork" | "spawn" => (&["op", "steps"], &["steps"]),
        "wait" => (&["op"], &[]),
        "madvise" => (
            &["op", "region", "advice", "offset", "length"],
            &["region", "advice"],
        ),
        "swapoff" | "swapon" => (&["op", "device"], &["device"]),
        "read" | "write" => (&["op", "file", "offset", "length", "chunk"], &["file"]),
        "fsync" => (&["op", "file"], &["file"]),
        "drop_caches" => (&["op"], &[]),
        "set" => (&["op", "key", "value"], &["key", "value"]),
        "stream" => (
            &["op", "file", "offset", "length", "window", "work"],
            &["file"],
        ),
        "kvstore" => (
            &[
                "op",
                "region",
                "keys",
                "value_size",
                "requests",
                "ratio",
                "pipeline",
                "seed",
            ],
            &["region", "keys", "value_size", "requests"],
        ),
        _ => return None,
    })
}

const ADVICE_WORDS: &str =
    "a string: one of pageout, cold, dontneed, free, willneed, sequential, random, normal, hugepage, nohugepage";

/// What a field takes, in words (for type errors and missing fields).
fn field_words(op: &str, field: &str) -> &'static str {
    match (op, field) {
        ("mmap", "name") => "a string: a new region name of letters, digits, '_' or '-'",
        ("mmap", "kind") => "a string: one of anon, shmem, shared_anon, file, file_private",
        ("mmap", "size") => SIZE_WORDS,
        (_, "region") => "a string: the name of a region mapped by an earlier mmap step",
        ("touch", "order") => "a string: one of seq, rev, shuffle, uniform, zipf",
        ("trace", "file") => "a string: the trace file's path (relative to the spec's folder)",
        ("sleep" | "compute", "duration") => "a duration such as \"250ms\"",
        ("phase", "name") => "a string: a phase name of letters, digits, '_' or '-'",
        ("repeat" | "fork" | "spawn", "steps") => "an array of step tables",
        ("madvise", "advice") => ADVICE_WORDS,
        ("swapoff" | "swapon", "device") => {
            "an integer: the number of a [[swap]] device, counting from 0"
        }
        ("set", "key") => SET_KEYS,
        ("set", "value") => "the value the key takes in the spec's own table",
        _ => "a value",
    }
}

fn build_step(
    rep: &Reporter,
    node: &Node,
    key: &str,
    locs: &mut Locations,
    files: &[File],
) -> Result<Step, SpecError> {
    let f = Fields::of(
        rep,
        key.to_string(),
        node,
        "a table such as { op = \"touch\", region = \"heap\" }",
    )?;
    locs.insert(key.to_string(), node.at);
    for (name, e) in &f.table.entries {
        locs.insert(f.path(name), e.node.at);
    }
    let line = rep.line(node.at);
    let op_node = f
        .get("op")
        .ok_or_else(|| f.missing("op", &format!("one of {OPS}")))?;
    let op_key = f.path("op");
    let op = match &op_node.val {
        Val::Str(s) => s.as_str(),
        _ => return Err(type_error(rep, op_node, &op_key, &format!("one of {OPS}"))),
    };
    let Some((allowed, required)) = op_fields(op) else {
        return Err(type_error(rep, op_node, &op_key, &format!("one of {OPS}")));
    };
    f.only(allowed, &format!("op \"{op}\""))?;
    for r in required {
        if f.get(r).is_none() {
            return Err(f.missing(r, field_words(op, r)));
        }
    }
    // Each required field, by now known to be present.
    let req = |field: &str| f.get(field).expect("required field checked");
    let name_field = |field: &str| -> Result<String, SpecError> {
        let n = req(field);
        let s = string(rep, n, &f.path(field), field_words(op, field))?;
        if !valid_name(s) {
            return Err(type_error(rep, n, &f.path(field), NAME_WORDS));
        }
        Ok(s.to_string())
    };
    let op = match op {
        "mmap" => {
            let name = name_field("name")?;
            let kind = match string(rep, req("kind"), &f.path("kind"), field_words(op, "kind"))? {
                "anon" => MapKind::Anon,
                "shmem" => MapKind::Shmem,
                "shared_anon" => MapKind::SharedAnon,
                "file" => MapKind::File,
                "file_private" => MapKind::FilePrivate,
                other => {
                    return Err(rep.at(
                        req("kind").at,
                        f.path("kind"),
                        format!("found \"{other}\", expected one of anon, shmem, shared_anon, file, file_private"),
                    ));
                }
            };
            let sz = req("size");
            let bytes = size(rep, sz, &f.path("size"))?;
            if bytes == 0 {
                return Err(rep.at(
                    sz.at,
                    f.path("size"),
                    "found 0, expected a size of at least one page",
                ));
            }
            if bytes > MAX_MAP_BYTES {
                return Err(rep.at(
                    sz.at,
                    f.path("size"),
                    format!(
                        "found {bytes} bytes, expected at most 128T (x86-64's user address space)"
                    ),
                ));
            }
            let pages = bytes.div_ceil(PAGE_SIZE);
            let (file, offset) = mmap_file(rep, &f, kind, pages, files)?;
            let exec = match f.get("exec") {
                None => false,
                Some(n) if file.is_none() || kind == MapKind::Shmem => {
                    return Err(rep.at(
                        n.at,
                        f.path("exec"),
                        format!(
                            "found exec on kind \"{}\", expected it only with kind = \"file\" or \"file_private\" (a program's text)",
                            kind.name()
                        ),
                    ))
                }
                Some(n) => boolean(rep, n, &f.path("exec"))?,
            };
            Op::Mmap {
                name,
                kind,
                pages,
                file,
                offset,
                exec,
            }
        }
        "munmap" => Op::Munmap {
            region: string(
                rep,
                req("region"),
                &f.path("region"),
                field_words(op, "region"),
            )?
            .to_string(),
        },
        "touch" => Op::Touch(build_touch(rep, &f)?),
        "trace" => Op::Touch(build_trace(rep, &f)?),
        "sleep" => Op::Sleep {
            ns: duration(rep, req("duration"), &f.path("duration"))?,
        },
        "compute" => Op::Compute {
            ns: duration(rep, req("duration"), &f.path("duration"))?,
        },
        "phase" => Op::Phase {
            name: name_field("name")?,
        },
        "fork" => Op::Fork {
            steps: build_steps(rep, req("steps"), &f.path("steps"), locs, files)?,
        },
        "spawn" => Op::Spawn {
            steps: build_steps(rep, req("steps"), &f.path("steps"), locs, files)?,
        },
        "wait" => Op::Wait,
        "kvstore" => Op::KvStore(build_kvstore(rep, &f)?),
        "read" | "write" => build_file_io(rep, &f, op == "write", files, "chunk", 32)?,
        "fsync" => Op::Fsync {
            file: file_index(rep, &f, files)?,
        },
        "drop_caches" => Op::DropCaches,
        "stream" => {
            let Op::FileIo {
                file,
                offset,
                length,
                chunk,
                ..
            } = build_file_io(rep, &f, false, files, "window", 8192)?
            else {
                unreachable!("build_file_io builds FileIo")
            };
            let work = match f.get("work") {
                None => 0,
                Some(w) => duration(rep, w, &f.path("work"))?,
            };
            Op::Stream {
                file,
                offset,
                length,
                window: chunk,
                work,
            }
        }
        "madvise" => {
            let a = req("advice");
            let advice = match string(rep, a, &f.path("advice"), ADVICE_WORDS)? {
                "pageout" => Advice::Pageout,
                "cold" => Advice::Cold,
                "dontneed" => Advice::Dontneed,
                "free" => Advice::Free,
                "willneed" => Advice::Willneed,
                "sequential" => Advice::Sequential,
                "random" => Advice::Random,
                "normal" => Advice::Normal,
                "hugepage" => Advice::Hugepage,
                "nohugepage" => Advice::Nohugepage,
                _ => return Err(type_error(rep, a, &f.path("advice"), ADVICE_WORDS)),
            };
            let (offset, length) = page_range(rep, &f)?;
            if matches!(
                advice,
                Advice::Sequential
                    | Advice::Random
                    | Advice::Normal
                    | Advice::Hugepage
                    | Advice::Nohugepage
            ) {
                if let Some(k) = ["offset", "length"]
                    .into_iter()
                    .find(|k| f.get(k).is_some())
                {
                    return Err(rep.at(
                        f.get(k).expect("found").at,
                        f.path(k),
                        format!(
                            "found {k} with advice \"{}\", which applies to the whole region; expected no {k}",
                            advice.name()
                        ),
                    ));
                }
            }
            Op::Madvise {
                region: string(
                    rep,
                    req("region"),
                    &f.path("region"),
                    field_words(op, "region"),
                )?
                .to_string(),
                advice,
                offset,
                length,
            }
        }
        "set" => Op::Set(setting(rep, &f, req("key"), req("value"))?),
        "swapoff" | "swapon" => {
            let device = integer(
                rep,
                req("device"),
                &f.path("device"),
                0,
                i64::MAX,
                field_words(op, "device"),
            )? as usize;
            if op == "swapoff" {
                Op::Swapoff { device }
            } else {
                Op::Swapon { device }
            }
        }
        _ => {
            debug_assert_eq!(op, "repeat");
            let times = match f.get("times") {
                None => 1,
                Some(t) => integer(
                    rep,
                    t,
                    &f.path("times"),
                    1,
                    i64::MAX,
                    "a whole number of at least 1",
                )? as u64,
            };
            let steps = build_steps(rep, req("steps"), &f.path("steps"), locs, files)?;
            Op::Repeat { times, steps }
        }
    };
    Ok(Step {
        line,
        key: key.to_string(),
        op,
    })
}

fn build_touch(rep: &Reporter, f: &Fields) -> Result<Touch, SpecError> {
    let region = string(
        rep,
        f.get("region").expect("required field checked"),
        &f.path("region"),
        field_words("touch", "region"),
    )?
    .to_string();
    let order = match f.get("order") {
        None => Order::Seq,
        Some(o) => {
            let words = field_words("touch", "order");
            match string(rep, o, &f.path("order"), words)? {
                "seq" => Order::Seq,
                "rev" => Order::Rev,
                "shuffle" => Order::Shuffle,
                "uniform" => Order::Uniform,
                "zipf" => Order::Zipf,
                _ => {
                    return Err(type_error(
                        rep,
                        o,
                        &f.path("order"),
                        "one of seq, rev, shuffle, uniform, zipf",
                    ))
                }
            }
        }
    };
    let theta_words = "a number above 0 and at most 10";
    let theta =
        match (order, f.get("theta")) {
            (Order::Zipf, Some(th)) => {
                let v = number(rep, th, &f.path("theta"), theta_words)?;
                if !(v > 0.0 && v.is_finite() && v <= 10.0) {
                    return Err(rep.at(
                        th.at,
                        f.path("theta"),
                        format!("found {}, expected {theta_words}", th.show()),
                    ));
                }
                v
            }
            (Order::Zipf, None) => 0.99,
            (_, Some(th)) => return Err(rep.at(
                th.at,
                f.path("theta"),
                "found theta, which only order = \"zipf\" takes; expected no theta with this order",
            )),
            (_, None) => 0.0,
        };
    let write = write_fraction(rep, f)?;
    let accesses = |field: &str| -> Result<Option<u64>, SpecError> {
        f.get(field)
            .map(|n| {
                integer(
                    rep,
                    n,
                    &f.path(field),
                    1,
                    MAX_ACCESSES as i64,
                    "a whole number of at least 1 and at most 2^48 (281474976710656)",
                )
                .map(|v| v as u64)
            })
            .transpose()
    };
    let count = accesses("count")?;
    let passes = accesses("passes")?;
    if let (Some(_), Some(p)) = (count, f.get("passes")) {
        return Err(rep.at(
            p.at,
            f.path("passes"),
            "found both count and passes, expected one of them",
        ));
    }
    let (offset, length) = page_range(rep, f)?;
    Ok(Touch {
        region,
        order,
        theta,
        count,
        passes: passes.unwrap_or(1),
        write,
        offset,
        length,
        seed: stream_seed_field(rep, f)?,
        trace: None,
    })
}

/// A step's `write`: the fraction of accesses that write.
fn write_fraction(rep: &Reporter, f: &Fields) -> Result<f64, SpecError> {
    let Some(w) = f.get("write") else {
        return Ok(0.0);
    };
    let words = "a number from 0 to 1 (the fraction of accesses that write)";
    let v = number(rep, w, &f.path("write"), words)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(rep.at(
            w.at,
            f.path("write"),
            format!("found {}, expected a fraction from 0 to 1", w.show()),
        ));
    }
    Ok(v)
}

/// A step's `seed` for its random streams.
fn stream_seed_field(rep: &Reporter, f: &Fields) -> Result<u64, SpecError> {
    f.get("seed")
        .map(|s| {
            integer(
                rep,
                s,
                &f.path("seed"),
                0,
                i64::MAX,
                "a whole number from 0 to 2^63-1",
            )
            .map(|v| v as u64)
        })
        .transpose()
        .map(|s| s.unwrap_or(0))
}

/// A `trace` step: a `touch` whose accesses are a file's requests
/// (`crate::trace`). The file is read once here, so a bad record is an
/// error of the spec and the run's work is known.
fn build_trace(rep: &Reporter, f: &Fields) -> Result<Touch, SpecError> {
    use crate::trace::{CsvColumns, TraceFormat, TraceMap, TraceSource};
    let text = |key: &str, words: &str| -> Result<Option<(&Node, String)>, SpecError> {
        f.get(key)
            .map(|n| string(rep, n, &f.path(key), words).map(|s| (n, s.to_string())))
            .transpose()
    };
    let region = text("region", field_words("trace", "region"))?
        .expect("required field checked")
        .1;
    let (file_node, written) =
        text("file", field_words("trace", "file"))?.expect("required field checked");
    if written.is_empty() {
        return Err(type_error(
            rep,
            file_node,
            &f.path("file"),
            field_words("trace", "file"),
        ));
    }
    let path = trace_path(rep.file, &written);
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
    Ok(Touch {
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

/// The `[[file]]` a step's `file` key names.
fn file_index(rep: &Reporter, f: &Fields, files: &[File]) -> Result<usize, SpecError> {
    let known: Vec<&str> = files.iter().map(|x| x.name.as_str()).collect();
    let words = format!(
        "a string: the name of a [[file]] ({})",
        if known.is_empty() {
            "none defined".to_string()
        } else {
            known.join(", ")
        }
    );
    let node = f.get("file").ok_or_else(|| f.missing("file", &words))?;
    let name = string(rep, node, &f.path("file"), &words)?;
    files.iter().position(|x| x.name == name).ok_or_else(|| {
        rep.at(
            node.at,
            f.path("file"),
            format!("found \"{name}\", expected {words}"),
        )
    })
}

/// `read` / `write`: a page range of a file, in chunks (default: the whole
/// file, 128 KiB chunks).
fn build_file_io(
    rep: &Reporter,
    f: &Fields,
    write: bool,
    files: &[File],
    chunk_key: &str,
    default_chunk: u64,
) -> Result<Op, SpecError> {
    let file = file_index(rep, f, files)?;
    let file_pages = files[file].size / PAGE_SIZE;
    let (offset, length) = page_range(rep, f)?;
    let length = length.unwrap_or(file_pages.saturating_sub(offset));
    if offset >= file_pages || offset + length > file_pages {
        let key = if offset >= file_pages {
            "offset"
        } else {
            "length"
        };
        return Err(rep.at(
            f.get(key).map_or(f.at, |n| n.at),
            f.path(key),
            format!(
                "found the pages {offset}..{}, expected them inside file \"{}\" of {file_pages} pages",
                offset + length,
                files[file].name
            ),
        ));
    }
    let chunk = match f.get(chunk_key) {
        None => default_chunk,
        Some(c) => {
            let b = size(rep, c, &f.path(chunk_key))?;
            if b == 0 || !b.is_multiple_of(PAGE_SIZE) {
                return Err(rep.at(
                    c.at,
                    f.path(chunk_key),
                    format!(
                        "found {b} bytes, expected a whole number of 4 KiB pages, at least one"
                    ),
                ));
            }
            b / PAGE_SIZE
        }
    };
    Ok(Op::FileIo {
        write,
        file,
        offset,
        length,
        chunk,
    })
}

/// The file and offset of a mapping: `shmem` needs a `[[file]]` on tmpfs,
/// `file` and `file_private` one on a disk, and the range must lie inside
/// it; other kinds take neither key.
fn mmap_file(
    rep: &Reporter,
    f: &Fields,
    kind: MapKind,
    pages: u64,
    files: &[File],
) -> Result<(Option<usize>, u64), SpecError> {
    if matches!(kind, MapKind::Anon | MapKind::SharedAnon) {
        for key in ["file", "offset"] {
            if let Some(n) = f.get(key) {
                return Err(rep.at(
                    n.at,
                    f.path(key),
                    format!(
                        "found {key}, which kind \"{}\" does not take; expected it only with kind = \"shmem\", \"file\" or \"file_private\"",
                        kind.name()
                    ),
                ));
            }
        }
        return Ok((None, 0));
    }
    let on_tmpfs = kind == MapKind::Shmem;
    let known: Vec<&str> = files
        .iter()
        .filter(|x| (x.on == FileOn::Tmpfs) == on_tmpfs)
        .map(|x| x.name.as_str())
        .collect();
    let words = format!(
        "a string: the name of a [[file]] {} ({})",
        if on_tmpfs {
            "on tmpfs"
        } else {
            "on a [[disk]]"
        },
        if known.is_empty() {
            "none defined".to_string()
        } else {
            known.join(", ")
        }
    );
    let node = f.get("file").ok_or_else(|| f.missing("file", &words))?;
    let name = string(rep, node, &f.path("file"), &words)?;
    let idx = files.iter().position(|x| x.name == name).ok_or_else(|| {
        rep.at(
            node.at,
            f.path("file"),
            format!("found \"{name}\", expected {words}"),
        )
    })?;
    if (files[idx].on == FileOn::Tmpfs) != on_tmpfs {
        let hint = if on_tmpfs {
            "a file on a disk is mapped with kind = \"file\" or \"file_private\""
        } else {
            "a tmpfs file is mapped with kind = \"shmem\" (MAP_PRIVATE of tmpfs files is not modelled yet)"
        };
        return Err(rep.at(
            node.at,
            f.path("file"),
            format!("found \"{name}\" ({hint}), expected {words}"),
        ));
    }
    let offset = match f.get("offset") {
        None => 0,
        Some(o) => {
            let b = size(rep, o, &f.path("offset"))?;
            if !b.is_multiple_of(PAGE_SIZE) {
                return Err(rep.at(
                    o.at,
                    f.path("offset"),
                    format!("found {b} bytes, expected a multiple of 4096"),
                ));
            }
            b / PAGE_SIZE
        }
    };
    let file_pages = files[idx].size / PAGE_SIZE;
    if offset + pages > file_pages {
        return Err(rep.at(
            f.get("size").expect("required").at,
            f.path("size"),
            format!(
                "found the file pages {offset}..{}, expected them inside file \"{name}\" of {file_pages} pages",
                offset + pages
            ),
        ));
    }
    Ok((Some(idx), offset))
}

/// Why a 5.10 spec may not ask for shmem THP.
const NO_SHMEM_THP_5_10: &str = "found shmem THP asked for with machine.kernel = \"5.10\": mmsim models 6.1's shmem THP, and 5.10's differs on what the fidelity suite measures (the oracle's 5.10 runs end with none of the huge pages they allocated and fault twice as often); expected \"never\" on 5.10, or machine.kernel = \"6.1\" or later";

fn build_files(
    rep: &Reporter,
    node: &Node,
    disks: &[Disk],
    preset: Preset,
) -> Result<Vec<File>, SpecError> {
    let Val::Array(items) = &node.val else {
        return Err(type_error(
            rep,
            node,
            "file",
            "an array of tables, one [[file]] per file",
        ));
    };
    let mut files: Vec<File> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let f = Fields::of(
            rep,
            format!("file[{i}]"),
            item,
            "a table such as { name = \"data\", size = \"1G\", on = \"tmpfs\" }",
        )?;
        f.only(&["name", "size", "on", "huge"], "[[file]]")?;
        let n = f.require("name", NAME_WORDS)?;
        let name = string(rep, n, &f.path("name"), NAME_WORDS)?;
        if !valid_name(name) {
            return Err(type_error(rep, n, &f.path("name"), NAME_WORDS));
        }
        if files.iter().any(|x| x.name == name) {
            return Err(rep.at(n.at, f.path("name"), format!("found \"{name}\", which an earlier [[file]] already names; expected a new name")));
        }
        let sz = f.require(
            "size",
            "a size such as \"1G\" (a whole number of 4 KiB pages)",
        )?;
        let size = size(rep, sz, &f.path("size"))?;
        if size == 0 || !size.is_multiple_of(PAGE_SIZE) {
            return Err(rep.at(
                sz.at,
                f.path("size"),
                format!("found {size} bytes, expected a whole number of 4 KiB pages, at least one"),
            ));
        }
        let mut names = vec!["\"tmpfs\"".to_string()];
        names.extend(disks.iter().map(|d| format!("\"{}\"", d.name)));
        let on_words = format!(
            "a string: \"tmpfs\" or the name of a [[disk]] ({})",
            names.join(", ")
        );
        let on_node = f.require("on", &on_words)?;
        let on = match string(rep, on_node, &f.path("on"), &on_words)? {
            "tmpfs" => FileOn::Tmpfs,
            other => match disks.iter().position(|d| d.name == other) {
                Some(d) => FileOn::Disk(d),
                None => {
                    return Err(rep.at(
                        on_node.at,
                        f.path("on"),
                        format!("found \"{other}\", expected {on_words}"),
                    ))
                }
            },
        };
        if let (FileOn::Disk(d), Some(h)) = (on, f.get("huge")) {
            return Err(rep.at(
                h.at,
                f.path("huge"),
                format!(
                    "found huge on a file on disk \"{}\", expected it only on tmpfs files (the tmpfs mount option)",
                    disks[d].name
                ),
            ));
        }
        if let FileOn::Disk(d) = on {
            let used: u64 = files
                .iter()
                .filter(|x| x.on == on)
                .map(|x| x.size)
                .sum::<u64>()
                + size;
            let room = fs_room(disks[d].fs, disks[d].size);
            if used > room {
                let mib = disks[d].size >> 20;
                let why = match disks[d].fs {
                    Fs::Ext2 => format!("ext2 on its {mib} MiB keeps 5% for root and about 2% for inode tables, block bitmaps and indirect blocks"),
                    Fs::Xfs => format!("XFS on its {mib} MiB keeps a 64 MiB log (size/2048 above 128 GiB), a reserve pool of 5% up to 32 MiB and about 1% for allocation-group headers and btree reservations"),
                };
                return Err(rep.at(
                    sz.at,
                    f.path("size"),
                    format!(
                        "found {} MiB of files on disk \"{}\", expected at most {} MiB: {why}",
                        used >> 20,
                        disks[d].name,
                        room >> 20,
                    ),
                ));
            }
        }
        let mut huge = TmpfsHuge::Never;
        if let Some(h) = f.get("huge") {
            let words: Vec<String> = TmpfsHuge::ALL
                .iter()
                .map(|w| format!("\"{}\"", w.name()))
                .collect();
            let expected = format!("one of {} (tmpfs's huge= mount option)", words.join(", "));
            let v = string(rep, h, &f.path("huge"), &expected)?;
            huge = match TmpfsHuge::ALL.iter().find(|w| w.name() == v) {
                Some(&w) => w,
                None => {
                    return Err(rep.at(
                        h.at,
                        f.path("huge"),
                        format!("found \"{v}\", expected {expected}"),
                    ))
                }
            };
            if huge != TmpfsHuge::Never && preset < Preset::V6_1 {
                return Err(rep.at(h.at, f.path("huge"), NO_SHMEM_THP_5_10.to_string()));
            }
        }
        files.push(File {
            name: name.to_string(),
            size,
            on,
            huge,
            size_line: rep.line(sz.at),
        });
    }
    Ok(files)
}

/// What files an ext2 file system on a disk of `size` bytes can hold
/// (4 KiB blocks): mke2fs reserves 5% for root, and inode tables (256 B
/// per 16 KiB), bitmaps and indirect blocks take about 2% more.
pub fn disk_room(size: u64) -> u64 {
    (size / 100 * 93) & !(PAGE_SIZE - 1)
}

/// The smallest XFS file system mkfs.xfs makes: xfsprogs 5.19 and later
/// refuse smaller ones ("Filesystem must be larger than 300MB"). Measured
/// in the oracle's 6.1 guest with Debian 12's xfsprogs 6.1.0: `-d
/// size=314572800` (300 MiB) is accepted, one page less refused.
pub const XFS_MIN_SIZE: u64 = 300 << 20;

/// What files an XFS file system on a disk of `size` bytes can hold, as
/// mkfs.xfs 6.1 makes it (`-b size=4096`, its defaults otherwise): its
/// internal log takes max(size/2048, 64 MiB), the reserve pool
/// min(size/20, 32 MiB) (xfs_default_resblks), and allocation-group
/// headers, free-space and inode btrees and the per-AG reservations of the
/// refcount and free-inode btrees about 0.7% of the rest; 1% is kept for
/// those and the files' own extent maps. Measured in the oracle's 6.1
/// guest (statfs f_bavail right after mount): 300 MiB leaves 219.1 MiB
/// (this rule: 218), 1 GiB 921.0 MiB (917.7), 4 GiB 3971.6 MiB (3959.0),
/// 16 GiB 16173.9 MiB (16124.2); 218 MiB of files on a 300 MiB disk were
/// written whole.
pub fn xfs_room(size: u64) -> u64 {
    let log = (size / 2048).max(64 << 20);
    let reserve = (size / 20).min(32 << 20);
    size.saturating_sub(log + reserve + size / 100) & !(PAGE_SIZE - 1)
}

/// What files a disk of `size` bytes with file system `fs` can hold.
pub fn fs_room(fs: Fs, size: u64) -> u64 {
    match fs {
        Fs::Ext2 => disk_room(size),
        Fs::Xfs => xfs_room(size),
    }
}

fn build_disks(rep: &Reporter, node: &Node) -> Result<Vec<Disk>, SpecError> {
    let Val::Array(items) = &node.val else {
        return Err(type_error(
            rep,
            node,
            "disk",
            "an array of tables, one [[disk]] per disk",
        ));
    };
    let mut disks: Vec<Disk> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let d = Fields::of(
            rep,
            format!("disk[{i}]"),
            item,
            "a table such as { name = \"data\", device = \"virtio\", size = \"1G\" }",
        )?;
        d.only(
            &["name", "device", "size", "read_ahead_kb", "fs"],
            "[[disk]]",
        )?;
        let n = d.require("name", NAME_WORDS)?;
        let name = string(rep, n, &d.path("name"), NAME_WORDS)?;
        if !valid_name(name) {
            return Err(type_error(rep, n, &d.path("name"), NAME_WORDS));
        }
        if name == "tmpfs" || disks.iter().any(|x| x.name == name) {
            return Err(rep.at(
                n.at,
                d.path("name"),
                format!("found \"{name}\", which is taken (tmpfs, or an earlier [[disk]]); expected a new name"),
            ));
        }
        let words = "a string: one of nvme, virtio, hdd, ram";
        let dev = d.require("device", words)?;
        let kind = match string(rep, dev, &d.path("device"), words)? {
            "nvme" => SwapKind::Nvme,
            "virtio" => SwapKind::Virtio,
            "hdd" => SwapKind::Hdd,
            "ram" => SwapKind::Ram,
            other => {
                return Err(rep.at(
                    dev.at,
                    d.path("device"),
                    format!("found \"{other}\", expected one of nvme, virtio, hdd, ram (zram holds no file system here)"),
                ))
            }
        };
        let sz = d.require("size", "a size such as \"1G\" (at least 16M)")?;
        let size = size(rep, sz, &d.path("size"))?;
        if size < 16 << 20 || !size.is_multiple_of(PAGE_SIZE) {
            return Err(rep.at(
                sz.at,
                d.path("size"),
                format!("found {size} bytes, expected a whole number of 4 KiB pages, at least 16M"),
            ));
        }
        let read_ahead_kb = match d.get("read_ahead_kb") {
            None => 128,
            Some(r) => integer(
                rep,
                r,
                &d.path("read_ahead_kb"),
                0,
                65536,
                "an integer from 0 to 65536, a multiple of 4 (KiB; 0 turns readahead off)",
            )? as u64,
        };
        if !read_ahead_kb.is_multiple_of(4) {
            return Err(rep.at(
                d.get("read_ahead_kb").expect("given").at,
                d.path("read_ahead_kb"),
                format!("found {read_ahead_kb}, expected a multiple of 4 (whole pages)"),
            ));
        }
        let fs_words = "a string: ext2 or xfs";
        let fs = match d.get("fs") {
            None => Fs::Ext2,
            Some(v) => match string(rep, v, &d.path("fs"), fs_words)? {
                "ext2" => Fs::Ext2,
                "xfs" => Fs::Xfs,
                other => {
                    return Err(rep.at(
                        v.at,
                        d.path("fs"),
                        format!("found \"{other}\", expected {fs_words}"),
                    ))
                }
            },
        };
        if fs == Fs::Xfs && size < XFS_MIN_SIZE {
            return Err(rep.at(
                sz.at,
                d.path("size"),
                format!(
                    "found {size} bytes ({} MiB) on an xfs disk, expected at least 300M: mkfs.xfs refuses file systems smaller than 300 MiB",
                    size >> 20
                ),
            ));
        }
        disks.push(Disk {
            name: name.to_string(),
            kind,
            size,
            read_ahead_kb,
            fs,
        });
    }
    Ok(disks)
}

fn build_kvstore(rep: &Reporter, f: &Fields) -> Result<KvStore, SpecError> {
    let req = |field: &str| f.get(field).expect("required field checked");
    let whole = |field: &str, lo: i64, words: &str| -> Result<u64, SpecError> {
        integer(
            rep,
            req(field),
            &f.path(field),
            lo,
            MAX_ACCESSES as i64,
            words,
        )
        .map(|v| v as u64)
    };
    let keys = whole("keys", 1, "a whole number of keys from 1 to 2^32 - 2")?;
    if keys >= u32::MAX as u64 - 1 {
        return Err(type_error(
            rep,
            req("keys"),
            &f.path("keys"),
            "a whole number of keys from 1 to 2^32 - 2",
        ));
    }
    let requests = whole(
        "requests",
        1,
        "a whole number of requests, at least 1 and at most 2^48",
    )?;
    let vs = req("value_size");
    let value_size = size(rep, vs, &f.path("value_size"))?;
    if value_size == 0 || value_size > 1 << 20 {
        return Err(rep.at(
            vs.at,
            f.path("value_size"),
            format!("found {value_size} bytes, expected a value size from 1 byte to 1M"),
        ));
    }
    let (sets, gets) = match f.get("ratio") {
        None => (1, 10),
        Some(r) => {
            let words = "a string \"SETS:GETS\" such as \"1:10\" (not both zero)";
            let text = string(rep, r, &f.path("ratio"), words)?;
            let parsed = text
                .split_once(':')
                .and_then(|(a, b)| {
                    Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?))
                })
                .filter(|&(a, b)| a + b > 0 && a <= 1_000_000 && b <= 1_000_000);
            parsed.ok_or_else(|| type_error(rep, r, &f.path("ratio"), words))?
        }
    };
    let pipeline = match f.get("pipeline") {
        None => 1,
        Some(p) => integer(
            rep,
            p,
            &f.path("pipeline"),
            1,
            1 << 20,
            "a whole number from 1 to 1048576",
        )? as u64,
    };
    let seed = match f.get("seed") {
        None => 0,
        Some(s) => integer(
            rep,
            s,
            &f.path("seed"),
            0,
            i64::MAX,
            "a whole number from 0 to 2^63-1",
        )? as u64,
    };
    Ok(KvStore {
        region: string(
            rep,
            req("region"),
            &f.path("region"),
            field_words("kvstore", "region"),
        )?
        .to_string(),
        keys,
        value_size,
        requests,
        sets,
        gets,
        pipeline,
        seed,
    })
}

/// A step's `offset` and `length` (bytes, whole pages) as pages.
fn page_range(rep: &Reporter, f: &Fields) -> Result<(u64, Option<u64>), SpecError> {
    let pages_of = |field: &str| -> Result<Option<u64>, SpecError> {
        let Some(n) = f.get(field) else {
            return Ok(None);
        };
        let b = size(rep, n, &f.path(field))?;
        if !b.is_multiple_of(PAGE_SIZE) {
            return Err(rep.at(
                n.at,
                f.path(field),
                format!("found {b} bytes, expected a multiple of 4096"),
            ));
        }
        Ok(Some(b / PAGE_SIZE))
    };
    let offset = pages_of("offset")?.unwrap_or(0);
    let length = pages_of("length")?;
    if length == Some(0) {
        let at = f.get("length").expect("length given").at;
        return Err(rep.at(at, f.path("length"), "found 0, expected at least one page"));
    }
    Ok((offset, length))
}

// ------------------------------------------------------------------- regions

/// Mapped regions by name, with their size in pages.
type Regions = IndexMap<String, u64>;

/// Checks that every region a step names is mapped by an earlier step of the
/// task and not unmapped since, that no mmap reuses a mapped name, and that a
/// touched sub-range lies inside its region, walking the steps in the order
/// they run.
struct RegionCheck<'a> {
    rep: &'a Reporter<'a>,
    locs: &'a Locations,
    /// Repeat bodies already walked from a given state, with the state they
    /// left: a body is a fixed function of the state, so a second walk from
    /// the same state would find nothing new.
    seen: HashMap<(usize, Vec<(String, u64)>), Regions>,
    /// Number of [[swap]] devices (swapoff/swapon name one).
    nswap: usize,
    /// The `[cgroup.NAME]`s (a set step names one).
    cgroups: Vec<String>,
}

impl RegionCheck<'_> {
    fn at(&self, key: &str, field: &str) -> At {
        self.locs
            .get(&format!("{key}.{field}"))
            .or_else(|| self.locs.get(key))
            .copied()
            .unwrap_or(At::Text(0))
    }

    fn err(&self, key: &str, field: &str, message: String) -> SpecError {
        self.rep
            .at(self.at(key, field), format!("{key}.{field}"), message)
    }

    /// `prefix`: the key path of the `steps` array (`task.main.steps`,
    /// `task.main.steps[3].steps`).
    fn walk(
        &mut self,
        prefix: &str,
        steps: &[Step],
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        for (i, s) in steps.iter().enumerate() {
            let key = format!("{prefix}[{i}]");
            match &s.op {
                Op::Mmap { name, pages, .. } => {
                    if regions.contains_key(name) {
                        return Err(self.err(
                            &key,
                            "name",
                            format!("found \"{name}\", which is already mapped; expected a new region name"),
                        ));
                    }
                    regions.insert(name.clone(), *pages);
                }
                Op::Munmap { region } => {
                    if regions.shift_remove(region).is_none() {
                        return Err(self.unknown_region(&key, region, regions));
                    }
                }
                Op::Touch(t) => {
                    self.range(&key, &t.region, t.offset, t.length, regions)?;
                    self.touch_accesses(&key, t, regions)?;
                }
                Op::Madvise {
                    region,
                    offset,
                    length,
                    ..
                } => self.range(&key, region, *offset, *length, regions)?,
                Op::Fork { steps } => {
                    // The child starts with a copy of the parent's regions.
                    let mut child = regions.clone();
                    self.body(&format!("{key}.steps"), steps, &mut child)?;
                }
                Op::Spawn { steps } => {
                    // A new program starts with no regions.
                    let mut child = Regions::new();
                    self.body(&format!("{key}.steps"), steps, &mut child)?;
                }
                Op::Swapoff { device } | Op::Swapon { device } => {
                    if *device >= self.nswap {
                        return Err(self.err(
                            &key,
                            "device",
                            format!(
                                "found {device}, expected the number of a [[swap]] device: {}",
                                if self.nswap == 0 {
                                    "none is defined".to_string()
                                } else {
                                    format!("0 to {}", self.nswap - 1)
                                }
                            ),
                        ));
                    }
                }
                Op::Repeat { times, steps } => {
                    let body = format!("{key}.steps");
                    // Every iteration after the first starts from the state
                    // the first one left (a body maps, unmaps and remaps the
                    // same names each time), so two walks see every state.
                    let before = regions.clone();
                    self.body(&body, steps, regions)?;
                    if *times >= 2 && *regions != before {
                        self.body(&body, steps, regions)?;
                    }
                }
                Op::Sleep { .. } | Op::Compute { .. } | Op::Phase { .. } | Op::Wait => {}
                Op::KvStore(kv) => self.kvstore(&key, kv, regions)?,
                Op::Set(Setting::MemoryMax { cgroup, .. } | Setting::MemoryHigh { cgroup, .. })
                    if !self.cgroups.contains(cgroup) =>
                {
                    return Err(self.err(
                        &key,
                        "key",
                        format!(
                            "found the cgroup \"{}\", expected the NAME of a [cgroup.NAME] table: {}",
                            tree::quote(cgroup),
                            if self.cgroups.is_empty() {
                                "none is defined".to_string()
                            } else {
                                self.cgroups.join(", ")
                            }
                        ),
                    ));
                }
                Op::FileIo { .. }
                | Op::Fsync { .. }
                | Op::DropCaches
                | Op::Stream { .. }
                | Op::Set(_) => {}
            }
        }
        Ok(())
    }

    fn body(
        &mut self,
        prefix: &str,
        steps: &[Step],
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let mut state: Vec<(String, u64)> = regions.iter().map(|(k, v)| (k.clone(), *v)).collect();
        state.sort_unstable();
        let memo = (steps.as_ptr() as usize, state);
        if let Some(after) = self.seen.get(&memo) {
            *regions = after.clone();
            return Ok(());
        }
        self.walk(prefix, steps, regions)?;
        self.seen.insert(memo, regions.clone());
        Ok(())
    }

    fn range(
        &self,
        key: &str,
        region: &str,
        offset: u64,
        length: Option<u64>,
        regions: &Regions,
    ) -> Result<(), SpecError> {
        let Some(&pages) = regions.get(region) else {
            return Err(self.unknown_region(key, region, regions));
        };
        let n = length.unwrap_or(pages.saturating_sub(offset));
        let end = offset.saturating_add(n);
        if offset >= pages || end > pages {
            let field = if offset >= pages { "offset" } else { "length" };
            return Err(self.err(
                key,
                field,
                format!(
                    "found the range of pages {offset}..{end}, expected it inside region \"{region}\" of {pages} pages",
                ),
            ));
        }
        Ok(())
    }

    /// The region holds the table and every key the requests can insert.
    fn kvstore(&self, key: &str, kv: &KvStore, regions: &Regions) -> Result<(), SpecError> {
        let Some(&pages) = regions.get(&kv.region) else {
            return Err(self.unknown_region(key, &kv.region, regions));
        };
        let max_sets = (kv.requests / (kv.sets + kv.gets)) * kv.sets
            + (kv.requests % (kv.sets + kv.gets)).min(kv.sets);
        let table = (kv.keys.next_power_of_two() * 8).div_ceil(4096);
        let heap = (kv.keys.min(max_sets) * crate::kv::kv_slot_bytes(kv.value_size)).div_ceil(4096);
        let need = table + heap;
        if pages < need {
            return Err(self.err(
                key,
                "region",
                format!(
                    "found region \"{}\" of {pages} pages, expected at least {need} pages: the hash table of {} keys and the {} values the requests can insert",
                    kv.region,
                    kv.keys,
                    kv.keys.min(max_sets)
                ),
            ));
        }
        Ok(())
    }

    /// A touch makes at most MAX_ACCESSES accesses.
    fn touch_accesses(&self, key: &str, t: &Touch, regions: &Regions) -> Result<(), SpecError> {
        let pages = regions[&t.region];
        let n = t.length.unwrap_or(pages.saturating_sub(t.offset));
        if t.count.is_none() && t.passes.checked_mul(n).is_none_or(|a| a > MAX_ACCESSES) {
            return Err(self.err(
                key,
                "passes",
                format!(
                    "found {} passes over {n} pages, {} accesses; expected at most 2^48 (281474976710656) accesses in one touch",
                    t.passes,
                    t.passes as u128 * n as u128
                ),
            ));
        }
        if let Some(src) = &t.trace {
            let m = src.summary;
            if src.map == crate::trace::TraceMap::Refuse && m.records > 0 && m.max_obj_id >= n {
                return Err(self.err(
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
        }
        Ok(())
    }

    fn unknown_region(&self, key: &str, region: &str, regions: &Regions) -> SpecError {
        let known: Vec<&str> = regions.keys().map(|k| k.as_str()).collect();
        self.err(
            key,
            "region",
            format!(
                "found \"{region}\", expected a region mapped by an earlier mmap step ({})",
                if known.is_empty() {
                    "none mapped".to_string()
                } else {
                    known.join(", ")
                }
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_at_names_the_header_on_the_line() {
        let text =
            "[machine]\nmemory = 1\n[bogus]\nx = 1\n[[swap]]\n[[swap]]\ny = 2\n[a.\"b c\"] # c\n";
        let at = |needle: &str| key_at(text, text.find(needle).unwrap());
        assert_eq!(at("[bogus]"), "bogus");
        assert_eq!(at("x = 1"), "bogus.x");
        assert_eq!(at("memory"), "machine.memory");
        assert_eq!(at("y = 2"), "swap[1].y");
        assert_eq!(at("[a."), "a.\"b c\"");
        // A line of a multi-line array is not a header.
        let text = "[task.main]\nsteps = [\n  [1, 2],\n]\n";
        assert_eq!(key_at(text, text.find("[1").unwrap()), "task.main");
        // A header that does not parse is named by its text.
        let text = "[machine]\nmemory = 1\n[task.main\n";
        assert_eq!(key_at(text, text.find("[task").unwrap() + 10), "task.main");
        // At the end of the file, the last line that says something.
        let text = "[machine]\nx = [1,\n\n";
        assert_eq!(key_at(text, text.len()), "machine.x");
    }
}

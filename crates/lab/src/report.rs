//! The report: README.md and index.html, rendered from the templates
//! under `templates/` (minijinja) out of one model of the scorecard and
//! each experiment's tables, so the two forms cannot drift apart. Every
//! table of the report is a table in both: the effects, the real
//! kernels' comparison, the histograms and the LKP-style diffs; only the
//! profiles, which are trees, stay preformatted text.

use crate::judge::num;
use crate::scorecard::{
    effect_rows, groups, misses, totals, ExperimentResult, HEADER, LEFT, REPRODUCED,
};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{escape_formatter, AutoEscape, Environment, Error, Output, State, Value};
use serde::Serialize;

/// A table of the report: its header and rows of text.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    /// The columns of words, aligned left (numbers align right).
    pub left: Vec<bool>,
    pub rows: Vec<Vec<String>>,
    /// The column that says yes or no, whose "no" stands out.
    pub mark: Option<usize>,
}

impl Table {
    /// A table of `header`, every column of numbers but those `left`
    /// names.
    pub fn new(header: &[&str], left: &[bool], rows: Vec<Vec<String>>) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            left: left.to_vec(),
            rows,
            mark: None,
        }
    }

    /// The same table with its yes / no column.
    pub fn marked(mut self, column: usize) -> Table {
        self.mark = Some(column);
        self
    }

    /// The table in Markdown: `| a | b |`, a `|---|` rule, one line per
    /// row, pipes in cells escaped and a marked "no" in bold.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "| {} |\n|{}\n",
            self.header.join(" | "),
            "---|".repeat(self.header.len())
        );
        for row in &self.view().rows {
            let cells: Vec<&str> = row.iter().map(|c| c.md.as_str()).collect();
            s += &format!("| {} |\n", cells.join(" | "));
        }
        s
    }

    fn view(&self) -> TableView {
        let class = |i: usize, text: &str| match (self.mark, self.left.get(i)) {
            (Some(m), _) if m == i && text == "no" => "no",
            (Some(m), _) if m == i => "yes",
            (_, Some(true)) => "l",
            _ => "",
        };
        TableView {
            header: (self.header.iter().enumerate())
                .map(|(i, h)| Cell::new(h, if self.left[i] { "l" } else { "" }))
                .collect(),
            rows: (self.rows.iter())
                .map(|r| {
                    (r.iter().enumerate())
                        .map(|(i, c)| Cell::new(c, class(i, c)))
                        .collect()
                })
                .collect(),
            total: None,
        }
    }
}

/// What a template sees of a table: every cell with its class ("l" for
/// words, "yes" and "no" for a mark, "" for a number) and, for the
/// scorecard, a link.
#[derive(Serialize)]
struct TableView {
    header: Vec<Cell>,
    rows: Vec<Vec<Cell>>,
    /// A last row of totals, in bold.
    total: Option<Vec<Cell>>,
}

#[derive(Serialize)]
struct Cell {
    text: String,
    class: &'static str,
    link: Option<String>,
    /// The cell in Markdown.
    md: String,
}

impl Cell {
    fn new(text: &str, class: &'static str) -> Cell {
        Cell {
            text: text.to_string(),
            class,
            link: None,
            md: if class == "no" {
                "**no**".into()
            } else {
                md_cell(text)
            },
        }
    }

    /// A cell that links to `href`.
    fn link(text: &str, class: &'static str, href: String) -> Cell {
        Cell {
            md: format!("[{}]({href})", md_cell(text)),
            link: Some(href),
            ..Cell::new(text, class)
        }
    }

    /// A cell of the totals' row: bold in Markdown too.
    fn total(text: &str, class: &'static str) -> Cell {
        Cell {
            md: if text.is_empty() {
                String::new()
            } else {
                format!("**{}**", md_cell(text))
            },
            ..Cell::new(text, class)
        }
    }
}

/// A Markdown table cell.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// A part of an experiment's section under its effects: a titled table,
/// preformatted text, or a note alone.
#[derive(Debug, Clone, Default)]
pub struct Block {
    pub title: String,
    /// A paragraph before the content (may be empty).
    pub note: String,
    pub table: Option<Table>,
    /// Text whose layout is its meaning (a profile's call tree).
    pub pre: Option<String>,
}

#[derive(Serialize)]
struct BlockView {
    title: String,
    note: String,
    table: Option<TableView>,
    pre: Option<String>,
}

/// One experiment's part of the report: its result, and the blocks to
/// show under it.
pub struct ReportPart {
    pub result: ExperimentResult,
    pub blocks: Vec<Block>,
}

/// How the effects are judged, as the report states it before the
/// scorecard; the word in the middle is emphasised.
const RULE: [&str; 3] = [
    "An effect is ",
    "reproduced",
    " when mmsim moves the figure the seed's way (lower, higher, or no change where the seed saw none) and its factor q = patched / baseline lies within the seed's band: ln q_sim of the same sign as ln q_seed and |ln q_sim| within ×1.5 of |ln q_seed| either way; when the seed's change is under 3%, mmsim's under 3%. A figure falling to 0 has fallen beyond any factor: mmsim's 0 is too large a fall against a seed's finite one, and a seed's 0 is matched by mmsim's 0 or a fall below a thousandth. A change under 3% is \"no change\"; \"expected\" is the seed's direction, \"observed\" mmsim's. Effects that are one measurement (the same runs seen several ways) count once among the independent measurements, which are reproduced when all their effects are.",
];

/// The link from the report folder to a path of the repository
/// (`docs/experiments.md#seed-…`), given the link to its root.
fn repo_link(root_link: &str, path: &str) -> String {
    if root_link == "." {
        path.to_string()
    } else {
        format!("{root_link}/{path}")
    }
}

/// The scorecard: one row per experiment, linked to its section, and the
/// totals.
fn scorecard(parts: &[ReportPart]) -> TableView {
    let rows = parts
        .iter()
        .map(|p| {
            let r = &p.result;
            vec![
                Cell::link(&r.name, "l", format!("#{}", r.name)),
                Cell::new(&r.title, "l"),
                Cell::new(&format!("{} / {}", r.reproduced, r.effects.len()), ""),
                Cell::new(
                    &format!("{} / {}", r.measurements_reproduced, r.measurements.len()),
                    "",
                ),
                Cell::new(&r.verdict, "l"),
            ]
        })
        .collect();
    let results: Vec<ExperimentResult> = parts.iter().map(|p| p.result.clone()).collect();
    let t = totals(&results);
    let total = vec![
        Cell::total("total", "l"),
        Cell::total("", "l"),
        Cell::total(&format!("{} / {}", t.reproduced, t.effects), ""),
        Cell::total(
            &format!("{} / {}", t.measurements_reproduced, t.measurements),
            "",
        ),
        Cell::total("", "l"),
    ];
    let header = [
        "seed",
        "what the patch does",
        "effects reproduced",
        "measurements reproduced",
        "verdict",
    ];
    TableView {
        header: (header.iter().enumerate())
            .map(|(i, h)| Cell::new(h, if matches!(i, 0 | 1 | 4) { "l" } else { "" }))
            .collect(),
        rows,
        total: Some(total),
    }
}

/// An experiment's tables under its plot: the effects, the measurements
/// made of several, and mmsim's own figures.
fn effect_tables(r: &ExperimentResult) -> (TableView, Option<TableView>, Option<TableView>) {
    let rows = effect_rows(r).into_iter().map(Vec::from).collect();
    let effects = Table::new(&HEADER, &LEFT, rows).marked(REPRODUCED).view();
    let gs = groups(r);
    let groups = (!gs.is_empty()).then(|| {
        let rows = gs
            .iter()
            .map(|m| {
                let yes = if m.reproduced { "yes" } else { "no" };
                vec![m.name.clone(), m.effects.join("; "), yes.to_string()]
            })
            .collect();
        let header = ["measurement (counts once)", "its effects", "reproduced"];
        Table::new(&header, &[true, true, true], rows)
            .marked(2)
            .view()
    });
    let extras = (!r.extras.is_empty()).then(|| {
        let rows = r
            .extras
            .iter()
            .map(|x| vec![x.metric.clone(), num(x.sim.baseline), num(x.sim.patched)])
            .collect();
        let header = ["mmsim only", "baseline", "patched"];
        Table::new(&header, &[true, false, false], rows).view()
    });
    (effects, groups, extras)
}

/// What the templates see of one experiment.
#[derive(Serialize)]
struct ExperimentView {
    name: String,
    title: String,
    verdict: String,
    effects: TableView,
    groups: Option<TableView>,
    extras: Option<TableView>,
    /// The recorded reasons of the misses: (the effects, why).
    misses: Vec<(String, String)>,
    doc: String,
    doc_link: String,
    blocks: Vec<BlockView>,
}

fn experiment(p: &ReportPart, root_link: &str) -> ExperimentView {
    let r = &p.result;
    let (effects, groups, extras) = effect_tables(r);
    let blocks = p
        .blocks
        .iter()
        .map(|b| BlockView {
            title: b.title.clone(),
            note: b.note.clone(),
            table: b.table.as_ref().map(Table::view),
            pre: b.pre.clone(),
        })
        .collect();
    ExperimentView {
        name: r.name.clone(),
        title: r.title.clone(),
        verdict: r.verdict.clone(),
        effects,
        groups,
        extras,
        misses: (misses(r).into_iter())
            .map(|(metrics, why)| (metrics.join("; "), why.to_string()))
            .collect(),
        doc: r.doc.clone(),
        doc_link: repo_link(root_link, &r.doc),
        blocks,
    }
}

/// What the templates see of the whole report.
#[derive(Serialize)]
struct ReportView<'a> {
    version: &'static str,
    /// How the experiments ran ("at full scale", …).
    scale: &'a str,
    docs_link: String,
    rule: [&'static str; 3],
    scorecard: TableView,
    experiments: Vec<ExperimentView>,
}

/// The whole report's context: `root_link` is the link from the report
/// folder to the repository.
fn report_context(parts: &[ReportPart], scale: &str, root_link: &str) -> Value {
    Value::from(Serde(ReportView {
        version: env!("CARGO_PKG_VERSION"),
        scale,
        docs_link: repo_link(root_link, "docs/experiments.md"),
        rule: RULE,
        scorecard: scorecard(parts),
        experiments: parts.iter().map(|p| experiment(p, root_link)).collect(),
    }))
}

/// The templates: Markdown (not escaped) and HTML (escaped, as its name
/// says); block tags take their line with them.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .expect("static syntax"),
    );
    env.set_formatter(escape_html);
    env.add_template("report.md", include_str!("../templates/report.md"))
        .expect("report.md parses");
    env.add_template("report.html", include_str!("../templates/report.html"))
        .expect("report.html parses");
    env
}

/// HTML's escaping of &, <, > and " alone: minijinja's default also
/// escapes '/', which would turn every link of the page into entities.
fn escape_html(out: &mut Output, state: &mut State, value: &Value) -> Result<(), Error> {
    if *state.auto_escape() != AutoEscape::Html || value.is_safe() || value.is_undefined() {
        return escape_formatter(out, state, value);
    }
    let s = value.to_string();
    let s = (s.replace('&', "&amp;").replace('<', "&lt;"))
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    out.write_str(&s).map_err(Error::from)
}

fn render(name: &str, ctx: Value) -> String {
    environment()
        .get_template(name)
        .and_then(|t| t.render(ctx))
        .unwrap_or_else(|e| panic!("{name}: the template renders: {e:#}"))
}

/// report/README.md.
pub fn markdown(parts: &[ReportPart], scale: &str, root_link: &str) -> String {
    render("report.md", report_context(parts, scale, root_link))
}

/// report/index.html: the same content.
pub fn html(parts: &[ReportPart], scale: &str, root_link: &str) -> String {
    render("report.html", report_context(parts, scale, root_link))
}

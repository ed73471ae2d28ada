//! Every plot mmsim draws, through plotters' SVG backend: an
//! experiment's factors (the report's one plot per experiment) and lines
//! of one figure against a grid key (`mmsim sweep --plot`). Both share
//! the palette, the tick labels and the units people read.

use crate::judge::{self, num, percent};
use crate::scorecard::{EffectResult, ExperimentResult};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Line colours that read on white, told apart by most colour-blind
/// readers (mostly Okabe and Ito's, without
/// their yellow, sky blue and orange, pale on white).
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(120, 60, 170),
    RGBColor(160, 110, 0),
    RGBColor(0, 0, 0),
];

/// The seed's bars, mmsim's, and the outline of the band mmsim's bar
/// must end in.
const SEED: RGBColor = RGBColor(153, 153, 153);
const MMSIM: RGBColor = RGBColor(51, 102, 204);
const BAND: RGBColor = RGBColor(224, 112, 0);
const GRID: RGBColor = RGBColor(221, 221, 221);
const GOOD: RGBColor = RGBColor(0, 128, 0);
const BAD: RGBColor = RGBColor(204, 0, 0);

/// A tick label: at most three decimals, none that are zeros ("2", not
/// "2.0"; "0.25").
pub fn tick(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn err(e: impl std::fmt::Display) -> String {
    format!("cannot draw the plot: {e}")
}

// ---- an experiment's factors -------------------------------------------

/// Effects per row: rows of six keep a plot 800 px wide at most.
const PER_ROW: usize = 6;
/// Pixels per effect, the height of the title and legend, of a row, and
/// of a row's chart (the rest of the row holds its labels).
const COL: u32 = 120;
const TOP: u32 = 48;
const ROW_H: u32 = 385;
const CHART_H: u32 = 290;
/// The axis reaches 2^±4: 1/16 and 16; the chart a little beyond, for
/// the values printed past a bar off the scale.
const LIMIT: f64 = 4.0;
const REACH: f64 = 5.0;

/// A factor on the log2 axis, clamped to ±LIMIT, and whether it is off
/// the scale (1: above, -1: below).
fn log2_clamped(ratio: f64) -> (f64, i32) {
    if ratio.is_nan() {
        (0.0, 0)
    } else if ratio <= 0.0 {
        (-LIMIT, -1)
    } else if ratio.log2() > LIMIT {
        (LIMIT, 1)
    } else if ratio.log2() < -LIMIT {
        (-LIMIT, -1)
    } else {
        (ratio.log2(), 0)
    }
}

/// 2^k as people write a factor: 16, 4, 1, 1/4, 1/16.
fn factor_label(k: f64) -> String {
    let k = k.round() as i32;
    if k >= 0 {
        format!("{}", 1u32 << k)
    } else {
        format!("1/{}", 1u32 << -k)
    }
}

/// The SVG plot of an experiment: per effect, the patched / baseline
/// factor of the seed and of mmsim side by side on a log2 axis from 1/16
/// to 16, with the band mmsim's factor must end in to be within; six
/// effects to a row. A bar off the scale ends in a break mark with its
/// value printed beyond it.
pub fn effects_svg(r: &ExperimentResult) -> Result<String, String> {
    let n = r.effects.len().max(1);
    let cols = n.min(PER_ROW);
    let rows = n.div_ceil(PER_ROW);
    let w = (70 + COL * cols as u32).max(560);
    let h = TOP + ROW_H * rows as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        legend(&root, &r.name)?;
        let (_, body) = root.split_vertically(TOP);
        for (row, area) in body.split_evenly((rows, 1)).iter().enumerate() {
            let effects: Vec<&EffectResult> =
                r.effects.iter().skip(row * PER_ROW).take(PER_ROW).collect();
            draw_row(area, &effects, cols)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The title, and what the bars and the box mean.
fn legend(root: &Area, name: &str) -> Result<(), String> {
    let font = ("sans-serif", 16).into_font();
    let small = ("sans-serif", 14).into_font();
    let title = format!("{name} — patched / baseline (log scale; 1 = no change)");
    root.draw(&Text::new(title, (10, 4), font)).map_err(err)?;
    for (x, color, label) in [(10, SEED, "seed"), (70, MMSIM, "mmsim")] {
        root.draw(&Rectangle::new([(x, 28), (x + 10, 38)], color.filled()))
            .map_err(err)?;
        root.draw(&Text::new(label, (x + 14, 28), small.clone()))
            .map_err(err)?;
    }
    let outline = [(140, 28), (150, 28), (150, 38), (140, 38), (140, 28)];
    root.draw(&DashedPathElement::new(outline, 4, 2, BAND.stroke_width(2)))
        .map_err(err)?;
    let label = "within: mmsim's bar ends in the box";
    root.draw(&Text::new(label, (154, 28), small)).map_err(err)
}

/// One row of effects: the chart of their bars, and under each its
/// metric, both changes and the outcome.
fn draw_row(area: &Area, effects: &[&EffectResult], cols: usize) -> Result<(), String> {
    let (top, labels) = area.split_vertically(CHART_H);
    let chart = ChartBuilder::on(&top)
        .margin_top(8)
        .margin_right(10)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..cols as f64, -REACH..REACH)
        .map_err(err)?;
    // The factors' grid, by hand: plotters would place its ticks at
    // round logarithms, not at 1/16, 1/4, 1, 4 and 16. 1 (no change) is
    // black.
    let plot = chart.plotting_area();
    let style = ("sans-serif", 14)
        .into_font()
        .into_text_style(plot)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for k in [-4.0, -2.0, 0.0, 2.0, 4.0] {
        let color = if k == 0.0 { BLACK } else { GRID };
        let line = PathElement::new([(0.0, k), (cols as f64, k)], color);
        plot.draw(&line).map_err(err)?;
        let (px, py) = chart.backend_coord(&(0.0, k));
        let at = (px - 6 - top.get_base_pixel().0, py - top.get_base_pixel().1);
        top.draw(&Text::new(factor_label(k), at, style.clone()))
            .map_err(err)?;
    }
    for (i, e) in effects.iter().enumerate() {
        draw_bars(&chart, i as f64, e)?;
        let x = chart.backend_coord(&(i as f64 + 0.08, 0.0)).0 - area.get_base_pixel().0;
        effect_labels(&labels, x, e)?;
    }
    Ok(())
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The seed's bar and mmsim's for the effect in column `x`, and the box
/// mmsim's must end in, drawn over them.
fn draw_bars(chart: &Chart, x: f64, e: &EffectResult) -> Result<(), String> {
    let area = chart.plotting_area();
    for (j, (ratio, color)) in [(e.seed.ratio(), SEED), (e.sim.ratio(), MMSIM)]
        .into_iter()
        .enumerate()
    {
        let x0 = x + 0.08 + 0.34 * j as f64;
        let x1 = x0 + 0.3;
        let (y, off) = log2_clamped(ratio);
        area.draw(&Rectangle::new([(x0, 0.0), (x1, y)], color.filled()))
            .map_err(err)?;
        if off != 0 {
            off_scale(chart, (x0, x1), y, off, j, ratio)?;
        }
    }
    // The band: mmsim's factors within the seed's change.
    let (lo, hi) = judge::band(e.seed.change());
    let (ya, yb) = (log2_clamped(1.0 + hi).0, log2_clamped(1.0 + lo).0);
    let (xa, xb) = (x + 0.4, x + 0.76);
    let outline = [(xa, ya), (xb, ya), (xb, yb), (xa, yb), (xa, ya)];
    area.draw(&DashedPathElement::new(outline, 4, 2, BAND.stroke_width(2)))
        .map_err(err)
}

/// A break mark across a bar off the scale near its end, and its value
/// beyond it: the seed's nearer the axis, mmsim's a line further, so that
/// neighbours do not overlap.
fn off_scale(
    chart: &Chart,
    (x0, x1): (f64, f64),
    y: f64,
    off: i32,
    j: usize,
    ratio: f64,
) -> Result<(), String> {
    let area = chart.plotting_area();
    let yb = y - 0.3 * off as f64;
    for d in [-0.08, 0.08] {
        let cut = [(x0 - 0.02, yb + d - 0.1), (x1 + 0.02, yb + d + 0.1)];
        area.draw(&PathElement::new(cut, WHITE.stroke_width(2)))
            .map_err(err)?;
    }
    let (ty, v) = if off > 0 {
        (y + 0.1 + 0.4 * j as f64, VPos::Bottom)
    } else {
        (y - 0.1 - 0.4 * j as f64, VPos::Top)
    };
    let style = ("sans-serif", 13)
        .into_font()
        .style(FontStyle::Bold)
        .into_text_style(area)
        .pos(Pos::new(HPos::Center, v));
    let label = format!("×{}", num(ratio));
    area.draw(&Text::new(label, ((x0 + x1) / 2.0, ty), style))
        .map_err(err)
}

/// Under an effect's bars: its metric over up to three lines (effects of
/// one experiment often share their first words), the seed's change and
/// mmsim's, and the outcome.
fn effect_labels(area: &Area, x: i32, e: &EffectResult) -> Result<(), String> {
    let small = ("sans-serif", 14).into_font();
    let text = ("sans-serif", 14).into_font();
    for (l, line) in wrap(&e.metric, 19, 3).into_iter().enumerate() {
        let y = 4 + 14 * l as i32;
        area.draw(&Text::new(line, (x, y), small.clone()))
            .map_err(err)?;
    }
    let grey = text.color(&RGBColor(68, 68, 68));
    for (l, line) in [
        format!("seed {}", percent(e.seed.change())),
        format!("mmsim {}", percent(e.sim.change())),
    ]
    .into_iter()
    .enumerate()
    {
        let y = 50 + 14 * l as i32;
        area.draw(&Text::new(line, (x, y), grey.clone()))
            .map_err(err)?;
    }
    let (mark, color) = if e.reproduced {
        ("reproduced", GOOD)
    } else if !e.direction_matches {
        ("direction missed", BAD)
    } else {
        ("magnitude missed", BAD)
    };
    area.draw(&Text::new(mark, (x, 82), text.color(&color)))
        .map_err(err)
}

/// Words of `s` in at most `lines` lines of at most `n` characters, the
/// last one shortened if they do not fit.
pub fn wrap(s: &str, n: usize, lines: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut words = s.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > n {
            if out.len() + 1 == lines {
                let rest: Vec<&str> = std::iter::once(w).chain(words).collect();
                cur = shorten(&format!("{cur} {}", rest.join(" ")), n);
                break;
            }
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur += w;
    }
    if !cur.is_empty() {
        out.push(shorten(&cur, n));
    }
    out
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

// ---- lines against a grid key -------------------------------------------

/// The fields of zram's mm_stat that are sizes in bytes.
const ZRAM_BYTES: [&str; 4] = [
    ".orig_data_size",
    ".compr_data_size",
    ".mem_used_total",
    ".mem_used_max",
];

/// An axis's values in the unit people read: a time in ns as ms or s, a
/// size in bytes as MiB; a count as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The label: the name and, when scaled, the unit ("elapsed (s)").
    pub label: String,
    /// What one unit of the axis is in the values' own.
    pub scale: f64,
}

impl Axis {
    /// The axis of a column named `name` whose largest value is `max`:
    /// a name ending in `_ns` is a time, shown in s from a second up and
    /// in ms below; one ending in `_bytes`, a size in MiB.
    pub fn for_column(name: &str, max: f64) -> Axis {
        if let Some(stem) = name.strip_suffix("_ns") {
            let (unit, scale) = if max >= 1e9 { ("s", 1e9) } else { ("ms", 1e6) };
            return Axis {
                label: format!("{stem} ({unit})"),
                scale,
            };
        }
        if let Some(stem) = name.strip_suffix("_bytes") {
            return Axis::mib(stem);
        }
        // zram's mm_stat sizes (sweep's `zramN.FIELD` columns) are bytes.
        if name.starts_with("zram") && ZRAM_BYTES.iter().any(|f| name.ends_with(f)) {
            return Axis::mib(name);
        }
        Axis {
            label: name.to_string(),
            scale: 1.0,
        }
    }

    /// A size in bytes, shown in MiB.
    pub fn mib(name: &str) -> Axis {
        Axis {
            label: format!("{name} (MiB)"),
            scale: 1024.0 * 1024.0,
        }
    }
}

/// One line: its legend label and its points, in the values' own units.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// The SVG plot of `series` against the axes `x` and `y`, one colour of
/// [`PALETTE`] each, a dot on each point, y from 0.
pub fn lines_svg(title: &str, x: &Axis, y: &Axis, series: &[Series]) -> Result<String, String> {
    let scaled: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            let mut p: Vec<(f64, f64)> = (s.points.iter())
                .map(|&(a, b)| (a / x.scale, b / y.scale))
                .collect();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            p
        })
        .collect();
    let all = scaled.iter().flatten();
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(a, b) in all {
        x0 = x0.min(a);
        x1 = x1.max(a);
        y1 = y1.max(b);
    }
    if x0 >= x1 {
        x1 = x0 + 1.0;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, 0f64..(y1 * 1.05).max(1.0))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x.label.as_str())
            .y_desc(y.label.as_str())
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(err)?;
        for (i, (s, pts)) in series.iter().zip(scaled).enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(s.label.as_str())
                .legend(move |(a, b)| {
                    PathElement::new([(a, b), (a + 20, b)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_have_no_zero_decimals() {
        assert_eq!(tick(1000000000.0), "1000000000");
        assert_eq!(tick(2.0), "2");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(0.30000000000000004), "0.3");
        assert_eq!(tick(-0.0001), "0");
    }

    #[test]
    fn times_read_in_ms_or_s_and_sizes_in_mib() {
        let a = Axis::for_column("elapsed_ns", 3e9);
        assert_eq!((a.label.as_str(), a.scale), ("elapsed (s)", 1e9));
        let a = Axis::for_column("main/write.duration_ns", 5e8);
        assert_eq!(
            (a.label.as_str(), a.scale),
            ("main/write.duration (ms)", 1e6)
        );
        assert_eq!(Axis::for_column("x_bytes", 1.0).label, "x (MiB)");
        let z = Axis::for_column("zram0.mem_used_max", 1e9);
        assert_eq!(
            (z.label.as_str(), z.scale),
            ("zram0.mem_used_max (MiB)", 1048576.0)
        );
        assert_eq!(Axis::for_column("zram0.same_pages", 1e6).scale, 1.0);
        assert_eq!(Axis::for_column("pswpout", 1e9).scale, 1.0);
    }

    #[test]
    fn the_palette_has_no_pale_colour() {
        // Relative luminance under 0.6: a line that reads on white.
        for RGBColor(r, g, b) in PALETTE {
            let l = (0.2126 * r as f64 + 0.7152 * g as f64 + 0.0722 * b as f64) / 255.0;
            assert!(l < 0.6, "{r} {g} {b}: {l}");
        }
    }

    #[test]
    fn wrap_breaks_at_words_and_shortens_the_last_line() {
        assert_eq!(
            wrap("hash throughput (MB/s)", 19, 3),
            ["hash throughput", "(MB/s)"]
        );
        assert_eq!(
            wrap("python -c 'import pydoc': max launch time (s)", 19, 3),
            ["python -c 'import", "pydoc': max launch", "time (s)"]
        );
        assert_eq!(
            wrap("a bb ccc dddd eeeee ffffff ggggggg hhhhhhhh", 8, 2),
            ["a bb ccc", "dddd ee…"]
        );
        assert_eq!(wrap("", 8, 2), Vec::<String>::new());
    }

    #[test]
    fn factors_clamp_to_the_axis() {
        assert_eq!(log2_clamped(4.0), (2.0, 0));
        assert_eq!(log2_clamped(1000.0), (LIMIT, 1));
        assert_eq!(log2_clamped(0.0), (-LIMIT, -1));
        assert_eq!(log2_clamped(f64::INFINITY), (LIMIT, 1));
        assert_eq!(factor_label(-2.0), "1/4");
        assert_eq!(factor_label(4.0), "16");
    }
}

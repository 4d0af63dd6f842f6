//! Charts as PNG and SVG with plotters: bar, line, scatter and histogram. Text is drawn with
//! DejaVu Sans compiled into the binary (crate `dejavu`), so no system font is needed.

use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::DataError;
use super::query::Table;

/// Which chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChartKind {
    /// Categories on x, a number per category on y.
    Bar,
    /// Numbers (or categories, in order) on x, numbers on y, joined.
    Line,
    /// Numbers on both axes.
    Scatter,
    /// The distribution of one numeric column (x); `bins` buckets.
    Histogram,
}

/// A chart request over a table's columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChartSpec {
    /// Bar, line, scatter or histogram.
    pub kind: ChartKind,
    /// The column on the horizontal axis (the values, for a histogram).
    pub x: String,
    /// Required except for histograms.
    #[serde(default)]
    pub y: Option<String>,
    /// The chart's title (and its file name).
    #[serde(default)]
    pub title: Option<String>,
    /// Histogram buckets (default 20).
    #[serde(default)]
    pub bins: Option<usize>,
}

/// The rendered chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The chart as PNG (800x500).
    pub png: Vec<u8>,
    /// The same chart as SVG.
    pub svg: String,
}

const W: u32 = 800;
const H: u32 = 500;
const FONT: &str = "agentry-sans";

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

fn nums(t: &Table, col: &str) -> Result<Vec<Option<f64>>, DataError> {
    Ok(t.column(col)?.into_iter().map(Value::as_f64).collect())
}

fn label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "(null)".into(),
        other => other.to_string(),
    }
}

/// What is drawn, resolved from the table once for both back ends.
enum Plan {
    Bars(Vec<(String, f64)>),
    Points { pts: Vec<(f64, f64)>, joined: bool },
    Histogram { edges: Vec<f64>, counts: Vec<usize> },
}

/// Largest magnitude plotted. Beyond it axis steps fall below the spacing of `f64` values and
/// the plotting library's tick loop never ends (a ±1e308 range spun a core forever).
const MAX_MAGNITUDE: f64 = 1e15;

fn plottable(values: impl IntoIterator<Item = f64>) -> Result<(), DataError> {
    match values
        .into_iter()
        .find(|v| !v.is_finite() || v.abs() > MAX_MAGNITUDE)
    {
        Some(v) => Err(DataError::Chart(format!(
            "cannot plot {v}: values must be finite and within ±{MAX_MAGNITUDE:e}"
        ))),
        None => Ok(()),
    }
}

fn plan(t: &Table, spec: &ChartSpec) -> Result<Plan, DataError> {
    let p = plan_unchecked(t, spec)?;
    match &p {
        Plan::Bars(bars) => plottable(bars.iter().map(|b| b.1))?,
        Plan::Points { pts, .. } => plottable(pts.iter().flat_map(|p| [p.0, p.1]))?,
        Plan::Histogram { edges, .. } => plottable(edges.iter().copied())?,
    }
    Ok(p)
}

fn plan_unchecked(t: &Table, spec: &ChartSpec) -> Result<Plan, DataError> {
    let need_y = || {
        spec.y
            .clone()
            .ok_or_else(|| DataError::Input(format!("a {:?} chart needs `y`", spec.kind)))
    };
    match spec.kind {
        ChartKind::Bar => {
            let y = need_y()?;
            let xs = t.column(&spec.x)?;
            let ys = nums(t, &y)?;
            let bars: Vec<(String, f64)> = xs
                .into_iter()
                .zip(ys)
                .filter_map(|(x, y)| y.map(|y| (label(x), y)))
                .take(60)
                .collect();
            if bars.is_empty() {
                return Err(DataError::Input(format!("`{y}` holds no numbers")));
            }
            Ok(Plan::Bars(bars))
        }
        ChartKind::Line | ChartKind::Scatter => {
            let y = need_y()?;
            let xs = nums(t, &spec.x)?;
            let ys = nums(t, &y)?;
            // Non-numeric x (dates, labels) plots by row order.
            let numeric_x = xs.iter().any(Option::is_some);
            let pts: Vec<(f64, f64)> = xs
                .into_iter()
                .zip(ys)
                .enumerate()
                .filter_map(|(i, (x, y))| {
                    let x = if numeric_x { x? } else { i as f64 };
                    Some((x, y?))
                })
                .collect();
            if pts.is_empty() {
                return Err(DataError::Input("no rows with numbers to plot".into()));
            }
            Ok(Plan::Points {
                pts,
                joined: spec.kind == ChartKind::Line,
            })
        }
        ChartKind::Histogram => {
            let v: Vec<f64> = nums(t, &spec.x)?.into_iter().flatten().collect();
            plottable(v.iter().copied())?;
            if v.is_empty() {
                return Err(DataError::Input(format!("`{}` holds no numbers", spec.x)));
            }
            let bins = spec.bins.unwrap_or(20).clamp(1, 200);
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
            let width = if hi > lo {
                (hi - lo) / bins as f64
            } else {
                1.0
            };
            let mut counts = vec![0usize; bins];
            for x in v {
                let i = (((x - lo) / width) as usize).min(bins - 1);
                counts[i] += 1;
            }
            let edges = (0..=bins).map(|i| lo + width * i as f64).collect();
            Ok(Plan::Histogram { edges, counts })
        }
    }
}

fn range(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = v.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    // At least a millionth of the magnitude: a pad below the spacing of `f64` values there
    // would leave an empty range.
    let pad = ((hi - lo) * 0.05)
        .max(hi.abs().max(lo.abs()) * 1e-6)
        .max(1e-9);
    (lo - pad, hi + pad)
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    p: &Plan,
    spec: &ChartSpec,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let title = spec.title.clone().unwrap_or_default();
    let mut b = ChartBuilder::on(&root);
    b.caption(&title, (FONT, 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64);
    let y_name = spec.y.clone().unwrap_or_else(|| "count".into());
    let blue = RGBColor(47, 85, 151);
    match p {
        Plan::Bars(bars) => {
            let max = bars.iter().map(|b| b.1).fold(0.0f64, f64::max).max(1e-9) * 1.05;
            let min = bars.iter().map(|b| b.1).fold(0.0f64, f64::min);
            // A segmented range 0..n has n + 1 segments: end one short so no empty slot trails.
            let last = bars.len().saturating_sub(1).max(1);
            let mut c = b
                .build_cartesian_2d((0..last).into_segmented(), min..max)
                .map_err(e)?;
            let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
            c.configure_mesh()
                .disable_x_mesh()
                .x_desc(&spec.x)
                .y_desc(&y_name)
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .x_labels(bars.len().min(30))
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                    _ => String::new(),
                })
                .draw()
                .map_err(e)?;
            c.draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), *v),
                    ],
                    blue.filled(),
                );
                r.set_margin(0, 0, 6, 6);
                r
            }))
            .map_err(e)?;
        }
        Plan::Points { pts, joined } => {
            let (x0, x1) = range(pts.iter().map(|p| p.0));
            let (y0, y1) = range(pts.iter().map(|p| p.1));
            let mut c = b.build_cartesian_2d(x0..x1, y0..y1).map_err(e)?;
            c.configure_mesh()
                .x_desc(&spec.x)
                .y_desc(&y_name)
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .draw()
                .map_err(e)?;
            if *joined {
                let mut sorted = pts.clone();
                sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
                c.draw_series(LineSeries::new(sorted, blue.stroke_width(2)))
                    .map_err(e)?;
            } else {
                c.draw_series(
                    pts.iter()
                        .map(|p| Circle::new(*p, 3, blue.mix(0.7).filled())),
                )
                .map_err(e)?;
            }
        }
        Plan::Histogram { edges, counts } => {
            let top = *counts.iter().max().unwrap_or(&1) as f64 * 1.05;
            let mut c = b
                .build_cartesian_2d(edges[0]..edges[edges.len() - 1], 0.0..top.max(1.0))
                .map_err(e)?;
            c.configure_mesh()
                .x_desc(&spec.x)
                .y_desc("count")
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .draw()
                .map_err(e)?;
            c.draw_series(counts.iter().enumerate().map(|(i, n)| {
                Rectangle::new([(edges[i], 0.0), (edges[i + 1], *n as f64)], blue.filled())
            }))
            .map_err(e)?;
        }
    }
    root.present().map_err(e)
}

/// Minimal PNG encoding of an RGB buffer (zlib via `flate2`, CRCs computed here).
fn png_rgb(w: u32, h: u32, rgb: &[u8]) -> Vec<u8> {
    use std::io::Write;
    fn crc32(data: &[u8]) -> u32 {
        let mut c = 0xFFFF_FFFFu32;
        for b in data {
            c ^= u32::from(*b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    let mut raw = Vec::with_capacity((w as usize * 3 + 1) * h as usize);
    for row in rgb.chunks(w as usize * 3) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = z.write_all(&raw);
    let idat = z.finish().unwrap_or_default();
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |ty: &[u8], data: &[u8]| {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = ty.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    };
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(b"IHDR", &ihdr);
    chunk(b"IDAT", &idat);
    chunk(b"IEND", &[]);
    out
}

/// Renders `spec` over `t` as PNG and SVG.
pub fn render(t: &Table, spec: &ChartSpec) -> Result<Chart, DataError> {
    register_font();
    let p = plan(t, spec)?;
    let mut rgb = vec![255u8; (W * H * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (W, H)).into_drawing_area();
        draw(root, &p, spec).map_err(DataError::Chart)?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        draw(root, &p, spec).map_err(DataError::Chart)?;
    }
    Ok(Chart {
        png: png_rgb(W, H, &rgb),
        svg,
    })
}

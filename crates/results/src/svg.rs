//! Small inline-SVG charts for `report.html`: line charts (linear axes, or a
//! "nines" percentile axis) and horizontal bar charts. Hand-written so the
//! page needs nothing from the network and the binary no plotting stack.

use std::fmt::Write as _;

/// Colours of successive series (colour-blind-safe Okabe-Ito palette).
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442",
];

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 28.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 44.0;

/// Escape text for XML content and attributes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// How the x axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Plain numbers.
    Linear,
    /// Percentiles: x = log10(1 / (1 − p/100)), labelled 0 %, 90 %, 99 %, 99.9 %, ...
    Nines,
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x, y) in data units (for [`XAxis::Nines`], x is the nines value).
    pub points: Vec<(f64, f64)>,
    /// Dashed line (e.g. a p99 beside a p50 of the same colour).
    pub dashed: bool,
    /// Palette index.
    pub color: usize,
    /// Draw a dot with a tooltip at every point (for few points).
    pub dots: bool,
    /// A name per point for its tooltip (e.g. the sweep step), or empty.
    pub labels: Vec<String>,
    /// Listed in the chart's legend (a p99 beside its p50 may leave itself out).
    pub legend: bool,
}

impl Series {
    /// A solid line without dots.
    pub fn line(name: impl Into<String>, color: usize, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            dashed: false,
            color,
            dots: false,
            labels: Vec::new(),
            legend: true,
        }
    }

    /// The same line dashed.
    pub fn dashed(mut self) -> Self {
        self.dashed = true;
        self
    }
}

/// A line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_axis: XAxis,
    pub series: Vec<Series>,
}

/// Round numbers for axis ticks covering [lo, hi].
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    // the last tick is at or above `hi`, so the frame holds every point
    let last = (hi / step - 1e-9).ceil() * step;
    (0..=20)
        .map(|i| first + step * i as f64)
        .take_while(|v| *v <= last + step * 1e-9)
        .collect()
}

/// A tick label: no trailing zeros, thousands as `k`.
fn label(v: f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{}k", trim(v / 1000.0))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// The label of a nines position: 0 -> "0%", 2 -> "99%", 3 -> "99.9%".
fn nines_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    format!("{}%", trim((p * 1000.0).round() / 1000.0))
}

/// Where a chart's data go: the data ranges and the plot area.
struct Frame {
    x0: f64,
    x1: f64,
    y1: f64,
    /// Plot width and height, px.
    pw: f64,
    ph: f64,
}

impl Frame {
    fn sx(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * self.pw
    }

    fn sy(&self, y: f64) -> f64 {
        TOP + self.ph - y / self.y1 * self.ph
    }
}

impl LineChart {
    /// The chart as an `<svg>` element (with class `chart`).
    pub fn render(&self) -> String {
        let Some((frame, y_ticks)) = self.frame() else {
            return self.empty();
        };
        let mut out = self.open();
        self.grid(&mut out, &frame, &y_ticks);
        self.axis_labels(&mut out, frame.pw, frame.ph);
        for (i, s) in self.series.iter().enumerate() {
            self.series_lines(&mut out, &frame, i, s);
        }
        self.legend(&mut out);
        out.push_str("</svg>");
        out
    }

    /// The data ranges (rounded out to ticks) and the y ticks; `None` without data.
    fn frame(&self) -> Option<(Frame, Vec<f64>)> {
        let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for (x, y) in self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
        {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
            y1 = y1.max(*y);
        }
        if !x0.is_finite() {
            return None;
        }
        if self.x_axis == XAxis::Nines {
            x0 = 0.0;
            x1 = x1.ceil().max(1.0);
        } else if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let y_ticks = ticks(0.0, if y1 > 0.0 { y1 * 1.05 } else { 1.0 });
        let y1 = y_ticks
            .last()
            .copied()
            .unwrap_or(1.0)
            .max(f64::MIN_POSITIVE);
        let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
        Some((Frame { x0, x1, y1, pw, ph }, y_ticks))
    }

    /// Grid lines and ticks of both axes, and the plot's frame.
    fn grid(&self, out: &mut String, f: &Frame, y_ticks: &[f64]) {
        let (x0, x1, pw, ph) = (f.x0, f.x1, f.pw, f.ph);
        for t in y_ticks {
            let y = f.sy(*t);
            let _ = write!(
                out,
                r##"<line class="grid" x1="{LEFT:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                label(*t)
            );
        }
        let x_ticks: Vec<(f64, String)> = match self.x_axis {
            XAxis::Linear => ticks(x0, x1)
                .into_iter()
                .filter(|t| *t <= x1 + (x1 - x0) * 1e-9)
                .map(|t| (t, label(t)))
                .collect(),
            XAxis::Nines => (0..=x1 as u32)
                .map(|k| (f64::from(k), nines_label(f64::from(k))))
                .collect(),
        };
        for (t, text) in &x_ticks {
            let x = f.sx(*t);
            let _ = write!(
                out,
                r##"<line class="grid" x1="{x:.1}" y1="{TOP:.1}" x2="{x:.1}" y2="{:.1}"/><text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 16.0,
                esc(text)
            );
        }
        let _ = write!(
            out,
            r##"<rect class="frame" x="{LEFT:.1}" y="{TOP:.1}" width="{pw:.1}" height="{ph:.1}"/>"##
        );
    }

    /// One series: its lines (broken at non-finite values) and, when asked
    /// for or alone, its points with tooltips.
    fn series_lines(&self, out: &mut String, f: &Frame, i: usize, s: &Series) {
        let color = PALETTE[s.color % PALETTE.len()];
        let dash = if s.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = write!(
            out,
            r##"<g class="series" data-series="{i}"><title>{}</title>"##,
            esc(&s.name)
        );
        // a non-finite y breaks the line (e.g. between sweep steps)
        for run in s.points.split(|(_, y)| !y.is_finite()) {
            if run.is_empty() {
                continue;
            }
            let path: Vec<String> = run
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", f.sx(*x), f.sy(*y)))
                .collect();
            let _ = write!(
                out,
                r##"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"##,
                path.join(" ")
            );
        }
        let finite = s.points.iter().filter(|(_, y)| y.is_finite()).count();
        if s.dots || finite == 1 {
            for (k, (x, y)) in s.points.iter().enumerate() {
                if !y.is_finite() {
                    continue;
                }
                let xs = match self.x_axis {
                    XAxis::Linear => trim(*x),
                    XAxis::Nines => nines_label(*x),
                };
                let name = match s.labels.get(k) {
                    Some(l) => format!("{} ({l})", s.name),
                    None => s.name.clone(),
                };
                let _ = write!(
                    out,
                    r##"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"><title>{}: {} → {}</title></circle>"##,
                    f.sx(*x),
                    f.sy(*y),
                    esc(&name),
                    esc(&xs),
                    trim(*y)
                );
            }
        }
        out.push_str("</g>");
    }

    fn open(&self) -> String {
        format!(
            r##"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{t}"><text class="title" x="{LEFT}" y="16">{t}</text>"##,
            t = esc(&self.title)
        )
    }

    fn empty(&self) -> String {
        let mut out = self.open();
        let _ = write!(
            out,
            r##"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">no samples</text></svg>"##,
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        out
    }

    fn axis_labels(&self, out: &mut String, pw: f64, ph: f64) {
        let _ = write!(
            out,
            r##"<text class="axis" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="axis" transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
            LEFT + pw / 2.0,
            HEIGHT - 8.0,
            esc(&self.x_label),
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
    }

    /// Clickable legend entries (the page's script toggles their series),
    /// on one row: entries that do not fit are counted instead.
    fn legend(&self, out: &mut String) {
        let mut x = LEFT;
        let listed: Vec<(usize, &Series)> = self
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| s.legend)
            .collect();
        for (k, (i, s)) in listed.iter().enumerate() {
            let w = 30.0 + 6.5 * s.name.chars().count() as f64;
            // room for the count when more follow
            let reserve = if k + 1 < listed.len() { 56.0 } else { 0.0 };
            if x + w > WIDTH - RIGHT - reserve && k > 0 {
                let _ = write!(
                    out,
                    r##"<text class="legend" x="{x:.1}" y="33">+{} more</text>"##,
                    listed.len() - k
                );
                break;
            }
            let color = PALETTE[s.color % PALETTE.len()];
            let dash = if s.dashed {
                r#" stroke-dasharray="4 3""#
            } else {
                ""
            };
            let _ = write!(
                out,
                r##"<g class="legend-item" data-series="{i}"><line x1="{x:.1}" y1="29" x2="{:.1}" y2="29" stroke="{color}" stroke-width="3"{dash}/><text class="legend" x="{:.1}" y="33">{}</text></g>"##,
                x + 18.0,
                x + 22.0,
                esc(&s.name)
            );
            x += w;
        }
    }
}

/// A horizontal bar chart of labelled counts.
pub fn bar_chart(title: &str, bars: &[(String, u64, usize)]) -> String {
    let row = 26.0;
    let height = TOP + row * bars.len().max(1) as f64 + 12.0;
    let label_w = 150.0;
    let max = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1) as f64;
    let mut out = format!(
        r##"<svg class="chart bars" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0}" role="img" aria-label="{t}"><text class="title" x="{LEFT}" y="16">{t}</text>"##,
        t = esc(title)
    );
    let pw = WIDTH - label_w - 90.0;
    for (i, (name, count, color)) in bars.iter().enumerate() {
        let y = TOP + row * i as f64;
        let w = (*count as f64 / max * pw).max(if *count > 0 { 1.0 } else { 0.0 });
        let _ = write!(
            out,
            r##"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text><rect x="{label_w:.1}" y="{y:.1}" width="{w:.1}" height="18" fill="{}"><title>{}: {count}</title></rect><text class="tick" x="{:.1}" y="{:.1}">{count}</text>"##,
            label_w - 8.0,
            y + 13.0,
            esc(name),
            PALETTE[color % PALETTE.len()],
            esc(name),
            label_w + w + 6.0,
            y + 13.0,
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 2.1), vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
        let t = ticks(0.0, 0.37);
        assert_eq!(t.first(), Some(&0.0));
        assert!(t.len() >= 3 && t.len() <= 7, "{t:?}");
        assert_eq!(label(25_000.0), "25k");
        assert_eq!(label(0.5), "0.5");
        assert_eq!(nines_label(2.0), "99%");
        assert_eq!(nines_label(3.0), "99.9%");
    }

    #[test]
    fn a_chart_is_well_formed_svg_with_one_group_per_series() {
        let chart = LineChart {
            title: "TTFT <over> time".into(),
            x_label: "s".into(),
            y_label: "ms".into(),
            x_axis: XAxis::Linear,
            series: vec![
                Series::line(
                    "p50",
                    0,
                    vec![(0.0, 1.0), (1.0, 2.0), (f64::NAN, f64::NAN), (5.0, 1.5)],
                ),
                Series {
                    dots: true,
                    labels: vec!["stage 1".into(), "stage 2".into()],
                    ..Series::line("p99", 0, vec![(0.0, 3.0), (1.0, 4.0)]).dashed()
                },
            ],
        };
        let svg = chart.render();
        assert!(svg.starts_with("<svg class=\"chart\""));
        assert!(svg.ends_with("</svg>"));
        assert!(svg.contains("TTFT &lt;over&gt; time"));
        assert_eq!(svg.matches("<g class=\"series\"").count(), 2);
        assert_eq!(svg.matches("<g class=\"legend-item\"").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("p99 (stage 2): 1 → 4"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 3, "a NaN breaks the line");
        assert!(!svg.contains("NaN"));
        assert_eq!(svg.matches('<').count(), svg.matches('>').count());
        // a legend too long for one row counts what it leaves out
        let many = LineChart {
            series: (0..9)
                .map(|i| Series::line(format!("configuration {i}"), i, vec![(0.0, 1.0)]))
                .chain(std::iter::once(Series {
                    legend: false,
                    ..Series::line("unlisted", 0, vec![(0.0, 2.0)])
                }))
                .collect(),
            ..chart.clone()
        }
        .render();
        let listed = many.matches("<g class=\"legend-item\"").count();
        assert!((2..9).contains(&listed), "{listed}");
        assert!(many.contains(&format!("+{} more", 9 - listed)), "{many}");
        assert!(!many.contains(">unlisted</text>"), "{many}");
        let empty = LineChart {
            series: vec![],
            ..chart
        }
        .render();
        assert!(empty.contains("no samples"));
        let bars = bar_chart(
            "Outcomes",
            &[("ok".into(), 10, 2), ("http_503".into(), 0, 1)],
        );
        assert_eq!(bars.matches("<rect").count(), 2);
    }
}

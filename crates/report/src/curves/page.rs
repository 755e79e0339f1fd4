//! The comparison page: one self-contained HTML file (inline CSS and SVG,
//! no script, nothing fetched) with the curves of every configuration
//! against the load and against throughput, and a table of every point.

use std::fmt::Write as _;

use super::points::{Axis, Line, Pair, Point, labels, lines};
use cicada_results::svg::{LineChart, PALETTE, Series, XAxis, esc};

/// Extra CSS beside the run report's: the shared legend and the table.
const STYLE: &str = r#"
.legend-box{display:flex;flex-wrap:wrap;gap:6px 18px;margin:8px 0}
.legend-box span.swatch{display:inline-block;width:26px;height:4px;vertical-align:middle;margin-right:6px;border-radius:2px}
td.measured{color:#5b6672;font-style:italic}
"#;

/// What the page shows.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// Every run or stage, labelled.
    pub points: &'a [Point],
    /// The x axis of the curves against the load.
    pub axis: Axis,
    /// The axis was asked for (`--x-axis`), not chosen from the runs.
    pub asked: bool,
}

fn f(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.2}"))
}

fn count(v: Option<u64>) -> String {
    v.map_or_else(|| "–".into(), |v| v.to_string())
}

/// Lines as chart series: dots with a tooltip per point; `p99` lines
/// dashed and left out of the legend (their p50 names the colour).
fn series(lines: Vec<Line>, p99: bool) -> Vec<Series> {
    lines
        .into_iter()
        .map(|l| {
            let (points, names): (Vec<(f64, f64)>, Vec<String>) =
                l.points.into_iter().map(|(x, y, n)| ((x, y), n)).unzip();
            let name = if p99 {
                format!("{} p99", l.label)
            } else {
                l.label
            };
            let s = Series {
                dots: true,
                labels: names,
                legend: !p99,
                ..Series::line(name, l.color, points)
            };
            if p99 { s.dashed() } else { s }
        })
        .collect()
}

fn chart(title: String, x_label: &str, y_label: &str, series: Vec<Series>) -> String {
    LineChart {
        title,
        x_label: x_label.into(),
        y_label: y_label.into(),
        x_axis: XAxis::Linear,
        series,
    }
    .render()
}

/// A metric's p50 (solid) and p99 (dashed) per configuration against the load.
fn pair_chart(page: &Page<'_>, name: &str, pick: fn(&Point) -> Pair) -> String {
    let axis = page.axis;
    let x = move |p: &Point| p.x(axis).map(|v| v.0);
    let mut s = series(lines(page.points, &x, &|p| pick(p).p50), false);
    s.extend(series(lines(page.points, &x, &|p| pick(p).p99), true));
    chart(
        format!("{name} p50 (solid) and p99 (dashed) vs {}", axis.column()),
        axis.title(),
        &format!("{name} (ms)"),
        s,
    )
}

/// A latency against output throughput, one point per run.
fn against_throughput(page: &Page<'_>, name: &str, y: fn(&Point) -> Option<f64>) -> String {
    let s = series(lines(page.points, &|p| p.output_throughput, &y), false);
    chart(
        format!("{name} vs output throughput"),
        "output throughput (tokens/s)",
        &format!("{name} (ms)"),
        s,
    )
}

/// The curves against the load: output throughput, TTFT, TPOT and, where
/// requests reasoned, TTFA.
fn load_charts(out: &mut String, page: &Page<'_>, reasoned: bool) {
    let axis = page.axis;
    let x = move |p: &Point| p.x(axis).map(|v| v.0);
    let tput = series(lines(page.points, &x, &|p| p.output_throughput), false);
    let _ = write!(
        out,
        "<h2>Against {}</h2><div class=\"grid\">{}{}{}",
        esc(axis.column()),
        chart(
            format!("Output throughput vs {}", axis.column()),
            axis.title(),
            "output throughput (tokens/s)",
            tput,
        ),
        pair_chart(page, "TTFT", |p| p.ttft),
        pair_chart(page, "TPOT", |p| p.tpot),
    );
    if reasoned {
        out.push_str(&pair_chart(page, "TTFA", |p| p.ttfa));
    }
    out.push_str("</div>");
}

/// The configurations with their colours and point counts.
fn legend(out: &mut String, points: &[Point]) {
    out.push_str("<div class=\"legend-box\" id=\"labels\">");
    for (i, label) in labels(points).iter().enumerate() {
        let n = points.iter().filter(|p| &p.label == label).count();
        let _ = write!(
            out,
            "<span class=\"label\" data-label=\"{l}\"><span class=\"swatch\" style=\"background:{}\"></span>{l} ({n} point{})</span>",
            PALETTE[i % PALETTE.len()],
            if n == 1 { "" } else { "s" },
            l = esc(label),
        );
    }
    out.push_str("</div>");
}

/// Every point with its figures; TTFA columns where some request reasoned.
fn table(out: &mut String, page: &Page<'_>, reasoned: bool) {
    let _ = write!(
        out,
        "<h2>Runs</h2><table id=\"points\"><tr><th class=\"l\">configuration</th><th class=\"l\">run</th><th>{}</th><th>completed</th><th>failed</th><th>req/s</th><th>output tok/s</th><th>TTFT p50 (ms)</th><th>TTFT p99 (ms)</th><th>TPOT p50 (ms)</th><th>TPOT p99 (ms)</th><th>E2EL p50 (ms)</th><th>E2EL p99 (ms)</th>{}</tr>",
        esc(page.axis.column()),
        if reasoned {
            "<th>requests that reasoned</th><th>TTFA p50 (ms)</th><th>TTFA p99 (ms)</th>"
        } else {
            ""
        }
    );
    let mut rows: Vec<&Point> = page.points.iter().collect();
    let order = labels(page.points);
    let x = |p: &Point| p.x(page.axis).map_or(f64::INFINITY, |v| v.0);
    rows.sort_by(|a, b| {
        let rank = |p: &Point| order.iter().position(|l| *l == p.label);
        rank(a).cmp(&rank(b)).then(x(a).total_cmp(&x(b)))
    });
    for p in rows {
        let x_cell = match p.x(page.axis) {
            Some((v, false)) => format!("<td>{}</td>", f(Some(v))),
            Some((v, true)) => format!(
                "<td class=\"measured\" title=\"measured: none configured\">{} (measured)</td>",
                f(Some(v))
            ),
            None => "<td>–</td>".into(),
        };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>{x_cell}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(&p.label),
            esc(&p.name()),
            count(p.completed),
            count(p.failed),
            f(p.request_throughput),
            f(p.output_throughput),
            f(p.ttft.p50),
            f(p.ttft.p99),
            f(p.tpot.p50),
            f(p.tpot.p99),
            f(p.e2el.p50),
            f(p.e2el.p99),
        );
        if reasoned {
            let _ = write!(
                out,
                "<td>{}</td><td>{}</td><td>{}</td>",
                count(p.reasoning_requests),
                f(p.ttfa.p50),
                f(p.ttfa.p99)
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// What the x axis holds and why, and what the page leaves out.
fn notes(out: &mut String, page: &Page<'_>) {
    let how = if page.asked {
        "as asked (--x-axis)"
    } else {
        "chosen from what the runs varied (--x-axis to change)"
    };
    let _ = write!(
        out,
        "<p class=\"meta\">x axis: {}, {how}. A run with no configured value sits at its measured one (mean requests in flight, or achieved request rate), marked in the table. Every point is a run or a sweep stage; hover a dot for its name.</p>",
        esc(page.axis.title())
    );
    let missing = page
        .points
        .iter()
        .filter(|p| p.x(page.axis).is_none())
        .count();
    if missing > 0 {
        let _ = write!(
            out,
            "<p class=\"warn\">{missing} run(s) have no {} value and are left out of the curves against it.</p>",
            esc(page.axis.column())
        );
    }
}

/// The whole page.
pub fn render(page: &Page<'_>) -> String {
    let mut out = String::new();
    let configs = labels(page.points).len();
    let title = format!(
        "Comparison of {configs} configuration{}",
        if configs == 1 { "" } else { "s" }
    );
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{title} · cicada report</title><style>{}{STYLE}</style></head><body><h1>{title}</h1><p class=\"meta\">{} runs or stages · cicada {}</p>",
        cicada_results::html::STYLE,
        page.points.len(),
        esc(cicada_results::VERSION)
    );
    legend(&mut out, page.points);
    notes(&mut out, page);
    let reasoned = page.points.iter().any(|p| p.ttfa.is_some());
    load_charts(&mut out, page, reasoned);
    let _ = write!(
        out,
        "<h2>Latency against throughput</h2><div class=\"grid\">{}{}</div>",
        against_throughput(page, "TTFT p99", |p| p.ttft.p99),
        against_throughput(page, "E2EL p50", |p| p.e2el.p50),
    );
    table(&mut out, page, reasoned);
    out.push_str("<footer><p>Every figure is defined in cicada's docs/METRICS.md; latencies are per successful request.</p></footer></body></html>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curves::points::tests::point;

    #[test]
    fn a_page_draws_each_configuration_in_every_chart() {
        let points = vec![
            point("fast <1>", 1, Some(1.0), None),
            point("fast <1>", 2, Some(8.0), None),
            point("slow", 1, Some(1.0), None),
            point("slow", 2, Some(8.0), None),
        ];
        let html = render(&Page {
            points: &points,
            axis: Axis::Concurrency,
            asked: false,
        });
        assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>"));
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 5, "{html}");
        assert!(!html.contains("<script"), "no script needed");
        for external in ["src=\"http", "href=\"http", "@import", "url("] {
            assert!(!html.contains(external), "{external} in the page");
        }
        assert!(html.contains("data-label=\"fast &lt;1&gt;\""));
        assert!(html.contains("Comparison of 2 configurations"));
        assert!(html.contains("TTFT p50 (solid) and p99 (dashed) vs concurrency"));
        assert!(!html.contains("TTFA"), "no run reasoned");
        // TTFT and TPOT charts carry p50 and p99 lines per label where
        // figures exist (the sample points have no TPOT): 2 + 4 + 0 + 2 + 0
        assert_eq!(html.matches("<g class=\"series\"").count(), 8);
        // a reasoning run adds the TTFA chart and columns
        let mut reasoned = points.clone();
        reasoned[0].ttfa = Pair {
            p50: Some(50.0),
            p99: Some(70.0),
        };
        reasoned[0].reasoning_requests = Some(3);
        let html = render(&Page {
            points: &reasoned,
            axis: Axis::Rate,
            asked: true,
        });
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 6);
        assert!(html.contains("TTFA p99 (ms)</th>"));
        assert!(
            html.contains("<td>3</td><td>50.00</td><td>70.00</td>"),
            "{html}"
        );
        assert!(html.contains("(measured)"), "achieved rates stand in");
        assert!(html.contains("as asked"));
    }
}

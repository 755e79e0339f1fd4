//! `report.html`: one self-contained page (inline CSS, inline SVG, a few
//! lines of inline script; nothing fetched) with the run's summary,
//! latency percentile curves, TTFT/ITL and throughput over time, outcome
//! counts and, for sweeps, the throughput-vs-latency curve of the steps.
//! Rewritten after every step, so a long sweep has a report as it goes.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use cicada_metrics::{Counter, Metric, Outcomes, Summary};

use super::stages::search_line;
use super::svg::{LineChart, Series, XAxis, bar_chart, esc};
use super::{RunResult, rfc3339};
use crate::interval::IntervalRow;
use crate::stages::Search;

/// Most points drawn per series over time; longer runs are averaged into buckets.
const MAX_POINTS: usize = 1500;

/// Metrics with percentile curves.
const CURVES: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

/// What the page shows.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The run's steps (the whole run without a sweep; one per sweep value), in order.
    pub steps: &'a [&'a RunResult],
    /// `[[stages]]` windows of a run without a sweep (empty otherwise).
    pub stages: &'a [&'a RunResult],
    /// The steps are a sweep.
    pub sweep: bool,
    /// An SLO search's answer so far.
    pub search: Option<Search>,
}

/// The page's CSS, shared with `cicada report --html`'s comparison page.
pub(crate) const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1280px;padding:0 16px;color:#1d232a;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde3ea;padding-bottom:4px}
.meta{color:#5b6672;margin:0 0 12px}.warn{color:#b3261e;font-weight:600}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:6px 0}
th,td{border:1px solid #dde3ea;padding:3px 8px;text-align:right}th{background:#f3f6f9}td.l,th.l{text-align:left}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:14px}
svg.chart{width:100%;height:auto;background:#fff;border:1px solid #e6ebf0;border-radius:6px}
svg .grid{stroke:#eef1f4;stroke-width:1}svg .frame{fill:none;stroke:#c5cdd6}
svg .tick{font-size:11px;fill:#5b6672}svg .axis{font-size:12px;fill:#3a444f}
svg .title{font-size:14px;font-weight:600;fill:#1d232a}svg .legend{font-size:11px;fill:#3a444f}
svg .legend-item{cursor:pointer}svg .legend-item.off{opacity:.35}
footer{color:#5b6672;margin-top:32px;font-size:12px}#render-errors{color:#b3261e}
"#;

/// Runs first: record script errors where a test (or a reader) can see them.
const ERROR_HOOK: &str = r#"window.addEventListener('error',function(e){var el=document.getElementById('render-errors');if(el){el.textContent+=(e.message||'error')+'\n';}});"#;

/// Legend toggles, then a status line that only appears when the script ran to its end.
const SCRIPT: &str = r#"(function(){
var charts=document.querySelectorAll('svg.chart');
document.querySelectorAll('svg .legend-item').forEach(function(item){
  item.addEventListener('click',function(){
    var svg=item.closest('svg'),key=item.getAttribute('data-series');
    var off=item.classList.toggle('off');
    svg.querySelectorAll('.series[data-series="'+key+'"]').forEach(function(g){g.style.display=off?'none':'';});
  });
});
var status=document.getElementById('render-status');
status.textContent=charts.length+' charts rendered';
status.setAttribute('data-charts',String(charts.length));
document.body.setAttribute('data-rendered','ok');
})();"#;

/// Write the page to `path`.
pub fn write(path: &Path, page: &Page<'_>) -> anyhow::Result<()> {
    std::fs::write(path, render(page)).with_context(|| format!("writing {}", path.display()))
}

fn f(v: f64) -> String {
    format!("{v:.2}")
}

/// The step's label in legends and tables.
fn stage_label(r: &RunResult) -> String {
    match (r.stage, r.stage_name.is_empty()) {
        (0, _) => "run".into(),
        (n, true) => format!("stage {n}"),
        (n, false) => format!("{n}: {}", r.stage_name),
    }
}

/// The whole page.
pub fn render(page: &Page<'_>) -> String {
    let mut out = String::new();
    let first = page.steps.first().copied();
    let title = first.map_or_else(|| "cicada".to_string(), |r| r.scenario.name.clone());
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{} · cicada report</title><style>{STYLE}</style><script>{ERROR_HOOK}</script></head><body>",
        esc(&title)
    );
    let _ = write!(out, "<h1>{}</h1>", esc(&title));
    if let Some(r) = first {
        let _ = write!(
            out,
            "<p class=\"meta\">{} · model <b>{}</b> ({}) · {} worker(s) · {} · cicada {}</p>",
            esc(&rfc3339(r.started_unix)),
            esc(&r.target.model),
            esc(r.scenario.target.backend.name()),
            r.workers,
            esc(&r.target.urls.join(", ")),
            esc(crate::VERSION)
        );
    }
    for r in page.steps {
        if r.degraded() {
            let _ = write!(
                out,
                "<p class=\"warn\">{}: degraded — {} worker(s) lost; figures cover what they reported.</p>",
                esc(&stage_label(r)),
                r.lost.len()
            );
        }
        if let Some(sig) = r.interrupted {
            let _ = write!(
                out,
                "<p class=\"warn\">{}: partial — stopped by {}.</p>",
                esc(&stage_label(r)),
                esc(sig)
            );
        }
    }
    let pooling = !page.steps.is_empty() && page.steps.iter().chain(page.stages).all(|r| r.pools());
    if pooling {
        pooling_table(&mut out, page);
    } else {
        summary_table(&mut out, page);
    }
    if page.steps.iter().any(|r| !r.per_model.is_empty()) {
        models_table(&mut out, page.steps);
    }
    gate_list(&mut out, page);
    let reasoned = |r: &&RunResult| r.total.counter(Counter::ReasoningRequests) > 0;
    if page.steps.iter().chain(page.stages).any(reasoned) {
        reasoning_table(&mut out, page);
    }
    if page.sweep && !page.steps.is_empty() {
        out.push_str("<h2>Throughput vs latency</h2>");
        if let Some(s) = page.search {
            let _ = write!(out, "<p>{}</p>", esc(&search_line(s)));
        }
        out.push_str("<div class=\"grid\">");
        out.push_str(&sweep_chart(page.steps, Metric::Ttft));
        out.push_str(&sweep_chart(page.steps, Metric::Tpot));
        out.push_str("</div>");
    }
    out.push_str("<h2>Latency percentiles</h2><div class=\"grid\">");
    let curve_sets: &[&RunResult] = if page.stages.is_empty() {
        page.steps
    } else {
        page.stages
    };
    // a pooling run generates nothing: E2EL is its only latency curve
    for m in CURVES
        .into_iter()
        .filter(|m| !pooling || *m == Metric::E2el)
    {
        out.push_str(&percentile_chart(curve_sets, m));
    }
    // the answer's latencies, where some request reasoned
    for m in [Metric::Ttfa, Metric::AnswerItl] {
        if curve_sets.iter().any(|r| !r.total.histogram(m).is_empty()) {
            out.push_str(&percentile_chart(curve_sets, m));
        }
    }
    out.push_str("</div><h2>Over time</h2><div class=\"grid\">");
    if !pooling {
        out.push_str(&over_time(page.steps, "TTFT over time", Metric::Ttft));
        out.push_str(&over_time(page.steps, "ITL over time", Metric::Itl));
    }
    out.push_str(&throughput_chart(page.steps));
    if !pooling {
        out.push_str(&tokens_chart(page.steps));
    }
    out.push_str("</div>");
    outcomes(&mut out, page.steps);
    let _ = write!(
        out,
        "<footer><p>Every figure is defined in cicada's docs/METRICS.md. Latencies are per successful request; failures never enter them.</p><p id=\"render-status\"></p><pre id=\"render-errors\"></pre></footer><script>{SCRIPT}</script></body></html>"
    );
    out
}

/// Requests that reasoned, their tokens, and the answer's latencies apart
/// from the thinking (docs/METRICS.md, "Reasoning"), per step or stage.
fn reasoning_table(out: &mut String, page: &Page<'_>) {
    out.push_str("<h2>Reasoning</h2><table><tr><th class=\"l\">stage</th><th>requests that reasoned</th><th>reasoning tokens</th><th>TTFA mean / p99 (ms)</th><th>reasoning time mean / p99 (ms)</th><th>answer TPOT mean / p99 (ms)</th><th>answer ITL mean / p99 (ms)</th></tr>");
    for r in page.steps.iter().chain(page.stages) {
        let s = r.summary();
        let lat = |m: Metric| {
            s.metric(m).map_or_else(
                || "–".to_string(),
                |d| format!("{} / {}", f(d.mean), f(d.percentile(99.0).unwrap_or(0.0))),
            )
        };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&stage_label(r)),
            r.total.counter(Counter::ReasoningRequests),
            r.total.counter(Counter::ReasoningTokens),
            lat(Metric::Ttfa),
            lat(Metric::ReasoningTime),
            lat(Metric::AnswerTpot),
            lat(Metric::AnswerItl),
        );
    }
    out.push_str("</table>");
}

/// Each model's share of each step (`target.models`), with its latencies.
fn models_table(out: &mut String, steps: &[&RunResult]) {
    out.push_str("<h2>Per model</h2><table><tr><th class=\"l\">stage</th><th class=\"l\">model</th><th>sent</th><th>completed</th><th>failed</th><th>input tokens</th><th>output tokens</th><th>req/s</th><th>output tok/s</th><th>TTFT mean / p99 (ms)</th><th>TPOT mean / p99 (ms)</th><th>ITL mean / p99 (ms)</th><th>E2EL mean / p99 (ms)</th></tr>");
    for r in steps {
        for (name, set) in r.models() {
            let s = r.target_summary(set);
            let lat = |m: Metric| {
                s.metric(m).map_or_else(
                    || "–".to_string(),
                    |d| format!("{} / {}", f(d.mean), f(d.percentile(99.0).unwrap_or(0.0))),
                )
            };
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&stage_label(r)),
                esc(name),
                s.sent,
                s.completed,
                s.failed,
                s.total_input_tokens,
                s.total_output_tokens,
                f(s.request_throughput),
                f(s.output_throughput),
                lat(Metric::Ttft),
                lat(Metric::Tpot),
                lat(Metric::Itl),
                lat(Metric::E2el),
            );
        }
    }
    out.push_str("</table>");
}

fn summary_table(out: &mut String, page: &Page<'_>) {
    out.push_str("<h2>Summary</h2><table><tr><th class=\"l\">stage</th><th>sent</th><th>completed</th><th>failed</th><th>duration (s)</th><th>req/s</th><th>output tok/s</th><th>total tok/s</th><th>TTFT mean / p99 (ms)</th><th>TPOT mean / p99 (ms)</th><th>ITL mean / p99 (ms)</th><th>E2EL mean / p99 (ms)</th><th>goodput (req/s)</th></tr>");
    for r in page.steps.iter().chain(page.stages) {
        let s = r.summary();
        let lat = |m: Metric| {
            s.metric(m).map_or_else(
                || "–".to_string(),
                |d| format!("{} / {}", f(d.mean), f(d.percentile(99.0).unwrap_or(0.0))),
            )
        };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&stage_label(r)),
            s.sent,
            s.completed,
            s.failed,
            f(s.duration_s),
            f(s.request_throughput),
            f(s.output_throughput),
            f(s.total_token_throughput),
            lat(Metric::Ttft),
            lat(Metric::Tpot),
            lat(Metric::Itl),
            lat(Metric::E2el),
            s.request_goodput.map_or_else(|| "–".into(), f)
        );
    }
    out.push_str("</table>");
}

/// A pooling run's summary: requests, items and input tokens per second,
/// batch sizes and E2EL (nothing is generated: no token or TTFT columns).
fn pooling_table(out: &mut String, page: &Page<'_>) {
    out.push_str("<h2>Summary</h2><table><tr><th class=\"l\">stage</th><th>sent</th><th>completed</th><th>failed</th><th>duration (s)</th><th>req/s</th><th>items/s</th><th>input tok/s</th><th>batch size mean / max</th><th>E2EL mean / p99 (ms)</th><th>goodput (req/s)</th></tr>");
    for r in page.steps.iter().chain(page.stages) {
        let s = r.summary();
        let pair = |m: Metric, hi: fn(&cicada_metrics::DistributionStats) -> f64| {
            s.metric(m).map_or_else(
                || "–".to_string(),
                |d| format!("{} / {}", f(d.mean), f(hi(d))),
            )
        };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&stage_label(r)),
            s.sent,
            s.completed,
            s.failed,
            f(s.duration_s),
            f(s.request_throughput),
            f(s.item_throughput),
            f(s.input_throughput),
            pair(Metric::BatchSize, |d| d.max),
            pair(Metric::E2el, |d| d.percentile(99.0).unwrap_or(0.0)),
            s.request_goodput.map_or_else(|| "–".into(), f)
        );
    }
    out.push_str("</table>");
}

/// The gates' verdicts of every step, under the summary.
fn gate_list(out: &mut String, page: &Page<'_>) {
    let gates: Vec<String> = page
        .steps
        .iter()
        .flat_map(|r| {
            super::gates::evaluate(r)
                .into_iter()
                .map(move |g| format!("{}: {g}", stage_label(r)))
        })
        .collect();
    if !gates.is_empty() {
        out.push_str("<ul>");
        for g in gates {
            let _ = write!(out, "<li>{}</li>", esc(&g));
        }
        out.push_str("</ul>");
    }
}

/// One metric's percentile curve per result (x: nines axis up to what the sample count supports).
fn percentile_chart(results: &[&RunResult], m: Metric) -> String {
    let series = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let h = r.total.histogram(m);
            if h.is_empty() {
                return None;
            }
            let k = m.unit().display_scale();
            // beyond log10(count) nines there is at most one sample
            let top = (h.count() as f64).log10().clamp(1.0, 5.0);
            let steps = (top * 40.0).ceil() as usize;
            let mut points: Vec<(f64, f64)> = (0..=steps)
                .map(|j| {
                    let x = top * j as f64 / steps as f64;
                    let q = 1.0 - 10f64.powf(-x);
                    (x, h.quantile(q) as f64 * k)
                })
                .collect();
            points.push((top, h.max() as f64 * k));
            Some(Series::line(stage_label(r), i, points))
        })
        .collect();
    LineChart {
        title: format!("{} percentiles", m.label()),
        x_label: "percentile".into(),
        y_label: format!("{} (ms)", m.label()),
        x_axis: XAxis::Nines,
        series,
    }
    .render()
}

/// Seconds from the first step's barrier to each step's, so steps share one time line.
fn offsets(steps: &[&RunResult]) -> Vec<f64> {
    let t0 = steps.first().map_or(0.0, |r| r.started_unix);
    steps
        .iter()
        .map(|r| (r.started_unix - t0).max(0.0))
        .collect()
}

/// (x, y) over every step's interval rows; `pick` may skip a row; a NaN
/// separates steps so lines break between them.
fn timeline(steps: &[&RunResult], pick: &dyn Fn(&IntervalRow) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (r, off) in steps.iter().zip(offsets(steps)) {
        if !out.is_empty() {
            out.push((f64::NAN, f64::NAN));
        }
        let pts: Vec<(f64, f64)> = r
            .rows
            .iter()
            .filter_map(|row| pick(row).map(|y| (off + row.start_s, y)))
            .collect();
        out.extend(downsample(&pts));
    }
    out
}

/// Average consecutive points into at most [`MAX_POINTS`] buckets.
fn downsample(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if pts.len() <= MAX_POINTS {
        return pts.to_vec();
    }
    let per = pts.len().div_ceil(MAX_POINTS);
    pts.chunks(per)
        .map(|c| {
            let n = c.len() as f64;
            (
                c.iter().map(|p| p.0).sum::<f64>() / n,
                c.iter().map(|p| p.1).sum::<f64>() / n,
            )
        })
        .collect()
}

fn over_time(steps: &[&RunResult], title: &str, m: Metric) -> String {
    let p50 = timeline(steps, &|r| r.metric(m).map(|x| x.2));
    let p99 = timeline(steps, &|r| r.metric(m).map(|x| x.4));
    let mean = timeline(steps, &|r| r.metric(m).map(|x| x.1));
    LineChart {
        title: title.into(),
        x_label: "seconds since start".into(),
        y_label: format!("{} (ms)", m.label()),
        x_axis: XAxis::Linear,
        series: vec![
            Series::line("p50", 0, p50),
            Series::line("mean", 2, mean),
            Series::line("p99", 1, p99).dashed(),
        ],
    }
    .render()
}

fn throughput_chart(steps: &[&RunResult]) -> String {
    let per_s = |r: &IntervalRow, n: u64| n as f64 / r.length_s.max(f64::MIN_POSITIVE);
    LineChart {
        title: "Requests over time".into(),
        x_label: "seconds since start".into(),
        y_label: "requests".into(),
        x_axis: XAxis::Linear,
        series: vec![
            Series::line("completed/s", 0, timeline(steps, &|r| Some(per_s(r, r.ok)))),
            Series::line(
                "failed/s",
                1,
                timeline(steps, &|r| Some(per_s(r, r.failed))),
            ),
            Series::line(
                "in flight",
                4,
                timeline(steps, &|r| Some(r.in_flight as f64)),
            )
            .dashed(),
        ],
    }
    .render()
}

fn tokens_chart(steps: &[&RunResult]) -> String {
    let per_s = |r: &IntervalRow, n: u64| n as f64 / r.length_s.max(f64::MIN_POSITIVE);
    LineChart {
        title: "Token throughput over time".into(),
        x_label: "seconds since start".into(),
        y_label: "tokens/s".into(),
        x_axis: XAxis::Linear,
        series: vec![
            Series::line(
                "output tok/s",
                0,
                timeline(steps, &|r| Some(per_s(r, r.output_tokens))),
            ),
            Series::line(
                "input tok/s",
                5,
                timeline(steps, &|r| Some(per_s(r, r.input_tokens))),
            )
            .dashed(),
        ],
    }
    .render()
}

/// Latency (mean and p99) against output throughput, one point per step.
fn sweep_chart(steps: &[&RunResult], m: Metric) -> String {
    let summaries: Vec<(String, Summary)> = steps
        .iter()
        .map(|r| (stage_label(r), r.summary()))
        .collect();
    let mut by_x: Vec<&(String, Summary)> = summaries.iter().collect();
    by_x.sort_by(|a, b| a.1.output_throughput.total_cmp(&b.1.output_throughput));
    let series = |name: &str, color: usize, pick: fn(&cicada_metrics::DistributionStats) -> f64| {
        let (points, labels) = by_x
            .iter()
            .filter_map(|(label, s)| {
                s.metric(m)
                    .map(|d| ((s.output_throughput, pick(d)), label.clone()))
            })
            .unzip();
        Series {
            dots: true,
            labels,
            ..Series::line(format!("{} {name}", m.label()), color, points)
        }
    };
    LineChart {
        title: format!("{} vs output throughput", m.label()),
        x_label: "output tokens/s".into(),
        y_label: format!("{} (ms)", m.label()),
        x_axis: XAxis::Linear,
        series: vec![
            series("mean", 0, |d| d.mean),
            series("p99", 1, |d| d.percentile(99.0).unwrap_or(0.0)).dashed(),
        ],
    }
    .render()
}

fn outcomes(out: &mut String, steps: &[&RunResult]) {
    let mut all = Outcomes::default();
    for r in steps {
        all.merge(&r.total.outcomes);
    }
    out.push_str("<h2>Outcomes</h2>");
    if all.is_empty() {
        out.push_str("<p>No requests ended.</p>");
        return;
    }
    let bars: Vec<(String, u64, usize)> = all
        .iter()
        .map(|(o, c)| (o.to_string(), c.count, if o.is_ok() { 2 } else { 1 }))
        .collect();
    let _ = write!(
        out,
        "<div class=\"grid\">{}<div><table><tr><th class=\"l\">outcome</th><th>requests</th><th class=\"l\">first error</th></tr>",
        bar_chart("Requests by outcome", &bars)
    );
    for (o, c) in all.iter() {
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            esc(&o.to_string()),
            c.count,
            esc(c.first_error.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table></div></div>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::result;
    use cicada_metrics::{Counter, Outcome};
    use cicada_scenarios::Scenario;

    fn stage(n: u32, started: f64, ttft_ms: u64) -> RunResult {
        let mut r = result(Scenario::default(), 50, 50, 2);
        r.stage = n;
        r.stage_name = format!("rate={n}");
        r.started_unix = started;
        for v in 1..=50u64 {
            r.total
                .histogram_mut(Metric::Ttft)
                .record(ttft_ms * 1000 + v * 100);
            r.total.histogram_mut(Metric::Itl).record(5_000 + v);
        }
        r.total.span.last_end_us = Some(10_000_000);
        r.total
            .counters
            .add(Counter::OutputTokens, 5_000 * u64::from(n));
        r.rows = (0..10)
            .map(|i| IntervalRow {
                index: i,
                start_s: i as f64,
                length_s: 1.0,
                ended: 5,
                ok: 5,
                failed: 0,
                output_tokens: 500,
                input_tokens: 100,
                in_flight: 3,
                metrics: vec![(Metric::Ttft, 5, 12.0, 11.0, 15.0, 20.0, 21.0)],
            })
            .collect();
        r
    }

    #[test]
    fn a_sweep_page_has_every_chart_and_no_external_reference() {
        let a = stage(1, 1_000.0, 10);
        let mut b = stage(2, 1_020.0, 30);
        b.total
            .outcomes
            .add_n(Outcome::Timeout, 1, Some("slow <server>"));
        let steps = [&a, &b];
        let html = render(&Page {
            steps: &steps,
            stages: &[],
            sweep: true,
            search: None,
        });
        assert!(html.starts_with("<!DOCTYPE html>"));
        // sweep (2) + percentiles (4) + over time (4) + outcomes (1)
        assert_eq!(html.matches("<svg class=\"chart").count(), 11, "{html}");
        assert!(html.contains("TTFT vs output throughput"));
        assert!(html.contains("slow &lt;server&gt;"));
        assert!(html.contains("id=\"render-status\""));
        for external in ["src=\"http", "href=\"http", "@import", "url("] {
            assert!(!html.contains(external), "{external} in the page");
        }
        // the second step's timeline starts 20 s after the first's
        assert!(html.contains("stage 2") || html.contains("2: rate=2"));
    }

    #[test]
    fn downsampling_keeps_long_runs_bounded() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 1.0)).collect();
        let d = downsample(&pts);
        assert!(d.len() <= MAX_POINTS, "{}", d.len());
        assert!(d.iter().all(|p| p.1 == 1.0));
        assert_eq!(downsample(&pts[..10]).len(), 10);
    }
}

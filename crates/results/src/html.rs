//! `report.html`: one self-contained page (inline CSS, inline SVG, a few
//! lines of inline script; nothing fetched) with the run's summary,
//! latency percentile curves, TTFT/ITL and throughput over time, outcome
//! counts and, for sweeps, the throughput-vs-latency curve of the steps.
//! Rewritten after every step, so a long sweep has a report as it goes.

mod charts;
mod tables;

use std::fmt::Write as _;
use std::path::Path;

use cicada_metrics::{Counter, Metric};

use super::stages::search_line;
use super::svg::esc;
use super::{RunResult, rfc3339};
use crate::error::WriteError;
use crate::stages::Search;
use charts::{over_time, percentile_chart, sweep_chart, throughput_chart, tokens_chart};
use tables::{
    gate_list, models_table, outcomes, pooling_table, reasoning_table, summary_table,
    workloads_table,
};

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
pub const STYLE: &str = r#"
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
pub fn write(path: &Path, page: &Page<'_>) -> Result<(), WriteError> {
    std::fs::write(path, render(page)).map_err(|source| WriteError::Write {
        path: path.to_path_buf(),
        source,
    })
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
    if page.steps.iter().any(|r| !r.per_workload.is_empty()) {
        workloads_table(&mut out, page.steps);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interval::IntervalRow;
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
}

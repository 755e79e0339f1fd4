//! The page's tables: the summary (generation or pooling), the gates'
//! verdicts, reasoning, each model's share and the outcome counts.

use std::fmt::Write as _;

use cicada_metrics::{Counter, Metric, Outcomes, Summary};

use super::{Page, f, stage_label};
use crate::RunResult;
use crate::document::SessionCounts;
use crate::svg::{bar_chart, esc};

/// Requests that reasoned, their tokens, and the answer's latencies apart
/// from the thinking (docs/METRICS.md, "Reasoning"), per step or stage.
pub(super) fn reasoning_table(out: &mut String, page: &Page<'_>) {
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
pub(super) fn models_table(out: &mut String, steps: &[&RunResult]) {
    shares_table(out, steps, ("Per model", "model"), false, |r| {
        r.models()
            .map(|(name, set)| (name.to_string(), r.target_summary(set)))
            .collect()
    });
}

/// Each workload's share of each step (`[[workloads]]`), with its
/// latencies and its goodput against its own SLO.
pub(super) fn workloads_table(out: &mut String, steps: &[&RunResult]) {
    shares_table(out, steps, ("Per workload", "workload"), true, |r| {
        r.workloads()
            .enumerate()
            .map(|(i, (name, set))| (name.to_string(), r.workload_summary(i, set)))
            .collect()
    });
    sessions_table(out, steps);
}

/// The sessions of each workload that started any (none: no table).
fn sessions_table(out: &mut String, steps: &[&RunResult]) {
    let rows: Vec<(&RunResult, &str, SessionCounts)> = steps
        .iter()
        .flat_map(|r| {
            r.workloads()
                .filter_map(move |(name, set)| Some((*r, name, SessionCounts::of(set)?)))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    out.push_str("<h2>Sessions per workload</h2><table><tr><th class=\"l\">stage</th><th class=\"l\">workload</th><th>started</th><th>completed</th><th>cut</th><th>turns</th></tr>");
    for (r, name, n) in rows {
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&stage_label(r)),
            esc(name),
            n.started,
            n.completed,
            n.cut,
            n.turns
        );
    }
    out.push_str("</table>");
}

/// One row per share of each step: its counts, throughputs and latencies
/// (and goodput with `goodput`), under a `(title, column)` heading.
fn shares_table(
    out: &mut String,
    steps: &[&RunResult],
    (title, column): (&str, &str),
    goodput: bool,
    shares: impl Fn(&RunResult) -> Vec<(String, Summary)>,
) {
    let _ = write!(
        out,
        "<h2>{title}</h2><table><tr><th class=\"l\">stage</th><th class=\"l\">{column}</th><th>sent</th><th>completed</th><th>failed</th><th>input tokens</th><th>output tokens</th><th>req/s</th><th>output tok/s</th><th>TTFT mean / p99 (ms)</th><th>TPOT mean / p99 (ms)</th><th>ITL mean / p99 (ms)</th><th>E2EL mean / p99 (ms)</th>{}</tr>",
        if goodput {
            "<th>goodput (req/s)</th>"
        } else {
            ""
        }
    );
    for r in steps {
        for (name, s) in shares(r) {
            let lat = |m: Metric| {
                s.metric(m).map_or_else(
                    || "–".to_string(),
                    |d| format!("{} / {}", f(d.mean), f(d.percentile(99.0).unwrap_or(0.0))),
                )
            };
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                esc(&stage_label(r)),
                esc(&name),
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
            if goodput {
                let g = s.request_goodput.map_or_else(|| "–".to_string(), f);
                let _ = write!(out, "<td>{g}</td>");
            }
            out.push_str("</tr>");
        }
    }
    out.push_str("</table>");
}

pub(super) fn summary_table(out: &mut String, page: &Page<'_>) {
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
pub(super) fn pooling_table(out: &mut String, page: &Page<'_>) {
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
pub(super) fn gate_list(out: &mut String, page: &Page<'_>) {
    let gates: Vec<String> = page
        .steps
        .iter()
        .flat_map(|r| {
            crate::gates::evaluate(r)
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

pub(super) fn outcomes(out: &mut String, steps: &[&RunResult]) {
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

//! The console summary: `vllm bench serve`'s result block, same labels and
//! order, then cicada's extra lines.

mod cicada;
mod server;
mod sink;
mod steady;

pub use sink::Console;

use std::fmt::Write as _;

use cicada_metrics::{Metric, MetricSet, Summary};

use super::document::SessionCounts;
use super::{RunResult, percentile_word};
use cicada::render_extras;

const WIDTH: usize = 50;

fn rule(out: &mut String, title: &str, fill: char) {
    let title = if title.is_empty() {
        String::new()
    } else {
        format!(" {title} ")
    };
    let pad = WIDTH.saturating_sub(title.chars().count());
    let left = pad / 2;
    let _ = writeln!(
        out,
        "{}{}{}",
        fill.to_string().repeat(left),
        title,
        fill.to_string().repeat(pad - left)
    );
}

fn section(out: &mut String, title: &str) {
    let pad = WIDTH.saturating_sub(title.chars().count());
    let left = pad / 2;
    let _ = writeln!(
        out,
        "{}{}{}",
        "-".repeat(left),
        title,
        "-".repeat(pad - left)
    );
}

fn int(out: &mut String, label: &str, v: impl std::fmt::Display) {
    let _ = writeln!(out, "{:<40} {:<10}", label, v);
}

fn float(out: &mut String, label: &str, v: f64) {
    let _ = writeln!(out, "{:<40} {:<10.2}", label, v);
}

/// vLLM's section title and label for a metric.
fn vllm_section(m: Metric) -> Option<(&'static str, &'static str)> {
    Some(match m {
        Metric::Ttft => ("Time to First Token", "TTFT"),
        Metric::Tpot => ("Time per Output Token (excl. 1st token)", "TPOT"),
        Metric::Itl => ("Inter-token Latency", "ITL"),
        Metric::E2el => ("End-to-end Latency", "E2EL"),
        Metric::Icl => ("Inter-chunk Latency", "ICL"),
        Metric::TtftCo => ("TTFT from Schedule (CO-corrected)", "TTFT_CO"),
        Metric::E2elCo => ("E2EL from Schedule (CO-corrected)", "E2EL_CO"),
        Metric::ScheduleLag => ("Schedule Lag", "Lag"),
        Metric::TokenLatency => ("Token Latency (e2e_latency / output_len)", "Token Latency"),
        _ => return None,
    })
}

fn metric_block(out: &mut String, s: &Summary, m: Metric, percentiles: &[f64]) {
    let Some((title, _)) = vllm_section(m) else {
        return;
    };
    section(out, title);
    metric_lines(out, s, m, percentiles);
}

/// A figure, or `n/a` when there were no samples (never 0).
fn maybe(out: &mut String, label: &str, v: Option<f64>) {
    match v {
        Some(v) => float(out, label, v),
        None => int(out, label, "n/a"),
    }
}

/// Mean, median and the asked percentiles of one metric, vLLM's labels.
fn metric_lines(out: &mut String, s: &Summary, m: Metric, percentiles: &[f64]) {
    let Some((_, label)) = vllm_section(m) else {
        return;
    };
    let stats = s.metric(m);
    maybe(out, &format!("Mean {label} (ms):"), stats.map(|d| d.mean));
    maybe(
        out,
        &format!("Median {label} (ms):"),
        stats.map(|d| d.median),
    );
    for p in percentiles {
        maybe(
            out,
            &format!("P{} {label} (ms):", percentile_word(*p)),
            stats.and_then(|d| d.percentile(*p)),
        );
    }
}

/// Render the whole console summary.
pub fn render(r: &RunResult) -> String {
    let s = r.summary();
    let sc = &r.scenario;
    let mut out = String::new();
    rule(&mut out, "Serving Benchmark Result", '=');
    int(&mut out, "Successful requests:", s.completed);
    int(&mut out, "Failed requests:", s.failed);
    if let Some(c) = sc.load.max_concurrency {
        int(&mut out, "Maximum request concurrency:", c);
    }
    if let Some(rate) = sc.load.request_rate.per_second() {
        float(&mut out, "Request rate configured (RPS):", rate);
    }
    float(&mut out, "Benchmark duration (s):", s.duration_s);
    int(&mut out, "Total input tokens:", s.total_input_tokens);
    if r.pools() {
        pooling_lines(&mut out, &s);
    } else {
        generation_lines(&mut out, &s);
    }
    let percentiles = &sc.output.metric_percentiles;
    for m in console_metrics(r) {
        metric_block(&mut out, &s, m, percentiles);
    }
    rule(&mut out, "", '=');
    render_extras(&mut out, r, &s);
    if r.per_target.len() > 1 {
        let title = format!("Per target ({})", r.per_target.len());
        render_shares(&mut out, r, &title, r.targets());
    }
    if !r.per_model.is_empty() {
        let title = format!("Per model ({})", r.per_model.len());
        render_shares(&mut out, r, &title, r.models());
    }
    if !r.per_workload.is_empty() {
        let title = format!("Per workload ({})", r.per_workload.len());
        render_workloads(&mut out, r, &title);
    }
    out
}

/// The throughputs of a generation run, as `vllm bench serve` prints them.
fn generation_lines(out: &mut String, s: &Summary) {
    int(out, "Total generated tokens:", s.total_output_tokens);
    float(out, "Request throughput (req/s):", s.request_throughput);
    if let Some(g) = s.request_goodput {
        float(out, "Request goodput (req/s):", g);
    }
    float(out, "Output token throughput (tok/s):", s.output_throughput);
    float(
        out,
        "Peak output token throughput (tok/s):",
        s.max_output_tokens_per_s as f64,
    );
    float(
        out,
        "Peak concurrent requests:",
        s.max_concurrent_requests as f64,
    );
    float(
        out,
        "Total Token throughput (tok/s):",
        s.total_token_throughput,
    );
}

/// The throughputs of a pooling run: requests, items and input tokens per
/// second, and the batch sizes (nothing is generated).
fn pooling_lines(out: &mut String, s: &Summary) {
    int(out, "Total items:", s.total_items);
    float(out, "Request throughput (req/s):", s.request_throughput);
    if let Some(g) = s.request_goodput {
        float(out, "Request goodput (req/s):", g);
    }
    float(out, "Item throughput (items/s):", s.item_throughput);
    float(out, "Input token throughput (tok/s):", s.input_throughput);
    if let Some(b) = s.metric(Metric::BatchSize) {
        section(out, "Batch Size (items per request)");
        float(out, "Mean batch size:", b.mean);
        float(out, "Median batch size:", b.median);
        float(out, "Min batch size:", b.min);
        float(out, "Max batch size:", b.max);
    }
}

/// The metrics whose percentile blocks the console prints: the scenario's
/// `percentile_metrics`; for a pooling run, which generates nothing, E2EL
/// alone of vLLM's (no TTFT, TPOT or ITL block).
fn console_metrics(r: &RunResult) -> Vec<Metric> {
    let asked = r
        .scenario
        .output
        .percentile_metrics
        .iter()
        .filter_map(|name| name.parse::<Metric>().ok());
    if !r.pools() {
        return asked.collect();
    }
    let generation = [
        Metric::Ttft,
        Metric::Tpot,
        Metric::Itl,
        Metric::Icl,
        Metric::TokenLatency,
    ];
    let mut out: Vec<Metric> = asked.filter(|m| !generation.contains(m)).collect();
    if !out.contains(&Metric::E2el) {
        out.push(Metric::E2el);
    }
    out
}

/// One block per target (or model): its share of the requests, throughput
/// and latencies.
fn render_shares<'a>(
    out: &mut String,
    r: &RunResult,
    title: &str,
    shares: impl Iterator<Item = (&'a str, &'a MetricSet)>,
) {
    let blocks = shares.map(|(name, set)| {
        // a target's or model's goodput is not printed (the run's is)
        let mut s = r.target_summary(set);
        s.request_goodput = None;
        (name, set, s)
    });
    render_blocks(out, r, title, blocks, false);
}

/// One block per workload of `[[workloads]]`, its goodput judged against
/// its own SLO, its sessions counted where it started any.
fn render_workloads(out: &mut String, r: &RunResult, title: &str) {
    let blocks = r
        .workloads()
        .enumerate()
        .map(|(i, (name, set))| (name, set, r.workload_summary(i, set)));
    render_blocks(out, r, title, blocks, true);
}

/// The blocks of [`render_shares`], each with its summary.
fn render_blocks<'a>(
    out: &mut String,
    r: &RunResult,
    title: &str,
    shares: impl Iterator<Item = (&'a str, &'a MetricSet, Summary)>,
    sessions: bool,
) {
    let sc = &r.scenario;
    rule(out, title, '=');
    for (url, set, s) in shares {
        section(out, url);
        int(out, "Successful requests:", s.completed);
        int(out, "Failed requests:", s.failed);
        int(out, "Total input tokens:", s.total_input_tokens);
        if !r.pools() {
            int(out, "Total generated tokens:", s.total_output_tokens);
        }
        float(out, "Request throughput (req/s):", s.request_throughput);
        if let Some(g) = s.request_goodput {
            float(out, "Request goodput (req/s):", g);
        }
        if r.pools() {
            float(out, "Item throughput (items/s):", s.item_throughput);
        } else {
            float(out, "Output token throughput (tok/s):", s.output_throughput);
        }
        float(
            out,
            "Peak concurrent requests:",
            s.max_concurrent_requests as f64,
        );
        for m in console_metrics(r) {
            metric_lines(out, &s, m, &sc.output.metric_percentiles);
        }
        if let Some(d) = s.metric(Metric::Ttfa) {
            float(out, "Mean TTFA (ms):", d.mean);
        }
        for (o, c) in set.outcomes.failures() {
            let _ = writeln!(out, "{:<40} {:<10}", format!("{o}:"), c.count);
        }
        if let Some(n) = SessionCounts::of(set).filter(|_| sessions) {
            int(out, "Sessions started:", n.started);
            int(out, "Sessions completed:", n.completed);
            int(out, "Sessions cut:", n.cut);
        }
    }
    rule(out, "", '=');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_python_centering() {
        let mut s = String::new();
        rule(&mut s, "Serving Benchmark Result", '=');
        assert_eq!(s, "============ Serving Benchmark Result ============\n");
        let mut s = String::new();
        section(&mut s, "Time to First Token");
        assert_eq!(s, "---------------Time to First Token----------------\n");
        let mut s = String::new();
        section(&mut s, "Time per Output Token (excl. 1st token)");
        assert_eq!(s, "-----Time per Output Token (excl. 1st token)------\n");
        let mut s = String::new();
        float(&mut s, "Benchmark duration (s):", 63.8149);
        assert_eq!(
            s,
            format!("{:<40} {:<10}\n", "Benchmark duration (s):", "63.81")
        );
    }
}

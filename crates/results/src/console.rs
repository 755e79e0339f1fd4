//! The console summary: `vllm bench serve`'s result block, same labels and
//! order, then cicada's extra lines.

use std::fmt::Write as _;

use cicada_metrics::{Counter, EVENTS_OVER_USAGE_RATIO, Metric, MetricSet, Summary};

use super::{RunResult, percentile_word};
use crate::server::ServerFigures;

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
    let sc = &r.scenario;
    rule(out, title, '=');
    for (url, set) in shares {
        let s = r.target_summary(set);
        section(out, url);
        int(out, "Successful requests:", s.completed);
        int(out, "Failed requests:", s.failed);
        int(out, "Total input tokens:", s.total_input_tokens);
        if !r.pools() {
            int(out, "Total generated tokens:", s.total_output_tokens);
        }
        float(out, "Request throughput (req/s):", s.request_throughput);
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
    }
    rule(out, "", '=');
}

fn render_extras(out: &mut String, r: &RunResult, s: &Summary) {
    let t = &r.total;
    rule(out, "cicada", '=');
    run_lines(out, r, s);
    extra_metrics(out, r, s);
    crate::reasoning::block(out, section, (t, s), &r.scenario.output.metric_percentiles);
    client_vs_server(out, s, t);
    if let Some(f) = &r.server.total {
        client_vs_server_metrics(out, s, f);
        render_server(out, f);
    }
    outcome_lines(out, t);
    warnings(out, r);
    if let Some(c) = &r.client {
        client_lines(
            out,
            c,
            s.total_output_tokens + r.warmup.counter(Counter::OutputTokens),
        );
    }
    rule(out, "", '=');
}

/// The fleet, what was sent, and how tokens were counted.
fn run_lines(out: &mut String, r: &RunResult, s: &Summary) {
    let t = &r.total;
    int(out, "Workers:", r.workers);
    if let Some(u) = r.scenario.load.users {
        int(out, "Users (closed loop):", u);
    }
    int(out, "Requests sent:", s.sent);
    let w = &r.warmup.outcomes;
    if w.sent() > 0 {
        int(
            out,
            "Warm-up requests (excluded):",
            format!("{} (ok {}, failed {})", w.sent(), w.ok(), w.failed()),
        );
    }
    float(out, "Mean concurrent requests:", s.mean_concurrent_requests);
    float(
        out,
        "Peak concurrent requests (100 ms mean):",
        s.peak_concurrent_requests_100ms,
    );
    if let Some(a) = s.achieved_request_rate {
        float(out, "Request rate achieved (RPS):", a);
    }
    if !r.pools() {
        token_source_line(out, t, s);
    }
    int(out, "Input tokens (client's count):", s.client_input_tokens);
    if let Some(n) = s.server_input_tokens {
        int(out, "Input tokens (server's count):", n);
    }
    if t.counter(Counter::CachedTokens) > 0 {
        int(
            out,
            "Cached prompt tokens (server):",
            t.counter(Counter::CachedTokens),
        );
    }
    int(
        out,
        "Requests on reused connections:",
        t.counter(Counter::RequestsReused),
    );
    if t.counter(Counter::RequestsHttp2) > 0 {
        int(
            out,
            "Requests over HTTP/2:",
            t.counter(Counter::RequestsHttp2),
        );
    }
    int(
        out,
        "Resends (never reached the server):",
        t.counter(Counter::Resends),
    );
    for (label, c) in [
        ("  unsent:", Counter::ResendsUnsent),
        (
            "  crossed the server's close:",
            Counter::ResendsCrossedClose,
        ),
        ("  HTTP/2 stream refused:", Counter::ResendsRefusedStream),
        ("  HTTP/2 GOAWAY:", Counter::ResendsGoAway),
    ] {
        if t.counter(c) > 0 {
            int(out, label, t.counter(c));
        }
    }
    if t.counter(Counter::InexactStamps) > 0 {
        int(
            out,
            "Events stamped by an upper bound:",
            t.counter(Counter::InexactStamps),
        );
    }
}

/// Where output token counts came from (a generation run's).
fn token_source_line(out: &mut String, t: &cicada_metrics::MetricSet, s: &Summary) {
    let source = s.token_source.map_or("none", |src| src.name());
    let counted = [
        ("usage", t.counter(Counter::TokensFromUsage)),
        ("tokenizer", t.counter(Counter::TokensFromTokenizer)),
        ("events", t.counter(Counter::TokensFromEvents)),
    ];
    let detail: Vec<String> = counted
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    int(
        out,
        "Output token source:",
        format!("{source} ({})", detail.join(", ")),
    );
}

/// Metrics beyond vLLM's block that the console does not list already.
fn extra_metrics(out: &mut String, r: &RunResult, s: &Summary) {
    let shown: Vec<String> = r.scenario.output.percentile_metrics.clone();
    for m in [
        Metric::Icl,
        Metric::ScheduleLag,
        Metric::TtftCo,
        Metric::E2elCo,
        Metric::TokenLatency,
    ] {
        if !shown.iter().any(|n| n == m.name()) && s.metric(m).is_some() {
            metric_block(out, s, m, &r.scenario.output.metric_percentiles);
        }
    }
    if let Some(tps) = s.metric(Metric::OutputTpsPerRequest) {
        section(out, "Output Speed per Request");
        float(out, "Mean output tok/s per request:", tps.mean);
        float(out, "Median output tok/s per request:", tps.median);
    }
}

/// Every outcome class with its count and first error.
fn outcome_lines(out: &mut String, t: &cicada_metrics::MetricSet) {
    section(out, "Outcomes");
    for (o, c) in t.outcomes.iter() {
        let line = format!("{:<40} {:<10}", format!("{o}:"), c.count);
        match &c.first_error {
            Some(e) if !o.is_ok() => {
                let _ = writeln!(out, "{line} first: {}", one_line(e, 120));
            }
            _ => {
                let _ = writeln!(out, "{}", line.trim_end());
            }
        }
    }
}

/// What the figures do not say by themselves: short outputs, disagreeing
/// counts, lost workers, an interrupted run.
fn warnings(out: &mut String, r: &RunResult) {
    let t = &r.total;
    for route in &r.proxy_routes {
        // the proxy sits inside every latency of these requests
        let _ = writeln!(out, "proxy: {route}");
    }
    if t.counter(Counter::ShortOutputs) > 0 {
        let advice = if r.ignore_eos_sent() {
            "although ignore_eos was sent: the server does not honour it"
        } else {
            "(set sampling.ignore_eos = true if the server supports it)"
        };
        let _ = writeln!(
            out,
            "warning: {} requests returned fewer tokens than asked {advice}",
            t.counter(Counter::ShortOutputs)
        );
    }
    if t.counter(Counter::TokenCountMismatch) > 0 {
        let _ = writeln!(
            out,
            "warning: for {} requests the server's usage and the tokenizer disagreed by more than 2 %",
            t.counter(Counter::TokenCountMismatch)
        );
    }
    if t.counter(Counter::EventsOverUsage) > 0 {
        let _ = writeln!(
            out,
            "warning: {} requests got more than {EVENTS_OVER_USAGE_RATIO} content events per output token the server's usage counted: ITL, ICL and token timing mean little for such a server",
            t.counter(Counter::EventsOverUsage)
        );
    }
    let not_sent = r.not_sent_at_end();
    if not_sent > 0 {
        let by: Vec<String> = r
            .worker_shares
            .iter()
            .filter(|w| w.not_sent_at_end > 0)
            .map(|w| format!("worker {}: {}", w.index, w.not_sent_at_end))
            .collect();
        let _ = writeln!(
            out,
            "warning: {not_sent} requests due before the time limit were not sent ({}): the workers were behind their schedule when it came, so the achieved rate is below the asked one; they were not sent late",
            by.join(", ")
        );
    }
    for l in &r.lost {
        let share = if r.planned > 0 {
            format!(
                " ({:.1} % of the run's planned requests were never reported)",
                100.0 * l.planned.saturating_sub(l.reported) as f64 / r.planned as f64
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "DEGRADED: worker {} ({}) lost at {:.1}s: {}; it reported {} of its {} planned requests{share}",
            l.index, l.host, l.at_s, l.reason, l.reported, l.planned
        );
    }
    if let Some(sig) = r.interrupted {
        let _ = writeln!(
            out,
            "PARTIAL: interrupted by {sig}; figures cover the requests that finished"
        );
    }
}

/// The server's own means from its `/metrics` histograms (exact: sum over
/// count) beside the client's: the TTFT difference is what the network, the
/// HTTP front end and the client add; the TPOT difference is the streaming
/// path's cost per token.
fn client_vs_server_metrics(out: &mut String, s: &Summary, f: &ServerFigures) {
    let pairs = [
        ("TTFT", s.metric(Metric::Ttft), f.ttft),
        ("TPOT", s.metric(Metric::Tpot), f.tpot),
    ];
    if !pairs.iter().any(|(_, c, h)| c.is_some() && h.is_some()) {
        return;
    }
    section(out, &format!("Client vs Server ({} /metrics)", f.source));
    for (label, client, server) in pairs {
        if let (Some(c), Some(h)) = (client, server) {
            float(out, &format!("Mean {label} (client) (ms):"), c.mean);
            float(out, &format!("Mean {label} (server) (ms):"), h.mean_ms);
            float(
                out,
                &format!("Mean {label} client - server (ms):"),
                c.mean - h.mean_ms,
            );
        }
    }
}

/// The server's own per-request timing beside the client's (llama.cpp's
/// `timings`), when responses carried it.
fn client_vs_server(out: &mut String, s: &Summary, t: &cicada_metrics::MetricSet) {
    let Some(prompt) = s.metric(Metric::ServerPromptTime) else {
        return;
    };
    section(out, "Client vs Server (per request)");
    int(out, "Requests with server timings:", prompt.count);
    float(out, "Mean server prompt time (ms):", prompt.mean);
    if let (Some(ttft), Some(over)) = (
        s.metric(Metric::Ttft),
        s.metric(Metric::TtftMinusServerPrompt),
    ) {
        float(out, "Mean TTFT (client) (ms):", ttft.mean);
        float(out, "Mean TTFT - server prompt (ms):", over.mean);
        float(
            out,
            "P99 TTFT - server prompt (ms):",
            over.percentile(99.0).unwrap_or(over.max),
        );
    }
    if let Some(per_token) = s.metric(Metric::ServerTpot) {
        float(out, "Mean server time per token (ms):", per_token.mean);
        if let Some(tpot) = s.metric(Metric::Tpot) {
            float(out, "Mean TPOT (client) (ms):", tpot.mean);
        }
    }
    let below = t.counter(Counter::TtftBelowServerPrompt);
    if below > 0 {
        let _ = writeln!(
            out,
            "warning: {below} requests had a TTFT shorter than the server's prompt time (a clock or a report is wrong)"
        );
    }
}

/// The servers' own view, from their Prometheus metrics (only what they expose).
fn render_server(out: &mut String, f: &ServerFigures) {
    section(out, &format!("Server-side ({} /metrics)", f.source));
    let count = |out: &mut String, label: &str, v: Option<f64>| {
        if let Some(v) = v {
            int(out, label, v.round() as u64);
        }
    };
    let pct = |out: &mut String, label: &str, v: Option<f64>| {
        if let Some(v) = v {
            float(out, label, v * 100.0);
        }
    };
    count(out, "Server requests finished:", f.requests_finished);
    count(out, "Server prompt tokens:", f.prompt_tokens);
    count(out, "Server generation tokens:", f.generation_tokens);
    pct(out, "Prefix cache hit rate (%):", f.prefix_cache_hit_rate);
    count(out, "Prefix cache hits (tokens):", f.prefix_cache_hits);
    count(out, "Preemptions:", f.preemptions);
    pct(out, "Peak KV-cache usage (%):", f.kv_cache_usage_peak);
    count(
        out,
        "Peak running requests (server):",
        f.running_requests_peak,
    );
    count(
        out,
        "Peak waiting requests (server):",
        f.waiting_requests_peak,
    );
    pct(
        out,
        "Spec decode acceptance rate (%):",
        f.spec_decode_acceptance_rate,
    );
    if let Some(v) = f.spec_decode_acceptance_length {
        float(out, "Spec decode acceptance length:", v);
    }
    count(out, "Spec decode drafts:", f.spec_decode_num_drafts);
    count(out, "Spec decode draft tokens:", f.spec_decode_draft_tokens);
    count(
        out,
        "Spec decode accepted tokens:",
        f.spec_decode_accepted_tokens,
    );
    if let Some(rates) = &f.spec_decode_per_position_acceptance_rates {
        let shown: Vec<String> = rates.iter().map(|r| format!("{:.1}", r * 100.0)).collect();
        int(
            out,
            "Spec decode per-position acceptance (%):",
            shown.join(", "),
        );
    }
    for (label, h) in [
        ("TTFT", &f.ttft),
        ("queue time", &f.queue_time),
        ("E2EL", &f.e2el),
        ("TPOT", &f.tpot),
        ("ITL", &f.itl),
    ] {
        if let Some(h) = h {
            float(out, &format!("Server mean {label} (ms):"), h.mean_ms);
            // only the bucket is known: its bounds, not a made-up point
            int(out, &format!("Server P50 {label} (ms, bucket):"), h.p50_ms);
            int(out, &format!("Server P99 {label} (ms, bucket):"), h.p99_ms);
        }
    }
}

fn client_lines(out: &mut String, c: &super::client_health::ClientHealth, tokens: u64) {
    section(out, "Client (the load generator itself)");
    let per_token = if tokens > 0 {
        format!(
            " ({:.2} µs per output token)",
            c.cpu_us as f64 / tokens as f64
        )
    } else {
        String::new()
    };
    int(
        out,
        "Worker CPU time (s):",
        format!("{:.2}{per_token}", c.cpu_us as f64 / 1e6),
    );
    float(out, "Worker peak RSS (MB):", c.peak_rss_bytes as f64 / 1e6);
    float(out, "Runtime stall p99 (ms):", c.stall_p99_ms);
    if c.client_bound {
        let _ = writeln!(
            out,
            "CLIENT-BOUND: {}. These figures show this client's limit, not the server's: add workers or cores.",
            c.reasons.join("; ")
        );
    }
    crate::clocks::clock_lines(out, &c.workers);
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
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

//! The server's own view beside the client's: its per-request timings and
//! its Prometheus figures.

use std::fmt::Write as _;

use cicada_metrics::{Counter, Metric, Summary};

use super::{float, int, section};
use crate::server::ServerFigures;

/// The server's own means from its `/metrics` histograms (exact: sum over
/// count) beside the client's: the TTFT difference is what the network, the
/// HTTP front end and the client add; the TPOT difference is the streaming
/// path's cost per token.
pub(super) fn client_vs_server_metrics(out: &mut String, s: &Summary, f: &ServerFigures) {
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
pub(super) fn client_vs_server(out: &mut String, s: &Summary, t: &cicada_metrics::MetricSet) {
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
pub(super) fn render_server(out: &mut String, f: &ServerFigures) {
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

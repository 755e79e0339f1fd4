//! cicada's lines after vLLM's block: the fleet and what was sent, the
//! extra metrics, outcomes and errors, warnings and the client's own health.

use std::fmt::Write as _;

use cicada_metrics::{Counter, EVENTS_OVER_USAGE_RATIO, Metric, Summary};

use super::server::{client_vs_server, client_vs_server_metrics, render_server};
use super::{float, int, metric_block, rule, section};
use crate::RunResult;

pub(super) fn render_extras(out: &mut String, r: &RunResult, s: &Summary) {
    let t = &r.total;
    rule(out, "cicada", '=');
    run_lines(out, r, s);
    extra_metrics(out, r, s);
    super::steady::lines(out, r);
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
    sessions(out, r, s);
}

/// Multi-turn sessions: how many ran to their end, their turns, and TTFT
/// of first turns against later ones (a prefix cache at work shows here).
fn sessions(out: &mut String, r: &RunResult, s: &Summary) {
    let t = &r.total;
    let started = t.counter(Counter::SessionsStarted);
    let unreported = r.lost_planned_sessions();
    if started == 0 && unreported == 0 {
        return;
    }
    let completed = t.counter(Counter::SessionsCompleted);
    section(out, "Sessions");
    int(out, "Sessions started:", started);
    int(out, "Sessions completed:", completed);
    int(out, "Sessions cut:", started.saturating_sub(completed));
    if unreported > 0 {
        int(out, "Sessions lost unreported:", unreported);
    }
    if started > 0 {
        float(
            out,
            "Mean turns per session:",
            t.counter(Counter::SessionTurns) as f64 / started as f64,
        );
    }
    for (m, label) in [
        (Metric::TtftFirstTurn, "first turn"),
        (Metric::TtftLaterTurns, "later turns"),
    ] {
        if let Some(d) = s.metric(m) {
            float(out, &format!("Mean TTFT, {label} (ms):"), d.mean);
            float(out, &format!("Median TTFT, {label} (ms):"), d.median);
        }
    }
    session_figures(out, s);
}

/// TTFT by turn index and the completed sessions' own figures.
fn session_figures(out: &mut String, s: &Summary) {
    let by_turn: Vec<String> = Metric::TTFT_BY_TURN
        .iter()
        .zip(["2", "3", "4", "5-8", "9-16", "17+"])
        .filter_map(|(m, turn)| {
            s.metric(*m)
                .map(|d| format!("{turn}: {:.2} / {:.2}", d.mean, d.median))
        })
        .collect();
    if !by_turn.is_empty() {
        int(out, "TTFT by turn (ms, mean / median):", by_turn.join(", "));
    }
    if let Some(d) = s.metric(Metric::SessionDuration) {
        float(out, "Mean session duration (ms):", d.mean);
        float(out, "Median session duration (ms):", d.median);
    }
    for (m, label) in [
        (
            Metric::SessionToolTime,
            "Mean time in tools per session (ms):",
        ),
        (
            Metric::SessionServerTime,
            "Mean server time per session (ms):",
        ),
        (
            Metric::SessionRequests,
            "Mean requests per completed session:",
        ),
    ] {
        if let Some(d) = s.metric(m) {
            float(out, label, d.mean);
        }
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
        let sessions = if l.planned_sessions > 0 {
            format!(
                ", and started {} of its {} planned sessions",
                l.started_sessions, l.planned_sessions
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "DEGRADED: worker {} ({}) lost at {:.1}s: {}; it reported {} of its {} planned requests{share}{sessions}",
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

fn client_lines(out: &mut String, c: &crate::client_health::ClientHealth, tokens: u64) {
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

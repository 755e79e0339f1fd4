//! `/metrics`: what the mock did, in vLLM's Prometheus metric names (V1
//! engine: `model_name` and `engine` labels, `_total` counters, histograms
//! with vLLM's buckets), so server-side scraping is tested against the format
//! users' servers expose.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::MockConfig;
use crate::stats::{SpecCounts, State};

fn counter(out: &mut String, name: &str, help: &str, labels: &str, v: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{{labels}}} {v}.0"
    );
}

fn gauge(out: &mut String, name: &str, help: &str, labels: &str, v: f64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {v:?}"
    );
}

/// The exposition text for the current state.
pub(crate) fn render(state: &State, config: &MockConfig) -> String {
    let m = &state.server;
    let _guard = m.render.lock();
    let model = config.model.replace('\\', "\\\\").replace('"', "\\\"");
    let labels = format!("engine=\"0\",model_name=\"{model}\"");
    let mut out = String::with_capacity(8192);
    scheduler(&mut out, state, config, &labels);
    tokens_and_requests(&mut out, state, config, &labels);
    if config.spec_tokens > 0 {
        speculative(&mut out, state, config, &labels);
    }
    latencies(&mut out, state, &labels);
    out
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// Requests running and waiting, KV-cache usage.
fn scheduler(out: &mut String, state: &State, config: &MockConfig, labels: &str) {
    gauge(
        out,
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        labels,
        load(&state.in_flight) as f64,
    );
    gauge(
        out,
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        labels,
        0.0,
    );
    gauge(
        out,
        "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
        labels,
        state.kv_usage(config.kv_cache_tokens),
    );
}

/// Preemptions, prompt and generation tokens, prefix-cache queries and
/// hits, and finished requests by reason.
fn tokens_and_requests(out: &mut String, state: &State, config: &MockConfig, labels: &str) {
    let m = &state.server;
    counter(
        out,
        "vllm:num_preemptions_total",
        "Cumulative number of preemption from the engine.",
        labels,
        load(&m.all.preemptions),
    );
    counter(
        out,
        "vllm:prompt_tokens_total",
        "Number of prefill tokens processed.",
        labels,
        load(&m.all.prompt_tokens),
    );
    counter(
        out,
        "vllm:generation_tokens_total",
        "Number of generation tokens processed.",
        labels,
        load(&m.generation_tokens),
    );
    if config.prefix_cache {
        counter(
            out,
            "vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.",
            labels,
            load(&m.all.prompt_tokens),
        );
        counter(
            out,
            "vllm:prefix_cache_hits_total",
            "Prefix cache hits, in terms of number of cached tokens.",
            labels,
            load(&m.all.cached_tokens),
        );
    }
    let _ = writeln!(
        out,
        "# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter"
    );
    for (reason, v) in [("length", &m.finished_length), ("stop", &m.finished_stop)] {
        let _ = writeln!(
            out,
            "vllm:request_success_total{{{labels},finished_reason=\"{reason}\"}} {}.0",
            load(v)
        );
    }
}

/// Speculative decoding: drafts, draft and accepted tokens, per position.
fn speculative(out: &mut String, state: &State, config: &MockConfig, labels: &str) {
    let m = &state.server;
    let SpecCounts {
        drafts,
        draft_tokens,
        accepted,
        per_position,
    } = m.all.spec();
    counter(
        out,
        "vllm:spec_decode_num_drafts_total",
        "Number of spec decoding drafts.",
        labels,
        drafts,
    );
    counter(
        out,
        "vllm:spec_decode_num_draft_tokens_total",
        "Number of draft tokens.",
        labels,
        draft_tokens,
    );
    counter(
        out,
        "vllm:spec_decode_num_accepted_tokens_total",
        "Number of accepted tokens.",
        labels,
        accepted,
    );
    let _ = writeln!(
        out,
        "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.\n# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"
    );
    for p in 0..config.spec_tokens as usize {
        let _ = writeln!(
            out,
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position=\"{p}\"}} {}.0",
            per_position.get(p).copied().unwrap_or(0)
        );
    }
}

/// Server-side TTFT, queue time and end-to-end latency histograms.
fn latencies(out: &mut String, state: &State, labels: &str) {
    let m = &state.server;
    m.ttft.render(
        out,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        labels,
    );
    m.queue.render(
        out,
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        labels,
    );
    m.e2e.render(
        out,
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        labels,
    );
}

//! `/metrics`: what the mock did, in vLLM's Prometheus metric names (V1
//! engine: `model_name` and `engine` labels, `_total` counters, histograms
//! with vLLM's buckets), so server-side scraping is tested against the format
//! users' servers expose.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::MockConfig;
use crate::stats::{SpecCounts, State, Tally};

/// vLLM's TTFT buckets, seconds.
const TTFT_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// vLLM's request-latency buckets (queue, e2e), seconds.
const LATENCY_BUCKETS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A Prometheus histogram with fixed buckets.
#[derive(Debug)]
pub(crate) struct PromHistogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); the last is +Inf.
    counts: Vec<AtomicU64>,
    sum_us: AtomicU64,
}

impl PromHistogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
        }
    }

    /// Record one duration.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = self
            .bounds
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map_or("+Inf".to_string(), |b| format!("{b:?}"));
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}.0");
        }
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}.0");
    }
}

/// Everything `/metrics` reports beyond the shared state's own counters.
#[derive(Debug)]
pub(crate) struct ServerMetrics {
    /// Counters probes move too.
    pub all: Tally,
    pub generation_tokens: AtomicU64,
    pub finished_length: AtomicU64,
    pub finished_stop: AtomicU64,
    pub ttft: PromHistogram,
    pub queue: PromHistogram,
    pub e2e: PromHistogram,
    /// Serialises rendering (cheap; scrapes are rare).
    render: Mutex<()>,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        Self {
            all: Tally::default(),
            generation_tokens: AtomicU64::new(0),
            finished_length: AtomicU64::new(0),
            finished_stop: AtomicU64::new(0),
            ttft: PromHistogram::new(&TTFT_BUCKETS),
            queue: PromHistogram::new(&LATENCY_BUCKETS),
            e2e: PromHistogram::new(&LATENCY_BUCKETS),
            render: Mutex::new(()),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_inf() {
        let h = PromHistogram::new(&TTFT_BUCKETS);
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(30));
        h.observe(Duration::from_secs(5000));
        let mut out = String::new();
        h.render(&mut out, "x", "help", "a=\"b\"");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.005\"} 1.0"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.04\"} 2.0"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"+Inf\"} 3.0"), "{out}");
        assert!(out.contains("x_count{a=\"b\"} 3.0"), "{out}");
        assert!(out.contains("x_sum{a=\"b\"} 5000.033"), "{out}");
    }
}

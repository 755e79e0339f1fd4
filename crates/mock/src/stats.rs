use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::Fault;

/// Most requests the log keeps; later ones are counted but not logged.
const LOG_CAPACITY: usize = 2_000_000;

/// One hook call as the mock saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedHook {
    /// The route called (`/reset_prefix_cache`, ...).
    pub route: String,
    /// The status it answered.
    pub status: u16,
    /// Completion requests received before it (probes excluded).
    pub requests: u64,
    /// Responses fully sent before it.
    pub completed: u64,
    /// Streams open when it came.
    pub in_flight: u64,
    /// When it came, µs since the Unix epoch.
    pub unix_us: u64,
    /// Whether it carried the mock's API key (always true without one).
    pub authorized: bool,
}

/// One request as the mock saw it arrive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// Arrival order (0-based).
    pub seq: u64,
    /// Arrival, µs since the mock started.
    pub offset_us: u64,
    /// Arrival, µs since the Unix epoch (comparable across processes).
    pub unix_us: u64,
    /// Request path.
    pub path: String,
    /// FNV-1a fingerprint of the prompt text.
    pub prompt_fingerprint: u64,
    /// Prompt words (the mock's token count).
    pub prompt_tokens: u32,
    /// Output tokens asked for.
    pub max_tokens: Option<u32>,
    /// Whether the response streamed.
    pub stream: bool,
    /// Fault injected into this request, if any.
    pub fault: Option<Fault>,
    /// The client's `x-request-id` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The session the request named (`x-session-id`, `x-dynamo-session-id`
    /// or `x-smg-routing-key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Chat messages (role and content fingerprint), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<LoggedMessage>,
    /// Output tokens the mock answers with (fewer than asked after a modelled end-of-sequence).
    pub output_tokens: u32,
    /// Fingerprint of the full answer text (what a client that read it all received).
    pub output_fingerprint: u64,
    /// Prompt tokens served from the simulated prefix cache, when it is on
    /// (reported as `usage.prompt_tokens_details.cached_tokens` with
    /// `prompt_tokens_details`, and as llama.cpp's `timings.cache_n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u32>,
    /// The answer was a tool call or JSON broken on purpose (`invalid_output`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invalid_output: bool,
    /// Images the request carried (`image_url` parts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images: u64,
    /// Bytes of the uploaded audio file (transcriptions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_bytes: Option<u64>,
    /// Texts of a pooling request (the `input` list of an embeddings request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<u32>,
    /// The `model` the request named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The prompt came as token ids (`prompt: [ids]`); `prompt_tokens`
    /// is then their count.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub token_ids: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One chat message of a logged request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedMessage {
    /// `role` as sent.
    pub role: String,
    /// Fingerprint of the message's text.
    pub fingerprint: u64,
}

/// Lateness of the mock's token emission behind its own schedule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatenessStats {
    /// Content events measured.
    pub count: u64,
    /// Mean lateness, µs.
    pub mean_us: f64,
    /// Median lateness, µs.
    pub p50_us: u64,
    /// 99th percentile lateness, µs.
    pub p99_us: u64,
    /// Worst lateness, µs.
    pub max_us: u64,
    /// Mean lateness of first content events only (adds to TTFT), µs.
    pub first_event_mean_us: f64,
}

/// The mock's ground truth, served at `/mock/stats`.
///
/// Readiness probes (requests carrying `X-Cicada-Probe`) are served without
/// faults and counted only in `probes` (and in `/metrics`, as a real server
/// would count them), so the other figures describe the measured run alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MockStats {
    /// Completion requests received (probes excluded).
    pub requests: u64,
    /// Readiness probes received.
    pub probes: u64,
    /// TCP connections accepted.
    pub connections: u64,
    /// Prompt tokens of the requests received (probes excluded).
    pub prompt_tokens: u64,
    /// Prompt tokens found in the simulated prefix cache (probes excluded).
    pub cached_tokens: u64,
    /// Requests that arrived when the KV cache could not hold them (probes excluded).
    pub preemptions: u64,
    /// Speculative decoding: steps, proposed tokens and accepted tokens (probes excluded).
    pub spec_drafts: u64,
    pub spec_draft_tokens: u64,
    pub spec_accepted_tokens: u64,
    /// Highest KV-cache usage (0..1) seen at any arrival or token.
    pub max_kv_usage: f64,
    /// Streams currently open.
    pub in_flight: u64,
    /// Most streams open at once.
    pub max_in_flight: u64,
    /// Responses fully sent.
    pub completed: u64,
    /// Output tokens sent.
    pub output_tokens: u64,
    /// Tool-call and JSON answers broken on purpose, whose request had no
    /// fault (what a client's check must count as `invalid_output`).
    #[serde(default)]
    pub invalid_outputs: u64,
    /// Images received in chat messages (probes excluded).
    pub images: u64,
    /// Bytes of those images, decoded from their data URLs (probes excluded).
    pub image_bytes: u64,
    /// Audio files received for transcription (probes excluded).
    pub audio_files: u64,
    /// Bytes of those files (probes excluded).
    pub audio_bytes: u64,
    /// Texts received in pooling requests (embeddings inputs; probes excluded).
    pub inputs: u64,
    /// Requests by the `model` they named (probes excluded; a request
    /// naming no model is not counted here).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, u64>,
    /// Faults injected, by fault.
    pub faults: BTreeMap<String, u64>,
    /// Faults injected, by the outcome class a correct client reports.
    pub expected_outcomes: BTreeMap<String, u64>,
    /// Emission lateness.
    pub lateness: LatenessStats,
}

/// Lateness sums a stream accumulates before merging once at its end.
#[derive(Debug, Default)]
pub(crate) struct StreamLateness {
    pub values: Vec<u64>,
    pub first: Option<u64>,
}

/// Speculative-decoding counters, vLLM's way (drafts are steps).
#[derive(Debug, Default, Clone)]
pub(crate) struct SpecCounts {
    pub drafts: u64,
    pub draft_tokens: u64,
    pub accepted: u64,
    /// Accepted tokens by draft position.
    pub per_position: Vec<u64>,
}

/// Counters that only the run's own requests move (`/mock/stats`); `/metrics`
/// keeps its own copies that probes move too.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub prompt_tokens: AtomicU64,
    pub cached_tokens: AtomicU64,
    pub preemptions: AtomicU64,
    pub spec: Mutex<SpecCounts>,
    pub images: AtomicU64,
    pub image_bytes: AtomicU64,
    pub audio_files: AtomicU64,
    pub audio_bytes: AtomicU64,
    pub inputs: AtomicU64,
    /// Requests by the model they named.
    pub models: Mutex<BTreeMap<String, u64>>,
}

impl Tally {
    /// Count one request naming `model`.
    pub fn named(&self, model: &str) {
        if let Ok(mut m) = self.models.lock() {
            match m.get_mut(model) {
                Some(n) => *n += 1,
                None => {
                    m.insert(model.to_string(), 1);
                }
            }
        }
    }

    pub fn spec_step(&self, tokens: u32, proposed: u32) {
        if proposed == 0 {
            return;
        }
        let accepted = tokens.saturating_sub(1).min(proposed);
        if let Ok(mut s) = self.spec.lock() {
            s.drafts += 1;
            s.draft_tokens += u64::from(proposed);
            s.accepted += u64::from(accepted);
            if s.per_position.len() < proposed as usize {
                s.per_position.resize(proposed as usize, 0);
            }
            for p in 0..accepted as usize {
                s.per_position[p] += 1;
            }
        }
    }

    pub fn spec(&self) -> SpecCounts {
        self.spec.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

pub(crate) struct State {
    pub requests: AtomicU64,
    pub probes: AtomicU64,
    pub connections: AtomicU64,
    pub in_flight: AtomicU64,
    pub max_in_flight: AtomicU64,
    pub completed: AtomicU64,
    pub output_tokens: AtomicU64,
    /// Answers broken on purpose (no fault, probes excluded).
    pub invalid_outputs: AtomicU64,
    /// Ground truth of the run (probes excluded).
    pub run: Tally,
    /// What `/metrics` reports (probes included).
    pub server: ServerMetrics,
    /// Tokens held in the KV cache by open streams (prompt + generated so far).
    pub kv_used: AtomicU64,
    /// Tokens open streams may grow to (prompt + requested output).
    pub kv_reserved: AtomicU64,
    /// Highest KV usage seen, in millionths.
    pub max_kv_ppm: AtomicU64,
    pub prefix: crate::cache::PrefixCache,
    faults: Mutex<BTreeMap<Fault, u64>>,
    lateness: Mutex<(Histogram<u64>, u64, u64, u64)>,
    log: Mutex<Vec<LoggedRequest>>,
    /// Server-hook calls, in order (`GET /mock/hooks`).
    pub hooks: Mutex<Vec<LoggedHook>>,
}

impl State {
    pub fn new() -> Self {
        let mut h = match Histogram::new(3) {
            Ok(h) => h,
            Err(e) => unreachable!("hdrhistogram rejected 3 significant digits: {e:?}"),
        };
        h.auto(true);
        Self {
            requests: AtomicU64::new(0),
            probes: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            run: Tally::default(),
            server: ServerMetrics::default(),
            kv_used: AtomicU64::new(0),
            kv_reserved: AtomicU64::new(0),
            max_kv_ppm: AtomicU64::new(0),
            prefix: crate::cache::PrefixCache::default(),
            in_flight: AtomicU64::new(0),
            max_in_flight: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            output_tokens: AtomicU64::new(0),
            invalid_outputs: AtomicU64::new(0),
            faults: Mutex::new(BTreeMap::new()),
            lateness: Mutex::new((h, 0, 0, 0)),
            log: Mutex::new(Vec::new()),
            hooks: Mutex::new(Vec::new()),
        }
    }

    pub fn stream_opened(&self) {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
    }

    pub fn stream_closed(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// KV-cache usage as a fraction of `capacity` tokens (capped at 1).
    pub fn kv_usage(&self, capacity: u64) -> f64 {
        (self.kv_used.load(Ordering::Relaxed) as f64 / capacity.max(1) as f64).min(1.0)
    }

    /// `n` tokens entered (`up`) or left the KV cache; tracks the peak usage.
    pub fn kv_change(&self, n: u64, up: bool, capacity: u64) {
        if up {
            let now = self.kv_used.fetch_add(n, Ordering::Relaxed) + n;
            let ppm = (now as f64 / capacity.max(1) as f64).min(1.0) * 1e6;
            self.max_kv_ppm.fetch_max(ppm as u64, Ordering::Relaxed);
        } else {
            self.kv_used.fetch_sub(n, Ordering::Relaxed);
        }
    }

    pub fn log_request(&self, entry: LoggedRequest) {
        if entry.invalid_output && entry.fault.is_none() {
            self.invalid_outputs.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(f) = entry.fault
            && let Ok(mut faults) = self.faults.lock()
        {
            *faults.entry(f).or_default() += 1;
        }
        if let Ok(mut log) = self.log.lock()
            && log.len() < LOG_CAPACITY
        {
            log.push(entry);
        }
    }

    pub fn merge_lateness(&self, l: &StreamLateness) {
        if l.values.is_empty() {
            return;
        }
        if let Ok(mut g) = self.lateness.lock() {
            let (hist, sum, first_sum, first_n) = &mut *g;
            for v in &l.values {
                // grow to fit: a clamped record would hide exactly the late events we report
                if hist.record(*v).is_err() {
                    hist.saturating_record(*v);
                }
                *sum += v;
            }
            if let Some(f) = l.first {
                *first_sum += f;
                *first_n += 1;
            }
        }
    }

    pub fn log(&self) -> Vec<LoggedRequest> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub fn snapshot(&self) -> MockStats {
        let faults = self.faults.lock().map(|f| f.clone()).unwrap_or_default();
        let mut expected = BTreeMap::new();
        for (f, n) in &faults {
            *expected
                .entry(f.expected_outcome().to_string())
                .or_default() += n;
        }
        let lateness = self
            .lateness
            .lock()
            .map(|g| {
                let (h, sum, first_sum, first_n) = &*g;
                let n = h.len();
                LatenessStats {
                    count: n,
                    mean_us: if n == 0 { 0.0 } else { *sum as f64 / n as f64 },
                    p50_us: if n == 0 { 0 } else { h.value_at_quantile(0.5) },
                    p99_us: if n == 0 { 0 } else { h.value_at_quantile(0.99) },
                    max_us: if n == 0 { 0 } else { h.max() },
                    first_event_mean_us: if *first_n == 0 {
                        0.0
                    } else {
                        *first_sum as f64 / *first_n as f64
                    },
                }
            })
            .unwrap_or_default();
        let spec = self.run.spec();
        MockStats {
            requests: self.requests.load(Ordering::Relaxed),
            probes: self.probes.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
            prompt_tokens: self.run.prompt_tokens.load(Ordering::Relaxed),
            cached_tokens: self.run.cached_tokens.load(Ordering::Relaxed),
            preemptions: self.run.preemptions.load(Ordering::Relaxed),
            spec_drafts: spec.drafts,
            spec_draft_tokens: spec.draft_tokens,
            spec_accepted_tokens: spec.accepted,
            max_kv_usage: self.max_kv_ppm.load(Ordering::Relaxed) as f64 / 1e6,
            in_flight: self.in_flight.load(Ordering::Relaxed),
            max_in_flight: self.max_in_flight.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            output_tokens: self.output_tokens.load(Ordering::Relaxed),
            invalid_outputs: self.invalid_outputs.load(Ordering::Relaxed),
            images: self.run.images.load(Ordering::Relaxed),
            image_bytes: self.run.image_bytes.load(Ordering::Relaxed),
            audio_files: self.run.audio_files.load(Ordering::Relaxed),
            audio_bytes: self.run.audio_bytes.load(Ordering::Relaxed),
            inputs: self.run.inputs.load(Ordering::Relaxed),
            faults: faults
                .into_iter()
                .map(|(f, n)| {
                    let name = serde_json::to_value(f)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| format!("{f:?}"));
                    (name, n)
                })
                .collect(),
            expected_outcomes: expected,
            models: self
                .run
                .models
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            lateness,
        }
    }
}
// ---- the counters behind `/metrics` (rendered by `prom`)

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

    pub(crate) fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
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
    pub render: Mutex<()>,
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

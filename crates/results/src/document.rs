//! `result.json` as one type: written by `report::json` from a finished step,
//! read back by `cicada report` (compare and `--merge`), and just as able to
//! read `vllm bench serve --save-result` files, whose fields are a subset.
//!
//! Field order is the file's key order. Every field is optional when read
//! (a vLLM file has no `cicada` section, older files lack newer keys); the
//! writer fills what it knows. Numbers that are not finite are written as
//! `null`, as serde_json writes them.

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::server::ServerFigures;
use cicada_scenarios::dataset::DatasetReport;

/// Version of the `result.json` layout; bumped on incompatible changes.
/// 2: `cicada.histograms.*.sum_sq` is the exact integer sum of squares, as
/// a decimal string (1 wrote a float; both are read).
pub const SCHEMA_VERSION: u32 = 2;

/// The whole file: vLLM's `--save-result` fields first, then cicada's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultDocument {
    pub schema_version: Option<u32>,
    /// Start of the run, vLLM's `%Y%m%d-%H%M%S`.
    pub date: Option<String>,
    pub backend: Option<String>,
    /// `vllm bench serve --label`: what its user named the run (cicada
    /// names a run by its scenario's `name` and leaves this out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub model_id: Option<String>,
    pub tokenizer_id: Option<String>,
    #[serde(default, deserialize_with = "whole_number")]
    pub num_prompts: Option<u64>,
    pub request_rate: Option<RequestRate>,
    pub burstiness: Option<f64>,
    pub max_concurrency: Option<u32>,
    pub duration: Option<f64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub completed: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub failed: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub total_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub total_output_tokens: Option<u64>,
    pub request_throughput: Option<f64>,
    pub request_goodput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub total_token_throughput: Option<f64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub max_output_tokens_per_s: Option<u64>,
    #[serde(default, deserialize_with = "whole_number")]
    pub max_concurrent_requests: Option<u64>,
    /// `mean_ttft_ms`, `median_ttft_ms`, `std_ttft_ms`, `p99_ttft_ms`, ... per metric.
    #[serde(flatten)]
    pub latencies: Latencies,
    /// Everything beyond vLLM's fields (absent from vLLM's own files).
    pub cicada: Option<Cicada>,
}

/// vLLM's request rate: requests per second, or `"inf"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestRate {
    PerSecond(f64),
    /// `"inf"` (everything sent at once).
    Text(String),
}

/// A count written as an integer, read from an integer or a float (vLLM
/// writes some counts as floats).
fn whole_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.map(|v| v.max(0.0) as u64))
}

/// One metric's vLLM-named latency fields, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricLatency {
    /// The metric's name in keys (`ttft`, `tpot`, `itl`, `e2el`).
    pub metric: String,
    pub mean: Option<f64>,
    pub median: Option<f64>,
    pub std: Option<f64>,
    /// (percentile, value), in the file's order.
    pub percentiles: Vec<(f64, Option<f64>)>,
}

impl MetricLatency {
    /// The value at percentile `p`, when the file has it.
    pub fn at(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(q, _)| (q - p).abs() < 1e-9)
            .and_then(|(_, v)| *v)
    }
}

/// The flat latency fields of every metric, in the file's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies(pub Vec<MetricLatency>);

impl Latencies {
    /// The fields of one metric, by its key name.
    pub fn metric(&self, name: &str) -> Option<&MetricLatency> {
        self.0.iter().find(|m| m.metric == name)
    }
}

impl Serialize for Latencies {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for l in &self.0 {
            let name = &l.metric;
            m.serialize_entry(&format!("mean_{name}_ms"), &l.mean)?;
            m.serialize_entry(&format!("median_{name}_ms"), &l.median)?;
            m.serialize_entry(&format!("std_{name}_ms"), &l.std)?;
            for (p, v) in &l.percentiles {
                m.serialize_entry(&format!("p{}_{name}_ms", super::percentile_word(*p)), v)?;
            }
        }
        m.end()
    }
}

/// A latency key: `mean_ttft_ms` -> (mean, ttft); `p99.9_ttft_ms` -> (p99.9, ttft).
fn latency_key(key: &str) -> Option<(&str, &str)> {
    let body = key.strip_suffix("_ms")?;
    let (stat, metric) = body.split_once('_')?;
    let known = ["mean", "median", "std"].contains(&stat)
        || stat
            .strip_prefix('p')
            .is_some_and(|p| p.parse::<f64>().is_ok());
    (known && !metric.is_empty() && !metric.contains('_')).then_some((stat, metric))
}

impl<'de> Deserialize<'de> for Latencies {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Latencies;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a result document's fields")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Latencies, A::Error> {
                let mut out: Vec<MetricLatency> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let Some((stat, metric)) = latency_key(&key) else {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    };
                    let value: Option<f64> = map.next_value()?;
                    let i = match out.iter().position(|m| m.metric == metric) {
                        Some(i) => i,
                        None => {
                            out.push(MetricLatency {
                                metric: metric.to_string(),
                                ..MetricLatency::default()
                            });
                            out.len() - 1
                        }
                    };
                    let m = &mut out[i];
                    match stat {
                        "mean" => m.mean = value,
                        "median" => m.median = value,
                        "std" => m.std = value,
                        p => {
                            let p: f64 = p[1..].parse().map_err(de::Error::custom)?;
                            m.percentiles.push((p, value));
                        }
                    }
                }
                Ok(Latencies(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A JSON object whose keys are data (metric, class or counter names), in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Entries<T>(pub Vec<(String, T)>);

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries(Vec::new())
    }
}

impl<T> FromIterator<(String, T)> for Entries<T> {
    fn from_iter<I: IntoIterator<Item = (String, T)>>(iter: I) -> Self {
        Entries(iter.into_iter().collect())
    }
}

impl<T: Serialize> Serialize for Entries<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, T>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// `cicada`: every metric's statistics, outcomes, counters, per-replica and
/// server-side figures, the fleet, gates, the scenario and the histograms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cicada {
    pub version: String,
    pub scenario_name: String,
    pub scenario_hash: String,
    pub scenario_origin: String,
    /// The step or `[[stages]]` window (0 for a run without either).
    pub stage: u32,
    pub started_at: Option<String>,
    pub started_unix: Option<f64>,
    pub window_start_s: Option<f64>,
    pub workers: u32,
    pub target_urls: Vec<String>,
    pub planned_requests: u64,
    pub sent: u64,
    pub client_input_tokens: u64,
    pub server_input_tokens: Option<u64>,
    pub resends: u64,
    pub achieved_request_rate: Option<f64>,
    pub mean_concurrent_requests: Option<f64>,
    pub peak_concurrent_requests_100ms: Option<f64>,
    pub warmup: Warmup,
    pub client: Option<Client>,
    pub token_source: Option<String>,
    pub token_sources: TokenSources,
    /// Absent from files that count only completions.
    pub outcomes: Option<Entries<OutcomeCount>>,
    pub counters: Entries<u64>,
    pub metrics: Entries<MetricStats>,
    /// A pooling run's items and throughputs (absent from generation runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pooling: Option<Pooling>,
    pub targets: Vec<Target>,
    /// Each model's share, when requests split over `target.models`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelShare>,
    /// Each workload's share (`[[workloads]]`), its goodput against its own SLO.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<ModelShare>,
    pub server: Option<ServerFigures>,
    pub dataset: DatasetReport,
    pub degraded: bool,
    pub lost_workers: Vec<LostWorker>,
    pub lost_planned_requests: u64,
    /// Lost workers' planned sessions they never reported starting (in
    /// flight with no turn reported, or never begun); absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub lost_planned_sessions: u64,
    /// Requests due before the time limit that the workers had not sent by
    /// then (they were behind their schedule); never sent late, not lost.
    pub not_sent_at_end: u64,
    /// Targets reached through a proxy ("<url> via <proxy> (<variable>, <how>)").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proxy_routes: Vec<String>,
    pub worker_shares: Vec<WorkerShare>,
    pub gates: Entries<Gate>,
    pub partial: bool,
    pub interrupted_by: Option<String>,
    /// The server hooks run around the step (`[hooks]`), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<crate::hooks::HookCall>,
    /// The figures over the steady-state window (absent when the step's
    /// load has no plateau to find).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyStateDoc>,
    /// The server was found saturated: why, when, and whether the step
    /// stopped there (absent when it was not, or the load was not an open loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<SaturationDoc>,
    /// An `[abort]` threshold stopped the step: which, the value over the
    /// window, the bound and when (absent unless one tripped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<AbortDoc>,
    /// A sweep's points not run because this step stopped the sweep
    /// (saturated and stopped, aborted, or interrupted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep_skipped: Vec<String>,
    /// Absent from files that cannot be merged again.
    pub histograms: Option<Entries<Histogram>>,
    /// The resolved scenario with secrets redacted, as the scenario file
    /// spells it (its own schema: kept as written, so files of other
    /// versions still read).
    pub scenario: serde_json::Value,
}

/// `cicada.steady_state`: the window in which the load was at its plateau
/// and the figures over it (merged from its intervals' histograms).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SteadyStateDoc {
    /// The rule an interval met to count as the plateau.
    pub criterion: String,
    /// Whether any interval met it; the figures below are null when not.
    pub found: bool,
    /// Window start and end, seconds after the step's start barrier.
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    pub duration_s: Option<f64>,
    /// Report intervals in the window.
    pub intervals: u64,
    /// Requests that ended in the window, any outcome.
    pub requests: u64,
    pub completed: u64,
    pub failed: u64,
    pub request_throughput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub total_token_throughput: Option<f64>,
    pub metrics: Entries<MetricStats>,
}

/// `cicada.saturation`: the server could not keep up with the open loop.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SaturationDoc {
    /// Why, with the figures that decided it.
    pub reason: String,
    /// Seconds after the step's start barrier when it was decided.
    pub at_s: Option<f64>,
    /// The step was stopped there, its results so far kept.
    pub stopped: bool,
}

/// `cicada.abort`: the threshold that stopped the step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AbortDoc {
    /// The `[abort]` key that tripped (`error_rate`, `p99_ttft_ms`, ...).
    pub condition: String,
    /// Its value over the window: a share for `error_rate`, else ms.
    pub observed: Option<f64>,
    /// The bound it went above.
    pub bound: Option<f64>,
    /// The window's start and end, seconds after the step's start barrier.
    pub window_start_s: Option<f64>,
    pub window_end_s: Option<f64>,
    /// Requests that ended in the window (any outcome).
    pub window_requests: u64,
    /// Seconds after the barrier when the step was stopped.
    pub at_s: Option<f64>,
    /// The same in words.
    pub reason: String,
}

/// `cicada.pooling`: what a pooling (embeddings) run served.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pooling {
    /// Items (embedding inputs) of successful requests.
    pub items: u64,
    /// Items per second of the run's duration.
    pub item_throughput: Option<f64>,
    /// Input tokens per second of the run's duration.
    pub input_token_throughput: Option<f64>,
    /// Mean items per successful request.
    pub mean_batch_size: Option<f64>,
}

/// Warm-up requests, kept apart from the results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Warmup {
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub output_tokens: u64,
}

/// The client's health: was the load generator the limit?
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Client {
    pub client_bound: bool,
    pub reasons: Vec<String>,
    pub cpu_us: u64,
    pub cpu_us_per_output_token: Option<f64>,
    pub peak_rss_bytes: u64,
    pub runtime_stall_p50_ms: Option<f64>,
    pub runtime_stall_p99_ms: Option<f64>,
    pub runtime_stall_max_ms: Option<f64>,
    pub workers: Vec<WorkerUse>,
}

/// One worker's resource use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerUse {
    pub worker: u32,
    pub threads: u32,
    pub cpu_us: u64,
    pub cpu_utilization: Option<f64>,
    pub peak_rss_bytes: u64,
    /// Coordinator wall clock minus this worker's, ms (null: not measured).
    pub clock_offset_ms: Option<f64>,
    /// The offset (and the start instant placed with it) is within +- this, ms.
    pub clock_uncertainty_ms: Option<f64>,
    /// The smallest round trip of the clock exchanges, ms.
    pub clock_min_rtt_ms: Option<f64>,
    /// How it placed the start instant: `offset`, `wall_clock` or `delay`.
    pub start_basis: Option<String>,
}

/// Successful requests by where their output count came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TokenSources {
    pub usage: u64,
    pub tokenizer: u64,
    pub events: u64,
}

/// One outcome class: how many, and the first error seen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutcomeCount {
    #[serde(default)]
    pub count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

/// One metric's statistics in its display unit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricStats {
    pub unit: String,
    pub count: u64,
    pub mean: Option<f64>,
    pub median: Option<f64>,
    pub std: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// `p50`, `p99.9`, ... as configured.
    #[serde(flatten)]
    pub percentiles: Entries<Option<f64>>,
}

/// One replica's share of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Target {
    pub url: String,
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub request_throughput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub total_token_throughput: Option<f64>,
    pub request_goodput: Option<f64>,
    pub max_output_tokens_per_s: u64,
    #[serde(default, deserialize_with = "whole_number")]
    pub max_concurrent_requests: Option<u64>,
    pub outcomes: Entries<OutcomeCount>,
    pub metrics: Entries<MetricStats>,
    pub server: Option<ServerFigures>,
    /// Requests per address their connections went to, when they went to
    /// more than one (`target.addresses = "spread"`, or a fallback).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub addresses: std::collections::BTreeMap<String, u64>,
}

/// One model's share of the run (`cicada.models`): what a target's entry
/// holds, by the model the requests named, with its merged histograms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelShare {
    pub name: String,
    pub weight: f64,
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub request_throughput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub total_token_throughput: Option<f64>,
    pub request_goodput: Option<f64>,
    pub max_output_tokens_per_s: u64,
    pub outcomes: Entries<OutcomeCount>,
    pub metrics: Entries<MetricStats>,
    /// Encoded like the run's `histograms`, so models merge exactly across runs.
    pub histograms: Entries<Histogram>,
    /// A workload's sessions, when it started any (`cicada.workloads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionCounts>,
}

/// The sessions of one workload of a mixed run: how many its arrivals
/// started, ran to their end, and were cut (a failed turn, or the run's
/// end), and the turns (requests) they sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionCounts {
    pub started: u64,
    pub completed: u64,
    pub cut: u64,
    pub turns: u64,
}

impl SessionCounts {
    /// The sessions `set` counted, when it started any.
    pub fn of(set: &cicada_metrics::MetricSet) -> Option<Self> {
        use cicada_metrics::Counter;
        let started = set.counter(Counter::SessionsStarted);
        let completed = set.counter(Counter::SessionsCompleted);
        (started > 0).then(|| SessionCounts {
            started,
            completed,
            cut: started.saturating_sub(completed),
            turns: set.counter(Counter::SessionTurns),
        })
    }
}

/// A worker lost mid-step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LostWorker {
    pub worker: u32,
    pub host: String,
    pub at_s: Option<f64>,
    pub reason: String,
    pub planned_requests: u64,
    pub reported_requests: u64,
    /// Sessions it was to start (a count-bound session run; absent otherwise).
    #[serde(skip_serializing_if = "is_zero")]
    pub planned_sessions: u64,
    /// Sessions its reports said it started before the loss (with
    /// `planned_sessions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_sessions: Option<u64>,
}

/// One worker's planned and reported requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerShare {
    pub worker: u32,
    pub host: String,
    pub planned_requests: u64,
    pub reported_requests: u64,
    /// Due before the time limit and not sent by then (behind schedule).
    pub not_sent_at_end: u64,
    pub lost: bool,
    pub version: String,
}

/// A run gate's verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Gate {
    pub limit: Option<f64>,
    pub value: Option<f64>,
    pub passed: bool,
}

/// A merged histogram, so runs can be merged again exactly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Histogram {
    pub unit: String,
    /// How `data` is encoded (`hdrhistogram-v2-deflate-base64`).
    pub encoding: Option<String>,
    pub data: Option<String>,
    pub sum: u64,
    /// Exact sum of the squared samples (see [`sum_squares`]).
    #[serde(with = "sum_squares")]
    pub sum_sq: u128,
}

/// A histogram's sum of squares in the file: the exact integer as a decimal
/// string, since it passes 2^64 on long runs and JSON readers keep integers
/// exactly only to 2^53 (protobuf's JSON mapping writes 64-bit integers as
/// strings for the same reason). Files of schema 1 wrote a float; it is read
/// rounded to the nearest integer, as exact as that file was.
pub mod sum_squares {
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    /// Write `v` as a decimal string.
    pub fn serialize<S: Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    /// Read a decimal string, an integer, or (schema 1) a float.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        struct Sq;
        impl Visitor<'_> for Sq {
            type Value = u128;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sum of squares: a decimal string of digits, or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<u128, E> {
                v.parse()
                    .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<u128, E> {
                Ok(u128::from(v))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<u128, E> {
                Ok(v)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<u128, E> {
                u128::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<u128, E> {
                if v.is_finite() && v >= 0.0 {
                    // `as` saturates at u128::MAX, far past any real sum
                    Ok(v.round() as u128)
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
        }
        d.deserialize_any(Sq)
    }
}

/// How histograms are encoded in `data`.
pub const HISTOGRAM_ENCODING: &str = "hdrhistogram-v2-deflate-base64";

/// A count that is 0 is left out of the file (serde's `skip_serializing_if`).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sum of squares past 2^64 is written as a decimal string and read
    /// back to the unit; schema 1's floats and plain integers read too.
    #[test]
    fn sums_of_squares_keep_every_digit() {
        let big = u128::from(u64::MAX) * 1_000 + 7;
        let h = Histogram {
            unit: "us".into(),
            sum: 5,
            sum_sq: big,
            ..Default::default()
        };
        let text = serde_json::to_string(&h).unwrap();
        assert!(text.contains(&format!("\"sum_sq\":\"{big}\"")), "{text}");
        let doc: ResultDocument = serde_json::from_str(&format!(
            r#"{{"cicada": {{"histograms": {{"ttft": {text}}}}}}}"#
        ))
        .unwrap();
        let back = &doc.cicada.unwrap().histograms.unwrap().0[0].1;
        assert_eq!(back, &h);
        for (written, want) in [
            ("26949576650350.0", 26_949_576_650_350u128),
            ("2.5e19", 25_000_000_000_000_000_000),
            ("12", 12),
            ("\"12\"", 12),
        ] {
            let h: Histogram =
                serde_json::from_str(&format!(r#"{{"sum_sq": {written}}}"#)).unwrap();
            assert_eq!(h.sum_sq, want, "{written}");
        }
        for bad in ["-1", "\"x\"", "\"1.5\"", "-2.0"] {
            assert!(
                serde_json::from_str::<Histogram>(&format!(r#"{{"sum_sq": {bad}}}"#)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn latency_keys_are_read_in_order_and_others_skipped() {
        let doc: ResultDocument = serde_json::from_str(
            r#"{"duration": 2.5, "mean_ttft_ms": 1.5, "ttfts": [0.1, 0.2], "p99.9_ttft_ms": 9,
                "median_ttft_ms": null, "p50_itl_ms": 3, "max_output_tokens_per_s": 12.0,
                "request_rate": "inf", "date": "x"}"#,
        )
        .unwrap();
        assert_eq!(doc.duration, Some(2.5));
        assert_eq!(doc.max_output_tokens_per_s, Some(12));
        assert_eq!(doc.request_rate, Some(RequestRate::Text("inf".into())));
        let ttft = doc.latencies.metric("ttft").unwrap();
        assert_eq!(
            (ttft.mean, ttft.median, ttft.at(99.9)),
            (Some(1.5), None, Some(9.0))
        );
        assert_eq!(doc.latencies.metric("itl").unwrap().at(50.0), Some(3.0));
        assert_eq!(doc.latencies.0.len(), 2);
        assert!(doc.cicada.is_none());
        assert_eq!(latency_key("p99_e2el_ms"), Some(("p99", "e2el")));
        assert_eq!(latency_key("mean_ttft_co_ms"), None, "not a vLLM field");
        assert_eq!(latency_key("request_throughput"), None);
    }
}

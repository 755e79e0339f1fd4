//! `result.json`: `vllm bench serve --save-result` fields first, then cicada's.

use base64::Engine as _;
use cicada_metrics::{Counter, Metric, MetricSet, Summary};
use serde_json::{Map, Value, json};

use super::{RunResult, compact_date, percentile_word, rfc3339};
use crate::server_metrics::ServerFigures;

/// Version of the `result.json` layout; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Metrics with vLLM-named fields (`mean_ttft_ms`, ...).
const VLLM_METRICS: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

fn num(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

/// Header names whose values are secrets and never written.
fn is_secret_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "cookie", "password"]
        .iter()
        .any(|s| n.contains(s))
}

fn metric_fields(m: &mut Map<String, Value>, s: &Summary, metric: Metric, percentiles: &[f64]) {
    let name = metric.name();
    let d = s.metric(metric);
    let get = |f: fn(&cicada_metrics::DistributionStats) -> f64| num(d.map_or(0.0, f));
    m.insert(format!("mean_{name}_ms"), get(|d| d.mean));
    m.insert(format!("median_{name}_ms"), get(|d| d.median));
    m.insert(format!("std_{name}_ms"), get(|d| d.std));
    for p in percentiles {
        let v = d.and_then(|d| d.percentile(*p)).unwrap_or(0.0);
        m.insert(format!("p{}_{name}_ms", percentile_word(*p)), num(v));
    }
}

fn client_json(c: &crate::client::ClientHealth, tokens: u64) -> Value {
    json!({
        "client_bound": c.client_bound,
        "reasons": c.reasons,
        "cpu_us": c.cpu_us,
        "cpu_us_per_output_token": (tokens > 0).then(|| c.cpu_us as f64 / tokens as f64),
        "peak_rss_bytes": c.peak_rss_bytes,
        "runtime_stall_p50_ms": num(c.stall_p50_ms),
        "runtime_stall_p99_ms": num(c.stall_p99_ms),
        "runtime_stall_max_ms": num(c.stall_max_ms),
        "workers": c.workers.iter().map(|w| json!({
            "worker": w.index,
            "threads": w.threads,
            "cpu_us": w.cpu_us,
            "cpu_utilization": num(w.cpu_utilization),
            "peak_rss_bytes": w.peak_rss_bytes,
        })).collect::<Vec<_>>(),
    })
}

/// Build the whole document.
pub fn document(r: &RunResult) -> Value {
    let s = r.summary();
    let sc = &r.scenario;
    let percentiles = r.percentiles();
    let mut m = Map::new();
    m.insert("schema_version".into(), json!(SCHEMA_VERSION));
    m.insert("date".into(), json!(compact_date(r.started_unix)));
    m.insert("backend".into(), json!(sc.target.backend.name()));
    m.insert("model_id".into(), json!(r.target.model));
    m.insert(
        "tokenizer_id".into(),
        sc.tokenizer
            .as_ref()
            .map_or(Value::Null, |t| json!(t.source)),
    );
    m.insert("num_prompts".into(), json!(r.planned));
    m.insert(
        "request_rate".into(),
        sc.load.request_rate.per_second().map_or(json!("inf"), num),
    );
    m.insert("burstiness".into(), num(sc.load.burstiness));
    m.insert("max_concurrency".into(), json!(sc.load.max_concurrency));
    m.insert("duration".into(), num(s.duration_s));
    m.insert("completed".into(), json!(s.completed));
    m.insert("failed".into(), json!(s.failed));
    m.insert("total_input_tokens".into(), json!(s.total_input_tokens));
    m.insert("total_output_tokens".into(), json!(s.total_output_tokens));
    m.insert("request_throughput".into(), num(s.request_throughput));
    m.insert(
        "request_goodput".into(),
        s.request_goodput.map_or(Value::Null, num),
    );
    m.insert("output_throughput".into(), num(s.output_throughput));
    m.insert(
        "total_token_throughput".into(),
        num(s.total_token_throughput),
    );
    m.insert(
        "max_output_tokens_per_s".into(),
        json!(s.max_output_tokens_per_s),
    );
    m.insert(
        "max_concurrent_requests".into(),
        json!(s.max_concurrent_requests),
    );
    for metric in VLLM_METRICS {
        metric_fields(&mut m, &s, metric, &percentiles);
    }
    m.insert("cicada".into(), cicada_section(r, &s, &percentiles));
    Value::Object(m)
}

/// Every metric of a summary with unit, count, mean, median, std, min, max and percentiles.
fn metrics_json(s: &Summary, percentiles: &[f64]) -> Map<String, Value> {
    let mut metrics = Map::new();
    for (metric, d) in &s.metrics {
        let mut e = Map::new();
        e.insert("unit".into(), json!(metric.unit().suffix()));
        e.insert("count".into(), json!(d.count));
        e.insert("mean".into(), num(d.mean));
        e.insert("median".into(), num(d.median));
        e.insert("std".into(), num(d.std));
        e.insert("min".into(), num(d.min));
        e.insert("max".into(), num(d.max));
        for p in percentiles {
            e.insert(
                format!("p{}", percentile_word(*p)),
                num(d.percentile(*p).unwrap_or(0.0)),
            );
        }
        metrics.insert(metric.name().into(), Value::Object(e));
    }
    metrics
}

/// Outcome classes with their counts and first error text.
fn outcomes_json(t: &MetricSet) -> Map<String, Value> {
    t.outcomes
        .iter()
        .map(|(o, c)| {
            let mut e = json!({"count": c.count});
            if let Some(err) = &c.first_error {
                e["first_error"] = json!(err);
            }
            (o.to_string(), e)
        })
        .collect()
}

/// One entry of `cicada.targets`: a replica's share of the run.
fn target_json(
    r: &RunResult,
    url: &str,
    set: &MetricSet,
    server: Option<&ServerFigures>,
    percentiles: &[f64],
) -> Value {
    let s = r.target_summary(set);
    let server = server.map_or(Value::Null, |f| {
        serde_json::to_value(f).unwrap_or(Value::Null)
    });
    json!({
        "url": url,
        "sent": s.sent,
        "completed": s.completed,
        "failed": s.failed,
        "total_input_tokens": s.total_input_tokens,
        "total_output_tokens": s.total_output_tokens,
        "request_throughput": num(s.request_throughput),
        "output_throughput": num(s.output_throughput),
        "total_token_throughput": num(s.total_token_throughput),
        "request_goodput": s.request_goodput.map_or(Value::Null, num),
        "max_output_tokens_per_s": s.max_output_tokens_per_s,
        "max_concurrent_requests": s.max_concurrent_requests,
        "outcomes": outcomes_json(set),
        "metrics": metrics_json(&s, percentiles),
        "server": server,
    })
}

fn cicada_section(r: &RunResult, s: &Summary, percentiles: &[f64]) -> Value {
    let t = &r.total;
    let metrics = metrics_json(s, percentiles);
    let outcomes = outcomes_json(t);
    let targets: Vec<Value> = r
        .targets()
        .enumerate()
        .map(|(i, (url, set))| {
            let server = r.server.targets.get(i).and_then(Option::as_ref);
            target_json(r, url, set, server, percentiles)
        })
        .collect();
    let server = r.server.total.as_ref().map_or(Value::Null, |f| {
        serde_json::to_value(f).unwrap_or(Value::Null)
    });
    let counters: Map<String, Value> = t
        .counters
        .non_zero()
        .map(|(c, v)| (c.name().to_string(), json!(v)))
        .collect();
    let histograms: Map<String, Value> = t
        .non_empty()
        .map(|(metric, h)| {
            (
                metric.name().to_string(),
                json!({
                    "unit": "us",
                    "encoding": "hdrhistogram-v2-deflate-base64",
                    "data": base64::engine::general_purpose::STANDARD.encode(h.encode()),
                    "sum": h.sum(),
                    "sum_sq": h.sum_sq(),
                }),
            )
        })
        .collect();
    let mut scenario = serde_json::to_value(&r.scenario).unwrap_or(Value::Null);
    if let Some(headers) = scenario
        .pointer_mut("/target/headers")
        .and_then(Value::as_object_mut)
    {
        for (k, v) in headers.iter_mut() {
            if is_secret_header(k) {
                *v = json!("<redacted>");
            }
        }
    }
    let lost: Vec<Value> = r
        .lost
        .iter()
        .map(|l| {
            json!({"worker": l.index, "host": l.host, "at_s": l.at_s, "reason": l.reason,
                   "planned_requests": l.planned, "reported_requests": l.reported})
        })
        .collect();
    let planned_lost: u64 = r
        .lost
        .iter()
        .map(|l| l.planned.saturating_sub(l.reported))
        .sum();
    json!({
        "version": cicada_proto::VERSION,
        "scenario_name": r.scenario.name,
        "scenario_hash": r.scenario_hash,
        "scenario_origin": r.scenario_origin,
        "stage": r.stage,
        "started_at": rfc3339(r.started_unix),
        "started_unix": num(r.started_unix),
        "window_start_s": num(r.window_start_us as f64 / 1e6),
        "workers": r.workers,
        "target_urls": r.target.urls,
        "planned_requests": r.planned,
        "sent": s.sent,
        "client_input_tokens": s.client_input_tokens,
        "server_input_tokens": s.server_input_tokens,
        "reconnects": t.counter(Counter::Reconnects),
        "achieved_request_rate": s.achieved_request_rate,
        "mean_concurrent_requests": num(s.mean_concurrent_requests),
        "peak_concurrent_requests_100ms": num(s.peak_concurrent_requests_100ms),
        "warmup": {
            "sent": r.warmup.outcomes.sent(),
            "completed": r.warmup.outcomes.ok(),
            "failed": r.warmup.outcomes.failed(),
            "output_tokens": r.warmup.counter(Counter::OutputTokens),
        },
        "client": r.client.as_ref().map(|c| client_json(c, s.total_output_tokens + r.warmup.counter(Counter::OutputTokens))),
        "token_source": s.token_source.map(|t| t.name()),
        "token_sources": {
            "usage": t.counter(Counter::TokensFromUsage),
            "tokenizer": t.counter(Counter::TokensFromTokenizer),
            "events": t.counter(Counter::TokensFromEvents),
        },
        "outcomes": outcomes,
        "counters": counters,
        "metrics": metrics,
        "targets": targets,
        "server": server,
        "dataset": r.dataset,
        "degraded": r.degraded(),
        "lost_workers": lost,
        "lost_planned_requests": planned_lost,
        "worker_shares": r.worker_shares.iter().map(|w| json!({
            "worker": w.index, "host": w.host, "planned_requests": w.planned,
            "reported_requests": w.reported, "lost": w.lost, "version": w.version,
        })).collect::<Vec<_>>(),
        "gates": gates_json(r),
        "partial": r.partial(),
        "interrupted_by": r.interrupted,
        "histograms": histograms,
        "scenario": scenario,
    })
}

/// Each configured run gate with its limit, measured value and verdict.
fn gates_json(r: &RunResult) -> Value {
    crate::gates::evaluate(r)
        .into_iter()
        .map(|g| {
            (
                g.kind.name().to_string(),
                json!({"limit": num(g.limit), "value": num(g.value), "passed": g.passed}),
            )
        })
        .collect::<Map<String, Value>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::is_secret_header;

    #[test]
    fn secret_headers_are_recognised() {
        assert!(is_secret_header("Authorization"));
        assert!(is_secret_header("X-Api-Key"));
        assert!(!is_secret_header("X-Request-Source"));
    }
}

//! `result.json`: the [`ResultDocument`] of a finished step or window, with
//! `vllm bench serve --save-result` fields first, then cicada's.

use base64::Engine as _;
use cicada_metrics::{Counter, Metric, MetricSet, Summary};

use super::client_health::ClientHealth;
use super::document::{
    AbortDoc, Cicada, Client, Entries, Gate, HISTOGRAM_ENCODING, Histogram, Latencies, LostWorker,
    MetricLatency, MetricStats, ModelShare, OutcomeCount, Pooling, RequestRate, ResultDocument,
    SCHEMA_VERSION, SaturationDoc, SessionCounts, SteadyStateDoc, Target, TokenSources, Warmup,
    WorkerShare, WorkerUse,
};
use super::{RunResult, compact_date, rfc3339};
use crate::server::ServerFigures;

/// Metrics with vLLM-named fields (`mean_ttft_ms`, ...).
const VLLM_METRICS: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

/// Header names whose values are secrets and never written.
fn is_secret_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "cookie", "password"]
        .iter()
        .any(|s| n.contains(s))
}

/// vLLM's fields of one metric; `null` when it has no samples (vLLM writes
/// 0, which reads as a measurement), the keys kept for vLLM's readers.
fn latency(s: &Summary, metric: Metric, percentiles: &[f64]) -> MetricLatency {
    let d = s.metric(metric);
    MetricLatency {
        metric: metric.name().to_string(),
        mean: d.map(|d| d.mean),
        median: d.map(|d| d.median),
        std: d.map(|d| d.std),
        percentiles: percentiles
            .iter()
            .map(|p| (*p, d.and_then(|d| d.percentile(*p))))
            .collect(),
    }
}

fn client(c: &ClientHealth, tokens: u64) -> Client {
    Client {
        client_bound: c.client_bound,
        reasons: c.reasons.clone(),
        cpu_us: c.cpu_us,
        cpu_us_per_output_token: (tokens > 0).then(|| c.cpu_us as f64 / tokens as f64),
        peak_rss_bytes: c.peak_rss_bytes,
        runtime_stall_p50_ms: Some(c.stall_p50_ms),
        runtime_stall_p99_ms: Some(c.stall_p99_ms),
        runtime_stall_max_ms: Some(c.stall_max_ms),
        workers: c
            .workers
            .iter()
            .map(|w| WorkerUse {
                worker: w.index,
                threads: w.threads,
                cpu_us: w.cpu_us,
                cpu_utilization: Some(w.cpu_utilization),
                peak_rss_bytes: w.peak_rss_bytes,
                clock_offset_ms: w.clock.map(|c| c.offset_ms),
                clock_uncertainty_ms: w.clock.map(|c| c.uncertainty_ms),
                clock_min_rtt_ms: w.clock.map(|c| c.min_rtt_ms),
                start_basis: w.start_basis.map(|b| b.name().to_string()),
            })
            .collect(),
    }
}

/// The whole document.
pub fn document(r: &RunResult) -> ResultDocument {
    let s = r.summary();
    let sc = &r.scenario;
    let percentiles = r.percentiles();
    let generates = !r.pools();
    ResultDocument {
        schema_version: Some(SCHEMA_VERSION),
        date: Some(compact_date(r.started_unix)),
        backend: Some(sc.target.backend.name().to_string()),
        label: None,
        model_id: Some(r.target.model.clone()),
        tokenizer_id: sc.tokenizer.as_ref().map(|t| t.source.clone()),
        num_prompts: Some(r.planned),
        request_rate: Some(match sc.load.request_rate.per_second() {
            Some(rate) => RequestRate::PerSecond(rate),
            None => RequestRate::Text("inf".into()),
        }),
        burstiness: Some(sc.load.burstiness),
        max_concurrency: sc.load.max_concurrency,
        duration: Some(s.duration_s),
        completed: Some(s.completed),
        failed: Some(s.failed),
        total_input_tokens: Some(s.total_input_tokens),
        // a pooling run generates nothing: its generation figures are null
        total_output_tokens: generates.then_some(s.total_output_tokens),
        request_throughput: Some(s.request_throughput),
        request_goodput: s.request_goodput,
        output_throughput: generates.then_some(s.output_throughput),
        total_token_throughput: Some(s.total_token_throughput),
        max_output_tokens_per_s: generates.then_some(s.max_output_tokens_per_s),
        max_concurrent_requests: Some(s.max_concurrent_requests),
        latencies: Latencies(
            VLLM_METRICS
                .iter()
                .map(|m| latency(&s, *m, &percentiles))
                .collect(),
        ),
        cicada: Some(cicada(r, &s, &percentiles)),
    }
}

/// Every metric of a summary with unit, count, mean, median, std, min, max and percentiles.
fn metrics(s: &Summary, percentiles: &[f64]) -> Entries<MetricStats> {
    s.metrics
        .iter()
        .map(|(metric, d)| {
            let stats = MetricStats {
                unit: metric.unit().suffix().to_string(),
                count: d.count,
                mean: Some(d.mean),
                median: Some(d.median),
                std: Some(d.std),
                min: Some(d.min),
                max: Some(d.max),
                percentiles: percentiles
                    .iter()
                    .map(|p| {
                        let key = format!("p{}", super::percentile_word(*p));
                        (key, d.percentile(*p))
                    })
                    .collect(),
            };
            (metric.name().to_string(), stats)
        })
        .collect()
}

/// Outcome classes with their counts and first error text.
fn outcomes(t: &MetricSet) -> Entries<OutcomeCount> {
    t.outcomes
        .iter()
        .map(|(o, c)| {
            let count = OutcomeCount {
                count: c.count,
                first_error: c.first_error.clone(),
            };
            (o.to_string(), count)
        })
        .collect()
}

/// One entry of `cicada.targets`: a replica's share of the run.
fn target(
    r: &RunResult,
    url: &str,
    set: &MetricSet,
    server: Option<&ServerFigures>,
    percentiles: &[f64],
) -> Target {
    let s = r.target_summary(set);
    Target {
        url: url.to_string(),
        sent: s.sent,
        completed: s.completed,
        failed: s.failed,
        total_input_tokens: s.total_input_tokens,
        total_output_tokens: s.total_output_tokens,
        request_throughput: Some(s.request_throughput),
        output_throughput: Some(s.output_throughput),
        total_token_throughput: Some(s.total_token_throughput),
        request_goodput: s.request_goodput,
        max_output_tokens_per_s: s.max_output_tokens_per_s,
        max_concurrent_requests: Some(s.max_concurrent_requests),
        outcomes: outcomes(set),
        metrics: metrics(&s, percentiles),
        server: server.cloned(),
        addresses: if set.addresses.len() > 1 {
            set.addresses.clone()
        } else {
            Default::default()
        },
    }
}

/// `cicada.workloads`: each workload's share of the run, its goodput
/// judged against its own SLO, its sessions where it started any (empty
/// without `[[workloads]]`).
fn workloads(r: &RunResult, percentiles: &[f64]) -> Vec<ModelShare> {
    r.workloads()
        .zip(&r.scenario.workloads)
        .enumerate()
        .map(|(i, ((name, set), w))| {
            let s = r.workload_summary(i, set);
            ModelShare {
                sessions: SessionCounts::of(set),
                ..share(&s, (name, w.weight), set, percentiles)
            }
        })
        .collect()
}

/// One entry of `cicada.models`: a model's share of the run.
fn model(
    r: &RunResult,
    (name, weight): (&str, f64),
    set: &MetricSet,
    percentiles: &[f64],
) -> ModelShare {
    share(&r.target_summary(set), (name, weight), set, percentiles)
}

/// A model's or a workload's share of the run, from its summary `s`.
fn share(
    s: &Summary,
    (name, weight): (&str, f64),
    set: &MetricSet,
    percentiles: &[f64],
) -> ModelShare {
    ModelShare {
        name: name.to_string(),
        weight,
        sent: s.sent,
        completed: s.completed,
        failed: s.failed,
        total_input_tokens: s.total_input_tokens,
        total_output_tokens: s.total_output_tokens,
        request_throughput: Some(s.request_throughput),
        output_throughput: Some(s.output_throughput),
        total_token_throughput: Some(s.total_token_throughput),
        request_goodput: s.request_goodput,
        max_output_tokens_per_s: s.max_output_tokens_per_s,
        outcomes: outcomes(set),
        metrics: metrics(s, percentiles),
        histograms: histograms(set),
        sessions: None,
    }
}

/// The merged histograms, encoded so runs can be merged again.
fn histograms(t: &MetricSet) -> Entries<Histogram> {
    t.non_empty()
        .map(|(metric, h)| {
            let hist = Histogram {
                unit: metric.unit().recorded().into(),
                encoding: Some(HISTOGRAM_ENCODING.into()),
                data: Some(base64::engine::general_purpose::STANDARD.encode(h.encode())),
                sum: h.sum(),
                sum_sq: h.sum_sq(),
            };
            (metric.name().to_string(), hist)
        })
        .collect()
}

/// The resolved scenario as written in results: secret header values and
/// proxy credentials redacted.
fn scenario(r: &RunResult) -> serde_json::Value {
    let mut sc = r.scenario.clone();
    sc.target.proxy = sc.target.proxy.redacted();
    for (k, v) in sc.target.headers.iter_mut() {
        if is_secret_header(k) {
            *v = "<redacted>".into();
        }
    }
    serde_json::to_value(&sc).unwrap_or(serde_json::Value::Null)
}

fn cicada(r: &RunResult, s: &Summary, percentiles: &[f64]) -> Cicada {
    let t = &r.total;
    let output_tokens = s.total_output_tokens + r.warmup.counter(Counter::OutputTokens);
    Cicada {
        version: crate::VERSION.to_string(),
        scenario_name: r.scenario.name.clone(),
        scenario_hash: r.scenario_hash.clone(),
        scenario_origin: r.scenario_origin.clone(),
        stage: r.stage,
        started_at: Some(rfc3339(r.started_unix)),
        started_unix: Some(r.started_unix),
        window_start_s: Some(r.window_start_us as f64 / 1e6),
        workers: r.workers,
        target_urls: r.target.urls.clone(),
        planned_requests: r.planned,
        sent: s.sent,
        client_input_tokens: s.client_input_tokens,
        server_input_tokens: s.server_input_tokens,
        resends: t.counter(Counter::Resends),
        achieved_request_rate: s.achieved_request_rate,
        mean_concurrent_requests: Some(s.mean_concurrent_requests),
        peak_concurrent_requests_100ms: Some(s.peak_concurrent_requests_100ms),
        warmup: Warmup {
            sent: r.warmup.outcomes.sent(),
            completed: r.warmup.outcomes.ok(),
            failed: r.warmup.outcomes.failed(),
            output_tokens: r.warmup.counter(Counter::OutputTokens),
        },
        client: r.client.as_ref().map(|c| client(c, output_tokens)),
        token_source: s.token_source.map(|t| t.name().to_string()),
        token_sources: TokenSources {
            usage: t.counter(Counter::TokensFromUsage),
            tokenizer: t.counter(Counter::TokensFromTokenizer),
            events: t.counter(Counter::TokensFromEvents),
        },
        outcomes: Some(outcomes(t)),
        counters: t
            .counters
            .non_zero()
            .map(|(c, v)| (c.name().to_string(), v))
            .collect(),
        metrics: metrics(s, percentiles),
        pooling: r.pools().then(|| Pooling {
            items: s.total_items,
            item_throughput: Some(s.item_throughput),
            input_token_throughput: Some(s.input_throughput),
            mean_batch_size: s.metric(Metric::BatchSize).map(|d| d.mean),
        }),
        targets: r
            .targets()
            .enumerate()
            .map(|(i, (url, set))| {
                let server = r.server.targets.get(i).and_then(Option::as_ref);
                target(r, url, set, server, percentiles)
            })
            .collect(),
        models: r
            .models()
            .zip(&r.target.models)
            .map(|((name, set), m)| model(r, (name, m.weight), set, percentiles))
            .collect(),
        workloads: workloads(r, percentiles),
        server: r.server.total.clone(),
        dataset: r.dataset.clone(),
        degraded: r.degraded(),
        proxy_routes: r.proxy_routes.clone(),
        lost_workers: r.lost.iter().map(lost_worker).collect(),
        lost_planned_requests: r
            .lost
            .iter()
            .map(|l| l.planned.saturating_sub(l.reported))
            .sum(),
        lost_planned_sessions: r.lost_planned_sessions(),
        not_sent_at_end: r.not_sent_at_end(),
        worker_shares: r.worker_shares.iter().map(worker_share).collect(),
        gates: super::gates::evaluate(r)
            .into_iter()
            .map(|g| {
                let gate = Gate {
                    limit: Some(g.limit),
                    value: Some(g.value),
                    passed: g.passed,
                };
                (g.kind.name().to_string(), gate)
            })
            .collect(),
        partial: r.partial(),
        interrupted_by: r.interrupted.map(str::to_string),
        hooks: r.hooks.clone(),
        steady_state: r.steady.as_ref().map(|st| steady_state(r, st, percentiles)),
        saturation: r.saturated.as_ref().map(saturation),
        abort: r.aborted.as_ref().map(abort),
        sweep_skipped: r.skipped.clone(),
        histograms: Some(histograms(t)),
        scenario: scenario(r),
    }
}

/// A `cicada.lost_workers` entry.
fn lost_worker(l: &crate::LostWorker) -> LostWorker {
    LostWorker {
        worker: l.index,
        host: l.host.clone(),
        at_s: Some(l.at_s),
        reason: l.reason.clone(),
        planned_requests: l.planned,
        reported_requests: l.reported,
        planned_sessions: l.planned_sessions,
        started_sessions: (l.planned_sessions > 0).then_some(l.started_sessions),
    }
}

/// A `cicada.worker_shares` entry.
fn worker_share(w: &crate::WorkerShare) -> WorkerShare {
    WorkerShare {
        worker: w.index,
        host: w.host.clone(),
        planned_requests: w.planned,
        reported_requests: w.reported,
        not_sent_at_end: w.not_sent_at_end,
        lost: w.lost,
        version: w.version.clone(),
    }
}

/// `cicada.saturation`: why and when the server was found saturated.
fn saturation(s: &crate::saturation::Saturated) -> SaturationDoc {
    SaturationDoc {
        reason: s.reason.clone(),
        at_s: Some(s.at_s),
        stopped: s.stopped,
    }
}

/// `cicada.abort`: the threshold that stopped the step.
fn abort(a: &crate::abort::Aborted) -> AbortDoc {
    AbortDoc {
        condition: a.condition.clone(),
        observed: Some(a.observed),
        bound: Some(a.bound),
        window_start_s: Some(a.window_s.0),
        window_end_s: Some(a.window_s.1),
        window_requests: a.requests,
        at_s: Some(a.at_s),
        reason: a.reason(),
    }
}

/// `cicada.steady_state`: the window's bounds and its own figures.
fn steady_state(
    r: &RunResult,
    st: &crate::steady::SteadyState,
    percentiles: &[f64],
) -> SteadyStateDoc {
    let criterion = st.plateau.criterion();
    let Some(w) = &st.window else {
        return SteadyStateDoc {
            criterion,
            ..SteadyStateDoc::default()
        };
    };
    let s = w.summary(r.scenario.any_slo_set(), percentiles);
    let generates = !r.pools();
    SteadyStateDoc {
        criterion,
        found: true,
        start_s: Some(w.start_us as f64 / 1e6),
        end_s: Some(w.end_us as f64 / 1e6),
        duration_s: Some(w.duration_s()),
        intervals: w.intervals,
        requests: s.sent,
        completed: s.completed,
        failed: s.failed,
        request_throughput: Some(s.request_throughput),
        output_throughput: generates.then_some(s.output_throughput),
        total_token_throughput: Some(s.total_token_throughput),
        metrics: metrics(&s, percentiles),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::result;
    use cicada_scenarios::Scenario;

    #[test]
    fn secret_headers_are_recognised() {
        assert!(is_secret_header("Authorization"));
        assert!(is_secret_header("X-Api-Key"));
        assert!(!is_secret_header("X-Request-Source"));
    }

    /// Each histogram says the unit of its own raw values: output tok/s per
    /// request is recorded in thousandths of a token per second, not in
    /// microseconds (every histogram used to say `us`).
    #[test]
    fn every_histogram_and_statistic_has_its_metrics_unit() {
        let mut r = result(Scenario::default(), 3, 0, 0);
        r.total.histogram_mut(Metric::Ttft).record(1_500);
        r.total
            .histogram_mut(Metric::OutputTpsPerRequest)
            .record(40_000);
        let c = document(&r).cicada.unwrap();
        let hist = |name: &str| {
            let h = c.histograms.as_ref().unwrap();
            h.0.iter().find(|(k, _)| k == name).unwrap().1.unit.clone()
        };
        let stat = |name: &str| {
            c.metrics
                .0
                .iter()
                .find(|(k, _)| k == name)
                .unwrap()
                .1
                .unit
                .clone()
        };
        assert_eq!(hist("ttft"), "us");
        assert_eq!(hist("output_tps_per_request"), "milli_tok_s");
        assert_eq!(stat("ttft"), "ms");
        assert_eq!(stat("output_tps_per_request"), "tok_s");
    }
}

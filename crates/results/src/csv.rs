//! `summary.csv`: one row per run or stage, appended, with a fixed header.
//!
//! fw-ai/benchmark's column names come first where the concept matches, then
//! cicada's. Appending to a file whose header differs is refused rather than
//! silently misaligning columns.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use cicada_metrics::{Counter, Metric, MetricSet, Outcome, Summary};
use cicada_scenarios::Scenario;
use serde_json::Value;

use super::{RunResult, rfc3339};
use crate::error::WriteError;

/// Metrics with mean/p50/p90/p99/p99.9 columns.
const CSV_METRICS: [Metric; 12] = [
    Metric::Ttft,
    Metric::Tpot,
    Metric::Itl,
    Metric::Icl,
    Metric::E2el,
    Metric::TtftCo,
    Metric::E2elCo,
    Metric::ScheduleLag,
    Metric::Ttfa,
    Metric::ReasoningTime,
    Metric::AnswerTpot,
    Metric::AnswerItl,
];

const CSV_PERCENTILES: [(f64, &str); 4] =
    [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9")];

/// What one row describes: a result, and the scope (the run or one target) it shows.
struct Scope<'a> {
    r: &'a RunResult,
    t: &'a MetricSet,
    s: &'a Summary,
    target: &'a str,
    /// A workload's row: the workload's own scenario.
    own: Option<Scenario>,
}

impl Scope<'_> {
    /// The scenario the row's requests ran: its workload's, or the run's.
    fn sc(&self) -> &Scenario {
        self.own.as_ref().unwrap_or(&self.r.scenario)
    }

    /// A generation figure: empty for a pooling run, which generates nothing.
    fn generation(&self, v: String) -> String {
        if self.r.pools() { String::new() } else { v }
    }

    /// A pooling figure: empty for a generation run.
    fn pooling(&self, v: String) -> String {
        if self.r.pools() { v } else { String::new() }
    }

    /// A metric's mean (`None`) or percentile, formatted; empty without samples.
    fn stat(&self, m: Metric, p: Option<f64>) -> String {
        self.s
            .metric(m)
            .and_then(|d| match p {
                None => Some(d.mean),
                Some(p) => d.percentile(p),
            })
            .map(f)
            .unwrap_or_default()
    }

    fn count(&self, o: Outcome) -> String {
        self.t.outcomes.count(o).to_string()
    }

    /// Failed HTTP requests by status family: (4xx, 5xx, other).
    fn http(&self) -> (u64, u64, u64) {
        let mut http = (0u64, 0u64, 0u64);
        for (o, c) in self.t.outcomes.failures() {
            if let Outcome::Http(code) = o {
                match code {
                    400..=499 => http.0 += c.count,
                    500..=599 => http.1 += c.count,
                    _ => http.2 += c.count,
                }
            }
        }
        http
    }
}

/// One column: its header and what a row puts in it.
type Column = (&'static str, fn(&Scope<'_>) -> String);

/// fw-ai/benchmark's columns, where a concept matches.
const FIXED: [Column; 23] = [
    // a workload's row names its own backend, model and temperature
    ("Provider", |x| x.sc().target.backend.name().to_string()),
    // a model's row names its model
    ("Model", |x| {
        x.target.strip_prefix("model:").map_or_else(
            || {
                x.own
                    .as_ref()
                    .and_then(|o| o.target.model.clone())
                    .unwrap_or_else(|| x.r.target.model.clone())
            },
            str::to_string,
        )
    }),
    ("Prompt Tokens", |x| {
        per_request(x.s.total_input_tokens, x.s.completed)
    }),
    ("Generation Tokens", |x| {
        per_request(x.t.counter(Counter::RequestedOutputTokens), x.s.completed)
    }),
    ("Stream", |x| x.r.target.stream.to_string()),
    ("Temperature", |x| {
        x.sc().sampling.temperature.map(f).unwrap_or_default()
    }),
    ("Logprobs", |x| logprobs(&x.sc().sampling.extra_body)),
    ("Concurrency", |x| concurrency(&x.r.scenario)),
    ("Time To First Token", |x| x.stat(Metric::Ttft, None)),
    ("Latency Per Token", |x| x.stat(Metric::Tpot, None)),
    ("Num Tokens", |x| {
        per_request(x.s.total_output_tokens, x.s.completed)
    }),
    ("Total Latency", |x| x.stat(Metric::E2el, None)),
    ("Num Requests", |x| x.s.completed.to_string()),
    ("Qps", |x| f(x.s.request_throughput)),
    ("P50 Time To First Token", |x| {
        x.stat(Metric::Ttft, Some(50.0))
    }),
    ("P90 Time To First Token", |x| {
        x.stat(Metric::Ttft, Some(90.0))
    }),
    ("P99 Time To First Token", |x| {
        x.stat(Metric::Ttft, Some(99.0))
    }),
    ("P99.9 Time To First Token", |x| {
        x.stat(Metric::Ttft, Some(99.9))
    }),
    ("P50 Total Latency", |x| x.stat(Metric::E2el, Some(50.0))),
    ("P90 Total Latency", |x| x.stat(Metric::E2el, Some(90.0))),
    ("P99 Total Latency", |x| x.stat(Metric::E2el, Some(99.0))),
    ("P99.9 Total Latency", |x| x.stat(Metric::E2el, Some(99.9))),
    ("scenario", |x| x.r.scenario.name.clone()),
];

/// cicada's own columns.
const CICADA: [Column; 45] = [
    ("scenario_hash", |x| x.r.scenario_hash.clone()),
    ("stage", |x| x.r.stage.to_string()),
    ("stage_name", |x| x.r.stage_name.clone()),
    ("target", |x| x.target.to_string()),
    ("started_at", |x| rfc3339(x.r.started_unix)),
    ("workers", |x| x.r.workers.to_string()),
    ("request_rate_configured", |x| {
        x.r.scenario.load.request_rate.to_string()
    }),
    ("request_rate_achieved", |x| {
        x.s.achieved_request_rate.map(f).unwrap_or_default()
    }),
    ("max_concurrency", |x| {
        x.r.scenario
            .load
            .max_concurrency
            .map(|c| c.to_string())
            .unwrap_or_default()
    }),
    ("duration_s", |x| f(x.s.duration_s)),
    ("sent", |x| x.s.sent.to_string()),
    ("completed", |x| x.s.completed.to_string()),
    ("failed", |x| x.s.failed.to_string()),
    ("failed_http_4xx", |x| x.http().0.to_string()),
    ("failed_http_5xx", |x| x.http().1.to_string()),
    ("failed_http_other", |x| x.http().2.to_string()),
    ("failed_connect", |x| x.count(Outcome::Connect)),
    ("failed_no_response", |x| x.count(Outcome::NoResponse)),
    ("failed_timeout", |x| x.count(Outcome::Timeout)),
    ("failed_stream_truncated", |x| {
        x.count(Outcome::StreamTruncated)
    }),
    ("failed_server_error_event", |x| {
        x.count(Outcome::ServerErrorEvent)
    }),
    ("failed_bad_payload", |x| x.count(Outcome::BadPayload)),
    ("failed_response_too_large", |x| {
        x.count(Outcome::ResponseTooLarge)
    }),
    ("failed_empty", |x| x.count(Outcome::Empty)),
    ("failed_cancelled", |x| x.count(Outcome::Cancelled)),
    ("failed_client_fault", |x| x.count(Outcome::ClientFault)),
    ("failed_invalid_output", |x| x.count(Outcome::InvalidOutput)),
    ("failures", |x| {
        let classes: Vec<String> =
            x.t.outcomes
                .failures()
                .map(|(o, c)| format!("{o}={}", c.count))
                .collect();
        classes.join(";")
    }),
    ("total_input_tokens", |x| x.s.total_input_tokens.to_string()),
    ("total_output_tokens", |x| {
        x.generation(x.s.total_output_tokens.to_string())
    }),
    ("request_throughput", |x| f(x.s.request_throughput)),
    ("output_throughput", |x| {
        x.generation(f(x.s.output_throughput))
    }),
    ("total_token_throughput", |x| f(x.s.total_token_throughput)),
    ("request_goodput", |x| {
        x.s.request_goodput.map(f).unwrap_or_default()
    }),
    ("max_output_tokens_per_s", |x| {
        x.generation(x.s.max_output_tokens_per_s.to_string())
    }),
    ("max_concurrent_requests", |x| {
        x.s.max_concurrent_requests.to_string()
    }),
    ("token_source", |x| {
        x.s.token_source
            .map(|t| t.name().to_string())
            .unwrap_or_default()
    }),
    ("degraded", |x| x.r.degraded().to_string()),
    ("partial", |x| x.r.partial().to_string()),
    // empty, not 0, when no request reasoned
    ("reasoning_requests", |x| {
        reasoning_count(x, Counter::ReasoningRequests)
    }),
    ("reasoning_tokens", |x| {
        reasoning_count(x, Counter::ReasoningTokens)
    }),
    // empty, not 0, for a generation run
    ("total_items", |x| x.pooling(x.s.total_items.to_string())),
    ("item_throughput", |x| x.pooling(f(x.s.item_throughput))),
    ("input_token_throughput", |x| {
        x.pooling(f(x.s.input_throughput))
    }),
    ("batch_size_mean", |x| {
        x.s.metric(Metric::BatchSize)
            .map(|d| f(d.mean))
            .unwrap_or_default()
    }),
];

/// A reasoning counter of the scope; empty when no request reasoned.
fn reasoning_count(x: &Scope<'_>, c: Counter) -> String {
    if x.t.counter(Counter::ReasoningRequests) == 0 {
        String::new()
    } else {
        x.t.counter(c).to_string()
    }
}

/// fw-ai/benchmark's `Concurrency`: the users of a closed loop (each
/// `[[stages]]` window's, joined with `/` for a staged run's whole row), else
/// `QPS r constant` for a rate, else the concurrency cap, else `unbounded`.
fn concurrency(sc: &Scenario) -> String {
    let load = &sc.load;
    let stage_users: Vec<String> = sc
        .stages
        .iter()
        .filter_map(|st| st.users.map(|u| u.to_string()))
        .collect();
    match (
        load.users,
        load.request_rate.per_second(),
        load.max_concurrency,
    ) {
        (Some(u), _, _) => u.to_string(),
        _ if !stage_users.is_empty() => stage_users.join("/"),
        (None, Some(q), _) => format!("QPS {q} constant"),
        (None, None, Some(c)) => c.to_string(),
        (None, None, None) => "unbounded".to_string(),
    }
}

/// fw-ai/benchmark's `Logprobs`: how many log probabilities per token the
/// requests asked for through `sampling.extra_body`: `top_logprobs` (chat),
/// else a numeric `logprobs` (completions), else 0 for `logprobs = true`
/// alone (the chosen token's only); empty when none were asked for.
fn logprobs(extra: &BTreeMap<String, Value>) -> String {
    if let Some(n) = extra.get("top_logprobs").filter(|v| v.is_number()) {
        return n.to_string();
    }
    match extra.get("logprobs") {
        Some(n @ Value::Number(_)) => n.to_string(),
        Some(Value::Bool(true)) => "0".to_string(),
        _ => String::new(),
    }
}

/// Each metric's mean and percentile columns: (header, metric, percentile or mean).
fn metric_columns() -> impl Iterator<Item = (String, Metric, Option<f64>)> {
    CSV_METRICS.into_iter().flat_map(|m| {
        std::iter::once((format!("{}_mean_ms", m.name()), m, None)).chain(
            CSV_PERCENTILES
                .iter()
                .map(move |(p, word)| (format!("{}_{word}_ms", m.name()), m, Some(*p))),
        )
    })
}

/// The header, in order.
pub fn header() -> Vec<String> {
    FIXED
        .iter()
        .chain(&CICADA)
        .map(|(name, _)| name.to_string())
        .chain(metric_columns().map(|(name, _, _)| name))
        .collect()
}

fn f(v: f64) -> String {
    format!("{v:.3}")
}

fn per_request(total: u64, n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        f(total as f64 / n as f64)
    }
}

/// The rows of one result: the whole run's (target `all`), then, when there
/// are several targets, one per target (target = its URL), then, when
/// requests split over `target.models`, one per model (target = `model:<name>`),
/// then, with `[[workloads]]`, one per workload (target = `workload:<name>`).
pub fn rows(r: &RunResult) -> Vec<Vec<String>> {
    let mut out = vec![row(r)];
    if r.per_target.len() > 1 {
        for (url, set) in r.targets() {
            out.push(row_for(r, set, &r.target_summary(set), (url, None)));
        }
    }
    for (name, set) in r.models() {
        let label = format!("model:{name}");
        out.push(row_for(r, set, &r.target_summary(set), (&label, None)));
    }
    for (i, (name, set)) in r.workloads().enumerate() {
        let label = format!("workload:{name}");
        out.push(row_for(
            r,
            set,
            &r.workload_summary(i, set),
            (&label, Some(i)),
        ));
    }
    out
}

/// The whole run's row, aligned with [`header`].
pub fn row(r: &RunResult) -> Vec<String> {
    row_for(r, &r.total, &r.summary(), ("all", None))
}

/// The row of one scope (the run, one target, model or workload `i`),
/// aligned with [`header`].
fn row_for(
    r: &RunResult,
    t: &MetricSet,
    s: &Summary,
    (target, workload): (&str, Option<usize>),
) -> Vec<String> {
    let own = workload.and_then(|i| r.scenario.workload_scenario(i));
    let x = Scope {
        r,
        t,
        s,
        target,
        own,
    };
    FIXED
        .iter()
        .chain(&CICADA)
        .map(|(_, cell)| cell(&x))
        .chain(metric_columns().map(|(_, m, p)| x.stat(m, p)))
        .collect()
}

/// Append `rows` to `path`, writing the header if the file is new or empty.
/// Refuses, naming both, when the file's header differs.
pub fn append(path: &Path, rows: &[Vec<String>]) -> Result<(), WriteError> {
    let expected = header();
    let has_content = std::fs::metadata(path)
        .map(|m| m.len() > 0)
        .unwrap_or(false);
    let at = || path.to_path_buf();
    if has_content {
        let file = std::fs::File::open(path).map_err(|source| WriteError::Open {
            path: at(),
            append: false,
            source,
        })?;
        let mut first = String::new();
        BufReader::new(file)
            .read_line(&mut first)
            .map_err(|source| WriteError::Read { path: at(), source })?;
        let found: Vec<String> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(first.as_bytes())
            .records()
            .next()
            .and_then(Result::ok)
            .map(|r| r.iter().map(str::to_string).collect())
            .unwrap_or_default();
        if found != expected {
            let differ = expected
                .iter()
                .zip(found.iter().chain(std::iter::repeat(&String::new())))
                .position(|(a, b)| a != b)
                .unwrap_or(expected.len().min(found.len()));
            return Err(WriteError::HeaderDiffers {
                path: at(),
                column: differ + 1,
                found: found.get(differ).map_or("<missing>", String::as_str).into(),
                expected: expected.get(differ).map_or("<none>", String::as_str).into(),
            });
        }
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| WriteError::Open {
            path: at(),
            append: true,
            source,
        })?;
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(file);
    let csv_error = |source| WriteError::Csv { path: at(), source };
    if !has_content {
        w.write_record(&expected).map_err(csv_error)?;
    }
    for r in rows {
        w.write_record(r).map_err(csv_error)?;
    }
    let io_error = |source| WriteError::Write { path: at(), source };
    w.flush().map_err(io_error)?;
    w.into_inner()
        .map_err(|e| io_error(e.into_error()))?
        .flush()
        .map_err(io_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_unique() {
        let h = header();
        let mut sorted = h.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), h.len());
    }

    #[test]
    fn appends_once_with_header_and_refuses_foreign_files() {
        let dir = std::env::temp_dir().join(format!("cicada-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("summary.csv");
        let _ = std::fs::remove_file(&p);
        let row: Vec<String> = header().iter().map(|_| "1".to_string()).collect();
        append(&p, std::slice::from_ref(&row)).unwrap();
        append(&p, &[row.clone(), row.clone()]).unwrap();
        let mut rdr = csv::Reader::from_path(&p).unwrap();
        assert_eq!(rdr.headers().unwrap().len(), header().len());
        assert_eq!(rdr.records().count(), 3);
        let other = dir.join("other.csv");
        std::fs::write(&other, "a,b,c\n1,2,3\n").unwrap();
        let err = append(&other, &[row]).unwrap_err().to_string();
        assert!(err.contains("refusing to append"), "{err}");
        assert!(err.contains("column 1"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn concurrency_and_logprobs_say_what_was_asked() {
        let mut sc = Scenario::default();
        assert_eq!(concurrency(&sc), "unbounded");
        sc.load.max_concurrency = Some(8);
        assert_eq!(concurrency(&sc), "8");
        sc.load.request_rate = cicada_plan::units::Rate::Finite(4.0);
        assert_eq!(concurrency(&sc), "QPS 4 constant");
        let mut users = Scenario::default();
        users.load.users = Some(3);
        assert_eq!(concurrency(&users), "3");
        let json = |v: &str| serde_json::from_str::<BTreeMap<String, Value>>(v).unwrap();
        assert_eq!(logprobs(&json("{}")), "");
        assert_eq!(logprobs(&json(r#"{"logprobs": 5}"#)), "5");
        assert_eq!(logprobs(&json(r#"{"logprobs": true}"#)), "0");
        assert_eq!(logprobs(&json(r#"{"logprobs": false}"#)), "");
        assert_eq!(
            logprobs(&json(r#"{"logprobs": true, "top_logprobs": 2}"#)),
            "2"
        );
    }
}

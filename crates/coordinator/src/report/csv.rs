//! `summary.csv`: one row per run or stage, appended, with a fixed header.
//!
//! fw-ai/benchmark's column names come first where the concept matches, then
//! cicada's. Appending to a file whose header differs is refused rather than
//! silently misaligning columns.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use anyhow::{Context, bail};
use cicada_metrics::{Counter, Metric, MetricSet, Outcome, Summary};

use super::{RunResult, rfc3339};

/// Metrics with mean/p50/p90/p99/p99.9 columns.
const CSV_METRICS: [Metric; 8] = [
    Metric::Ttft,
    Metric::Tpot,
    Metric::Itl,
    Metric::Icl,
    Metric::E2el,
    Metric::TtftCo,
    Metric::E2elCo,
    Metric::ScheduleLag,
];

const CSV_PERCENTILES: [(f64, &str); 4] =
    [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p99.9")];

const FIXED: [&str; 23] = [
    "Provider",
    "Model",
    "Prompt Tokens",
    "Generation Tokens",
    "Stream",
    "Temperature",
    "Logprobs",
    "Concurrency",
    "Time To First Token",
    "Latency Per Token",
    "Num Tokens",
    "Total Latency",
    "Num Requests",
    "Qps",
    "P50 Time To First Token",
    "P90 Time To First Token",
    "P99 Time To First Token",
    "P99.9 Time To First Token",
    "P50 Total Latency",
    "P90 Total Latency",
    "P99 Total Latency",
    "P99.9 Total Latency",
    "scenario",
];

const CICADA: [&str; 35] = [
    "scenario_hash",
    "stage",
    "stage_name",
    "target",
    "started_at",
    "workers",
    "request_rate_configured",
    "request_rate_achieved",
    "max_concurrency",
    "duration_s",
    "sent",
    "completed",
    "failed",
    "failed_http_4xx",
    "failed_http_5xx",
    "failed_http_other",
    "failed_connect",
    "failed_timeout",
    "failed_stream_truncated",
    "failed_server_error_event",
    "failed_bad_payload",
    "failed_empty",
    "failed_cancelled",
    "failures",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "request_goodput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "token_source",
    "degraded",
    "partial",
];

/// The header, in order.
pub fn header() -> Vec<String> {
    let mut h: Vec<String> = FIXED.iter().map(|s| s.to_string()).collect();
    h.extend(CICADA.iter().map(|s| s.to_string()));
    for m in CSV_METRICS {
        h.push(format!("{}_mean_ms", m.name()));
        for (_, p) in CSV_PERCENTILES {
            h.push(format!("{}_{p}_ms", m.name()));
        }
    }
    h
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
/// are several targets, one per target (target = its URL).
pub fn rows(r: &RunResult) -> Vec<Vec<String>> {
    let mut out = vec![row(r)];
    if r.per_target.len() > 1 {
        for (url, set) in r.targets() {
            out.push(row_for(r, set, &r.target_summary(set), url));
        }
    }
    out
}

/// The whole run's row, aligned with [`header`].
pub fn row(r: &RunResult) -> Vec<String> {
    row_for(r, &r.total, &r.summary(), "all")
}

/// The row of one scope (the run or one target), aligned with [`header`].
fn row_for(r: &RunResult, t: &MetricSet, s: &Summary, target: &str) -> Vec<String> {
    let sc = &r.scenario;
    let stat = |m: Metric, pick: &dyn Fn(&cicada_metrics::DistributionStats) -> Option<f64>| {
        s.metric(m).and_then(pick).map(f).unwrap_or_default()
    };
    let concurrency = match (sc.load.request_rate.per_second(), sc.load.max_concurrency) {
        (Some(q), _) => format!("QPS {q} constant"),
        (None, Some(c)) => format!("{c}"),
        (None, None) => "unbounded".to_string(),
    };
    let mut v: Vec<String> = vec![
        sc.target.backend.name().to_string(),
        r.target.model.clone(),
        per_request(s.total_input_tokens, s.completed),
        per_request(t.counter(Counter::RequestedOutputTokens), s.completed),
        r.target.stream.to_string(),
        sc.sampling.temperature.map(f).unwrap_or_default(),
        String::new(),
        concurrency,
        stat(Metric::Ttft, &|d| Some(d.mean)),
        stat(Metric::Tpot, &|d| Some(d.mean)),
        per_request(s.total_output_tokens, s.completed),
        stat(Metric::E2el, &|d| Some(d.mean)),
        s.completed.to_string(),
        f(s.request_throughput),
    ];
    for m in [Metric::Ttft, Metric::E2el] {
        for (p, _) in CSV_PERCENTILES {
            v.push(stat(m, &|d| d.percentile(p)));
        }
    }
    v.push(sc.name.clone());

    let mut http = (0u64, 0u64, 0u64);
    let mut classes = Vec::new();
    for (o, c) in t.outcomes.failures() {
        if let Outcome::Http(code) = o {
            match code {
                400..=499 => http.0 += c.count,
                500..=599 => http.1 += c.count,
                _ => http.2 += c.count,
            }
        }
        classes.push(format!("{o}={}", c.count));
    }
    let count = |o: Outcome| t.outcomes.count(o).to_string();
    v.extend([
        r.scenario_hash.clone(),
        r.stage.to_string(),
        r.stage_name.clone(),
        target.to_string(),
        rfc3339(r.started_unix),
        r.workers.to_string(),
        sc.load.request_rate.to_string(),
        s.achieved_request_rate.map(f).unwrap_or_default(),
        sc.load
            .max_concurrency
            .map(|c| c.to_string())
            .unwrap_or_default(),
        f(s.duration_s),
        s.sent.to_string(),
        s.completed.to_string(),
        s.failed.to_string(),
        http.0.to_string(),
        http.1.to_string(),
        http.2.to_string(),
        count(Outcome::Connect),
        count(Outcome::Timeout),
        count(Outcome::StreamTruncated),
        count(Outcome::ServerErrorEvent),
        count(Outcome::BadPayload),
        count(Outcome::Empty),
        count(Outcome::Cancelled),
        classes.join(";"),
        s.total_input_tokens.to_string(),
        s.total_output_tokens.to_string(),
        f(s.request_throughput),
        f(s.output_throughput),
        f(s.total_token_throughput),
        s.request_goodput.map(f).unwrap_or_default(),
        s.max_output_tokens_per_s.to_string(),
        s.max_concurrent_requests.to_string(),
        s.token_source
            .map(|x| x.name().to_string())
            .unwrap_or_default(),
        r.degraded().to_string(),
        r.partial().to_string(),
    ]);
    for m in CSV_METRICS {
        v.push(stat(m, &|d| Some(d.mean)));
        for (p, _) in CSV_PERCENTILES {
            v.push(stat(m, &|d| d.percentile(p)));
        }
    }
    v
}

/// Append `rows` to `path`, writing the header if the file is new or empty.
/// Refuses, naming both, when the file's header differs.
pub fn append(path: &Path, rows: &[Vec<String>]) -> anyhow::Result<()> {
    let expected = header();
    let has_content = std::fs::metadata(path)
        .map(|m| m.len() > 0)
        .unwrap_or(false);
    if has_content {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut first = String::new();
        BufReader::new(file)
            .read_line(&mut first)
            .with_context(|| format!("reading {}", path.display()))?;
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
            bail!(
                "refusing to append to {}: its header differs from this version's summary columns \
                 (first difference at column {}: file has \"{}\", expected \"{}\"); \
                 write to a new file or move the old one away",
                path.display(),
                differ + 1,
                found.get(differ).map_or("<missing>", String::as_str),
                expected.get(differ).map_or("<none>", String::as_str),
            );
        }
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {} for appending", path.display()))?;
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(file);
    if !has_content {
        w.write_record(&expected)?;
    }
    for r in rows {
        w.write_record(r)?;
    }
    w.flush()?;
    w.into_inner()
        .map_err(|e| anyhow::anyhow!("writing {}: {}", path.display(), e.error()))?
        .flush()?;
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
}

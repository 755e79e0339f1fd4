//! The live figures as Prometheus text, what `cicada run --metrics-addr`'s
//! `/metrics` serves. Counters and summaries cover the whole run
//! so far (every step); `cicada_interval_*` gauges describe the last
//! interval every worker has reported. Names and meanings are listed in
//! docs/METRICS.md ("Live metrics").

use std::fmt::Write as _;

use cicada_metrics::{Counter, Metric, MetricSet, Outcome};

use cicada_results::interval::IntervalRow;

/// Latency summaries exposed, as `cicada_<name>_seconds`.
const SUMMARIES: [Metric; 8] = [
    Metric::Ttft,
    Metric::Tpot,
    Metric::Itl,
    Metric::Icl,
    Metric::E2el,
    Metric::TtftCo,
    Metric::E2elCo,
    Metric::ScheduleLag,
];

/// Quantiles of every summary.
const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// Latencies with last-interval gauges.
const INTERVAL_METRICS: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

/// What the exposition is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct LiveView<'a> {
    /// Scenario name (a label of `cicada_info`).
    pub scenario: &'a str,
    /// Everything measured so far in the run (all stages, no warm-up).
    pub run: &'a MetricSet,
    /// The step running (0 without a sweep).
    pub step: u32,
    /// Requests planned for the step (0: open-ended).
    pub planned: u64,
    /// Seconds since the step's start barrier.
    pub elapsed_s: f64,
    /// Workers in the fleet.
    pub workers: u32,
    /// Requests in flight, by the latest reports.
    pub in_flight: u64,
    /// The last interval every worker reported, if any.
    pub last_interval: Option<&'a IntervalRow>,
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn one(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    head(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// Render the exposition.
pub fn render(v: &LiveView<'_>) -> String {
    let mut out = String::new();
    fleet(&mut out, v);
    requests(&mut out, v);
    latencies(&mut out, v);
    last_interval(&mut out, v);
    out
}

/// The run: version, scenario, fleet, step and what is in flight.
fn fleet(out: &mut String, v: &LiveView<'_>) {
    head(
        out,
        "cicada_info",
        "gauge",
        "The running cicada version and scenario.",
    );
    let _ = writeln!(
        out,
        "cicada_info{{version=\"{}\",scenario=\"{}\"}} 1",
        escape(cicada_results::VERSION),
        escape(v.scenario)
    );
    one(
        out,
        "cicada_workers",
        "gauge",
        "Workers in the fleet.",
        v.workers,
    );
    one(
        out,
        "cicada_stage",
        "gauge",
        "The stage running (0 without a sweep).",
        v.step,
    );
    one(
        out,
        "cicada_stage_elapsed_seconds",
        "gauge",
        "Seconds since the stage's start barrier.",
        format!("{:.3}", v.elapsed_s),
    );
    one(
        out,
        "cicada_stage_planned_requests",
        "gauge",
        "Requests planned for the stage (0 when open-ended).",
        v.planned,
    );
    one(
        out,
        "cicada_requests_in_flight",
        "gauge",
        "Requests in flight over the fleet, by each worker's latest report or heartbeat (about once a second).",
        v.in_flight,
    );
}

/// Requests and tokens so far, by outcome.
fn requests(out: &mut String, v: &LiveView<'_>) {
    let o = &v.run.outcomes;
    head(
        out,
        "cicada_requests_total",
        "counter",
        "Requests that ended, by outcome class.",
    );
    if o.count(Outcome::Ok) == 0 {
        let _ = writeln!(out, "cicada_requests_total{{outcome=\"ok\"}} 0");
    }
    for (class, c) in o.iter() {
        let _ = writeln!(
            out,
            "cicada_requests_total{{outcome=\"{}\"}} {}",
            escape(&class.to_string()),
            c.count
        );
    }
    one(
        out,
        "cicada_requests_failed_total",
        "counter",
        "Requests that ended in any outcome but ok.",
        o.failed(),
    );
    for (name, counter, help) in [
        (
            "cicada_input_tokens_total",
            Counter::InputTokens,
            "Prompt tokens of successful requests.",
        ),
        (
            "cicada_output_tokens_total",
            Counter::OutputTokens,
            "Output tokens of successful requests.",
        ),
        (
            "cicada_goodput_requests_total",
            Counter::Goodput,
            "Successful requests that met every [slo] bound.",
        ),
    ] {
        one(out, name, "counter", help, v.run.counter(counter));
    }
}

/// Latency summaries of successful requests over the run so far.
fn latencies(out: &mut String, v: &LiveView<'_>) {
    for metric in SUMMARIES {
        let h = v.run.histogram(metric);
        let name = format!("cicada_{}_seconds", metric.name());
        head(
            out,
            &name,
            "summary",
            &format!(
                "{} of successful requests over the run so far.",
                metric.label()
            ),
        );
        for q in QUANTILES {
            let _ = writeln!(
                out,
                "{name}{{quantile=\"{q}\"}} {}",
                if h.is_empty() {
                    "NaN".to_string()
                } else {
                    format!("{:.6}", h.quantile(q) as f64 / 1e6)
                }
            );
        }
        let _ = writeln!(out, "{name}_sum {:.6}", h.sum() as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {}", h.count());
    }
}

/// Throughputs and latency quantiles of the last reported interval.
fn last_interval(out: &mut String, v: &LiveView<'_>) {
    if let Some(row) = v.last_interval {
        let len = row.length_s.max(f64::MIN_POSITIVE);
        one(
            out,
            "cicada_interval_request_throughput",
            "gauge",
            "Successful requests per second in the last reported interval.",
            format!("{:.3}", row.ok as f64 / len),
        );
        one(
            out,
            "cicada_interval_output_throughput",
            "gauge",
            "Output tokens per second in the last reported interval.",
            format!("{:.3}", row.output_tokens as f64 / len),
        );
        for metric in INTERVAL_METRICS {
            let Some((_, _, p50, p90, p99, _)) = row.metric(metric) else {
                continue;
            };
            let name = format!("cicada_interval_{}_seconds", metric.name());
            head(
                out,
                &name,
                "gauge",
                &format!(
                    "{} quantiles in the last reported interval.",
                    metric.label()
                ),
            );
            for (q, ms) in [(0.5, p50), (0.9, p90), (0.99, p99)] {
                let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {:.6}", ms / 1e3);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_target::prom::Exposition;

    #[test]
    fn the_exposition_reads_back_as_prometheus_text() {
        let mut run = MetricSet::default();
        for v in 1..=100u64 {
            run.count_outcome(Outcome::Ok, None);
            run.histogram_mut(Metric::Ttft).record(v * 1_000);
        }
        run.outcomes.add_n(Outcome::Http(503), 3, Some("busy"));
        run.counters.add(Counter::OutputTokens, 640);
        let row = IntervalRow {
            index: 4,
            start_s: 4.0,
            length_s: 2.0,
            ended: 10,
            ok: 8,
            failed: 2,
            output_tokens: 100,
            input_tokens: 10,
            in_flight: 3,
            metrics: vec![(Metric::Ttft, 8, 12.0, 10.0, 20.0, 30.0, 31.0)],
        };
        let text = render(&LiveView {
            scenario: "a \"quoted\" name",
            run: &run,
            step: 2,
            planned: 500,
            elapsed_s: 12.5,
            workers: 4,
            in_flight: 7,
            last_interval: Some(&row),
        });
        let e = Exposition::parse(&text);
        assert_eq!(e.sum("cicada_workers"), Some(4.0));
        assert_eq!(e.sum("cicada_requests_in_flight"), Some(7.0));
        let by = e.by_label("cicada_requests_total", "outcome");
        assert_eq!(by.get("ok"), Some(&100.0));
        assert_eq!(by.get("http_503"), Some(&3.0));
        assert_eq!(e.sum("cicada_requests_failed_total"), Some(3.0));
        assert_eq!(e.sum("cicada_output_tokens_total"), Some(640.0));
        let q = e.by_label("cicada_ttft_seconds", "quantile");
        let p99 = q["0.99"];
        assert!((p99 - 0.099).abs() < 0.0002, "{p99}");
        assert_eq!(e.sum("cicada_ttft_seconds_count"), Some(100.0));
        assert_eq!(e.sum("cicada_ttft_seconds_sum"), Some(5.05));
        assert_eq!(e.sum("cicada_interval_request_throughput"), Some(4.0));
        let iq = e.by_label("cicada_interval_ttft_seconds", "quantile");
        assert_eq!(iq.get("0.9"), Some(&0.02));
        assert!(
            text.contains("scenario=\"a \\\"quoted\\\" name\""),
            "{text}"
        );
        // metrics without samples say so rather than 0
        assert!(text.contains("cicada_tpot_seconds{quantile=\"0.5\"} NaN"));
        // every sample line belongs to a declared family
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = name.trim_end_matches("_sum").trim_end_matches("_count");
            assert!(
                text.contains(&format!("# TYPE {family} ")),
                "{name} has no TYPE line"
            );
        }
    }
}

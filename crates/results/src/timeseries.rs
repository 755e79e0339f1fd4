//! `timeseries.csv`: every finished interval in tidy form, one row per
//! (interval, metric, statistic), written as the merge finalises each interval
//! so a long run never holds its history in memory.
//!
//! Columns: `step`, `interval`, `start_s`, `end_s`, `metric`, `unit`, `stat`,
//! `value` (see docs/METRICS.md, "Files").

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use cicada_metrics::{Counter, Metric, MetricSet, Unit};

/// The header, in order.
pub const HEADER: [&str; 8] = [
    "stage", "interval", "start_s", "end_s", "metric", "unit", "stat", "value",
];

/// Distribution statistics written per metric and interval, with their quantile (None: not a quantile).
const STATS: [(&str, Option<f64>); 8] = [
    ("count", None),
    ("mean", None),
    ("min", None),
    ("p50", Some(0.5)),
    ("p90", Some(0.9)),
    ("p99", Some(0.99)),
    ("p99.9", Some(0.999)),
    ("max", None),
];

/// Unit label of a metric's values in the file.
fn unit_label(unit: Unit) -> &'static str {
    match unit {
        Unit::Micros => "ms",
        Unit::MilliTokensPerSecond => "tok/s",
        Unit::Items => "items",
    }
}

/// Up to three decimals, without trailing zeros (`2`, `0.5`, `51.543`).
fn num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// One interval's place in the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalPlace {
    /// Sweep step (0 without a sweep).
    pub step: u32,
    /// Interval number since the step's start barrier.
    pub index: u64,
    /// Interval start, seconds after the barrier.
    pub start_s: f64,
    /// Interval length, seconds (the step's last interval may be short).
    pub length_s: f64,
}

/// Rows of one interval: (metric, unit, stat, value).
pub fn interval_rows(place: IntervalPlace, set: &MetricSet, in_flight: u64) -> Vec<[String; 4]> {
    let mut rows: Vec<[String; 4]> = Vec::new();
    let mut push = |metric: &str, unit: &str, stat: &str, value: String| {
        rows.push([metric.into(), unit.into(), stat.into(), value]);
    };
    let o = &set.outcomes;
    push("requests", "requests", "ended", o.sent().to_string());
    push("requests", "requests", "ok", o.ok().to_string());
    push("requests", "requests", "failed", o.failed().to_string());
    for (class, c) in o.failures() {
        push(
            "failures",
            "requests",
            &class.to_string(),
            c.count.to_string(),
        );
    }
    let len = place.length_s.max(f64::MIN_POSITIVE);
    let input = set.counter(Counter::InputTokens);
    let output = set.counter(Counter::OutputTokens);
    push(
        "request_throughput",
        "req/s",
        "value",
        num(o.ok() as f64 / len),
    );
    push(
        "output_throughput",
        "tok/s",
        "value",
        num(output as f64 / len),
    );
    push(
        "total_token_throughput",
        "tok/s",
        "value",
        num((input + output) as f64 / len),
    );
    push("input_tokens", "tokens", "total", input.to_string());
    push("output_tokens", "tokens", "total", output.to_string());
    push("in_flight", "requests", "value", in_flight.to_string());
    let busy_us: u64 = set.concurrency.iter().map(|(_, us)| us).sum();
    push(
        "concurrency",
        "requests",
        "mean",
        num(busy_us as f64 / (len * 1e6)),
    );
    for (metric, h) in set.non_empty() {
        if !Metric::REQUEST.contains(&metric) {
            continue;
        }
        let k = metric.unit().display_scale();
        let unit = unit_label(metric.unit());
        for (stat, q) in STATS {
            let v = match (stat, q) {
                ("count", _) => h.count() as f64,
                ("mean", _) => h.mean() * k,
                ("min", _) => h.min() as f64 * k,
                ("max", _) => h.max() as f64 * k,
                (_, Some(q)) => h.quantile(q) as f64 * k,
                _ => continue,
            };
            push(metric.name(), unit, stat, num(v));
        }
    }
    rows
}

/// Streams interval rows to `timeseries.csv`.
pub struct TimeseriesWriter {
    w: csv::Writer<BufWriter<File>>,
}

impl std::fmt::Debug for TimeseriesWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TimeseriesWriter")
    }
}

impl TimeseriesWriter {
    /// Create (or replace) the file and write the header.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = File::create(path)?;
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(BufWriter::new(file));
        w.write_record(HEADER).map_err(std::io::Error::other)?;
        Ok(Self { w })
    }

    /// Write every row of one interval, then flush so the file can be followed.
    pub fn write(
        &mut self,
        place: IntervalPlace,
        set: &MetricSet,
        in_flight: u64,
    ) -> std::io::Result<()> {
        let head = [
            place.step.to_string(),
            place.index.to_string(),
            num(place.start_s),
            num(place.start_s + place.length_s),
        ];
        for [metric, unit, stat, value] in interval_rows(place, set, in_flight) {
            self.w
                .write_record(head.iter().chain([&metric, &unit, &stat, &value]))
                .map_err(std::io::Error::other)?;
        }
        // flushes csv's buffer and the file's
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::Outcome;

    fn set() -> MetricSet {
        let mut s = MetricSet::default();
        for v in [10_000u64, 20_000, 30_000, 40_000] {
            s.count_outcome(Outcome::Ok, None);
            s.histogram_mut(Metric::Ttft).record(v);
        }
        s.count_outcome(Outcome::Http(503), Some("busy"));
        s.counters.add(Counter::OutputTokens, 100);
        s.counters.add(Counter::InputTokens, 50);
        s.concurrency.add_span(3, 0, 2_000_000);
        s
    }

    fn find<'a>(rows: &'a [[String; 4]], metric: &str, stat: &str) -> &'a str {
        rows.iter()
            .find(|r| r[0] == metric && r[2] == stat)
            .map(|r| r[3].as_str())
            .unwrap_or_else(|| panic!("no {metric}/{stat} in {rows:?}"))
    }

    #[test]
    fn an_interval_becomes_tidy_rows() {
        let place = IntervalPlace {
            step: 0,
            index: 3,
            start_s: 6.0,
            length_s: 2.0,
        };
        let rows = interval_rows(place, &set(), 7);
        assert_eq!(find(&rows, "requests", "ended"), "5");
        assert_eq!(find(&rows, "requests", "failed"), "1");
        assert_eq!(find(&rows, "failures", "http_503"), "1");
        assert_eq!(find(&rows, "request_throughput", "value"), "2");
        assert_eq!(find(&rows, "output_throughput", "value"), "50");
        assert_eq!(find(&rows, "total_token_throughput", "value"), "75");
        assert_eq!(find(&rows, "in_flight", "value"), "7");
        assert_eq!(find(&rows, "concurrency", "mean"), "3");
        assert_eq!(find(&rows, "ttft", "count"), "4");
        assert_eq!(find(&rows, "ttft", "mean"), "25");
        assert_eq!(find(&rows, "ttft", "min"), "10");
        // highest equivalent value: within the histogram's 0.1 %
        let max: f64 = find(&rows, "ttft", "max").parse().unwrap();
        assert!((40.0..=40.04).contains(&max), "{max}");
        let ttft_unit = rows.iter().find(|r| r[0] == "ttft").map(|r| r[1].as_str());
        assert_eq!(ttft_unit, Some("ms"));
        assert!(
            !rows.iter().any(|r| r[0] == "tpot"),
            "metrics without samples have no rows"
        );
    }

    #[test]
    fn the_file_reads_back_with_a_standard_csv_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timeseries.csv");
        let mut w = TimeseriesWriter::create(&path).unwrap();
        for index in 0..3 {
            let place = IntervalPlace {
                step: 2,
                index,
                start_s: index as f64,
                length_s: 1.0,
            };
            w.write(place, &set(), 1).unwrap();
        }
        drop(w);
        let mut r = csv::Reader::from_path(&path).unwrap();
        assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), HEADER);
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        let per_interval = interval_rows(
            IntervalPlace {
                step: 2,
                index: 0,
                start_s: 0.0,
                length_s: 1.0,
            },
            &set(),
            1,
        )
        .len();
        assert_eq!(rows.len(), 3 * per_interval);
        let last = rows.last().unwrap();
        assert_eq!(&last[0], "2");
        assert_eq!(&last[1], "2");
        assert_eq!(&last[2], "2");
        assert_eq!(&last[3], "3");
    }
}

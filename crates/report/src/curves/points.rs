//! What the comparison draws: one [`Point`] per run or sweep stage, read
//! from its result file; the x axis the curves share ([`Axis`], chosen from
//! the runs unless asked for); and the curves themselves ([`Line`]), one
//! per configuration, taken from the points.

use std::path::PathBuf;

use crate::read::ResultFile;
use cicada_results::document::{MetricStats, RequestRate};

/// The x axis of the curves drawn against the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Users (closed loop) or `max_concurrency`, as configured.
    Concurrency,
    /// Requests per second: the configured rate, or the achieved one.
    Rate,
}

impl Axis {
    /// The axis title, with its unit.
    pub fn title(self) -> &'static str {
        match self {
            Axis::Concurrency => "concurrency (users or max_concurrency)",
            Axis::Rate => "request rate (req/s)",
        }
    }

    /// The short name in table headers.
    pub fn column(self) -> &'static str {
        match self {
            Axis::Concurrency => "concurrency",
            Axis::Rate => "rate (req/s)",
        }
    }
}

/// A p50 and a p99, in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pair {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

impl Pair {
    /// Whether the run had samples of the metric.
    pub fn is_some(&self) -> bool {
        self.p50.is_some() || self.p99.is_some()
    }
}

/// One run or sweep stage: where it sits on each axis and what it measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Point {
    /// The configuration (one line per label).
    pub label: String,
    /// The file it was read from.
    pub path: PathBuf,
    /// The sweep step or `[[stages]]` window (0: a whole run).
    pub stage: u32,
    /// Users or `max_concurrency`, as configured.
    pub concurrency: Option<f64>,
    /// The mean number of requests in flight, as measured.
    pub mean_concurrency: Option<f64>,
    /// The configured request rate (none: unbounded, a ramp, or closed loop).
    pub rate: Option<f64>,
    /// Requests sent per second over the sending time (or vLLM's request throughput).
    pub achieved_rate: Option<f64>,
    pub completed: Option<u64>,
    pub failed: Option<u64>,
    pub request_throughput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub ttft: Pair,
    pub tpot: Pair,
    pub e2el: Pair,
    /// Time to first answer token, only where requests reasoned.
    pub ttfa: Pair,
    /// Requests that reasoned (none: the file does not say).
    pub reasoning_requests: Option<u64>,
}

/// A value from the file's `cicada.metrics` entry `name` at `p` ("p50", "p99").
fn stat(entries: Option<&MetricStats>, key: &str) -> Option<f64> {
    let s = entries?;
    let at = s.percentiles.0.iter().find(|(k, _)| k == key);
    at.and_then(|(_, v)| *v)
        .or(if key == "p50" { s.median } else { None })
}

impl Point {
    /// The point of one result file, under `label`.
    pub fn of(file: &ResultFile, label: &str) -> Self {
        let d = file.document();
        let cicada = d.cicada.as_ref();
        let scenario = cicada.map(|c| &c.scenario);
        let load = |key: &str| scenario.and_then(|s| s.pointer(&format!("/load/{key}")));
        let users = load("users").and_then(serde_json::Value::as_f64);
        let ramp = load("ramp").is_some_and(|r| !r.is_null());
        let rate = match &d.request_rate {
            Some(RequestRate::PerSecond(r)) if r.is_finite() && !ramp => Some(*r),
            _ => None,
        };
        let pair = |name: &str| {
            d.latencies
                .metric(name)
                .map_or_else(Pair::default, |l| Pair {
                    p50: l.at(50.0).or(l.median),
                    p99: l.at(99.0),
                })
        };
        let metric = |name: &str| {
            cicada.and_then(|c| c.metrics.0.iter().find(|(k, _)| k == name).map(|(_, s)| s))
        };
        let ttfa = metric("ttfa").filter(|s| s.count > 0);
        Point {
            label: label.to_string(),
            path: file.path.clone(),
            stage: cicada.map_or(0, |c| c.stage),
            concurrency: users.or(d.max_concurrency.map(f64::from)),
            mean_concurrency: cicada.and_then(|c| c.mean_concurrent_requests),
            rate,
            achieved_rate: cicada
                .and_then(|c| c.achieved_request_rate)
                .or(d.request_throughput),
            completed: d.completed,
            failed: d.failed,
            request_throughput: d.request_throughput,
            output_throughput: d.output_throughput,
            ttft: pair("ttft"),
            tpot: pair("tpot"),
            e2el: pair("e2el"),
            ttfa: Pair {
                p50: stat(ttfa, "p50"),
                p99: stat(ttfa, "p99"),
            },
            reasoning_requests: cicada.and_then(|c| {
                c.counters
                    .0
                    .iter()
                    .find(|(k, _)| k == "reasoning_requests")
                    .map(|(_, n)| *n)
            }),
        }
    }

    /// Where the point sits on `axis`, and whether that is a measured
    /// stand-in (the mean in flight, the achieved rate) for a configured
    /// value the run did not have.
    pub fn x(&self, axis: Axis) -> Option<(f64, bool)> {
        let (configured, measured) = match axis {
            Axis::Concurrency => (self.concurrency, self.mean_concurrency),
            Axis::Rate => (self.rate, self.achieved_rate),
        };
        configured
            .map(|v| (v, false))
            .or(measured.map(|v| (v, true)))
            .filter(|(v, _)| v.is_finite())
    }

    /// Its name in tooltips and tables: the stage, else the file.
    pub fn name(&self) -> String {
        if self.stage > 0 {
            format!("stage {}", self.stage)
        } else {
            self.path.display().to_string()
        }
    }
}

/// Distinct finite values, compared to a part in a million.
fn distinct(values: impl Iterator<Item = f64>) -> usize {
    let mut seen: Vec<f64> = Vec::new();
    for v in values {
        if !seen
            .iter()
            .any(|s| (s - v).abs() <= 1e-6 * s.abs().max(v.abs()))
        {
            seen.push(v);
        }
    }
    seen.len()
}

/// The x axis when none is asked for: concurrency where every run has one
/// configured and it varies (or no run has a configured rate to vary
/// instead); else the request rate (configured where it was, achieved
/// where not, as in GuideLLM's sweep of a synchronous, a throughput and
/// constant-rate stages).
pub fn choose_axis(points: &[Point]) -> Axis {
    let all_concurrency = points.iter().all(|p| p.concurrency.is_some());
    let all_rate = points.iter().all(|p| p.rate.is_some());
    let concurrency_varies = distinct(points.iter().filter_map(|p| p.concurrency)) > 1;
    let rate_varies = distinct(points.iter().filter_map(|p| p.rate)) > 1;
    if all_concurrency && (concurrency_varies || !(all_rate && rate_varies)) {
        Axis::Concurrency
    } else {
        Axis::Rate
    }
}

/// One configuration's curve: its points in x order.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    /// Palette index: the label's place among the labels, the same in every chart.
    pub color: usize,
    /// (x, y, the point's name).
    pub points: Vec<(f64, f64, String)>,
}

/// The labels in the order they first appear.
pub fn labels(points: &[Point]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in points {
        if !out.contains(&p.label) {
            out.push(p.label.clone());
        }
    }
    out
}

/// One line per label of (x, y) where a point has both, sorted by x; a
/// label whose points have none keeps its colour and draws nothing.
pub fn lines(
    points: &[Point],
    x: &dyn Fn(&Point) -> Option<f64>,
    y: &dyn Fn(&Point) -> Option<f64>,
) -> Vec<Line> {
    labels(points)
        .into_iter()
        .enumerate()
        .map(|(color, label)| {
            let mut pts: Vec<(f64, f64, String)> = points
                .iter()
                .filter(|p| p.label == label)
                .filter_map(|p| Some((x(p)?, y(p)?, p.name())))
                .filter(|(x, y, _)| x.is_finite() && y.is_finite())
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Line {
                label,
                color,
                points: pts,
            }
        })
        .filter(|l| !l.points.is_empty())
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn point(label: &str, stage: u32, conc: Option<f64>, rate: Option<f64>) -> Point {
        Point {
            label: label.into(),
            path: PathBuf::from(format!("{label}/result-stage{stage}.json")),
            stage,
            concurrency: conc,
            mean_concurrency: conc.map(|c| c * 0.9),
            rate,
            achieved_rate: Some(rate.unwrap_or(100.0) * 0.95),
            output_throughput: Some(10.0 * conc.unwrap_or(1.0)),
            ttft: Pair {
                p50: Some(20.0 + f64::from(stage)),
                p99: Some(40.0),
            },
            ..Point::default()
        }
    }

    #[test]
    fn the_axis_follows_what_the_runs_varied() {
        // a max_concurrency sweep at an unbounded rate
        let conc = [
            point("a", 1, Some(1.0), None),
            point("a", 2, Some(8.0), None),
        ];
        assert_eq!(choose_axis(&conc), Axis::Concurrency);
        // a rate sweep: no concurrency configured
        let rate = [
            point("a", 1, None, Some(2.0)),
            point("a", 2, None, Some(8.0)),
        ];
        assert_eq!(choose_axis(&rate), Axis::Rate);
        // a rate sweep under one max_concurrency cap: the rate is what varies
        let capped = [
            point("a", 1, Some(64.0), Some(2.0)),
            point("a", 2, Some(64.0), Some(8.0)),
        ];
        assert_eq!(choose_axis(&capped), Axis::Rate);
        // both varied: concurrency
        let both = [
            point("a", 1, Some(4.0), Some(2.0)),
            point("a", 2, Some(64.0), Some(8.0)),
        ];
        assert_eq!(choose_axis(&both), Axis::Concurrency);
        // GuideLLM's auto sweep: synchronous (concurrency 1), throughput
        // (unbounded), then rates: the achieved rate places every stage
        let auto = [
            point("a", 1, Some(1.0), None),
            point("a", 2, None, None),
            point("a", 3, None, Some(5.0)),
        ];
        assert_eq!(choose_axis(&auto), Axis::Rate);
        assert_eq!(auto[1].x(Axis::Rate), Some((95.0, true)), "achieved");
        assert_eq!(auto[2].x(Axis::Rate), Some((5.0, false)), "configured");
        // single runs at one concurrency each
        let one = [
            point("a", 0, Some(8.0), None),
            point("b", 0, Some(8.0), None),
        ];
        assert_eq!(choose_axis(&one), Axis::Concurrency);
    }

    #[test]
    fn one_line_per_label_in_x_order_with_stable_colours() {
        let points = [
            point("slow", 2, Some(8.0), None),
            point("fast", 1, Some(1.0), None),
            point("slow", 1, Some(1.0), None),
            point("fast", 2, Some(8.0), None),
            Point {
                ttft: Pair::default(),
                ..point("fast", 3, Some(4.0), None)
            },
        ];
        let x = |p: &Point| p.x(Axis::Concurrency).map(|v| v.0);
        let ls = lines(&points, &x, &|p| p.ttft.p50);
        assert_eq!(ls.len(), 2);
        assert_eq!((ls[0].label.as_str(), ls[0].color), ("slow", 0));
        assert_eq!((ls[1].label.as_str(), ls[1].color), ("fast", 1));
        let xy = |l: &Line| l.points.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>();
        assert_eq!(xy(&ls[0]), [(1.0, 21.0), (8.0, 22.0)]);
        // the stage without TTFT samples leaves no point
        assert_eq!(xy(&ls[1]), [(1.0, 21.0), (8.0, 22.0)]);
        assert_eq!(ls[1].points[1].2, "stage 2");
        // a chart where "slow" has nothing keeps "fast" in its colour
        let only_fast = lines(&points, &x, &|p| (p.label == "fast").then_some(1.0));
        assert_eq!(only_fast.len(), 1);
        assert_eq!(only_fast[0].color, 1);
        assert_eq!(only_fast[0].points.len(), 3);
        // against throughput: sorted by throughput
        let by_tput = lines(&points, &|p| p.output_throughput, &|p| p.ttft.p99);
        assert_eq!(by_tput[0].points[0].0, 10.0);
        assert_eq!(by_tput[0].points[1].0, 80.0);
    }
}

//! The page's charts: percentile curves, TTFT/ITL, throughput and tokens
//! over time, and a sweep's latency against throughput.

use cicada_metrics::{Metric, Summary};

use super::stage_label;
use crate::RunResult;
use crate::interval::IntervalRow;
use crate::svg::{LineChart, Series, XAxis};

/// Most points drawn per series over time; longer runs are averaged into buckets.
const MAX_POINTS: usize = 1500;

/// One metric's percentile curve per result (x: nines axis up to what the sample count supports).
pub(super) fn percentile_chart(results: &[&RunResult], m: Metric) -> String {
    let series = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let h = r.total.histogram(m);
            if h.is_empty() {
                return None;
            }
            let k = m.unit().display_scale();
            // beyond log10(count) nines there is at most one sample
            let top = (h.count() as f64).log10().clamp(1.0, 5.0);
            let steps = (top * 40.0).ceil() as usize;
            let mut points: Vec<(f64, f64)> = (0..=steps)
                .map(|j| {
                    let x = top * j as f64 / steps as f64;
                    let q = 1.0 - 10f64.powf(-x);
                    (x, h.quantile(q) as f64 * k)
                })
                .collect();
            points.push((top, h.max() as f64 * k));
            Some(Series::line(stage_label(r), i, points))
        })
        .collect();
    LineChart {
        title: format!("{} percentiles", m.label()),
        x_label: "percentile".into(),
        y_label: format!("{} (ms)", m.label()),
        x_axis: XAxis::Nines,
        series,
    }
    .render()
}

/// Seconds from the first step's barrier to each step's, so steps share one time line.
fn offsets(steps: &[&RunResult]) -> Vec<f64> {
    let t0 = steps.first().map_or(0.0, |r| r.started_unix);
    steps
        .iter()
        .map(|r| (r.started_unix - t0).max(0.0))
        .collect()
}

/// (x, y) over every step's interval rows; `pick` may skip a row; a NaN
/// separates steps so lines break between them.
fn timeline(steps: &[&RunResult], pick: &dyn Fn(&IntervalRow) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (r, off) in steps.iter().zip(offsets(steps)) {
        if !out.is_empty() {
            out.push((f64::NAN, f64::NAN));
        }
        let pts: Vec<(f64, f64)> = r
            .rows
            .iter()
            .filter_map(|row| pick(row).map(|y| (off + row.start_s, y)))
            .collect();
        out.extend(downsample(&pts));
    }
    out
}

/// Average consecutive points into at most [`MAX_POINTS`] buckets.
fn downsample(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if pts.len() <= MAX_POINTS {
        return pts.to_vec();
    }
    let per = pts.len().div_ceil(MAX_POINTS);
    pts.chunks(per)
        .map(|c| {
            let n = c.len() as f64;
            (
                c.iter().map(|p| p.0).sum::<f64>() / n,
                c.iter().map(|p| p.1).sum::<f64>() / n,
            )
        })
        .collect()
}

pub(super) fn over_time(steps: &[&RunResult], title: &str, m: Metric) -> String {
    let p50 = timeline(steps, &|r| r.metric(m).map(|x| x.2));
    let p99 = timeline(steps, &|r| r.metric(m).map(|x| x.4));
    let mean = timeline(steps, &|r| r.metric(m).map(|x| x.1));
    LineChart {
        title: title.into(),
        x_label: "seconds since start".into(),
        y_label: format!("{} (ms)", m.label()),
        x_axis: XAxis::Linear,
        series: vec![
            Series::line("p50", 0, p50),
            Series::line("mean", 2, mean),
            Series::line("p99", 1, p99).dashed(),
        ],
    }
    .render()
}

pub(super) fn throughput_chart(steps: &[&RunResult]) -> String {
    let per_s = |r: &IntervalRow, n: u64| n as f64 / r.length_s.max(f64::MIN_POSITIVE);
    LineChart {
        title: "Requests over time".into(),
        x_label: "seconds since start".into(),
        y_label: "requests".into(),
        x_axis: XAxis::Linear,
        series: vec![
            Series::line("completed/s", 0, timeline(steps, &|r| Some(per_s(r, r.ok)))),
            Series::line(
                "failed/s",
                1,
                timeline(steps, &|r| Some(per_s(r, r.failed))),
            ),
            Series::line(
                "in flight",
                4,
                timeline(steps, &|r| Some(r.in_flight as f64)),
            )
            .dashed(),
        ],
    }
    .render()
}

pub(super) fn tokens_chart(steps: &[&RunResult]) -> String {
    let per_s = |r: &IntervalRow, n: u64| n as f64 / r.length_s.max(f64::MIN_POSITIVE);
    LineChart {
        title: "Token throughput over time".into(),
        x_label: "seconds since start".into(),
        y_label: "tokens/s".into(),
        x_axis: XAxis::Linear,
        series: vec![
            Series::line(
                "output tok/s",
                0,
                timeline(steps, &|r| Some(per_s(r, r.output_tokens))),
            ),
            Series::line(
                "input tok/s",
                5,
                timeline(steps, &|r| Some(per_s(r, r.input_tokens))),
            )
            .dashed(),
        ],
    }
    .render()
}

/// Latency (mean and p99) against output throughput, one point per step.
pub(super) fn sweep_chart(steps: &[&RunResult], m: Metric) -> String {
    let summaries: Vec<(String, Summary)> = steps
        .iter()
        .map(|r| (stage_label(r), r.summary()))
        .collect();
    let mut by_x: Vec<&(String, Summary)> = summaries.iter().collect();
    by_x.sort_by(|a, b| a.1.output_throughput.total_cmp(&b.1.output_throughput));
    let series = |name: &str, color: usize, pick: fn(&cicada_metrics::DistributionStats) -> f64| {
        let (points, labels) = by_x
            .iter()
            .filter_map(|(label, s)| {
                s.metric(m)
                    .map(|d| ((s.output_throughput, pick(d)), label.clone()))
            })
            .unzip();
        Series {
            dots: true,
            labels,
            ..Series::line(format!("{} {name}", m.label()), color, points)
        }
    };
    LineChart {
        title: format!("{} vs output throughput", m.label()),
        x_label: "output tokens/s".into(),
        y_label: format!("{} (ms)", m.label()),
        x_axis: XAxis::Linear,
        series: vec![
            series("mean", 0, |d| d.mean),
            series("p99", 1, |d| d.percentile(99.0).unwrap_or(0.0)).dashed(),
        ],
    }
    .render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsampling_keeps_long_runs_bounded() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 1.0)).collect();
        let d = downsample(&pts);
        assert!(d.len() <= MAX_POINTS, "{}", d.len());
        assert!(d.iter().all(|p| p.1 == 1.0));
        assert_eq!(downsample(&pts[..10]).len(), 10);
    }
}

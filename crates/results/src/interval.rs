//! The time series a run keeps: one row per report interval.

use cicada_metrics::{Counter, Metric, MetricSet};

/// Figures of one interval, in display units.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    /// Interval number since the start barrier.
    pub index: u64,
    /// Interval start, seconds since the barrier.
    pub start_s: f64,
    /// Interval length, seconds.
    pub length_s: f64,
    /// Requests that ended in the interval, any outcome.
    pub ended: u64,
    /// Successful requests that ended in the interval.
    pub ok: u64,
    /// Failed requests that ended in the interval.
    pub failed: u64,
    /// Output tokens of requests that ended in the interval.
    pub output_tokens: u64,
    /// Input tokens of requests that ended in the interval.
    pub input_tokens: u64,
    /// Requests in flight at the end of the interval, summed over workers.
    pub in_flight: u64,
    /// (metric, count, mean, p50, p90, p99, max) in display units.
    pub metrics: Vec<(Metric, u64, f64, f64, f64, f64, f64)>,
}

impl IntervalRow {
    /// The row of interval `index` from the fleet's merged measurements of it.
    pub fn of(index: u64, start_s: f64, length_s: f64, set: &MetricSet, in_flight: u64) -> Self {
        let metrics = set
            .non_empty()
            .map(|(m, h)| {
                let k = m.unit().display_scale();
                (
                    m,
                    h.count(),
                    h.mean() * k,
                    h.quantile(0.5) as f64 * k,
                    h.quantile(0.9) as f64 * k,
                    h.quantile(0.99) as f64 * k,
                    h.max() as f64 * k,
                )
            })
            .collect();
        Self {
            index,
            start_s,
            length_s,
            ended: set.outcomes.sent(),
            ok: set.outcomes.ok(),
            failed: set.outcomes.failed(),
            output_tokens: set.counter(Counter::OutputTokens),
            input_tokens: set.counter(Counter::InputTokens),
            in_flight,
            metrics,
        }
    }

    /// One metric's (count, mean, p50, p90, p99, max), if it had samples.
    pub fn metric(&self, metric: Metric) -> Option<(u64, f64, f64, f64, f64, f64)> {
        self.metrics
            .iter()
            .find(|m| m.0 == metric)
            .map(|m| (m.1, m.2, m.3, m.4, m.5, m.6))
    }
}

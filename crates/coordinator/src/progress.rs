//! Live progress: one line per interval on stderr.

use cicada_metrics::{Counter, Metric};
use tokio::time::Instant;

use crate::merge::Aggregate;

/// Prints the fleet's progress as the run goes.
pub struct Progress {
    enabled: bool,
    planned: u64,
    last_rows: usize,
}

impl Progress {
    /// A progress printer (silent when `enabled` is false).
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            planned: 0,
            last_rows: 0,
        }
    }

    /// A stage with `planned` requests (0 = open-ended) starts.
    pub fn begin(&mut self, planned: u64) {
        self.planned = planned;
        self.last_rows = 0;
    }

    /// Print a line if new intervals were merged.
    pub fn tick(&mut self, agg: &Aggregate, start: Instant) {
        if !self.enabled || agg.rows.len() == self.last_rows {
            return;
        }
        self.last_rows = agg.rows.len();
        let total = agg.total();
        let elapsed = Instant::now()
            .saturating_duration_since(start)
            .as_secs_f64();
        let rate = agg.rows.last().map_or((0.0, 0.0), |r| {
            (
                r.ok as f64 / r.length_s,
                r.output_tokens as f64 / r.length_s,
            )
        });
        let ttft = total.histogram(Metric::Ttft);
        let of = if self.planned > 0 {
            format!("/{}", self.planned)
        } else {
            String::new()
        };
        eprintln!(
            "[{elapsed:7.1}s] done {}{of}  ok {}  failed {}  in-flight {}  {:.1} req/s  {:.0} tok/s  TTFT p50 {:.1} ms p99 {:.1} ms",
            total.outcomes.sent(),
            total.outcomes.ok(),
            total.outcomes.failed(),
            agg.in_flight(),
            rate.0,
            rate.1,
            ttft.quantile(0.5) as f64 / 1e3,
            ttft.quantile(0.99) as f64 / 1e3,
        );
    }

    /// The stage ended.
    pub fn finish(&mut self, agg: &Aggregate, start: Instant) {
        if !self.enabled {
            return;
        }
        let total = agg.total();
        eprintln!(
            "[{:7.1}s] stage finished: {} requests, {} output tokens",
            Instant::now()
                .saturating_duration_since(start)
                .as_secs_f64(),
            total.outcomes.sent(),
            total.counter(Counter::OutputTokens)
        );
    }
}

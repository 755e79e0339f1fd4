use crate::{
    Concurrency, Counter, Counters, LatencyHistogram, Metric, MetricsError, Outcome, Outcomes,
    Seconds,
};

/// Everything measured for one scope (one target, one interval, or a whole run).
///
/// Sets merge exactly: histograms add bucket counts, counters and outcome
/// classes add, per-second buckets add. Merging in any order or grouping
/// gives the same result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricSet {
    histograms: [LatencyHistogram; Metric::ALL.len()],
    /// Token and request counters.
    pub counters: Counters,
    /// Outcome classes; their total is the number of requests sent.
    pub outcomes: Outcomes,
    /// Per-second activity since the start barrier.
    pub seconds: Seconds,
    /// When requests were sent and ended.
    pub span: Span,
    /// Requests in flight over time (fed by the worker's in-flight tracker).
    pub concurrency: Concurrency,
    /// Requests per address their connection went to (every outcome that
    /// got a connection): where a name's addresses spread the load.
    pub addresses: std::collections::BTreeMap<String, u64>,
}

/// Time marks merged by min / max, in µs since the start barrier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    /// Earliest send.
    pub first_send_us: Option<u64>,
    /// Latest send.
    pub last_send_us: Option<u64>,
    /// Latest end of any request (the run's duration ends here).
    pub last_end_us: Option<u64>,
}

impl Span {
    /// Widen the span to include one request.
    pub fn include(&mut self, sent_us: u64, ended_us: u64) {
        self.merge(&Span {
            first_send_us: Some(sent_us),
            last_send_us: Some(sent_us),
            last_end_us: Some(ended_us),
        });
    }

    /// Combine two spans (min of starts, max of ends).
    pub fn merge(&mut self, other: &Span) {
        fn pick(a: Option<u64>, b: Option<u64>, f: fn(u64, u64) -> u64) -> Option<u64> {
            match (a, b) {
                (Some(x), Some(y)) => Some(f(x, y)),
                (x, y) => x.or(y),
            }
        }
        self.first_send_us = pick(self.first_send_us, other.first_send_us, u64::min);
        self.last_send_us = pick(self.last_send_us, other.last_send_us, u64::max);
        self.last_end_us = pick(self.last_end_us, other.last_end_us, u64::max);
    }
}

impl MetricSet {
    /// The histogram of one metric.
    pub fn histogram(&self, metric: Metric) -> &LatencyHistogram {
        &self.histograms[metric.index()]
    }

    /// Mutable histogram of one metric.
    pub fn histogram_mut(&mut self, metric: Metric) -> &mut LatencyHistogram {
        &mut self.histograms[metric.index()]
    }

    /// Replace one metric's histogram (used when decoding a report).
    pub fn set_histogram(&mut self, metric: Metric, histogram: LatencyHistogram) {
        self.histograms[metric.index()] = histogram;
    }

    /// Value of one counter.
    pub fn counter(&self, counter: Counter) -> u64 {
        self.counters.get(counter)
    }

    /// Count one request outcome.
    pub fn count_outcome(&mut self, outcome: Outcome, error: Option<&str>) {
        self.outcomes.add(outcome, error);
    }

    /// Add everything in `other` into `self`.
    pub fn merge(&mut self, other: &MetricSet) -> Result<(), MetricsError> {
        for m in Metric::ALL {
            self.histograms[m.index()]
                .merge(&other.histograms[m.index()])
                .map_err(|e| match e {
                    MetricsError::Merge { reason, .. } => MetricsError::Merge {
                        metric: m.name().to_string(),
                        reason,
                    },
                    other => other,
                })?;
        }
        self.counters.merge(&other.counters);
        self.outcomes.merge(&other.outcomes);
        self.seconds.merge(&other.seconds);
        self.span.merge(&other.span);
        self.concurrency.merge(&other.concurrency);
        for (addr, n) in &other.addresses {
            *self.addresses.entry(addr.clone()).or_default() += n;
        }
        Ok(())
    }

    /// Metrics with at least one sample, with their histograms.
    pub fn non_empty(&self) -> impl Iterator<Item = (Metric, &LatencyHistogram)> {
        Metric::ALL
            .into_iter()
            .map(|m| (m, &self.histograms[m.index()]))
            .filter(|(_, h)| !h.is_empty())
    }

    /// True when nothing at all was recorded.
    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
            && self.non_empty().next().is_none()
            && self.counters.non_zero().next().is_none()
            && self.seconds.is_empty()
            && self.span == Span::default()
            && self.concurrency.is_empty()
            && self.addresses.is_empty()
    }

    /// Take the contents, leaving an empty set (for interval reports).
    pub fn take(&mut self) -> MetricSet {
        std::mem::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random_values(seed: u64, n: usize) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                // log-uniform over 10 µs .. 100 s, like real latencies
                let exp: f64 = rng.random_range(1.0..8.0);
                10f64.powf(exp) as u64
            })
            .collect()
    }

    /// The acceptance criterion: merging k partial histograms is identical to one
    /// histogram fed every sample, for every percentile, count, sum and mean.
    #[test]
    fn merge_of_k_shards_equals_one_histogram() {
        let values = random_values(7, 50_000);
        let mut whole = MetricSet::default();
        for v in &values {
            whole.histogram_mut(Metric::Ttft).record(*v);
        }
        for k in [1usize, 2, 3, 8, 31] {
            let mut shards = vec![MetricSet::default(); k];
            for (i, v) in values.iter().enumerate() {
                shards[i % k].histogram_mut(Metric::Ttft).record(*v);
            }
            // merge in a different grouping: pairwise tree, then fold
            let mut merged = MetricSet::default();
            for s in shards.iter().rev() {
                // round-trip through the wire encoding as a worker report would
                let h = s.histogram(Metric::Ttft);
                let decoded = LatencyHistogram::decode(&h.encode(), h.sum(), h.sum_sq()).unwrap();
                let mut wire = MetricSet::default();
                wire.set_histogram(Metric::Ttft, decoded);
                merged.merge(&wire).unwrap();
            }
            let (a, b) = (
                whole.histogram(Metric::Ttft),
                merged.histogram(Metric::Ttft),
            );
            // the reference itself must be right, or equality proves nothing
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let exact_p99 = sorted[(0.99 * sorted.len() as f64).ceil() as usize - 1] as f64;
            assert!((a.quantile(0.99) as f64 - exact_p99).abs() <= exact_p99 * 0.001 + 1.0);
            assert_eq!(a.count(), b.count(), "k={k}");
            assert_eq!(a.sum(), b.sum(), "k={k}");
            assert_eq!(a.mean(), b.mean(), "k={k}");
            for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
                assert_eq!(a.quantile(q), b.quantile(q), "k={k} q={q}");
            }
            assert_eq!(a.hdr(), b.hdr(), "k={k}");
        }
    }

    /// The standard deviation comes out bit for bit the same however the
    /// samples are split over workers and intervals and in whatever order the
    /// parts merge: it rests on exact integer sums, computed once at the end
    /// (a floating-point sum of squares depends on the order it was added in).
    #[test]
    fn std_is_bit_identical_in_any_merge_order_and_partition() {
        let values = random_values(11, 40_000);
        let whole = {
            let mut h = LatencyHistogram::new();
            for v in &values {
                h.record(*v);
            }
            h
        };
        // reference: two passes in f64 around the exact mean
        let n = values.len() as f64;
        let mean = values.iter().map(|v| *v as u128).sum::<u128>() as f64 / n;
        let var = values
            .iter()
            .map(|v| (*v as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        let reference = var.sqrt();
        assert!(
            (whole.std_dev() - reference).abs() <= 1e-9 * reference,
            "std {} against the two-pass {reference}",
            whole.std_dev()
        );
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for k in [2usize, 3, 7, 64, 1_000] {
            // deal the samples out at random, then merge the parts in a random
            // order, some through the wire's filled-bucket form
            let mut parts = vec![LatencyHistogram::new(); k];
            for v in &values {
                parts[rng.random_range(0..k)].record(*v);
            }
            for round in 0..3 {
                let mut order: Vec<usize> = (0..k).collect();
                for i in (1..k).rev() {
                    order.swap(i, rng.random_range(0..=i));
                }
                let mut merged = LatencyHistogram::new();
                for &i in &order {
                    let p = &parts[i];
                    let wire = LatencyHistogram::from_recorded(
                        p.recorded().collect(),
                        p.sum(),
                        p.sum_sq(),
                    )
                    .unwrap();
                    merged.merge(if round == 1 { &wire } else { p }).unwrap();
                }
                assert_eq!(
                    merged.std_dev().to_bits(),
                    whole.std_dev().to_bits(),
                    "{k} parts, round {round}: std {} against {}",
                    merged.std_dev(),
                    whole.std_dev()
                );
                assert_eq!(merged, whole, "{k} parts, round {round}");
            }
        }
    }

    #[test]
    fn counters_outcomes_and_seconds_merge_by_addition() {
        let mut a = MetricSet::default();
        a.counters.add(Counter::OutputTokens, 10);
        a.count_outcome(Outcome::Ok, None);
        a.seconds.bucket(3).output_tokens = 4;
        a.concurrency.add_span(2, 3_000_000, 4_000_000);
        let mut b = MetricSet::default();
        b.counters.add(Counter::OutputTokens, 5);
        b.count_outcome(Outcome::Timeout, Some("t"));
        b.seconds.bucket(3).output_tokens = 6;
        b.concurrency.add_span(5, 3_000_000, 4_000_000);
        b.concurrency.add_span(6, 4_000_000, 5_000_000);
        a.merge(&b).unwrap();
        assert_eq!(a.counter(Counter::OutputTokens), 15);
        assert_eq!(a.outcomes.sent(), 2);
        assert_eq!(a.seconds.peak_output_tokens(), 10);
        // fleet peak is the max of sums (7 in second 3), not the sum of maxima (2 + 6)
        assert_eq!(a.concurrency.peak(), 7.0);
        assert!(!a.is_empty());
        let taken = a.take();
        assert!(a.is_empty());
        assert!(!taken.is_empty());
    }
}

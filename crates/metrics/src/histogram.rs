use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};

use crate::MetricsError;

/// Significant decimal digits every histogram keeps (relative error below 0.1 %).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// An HDR histogram plus the exact sum and sum of squares of what it holds.
///
/// Histograms merge exactly (bucket counts add), so fleet-wide percentiles equal
/// those of one histogram fed every sample; the sums make means exact rather
/// than bucket-rounded. The HDR part is allocated on the first sample: a
/// metric set holds one histogram per metric, most of them empty in any one
/// report, and zeroing their buckets was most of the coordinator's cost per
/// report (`coord selftest --fleet`).
#[derive(Debug, Clone, Default)]
pub struct LatencyHistogram {
    hist: Option<Histogram<u64>>,
    sum: u64,
    sum_sq: f64,
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.sum == other.sum
            && self.sum_sq == other.sum_sq
            && ((self.is_empty() && other.is_empty()) || self.hdr() == other.hdr())
    }
}

/// An empty histogram with every histogram's configuration, growing to fit any value.
fn fresh() -> Histogram<u64> {
    let mut hist = match Histogram::new(SIGNIFICANT_DIGITS) {
        Ok(h) => h,
        // 3 significant digits is always a valid configuration.
        Err(e) => unreachable!("hdrhistogram rejected sigfig {SIGNIFICANT_DIGITS}: {e:?}"),
    };
    hist.auto(true);
    hist
}

impl LatencyHistogram {
    /// An empty histogram that grows to fit any value.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one value.
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Record the same value `n` times.
    pub fn record_n(&mut self, value: u64, n: u64) {
        if n == 0 {
            return;
        }
        let hist = self.hist.get_or_insert_with(fresh);
        if hist.record_n(value, n).is_err() {
            // only when growing would overflow usize; clamp rather than lose the count
            hist.saturating_record_n(value, n);
        }
        self.sum = self.sum.saturating_add(value.saturating_mul(n));
        self.sum_sq += (value as f64) * (value as f64) * n as f64;
    }

    /// Add every sample of `other` into `self`.
    pub fn merge(&mut self, other: &LatencyHistogram) -> Result<(), MetricsError> {
        let Some(theirs) = other.hist.as_ref().filter(|h| !h.is_empty()) else {
            return Ok(());
        };
        match &mut self.hist {
            Some(ours) if !ours.is_empty() => {
                ours.add(theirs).map_err(|e| MetricsError::Merge {
                    metric: String::new(),
                    reason: format!("{e:?}"),
                })?;
            }
            // nothing here yet: a copy is the sum, and cheaper than adding
            _ => self.hist = Some(theirs.clone()),
        }
        self.sum = self.sum.saturating_add(other.sum);
        self.sum_sq += other.sum_sq;
        Ok(())
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.hist.as_ref().map_or(0, Histogram::len)
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Exact sum of the samples.
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Sum of squared samples (for the standard deviation).
    pub fn sum_sq(&self) -> f64 {
        self.sum_sq
    }

    /// Exact mean, 0 when empty.
    pub fn mean(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum as f64 / n as f64,
        }
    }

    /// Population standard deviation (numpy's default, as `vllm bench serve` prints).
    pub fn std_dev(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            return 0.0;
        }
        let mean = self.mean();
        (self.sum_sq / n as f64 - mean * mean).max(0.0).sqrt()
    }

    /// Value at quantile `q` in [0, 1]: the nearest-rank order statistic
    /// (rank `ceil(q·n)`, at least 1), as HdrHistogram's highest equivalent
    /// value of its bucket. `q·n` within a billionth of a whole number counts
    /// as that number, so `99.9 / 100` and `0.999` name the same rank (the
    /// one definition every figure uses; docs/METRICS.md#percentiles).
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let exact = q.clamp(0.0, 1.0) * n as f64;
        let nearest = exact.round();
        let rank = if (exact - nearest).abs() <= 1e-9 * exact.max(1.0) {
            nearest
        } else {
            exact.ceil()
        };
        let rank = (rank as u64).clamp(1, n);
        let hist = self.hdr();
        let mut seen = 0u64;
        for v in hist.iter_recorded() {
            seen += v.count_since_last_iteration();
            if seen >= rank {
                return hist.highest_equivalent(v.value_iterated_to());
            }
        }
        hist.highest_equivalent(hist.max())
    }

    /// Value at percentile `p` in [0, 100]: [`Self::quantile`] of `p / 100`.
    pub fn percentile(&self, p: f64) -> u64 {
        self.quantile(p / 100.0)
    }

    /// Smallest recorded value (bucket-rounded).
    pub fn min(&self) -> u64 {
        if self.is_empty() { 0 } else { self.hdr().min() }
    }

    /// Largest recorded value (bucket-rounded).
    pub fn max(&self) -> u64 {
        if self.is_empty() { 0 } else { self.hdr().max() }
    }

    /// The underlying HDR histogram, for export to standard HdrHistogram tools.
    pub fn hdr(&self) -> &Histogram<u64> {
        static EMPTY: std::sync::OnceLock<Histogram<u64>> = std::sync::OnceLock::new();
        self.hist
            .as_ref()
            .unwrap_or_else(|| EMPTY.get_or_init(fresh))
    }

    /// Serialise the histogram part as HdrHistogram V2 + deflate.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        // Writing into a Vec cannot fail; the serializer only errors on I/O or
        // on histograms with counts that cannot be encoded, which u64 never has.
        if let Err(e) = V2DeflateSerializer::new().serialize(self.hdr(), &mut out) {
            unreachable!("V2 deflate serialisation into memory failed: {e:?}");
        }
        out
    }

    /// Serialise the histogram part as plain HdrHistogram V2 (run-length
    /// varints, no deflate): for the worker-to-coordinator wire, where
    /// inflating every histogram of every report was most of the
    /// coordinator's cost per report (`coord selftest --fleet`).
    pub fn encode_plain(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        // as in `encode`: writing into a Vec cannot fail
        if let Err(e) = V2Serializer::new().serialize(self.hdr(), &mut out) {
            unreachable!("V2 serialisation into memory failed: {e:?}");
        }
        out
    }

    /// Rebuild from a V2 (plain or +deflate) blob and the sums sent beside it.
    pub fn decode(blob: &[u8], sum: u64, sum_sq: f64) -> Result<Self, MetricsError> {
        let mut hist: Histogram<u64> =
            Deserializer::new()
                .deserialize(&mut &blob[..])
                .map_err(|e| MetricsError::Decode {
                    metric: String::new(),
                    reason: format!("{e:?}"),
                })?;
        hist.auto(true);
        Ok(Self {
            hist: Some(hist),
            sum,
            sum_sq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_std_are_exact() {
        let mut h = LatencyHistogram::new();
        for v in [1_000, 2_000, 3_000, 4_000] {
            h.record(v);
        }
        assert_eq!(h.mean(), 2_500.0);
        // population std of 1000..4000 step 1000
        assert!((h.std_dev() - 1_118.033_988_749_895).abs() < 1e-6);
        assert_eq!(h.count(), 4);
    }

    #[test]
    fn quantiles_match_exact_order_statistics_within_precision() {
        let mut h = LatencyHistogram::new();
        let mut values: Vec<u64> = (0..20_000u64)
            .map(|i| 10 + (i * 7919) % 5_000_000)
            .collect();
        for v in &values {
            h.record(*v);
        }
        values.sort_unstable();
        for q in [0.01, 0.25, 0.5, 0.9, 0.99, 0.999] {
            let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1] as f64;
            let got = h.quantile(q) as f64;
            assert!(
                (got - exact).abs() <= exact * 0.001 + 1.0,
                "q={q} exact={exact} got={got}"
            );
        }
        assert!((h.max() as f64 - 5_000_009.0).abs() <= 5_000.0);
        assert_eq!(h.min(), 10);
    }

    #[test]
    fn percentiles_take_the_nearest_rank_however_p_is_written() {
        // n distinct values 1..=n: p99.9 is rank 0.999 n, whether it arrives
        // as 99.9 / 100 (0.9990000000000001) or as 0.999 (values above 2047
        // share buckets: the answer is the bucket's highest equivalent)
        for n in [1_000u64, 2_000, 10_000] {
            let mut h = LatencyHistogram::new();
            for v in 1..=n {
                h.record(v);
            }
            let at = |rank: u64| h.hdr().highest_equivalent(rank);
            let want = at(n * 999 / 1000);
            assert_eq!(h.quantile(99.9 / 100.0), want, "n={n} via 99.9/100");
            assert_eq!(h.quantile(0.999), want, "n={n} via 0.999");
            assert_eq!(h.percentile(99.9), want, "n={n} via percentile");
            assert_eq!(h.percentile(50.0), at(n / 2));
            assert_eq!(h.percentile(100.0), at(n));
            assert_eq!(h.percentile(0.0), 1, "rank 1 at the bottom");
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut h = LatencyHistogram::new();
        for v in 1..5_000u64 {
            h.record(v * 37);
        }
        h.record_n(123_456_789, 7);
        let back = LatencyHistogram::decode(&h.encode(), h.sum(), h.sum_sq()).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.quantile(0.99), h.quantile(0.99));
    }

    #[test]
    fn garbage_blob_is_an_error_not_a_panic() {
        assert!(LatencyHistogram::decode(b"not a histogram", 0, 0.0).is_err());
        assert!(LatencyHistogram::decode(&[], 0, 0.0).is_err());
    }
}

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};

use crate::MetricsError;

/// Significant decimal digits every histogram keeps (relative error below 0.1 %).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// An HDR histogram plus the exact sum and sum of squares of what it holds.
///
/// Histograms merge exactly (bucket counts add), so fleet-wide percentiles equal
/// those of one histogram fed every sample; the sums make means and standard
/// deviations exact rather than bucket-rounded. Both sums are integers (µs
/// and µs², or the metric's unit), so they add the same in any order: a
/// merged figure does not depend on how the samples were split over workers
/// and intervals. The sum saturates at 2^64 (584,000 years of µs); below that
/// the sum of squares cannot overflow its u128 (it is at most the largest
/// sample times the sum, under 2^64 · 2^64).
///
/// Buckets are kept in the cheapest form for what the histogram is: nothing
/// until the first sample (a metric set holds one histogram per metric, most
/// of them empty in any one report), the filled buckets alone when a report
/// sent them so (a second of one worker fills a few dozen of the ~14,000
/// buckets TTFT needs for values up to 10 s), and HDR's dense array once
/// samples are recorded, many reports are merged, or a report sent it (ITL
/// fills thousands). Adding a few-bucket report costs one
/// record per filled bucket rather than a walk over every bucket, which was
/// most of the coordinator's cost per report (`cicada selftest --fleet`).
#[derive(Debug, Clone, Default)]
pub struct LatencyHistogram {
    buckets: Buckets,
    sum: u64,
    sum_sq: u128,
}

/// A histogram's buckets (see [`LatencyHistogram`]).
#[derive(Debug, Clone, Default)]
enum Buckets {
    #[default]
    Empty,
    /// Filled buckets as (highest equivalent value, count): values strictly
    /// ascending, counts above 0, at most [`SPARSE_MAX`] of them.
    Sparse(Vec<(u64, u64)>),
    Dense(Histogram<u64>),
}

/// Most filled buckets kept in the sparse form; beyond, the dense array is
/// both smaller and faster to add to.
const SPARSE_MAX: usize = 2048;

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.sum == other.sum && self.sum_sq == other.sum_sq && self.recorded().eq(other.recorded())
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

/// The shared empty histogram: bucket arithmetic (highest equivalent value
/// and such) depends only on the configuration, which every histogram shares.
fn config() -> &'static Histogram<u64> {
    static EMPTY: std::sync::OnceLock<Histogram<u64>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(fresh)
}

/// Record `n` samples of `value` into `hist`.
fn record_into(hist: &mut Histogram<u64>, value: u64, n: u64) {
    if hist.record_n(value, n).is_err() {
        // only when growing would overflow usize; clamp rather than lose the count
        hist.saturating_record_n(value, n);
    }
}

/// A dense histogram holding `pairs`.
fn densify(pairs: &[(u64, u64)]) -> Histogram<u64> {
    let mut hist = fresh();
    for &(value, n) in pairs {
        record_into(&mut hist, value, n);
    }
    hist
}

/// Two ascending pair lists as one, counts of equal values added.
fn merge_pairs(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        if x.0 < y.0 {
            out.push(x);
            i += 1;
        } else if y.0 < x.0 {
            out.push(y);
            j += 1;
        } else {
            out.push((x.0, x.1.saturating_add(y.1)));
            i += 1;
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
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
        record_into(self.dense_mut(), value, n);
        self.sum = self.sum.saturating_add(value.saturating_mul(n));
        let square = u128::from(value) * u128::from(value);
        self.sum_sq = self
            .sum_sq
            .saturating_add(square.saturating_mul(u128::from(n)));
    }

    /// Record `n` samples of `total / n` each (a gap split over the `n`
    /// tokens it brought): the buckets get `total / n` rounded to the
    /// nearest integer `n` times, the sum gets `total` itself, so the mean
    /// stays exact; the sum of squares gets `total² / n` rounded to the
    /// nearest integer (off by at most 1/2 per call, however large `n`).
    pub fn record_split(&mut self, total: u64, n: u64) {
        if n == 0 {
            return;
        }
        record_into(self.dense_mut(), rounded_div(total, n), n);
        self.sum = self.sum.saturating_add(total);
        let square = u128::from(total) * u128::from(total);
        let n = u128::from(n);
        let (q, r) = (square / n, square % n);
        // r < n <= 2^64: doubling it cannot overflow
        let share = q + u128::from(2 * r >= n);
        self.sum_sq = self.sum_sq.saturating_add(share);
    }

    /// The dense form, made now if the buckets are in another.
    fn dense_mut(&mut self) -> &mut Histogram<u64> {
        match &mut self.buckets {
            Buckets::Dense(_) => {}
            Buckets::Empty => self.buckets = Buckets::Dense(fresh()),
            Buckets::Sparse(pairs) => self.buckets = Buckets::Dense(densify(pairs)),
        }
        match &mut self.buckets {
            Buckets::Dense(h) => h,
            _ => unreachable!("the buckets were made dense just above"),
        }
    }

    /// Add every sample of `other` into `self`.
    pub fn merge(&mut self, other: &LatencyHistogram) -> Result<(), MetricsError> {
        if other.is_empty() {
            return Ok(());
        }
        let mut replaced = None;
        match (&mut self.buckets, &other.buckets) {
            (_, Buckets::Empty) => {}
            (Buckets::Dense(ours), Buckets::Dense(theirs)) if !ours.is_empty() => {
                ours.add(theirs).map_err(|e| MetricsError::Merge {
                    metric: String::new(),
                    reason: format!("{e:?}"),
                })?;
            }
            (Buckets::Dense(ours), Buckets::Sparse(theirs)) if !ours.is_empty() => {
                for &(value, n) in theirs {
                    record_into(ours, value, n);
                }
            }
            (Buckets::Sparse(mine), Buckets::Sparse(theirs)) => {
                let both = merge_pairs(mine, theirs);
                replaced = Some(if both.len() > SPARSE_MAX {
                    Buckets::Dense(densify(&both))
                } else {
                    Buckets::Sparse(both)
                });
            }
            (Buckets::Sparse(mine), Buckets::Dense(theirs)) => {
                let mut hist = theirs.clone();
                for &(value, n) in mine.iter() {
                    record_into(&mut hist, value, n);
                }
                replaced = Some(Buckets::Dense(hist));
            }
            // nothing here yet: a copy is the sum, and cheaper than adding
            (_, theirs) => replaced = Some(theirs.clone()),
        }
        if let Some(b) = replaced {
            self.buckets = b;
        }
        self.sum = self.sum.saturating_add(other.sum);
        self.sum_sq = self.sum_sq.saturating_add(other.sum_sq);
        Ok(())
    }

    /// The filled buckets, ascending: (highest equivalent value, count).
    pub fn recorded(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        recorded_of(&self.buckets)
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        match &self.buckets {
            Buckets::Empty => 0,
            Buckets::Sparse(pairs) => pairs.iter().map(|p| p.1).sum(),
            Buckets::Dense(h) => h.len(),
        }
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Exact sum of the samples.
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Exact sum of the squared samples (for the standard deviation).
    pub fn sum_sq(&self) -> u128 {
        self.sum_sq
    }

    /// Exact mean, 0 when empty.
    pub fn mean(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum as f64 / n as f64,
        }
    }

    /// Population standard deviation (numpy's default, as `vllm bench serve`
    /// prints), from the exact sums: `sqrt((Σx² − (Σx)²/n) / n)` with the
    /// difference taken in integers, so only the last division and the square
    /// root round (a few units in the last place of an f64). The same sums
    /// give the same bits, however they were added up.
    pub fn std_dev(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            return 0.0;
        }
        let wide = u128::from(n);
        let sum = u128::from(self.sum);
        // (Σx)² < 2^128 as Σx < 2^64; (Σx)²/n = q + r/n exactly
        let square = sum * sum;
        let (q, r) = (square / wide, square % wide);
        // n · variance = Σx² − q − r/n (never below 0 for real samples; a
        // split record's rounded squares can dip it by a fraction)
        let spread = self.sum_sq.saturating_sub(q) as f64 - r as f64 / n as f64;
        (spread.max(0.0) / n as f64).sqrt()
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
        let mut seen = 0u64;
        let mut last = 0;
        for (value, count) in self.recorded() {
            seen += count;
            last = value;
            if seen >= rank {
                break;
            }
        }
        config().highest_equivalent(last)
    }

    /// Value at percentile `p` in [0, 100]: [`Self::quantile`] of `p / 100`.
    pub fn percentile(&self, p: f64) -> u64 {
        self.quantile(p / 100.0)
    }

    /// Smallest recorded value (bucket-rounded, as HdrHistogram's `min`).
    pub fn min(&self) -> u64 {
        match &self.buckets {
            Buckets::Empty => 0,
            Buckets::Sparse(pairs) => match pairs.first() {
                Some(&(0, _)) | None => 0,
                Some(&(v, _)) => config().lowest_equivalent(v),
            },
            Buckets::Dense(h) => h.min(),
        }
    }

    /// Largest recorded value (bucket-rounded, as HdrHistogram's `max`).
    pub fn max(&self) -> u64 {
        match &self.buckets {
            Buckets::Empty => 0,
            Buckets::Sparse(pairs) => pairs
                .last()
                .map_or(0, |&(v, _)| config().highest_equivalent(v)),
            Buckets::Dense(h) if h.is_empty() => 0,
            Buckets::Dense(h) => h.max(),
        }
    }

    /// The underlying HDR histogram, for export to standard HdrHistogram
    /// tools (built on the spot from a sparse form).
    pub fn hdr(&self) -> std::borrow::Cow<'_, Histogram<u64>> {
        use std::borrow::Cow;
        match &self.buckets {
            Buckets::Empty => Cow::Borrowed(config()),
            Buckets::Sparse(pairs) => Cow::Owned(densify(pairs)),
            Buckets::Dense(h) => Cow::Borrowed(h),
        }
    }

    /// Serialise the histogram part as HdrHistogram V2 + deflate.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        // Writing into a Vec cannot fail; the serializer only errors on I/O or
        // on histograms with counts that cannot be encoded, which u64 never has.
        if let Err(e) = V2DeflateSerializer::new().serialize(&*self.hdr(), &mut out) {
            unreachable!("V2 deflate serialisation into memory failed: {e:?}");
        }
        out
    }

    /// Serialise the histogram part as plain HdrHistogram V2 (run-length
    /// varints, no deflate): the wire form for histograms with many filled
    /// buckets, where inflating was most of the coordinator's cost per report.
    pub fn encode_plain(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        // as in `encode`: writing into a Vec cannot fail
        if let Err(e) = V2Serializer::new().serialize(&*self.hdr(), &mut out) {
            unreachable!("V2 serialisation into memory failed: {e:?}");
        }
        out
    }

    /// Rebuild from a V2 (plain or +deflate) blob and the sums sent beside it.
    pub fn decode(blob: &[u8], sum: u64, sum_sq: u128) -> Result<Self, MetricsError> {
        let mut hist: Histogram<u64> =
            Deserializer::new()
                .deserialize(&mut &blob[..])
                .map_err(|e| MetricsError::Decode {
                    metric: String::new(),
                    reason: format!("{e:?}"),
                })?;
        hist.auto(true);
        Ok(Self {
            buckets: Buckets::Dense(hist),
            sum,
            sum_sq,
        })
    }

    /// Rebuild from filled buckets (as [`Self::recorded`] gives them: values
    /// strictly ascending, counts above 0) and the sums sent beside them.
    /// This is the worker-to-coordinator wire form: what a report holds,
    /// without the empty buckets around it.
    pub fn from_recorded(
        pairs: Vec<(u64, u64)>,
        sum: u64,
        sum_sq: u128,
    ) -> Result<Self, MetricsError> {
        let bad = |reason: String| MetricsError::Decode {
            metric: String::new(),
            reason,
        };
        if let Some(w) = pairs.windows(2).find(|w| w[0].0 >= w[1].0) {
            return Err(bad(format!(
                "bucket values out of order: {} then {}",
                w[0].0, w[1].0
            )));
        }
        if pairs.iter().any(|p| p.1 == 0) {
            return Err(bad("a bucket with count 0".into()));
        }
        let buckets = match pairs.len() {
            0 => Buckets::Empty,
            n if n > SPARSE_MAX => Buckets::Dense(densify(&pairs)),
            _ => Buckets::Sparse(pairs),
        };
        Ok(Self {
            buckets,
            sum,
            sum_sq,
        })
    }
}

/// `a / b` rounded to the nearest integer (halves up); `b` above 0.
fn rounded_div(a: u64, b: u64) -> u64 {
    let (q, r) = (a / b, a % b);
    // r < b: 2r fits in u128
    q + u64::from(2 * u128::from(r) >= u128::from(b))
}

/// The filled buckets of `b`, ascending.
fn recorded_of(b: &Buckets) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
    match b {
        Buckets::Empty => Box::new(std::iter::empty()),
        Buckets::Sparse(pairs) => Box::new(pairs.iter().copied()),
        Buckets::Dense(h) => Box::new(
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value())),
        ),
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
        // population std of 1000..4000 step 1000: sqrt(1.25e6), to the bit
        assert_eq!(h.std_dev(), 1.25e6f64.sqrt());
        assert_eq!(h.count(), 4);
    }

    /// Where `Σx²/n − mean²` in floating point loses every digit (a spread
    /// of 1 µs on an hour), the integer sums still give it exactly.
    #[test]
    fn std_is_exact_where_floating_point_cancels() {
        let hour = 3_600_000_000u64;
        let mut h = LatencyHistogram::new();
        for _ in 0..500 {
            h.record(hour - 1);
            h.record(hour + 1);
        }
        assert_eq!(h.std_dev(), 1.0);
        assert_eq!(h.mean(), hour as f64);
        // beyond u64: a million 5 s samples square to 2.5e19 µs²
        let mut big = LatencyHistogram::new();
        big.record_n(5_000_000, 1_000_000);
        assert!(big.sum_sq() > u128::from(u64::MAX));
        assert_eq!(big.std_dev(), 0.0);
        big.record_n(5_000_002, 1_000_000);
        assert_eq!(big.std_dev(), 1.0);
    }

    /// A gap split over its tokens keeps the exact sum (so the mean), and a
    /// sum of squares within 1/2 per split of exact.
    #[test]
    fn split_records_keep_the_exact_sum() {
        let splits = [(10u64, 3u64), (7, 2), (1, 4), (40_000, 3), (5, 1), (0, 2)];
        let mut h = LatencyHistogram::new();
        for (total, n) in splits {
            h.record_split(total, n);
        }
        let tokens: u64 = splits.iter().map(|s| s.1).sum();
        let gaps: u64 = splits.iter().map(|s| s.0).sum();
        assert_eq!(h.count(), tokens);
        assert_eq!(h.sum(), gaps);
        assert_eq!(h.mean(), gaps as f64 / tokens as f64);
        // buckets: each split's share rounded (10/3 -> 3, 7/2 -> 4, 1/4 -> 0)
        assert_eq!(h.min(), 0);
        assert_eq!(h.quantile(1.0), h.hdr().highest_equivalent(13_333));
        // the exact population std of the shares, against the bound
        let mean = gaps as f64 / tokens as f64;
        let exact = (splits
            .iter()
            .map(|&(t, n)| n as f64 * (t as f64 / n as f64 - mean).powi(2))
            .sum::<f64>()
            / tokens as f64)
            .sqrt();
        let bound = (0.5f64 * splits.len() as f64 / tokens as f64).sqrt();
        assert!(
            (h.std_dev() - exact).abs() <= bound,
            "std {} against {exact}",
            h.std_dev()
        );
        // one token per gap is a plain record
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        a.record_split(1_234, 1);
        b.record(1_234);
        assert_eq!(a, b);
        a.record_split(9, 0);
        assert_eq!(a, b);
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

    /// `n` values spread over 0 µs .. 30 s, some repeated.
    fn values(n: u64, seed: u64) -> Vec<u64> {
        (0..n)
            .map(|i| match (i * 7919 + seed) % 13 {
                0 => 0,
                1 => 42,
                k => ((i * 104_729 + seed * 31) % 30_000_000) / k,
            })
            .collect()
    }

    fn recorded(vals: &[u64]) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for &v in vals {
            h.record(v);
        }
        h
    }

    /// The wire form: the same figures as the histogram it came from.
    fn sparse(h: &LatencyHistogram) -> LatencyHistogram {
        LatencyHistogram::from_recorded(h.recorded().collect(), h.sum(), h.sum_sq()).unwrap()
    }

    fn same_figures(a: &LatencyHistogram, b: &LatencyHistogram, what: &str) {
        // buckets and both sums exactly
        assert!(a.recorded().eq(b.recorded()), "{what}: buckets differ");
        assert_eq!(a.sum(), b.sum(), "{what}: sum");
        assert_eq!(a.sum_sq(), b.sum_sq(), "{what}: sum_sq");
        assert_eq!(a.std_dev().to_bits(), b.std_dev().to_bits(), "{what}: std");
        assert_eq!(a.count(), b.count(), "{what}: count");
        assert_eq!((a.min(), a.max()), (b.min(), b.max()), "{what}: min, max");
        for q in [0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(a.quantile(q), b.quantile(q), "{what}: q={q}");
        }
        assert_eq!(a.mean(), b.mean(), "{what}: mean");
        // the export's header says how far each grew: compare what it holds
        let export = |h: &LatencyHistogram| {
            let back = LatencyHistogram::decode(&h.encode(), 0, 0).unwrap();
            back.recorded().collect::<Vec<_>>()
        };
        assert!(export(a) == export(b), "{what}: V2 export");
    }

    #[test]
    fn filled_buckets_carry_every_figure() {
        for n in [1u64, 2, 100, 5_000] {
            let h = recorded(&values(n, n));
            let back = sparse(&h);
            same_figures(&back, &h, &format!("{n} values"));
            // bucket-sized, not value-sized: only filled buckets travel
            assert!(back.recorded().count() as u64 <= n);
        }
        assert!(sparse(&LatencyHistogram::new()).is_empty());
    }

    /// However the parts arrive (dense, sparse, empty; in any order, past the
    /// sparse limit), merging them gives the histogram of every sample.
    #[test]
    fn merging_any_mix_of_forms_is_exact() {
        let parts: Vec<Vec<u64>> = (0..40).map(|k| values(10 + k * 37, k)).collect();
        let all: Vec<u64> = parts.iter().flatten().copied().collect();
        let want = recorded(&all);
        type Form = fn(&LatencyHistogram) -> LatencyHistogram;
        let forms: [(&str, Form); 3] = [
            ("dense", |h| h.clone()),
            ("sparse", sparse),
            ("alternating", |h| {
                if h.count() % 2 == 0 {
                    sparse(h)
                } else {
                    h.clone()
                }
            }),
        ];
        for (name, form) in forms {
            for start_empty in [true, false] {
                let mut got = if start_empty {
                    LatencyHistogram::new()
                } else {
                    // an allocated but empty dense array
                    let mut h = LatencyHistogram::new();
                    h.record_n(5, 0);
                    let _ = h.dense_mut();
                    h
                };
                for p in &parts {
                    got.merge(&form(&recorded(p))).unwrap();
                    got.merge(&LatencyHistogram::new()).unwrap();
                }
                same_figures(&got, &want, name);
            }
        }
        // sparse + sparse past the limit turns dense, still exact
        let wide = recorded(&(0..3_000u64).map(|v| v * 1_000).collect::<Vec<_>>());
        let mut got = sparse(&recorded(&[1, 2, 3]));
        got.merge(&sparse(&wide)).unwrap();
        let mut want = recorded(&[1, 2, 3]);
        want.merge(&wide).unwrap();
        assert!(matches!(got.buckets, Buckets::Dense(_)));
        same_figures(&got, &want, "past the sparse limit");
        // recording into a sparse histogram keeps what it held
        let mut got = sparse(&recorded(&[7, 9]));
        got.record(11);
        same_figures(&got, &recorded(&[7, 9, 11]), "record into sparse");
    }

    #[test]
    fn malformed_buckets_are_refused() {
        assert!(LatencyHistogram::from_recorded(vec![(5, 1), (5, 1)], 10, 50).is_err());
        assert!(LatencyHistogram::from_recorded(vec![(9, 1), (5, 1)], 14, 106).is_err());
        assert!(LatencyHistogram::from_recorded(vec![(5, 0)], 0, 0).is_err());
    }

    #[test]
    fn garbage_blob_is_an_error_not_a_panic() {
        assert!(LatencyHistogram::decode(b"not a histogram", 0, 0).is_err());
        assert!(LatencyHistogram::decode(&[], 0, 0).is_err());
    }
}

use std::collections::BTreeMap;

/// Width of a concurrency slice, µs.
pub const SLICE_US: u64 = 100_000;

/// Time-integral of requests in flight, per 100 ms slice since the start barrier
/// (request·µs). Integrals add across workers, so the fleet's average
/// concurrency in every slice is exact and independent of the worker count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Concurrency(BTreeMap<u64, u64>);

impl Concurrency {
    /// Add `request_us` of in-flight time to slice `slice`.
    pub fn add(&mut self, slice: u64, request_us: u64) {
        if request_us > 0 {
            *self.0.entry(slice).or_default() += request_us;
        }
    }

    /// Add `count` requests in flight from `from_us` to `to_us`.
    pub fn add_span(&mut self, count: u64, from_us: u64, to_us: u64) {
        if count == 0 || to_us <= from_us {
            return;
        }
        let mut t = from_us;
        while t < to_us {
            let slice = t / SLICE_US;
            let end = ((slice + 1) * SLICE_US).min(to_us);
            self.add(slice, count * (end - t));
            t = end;
        }
    }

    /// Add every slice of `other`.
    pub fn merge(&mut self, other: &Concurrency) {
        for (s, v) in &other.0 {
            self.add(*s, *v);
        }
    }

    /// Highest average number of requests in flight over any slice.
    pub fn peak(&self) -> f64 {
        self.0
            .values()
            .max()
            .map_or(0.0, |v| *v as f64 / SLICE_US as f64)
    }

    /// Average requests in flight from `from_us` to `to_us` (whole slices from the one holding `from_us`).
    pub fn mean(&self, from_us: u64, to_us: u64) -> f64 {
        if to_us <= from_us {
            return 0.0;
        }
        let first = from_us / SLICE_US;
        let total: u64 = self.0.range(first..).map(|(_, v)| *v).sum();
        total as f64 / (to_us - first * SLICE_US) as f64
    }

    /// Slices in time order as (slice, request·µs).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().map(|(s, v)| (*s, *v))
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_split_across_slices_and_merge_exactly() {
        let mut a = Concurrency::default();
        // 3 requests for 250 ms from 50 ms
        a.add_span(3, 50_000, 300_000);
        assert_eq!(a.iter().map(|(_, v)| v).sum::<u64>(), 3 * 250_000);
        assert_eq!(a.peak(), 3.0);
        let mut b = Concurrency::default();
        b.add_span(2, 100_000, 200_000);
        a.merge(&b);
        assert_eq!(a.peak(), 5.0);
        assert!(Concurrency::default().peak() == 0.0);
    }
}

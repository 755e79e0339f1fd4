use std::collections::BTreeMap;

/// Activity within one second after the start barrier, summed over workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecondBucket {
    /// Output tokens that arrived in this second (successful requests).
    pub output_tokens: u64,
    /// Successful requests that completed in this second.
    pub completed: u64,
    /// Successful requests active at any moment of this second (from their
    /// send to their last content event): `vllm bench serve`'s count behind
    /// its `max_concurrent_requests`.
    pub active_requests: u64,
}

impl SecondBucket {
    fn merge(&mut self, other: &SecondBucket) {
        self.output_tokens += other.output_tokens;
        self.completed += other.completed;
        self.active_requests += other.active_requests;
    }
}

/// Per-second buckets keyed by whole seconds since the start barrier.
///
/// Buckets add across workers, so the fleet-wide peak is the exact maximum of
/// the sums, not a sum of per-worker maxima.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seconds(BTreeMap<u64, SecondBucket>);

impl Seconds {
    /// Mutable bucket for `second`, created empty.
    pub fn bucket(&mut self, second: u64) -> &mut SecondBucket {
        self.0.entry(second).or_default()
    }

    /// Add one bucket's values at `second`.
    pub fn add(&mut self, second: u64, bucket: &SecondBucket) {
        self.bucket(second).merge(bucket);
    }

    /// Add every bucket of `other`.
    pub fn merge(&mut self, other: &Seconds) {
        for (s, b) in &other.0 {
            self.add(*s, b);
        }
    }

    /// Buckets in time order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &SecondBucket)> {
        self.0.iter().map(|(s, b)| (*s, b))
    }

    /// Highest output tokens in any one second.
    pub fn peak_output_tokens(&self) -> u64 {
        self.0.values().map(|b| b.output_tokens).max().unwrap_or(0)
    }

    /// Most successful requests active within one second (vLLM's
    /// `max_concurrent_requests`).
    pub fn peak_active_requests(&self) -> u64 {
        self.0
            .values()
            .map(|b| b.active_requests)
            .max()
            .unwrap_or(0)
    }

    /// True when there are no buckets.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

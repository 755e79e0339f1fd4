//! Per-thread metric shards: each runtime thread records into its own set under
//! an uncontended lock; the reporter takes and merges them once per interval.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cicada_metrics::{MetricSet, RequestRecord, Slo};

/// Sets per target, one per shard.
struct Shard {
    targets: Vec<MetricSet>,
}

/// Records finished requests and hands out interval deltas.
pub struct Recorder {
    shards: Vec<Mutex<Shard>>,
    next_shard: AtomicUsize,
    slo: Slo,
}

thread_local! {
    static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
}

impl Recorder {
    /// A recorder with `shards` shards (one per runtime thread is ideal) for `targets` targets.
    pub fn new(shards: usize, targets: usize, slo: Slo) -> Self {
        let shards = (0..shards.max(1))
            .map(|_| {
                Mutex::new(Shard {
                    targets: vec![MetricSet::default(); targets.max(1)],
                })
            })
            .collect();
        Self {
            shards,
            next_shard: AtomicUsize::new(0),
            slo,
        }
    }

    fn shard_index(&self) -> usize {
        SHARD.with(|s| match s.get() {
            Some(i) => i % self.shards.len(),
            None => {
                let i = self.next_shard.fetch_add(1, Ordering::Relaxed);
                s.set(Some(i));
                i % self.shards.len()
            }
        })
    }

    /// Record one finished request.
    pub fn record(&self, rec: &RequestRecord) {
        let i = self.shard_index();
        let mut shard = match self.shards[i].lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let t = (rec.target as usize).min(shard.targets.len() - 1);
        shard.targets[t].observe(rec, &self.slo);
    }

    /// Take everything recorded since the last call, merged per target.
    pub fn take(&self) -> Vec<MetricSet> {
        let mut out: Vec<MetricSet> = Vec::new();
        for shard in &self.shards {
            let mut g = match shard.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            if out.is_empty() {
                out = vec![MetricSet::default(); g.targets.len()];
            }
            for (acc, set) in out.iter_mut().zip(g.targets.iter_mut()) {
                let taken = set.take();
                // sets built by `observe` always share one layout, so merging cannot fail
                if let Err(e) = acc.merge(&taken) {
                    tracing::error!(error = %e, "dropping an interval shard that failed to merge");
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{ContentEvent, Outcome, TokenSource};
    use std::sync::Arc;

    fn rec(target: u32) -> RequestRecord {
        RequestRecord {
            index: 0,
            target,
            outcome: Outcome::Ok,
            error: None,
            scheduled_us: 0,
            sent_us: 0,
            ended_us: 10,
            events: vec![ContentEvent {
                at_us: 5,
                tokens: 1,
            }],
            output_tokens: 1,
            token_source: TokenSource::Events,
            input_tokens: 1,
            cached_tokens: None,
            requested_output_tokens: None,
            token_count_mismatch: false,
            streamed: true,
        }
    }

    #[test]
    fn records_from_many_threads_are_all_taken_once() {
        let r = Arc::new(Recorder::new(3, 2, Slo::default()));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        r.record(&rec(t % 2));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let sets = r.take();
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0].outcomes.sent() + sets[1].outcomes.sent(), 800);
        assert_eq!(sets[0].outcomes.sent(), 400);
        let again = r.take();
        assert!(again.iter().all(MetricSet::is_empty));
    }
}

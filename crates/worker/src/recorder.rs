//! Per-thread metric shards: each runtime thread records into its own sets
//! under an uncontended lock; the reporter takes and merges them once per interval.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cicada_metrics::{MetricSet, RequestRecord, Scope, Slo};

/// Records finished requests and hands out interval deltas by scope.
pub struct Recorder {
    shards: Vec<Mutex<BTreeMap<Scope, MetricSet>>>,
    next_shard: AtomicUsize,
    slo: Slo,
}

thread_local! {
    static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
}

impl Recorder {
    /// A recorder with `shards` shards (one per runtime thread is ideal).
    pub fn new(shards: usize, slo: Slo) -> Self {
        Self {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(BTreeMap::new()))
                .collect(),
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

    /// Record one finished request in `scope`.
    pub fn record(&self, scope: Scope, rec: &RequestRecord) {
        let i = self.shard_index();
        let mut shard = match self.shards[i].lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        shard.entry(scope).or_default().observe(rec, &self.slo);
    }

    /// Take everything recorded since the last call, merged per scope.
    pub fn take(&self) -> BTreeMap<Scope, MetricSet> {
        let mut out: BTreeMap<Scope, MetricSet> = BTreeMap::new();
        for shard in &self.shards {
            let taken = {
                let mut g = match shard.lock() {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
                std::mem::take(&mut *g)
            };
            for (scope, set) in taken {
                // sets built by `observe` share one layout, so merging cannot fail
                if let Err(e) = out.entry(scope).or_default().merge(&set) {
                    tracing::error!(error = %e, "dropping a shard that failed to merge");
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

    fn rec() -> RequestRecord {
        RequestRecord {
            index: 0,
            target: 0,
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
    fn records_from_many_threads_are_all_taken_once_per_scope() {
        let r = Arc::new(Recorder::new(3, Slo::default()));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        r.record(
                            Scope {
                                target: t % 2,
                                phase: 0,
                                warmup: t == 7,
                            },
                            &rec(),
                        );
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let sets = r.take();
        assert_eq!(sets.values().map(|s| s.outcomes.sent()).sum::<u64>(), 800);
        assert_eq!(
            sets[&Scope {
                target: 0,
                phase: 0,
                warmup: false
            }]
                .outcomes
                .sent(),
            400
        );
        assert_eq!(
            sets[&Scope {
                target: 1,
                phase: 0,
                warmup: true
            }]
                .outcomes
                .sent(),
            100
        );
        assert!(r.take().is_empty());
    }
}

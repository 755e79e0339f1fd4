//! Per-thread metric shards: each runtime thread records into its own sets
//! under an uncontended lock; the reporter takes and merges them once per interval.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cicada_metrics::{MetricSet, RequestRecord, Scope, Slo};

use crate::details::{DetailContext, append_line};

/// One thread's share: measurements by scope, and detail lines when asked for.
#[derive(Default)]
struct Shard {
    sets: BTreeMap<Scope, MetricSet>,
    details: Vec<u8>,
}

/// Records finished requests and hands out interval deltas by scope.
pub struct Recorder {
    shards: Vec<Mutex<Shard>>,
    next_shard: AtomicUsize,
    slo: Slo,
    /// Set when every request's record is kept for `requests.jsonl`.
    details: Option<DetailContext>,
}

thread_local! {
    static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
}

impl Recorder {
    /// A recorder with `shards` shards (one per runtime thread is ideal).
    #[cfg(test)]
    pub fn new(shards: usize, slo: Slo) -> Self {
        Self::with_details(shards, slo, None)
    }

    /// A recorder that also keeps one JSON line per request when `details` is set.
    pub fn with_details(shards: usize, slo: Slo, details: Option<DetailContext>) -> Self {
        Self {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(Shard::default()))
                .collect(),
            next_shard: AtomicUsize::new(0),
            slo,
            details,
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
        // a panic here must not take the request task (and its concurrency
        // slot or user) with it; `observe` counts the outcome first, so the
        // request stays in the totals
        let observed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shard.sets.entry(scope).or_default().observe(rec, &self.slo);
            if let Some(ctx) = self.details {
                append_line(&mut shard.details, ctx, scope, rec);
            }
        }));
        if observed.is_err() {
            tracing::error!(
                index = rec.index,
                "cicada failed while recording a request's figures (please report this bug)"
            );
        }
    }

    /// Take the detail lines recorded since the last call (empty unless kept).
    pub fn take_details(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for shard in &self.shards {
            let mut g = match shard.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            if out.is_empty() {
                out = std::mem::take(&mut g.details);
            } else {
                out.append(&mut g.details);
            }
        }
        out
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
                std::mem::take(&mut g.sets)
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
            server_input_tokens: None,
            cached_tokens: None,
            requested_output_tokens: None,
            token_count_mismatch: false,
            streamed: true,
            reconnects: 0,
            server_prompt_us: None,
            server_per_token_us: None,
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
                                stage: 0,
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
                stage: 0,
                warmup: false
            }]
                .outcomes
                .sent(),
            400
        );
        assert_eq!(
            sets[&Scope {
                target: 1,
                stage: 0,
                warmup: true
            }]
                .outcomes
                .sent(),
            100
        );
        assert!(r.take().is_empty());
        assert!(r.take_details().is_empty(), "details are off by default");
    }

    #[test]
    fn detail_lines_are_kept_only_when_asked_and_taken_once() {
        let ctx = DetailContext { step: 1, worker: 4 };
        let r = Arc::new(Recorder::with_details(2, Slo::default(), Some(ctx)));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        r.record(Scope::default(), &rec());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let text = String::from_utf8(r.take_details()).unwrap();
        assert_eq!(text.lines().count(), 100);
        assert!(text.lines().all(|l| l.contains("\"worker\":4")));
        assert!(r.take_details().is_empty());
        assert_eq!(r.take()[&Scope::default()].outcomes.sent(), 100);
    }
}

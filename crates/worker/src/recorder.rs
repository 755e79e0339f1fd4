//! Per-thread metric shards: each runtime thread records into its own sets
//! under an uncontended lock; the reporter takes and merges them once per interval.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cicada_metrics::{
    Counter, EVENTS_OVER_USAGE_MIN, EVENTS_OVER_USAGE_RATIO, Events, Metric, MetricSet,
    RequestRecord, Scope, Slo,
};
use serde::Serialize;

use crate::details::{DetailContext, append_line};

/// One thread's share: measurements by scope, and detail lines when asked for.
#[derive(Default)]
struct Shard {
    sets: BTreeMap<Scope, MetricSet>,
    details: Vec<u8>,
}

/// Where a turn sits in its session.
#[derive(Debug, Clone, Copy)]
pub struct SessionTurn {
    /// The session's first turn.
    pub first: bool,
    /// Requests answered before it on its path from the session's start
    /// (0 for the first turn; a sub-agent's turn counts its parents').
    pub index: u64,
    /// Its node in the session's tree, numbered depth first (a turn, then
    /// its sub-agents' nodes, then the next turn): a line of
    /// `requests.jsonl` names it, so a reader can rebuild the tree.
    pub node: u64,
}

/// A session that ran to its end, every request answered.
#[derive(Debug, Clone, Copy)]
pub struct SessionEnd {
    /// From its first request's send to the end of its last step.
    pub duration_us: u64,
    /// Time its branches spent in tool waits, summed.
    pub tool_us: u64,
    /// Time its requests spent at the server (send to end), summed.
    pub server_us: u64,
    /// Requests it sent, sub-agents' included.
    pub requests: u64,
}

/// Records finished requests and hands out interval deltas by scope.
pub struct Recorder {
    shards: Vec<Mutex<Shard>>,
    next_shard: AtomicUsize,
    slo: Slo,
    /// Each workload's own SLO, by `Scope::workload` (empty: `slo` for all).
    workload_slos: Vec<Slo>,
    /// Set when every request's record is kept for `requests.jsonl`.
    details: Option<DetailContext>,
    /// A request with far more content events than its usage counted was
    /// logged already (once per step is enough; the counter counts them all).
    warned_events_over_usage: AtomicBool,
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
            workload_slos: Vec::new(),
            details,
            warned_events_over_usage: AtomicBool::new(false),
        }
    }

    /// Judge each workload's requests against its own SLO (in `[[workloads]]` order).
    pub fn with_workload_slos(mut self, slos: Vec<Slo>) -> Self {
        self.workload_slos = slos;
        self
    }

    /// The SLO a request of `scope` is judged against.
    fn slo_of(&self, scope: Scope) -> &Slo {
        self.workload_slos
            .get(scope.workload as usize)
            .unwrap_or(&self.slo)
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
    pub fn record<E: Events + Serialize>(&self, scope: Scope, rec: &RequestRecord<E>) {
        self.record_with(scope, rec, None, |_| {});
    }

    /// Record a request and, under the same lock, what `also` adds to its
    /// set: an interval taken between the two could not split them.
    fn record_with<E: Events + Serialize>(
        &self,
        scope: Scope,
        rec: &RequestRecord<E>,
        turn: Option<SessionTurn>,
        also: impl FnOnce(&mut MetricSet),
    ) {
        self.warn_events_over_usage(rec);
        let i = self.shard_index();
        let mut shard = match self.shards[i].lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        // a panic here must not take the request task (and its concurrency
        // slot or user) with it; `observe` counts the outcome first, so the
        // request stays in the totals
        let observed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let set = shard.sets.entry(scope).or_default();
            set.observe(rec, self.slo_of(scope));
            also(set);
            if let Some(ctx) = self.details {
                append_line(&mut shard.details, ctx, scope, rec, turn);
            }
        }));
        if observed.is_err() {
            tracing::error!(
                index = rec.index,
                "cicada failed while recording a request's figures (please report this bug)"
            );
        }
    }

    /// Record one turn of a multi-turn session in `scope`, with the
    /// session's figures: counted with the turn, in the same set, so a
    /// report never holds session counts without their requests.
    pub fn record_turn<E: Events + Serialize>(
        &self,
        scope: Scope,
        rec: &RequestRecord<E>,
        turn: SessionTurn,
    ) {
        self.record_with(scope, rec, Some(turn), |set| {
            set.counters.add(Counter::SessionTurns, 1);
            if turn.first {
                set.counters.add(Counter::SessionsStarted, 1);
            }
            if rec.outcome.is_ok()
                && let Some(ttft) = rec.ttft_us()
            {
                let m = if turn.first {
                    Metric::TtftFirstTurn
                } else {
                    Metric::TtftLaterTurns
                };
                set.histogram_mut(m).record(ttft);
                if let Some(m) = Metric::ttft_of_turn(turn.index) {
                    set.histogram_mut(m).record(ttft);
                }
            }
        });
    }

    /// Record a session that ran to its end: counted once, after its last
    /// request was recorded (so an interval never holds a completed
    /// session without its requests).
    pub fn record_session_end(&self, scope: Scope, end: SessionEnd) {
        let i = self.shard_index();
        let mut shard = match self.shards[i].lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let set = shard.sets.entry(scope).or_default();
        set.counters.add(Counter::SessionsCompleted, 1);
        set.histogram_mut(Metric::SessionDuration)
            .record(end.duration_us);
        set.histogram_mut(Metric::SessionToolTime)
            .record(end.tool_us);
        set.histogram_mut(Metric::SessionServerTime)
            .record(end.server_us);
        set.histogram_mut(Metric::SessionRequests)
            .record(end.requests);
    }

    /// Say once per step that a server sent far more content events than
    /// its usage counted tokens: its ITL, ICL and token timing mean little.
    fn warn_events_over_usage<E: Events>(&self, rec: &RequestRecord<E>) {
        if rec.outcome.is_ok()
            && rec.events_over_usage()
            && !self.warned_events_over_usage.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                index = rec.index,
                content_events = rec.events.count(),
                usage_output_tokens = rec.output_tokens,
                "a request got more than {EVENTS_OVER_USAGE_RATIO} content events per output token its usage counted \
                 (and over {EVENTS_OVER_USAGE_MIN}): the server splits its text oddly or sends what it does not count; \
                 counted in events_over_usage (said once per step)"
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
            resends: Default::default(),
            http2: false,
            reused: false,
            address: None,
            inexact_stamps: 0,
            server_prompt_us: None,
            server_per_token_us: None,
            reasoning: None,
            media: Default::default(),
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
                                model: 0,
                                workload: 0,
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
                model: 0,
                workload: 0,
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
                model: 0,
                workload: 0,
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

    /// A log line's bytes, kept for the test to read.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Requests with far more content events than their usage counted are
    /// all counted, and the worker says so once per step.
    #[test]
    fn events_over_usage_are_counted_and_warned_once() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let r = Recorder::new(1, Slo::default());
        let mut flood = rec();
        flood.events = (0..2_000)
            .map(|k| ContentEvent {
                at_us: k,
                tokens: 1,
            })
            .collect();
        flood.output_tokens = 8;
        flood.token_source = TokenSource::Usage;
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..3 {
                r.record(Scope::default(), &flood);
            }
            r.record(Scope::default(), &rec());
        });
        let set = &r.take()[&Scope::default()];
        assert_eq!(set.counter(cicada_metrics::Counter::EventsOverUsage), 3);
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(log.matches("events_over_usage").count(), 1, "{log}");
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

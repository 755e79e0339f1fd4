//! One request from dispatch to record.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cicada_metrics::{Outcome, RequestRecord, TokenSource};
use cicada_scenarios::dataset::PoolEntry;
use cicada_scenarios::schedule::Slot;
use tokio_util::sync::CancellationToken;

use super::Stage;
use crate::clock::Clock;
use crate::exchange::{Exchange, perform};

/// Send one request of the schedule and record it; counted as cancelled if `cancel` fires.
pub(super) async fn send_one(
    stage: Arc<Stage>,
    slot: Slot,
    clock: Clock,
    cancel: CancellationToken,
) {
    let Some(entry) = stage.pool.get(&slot.pool_id) else {
        tracing::error!(
            pool_id = slot.pool_id,
            "plan lacks a pool entry its stripe uses"
        );
        return;
    };
    let target = (slot.index % stage.plan.target.urls.len() as u64) as usize;
    let url = &stage.plan.target.urls[target];
    let body = stage.backend.body(entry);
    stage.in_flight.fetch_add(1, Ordering::Relaxed);
    stage.dispatched.fetch_add(1, Ordering::Relaxed);
    let sent_us = clock.now_us();
    stage.in_flight_by_target[target].change(sent_us, true);
    let scheduled_us = slot.offset.as_micros() as u64;
    let exchange = tokio::select! {
        ex = perform(&stage.http, url, &stage.headers, body, &stage.backend, &clock, stage.timeout) => ex,
        () = cancel.cancelled() => Exchange {
            failure: Some((Outcome::Cancelled, "the run stopped while the request was in flight".into())),
            ended_us: clock.now_us(),
            ..Exchange::default()
        },
    };
    stage.in_flight_by_target[target].change(exchange.ended_us, false);
    stage.in_flight.fetch_sub(1, Ordering::Relaxed);
    let record = to_record(
        &exchange,
        entry,
        slot.index,
        target as u32,
        scheduled_us,
        sent_us,
        stage.backend.streams(),
    );
    stage.recorder.record(&record);
}

/// Decide token counts and build the record.
pub(super) fn to_record(
    ex: &Exchange,
    entry: &PoolEntry,
    index: u64,
    target: u32,
    scheduled_us: u64,
    sent_us: u64,
    streamed: bool,
) -> RequestRecord {
    let (outcome, error) = ex.outcome();
    let mut events = ex.events.clone();
    let (output_tokens, token_source) = match ex.usage.completion_tokens {
        Some(c) => (c, TokenSource::Usage),
        None => (
            events.iter().map(|e| u64::from(e.tokens)).sum(),
            TokenSource::Events,
        ),
    };
    if !ex.counted_per_event && token_source == TokenSource::Usage && !events.is_empty() {
        spread_evenly(&mut events, output_tokens);
    }
    RequestRecord {
        index,
        target,
        outcome,
        error,
        scheduled_us,
        sent_us,
        ended_us: ex.ended_us,
        events,
        output_tokens,
        token_source,
        input_tokens: ex
            .usage
            .prompt_tokens
            .unwrap_or(u64::from(entry.input_tokens)),
        cached_tokens: ex.usage.cached_tokens,
        requested_output_tokens: entry.output_tokens.map(u64::from),
        token_count_mismatch: false,
        streamed,
    }
}

/// With only a total known, assume every event carried the same number of
/// tokens (exact when they did, e.g. fixed-size speculative bursts).
fn spread_evenly(events: &mut [cicada_metrics::ContentEvent], total: u64) {
    let n = events.len() as u64;
    let (base, extra) = (total / n, total % n);
    for (i, e) in events.iter_mut().enumerate() {
        e.tokens = (base + u64::from((i as u64) < extra)) as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Usage;
    use cicada_metrics::ContentEvent;
    use cicada_scenarios::dataset::Prompt;

    fn entry() -> PoolEntry {
        PoolEntry {
            id: 0,
            prompt: Prompt::Text("a b c".into()),
            input_tokens: 3,
            output_tokens: Some(8),
        }
    }

    fn events(n: u64) -> Vec<ContentEvent> {
        (0..n)
            .map(|k| ContentEvent {
                at_us: 100 + k * 10,
                tokens: 1,
            })
            .collect()
    }

    #[test]
    fn usage_wins_and_is_spread_when_events_were_not_counted() {
        let ex = Exchange {
            events: events(4),
            usage: Usage {
                prompt_tokens: Some(5),
                completion_tokens: Some(8),
                cached_tokens: None,
            },
            completed: true,
            ended_us: 200,
            ..Exchange::default()
        };
        let r = to_record(&ex, &entry(), 3, 0, 0, 50, true);
        assert_eq!(r.outcome, Outcome::Ok);
        assert_eq!(r.output_tokens, 8);
        assert_eq!(r.token_source, TokenSource::Usage);
        assert!(r.events.iter().all(|e| e.tokens == 2));
        assert_eq!(r.input_tokens, 5);
    }

    #[test]
    fn without_usage_events_are_counted() {
        let ex = Exchange {
            events: events(6),
            completed: true,
            ..Exchange::default()
        };
        let r = to_record(&ex, &entry(), 0, 0, 0, 0, true);
        assert_eq!(r.output_tokens, 6);
        assert_eq!(r.token_source, TokenSource::Events);
        assert_eq!(r.input_tokens, 3);
        let truncated = Exchange {
            events: events(2),
            ..Exchange::default()
        };
        assert_eq!(
            to_record(&truncated, &entry(), 0, 0, 0, 0, true).outcome,
            Outcome::StreamTruncated
        );
        let empty = Exchange {
            completed: true,
            ..Exchange::default()
        };
        assert_eq!(
            to_record(&empty, &entry(), 0, 0, 0, 0, true).outcome,
            Outcome::Empty
        );
    }
}

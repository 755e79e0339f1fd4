//! One request from dispatch to record.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::FutureExt;

use super::tokens::Tokenizer;
use cicada_metrics::{EventLog, Outcome, RequestRecord, Scope, TokenSource};
use cicada_plan::schedule::Slot;
use tokio_util::sync::CancellationToken;

use super::{Entry, Step, route};
use cicada_client::clock::Clock;
use cicada_client::exchange::{Conduit, Exchange, perform};
use cicada_client::http::{Bytes, Endpoint};

/// Send one request of the schedule and record it; counted as cancelled if
/// `cancel` fires. Returns when it ended (µs since the barrier), `None` if
/// it could not be sent at all.
pub(super) async fn send_one(
    step: Arc<Step>,
    slot: Slot,
    clock: Clock,
    cancel: CancellationToken,
) -> Option<u64> {
    let choice = step.choice(&slot);
    let Some(entry) = step.pool.get(&choice.pool_id) else {
        tracing::error!(
            pool_id = choice.pool_id,
            "plan lacks a pool entry its stripe uses"
        );
        return None;
    };
    let codec = choice.codec;
    let body = step.body(entry, codec);
    // pick and count at once so the next pick sees this request in flight
    let target = route::pick(
        step.plan.target.routing,
        slot.index,
        step.plan.seed(),
        &step.in_flight_by_scope,
    )
    .min(step.plan.target.urls.len() - 1);
    let request_id = format!("cicada-{}-{}", step.plan.run_id, slot.index);
    step.in_flight.fetch_add(1, Ordering::Relaxed);
    let sent_us = clock.now_us();
    let warmup = step.plan.is_warmup(slot.index, slot.offset);
    let tracker = step.in_flight_by_scope.get(target, codec);
    tracker.change(sent_us, true, warmup);
    let scheduled_us = slot.offset.as_micros() as u64;
    let conduit = Conduit {
        http: &step.http,
        headers: &step.headers,
        codec: step.codec(codec),
        clock: &clock,
        timeout: step.timeout,
        keep_text: step.tokenizer.is_some(),
        keep_output: entry.ask.structured.as_ref().is_some_and(|s| s.checks()),
    };
    let exchange = exchange(
        conduit,
        (step.endpoint(codec, target), &request_id, body.parts()),
        &cancel,
        slot.index,
        sent_us,
    )
    .await;
    tracker.change(exchange.ended_us, false, warmup);
    step.in_flight.fetch_sub(1, Ordering::Relaxed);
    let counting = Counting {
        tokenizer: step.tokenizer.as_ref(),
        verify: step.plan.verify_every > 0
            && slot.index.is_multiple_of(u64::from(step.plan.verify_every)),
    };
    let at = Placement {
        index: slot.index,
        target: target as u32,
        scheduled_us,
        sent_us: exchange.sent_us,
    };
    let record = guarded_record(&exchange, entry, at, step.codec(codec).streams(), counting);
    let scope = Scope {
        target: target as u32,
        model: choice.model,
        workload: choice.workload,
        stage: slot.stage,
        warmup,
    };
    step.recorder.record(scope, &record);
    Some(exchange.ended_us)
}

/// One exchange on the wire, cut short as cancelled if `cancel` fires, a
/// panic in it kept as a `client_fault`: what every request and turn runs.
pub(super) async fn exchange(
    conduit: Conduit<'_>,
    (endpoint, request_id, body): (&Endpoint, &str, &[Bytes]),
    cancel: &CancellationToken,
    index: u64,
    sent_us: u64,
) -> Exchange {
    let clock = conduit.clock;
    guarded(
        async {
            tokio::select! {
                ex = perform(conduit, endpoint, request_id, body) => ex,
                () = cancel.cancelled() => Exchange::cancelled(sent_us, clock.now_us()),
            }
        },
        index,
        sent_us,
        || clock.now_us(),
    )
    .await
}

/// Run one exchange; a panic in it (in cicada's client or parsers) becomes a
/// `client_fault` exchange ending at `now()`. Not an `async fn`: that would
/// keep `exchange` in its state beside the `catch_unwind` wrapper holding
/// it, twice the request's future per request.
fn guarded(
    exchange: impl Future<Output = Exchange>,
    index: u64,
    sent_us: u64,
    now: impl FnOnce() -> u64,
) -> impl Future<Output = Exchange> {
    AssertUnwindSafe(exchange)
        .catch_unwind()
        .map(move |r| r.unwrap_or_else(|panic| fault(index, sent_us, now(), "reading", &*panic)))
}

/// [`to_record`], with a panic in it recorded as a `client_fault`.
pub(super) fn guarded_record(
    ex: &Exchange,
    entry: &Entry,
    at: Placement,
    streamed: bool,
    counting: Counting<'_>,
) -> RequestRecord<EventLog> {
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        to_record(ex, entry, at, streamed, counting)
    }))
    .unwrap_or_else(|panic| {
        let fault = fault(at.index, ex.sent_us, ex.ended_us, "recording", &*panic);
        to_record(&fault, entry, at, streamed, Counting::default())
    })
}

/// A request cicada panicked on while `doing` it: logged, and kept as a
/// `client_fault` so the totals still count it (a panic must not make a
/// request vanish, nor leave its concurrency slot taken).
fn fault(
    index: u64,
    sent_us: u64,
    ended_us: u64,
    doing: &str,
    panic: &(dyn std::any::Any + Send),
) -> Exchange {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string());
    tracing::error!(index, panic = %what, "cicada failed while {doing} a request; counted as client_fault (please report this bug)");
    Exchange::client_fault(
        sent_us,
        ended_us,
        format!("cicada failed while {doing} the request: {what}"),
    )
}

/// Where a request sat in the schedule.
#[derive(Debug, Clone, Copy)]
pub(super) struct Placement {
    pub index: u64,
    pub target: u32,
    pub scheduled_us: u64,
    pub sent_us: u64,
}

/// How output tokens may be counted for one request.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counting<'a> {
    pub tokenizer: Option<&'a Tokenizer>,
    /// Check the server's usage against the tokenizer for this request.
    pub verify: bool,
}

/// How the request ended, its output held to the shape it asked for: a
/// complete answer that breaks it is `invalid_output`.
fn verdict(ex: &Exchange, entry: &Entry) -> (Outcome, Option<String>) {
    let (outcome, error) = ex.outcome();
    match (&entry.ask.structured, &ex.output) {
        (Some(s), Some(out)) if outcome.is_ok() => match s.check(out) {
            Ok(()) => (outcome, error),
            Err(why) => (Outcome::InvalidOutput, Some(why.to_string())),
        },
        _ => (outcome, error),
    }
}

/// Relative difference above which usage and tokenizer counts disagree.
const MISMATCH_RATIO: f64 = 0.02;

/// Decide token counts and build the record.
///
/// Output tokens: the server's usage, else the tokenizer's count of the text,
/// else the number of content events. When usage is present and this request
/// is sampled for verification, a tokenizer count more than 2 % away flags it.
pub(super) fn to_record(
    ex: &Exchange,
    entry: &Entry,
    at: Placement,
    streamed: bool,
    counting: Counting<'_>,
) -> RequestRecord<EventLog> {
    let Placement {
        index,
        target,
        scheduled_us,
        sent_us,
    } = at;
    let (outcome, error) = verdict(ex, entry);
    let mut events = ex.events.clone();
    let wants_count = ex.usage.completion_tokens.is_none() || counting.verify;
    let counted = match (counting.tokenizer, &ex.text) {
        (Some(t), Some(text)) if outcome.is_ok() && wants_count => {
            t.count(text).ok().map(|n| n as u64)
        }
        _ => None,
    };
    let (output_tokens, token_source) = match (ex.usage.completion_tokens, counted) {
        (Some(c), _) => (c, TokenSource::Usage),
        (None, Some(n)) => (n, TokenSource::Tokenizer),
        (None, None) => (events.tokens(), TokenSource::Events),
    };
    let token_count_mismatch = match (token_source, counted) {
        (TokenSource::Usage, Some(n)) if counting.verify => {
            (n as f64 - output_tokens as f64).abs() > MISMATCH_RATIO * output_tokens.max(1) as f64
        }
        _ => false,
    };
    let reasoning = super::reasoning::reasoning(
        ex,
        outcome.is_ok(),
        (output_tokens, token_source),
        counting.tokenizer,
    );
    if !ex.counted_per_event && token_source != TokenSource::Events && !events.is_empty() {
        // with only a total known, every event is taken to carry an even share
        events.spread_evenly(output_tokens);
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
        input_tokens: u64::from(entry.input_tokens),
        server_input_tokens: ex.usage.prompt_tokens,
        cached_tokens: ex.usage.cached_tokens,
        requested_output_tokens: entry.ask.output_tokens.map(u64::from),
        token_count_mismatch,
        streamed,
        resends: ex.resends,
        http2: ex.http2,
        reused: ex.reused,
        address: ex.address.clone(),
        inexact_stamps: ex.inexact_stamps,
        server_prompt_us: ex.server.and_then(|t| t.prompt_us),
        server_per_token_us: ex.server.and_then(|t| t.per_token_us),
        reasoning,
        media: entry.media,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_client::backend::Ask;
    use cicada_client::backend::Usage;
    use cicada_plan::pool::Prompt;

    fn entry() -> Entry {
        Entry {
            id: 0,
            ask: Ask {
                prompt: Prompt::Text("a b c".into()),
                media: Default::default(),
                output_tokens: Some(8),
                structured: None,
            },
            input_tokens: 3,
            conversation: None,
            media: Default::default(),
        }
    }

    fn at(index: u64, sent_us: u64) -> Placement {
        Placement {
            index,
            target: 0,
            scheduled_us: 0,
            sent_us,
        }
    }

    fn events(n: u64) -> EventLog {
        let mut log = EventLog::new();
        for k in 0..n {
            log.push(100 + k * 10, 1);
        }
        log
    }

    #[test]
    fn usage_wins_and_is_spread_when_events_were_not_counted() {
        let ex = Exchange {
            events: events(4),
            usage: Usage {
                prompt_tokens: Some(5),
                completion_tokens: Some(8),
                cached_tokens: None,
                ..Usage::default()
            },
            completed: true,
            ended_us: 200,
            ..Exchange::default()
        };
        let r = to_record(&ex, &entry(), at(3, 50), true, Counting::default());
        assert_eq!(r.outcome, Outcome::Ok);
        assert_eq!(r.output_tokens, 8);
        assert_eq!(r.token_source, TokenSource::Usage);
        assert_eq!(r.events.first().map(|e| e.tokens), Some(2));
        assert!(r.events.stretches().iter().all(|e| e.tokens == 2));
        assert_eq!(
            r.input_tokens, 3,
            "the client's count, vLLM's dataset prompt_len"
        );
        assert_eq!(r.server_input_tokens, Some(5));
    }

    #[tokio::test]
    async fn a_panic_while_reading_is_counted_as_a_client_fault() {
        let index = 7u64;
        let ex = guarded(
            async move {
                // a bug of the kind that once hid here: a subtraction that overflowed
                let (first, last) = (std::hint::black_box(90u64), 100u64);
                if first < last {
                    panic!("attempt to subtract with overflow at request {index}");
                }
                Exchange::default()
            },
            index,
            40,
            || 95,
        )
        .await;
        let r = to_record(&ex, &entry(), at(index, 40), true, Counting::default());
        assert_eq!(r.outcome, Outcome::ClientFault);
        assert_eq!((r.sent_us, r.ended_us), (40, 95));
        let error = r.error.unwrap_or_default();
        assert!(
            error.contains("cicada failed while reading the request")
                && error.contains("subtract with overflow at request 7"),
            "{error}"
        );
        // and an exchange that does not panic passes through untouched
        let ok = guarded(async { Exchange::cancelled(1, 2) }, 0, 1, || 3).await;
        assert_eq!(ok.outcome().0, Outcome::Cancelled);
        assert_eq!(ok.ended_us, 2);
    }

    /// The guard holds the exchange's future once: as an `async fn` it kept
    /// the argument beside the `catch_unwind` wrapper that moved it, and
    /// every request's task was twice the size of its exchange (10.2 KB for
    /// a 4.8 KB `perform`, each byte copied into the task's box).
    #[test]
    fn the_panic_guard_holds_the_exchange_once() {
        let big = async {
            let held = [7u8; 4096];
            tokio::task::yield_now().await;
            std::hint::black_box(&held);
            Exchange::default()
        };
        let inner = std::mem::size_of_val(&big);
        let outer = std::mem::size_of_val(&guarded(big, 0, 0, || 0));
        assert!(inner >= 4096, "{inner}");
        assert!(
            outer < inner + 256,
            "the guard is {outer} bytes around an exchange of {inner}"
        );
    }

    /// A complete answer that breaks the asked shape is `invalid_output`
    /// with the reason; a valid one, or a request that failed anyway, is not.
    #[test]
    fn outputs_are_held_to_the_asked_shape() {
        let shape = cicada_request::OutputShape::read(
            None,
            None,
            Some(&serde_json::json!({"type": "json_object"})),
        )
        .unwrap();
        let mut e = entry();
        e.ask.structured = Some(Arc::new(cicada_request::Structured::new(shape).unwrap()));
        let answered = |text: &str, completed: bool| Exchange {
            events: events(3),
            completed,
            output: Some(cicada_request::Output {
                answer: text.to_string(),
                calls: Vec::new(),
            }),
            ..Exchange::default()
        };
        let r = to_record(
            &answered("[1, 2]", true),
            &e,
            at(0, 0),
            true,
            Counting::default(),
        );
        assert_eq!(r.outcome, Outcome::InvalidOutput);
        assert!(r.error.unwrap_or_default().contains("not an object"));
        let r = to_record(
            &answered("{\"a\": 1}", true),
            &e,
            at(0, 0),
            true,
            Counting::default(),
        );
        assert_eq!(r.outcome, Outcome::Ok);
        let r = to_record(
            &answered("[1", false),
            &e,
            at(0, 0),
            true,
            Counting::default(),
        );
        assert_eq!(
            r.outcome,
            Outcome::StreamTruncated,
            "the first failure stands"
        );
    }

    #[test]
    fn without_usage_events_are_counted() {
        let ex = Exchange {
            events: events(6),
            completed: true,
            ..Exchange::default()
        };
        let r = to_record(&ex, &entry(), at(0, 0), true, Counting::default());
        assert_eq!(r.output_tokens, 6);
        assert_eq!(r.token_source, TokenSource::Events);
        assert_eq!(r.input_tokens, 3);
        let truncated = Exchange {
            events: events(2),
            ..Exchange::default()
        };
        assert_eq!(
            to_record(&truncated, &entry(), at(0, 0), true, Counting::default()).outcome,
            Outcome::StreamTruncated
        );
        let empty = Exchange {
            completed: true,
            ..Exchange::default()
        };
        assert_eq!(
            to_record(&empty, &entry(), at(0, 0), true, Counting::default()).outcome,
            Outcome::Empty
        );
    }
}

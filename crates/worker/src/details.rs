//! Per-request records for `output.save_detailed`: one JSON line per finished
//! request, buffered per interval and shipped in the report's `details_jsonl`,
//! so neither side ever holds a whole run's records.

use cicada_metrics::{EXACT_EVENTS, Events, RequestRecord, Scope};
use serde::Serialize;

use crate::recorder::SessionTurn;

/// Where the records of this worker come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetailContext {
    /// Sweep step (0 without a sweep).
    pub step: u32,
    /// This worker's index.
    pub worker: u32,
}

/// Entries a line's `events` holds at most: the first event and the event
/// log's [`EXACT_EVENTS`] entries after it.
pub const EVENTS_CAP: u64 = EXACT_EVENTS as u64 + 1;

/// One line of `requests.jsonl`: where the request ran, the raw record, and
/// its derived latencies in milliseconds (null where they do not apply). The
/// file's keys predate the code's words: the sweep step is `stage`, the
/// `[[stages]]` window `phase`. `events` holds at most [`EVENTS_CAP`]
/// entries; a line whose events were merged to fit says `events_cap`.
#[derive(Serialize)]
struct Line<'a, E> {
    #[serde(rename = "stage")]
    step: u32,
    worker: u32,
    #[serde(rename = "phase")]
    stage: u32,
    warmup: bool,
    #[serde(flatten)]
    record: &'a RequestRecord<E>,
    content_events: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    events_cap: Option<u64>,
    /// A session's turn: its index (1 + the requests answered before it on
    /// its path, as TTFT by turn counts) and its node in the session's tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    session_turn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_node: Option<u64>,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    e2el_ms: Option<f64>,
    /// Time to first answer token, reasoning time and answer TPOT: only on
    /// a streamed request that reasoned (and answered, for the first and last).
    #[serde(skip_serializing_if = "Option::is_none")]
    ttfa_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answer_tpot_ms: Option<f64>,
}

fn ms(us: Option<u64>) -> Option<f64> {
    us.map(|v| v as f64 / 1e3)
}

/// Append one request's line (with its newline) to `buf`.
pub fn append_line<E: Events + Serialize>(
    buf: &mut Vec<u8>,
    ctx: DetailContext,
    scope: Scope,
    rec: &RequestRecord<E>,
    turn: Option<SessionTurn>,
) {
    let ok = rec.outcome.is_ok();
    let timed = rec.reasoning.as_ref().filter(|_| ok && rec.streamed);
    let line = Line {
        step: ctx.step,
        worker: ctx.worker,
        stage: scope.stage,
        warmup: scope.warmup,
        record: rec,
        content_events: rec.events.count(),
        events_cap: rec.events.log().merged().then_some(EVENTS_CAP),
        session_turn: turn.map(|t| t.index + 1),
        session_node: turn.map(|t| t.node),
        ttft_ms: ms(rec.ttft_us().filter(|_| ok && rec.streamed)),
        tpot_ms: ms(rec.tpot_us().filter(|_| ok && rec.streamed)),
        e2el_ms: ms(rec.e2el_us().filter(|_| ok)),
        ttfa_ms: ms(timed.and_then(|r| r.ttfa_us(rec.sent_us))),
        reasoning_ms: ms(timed.map(|r| r.duration_us())),
        answer_tpot_ms: ms(timed.and_then(|r| r.answer_tpot_us())),
    };
    // a record of plain numbers and strings always serialises
    if serde_json::to_writer(&mut *buf, &line).is_ok() {
        buf.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{ContentEvent, EventLog, Outcome, TokenSource};

    #[test]
    fn a_line_carries_the_record_and_its_latencies() {
        let rec = RequestRecord {
            index: 7,
            target: 1,
            outcome: Outcome::Ok,
            error: None,
            scheduled_us: 100,
            sent_us: 1_000,
            ended_us: 31_000,
            events: vec![
                ContentEvent {
                    at_us: 11_000,
                    tokens: 1,
                },
                ContentEvent {
                    at_us: 31_000,
                    tokens: 2,
                },
            ],
            output_tokens: 3,
            token_source: TokenSource::Usage,
            input_tokens: 12,
            server_input_tokens: None,
            cached_tokens: None,
            requested_output_tokens: Some(3),
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
        };
        let mut buf = Vec::new();
        let ctx = DetailContext { step: 2, worker: 3 };
        let window = Scope {
            stage: 1,
            ..Scope::default()
        };
        append_line(&mut buf, ctx, window, &rec, None);
        let turn = SessionTurn {
            first: false,
            index: 2,
            node: 5,
        };
        append_line(&mut buf, ctx, Scope::default(), &rec, Some(turn));
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().count(), 2);
        let second: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(
            (&second["session_turn"], &second["session_node"]),
            (&serde_json::json!(3), &serde_json::json!(5)),
            "a session's turn says its index (as TTFT by turn counts it) and node"
        );
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(v["stage"], 2, "the sweep step");
        assert_eq!(v["phase"], 1, "the [[stages]] window");
        assert_eq!(v["worker"], 3);
        assert_eq!(v["index"], 7);
        assert_eq!(v["outcome"], "ok");
        assert_eq!(v["ttft_ms"], 10.0);
        assert_eq!(v["e2el_ms"], 30.0);
        assert_eq!(v["tpot_ms"], 10.0);
        assert_eq!(v["events"][1]["tokens"], 2);
        assert_eq!(v["content_events"], 2);
        assert!(v.get("events_cap").is_none(), "every event is there");
        assert!(v.get("session_turn").is_none(), "not a session's turn");
        // the line reads back as the record it came from
        let back: RequestRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, rec);
    }

    /// A request with more events than a line holds gets merged entries
    /// that say how many events each stands for, and the cap.
    #[test]
    fn a_line_caps_its_events_and_says_so() {
        let n = 3 * EVENTS_CAP;
        let mut log = EventLog::new();
        for k in 0..n {
            log.push(1_000 + k, 1);
        }
        let rec = RequestRecord {
            index: 1,
            target: 0,
            outcome: Outcome::Ok,
            error: None,
            scheduled_us: 0,
            sent_us: 0,
            ended_us: 1_000 + n,
            events: log,
            output_tokens: n,
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
        };
        let mut buf = Vec::new();
        append_line(
            &mut buf,
            DetailContext { step: 0, worker: 0 },
            Scope::default(),
            &rec,
            None,
        );
        let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(v["content_events"], n);
        assert_eq!(v["events_cap"], EVENTS_CAP);
        let entries = v["events"].as_array().unwrap();
        assert!(entries.len() as u64 <= EVENTS_CAP);
        let events: u64 = entries
            .iter()
            .map(|e| e["events"].as_u64().unwrap_or(1))
            .sum();
        let tokens: u64 = entries.iter().map(|e| e["tokens"].as_u64().unwrap()).sum();
        assert_eq!((events, tokens), (n, n));
        assert_eq!(entries.last().unwrap()["at_us"], 1_000 + n - 1);
    }
}

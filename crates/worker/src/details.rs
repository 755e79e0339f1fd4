//! Per-request records for `output.save_detailed`: one JSON line per finished
//! request, buffered per interval and shipped in the report's `details_jsonl`,
//! so neither side ever holds a whole run's records.

use cicada_metrics::{RequestRecord, Scope};
use serde::Serialize;

/// Where the records of this worker come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetailContext {
    /// Sweep step (0 without a sweep).
    pub step: u32,
    /// This worker's index.
    pub worker: u32,
}

/// One line of `requests.jsonl`: where the request ran, the raw record, and
/// its derived latencies in milliseconds (null where they do not apply). The
/// file's keys predate the code's words: the sweep step is `stage`, the
/// `[[stages]]` window `phase`.
#[derive(Serialize)]
struct Line<'a> {
    #[serde(rename = "stage")]
    step: u32,
    worker: u32,
    #[serde(rename = "phase")]
    stage: u32,
    warmup: bool,
    #[serde(flatten)]
    record: &'a RequestRecord,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    e2el_ms: Option<f64>,
}

fn ms(us: Option<u64>) -> Option<f64> {
    us.map(|v| v as f64 / 1e3)
}

/// Append one request's line (with its newline) to `buf`.
pub fn append_line(buf: &mut Vec<u8>, ctx: DetailContext, scope: Scope, rec: &RequestRecord) {
    let ok = rec.outcome.is_ok();
    let line = Line {
        step: ctx.step,
        worker: ctx.worker,
        stage: scope.stage,
        warmup: scope.warmup,
        record: rec,
        ttft_ms: ms(rec.ttft_us().filter(|_| ok && rec.streamed)),
        tpot_ms: ms(rec.tpot_us().filter(|_| ok && rec.streamed)),
        e2el_ms: ms(rec.e2el_us().filter(|_| ok)),
    };
    // a record of plain numbers and strings always serialises
    if serde_json::to_writer(&mut *buf, &line).is_ok() {
        buf.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{ContentEvent, Outcome, TokenSource};

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
            reconnects: 0,
            server_prompt_us: None,
            server_per_token_us: None,
        };
        let mut buf = Vec::new();
        let ctx = DetailContext { step: 2, worker: 3 };
        let window = Scope {
            stage: 1,
            ..Scope::default()
        };
        append_line(&mut buf, ctx, window, &rec);
        append_line(&mut buf, ctx, Scope::default(), &rec);
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().count(), 2);
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
        // the line reads back as the record it came from
        let back: RequestRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, rec);
    }
}

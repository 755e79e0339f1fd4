//! One HTTP exchange: send a request, read its stream, classify how it ended.

use std::time::Duration;

use cicada_metrics::ByteSize;
use cicada_metrics::{EventLog, Outcome};

use cicada_request::{Output, ToolCall};

use crate::backend::{ApiCodec, EventInfo, ServerTiming, Usage};
use crate::clock::Clock;
use crate::http::wire::WireError;
use crate::http::{
    Body, Client, Endpoint, Headers, HttpError, Method, Protocol, Request, Response,
};
use crate::sse::{SseEvent, SseFramer, TooLarge};
use crate::thinking::{self, Thinking};

/// Longest error body kept from a failed response.
const MAX_ERROR_BODY: usize = 2048;

/// What happened on the wire for one request.
#[derive(Debug, Default)]
pub struct Exchange {
    /// How it ended (None = ok so far; decided by `finish`).
    pub failure: Option<(Outcome, String)>,
    /// Content events in arrival order, in bounded memory.
    pub events: EventLog,
    /// The last usage the server reported.
    pub usage: Usage,
    /// Per-event token counts came from continuous usage.
    pub counted_per_event: bool,
    /// A finish reason or `[DONE]` arrived.
    pub completed: bool,
    /// When the response ended, µs since the barrier.
    pub ended_us: u64,
    /// Generated text, kept only when a tokenizer will count it.
    pub text: Option<String>,
    /// The answer and tool calls apart, kept only when the request's output
    /// is checked against the shape it asked for.
    pub output: Option<Output>,
    /// When the request went out, µs since the barrier: the start of the
    /// attempt that got the response (a resend's, if there was one).
    pub sent_us: u64,
    /// When the request's last byte (its body's) was handed to the socket,
    /// µs since the barrier, on HTTP/1.1 over cicada's own writer; the
    /// request's send cost is this minus `sent_us`.
    pub written_us: Option<u64>,
    /// Times it went again because it provably never reached the server
    /// (not failures, not new requests), by reason.
    pub resends: cicada_metrics::Resends,
    /// It went over HTTP/2.
    pub http2: bool,
    /// It went on a connection that had carried an earlier request.
    pub reused: bool,
    /// The address its connection went to (a proxy's, through a proxy).
    pub address: Option<String>,
    /// Body pieces whose arrival instant is an upper bound (HTTP/2).
    pub inexact_stamps: u32,
    /// The server's own timing of the request, when its API reports it.
    pub server: Option<ServerTiming>,
    /// Where a redirect pointed (its `Location`), when the answer was one.
    pub location: Option<String>,
    /// The reasoning events and the answer's events, when any event carried
    /// reasoning.
    pub thinking: Option<Thinking>,
}

impl Exchange {
    /// A request the run stopped while it was in flight.
    pub fn cancelled(sent_us: u64, ended_us: u64) -> Self {
        Exchange {
            failure: Some((
                Outcome::Cancelled,
                "the run stopped while the request was in flight".into(),
            )),
            sent_us,
            ended_us,
            ..Exchange::default()
        }
    }

    /// A request cicada itself failed on (a panic while it was sent or read),
    /// so it is still counted, with what went wrong.
    pub fn client_fault(sent_us: u64, ended_us: u64, message: String) -> Self {
        Exchange {
            failure: Some((Outcome::ClientFault, message)),
            sent_us,
            ended_us,
            ..Exchange::default()
        }
    }

    /// The final outcome.
    pub fn outcome(&self) -> (Outcome, Option<String>) {
        if let Some((o, e)) = &self.failure {
            return (*o, Some(e.clone()));
        }
        if !self.completed {
            return (
                Outcome::StreamTruncated,
                Some("the stream ended without a finish reason or [DONE]".to_string()),
            );
        }
        if self.events.is_empty() {
            return (
                Outcome::Empty,
                Some("the response carried no content".to_string()),
            );
        }
        (Outcome::Ok, None)
    }

    fn fail(&mut self, outcome: Outcome, message: String) {
        if self.failure.is_none() {
            self.failure = Some((outcome, message));
        }
    }
}

/// What every request of a stage shares.
#[derive(Clone, Copy)]
pub struct Conduit<'a> {
    pub http: &'a Client,
    pub headers: &'a Headers,
    pub codec: &'a ApiCodec,
    pub clock: &'a Clock,
    pub timeout: Duration,
    /// Keep the generated text (a tokenizer will count it).
    pub keep_text: bool,
    /// Keep the answer and tool calls apart (the output will be checked).
    pub keep_output: bool,
}

/// Send `body` (its pieces, written as they are) to `endpoint` and read
/// the response into an [`Exchange`].
pub async fn perform(
    c: Conduit<'_>,
    endpoint: &Endpoint,
    request_id: &str,
    body: &[bytes::Bytes],
) -> Exchange {
    let mut ex = Exchange {
        text: c.keep_text.then(String::new),
        output: c.keep_output.then(Output::default),
        sent_us: c.clock.now_us(),
        ..Exchange::default()
    };
    let work = run(c, endpoint, request_id, body, &mut ex);
    if tokio::time::timeout(c.timeout, work).await.is_err() {
        ex.fail(
            Outcome::Timeout,
            format!("no complete response within {}", humanize(c.timeout)),
        );
    }
    ex.ended_us = c.clock.now_us();
    ex
}

fn humanize(d: Duration) -> String {
    if d.as_secs() >= 1 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}

async fn run(
    c: Conduit<'_>,
    endpoint: &Endpoint,
    request_id: &str,
    body: &[bytes::Bytes],
    ex: &mut Exchange,
) {
    let (codec, clock) = (c.codec, c.clock);
    let request = Request {
        method: Method::Post,
        endpoint,
        headers: c.headers,
        request_id: Some(request_id),
        body: Some(Body {
            parts: body,
            content_type: codec.content_type(),
        }),
    };
    let mut resp = match c.http.send(request).await {
        Ok(r) => r,
        Err(e) => {
            ex.fail(send_failure(&e), e.to_string());
            return;
        }
    };
    ex.sent_us = clock.us(resp.sent);
    ex.written_us = resp.written.map(|w| clock.us(w));
    ex.resends = resp.resends;
    ex.http2 = resp.protocol == Protocol::Http2;
    ex.reused = resp.reused;
    ex.address = resp.peer.map(|a| a.to_string());
    if !resp.ok() {
        let mut text = Vec::new();
        while let Ok(Some((piece, _))) = resp.chunk().await {
            text.extend_from_slice(piece);
            if text.len() >= MAX_ERROR_BODY {
                break;
            }
        }
        text.truncate(MAX_ERROR_BODY);
        let text = String::from_utf8_lossy(&text).trim().to_string();
        ex.location = resp.location.take();
        ex.fail(
            Outcome::Http(resp.status),
            if text.is_empty() {
                format!("HTTP {}", resp.status)
            } else {
                text
            },
        );
        return;
    }
    let limit = c.http.max_event();
    if !codec.streams() {
        return read_whole(resp, codec, clock, limit, ex).await;
    }
    let mut framer = SseFramer::with_limit(limit);
    let mut state = StreamState {
        last_completion: 0,
        max_text: limit,
        call_indexes: Vec::new(),
    };
    loop {
        match resp.chunk().await {
            Ok(Some((bytes, at))) => {
                let now = clock.us(at);
                match framer.push(bytes, &mut |e| on_event(e, now, codec, ex, &mut state)) {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => return ex.fail(Outcome::ResponseTooLarge, sse_over(e)),
                }
            }
            Ok(None) => {
                ex.inexact_stamps = resp.inexact_stamps;
                let now = clock.now_us();
                let finished = framer.finish(&mut |e| on_event(e, now, codec, ex, &mut state));
                if let Err(e) = finished {
                    return ex.fail(Outcome::ResponseTooLarge, sse_over(e));
                }
                if codec.ends_on_close() {
                    // no end marker in this API: a complete body is the end
                    ex.completed = true;
                }
                return;
            }
            Err(e) => {
                ex.fail(Outcome::StreamTruncated, format!("the stream broke: {e}"));
                return;
            }
        }
    }
}

/// How a failed send is classed: a response head that broke HTTP or
/// passed a limit came from a server that answered (badly); anything else
/// is no response at all.
fn send_failure(e: &HttpError) -> Outcome {
    match e {
        HttpError::HeadTooLarge(_) | HttpError::Wire(WireError::TooManyHeaders(_)) => {
            Outcome::ResponseTooLarge
        }
        HttpError::Wire(_) | HttpError::BadHead(_) => Outcome::BadPayload,
        HttpError::NoResponse(_) => Outcome::NoResponse,
        _ => Outcome::Connect,
    }
}

/// The error text of a `response_too_large`: what passed the limit.
fn over(what: &str, limit: usize) -> String {
    format!(
        "{what} passed {} (target.max_event_size)",
        ByteSize(limit as u64)
    )
}

/// [`over`] for what the SSE framer refused.
fn sse_over(e: TooLarge) -> String {
    over(&format!("an SSE {}", e.what), e.limit)
}

/// What one stream's events carry over from one to the next.
struct StreamState {
    /// The server's running count of output tokens, by the latest usage.
    last_completion: u64,
    /// Longest generated text kept.
    max_text: usize,
    /// The server's `index` of each tool call kept in `Exchange::output`, in order.
    call_indexes: Vec<u32>,
}

/// Handle one SSE event; returns false to stop reading.
fn on_event(
    e: SseEvent<'_>,
    now_us: u64,
    codec: &ApiCodec,
    ex: &mut Exchange,
    state: &mut StreamState,
) -> bool {
    let last_completion = &mut state.last_completion;
    if e.event == b"error" {
        ex.fail(
            Outcome::ServerErrorEvent,
            String::from_utf8_lossy(e.data).into_owned(),
        );
        return false;
    }
    let info = match codec.parse_event(e.data) {
        Ok(i) => i,
        Err(msg) => {
            ex.fail(Outcome::BadPayload, msg.0);
            return false;
        }
    };
    if let Some(err) = info.error {
        ex.fail(Outcome::ServerErrorEvent, err);
        return false;
    }
    if info.server.is_some() {
        ex.server = info.server;
    }
    // reasoning and tool calls are generated output too: TTFT counts them (vLLM's meaning)
    let generated = info.generated();
    let mut tokens = 1;
    if let Some(u) = info.usage {
        if let Some(c) = u.completion_tokens {
            if generated {
                ex.counted_per_event = true;
                tokens = c.saturating_sub(*last_completion) as u32;
            }
            *last_completion = c.max(*last_completion);
        }
        ex.usage = merge_usage(ex.usage, u);
    }
    if generated {
        let keep = ex.text.is_some();
        thinking::note(&mut ex.thinking, &ex.events, &info, (now_us, tokens), keep);
        ex.events.push(now_us, tokens);
    }
    // a piece that only names its function is no output, and the check needs the name
    if (generated || !info.tool_calls.is_empty())
        && let Err(message) = keep(ex, &info, state)
    {
        ex.fail(Outcome::ResponseTooLarge, message.0);
        return false;
    }
    if info.finished || info.done {
        ex.completed = true;
    }
    true
}

/// What one kept tool call costs beyond its text, for the limit on what is kept.
const CALL_OVERHEAD: usize = 64;

/// Text past the most one response may hold (what, and the limit).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
struct KeptTooLarge(String);

impl From<String> for KeptTooLarge {
    fn from(message: String) -> Self {
        Self(message)
    }
}

/// Keep what the request keeps of an event's text (for a tokenizer, for the
/// output check), within the most held of one response.
fn keep(
    ex: &mut Exchange,
    info: &EventInfo<'_>,
    state: &mut StreamState,
) -> Result<(), KeptTooLarge> {
    let pieces = [&info.reasoning, &info.content, &info.tool_arguments];
    let added: usize = pieces
        .iter()
        .filter_map(|p| p.as_ref())
        .map(|p| p.len())
        .sum();
    if let Some(text) = &mut ex.text {
        if text.len() + added > state.max_text {
            return Err(over("the generated text kept", state.max_text).into());
        }
        for piece in pieces.into_iter().flatten() {
            text.push_str(piece);
        }
    }
    if let Some(out) = &mut ex.output {
        // a call costs its text and its place, so no stream of empty pieces grows it unbounded
        let call_size = |name: usize, args: usize| name + args + CALL_OVERHEAD;
        let held = out.answer.len()
            + out
                .calls
                .iter()
                .map(|c| call_size(c.name.len(), c.arguments.len()))
                .sum::<usize>();
        let adding = info.content.as_ref().map_or(0, |c| c.len())
            + info
                .tool_calls
                .iter()
                .map(|p| {
                    let len =
                        |t: &Option<std::borrow::Cow<'_, str>>| t.as_ref().map_or(0, |t| t.len());
                    call_size(len(&p.name), len(&p.arguments))
                })
                .sum::<usize>();
        if held + adding > state.max_text {
            return Err(over("the output kept for its check", state.max_text).into());
        }
        if let Some(c) = &info.content {
            out.answer.push_str(c);
        }
        for piece in &info.tool_calls {
            let at = match state.call_indexes.iter().position(|i| *i == piece.index) {
                Some(at) => at,
                None => {
                    state.call_indexes.push(piece.index);
                    out.calls.push(ToolCall::default());
                    out.calls.len() - 1
                }
            };
            let call = &mut out.calls[at];
            if let Some(name) = &piece.name {
                call.name.push_str(name);
            }
            if let Some(a) = &piece.arguments {
                call.arguments.push_str(a);
            }
        }
    }
    Ok(())
}

fn merge_usage(old: Usage, new: Usage) -> Usage {
    Usage {
        prompt_tokens: new.prompt_tokens.or(old.prompt_tokens),
        completion_tokens: new.completion_tokens.or(old.completion_tokens),
        cached_tokens: new.cached_tokens.or(old.cached_tokens),
        reasoning_tokens: new.reasoning_tokens.or(old.reasoning_tokens),
    }
}

async fn read_whole(
    mut resp: Response,
    codec: &ApiCodec,
    clock: &Clock,
    limit: usize,
    ex: &mut Exchange,
) {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some((piece, _))) if body.len() + piece.len() > limit => {
                return ex.fail(Outcome::ResponseTooLarge, over("the response body", limit));
            }
            Ok(Some((piece, _))) => body.extend_from_slice(piece),
            Ok(None) => break,
            Err(e) => {
                ex.fail(Outcome::StreamTruncated, format!("the response broke: {e}"));
                return;
            }
        }
    }
    let now = clock.now_us();
    match codec.parse_full(&body) {
        Err(msg) => ex.fail(Outcome::BadPayload, msg.0),
        Ok(info) => {
            if let Some(err) = info.error {
                ex.fail(Outcome::ServerErrorEvent, err);
                return;
            }
            if let Some(u) = info.usage {
                ex.usage = u;
            }
            ex.server = info.server;
            let mut state = StreamState {
                last_completion: 0,
                max_text: limit,
                call_indexes: Vec::new(),
            };
            if (info.generated() || !info.tool_calls.is_empty())
                && let Err(message) = keep(ex, &info, &mut state)
            {
                return ex.fail(Outcome::ResponseTooLarge, message.0);
            }
            if info.generated() {
                let tokens = ex
                    .usage
                    .completion_tokens
                    .unwrap_or(1)
                    .min(u64::from(u32::MAX)) as u32;
                let keep = ex.text.is_some();
                thinking::note(&mut ex.thinking, &ex.events, &info, (now, tokens), keep);
                ex.events.push(now, tokens);
                ex.counted_per_event = ex.usage.completion_tokens.is_some();
            }
            ex.completed = info.done;
        }
    }
}

#[cfg(test)]
mod tests {
    use cicada_request::{ResolvedSampling, ServerFamily, ToolCall, WireApi};

    use super::*;

    fn stream(payloads: &[&str], limit: usize) -> Exchange {
        let codec = ApiCodec::new(
            WireApi::Chat,
            ServerFamily::Vllm,
            "m".into(),
            ResolvedSampling::default(),
            true,
        );
        let mut ex = Exchange {
            output: Some(Output::default()),
            ..Exchange::default()
        };
        let mut state = StreamState {
            last_completion: 0,
            max_text: limit,
            call_indexes: Vec::new(),
        };
        for (k, p) in payloads.iter().enumerate() {
            let e = SseEvent {
                event: b"",
                data: p.as_bytes(),
            };
            if !on_event(e, k as u64, &codec, &mut ex, &mut state) {
                break;
            }
        }
        ex
    }

    /// vLLM's way: the first piece names the function with empty arguments
    /// (no output, but the name is kept), later pieces add argument text;
    /// two calls apart by their index.
    #[test]
    fn tool_calls_are_assembled_from_their_pieces() {
        let ex = stream(
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"[]"}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":" 1}"}}]}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            ],
            1 << 20,
        );
        assert_eq!(ex.outcome().0, Outcome::Ok);
        assert_eq!(ex.events.len(), 3, "the name-only piece is not output");
        let calls = ex.output.unwrap().calls;
        assert_eq!(
            calls,
            [
                ToolCall {
                    name: "f".into(),
                    arguments: "{\"x\": 1}".into()
                },
                ToolCall {
                    name: "g".into(),
                    arguments: "[]".into()
                }
            ]
        );
    }

    /// Pieces that name a function and carry nothing still count toward
    /// the most kept of one response.
    #[test]
    fn empty_pieces_cannot_grow_the_kept_output_unbounded() {
        let piece = |i: u32| {
            format!(
                r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{i},"function":{{"name":"f","arguments":""}}}}]}}}}]}}"#
            )
        };
        let pieces: Vec<String> = (0..100).map(piece).collect();
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let ex = stream(&refs, 2048);
        assert_eq!(ex.outcome().0, Outcome::ResponseTooLarge);
    }
}

//! One HTTP exchange: send a request, read its stream, classify how it ended.

use std::error::Error as _;
use std::time::Duration;

use cicada_metrics::{ContentEvent, Outcome};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};

use crate::backend::{Backend, Usage};
use crate::clock::Clock;
use crate::sse::{SseEvent, SseFramer};

/// Longest error body kept from a failed response.
const MAX_ERROR_BODY: usize = 2048;

/// What happened on the wire for one request.
#[derive(Debug, Default)]
pub struct Exchange {
    /// How it ended (None = ok so far; decided by `finish`).
    pub failure: Option<(Outcome, String)>,
    /// Content events in arrival order.
    pub events: Vec<ContentEvent>,
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
}

impl Exchange {
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

/// The chain of an error's causes in one line.
fn describe(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        src = cause.source();
    }
    s
}

/// What every request of a stage shares.
#[derive(Clone, Copy)]
pub struct Conduit<'a> {
    pub http: &'a reqwest::Client,
    pub headers: &'a HeaderMap,
    pub backend: &'a Backend,
    pub clock: &'a Clock,
    pub timeout: Duration,
    /// Keep the generated text (a tokenizer will count it).
    pub keep_text: bool,
}

/// Send `body` to `url` and read the response into an [`Exchange`].
pub async fn perform(c: Conduit<'_>, url: &str, request_id: &str, body: Vec<u8>) -> Exchange {
    let mut ex = Exchange {
        text: c.keep_text.then(String::new),
        ..Exchange::default()
    };
    let work = run(c, url, request_id, body, &mut ex);
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

async fn run(c: Conduit<'_>, url: &str, request_id: &str, body: Vec<u8>, ex: &mut Exchange) {
    let (backend, clock) = (c.backend, c.clock);
    let mut request = c
        .http
        .post(url)
        .headers(c.headers.clone())
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .body(body);
    if let Ok(id) = HeaderValue::from_str(request_id) {
        request = request.header("x-request-id", id);
    }
    let mut resp = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            let class = if e.is_timeout() {
                Outcome::Timeout
            } else {
                Outcome::Connect
            };
            ex.fail(class, describe(&e));
            return;
        }
    };
    let status = resp.status();
    if !status.is_success() {
        let mut text = Vec::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            text.extend_from_slice(&chunk);
            if text.len() >= MAX_ERROR_BODY {
                break;
            }
        }
        text.truncate(MAX_ERROR_BODY);
        let text = String::from_utf8_lossy(&text).trim().to_string();
        ex.fail(
            Outcome::Http(status.as_u16()),
            if text.is_empty() {
                status.to_string()
            } else {
                text
            },
        );
        return;
    }
    if !backend.streams() {
        return read_whole(resp, backend, clock, ex).await;
    }
    let mut framer = SseFramer::new();
    let mut last_completion: u64 = 0;
    loop {
        match resp.chunk().await {
            Ok(Some(bytes)) => {
                let now = clock.now_us();
                let go_on = framer.push(&bytes, &mut |e| {
                    on_event(e, now, backend, ex, &mut last_completion)
                });
                if !go_on {
                    return;
                }
            }
            Ok(None) => {
                let now = clock.now_us();
                framer.finish(&mut |e| on_event(e, now, backend, ex, &mut last_completion));
                if backend.ends_on_close() {
                    // no end marker in this API: a clean close is the end
                    ex.completed = true;
                }
                return;
            }
            Err(e) => {
                ex.fail(
                    Outcome::StreamTruncated,
                    format!("the stream broke: {}", describe(&e)),
                );
                return;
            }
        }
    }
}

/// Handle one SSE event; returns false to stop reading.
fn on_event(
    e: SseEvent<'_>,
    now_us: u64,
    backend: &Backend,
    ex: &mut Exchange,
    last_completion: &mut u64,
) -> bool {
    if e.event == b"error" {
        ex.fail(
            Outcome::ServerErrorEvent,
            String::from_utf8_lossy(e.data).into_owned(),
        );
        return false;
    }
    let info = match backend.parse_event(e.data) {
        Ok(i) => i,
        Err(msg) => {
            ex.fail(Outcome::BadPayload, msg);
            return false;
        }
    };
    if let Some(err) = info.error {
        ex.fail(Outcome::ServerErrorEvent, err);
        return false;
    }
    let mut tokens = 1;
    if let Some(u) = info.usage {
        if let Some(c) = u.completion_tokens {
            if info.content.is_some() {
                ex.counted_per_event = true;
                tokens = c.saturating_sub(*last_completion) as u32;
            }
            *last_completion = c.max(*last_completion);
        }
        ex.usage = merge_usage(ex.usage, u);
    }
    if let Some(content) = &info.content {
        ex.events.push(ContentEvent {
            at_us: now_us,
            tokens,
        });
        if let Some(text) = &mut ex.text {
            text.push_str(content);
        }
    }
    if info.finished || info.done {
        ex.completed = true;
    }
    true
}

fn merge_usage(old: Usage, new: Usage) -> Usage {
    Usage {
        prompt_tokens: new.prompt_tokens.or(old.prompt_tokens),
        completion_tokens: new.completion_tokens.or(old.completion_tokens),
        cached_tokens: new.cached_tokens.or(old.cached_tokens),
    }
}

async fn read_whole(resp: reqwest::Response, backend: &Backend, clock: &Clock, ex: &mut Exchange) {
    let body = match resp.bytes().await {
        Ok(b) => b,
        Err(e) => {
            ex.fail(
                Outcome::StreamTruncated,
                format!("the response broke: {}", describe(&e)),
            );
            return;
        }
    };
    let now = clock.now_us();
    match backend.parse_full(&body) {
        Err(msg) => ex.fail(Outcome::BadPayload, msg),
        Ok(info) => {
            if let Some(err) = info.error {
                ex.fail(Outcome::ServerErrorEvent, err);
                return;
            }
            if let Some(u) = info.usage {
                ex.usage = u;
            }
            if let Some(content) = &info.content {
                if let Some(text) = &mut ex.text {
                    text.push_str(content);
                }
                let tokens = ex
                    .usage
                    .completion_tokens
                    .unwrap_or(1)
                    .min(u64::from(u32::MAX)) as u32;
                ex.events.push(ContentEvent { at_us: now, tokens });
                ex.counted_per_event = ex.usage.completion_tokens.is_some();
            }
            ex.completed = info.done;
        }
    }
}

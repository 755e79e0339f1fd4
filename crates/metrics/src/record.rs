//! One finished request as the worker saw it: the record every metric is
//! computed from, and how it holds its content events.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::{ContentEvent, EventLog, Outcome};

/// Where a request's output token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage.completion_tokens` (or the backend's equivalent).
    Usage,
    /// The tokenizer's count of the generated text.
    Tokenizer,
    /// The number of content events (one token per event assumed).
    Events,
}

impl TokenSource {
    /// Stable name for files and the console.
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::Tokenizer => "tokenizer",
            TokenSource::Events => "events",
        }
    }
}

/// How a record holds its content events: every one (`Vec<ContentEvent>`:
/// tests, the fleet simulator, `requests.jsonl` read back) or the bounded
/// [`EventLog`] the worker keeps. The metrics always read them as a log.
pub trait Events {
    /// The events as one log.
    fn log(&self) -> Cow<'_, EventLog>;
    /// How many content events there were.
    fn count(&self) -> u64;
}

impl Events for Vec<ContentEvent> {
    fn log(&self) -> Cow<'_, EventLog> {
        Cow::Owned(EventLog::from_events(self))
    }

    fn count(&self) -> u64 {
        self.len() as u64
    }
}

impl Events for EventLog {
    fn log(&self) -> Cow<'_, EventLog> {
        Cow::Borrowed(self)
    }

    fn count(&self) -> u64 {
        self.len()
    }
}

/// What a request that reasoned (one or more reasoning events) did while it
/// thought, and its answer's events. Absent from a record without reasoning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reasoning<E = Vec<ContentEvent>> {
    /// Arrival of the first reasoning event, µs since the barrier.
    pub first_us: u64,
    /// Arrival of the last reasoning event, µs since the barrier.
    pub last_us: u64,
    /// Events that carried reasoning text.
    pub events: u64,
    /// Reasoning tokens (part of the record's `output_tokens`).
    pub tokens: u64,
    /// Where `tokens` came from.
    pub token_source: TokenSource,
    /// The answer's events: those that carried answer text (or tool-call
    /// arguments), in arrival order; empty when no answer came.
    pub answer: E,
}

/// A request brought more than this many content events per output token
/// the server counted ([`RequestRecord::events_over_usage`])...
pub const EVENTS_OVER_USAGE_RATIO: u64 = 4;
/// ... and more than this many content events in all.
pub const EVENTS_OVER_USAGE_MIN: u64 = 1024;

/// Everything the worker learned about one request, in µs since the start
/// barrier; `E` holds its content events (see [`Events`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord<E = Vec<ContentEvent>> {
    /// Global request index in the run's schedule.
    pub index: u64,
    /// Target (replica) index the request went to.
    pub target: u32,
    /// How it ended.
    #[serde(with = "outcome_name")]
    pub outcome: Outcome,
    /// Error text for failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Intended send time from the schedule.
    pub scheduled_us: u64,
    /// When the request was written.
    pub sent_us: u64,
    /// When the response ended (last byte, error or timeout).
    pub ended_us: u64,
    /// Content events in arrival order.
    pub events: E,
    /// Output tokens and where the count came from.
    pub output_tokens: u64,
    /// Source of `output_tokens`.
    pub token_source: TokenSource,
    /// Prompt tokens as the client counted them (the tokenizer's count of the
    /// prompt, or the dataset's length): vLLM's dataset `prompt_len`.
    pub input_tokens: u64,
    /// Prompt tokens as the server counted them (`usage.prompt_tokens`: the
    /// chat template and BOS included), when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_input_tokens: Option<u64>,
    /// Prompt tokens the server served from cache, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Output tokens the request asked for, when it asked for a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_output_tokens: Option<u64>,
    /// Usage and tokenizer counts disagreed by more than 2 %.
    #[serde(default)]
    pub token_count_mismatch: bool,
    /// The response streamed; without streaming only E2EL and tokens are measured.
    #[serde(default = "yes")]
    pub streamed: bool,
    /// Times the request went again because it provably never reached the
    /// server, by reason (`sent_us` is the last attempt's).
    #[serde(default, skip_serializing_if = "Resends::is_none")]
    pub resends: Resends,
    /// It went over HTTP/2 (else HTTP/1.1).
    #[serde(default, skip_serializing_if = "is_false")]
    pub http2: bool,
    /// It went on a connection that had carried an earlier request.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reused: bool,
    /// The address its connection went to, e.g. `10.0.0.7:8000` (a proxy's,
    /// through a proxy; none when no connection was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Content events whose arrival instant is an upper bound, not the
    /// exact read (HTTP/2: a frame queued while its reader was busy).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inexact_stamps: u32,
    /// The server's own prompt processing time, µs, when its API reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_prompt_us: Option<u64>,
    /// The server's own time per generated token, µs, when its API reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_per_token_us: Option<u64>,
    /// What it did while it reasoned, and its answer's events; absent when
    /// no event carried reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning<E>>,
    /// Images and audio the request sent (none for text-only requests).
    #[serde(default, flatten)]
    pub media: MediaSent,
}

/// What a request sent beside its prompt text, as counted when it was
/// built: its media, and a pooling request's item count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MediaSent {
    /// Images in the request.
    #[serde(skip_serializing_if = "is_zero")]
    pub images: u32,
    /// Bytes of those images as encoded (before base64).
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub image_bytes: u64,
    /// Bytes of the audio file uploaded.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub audio_bytes: u64,
    /// Items of a pooling request: the texts of an embeddings batch.
    #[serde(skip_serializing_if = "is_zero")]
    pub items: u32,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Why a request went again: each time, it provably never reached the
/// server (docs/METRICS.md, "Resends").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resends {
    /// It never left: the client got it back unwritten, or the socket took none of it.
    #[serde(skip_serializing_if = "is_zero")]
    pub unsent: u32,
    /// The server had closed the reused connection and reset our bytes unread.
    #[serde(skip_serializing_if = "is_zero")]
    pub crossed_close: u32,
    /// HTTP/2 `REFUSED_STREAM`: closed before any processing.
    #[serde(skip_serializing_if = "is_zero")]
    pub refused_stream: u32,
    /// HTTP/2 GOAWAY naming a last stream below ours: not processed.
    #[serde(skip_serializing_if = "is_zero")]
    pub goaway: u32,
}

impl Resends {
    /// Every resend.
    pub fn total(&self) -> u32 {
        self.unsent + self.crossed_close + self.refused_stream + self.goaway
    }

    /// No resend at all.
    pub fn is_none(&self) -> bool {
        self.total() == 0
    }
}

fn yes() -> bool {
    true
}

mod outcome_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::Outcome;

    pub fn serialize<S: Serializer>(o: &Outcome, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(o)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Outcome, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl<E: Events> RequestRecord<E> {
    /// Time to first token, µs (None without content).
    pub fn ttft_us(&self) -> Option<u64> {
        ttft_us(&self.events.log(), self.sent_us)
    }

    /// End-to-end latency to the last content event, µs (None without content).
    pub fn e2el_us(&self) -> Option<u64> {
        e2el_us(&self.events.log(), self.sent_us)
    }

    /// Time per output token after the first, µs, for two or more output tokens.
    pub fn tpot_us(&self) -> Option<u64> {
        tpot_us(&self.events.log(), self.sent_us, self.output_tokens)
    }

    /// The server counted its output tokens, and the request brought far more
    /// content events than that: more than [`EVENTS_OVER_USAGE_RATIO`] per
    /// token and more than [`EVENTS_OVER_USAGE_MIN`] in all. A server that
    /// splits text into that many pieces, or sends what its usage does not
    /// count, makes ITL, ICL and events per second meaningless.
    pub fn events_over_usage(&self) -> bool {
        let events = self.events.count();
        self.token_source == TokenSource::Usage
            && events > EVENTS_OVER_USAGE_MIN
            && events > self.output_tokens.saturating_mul(EVENTS_OVER_USAGE_RATIO)
    }
}

fn ttft_us(log: &EventLog, sent_us: u64) -> Option<u64> {
    log.first().map(|e| e.at_us.saturating_sub(sent_us))
}

fn e2el_us(log: &EventLog, sent_us: u64) -> Option<u64> {
    log.last_at().map(|at| at.saturating_sub(sent_us))
}

pub(crate) fn tpot_us(log: &EventLog, sent_us: u64, output_tokens: u64) -> Option<u64> {
    let (ttft, e2el) = (ttft_us(log, sent_us)?, e2el_us(log, sent_us)?);
    (output_tokens >= 2)
        .then(|| (e2el.saturating_sub(ttft) as f64 / (output_tokens - 1) as f64).round() as u64)
}

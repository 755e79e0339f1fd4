use std::fmt;
use std::str::FromStr;

use crate::MetricsError;

/// A monotonically increasing count that merges by addition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// Prompt tokens of successful requests as `vllm bench serve` counts
    /// them: the server's count when it reports one, else the client's.
    InputTokens,
    /// Output tokens of successful requests.
    OutputTokens,
    /// Prompt tokens the server reported as served from its prefix cache.
    CachedTokens,
    /// Successful requests that met every SLO given.
    Goodput,
    /// Successful requests whose output count came from the server's usage.
    TokensFromUsage,
    /// Successful requests whose output count came from the tokenizer.
    TokensFromTokenizer,
    /// Successful requests whose output count is the number of content events.
    TokensFromEvents,
    /// Requests where usage and the tokenizer disagreed by more than 2 %.
    TokenCountMismatch,
    /// Successful requests that returned fewer tokens than asked for.
    ShortOutputs,
    /// Output tokens asked for, summed over successful requests that asked.
    RequestedOutputTokens,
    /// Content events received by successful requests.
    ContentEvents,
    /// Times requests went again because they provably never reached the
    /// server (every outcome; the reasons below sum to it).
    Resends,
    /// Resends of requests the client got back unwritten (or none of whose
    /// bytes the socket took).
    ResendsUnsent,
    /// Resends of requests the server reset unread after closing the reused
    /// connection first.
    ResendsCrossedClose,
    /// Resends after HTTP/2 `REFUSED_STREAM`.
    ResendsRefusedStream,
    /// Resends after an HTTP/2 GOAWAY below the request's stream.
    ResendsGoAway,
    /// Requests that went over HTTP/2 (every outcome).
    RequestsHttp2,
    /// Requests that went on a connection that had carried an earlier one.
    RequestsReused,
    /// Content events whose arrival instant is an upper bound (HTTP/2).
    InexactStamps,
    /// Successful requests whose client TTFT was shorter than the server's
    /// own prompt time: impossible unless a clock or a report is wrong.
    TtftBelowServerPrompt,
    /// Prompt tokens of successful requests as the client counted them.
    ClientInputTokens,
    /// Prompt tokens of successful requests as the server counted them.
    ServerInputTokens,
    /// Successful requests whose server reported its prompt token count.
    ServerInputRequests,
    /// Successful requests whose content events far outnumbered the output
    /// tokens the server's usage counted (see `RequestRecord::events_over_usage`).
    EventsOverUsage,
    /// Successful requests that reasoned (one or more reasoning events).
    ReasoningRequests,
    /// Reasoning tokens of successful requests (included in output tokens).
    ReasoningTokens,
    /// Requests whose reasoning count came from the server's usage.
    ReasoningTokensFromUsage,
    /// Requests whose reasoning count came from the tokenizer.
    ReasoningTokensFromTokenizer,
    /// Requests whose reasoning count came from the reasoning events.
    ReasoningTokensFromEvents,
    /// Successful requests that reasoned and never answered.
    ReasoningWithoutAnswer,
    /// Images sent, by requests of every outcome.
    Images,
    /// Bytes of the images sent (as encoded, before base64), every outcome.
    ImageBytes,
    /// Bytes of the audio files uploaded, every outcome.
    AudioBytes,
    /// Items (embedding inputs) of successful pooling requests.
    Items,
    /// Multi-turn sessions that sent their first turn (counted with it).
    SessionsStarted,
    /// Multi-turn sessions whose every turn succeeded (counted with the last).
    SessionsCompleted,
    /// Turns sent by multi-turn sessions, every outcome.
    SessionTurns,
}

impl Counter {
    /// Every counter, in storage order.
    pub const ALL: [Counter; 37] = [
        Counter::InputTokens,
        Counter::OutputTokens,
        Counter::CachedTokens,
        Counter::Goodput,
        Counter::TokensFromUsage,
        Counter::TokensFromTokenizer,
        Counter::TokensFromEvents,
        Counter::TokenCountMismatch,
        Counter::ShortOutputs,
        Counter::RequestedOutputTokens,
        Counter::ContentEvents,
        Counter::Resends,
        Counter::ResendsUnsent,
        Counter::ResendsCrossedClose,
        Counter::ResendsRefusedStream,
        Counter::ResendsGoAway,
        Counter::RequestsHttp2,
        Counter::RequestsReused,
        Counter::InexactStamps,
        Counter::TtftBelowServerPrompt,
        Counter::ClientInputTokens,
        Counter::ServerInputTokens,
        Counter::ServerInputRequests,
        Counter::EventsOverUsage,
        Counter::ReasoningRequests,
        Counter::ReasoningTokens,
        Counter::ReasoningTokensFromUsage,
        Counter::ReasoningTokensFromTokenizer,
        Counter::ReasoningTokensFromEvents,
        Counter::ReasoningWithoutAnswer,
        Counter::Images,
        Counter::ImageBytes,
        Counter::AudioBytes,
        Counter::Items,
        Counter::SessionsStarted,
        Counter::SessionsCompleted,
        Counter::SessionTurns,
    ];

    /// Stable wire and file name.
    pub fn name(self) -> &'static str {
        match self {
            Counter::InputTokens => "input_tokens",
            Counter::OutputTokens => "output_tokens",
            Counter::CachedTokens => "cached_tokens",
            Counter::Goodput => "goodput_requests",
            Counter::TokensFromUsage => "token_source_usage",
            Counter::TokensFromTokenizer => "token_source_tokenizer",
            Counter::TokensFromEvents => "token_source_events",
            Counter::TokenCountMismatch => "token_count_mismatch",
            Counter::ShortOutputs => "short_outputs",
            Counter::RequestedOutputTokens => "requested_output_tokens",
            Counter::ContentEvents => "content_events",
            Counter::Resends => "resends",
            Counter::ResendsUnsent => "resends_unsent",
            Counter::ResendsCrossedClose => "resends_crossed_close",
            Counter::ResendsRefusedStream => "resends_refused_stream",
            Counter::ResendsGoAway => "resends_goaway",
            Counter::RequestsHttp2 => "requests_http2",
            Counter::RequestsReused => "requests_reused_connection",
            Counter::InexactStamps => "inexact_stamps",
            Counter::TtftBelowServerPrompt => "ttft_below_server_prompt",
            Counter::ClientInputTokens => "client_input_tokens",
            Counter::ServerInputTokens => "server_input_tokens",
            Counter::ServerInputRequests => "server_input_requests",
            Counter::EventsOverUsage => "events_over_usage",
            Counter::ReasoningRequests => "reasoning_requests",
            Counter::ReasoningTokens => "reasoning_tokens",
            Counter::ReasoningTokensFromUsage => "reasoning_token_source_usage",
            Counter::ReasoningTokensFromTokenizer => "reasoning_token_source_tokenizer",
            Counter::ReasoningTokensFromEvents => "reasoning_token_source_events",
            Counter::ReasoningWithoutAnswer => "reasoning_without_answer",
            Counter::Images => "images",
            Counter::ImageBytes => "image_bytes",
            Counter::AudioBytes => "audio_bytes",
            Counter::Items => "items",
            Counter::SessionsStarted => "sessions_started",
            Counter::SessionsCompleted => "sessions_completed",
            Counter::SessionTurns => "session_turns",
        }
    }
}

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Counter {
    type Err = MetricsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Counter::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| MetricsError::UnknownName {
                kind: "counter",
                name: s.to_string(),
            })
    }
}

/// All counters of one scope, array-indexed so the hot path is one add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters([u64; Counter::ALL.len()]);

// std derives `Default` for arrays of at most 32
impl Default for Counters {
    fn default() -> Self {
        Self([0; Counter::ALL.len()])
    }
}

impl Counters {
    /// Add `n` to one counter.
    pub fn add(&mut self, counter: Counter, n: u64) {
        let slot = &mut self.0[counter as usize];
        *slot = slot.saturating_add(n);
    }

    /// Current value of one counter.
    pub fn get(&self, counter: Counter) -> u64 {
        self.0[counter as usize]
    }

    /// Add every counter of `other`.
    pub fn merge(&mut self, other: &Counters) {
        for c in Counter::ALL {
            self.add(c, other.get(c));
        }
    }

    /// Non-zero counters with their names, for the wire.
    pub fn non_zero(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL
            .into_iter()
            .map(|c| (c, self.get(c)))
            .filter(|(_, v)| *v != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_merge_adds() {
        for (i, c) in Counter::ALL.into_iter().enumerate() {
            assert_eq!(c as usize, i);
            assert_eq!(c.name().parse::<Counter>().unwrap(), c);
        }
        let mut a = Counters::default();
        a.add(Counter::OutputTokens, 5);
        let mut b = Counters::default();
        b.add(Counter::OutputTokens, 7);
        b.add(Counter::Goodput, 1);
        a.merge(&b);
        assert_eq!(a.get(Counter::OutputTokens), 12);
        assert_eq!(a.non_zero().count(), 2);
    }
}

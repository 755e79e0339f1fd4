//! The mock server's specification, one type for both of its spellings: a
//! scenario's `[mock]` section (when `target.backend = "mock"`, which the
//! scenario model reads straight into it) and `cicada mock`'s flags (which
//! the binary turns into it). The server runs exactly this.

use cicada_metrics::Outcome;
use serde::{Deserialize, Serialize};

/// How the mock behaves: timing, output length, dialect, faults. `cicada mock`'s
/// flags (the binary's mirror of these fields) and a scenario's `[mock]`
/// section become this one type, so both spell every option alike and share
/// its checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MockConfig {
    /// Time from receiving a request to its first content event, ms.
    pub ttft_ms: f64,
    /// Gap between consecutive output tokens, ms (an event of k tokens follows k gaps).
    pub itl_ms: f64,
    /// Output tokens carried by each SSE event (speculative decoding, multi-step).
    pub tokens_per_event: u32,
    /// Output tokens when the request does not ask for a number.
    pub output_tokens: u32,
    /// Uniform jitter added to each event's deadline, ± ms (0 = exact).
    pub jitter_ms: f64,
    /// Extra TTFT per request already in flight, ms: latency that rises with load.
    pub ttft_per_inflight_ms: f64,
    /// Extra inter-token gap per request in flight, ms.
    pub itl_per_inflight_ms: f64,
    /// Report usage (prompt and completion tokens) when the client asks for it.
    pub usage: bool,
    /// Send a role-only first chunk on chat streams, as vLLM does.
    pub role_chunk: bool,
    /// End every response after this many tokens, as if the model emitted
    /// end-of-sequence, unless the request sets `ignore_eos` (`min_tokens`
    /// raises the point): outputs shorter than asked, on demand. OpenAI routes
    /// finish with "stop", TGI with "eos_token", llama.cpp with `stop_type`
    /// "eos"; Triton streams just end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eos_after_tokens: Option<u32>,
    /// Model id served at /v1/models (and the Triton model name).
    pub model: String,
    /// The API a scenario drives the embedded mock through; on the OpenAI
    /// routes the llama.cpp choices also switch to llama.cpp's dialect
    /// (`timings`, separate finish chunk). Native TGI, llama.cpp and Triton
    /// routes are always served.
    pub api: MockApi,
    /// KV-cache capacity in tokens, for the `vllm:kv_cache_usage_perc` gauge
    /// and the preemption counter (a request whose prompt plus requested
    /// output would overfill the cache counts one preemption).
    pub kv_cache_tokens: u64,
    /// Simulate vLLM's prefix cache (16-token blocks): cache hits are counted
    /// in `/metrics` and in llama.cpp's `timings.cache_n`.
    pub prefix_cache: bool,
    /// Report `usage.prompt_tokens_details.cached_tokens` (vLLM's
    /// `--enable-prompt-tokens-details`).
    pub prompt_tokens_details: bool,
    /// Speculative tokens proposed per decode step (0 = no speculative
    /// decoding). Each event after the first is one step whose extra tokens
    /// (`tokens_per_event - 1`, at most this many) count as accepted drafts.
    pub spec_tokens: u32,
    /// Require `Authorization: Bearer <key>` on the API routes, as vLLM's
    /// `--api-key` does (`x-api-key: <key>` on `/v1/messages`, as Anthropic
    /// reads it; health and metrics stay open). Command line only:
    /// never read from or written to a scenario.
    #[serde(skip)]
    pub api_key: Option<String>,
    /// Close every connection once its response is out, while answering as
    /// if it were kept alive (no `Connection: close`), as llama.cpp's
    /// `llama-server` does: a client that reuses it must reconnect.
    #[serde(default)]
    pub close_after_response: bool,
    /// Close a keep-alive connection after this long without a request, ms
    /// (uvicorn's keep-alive timeout in front of vLLM and SGLang is 5 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// End each connection once it has taken this many requests, as nginx's
    /// `keepalive_requests` does: HTTP/2 says GOAWAY (streams already sent
    /// finish, later ones are refused), HTTP/1.1 closes after that response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive_requests: Option<u32>,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` on HTTP/2 connections (hyper's
    /// default otherwise): streams past it are refused (`REFUSED_STREAM`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2_max_streams: Option<u32>,
    /// Share of tool-call and JSON answers (requests with tools or a
    /// response format) broken on purpose: a value of the wrong type, which
    /// a client's check must count as `invalid_output`.
    #[serde(skip_serializing_if = "is_zero_share")]
    pub invalid_output: f64,
    /// Output tokens each chat, Responses or Messages answer spends
    /// reasoning before it answers: on chat the first this many tokens
    /// stream as reasoning deltas (see `reasoning_field`) and usage reports
    /// them in `completion_tokens_details.reasoning_tokens`; on Responses as
    /// a reasoning item (`output_tokens_details.reasoning_tokens`); on
    /// Messages as a thinking block (no count in Anthropic's usage). They
    /// stay part of the output count, as vLLM counts them. 0: no reasoning.
    #[serde(skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u32,
    /// Which delta field carries the reasoning: vLLM's `reasoning_content`,
    /// vLLM 0.32's newer `reasoning`, or both at once.
    #[serde(skip_serializing_if = "ReasoningField::is_default")]
    pub reasoning_field: ReasoningField,
    /// Answer the server-hook routes (`/reset_prefix_cache`, `/flush_cache`,
    /// `/start_profile`, `/stop_profile`) with this HTTP status instead of
    /// success, to see a client's `[hooks]` fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_status: Option<u16>,
    /// Hook calls answered normally before `hook_status` applies (0: it
    /// applies from the first), so a later step's hook fails.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hook_ok_calls: u32,
    /// Seed for jitter and fault selection.
    pub seed: u64,
    /// Fault injection rates.
    #[serde(default)]
    pub faults: FaultRates,
}

// zero is left out when serialising, so scenario hashes stay as they were
fn is_zero_share(v: &f64) -> bool {
    *v == 0.0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The chat delta field a reasoning mock puts its thinking in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// `reasoning_content` (vLLM's reasoning parsers, llama.cpp's `deepseek` format).
    #[default]
    ReasoningContent,
    /// `reasoning` (vLLM 0.32's newer name).
    Reasoning,
    /// Both fields with the same text, as a server in transition might send.
    Both,
}

impl ReasoningField {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// The API a client uses to talk to the mock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MockApi {
    /// OpenAI chat completions, vLLM's dialect.
    #[default]
    OpenaiChat,
    /// OpenAI completions, vLLM's dialect.
    Openai,
    /// TGI's `/generate_stream`.
    Tgi,
    /// llama.cpp's native `/completion`.
    Llamacpp,
    /// OpenAI chat completions, llama.cpp's dialect.
    LlamacppChat,
    /// OpenAI completions, llama.cpp's dialect.
    LlamacppCompletions,
    /// Triton's `/v2/models/{model}/generate_stream`.
    Triton,
    /// OpenAI Responses, `/v1/responses`.
    OpenaiResponses,
    /// Anthropic Messages, `/v1/messages`.
    AnthropicMessages,
    /// OpenAI embeddings, `/v1/embeddings` (a pooling API).
    OpenaiEmbeddings,
    /// vLLM's rerank, `/v1/rerank` (a pooling API).
    VllmRerank,
    /// HuggingFace TEI's `/embed` (a pooling API).
    TeiEmbed,
    /// HuggingFace TEI's `/rerank` (a pooling API).
    TeiRerank,
    /// vLLM's pooling API, `/pooling` (a pooling API).
    VllmPooling,
    /// vLLM's score API, `/score` (a pooling API; a query and documents).
    VllmScore,
}

impl MockApi {
    /// A pooling API: nothing is generated.
    pub fn pools(self) -> bool {
        matches!(
            self,
            MockApi::OpenaiEmbeddings
                | MockApi::VllmRerank
                | MockApi::TeiEmbed
                | MockApi::TeiRerank
                | MockApi::VllmPooling
                | MockApi::VllmScore
        )
    }

    /// A rerank API: a query and documents per request.
    pub fn reranks(self) -> bool {
        matches!(
            self,
            MockApi::VllmRerank | MockApi::TeiRerank | MockApi::VllmScore
        )
    }

    /// Requests go out as chat `messages`.
    pub fn sends_messages(self) -> bool {
        matches!(
            self,
            MockApi::OpenaiChat
                | MockApi::LlamacppChat
                | MockApi::OpenaiResponses
                | MockApi::AnthropicMessages
        )
    }

    /// The OpenAI routes answer in llama.cpp's dialect.
    pub fn llamacpp_dialect(self) -> bool {
        matches!(
            self,
            MockApi::Llamacpp | MockApi::LlamacppChat | MockApi::LlamacppCompletions
        )
    }
}

/// Probability, per request, of each injected fault (their sum must be ≤ 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultRates {
    /// Answer 429 Too Many Requests.
    pub http_429: f64,
    /// Answer 500 Internal Server Error.
    pub http_500: f64,
    /// Reset the connection half-way through the stream.
    pub reset: f64,
    /// Send an event whose JSON is malformed.
    pub malformed: f64,
    /// Send an in-band `{"error": ...}` event inside the 200 stream.
    pub error_event: f64,
    /// Stop sending after the first token and hold the connection open.
    pub stall: f64,
    /// End the stream cleanly but without a finish reason or `[DONE]`.
    pub truncate: f64,
    /// Complete with no content at all.
    pub empty: f64,
}

impl FaultRates {
    /// Rates in a fixed order with the fault they select.
    pub fn table(&self) -> [(Fault, f64); 8] {
        [
            (Fault::Http429, self.http_429),
            (Fault::Http500, self.http_500),
            (Fault::Reset, self.reset),
            (Fault::Malformed, self.malformed),
            (Fault::ErrorEvent, self.error_event),
            (Fault::Stall, self.stall),
            (Fault::Truncate, self.truncate),
            (Fault::Empty, self.empty),
        ]
    }

    /// Sum of every rate.
    pub fn total(&self) -> f64 {
        self.table().iter().map(|(_, r)| r).sum()
    }
}

/// A fault the mock can inject into one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// 429 Too Many Requests (named as in `[mock.faults]`).
    #[serde(rename = "http_429")]
    Http429,
    /// 500 Internal Server Error.
    #[serde(rename = "http_500")]
    Http500,
    /// Connection reset mid-stream.
    Reset,
    /// Malformed JSON event.
    Malformed,
    /// In-band error event.
    ErrorEvent,
    /// Stalls after the first token.
    Stall,
    /// Clean end without an end marker.
    Truncate,
    /// No content at all.
    Empty,
}

impl Fault {
    /// The fault's key in `[mock.faults]`, for error messages that name it.
    pub fn key(self) -> &'static str {
        match self {
            Fault::Http429 => "http_429",
            Fault::Http500 => "http_500",
            Fault::Reset => "reset",
            Fault::Malformed => "malformed",
            Fault::ErrorEvent => "error_event",
            Fault::Stall => "stall",
            Fault::Truncate => "truncate",
            Fault::Empty => "empty",
        }
    }

    /// The outcome a correct client must report for this fault.
    pub fn expected_outcome(self) -> Outcome {
        match self {
            Fault::Http429 => Outcome::Http(429),
            Fault::Http500 => Outcome::Http(500),
            Fault::Reset | Fault::Truncate => Outcome::StreamTruncated,
            Fault::Malformed => Outcome::BadPayload,
            Fault::ErrorEvent => Outcome::ServerErrorEvent,
            Fault::Stall => Outcome::Timeout,
            Fault::Empty => Outcome::Empty,
        }
    }
}

impl Default for MockConfig {
    fn default() -> Self {
        Self {
            ttft_ms: 50.0,
            itl_ms: 10.0,
            tokens_per_event: 1,
            output_tokens: 128,
            jitter_ms: 0.0,
            ttft_per_inflight_ms: 0.0,
            itl_per_inflight_ms: 0.0,
            usage: true,
            role_chunk: true,
            eos_after_tokens: None,
            model: "cicada-mock".to_string(),
            api: MockApi::OpenaiChat,
            kv_cache_tokens: 1_000_000,
            prefix_cache: true,
            prompt_tokens_details: false,
            spec_tokens: 0,
            api_key: None,
            close_after_response: false,
            idle_timeout_ms: None,
            keepalive_requests: None,
            h2_max_streams: None,
            invalid_output: 0.0,
            reasoning_tokens: 0,
            reasoning_field: ReasoningField::default(),
            hook_status: None,
            hook_ok_calls: 0,
            seed: 0,
            faults: FaultRates::default(),
        }
    }
}

impl MockConfig {
    /// Problems with the values, as (dotted key, message) pairs.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let non_negative = [
            ("ttft_ms", self.ttft_ms),
            ("itl_ms", self.itl_ms),
            ("jitter_ms", self.jitter_ms),
            ("ttft_per_inflight_ms", self.ttft_per_inflight_ms),
            ("itl_per_inflight_ms", self.itl_per_inflight_ms),
        ];
        for (key, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                out.push((
                    key.to_string(),
                    format!("must be a finite number ≥ 0, got {v}"),
                ));
            }
        }
        for (key, zero) in [
            ("tokens_per_event", self.tokens_per_event == 0),
            ("kv_cache_tokens", self.kv_cache_tokens == 0),
            ("keepalive_requests", self.keepalive_requests == Some(0)),
            ("h2_max_streams", self.h2_max_streams == Some(0)),
        ] {
            if zero {
                out.push((key.to_string(), "must be at least 1".to_string()));
            }
        }
        if let Some(s) = self.hook_status
            && !(100..=599).contains(&s)
        {
            out.push((
                "hook_status".to_string(),
                format!("an HTTP status is 100 to 599, got {s}"),
            ));
        }
        if !(0.0..=1.0).contains(&self.invalid_output) {
            out.push((
                "invalid_output".to_string(),
                format!("must be within [0, 1], got {}", self.invalid_output),
            ));
        }
        if self.spec_tokens > 64 {
            out.push((
                "spec_tokens".to_string(),
                format!("must be at most 64, got {}", self.spec_tokens),
            ));
        }
        for (fault, rate) in self.faults.table() {
            if !(0.0..=1.0).contains(&rate) {
                out.push((
                    format!("faults.{}", fault.key()),
                    format!("a fault rate is a probability within [0, 1], got {rate}"),
                ));
            }
        }
        if self.faults.total() > 1.0 + 1e-9 {
            out.push((
                "faults".to_string(),
                format!(
                    "fault rates sum to {} but one request gets at most one fault, so the sum must be ≤ 1",
                    self.faults.total()
                ),
            ));
        }
        out
    }

    /// Ground truth for a request with `output_tokens` tokens and no faults, jitter or load.
    pub fn truth(&self, output_tokens: u32) -> Truth {
        let k = self.tokens_per_event.max(1);
        let events = output_tokens.div_ceil(k).max(1);
        let event_gap_ms = self.itl_ms * f64::from(k);
        let e2el_ms = self.ttft_ms + f64::from(events - 1) * event_gap_ms;
        let tpot_ms = if output_tokens >= 2 {
            (e2el_ms - self.ttft_ms) / f64::from(output_tokens - 1)
        } else {
            0.0
        };
        Truth {
            ttft_ms: self.ttft_ms,
            itl_ms: self.itl_ms,
            icl_ms: event_gap_ms,
            tpot_ms,
            e2el_ms,
            events,
        }
    }
}

/// What a perfect client measures against this mock for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Truth {
    pub ttft_ms: f64,
    pub itl_ms: f64,
    pub icl_ms: f64,
    pub tpot_ms: f64,
    pub e2el_ms: f64,
    pub events: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_keys_are_the_config_names() {
        for (fault, _) in FaultRates::default().table() {
            let json = format!("{{\"{}\": 0.5}}", fault.key());
            let rates: FaultRates = serde_json::from_str(&json).unwrap();
            assert_eq!(rates.total(), 0.5, "{json}");
        }
    }

    #[test]
    fn bad_rates_name_the_fault() {
        let mut c = MockConfig::default();
        c.faults.reset = -0.1;
        c.faults.http_500 = 0.7;
        c.faults.stall = 0.7;
        c.tokens_per_event = 0;
        let keys: Vec<String> = c.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["tokens_per_event", "faults.reset", "faults"]);
    }
}

#[cfg(test)]
mod fault_name_tests {
    use super::Fault;

    /// `/mock/stats` names each fault exactly as `[mock.faults]` does.
    #[test]
    fn faults_serialise_under_their_config_keys() {
        for f in [
            Fault::Http429,
            Fault::Http500,
            Fault::Reset,
            Fault::Malformed,
            Fault::ErrorEvent,
            Fault::Stall,
            Fault::Truncate,
            Fault::Empty,
        ] {
            let json = serde_json::to_string(&f).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", f.key()));
        }
    }
}

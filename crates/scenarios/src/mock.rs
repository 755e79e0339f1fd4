//! The scenario's `[mock]` section: how the built-in mock server behaves when
//! `target.backend = "mock"`. Plain data spelled as `coord mock`'s flags are:
//! the scenario model does not depend on the mock server; the coordinator
//! turns this into the mock's own configuration when it starts the embedded
//! mock.

use serde::{Deserialize, Serialize};

/// `[mock]`: timing, output length, dialect and faults of the embedded mock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MockSettings {
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
    /// End every response after this many tokens unless the request ignores
    /// end-of-sequence: outputs shorter than asked, on demand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eos_after_tokens: Option<u32>,
    /// Model id the mock serves.
    pub model: String,
    /// The API the scenario speaks to the mock.
    pub api: MockApi,
    /// KV-cache capacity in tokens, for the mock's KV usage and preemptions.
    pub kv_cache_tokens: u64,
    /// Simulate vLLM's prefix cache.
    pub prefix_cache: bool,
    /// Report `usage.prompt_tokens_details.cached_tokens`.
    pub prompt_tokens_details: bool,
    /// Speculative tokens proposed per decode step (0 = no speculative decoding).
    pub spec_tokens: u32,
    /// Close every connection after its response while answering as if it
    /// stayed open, as `llama-server` does: a client that reuses it must
    /// reconnect.
    pub close_after_response: bool,
    /// Close a connection idle this long between requests, ms (uvicorn's
    /// keep-alive timeout in front of vLLM and SGLang is 5 s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// Seed for jitter and fault selection.
    pub seed: u64,
    /// Fault injection rates.
    #[serde(default)]
    pub faults: MockFaults,
}

impl Default for MockSettings {
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
            close_after_response: false,
            idle_timeout_ms: None,
            seed: 0,
            faults: MockFaults::default(),
        }
    }
}

/// `mock.api`: which serving API the embedded mock is spoken to in; its
/// names are the `target.backend` names of those APIs.
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
}

impl MockApi {
    /// Requests go out as chat `messages`.
    pub fn sends_messages(self) -> bool {
        matches!(self, MockApi::OpenaiChat | MockApi::LlamacppChat)
    }
}

/// `[mock.faults]`: probability, per request, of each injected fault (their sum must be ≤ 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MockFaults {
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

impl MockFaults {
    /// Each rate with its key in `[mock.faults]`, in a fixed order.
    pub fn table(&self) -> [(&'static str, f64); 8] {
        [
            ("http_429", self.http_429),
            ("http_500", self.http_500),
            ("reset", self.reset),
            ("malformed", self.malformed),
            ("error_event", self.error_event),
            ("stall", self.stall),
            ("truncate", self.truncate),
            ("empty", self.empty),
        ]
    }

    /// Sum of every rate.
    pub fn total(&self) -> f64 {
        self.table().iter().map(|(_, r)| r).sum()
    }
}

impl MockSettings {
    /// Problems with the values, as (key inside `[mock]`, message).
    pub(crate) fn problems(&self) -> Vec<(String, String)> {
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
        ] {
            if zero {
                out.push((key.to_string(), "must be at least 1".to_string()));
            }
        }
        if self.spec_tokens > 64 {
            out.push((
                "spec_tokens".to_string(),
                format!("must be at most 64, got {}", self.spec_tokens),
            ));
        }
        for (key, rate) in self.faults.table() {
            if !(0.0..=1.0).contains(&rate) {
                out.push((
                    format!("faults.{key}"),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_rates_name_the_fault() {
        let mut m = MockSettings::default();
        m.faults.reset = -0.1;
        m.faults.http_500 = 0.7;
        m.faults.stall = 0.7;
        m.tokens_per_event = 0;
        let keys: Vec<String> = m.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["tokens_per_event", "faults.reset", "faults"]);
    }

    #[test]
    fn fault_keys_are_the_field_names() {
        for (key, _) in MockFaults::default().table() {
            let faults: MockFaults = serde_json::from_str(&format!("{{\"{key}\": 0.5}}")).unwrap();
            assert_eq!(faults.total(), 0.5, "{key}");
        }
    }
}

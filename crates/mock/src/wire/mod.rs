//! Byte-level writers for every API's response format (no serde on the hot
//! path). [`Reply`] holds what one response's events share and dispatches to
//! the API's own module; the stream and the non-streaming handler only say
//! what happened (a step of tokens, the end, a fault).

mod llamacpp;
mod messages;
mod openai;
mod responses;
mod tgi;
mod triton;

use std::fmt::Write as _;
use std::sync::Arc;

/// Which API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// OpenAI `/v1/completions`.
    Completions,
    /// OpenAI `/v1/chat/completions`.
    Chat,
    /// TGI `/generate_stream` and `/generate`.
    Tgi,
    /// llama.cpp `/completion`.
    LlamaCpp,
    /// Triton `/v2/models/{model}/generate_stream` and `/generate`.
    Triton,
    /// OpenAI Responses `/v1/responses`.
    Responses,
    /// Anthropic Messages `/v1/messages`.
    Messages,
}

/// Words the mock generates; each is one token in common BPE vocabularies.
pub const WORDS: [&str; 32] = [
    " the", " of", " and", " to", " in", " is", " it", " that", " was", " for", " on", " are",
    " with", " as", " at", " be", " this", " have", " from", " or", " one", " had", " by", " word",
    " but", " not", " what", " all", " were", " we", " when", " your",
];

/// Index into [`WORDS`] of token `j` of request `seq`.
fn word_index(seq: u64, j: u32) -> usize {
    (seq.wrapping_mul(7).wrapping_add(u64::from(j)) % WORDS.len() as u64) as usize
}

/// Text of token `j` of request `seq`.
pub(crate) fn word(seq: u64, j: u32) -> &'static str {
    WORDS[word_index(seq, j)]
}

/// A stable token id for token `j` of request `seq`.
pub(crate) fn token_id(seq: u64, j: u32) -> usize {
    1000 + word_index(seq, j)
}

/// Text of `n` tokens starting at token number `first` of request `seq`.
pub(crate) fn token_text(out: &mut String, seq: u64, first: u32, n: u32) {
    for j in first..first + n {
        out.push_str(word(seq, j));
    }
}

/// Fingerprint of the whole answer of request `seq` (`n` tokens), without building it.
pub(crate) fn text_fingerprint(seq: u64, n: u32) -> u64 {
    (0..n).fold(crate::request::FNV_BASIS, |h, j| {
        crate::request::fnv1a(h, word(seq, j).as_bytes())
    })
}

/// `s` as a JSON string literal.
pub(crate) fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// What one response's events share, fixed when the request arrives.
pub(crate) struct Reply {
    pub api: Api,
    /// A transcription (streamed as chat chunks; whole, as `{"text": ...}`).
    pub transcription: bool,
    /// OpenAI routes answer in llama.cpp's dialect.
    pub llamacpp: bool,
    pub seq: u64,
    pub created: u64,
    /// Model id already JSON-escaped and quoted.
    pub model_json: Arc<str>,
    /// Token counts may be reported at all (the mock's `usage` switch).
    pub counts: bool,
    /// The client asked for a final count (OpenAI `include_usage`, TGI `details`).
    pub final_usage: bool,
    /// Running usage on every chunk (OpenAI `continuous_usage_stats`).
    pub continuous: bool,
    /// Report cached prompt tokens in OpenAI usage.
    pub cached_details: bool,
    /// A role-only first chunk is sent on chat streams.
    pub role_chunk: bool,
    pub prompt_tokens: u32,
    /// Prompt tokens served from the (simulated) prefix cache.
    pub cached_tokens: u32,
    /// Output tokens the response will carry.
    pub total_tokens: u32,
    /// Output tokens the client asked for (llama.cpp's `n_predict`).
    pub limit_tokens: u32,
    /// The output ends at a modelled end-of-sequence before the limit:
    /// finish "stop" (OpenAI), "eos_token" (TGI), `stop_type` "eos" (llama.cpp).
    pub eos: bool,
    /// Configured TTFT and per-token gap, ms (llama.cpp `timings`).
    pub ttft_ms: f64,
    pub itl_ms: f64,
    /// Speculative tokens proposed per step (llama.cpp `timings.draft_n`).
    pub spec_tokens: u32,
    pub tokens_per_event: u32,
    /// A tool call or JSON answer in place of words (chat, Responses, Messages).
    pub shaped: Option<crate::shaped::Shaped>,
    /// The first this many output tokens are reasoning (chat, Responses,
    /// Messages; a shaped answer does not think).
    pub reasoning_tokens: u32,
    /// The delta field the reasoning goes in.
    pub reasoning_field: crate::ReasoningField,
}

impl Reply {
    /// Output tokens that are thinking on Responses and Messages (a shaped
    /// answer does not think).
    pub(crate) fn thinking(&self) -> u32 {
        if self.shaped.is_some() {
            0
        } else {
            self.reasoning_tokens
        }
    }

    /// The answer's output index (Responses) or content block (Messages):
    /// after the thinking's, if any.
    pub(crate) fn answer_index(&self) -> u32 {
        u32::from(self.thinking() > 0)
    }

    /// Events sent before the first token (the role-only chat chunk).
    pub fn opening(&self, out: &mut String) {
        match self.api {
            Api::Chat if self.role_chunk => openai::role(self, out),
            Api::Responses => responses::opening(self, out),
            Api::Messages => messages::opening(self, out),
            _ => {}
        }
        if self.api == Api::Chat {
            openai::tool_call_opening(self, out);
        }
    }

    /// The events of one step carrying tokens `first .. first + n`; `last` ends the output.
    pub fn step(&self, out: &mut String, first: u32, n: u32, last: bool) {
        match self.api {
            Api::Completions | Api::Chat => openai::step(self, out, first, n, last),
            Api::Tgi => tgi::step(self, out, first, n, last),
            Api::LlamaCpp => llamacpp::step(self, out, first, n),
            Api::Triton => triton::step(self, out, first, n),
            Api::Responses => responses::step(self, out, first, n),
            Api::Messages => messages::step(self, out, first, n),
        }
    }

    /// Events after the last step: usage chunk and `[DONE]`, or llama.cpp's final event.
    pub fn close(&self, out: &mut String) {
        match self.api {
            Api::Completions | Api::Chat => openai::close(self, out, self.total_tokens),
            Api::LlamaCpp => llamacpp::close(self, out, self.total_tokens, self.llamacpp_stop()),
            Api::Responses => responses::close(self, out, self.total_tokens),
            Api::Messages => messages::close(self, out, self.total_tokens),
            Api::Tgi | Api::Triton => {}
        }
    }

    /// Finish reason of a complete output in OpenAI's spelling.
    pub fn finish_reason(&self) -> &'static str {
        if self.shaped.as_ref().is_some_and(|s| s.tool.is_some()) {
            "tool_calls"
        } else if self.eos {
            "stop"
        } else {
            "length"
        }
    }

    /// llama.cpp's `stop_type` of a complete output.
    fn llamacpp_stop(&self) -> &'static str {
        if self.eos { "eos" } else { "limit" }
    }

    /// A complete stream that carries no content.
    pub fn empty(&self, out: &mut String) {
        match self.api {
            Api::Completions | Api::Chat => openai::empty(self, out),
            Api::Tgi => tgi::empty(self, out),
            Api::LlamaCpp => llamacpp::close(self, out, 0, "eos"),
            Api::Triton => triton::step(self, out, 0, 0),
            Api::Responses => responses::close(self, out, 0),
            Api::Messages => messages::close(self, out, 0),
        }
    }

    /// An in-band error event, shaped as the API's server sends it.
    pub fn error_event(&self, out: &mut String) {
        match self.api {
            Api::Completions | Api::Chat => openai::error_event(self, out),
            Api::Tgi => out.push_str(tgi::ERROR_EVENT),
            Api::LlamaCpp => out.push_str(llamacpp::ERROR_EVENT),
            Api::Triton => out.push_str(triton::ERROR_EVENT),
            Api::Responses => responses::error_event(out),
            Api::Messages => out.push_str(messages::ERROR_EVENT),
        }
    }

    /// An event whose JSON is cut short.
    pub fn malformed(&self, out: &mut String) {
        match self.api {
            Api::Completions | Api::Chat => openai::malformed(self, out),
            Api::Tgi => out.push_str("data:{\"index\":1,\"token\":{\"id\":\n\n"),
            Api::LlamaCpp => out.push_str("data: {\"index\":0,\"content\":\n\n"),
            Api::Triton => out.push_str("data: {\"model_name\":\"m\",\"text_output\":\n\n"),
            Api::Responses => out.push_str(responses::MALFORMED_EVENT),
            Api::Messages => out.push_str(messages::MALFORMED_EVENT),
        }
    }

    /// A whole non-streamed response of `completion` tokens; `prompt` is
    /// echoed where the API does so by default (Triton).
    pub fn full(&self, out: &mut String, completion: u32, prompt: Option<&str>) {
        let mut text = String::new();
        token_text(&mut text, self.seq, 0, completion);
        if self.transcription {
            // vLLM's usage counts the audio's seconds, which the mock does not read
            let _ = write!(out, "{{\"text\":\"{text}\"}}");
            return;
        }
        match self.api {
            Api::Completions | Api::Chat => openai::full(self, out, &text, completion),
            Api::Tgi => tgi::full(self, out, &text, completion),
            Api::LlamaCpp => llamacpp::full(self, out, &text, completion),
            Api::Triton => triton::full(self, out, &text, prompt),
            Api::Responses => responses::full(self, out, completion),
            Api::Messages => messages::full(self, out, &text, completion),
        }
    }

    /// A non-streamed in-band error body.
    pub fn full_error(&self) -> &'static str {
        match self.api {
            Api::Completions | Api::Chat => {
                r#"{"error":{"message":"mock injected error","type":"InternalServerError","param":null,"code":500}}"#
            }
            Api::Tgi => {
                r#"{"error":"Request failed during generation: mock injected error","error_type":"generation"}"#
            }
            Api::LlamaCpp => {
                r#"{"error":{"code":500,"message":"mock injected error","type":"server_error"}}"#
            }
            Api::Triton => r#"{"error":"mock injected error"}"#,
            Api::Responses => responses::FULL_ERROR,
            Api::Messages => messages::FULL_ERROR,
        }
    }

    /// A non-streamed body cut short.
    pub fn full_malformed(&self) -> &'static str {
        match self.api {
            Api::Completions | Api::Chat => r#"{"choices":[{"index":0,"text":"#,
            Api::Tgi => r#"{"generated_text":"#,
            Api::LlamaCpp => r#"{"index":0,"content":"#,
            Api::Triton => r#"{"model_name":"m","text_output":"#,
            Api::Responses => responses::FULL_MALFORMED,
            Api::Messages => messages::FULL_MALFORMED,
        }
    }

    /// llama.cpp's `timings` object for `completion` generated tokens.
    fn timings(&self, out: &mut String, completion: u32) {
        let prompt_n = self.prompt_tokens.saturating_sub(self.cached_tokens);
        let prompt_ms = self.ttft_ms;
        let predicted_ms = self.itl_ms * f64::from(completion.saturating_sub(1));
        let per = |ms: f64, n: u32| if n == 0 { 0.0 } else { ms / f64::from(n) };
        let rate = |ms: f64, n: u32| {
            if ms <= 0.0 {
                0.0
            } else {
                f64::from(n) * 1000.0 / ms
            }
        };
        let _ = write!(
            out,
            "\"timings\":{{\"cache_n\":{},\"prompt_n\":{prompt_n},\"prompt_ms\":{prompt_ms:.3},\"prompt_per_token_ms\":{:.3},\"prompt_per_second\":{:.3},\"predicted_n\":{completion},\"predicted_ms\":{predicted_ms:.3},\"predicted_per_token_ms\":{:.3},\"predicted_per_second\":{:.3}",
            self.cached_tokens,
            per(prompt_ms, prompt_n),
            rate(prompt_ms, prompt_n),
            per(predicted_ms, completion),
            rate(predicted_ms, completion),
        );
        if self.spec_tokens > 0 {
            let per_event = self.tokens_per_event.max(1);
            let steps = completion.div_ceil(per_event).saturating_sub(1);
            // every step after the first carries one token plus its accepted drafts
            let accepted = completion
                .saturating_sub(per_event.min(completion))
                .saturating_sub(steps);
            let _ = write!(
                out,
                ",\"draft_n\":{},\"draft_n_accepted\":{accepted}",
                steps * self.spec_tokens
            );
        }
        out.push('}');
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A reply for unit tests of every writer.
    pub(crate) fn reply(api: Api, model_json: &str) -> Reply {
        Reply {
            api,
            transcription: false,
            llamacpp: false,
            seq: 3,
            created: 1,
            model_json: model_json.into(),
            counts: true,
            final_usage: true,
            continuous: true,
            cached_details: true,
            role_chunk: true,
            prompt_tokens: 5,
            cached_tokens: 2,
            total_tokens: 4,
            limit_tokens: 4,
            eos: false,
            ttft_ms: 10.0,
            itl_ms: 2.0,
            spec_tokens: 0,
            tokens_per_event: 1,
            shaped: None,
            reasoning_tokens: 0,
            reasoning_field: crate::ReasoningField::default(),
        }
    }

    /// The data payloads of an SSE text (either `data:` spelling, after any `event:` line).
    /// A 5-token answer that thinks for 3, streamed in steps of 2, 2 and 1
    /// (the middle step holds the last thought and the first answer token).
    pub(crate) fn thinking_stream(api: Api, model_json: &str) -> (Reply, String) {
        let mut r = reply(api, model_json);
        r.reasoning_tokens = 3;
        r.total_tokens = 5;
        let mut out = String::new();
        r.opening(&mut out);
        for (first, n) in [(0, 2), (2, 2), (4, 1)] {
            r.step(&mut out, first, n, first + n == 5);
        }
        r.close(&mut out);
        (r, out)
    }

    pub(crate) fn payloads(text: &str) -> Vec<&str> {
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let e = match e.strip_prefix("event:") {
                    Some(rest) => rest.split_once('\n').map_or("", |(_, d)| d),
                    None => e,
                };
                let d = e.strip_prefix("data:").unwrap_or_else(|| panic!("{e}"));
                d.strip_prefix(' ').unwrap_or(d)
            })
            .collect()
    }

    #[test]
    fn every_api_writes_valid_json_events_and_bodies() {
        let model = serde_json::to_string("m\"x").unwrap();
        for api in [
            Api::Chat,
            Api::Completions,
            Api::Tgi,
            Api::LlamaCpp,
            Api::Triton,
            Api::Responses,
            Api::Messages,
        ] {
            for llamacpp in [false, true] {
                let mut r = reply(api, &model);
                r.llamacpp = llamacpp;
                let mut out = String::new();
                r.opening(&mut out);
                r.step(&mut out, 0, 2, false);
                r.step(&mut out, 2, 2, true);
                r.close(&mut out);
                r.empty(&mut out);
                r.error_event(&mut out);
                for p in payloads(&out) {
                    if p != "[DONE]" {
                        let _: serde_json::Value =
                            serde_json::from_str(p).unwrap_or_else(|e| panic!("{api:?} {p}: {e}"));
                    }
                }
                let mut full = String::new();
                r.full(&mut full, 4, Some("a \"b\""));
                let _: serde_json::Value = serde_json::from_str(&full).unwrap();
                let _: serde_json::Value = serde_json::from_str(r.full_error()).unwrap();
                assert!(serde_json::from_str::<serde_json::Value>(r.full_malformed()).is_err());
                let mut bad = String::new();
                r.malformed(&mut bad);
                assert!(
                    payloads(&bad)
                        .iter()
                        .any(|p| serde_json::from_str::<serde_json::Value>(p).is_err())
                );
            }
        }
    }

    #[test]
    fn words_are_one_token_each() {
        let mut t = String::new();
        token_text(&mut t, 99, 5, 4);
        assert_eq!(t.split_whitespace().count(), 4);
        assert_eq!(word(99, 5), WORDS[word_index(99, 5)]);
        assert!(token_id(1, 2) >= 1000);
        let mut all = String::new();
        token_text(&mut all, 3, 0, 9);
        assert_eq!(text_fingerprint(3, 9), crate::request::fingerprint(&all));
    }
}

//! What a completions or chat completions server answers, a stream event or
//! a whole body: content, reasoning, tool calls, usage, llama.cpp's timings
//! and errors.

use std::borrow::Cow;

use cicada_request::WireApi;
use serde::Deserialize;
use serde_json::Value;

use crate::backend::{
    DecodeError, EventInfo, ServerTiming, ToolCallPiece, Usage, decode, error_text,
};

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<UsageJson>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    message: Option<Value>,
    /// llama.cpp: `timings` beside (or instead of) usage.
    #[serde(default)]
    timings: Option<Timings>,
}

/// llama.cpp's `timings`: token counts and the server's own timing.
#[derive(Deserialize, Default, Clone, Copy)]
pub(in crate::backend) struct Timings {
    #[serde(default)]
    pub cache_n: Option<u64>,
    #[serde(default)]
    pub prompt_n: Option<u64>,
    #[serde(default)]
    pub predicted_n: Option<u64>,
    #[serde(default)]
    pub prompt_ms: Option<f64>,
    #[serde(default)]
    pub predicted_per_token_ms: Option<f64>,
}

impl Timings {
    /// The server's timing, in µs (non-finite or negative values dropped).
    pub fn server(self) -> Option<ServerTiming> {
        let us = |ms: Option<f64>| {
            ms.filter(|v| v.is_finite() && *v >= 0.0)
                .map(|v| (v * 1000.0).round() as u64)
        };
        let t = ServerTiming {
            prompt_us: us(self.prompt_ms),
            per_token_us: us(self.predicted_per_token_ms),
        };
        (t != ServerTiming::default()).then_some(t)
    }

    /// The counts as usage: prompt = evaluated + cached, completion = predicted.
    pub fn usage(self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_n.map(|p| p + self.cache_n.unwrap_or(0)),
            completion_tokens: self.predicted_n,
            cached_tokens: self.cache_n.filter(|c| *c > 0),
            ..Usage::default()
        }
    }
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    message: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallJson<'a>>>,
}

/// One entry of `tool_calls`: a whole call (non-streamed) or a piece of one.
#[derive(Deserialize)]
struct ToolCallJson<'a> {
    /// Absent in non-streamed bodies, where the position is the index.
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow)]
    function: Option<FunctionJson<'a>>,
}

#[derive(Deserialize)]
struct FunctionJson<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

/// The tool-call pieces of a delta or message, and their argument text joined.
fn tool_pieces<'a>(calls: Vec<ToolCallJson<'a>>) -> (Vec<ToolCallPiece<'a>>, Option<Cow<'a, str>>) {
    let pieces: Vec<ToolCallPiece<'a>> = calls
        .into_iter()
        .enumerate()
        .map(|(k, c)| {
            let (name, arguments) = c.function.map_or((None, None), |f| (f.name, f.arguments));
            ToolCallPiece {
                index: c.index.unwrap_or(k as u32),
                name: name.filter(|n| !n.is_empty()),
                arguments: arguments.filter(|a| !a.is_empty()),
            }
        })
        .collect();
    let mut args = pieces.iter().filter_map(|p| p.arguments.as_ref());
    let joined = match (args.next(), args.next()) {
        (None, _) => None,
        // one piece (the usual case): borrowed from the payload when it can be
        (Some(one), None) => Some(one.clone()),
        (Some(a), Some(b)) => {
            let mut s = format!("{a}{b}");
            for more in args {
                s.push_str(more);
            }
            Some(Cow::Owned(s))
        }
    };
    (pieces, joined)
}

#[derive(Deserialize)]
struct UsageJson {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

fn join<'a, const N: usize>(parts: [Option<Cow<'a, str>>; N]) -> Option<Cow<'a, str>> {
    let mut non_empty = parts.into_iter().flatten().filter(|p| !p.is_empty());
    let first = non_empty.next()?;
    match non_empty.next() {
        None => Some(first),
        Some(second) => {
            let mut s = first.into_owned();
            s.push_str(&second);
            for p in non_empty {
                s.push_str(&p);
            }
            Some(Cow::Owned(s))
        }
    }
}

fn interpret<'a>(api: WireApi, chunk: Chunk<'a>) -> EventInfo<'a> {
    if let Some(e) = &chunk.error {
        return EventInfo::failed(error_text(e));
    }
    if chunk.object.as_deref() == Some("error") {
        return EventInfo::failed(
            chunk
                .message
                .as_ref()
                .map_or_else(|| "error".to_string(), error_text),
        );
    }
    let mut info = EventInfo::default();
    let timed = chunk.timings.map(Timings::usage);
    info.server = chunk.timings.and_then(Timings::server);
    if let Some(u) = chunk.usage {
        info.usage = Some(Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(timed.and_then(|t| t.cached_tokens)),
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
        });
    } else {
        info.usage = timed;
    }
    if let Some(choice) = chunk.choices.and_then(|c| c.into_iter().next()) {
        info.finished = choice.finish_reason.is_some();
        match api {
            WireApi::Chat => {
                if let Some(d) = choice.delta.or(choice.message) {
                    info.reasoning = join([d.reasoning_content, d.reasoning]);
                    info.content = d.content.filter(|t| !t.is_empty());
                    if let Some(calls) = d.tool_calls {
                        (info.tool_calls, info.tool_arguments) = tool_pieces(calls);
                    }
                }
            }
            _ => info.content = choice.text.filter(|t| !t.is_empty()),
        }
    }
    info
}

pub(in crate::backend) fn parse_event(
    api: WireApi,
    data: &[u8],
) -> Result<EventInfo<'_>, DecodeError> {
    let trimmed = data.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(EventInfo {
            done: true,
            ..EventInfo::default()
        });
    }
    Ok(interpret(api, decode(trimmed)?))
}

#[cfg(test)]
mod tests {
    use cicada_request::ServerFamily;

    use super::*;
    use crate::backend::test_support::codec;

    #[test]
    fn errors_about_huge_payloads_stay_short() {
        // found by the openai_events fuzz target: serde quoted a whole string value
        let payload = format!("\"{}\"", "é".repeat(5000));
        let e = parse_event(WireApi::Chat, payload.as_bytes())
            .unwrap_err()
            .0;
        assert!(
            e.len() < 3 * crate::backend::SHOWN_BYTES,
            "{} bytes",
            e.len()
        );
        assert!(
            e.starts_with("invalid event JSON (invalid type: string"),
            "{e}"
        );
    }

    #[test]
    fn role_only_and_usage_only_chunks_are_not_content() {
        let role = br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#;
        let e = parse_event(WireApi::Chat, role).unwrap();
        assert!(e.content.is_none());
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":2}}}"#;
        let e = parse_event(WireApi::Chat, usage).unwrap();
        assert!(e.content.is_none());
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: Some(3),
                completion_tokens: Some(9),
                cached_tokens: Some(2),
                ..Usage::default()
            })
        );
    }

    #[test]
    fn content_reasoning_finish_done_and_errors() {
        let c = br#"{"choices":[{"delta":{"content":"a\"b"},"finish_reason":"length"}]}"#;
        let e = parse_event(WireApi::Chat, c).unwrap();
        assert_eq!(e.content.as_deref(), Some("a\"b"));
        assert!(e.finished);
        let r = br#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#;
        let e = parse_event(WireApi::Chat, r).unwrap();
        assert_eq!(e.reasoning.as_deref(), Some("think"));
        assert_eq!(e.content, None);
        // a reasoning model's usage says how many output tokens were thinking
        let u = br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":5}}}"#;
        let usage = parse_event(WireApi::Chat, u).unwrap().usage.unwrap();
        assert_eq!(
            (usage.completion_tokens, usage.reasoning_tokens),
            (Some(9), Some(5))
        );
        let r = br#"{"choices":[{"delta":{"reasoning":"new","content":""}}]}"#;
        let e = parse_event(WireApi::Chat, r).unwrap();
        assert_eq!(e.reasoning.as_deref(), Some("new"));
        assert_eq!(e.content, None);
        let t = br#"{"choices":[{"text":" x","finish_reason":null}]}"#;
        assert_eq!(
            parse_event(WireApi::Completions, t)
                .unwrap()
                .content
                .as_deref(),
            Some(" x")
        );
        assert!(parse_event(WireApi::Chat, b" [DONE] ").unwrap().done);
        let err = br#"{"error":{"message":"boom","type":"InternalServerError","code":500}}"#;
        assert_eq!(
            parse_event(WireApi::Chat, err).unwrap().error.as_deref(),
            Some("boom")
        );
        let old = br#"{"object":"error","message":"old style","code":400}"#;
        assert_eq!(
            parse_event(WireApi::Chat, old).unwrap().error.as_deref(),
            Some("old style")
        );
        assert!(parse_event(WireApi::Chat, b"{\"choices\":[").is_err());
    }

    #[test]
    fn llamacpp_timings_give_counts_and_cached_tokens() {
        let role = br#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"object":"chat.completion.chunk"}"#;
        let e = parse_event(WireApi::Chat, role).unwrap();
        assert!(e.content.is_none() && !e.finished);
        let fin = br#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"timings":{"cache_n":8,"prompt_n":4,"prompt_ms":1.5,"predicted_n":31,"predicted_ms":875.4}}"#;
        let e = parse_event(WireApi::Chat, fin).unwrap();
        assert!(e.finished && e.content.is_none());
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(31),
                cached_tokens: Some(8),
                ..Usage::default()
            })
        );
        let both = br#"{"choices":[],"usage":{"completion_tokens":31,"prompt_tokens":12,"total_tokens":43},"timings":{"cache_n":8,"prompt_n":4,"predicted_n":31}}"#;
        let e = parse_event(WireApi::Chat, both).unwrap();
        assert_eq!(e.usage.unwrap().cached_tokens, Some(8));
        let vllm_completion = br#"{"id":"c","object":"text_completion","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#;
        let e = parse_event(WireApi::Completions, vllm_completion).unwrap();
        assert_eq!(e.content.as_deref(), Some(" a"));
        assert!(e.usage.is_none());
    }

    /// Streamed tool-call pieces carry their call's index, name and
    /// argument text; the arguments are generated output.
    #[test]
    fn tool_call_deltas_are_generated_output() {
        let first = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]}}]}"#;
        let e = parse_event(WireApi::Chat, first).unwrap();
        assert!(!e.generated(), "a name alone is no output");
        assert_eq!(e.tool_calls.len(), 1);
        assert_eq!(e.tool_calls[0].name.as_deref(), Some("weather"));
        let more = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"city\": "}}]}}]}"#;
        let e = parse_event(WireApi::Chat, more).unwrap();
        assert!(e.generated());
        assert_eq!(e.tool_arguments.as_deref(), Some("{\"city\": "));
        assert_eq!(e.tool_calls[0].index, 1);
        assert_eq!(e.content, None);
        let whole = br#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"[1]"}}]},"finish_reason":"tool_calls"}]}"#;
        let e = codec(WireApi::Chat, ServerFamily::Vllm, true)
            .parse_full(whole)
            .unwrap();
        assert_eq!(e.tool_arguments.as_deref(), Some("{}[1]"));
        let idx: Vec<u32> = e.tool_calls.iter().map(|p| p.index).collect();
        assert_eq!(idx, [0, 1]);
        assert!(e.finished && e.generated());
    }

    /// Tools, tool choice and response format go out in chat's spelling,

    #[test]
    fn full_bodies() {
        let b = br#"{"choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let e = codec(WireApi::Chat, ServerFamily::Vllm, true)
            .parse_full(b)
            .unwrap();
        assert_eq!(e.content.as_deref(), Some("hello"));
        assert!(e.done);
    }
}

//! OpenAI completions and chat completions, with vLLM/SGLang extras.

use std::borrow::Cow;

use cicada_request::{ServerFamily, Spelling, WireApi};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    ApiCodec, Ask, EventInfo, ServerTiming, ToolCallPiece, Usage, common_sampling, decode,
    error_text, extra_body,
};

/// What a server family accepts beyond the OpenAI API (`ignore_eos` is sent
/// whenever the resolved sampling says so: the scenario decides per backend).
struct Extras {
    /// `min_tokens` is understood.
    min_tokens: bool,
    /// `stream_options.continuous_usage_stats` is understood.
    continuous_usage: bool,
}

fn extras(family: ServerFamily) -> Extras {
    match family {
        ServerFamily::Vllm | ServerFamily::Sglang | ServerFamily::Mock => Extras {
            min_tokens: true,
            continuous_usage: true,
        },
        ServerFamily::LlamaCpp
        | ServerFamily::Openai
        | ServerFamily::Tgi
        | ServerFamily::Triton => Extras {
            min_tokens: false,
            continuous_usage: false,
        },
    }
}

pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    match b.api {
        WireApi::Chat => {
            let messages = super::spelled::messages(Spelling::Chat, entry);
            m.insert("messages".into(), Value::Array(messages));
            if let Some(n) = entry.output_tokens {
                m.insert("max_completion_tokens".into(), json!(n));
            }
            super::spelled::shape(Spelling::Chat, &mut m, entry);
        }
        _ => {
            m.insert(
                "prompt".into(),
                Value::String(entry.prompt.text().into_owned()),
            );
            if let Some(n) = entry.output_tokens {
                m.insert("max_tokens".into(), json!(n));
            }
        }
    }
    let x = extras(b.family);
    if b.stream {
        m.insert("stream".into(), Value::Bool(true));
        let mut opts = json!({"include_usage": true});
        if x.continuous_usage {
            // usage on every chunk gives exact tokens per event (ITL under spec decode)
            opts["continuous_usage_stats"] = Value::Bool(true);
        }
        m.insert("stream_options".into(), opts);
    }
    let s = &b.sampling;
    common_sampling(&mut m, s);
    if s.ignore_eos {
        m.insert("ignore_eos".into(), Value::Bool(true));
    }
    if x.min_tokens
        && let Some(n) = s.min_tokens
    {
        m.insert("min_tokens".into(), json!(n));
    }
    extra_body(&mut m, s);
    m
}

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
pub(super) struct Timings {
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
    let mut info = EventInfo::default();
    if let Some(e) = &chunk.error {
        info.error = Some(error_text(e));
        return info;
    }
    if chunk.object.as_deref() == Some("error") {
        info.error = Some(
            chunk
                .message
                .as_ref()
                .map_or_else(|| "error".to_string(), error_text),
        );
        return info;
    }
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

pub(super) fn parse_event(api: WireApi, data: &[u8]) -> Result<EventInfo<'_>, String> {
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
    use cicada_request::Prompt;

    use super::*;

    fn codec(api: WireApi, family: ServerFamily) -> ApiCodec {
        ApiCodec::new(
            api,
            family,
            "m".into(),
            cicada_request::ResolvedSampling {
                temperature: Some(0.0),
                top_p: None,
                top_k: None,
                ignore_eos: true,
                min_tokens: None,
                extra_body: [("seed".to_string(), json!(3))].into_iter().collect(),
            },
            true,
        )
    }

    fn entry() -> Ask {
        Ask {
            prompt: Prompt::Text("hi there".into()),
            media: Default::default(),
            output_tokens: Some(5),
            structured: None,
        }
    }

    #[test]
    fn errors_about_huge_payloads_stay_short() {
        // found by the openai_events fuzz target: serde quoted a whole string value
        let payload = format!("\"{}\"", "é".repeat(5000));
        let e = parse_event(WireApi::Chat, payload.as_bytes()).unwrap_err();
        assert!(e.len() < 3 * super::super::SHOWN_BYTES, "{} bytes", e.len());
        assert!(
            e.starts_with("invalid event JSON (invalid type: string"),
            "{e}"
        );
    }

    /// Images go after the text of the last user message, as data URLs.
    #[test]
    fn images_follow_the_last_user_text_as_data_urls() {
        use cicada_request::{ChatMessage, Image, MediaFile};
        let file = std::sync::Arc::new(MediaFile {
            mime: "image/jpeg".into(),
            name: "a.jpg".into(),
            bytes: b"abc".to_vec().into(),
        });
        let mut e = entry();
        e.prompt = Prompt::Chat(vec![
            ChatMessage {
                role: "system".into(),
                content: "s".into(),
            },
            ChatMessage {
                role: "user".into(),
                content: "look".into(),
            },
        ]);
        e.media.images = vec![
            Image::Synthetic {
                width: 4,
                height: 2,
                seed: 9,
            },
            Image::File(file),
        ];
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Chat, ServerFamily::Vllm).body(&e)).unwrap();
        assert_eq!(v["messages"][0]["content"], "s");
        let parts = v["messages"][1]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], json!({"type": "text", "text": "look"}));
        assert_eq!(parts[1]["type"], "image_url");
        let url = parts[1]["image_url"]["url"].as_str().unwrap();
        assert!(url.starts_with("data:image/png;base64,"), "{url}");
        assert_eq!(parts[2]["image_url"]["url"], "data:image/jpeg;base64,YWJj");
    }

    #[test]
    fn bodies_carry_limits_usage_and_extras() {
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Chat, ServerFamily::Vllm).body(&entry()))
                .unwrap();
        assert_eq!(v["messages"][0]["content"], "hi there");
        assert_eq!(v["max_completion_tokens"], 5);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["stream_options"]["continuous_usage_stats"], true);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["seed"], 3);
        let v: Value = serde_json::from_slice(
            &codec(WireApi::Completions, ServerFamily::Openai).body(&entry()),
        )
        .unwrap();
        assert_eq!(v["prompt"], "hi there");
        assert_eq!(v["max_tokens"], 5);
        // asked for, ignore_eos goes to a plain OpenAI route too (as vllm
        // bench serve sends it); whether it is asked is the scenario's call
        assert_eq!(v["ignore_eos"], true);
        assert!(v["stream_options"].get("continuous_usage_stats").is_none());
        let mut quiet = codec(WireApi::Completions, ServerFamily::Openai);
        quiet.sampling.ignore_eos = false;
        let v: Value = serde_json::from_slice(&quiet.body(&entry())).unwrap();
        assert!(v.get("ignore_eos").is_none(), "not asked, not sent");
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
    fn each_server_family_sends_only_the_extras_it_understands() {
        use crate::backend::test_support::{body, codec as b};
        for (family, min_tokens, continuous) in [
            (ServerFamily::Vllm, true, true),
            (ServerFamily::Sglang, true, true),
            (ServerFamily::Mock, true, true),
            (ServerFamily::LlamaCpp, false, false),
            (ServerFamily::Openai, false, false),
        ] {
            let v = body(&b(WireApi::Chat, family, true));
            // the resolved sampling asks for it: every server family sends it
            assert_eq!(v["ignore_eos"], true, "{family:?}");
            assert_eq!(v.get("min_tokens").is_some(), min_tokens, "{family:?}");
            assert_eq!(
                v["stream_options"].get("continuous_usage_stats").is_some(),
                continuous,
                "{family:?}"
            );
            assert_eq!(v["stream_options"]["include_usage"], true);
        }
        let v = body(&b(WireApi::Completions, ServerFamily::Vllm, false));
        assert!(v.get("stream").is_none() && v.get("stream_options").is_none());
        assert_eq!(v["max_tokens"], 5);
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
        let e = codec(WireApi::Chat, ServerFamily::Vllm)
            .parse_full(whole)
            .unwrap();
        assert_eq!(e.tool_arguments.as_deref(), Some("{}[1]"));
        let idx: Vec<u32> = e.tool_calls.iter().map(|p| p.index).collect();
        assert_eq!(idx, [0, 1]);
        assert!(e.finished && e.generated());
    }

    /// Tools, tool choice and response format go out in chat's spelling,
    /// unless the shape is only checked.
    #[test]
    fn chat_bodies_carry_the_shape() {
        use cicada_request::{OutputShape, Structured};
        let shape = OutputShape::read(
            Some(&json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}}])),
            Some(&json!({"type": "function", "function": {"name": "f"}})),
            Some(&json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}})),
        )
        .unwrap();
        let mut ask = entry();
        ask.structured = Some(std::sync::Arc::new(Structured::new(shape.clone()).unwrap()));
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Chat, ServerFamily::Vllm).body(&ask)).unwrap();
        assert_eq!(
            v["tools"],
            json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}}])
        );
        assert_eq!(
            v["tool_choice"],
            json!({"type": "function", "function": {"name": "f"}})
        );
        assert_eq!(
            v["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}})
        );
        let mut quiet = shape;
        quiet.check_only = true;
        ask.structured = Some(std::sync::Arc::new(Structured::new(quiet).unwrap()));
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Chat, ServerFamily::Vllm).body(&ask)).unwrap();
        assert!(v.get("tools").is_none() && v.get("response_format").is_none());
    }

    #[test]
    fn full_bodies() {
        let b = br#"{"choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let e = codec(WireApi::Chat, ServerFamily::Vllm)
            .parse_full(b)
            .unwrap();
        assert_eq!(e.content.as_deref(), Some("hello"));
        assert!(e.done);
    }
}

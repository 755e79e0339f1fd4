//! Anthropic's Messages API (`/v1/messages`), as vLLM 0.32 and llama-server
//! serve it too: `messages` with any system message moved to `system`,
//! `max_tokens` (required); streamed as `message_start` (input tokens),
//! `content_block_start`/`content_block_delta`/`content_block_stop`
//! (`text_delta`, `thinking_delta`, `input_json_delta`), `message_delta`
//! (stop reason, output tokens so far), `message_stop`, `ping` and `error`.
//! No server reads `ignore_eos` or `min_tokens` here (validation refuses them).

use std::borrow::Cow;

use cicada_request::{Prompt, Spelling};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    ApiCodec, Ask, DecodeError, EventInfo, ToolCallPiece, Usage, common_sampling, decode,
    error_text, extra_body, spelled,
};

/// `max_tokens` sent when the workload leaves the output length open: the
/// API requires the field; llama-server assumes the same when it is missing.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    let (system, mut messages) = match &entry.prompt {
        Prompt::Text(_) | Prompt::Batch(_) | Prompt::Rerank { .. } | Prompt::Tokens(_) => (
            Vec::new(),
            vec![json!({"role": "user", "content": entry.prompt.text()})],
        ),
        Prompt::Chat(msgs) => {
            let (system, rest): (Vec<_>, Vec<_>) =
                msgs.iter().partition(|msg| &*msg.role == "system");
            let system: Vec<&str> = system.iter().map(|msg| &*msg.content).collect();
            (system, rest.into_iter().map(|msg| json!(msg)).collect())
        }
    };
    if !system.is_empty() {
        m.insert("system".into(), Value::String(system.join("\n")));
    }
    Spelling::Messages.put_images(&mut messages, spelled::image_urls(entry));
    m.insert("messages".into(), Value::Array(messages));
    spelled::shape(Spelling::Messages, &mut m, entry);
    m.insert(
        "max_tokens".into(),
        json!(entry.output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if b.stream {
        m.insert("stream".into(), Value::Bool(true));
    }
    common_sampling(&mut m, &b.sampling);
    extra_body(&mut m, &b.sampling);
    m
}

/// One streamed event, or a whole non-streamed message.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    /// The content block a block event is about.
    #[serde(default)]
    index: Option<u32>,
    /// `message_start`'s message.
    #[serde(default)]
    message: Option<Whole>,
    /// `content_block_start`'s block.
    #[serde(default, borrow)]
    content_block: Option<Block<'a>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// `message_delta`'s running usage, or a whole message's.
    #[serde(default)]
    usage: Option<UsageJson>,
    /// A whole message's blocks.
    #[serde(default, borrow)]
    content: Vec<Block<'a>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize, Default)]
struct Whole {
    #[serde(default)]
    usage: Option<UsageJson>,
}

/// A content block: text, thinking, or a tool call (whose `input` is JSON).
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default)]
    input: Option<Value>,
    /// A tool call's function.
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct UsageJson {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

impl UsageJson {
    /// Anthropic counts cached prompt tokens apart from `input_tokens`
    /// (vLLM and llama-server too): the prompt is all three together.
    fn usage(&self, with_output: bool) -> Usage {
        let cached = self.cache_read_input_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: self
                .input_tokens
                .map(|i| i + cached + self.cache_creation_input_tokens.unwrap_or(0)),
            completion_tokens: self.output_tokens.filter(|_| with_output),
            cached_tokens: Some(cached).filter(|c| *c > 0),
            // Anthropic's usage has no reasoning count: the events give it
            reasoning_tokens: None,
        }
    }
}

fn non_empty(s: Option<Cow<'_, str>>) -> Option<Cow<'_, str>> {
    s.filter(|t| !t.is_empty())
}

/// Interpret one streamed event (its `data:` payload).
pub(super) fn parse_event(data: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let e: Event<'_> = decode(data)?;
    let mut info = EventInfo::default();
    match e.kind.as_deref() {
        Some("message_start") => {
            // its output_tokens is a placeholder (0 or 1), not a count
            info.usage = e.message.and_then(|m| m.usage).map(|u| u.usage(false));
        }
        Some("content_block_start") => {
            if let Some(b) = e.content_block {
                if b.kind.as_deref() == Some("tool_use") {
                    info.tool_calls = vec![ToolCallPiece {
                        index: e.index.unwrap_or(0),
                        name: non_empty(b.name),
                        arguments: None,
                    }];
                }
                info.content = non_empty(b.text);
                info.reasoning = non_empty(b.thinking);
            }
        }
        Some("content_block_delta") => {
            if let Some(d) = e.delta {
                match d.kind.as_deref() {
                    Some("text_delta") => info.content = non_empty(d.text),
                    Some("thinking_delta") => info.reasoning = non_empty(d.thinking),
                    Some("input_json_delta") => {
                        info.tool_arguments = non_empty(d.partial_json);
                        info.tool_calls = vec![ToolCallPiece {
                            index: e.index.unwrap_or(0),
                            name: None,
                            arguments: info.tool_arguments.clone(),
                        }];
                    }
                    // signature_delta and the unknown: no generated text
                    _ => {}
                }
            }
        }
        Some("message_delta") => {
            info.finished = e.delta.is_some_and(|d| d.stop_reason.is_some());
            info.usage = e.usage.map(|u| u.usage(true));
        }
        Some("message_stop") => info.done = true,
        Some("error") => {
            info.error = Some(
                e.error
                    .as_ref()
                    .map_or_else(|| "error event".to_string(), error_text),
            );
        }
        _ if e.error.as_ref().is_some_and(|v| !v.is_null()) => {
            info.error = e.error.as_ref().map(error_text);
        }
        // ping, content_block_stop: no news
        _ => {}
    }
    Ok(info)
}

/// Interpret a whole non-streamed message: every block's text.
pub(super) fn parse_full(body: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let e: Event<'_> = decode(body)?;
    if let Some(err) = e.error.as_ref().filter(|v| !v.is_null()) {
        return Ok(EventInfo::failed(error_text(err)));
    }
    if e.kind.as_deref() != Some("message") {
        return Err("not an Anthropic message (no \"type\": \"message\")".into());
    }
    let (mut content, mut reasoning, mut args) = (String::new(), String::new(), String::new());
    let mut calls = Vec::new();
    for b in &e.content {
        match b.kind.as_deref() {
            Some("text") => content.push_str(b.text.as_deref().unwrap_or("")),
            Some("thinking") => reasoning.push_str(b.thinking.as_deref().unwrap_or("")),
            Some("tool_use") => {
                let input = b.input.as_ref().map(Value::to_string).unwrap_or_default();
                args.push_str(&input);
                calls.push(ToolCallPiece {
                    index: calls.len() as u32,
                    name: b.name.clone().map(|n| Cow::Owned(n.into_owned())),
                    arguments: Some(Cow::Owned(input)),
                });
            }
            _ => {}
        }
    }
    let some = |s: String| (!s.is_empty()).then_some(Cow::Owned(s));
    Ok(EventInfo {
        content: some(content),
        reasoning: some(reasoning),
        tool_arguments: some(args),
        tool_calls: calls,
        usage: e.usage.as_ref().map(|u| u.usage(true)),
        finished: e.stop_reason.is_some(),
        done: true,
        ..EventInfo::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_support::{body as body_of, codec};
    use cicada_request::{ChatMessage, ServerFamily, WireApi};

    #[test]
    fn body_moves_the_system_message_and_always_sets_max_tokens() {
        let v = body_of(&codec(WireApi::Messages, ServerFamily::Openai, true));
        assert_eq!(v["messages"][0]["role"], "user");
        assert_eq!(v["messages"][0]["content"], "hi there");
        assert_eq!(v["max_tokens"], 5);
        assert_eq!(v["stream"], true);
        assert_eq!(v["temperature"], 0.0);
        assert_eq!(v["seed"], 3, "extra_body still goes out");
        for absent in ["ignore_eos", "min_tokens", "system", "stream_options"] {
            assert!(v.get(absent).is_none(), "{absent}");
        }
        let b = codec(WireApi::Messages, ServerFamily::Mock, false);
        let chat = Ask {
            prompt: Prompt::Chat(vec![
                ChatMessage::new("system", "be brief"),
                ChatMessage::new("user", "hi"),
                ChatMessage::new("assistant", "yo"),
                ChatMessage::new("user", "more"),
            ]),
            output_tokens: None,
            structured: None,
            media: Default::default(),
        };
        let v: Value = serde_json::from_slice(&b.body(&chat)).unwrap();
        assert_eq!(v["system"], "be brief");
        assert_eq!(v["messages"].as_array().unwrap().len(), 3);
        assert_eq!(v["messages"][1]["role"], "assistant");
        assert_eq!(v["max_tokens"], DEFAULT_MAX_TOKENS);
        assert!(v.get("stream").is_none());
    }

    #[test]
    fn a_stream_start_to_stop() {
        let start = br#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","stop_reason":null,"usage":{"input_tokens":4,"cache_read_input_tokens":8,"output_tokens":1}}}"#;
        let e = parse_event(start).unwrap();
        assert!(!e.generated() && !e.finished);
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: None,
                cached_tokens: Some(8),
                reasoning_tokens: None,
            })
        );
        let block = br#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
        assert!(!parse_event(block).unwrap().generated());
        let t = parse_event(br#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the"}}"#).unwrap();
        assert_eq!(t.content.as_deref(), Some(" the"));
        let th = parse_event(br#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#).unwrap();
        assert_eq!(th.reasoning.as_deref(), Some("hmm"));
        assert!(th.content.is_none());
        let tool = parse_event(br#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#).unwrap();
        assert_eq!(tool.tool_arguments.as_deref(), Some("{\"a\""));
        let sig = parse_event(br#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#).unwrap();
        assert!(!sig.generated());
        for quiet in [
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_stop","index":0}"#,
        ] {
            let e = parse_event(quiet.as_bytes()).unwrap();
            assert!(!e.generated() && !e.finished && !e.done, "{quiet}");
        }
        let d = parse_event(br#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":24}}"#).unwrap();
        assert!(d.finished && !d.done);
        assert_eq!(d.usage.unwrap().completion_tokens, Some(24));
        assert_eq!(d.usage.unwrap().prompt_tokens, None);
        assert!(parse_event(br#"{"type":"message_stop"}"#).unwrap().done);
        let err = parse_event(
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap();
        assert_eq!(err.error.as_deref(), Some("Overloaded"));
        assert!(parse_event(b"{\"type\":\"content_block_delta\",").is_err());
    }

    #[test]
    fn whole_messages() {
        let b = br#"{"id":"m","type":"message","role":"assistant","model":"x","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"text","text":"hello"},{"type":"tool_use","id":"t","name":"f","input":{"a":1}}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":9}}"#;
        let e = parse_full(b).unwrap();
        assert_eq!(e.content.as_deref(), Some("hello"));
        assert_eq!(e.reasoning.as_deref(), Some("t"));
        assert_eq!(e.tool_arguments.as_deref(), Some("{\"a\":1}"));
        assert_eq!(e.usage.unwrap().completion_tokens, Some(9));
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(3));
        assert!(e.done && e.finished);
        let err = parse_full(br#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}"#).unwrap();
        assert_eq!(err.error.as_deref(), Some("max_tokens: field required"));
        assert!(parse_full(br#"{"choices":[]}"#).is_err());
    }

    /// Images become base64 image blocks after the user text; tools go with
    /// input_schema and Anthropic's tool choice; no response format is sent.
    #[test]
    fn bodies_carry_images_and_tools() {
        use cicada_request::{Image, OutputShape, Structured};
        let shape = OutputShape::read(
            Some(&json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])),
            Some(&json!({"type": "function", "function": {"name": "f"}})),
            None,
        )
        .unwrap();
        let mut ask = crate::backend::test_support::entry();
        ask.structured = Some(std::sync::Arc::new(Structured::new(shape).unwrap()));
        ask.media.images = vec![Image::Synthetic {
            width: 3,
            height: 1,
            seed: 2,
        }];
        let v: Value =
            serde_json::from_slice(&codec(WireApi::Messages, ServerFamily::Vllm, true).body(&ask))
                .unwrap();
        let blocks = v["messages"][0]["content"].as_array().unwrap();
        assert_eq!(blocks[0], json!({"type": "text", "text": "hi there"}));
        assert_eq!(blocks[1]["type"], "image");
        assert_eq!(blocks[1]["source"]["type"], "base64");
        assert_eq!(blocks[1]["source"]["media_type"], "image/png");
        assert!(
            blocks[1]["source"]["data"]
                .as_str()
                .unwrap()
                .starts_with("iVBORw0KGgo")
        );
        assert_eq!(
            v["tools"],
            json!([{"name": "f", "input_schema": {"type": "object"}}])
        );
        assert_eq!(v["tool_choice"], json!({"type": "tool", "name": "f"}));
    }

    /// A tool_use block names its call; its input_json_delta pieces fill it.
    #[test]
    fn tool_use_blocks_name_and_fill_the_call() {
        let start = parse_event(br#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}"#).unwrap();
        assert!(!start.generated());
        assert_eq!(start.tool_calls[0].index, 1);
        assert_eq!(start.tool_calls[0].name.as_deref(), Some("f"));
        let d = parse_event(br#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"n\":"}}"#).unwrap();
        assert!(d.generated());
        assert_eq!(d.tool_calls[0].index, 1);
        assert_eq!(d.tool_calls[0].arguments.as_deref(), Some("{\"n\":"));
        let text = parse_event(br#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#).unwrap();
        assert!(text.tool_calls.is_empty());
        let whole = parse_full(br#"{"type":"message","content":[{"type":"tool_use","id":"t","name":"f","input":{"n":1}}],"stop_reason":"tool_use"}"#).unwrap();
        assert_eq!(whole.tool_calls[0].name.as_deref(), Some("f"));
        assert_eq!(whole.tool_calls[0].arguments.as_deref(), Some("{\"n\":1}"));
    }
}

//! OpenAI's Responses API (`/v1/responses`), as vLLM 0.32 and llama-server
//! serve it too: `input` (text, or the chat messages), `max_output_tokens`;
//! streamed as typed events (`response.output_text.delta`,
//! `response.reasoning_text.delta`, `response.function_call_arguments.delta`,
//! ...) that end with `response.completed` (vLLM's and llama-server's end,
//! whatever the status), `response.incomplete` or `response.failed`; usage
//! only on the terminal event. No `[DONE]`.

use std::borrow::Cow;

use cicada_request::{Prompt, Spelling};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::openai::Timings;
use super::{
    ApiCodec, Ask, DecodeError, EventInfo, ToolCallPiece, Usage, common_sampling, decode,
    error_text, extra_body, spelled,
};

pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    let input = match &entry.prompt {
        Prompt::Text(t) if entry.media.images.is_empty() => Value::String(t.to_string()),
        _ => Value::Array(spelled::messages(Spelling::Responses, entry)),
    };
    m.insert("input".into(), input);
    spelled::shape(Spelling::Responses, &mut m, entry);
    if let Some(n) = entry.output_tokens {
        m.insert("max_output_tokens".into(), json!(n));
    }
    if b.stream {
        m.insert("stream".into(), Value::Bool(true));
    }
    let s = &b.sampling;
    common_sampling(&mut m, s);
    // vLLM's and llama-server's Responses routes read it; OpenAI's refuses
    // it, so it goes out only when the scenario asks (never by default)
    if s.ignore_eos {
        m.insert("ignore_eos".into(), Value::Bool(true));
    }
    extra_body(&mut m, s);
    m
}

/// One streamed event, or (with `output`) a whole non-streamed response.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Cow<'a, str>>,
    /// Which output item a delta belongs to (a function call's `id`).
    #[serde(default, borrow)]
    item_id: Option<Cow<'a, str>>,
    /// `response.output_item.added`'s item: a function call names its function.
    #[serde(default, borrow)]
    item: Option<Added<'a>>,
    /// The terminal events' response object.
    #[serde(default)]
    response: Option<Whole>,
    /// `error` events: `message` beside `code`.
    #[serde(default)]
    message: Option<Value>,
    /// llama-server's in-band error: `{"error": {...}}`.
    #[serde(default)]
    error: Option<Value>,
    /// llama-server: `timings` beside the terminal event.
    #[serde(default)]
    timings: Option<Timings>,
}

/// The item an `output_item.added` event opens.
#[derive(Deserialize)]
struct Added<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
}

/// The index a function call's pieces share: its item id, hashed (FNV-1a;
/// llama-server's deltas carry the item id and no `output_index`).
fn call_index(item_id: Option<&str>) -> u32 {
    item_id
        .unwrap_or_default()
        .bytes()
        .fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
}

/// A response object: what a terminal event carries, or a whole
/// non-streamed body.
#[derive(Deserialize, Default)]
struct Whole {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Vec<Item>,
    #[serde(default)]
    usage: Option<UsageJson>,
    #[serde(default)]
    error: Option<Value>,
}

/// One output item: a message, reasoning, or a function call.
#[derive(Deserialize)]
struct Item {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    content: Vec<Part>,
    #[serde(default)]
    summary: Vec<Part>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct UsageJson {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl UsageJson {
    fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.input_tokens,
            completion_tokens: self.output_tokens,
            // a server that caches nothing says 0: absent, as for chat
            cached_tokens: self
                .input_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
                .filter(|c| *c > 0),
            // servers without a reasoning parser say 0: that is no count
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .filter(|r| *r > 0),
        }
    }
}

/// A terminal response object: its usage, or the reason it failed.
fn terminal<'a>(r: &Whole, timings: Option<Timings>) -> EventInfo<'a> {
    if r.status.as_deref() == Some("failed") || r.error.as_ref().is_some_and(|e| !e.is_null()) {
        let why = r
            .error
            .as_ref()
            .filter(|e| !e.is_null())
            .map_or_else(|| "the response failed".to_string(), error_text);
        return EventInfo::failed(why);
    }
    EventInfo {
        usage: r.usage.as_ref().map(UsageJson::usage),
        server: timings.and_then(Timings::server),
        finished: true,
        done: true,
        ..EventInfo::default()
    }
}

/// Interpret one streamed event (its `data:` payload).
pub(super) fn parse_event(data: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let e: Event<'_> = decode(data)?;
    if let Some(err) = e.error.as_ref().filter(|v| !v.is_null()) {
        return Ok(EventInfo::failed(error_text(err)));
    }
    let delta = e.delta.filter(|d| !d.is_empty());
    let mut info = EventInfo::default();
    match e.kind.as_deref() {
        Some("response.output_text.delta") => info.content = delta,
        // summaries are what OpenAI's own reasoning models stream
        Some("response.reasoning_text.delta" | "response.reasoning_summary_text.delta") => {
            info.reasoning = delta;
        }
        Some("response.function_call_arguments.delta") => {
            info.tool_calls = vec![ToolCallPiece {
                index: call_index(e.item_id.as_deref()),
                name: None,
                arguments: delta.clone(),
            }];
            info.tool_arguments = delta;
        }
        Some("response.output_item.added") => {
            if let Some(item) = e
                .item
                .filter(|i| i.kind.as_deref() == Some("function_call"))
            {
                info.tool_calls = vec![ToolCallPiece {
                    index: call_index(item.id.as_deref()),
                    name: item.name.filter(|n| !n.is_empty()),
                    arguments: None,
                }];
            }
        }
        Some("response.completed" | "response.incomplete" | "response.failed") => {
            let whole = e.response.unwrap_or_default();
            let status = if e.kind.as_deref() == Some("response.failed") {
                Some("failed".to_string())
            } else {
                whole.status.clone()
            };
            return Ok(terminal(&Whole { status, ..whole }, e.timings));
        }
        Some("error") => {
            let why = e
                .message
                .as_ref()
                .map_or_else(|| "error event".to_string(), error_text);
            return Ok(EventInfo::failed(why));
        }
        // created, in_progress, other items, content_part.*, *.done: no news
        _ => {}
    }
    Ok(info)
}

/// Interpret a whole non-streamed response: every output item's text.
pub(super) fn parse_full(body: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let e: Event<'_> = decode(body)?;
    if let Some(err) = e
        .error
        .as_ref()
        .filter(|v| !v.is_null() && e.kind.is_none())
    {
        // llama-server's and vLLM's error bodies: {"error": {...}}
        return Ok(EventInfo::failed(error_text(err)));
    }
    let r: Whole = serde_json::from_slice(body.trim_ascii())
        .map_err(|err| format!("not a Responses API response: {err}"))?;
    let mut info = terminal(&r, e.timings);
    if info.error.is_some() {
        return Ok(info);
    }
    let (mut content, mut reasoning, mut args) = (String::new(), String::new(), String::new());
    for item in &r.output {
        let texts = |parts: &[Part], out: &mut String| {
            for p in parts {
                out.push_str(p.text.as_deref().unwrap_or(""));
            }
        };
        match item.kind.as_str() {
            "message" => texts(&item.content, &mut content),
            "reasoning" => {
                texts(&item.content, &mut reasoning);
                texts(&item.summary, &mut reasoning);
            }
            "function_call" => {
                let arguments = item.arguments.as_deref().unwrap_or("");
                args.push_str(arguments);
                info.tool_calls.push(ToolCallPiece {
                    index: info.tool_calls.len() as u32,
                    name: item.name.clone().map(Cow::Owned),
                    arguments: Some(Cow::Owned(arguments.to_string())),
                });
            }
            _ => {}
        }
    }
    let some = |s: String| (!s.is_empty()).then_some(Cow::Owned(s));
    info.content = some(content);
    info.reasoning = some(reasoning);
    info.tool_arguments = some(args);
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_support::{body as body_of, codec};
    use cicada_request::{ChatMessage, ServerFamily, WireApi};

    #[test]
    fn body_sends_input_and_max_output_tokens() {
        let v = body_of(&codec(WireApi::Responses, ServerFamily::Openai, true));
        assert_eq!(v["input"], "hi there");
        assert_eq!(v["max_output_tokens"], 5);
        assert_eq!(v["stream"], true);
        assert_eq!(v["temperature"], 0.0);
        assert_eq!(v["ignore_eos"], true, "asked for, it is sent");
        assert_eq!(v["seed"], 3);
        assert!(v.get("min_tokens").is_none() && v.get("stream_options").is_none());
        let mut quiet = codec(WireApi::Responses, ServerFamily::Openai, false);
        quiet.sampling.ignore_eos = false;
        let chat = Ask {
            prompt: Prompt::Chat(vec![
                ChatMessage::new("system", "be brief"),
                ChatMessage::new("user", "hi"),
            ]),
            output_tokens: None,
            structured: None,
            media: Default::default(),
        };
        let v: Value = serde_json::from_slice(&quiet.body(&chat)).unwrap();
        assert_eq!(v["input"][0]["role"], "system");
        assert_eq!(v["input"][1]["content"], "hi");
        assert!(v.get("max_output_tokens").is_none() && v.get("stream").is_none());
        assert!(v.get("ignore_eos").is_none());
    }

    #[test]
    fn deltas_fill_their_own_fields() {
        let t = parse_event(br#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" the","logprobs":[]}"#).unwrap();
        assert_eq!(t.content.as_deref(), Some(" the"));
        assert!(!t.finished && t.reasoning.is_none());
        let r = parse_event(br#"{"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"hmm","sequence_number":2}"#).unwrap();
        assert_eq!(r.reasoning.as_deref(), Some("hmm"));
        assert!(r.content.is_none());
        let s = parse_event(br#"{"type":"response.reasoning_summary_text.delta","delta":"sum"}"#)
            .unwrap();
        assert_eq!(s.reasoning.as_deref(), Some("sum"));
        let f = parse_event(br#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":"{\"a\":"}"#).unwrap();
        assert_eq!(f.tool_arguments.as_deref(), Some("{\"a\":"));
        for quiet in [
            r#"{"type":"response.created","response":{"id":"r","status":"in_progress","output":[]}}"#,
            r#"{"type":"response.output_text.done","text":" the end"}"#,
            r#"{"type":"response.output_item.added","item":{"type":"message","content":[]}}"#,
            r#"{"type":"response.output_text.delta","delta":""}"#,
        ] {
            let e = parse_event(quiet.as_bytes()).unwrap();
            assert!(
                !e.generated() && !e.finished && e.error.is_none(),
                "{quiet}"
            );
        }
    }

    #[test]
    fn terminal_events_carry_usage_or_the_failure() {
        let done = br#"{"type":"response.completed","sequence_number":9,"response":{"id":"r","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":8},"output_tokens":24,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":36}}}"#;
        let e = parse_event(done).unwrap();
        assert!(e.finished && e.done && !e.generated());
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(24),
                cached_tokens: Some(8),
                reasoning_tokens: Some(5),
            })
        );
        let llama = br#"{"type":"response.completed","response":{"status":"completed","output":[],"usage":{"input_tokens":4,"output_tokens":2,"total_tokens":6,"input_tokens_details":{"cached_tokens":0}}},"timings":{"prompt_n":4,"prompt_ms":2.0,"predicted_n":2,"predicted_per_token_ms":1.5}}"#;
        let e = parse_event(llama).unwrap();
        assert_eq!(e.usage.unwrap().cached_tokens, None);
        assert_eq!(e.server.unwrap().per_token_us, Some(1500));
        let inc = parse_event(br#"{"type":"response.incomplete","response":{"status":"incomplete","usage":{"input_tokens":1,"output_tokens":3}}}"#).unwrap();
        assert!(inc.done && inc.error.is_none());
        let fail = parse_event(br#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}"#).unwrap();
        assert_eq!(fail.error.as_deref(), Some("boom"));
        let err = parse_event(
            br#"{"type":"error","code":"ERR_SOMETHING","message":"bad thing","param":null}"#,
        )
        .unwrap();
        assert_eq!(err.error.as_deref(), Some("bad thing"));
        let llama_err =
            parse_event(br#"{"error":{"code":500,"message":"oops","type":"server_error"}}"#)
                .unwrap();
        assert_eq!(llama_err.error.as_deref(), Some("oops"));
        assert!(parse_event(b"{\"type\":\"response.output_text.delta\",\"delta\":").is_err());
    }

    #[test]
    fn whole_responses_join_each_kind_of_output() {
        let b = br#"{"id":"r","object":"response","status":"completed","output":[{"id":"rs_1","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hello","annotations":[]},{"type":"output_text","text":" you"}]},{"type":"function_call","name":"f","arguments":"{}","call_id":"c"}],"usage":{"input_tokens":3,"output_tokens":7}}"#;
        let e = parse_full(b).unwrap();
        assert_eq!(e.content.as_deref(), Some("hello you"));
        assert_eq!(e.reasoning.as_deref(), Some("think"));
        assert_eq!(e.tool_arguments.as_deref(), Some("{}"));
        assert_eq!(e.usage.unwrap().completion_tokens, Some(7));
        assert!(e.done && e.finished);
        let err =
            parse_full(br#"{"error":{"message":"no model","type":"BadRequestError","code":400}}"#)
                .unwrap();
        assert_eq!(err.error.as_deref(), Some("no model"));
        assert!(parse_full(br#"{"output":"#).is_err());
    }

    fn shaped_ask(images: usize) -> Ask {
        use cicada_request::{Image, OutputShape, Structured};
        let shape = OutputShape::read(
            Some(&json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])),
            Some(&json!("required")),
            Some(&json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}})),
        )
        .unwrap();
        let mut ask = crate::backend::test_support::entry();
        ask.structured = Some(std::sync::Arc::new(Structured::new(shape).unwrap()));
        ask.media.images = (0..images)
            .map(|i| Image::Synthetic {
                width: 2,
                height: 2,
                seed: i as u64,
            })
            .collect();
        ask
    }

    /// Images make the input a message list with input_text and input_image
    /// parts; tools, tool choice and the format go in Responses' spelling.
    #[test]
    fn bodies_carry_images_tools_and_the_format() {
        let b = codec(WireApi::Responses, ServerFamily::Vllm, true);
        let v: Value = serde_json::from_slice(&b.body(&shaped_ask(2))).unwrap();
        let parts = v["input"][0]["content"].as_array().unwrap();
        assert_eq!(v["input"][0]["role"], "user");
        assert_eq!(parts[0], json!({"type": "input_text", "text": "hi there"}));
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[1]["type"], "input_image");
        assert!(
            parts[1]["image_url"]
                .as_str()
                .unwrap()
                .starts_with("data:image/png;base64,")
        );
        assert_eq!(
            v["tools"],
            json!([{"type": "function", "name": "f", "parameters": {"type": "object"}}])
        );
        assert_eq!(v["tool_choice"], "required");
        assert_eq!(v["text"]["format"]["type"], "json_schema");
        assert_eq!(v["text"]["format"]["schema"], json!({"type": "object"}));
        let v: Value = serde_json::from_slice(&b.body(&shaped_ask(0))).unwrap();
        assert_eq!(v["input"], "hi there", "no images: the text as it is");
    }

    /// A function call's pieces share its item id's index (llama-server's
    /// deltas have no output_index), the first naming the function.
    #[test]
    fn function_call_events_name_and_fill_the_call() {
        let added = parse_event(br#"{"type":"response.output_item.added","item":{"id":"fc_7","arguments":"","call_id":"call_7","name":"f","type":"function_call","status":"in_progress"}}"#).unwrap();
        assert!(!added.generated());
        assert_eq!(added.tool_calls.len(), 1);
        assert_eq!(added.tool_calls[0].name.as_deref(), Some("f"));
        let d = parse_event(br#"{"type":"response.function_call_arguments.delta","delta":"{\"a\"","item_id":"fc_7"}"#).unwrap();
        assert!(d.generated());
        assert_eq!(d.tool_calls[0].index, added.tool_calls[0].index);
        assert_eq!(d.tool_calls[0].arguments.as_deref(), Some("{\"a\""));
        let other = parse_event(br#"{"type":"response.function_call_arguments.delta","delta":"1","item_id":"fc_8","output_index":1}"#).unwrap();
        assert_ne!(other.tool_calls[0].index, d.tool_calls[0].index);
        let msg = parse_event(br#"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","content":[]}}"#).unwrap();
        assert!(msg.tool_calls.is_empty());
        let whole = parse_full(br#"{"status":"completed","output":[{"type":"function_call","name":"f","arguments":"{}"},{"type":"function_call","name":"g","arguments":"[1]"}]}"#).unwrap();
        let calls: Vec<_> = whole
            .tool_calls
            .iter()
            .map(|p| (p.index, p.name.as_deref(), p.arguments.as_deref()))
            .collect();
        assert_eq!(
            calls,
            [(0, Some("f"), Some("{}")), (1, Some("g"), Some("[1]"))]
        );
    }
}

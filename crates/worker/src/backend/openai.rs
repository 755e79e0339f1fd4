//! OpenAI completions and chat completions, with vLLM/SGLang extras.

use std::borrow::Cow;

use cicada_scenarios::dataset::{PoolEntry, Prompt};
use cicada_scenarios::plan::{Api, Flavor};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Backend, EventInfo, Usage};

pub(super) fn body(b: &Backend, entry: &PoolEntry) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    match b.api {
        Api::Completions => {
            m.insert("prompt".into(), Value::String(entry.prompt.text()));
            if let Some(n) = entry.output_tokens {
                m.insert("max_tokens".into(), json!(n));
            }
        }
        Api::Chat => {
            let messages = match &entry.prompt {
                Prompt::Text(t) => json!([{"role": "user", "content": t}]),
                Prompt::Chat(msgs) => json!(msgs),
            };
            m.insert("messages".into(), messages);
            if let Some(n) = entry.output_tokens {
                m.insert("max_completion_tokens".into(), json!(n));
            }
        }
    }
    if b.stream {
        m.insert("stream".into(), Value::Bool(true));
        let mut opts = json!({"include_usage": true});
        if matches!(b.flavor, Flavor::Vllm | Flavor::Mock) {
            // usage on every chunk gives exact tokens per event (ITL under spec decode)
            opts["continuous_usage_stats"] = Value::Bool(true);
        }
        m.insert("stream_options".into(), opts);
    }
    let s = &b.sampling;
    if let Some(t) = s.temperature {
        m.insert("temperature".into(), json!(t));
    }
    if let Some(p) = s.top_p {
        m.insert("top_p".into(), json!(p));
    }
    if let Some(k) = s.top_k {
        m.insert("top_k".into(), json!(k));
    }
    if b.flavor != Flavor::Openai {
        if s.ignore_eos {
            m.insert("ignore_eos".into(), Value::Bool(true));
        }
        if let Some(n) = s.min_tokens {
            m.insert("min_tokens".into(), json!(n));
        }
    }
    for (k, v) in &s.extra_body {
        m.insert(k.clone(), v.clone());
    }
    serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
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
}

#[derive(Deserialize)]
struct UsageJson {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

fn join<'a>(parts: [Option<Cow<'a, str>>; 3]) -> Option<Cow<'a, str>> {
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

fn error_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| v.to_string(), str::to_string),
        other => other.to_string(),
    }
}

fn interpret<'a>(api: Api, chunk: Chunk<'a>) -> EventInfo<'a> {
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
    if let Some(u) = chunk.usage {
        info.usage = Some(Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
        });
    }
    if let Some(choice) = chunk.choices.and_then(|c| c.into_iter().next()) {
        info.finished = choice.finish_reason.is_some();
        info.content = match api {
            Api::Completions => choice.text.filter(|t| !t.is_empty()),
            Api::Chat => choice
                .delta
                .or(choice.message)
                .and_then(|d| join([d.reasoning_content, d.reasoning, d.content])),
        };
    }
    info
}

/// Bytes of a bad payload (and of the parser's message about it) quoted in its error.
const SHOWN_BYTES: usize = 200;

/// At most `max` bytes of `s`, cut at a character boundary, marked when cut.
fn clip(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

pub(super) fn parse_event(api: Api, data: &[u8]) -> Result<EventInfo<'_>, String> {
    let trimmed = data.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(EventInfo {
            done: true,
            ..EventInfo::default()
        });
    }
    let chunk: Chunk<'_> = serde_json::from_slice(trimmed).map_err(|e| {
        let shown = String::from_utf8_lossy(&trimmed[..trimmed.len().min(SHOWN_BYTES)]);
        // serde quotes whole string values ("invalid type: string \"...\""): clip it too
        format!(
            "invalid event JSON ({}): {shown}",
            clip(&e.to_string(), SHOWN_BYTES)
        )
    })?;
    Ok(interpret(api, chunk))
}

pub(super) fn parse_full(api: Api, body: &[u8]) -> Result<EventInfo<'_>, String> {
    let mut info = parse_event(api, body)?;
    if info.error.is_none() {
        info.done = true;
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_scenarios::plan::ResolvedSampling;

    fn backend(api: Api, flavor: Flavor) -> Backend {
        Backend::new(
            api,
            flavor,
            "m".into(),
            ResolvedSampling {
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

    fn entry() -> PoolEntry {
        PoolEntry {
            id: 0,
            prompt: Prompt::Text("hi there".into()),
            input_tokens: 2,
            output_tokens: Some(5),
            conversation: None,
        }
    }

    #[test]
    fn errors_about_huge_payloads_stay_short() {
        // found by the openai_events fuzz target: serde quoted a whole string value
        let payload = format!("\"{}\"", "é".repeat(5000));
        let e = parse_event(Api::Chat, payload.as_bytes()).unwrap_err();
        assert!(e.len() < 3 * SHOWN_BYTES, "{} bytes", e.len());
        assert!(
            e.starts_with("invalid event JSON (invalid type: string"),
            "{e}"
        );
    }

    #[test]
    fn bodies_carry_limits_usage_and_extras() {
        let v: Value =
            serde_json::from_slice(&backend(Api::Chat, Flavor::Vllm).body(&entry())).unwrap();
        assert_eq!(v["messages"][0]["content"], "hi there");
        assert_eq!(v["max_completion_tokens"], 5);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["stream_options"]["continuous_usage_stats"], true);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["seed"], 3);
        let v: Value =
            serde_json::from_slice(&backend(Api::Completions, Flavor::Openai).body(&entry()))
                .unwrap();
        assert_eq!(v["prompt"], "hi there");
        assert_eq!(v["max_tokens"], 5);
        assert!(
            v.get("ignore_eos").is_none(),
            "plain OpenAI rejects unknown fields"
        );
        assert!(v["stream_options"].get("continuous_usage_stats").is_none());
    }

    #[test]
    fn role_only_and_usage_only_chunks_are_not_content() {
        let role = br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#;
        let e = parse_event(Api::Chat, role).unwrap();
        assert!(e.content.is_none());
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":2}}}"#;
        let e = parse_event(Api::Chat, usage).unwrap();
        assert!(e.content.is_none());
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: Some(3),
                completion_tokens: Some(9),
                cached_tokens: Some(2)
            })
        );
    }

    #[test]
    fn content_reasoning_finish_done_and_errors() {
        let c = br#"{"choices":[{"delta":{"content":"a\"b"},"finish_reason":"length"}]}"#;
        let e = parse_event(Api::Chat, c).unwrap();
        assert_eq!(e.content.as_deref(), Some("a\"b"));
        assert!(e.finished);
        let r = br#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#;
        assert_eq!(
            parse_event(Api::Chat, r).unwrap().content.as_deref(),
            Some("think")
        );
        let r = br#"{"choices":[{"delta":{"reasoning":"new"}}]}"#;
        assert_eq!(
            parse_event(Api::Chat, r).unwrap().content.as_deref(),
            Some("new")
        );
        let t = br#"{"choices":[{"text":" x","finish_reason":null}]}"#;
        assert_eq!(
            parse_event(Api::Completions, t).unwrap().content.as_deref(),
            Some(" x")
        );
        assert!(parse_event(Api::Chat, b" [DONE] ").unwrap().done);
        let err = br#"{"error":{"message":"boom","type":"InternalServerError","code":500}}"#;
        assert_eq!(
            parse_event(Api::Chat, err).unwrap().error.as_deref(),
            Some("boom")
        );
        let old = br#"{"object":"error","message":"old style","code":400}"#;
        assert_eq!(
            parse_event(Api::Chat, old).unwrap().error.as_deref(),
            Some("old style")
        );
        assert!(parse_event(Api::Chat, b"{\"choices\":[").is_err());
    }

    #[test]
    fn full_bodies() {
        let b = br#"{"choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let e = parse_full(Api::Chat, b).unwrap();
        assert_eq!(e.content.as_deref(), Some("hello"));
        assert!(e.done);
    }
}

//! HuggingFace TGI's native API: `{"inputs", "parameters"}` to
//! `/generate_stream`, one event per token (`index` counts them), the last
//! with `generated_text` and, as we ask, `details`; `/generate` when not
//! streaming. TGI has no `ignore_eos` or `min_tokens`: outputs may be shorter
//! than asked (counted in `short_outputs`).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{ApiCodec, Ask, DecodeError, EventInfo, Usage, decode, error_text, extra_body};

pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let s = &b.sampling;
    let mut p = Map::new();
    if let Some(n) = entry.output_tokens {
        p.insert("max_new_tokens".into(), json!(n));
    }
    // token counts and the finish reason come in `details`
    p.insert("details".into(), Value::Bool(true));
    // TGI rejects temperature 0 and top_p 1: greedy is do_sample = false
    match s.temperature {
        Some(t) if t > 0.0 => {
            p.insert("temperature".into(), json!(t));
            p.insert("do_sample".into(), Value::Bool(true));
        }
        Some(_) => {
            p.insert("do_sample".into(), Value::Bool(false));
        }
        None => {}
    }
    if let Some(top_p) = s.top_p.filter(|v| *v < 1.0) {
        p.insert("top_p".into(), json!(top_p));
    }
    if let Some(k) = s.top_k.filter(|k| *k > 0) {
        p.insert("top_k".into(), json!(k));
    }
    // extras are TGI generation parameters
    extra_body(&mut p, s);
    let mut m = Map::new();
    m.insert(
        "inputs".into(),
        Value::String(entry.prompt.text().into_owned()),
    );
    m.insert("parameters".into(), Value::Object(p));
    if b.stream {
        m.insert("stream".into(), Value::Bool(true));
    }
    m
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    token: Option<Token<'a>>,
    #[serde(default, borrow)]
    generated_text: Option<Cow<'a, str>>,
    #[serde(default)]
    details: Option<Details>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    error_type: Option<String>,
}

#[derive(Deserialize)]
struct Token<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    generated_tokens: Option<u64>,
    /// Newer TGI only.
    #[serde(default)]
    input_length: Option<u64>,
}

fn error_info<'a>(error: &Value, kind: Option<&str>) -> EventInfo<'a> {
    let text = error_text(error);
    EventInfo::failed(match kind {
        Some(k) => format!("{text} ({k})"),
        None => text,
    })
}

fn details_usage(d: &Details) -> Usage {
    Usage {
        prompt_tokens: d.input_length,
        completion_tokens: d.generated_tokens,
        cached_tokens: None,
        ..Usage::default()
    }
}

/// One token event. Special tokens (end of sequence) are not content.
pub(super) fn parse(data: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let e: Event<'_> = decode(data)?;
    if let Some(err) = &e.error {
        return Ok(error_info(err, e.error_type.as_deref()));
    }
    let mut info = EventInfo::default();
    if let Some(t) = e.token
        && !t.special
    {
        info.content = t.text.filter(|t| !t.is_empty());
    }
    // `index` counts generated tokens, so it is a running completion count
    info.usage = e.index.map(|i| Usage {
        completion_tokens: Some(i),
        ..Usage::default()
    });
    if let Some(d) = &e.details {
        info.usage = Some(details_usage(d));
        info.finished |= d.finish_reason.is_some();
    }
    info.finished |= e.generated_text.is_some();
    Ok(info)
}

/// `/generate`: `{"generated_text", "details"}` (older servers wrap it in an array).
pub(super) fn parse_full(body: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let trimmed = body.trim_ascii();
    let e: Event<'_> = if trimmed.first() == Some(&b'[') {
        let mut all: Vec<Event<'_>> = decode(trimmed)?;
        if all.is_empty() {
            return Err("an empty array instead of a generation".into());
        }
        all.swap_remove(0)
    } else {
        decode(trimmed)?
    };
    if let Some(err) = &e.error {
        return Ok(error_info(err, e.error_type.as_deref()));
    }
    let Some(text) = e.generated_text else {
        return Err("the response has no generated_text".into());
    };
    Ok(EventInfo {
        content: Some(text).filter(|t| !t.is_empty()),
        usage: e.details.as_ref().map(details_usage),
        finished: true,
        done: true,
        error: None,
        server: None,
        ..EventInfo::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_support::{body as body_of, codec};
    use cicada_request::{ServerFamily, WireApi};

    #[test]
    fn body_asks_for_details_and_greedy_without_temperature_zero() {
        let v = body_of(&codec(WireApi::Tgi, ServerFamily::Tgi, true));
        assert_eq!(v["inputs"], "hi there");
        assert_eq!(v["parameters"]["max_new_tokens"], 5);
        assert_eq!(v["parameters"]["details"], true);
        assert_eq!(v["parameters"]["do_sample"], false);
        assert!(v["parameters"].get("temperature").is_none());
        assert_eq!(v["parameters"]["seed"], 3);
        assert!(v.get("ignore_eos").is_none() && v["parameters"].get("ignore_eos").is_none());
        assert_eq!(v["stream"], true);
    }

    #[test]
    fn token_events_count_and_the_last_finishes() {
        let e = parse(br#"{"index":1,"token":{"id":349,"text":" am","logprob":-0.12,"special":false},"generated_text":null,"details":null}"#).unwrap();
        assert_eq!(e.content.as_deref(), Some(" am"));
        assert_eq!(e.usage.unwrap().completion_tokens, Some(1));
        assert!(!e.finished);
        let last = parse(br#"{"index":3,"token":{"id":13,"text":".","logprob":-0.02,"special":false},"generated_text":" am a.","details":{"finish_reason":"length","generated_tokens":3,"seed":42,"input_length":7}}"#).unwrap();
        assert!(last.finished);
        assert_eq!(
            last.usage,
            Some(Usage {
                prompt_tokens: Some(7),
                completion_tokens: Some(3),
                cached_tokens: None,
                ..Usage::default()
            })
        );
        let eos = parse(br#"{"index":4,"token":{"id":2,"text":"</s>","logprob":-0.01,"special":true},"generated_text":"x","details":null}"#).unwrap();
        assert!(eos.content.is_none() && eos.finished);
        // old servers: no index, no details
        let old = parse(br#"{"token":{"id":1,"text":"a","logprob":0.0,"special":false},"generated_text":null,"details":null}"#).unwrap();
        assert!(old.usage.is_none());
        let err = parse(
            br#"{"error":"Request failed during generation: boom","error_type":"generation"}"#,
        )
        .unwrap();
        assert_eq!(
            err.error.as_deref(),
            Some("Request failed during generation: boom (generation)")
        );
        assert!(parse(b"{\"index\":1,\"token\":{\"id\":").is_err());
    }

    #[test]
    fn whole_responses() {
        let e = parse_full(br#"{"generated_text":" a b","details":{"finish_reason":"length","generated_tokens":2,"seed":null,"prefill":[],"tokens":[]}}"#).unwrap();
        assert_eq!(e.content.as_deref(), Some(" a b"));
        assert_eq!(e.usage.unwrap().completion_tokens, Some(2));
        assert!(e.done);
        let arr = parse_full(br#"[{"generated_text":"x"}]"#).unwrap();
        assert_eq!(arr.content.as_deref(), Some("x"));
        assert!(parse_full(br#"{"details":null}"#).is_err());
        assert!(
            parse_full(br#"{"error":"bad","error_type":"validation"}"#)
                .unwrap()
                .error
                .is_some()
        );
    }
}

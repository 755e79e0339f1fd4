//! llama.cpp's native `/completion`: `n_predict` limits the output and
//! `ignore_eos` is understood; partial events carry `content` and (newer
//! builds) running `tokens_predicted`; the final event has `stop: true` and
//! `timings`. There is no `[DONE]`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::openai::Timings;
use super::{
    ApiCodec, Ask, DecodeError, EventInfo, Usage, common_sampling, decode, error_text, extra_body,
};

pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let s = &b.sampling;
    let mut m = Map::new();
    m.insert("prompt".into(), super::prompt_value(&entry.prompt));
    if let Some(n) = entry.output_tokens {
        m.insert("n_predict".into(), json!(n));
    }
    m.insert("stream".into(), Value::Bool(b.stream));
    common_sampling(&mut m, s);
    if s.ignore_eos {
        m.insert("ignore_eos".into(), Value::Bool(true));
    }
    extra_body(&mut m, s);
    m
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default)]
    stop: bool,
    #[serde(default)]
    tokens_predicted: Option<u64>,
    #[serde(default)]
    tokens_evaluated: Option<u64>,
    #[serde(default)]
    timings: Option<Timings>,
    #[serde(default)]
    error: Option<Value>,
}

fn interpret(e: Event<'_>) -> EventInfo<'_> {
    if let Some(err) = &e.error {
        return EventInfo::failed(error_text(err));
    }
    let timed = e.timings.map(Timings::usage).unwrap_or_default();
    let usage = Usage {
        prompt_tokens: e.tokens_evaluated.or(timed.prompt_tokens),
        completion_tokens: e.tokens_predicted.or(timed.completion_tokens),
        cached_tokens: timed.cached_tokens,
        ..Usage::default()
    };
    EventInfo {
        content: e.content.filter(|c| !c.is_empty()),
        usage: (usage != Usage::default()).then_some(usage),
        finished: e.stop,
        done: false,
        error: None,
        server: e.timings.and_then(Timings::server),
        ..EventInfo::default()
    }
}

/// One partial or final event.
pub(super) fn parse(data: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    Ok(interpret(decode(data)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_support::{body as body_of, codec};
    use cicada_request::{ServerFamily, WireApi};

    #[test]
    fn body_uses_n_predict_and_ignore_eos() {
        let v = body_of(&codec(WireApi::LlamaCpp, ServerFamily::LlamaCpp, true));
        assert_eq!(v["prompt"], "hi there");
        assert_eq!(v["n_predict"], 5);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream"], true);
        assert_eq!(v["temperature"], 0.0);
        assert!(v.get("min_tokens").is_none() && v.get("max_tokens").is_none());
    }

    #[test]
    fn partials_count_and_the_final_event_has_timings() {
        let p = parse(br#"{"index":0,"content":" First","tokens":[5629],"stop":false,"id_slot":0,"tokens_predicted":1,"tokens_evaluated":14}"#).unwrap();
        assert_eq!(p.content.as_deref(), Some(" First"));
        assert_eq!(p.usage.unwrap().completion_tokens, Some(1));
        assert!(!p.finished);
        let fin = parse(br#"{"index":0,"content":"","tokens":[],"id_slot":0,"stop":true,"model":"m","tokens_predicted":128,"tokens_evaluated":14,"stop_type":"limit","tokens_cached":141,"timings":{"cache_n":6,"prompt_n":8,"prompt_ms":21.4,"predicted_n":128,"predicted_ms":1510.7}}"#).unwrap();
        assert!(fin.finished && fin.content.is_none());
        assert_eq!(
            fin.usage,
            Some(Usage {
                prompt_tokens: Some(14),
                completion_tokens: Some(128),
                cached_tokens: Some(6),
                ..Usage::default()
            })
        );
        // older builds: counts only in timings
        let old = parse(br#"{"content":"","stop":true,"timings":{"prompt_n":3,"predicted_n":9}}"#)
            .unwrap();
        assert_eq!(old.usage.unwrap().completion_tokens, Some(9));
        assert_eq!(old.usage.unwrap().prompt_tokens, Some(3));
        let bare = parse(br#"{"content":" x","stop":false}"#).unwrap();
        assert!(bare.usage.is_none());
        let err =
            parse(br#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#).unwrap();
        assert_eq!(err.error.as_deref(), Some("boom"));
        assert!(parse(br#"{"index":0,"content":"#).is_err());
    }

    #[test]
    fn whole_response() {
        let e = codec(WireApi::LlamaCpp, ServerFamily::LlamaCpp, false)
            .parse_full(
                br#"{"content":" a b c","stop":true,"tokens_predicted":3,"tokens_evaluated":2}"#,
            )
            .unwrap();
        assert_eq!(e.content.as_deref(), Some(" a b c"));
        assert!(e.done && e.finished);
        assert_eq!(e.usage.unwrap().completion_tokens, Some(3));
    }
}

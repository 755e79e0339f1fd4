//! NVIDIA Triton's generate extension (`/v2/models/{model}/generate_stream`).
//!
//! The body suits both common model types: TensorRT-LLM's ensemble reads the
//! top-level tensors (`text_input`, `max_tokens`, `stream`, `min_length` for
//! `ignore_eos`), Triton's vLLM backend reads `sampling_parameters` (a JSON
//! string); each ignores the other's. Events carry the new text in
//! `text_output`, with no token count and no end marker: a stream that closes
//! cleanly has completed (a broken connection is `stream_truncated`).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    ApiCodec, Ask, DecodeError, EventInfo, common_sampling, decode, error_text, extra_body,
};

pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let s = &b.sampling;
    let mut m = Map::new();
    m.insert(
        "text_input".into(),
        Value::String(entry.prompt.text().into_owned()),
    );
    m.insert("stream".into(), Value::Bool(b.stream));
    // non-streamed output would otherwise start with the prompt
    m.insert("exclude_input_in_output".into(), Value::Bool(true));
    let mut vllm = Map::new();
    if let Some(n) = entry.output_tokens {
        m.insert("max_tokens".into(), json!(n));
        vllm.insert("max_tokens".into(), json!(n));
        if s.ignore_eos {
            // TensorRT-LLM's way to keep generating to the limit
            m.insert("min_length".into(), json!(n));
        }
    }
    common_sampling(&mut m, s);
    common_sampling(&mut vllm, s);
    if s.ignore_eos {
        vllm.insert("ignore_eos".into(), Value::Bool(true));
    }
    if let Some(n) = s.min_tokens {
        vllm.insert("min_tokens".into(), json!(n));
    }
    m.insert(
        "sampling_parameters".into(),
        Value::String(Value::Object(vllm).to_string()),
    );
    extra_body(&mut m, s);
    m
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    text_output: Option<Cow<'a, str>>,
    /// vLLM backend with `return_finish_reason`.
    #[serde(default)]
    finish_reason: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

fn interpret(e: Event<'_>) -> EventInfo<'_> {
    if let Some(err) = &e.error {
        return EventInfo::failed(error_text(err));
    }
    EventInfo {
        content: e.text_output.filter(|t| !t.is_empty()),
        finished: e
            .finish_reason
            .as_ref()
            .is_some_and(|f| !f.is_null() && f.as_str().is_none_or(|s| !s.is_empty())),
        ..EventInfo::default()
    }
}

/// One streamed response.
pub(super) fn parse(data: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    Ok(interpret(decode(data)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_support::{body as body_of, codec};
    use cicada_request::{ServerFamily, WireApi};

    #[test]
    fn body_serves_trt_llm_and_the_vllm_backend() {
        let v = body_of(&codec(WireApi::Triton, ServerFamily::Triton, true));
        assert_eq!(v["text_input"], "hi there");
        assert_eq!(v["max_tokens"], 5);
        assert_eq!(v["min_length"], 5);
        assert_eq!(v["stream"], true);
        assert_eq!(v["exclude_input_in_output"], true);
        let sp: Value = serde_json::from_str(v["sampling_parameters"].as_str().unwrap()).unwrap();
        assert_eq!(sp["max_tokens"], 5);
        assert_eq!(sp["ignore_eos"], true);
        assert_eq!(sp["min_tokens"], 5);
        assert_eq!(v["seed"], 3);
    }

    #[test]
    fn events_errors_and_whole_bodies() {
        let e = parse(br#"{"context_logits":0.0,"cum_log_probs":0.0,"model_name":"ensemble","model_version":"1","output_log_probs":[0.0,0.0],"sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":"To"}"#).unwrap();
        assert_eq!(e.content.as_deref(), Some("To"));
        assert!(!e.finished && e.usage.is_none());
        let f = parse(br#"{"text_output":"","finish_reason":"length"}"#).unwrap();
        assert!(f.finished && f.content.is_none());
        let err = parse(br#"{"error":"model crashed"}"#).unwrap();
        assert_eq!(err.error.as_deref(), Some("model crashed"));
        assert!(parse(br#"{"text_output":"#).is_err());
        let w = codec(WireApi::Triton, ServerFamily::Triton, false)
            .parse_full(br#"{"model_name":"m","model_version":"1","text_output":" a b"}"#)
            .unwrap();
        assert!(w.done);
        assert_eq!(w.content.as_deref(), Some(" a b"));
    }
}

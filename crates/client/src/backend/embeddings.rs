//! OpenAI embeddings (`/v1/embeddings`, vLLM's `openai-embeddings`; also
//! llama-server with `--embeddings`): the pool entry's batch of texts as
//! `input`, `[pooling]`'s `encoding_format` and `dimensions` through the
//! resolved extra body. The answer is whole: `data[]` (one vector per
//! input) and `usage.prompt_tokens`; nothing is generated.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ApiCodec, Ask, DecodeError, EventInfo, Usage, decode, error_text, extra_body};

/// The request: the model and the texts (a one-text prompt is a list of one).
pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    let input = match &entry.prompt {
        cicada_request::Prompt::Batch(texts) => texts.clone(),
        other => vec![other.text().into_owned()],
    };
    m.insert(
        "input".into(),
        Value::Array(input.into_iter().map(Value::String).collect()),
    );
    extra_body(&mut m, &b.sampling);
    m
}

/// A whole embeddings answer (only what is read of it).
#[derive(Deserialize)]
struct Whole {
    #[serde(default)]
    data: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    usage: Option<PoolUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// A pooling answer's usage: input tokens only.
#[derive(Deserialize)]
struct PoolUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
}

/// A whole answer: how many vectors came back, and the server's count of
/// input tokens (no output tokens: 0 are generated).
pub(super) fn parse_full(body: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let w: Whole = decode(body)?;
    if let Some(e) = w.error {
        return Ok(EventInfo::failed(error_text(&e)));
    }
    let Some(data) = w.data else {
        return Err("the answer has no `data` list".into());
    };
    Ok(pooled(data.len(), w.usage.and_then(|u| u.prompt_tokens)))
}

/// Every pooling family's finished answer: `items` vectors or scores came
/// back, the server counted `prompt_tokens` (if it says), 0 were generated.
pub(super) fn pooled(items: usize, prompt_tokens: Option<u64>) -> EventInfo<'static> {
    EventInfo {
        pooled: Some(u32::try_from(items).unwrap_or(u32::MAX)),
        usage: Some(Usage {
            prompt_tokens,
            completion_tokens: Some(0),
            cached_tokens: None,
            reasoning_tokens: None,
        }),
        finished: true,
        ..EventInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use cicada_request::{Prompt, ServerFamily, WireApi};

    use super::*;
    use crate::backend::test_support::{codec, pooling_ask};

    /// The batch goes out as `input`, with the extra fields; no sampling.
    #[test]
    fn the_batch_is_the_input_list() {
        let b = codec(WireApi::Embeddings, ServerFamily::Openai, false);
        let ask = pooling_ask(Prompt::Batch(vec!["a b".into(), "c".into()]));
        let v: Value = serde_json::from_slice(&b.body(&ask)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "input": ["a b", "c"], "seed": 3})
        );
    }

    /// Vectors are counted, usage read, an error kept, a shapeless answer refused.
    #[test]
    fn answers_are_counted_not_generated() {
        let b = codec(WireApi::Embeddings, ServerFamily::Openai, false);
        let e = b
            .parse_full(br#"{"object":"list","data":[{"embedding":[0.1]},{"embedding":"AAAA"}],"usage":{"prompt_tokens":7,"total_tokens":7}}"#)
            .unwrap();
        assert_eq!(e.pooled, Some(2));
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(7));
        assert_eq!(e.usage.unwrap().completion_tokens, Some(0));
        assert!(e.done && e.generated());
        let e = b.parse_full(br#"{"error":{"message":"no"}}"#).unwrap();
        assert_eq!(e.error.as_deref(), Some("no"));
        assert!(b.parse_full(br#"{"object":"list"}"#).is_err());
    }
}

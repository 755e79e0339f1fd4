//! Rerank (`/v1/rerank` and `/rerank`, vLLM's `vllm-rerank`; llama-server
//! with `--reranking` serves the same shape): the pool entry's query and
//! documents, `sampling.extra_body` for `top_n` and the like. The answer is
//! whole: `results[]` (one score per document kept) and the server's token
//! count in `usage` (`prompt_tokens` where given, else `total_tokens`).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ApiCodec, Ask, DecodeError, EventInfo, decode, error_text, extra_body};

/// The query and documents of a pool entry: a rerank prompt's own, or any
/// other prompt's text as the query of no documents (refused by a server).
pub(super) fn query_and_documents(entry: &Ask) -> (String, Vec<String>) {
    match &entry.prompt {
        cicada_request::Prompt::Rerank { query, documents } => (query.clone(), documents.clone()),
        other => (other.text().into_owned(), Vec::new()),
    }
}

/// The request: the model, the query and the documents.
pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let (query, documents) = query_and_documents(entry);
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    m.insert("query".into(), Value::String(query));
    m.insert(
        "documents".into(),
        Value::Array(documents.into_iter().map(Value::String).collect()),
    );
    extra_body(&mut m, &b.sampling);
    m
}

/// A whole rerank answer (only what is read of it).
#[derive(Deserialize)]
struct Whole {
    #[serde(default)]
    results: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    usage: Option<RerankUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// A rerank answer's usage: vLLM gives `total_tokens` (all input),
/// llama-server `prompt_tokens` too.
#[derive(Deserialize)]
struct RerankUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
}

/// A whole answer: how many scores came back, and the server's count of
/// input tokens (no output tokens: 0 are generated).
pub(super) fn parse_full(body: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    let w: Whole = decode(body)?;
    if let Some(e) = w.error {
        return Ok(EventInfo::failed(error_text(&e)));
    }
    let Some(results) = w.results else {
        return Err("the answer has no `results` list".into());
    };
    Ok(super::embeddings::pooled(
        results.len(),
        w.usage.and_then(|u| u.prompt_tokens.or(u.total_tokens)),
    ))
}

#[cfg(test)]
mod tests {
    use cicada_request::{Prompt, ServerFamily, WireApi};

    use super::*;
    use crate::backend::test_support::{codec, pooling_ask};

    fn ask() -> Ask {
        pooling_ask(Prompt::Rerank {
            query: "q w".into(),
            documents: vec!["a b".into(), "c".into()],
        })
    }

    /// The query and documents go out as they are, with the extra fields.
    #[test]
    fn the_query_and_documents_are_sent() {
        let b = codec(WireApi::Rerank, ServerFamily::Vllm, false);
        let v: Value = serde_json::from_slice(&b.body(&ask())).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "query": "q w", "documents": ["a b", "c"], "seed": 3})
        );
    }

    /// Scores are counted, either usage spelling read, an error kept, a
    /// shapeless answer refused.
    #[test]
    fn answers_are_counted_not_generated() {
        let b = codec(WireApi::Rerank, ServerFamily::Vllm, false);
        let e = b
            .parse_full(br#"{"id":"r","results":[{"index":1,"relevance_score":0.5,"document":{"text":"c"}},{"index":0,"relevance_score":0.1}],"usage":{"total_tokens":9}}"#)
            .unwrap();
        assert_eq!(e.pooled, Some(2));
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(9));
        assert!(e.done && e.generated());
        let e = b
            .parse_full(br#"{"results":[],"usage":{"prompt_tokens":4,"total_tokens":5}}"#)
            .unwrap();
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(4));
        let e = b.parse_full(br#"{"error":{"message":"no"}}"#).unwrap();
        assert_eq!(e.error.as_deref(), Some("no"));
        assert!(b.parse_full(br#"{"object":"list"}"#).is_err());
    }
}

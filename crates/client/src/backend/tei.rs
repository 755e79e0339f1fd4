//! HuggingFace text-embeddings-inference (TEI): `/embed` takes a batch of
//! texts as `inputs` and answers a bare array of vectors; `/rerank` takes a
//! query and `texts` and answers a bare array of `{index, score}`.
//! `sampling.extra_body` carries `truncate`, `normalize`, `raw_scores` and
//! the like. Neither answer has usage: input tokens are the client's count.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ApiCodec, Ask, DecodeError, EventInfo, decode, error_text, extra_body};

/// An `/embed` request: the texts as `inputs` (a one-text prompt is a list of one).
pub(super) fn embed_body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let inputs = match &entry.prompt {
        cicada_request::Prompt::Batch(texts) => texts.clone(),
        other => vec![other.text().into_owned()],
    };
    let mut m = Map::new();
    m.insert(
        "inputs".into(),
        Value::Array(inputs.into_iter().map(Value::String).collect()),
    );
    extra_body(&mut m, &b.sampling);
    m
}

/// A `/rerank` request: the query and the documents as `texts`.
pub(super) fn rerank_body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let (query, documents) = super::rerank::query_and_documents(entry);
    let mut m = Map::new();
    m.insert("query".into(), Value::String(query));
    m.insert(
        "texts".into(),
        Value::Array(documents.into_iter().map(Value::String).collect()),
    );
    extra_body(&mut m, &b.sampling);
    m
}

/// A TEI answer: the bare array of results, or an error object.
#[derive(Deserialize)]
#[serde(untagged)]
enum Answer {
    Results(Vec<serde::de::IgnoredAny>),
    Error { error: Value },
}

/// A whole answer: how many vectors or scores came back; no token count
/// (the server gives none), 0 output tokens.
pub(super) fn parse_full(body: &[u8]) -> Result<EventInfo<'_>, DecodeError> {
    match decode::<Answer>(body) {
        Ok(Answer::Error { error }) => Ok(EventInfo::failed(error_text(&error))),
        Ok(Answer::Results(results)) => Ok(super::embeddings::pooled(results.len(), None)),
        Err(_) => Err(DecodeError(format!(
            "the answer is neither a list of results nor an error: {}",
            super::clip(&String::from_utf8_lossy(body), super::SHOWN_BYTES)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use cicada_request::{Prompt, ServerFamily, WireApi};

    use super::*;
    use crate::backend::test_support::{codec, pooling_ask as ask};

    /// `/embed` sends `inputs`, `/rerank` the query and `texts`; no model.
    #[test]
    fn bodies_are_tei_shaped() {
        let b = codec(WireApi::TeiEmbed, ServerFamily::Tgi, false);
        let v: Value =
            serde_json::from_slice(&b.body(&ask(Prompt::Batch(vec!["a b".into(), "c".into()]))))
                .unwrap();
        assert_eq!(v, serde_json::json!({"inputs": ["a b", "c"], "seed": 3}));
        let b = codec(WireApi::TeiRerank, ServerFamily::Tgi, false);
        let v: Value = serde_json::from_slice(&b.body(&ask(Prompt::Rerank {
            query: "q".into(),
            documents: vec!["d".into()],
        })))
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"query": "q", "texts": ["d"], "seed": 3})
        );
    }

    /// Vectors and scores are counted, no usage read, an error kept, another shape refused.
    #[test]
    fn answers_are_counted_without_usage() {
        let b = codec(WireApi::TeiEmbed, ServerFamily::Tgi, false);
        let e = b.parse_full(b"[[0.1,0.2],[0.3,0.4],[0.5,0.6]]").unwrap();
        assert_eq!(e.pooled, Some(3));
        assert_eq!(e.usage.unwrap().prompt_tokens, None);
        assert!(e.done && e.generated());
        let b = codec(WireApi::TeiRerank, ServerFamily::Tgi, false);
        let e = b
            .parse_full(br#"[{"index":1,"score":0.9},{"index":0,"score":0.1}]"#)
            .unwrap();
        assert_eq!(e.pooled, Some(2));
        let e = b
            .parse_full(br#"{"error":"too long","error_type":"Validation"}"#)
            .unwrap();
        assert_eq!(e.error.as_deref(), Some("too long"));
        let err = b.parse_full(br#"{"results":[]}"#).unwrap_err();
        assert!(err.0.contains("neither"), "{err}");
    }
}

//! vLLM's score API (`/score` and `/v1/score`, `vllm-score`): the pool
//! entry's query as `text_1` and its documents as `text_2`,
//! `sampling.extra_body` for the rest. The answer is whole and read as
//! embeddings' (`data[]`, one score per document, and `usage.prompt_tokens`).

use serde_json::{Map, Value};

use super::rerank::query_and_documents;
use super::{ApiCodec, Ask, extra_body};

/// The request: the model, the query (`text_1`) and the documents (`text_2`).
pub(super) fn body(b: &ApiCodec, entry: &Ask) -> Map<String, Value> {
    let (query, documents) = query_and_documents(entry);
    let mut m = Map::new();
    m.insert("model".into(), Value::String(b.model.clone()));
    m.insert("text_1".into(), Value::String(query));
    m.insert(
        "text_2".into(),
        Value::Array(documents.into_iter().map(Value::String).collect()),
    );
    extra_body(&mut m, &b.sampling);
    m
}

#[cfg(test)]
mod tests {
    use cicada_request::{Prompt, ServerFamily, WireApi};

    use super::*;
    use crate::backend::test_support::{codec, pooling_ask as ask};

    /// The query is `text_1`, the documents `text_2`, with the extra fields.
    #[test]
    fn the_query_and_documents_are_text_1_and_text_2() {
        let b = codec(WireApi::Score, ServerFamily::Vllm, false);
        let p = Prompt::Rerank {
            query: "q w".into(),
            documents: vec!["a b".into(), "c".into()],
        };
        let v: Value = serde_json::from_slice(&b.body(&ask(p))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "text_1": "q w", "text_2": ["a b", "c"], "seed": 3})
        );
    }

    /// vLLM's answer: one score per document counted, its usage read, an
    /// error kept, a shapeless answer refused.
    #[test]
    fn scores_are_counted_not_generated() {
        let b = codec(WireApi::Score, ServerFamily::Vllm, false);
        let e = b
            .parse_full(br#"{"id":"embd-1","object":"list","created":1,"model":"tiny","data":[{"index":0,"object":"score","score":0.5},{"index":1,"object":"score","score":0.25},{"index":2,"object":"score","score":0.1}],"usage":{"prompt_tokens":12,"total_tokens":12,"completion_tokens":0}}"#)
            .unwrap();
        assert_eq!(e.pooled, Some(3));
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(12));
        assert!(e.done && e.generated());
        let e = b.parse_full(br#"{"error":{"message":"no"}}"#).unwrap();
        assert_eq!(e.error.as_deref(), Some("no"));
        assert!(b.parse_full(br#"{"results":[]}"#).is_err());
    }

    /// vLLM's pooling answer: one `data` entry per input, the body sent as
    /// embeddings' (`input`, a one-text prompt a list of one).
    #[test]
    fn pooling_sends_inputs_and_counts_outputs() {
        let b = codec(WireApi::Pooling, ServerFamily::Vllm, false);
        let v: Value =
            serde_json::from_slice(&b.body(&ask(Prompt::Batch(vec!["a".into(), "b c".into()]))))
                .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "input": ["a", "b c"], "seed": 3})
        );
        let e = b
            .parse_full(br#"{"id":"pool-1","object":"list","model":"tiny","data":[{"index":0,"object":"pooling","data":[0.1,0.2]},{"index":1,"object":"pooling","data":"AAAA"}],"usage":{"prompt_tokens":5,"total_tokens":5}}"#)
            .unwrap();
        assert_eq!(e.pooled, Some(2));
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(5));
    }
}

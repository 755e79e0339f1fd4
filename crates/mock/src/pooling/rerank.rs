//! Rerank requests: vLLM's and llama-server's `/v1/rerank` and `/rerank`
//! (`{query, documents, top_n?}`, answered with `results` and `usage`) and
//! TEI's `/rerank` (`{query, texts}`, answered with a bare `[{index,
//! score}]`; a body with `texts` is taken as TEI's, as llama-server does).
//! vLLM's `/score` and `/v1/score` (`{text_1, text_2}`, the query and the
//! documents, answered with `data: [{index, score}]` in document order and
//! `usage`). Every document is counted; its tokens are the query's beside
//! its own, as a cross-encoder reads the pair.

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{account, finish, read};
use crate::reply::{ResponseBody, Shared, error_json};
use crate::request::{count_words, fingerprint};

/// A rerank request as the mock reads it, in either spelling.
#[derive(Deserialize)]
struct RerankRequest {
    query: String,
    /// vLLM's and llama-server's documents.
    #[serde(default)]
    documents: Option<Vec<String>>,
    /// TEI's documents.
    #[serde(default)]
    texts: Option<Vec<String>>,
    /// Keep only the best `top_n` scores (vLLM's and llama-server's field).
    #[serde(default)]
    top_n: Option<usize>,
    /// The model (or LoRA adapter) the request names.
    #[serde(default)]
    model: Option<String>,
}

/// A vLLM score request as the mock reads it: one query, one document or many.
#[derive(Deserialize)]
struct ScoreRequest {
    text_1: String,
    text_2: Documents,
    /// The model (or LoRA adapter) the request names.
    #[serde(default)]
    model: Option<String>,
}

/// `text_2`: a document or a list of documents.
#[derive(Deserialize)]
#[serde(untagged)]
enum Documents {
    One(String),
    Many(Vec<String>),
}

/// Serve one vLLM score request: a score per document, in their order.
pub(crate) async fn score(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    path: String,
) -> Response<ResponseBody> {
    let (arrived, parsed) = match read::<ScoreRequest>(req, path).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let documents = match parsed.text_2 {
        Documents::One(d) => vec![d],
        Documents::Many(v) => v,
    };
    if documents.is_empty() {
        return error_json(StatusCode::BAD_REQUEST, "text_2 is empty");
    }
    let prompt_tokens = pair_tokens(&parsed.text_1, &documents);
    let arrival = arrived.arrival;
    let model = parsed.model.clone();
    account(&shared, (&documents, parsed.model), prompt_tokens, arrived);
    tokio::time::sleep_until(arrival + crate::handler::ms(shared.config.ttft_ms)).await;
    let data: Vec<Value> = scored(&parsed.text_1, &documents)
        .into_iter()
        .map(|(index, score)| json!({"index": index, "object": "score", "score": score}))
        .collect();
    let answer = json!({
        "id": format!("score-{}", fingerprint(&parsed.text_1)),
        "object": "list",
        "created": crate::handler::unix_secs(),
        "model": model.unwrap_or_else(|| shared.config.model.clone()),
        "data": data,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens, "completion_tokens": 0},
    });
    finish(&shared, answer)
}

/// The tokens of every (query, document) pair.
fn pair_tokens(query: &str, documents: &[String]) -> u32 {
    let query_tokens = count_words(query);
    documents
        .iter()
        .map(|d| query_tokens + count_words(d))
        .sum()
}

/// Serve one rerank request.
pub(crate) async fn rerank(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    path: String,
) -> Response<ResponseBody> {
    let (arrived, parsed) = match read::<RerankRequest>(req, path).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let (documents, tei) = match (parsed.documents, parsed.texts) {
        (Some(d), None) => (d, false),
        (None, Some(t)) => (t, true),
        _ => {
            return error_json(
                StatusCode::BAD_REQUEST,
                "give either \"documents\" or \"texts\" (TEI's)",
            );
        }
    };
    if documents.is_empty() {
        return error_json(StatusCode::BAD_REQUEST, "no documents to rank");
    }
    let prompt_tokens = pair_tokens(&parsed.query, &documents);
    let arrival = arrived.arrival;
    let model = parsed.model.clone();
    account(&shared, (&documents, parsed.model), prompt_tokens, arrived);
    tokio::time::sleep_until(arrival + crate::handler::ms(shared.config.ttft_ms)).await;
    let ranked = ranked(&parsed.query, &documents, parsed.top_n);
    let answer = if tei {
        Value::Array(
            ranked
                .iter()
                .map(|&(index, score)| json!({"index": index, "score": score}))
                .collect(),
        )
    } else {
        let results: Vec<Value> = ranked
            .iter()
            .map(|&(index, score)| {
                json!({"index": index, "document": {"text": documents[index]}, "relevance_score": score})
            })
            .collect();
        json!({
            "id": format!("rerank-{}", fingerprint(&parsed.query)),
            "model": model.unwrap_or_else(|| shared.config.model.clone()),
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            "results": results,
        })
    };
    finish(&shared, answer)
}

/// Each document's index and score (drawn from the pair's fingerprint, in
/// `[0, 1)`), in the documents' order.
fn scored(query: &str, documents: &[String]) -> Vec<(usize, f64)> {
    documents
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let f = fingerprint(&format!("{query}\n{d}"));
            (i, (f >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// Each document's index and score, best first, the best `top_n` kept.
fn ranked(query: &str, documents: &[String], top_n: Option<usize>) -> Vec<(usize, f64)> {
    let mut scored = scored(query, documents);
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(top_n.unwrap_or(usize::MAX));
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores are in range, best first, the same for the same pair, cut at `top_n`.
    #[test]
    fn documents_are_ranked_best_first() {
        let docs: Vec<String> = (0..6).map(|i| format!("doc {i}")).collect();
        let r = ranked("q", &docs, None);
        assert_eq!(r.len(), 6);
        assert!(r.windows(2).all(|w| w[0].1 >= w[1].1));
        assert!(r.iter().all(|&(_, s)| (0.0..1.0).contains(&s)));
        assert_eq!(r, ranked("q", &docs, None));
        assert_ne!(r, ranked("another", &docs, None));
        assert_eq!(ranked("q", &docs, Some(2)), r[..2]);
    }
}

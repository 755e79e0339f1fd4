//! Pooling requests: OpenAI `/v1/embeddings` (vLLM's and llama-server's
//! shape), vLLM's `/pooling` (the same request, each vector under `data`),
//! TEI's `/embed`, and rerank and vLLM's `/score` (`rerank.rs`). Each input (text or
//! document) is counted (the ground truth a client's item count is checked
//! against) and answered after `mock.ttft_ms`: one vector per input, as
//! `float` lists or `base64` little-endian `f32`s, or one score per document.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use base64::Engine as _;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::handler::PROBE_HEADER;
use crate::reply::{ResponseBody, Shared, error_json};
use crate::request::{count_words, fingerprint};
use crate::stats::LoggedRequest;

mod rerank;

use rerank::{rerank, score};

/// The pooling routes, by how their path ends.
#[derive(Clone, Copy)]
pub(crate) enum Route {
    /// OpenAI's `/v1/embeddings` (vLLM's, llama-server's).
    Embeddings,
    /// vLLM's and llama-server's `/rerank` and `/v1/rerank`, TEI's `/rerank`.
    Rerank,
    /// vLLM's pooling API, `/pooling`.
    Pooling,
    /// vLLM's score API, `/score` and `/v1/score`.
    Score,
    /// TEI's embeddings, `/embed`.
    TeiEmbed,
}

impl Route {
    /// The pooling route `path` is, if it is one.
    pub(crate) fn of(path: &str) -> Option<Route> {
        [
            ("/embeddings", Route::Embeddings),
            ("/rerank", Route::Rerank),
            ("/pooling", Route::Pooling),
            ("/score", Route::Score),
            ("/embed", Route::TeiEmbed),
        ]
        .into_iter()
        .find(|(end, _)| path.ends_with(end))
        .map(|(_, r)| r)
    }
}

/// Serve one request on a pooling route (see [`Route::of`]).
pub(crate) async fn serve(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    path: String,
) -> Response<ResponseBody> {
    match Route::of(&path) {
        Some(Route::Embeddings) => vectors(shared, req, path, Vectors::Embeddings).await,
        Some(Route::Pooling) => vectors(shared, req, path, Vectors::Pooling).await,
        Some(Route::Rerank) => rerank(shared, req, path).await,
        Some(Route::Score) => score(shared, req, path).await,
        Some(Route::TeiEmbed) => tei_embed(shared, req, path).await,
        None => error_json(StatusCode::NOT_FOUND, "not a pooling route"),
    }
}

/// Vector length when the request does not ask for `dimensions`.
const DEFAULT_DIMENSIONS: u32 = 16;

/// Most `dimensions` the mock answers with (a bound on its own memory).
const MAX_DIMENSIONS: u32 = 65_536;

/// An embeddings request as the mock reads it.
#[derive(Deserialize)]
struct EmbeddingsRequest {
    /// One text, or a list of texts.
    input: Input,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<u32>,
    /// The model (or LoRA adapter) the request names.
    #[serde(default)]
    model: Option<String>,
}

/// `input`: a string or a list of strings.
#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    One(String),
    Many(Vec<String>),
}

/// What every pooling request starts with: when it arrived, whether it is
/// a readiness probe, its request id, its route.
pub(super) struct Arrived {
    pub arrival: Instant,
    pub probe: bool,
    pub request_id: Option<String>,
    pub path: String,
}

/// Read a pooling request's body as `T`, or the 400 answer saying why not.
pub(super) async fn read<T: serde::de::DeserializeOwned>(
    req: Request<Incoming>,
    path: String,
) -> Result<(Arrived, T), Response<ResponseBody>> {
    let arrival = Instant::now();
    let probe = req.headers().contains_key(PROBE_HEADER);
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Err(error_json(
                StatusCode::BAD_REQUEST,
                &format!("cannot read body: {e}"),
            ));
        }
    };
    match serde_json::from_slice(&body) {
        Ok(r) => Ok((
            Arrived {
                arrival,
                probe,
                request_id,
                path,
            },
            r,
        )),
        Err(e) => Err(error_json(
            StatusCode::BAD_REQUEST,
            &format!("invalid JSON: {e}"),
        )),
    }
}

/// Which answer a vector request gets: OpenAI's embeddings, or vLLM's
/// pooling (the same request, each output under `data`).
#[derive(Clone, Copy)]
enum Vectors {
    Embeddings,
    Pooling,
}

impl Vectors {
    /// The answer's id prefix, each entry's `object` and the key of its vector.
    fn spelling(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Vectors::Embeddings => ("embd", "embedding", "embedding"),
            Vectors::Pooling => ("pooling", "pooling", "data"),
        }
    }
}

/// Serve one request for vectors of `input` texts, answered as `kind` says.
async fn vectors(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    path: String,
    kind: Vectors,
) -> Response<ResponseBody> {
    let (arrived, parsed) = match read::<EmbeddingsRequest>(req, path).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let inputs = parsed.input.into_list();
    if inputs.is_empty() {
        return error_json(StatusCode::BAD_REQUEST, "input is empty");
    }
    let dimensions = parsed.dimensions.unwrap_or(DEFAULT_DIMENSIONS);
    if dimensions == 0 || dimensions > MAX_DIMENSIONS {
        return error_json(
            StatusCode::BAD_REQUEST,
            &format!("dimensions must be within 1..={MAX_DIMENSIONS}"),
        );
    }
    let base64 = match parsed.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return error_json(
                StatusCode::BAD_REQUEST,
                &format!("encoding_format {other:?} is neither \"float\" nor \"base64\""),
            );
        }
    };
    let prompt_tokens: u32 = inputs.iter().map(|t| count_words(t)).sum();
    let arrival = arrived.arrival;
    account(&shared, (&inputs, parsed.model), prompt_tokens, arrived);
    tokio::time::sleep_until(arrival + crate::handler::ms(shared.config.ttft_ms)).await;
    let (prefix, object, key) = kind.spelling();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let v = vector(text, dimensions);
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": object, "index": i, key: embedding})
        })
        .collect();
    let answer = json!({
        "id": format!("{prefix}-{}", fingerprint(&inputs.join("\n"))),
        "object": "list",
        "created": crate::handler::unix_secs(),
        "model": shared.config.model,
        "data": data,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    });
    finish(&shared, answer)
}

/// An embeddings `input` or TEI `inputs`: a string or a list of strings.
impl Input {
    fn into_list(self) -> Vec<String> {
        match self {
            Input::One(t) => vec![t],
            Input::Many(v) => v,
        }
    }
}

/// A TEI `/embed` request as the mock reads it (`truncate`, `normalize`
/// and the like are accepted and make no difference).
#[derive(Deserialize)]
struct TeiEmbedRequest {
    inputs: Input,
}

/// Serve one TEI `/embed` request: a bare array of vectors, no usage.
async fn tei_embed(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    path: String,
) -> Response<ResponseBody> {
    let (arrived, parsed) = match read::<TeiEmbedRequest>(req, path).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let inputs = parsed.inputs.into_list();
    if inputs.is_empty() {
        return error_json(StatusCode::BAD_REQUEST, "inputs is empty");
    }
    let prompt_tokens: u32 = inputs.iter().map(|t| count_words(t)).sum();
    let arrival = arrived.arrival;
    account(&shared, (&inputs, None), prompt_tokens, arrived);
    tokio::time::sleep_until(arrival + crate::handler::ms(shared.config.ttft_ms)).await;
    let vectors: Vec<Vec<f32>> = inputs
        .iter()
        .map(|t| vector(t, DEFAULT_DIMENSIONS))
        .collect();
    finish(&shared, json!(vectors))
}

/// Count a pooling request as completed (vLLM counts a finished pooling
/// request as a success with reason "stop") and answer `answer`.
pub(super) fn finish(shared: &Shared, answer: Value) -> Response<ResponseBody> {
    let state = &shared.state;
    state.completed.fetch_add(1, Ordering::Relaxed);
    state.server.finished_stop.fetch_add(1, Ordering::Relaxed);
    crate::reply::json(StatusCode::OK, answer.to_string())
}

/// Count the request: in `/metrics` always, in the ground truth (requests,
/// inputs, prompt tokens, the log) unless it is a readiness probe.
pub(super) fn account(
    shared: &Shared,
    (inputs, model): (&[String], Option<String>),
    prompt_tokens: u32,
    arrived: Arrived,
) {
    let Arrived {
        arrival,
        probe,
        request_id,
        path,
    } = arrived;
    let state = &shared.state;
    state
        .server
        .all
        .prompt_tokens
        .fetch_add(u64::from(prompt_tokens), Ordering::Relaxed);
    if probe {
        state.probes.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let seq = state.requests.fetch_add(1, Ordering::Relaxed);
    let run = &state.run;
    run.inputs.fetch_add(inputs.len() as u64, Ordering::Relaxed);
    if let Some(m) = &model {
        run.named(m);
    }
    run.prompt_tokens
        .fetch_add(u64::from(prompt_tokens), Ordering::Relaxed);
    let text = inputs.join("\n");
    state.log_request(LoggedRequest {
        seq,
        offset_us: arrival.duration_since(shared.started).as_micros() as u64,
        unix_us: crate::handler::unix_micros(),
        path,
        prompt_fingerprint: fingerprint(&text),
        prompt_tokens,
        max_tokens: None,
        stream: false,
        fault: None,
        request_id,
        session: None,
        messages: Vec::new(),
        output_tokens: 0,
        output_fingerprint: 0,
        cached_tokens: None,
        invalid_output: false,
        images: 0,
        audio_bytes: None,
        inputs: Some(u32::try_from(inputs.len()).unwrap_or(u32::MAX)),
        model,
        token_ids: false,
    });
}

/// A unit-length vector drawn from the text's fingerprint: the same text,
/// the same vector.
fn vector(text: &str, dimensions: u32) -> Vec<f32> {
    let mut state = fingerprint(text) | 1;
    let mut v: Vec<f32> = (0..dimensions)
        .map(|_| {
            // xorshift64: cheap, seeded, good enough for a mock's numbers
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::MIN_POSITIVE);
    for x in &mut v {
        *x /= norm;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same text gives the same unit vector; another text another one.
    #[test]
    fn vectors_are_seeded_by_their_text_and_unit_length() {
        let a = vector("hello world", 32);
        assert_eq!(a, vector("hello world", 32));
        assert_ne!(a, vector("hello there", 32));
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        assert!(a.iter().all(|x| x.abs() <= 1.0));
    }
}

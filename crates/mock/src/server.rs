use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::format::{self, Api, ChunkHeader, Usage};
use crate::prefix_cache::PrefixCache;
use crate::request::{IncomingRequest, count_words, fingerprint};
use crate::stats::{LoggedRequest, MockStats, State};
use crate::stream::{StreamSpec, Timing, TokenStream};
use crate::{Fault, MockConfig};

type ResponseBody = BoxBody<Bytes, std::io::Error>;

/// Why the mock could not start.
#[derive(Debug, Error)]
pub enum MockError {
    /// The configuration has invalid values.
    #[error("invalid mock configuration: {0}")]
    Config(String),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

struct Shared {
    config: MockConfig,
    model_json: Arc<str>,
    state: Arc<State>,
    started: Instant,
    prefix_cache: Option<PrefixCache>,
}

/// A running mock server; dropping the handle stops accepting connections.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl MockServer {
    /// Bind `addr` (port 0 picks a free port) and serve on the current tokio runtime.
    pub async fn start(config: MockConfig, addr: SocketAddr) -> Result<Self, MockError> {
        let problems = config.problems();
        if !problems.is_empty() {
            let text: Vec<String> = problems.iter().map(|(k, m)| format!("{k}: {m}")).collect();
            return Err(MockError::Config(text.join("; ")));
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| MockError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| MockError::Bind { addr, source })?;
        let model_json: Arc<str> = serde_json::to_string(&config.model)
            .unwrap_or_else(|_| "\"cicada-mock\"".to_string())
            .into();
        let prefix_cache =
            (config.prefix_cache_block > 0).then(|| PrefixCache::new(config.prefix_cache_block));
        let shared = Arc::new(Shared {
            prefix_cache,
            config,
            model_json,
            state: Arc::new(State::new()),
            started: Instant::now(),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        tracing::info!(%addr, "mock server listening");
        Ok(Self {
            addr,
            shared,
            accept,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:8000`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Ground truth so far.
    pub fn stats(&self) -> MockStats {
        self.shared.state.snapshot()
    }

    /// Every request logged so far, in arrival order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.state.log()
    }

    /// The configuration being served.
    pub fn config(&self) -> &MockConfig {
        &self.shared.config
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning
                tracing::warn!(error = %e, "mock accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(route(shared, req).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<ResponseBody> {
    let mut resp = Response::new(
        Full::new(body.into())
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<ResponseBody> {
    full(status, "application/json", body)
}

fn error_json(status: StatusCode, message: &str) -> Response<ResponseBody> {
    let body = serde_json::json!({
        "object": "error",
        "message": message,
        "type": status.canonical_reason().unwrap_or("error"),
        "code": status.as_u16(),
    });
    json(status, body.to_string())
}

async fn route(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ResponseBody> {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, p) if p.ends_with("/health") => full(StatusCode::OK, "text/plain", ""),
        (&Method::GET, p) if p.ends_with("/v1/models") => {
            let body = serde_json::json!({
                "object": "list",
                "data": [{"id": shared.config.model, "object": "model", "created": unix_secs(), "owned_by": "cicada"}],
            });
            json(StatusCode::OK, body.to_string())
        }
        (&Method::GET, "/mock/stats") => match serde_json::to_string(&shared.state.snapshot()) {
            Ok(s) => json(StatusCode::OK, s),
            Err(e) => error_json(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        },
        (&Method::GET, "/mock/requests") => match serde_json::to_string(&shared.state.log()) {
            Ok(s) => json(StatusCode::OK, s),
            Err(e) => error_json(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        },
        (&Method::POST, p) if p.ends_with("/chat/completions") => {
            completion(shared, req, Api::Chat, path).await
        }
        (&Method::POST, p) if p.ends_with("/completions") => {
            completion(shared, req, Api::Completions, path).await
        }
        _ => error_json(StatusCode::NOT_FOUND, "no such route on the cicada mock"),
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn pick_fault(config: &MockConfig, seq: u64) -> Option<Fault> {
    if config.faults.total() <= 0.0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ seq.wrapping_mul(0xd134_2543_de82_ef95));
    let u: f64 = rng.random();
    let mut acc = 0.0;
    for (fault, rate) in config.faults.table() {
        acc += rate;
        if u < acc {
            return Some(fault);
        }
    }
    None
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1000.0)
}

async fn completion(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    api: Api,
    path: String,
) -> Response<ResponseBody> {
    let arrival = Instant::now();
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return error_json(StatusCode::BAD_REQUEST, &format!("cannot read body: {e}")),
    };
    let parsed: IncomingRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error_json(StatusCode::BAD_REQUEST, &format!("invalid JSON: {e}")),
    };
    let state = &shared.state;
    let config = &shared.config;
    let seq = state.requests.fetch_add(1, Ordering::Relaxed);
    let prompt = parsed.prompt_text();
    let prompt_tokens = count_words(&prompt);
    let fault = pick_fault(config, seq);
    let (total_tokens, stopped_early) = parsed.output_tokens(config);
    let cached_tokens = shared
        .prefix_cache
        .as_ref()
        .map(|c| c.lookup_and_insert(&prompt));
    state.log_request(LoggedRequest {
        seq,
        offset_us: arrival.duration_since(shared.started).as_micros() as u64,
        unix_us: unix_micros(),
        path,
        prompt_fingerprint: fingerprint(&prompt),
        prompt_tokens,
        max_tokens: parsed.requested_tokens(),
        stream: parsed.stream,
        fault,
        request_id,
        messages: parsed.message_log(),
        output_tokens: total_tokens,
        output_fingerprint: format::text_fingerprint(seq, total_tokens),
        cached_tokens,
    });
    match fault {
        Some(Fault::Http429) => {
            return error_json(StatusCode::TOO_MANY_REQUESTS, "mock injected rate limit");
        }
        Some(Fault::Http500) => {
            return error_json(
                StatusCode::INTERNAL_SERVER_ERROR,
                "mock injected server error",
            );
        }
        _ => {}
    }
    let in_flight = state.in_flight.load(Ordering::Relaxed) as f64;
    let timing = Timing {
        start: arrival,
        ttft: ms(config.ttft_ms + config.ttft_per_inflight_ms * in_flight),
        event_gap: ms((config.itl_ms + config.itl_per_inflight_ms * in_flight)
            * f64::from(config.tokens_per_event.max(1))),
        jitter: ms(config.jitter_ms),
    };
    let options = parsed.stream_options.unwrap_or_default();
    let spec = StreamSpec {
        api,
        seq,
        created: unix_secs(),
        model_json: shared.model_json.clone(),
        timing,
        total_tokens,
        tokens_per_event: config.tokens_per_event,
        prompt_tokens,
        role_chunk: config.role_chunk,
        include_usage: config.usage && options.include_usage,
        continuous_usage: config.usage && options.continuous_usage_stats,
        fault,
        seed: config.seed,
        finish: if stopped_early { "stop" } else { "length" },
        cached_tokens,
    };
    if parsed.stream {
        let stream = TokenStream::new(spec, shared.state.clone());
        let mut resp = Response::new(BodyExt::boxed(stream));
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/event-stream"),
        );
        h.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-cache"),
        );
        return resp;
    }
    non_streaming(&shared, spec).await
}

async fn non_streaming(shared: &Shared, spec: StreamSpec) -> Response<ResponseBody> {
    let state = &shared.state;
    state.stream_opened();
    let per = spec.tokens_per_event.max(1);
    let events = spec.total_tokens.div_ceil(per).max(1);
    let t = spec.timing;
    let done_at = t.start + t.ttft + t.event_gap * (events - 1);
    match spec.fault {
        Some(Fault::Stall) => tokio::time::sleep(Duration::from_secs(24 * 3600)).await,
        _ => tokio::time::sleep_until(done_at).await,
    }
    state.stream_closed();
    let header = ChunkHeader {
        api: spec.api,
        seq: spec.seq,
        created: spec.created,
        model_json: &shared.model_json,
    };
    match spec.fault {
        Some(Fault::ErrorEvent) => {
            return json(
                StatusCode::OK,
                r#"{"error":{"message":"mock injected error","type":"InternalServerError","code":500}}"#,
            );
        }
        Some(Fault::Malformed | Fault::Reset | Fault::Truncate) => {
            return json(StatusCode::OK, r#"{"choices":[{"index":0,"text":"#);
        }
        _ => {}
    }
    let completion = if spec.fault == Some(Fault::Empty) {
        0
    } else {
        spec.total_tokens
    };
    let mut text = String::new();
    format::token_text(&mut text, spec.seq, 0, completion);
    let mut out = String::with_capacity(text.len() + 256);
    header.full_response(
        &mut out,
        &text,
        spec.finish,
        Usage {
            prompt: spec.prompt_tokens,
            completion,
            cached: spec.cached_tokens,
        },
    );
    state.completed.fetch_add(1, Ordering::Relaxed);
    state
        .output_tokens
        .fetch_add(u64::from(completion), Ordering::Relaxed);
    json(StatusCode::OK, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FaultRates;

    async fn start(config: MockConfig) -> MockServer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        MockServer::start(config, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap()
    }

    async fn post(url: &str, body: serde_json::Value) -> (u16, String, Duration) {
        let t0 = std::time::Instant::now();
        let resp = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, text, t0.elapsed())
    }

    fn events(text: &str) -> Vec<&str> {
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").unwrap())
            .collect()
    }

    #[tokio::test]
    async fn chat_stream_has_role_content_usage_and_done() {
        let mock = start(MockConfig {
            ttft_ms: 20.0,
            itl_ms: 2.0,
            tokens_per_event: 2,
            ..MockConfig::default()
        })
        .await;
        let (status, text, took) = post(
            &format!("{}/v1/chat/completions", mock.url()),
            serde_json::json!({"model":"x","messages":[{"role":"user","content":"one two three"}],
                "max_completion_tokens": 9, "stream": true, "stream_options": {"include_usage": true}}),
        )
        .await;
        assert_eq!(status, 200);
        let ev = events(&text);
        // role + ceil(9/2)=5 content + usage + [DONE]
        assert_eq!(ev.len(), 8, "{text}");
        assert!(ev[0].contains("\"role\":\"assistant\""));
        assert_eq!(*ev.last().unwrap(), "[DONE]");
        let usage: serde_json::Value = serde_json::from_str(ev[6]).unwrap();
        assert_eq!(usage["usage"]["completion_tokens"], 9);
        assert_eq!(usage["usage"]["prompt_tokens"], 3);
        // 20 ms + 4 gaps of 4 ms
        assert!(took >= Duration::from_millis(36), "{took:?}");
        let stats = mock.stats();
        assert_eq!(stats.requests, 1);
        assert_eq!(stats.completed, 1);
        assert_eq!(stats.output_tokens, 9);
        assert_eq!(stats.lateness.count, 5);
        assert_eq!(mock.requests()[0].max_tokens, Some(9));
    }

    #[tokio::test]
    async fn completions_without_usage_and_non_streaming() {
        let mock = start(MockConfig {
            ttft_ms: 1.0,
            itl_ms: 0.0,
            ..MockConfig::default()
        })
        .await;
        let url = format!("{}/prefix/v1/completions", mock.url());
        let (_, text, _) = post(
            &url,
            serde_json::json!({"prompt":"a b","max_tokens":3,"stream":true}),
        )
        .await;
        let ev = events(&text);
        assert_eq!(ev.len(), 4);
        assert!(!text.contains("usage"));
        let (status, text, _) =
            post(&url, serde_json::json!({"prompt":"a b","max_tokens":3})).await;
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["usage"]["completion_tokens"], 3);
        assert_eq!(
            v["choices"][0]["text"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count(),
            3
        );
    }

    #[tokio::test]
    async fn faults_are_injected_and_counted() {
        let mock = start(MockConfig {
            ttft_ms: 0.0,
            itl_ms: 0.0,
            faults: FaultRates {
                http_500: 0.5,
                error_event: 0.5,
                ..FaultRates::default()
            },
            ..MockConfig::default()
        })
        .await;
        let url = format!("{}/v1/completions", mock.url());
        let mut errors = 0;
        for _ in 0..40 {
            let (status, text, _) = post(
                &url,
                serde_json::json!({"prompt":"a","max_tokens":4,"stream":true}),
            )
            .await;
            if status == 500 {
                errors += 1;
            } else {
                assert!(text.contains("\"error\""), "{text}");
            }
        }
        let stats = mock.stats();
        assert_eq!(
            stats
                .expected_outcomes
                .get("http_500")
                .copied()
                .unwrap_or(0),
            errors
        );
        assert_eq!(
            stats
                .expected_outcomes
                .get("server_error_event")
                .copied()
                .unwrap_or(0),
            40 - errors
        );
    }

    #[tokio::test]
    async fn health_models_and_bad_input() {
        let mock = start(MockConfig::default()).await;
        let c = reqwest::Client::new();
        assert_eq!(
            c.get(format!("{}/health", mock.url()))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
        let models: serde_json::Value = c
            .get(format!("{}/v1/models", mock.url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(models["data"][0]["id"], "cicada-mock");
        let resp = c
            .post(format!("{}/v1/completions", mock.url()))
            .body("{nope")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        let bad = MockServer::start(
            MockConfig {
                tokens_per_event: 0,
                ..MockConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        assert!(bad.is_err());
    }
}

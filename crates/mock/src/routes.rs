//! Which handler answers a request: the generate routes of every API, the
//! model list, health, `/metrics` and the mock's own `/mock/*` routes, behind
//! the optional API key.

use std::sync::Arc;

use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use crate::MockConfig;
use crate::handler::{Streaming, generate, unix_secs};
use crate::reply::{ResponseBody, Shared, error_json, full, json};
use crate::wire::Api;

/// `/v2/models/{model}[/versions/{v}]/{action}` -> (model, action).
fn triton_route(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/v2/models/")?;
    let (model, rest) = rest.split_once('/')?;
    let action = match rest.split_once('/') {
        Some(("versions", v)) => v.split_once('/')?.1,
        Some(_) => return None,
        None => rest,
    };
    Some((model, action))
}

/// Routes anyone may call without the API key (as vLLM leaves them open).
fn open_route(path: &str) -> bool {
    path.ends_with("/health")
        || path.ends_with("/metrics")
        || path.starts_with("/mock/")
        || path.starts_with("/v2/health/")
}

/// Whether the request carries the configured key (always, without one):
/// in `x-api-key` on Anthropic's `/messages` (the header Anthropic reads),
/// else as `Authorization: Bearer`.
fn authorized(config: &MockConfig, req: &Request<Incoming>) -> bool {
    let Some(key) = &config.api_key else {
        return true;
    };
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    if req.uri().path().ends_with("/messages") {
        return header("x-api-key").is_some_and(|given| given == key);
    }
    header(header::AUTHORIZATION.as_str())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| given == key)
}

pub(crate) async fn route(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ResponseBody> {
    let path = req.uri().path().to_string();
    let config = &shared.config;
    if req.method() == Method::POST && crate::hooks::is_hook(&path) {
        return crate::hooks::serve(&shared, &path, authorized(config, &req));
    }
    if !open_route(&path) && !authorized(config, &req) {
        return json(StatusCode::UNAUTHORIZED, r#"{"error":"Unauthorized"}"#);
    }
    if let Some((model, action)) = triton_route(&path) {
        let streaming = match (req.method(), action) {
            (&Method::POST, "generate_stream") => Streaming::Always,
            (&Method::POST, "generate") => Streaming::Never,
            (&Method::GET, "ready") if model == config.model => {
                return full(StatusCode::OK, "text/plain", "");
            }
            _ => return json(StatusCode::NOT_FOUND, r#"{"error":"Not Found"}"#),
        };
        if model != config.model {
            let msg = format!("Request for unknown model: '{model}' is not found");
            return json(
                StatusCode::BAD_REQUEST,
                serde_json::json!({ "error": msg }).to_string(),
            );
        }
        return generate(shared.clone(), req, Api::Triton, streaming, path).await;
    }
    match (req.method(), path.as_str()) {
        (&Method::GET, p) if p.ends_with("/health") => full(StatusCode::OK, "text/plain", ""),
        (&Method::GET, "/v2/health/ready" | "/v2/health/live") => {
            full(StatusCode::OK, "text/plain", "")
        }
        (&Method::GET, p) if p.ends_with("/v1/models") => {
            let body = serde_json::json!({
                "object": "list",
                "data": [{"id": config.model, "object": "model", "created": unix_secs(), "owned_by": "cicada"}],
            });
            json(StatusCode::OK, body.to_string())
        }
        (&Method::GET, p) if p.ends_with("/info") => {
            let body = serde_json::json!({
                "model_id": config.model, "model_sha": null, "model_pipeline_tag": "text-generation",
                "max_concurrent_requests": 128, "max_best_of": 2, "max_stop_sequences": 4,
                "max_input_tokens": 1_000_000, "max_total_tokens": 2_000_000,
                "validation_workers": 2, "max_client_batch_size": 4,
                "router": "text-generation-router", "version": "3.0.0", "sha": null, "docker_label": null,
            });
            json(StatusCode::OK, body.to_string())
        }
        (&Method::POST, "/v2/repository/index") => {
            let body =
                serde_json::json!([{"name": config.model, "version": "1", "state": "READY"}]);
            json(StatusCode::OK, body.to_string())
        }
        (&Method::GET, p) if p.ends_with("/metrics") => full(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            crate::prom::render(&shared.state, config),
        ),
        (&Method::GET, "/mock/stats") => match serde_json::to_string(&shared.state.snapshot()) {
            Ok(s) => json(StatusCode::OK, s),
            Err(e) => error_json(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        },
        (&Method::GET, "/mock/hooks") => crate::hooks::listing(&shared),
        (&Method::GET, "/mock/requests") => match serde_json::to_string(&shared.state.log()) {
            Ok(s) => json(StatusCode::OK, s),
            Err(e) => error_json(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        },
        (&Method::POST, p) if p.ends_with("/responses") => {
            generate(
                shared.clone(),
                req,
                Api::Responses,
                Streaming::AsAsked,
                path,
            )
            .await
        }
        (&Method::POST, p) if crate::pooling::Route::of(p).is_some() => {
            crate::pooling::serve(shared.clone(), req, path).await
        }
        (&Method::POST, p) if p.ends_with("/messages") => {
            generate(shared.clone(), req, Api::Messages, Streaming::AsAsked, path).await
        }
        // vLLM streams transcriptions as chat-completion chunks
        (&Method::POST, p) if p.ends_with("/audio/transcriptions") => {
            generate(shared.clone(), req, Api::Chat, Streaming::AsAsked, path).await
        }
        (&Method::POST, p) if p.ends_with("/chat/completions") => {
            generate(shared.clone(), req, Api::Chat, Streaming::AsAsked, path).await
        }
        (&Method::POST, p) if p.ends_with("/completions") => {
            generate(
                shared.clone(),
                req,
                Api::Completions,
                Streaming::AsAsked,
                path,
            )
            .await
        }
        (&Method::POST, p) if p.ends_with("/completion") => {
            generate(shared.clone(), req, Api::LlamaCpp, Streaming::AsAsked, path).await
        }
        (&Method::POST, p) if p.ends_with("/generate_stream") => {
            generate(shared.clone(), req, Api::Tgi, Streaming::Always, path).await
        }
        (&Method::POST, p) if p.ends_with("/generate") => {
            generate(shared.clone(), req, Api::Tgi, Streaming::Never, path).await
        }
        _ => error_json(StatusCode::NOT_FOUND, "no such route on the cicada mock"),
    }
}

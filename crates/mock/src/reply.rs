//! What every part of the mock answers with: the response body type, the
//! state shared by every connection, and plain JSON responses.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use tokio::time::Instant;

use crate::MockConfig;
use crate::clock::PreciseClock;
use crate::stats::State;

pub(crate) type ResponseBody = BoxBody<Bytes, std::io::Error>;

pub(crate) struct Shared {
    pub config: MockConfig,
    pub model_json: Arc<str>,
    pub state: Arc<State>,
    pub started: Instant,
    /// Token deadlines.
    pub clock: PreciseClock,
}

pub(crate) fn full(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<ResponseBody> {
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

pub(crate) fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<ResponseBody> {
    full(status, "application/json", body)
}

pub(crate) fn error_json(status: StatusCode, message: &str) -> Response<ResponseBody> {
    let body = serde_json::json!({
        "object": "error",
        "message": message,
        "type": status.canonical_reason().unwrap_or("error"),
        "code": status.as_u16(),
    });
    json(status, body.to_string())
}

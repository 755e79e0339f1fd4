//! Connections to a target, and one request over them.
//!
//! Our own HTTP/1.1 client rather than reqwest, for two measured reasons:
//! it knows whether a request rode a *reused* connection (so a server that
//! closed it, as llama-server does after every streamed response or uvicorn
//! after 5 s idle, costs one counted reconnect instead of a failed request),
//! and a body is read by the task that waits for it, straight from the
//! connection's buffer, stamped with the instant its bytes arrived (the
//! kernel's receive stamp on plain TCP; no connection task, no body channel,
//! no header map per request). It speaks HTTP/1.1
//! over TCP or TLS (rustls), like `vllm bench serve`'s aiohttp.
//!
//! Connection reuse: an idle connection is taken from its origin's pool
//! (most recent first) after a non-blocking check that the server has not
//! closed it. A request that fails on a reused connection before any
//! response byte arrives is sent again, once, on a fresh connection; the
//! response says so ([`Response::reconnected`]) and its [`Response::sent`]
//! is the retry's start. A failure on a fresh connection, or after response
//! bytes arrived, is the request's failure.

mod conn;
mod endpoint;
mod io;
mod rx_time;
mod stream;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cicada_scenarios::plan::{ResolvedTarget, TlsSettings};
use http::{HeaderName, HeaderValue};
use thiserror::Error;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

pub use endpoint::Endpoint;
pub use wire::Method;

use conn::Conn;
use endpoint::{Idle, Origin, split_url};
use stream::Stream;
use wire::Framing;

/// How long a connection may wait for the TCP (and TLS) handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections older than this are closed rather than reused.
const MAX_IDLE: Duration = Duration::from_secs(90);
/// Longest body [`Client::fetch`] keeps.
const MAX_FETCH_BODY: usize = 256 * 1024 * 1024;

/// Why a client for the target could not be set up.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error("the API key variable {0} is not set in this process's environment")]
    MissingApiKey(String),
    #[error("header {name}: {reason}")]
    BadHeader { name: String, reason: String },
    #[error("target.tls_ca holds no usable PEM certificate: {0}")]
    BadCa(String),
    #[error(transparent)]
    Http(#[from] HttpError),
}

/// Why a request got no (complete) response.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum HttpError {
    #[error("{url}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("TLS handshake with {host} failed: {reason}")]
    Tls { host: String, reason: String },
    #[error("no connection within {0:?}")]
    ConnectTimeout(Duration),
    #[error("{}", if *partial { "the connection closed inside the response head" } else { "the connection closed before any response" })]
    ClosedBeforeResponse { partial: bool },
    #[error("the connection closed inside the response body")]
    ClosedInBody,
    #[error("{0}")]
    Wire(#[from] wire::WireError),
    #[error("the response head passed {0} bytes")]
    HeadTooLarge(usize),
    #[error("{0}")]
    Io(String),
    #[error("no complete response within {0:?}")]
    Timeout(Duration),
}

/// Whether any byte of the response had arrived when a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponsePhase {
    NotStarted,
    Started,
}

/// Whether to require the API key variable to be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKey {
    /// Missing is an error (workers: every request would be refused).
    Required,
    /// Missing means no `Authorization` header (a probe from another host).
    IfSet,
}

/// Header lines sent with every request, rendered once (`Name: value\r\n`).
#[derive(Clone, Default)]
pub struct Headers {
    lines: Vec<u8>,
    names: Vec<String>,
}

impl std::fmt::Debug for Headers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // values may hold the API key: show names only
        f.debug_struct("Headers")
            .field("names", &self.names)
            .finish()
    }
}

impl Headers {
    fn push(&mut self, name: &str, value: &str) -> Result<(), SetupError> {
        let bad = |reason: String| SetupError::BadHeader {
            name: name.to_string(),
            reason,
        };
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(e.to_string()))?;
        let v = HeaderValue::from_str(value).map_err(|e| bad(e.to_string()))?;
        self.lines.extend_from_slice(n.as_str().as_bytes());
        self.lines.extend_from_slice(b": ");
        self.lines.extend_from_slice(v.as_bytes());
        self.lines.extend_from_slice(b"\r\n");
        self.names.push(n.as_str().to_string());
        Ok(())
    }

    /// These headers and one more.
    pub fn with(&self, name: &str, value: &str) -> Result<Headers, SetupError> {
        let mut h = self.clone();
        h.push(name, value)?;
        Ok(h)
    }

    /// Whether a header of this (lower-case) name is set.
    pub fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }
}

/// Headers for every request: the scenario's, `Authorization: Bearer <key>`
/// from this process's environment, and `Connection: close` without keep-alive.
pub fn headers(target: &ResolvedTarget, key: ApiKey) -> Result<Headers, SetupError> {
    let mut h = Headers::default();
    h.push("user-agent", concat!("cicada/", env!("CARGO_PKG_VERSION")))?;
    h.push("accept", "*/*")?;
    for (name, value) in &target.headers {
        h.push(name, value)?;
    }
    if let Some(var) = &target.api_key_env {
        match std::env::var(var) {
            Ok(k) => h
                .push("authorization", &format!("Bearer {k}"))
                .map_err(|_| SetupError::BadHeader {
                    name: "Authorization".into(),
                    reason: format!("the value of {var} is not a valid header value"),
                })?,
            Err(_) if key == ApiKey::IfSet => {}
            Err(_) => return Err(SetupError::MissingApiKey(var.clone())),
        }
    }
    if !target.keep_alive {
        h.push("connection", "close")?;
    }
    Ok(h)
}

/// A client for the target's connections, holding at most
/// `target.max_event_bytes` of one response at once.
pub fn client(target: &ResolvedTarget) -> Result<Client, SetupError> {
    let max_event = usize::try_from(target.max_event_bytes).unwrap_or(usize::MAX);
    Client::with_max_event(&target.tls, target.keep_alive, max_event)
}

/// Connections to any number of origins; cheap to clone (shared pools).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    keep_alive: bool,
    /// The most of one response held at once (an SSE line or event, a body).
    max_event: usize,
    tls_settings: TlsSettings,
    tls: OnceLock<Result<Arc<TlsConnector>, String>>,
    origins: Mutex<HashMap<(bool, String, u16), Arc<Origin>>>,
}

/// One request to send.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: Method,
    pub endpoint: &'a Endpoint,
    pub headers: &'a Headers,
    /// Sent as `x-request-id`, so server logs can be matched to records.
    pub request_id: Option<&'a str>,
    /// A JSON body (POST).
    pub json: Option<&'a [u8]>,
}

impl Client {
    /// A client with the target's TLS trust; `keep_alive = false` opens a
    /// fresh connection for every request. Responses are read with the
    /// default `target.max_event_size`.
    pub fn new(tls: &TlsSettings, keep_alive: bool) -> Result<Self, SetupError> {
        let default = cicada_scenarios::scenario::DEFAULT_MAX_EVENT_SIZE.get();
        Self::with_max_event(
            tls,
            keep_alive,
            usize::try_from(default).unwrap_or(usize::MAX),
        )
    }

    /// [`Client::new`], holding at most `max_event` bytes of one response at once.
    pub fn with_max_event(
        tls: &TlsSettings,
        keep_alive: bool,
        max_event: usize,
    ) -> Result<Self, SetupError> {
        if let Some(pem) = &tls.ca_pem {
            crate::tls::extra_roots(pem).map_err(SetupError::BadCa)?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                keep_alive,
                max_event,
                tls_settings: tls.clone(),
                tls: OnceLock::new(),
                origins: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The most of one response held at once: the longest SSE line or
    /// event, non-streamed body or kept text an exchange accepts.
    pub fn max_event(&self) -> usize {
        self.inner.max_event
    }

    /// The endpoint for an absolute URL; endpoints of one origin share its
    /// connections.
    pub fn endpoint(&self, url: &str) -> Result<Endpoint, HttpError> {
        let parts = split_url(url)?;
        let key = (parts.tls, parts.host.clone(), parts.port);
        let mut origins = self.inner.origins.lock().unwrap_or_else(|p| p.into_inner());
        let origin = match origins.get(&key) {
            Some(o) => o.clone(),
            None => {
                let o = Arc::new(Origin::new(&parts)?);
                origins.insert(key, o.clone());
                o
            }
        };
        Ok(Endpoint {
            origin,
            path: parts.path,
        })
    }

    fn tls(&self) -> Result<Arc<TlsConnector>, HttpError> {
        self.inner
            .tls
            .get_or_init(|| crate::tls::connector(&self.inner.tls_settings).map(Arc::new))
            .clone()
            .map_err(|reason| HttpError::Tls {
                host: String::new(),
                reason,
            })
    }

    /// An idle connection of `origin` that still looks open, if any.
    fn take_idle(&self, origin: &Origin) -> Option<Conn> {
        if !self.inner.keep_alive {
            return None;
        }
        let mut idle = origin.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(Idle { conn, since }) = idle.pop() {
            if since.elapsed() < MAX_IDLE && conn.looks_open() {
                return Some(conn);
            }
        }
        None
    }

    /// A fresh connection to `origin`, with as much of `first` written as
    /// went out with the connect; returns the connection and that count.
    async fn connect(&self, origin: &Origin, first: &[u8]) -> Result<(Conn, usize), HttpError> {
        let tls = if origin.tls { Some(self.tls()?) } else { None };
        let open = Stream::open(origin, tls.as_ref(), first);
        match tokio::time::timeout(CONNECT_TIMEOUT, open).await {
            Ok(opened) => {
                let (stream, written) = opened?;
                Ok((Conn::new(stream), written))
            }
            Err(_) => Err(HttpError::ConnectTimeout(CONNECT_TIMEOUT)),
        }
    }

    /// Send a request and read its response head; the body is then read
    /// from the [`Response`]. A reused connection found closed before any
    /// response byte is replaced by a fresh one once (see the module docs).
    pub async fn send(&self, req: Request<'_>) -> Result<Response, HttpError> {
        let origin = &req.endpoint.origin;
        let mut bytes =
            Vec::with_capacity(192 + req.headers.lines.len() + req.json.map_or(0, <[u8]>::len));
        let mut extra: [(&str, &str); 2] = [("", ""); 2];
        let mut n = 0;
        if req.json.is_some() {
            extra[n] = ("Content-Type", "application/json");
            n += 1;
        }
        if let Some(id) = req.request_id {
            extra[n] = ("x-request-id", id);
            n += 1;
        }
        wire::render_request(
            &mut bytes,
            req.method,
            &req.endpoint.path,
            &origin.host_header,
            &req.headers.lines,
            &extra[..n],
            req.json,
        );
        let mut sent = Instant::now();
        let mut reconnected = false;
        let mut idle = self.take_idle(origin);
        loop {
            let reused = idle.is_some();
            let (mut conn, written) = match idle.take() {
                Some(c) => (c, 0),
                None => self.connect(origin, &bytes).await?,
            };
            match exchange_head(&mut conn, &bytes[written..]).await {
                Ok(head) => {
                    let keep_alive = self.inner.keep_alive && head.keep_alive;
                    let mut resp = Response {
                        status: head.status,
                        content_type: head.content_type,
                        location: head.location,
                        sent,
                        reconnected,
                        conn: Some(conn),
                        framing: head.framing,
                        keep_alive,
                        origin: origin.clone(),
                    };
                    if resp.framing == Framing::Done {
                        resp.finish();
                    }
                    return Ok(resp);
                }
                Err((ResponsePhase::NotStarted, e)) if reused && !reconnected => {
                    tracing::debug!(origin = %origin.base(), error = %e, "a reused connection was closed; sending again on a fresh one");
                    reconnected = true;
                    sent = Instant::now();
                }
                Err((_, e)) => return Err(e),
            }
        }
    }

    /// Send a request and read its whole body, within `timeout`.
    pub async fn fetch(&self, req: Request<'_>, timeout: Duration) -> Result<Fetched, HttpError> {
        let work = async {
            let mut resp = self.send(req).await?;
            let mut body = Vec::new();
            while let Some((piece, _)) = resp.chunk().await? {
                if body.len() + piece.len() > MAX_FETCH_BODY {
                    return Err(HttpError::Io(format!(
                        "the response body is over {MAX_FETCH_BODY} bytes"
                    )));
                }
                body.extend_from_slice(piece);
            }
            Ok(Fetched {
                status: resp.status,
                content_type: resp.content_type.take(),
                location: resp.location.take(),
                body,
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| HttpError::Timeout(timeout))?
    }
}

/// Write the request and read the response head. A write that fails may
/// still have a response waiting (a server that answered early and closed),
/// so the head is read either way.
async fn exchange_head(
    conn: &mut Conn,
    bytes: &[u8],
) -> Result<wire::Head, (ResponsePhase, HttpError)> {
    let written = conn.send(bytes).await;
    match (written, conn.read_head().await) {
        (_, Ok(head)) => Ok(head),
        (Err(w), Err((ResponsePhase::NotStarted, _))) => Err((
            ResponsePhase::NotStarted,
            HttpError::Io(format!("sending the request: {w}")),
        )),
        (_, Err(e)) => Err(e),
    }
}

/// A whole response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    pub content_type: Option<String>,
    /// The `Location` header (a redirect's target).
    pub location: Option<String>,
    pub body: Vec<u8>,
}

impl Fetched {
    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A response whose head has arrived; its body is read with [`Response::chunk`].
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    /// The `Location` header (a redirect's target).
    pub location: Option<String>,
    /// When the attempt that got this response began (before its connect, if
    /// it needed one): the request's send time.
    pub sent: Instant,
    /// A reused connection had been closed, and the request went again on a
    /// fresh one.
    pub reconnected: bool,
    conn: Option<Conn>,
    framing: Framing,
    keep_alive: bool,
    origin: Arc<Origin>,
}

impl Response {
    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The next piece of the body and the instant its bytes were read;
    /// `None` once the body is complete.
    pub async fn chunk(&mut self) -> Result<Option<(&[u8], Instant)>, HttpError> {
        let piece = match self.conn.as_mut() {
            Some(conn) => conn.next_piece(&mut self.framing, MAX_FETCH_BODY).await,
            None => return Ok(None),
        };
        match piece {
            Ok(Some((range, at))) => Ok(self.conn.as_ref().map(|c| (c.bytes(range), at))),
            Ok(None) => {
                self.finish();
                Ok(None)
            }
            Err(e) => {
                self.conn = None;
                Err(e)
            }
        }
    }

    /// The body is complete: the connection waits in its origin's pool if it
    /// may carry another request.
    fn finish(&mut self) {
        if let Some(mut conn) = self.conn.take()
            && self.keep_alive
            && self.framing == Framing::Done
            && conn.drained()
        {
            conn.park();
            self.origin
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Idle {
                    conn,
                    since: Instant::now(),
                });
        }
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        // a body read to its end goes back to the pool; one abandoned midway
        // (an error event, a cancel) leaves the connection to close
        if self.framing == Framing::Done {
            self.finish();
        }
    }
}

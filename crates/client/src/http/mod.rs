//! Connections to a target, and one request over them.
//!
//! HTTP/1.1 and HTTP/2 (`target.http`: "auto" takes HTTP/2 where an https
//! server offers it by ALPN; "2" on plain http is h2c with prior knowledge),
//! over TCP or TLS (rustls). Every read carries the kernel's receive stamp,
//! under TLS too (`io`), and every body piece the instant its bytes arrived
//! (`h1`, `h2`). HTTP/1.1 is read either by our own reader (`conn`, `wire`)
//! or by hyper driven in the request's task (`h1`): `CICADA_HTTP1=hyper`
//! picks the latter, for the selftest's comparison of the two.
//!
//! Connection reuse is learned per origin before anything is reused
//! (`pool`), and a request goes again only when it provably never reached
//! the server (`send`); [`Response::resends`] says how often and why.

mod addresses;
mod attempt;
mod conn;
mod dial;
mod endpoint;
mod h1;
mod h2;
mod io;
mod pool;
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "the dialing path takes proxies up next (issue 23)"
    )
)]
mod proxy;
mod response;
mod rx_time;
mod send;
mod stream;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cicada_scenarios::plan::{HttpVersion, ResolvedTarget, TlsSettings};
use http::{HeaderName, HeaderValue};
use thiserror::Error;
use tokio_rustls::TlsConnector;

pub use addresses::Spread;
pub use cicada_metrics::Resends;
pub use endpoint::Endpoint;
pub use response::{Protocol, Response};
pub use send::Resend;
pub use wire::Method;

use endpoint::{Origin, split_url};

/// How long a connection may wait for the TCP (and TLS) handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
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
    #[error("the request was written and the connection ended before any response: {0}")]
    NoResponse(String),
    #[error("the response head is not valid HTTP: {0}")]
    BadHead(String),
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

/// Headers sent with every request, built once: as HTTP/1.1 lines
/// (`Name: value\r\n`) for our own writer and as a map for hyper.
#[derive(Clone, Default)]
pub struct Headers {
    lines: Vec<u8>,
    map: http::HeaderMap,
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
        // connection options are HTTP/1.1's alone (HTTP/2 forbids them)
        if n != http::header::CONNECTION {
            self.map.append(n, v);
        }
        Ok(())
    }

    /// These headers and one more.
    pub fn with(&self, name: &str, value: &str) -> Result<Headers, SetupError> {
        let mut h = self.clone();
        h.push(name, value)?;
        Ok(h)
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
        .map(|c| c.speaking(target.http).spreading(target.addresses))
}

/// Who reads HTTP/1.1 responses (both are measured against each other by
/// `coord selftest`; see docs/PERFORMANCE.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H1Impl {
    /// Our own reader (`conn`, `wire`).
    Wire,
    /// hyper, driven in the request's task (`h1`).
    Hyper,
}

impl H1Impl {
    /// `CICADA_HTTP1=hyper` or `wire` (the default).
    fn from_env() -> Self {
        match std::env::var("CICADA_HTTP1").as_deref() {
            Ok("hyper") => H1Impl::Hyper,
            _ => H1Impl::Wire,
        }
    }
}

/// Connections to any number of origins; cheap to clone (shared pools).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    keep_alive: bool,
    /// `target.http`.
    http: HttpVersion,
    /// Who reads HTTP/1.1.
    h1: H1Impl,
    /// How new connections choose among a name's addresses.
    spread: Spread,
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
                http: HttpVersion::Auto,
                h1: H1Impl::from_env(),
                spread: Spread::First,
                max_event,
                tls_settings: tls.clone(),
                tls: OnceLock::new(),
                origins: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// This client speaking `http` (see `target.http`); its connections are
    /// its own.
    pub fn speaking(self, http: HttpVersion) -> Self {
        self.rebuilt(http, self.inner.h1)
    }

    /// This client choosing among a name's addresses as `spread` says.
    pub fn spreading(self, spread: Spread) -> Self {
        let mut c = self.rebuilt(self.inner.http, self.inner.h1);
        if let Some(inner) = Arc::get_mut(&mut c.inner) {
            inner.spread = spread;
        }
        c
    }

    /// This client reading HTTP/1.1 with `h1`; its connections are its own.
    pub fn reading_http1_with(self, h1: H1Impl) -> Self {
        self.rebuilt(self.inner.http, h1)
    }

    fn rebuilt(&self, http: HttpVersion, h1: H1Impl) -> Self {
        let inner = &self.inner;
        Self {
            inner: Arc::new(Inner {
                keep_alive: inner.keep_alive,
                http,
                h1,
                spread: inner.spread,
                max_event: inner.max_event,
                tls_settings: inner.tls_settings.clone(),
                tls: OnceLock::new(),
                origins: Mutex::new(HashMap::new()),
            }),
        }
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
            .get_or_init(|| {
                let alpn: &[&[u8]] = match self.inner.http {
                    HttpVersion::Auto => &[b"h2", b"http/1.1"],
                    HttpVersion::Http1 => &[b"http/1.1"],
                    HttpVersion::Http2 => &[b"h2"],
                };
                crate::tls::connector(&self.inner.tls_settings, alpn).map(Arc::new)
            })
            .clone()
            .map_err(|reason| HttpError::Tls {
                host: String::new(),
                reason,
            })
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

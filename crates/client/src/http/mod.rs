//! Connections to a target, and one request over them.
//!
//! HTTP/1.1 and HTTP/2 (`target.http`: "auto" takes HTTP/2 where an https
//! server offers it by ALPN; "2" on plain http is h2c with prior knowledge),
//! over TCP or TLS (rustls). Every read carries the kernel's receive stamp,
//! under TLS too (`io`), and every body piece the instant its bytes arrived
//! (`h1`, `h2`). HTTP/1.1 is read either by our own reader (`conn`, `wire`)
//! or by hyper driven in the request's task (`h1`): the binary picks the
//! latter for the whole process on `CICADA_HTTP1=hyper`
//! ([`H1Impl::make_default`]), for the selftest's comparison of the two.
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
mod proxy;
mod response;
mod rx_time;
mod send;
mod stream;
mod tcp_info;
pub mod wire;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The shared bytes a [`Body`] is made of.
pub use bytes::Bytes;
use cicada_request::{
    AddressChoice, DEFAULT_MAX_EVENT_SIZE, HttpVersion, ProxySetting, TlsSettings,
};
use http::{HeaderName, HeaderValue};
use thiserror::Error;
use tokio_rustls::TlsConnector;

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
    #[error("{0}")]
    Proxy(String),
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

/// What a target asks of every request's headers.
#[derive(Debug, Clone, Copy)]
pub struct HeaderSpec<'a> {
    /// Headers sent as they are (`target.headers`), in order.
    pub fixed: &'a BTreeMap<String, String>,
    /// The environment variable holding the API key, sent as a bearer token.
    pub api_key_env: Option<&'a str>,
    /// Reuse connections; off adds `Connection: close`.
    pub keep_alive: bool,
    /// Anthropic's Messages API: the key goes in `x-api-key` too, and
    /// `anthropic-version` is sent unless `fixed` gives one.
    pub anthropic: bool,
}

/// The `anthropic-version` sent to the Messages API (the only version
/// Anthropic has published; vLLM and llama-server do not read it).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Headers for every request: the target's, `Authorization: Bearer <key>`
/// from this process's environment (and `x-api-key` for Anthropic's API),
/// and `Connection: close` without keep-alive.
pub fn headers(spec: HeaderSpec<'_>, key: ApiKey) -> Result<Headers, SetupError> {
    let mut h = Headers::default();
    h.push("user-agent", concat!("cicada/", env!("CARGO_PKG_VERSION")))?;
    h.push("accept", "*/*")?;
    for (name, value) in spec.fixed {
        h.push(name, value)?;
    }
    let given = |name: &str| spec.fixed.keys().any(|k| k.eq_ignore_ascii_case(name));
    if spec.anthropic && !given("anthropic-version") {
        h.push("anthropic-version", ANTHROPIC_VERSION)?;
    }
    if let Some(var) = spec.api_key_env {
        let bad = |name: &str| SetupError::BadHeader {
            name: name.into(),
            reason: format!("the value of {var} is not a valid header value"),
        };
        match std::env::var(var) {
            Ok(k) => {
                // Anthropic reads x-api-key; vLLM's /v1/messages only Authorization
                if spec.anthropic {
                    h.push("x-api-key", &k).map_err(|_| bad("x-api-key"))?;
                }
                h.push("authorization", &format!("Bearer {k}"))
                    .map_err(|_| bad("Authorization"))?
            }
            Err(_) if key == ApiKey::IfSet => {}
            Err(_) => return Err(SetupError::MissingApiKey(var.to_string())),
        }
    }
    if !spec.keep_alive {
        h.push("connection", "close")?;
    }
    Ok(h)
}

/// Who reads HTTP/1.1 responses (both are measured against each other by
/// `cicada selftest`; see docs/PERFORMANCE.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H1Impl {
    /// Our own reader (`conn`, `wire`).
    Wire,
    /// hyper, driven in the request's task (`h1`).
    Hyper,
}

/// The reader [`Settings::new`] picks, chosen once per process by the binary
/// (`CICADA_HTTP1`, read at the edge); our own reader until then.
static DEFAULT_H1: OnceLock<H1Impl> = OnceLock::new();

impl H1Impl {
    /// Make `self` the reader of every client this process builds from
    /// [`Settings::new`]; the first choice holds.
    pub fn make_default(self) {
        let _ = DEFAULT_H1.set(self);
    }

    fn default_choice() -> Self {
        DEFAULT_H1.get().copied().unwrap_or(H1Impl::Wire)
    }
}

/// How a client connects: what a target's settings decide.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Whom https connections trust.
    pub tls: TlsSettings,
    /// Reuse connections; off opens a fresh one per request.
    pub keep_alive: bool,
    /// The most of one response held at once (an SSE line or event, a body).
    pub max_event: usize,
    /// The HTTP version requests go out in.
    pub http: HttpVersion,
    /// Which of a name's addresses new connections use.
    pub addresses: AddressChoice,
    /// Which proxy requests go through.
    pub proxy: ProxySetting,
    /// Hosts reached directly whatever the proxy (`NO_PROXY`'s grammar).
    pub no_proxy: Vec<String>,
    /// Who reads HTTP/1.1 (the process's choice, [`H1Impl::make_default`]).
    pub h1: H1Impl,
}

impl Settings {
    /// Defaults: the environment's proxy, HTTP/2 where offered, the first
    /// address, the default `target.max_event_size`.
    pub fn new(tls: &TlsSettings, keep_alive: bool) -> Self {
        Self {
            tls: tls.clone(),
            keep_alive,
            max_event: usize::try_from(DEFAULT_MAX_EVENT_SIZE.get()).unwrap_or(usize::MAX),
            http: HttpVersion::Auto,
            addresses: AddressChoice::First,
            proxy: ProxySetting::Env,
            no_proxy: Vec::new(),
            h1: H1Impl::default_choice(),
        }
    }
}

/// Connections to any number of origins; cheap to clone (shared pools).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    /// Which proxy each target goes through (read from this process's
    /// environment under `target.proxy = "env"`).
    proxies: proxy::ProxyRules,
    tls: OnceLock<Result<Arc<TlsConnector>, crate::tls::TlsConfigError>>,
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
    /// The body (POST), with its media type.
    pub body: Option<Body<'a>>,
}

/// A request body and its `Content-Type` (the codec's: JSON, or a
/// multipart form for uploads).
#[derive(Debug, Clone, Copy)]
pub struct Body<'a> {
    /// The body's bytes in pieces, written one after another as they are
    /// (a codec's JSON around a pool's shared prompt text: never joined
    /// into one buffer on HTTP/1.1).
    pub parts: &'a [Bytes],
    pub content_type: &'a str,
}

impl Body<'_> {
    /// Bytes of the whole body.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// Whether the body has no byte.
    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(Bytes::is_empty)
    }
}

impl Client {
    /// A client with the target's TLS trust and every other setting at its
    /// default (see [`Settings::new`]).
    pub fn new(tls: &TlsSettings, keep_alive: bool) -> Result<Self, SetupError> {
        Self::with(Settings::new(tls, keep_alive))
    }

    /// A client as `settings` say.
    pub fn with(settings: Settings) -> Result<Self, SetupError> {
        if let Some(pem) = &settings.tls.ca_pem {
            crate::tls::extra_roots(pem).map_err(|e| SetupError::BadCa(e.0))?;
        }
        let proxies = proxy::ProxyRules::from_setting(&settings.proxy, &settings.no_proxy, |k| {
            std::env::var(k).ok()
        })
        .map_err(|e| SetupError::Proxy(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                proxies,
                tls: OnceLock::new(),
                origins: Mutex::new(HashMap::new()),
            }),
        })
    }

    fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The most of one response held at once: the longest SSE line or
    /// event, non-streamed body or kept text an exchange accepts.
    pub fn max_event(&self) -> usize {
        self.inner.settings.max_event
    }

    /// How requests to `endpoint` travel when not direct: the proxy, where
    /// its setting came from and how it is used (for the console and the
    /// result), e.g. `http://p:3128 (HTTPS_PROXY, CONNECT)`.
    pub fn route_of(&self, endpoint: &Endpoint) -> Option<String> {
        endpoint.origin.route.as_ref().map(|r| {
            format!(
                "{} ({}, {})",
                r.url(),
                r.source,
                if r.connect {
                    "CONNECT"
                } else {
                    "absolute-form"
                }
            )
        })
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
                let route = self.inner.proxies.route(parts.tls, &parts.host, parts.port);
                let o = Arc::new(Origin::new(&parts, route)?);
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
                let alpn: &[&[u8]] = match self.inner.settings.http {
                    HttpVersion::Auto => &[b"h2", b"http/1.1"],
                    HttpVersion::Http1 => &[b"http/1.1"],
                    HttpVersion::Http2 => &[b"h2"],
                };
                crate::tls::connector(&self.inner.settings.tls, alpn).map(Arc::new)
            })
            .clone()
            .map_err(|reason| HttpError::Tls {
                host: String::new(),
                reason: reason.0,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names_and_values(h: &Headers) -> Vec<(String, String)> {
        h.map
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
            .collect()
    }

    #[test]
    fn anthropic_targets_get_x_api_key_and_a_version() {
        // a variable only this test sets
        let var = "CICADA_TEST_ANTHROPIC_HEADERS_KEY";
        // SAFETY: no other test reads or writes this variable
        unsafe { std::env::set_var(var, "sk-1") };
        let fixed = BTreeMap::new();
        let spec = |anthropic, fixed| HeaderSpec {
            fixed,
            api_key_env: Some(var),
            keep_alive: true,
            anthropic,
        };
        let h = names_and_values(&headers(spec(true, &fixed), ApiKey::Required).unwrap());
        let has =
            |h: &[(String, String)], n: &str, v: &str| h.iter().any(|(a, b)| a == n && b == v);
        assert!(has(&h, "x-api-key", "sk-1"), "{h:?}");
        assert!(has(&h, "authorization", "Bearer sk-1"), "{h:?}");
        assert!(has(&h, "anthropic-version", ANTHROPIC_VERSION), "{h:?}");
        let plain = names_and_values(&headers(spec(false, &fixed), ApiKey::Required).unwrap());
        assert!(
            !plain
                .iter()
                .any(|(n, _)| n == "x-api-key" || n == "anthropic-version")
        );
        // the target's own version wins, sent once
        let own: BTreeMap<String, String> =
            [("Anthropic-Version".to_string(), "2099-01-01".to_string())].into();
        let h = names_and_values(&headers(spec(true, &own), ApiKey::Required).unwrap());
        let versions: Vec<_> = h.iter().filter(|(n, _)| n == "anthropic-version").collect();
        assert_eq!(versions.len(), 1, "{h:?}");
        assert_eq!(versions[0].1, "2099-01-01");
    }
}

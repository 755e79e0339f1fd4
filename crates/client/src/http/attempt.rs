//! One attempt at a request: pick the protocol and a connection (a parked
//! one, a stream on an HTTP/2 connection, or a new one), write the request,
//! wait for the response head, and judge a failure (see `send`).

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;

use super::conn::Conn;
use super::endpoint::Origin;
use super::h1::{H1Conn, ReqBody};
use super::h2::{H2Conn, Slot, h2_error};
use super::io::HyperIo;
use super::proxy::ProxyRoute;
use super::send::{Attempt, Resend, crossed_close, head_failure};
use super::stream::Stream;
use super::wire::{self, Method};
use super::{Client, H1Impl, HttpError, HttpVersion, Request, Response, ResponsePhase, dial};

/// Which way a request to an origin goes.
enum Route {
    /// HTTP/1.1, on a connection given (a fresh one that told its protocol) or from the pool.
    H1(Option<Stream>),
    H2,
}

/// The ALPN name of HTTP/2.
const ALPN_H2: &[u8] = b"h2";

impl Client {
    /// One attempt at `req` (see the module docs).
    pub(crate) async fn attempt(&self, req: &Request<'_>) -> Result<Response, Attempt> {
        let origin = req.endpoint.origin.clone();
        match self.route(&origin).await.map_err(Attempt::Failed)? {
            Route::H2 => self.attempt_h2(req, &origin).await,
            Route::H1(fresh) => match self.settings().h1 {
                H1Impl::Wire => self.attempt_wire(req, &origin, fresh).await,
                H1Impl::Hyper => self.attempt_h1(req, &origin, fresh).await,
            },
        }
    }

    /// HTTP/1.1 or HTTP/2 for `origin`: as `target.http` says, and for
    /// "auto" on https as the server answered ALPN (asked once per origin,
    /// with a connection that then serves the request).
    async fn route(&self, origin: &Arc<Origin>) -> Result<Route, HttpError> {
        match (self.settings().http, origin.tls) {
            (HttpVersion::Http2, false) if absolute_form(origin).is_some() => {
                return Err(HttpError::Connect {
                    addr: origin.base(),
                    reason: "target.http = \"2\" on plain http (h2c) cannot go through an HTTP proxy; use \"1.1\" or proxy = \"none\"".into(),
                });
            }
            (HttpVersion::Http2, _) => return Ok(Route::H2),
            (HttpVersion::Http1, _) | (HttpVersion::Auto, false) => return Ok(Route::H1(None)),
            (HttpVersion::Auto, true) => {}
        }
        let pool = &origin.pool;
        if let Some(h2) = *lock(&pool.speaks_h2) {
            return Ok(if h2 { Route::H2 } else { Route::H1(None) });
        }
        let _one = pool.h2_dialing.lock().await;
        if let Some(h2) = *lock(&pool.speaks_h2) {
            return Ok(if h2 { Route::H2 } else { Route::H1(None) });
        }
        // boxed: a dial's future is kilobytes and would otherwise size every
        // request's future (see `open`)
        let (stream, _) = Box::pin(dial::open(
            origin,
            Some(&self.tls()?),
            &[],
            self.settings().addresses,
        ))
        .await?;
        let h2 = alpn(&stream) == Some(ALPN_H2);
        *lock(&pool.speaks_h2) = Some(h2);
        if !h2 {
            return Ok(Route::H1(Some(stream)));
        }
        let conn = Box::pin(H2Conn::handshake(hyper_io(stream), pool.h2_learned.clone()))
            .await
            .map_err(|e| handshake_failed(origin, &e))?;
        lock(&pool.h2).push(Arc::new(conn));
        Ok(Route::H2)
    }

    /// HTTP/1.1 with our own reader.
    async fn attempt_wire(
        &self,
        req: &Request<'_>,
        origin: &Arc<Origin>,
        fresh: Option<Stream>,
    ) -> Result<Response, Attempt> {
        let head = render(req, origin);
        // the head, then the body's pieces as they are (a shared prompt is
        // written from where it lies, never copied into a request buffer)
        let mut parts = Vec::with_capacity(1 + req.body.map_or(0, |b| b.parts.len()));
        parts.push(&head[..]);
        if let Some(body) = req.body {
            parts.extend(body.parts.iter().map(|p| &p[..]));
        }
        let parked = match fresh {
            None if self.settings().keep_alive => origin.pool.checkout_wire(),
            _ => None,
        };
        let idle = parked.as_ref().map(|p| p.1);
        let reused = parked.is_some();
        let (mut conn, mut written) = match (parked, fresh) {
            (Some((c, _)), _) => (c, 0),
            (None, Some(s)) => (Conn::new(s), 0),
            (None, None) => {
                let (s, n) = self.open(origin, &head).await.map_err(Attempt::Failed)?;
                (Conn::new(s), n)
            }
        };
        let (n, at, answer) = exchange_head(&mut conn, &parts, written).await;
        written += n;
        match answer {
            Ok(head) => {
                let mut resp = Response::wire(
                    conn,
                    head,
                    reused,
                    origin.clone(),
                    self.settings().keep_alive,
                );
                resp.written = Some(at);
                Ok(resp)
            }
            Err((ResponsePhase::Started, e)) => Err(Attempt::Failed(e)),
            // not a byte of it left: it cannot have reached the server
            Err((ResponsePhase::NotStarted, e)) if written == 0 && !conn.is_tls() => {
                Err(Attempt::Again(Resend::Unsent, e))
            }
            // the server closed first and reset our bytes unread (on a fresh
            // connection too: a server may drop one it accepted)
            Err((ResponsePhase::NotStarted, e)) if crossed_close(conn.fd()).await => {
                Err(Attempt::Again(Resend::CrossedClose, e))
            }
            Err((ResponsePhase::NotStarted, e)) => {
                if let Some(idle) = idle {
                    origin.pool.dropped_on_reuse(idle);
                }
                Err(Attempt::Failed(no_response(e)))
            }
        }
    }

    /// HTTP/1.1 on hyper.
    async fn attempt_h1(
        &self,
        req: &Request<'_>,
        origin: &Arc<Origin>,
        fresh: Option<Stream>,
    ) -> Result<Response, Attempt> {
        let parked = match fresh {
            None if self.settings().keep_alive => origin.pool.checkout_h1(),
            _ => None,
        };
        let idle = parked.as_ref().map(|p| p.1);
        let reused = parked.is_some();
        let mut conn = match (parked, fresh) {
            (Some((c, _)), _) => c,
            (None, fresh) => {
                let stream = match fresh {
                    Some(s) => s,
                    None => self.open(origin, &[]).await.map_err(Attempt::Failed)?.0,
                };
                Box::pin(H1Conn::handshake(hyper_io(stream)))
                    .await
                    .map_err(|e| Attempt::Failed(handshake_failed(origin, &e)))?
            }
        };
        let request = hyper_request(req, origin, false, self.settings().keep_alive)
            .map_err(Attempt::Failed)?;
        match conn.send(request).await {
            Ok(resp) => Ok(Response::h1(
                resp,
                conn,
                reused,
                origin.clone(),
                self.settings().keep_alive,
            )),
            Err(f) if f.unsent.is_some() => {
                Err(Attempt::Again(Resend::Unsent, head_failure(&f.error)))
            }
            Err(f) if crossed_close(conn.fd()).await => {
                Err(Attempt::Again(Resend::CrossedClose, head_failure(&f.error)))
            }
            Err(f) => {
                if let Some(idle) = idle {
                    origin.pool.dropped_on_reuse(idle);
                }
                Err(Attempt::Failed(head_failure(&f.error)))
            }
        }
    }

    /// A stream on an HTTP/2 connection.
    async fn attempt_h2(
        &self,
        req: &Request<'_>,
        origin: &Arc<Origin>,
    ) -> Result<Response, Attempt> {
        let (conn, slot, reused) = self.h2_conn(origin).await.map_err(Attempt::Failed)?;
        let request = hyper_request(req, origin, true, true).map_err(Attempt::Failed)?;
        match conn.send(request).await {
            Ok(resp) => Ok(Response::h2(resp, &conn, slot, reused, origin.clone())),
            Err((e, Some(_))) => {
                conn.turned_away();
                Err(Attempt::Again(Resend::Unsent, head_failure(&e)))
            }
            Err((e, None)) => {
                let h2 = h2_error(&e);
                if h2.and_then(::h2::Error::reason) == Some(::h2::Reason::REFUSED_STREAM) {
                    Err(Attempt::Again(Resend::RefusedStream, head_failure(&e)))
                } else if h2.is_some_and(|h| h.is_go_away() && h.is_remote()) {
                    conn.turned_away();
                    Err(Attempt::Again(Resend::GoAway, head_failure(&e)))
                } else {
                    Err(Attempt::Failed(head_failure(&e)))
                }
            }
        }
    }

    /// An HTTP/2 connection of `origin` with room for a stream, a stream
    /// slot on it and whether it carried one before: the fullest one with
    /// room (few connections), else a new one (one dialled at a time).
    async fn h2_conn(&self, origin: &Arc<Origin>) -> Result<(Arc<H2Conn>, Slot, bool), HttpError> {
        let pool = &origin.pool;
        loop {
            if let Some(c) = pick_h2(&pool.h2) {
                let (slot, reused) = c.take_slot();
                return Ok((c, slot, reused));
            }
            let _one = pool.h2_dialing.lock().await;
            if pick_h2(&pool.h2).is_some() {
                continue;
            }
            let (stream, _) = self.open(origin, &[]).await?;
            if origin.tls && alpn(&stream) != Some(ALPN_H2) {
                return Err(HttpError::Tls {
                    host: origin.host.clone(),
                    reason: format!(
                        "the server does not speak HTTP/2 over TLS (ALPN: {}); target.http = \"2\" needs it",
                        alpn(&stream)
                            .map_or("none".into(), |p| String::from_utf8_lossy(p).into_owned())
                    ),
                });
            }
            let conn = Box::pin(H2Conn::handshake(hyper_io(stream), pool.h2_learned.clone()))
                .await
                .map_err(|e| handshake_failed(origin, &e))?;
            lock(&pool.h2).push(Arc::new(conn));
        }
    }

    /// A new connection to `origin` (TLS as its scheme says), with as much
    /// of `first` written as went out with the connect.
    async fn open(&self, origin: &Origin, first: &[u8]) -> Result<(Stream, usize), HttpError> {
        let tls = if origin.tls { Some(self.tls()?) } else { None };
        // Boxed: a dial (DNS, connect races, TLS) is a future of kilobytes;
        // inline it would size every request's future, which tokio moves
        // by value. Dials are rare, requests are not.
        match tokio::time::timeout(
            super::CONNECT_TIMEOUT,
            Box::pin(dial::open(
                origin,
                tls.as_ref(),
                first,
                self.settings().addresses,
            )),
        )
        .await
        {
            Ok(opened) => opened,
            Err(_) => Err(HttpError::ConnectTimeout(super::CONNECT_TIMEOUT)),
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The fullest live HTTP/2 connection with room for one more stream
/// (ended ones are dropped from the pool on the way).
fn pick_h2(conns: &std::sync::Mutex<Vec<Arc<H2Conn>>>) -> Option<Arc<H2Conn>> {
    let mut list = lock(conns);
    list.retain(|c| !c.ended());
    list.iter()
        .filter(|c| c.has_room())
        .max_by_key(|c| c.in_flight())
        .cloned()
}

/// What the server chose in the TLS handshake.
fn alpn(stream: &Stream) -> Option<&[u8]> {
    match stream {
        Stream::Plain(_) => None,
        Stream::Tls(t) => t.get_ref().1.alpn_protocol(),
    }
}

/// A stream as hyper reads it.
fn hyper_io(stream: Stream) -> HyperIo {
    match stream {
        Stream::Plain(s) => HyperIo::Plain(s),
        Stream::Tls(t) => HyperIo::Tls(TokioIo::new(t)),
    }
}

fn handshake_failed(origin: &Origin, e: &hyper::Error) -> HttpError {
    HttpError::Connect {
        addr: origin.base(),
        reason: format!("HTTP handshake failed: {e}"),
    }
}

/// A failure after the request was written with no response byte.
fn no_response(e: HttpError) -> HttpError {
    match e {
        HttpError::NoResponse(_) => e,
        other => HttpError::NoResponse(other.to_string()),
    }
}

/// Through a proxy in absolute form (an http target's requests), the
/// request target is the whole URL and the proxy's credentials go along.
fn absolute_form(origin: &Origin) -> Option<&ProxyRoute> {
    origin.route.as_ref().filter(|r| !r.connect)
}

/// The request's head in HTTP/1.1 bytes for our own writer (its body's
/// pieces follow it on the wire as they are).
fn render(req: &Request<'_>, origin: &Origin) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(192 + req.headers.lines.len());
    let mut extra: [(&str, &str); 3] = [("", ""); 3];
    let mut n = 0;
    let proxied = absolute_form(origin);
    if let Some(auth) = proxied.and_then(|r| r.auth.as_deref()) {
        extra[n] = ("Proxy-Authorization", auth);
        n += 1;
    }
    let absolute;
    let target = match proxied {
        Some(_) => {
            absolute = format!("{}{}", origin.base(), req.endpoint.path);
            absolute.as_str()
        }
        None => req.endpoint.path.as_str(),
    };
    if let Some(body) = req.body {
        extra[n] = ("Content-Type", body.content_type);
        n += 1;
    }
    if let Some(id) = req.request_id {
        extra[n] = ("x-request-id", id);
        n += 1;
    }
    wire::render_request(
        &mut bytes,
        req.method,
        target,
        &origin.host_header,
        &req.headers.lines,
        &extra[..n],
        req.body.map(|b| b.len()),
    );
    bytes
}

/// The request for hyper: origin-form with `Host` on HTTP/1.1, absolute
/// (scheme and authority) on HTTP/2.
fn hyper_request(
    req: &Request<'_>,
    origin: &Origin,
    h2: bool,
    keep_alive: bool,
) -> Result<http::Request<ReqBody>, HttpError> {
    let proxied = absolute_form(origin);
    let uri = if h2 || proxied.is_some() {
        format!("{}{}", origin.base(), req.endpoint.path)
    } else {
        req.endpoint.path.clone()
    };
    let method = match req.method {
        Method::Get => http::Method::GET,
        Method::Post => http::Method::POST,
    };
    // hyper takes one buffer: a body of one piece is shared, of several joined
    let body = Full::new(match req.body.map(|b| b.parts) {
        None | Some([]) => Bytes::new(),
        Some([one]) => one.clone(),
        Some(parts) => Bytes::from(parts.concat()),
    });
    let mut request = http::Request::builder()
        .method(method)
        .uri(&uri)
        .body(body)
        .map_err(|e| HttpError::BadUrl {
            url: uri.clone(),
            reason: e.to_string(),
        })?;
    let headers = request.headers_mut();
    *headers = req.headers.map.clone();
    if !h2 {
        if let Ok(host) = http::HeaderValue::from_str(&origin.host_header) {
            headers.insert(http::header::HOST, host);
        }
        if !keep_alive {
            headers.insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
        }
    }
    if let Some(value) = req
        .body
        .and_then(|b| http::HeaderValue::from_str(b.content_type).ok())
    {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    if let Some(auth) = proxied
        .and_then(|r| r.auth.as_deref())
        .and_then(|a| http::HeaderValue::from_str(a).ok())
    {
        headers.insert(http::header::PROXY_AUTHORIZATION, auth);
    }
    if let Some(id) = req
        .request_id
        .and_then(|id| http::HeaderValue::from_str(id).ok())
    {
        headers.insert(http::HeaderName::from_static("x-request-id"), id);
    }
    Ok(request)
}

/// Write the request and read the response head: the bytes written, when
/// the last of them went to the socket, and the head or the failure with
/// whether any response byte had arrived. A
/// write that fails may still have a response waiting (a server that
/// answered early and closed), so the head is read either way.
async fn exchange_head(
    conn: &mut Conn,
    parts: &[&[u8]],
    skip: usize,
) -> (
    usize,
    tokio::time::Instant,
    Result<wire::Head, (ResponsePhase, HttpError)>,
) {
    let (written, outcome) = conn.send(parts, skip).await;
    let at = tokio::time::Instant::now();
    let head = match (outcome, conn.read_head().await) {
        (_, Ok(head)) => Ok(head),
        (Err(w), Err((ResponsePhase::NotStarted, _))) => Err((
            ResponsePhase::NotStarted,
            HttpError::Io(format!("sending the request: {w}")),
        )),
        (_, Err(e)) => Err(e),
    };
    (written, at, head)
}

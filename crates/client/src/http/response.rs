//! A response whose head has arrived, and its body read piece by piece,
//! each piece with the instant its bytes arrived; a connection whose body
//! was read to its end goes back to its origin's pool.

use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use tokio::time::Instant;

use super::conn::Conn;
use super::endpoint::Origin;
use super::h1::H1Conn;
use super::h2::{H2Conn, Slot, StreamReader};
use super::tcp_info::rtt;
use super::wire::{Framing, Head};
use super::{HttpError, MAX_FETCH_BODY};
use cicada_metrics::Resends;

/// Which HTTP version carried a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// A response whose head has arrived; its body is read with [`Response::chunk`].
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    /// The `Location` header (a redirect's target).
    pub location: Option<String>,
    /// When the attempt that got this response began (before its connect,
    /// if it needed one): the request's send time.
    pub sent: Instant,
    /// When the request's last byte went to the socket (HTTP/1.1 over
    /// cicada's writer; `None` on hyper's, which does not say).
    pub written: Option<Instant>,
    /// Times the request went again because it provably never reached the
    /// server (see `send`), by reason.
    pub resends: Resends,
    /// The HTTP version that carried it.
    pub protocol: Protocol,
    /// It went on a connection that had carried an earlier request.
    pub reused: bool,
    /// The address its connection went to (a proxy's, through a proxy).
    pub peer: Option<std::net::SocketAddr>,
    /// Body pieces whose arrival instant is an upper bound, not the exact
    /// read (HTTP/2, a piece queued while its reader was busy).
    pub inexact_stamps: u32,
    body: Body,
    origin: Arc<Origin>,
}

/// Where the body comes from.
enum Body {
    /// Our own HTTP/1.1 reader.
    Wire {
        conn: Option<Conn>,
        framing: Framing,
        keep_alive: bool,
    },
    /// HTTP/1.1 on hyper, driven by this task.
    H1 {
        /// Boxed: hyper's connection state is large beside the other variants.
        conn: Option<Box<H1Conn>>,
        body: Incoming,
        current: Bytes,
        ended: bool,
        keep_alive: bool,
    },
    /// A stream of an HTTP/2 connection.
    H2 {
        body: Incoming,
        reader: StreamReader,
        current: Bytes,
        /// Its place on the connection, given back when the response drops.
        _slot: Slot,
    },
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Body::Wire { .. } => "Wire",
            Body::H1 { .. } => "H1",
            Body::H2 { .. } => "H2",
        })
    }
}

/// A header's value as text.
fn header(resp: &http::Response<Incoming>, name: http::header::HeaderName) -> Option<String> {
    resp.headers()
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
}

impl Response {
    fn new(status: u16, protocol: Protocol, reused: bool, body: Body, origin: Arc<Origin>) -> Self {
        Self {
            status,
            content_type: None,
            location: None,
            sent: Instant::now(),
            written: None,
            resends: Resends::default(),
            protocol,
            reused,
            peer: None,
            inexact_stamps: 0,
            body,
            origin,
        }
    }

    /// A response on our own HTTP/1.1 reader.
    pub(crate) fn wire(
        conn: Conn,
        head: Head,
        reused: bool,
        origin: Arc<Origin>,
        keep_alive: bool,
    ) -> Self {
        let peer = conn.peer();
        let body = Body::Wire {
            conn: Some(conn),
            framing: head.framing,
            keep_alive: keep_alive && head.keep_alive,
        };
        let mut r = Self::new(head.status, Protocol::Http1, reused, body, origin);
        r.peer = peer;
        r.content_type = head.content_type;
        r.location = head.location;
        if matches!(
            r.body,
            Body::Wire {
                framing: Framing::Done,
                ..
            }
        ) {
            r.finish();
        }
        r
    }

    /// A response on hyper's HTTP/1.1.
    pub(crate) fn h1(
        resp: http::Response<Incoming>,
        conn: H1Conn,
        reused: bool,
        origin: Arc<Origin>,
        keep_alive: bool,
    ) -> Self {
        let (content_type, location) = (
            header(&resp, http::header::CONTENT_TYPE),
            header(&resp, http::header::LOCATION),
        );
        let status = resp.status().as_u16();
        let peer = conn.peer();
        let body = Body::H1 {
            conn: Some(Box::new(conn)),
            body: resp.into_body(),
            current: Bytes::new(),
            ended: false,
            keep_alive,
        };
        let mut r = Self::new(status, Protocol::Http1, reused, body, origin);
        r.peer = peer;
        r.content_type = content_type;
        r.location = location;
        r
    }

    /// A response on a stream of an HTTP/2 connection.
    pub(crate) fn h2(
        resp: http::Response<Incoming>,
        conn: &H2Conn,
        slot: Slot,
        reused: bool,
        origin: Arc<Origin>,
    ) -> Self {
        let reader = conn.reader();
        let (content_type, location) = (
            header(&resp, http::header::CONTENT_TYPE),
            header(&resp, http::header::LOCATION),
        );
        let status = resp.status().as_u16();
        let body = Body::H2 {
            body: resp.into_body(),
            reader,
            current: Bytes::new(),
            _slot: slot,
        };
        let mut r = Self::new(status, Protocol::Http2, reused, body, origin);
        r.peer = conn.peer();
        r.content_type = content_type;
        r.location = location;
        r
    }

    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The next piece of the body and the instant its bytes were read;
    /// `None` once the body is complete.
    pub async fn chunk(&mut self) -> Result<Option<(&[u8], Instant)>, HttpError> {
        let got = match &mut self.body {
            Body::Wire { conn, framing, .. } => {
                let Some(c) = conn.as_mut() else {
                    return Ok(None);
                };
                match c.next_piece(framing, MAX_FETCH_BODY).await {
                    Ok(Some((range, at))) => Piece::Wire(range, at),
                    Ok(None) => Piece::End,
                    Err(e) => {
                        *conn = None;
                        return Err(e);
                    }
                }
            }
            Body::H1 {
                conn: Some(c),
                body,
                current,
                ended: false,
                ..
            } => match std::future::poll_fn(|cx| c.poll_chunk(body, cx)).await {
                Some(Ok((data, at))) => {
                    *current = data;
                    Piece::Held(at)
                }
                None => Piece::End,
                Some(Err(e)) => return Err(body_error(&e)),
            },
            Body::H1 { .. } => return Ok(None),
            Body::H2 {
                body,
                reader,
                current,
                ..
            } => match std::future::poll_fn(|cx| reader.poll_chunk(body, cx)).await {
                Some(Ok((data, at, exact))) => {
                    *current = data;
                    if !exact {
                        self.inexact_stamps += 1;
                    }
                    Piece::Held(at)
                }
                None => Piece::End,
                Some(Err(e)) => return Err(body_error(&e)),
            },
        };
        match got {
            Piece::End => {
                if let Body::H1 { ended, .. } = &mut self.body {
                    *ended = true;
                }
                self.finish();
                Ok(None)
            }
            Piece::Wire(range, at) => Ok(match &self.body {
                Body::Wire { conn: Some(c), .. } => Some((c.bytes(range), at)),
                _ => None,
            }),
            Piece::Held(at) => Ok(match &self.body {
                Body::H1 { current, .. } | Body::H2 { current, .. } => Some((&current[..], at)),
                Body::Wire { .. } => None,
            }),
        }
    }

    /// The body is complete: the connection waits in its origin's pool if
    /// it may carry another request.
    fn finish(&mut self) {
        let pool = &self.origin.pool;
        match &mut self.body {
            Body::Wire {
                conn,
                framing,
                keep_alive,
            } => {
                if let Some(mut c) = conn.take()
                    && *keep_alive
                    && *framing == Framing::Done
                    && c.drained()
                {
                    c.park();
                    let fd = c.fd();
                    pool.park_wire(c, || rtt(fd));
                }
            }
            Body::H1 {
                conn,
                ended: true,
                keep_alive,
                ..
            } => {
                if let Some(mut c) = conn.take()
                    && *keep_alive
                    && c.idle()
                {
                    let fd = c.fd();
                    pool.park_h1(*c, || rtt(fd));
                }
            }
            Body::H1 { .. } | Body::H2 { .. } => {}
        }
    }
}

/// What one read of the body gave.
enum Piece {
    /// A range of our own reader's buffer.
    Wire(std::ops::Range<usize>, Instant),
    /// Bytes held in the response (hyper's).
    Held(Instant),
    End,
}

/// A body that broke, as a request failure's text.
fn body_error(e: &hyper::Error) -> HttpError {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    HttpError::Io(text)
}

impl Drop for Response {
    fn drop(&mut self) {
        // a body read to its end goes back to the pool; one abandoned midway
        // (an error event, a cancel) leaves the connection to close
        if matches!(
            self.body,
            Body::Wire {
                framing: Framing::Done,
                ..
            }
        ) {
            self.finish();
        }
    }
}

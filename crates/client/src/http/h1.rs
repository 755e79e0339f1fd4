//! HTTP/1.1 on hyper, driven by the task that wants the response.
//!
//! hyper's client connection is a future that does the IO. Spawning it (as
//! most hyper clients and our floor client do) costs a second task and a
//! cross-task wake per body chunk; here the request's own task polls the
//! connection beside the response, so a chunk is read, decoded and handed
//! over in one poll. That also keeps stamps exact: hyper's body channel holds
//! one chunk, and the connection reads the socket again only after that
//! chunk was taken, so the link's latest read when a chunk is taken is the
//! read that completed it.

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Body as _;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use tokio::time::Instant;

use super::io::{HyperIo, Link};

/// Request bodies are whole (JSON built before the send).
pub(crate) type ReqBody = Full<Bytes>;

/// One HTTP/1.1 connection, not spawned: polled by whoever uses it.
pub(crate) struct H1Conn {
    sender: http1::SendRequest<ReqBody>,
    /// The connection future; kept (with its socket) after it ended, so
    /// the socket can still tell what happened to it.
    conn: http1::Connection<HyperIo, ReqBody>,
    ended: bool,
    link: Arc<Link>,
    fd: RawFd,
    /// Requests it carried (1 = fresh).
    pub uses: u32,
}

impl std::fmt::Debug for H1Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H1Conn").field("uses", &self.uses).finish()
    }
}

/// Why a request on an HTTP/1.1 connection failed.
pub(crate) struct H1Failure {
    pub error: hyper::Error,
    /// The request, when hyper never wrote it (safe to send again).
    pub unsent: Option<http::Request<ReqBody>>,
}

impl H1Conn {
    /// A connection over `io` (no IO happens here).
    pub async fn handshake(io: HyperIo) -> Result<Self, hyper::Error> {
        let link = io.link().clone();
        let fd = io.fd();
        let (sender, conn) = http1::Builder::new().handshake(io).await?;
        Ok(Self {
            sender,
            conn,
            ended: false,
            link,
            fd,
            uses: 0,
        })
    }

    /// The address the connection went to.
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.link.peer
    }

    /// The socket, for checks that read nothing (TCP state).
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Poll the connection future once: `true` while it runs.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if self.ended {
            return false;
        }
        // never shut the socket down: after a failure it still has to tell
        // whether the server reset our request unread (`send::crossed_close`)
        match self.conn.poll_without_shutdown(cx) {
            Poll::Pending => true,
            Poll::Ready(r) => {
                if let Err(e) = r {
                    tracing::trace!(error = %e, "an HTTP/1.1 connection ended");
                }
                self.ended = true;
                false
            }
        }
    }

    /// Whether an idle connection can take a request: polled once without
    /// a waker, hyper reads an end-of-stream (or TLS close) the server sent
    /// while it waited, and closes.
    pub fn reusable(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        self.drive(&mut cx) && self.sender.is_ready() && !self.sender.is_closed()
    }

    /// Send `req` and wait for its response head, driving the connection.
    pub async fn send(
        &mut self,
        req: http::Request<ReqBody>,
    ) -> Result<http::Response<Incoming>, H1Failure> {
        self.uses += 1;
        let mut response = std::pin::pin!(self.sender.try_send_request(req));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = response.as_mut().poll(cx) {
                return Poll::Ready(r);
            }
            // the connection wrote or read (the answer may be in), or it
            // ended (hyper answers with its error)
            self.drive(cx);
            response.as_mut().poll(cx)
        })
        .await
        .map_err(|mut e| H1Failure {
            unsent: e.take_message(),
            error: e.into_error(),
        })
    }

    /// The next data of `body`, with the instant its bytes arrived; `None`
    /// at its end, after which the connection is ready again if the response
    /// allowed it.
    pub fn poll_chunk(
        &mut self,
        body: &mut Incoming,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(Bytes, Instant), hyper::Error>>> {
        if let Some(got) = self.take(body, cx) {
            return got;
        }
        // nothing handed over yet: let the connection read, then look again
        self.drive(cx);
        self.take(body, cx).unwrap_or(Poll::Pending)
    }

    /// What the body has for us now: `None` when nothing is queued (or a
    /// frame without data was skipped: look again).
    #[allow(clippy::type_complexity, reason = "one poll result, spelled out once")]
    fn take(
        &mut self,
        body: &mut Incoming,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Option<Result<(Bytes, Instant), hyper::Error>>>> {
        loop {
            match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Pending => return None,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    // one chunk in flight at a time: the latest read completed it
                    Ok(data) if !data.is_empty() => {
                        return Some(Poll::Ready(Some(Ok((data, self.link.latest().0)))));
                    }
                    // empty data and trailers carry no content
                    _ => continue,
                },
                Poll::Ready(Some(Err(e))) => return Some(Poll::Ready(Some(Err(e)))),
                Poll::Ready(None) => {
                    // the connection returns to its idle state
                    self.drive(cx);
                    return Some(Poll::Ready(None));
                }
            }
        }
    }

    /// After a whole response: the connection may carry another request.
    pub fn idle(&mut self) -> bool {
        self.reusable()
    }
}

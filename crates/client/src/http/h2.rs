//! HTTP/2 on hyper: one spawned task drives each connection, every request
//! is a stream on it, read by its own task.
//!
//! A stream's frames are stamped by a waker: h2 wakes the stream's task
//! from inside the connection's processing of the read that delivered the
//! frame, and [`StampWaker`] copies the connection's latest read stamp at
//! that moment. A frame the task finds already queued (it was busy when the
//! frame came) is exact only when no socket read happened since the frame
//! that woke it; otherwise its stamp is the latest read's, an upper bound,
//! and it is counted as inexact (a client-health signal: the reader fell
//! behind).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use bytes::Bytes;
use http_body::Body as _;
use hyper::body::Incoming;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::time::Instant;

use super::h1::ReqBody;
use super::io::{HyperIo, Link};

/// Streams a fresh connection is assumed to allow until the server's
/// SETTINGS say (hyper's own default), unless another connection of the
/// origin has seen them.
const ASSUMED_STREAMS: u32 = 100;

/// What an origin's HTTP/2 connections taught about its server, for the
/// next connections.
#[derive(Debug, Default)]
pub(crate) struct H2Learned {
    /// SETTINGS_MAX_CONCURRENT_STREAMS once a connection saw it (0: not
    /// yet): a new connection allows that many streams from the start,
    /// instead of an assumption its server would refuse.
    streams: AtomicU32,
    /// Streams the server answers on one connection before it says GOAWAY
    /// (nginx's `keepalive_requests`; 0: not seen): a connection is not
    /// given more, so a burst is not turned away again and again.
    per_conn: AtomicU64,
}

/// What a connection's driver and its users share.
#[derive(Debug)]
pub(crate) struct H2State {
    /// Streams open on it now (taken at checkout, given back when the
    /// response is done with).
    in_flight: AtomicU32,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS as the driver last saw it.
    limit: AtomicU32,
    /// Streams it carried so far.
    opened: AtomicU64,
    /// Streams the server turned away unprocessed as the connection ended.
    turned: AtomicU64,
    /// The connection ended (GOAWAY done, closed, failed).
    ended: AtomicBool,
}

/// One HTTP/2 connection.
#[derive(Debug)]
pub(crate) struct H2Conn {
    sender: http2::SendRequest<ReqBody>,
    link: Arc<Link>,
    state: Arc<H2State>,
    learned: Arc<H2Learned>,
}

impl H2Conn {
    /// Handshake over `io` (the connection preface goes out) and spawn its
    /// driver. Until the server's SETTINGS arrive the stream limit is the
    /// one `learned` from the origin's earlier connections (else
    /// [`ASSUMED_STREAMS`]); once they arrive the driver records the
    /// server's limit there for the origin's next connections.
    pub async fn handshake(io: HyperIo, learned: Arc<H2Learned>) -> Result<Self, hyper::Error> {
        let link = io.link().clone();
        let known = learned.clone();
        let limit = match known.streams.load(Ordering::Relaxed) {
            0 => ASSUMED_STREAMS,
            n => n,
        };
        let (sender, mut conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .initial_max_send_streams(limit as usize)
            .handshake(io)
            .await?;
        let state = Arc::new(H2State {
            in_flight: AtomicU32::new(0),
            limit: AtomicU32::new(limit),
            opened: AtomicU64::new(0),
            turned: AtomicU64::new(0),
            ended: AtomicBool::new(false),
        });
        let shared = state.clone();
        tokio::spawn(async move {
            let ended = std::future::poll_fn(|cx| {
                let r = Pin::new(&mut conn).poll(cx);
                let now = u32::try_from(conn.current_max_send_streams()).unwrap_or(u32::MAX);
                if now != limit {
                    // the server's SETTINGS said otherwise than assumed
                    known.streams.store(now.max(1), Ordering::Relaxed);
                }
                shared.limit.store(now.max(1), Ordering::Relaxed);
                r
            })
            .await;
            if let Err(e) = ended {
                tracing::debug!(error = %e, "an HTTP/2 connection ended");
            }
            shared.ended.store(true, Ordering::Release);
        });
        Ok(Self {
            sender,
            link,
            state,
            learned,
        })
    }

    /// The address the connection went to.
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.link.peer
    }

    /// Whether it can take one more stream now.
    pub fn has_room(&self) -> bool {
        !self.state.ended.load(Ordering::Acquire)
            && !self.sender.is_closed()
            && self.state.in_flight.load(Ordering::Relaxed)
                < self.state.limit.load(Ordering::Relaxed)
            && match self.learned.per_conn.load(Ordering::Relaxed) {
                0 => true,
                n => self.state.opened.load(Ordering::Relaxed) < n,
            }
    }

    /// The connection ended: it takes no more streams.
    pub fn ended(&self) -> bool {
        self.state.ended.load(Ordering::Acquire) || self.sender.is_closed()
    }

    /// Streams open on it now.
    pub fn in_flight(&self) -> u32 {
        self.state.in_flight.load(Ordering::Relaxed)
    }

    /// Take a stream slot (given back when the returned guard drops);
    /// `reused` says whether the connection carried a stream before.
    pub fn take_slot(&self) -> (Slot, bool) {
        self.state.in_flight.fetch_add(1, Ordering::Relaxed);
        let reused = self.state.opened.fetch_add(1, Ordering::Relaxed) > 0;
        (
            Slot {
                state: self.state.clone(),
            },
            reused,
        )
    }

    /// Send `req` on a new stream; its response head, or why there is none
    /// (with the request when h2 never sent it).
    pub async fn send(
        &self,
        req: http::Request<ReqBody>,
    ) -> Result<http::Response<Incoming>, (hyper::Error, Option<http::Request<ReqBody>>)> {
        let mut sender = self.sender.clone();
        sender.try_send_request(req).await.map_err(|mut e| {
            let unsent = e.take_message();
            (e.into_error(), unsent)
        })
    }

    /// The server turned a stream away unprocessed because the connection
    /// is ending (GOAWAY, or closed with streams unsent): the streams it
    /// took are what the origin's connections carry. Every stream it turned
    /// away says so (they fail together, as the GOAWAY arrives), so the
    /// figure falls to the streams taken by the time the last one has.
    pub fn turned_away(&self) {
        let turned = self.state.turned.fetch_add(1, Ordering::Relaxed) + 1;
        let taken = self
            .state
            .opened
            .load(Ordering::Relaxed)
            .saturating_sub(turned);
        if taken > 0 {
            self.learned.per_conn.store(taken, Ordering::Relaxed);
        }
    }

    /// A reader of one stream's body, stamping its frames.
    pub fn reader(&self) -> StreamReader {
        StreamReader {
            waker: Arc::new(StampWaker {
                link: self.link.clone(),
                slot_ns: Mutex::new(None),
                inner: Mutex::new(None),
            }),
            waker_handle: None,
            used: None,
        }
    }
}

/// A stream's place on its connection, given back on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    state: Arc<H2State>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.state.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Copies the connection's latest read stamp at the moment h2 wakes the
/// stream's task, then wakes it.
#[derive(Debug)]
struct StampWaker {
    link: Arc<Link>,
    /// The stamp and read number of the read that woke us (unused yet).
    slot_ns: Mutex<Option<(Instant, u64)>>,
    /// The task's own waker.
    inner: Mutex<Option<Waker>>,
}

impl Wake for StampWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let stamp = self.link.latest();
        *self.slot_ns.lock().unwrap_or_else(|p| p.into_inner()) = Some(stamp);
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(w) = inner {
            w.wake();
        }
    }
}

/// Reads one stream's body (see the module docs for its stamps).
#[derive(Debug)]
pub(crate) struct StreamReader {
    waker: Arc<StampWaker>,
    waker_handle: Option<Waker>,
    /// The stamp, read number and exactness of the last frame taken.
    used: Option<(Instant, u64, bool)>,
}

impl StreamReader {
    /// The next data of `body`: bytes, the instant they arrived, and whether
    /// that instant is exact; `None` at the end.
    #[allow(clippy::type_complexity, reason = "one poll result, spelled out once")]
    pub fn poll_chunk(
        &mut self,
        body: &mut Incoming,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(Bytes, Instant, bool), hyper::Error>>> {
        {
            let mut inner = self.waker.inner.lock().unwrap_or_else(|p| p.into_inner());
            if !inner.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *inner = Some(cx.waker().clone());
            }
        }
        let waker = self
            .waker_handle
            .get_or_insert_with(|| Waker::from(self.waker.clone()))
            .clone();
        let mut own = Context::from_waker(&waker);
        loop {
            let before = self.waker.link.latest();
            match Pin::new(&mut *body).poll_frame(&mut own) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if data.is_empty() {
                        continue;
                    }
                    let (at, exact) = self.stamp(before);
                    return Poll::Ready(Some(Ok((data, at, exact))));
                }
            }
        }
    }

    /// The stamp of a frame just taken; `before` is the link as it was
    /// right before the poll that returned it.
    fn stamp(&mut self, before: (Instant, u64)) -> (Instant, bool) {
        let woke = self
            .waker
            .slot_ns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((at, seq)) = woke {
            // it came while we waited: the read that woke us delivered it
            self.used = Some((at, seq, true));
            return (at, true);
        }
        match self.used {
            // no read since the last frame taken: the same read delivered it
            Some((at, seq, exact)) if seq == before.1 => (at, exact),
            // queued behind an unread frame: some read up to now delivered it
            _ => {
                self.used = Some((before.0, before.1, false));
                (before.0, false)
            }
        }
    }
}

/// The `h2::Error` inside a hyper error, if it carries one.
pub(crate) fn h2_error(e: &hyper::Error) -> Option<&h2::Error> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h2) = s.downcast_ref::<h2::Error>() {
            return Some(h2);
        }
        source = s.source();
    }
    None
}

//! The worker port's connections, and what a stranger may hold of them: at
//! most [`UNAUTHENTICATED_MAX`] connections that have not yet attached with
//! the token, each for at most [`UNAUTHENTICATED_LIFETIME`]. A connection
//! over the bound is closed as soon as it is accepted; one that outlives its
//! time unauthenticated is closed. Once an attach on it proves the token, it
//! gives its place back and lives as long as the worker does.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;
use tonic::transport::server::Connected;

/// Most connections that may be open without having proved the token.
pub(super) const UNAUTHENTICATED_MAX: usize = 64;

/// How long an attach may take to send its hello.
pub(super) const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may stay without an attach that proved the token:
/// the hello timeout, plus time for the TLS handshake before it and for a
/// refusal to reach the worker after it.
pub(super) const UNAUTHENTICATED_LIFETIME: Duration = Duration::from_secs(15);

/// How long to wait before accepting again after `accept` failed (out of
/// file descriptors, say): the listener stays up, and the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// The listener's connections, as the gRPC server takes them.
pub(super) struct Incoming {
    listener: TcpListener,
    unauthenticated: Arc<Semaphore>,
    /// Set while accepting pauses after an error.
    pause: Option<Pin<Box<Sleep>>>,
    refused: Throttled,
}

impl Incoming {
    /// Connections accepted on `listener`.
    pub(super) fn new(listener: TcpListener) -> Self {
        Self {
            listener,
            unauthenticated: Arc::new(Semaphore::new(UNAUTHENTICATED_MAX)),
            pause: None,
            refused: Throttled::default(),
        }
    }
}

impl Stream for Incoming {
    type Item = io::Result<Conn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(pause) = &mut self.pause {
                std::task::ready!(pause.as_mut().poll(cx));
                self.pause = None;
            }
            let (stream, peer) = match std::task::ready!(self.listener.poll_accept(cx)) {
                Ok(accepted) => accepted,
                Err(e) => {
                    // a failed accept must not end the server (tonic stops on most errors)
                    tracing::warn!(error = %e, "cannot accept a worker connection; retrying");
                    self.pause = Some(Box::pin(tokio::time::sleep(ACCEPT_RETRY)));
                    continue;
                }
            };
            let Ok(permit) = self.unauthenticated.clone().try_acquire_owned() else {
                if let Some(more) = self.refused.count() {
                    tracing::warn!(
                        %peer,
                        also_refused = more,
                        "refused a connection: {UNAUTHENTICATED_MAX} connections have not authenticated yet"
                    );
                }
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            return Poll::Ready(Some(Ok(Conn::new(stream, peer, permit))));
        }
    }
}

/// Logs a flood once a second, not once an event: counts the events in between.
#[derive(Default)]
struct Throttled {
    last: Option<Instant>,
    since: u64,
}

impl Throttled {
    /// `Some(events since the last log)` when this event should be logged.
    fn count(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.since += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

/// What the server knows of a connection, in every request that arrives on it.
#[derive(Debug, Clone)]
pub(super) struct ConnInfo {
    /// The worker's address.
    pub peer: SocketAddr,
    /// Our address as the worker reached it.
    pub local: Option<SocketAddr>,
    state: Arc<ConnState>,
}

#[derive(Debug)]
struct ConnState {
    /// Its place among the unauthenticated; `None` once given back.
    place: Mutex<Option<OwnedSemaphorePermit>>,
    authenticated: AtomicBool,
    /// An attach was tried on it (and logged as refused if it failed).
    attached: AtomicBool,
}

impl ConnInfo {
    /// An attach on this connection proved the token: it leaves the
    /// unauthenticated (its place is free for another) and may stay.
    pub(super) fn authenticated(&self) {
        self.state.authenticated.store(true, Ordering::Release);
        self.state.give_back();
    }

    /// An attach was tried on this connection.
    pub(super) fn attached(&self) {
        self.state.attached.store(true, Ordering::Relaxed);
    }
}

impl ConnState {
    fn give_back(&self) {
        let place = self.place.lock().map(|mut p| p.take());
        drop(place);
    }
}

/// One accepted connection: its socket, its place among the unauthenticated
/// and the time it has left to prove the token.
pub(super) struct Conn {
    io: TcpStream,
    info: ConnInfo,
    /// When it is closed unless authenticated; `None` once authenticated.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl Conn {
    fn new(io: TcpStream, peer: SocketAddr, place: OwnedSemaphorePermit) -> Self {
        let local = io.local_addr().ok();
        Self {
            io,
            info: ConnInfo {
                peer,
                local,
                state: Arc::new(ConnState {
                    place: Mutex::new(Some(place)),
                    authenticated: AtomicBool::new(false),
                    attached: AtomicBool::new(false),
                }),
            },
            deadline: Some(Box::pin(tokio::time::sleep(UNAUTHENTICATED_LIFETIME))),
        }
    }

    /// An error once the connection outlived its time unauthenticated.
    fn check_deadline(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Some(deadline) = &mut self.deadline else {
            return Ok(());
        };
        if self.info.state.authenticated.load(Ordering::Acquire) {
            self.deadline = None;
            return Ok(());
        }
        if deadline.as_mut().poll(cx).is_pending() {
            return Ok(());
        }
        self.deadline = None;
        if self.info.state.attached.load(Ordering::Relaxed) {
            // its attach was refused, and logged as such
            tracing::debug!(peer = %self.info.peer, "closed a refused connection");
        } else {
            tracing::warn!(
                peer = %self.info.peer,
                "closed a connection that did not attach within {UNAUTHENTICATED_LIFETIME:?}"
            );
        }
        self.info.state.give_back();
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the connection did not authenticate in time",
        ))
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // requests still holding the info must not hold the place
        self.info.state.give_back();
    }
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        self.info.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Err(e) = this.check_deadline(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

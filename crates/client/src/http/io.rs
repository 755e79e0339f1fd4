//! A TCP connection whose every read carries the kernel's receive stamp,
//! under TLS and HTTP alike.
//!
//! [`StampedTcp`] reads with `recvmsg` (see `rx_time`) and writes the stamp
//! of its latest read into the connection's [`Link`]. Whatever sits on top
//! (rustls reading ciphertext, hyper reading a response, our own HTTP/1.1
//! reader) hands bytes up only from the read that completed them, so the
//! link's stamp at that moment is the instant those bytes reached the
//! socket: TLS targets get kernel stamps as plain ones do, and a frame's
//! stamp no longer depends on when the task that wants it got to run.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use super::rx_time;

/// The process's time base for stamps kept as integers.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn to_ns(at: Instant) -> u64 {
    at.saturating_duration_since(epoch()).as_nanos() as u64
}

/// What one connection's reads have seen, shared with whoever reads its
/// frames (a stream of an HTTP/2 connection is read by its own task).
#[derive(Debug, Default)]
pub(crate) struct Link {
    /// The latest read's receive instant, ns since [`epoch`] (0: no read yet).
    rx_ns: AtomicU64,
    /// Reads that returned data so far.
    rx_seq: AtomicU64,
    /// The address the connection went to (a proxy's, through a proxy).
    pub peer: Option<std::net::SocketAddr>,
}

impl Link {
    /// Record a read of data that arrived at `at` (a stamp never goes back:
    /// bytes read later never arrived earlier, and an unstamped read's own
    /// instant can be later than the next read's kernel stamp).
    fn record(&self, at: Instant) {
        let ns = to_ns(at).max(self.rx_ns.load(Ordering::Relaxed));
        self.rx_ns.store(ns, Ordering::Release);
        self.rx_seq.fetch_add(1, Ordering::Release);
    }

    /// The latest read's instant and its sequence number (0: none yet).
    pub fn latest(&self) -> (Instant, u64) {
        let seq = self.rx_seq.load(Ordering::Acquire);
        let ns = self.rx_ns.load(Ordering::Acquire);
        (epoch() + Duration::from_nanos(ns), seq)
    }
}

/// A TCP stream read with kernel receive stamps (see the module docs).
#[derive(Debug)]
pub(crate) struct StampedTcp {
    tcp: TcpStream,
    link: std::sync::Arc<Link>,
}

impl StampedTcp {
    /// Wrap a connected (or connecting) stream whose socket has
    /// `SO_TIMESTAMPNS` on.
    pub fn new(tcp: TcpStream) -> Self {
        let link = Link {
            peer: tcp.peer_addr().ok(),
            ..Link::default()
        };
        Self {
            tcp,
            link: std::sync::Arc::new(link),
        }
    }

    /// The connection's shared read record.
    pub fn link(&self) -> &std::sync::Arc<Link> {
        &self.link
    }

    /// The socket, for checks that do not read (peek, TCP_INFO).
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Read into the memory at `ptr` (`len` bytes, possibly uninitialised):
    /// the count read. The stamp of a read with data goes to the link.
    fn poll_read_into(
        &self,
        cx: &mut Context<'_>,
        ptr: *mut u8,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        let fd = self.tcp.as_raw_fd();
        loop {
            ready!(self.tcp.poll_read_ready(cx))?;
            let mut got = None;
            // A short read emptied the socket: answering WouldBlock from
            // inside the same `try_io` clears the readiness event taken
            // *before* the read, so the next read waits for the next event
            // instead of paying a read that finds nothing (tokio's own reads
            // do the same). Clearing from a second `try_io` would take the
            // event current *after* the read and could forget bytes that
            // arrived meanwhile, leaving them unread for good.
            let r = self.tcp.try_io(Interest::READABLE, || {
                let (n, at) = rx_time::recv_raw(fd, ptr, len)?;
                got = Some((n, at));
                if n > 0 && n < len {
                    Err(io::Error::from(io::ErrorKind::WouldBlock))
                } else {
                    Ok(())
                }
            });
            match (got, r) {
                (Some((n, at)), _) => {
                    if n > 0 {
                        self.link.record(at.unwrap_or_else(Instant::now));
                    }
                    return Poll::Ready(Ok(n));
                }
                (None, Err(e)) if e.kind() == io::ErrorKind::WouldBlock => continue,
                (None, Err(e)) => return Poll::Ready(Err(e)),
                (None, Ok(())) => continue,
            }
        }
    }
}

impl AsyncRead for StampedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: recvmsg only writes into the unfilled part; we mark as
        // initialised and filled exactly the bytes it wrote.
        let unfilled = unsafe { buf.unfilled_mut() };
        let (ptr, len) = (unfilled.as_mut_ptr().cast::<u8>(), unfilled.len());
        let n = ready!(self.poll_read_into(cx, ptr, len))?;
        // SAFETY: the kernel initialised the first `n` unfilled bytes
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

// Vectored writes go to the socket as one `writev`: without these two
// methods the traits' defaults write only the first piece per call, so a
// request's head and body pieces left in one syscall (and segment) each.
impl AsyncWrite for StampedTcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

impl hyper::rt::Read for StampedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: recvmsg only writes into the cursor's memory; we advance
        // by exactly the bytes it wrote
        let unfilled = unsafe { buf.as_mut() };
        let (ptr, len) = (unfilled.as_mut_ptr().cast::<u8>(), unfilled.len());
        let n = ready!(self.poll_read_into(cx, ptr, len))?;
        // SAFETY: the kernel initialised the first `n` bytes
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

// hyper writes through the same methods as tokio's trait above.
impl hyper::rt::Write for StampedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        AsyncWrite::poll_write(self, cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        AsyncWrite::poll_write_vectored(self, cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        AsyncWrite::is_write_vectored(self)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        AsyncWrite::poll_flush(self, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        AsyncWrite::poll_shutdown(self, cx)
    }
}

/// A connection as hyper reads it: plain, or TLS over a stamped socket.
#[derive(Debug)]
pub(crate) enum HyperIo {
    Plain(StampedTcp),
    Tls(TokioIo<Box<TlsStream<StampedTcp>>>),
}

impl HyperIo {
    /// The stamped socket underneath.
    fn tcp(&self) -> &StampedTcp {
        match self {
            HyperIo::Plain(t) => t,
            HyperIo::Tls(t) => t.inner().get_ref().0,
        }
    }

    /// The connection's shared read record.
    pub fn link(&self) -> &std::sync::Arc<Link> {
        self.tcp().link()
    }

    /// The socket's descriptor, for checks that read nothing.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.tcp().tcp().as_raw_fd()
    }
}

impl hyper::rt::Read for HyperIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HyperIo::Plain(t) => hyper::rt::Read::poll_read(Pin::new(t), cx, buf),
            HyperIo::Tls(t) => hyper::rt::Read::poll_read(Pin::new(t), cx, buf),
        }
    }
}

impl hyper::rt::Write for HyperIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HyperIo::Plain(t) => hyper::rt::Write::poll_write(Pin::new(t), cx, buf),
            HyperIo::Tls(t) => hyper::rt::Write::poll_write(Pin::new(t), cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            HyperIo::Plain(t) => hyper::rt::Write::poll_write_vectored(Pin::new(t), cx, bufs),
            HyperIo::Tls(t) => hyper::rt::Write::poll_write_vectored(Pin::new(t), cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            HyperIo::Plain(t) => hyper::rt::Write::is_write_vectored(t),
            HyperIo::Tls(t) => hyper::rt::Write::is_write_vectored(t),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HyperIo::Plain(t) => hyper::rt::Write::poll_flush(Pin::new(t), cx),
            HyperIo::Tls(t) => hyper::rt::Write::poll_flush(Pin::new(t), cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            HyperIo::Plain(t) => hyper::rt::Write::poll_shutdown(Pin::new(t), cx),
            HyperIo::Tls(t) => hyper::rt::Write::poll_shutdown(Pin::new(t), cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_keeps_the_latest_read_and_never_goes_back() {
        let link = Link::default();
        assert_eq!(link.latest().1, 0);
        let t0 = Instant::now();
        link.record(t0 + Duration::from_millis(5));
        link.record(t0 + Duration::from_millis(2));
        let (at, seq) = link.latest();
        assert_eq!(seq, 2);
        assert_eq!(at, t0 + Duration::from_millis(5));
    }
}

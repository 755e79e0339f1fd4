//! A connection's byte stream: plain TCP or TLS over it, opened with
//! `TCP_NODELAY`, and a cheap check that an idle one is still open.
//!
//! A plain connection is opened by hand (socket2) so that the request can be
//! written in the same step as the connect: on loopback or a fast LAN the
//! handshake has completed when `connect` returns, and the request leaves at
//! once instead of after the runtime comes back to this task (which, while
//! hundreds of requests start together, is milliseconds later). Its reads
//! carry the kernel's receive stamps, under TLS too (see `io`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::HttpError;
use super::endpoint::Origin;
use super::io::StampedTcp;
use super::rx_time;

/// Plain TCP or TLS, both over a stamped socket.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(StampedTcp),
    Tls(Box<TlsStream<StampedTcp>>),
}

/// A TCP connection, and how much of the first request went out with the connect.
struct Opened {
    tcp: TcpStream,
    written: usize,
}

/// Connect to `addr` without waiting for the runtime between the connect and
/// the first write: `first` is sent at once when the handshake is done.
async fn connect_and_send(addr: SocketAddr, first: &[u8]) -> Result<Opened, HttpError> {
    let fail = |e: io::Error| HttpError::Connect {
        addr: addr.to_string(),
        reason: e.to_string(),
    };
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )
    .map_err(fail)?;
    // a token is a few bytes: never let Nagle hold our request back
    let _ = socket.set_tcp_nodelay(true);
    if let Err(e) = rx_time::enable(socket.as_raw_fd()) {
        tracing::debug!(error = %e, "no kernel receive stamps; reads are stamped when they return");
    }
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(fail(e)),
    }
    let written = if first.is_empty() {
        0
    } else {
        match socket.send(first) {
            Ok(n) => n,
            // the handshake is still under way
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(fail(e)),
        }
    };
    let tcp = TcpStream::from_std(std::net::TcpStream::from(socket)).map_err(fail)?;
    if written == 0 {
        tcp.writable().await.map_err(fail)?;
        if let Some(e) = tcp.take_error().map_err(fail)? {
            return Err(fail(e));
        }
    }
    Ok(Opened { tcp, written })
}

impl Stream {
    /// Connect to `origin` (one of its addresses), with TLS when it is https.
    /// On plain TCP the request `first` is written with the connect as far as
    /// the socket takes it; returns the stream and the bytes of `first` written.
    pub async fn open(
        origin: &Origin,
        tls: Option<&Arc<TlsConnector>>,
        first: &[u8],
    ) -> Result<(Self, usize), HttpError> {
        let addr = origin.next_addr().await?;
        if !origin.tls {
            let opened = connect_and_send(addr, first).await?;
            return Ok((Stream::Plain(StampedTcp::new(opened.tcp)), opened.written));
        }
        let Opened { tcp, .. } = connect_and_send(addr, &[]).await?;
        let (Some(connector), Some(name)) = (tls, origin.server_name.clone()) else {
            return Err(HttpError::Tls {
                host: origin.host.clone(),
                reason: "no TLS settings for an https target".into(),
            });
        };
        let stream = connector
            .connect(name, StampedTcp::new(tcp))
            .await
            .map_err(|e| HttpError::Tls {
                host: origin.host.clone(),
                reason: e.to_string(),
            })?;
        Ok((Stream::Tls(Box::new(stream)), 0))
    }

    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(bytes).await,
            Stream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    /// Read into `buf`: the bytes read and the instant they arrived (the
    /// kernel's receive stamp of the socket read that completed them, under
    /// TLS too: rustls hands plaintext up only from the record the latest
    /// socket read completed).
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<(usize, Instant)> {
        match self {
            Stream::Plain(s) => {
                let n = s.read(buf).await?;
                Ok((n, s.link().latest().0))
            }
            Stream::Tls(s) => {
                let n = s.read(buf).await?;
                Ok((n, s.get_ref().0.link().latest().0))
            }
        }
    }

    /// Whether an idle connection still looks open: the server has not
    /// closed it (no end-of-stream waiting to be read). A plain connection
    /// with unexpected bytes waiting is not reusable either; on TLS, bytes
    /// may be a session ticket, so only a close counts.
    pub fn looks_open(&self) -> bool {
        let (fd, tls) = match self {
            Stream::Plain(s) => (s.tcp().as_raw_fd(), false),
            Stream::Tls(s) => (s.get_ref().0.tcp().as_raw_fd(), true),
        };
        let mut byte = 0u8;
        // SAFETY: recv into one byte we own, on a socket we own; MSG_PEEK
        // leaves the data in place and MSG_DONTWAIT never blocks.
        let n = unsafe {
            libc::recv(
                fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        match n {
            0 => false,
            n if n > 0 => tls,
            _ => io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Duration;

    /// Bursts of small writes, each burst's last bytes landing at any moment
    /// of the reader's work: every burst must be read in full. A reader that
    /// forgets a readiness event that arrived while it was reading waits
    /// forever for bytes already in its socket (the server sends nothing more
    /// until the burst is acknowledged).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bytes_arriving_during_a_read_are_never_left_unread() {
        const BURSTS: usize = 3000;
        const WRITES: usize = 6;
        const PIECE: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_nodelay(true).unwrap();
            let mut ack = [0u8; 1];
            for _ in 0..BURSTS {
                for _ in 0..WRITES {
                    if s.write_all(PIECE).is_err() {
                        return;
                    }
                }
                if s.read_exact(&mut ack).is_err() {
                    return;
                }
            }
        });
        let Opened { tcp, .. } = connect_and_send(addr, &[]).await.unwrap();
        let mut stream = Stream::Plain(StampedTcp::new(tcp));
        let mut buf = vec![0u8; 16 * 1024];
        for burst in 0..BURSTS {
            let mut got = 0;
            while got < WRITES * PIECE.len() {
                let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf));
                match read.await {
                    Ok(Ok((n, _))) => {
                        assert!(n > 0, "the server closed early");
                        got += n;
                    }
                    Ok(Err(e)) => panic!("read failed: {e}"),
                    Err(_) => panic!(
                        "burst {burst}: {got} of {} bytes read, the rest waits in the socket unread",
                        WRITES * PIECE.len()
                    ),
                }
            }
            stream.write_all(b"k").await.unwrap();
        }
        server.join().unwrap();
    }

    /// Under TLS a read is stamped with the kernel's receive stamp of the
    /// socket read that completed its record, not with the instant the read
    /// returned: bytes that waited 30 ms in the socket say so.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tls_reads_carry_the_instant_their_record_arrived() {
        use std::sync::Arc;
        crate::tls::install_crypto_provider();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let server_config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (written_tx, written_rx) = tokio::sync::oneshot::channel();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            // stamping is switched on system-wide from a work queue: let it settle
            tokio::time::sleep(Duration::from_millis(50)).await;
            tls.write_all(b"hello").await.unwrap();
            tls.flush().await.unwrap();
            let _ = written_tx.send(Instant::now());
            let mut rest = Vec::new();
            let _ = tls.read_to_end(&mut rest).await;
        });
        let Opened { tcp, .. } = connect_and_send(addr, &[]).await.unwrap();
        let settings = cicada_scenarios::plan::TlsSettings {
            ca_pem: None,
            insecure: true,
        };
        let connector = crate::tls::connector(&settings).unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = connector.connect(name, StampedTcp::new(tcp)).await.unwrap();
        let mut stream = Stream::Tls(Box::new(tls));
        let written = written_rx.await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut buf = [0u8; 64];
        let (n, at) = stream.read(&mut buf).await.unwrap();
        let read = Instant::now();
        assert_eq!(&buf[..n], b"hello");
        assert!(
            at >= written - Duration::from_millis(1),
            "stamped before it was written"
        );
        assert!(
            read.duration_since(at) >= Duration::from_millis(25),
            "stamped {:?} before the read returned: the read's own instant",
            read.duration_since(at)
        );
        drop(stream);
        server.await.unwrap();
    }
}

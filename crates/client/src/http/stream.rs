//! A connection's byte stream for our own HTTP/1.1 reader: plain TCP or
//! TLS over a stamped socket (see `io`), and a cheap check that an idle one
//! is still open.

use std::io;
use std::os::fd::AsRawFd;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use super::io::StampedTcp;

/// Most pieces handed to one vectored write (the kernel's `IOV_MAX` is 1024).
const MAX_SLICES: usize = 64;

/// The pieces of `parts` past their first `from` bytes, as one vectored
/// write takes them (at most [`MAX_SLICES`]; the rest go in the next write).
fn io_slices<'a>(parts: &[&'a [u8]], mut from: usize) -> Vec<io::IoSlice<'a>> {
    let mut out = Vec::with_capacity(parts.len().min(MAX_SLICES));
    for part in parts {
        if from >= part.len() {
            from -= part.len();
            continue;
        }
        out.push(io::IoSlice::new(&part[from..]));
        from = 0;
        if out.len() == MAX_SLICES {
            break;
        }
    }
    out
}

/// Plain TCP or TLS, both over a stamped socket.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(StampedTcp),
    Tls(Box<TlsStream<StampedTcp>>),
}

impl Stream {
    /// Write all of `parts` (one after another) past their first `skip`
    /// bytes, with vectored writes: the pieces go to the socket as they
    /// are, never joined into one buffer. Returns how many bytes this call
    /// wrote, also on failure (on TLS, counted in plaintext handed to rustls).
    pub async fn write_counted(&mut self, parts: &[&[u8]], skip: usize) -> (usize, io::Result<()>) {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut done = 0;
        while skip + done < total {
            let slices = io_slices(parts, skip + done);
            let n = match self {
                Stream::Plain(s) => s.write_vectored(&slices).await,
                Stream::Tls(s) => s.write_vectored(&slices).await,
            };
            match n {
                Ok(0) => return (done, Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => done += n,
                Err(e) => return (done, Err(e)),
            }
        }
        let flushed = match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(s) => s.flush().await,
        };
        (done, flushed)
    }

    /// The socket's descriptor, for checks that read nothing.
    pub fn fd(&self) -> std::os::fd::RawFd {
        match self {
            Stream::Plain(s) => s.tcp().as_raw_fd(),
            Stream::Tls(s) => s.get_ref().0.tcp().as_raw_fd(),
        }
    }

    /// The address the connection went to.
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        match self {
            Stream::Plain(s) => s.link().peer,
            Stream::Tls(s) => s.get_ref().0.link().peer,
        }
    }

    /// Whether it is TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
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
        match cicada_sys::socket::peek(fd) {
            Ok(0) => false,
            Ok(_) => tls,
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::dial::{Opened, connect_and_send};
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
            assert!(stream.write_counted(&[b"k"], 0).await.1.is_ok());
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
        let _on = crate::http::rx_time::tests::stamping_on();
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
            // the handshake's last record is stamped well before "hello"
            tokio::time::sleep(Duration::from_millis(50)).await;
            // taken before the write: an instant after it would be late by
            // however long a busy machine keeps this task off its core
            let writing = Instant::now();
            tls.write_all(b"hello").await.unwrap();
            tls.flush().await.unwrap();
            let _ = written_tx.send(writing);
            let mut rest = Vec::new();
            let _ = tls.read_to_end(&mut rest).await;
        });
        let Opened { tcp, .. } = connect_and_send(addr, &[]).await.unwrap();
        let settings = cicada_request::TlsSettings {
            ca_pem: None,
            insecure: true,
        };
        let connector = crate::tls::connector(&settings, &[b"http/1.1"]).unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = connector.connect(name, StampedTcp::new(tcp)).await.unwrap();
        let mut stream = Stream::Tls(Box::new(tls));
        let written = written_rx.await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut buf = [0u8; 64];
        let (n, at) = stream.read(&mut buf).await.unwrap();
        let read = Instant::now();
        assert_eq!(&buf[..n], b"hello");
        // a stale stamp (the handshake's, 50 ms earlier) would fail this
        assert!(
            at >= written - Duration::from_millis(1),
            "stamped {:?} before it was written",
            written.duration_since(at)
        );
        assert!(
            read.duration_since(at) >= Duration::from_millis(25),
            "stamped {:?} before the read returned: the read's own instant",
            read.duration_since(at)
        );
        drop(stream);
        server.await.unwrap();
    }

    /// A loopback server that takes one connection and returns all it read.
    fn server_keeping_what_it_reads() -> (std::net::SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            got
        });
        (addr, server)
    }

    /// A request's head and body pieces go to the socket in one write
    /// call (one `writev`), not one call each: the stamped socket takes
    /// vectored writes, for our own writer and for hyper's (the traits'
    /// default writes only the first piece per call, which made a chat
    /// request four `send`s).
    #[tokio::test]
    async fn one_write_takes_every_piece_of_a_request() {
        let (addr, server) = server_keeping_what_it_reads();
        let parts: [&[u8]; 4] = [
            b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 48\r\n\r\n",
            b"{\"messages\":[{\"content\":\"",
            b"the shared prompt",
            b"\"}]}",
        ];
        let slices: Vec<io::IoSlice<'_>> = parts.iter().map(|p| io::IoSlice::new(p)).collect();
        let Opened { tcp, .. } = connect_and_send(addr, &[]).await.unwrap();
        let mut tcp = StampedTcp::new(tcp);
        assert!(tokio::io::AsyncWrite::is_write_vectored(&tcp));
        assert!(hyper::rt::Write::is_write_vectored(&tcp));
        let n = tcp.write_vectored(&slices).await.unwrap();
        assert_eq!(n, parts.concat().len(), "one write took {n} bytes");
        let mut hyper_side = super::super::io::HyperIo::Plain(tcp);
        assert!(hyper::rt::Write::is_write_vectored(&hyper_side));
        let n = std::future::poll_fn(|cx| {
            hyper::rt::Write::poll_write_vectored(std::pin::Pin::new(&mut hyper_side), cx, &slices)
        })
        .await
        .unwrap();
        assert_eq!(n, parts.concat().len(), "hyper's write took {n} bytes");
        drop(hyper_side);
        assert_eq!(server.join().unwrap(), parts.concat().repeat(2));
    }

    /// A request written as pieces (its head, then a body's parts, one of
    /// them larger than a socket takes at once) arrives as the pieces
    /// joined, from any byte a first write stopped at, over plain TCP and
    /// more than [`MAX_SLICES`] pieces.
    #[tokio::test]
    async fn pieces_arrive_joined_from_where_the_first_write_stopped() {
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let small: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; usize::from(i) % 7]).collect();
        let mut parts: Vec<&[u8]> = vec![b"POST / HTTP/1.1\r\n\r\n", &big];
        parts.extend(small.iter().map(Vec::as_slice));
        let whole = parts.concat();
        for skip in [0, 5, 19, whole.len() - 10] {
            let (addr, server) = server_keeping_what_it_reads();
            let Opened { tcp, .. } = connect_and_send(addr, &[]).await.unwrap();
            let mut stream = Stream::Plain(StampedTcp::new(tcp));
            let (n, done) = stream.write_counted(&parts, skip).await;
            assert!(done.is_ok());
            assert_eq!(n, whole.len() - skip);
            drop(stream);
            let got = server.join().unwrap();
            assert!(got == whole[skip..], "skip {skip}: the bytes differ");
        }
    }
}

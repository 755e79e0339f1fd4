//! Opening a connection: a socket set up for timing (no Nagle, kernel
//! receive stamps), the TCP handshake, TLS with the protocols we offer.
//!
//! A plain connection is opened by hand (socket2) so that a request can be
//! written in the same step as the connect: on loopback or a fast LAN the
//! handshake has completed when `connect` returns, and the request leaves at
//! once instead of after the runtime comes back to this task (which, while
//! hundreds of requests start together, is milliseconds later).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use cicada_request::AddressChoice;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::HttpError;
use super::addresses::AddressBook;
use super::endpoint::Origin;
use super::io::StampedTcp;
use super::proxy::connect_tunnel;
use super::rx_time;
use super::stream::Stream;
use super::tcp_info::{TCP_ESTABLISHED, tcp_state};

/// A TCP connection, and how much of the first request went out with the connect.
pub(crate) struct Opened {
    pub tcp: TcpStream,
    pub written: usize,
}

/// Connect to `addr` without waiting for the runtime between the connect and
/// the first write: `first` is sent at once when the handshake is done (an
/// empty `first` returns at once when the handshake is already done).
pub(crate) async fn connect_and_send(addr: SocketAddr, first: &[u8]) -> Result<Opened, HttpError> {
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
        Err(e) if e.raw_os_error() == Some(cicada_sys::socket::EINPROGRESS) => {}
        Err(e) => return Err(fail(e)),
    }
    let established = tcp_state(socket.as_raw_fd()) == Some(TCP_ESTABLISHED);
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
    if written == 0 && !established {
        tcp.writable().await.map_err(fail)?;
        if let Some(e) = tcp.take_error().map_err(fail)? {
            return Err(fail(e));
        }
    }
    Ok(Opened { tcp, written })
}

/// RFC 8305's "Connection Attempt Delay": the next address is tried when
/// the previous has not connected within it.
const ATTEMPT_DELAY: Duration = Duration::from_millis(250);

/// Connect to one of `candidates` (in order, see `addresses`): alone, the
/// first writes `first` with its connect; several race, the next starting
/// when the previous fails or after [`ATTEMPT_DELAY`], and the first to
/// connect wins (then nothing of `first` is written: only the winner may
/// carry the request). Refusals and attempts outrun by a later one are
/// remembered as dead for a while.
async fn connect_any(
    book: &AddressBook,
    candidates: Vec<SocketAddr>,
    first: &[u8],
) -> Result<(Opened, SocketAddr), HttpError> {
    if let [addr] = candidates[..] {
        let r = connect_and_send(addr, first).await;
        match &r {
            Ok(_) => book.worked(addr),
            Err(_) => book.failed(addr),
        }
        return r.map(|o| (o, addr));
    }
    let mut waiting = candidates.into_iter();
    let mut racing = tokio::task::JoinSet::new();
    let mut started: Vec<SocketAddr> = Vec::new();
    let start = |set: &mut tokio::task::JoinSet<_>, addr: SocketAddr, started: &mut Vec<_>| {
        started.push(addr);
        set.spawn(async move { (addr, connect_and_send(addr, &[]).await) });
    };
    if let Some(a) = waiting.next() {
        start(&mut racing, a, &mut started);
    }
    let mut last_error = None;
    let delay = tokio::time::sleep(ATTEMPT_DELAY);
    tokio::pin!(delay);
    loop {
        let more = waiting.len() > 0;
        tokio::select! {
            done = racing.join_next() => match done {
                Some(Ok((addr, Ok(opened)))) => {
                    book.worked(addr);
                    // attempts started before it and still pending were slower
                    for a in started.iter().take_while(|a| **a != addr) {
                        book.failed(*a);
                    }
                    return Ok((opened, addr));
                }
                Some(Ok((addr, Err(e)))) => {
                    book.failed(addr);
                    last_error = Some(e);
                    match waiting.next() {
                        Some(a) => {
                            start(&mut racing, a, &mut started);
                            delay.as_mut().reset(tokio::time::Instant::now() + ATTEMPT_DELAY);
                        }
                        None if racing.is_empty() => break,
                        None => {}
                    }
                }
                Some(Err(join)) => last_error = Some(HttpError::Io(join.to_string())),
                None => break,
            },
            () = &mut delay, if more => {
                if let Some(a) = waiting.next() {
                    start(&mut racing, a, &mut started);
                }
                delay.as_mut().reset(tokio::time::Instant::now() + ATTEMPT_DELAY);
            }
        }
    }
    Err(last_error.unwrap_or_else(|| HttpError::Io("no address to connect to".into())))
}

/// Connect to `origin` (one of its addresses, see `addresses`), with TLS
/// when it is https. On plain TCP the request `first` is written with the
/// connect as far as the socket takes it (one address only); returns the
/// stream and the bytes of `first` written.
pub(crate) async fn open(
    origin: &Origin,
    tls: Option<&Arc<TlsConnector>>,
    first: &[u8],
    spread: AddressChoice,
) -> Result<(Stream, usize), HttpError> {
    // through a proxy, the connection is to the proxy's addresses
    let (host, port) = match &origin.route {
        Some(r) => (r.host.as_str(), r.port),
        None => (origin.host.as_str(), origin.port),
    };
    let candidates = origin.addresses.candidates(host, port, spread).await?;
    let tunnel = origin.route.as_ref().filter(|r| r.connect);
    let first = if origin.tls || tunnel.is_some() {
        &[][..]
    } else {
        first
    };
    let (opened, addr) = connect_any(&origin.addresses, candidates, first).await?;
    let mut tcp = StampedTcp::new(opened.tcp);
    if let Some(r) = tunnel {
        connect_tunnel(&mut tcp, &origin.host, origin.port, r.auth.as_deref())
            .await
            .map_err(|e| HttpError::Connect {
                addr: format!("{} (proxy {addr})", r.url()),
                reason: e.to_string(),
            })?;
    }
    if !origin.tls {
        return Ok((Stream::Plain(tcp), opened.written));
    }
    let (Some(connector), Some(name)) = (tls, origin.server_name.clone()) else {
        return Err(HttpError::Tls {
            host: origin.host.clone(),
            reason: "no TLS settings for an https target".into(),
        });
    };
    let stream = connector
        .connect(name, tcp)
        .await
        .map_err(|e| HttpError::Tls {
            host: origin.host.clone(),
            reason: e.to_string(),
        })?;
    Ok((Stream::Tls(Box::new(stream)), 0))
}

//! One request: attempts, and the rule for sending it again.
//!
//! A request goes again only when it provably never reached the server:
//!
//! | evidence | reason |
//! |---|---|
//! | hyper handed the request back unwritten, or our socket took none of its bytes | `unsent` |
//! | on a reused connection the server had closed first: its kernel answered our bytes with a reset (TCP state CLOSE, pending error EPIPE) | `crossed_close` |
//! | HTTP/2 `REFUSED_STREAM` (RFC 9113 §8.7: closed before any processing) | `refused_stream` |
//! | HTTP/2 GOAWAY naming a last stream below ours (§6.8: not processed) | `goaway` |
//!
//! A request that was written and got no response byte otherwise is the
//! outcome `no_response`: it may have reached the server (which then did
//! the work), so it is a failure, never a silent second send. The pool's
//! learning (see `pool`) keeps such cases to servers that really drop
//! requests. At most [`MAX_RESENDS`] resends per request; a request whose
//! every attempt provably went untaken fails as `connect`.

use std::os::fd::RawFd;
use std::time::Duration;

use cicada_metrics::Resends;
use tokio::time::Instant;

use super::tcp_info::{TCP_CLOSE, TCP_CLOSE_WAIT, rtt, socket_error, tcp_state};
use super::{Client, HttpError, Request, Response};

/// Most times one request is sent again.
const MAX_RESENDS: u32 = 3;

/// Longest wait for the kernel's answer to a request that crossed a close.
const CROSSED_CLOSE_WAIT: Duration = Duration::from_millis(200);

/// Why a request was sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resend {
    /// It never left (hyper handed it back; the socket took none of it).
    Unsent,
    /// The server had closed the reused connection and reset our bytes unread.
    CrossedClose,
    /// HTTP/2 `REFUSED_STREAM`.
    RefusedStream,
    /// HTTP/2 GOAWAY below our stream.
    GoAway,
}

impl Resend {
    /// The reason's name, as its counter says it.
    fn name(self) -> &'static str {
        match self {
            Resend::Unsent => "unsent",
            Resend::CrossedClose => "crossed_close",
            Resend::RefusedStream => "refused_stream",
            Resend::GoAway => "goaway",
        }
    }

    /// Count this reason in `resends`.
    fn count(self, resends: &mut Resends) {
        match self {
            Resend::Unsent => resends.unsent += 1,
            Resend::CrossedClose => resends.crossed_close += 1,
            Resend::RefusedStream => resends.refused_stream += 1,
            Resend::GoAway => resends.goaway += 1,
        }
    }
}

/// How an attempt ended without a response.
pub(crate) enum Attempt {
    /// It provably never reached the server: send it again.
    Again(Resend, HttpError),
    /// The request's failure.
    Failed(HttpError),
}

impl Client {
    /// Send a request and read its response head; the body is then read
    /// from the [`Response`]. See the module docs for when it goes again.
    pub async fn send(&self, req: Request<'_>) -> Result<Response, HttpError> {
        let mut resends = Resends::default();
        loop {
            let sent = Instant::now();
            match self.attempt(&req).await {
                Ok(mut resp) => {
                    resp.sent = sent;
                    resp.resends = resends;
                    return Ok(resp);
                }
                Err(Attempt::Again(reason, e)) if resends.total() < MAX_RESENDS => {
                    tracing::debug!(?reason, error = %e, "the request never reached the server; sending it again");
                    reason.count(&mut resends);
                }
                Err(Attempt::Again(reason, e)) => {
                    // provably never processed, each time: the server did
                    // not take it, so it is not `no_response`
                    return Err(HttpError::Connect {
                        addr: req.endpoint.origin.base(),
                        reason: format!(
                            "sent {} times and never taken by the server (last: {}): {e}",
                            resends.total() + 1,
                            reason.name()
                        ),
                    });
                }
                Err(Attempt::Failed(e)) => return Err(e),
            }
        }
    }
}

/// Whether the kernel proves that the request written on the connection
/// `fd` crossed the server's close unread: the server's FIN came first and
/// its socket answered our bytes with a reset (state CLOSE, pending EPIPE).
/// While the connection is half-closed the answer may still be on its way:
/// wait for it up to four round trips (2 ms at least, 200 ms at most).
pub(crate) async fn crossed_close(fd: RawFd) -> bool {
    let wait = rtt(fd)
        .map_or(Duration::from_millis(2), |r| r * 4)
        .clamp(Duration::from_millis(2), CROSSED_CLOSE_WAIT);
    let until = Instant::now() + wait;
    loop {
        match tcp_state(fd) {
            Some(TCP_CLOSE) => {
                return socket_error(fd) == Some(cicada_sys::socket::EPIPE);
            }
            Some(TCP_CLOSE_WAIT) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            _ => return false,
        }
    }
}

/// The request failure a hyper error before any response head stands for.
pub(crate) fn head_failure(e: &hyper::Error) -> HttpError {
    if e.is_parse_too_large() {
        HttpError::HeadTooLarge(0)
    } else if e.is_parse() || e.is_parse_status() {
        HttpError::BadHead(e.to_string())
    } else {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        HttpError::NoResponse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    /// The kernel's three ways a request meets a closing server (loopback):
    /// only the one that proves the request unread counts.
    #[tokio::test]
    async fn only_a_reset_after_the_servers_close_proves_a_request_unread() {
        // the server closed first; our request then got a reset: proof
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        drop(server);
        std::thread::sleep(Duration::from_millis(20));
        let _ = client.write_all(b"POST / HTTP/1.1\r\n\r\n");
        let mut buf = [0u8; 8];
        let _ = client.read(&mut buf);
        assert!(crossed_close(client.as_raw_fd()).await);

        // the server read the request, then closed: it may have acted on it
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"POST / HTTP/1.1\r\n\r\n").unwrap();
        let mut got = [0u8; 19];
        server.read_exact(&mut got).unwrap();
        drop(server);
        std::thread::sleep(Duration::from_millis(20));
        let _ = client.read(&mut buf);
        assert!(!crossed_close(client.as_raw_fd()).await);

        // an open connection proves nothing
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, _) = listener.accept().unwrap();
        assert!(!crossed_close(client.as_raw_fd()).await);
    }
}

//! The CONNECT handshake: ask a proxy for a tunnel to a target, and read its
//! answer's head without reading a byte past it.
//!
//! After a 2xx answer the connection carries the target's bytes (TLS from
//! the client first), so anything read past the head would belong to the
//! tunnel. A proxy sends nothing more until the client speaks, but the
//! reader does not rely on that: it never asks the socket for more bytes
//! than the fewest that could still end the head (see [`HeadEnd`]).

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::authority;

/// The longest answer head to CONNECT we read.
const MAX_HEAD: usize = 16 * 1024;
/// The most header lines in that head.
const MAX_HEADERS: usize = 64;

/// Why a proxy gave no tunnel.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub(crate) enum ProxyError {
    /// The proxy answered, but not with 2xx (407: it wants credentials).
    #[error("the proxy answered {status} {reason} to CONNECT {target}")]
    Refused {
        status: u16,
        reason: String,
        target: String,
    },
    /// The answer is not an HTTP response head.
    #[error("the proxy's answer to CONNECT {target} is not valid HTTP: {reason}")]
    BadHead { target: String, reason: String },
    /// The answer's head did not end within [`MAX_HEAD`] bytes.
    #[error("the proxy's answer to CONNECT {target} passed {MAX_HEAD} bytes without ending")]
    HeadTooLarge { target: String },
    /// The proxy closed the connection before its answer's head ended.
    #[error("the proxy closed the connection {} CONNECT {target}", if *partial { "inside its answer to" } else { "without answering" })]
    Closed { target: String, partial: bool },
    /// Writing the request or reading the answer failed.
    #[error("CONNECT {target} through the proxy: {reason}")]
    Io { target: String, reason: String },
}

/// Open a tunnel to `target_host:target_port` through the proxy at the other
/// end of `io`: write `CONNECT`, with `Proxy-Authorization: <auth>` when
/// given, and read the answer's head and nothing more. On `Ok` the next byte
/// `io` yields is the target's. The caller bounds the time it may take.
pub(crate) async fn connect_tunnel<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    target_host: &str,
    target_port: u16,
    auth: Option<&str>,
) -> Result<(), ProxyError> {
    let target = authority(target_host, target_port);
    let io_error = |e: std::io::Error| ProxyError::Io {
        target: target.clone(),
        reason: e.to_string(),
    };
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = auth {
        request.push_str("Proxy-Authorization: ");
        request.push_str(auth);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    io.write_all(request.as_bytes()).await.map_err(io_error)?;
    io.flush().await.map_err(io_error)?;

    let head = read_head(io, &target).await?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let bad = |reason: String| ProxyError::BadHead {
        target: target.clone(),
        reason,
    };
    match resp.parse(&head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        Ok(httparse::Status::Complete(n)) => {
            return Err(bad(format!("the head ends at byte {n} of {}", head.len())));
        }
        Ok(httparse::Status::Partial) => return Err(bad("an incomplete head".into())),
        Err(e) => return Err(bad(e.to_string())),
    }
    let status = resp.code.unwrap_or(0);
    if (200..300).contains(&status) {
        // a 2xx answer to CONNECT has no body (RFC 9110 §9.3.6): the tunnel starts here
        Ok(())
    } else {
        Err(ProxyError::Refused {
            status,
            reason: resp.reason.unwrap_or("").to_string(),
            target,
        })
    }
}

/// Read the answer's head, up to and including the empty line that ends it.
///
/// Every read asks for at most [`HeadEnd::fewest_to_end`] bytes, the fewest
/// that could complete the end from where the search stands. Each byte moves
/// the search at most one step nearer the end, so a read of that many bytes
/// can complete it only with its last byte: no read returns a byte past the
/// head, whatever the proxy has already sent.
async fn read_head<S: AsyncRead + Unpin>(io: &mut S, target: &str) -> Result<Vec<u8>, ProxyError> {
    let mut head = Vec::with_capacity(128);
    let mut end = HeadEnd::Searching;
    let mut buf = [0u8; 2];
    while end != HeadEnd::Done {
        let want = end.fewest_to_end();
        if head.len() + want > MAX_HEAD {
            return Err(ProxyError::HeadTooLarge {
                target: target.to_string(),
            });
        }
        let n = io
            .read(&mut buf[..want])
            .await
            .map_err(|e| ProxyError::Io {
                target: target.to_string(),
                reason: e.to_string(),
            })?;
        if n == 0 {
            return Err(ProxyError::Closed {
                target: target.to_string(),
                partial: !head.is_empty(),
            });
        }
        for &b in &buf[..n] {
            end = end.step(b);
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

/// The search for the end of a response head: a line feed followed by an
/// empty line, `\n\n` or `\n\r\n` (httparse takes lines ending in LF or CRLF;
/// proxies send `\r\n\r\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeadEnd {
    /// Not inside a possible end.
    Searching,
    /// Just after a line feed.
    AfterLf,
    /// After a line feed and a carriage return.
    AfterLfCr,
    /// The head has ended.
    Done,
}

impl HeadEnd {
    /// Where the search stands after one more byte.
    fn step(self, b: u8) -> HeadEnd {
        match (self, b) {
            (HeadEnd::Done, _) => HeadEnd::Done,
            (HeadEnd::AfterLf | HeadEnd::AfterLfCr, b'\n') => HeadEnd::Done,
            (_, b'\n') => HeadEnd::AfterLf,
            (HeadEnd::AfterLf, b'\r') => HeadEnd::AfterLfCr,
            _ => HeadEnd::Searching,
        }
    }

    /// The fewest further bytes that can end the head.
    fn fewest_to_end(self) -> usize {
        match self {
            HeadEnd::Searching => 2,
            HeadEnd::AfterLf | HeadEnd::AfterLfCr => 1,
            HeadEnd::Done => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::task::JoinHandle;

    /// What the playing proxy does after it read the request head.
    #[derive(Clone, Copy)]
    enum Then {
        /// Echo what the client sends until it closes.
        Echo,
        /// Close the connection.
        Close,
    }

    /// [`connect_tunnel`] within a deadline: a reader that waits for bytes
    /// the proxy never sends fails the test instead of hanging it.
    async fn tunnel(
        io: &mut TcpStream,
        host: &str,
        port: u16,
        auth: Option<&str>,
    ) -> Result<(), ProxyError> {
        let limit = std::time::Duration::from_secs(20);
        tokio::time::timeout(limit, connect_tunnel(io, host, port, auth))
            .await
            .unwrap_or_else(|_| panic!("connect_tunnel still waits after {limit:?}"))
    }

    /// A TCP server playing a proxy: it reads one request head, answers
    /// `answer` in one write, then echoes or closes. The handle yields the
    /// request head it read.
    async fn playing_proxy(answer: Vec<u8>, then: Then) -> (TcpStream, JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0, "the client closed inside its request");
                request.extend_from_slice(&buf[..n]);
            }
            // a client that gave up early may have reset the connection:
            // what it saw is judged on its side
            let _ = s.write_all(&answer).await;
            if let Then::Echo = then {
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            }
            request
        });
        (TcpStream::connect(addr).await.unwrap(), server)
    }

    /// After a 2xx head the bytes that follow it in the same segment are
    /// still in the socket for the tunnel's user, and the tunnel carries
    /// bytes both ways. tinyproxy answers CONNECT with HTTP/1.0 and this
    /// reason phrase; the LF-only head is what httparse (and RFC 9112 §2.2's
    /// "MAY recognize a single LF") accept.
    #[tokio::test]
    async fn a_tunnel_opens_and_what_follows_the_head_stays_unread() {
        let cases: [(&str, &[u8]); 3] = [
            (
                "tinyproxy's answer",
                b"HTTP/1.0 200 Connection established\r\n\r\n",
            ),
            (
                "with headers",
                b"HTTP/1.1 200 OK\r\nProxy-Agent: test\r\nX-A: b\r\n\r\n",
            ),
            ("LF line ends", b"HTTP/1.1 200 OK\nProxy-Agent: test\n\n"),
        ];
        for (name, head) in cases {
            let mut answer = head.to_vec();
            answer.extend_from_slice(b"\x16\x03\x01AFTER");
            let (mut io, server) = playing_proxy(answer, Then::Echo).await;
            tunnel(&mut io, "127.0.0.1", 443, None)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut after = [0u8; 8];
            io.read_exact(&mut after).await.unwrap();
            assert_eq!(&after, b"\x16\x03\x01AFTER", "{name}");
            io.write_all(b"ping").await.unwrap();
            let mut echo = [0u8; 4];
            io.read_exact(&mut echo).await.unwrap();
            assert_eq!(&echo, b"ping", "{name}");
            drop(io);
            let request = server.await.unwrap();
            assert_eq!(
                String::from_utf8(request).unwrap(),
                "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n",
                "{name}"
            );
        }
    }

    /// Credentials go in `Proxy-Authorization`; an IPv6 target goes in
    /// brackets in the request target and `Host` (RFC 9110 §7.2, §9.3.6).
    #[tokio::test]
    async fn the_request_carries_credentials_and_brackets_ipv6() {
        let answer = b"HTTP/1.1 200 Connection established\r\n\r\n".to_vec();
        let (mut io, server) = playing_proxy(answer, Then::Close).await;
        tunnel(&mut io, "::1", 8443, Some("Basic dXNlcjpwYXNz"))
            .await
            .unwrap();
        let request = server.await.unwrap();
        assert_eq!(
            String::from_utf8(request).unwrap(),
            "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\
             Proxy-Authorization: Basic dXNlcjpwYXNz\r\n\r\n"
        );
    }

    /// Everything but a 2xx head is an error that says what happened.
    #[tokio::test]
    async fn a_refusal_or_a_broken_answer_is_an_error_that_names_it() {
        let big = {
            let mut h = b"HTTP/1.1 200 OK\r\n".to_vec();
            while h.len() <= MAX_HEAD + 1024 {
                h.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
            }
            h
        };
        let target = || "example.com:443".to_string();
        let cases: [(&str, Vec<u8>, Then, ProxyError, &str); 5] = [
            (
                "407 (tinyproxy with BasicAuth)",
                b"HTTP/1.0 407 Proxy Authentication Required\r\n\
                  Proxy-Authenticate: Basic realm=\"tinyproxy\"\r\nContent-Length: 0\r\n\r\n"
                    .to_vec(),
                Then::Echo,
                ProxyError::Refused {
                    status: 407,
                    reason: "Proxy Authentication Required".into(),
                    target: target(),
                },
                "the proxy answered 407 Proxy Authentication Required to CONNECT example.com:443",
            ),
            (
                "a head over 16 KiB",
                big,
                Then::Echo,
                ProxyError::HeadTooLarge { target: target() },
                "passed 16384 bytes",
            ),
            (
                "closed without answering",
                Vec::new(),
                Then::Close,
                ProxyError::Closed {
                    target: target(),
                    partial: false,
                },
                "closed the connection without answering CONNECT example.com:443",
            ),
            (
                "closed inside the head",
                b"HTTP/1.1 200 OK\r\n".to_vec(),
                Then::Close,
                ProxyError::Closed {
                    target: target(),
                    partial: true,
                },
                "inside its answer",
            ),
            (
                "not HTTP",
                b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec(),
                Then::Echo,
                ProxyError::BadHead {
                    target: target(),
                    reason: "invalid HTTP version".into(),
                },
                "not valid HTTP",
            ),
        ];
        for (name, answer, then, want, message) in cases {
            let (mut io, server) = playing_proxy(answer, then).await;
            let got = tunnel(&mut io, "example.com", 443, None).await;
            drop(io);
            server.await.unwrap();
            let err = got.expect_err(name);
            assert_eq!(err, want, "{name}");
            assert!(err.to_string().contains(message), "{name}: {err}");
        }
    }

    /// The search for the head's end, byte by byte, and its bound.
    #[test]
    fn the_head_end_is_found_after_crlf_or_lf_lines_only() {
        let cases: [(&[u8], bool); 6] = [
            (b"HTTP/1.1 200 OK\r\n\r\n", true),
            (b"HTTP/1.1 200 OK\n\n", true),
            (b"HTTP/1.1 200 OK\n\r\n", true),
            (b"HTTP/1.1 200 OK\r\n", false),
            (b"HTTP/1.1 200 OK\r\n\r", false),
            (b"HTTP/1.1 200 OK\r\r\n", false),
        ];
        for (bytes, ends) in cases {
            let mut end = HeadEnd::Searching;
            for (i, &b) in bytes.iter().enumerate() {
                assert!(
                    end.fewest_to_end() <= bytes.len() - i || !ends,
                    "{bytes:?}: the bound passes the end"
                );
                end = end.step(b);
            }
            assert_eq!(end == HeadEnd::Done, ends, "{bytes:?}");
        }
    }
}

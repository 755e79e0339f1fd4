//! HTTP/1.1 on the wire, as pure functions over bytes: the request head we
//! write, the response head we read, and the body's framing (length,
//! chunked, or until close). No I/O here, so every rule is unit-tested and
//! fuzzed on its own.

use std::ops::Range;

/// Most header lines accepted in a response head.
pub const MAX_HEADERS: usize = 96;

/// Longest chunk-size line (with extensions) accepted.
const MAX_SIZE_LINE: usize = 4096;

/// The methods cicada sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

/// Append one request's head to `out`: request line, `Host`, the prepared
/// header lines (each ending in CRLF), per-request headers, `Content-Length`
/// for a body of `body` bytes and the blank line. The body's bytes follow
/// it on the wire as they are (never copied behind the head).
pub fn render_request(
    out: &mut Vec<u8>,
    method: Method,
    path: &str,
    host: &str,
    header_lines: &[u8],
    extra: &[(&str, &str)],
    body: Option<usize>,
) {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(header_lines);
    for (name, value) in extra {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(len) = body {
        out.extend_from_slice(b"Content-Length: ");
        let mut digits = itoa_buf(len);
        out.extend_from_slice(digits.as_bytes_mut());
        out.extend_from_slice(b"\r\n\r\n");
    } else {
        out.extend_from_slice(b"\r\n");
    }
}

/// Decimal digits of `n` without allocating.
struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn as_bytes_mut(&mut self) -> &[u8] {
        &self.buf[self.start..]
    }
}

fn itoa_buf(mut n: usize) -> Digits {
    let mut d = Digits {
        buf: [0; 20],
        start: 20,
    };
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return d;
        }
    }
}

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Exactly this many bytes remain.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked(ChunkState),
    /// Everything until the server closes (HTTP/1.0 style); never reusable.
    UntilClose,
    /// The body is complete.
    Done,
}

/// Where a chunked body's decoder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkState {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data with this many bytes left.
    Data(u64),
    /// After a chunk's data, expecting its CRLF.
    DataEnd,
    /// After the last (zero) chunk: trailer lines until a blank one.
    Trailers,
}

/// What the response head says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Bytes the head took in the buffer (including its blank line).
    pub len: usize,
    pub status: u16,
    /// How the body is delimited.
    pub framing: Framing,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
    /// The `Content-Type` value, if any.
    pub content_type: Option<String>,
    /// The `Location` value, if any (a redirect's target, named in errors).
    pub location: Option<String>,
}

/// Why bytes are not an HTTP/1.x response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the response head is not HTTP/1.x: {0}")]
    BadHead(String),
    #[error("the response head has more than {0} header lines")]
    TooManyHeaders(usize),
    #[error("the response's Content-Length is not a number: {0:?}")]
    BadLength(String),
    #[error("bad chunk framing: {0}")]
    BadChunk(String),
}

/// Parse a complete response head at the start of `buf`; `Ok(None)` when more
/// bytes are needed. Informational (1xx) heads are skipped: `len` covers them.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, WireError> {
    let mut skipped = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(&buf[skipped..]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(WireError::TooManyHeaders(MAX_HEADERS));
            }
            Err(e) => return Err(WireError::BadHead(e.to_string())),
        };
        let status = resp.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            skipped += n;
            continue;
        }
        let http11 = resp.version == Some(1);
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut close = !http11;
        let mut content_type = None;
        let mut location = None;
        for h in resp.headers.iter() {
            let value = || String::from_utf8_lossy(h.value).trim().to_string();
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = value();
                length = Some(v.parse().map_err(|_| WireError::BadLength(v))?);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // chunked is the last coding applied when present at all
                chunked = value()
                    .rsplit(',')
                    .next()
                    .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in value().split(',') {
                    let t = token.trim();
                    if t.eq_ignore_ascii_case("close") {
                        close = true;
                    } else if t.eq_ignore_ascii_case("keep-alive") && !http11 {
                        close = false;
                    }
                }
            } else if h.name.eq_ignore_ascii_case("content-type") {
                content_type = Some(value());
            } else if h.name.eq_ignore_ascii_case("location") {
                location = Some(value());
            }
        }
        // we never send HEAD, so only the status says a body is absent
        let bodiless = status == 204 || status == 304;
        let framing = if bodiless {
            Framing::Done
        } else if chunked {
            Framing::Chunked(ChunkState::Size)
        } else if let Some(n) = length {
            if n == 0 {
                Framing::Done
            } else {
                Framing::Length(n)
            }
        } else {
            Framing::UntilClose
        };
        return Ok(Some(Head {
            len: skipped + n,
            status,
            keep_alive: !close && framing != Framing::UntilClose,
            framing,
            content_type,
            location,
        }));
    }
}

/// One step of body decoding over the unread bytes `buf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Body data at this range of `buf`; consume `consumed` bytes.
    Data {
        range: Range<usize>,
        consumed: usize,
    },
    /// Framing bytes only: consume them and decode on.
    Skip(usize),
    /// More bytes are needed (none consumed).
    NeedMore,
    /// The body is complete after consuming this many bytes.
    End(usize),
}

/// Decode the next piece of a body from `buf`, updating `framing`.
pub fn decode(framing: &mut Framing, buf: &[u8]) -> Result<Step, WireError> {
    match framing {
        Framing::Done => Ok(Step::End(0)),
        Framing::Length(left) => {
            if buf.is_empty() {
                return Ok(Step::NeedMore);
            }
            let take = (*left).min(buf.len() as u64) as usize;
            *left -= take as u64;
            if *left == 0 {
                *framing = Framing::Done;
            }
            Ok(Step::Data {
                range: 0..take,
                consumed: take,
            })
        }
        Framing::UntilClose => {
            if buf.is_empty() {
                return Ok(Step::NeedMore);
            }
            Ok(Step::Data {
                range: 0..buf.len(),
                consumed: buf.len(),
            })
        }
        Framing::Chunked(state) => {
            let (next, step) = decode_chunked(*state, buf)?;
            *framing = next.map_or(Framing::Done, Framing::Chunked);
            Ok(step)
        }
    }
}

/// One step of chunked decoding: the next state (`None` = body done) and the step.
fn decode_chunked(state: ChunkState, buf: &[u8]) -> Result<(Option<ChunkState>, Step), WireError> {
    match state {
        ChunkState::Size => {
            let Some(nl) = memchr::memchr(b'\n', buf) else {
                if buf.len() > MAX_SIZE_LINE {
                    return Err(WireError::BadChunk("chunk-size line too long".into()));
                }
                return Ok((Some(state), Step::NeedMore));
            };
            let line = &buf[..nl];
            let digits_end = line
                .iter()
                .position(|b| !b.is_ascii_hexdigit())
                .unwrap_or(line.len());
            let rest = &line[digits_end..];
            let rest_ok = rest.is_empty()
                || rest == b"\r"
                || rest.first() == Some(&b';')
                || rest.first() == Some(&b' ')
                || rest.first() == Some(&b'\t');
            if digits_end == 0 || digits_end > 15 || !rest_ok {
                return Err(WireError::BadChunk(format!(
                    "bad chunk-size line {:?}",
                    String::from_utf8_lossy(&line[..line.len().min(40)])
                )));
            }
            let text = std::str::from_utf8(&line[..digits_end]).unwrap_or("0");
            let size = u64::from_str_radix(text, 16)
                .map_err(|e| WireError::BadChunk(format!("chunk size {text:?}: {e}")))?;
            let next = if size == 0 {
                ChunkState::Trailers
            } else {
                ChunkState::Data(size)
            };
            Ok((Some(next), Step::Skip(nl + 1)))
        }
        ChunkState::Data(left) => {
            if buf.is_empty() {
                return Ok((Some(state), Step::NeedMore));
            }
            let take = left.min(buf.len() as u64) as usize;
            let left = left - take as u64;
            let next = if left == 0 {
                ChunkState::DataEnd
            } else {
                ChunkState::Data(left)
            };
            Ok((
                Some(next),
                Step::Data {
                    range: 0..take,
                    consumed: take,
                },
            ))
        }
        ChunkState::DataEnd => match buf {
            [b'\r', b'\n', ..] => Ok((Some(ChunkState::Size), Step::Skip(2))),
            [b'\n', ..] => Ok((Some(ChunkState::Size), Step::Skip(1))),
            [] | [b'\r'] => Ok((Some(state), Step::NeedMore)),
            _ => Err(WireError::BadChunk(
                "chunk data is not followed by CRLF".into(),
            )),
        },
        ChunkState::Trailers => {
            let Some(nl) = memchr::memchr(b'\n', buf) else {
                if buf.len() > MAX_SIZE_LINE {
                    return Err(WireError::BadChunk("trailer line too long".into()));
                }
                return Ok((Some(state), Step::NeedMore));
            };
            let line = &buf[..nl];
            if line.is_empty() || line == b"\r" {
                Ok((None, Step::End(nl + 1)))
            } else {
                Ok((Some(state), Step::Skip(nl + 1)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decode a whole body from one buffer, or fail.
    fn body(mut framing: Framing, mut buf: &[u8]) -> Result<(Vec<u8>, bool), WireError> {
        let mut out = Vec::new();
        loop {
            match decode(&mut framing, buf)? {
                Step::Data { range, consumed } => {
                    out.extend_from_slice(&buf[range]);
                    buf = &buf[consumed..];
                }
                Step::Skip(n) => buf = &buf[n..],
                Step::NeedMore => return Ok((out, false)),
                Step::End(n) => {
                    assert!(n <= buf.len());
                    return Ok((out, true));
                }
            }
        }
    }

    #[test]
    fn requests_carry_host_length_and_body() {
        let mut out = Vec::new();
        render_request(
            &mut out,
            Method::Post,
            "/v1/completions",
            "h:8000",
            b"Authorization: Bearer k\r\n",
            &[("x-request-id", "r1")],
            Some(2),
        );
        assert_eq!(
            out,
            b"POST /v1/completions HTTP/1.1\r\nHost: h:8000\r\nAuthorization: Bearer k\r\nx-request-id: r1\r\nContent-Length: 2\r\n\r\n"
        );
        out.clear();
        render_request(&mut out, Method::Get, "/health", "h", b"", &[], None);
        assert_eq!(out, b"GET /health HTTP/1.1\r\nHost: h\r\n\r\n");
    }

    #[test]
    fn heads_decide_framing_and_reuse() {
        let h = parse_head(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nrest")
        .unwrap()
        .unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, Framing::Chunked(ChunkState::Size));
        assert!(h.keep_alive);
        assert_eq!(h.content_type.as_deref(), Some("text/event-stream"));
        assert_eq!(h.len, 80);
        let close = parse_head(
            b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 5\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (close.status, close.framing, close.keep_alive),
            (400, Framing::Length(5), false)
        );
        let old = parse_head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((old.framing, old.keep_alive), (Framing::UntilClose, false));
        let old_ka =
            parse_head(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
                .unwrap()
                .unwrap();
        assert_eq!((old_ka.framing, old_ka.keep_alive), (Framing::Done, true));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
        assert!(matches!(
            parse_head(b"SSH-2.0-OpenSSH\r\n\r\n"),
            Err(WireError::BadHead(_))
        ));
        let many: String = (0..=MAX_HEADERS)
            .map(|i| format!("x-{i}: {i}\r\n"))
            .collect();
        assert_eq!(
            parse_head(format!("HTTP/1.1 200 OK\r\n{many}\r\n").as_bytes()),
            Err(WireError::TooManyHeaders(MAX_HEADERS))
        );
        assert!(matches!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"),
            Err(WireError::BadLength(_))
        ));
    }

    #[test]
    fn informational_heads_are_skipped() {
        let buf = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let h = parse_head(buf).unwrap().unwrap();
        assert_eq!(
            (h.status, h.len, h.framing),
            (204, buf.len(), Framing::Done)
        );
    }

    #[test]
    fn chunked_bodies_decode_with_extensions_trailers_and_bare_newlines() {
        let (b, done) = body(
            Framing::Chunked(ChunkState::Size),
            b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
        )
        .unwrap();
        assert_eq!((b.as_slice(), done), (&b"hello world"[..], true));
        let (b, done) = body(Framing::Chunked(ChunkState::Size), b"3\nabc\n0\n\n").unwrap();
        assert_eq!((b.as_slice(), done), (&b"abc"[..], true));
        assert!(body(Framing::Chunked(ChunkState::Size), b"zz\r\n").is_err());
        assert!(body(Framing::Chunked(ChunkState::Size), b"3\r\nabcX").is_err());
    }

    #[test]
    fn any_split_of_a_chunked_body_decodes_the_same() {
        let wire = b"1a\r\ndata: {\"a\": 1}\n\ndata: [DO\r\n5\r\nNE]\n\n\r\n0\r\n\r\n";
        let (whole, done) = body(Framing::Chunked(ChunkState::Size), wire).unwrap();
        assert!(done);
        for cut in 0..wire.len() {
            // feed the first `cut` bytes, then the rest, as two reads would
            let mut framing = Framing::Chunked(ChunkState::Size);
            let mut pending: Vec<u8> = wire[..cut].to_vec();
            let mut out = Vec::new();
            let mut fed_rest = false;
            let mut ended = false;
            while !ended {
                match decode(&mut framing, &pending).unwrap() {
                    Step::Data { range, consumed } => {
                        out.extend_from_slice(&pending[range]);
                        pending.drain(..consumed);
                    }
                    Step::Skip(n) => {
                        pending.drain(..n);
                    }
                    Step::NeedMore => {
                        assert!(!fed_rest, "cut {cut}: stuck");
                        pending.extend_from_slice(&wire[cut..]);
                        fed_rest = true;
                    }
                    Step::End(_) => ended = true,
                }
            }
            assert_eq!(out, whole, "cut {cut}");
        }
    }

    #[test]
    fn length_bodies_end_exactly() {
        let mut f = Framing::Length(4);
        assert_eq!(
            decode(&mut f, b"abcdef").unwrap(),
            Step::Data {
                range: 0..4,
                consumed: 4
            }
        );
        assert_eq!(f, Framing::Done);
        assert_eq!(decode(&mut f, b"ef").unwrap(), Step::End(0));
    }
}

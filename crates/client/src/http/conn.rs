//! One HTTP/1.1 connection: write a request, read the response head, then
//! the body piece by piece straight from the connection's read buffer (no
//! copy, no channel, no second task), each piece stamped with the instant
//! its bytes arrived (see `rx_time`).

use std::io;
use std::ops::Range;

use tokio::time::Instant;

use super::stream::Stream;
use super::wire::{self, Framing, Head, Step};
use super::{HttpError, ResponsePhase};

/// First size of a connection's read buffer; it grows for large bodies.
const READ_BUF: usize = 8 * 1024;
/// Largest response head accepted.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// Buffers larger than this are shrunk back when the connection goes idle.
const KEEP_BUF: usize = 64 * 1024;

/// A connection and its buffers.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: Stream,
    buf: Vec<u8>,
    /// Unread bytes are `buf[pos..len]`.
    pos: usize,
    len: usize,
    /// When the bytes of the latest read arrived.
    read_at: Instant,
    /// Requests this connection carried (1 = fresh).
    pub uses: u32,
}

impl Conn {
    pub fn new(stream: Stream) -> Self {
        Self {
            stream,
            buf: vec![0; READ_BUF],
            pos: 0,
            len: 0,
            read_at: Instant::now(),
            uses: 0,
        }
    }

    /// Whether an idle connection can take another request.
    pub fn looks_open(&self) -> bool {
        self.pos == self.len && self.stream.looks_open()
    }

    /// Make the connection ready to wait in the pool.
    pub fn park(&mut self) {
        if self.buf.len() > KEEP_BUF {
            self.buf.truncate(READ_BUF);
            self.buf.shrink_to(READ_BUF);
        }
    }

    /// Write a whole request (or the rest of one the connect began to
    /// write): `parts` are its pieces (head, then the body's), `skip` the
    /// bytes of them already written. Returns the bytes this call wrote,
    /// also on failure.
    pub async fn send(&mut self, parts: &[&[u8]], skip: usize) -> (usize, io::Result<()>) {
        self.uses += 1;
        if parts.iter().map(|p| p.len()).sum::<usize>() <= skip {
            return (0, Ok(()));
        }
        self.stream.write_counted(parts, skip).await
    }

    /// The socket's descriptor, for checks that read nothing.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.stream.fd()
    }

    /// The address the connection went to.
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.stream.peer()
    }

    /// Whether the connection is TLS.
    pub fn is_tls(&self) -> bool {
        self.stream.is_tls()
    }

    /// Read more bytes; `Ok(0)` is the end of the stream.
    async fn fill(&mut self, limit: usize) -> io::Result<usize> {
        if self.pos == self.len {
            self.pos = 0;
            self.len = 0;
        } else if self.pos > 0 && self.len == self.buf.len() {
            self.buf.copy_within(self.pos..self.len, 0);
            self.len -= self.pos;
            self.pos = 0;
        }
        if self.len == self.buf.len() {
            if self.buf.len() >= limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("more than {limit} bytes without a complete piece"),
                ));
            }
            let grown = (self.buf.len() * 2).min(limit);
            self.buf.resize(grown, 0);
        }
        let (n, at) = self.stream.read(&mut self.buf[self.len..]).await?;
        // Bytes read later never arrived earlier. A kernel stamp can read a
        // few µs before the previous read's instant (an unstamped read took
        // its own, later instant; realtime and monotonic clocks are read
        // apart), which would put a stream's tokens out of order.
        self.read_at = at.max(self.read_at);
        self.len += n;
        Ok(n)
    }

    /// Read the response head. Errors say whether any response byte had
    /// arrived (a reused connection that failed before one can be retried).
    pub async fn read_head(&mut self) -> Result<Head, (ResponsePhase, HttpError)> {
        let mut received = false;
        loop {
            match wire::parse_head(&self.buf[self.pos..self.len]) {
                Ok(Some(head)) => {
                    self.pos += head.len;
                    return Ok(head);
                }
                Ok(None) => {}
                Err(e) => return Err((ResponsePhase::Started, HttpError::Wire(e))),
            }
            let phase = if received {
                ResponsePhase::Started
            } else {
                ResponsePhase::NotStarted
            };
            if self.len - self.pos >= MAX_HEAD {
                return Err((phase, HttpError::HeadTooLarge(MAX_HEAD)));
            }
            match self.fill(MAX_HEAD).await {
                Ok(0) => {
                    return Err((phase, HttpError::ClosedBeforeResponse { partial: received }));
                }
                Ok(_) => received = true,
                Err(e) => return Err((phase, HttpError::Io(e.to_string()))),
            }
        }
    }

    /// The next piece of the body as a range of the read buffer, with the
    /// instant its bytes were read; `None` when the body is complete.
    pub async fn next_piece(
        &mut self,
        framing: &mut Framing,
        limit: usize,
    ) -> Result<Option<(Range<usize>, Instant)>, HttpError> {
        loop {
            let unread = &self.buf[self.pos..self.len];
            match wire::decode(framing, unread).map_err(HttpError::Wire)? {
                Step::Data { range, consumed } => {
                    let at = self.pos;
                    self.pos += consumed;
                    if !range.is_empty() {
                        return Ok(Some((at + range.start..at + range.end, self.read_at)));
                    }
                }
                Step::Skip(n) => self.pos += n,
                Step::End(n) => {
                    self.pos += n;
                    *framing = Framing::Done;
                    return Ok(None);
                }
                Step::NeedMore => match self.fill(limit).await {
                    Ok(0) if *framing == Framing::UntilClose => {
                        *framing = Framing::Done;
                        return Ok(None);
                    }
                    Ok(0) => return Err(HttpError::ClosedInBody),
                    Ok(_) => {}
                    Err(e) => return Err(HttpError::Io(e.to_string())),
                },
            }
        }
    }

    /// Bytes of the read buffer.
    pub fn bytes(&self, range: Range<usize>) -> &[u8] {
        &self.buf[range]
    }

    /// No bytes beyond the response were received (a reusable connection
    /// holds nothing unread).
    pub fn drained(&self) -> bool {
        self.pos == self.len
    }
}

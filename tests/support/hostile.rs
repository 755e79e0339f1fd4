//! A scripted HTTP/1.1 server that answers every request with one hostile
//! response: what a broken or malicious server (or a proxy in front of one)
//! can send a load generator. Plain std TCP, one thread per connection;
//! responses are streamed from small repeated blocks, so the server itself
//! holds kilobytes whatever it sends. It counts the requests it received, so
//! a test can check that every one of them is accounted for.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

/// What the server answers to every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// A 200 SSE stream whose first event is one `data:` line of about
    /// `bytes` bytes: a valid chat-completion chunk whose content is that
    /// long, then `[DONE]`.
    HugeLine { bytes: u64 },
    /// A 200 SSE stream of about `bytes` bytes of valid one-character
    /// chat-completion chunks, then a finish chunk, a usage chunk that says
    /// `usage_tokens` output tokens, and `[DONE]`.
    Flood { bytes: u64, usage_tokens: u64 },
    /// A 200 response head with `count` header lines, then a valid stream.
    ManyHeaders { count: usize },
    /// A 200 response head with one header line of `bytes` bytes, then a
    /// valid stream.
    LongHeader { bytes: usize },
}

/// A running hostile server; it lives as long as the test process.
#[derive(Debug)]
pub struct HostileServer {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    requests: Arc<AtomicU64>,
    tally: Arc<Tally>,
}

/// What went out, counted as it was written.
#[derive(Debug, Default)]
struct Tally {
    /// Response bytes written without error.
    bytes: AtomicU64,
    /// Content events written without error (whole HTTP chunks of them).
    events: AtomicU64,
}

impl HostileServer {
    /// Listen on a free loopback port and answer every request with `kind`.
    pub fn start(kind: Hostile) -> HostileServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the hostile server");
        let addr = listener.local_addr().expect("the hostile server's address");
        let requests = Arc::new(AtomicU64::new(0));
        let tally = Arc::new(Tally::default());
        let (r, t) = (requests.clone(), tally.clone());
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (r, t) = (r.clone(), t.clone());
                thread::spawn(move || serve(conn, kind, &r, &t));
            }
        });
        HostileServer {
            url: format!("http://{addr}"),
            requests,
            tally,
        }
    }

    /// Requests received so far (a request counts once its head and body were read).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Response bytes the client accepted so far (written without error).
    pub fn bytes_sent(&self) -> u64 {
        self.tally.bytes.load(Ordering::SeqCst)
    }

    /// Content events (chunks with text) the client accepted so far.
    pub fn content_events_sent(&self) -> u64 {
        self.tally.events.load(Ordering::SeqCst)
    }
}

/// Serve one connection: every request on it gets the hostile answer, until
/// the client closes it (or stops reading, which fails a write).
fn serve(conn: TcpStream, kind: Hostile, requests: &AtomicU64, tally: &Tally) {
    let _ = conn.set_nodelay(true);
    let Ok(write_half) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    let mut out = Counting {
        inner: write_half,
        tally,
    };
    while read_request(&mut reader).is_ok() {
        requests.fetch_add(1, Ordering::SeqCst);
        if answer(&mut out, kind).is_err() {
            return;
        }
    }
}

/// A writer that counts the bytes written without error.
struct Counting<'a> {
    inner: TcpStream,
    tally: &'a Tally,
}

impl Counting<'_> {
    /// `n` more content events went out.
    fn events(&self, n: u64) {
        self.tally.events.fetch_add(n, Ordering::SeqCst);
    }
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.tally.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Read one request head and its `Content-Length` body; an error at EOF.
fn read_request(r: &mut BufReader<TcpStream>) -> io::Result<()> {
    let mut length = 0usize;
    let mut line = String::new();
    let mut first = true;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let l = line.trim_end();
        if l.is_empty() && !first {
            break;
        }
        first = false;
        if let Some((name, value)) = l.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    io::copy(&mut r.by_ref().take(length as u64), &mut io::sink())?;
    Ok(())
}

/// One chat-completion chunk event carrying `content`.
fn chunk(content: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-hostile\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"hostile\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n"
    )
}

/// The end of a valid stream: a finish chunk, usage, `[DONE]`.
fn ending(usage_tokens: u64) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-hostile\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"hostile\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
         data: {{\"id\":\"chatcmpl-hostile\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"hostile\",\"choices\":[],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{usage_tokens},\"total_tokens\":{}}}}}\n\n\
         data: [DONE]\n\n",
        usage_tokens + 8
    )
}

/// Write `data` as one HTTP chunk.
fn http_chunk(out: &mut impl Write, data: &[u8]) -> io::Result<()> {
    write!(out, "{:x}\r\n", data.len())?;
    out.write_all(data)?;
    out.write_all(b"\r\n")
}

/// Write `block` as HTTP chunks until at least `total` bytes went out.
fn repeat(out: &mut impl Write, block: &[u8], total: u64) -> io::Result<()> {
    let mut written = 0u64;
    while written < total {
        http_chunk(out, block)?;
        written += block.len() as u64;
    }
    Ok(())
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n";

/// Send the hostile answer to one request.
fn answer(out: &mut Counting<'_>, kind: Hostile) -> io::Result<()> {
    match kind {
        Hostile::HugeLine { bytes } => {
            out.write_all(SSE_HEAD.as_bytes())?;
            out.write_all(b"\r\n")?;
            let event = chunk("a");
            // the event with its one-letter content cut open: the content
            // grows to `bytes` in the middle of the line
            let (start, end) = event.split_at(event.find("\"a\"").map_or(0, |i| i + 1));
            http_chunk(out, start.as_bytes())?;
            let block = vec![b'a'; 64 * 1024];
            repeat(out, &block, bytes)?;
            http_chunk(out, end.as_bytes())?;
            out.events(1);
            http_chunk(out, ending(1).as_bytes())?;
        }
        Hostile::Flood {
            bytes,
            usage_tokens,
        } => {
            out.write_all(SSE_HEAD.as_bytes())?;
            out.write_all(b"\r\n")?;
            let event = chunk("a");
            let per_block = (64 * 1024) / event.len();
            let block = event.repeat(per_block);
            // counted per block written, so a client that hangs up mid-way
            // leaves the count at what it could have read
            let mut left = bytes;
            while left > 0 {
                http_chunk(out, block.as_bytes())?;
                out.events(per_block as u64);
                left = left.saturating_sub(block.len() as u64);
            }
            http_chunk(out, ending(usage_tokens).as_bytes())?;
        }
        Hostile::ManyHeaders { count } => {
            out.write_all(SSE_HEAD.as_bytes())?;
            for i in 0..count {
                write!(out, "x-hostile-{i}: {i}\r\n")?;
            }
            out.write_all(b"\r\n")?;
            http_chunk(out, chunk("a").as_bytes())?;
            out.events(1);
            http_chunk(out, ending(1).as_bytes())?;
        }
        Hostile::LongHeader { bytes } => {
            out.write_all(SSE_HEAD.as_bytes())?;
            out.write_all(b"x-hostile: ")?;
            let block = vec![b'a'; 64 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(block.len());
                out.write_all(&block[..n])?;
                left -= n;
            }
            out.write_all(b"\r\n\r\n")?;
            http_chunk(out, chunk("a").as_bytes())?;
            out.events(1);
            http_chunk(out, ending(1).as_bytes())?;
        }
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

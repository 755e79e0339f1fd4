//! Connection reuse against servers that close connections the way real
//! ones do, played by a scripted TCP server in this file: each accepted
//! connection answers its requests as its script says (answer and keep the
//! connection, answer and close without `Connection: close` like
//! llama-server, read the request and close without a word as a server does
//! when its idle timeout fires just as the request arrives, break off inside
//! the head or the body). Every test runs with both HTTP/1.1 readers (our
//! own and hyper's).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cicada_client::http::{Body, Client, H1Impl, Headers, HttpError, Method, Request, Settings};
use cicada_request::TlsSettings;

/// What the server does with one request on a connection.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Act {
    /// A complete chunked response; the connection stays open.
    Answer,
    /// A complete chunked response, then close (no `Connection: close`).
    AnswerAndClose,
    /// Read the request, then close without a byte.
    Close,
    /// Read the request, send half a status line, close.
    HalfHead,
    /// Send the head and one chunk, then close.
    HalfBody,
}

/// A server whose n-th accepted connection follows `scripts[n]` (the last
/// script repeats); it counts the connections it accepted.
struct Scripted {
    url: String,
    accepted: Arc<Mutex<usize>>,
}

const BODY: &[u8] = b"data: {\"x\":1}\n\ndata: [DONE]\n\n";

fn answer(s: &mut TcpStream) -> std::io::Result<()> {
    let mut wire =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    wire.extend_from_slice(format!("{:x}\r\n", BODY.len()).as_bytes());
    wire.extend_from_slice(BODY);
    wire.extend_from_slice(b"\r\n0\r\n\r\n");
    s.write_all(&wire)
}

/// Read one request (head and Content-Length body); false at end of stream.
fn read_request(s: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return false,
        }
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).is_ok()
}

impl Scripted {
    fn start(scripts: Vec<Vec<Act>>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/completions", listener.local_addr().unwrap());
        let accepted = Arc::new(Mutex::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { return };
                let n = {
                    let mut c = count.lock().unwrap();
                    *c += 1;
                    *c - 1
                };
                let script = scripts[n.min(scripts.len() - 1)].clone();
                std::thread::spawn(move || {
                    for act in script {
                        if !read_request(&mut s) {
                            return;
                        }
                        let keep = match act {
                            Act::Answer => answer(&mut s).is_ok(),
                            Act::AnswerAndClose => {
                                let _ = answer(&mut s);
                                false
                            }
                            Act::Close => false,
                            Act::HalfHead => {
                                let _ = s.write_all(b"HTTP/1.1 2");
                                false
                            }
                            Act::HalfBody => {
                                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
                                false
                            }
                        };
                        if !keep {
                            let _ = s.shutdown(std::net::Shutdown::Both);
                            return;
                        }
                    }
                    // script done: wait for the client to hang up
                    let _ = read_request(&mut s);
                });
            }
        });
        Scripted { url, accepted }
    }

    fn accepted(&self) -> usize {
        *self.accepted.lock().unwrap()
    }
}

/// What one exchange gave: the response's resends and reuse, and the body.
struct Got {
    resends: u32,
    reused: bool,
    body: Vec<u8>,
}

/// Send one request and read its body.
async fn exchange(client: &Client, url: &str) -> Result<Got, HttpError> {
    let endpoint = client.endpoint(url)?;
    let headers = Headers::default();
    let parts = [bytes::Bytes::from_static(b"{}")];
    let mut resp = client
        .send(Request {
            method: Method::Post,
            endpoint: &endpoint,
            headers: &headers,
            request_id: Some("r"),
            body: Some(Body {
                parts: &parts,
                content_type: "application/json",
            }),
        })
        .await?;
    let mut body = Vec::new();
    while let Some((piece, _)) = resp.chunk().await? {
        body.extend_from_slice(piece);
    }
    Ok(Got {
        resends: resp.resends.total(),
        reused: resp.reused,
        body,
    })
}

/// A client of each HTTP/1.1 reader.
fn clients(keep_alive: bool) -> [(H1Impl, Client); 2] {
    [H1Impl::Wire, H1Impl::Hyper].map(|h| {
        let c = Client::with(Settings {
            h1: h,
            ..Settings::new(&TlsSettings::default(), keep_alive)
        })
        .unwrap();
        (h, c)
    })
}

/// Past the pool's settle window: what the server does with a connection
/// after a response is known, and reuse may begin.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(40)).await;
}

/// Connections the pool checks (and does not reuse) before it trusts an
/// origin to keep them: its learning, plus the one it then reuses.
const LEARNING: usize = 4;

/// Show the pool that the server keeps connections: [`LEARNING`]
/// requests, each on a fresh connection, the last one parked for reuse.
async fn teach_keep_alive(c: &Client, url: &str) {
    for _ in 0..LEARNING {
        let got = exchange(c, url).await.unwrap();
        assert!(!got.reused, "reused while learning");
        settle().await;
    }
}

#[tokio::test]
async fn a_keep_alive_server_gets_one_connection_once_it_showed_it_keeps_them() {
    for (h, c) in clients(true) {
        let server = Scripted::start(vec![vec![Act::Answer; 10]]);
        teach_keep_alive(&c, &server.url).await;
        for _ in 0..6 {
            let got = exchange(&c, &server.url).await.unwrap();
            assert!(got.reused, "{h:?}");
            assert_eq!(got.resends, 0, "{h:?}");
            assert_eq!(got.body, BODY);
        }
        assert_eq!(server.accepted(), LEARNING, "{h:?}");
    }
}

/// Scripts: the learning connections answer once, the last of them goes
/// on with `then`.
fn after_learning(then: Act) -> Vec<Vec<Act>> {
    let mut scripts = vec![vec![Act::Answer]; LEARNING - 1];
    scripts.push(vec![Act::Answer, then]);
    scripts.push(vec![Act::Answer]);
    scripts
}

#[tokio::test]
async fn a_server_that_closes_after_every_response_costs_connections_not_failures() {
    for (h, c) in clients(true) {
        // llama-server: answers as if keep-alive, closes anyway
        let server = Scripted::start(vec![vec![Act::AnswerAndClose]]);
        for i in 0..20 {
            let got = exchange(&c, &server.url).await.unwrap();
            assert_eq!(got.body, BODY);
            assert!(!got.reused && got.resends == 0, "{h:?} request {i}");
            if i == 0 {
                settle().await;
            }
        }
        assert_eq!(server.accepted(), 20, "{h:?}");
    }
}

/// A reused connection the server closes as the request arrives, having
/// read it (an idle timeout racing the request): the request may have
/// reached the server, so it is a failure, never sent a second time.
#[tokio::test]
async fn a_request_the_server_read_before_closing_is_never_sent_again() {
    for (h, c) in clients(true) {
        let server = Scripted::start(after_learning(Act::Close));
        teach_keep_alive(&c, &server.url).await;
        let e = exchange(&c, &server.url).await.err();
        assert!(matches!(e, Some(HttpError::NoResponse(_))), "{h:?}: {e:?}");
        assert_eq!(server.accepted(), LEARNING, "{h:?}: not sent again");
    }
}

#[tokio::test]
async fn a_fresh_connection_that_closes_is_a_failure_not_a_retry() {
    for (h, c) in clients(true) {
        let server = Scripted::start(vec![vec![Act::Close]]);
        let e = exchange(&c, &server.url).await.err();
        assert!(matches!(e, Some(HttpError::NoResponse(_))), "{h:?}: {e:?}");
        assert_eq!(server.accepted(), 1, "{h:?}: no second connection");
    }
}

#[tokio::test]
async fn a_reused_connection_that_broke_after_response_bytes_is_not_retried() {
    for (h, c) in clients(true) {
        for act in [Act::HalfHead, Act::HalfBody] {
            let server = Scripted::start(after_learning(act));
            teach_keep_alive(&c, &server.url).await;
            assert!(exchange(&c, &server.url).await.is_err(), "{h:?} {act:?}");
            assert_eq!(server.accepted(), LEARNING, "{h:?} {act:?}: never resent");
        }
    }
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_not_reused() {
    for (h, c) in clients(true) {
        // answers once, then closes while idle (uvicorn's keep-alive timeout)
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { return };
                std::thread::spawn(move || {
                    if read_request(&mut s) && answer(&mut s).is_ok() {
                        std::thread::sleep(Duration::from_millis(50));
                        let _ = s.shutdown(std::net::Shutdown::Both);
                    }
                });
            }
        });
        exchange(&c, &url).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // the close was seen before reuse: a fresh connection, nothing resent
        let got = exchange(&c, &url).await.unwrap();
        assert!(!got.reused && got.resends == 0, "{h:?}");
        assert_eq!(got.body, BODY);
    }
}

#[tokio::test]
async fn without_keep_alive_every_request_opens_its_own_connection() {
    for (h, c) in clients(false) {
        let server = Scripted::start(vec![vec![Act::Answer; 5]]);
        for _ in 0..3 {
            exchange(&c, &server.url).await.unwrap();
            settle().await;
        }
        assert_eq!(server.accepted(), 3, "{h:?}");
    }
}

//! Connection reuse against servers that close connections the way real
//! ones do, played by a scripted TCP server in this file: each accepted
//! connection answers its requests as its script says (answer and keep the
//! connection, answer and close without `Connection: close` like
//! llama-server, read the request and close without a word as a server does
//! when its idle timeout fires just as the request arrives, break off inside
//! the head or the body).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cicada_client::http::{Client, Headers, HttpError, Method, Request};
use cicada_scenarios::plan::TlsSettings;

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

/// Send one request and read its body; Ok((reconnected, body)).
async fn exchange(client: &Client, url: &str) -> Result<(bool, Vec<u8>), HttpError> {
    let endpoint = client.endpoint(url)?;
    let headers = Headers::default();
    let mut resp = client
        .send(Request {
            method: Method::Post,
            endpoint: &endpoint,
            headers: &headers,
            request_id: Some("r"),
            json: Some(b"{}"),
        })
        .await?;
    let mut body = Vec::new();
    while let Some((piece, _)) = resp.chunk().await? {
        body.extend_from_slice(piece);
    }
    Ok((resp.reconnected, body))
}

fn client() -> Client {
    Client::new(&TlsSettings::default(), true).unwrap()
}

#[tokio::test]
async fn a_keep_alive_server_gets_one_connection_for_many_requests() {
    let server = Scripted::start(vec![vec![Act::Answer; 10]]);
    let c = client();
    for _ in 0..10 {
        let (reconnected, body) = exchange(&c, &server.url).await.unwrap();
        assert!(!reconnected);
        assert_eq!(body, BODY);
    }
    assert_eq!(server.accepted(), 1);
}

#[tokio::test]
async fn a_server_that_closes_after_every_response_costs_connections_not_failures() {
    // llama-server: answers as if keep-alive, closes anyway
    let server = Scripted::start(vec![vec![Act::AnswerAndClose]]);
    let c = client();
    for _ in 0..20 {
        let (_, body) = exchange(&c, &server.url).await.unwrap();
        assert_eq!(body, BODY);
    }
    assert_eq!(server.accepted(), 20);
}

#[tokio::test]
async fn a_reused_connection_closed_under_the_request_is_retried_once_on_a_fresh_one() {
    // the first connection answers once, then closes when the next request
    // arrives (an idle timeout racing the request); the second answers
    let server = Scripted::start(vec![vec![Act::Answer, Act::Close], vec![Act::Answer]]);
    let c = client();
    let (first, _) = exchange(&c, &server.url).await.unwrap();
    assert!(!first);
    let (second, body) = exchange(&c, &server.url).await.unwrap();
    assert!(second, "the second request should have been resent");
    assert_eq!(body, BODY);
    assert_eq!(server.accepted(), 2);
}

#[tokio::test]
async fn a_fresh_connection_that_closes_is_a_failure_not_a_retry() {
    let server = Scripted::start(vec![vec![Act::Close]]);
    let c = client();
    let e = exchange(&c, &server.url).await.unwrap_err();
    assert_eq!(e, HttpError::ClosedBeforeResponse { partial: false });
    assert_eq!(server.accepted(), 1, "no second connection");
}

#[tokio::test]
async fn a_reused_connection_that_broke_after_response_bytes_is_not_retried() {
    for act in [Act::HalfHead, Act::HalfBody] {
        let server = Scripted::start(vec![vec![Act::Answer, act], vec![Act::Answer]]);
        let c = client();
        exchange(&c, &server.url).await.unwrap();
        let e = exchange(&c, &server.url).await.unwrap_err();
        let expected = match act {
            Act::HalfHead => HttpError::ClosedBeforeResponse { partial: true },
            _ => HttpError::ClosedInBody,
        };
        assert_eq!(e, expected, "{act:?}");
        assert_eq!(server.accepted(), 1, "{act:?}: never resent");
    }
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_not_reused() {
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
    let c = client();
    exchange(&c, &url).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // the close was seen before reuse: a fresh connection, no retry needed
    let (reconnected, body) = exchange(&c, &url).await.unwrap();
    assert!(!reconnected);
    assert_eq!(body, BODY);
}

#[tokio::test]
async fn without_keep_alive_every_request_opens_its_own_connection() {
    let server = Scripted::start(vec![vec![Act::Answer; 5]]);
    let c = Client::new(&TlsSettings::default(), false).unwrap();
    for _ in 0..3 {
        exchange(&c, &server.url).await.unwrap();
    }
    assert_eq!(server.accepted(), 3);
}

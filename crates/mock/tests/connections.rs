//! The mock ends connections the ways real servers do: after every response
//! without saying so (llama-server), or after an idle keep-alive timeout
//! (uvicorn). Checked over raw TCP, so nothing but the socket tells.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cicada_mock::{MockConfig, MockServer};

async fn start(config: MockConfig) -> MockServer {
    MockServer::start(
        MockConfig {
            ttft_ms: 2.0,
            itl_ms: 1.0,
            ..config
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

const BODY: &str = r#"{"model":"cicada-mock","prompt":"a b","max_tokens":3,"stream":true}"#;

/// Send one streamed completion request on `s` and read its whole response
/// (chunked, ends with the zero chunk); returns the head.
fn exchange(s: &mut TcpStream) -> String {
    let req = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"0\r\n\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "closed inside the response: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    text.split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Whether the server closed `s` within `limit` (a read returns 0).
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_after_response_closes_without_saying_so() {
    let mock = start(MockConfig {
        close_after_response: true,
        ..MockConfig::default()
    })
    .await;
    let addr = mock.addr();
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let head = exchange(&mut s);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(
            !head.contains("connection: close"),
            "it must not say so: {head}"
        );
        assert!(closed_within(&mut s, Duration::from_secs(2)), "still open");
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_after_the_timeout_and_kept_before_it() {
    let mock = start(MockConfig {
        idle_timeout_ms: Some(300),
        ..MockConfig::default()
    })
    .await;
    let addr = mock.addr();
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        exchange(&mut s);
        // reused well inside the timeout: the same connection answers again
        std::thread::sleep(Duration::from_millis(50));
        exchange(&mut s);
        let idle_from = Instant::now();
        assert!(
            closed_within(&mut s, Duration::from_secs(3)),
            "never closed"
        );
        let waited = idle_from.elapsed();
        assert!(
            waited >= Duration::from_millis(250),
            "closed after {waited:?}, before the 300 ms timeout"
        );
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_connection_stays_open() {
    let mock = start(MockConfig::default()).await;
    let addr = mock.addr();
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        for _ in 0..3 {
            exchange(&mut s);
        }
        assert!(!closed_within(&mut s, Duration::from_millis(300)));
    })
    .await
    .unwrap();
}

//! What one exchange holds of a response is bounded, whatever the server
//! sends: a scripted TCP server in this file answers every request with
//! fixed bytes, and each case checks the outcome class and that the client
//! kept no more than its limits.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use cicada_client::backend::ApiCodec;
use cicada_client::clock::Clock;
use cicada_client::exchange::{Conduit, Exchange, perform};
use cicada_client::http::{Client, Headers, Settings};
use cicada_metrics::{EXACT_EVENTS, Outcome};
use cicada_request::{ResolvedSampling, ServerFamily, TlsSettings, WireApi};

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

/// A server answering every request on every connection with `wire`, then
/// closing the connection; returns its URL.
fn serve(wire: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let wire = Arc::new(wire);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            let wire = wire.clone();
            std::thread::spawn(move || {
                if read_request(&mut s) {
                    let _ = s.write_all(&wire);
                }
                let _ = s.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    url
}

/// A chunk event carrying `content`.
fn event(content: &str) -> String {
    format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}}}}]}}\n\n")
}

/// A 200 SSE response (until close) with `body`.
fn sse(body: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}")
        .into_bytes()
}

/// One exchange with a client that holds at most `limit` bytes of a response.
async fn exchange(url: &str, stream: bool, keep_text: bool, limit: usize) -> Exchange {
    let sampling = ResolvedSampling {
        temperature: None,
        top_p: None,
        top_k: None,
        ignore_eos: false,
        min_tokens: None,
        extra_body: Default::default(),
    };
    let codec = ApiCodec::new(
        WireApi::Chat,
        ServerFamily::Openai,
        "m".into(),
        sampling,
        stream,
    );
    let http = Client::with(Settings {
        max_event: limit,
        ..Settings::new(&TlsSettings::default(), true)
    })
    .unwrap();
    let headers = Headers::default();
    let clock = Clock::new(tokio::time::Instant::now());
    let conduit = Conduit {
        http: &http,
        headers: &headers,
        codec: &codec,
        clock: &clock,
        timeout: Duration::from_secs(30),
        keep_text,
        keep_output: false,
    };
    let endpoint = http.endpoint(url).unwrap();
    perform(conduit, &endpoint, "r", &[bytes::Bytes::from_static(b"{}")]).await
}

#[tokio::test]
async fn text_kept_for_counting_is_capped_at_the_limit() {
    // 40 events of 100 characters: each well within 1 KiB, 4,000 in all
    let body = event(&"a".repeat(100)).repeat(40) + "data: [DONE]\n\n";
    let url = serve(sse(&body));
    let kept = exchange(&url, true, true, 1024).await;
    let (outcome, error) = kept.outcome();
    assert_eq!(outcome, Outcome::ResponseTooLarge);
    let error = error.unwrap_or_default();
    assert!(
        error.contains("generated text") && error.contains("1KiB"),
        "{error}"
    );
    // without a tokenizer or conversation no text is kept: the stream is fine
    let unkept = exchange(&url, true, false, 1024).await;
    assert_eq!(unkept.outcome().0, Outcome::Ok);
    assert_eq!(unkept.events.len(), 40);
}

#[tokio::test]
async fn a_whole_body_over_the_limit_is_refused() {
    let content = "b".repeat(4096);
    let body = format!(
        "{{\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{content}\"}},\"finish_reason\":\"stop\"}}]}}"
    );
    let wire = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let url = serve(wire.into_bytes());
    let small = exchange(&url, false, false, 1024).await;
    let (outcome, error) = small.outcome();
    assert_eq!(outcome, Outcome::ResponseTooLarge, "{error:?}");
    assert!(error.unwrap_or_default().contains("response body"));
    let large = exchange(&url, false, false, 64 * 1024).await;
    assert_eq!(large.outcome().0, Outcome::Ok, "{:?}", large.outcome());
}

#[tokio::test]
async fn bad_response_heads_are_the_servers_answer_not_a_connect_failure() {
    let many: String = (0..200).map(|i| format!("x-{i}: {i}\r\n")).collect();
    let long = format!("x-long: {}\r\n", "c".repeat(100 * 1024));
    let cases = [
        (many, Outcome::ResponseTooLarge, "header lines"),
        (long, Outcome::ResponseTooLarge, "head passed"),
    ];
    for (headers, class, says) in cases {
        let wire = format!(
            "HTTP/1.1 200 OK\r\n{headers}\r\n{}data: [DONE]\n\n",
            event("a")
        );
        let url = serve(wire.into_bytes());
        let (outcome, error) = exchange(&url, true, false, 1 << 20).await.outcome();
        assert_eq!(outcome, class, "{error:?}");
        assert!(error.unwrap_or_default().contains(says));
    }
    let url = serve(b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec());
    let (outcome, error) = exchange(&url, true, false, 1 << 20).await.outcome();
    assert_eq!(outcome, Outcome::BadPayload, "{error:?}");
}

#[tokio::test]
async fn events_past_the_exact_bound_are_counted_in_bounded_memory() {
    let n = 3 * EXACT_EVENTS + 5;
    let body = event("a").repeat(n) + "data: [DONE]\n\n";
    let url = serve(sse(&body));
    let ex = exchange(&url, true, false, 1 << 20).await;
    assert_eq!(ex.outcome().0, Outcome::Ok);
    assert_eq!(ex.events.len(), n as u64);
    assert!(ex.events.merged());
    assert!(ex.events.stretches().len() <= EXACT_EVENTS);
}

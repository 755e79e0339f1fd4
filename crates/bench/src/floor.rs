//! The floor client: the least a client can do to run one selftest level, so
//! cicada's figures have something to be judged against on the same machine.
//!
//! One task per stream on a bare `hyper` HTTP/1.1 connection (opened when
//! the stream starts, reused for its next requests), the same request body
//! cicada sends, and nothing else: no SSE parser beyond finding each blank
//! line, no JSON parsing, no histograms, no reports. An event counts as
//! content when it holds a non-empty `"content":"...`; it is stamped when the
//! body frame that completed it is handed over. The selftest runs it
//! in a process of its own, pinned where cicada's worker runs, and reads one
//! JSON line of [`FloorFigures`] from its stdout.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What the floor client measured at one level.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct FloorFigures {
    /// Requests that completed.
    pub requests: u64,
    /// Content events received.
    pub events: u64,
    /// Mean time to the first content event, ms (from before the connect, for a stream's first request).
    pub mean_ttft_ms: f64,
    /// Mean gap between content events, ms.
    pub mean_itl_ms: f64,
    /// 99th percentile gap between content events, ms.
    pub p99_itl_ms: f64,
    /// 99th percentile time to the first content event, ms.
    #[serde(default)]
    pub p99_ttft_ms: f64,
    /// The process's user+sys CPU time, µs.
    pub cpu_us: f64,
    /// When the streams were due to start, µs since the Unix epoch.
    pub start_unix_us: f64,
}

/// One level for the floor client.
#[derive(Debug, Clone)]
pub struct FloorLevel {
    /// The mock's base URL (`http://ip:port`).
    pub url: String,
    pub streams: u32,
    /// Streams started per second (all at once when `None`).
    pub spawn_rate: Option<f64>,
    /// How long streams keep starting requests.
    pub duration: Duration,
    /// Requests sent before this much time has passed are not counted.
    pub warmup: Duration,
    pub output_tokens: u32,
    pub input_len: u32,
}

/// What one stream saw.
#[derive(Default)]
struct Seen {
    requests: u64,
    ttft_us: Vec<u64>,
    gaps_us: Vec<u32>,
}

/// The body cicada sends to the mock for a chat completion (same fields, same size).
fn body(level: &FloorLevel) -> Bytes {
    let prompt = vec!["word"; level.input_len.max(1) as usize].join(" ");
    let v = serde_json::json!({
        "model": "cicada-mock",
        "messages": [{"role": "user", "content": prompt}],
        "max_completion_tokens": level.output_tokens,
        "stream": true,
        "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        "ignore_eos": true,
    });
    Bytes::from(v.to_string())
}

/// Whether a frame carries generated text (not the role chunk, usage or `[DONE]`).
fn has_content(frame: &[u8]) -> bool {
    const KEY: &[u8] = b"\"content\":\"";
    frame
        .windows(KEY.len())
        .position(|w| w == KEY)
        .is_some_and(|i| frame.get(i + KEY.len()).is_some_and(|b| *b != b'"'))
}

/// Take the complete events (ended by a blank line) off the front of `carry`;
/// returns how many carried generated text.
fn complete_events(carry: &mut Vec<u8>) -> usize {
    let mut contents = 0;
    let mut start = 0;
    while let Some(end) = carry[start..].windows(2).position(|w| w == b"\n\n") {
        let event = &carry[start..start + end];
        contents += usize::from(has_content(event));
        start += end + 2;
    }
    carry.drain(..start);
    contents
}

/// Run every stream of the level and sum up what they saw.
pub async fn run(level: FloorLevel) -> anyhow::Result<FloorFigures> {
    let addr: SocketAddr = level
        .url
        .strip_prefix("http://")
        .context("the floor client speaks plain http")?
        .parse()
        .context("the mock's address")?;
    let body = body(&level);
    let start = Instant::now();
    let start_unix_us = unix_now_us();
    let until = start + level.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..level.streams {
        let begin = match level.spawn_rate {
            Some(r) if r > 0.0 => start + Duration::from_secs_f64(f64::from(i) / r),
            _ => start,
        };
        let window = Window {
            begin,
            counted_from: start + level.warmup,
            until,
        };
        tasks.spawn(stream(addr, body.clone(), window));
    }
    let mut all = Seen::default();
    while let Some(joined) = tasks.join_next().await {
        let seen = joined.context("a floor stream panicked")??;
        all.requests += seen.requests;
        all.ttft_us.extend(seen.ttft_us);
        all.gaps_us.extend(seen.gaps_us);
    }
    if all.ttft_us.is_empty() {
        bail!("the floor client completed no request");
    }
    all.gaps_us.sort_unstable();
    all.ttft_us.sort_unstable();
    let mean = |sum: f64, n: usize| if n == 0 { 0.0 } else { sum / n as f64 };
    let p99 = nearest_rank_p99(&all.gaps_us).unwrap_or(0);
    let p99_ttft = nearest_rank_p99(&all.ttft_us).unwrap_or(0);
    Ok(FloorFigures {
        requests: all.requests,
        events: all.gaps_us.len() as u64 + all.ttft_us.len() as u64,
        mean_ttft_ms: mean(all.ttft_us.iter().sum::<u64>() as f64, all.ttft_us.len()) / 1e3,
        mean_itl_ms: mean(
            all.gaps_us.iter().map(|g| u64::from(*g)).sum::<u64>() as f64,
            all.gaps_us.len(),
        ) / 1e3,
        p99_itl_ms: f64::from(p99) / 1e3,
        p99_ttft_ms: p99_ttft as f64 / 1e3,
        cpu_us: cicada_sys::process::resource_usage().cpu_us as f64,
        start_unix_us,
    })
}

/// The 99th percentile of sorted samples by nearest rank.
fn nearest_rank_p99<T: Copy>(sorted: &[T]) -> Option<T> {
    sorted
        .get(((sorted.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied()
}

/// When a stream starts, from when its requests count, and when it stops starting them.
#[derive(Clone, Copy)]
struct Window {
    begin: Instant,
    counted_from: Instant,
    until: Instant,
}

/// One stream: connect, then request after request until the window ends.
async fn stream(addr: SocketAddr, body: Bytes, w: Window) -> anyhow::Result<Seen> {
    tokio::time::sleep_until(w.begin).await;
    let mut seen = Seen::default();
    let mut sent = Instant::now();
    let tcp = TcpStream::connect(addr).await.context("connecting")?;
    tcp.set_nodelay(true).context("TCP_NODELAY")?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(tcp))
        .await
        .context("HTTP/1.1 handshake")?;
    tokio::spawn(conn);
    loop {
        let req = http::Request::post("/v1/chat/completions")
            .header(http::header::HOST, addr.to_string())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))
            .context("building the request")?;
        let resp = sender.send_request(req).await.context("sending")?;
        if !resp.status().is_success() {
            bail!("the mock answered {}", resp.status());
        }
        let mut body_in = resp.into_body();
        let counted = sent >= w.counted_from;
        let mut last: Option<Instant> = None;
        // bytes of an event whose blank line has not arrived yet
        let mut carry: Vec<u8> = Vec::new();
        while let Some(frame) = body_in.frame().await {
            let frame = frame.context("reading the stream")?;
            let at = Instant::now();
            let Some(data) = frame.data_ref() else {
                continue;
            };
            carry.extend_from_slice(data);
            let contents = complete_events(&mut carry);
            if !counted {
                continue;
            }
            for _ in 0..contents {
                match last {
                    None => seen
                        .ttft_us
                        .push(at.duration_since(sent).as_micros() as u64),
                    Some(prev) => seen.gaps_us.push(
                        at.duration_since(prev)
                            .as_micros()
                            .min(u128::from(u32::MAX)) as u32,
                    ),
                }
                last = Some(at);
            }
        }
        seen.requests += u64::from(counted);
        if Instant::now() >= w.until {
            return Ok(seen);
        }
        sender.ready().await.context("waiting for the connection")?;
        sent = Instant::now();
    }
}

/// Now on the wall clock, µs since the Unix epoch: the one clock the mock's
/// request log and every client on the machine share.
pub(super) fn unix_now_us() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_frames_with_text_are_content() {
        assert!(has_content(
            br#"data: {"choices":[{"index":0,"delta":{"content":" the"}}]}"#
        ));
        assert!(!has_content(
            br#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#
        ));
        assert!(!has_content(b"data: [DONE]\n\n"));
        assert!(!has_content(
            br#"data: {"choices":[],"usage":{"prompt_tokens":3}}"#
        ));
    }

    #[test]
    fn events_split_across_frames_count_once_when_complete() {
        let stream = b"data: {\"delta\":{\"content\":\"\"}}\n\ndata: {\"delta\":{\"content\":\" a\"}}\n\ndata: {\"delta\":{\"content\":\" b\"}}\n\ndata: [DONE]\n\n";
        for cut in 0..stream.len() {
            let mut carry = Vec::new();
            carry.extend_from_slice(&stream[..cut]);
            let mut n = complete_events(&mut carry);
            carry.extend_from_slice(&stream[cut..]);
            n += complete_events(&mut carry);
            assert_eq!((n, carry.len()), (2, 0), "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn a_level_against_the_mock_counts_every_token() {
        let mock = cicada_mock::MockServer::start(
            cicada_mock::MockConfig {
                ttft_ms: 5.0,
                itl_ms: 1.0,
                ..cicada_mock::MockConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let figures = run(FloorLevel {
            url: mock.url(),
            streams: 4,
            spawn_rate: None,
            duration: Duration::from_millis(100),
            warmup: Duration::ZERO,
            output_tokens: 8,
            input_len: 4,
        })
        .await
        .unwrap();
        let stats = mock.stats();
        assert_eq!(figures.requests, stats.completed);
        assert_eq!(figures.events, stats.output_tokens);
        assert!(figures.mean_ttft_ms >= 5.0, "{figures:?}");
        assert!(figures.mean_itl_ms > 0.0 && figures.p99_itl_ms >= figures.mean_itl_ms / 2.0);
        assert!(figures.cpu_us > 0.0);
    }
}

//! A worker that keeps no rules: it dials the coordinator's worker port like
//! `worker` does, but sends whatever the test tells it (a Hello with any
//! fields, any token or none, then any sequence of messages) and hands back
//! everything the coordinator answers. For tests of what the coordinator
//! trusts: strangers, forged hellos, forged reports.
//!
//! [`HostileWorker`] speaks the real protocol through tonic; [`raw_hello`]
//! streams a Hello of any size without ever holding it (a 200 MB hostname
//! costs this process a few KB).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use cicada_proto::v1::{
    self, coordinator_client::CoordinatorClient, coordinator_message::Body as CBody,
    worker_message::Body as WBody,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::codegen::http;
use tonic::transport::{Channel, Endpoint};

/// One attached stream to the coordinator, under the test's control.
pub struct HostileWorker {
    tx: Option<mpsc::Sender<v1::WorkerMessage>>,
    inbound: Streaming<v1::CoordinatorMessage>,
}

/// What the coordinator said to a [`HostileWorker::join`].
#[derive(Debug)]
pub enum Answer {
    /// It was let in.
    Welcome(v1::Welcome),
    /// It was turned away with this reason.
    Reject(String),
    /// The stream failed or ended before any answer.
    Failed(tonic::Status),
}

/// A Hello as an honest worker of this build sends it: this version, the
/// given token, host `hostile-worker`, one CPU, no requested index.
pub fn hello(token: &str) -> v1::Hello {
    v1::Hello {
        version: cicada_proto::VERSION.to_string(),
        requested_index: None,
        hostname: "hostile-worker".into(),
        cpus: 1,
        auth_token: token.into(),
        pid: std::process::id(),
    }
}

/// An endpoint for `url` (`http://` or `https://`), with the given CA and
/// server name for TLS.
pub fn endpoint(url: &str, ca_pem: Option<&str>, domain: Option<&str>) -> Endpoint {
    let mut e = Endpoint::from_shared(url.to_string())
        .unwrap_or_else(|err| panic!("bad coordinator url {url}: {err}"))
        .connect_timeout(Duration::from_secs(5));
    if url.starts_with("https://") {
        use tonic::transport::{Certificate, ClientTlsConfig};
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = ca_pem {
            tls = tls.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some(d) = domain {
            tls = tls.domain_name(d);
        }
        e = e.tls_config(tls).expect("client TLS config");
    }
    e
}

impl HostileWorker {
    /// Dial `url` and open an attach stream whose first message is `first`
    /// (`None`: a stream that says nothing). Returns once the coordinator
    /// answered the stream's headers: for a real coordinator, once it has
    /// read (or given up on) the hello.
    pub async fn attach(url: &str, first: Option<v1::Hello>) -> Result<Self, tonic::Status> {
        Self::attach_on(endpoint(url, None, None), first).await
    }

    /// [`attach`](Self::attach) over a prepared endpoint (TLS, timeouts).
    pub async fn attach_on(
        endpoint: Endpoint,
        first: Option<v1::Hello>,
    ) -> Result<Self, tonic::Status> {
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("connect: {e:?}")))?;
        let mut client = CoordinatorClient::new(channel)
            .max_decoding_message_size(cicada_proto::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(cicada_proto::MAX_MESSAGE_BYTES);
        let (tx, rx) = mpsc::channel(1024);
        if let Some(h) = first {
            tx.send(message(WBody::Hello(h)))
                .await
                .map_err(|_| tonic::Status::internal("outgoing stream closed"))?;
        }
        let inbound = client.attach(ReceiverStream::new(rx)).await?.into_inner();
        Ok(Self {
            tx: Some(tx),
            inbound,
        })
    }

    /// Attach with `hello` and wait for the coordinator's first word.
    pub async fn join(url: &str, hello: v1::Hello) -> (Option<Self>, Answer) {
        Self::join_on(endpoint(url, None, None), hello).await
    }

    /// [`join`](Self::join) over a prepared endpoint.
    pub async fn join_on(endpoint: Endpoint, hello: v1::Hello) -> (Option<Self>, Answer) {
        let mut w = match Self::attach_on(endpoint, Some(hello)).await {
            Ok(w) => w,
            Err(s) => return (None, Answer::Failed(s)),
        };
        match w.inbound.message().await {
            Ok(Some(v1::CoordinatorMessage {
                body: Some(CBody::Welcome(welcome)),
            })) => (Some(w), Answer::Welcome(welcome)),
            Ok(Some(v1::CoordinatorMessage {
                body: Some(CBody::Reject(r)),
            })) => (Some(w), Answer::Reject(r.reason)),
            Ok(other) => (
                Some(w),
                Answer::Failed(tonic::Status::internal(format!(
                    "unexpected first answer {other:?}"
                ))),
            ),
            Err(s) => (Some(w), Answer::Failed(s)),
        }
    }

    /// Send any message body; `false` once the coordinator stopped reading
    /// (or we stopped sending).
    pub async fn send(&self, body: WBody) -> bool {
        self.send_message(message(body)).await
    }

    /// Send a whole message as built by the test (a body of `None` included).
    pub async fn send_message(&self, msg: v1::WorkerMessage) -> bool {
        match &self.tx {
            Some(tx) => tx.send(msg).await.is_ok(),
            None => false,
        }
    }

    /// End our side of the stream (the coordinator sees it close) and keep
    /// reading what it sends.
    pub fn stop_sending(&mut self) {
        self.tx = None;
    }

    /// The coordinator's next message, pings included; `Ok(None)` when its
    /// stream ended.
    pub async fn recv(&mut self) -> Result<Option<CBody>, tonic::Status> {
        Ok(self.inbound.message().await?.and_then(|m| m.body))
    }

    /// The coordinator's next message that is not a ping (nor a piece of
    /// an assigned pool: [`plan_of`](Self::plan_of) reads those), within
    /// `limit`; `None` when the stream ended, failed or `limit` passed.
    pub async fn next_command(&mut self, limit: Duration) -> Option<CBody> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let next = tokio::time::timeout_at(deadline, self.recv()).await;
            match next {
                Ok(Ok(Some(CBody::Ping(_) | CBody::PoolChunk(_)))) => continue,
                Ok(Ok(Some(body))) => return Some(body),
                _ => return None,
            }
        }
    }
}

fn message(body: WBody) -> v1::WorkerMessage {
    v1::WorkerMessage { body: Some(body) }
}

impl HostileWorker {
    /// `assign`'s plan, its pool read from the pieces that follow it (call
    /// it right after [`next_command`](Self::next_command) gave the Assign).
    pub async fn plan_of(&mut self, assign: &v1::Assign) -> cicada_plan::Plan {
        use cicada_proto::convert::{PoolReceiver, decode_plan};
        let mut pool = PoolReceiver::start(assign.step, assign.pool_chunks, assign.pool_bytes)
            .expect("an announced pool");
        loop {
            match self.recv().await.expect("the coordinator's stream") {
                Some(CBody::PoolChunk(c)) => {
                    if pool.push(c).expect("a good piece") {
                        break;
                    }
                }
                Some(CBody::Ping(_)) => {}
                other => panic!("a piece of the pool was due, not {other:?}"),
            }
        }
        let pool = pool.finish().expect("the whole pool");
        decode_plan(
            assign.plan.clone().expect("a plan"),
            assign.plan_format,
            pool,
        )
        .expect("the coordinator's plan decodes")
    }

    /// The Ready an honest worker answers `assign` with (its planned count
    /// from the plan and pool, read as [`plan_of`](Self::plan_of) does).
    pub async fn ready_for(&mut self, assign: &v1::Assign) -> WBody {
        let plan = self.plan_of(assign).await;
        ready(assign.step, plan.planned_requests())
    }
}

/// `Ready { step, planned_requests }`.
pub fn ready(step: u32, planned_requests: u64) -> WBody {
    WBody::Ready(v1::Ready {
        step,
        planned_requests,
        routes: Vec::new(),
        clock: None,
    })
}

/// `Done { step, sent }`.
pub fn done(step: u32, sent: u64) -> WBody {
    WBody::Done(v1::Done {
        step,
        sent,
        cancelled: false,
        stopped_by: String::new(),
        not_sent_at_end: 0,
    })
}

/// `Heartbeat { seq, in_flight }`.
pub fn heartbeat(seq: u64, in_flight: u64) -> WBody {
    WBody::Heartbeat(v1::Heartbeat { seq, in_flight })
}

/// `CapProgress { step, completed, sent }`.
pub fn cap_progress(step: u32, completed: u64, sent: u64) -> WBody {
    WBody::CapProgress(v1::CapProgress {
        step,
        completed,
        sent,
    })
}

/// `CapWaiting { step, index }`.
pub fn cap_waiting(step: u32, index: u64) -> WBody {
    WBody::CapWaiting(v1::CapWaiting { step, index })
}

/// `WorkerError { message, fatal }`.
pub fn error(message: &str, fatal: bool) -> WBody {
    WBody::Error(v1::WorkerError {
        message: message.into(),
        fatal,
    })
}

/// A Report of `step` with its interval number, end (µs after the start
/// barrier) and scopes; every other field zero.
pub fn report(step: u32, seq: u64, interval_end_us: u64, scopes: Vec<v1::ScopedMetrics>) -> WBody {
    WBody::Report(v1::Report {
        step,
        seq,
        interval_end_us,
        scopes,
        ..v1::Report::default()
    })
}

/// One target's measurements: `ok` successful requests of target 0, each
/// with `latency_us` as its TTFT and end-to-end latency. Change any field of
/// the result to forge something else.
pub fn ok_scope(ok: u64, latency_us: u64) -> v1::ScopedMetrics {
    v1::ScopedMetrics {
        outcomes: vec![outcome("ok", ok, "")],
        histograms: vec![
            histogram("ttft", &[(latency_us, ok)]),
            histogram("e2el", &[(latency_us, ok)]),
        ],
        ..v1::ScopedMetrics::default()
    }
}

/// One outcome class (`ok`, `http_503`, `timeout`, ...) with its count.
pub fn outcome(class: &str, count: u64, first_error: &str) -> v1::Outcome {
    v1::Outcome {
        class: class.into(),
        count,
        first_error: first_error.into(),
    }
}

/// A counter by its wire name.
pub fn counter(name: &str, value: u64) -> v1::Counter {
    v1::Counter {
        name: name.into(),
        value,
    }
}

/// A histogram of `metric` holding `count` values of `value` per pair, in
/// the wire's delta-coded pair form (ascending values, as a worker sends
/// them; anything else is the test's forgery). Sums wrap like the wire's integers.
pub fn histogram(metric: &str, pairs: &[(u64, u64)]) -> v1::Histogram {
    let mut buckets = Vec::with_capacity(pairs.len() * 2);
    let (mut prev, mut sum, mut sum_sq) = (0u64, 0u64, 0u128);
    for &(value, count) in pairs {
        buckets.push(value.wrapping_sub(prev));
        buckets.push(count);
        prev = value;
        sum = sum.wrapping_add(value.wrapping_mul(count));
        let square = u128::from(value) * u128::from(value);
        sum_sq = sum_sq.wrapping_add(square.wrapping_mul(u128::from(count)));
    }
    v1::Histogram {
        metric: metric.into(),
        buckets,
        sum,
        sum_sq_lo: sum_sq as u64,
        sum_sq_hi: (sum_sq >> 64) as u64,
        ..v1::Histogram::default()
    }
}

/// How a [`raw_hello`] ended.
#[derive(Debug)]
pub struct RawOutcome {
    /// Bytes of the request body handed to the connection (headers aside):
    /// HTTP/2 flow control holds it to what the coordinator read, plus
    /// its receive window and one chunk.
    pub sent: u64,
    /// The gRPC status it ended the stream with, when it said one.
    pub status: Option<tonic::Status>,
    /// Bytes of response messages it sent (a Reject, a Welcome...).
    pub answered: usize,
}

/// Attach and stream one Hello whose hostname is `hostname_len` copies of
/// `fill`, built on the fly in 64 KiB chunks: this process never holds it.
/// Ends when the coordinator ends the stream, or after `limit`.
pub async fn raw_hello(
    url: &str,
    token: &str,
    hostname_len: usize,
    fill: u8,
    limit: Duration,
) -> RawOutcome {
    let sent = Arc::new(AtomicU64::new(0));
    let body = HelloBody::new(token, hostname_len, fill, sent.clone());
    let attempt = async {
        let channel = endpoint(url, None, None)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connect {url}: {e:?}"));
        exchange(channel, body).await
    };
    let (status, answered) = tokio::time::timeout(limit, attempt)
        .await
        .unwrap_or_else(|_| (Some(tonic::Status::deadline_exceeded("test limit")), 0));
    RawOutcome {
        sent: sent.load(Ordering::Relaxed),
        status,
        answered,
    }
}

/// Send `body` as an Attach request over `channel`; the final status and
/// the bytes of answer received.
async fn exchange(mut channel: Channel, body: HelloBody) -> (Option<tonic::Status>, usize) {
    use http_body::Body as _;
    use tonic::codegen::Service as _;
    let req = http::Request::builder()
        .method("POST")
        .uri("/cicada.v1.Coordinator/Attach")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::new(body))
        .expect("a request");
    if let Err(e) = std::future::poll_fn(|cx| channel.poll_ready(cx)).await {
        return (Some(tonic::Status::unavailable(e.to_string())), 0);
    }
    let resp = match channel.call(req).await {
        Ok(r) => r,
        Err(e) => return (Some(tonic::Status::unavailable(e.to_string())), 0),
    };
    let mut status = tonic::Status::from_header_map(resp.headers());
    let mut body = resp.into_body();
    let mut answered = 0;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        match frame {
            Ok(f) if f.is_data() => answered += f.into_data().map(|d| d.len()).unwrap_or(0),
            Ok(f) => {
                if let Some(t) = f.trailers_ref() {
                    status = status.or_else(|| tonic::Status::from_header_map(t));
                }
            }
            Err(s) => {
                status = status.or(Some(s));
                break;
            }
        }
    }
    (status, answered)
}

/// Protobuf varint.
fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> u64 {
    let mut n = 1;
    let mut v = v >> 7;
    while v > 0 {
        n += 1;
        v >>= 7;
    }
    n
}

/// The request body of [`raw_hello`]: gRPC frame header and the message's
/// leading fields, the hostname in chunks, then the token.
struct HelloBody {
    head: Option<Bytes>,
    left: usize,
    chunk: Bytes,
    tail: Option<Bytes>,
    sent: Arc<AtomicU64>,
}

impl HelloBody {
    fn new(token: &str, hostname_len: usize, fill: u8, sent: Arc<AtomicU64>) -> Self {
        let version = cicada_proto::VERSION.as_bytes();
        // a length-delimited field: its tag byte, the length, the bytes
        let field = |len: u64| 1 + varint_len(len) + len;
        // Hello: version (1), hostname (3), auth_token (5)
        let hello_len =
            field(version.len() as u64) + field(hostname_len as u64) + field(token.len() as u64);
        // WorkerMessage { hello (1) }
        let message_len = field(hello_len);
        let mut head = vec![0u8];
        head.extend_from_slice(&(message_len as u32).to_be_bytes());
        head.push(0x0a);
        varint(hello_len, &mut head);
        head.push(0x0a);
        varint(version.len() as u64, &mut head);
        head.extend_from_slice(version);
        head.push(0x1a);
        varint(hostname_len as u64, &mut head);
        let mut tail = vec![0x2a];
        varint(token.len() as u64, &mut tail);
        tail.extend_from_slice(token.as_bytes());
        Self {
            head: Some(head.into()),
            left: hostname_len,
            chunk: Bytes::from(vec![fill; 64 * 1024]),
            tail: Some(tail.into()),
            sent,
        }
    }
}

impl http_body::Body for HelloBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, tonic::Status>>> {
        let next = if let Some(h) = self.head.take() {
            Some(h)
        } else if self.left > 0 {
            let n = self.left.min(self.chunk.len());
            self.left -= n;
            Some(self.chunk.slice(..n))
        } else {
            self.tail.take()
        };
        if let Some(b) = &next {
            self.sent.fetch_add(b.len() as u64, Ordering::Relaxed);
        }
        Poll::Ready(next.map(|b| Ok(http_body::Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_reports_decode_as_a_workers_would() {
        let scope = ok_scope(3, 1_500);
        let (_, set) = cicada_proto::convert::decode_set(&scope).expect("an honest scope");
        assert_eq!(set.outcomes.sent(), 3);
        let mut two = ok_scope(2, 10);
        two.histograms = vec![histogram("ttft", &[(10, 1), (20_000, 1)])];
        two.counters = vec![counter("output_tokens", 7)];
        assert!(cicada_proto::convert::decode_set(&two).is_ok());
        // a forged name is the coordinator's to refuse
        two.counters = vec![counter("no_such_counter", 1)];
        assert!(cicada_proto::convert::decode_set(&two).is_err());
    }
}

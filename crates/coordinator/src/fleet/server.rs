//! The gRPC endpoint workers attach to. It checks each worker's version and
//! token, then hands its stream to the fleet as raw inbound messages (the
//! fleet turns them into domain events), their text escaped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cicada_proto::v1::{
    self, coordinator_message::Body as CBody, coordinator_server::Coordinator,
    worker_message::Body as WBody,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::clock;
use super::connections::{ConnInfo, HELLO_TIMEOUT};
use super::wire_text::wire_text;

/// Messages queued to one worker before it counts as not reading its
/// stream (pings come once a second, the rest per step or per waiting
/// request: a worker stalled for a minute queues a few dozen).
pub(super) const OUTBOX_CAPACITY: usize = 1024;

/// Messages to one worker.
pub(super) type Outbox = mpsc::Sender<Result<v1::CoordinatorMessage, Status>>;

/// What happens on the gRPC side, in arrival order.
#[derive(Debug)]
pub(super) enum Inbound {
    /// A worker passed the checks and waits for its welcome.
    Joined {
        conn: u64,
        hello: v1::Hello,
        peer: Option<SocketAddr>,
        /// Our address as the worker reached it (a route back to this host).
        local: Option<SocketAddr>,
        outbox: Outbox,
    },
    /// A message from an attached worker.
    Message { conn: u64, msg: v1::WorkerMessage },
    /// A worker's stream ended.
    Left { conn: u64, reason: String },
    /// A worker was refused (no hello, wrong token or version; logged where
    /// refused); it never saw the plan.
    Refused {
        peer: Option<SocketAddr>,
        reason: String,
    },
}

/// The service: shared secret, version and the channel into the fleet.
pub(super) struct FleetService {
    token: Arc<str>,
    events: mpsc::Sender<Inbound>,
    next_conn: AtomicU64,
}

impl FleetService {
    /// A service that admits workers presenting `token`.
    pub(super) fn new(token: String, events: mpsc::Sender<Inbound>) -> Self {
        Self {
            token: token.into(),
            events,
            next_conn: AtomicU64::new(0),
        }
    }
}

/// Compare secrets in time independent of where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

fn reject(reason: String) -> v1::CoordinatorMessage {
    v1::CoordinatorMessage {
        body: Some(CBody::Reject(v1::Reject { reason })),
    }
}

/// Why an attach that sent no usable hello is turned away.
fn no_hello(
    first: Result<Result<Option<v1::WorkerMessage>, Status>, tokio::time::error::Elapsed>,
) -> Result<v1::Hello, Status> {
    match first {
        Ok(Ok(Some(v1::WorkerMessage {
            body: Some(WBody::Hello(h)),
        }))) => Ok(h),
        Ok(Ok(Some(_))) => Err(Status::invalid_argument(
            "the first message must be a hello",
        )),
        Ok(Ok(None)) => Err(Status::invalid_argument("the stream ended before a hello")),
        Ok(Err(s)) => Err(Status::new(s.code(), wire_text(s.message()))),
        Err(_) => Err(Status::deadline_exceeded(format!(
            "no hello within {HELLO_TIMEOUT:?}"
        ))),
    }
}

/// A hello's text escaped ([`wire_text`]) and its token dropped, before it goes further.
fn escape_hello(mut hello: v1::Hello) -> v1::Hello {
    hello.hostname = wire_text(&hello.hostname);
    hello.version = wire_text(&hello.version);
    hello.auth_token = String::new();
    hello
}

/// A worker's message with its text escaped before it goes further: error
/// messages, and the names in reports (a name the coordinator does not know
/// is logged).
fn escape_message(mut msg: v1::WorkerMessage) -> v1::WorkerMessage {
    match &mut msg.body {
        Some(WBody::Error(e)) => e.message = wire_text(&e.message),
        Some(WBody::Done(d)) => d.stopped_by = wire_text(&d.stopped_by),
        Some(WBody::Ready(r)) => {
            for route in &mut r.routes {
                *route = wire_text(route);
            }
        }
        Some(WBody::Hello(h)) => *h = escape_hello(std::mem::take(h)),
        Some(WBody::Report(r)) => {
            for s in &mut r.scopes {
                for h in &mut s.histograms {
                    h.metric = wire_text(&h.metric);
                }
                for c in &mut s.counters {
                    c.name = wire_text(&c.name);
                }
                for o in &mut s.outcomes {
                    o.class = wire_text(&o.class);
                }
            }
        }
        _ => {}
    }
    msg
}

#[tonic::async_trait]
impl Coordinator for FleetService {
    type AttachStream = ReceiverStream<Result<v1::CoordinatorMessage, Status>>;

    async fn attach(
        &self,
        request: Request<Streaming<v1::WorkerMessage>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let conn_info = request.extensions().get::<ConnInfo>().cloned();
        let peer = conn_info.as_ref().map(|c| c.peer);
        let local = conn_info.as_ref().and_then(|c| c.local);
        if let Some(c) = &conn_info {
            c.attached();
        }
        let mut inbound = request.into_inner();
        let (outbox, rx) = mpsc::channel(OUTBOX_CAPACITY);
        let first = tokio::time::timeout(HELLO_TIMEOUT, inbound.message()).await;
        let hello = match no_hello(first) {
            Ok(h) => h,
            Err(status) => {
                self.refused(peer, None, status.message().to_string());
                return Err(status);
            }
        };
        let expected = cicada_proto::VERSION;
        let refusal = if hello.version != expected {
            Some(format!(
                "version mismatch: worker is cicada {}, coordinator is cicada {expected}",
                wire_text(&hello.version)
            ))
        } else if !same_secret(&hello.auth_token, &self.token) {
            Some("authentication failed: wrong or missing worker token".to_string())
        } else {
            None
        };
        if let Some(reason) = refusal {
            self.refused(peer, Some(&hello.hostname), reason.clone());
            let _ = outbox.send(Ok(reject(reason))).await;
            return Ok(Response::new(ReceiverStream::new(rx)));
        }
        if let Some(c) = &conn_info {
            c.authenticated();
        }
        let hello = escape_hello(hello);
        let conn = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let events = self.events.clone();
        // held weakly, like the pings: the stream still ends when the fleet lets go
        let echoes = outbox.downgrade();
        if events
            .send(Inbound::Joined {
                conn,
                hello,
                peer,
                local,
                outbox,
            })
            .await
            .is_err()
        {
            return Err(Status::unavailable("the coordinator is shutting down"));
        }
        tokio::spawn(async move {
            let reason = loop {
                match inbound.message().await {
                    Ok(Some(v1::WorkerMessage {
                        body: Some(WBody::ClockProbe(probe)),
                    })) => {
                        // answered here, at once: a turn through the fleet
                        // loop would sit inside the round trip
                        let recv_ns = clock::unix_ns();
                        if let Some(outbox) = echoes.upgrade() {
                            // a full outbox drops the echo: the probe is lost, never late
                            let _ = outbox.try_send(Ok(clock::echo(&probe, recv_ns)));
                        }
                    }
                    Ok(Some(msg)) => {
                        let msg = escape_message(msg);
                        if events.send(Inbound::Message { conn, msg }).await.is_err() {
                            break "the coordinator stopped listening".to_string();
                        }
                    }
                    Ok(None) => break "the worker closed its stream".to_string(),
                    Err(s) => break format!("stream error: {}", wire_text(s.message())),
                }
            };
            let _ = events.send(Inbound::Left { conn, reason }).await;
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

impl FleetService {
    /// Log a refusal (one line) and tell the fleet, never waiting for it:
    /// a stranger must not hold its stream open by flooding a busy fleet.
    /// `host` is what its hello said, if it said one.
    fn refused(&self, peer: Option<SocketAddr>, host: Option<&str>, reason: String) {
        let host = host.map_or_else(|| "-".to_string(), wire_text);
        let from = peer.map_or_else(|| "-".to_string(), |p| p.to_string());
        tracing::warn!(peer = %from, %host, %reason, "refused a worker");
        let _ = self.events.try_send(Inbound::Refused { peer, reason });
    }
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_exactly() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "x"));
        assert!(same_secret("", ""));
    }
}

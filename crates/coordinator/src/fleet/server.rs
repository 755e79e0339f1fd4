//! The gRPC endpoint workers attach to. It checks each worker's version and
//! token, then hands its stream to the fleet as raw inbound messages (the
//! fleet turns them into domain events).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cicada_proto::v1::{
    self, coordinator_message::Body as CBody, coordinator_server::Coordinator,
    worker_message::Body as WBody,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

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
    /// A worker was refused (wrong token or version); it never saw the plan.
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

#[tonic::async_trait]
impl Coordinator for FleetService {
    type AttachStream = ReceiverStream<Result<v1::CoordinatorMessage, Status>>;

    async fn attach(
        &self,
        request: Request<Streaming<v1::WorkerMessage>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let peer = request.remote_addr();
        let local = request.local_addr();
        let mut inbound = request.into_inner();
        let (outbox, rx) = mpsc::channel(OUTBOX_CAPACITY);
        let first = tokio::time::timeout(Duration::from_secs(10), inbound.message()).await;
        let hello = match first {
            Ok(Ok(Some(v1::WorkerMessage {
                body: Some(WBody::Hello(h)),
            }))) => h,
            _ => {
                return Err(Status::invalid_argument(
                    "the first message must be a hello",
                ));
            }
        };
        let expected = cicada_proto::VERSION;
        let refusal = if hello.version != expected {
            Some(format!(
                "version mismatch: worker is cicada {}, coordinator is cicada {expected}",
                hello.version
            ))
        } else if !same_secret(&hello.auth_token, &self.token) {
            Some("authentication failed: wrong or missing worker token".to_string())
        } else {
            None
        };
        if let Some(reason) = refusal {
            tracing::warn!(?peer, host = %hello.hostname, %reason, "refused a worker");
            let _ = self
                .events
                .send(Inbound::Refused {
                    peer,
                    reason: reason.clone(),
                })
                .await;
            let _ = outbox.send(Ok(reject(reason))).await;
            return Ok(Response::new(ReceiverStream::new(rx)));
        }
        let conn = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let events = self.events.clone();
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
                    Ok(Some(msg)) => {
                        if events.send(Inbound::Message { conn, msg }).await.is_err() {
                            break "the coordinator stopped listening".to_string();
                        }
                    }
                    Ok(None) => break "the worker closed its stream".to_string(),
                    Err(s) => break format!("stream error: {}", s.message()),
                }
            };
            let _ = events.send(Inbound::Left { conn, reason }).await;
        });
        Ok(Response::new(ReceiverStream::new(rx)))
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

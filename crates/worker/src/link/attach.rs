//! Reaching the coordinator: dial with backoff, say hello, wait for the welcome.

use std::time::Duration;

use cicada_proto::v1::{
    self, coordinator_client::CoordinatorClient, coordinator_message::Body as CBody,
    worker_message::Body as WBody,
};
use cicada_proto::{MAX_MESSAGE_BYTES, VERSION};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::link::{Identity, LinkError, Tls, msg};

/// Dial the coordinator, retrying until `wait` has passed.
async fn dial(
    url: &str,
    tls: &Tls,
    wait: Duration,
) -> Result<tonic::transport::Channel, LinkError> {
    let deadline = Instant::now() + wait;
    let unreachable = |reason: String| LinkError::Unreachable {
        url: url.to_string(),
        waited: Duration::ZERO,
        reason,
    };
    let mut endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
        .map_err(|e| unreachable(e.to_string()))?;
    if url.starts_with("https://") {
        endpoint = endpoint
            .tls_config(tls.client_config())
            .map_err(|e| unreachable(format!("TLS setup: {e}")))?;
    }
    let endpoint = endpoint
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(2))
        // the heartbeat judges a silent coordinator; the transport's own
        // timeout only catches dead connections, and must outlast a stall
        .keep_alive_timeout(cicada_proto::TRANSPORT_KEEPALIVE_TIMEOUT);
    let mut backoff = Backoff::until(deadline);
    loop {
        match endpoint.connect().await {
            Ok(ch) => return Ok(ch),
            Err(e) => {
                tracing::debug!(error = %e, "coordinator not reachable yet; retrying");
                if !backoff.wait().await {
                    return Err(LinkError::Unreachable {
                        url: url.to_string(),
                        waited: wait,
                        reason: format!("{e}: {}", source_chain(&e)),
                    });
                }
            }
        }
    }
}

/// Waits between attempts to reach the coordinator: 50 ms, doubling up to
/// 2 s, never past the deadline.
struct Backoff {
    next: Duration,
    deadline: Instant,
}

impl Backoff {
    fn until(deadline: Instant) -> Self {
        Self {
            next: Duration::from_millis(50),
            deadline,
        }
    }

    /// Sleep before the next attempt; false (without sleeping) when that
    /// attempt would start after the deadline.
    async fn wait(&mut self) -> bool {
        if Instant::now() + self.next > self.deadline {
            return false;
        }
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(Duration::from_secs(2));
        true
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = Vec::new();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push(c.to_string());
        cur = c.source();
    }
    out.join(": ")
}

/// A welcomed link: our outbox, the coordinator's stream, its welcome.
pub(crate) type Attached = (
    mpsc::Sender<v1::WorkerMessage>,
    Streaming<v1::CoordinatorMessage>,
    v1::Welcome,
);

/// [`attach`] until welcomed, refused, or `dial_wait` is spent: a link that
/// breaks before the welcome (a proxy or load balancer that accepts while
/// the coordinator does not listen yet, then closes) is dialled again.
pub(crate) async fn attach_retrying(
    url: &str,
    who: &Identity,
    tls: &Tls,
    dial_wait: Duration,
) -> Result<Attached, LinkError> {
    let deadline = Instant::now() + dial_wait;
    let mut backoff = Backoff::until(deadline);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match attach(url, who, tls, left).await {
            Err(LinkError::Lost(reason)) => {
                tracing::debug!(%reason, "the link broke before the welcome; dialling again");
                if !backoff.wait().await {
                    return Err(LinkError::Lost(reason));
                }
            }
            other => return other,
        }
    }
}

/// Dial the coordinator, say hello and wait for its welcome.
async fn attach(
    url: &str,
    who: &Identity,
    tls: &Tls,
    dial_wait: Duration,
) -> Result<Attached, LinkError> {
    let channel = dial(url, tls, dial_wait).await?;
    let mut client = CoordinatorClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let (tx, rx) = mpsc::channel::<v1::WorkerMessage>(256);
    let hello = v1::Hello {
        version: VERSION.to_string(),
        requested_index: who.requested_index,
        hostname: hostname(),
        cpus: who.threads as u32,
        auth_token: who.token.clone(),
        pid: std::process::id(),
    };
    tx.send(msg(WBody::Hello(hello)))
        .await
        .map_err(|_| LinkError::Protocol("outgoing stream closed before hello".into()))?;
    let mut inbound = client
        .attach(ReceiverStream::new(rx))
        .await
        .map_err(|s| LinkError::Lost(format!("attach failed: {}", s.message())))?
        .into_inner();
    let welcome = match inbound.message().await {
        Ok(Some(v1::CoordinatorMessage {
            body: Some(CBody::Welcome(w)),
        })) => w,
        Ok(Some(v1::CoordinatorMessage {
            body: Some(CBody::Reject(r)),
        })) => {
            return Err(LinkError::Rejected(r.reason));
        }
        Ok(other) => {
            return Err(LinkError::Protocol(format!(
                "expected welcome, got {other:?}"
            )));
        }
        Err(s) => {
            return Err(
                if s.code() == tonic::Code::PermissionDenied
                    || s.code() == tonic::Code::Unauthenticated
                    || s.code() == tonic::Code::FailedPrecondition
                {
                    LinkError::Rejected(s.message().to_string())
                } else {
                    LinkError::Lost(s.message().to_string())
                },
            );
        }
    };
    Ok((tx, inbound, welcome))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_to_two_seconds_and_never_sleeps_past_the_deadline() {
        let start = Instant::now();
        let mut b = Backoff::until(start + Duration::from_secs(10));
        let mut woke = Vec::new();
        while b.wait().await {
            woke.push((Instant::now() - start).as_millis());
        }
        // 50, 100, 200, ... 1,600 ms apart, then 2 s; the next 2 s would pass 10 s
        assert_eq!(woke, [50, 150, 350, 750, 1550, 3150, 5150, 7150, 9150]);
        assert_eq!(Instant::now() - start, Duration::from_millis(9150));
    }
}

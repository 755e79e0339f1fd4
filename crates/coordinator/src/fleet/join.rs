//! How the fleet assembles: each worker that says hello is welcomed with an
//! index (or turned away when the fleet is full), pinged from then on, and
//! the fleet waits until every expected worker joined.

use std::net::SocketAddr;
use std::time::Duration;

use cicada_proto::v1::{self, coordinator_message::Body as CBody};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::server::{Inbound, Outbox};
use super::{Fleet, Member, message};
use crate::error::FleetError;

impl Fleet {
    /// Wait until every expected worker has joined and been welcomed.
    pub async fn join(&mut self) -> Result<(), FleetError> {
        let n = self.options.expect_workers;
        let deadline = Instant::now() + self.options.wait_workers;
        let mut check = tokio::time::interval(Duration::from_millis(250));
        let mut refused = Refusals::default();
        while (self.members.len() as u32) < n {
            let ev = tokio::select! {
                ev = self.inbound.recv() => Some(ev),
                // a local worker that exited will not join: notice without an event
                _ = check.tick() => None,
                () = tokio::time::sleep_until(deadline) => {
                    let (joined, waited) = (self.members.len(), self.options.wait_workers);
                    let exited = self.locals.exited();
                    let note = if exited.is_empty() {
                        String::new()
                    } else {
                        format!("; local workers exited: {}", exited.join(", "))
                    };
                    return Err(FleetError::Incomplete {
                        joined,
                        expected: n,
                        waited,
                        notes: note + &refused.note(),
                    });
                }
            };
            match ev {
                None => {}
                Some(Some(Inbound::Joined {
                    conn,
                    hello,
                    peer,
                    local,
                    outbox,
                })) => {
                    self.admit(conn, hello, peer, local, outbox).await;
                }
                Some(Some(Inbound::Left { conn, reason })) => {
                    if let Some(i) = self.by_conn.remove(&conn) {
                        self.members.remove(&i);
                        tracing::warn!(worker = i, %reason, "a worker left before the run started");
                    }
                }
                Some(Some(Inbound::Refused { peer, reason })) => refused.add(peer, reason),
                Some(Some(Inbound::Message { .. })) => {}
                Some(None) => return Err(FleetError::ServerStopped),
            }
            if self.options.expect_workers <= self.options.local_workers
                && let Some(note) = self.locals.any_exited()
            {
                // only local workers make up this fleet: one gone never completes it
                return Err(FleetError::LocalExited(note));
            }
        }
        Ok(())
    }

    async fn admit(
        &mut self,
        conn: u64,
        hello: v1::Hello,
        peer: Option<SocketAddr>,
        local: Option<SocketAddr>,
        outbox: Outbox,
    ) {
        let n = self.options.expect_workers;
        let index = match hello.requested_index {
            Some(i) if i < n && !self.members.contains_key(&i) => Some(i),
            _ => (0..n).find(|i| !self.members.contains_key(i)),
        };
        let Some(index) = index else {
            let _ = outbox
                .send(Ok(message(CBody::Reject(v1::Reject {
                    reason: format!("the fleet is full ({n} workers)"),
                }))))
                .await;
            return;
        };
        let welcome = message(CBody::Welcome(v1::Welcome {
            worker_index: index,
            worker_count: n,
            heartbeat_timeout_ms: self.options.heartbeat_timeout.as_millis() as u32,
            coordinator_version: cicada_proto::VERSION.to_string(),
        }));
        if outbox.send(Ok(welcome)).await.is_err() {
            return;
        }
        tokio::spawn(ping(outbox.downgrade()));
        tracing::info!(worker = index, host = %hello.hostname, ?peer, "worker joined");
        self.by_conn.insert(conn, index);
        self.members.insert(
            index,
            Member {
                host: hello.hostname,
                threads: hello.cpus.max(1),
                version: hello.version,
                local,
                last_seen: Instant::now(),
                conn,
                outbox: Some(outbox),
            },
        );
    }
}

/// Workers refused while the fleet assembles (each logged where refused),
/// for the message when it does not assemble.
#[derive(Default)]
struct Refusals {
    count: u32,
    last: Option<(Option<SocketAddr>, String)>,
}

impl Refusals {
    fn add(&mut self, peer: Option<SocketAddr>, reason: String) {
        self.count += 1;
        self.last = Some((peer, reason));
    }

    /// `; N refused (the last from PEER: REASON)`, or nothing.
    fn note(&self) -> String {
        match &self.last {
            None => String::new(),
            Some((peer, reason)) => {
                let from = peer.map(|p| format!(" from {p}")).unwrap_or_default();
                format!("; {} refused (the last{from}: {reason})", self.count)
            }
        }
    }
}

/// Ping one worker every [`cicada_proto::PING_INTERVAL`] from its welcome
/// until its stream closes: in every phase (waiting for the rest of the
/// fleet, preparing, running) it hears from us, so its silence check means
/// what it says. Holds the outbox weakly and never waits on it, so the
/// stream still ends when the fleet lets go of the member, even one that
/// stopped reading (a full outbox skips the ping: the worker hears nothing
/// either way, and the fleet's own sends find it out).
async fn ping(outbox: mpsc::WeakSender<Result<v1::CoordinatorMessage, tonic::Status>>) {
    let mut tick = tokio::time::interval(cicada_proto::PING_INTERVAL);
    let mut seq = 0u64;
    loop {
        tick.tick().await;
        let Some(outbox) = outbox.upgrade() else {
            return;
        };
        seq += 1;
        let ping = Ok(message(CBody::Ping(v1::Ping { seq })));
        if let Err(mpsc::error::TrySendError::Closed(_)) = outbox.try_send(ping) {
            return;
        }
    }
}

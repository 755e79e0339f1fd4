//! The fleet: the gRPC server, local worker processes, who joined, and who was lost.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use cicada_proto::v1::{
    self, coordinator_message::Body as CBody, coordinator_server::CoordinatorServer,
};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::TcpListenerStream;

use crate::server::{FleetEvent, FleetService, Outbox};

/// Environment variable that carries the worker token to local workers.
pub const TOKEN_ENV: &str = "CICADA_TOKEN";

/// How to assemble the fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Local worker processes to spawn.
    pub local_workers: u32,
    /// Workers that must join in total (local + remote).
    pub expect_workers: u32,
    /// Address the gRPC server listens on.
    pub listen: SocketAddr,
    /// How long to wait for every worker to join.
    pub wait_workers: Duration,
    /// How local workers run.
    pub local: LocalWorkers,
    /// Shared secret workers must present.
    pub token: String,
    /// Silence after which a worker counts as lost.
    pub heartbeat_timeout: Duration,
    /// TLS for the worker port.
    pub tls: Option<ServerTls>,
}

/// How the fleet's local workers run.
#[derive(Debug, Clone)]
pub enum LocalWorkers {
    /// One `worker` process each, from this executable.
    Processes(PathBuf),
    /// One task each in this process (no process boundary), dialling the
    /// gRPC server like any worker: for tests that need no binaries.
    InProcess,
}

/// TLS settings of the worker port (PEM text).
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert_pem: String,
    pub key_pem: String,
    /// CA that signs worker client certificates (mutual TLS).
    pub client_ca_pem: Option<String>,
    /// Path of the server certificate, handed to local workers as their CA.
    pub cert_path: PathBuf,
}

/// One joined worker.
#[derive(Debug)]
pub struct Member {
    pub conn: u64,
    pub outbox: Outbox,
    pub hello: v1::Hello,
    pub peer: Option<SocketAddr>,
    /// Our address as this worker reached it.
    pub local: Option<SocketAddr>,
    pub last_seen: Instant,
}

/// A running fleet.
pub struct Fleet {
    pub events: mpsc::Receiver<FleetEvent>,
    /// Members by worker index.
    pub members: BTreeMap<u32, Member>,
    /// Worker index by connection.
    pub by_conn: HashMap<u64, u32>,
    children: Vec<Child>,
    /// In-process workers, ended at shutdown.
    tasks: Vec<tokio::task::JoinHandle<Result<(), cicada_worker::LinkError>>>,
    server: tokio::task::JoinHandle<()>,
    pub addr: SocketAddr,
    pub options: FleetOptions,
}

impl Fleet {
    /// Start the server and spawn the local workers.
    pub async fn start(options: FleetOptions) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(options.listen)
            .await
            .with_context(|| format!("cannot listen on {}", options.listen))?;
        let addr = listener
            .local_addr()
            .context("reading the listening address")?;
        let (tx, events) = mpsc::channel(4096);
        let service = CoordinatorServer::new(FleetService::new(options.token.clone(), tx))
            .max_decoding_message_size(cicada_proto::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(cicada_proto::MAX_MESSAGE_BYTES);
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = &options.tls {
            use tonic::transport::{Certificate, Identity, ServerTlsConfig};
            let mut config =
                ServerTlsConfig::new().identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem));
            if let Some(ca) = &tls.client_ca_pem {
                config = config.client_ca_root(Certificate::from_pem(ca));
            }
            builder = builder
                .tls_config(config)
                .context("configuring TLS for the worker port")?;
        }
        let server = tokio::spawn(async move {
            let result = builder
                .tcp_nodelay(true)
                .http2_keepalive_interval(Some(Duration::from_secs(2)))
                .http2_keepalive_timeout(Some(Duration::from_secs(5)))
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await;
            if let Err(e) = result {
                tracing::error!(error = %e, "the coordinator's gRPC server stopped");
            }
        });
        let dial = if addr.ip().is_unspecified() {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
        } else {
            addr
        };
        let scheme = if options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let url = format!("{scheme}://{dial}");
        let mut children = Vec::new();
        let mut tasks = Vec::new();
        for i in 0..options.local_workers {
            match &options.local {
                LocalWorkers::Processes(bin) => {
                    children.push(spawn_process(&options, bin, &url, i)?)
                }
                LocalWorkers::InProcess => tasks.push(cicada_worker::spawn_in_process(
                    url.clone(),
                    cicada_worker::Identity {
                        requested_index: Some(i),
                        token: options.token.clone(),
                        threads: 1,
                    },
                    options.wait_workers,
                )),
            }
        }
        Ok(Self {
            events,
            members: BTreeMap::new(),
            by_conn: HashMap::new(),
            children,
            tasks,
            server,
            addr,
            options,
        })
    }

    /// Wait until every expected worker has joined and been welcomed.
    pub async fn join(&mut self) -> anyhow::Result<()> {
        let n = self.options.expect_workers;
        let deadline = Instant::now() + self.options.wait_workers;
        while (self.members.len() as u32) < n {
            let ev = tokio::select! {
                ev = self.events.recv() => ev,
                () = tokio::time::sleep_until(deadline) => {
                    let (joined, waited) = (self.members.len(), self.options.wait_workers);
                    let note = self.child_exit_note();
                    bail!("only {joined} of {n} workers joined within {waited:?}{note}");
                }
            };
            match ev {
                Some(FleetEvent::Joined {
                    conn,
                    hello,
                    peer,
                    local,
                    outbox,
                }) => {
                    self.admit(conn, hello, peer, local, outbox).await;
                }
                Some(FleetEvent::Left { conn, reason }) => {
                    if let Some(i) = self.by_conn.remove(&conn) {
                        self.members.remove(&i);
                        tracing::warn!(worker = i, %reason, "a worker left before the run started");
                    }
                }
                Some(FleetEvent::Refused { peer, reason }) => {
                    tracing::warn!(?peer, %reason, "refused a worker");
                }
                Some(FleetEvent::Message { .. }) => {}
                None => bail!("the gRPC server stopped"),
            }
            if let Some(note) = self.all_children_failed() {
                bail!("the local workers exited before joining: {note}");
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
                .send(Ok(v1::CoordinatorMessage {
                    body: Some(CBody::Reject(v1::Reject {
                        reason: format!("the fleet is full ({n} workers)"),
                    })),
                }))
                .await;
            return;
        };
        let welcome = v1::CoordinatorMessage {
            body: Some(CBody::Welcome(v1::Welcome {
                worker_index: index,
                worker_count: n,
                heartbeat_timeout_ms: self.options.heartbeat_timeout.as_millis() as u32,
                coordinator_version: cicada_proto::VERSION.to_string(),
            })),
        };
        if outbox.send(Ok(welcome)).await.is_err() {
            return;
        }
        tracing::info!(worker = index, host = %hello.hostname, ?peer, "worker joined");
        self.by_conn.insert(conn, index);
        self.members.insert(
            index,
            Member {
                conn,
                outbox,
                hello,
                peer,
                local,
                last_seen: Instant::now(),
            },
        );
    }

    /// Send a message to one worker (a closed outbox means it is gone; the run loop notices).
    pub async fn send(&self, index: u32, body: CBody) {
        if let Some(m) = self.members.get(&index) {
            let _ = m
                .outbox
                .send(Ok(v1::CoordinatorMessage { body: Some(body) }))
                .await;
        }
    }

    /// Send a message to every worker.
    pub async fn broadcast(&self, body: CBody) {
        for i in self.members.keys() {
            self.send(*i, body.clone()).await;
        }
    }

    fn child_exit_note(&mut self) -> String {
        let codes: Vec<String> = self
            .children
            .iter_mut()
            .filter_map(|c| c.try_wait().ok().flatten())
            .map(|s| s.to_string())
            .collect();
        if codes.is_empty() {
            String::new()
        } else {
            format!("; local workers exited: {}", codes.join(", "))
        }
    }

    fn all_children_failed(&mut self) -> Option<String> {
        if self.children.is_empty() || self.options.expect_workers > self.options.local_workers {
            return None;
        }
        let exited: Vec<String> = self
            .children
            .iter_mut()
            .filter_map(|c| c.try_wait().ok().flatten())
            .filter(|s| !s.success())
            .map(|s| s.to_string())
            .collect();
        (exited.len() == self.children.len()).then(|| exited.join(", "))
    }

    /// End the run: tell every worker, wait (briefly) until each has hung
    /// up, then reap local processes. Exiting while a worker still reads
    /// would break its stream before it sees the stop, and it would count
    /// itself lost (exit 3: a failed pod in a Kubernetes Job).
    pub async fn shutdown(mut self) {
        self.broadcast(CBody::Stop(v1::Stop {
            step: u32::MAX,
            cancel_in_flight: true,
            reason: "the run is over".into(),
        }))
        .await;
        let deadline = Instant::now() + Duration::from_secs(5);
        // workers already silent for the heartbeat timeout were lost: no need to wait for them
        let silence = self.options.heartbeat_timeout;
        let mut open: std::collections::HashSet<u64> = self
            .by_conn
            .iter()
            .filter(|(_, i)| {
                self.members
                    .get(i)
                    .is_some_and(|m| m.last_seen.elapsed() < silence)
            })
            .map(|(conn, _)| *conn)
            .collect();
        while !open.is_empty() {
            tokio::select! {
                ev = self.events.recv() => match ev {
                    Some(FleetEvent::Left { conn, .. }) => {
                        open.remove(&conn);
                    }
                    Some(_) => {}
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => {
                    tracing::warn!(workers = open.len(), "workers did not hang up after the stop");
                    break;
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for child in &mut self.children {
            let left = deadline.saturating_duration_since(Instant::now());
            if tokio::time::timeout(left, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
        for task in &mut self.tasks {
            let left = deadline.saturating_duration_since(Instant::now());
            if tokio::time::timeout(left, &mut *task).await.is_err() {
                task.abort();
            }
        }
        self.members.clear();
        self.server.abort();
    }
}

/// Start one local `worker` process dialling `url`.
fn spawn_process(
    options: &FleetOptions,
    bin: &PathBuf,
    url: &str,
    index: u32,
) -> anyhow::Result<Child> {
    let mut cmd = Command::new(bin);
    cmd.arg("--coordinator")
        .arg(url)
        .arg("--index")
        .arg(index.to_string());
    if let Some(tls) = &options.tls {
        // local workers trust the server's own certificate
        cmd.arg("--tls-ca").arg(&tls.cert_path);
    }
    cmd.env(TOKEN_ENV, &options.token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start the worker {}", bin.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The join / welcome / stop protocol end to end, over real gRPC, with
    /// workers that run as tasks of this test.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_process_workers_join_with_their_indices_and_hang_up_at_shutdown() {
        cicada_client::tls::install_crypto_provider();
        let options = FleetOptions {
            local_workers: 3,
            expect_workers: 3,
            listen: "127.0.0.1:0".parse().unwrap(),
            wait_workers: Duration::from_secs(20),
            local: LocalWorkers::InProcess,
            token: "t".into(),
            heartbeat_timeout: Duration::from_secs(10),
            tls: None,
        };
        let mut fleet = Fleet::start(options).await.unwrap();
        fleet.join().await.unwrap();
        assert_eq!(
            fleet.members.keys().copied().collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        for m in fleet.members.values() {
            assert_eq!(m.hello.version, cicada_proto::VERSION);
            assert_eq!(m.hello.auth_token, "t");
        }
        let tasks = std::mem::take(&mut fleet.tasks);
        fleet.shutdown().await;
        for t in tasks {
            // a worker told the run is over ends cleanly, not as "lost"
            assert!(matches!(t.await, Ok(Ok(()))));
        }
    }
}

//! The fleet: the gRPC server workers attach to, the local workers, who
//! joined and who is still heard from. This module is the coordinator's only
//! wire edge: it speaks `cicada-proto` to workers (`server`), and what they
//! send comes out as domain [`Event`]s (`events`); the rest of the
//! coordinator never reads a gRPC message.

mod clock;
mod connections;
mod events;
mod hello_limit;
mod join;
mod listen;
mod server;
mod spawn;
pub mod tls;
pub mod wire_text;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cicada_plan::{Plan, Steer};
use cicada_proto::convert::{DeflatedPool, PLAN_FORMAT, encode_plan, encode_steer};
use cicada_proto::v1::{self, coordinator_message::Body as CBody};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::FleetError;

#[cfg(test)]
pub use events::Measured;
pub use events::{Event, Health, WorkerReport, decode_report};
use server::{Inbound, Outbox};
pub use tls::ServerTls;

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
    /// One `cicada worker` process each, from this executable.
    Processes(PathBuf),
    /// One task each in this process (no process boundary), dialling the
    /// gRPC server like any worker: for tests that need no binaries.
    #[cfg(test)]
    InProcess,
}

/// One joined worker.
#[derive(Debug)]
pub struct Member {
    /// Its host name, as it said (escaped: [`wire_text::wire_text`]).
    pub host: String,
    /// Runtime threads it runs (its share of the machine).
    pub threads: u32,
    /// Its binary's version (escaped).
    pub version: String,
    /// Our address as this worker reached it (a route back to this host).
    pub local: Option<SocketAddr>,
    /// When it was last heard from.
    pub last_seen: Instant,
    conn: u64,
    /// Messages to it; `None` once the fleet let go of it (lost, or
    /// dropped for a failed check): its stream ends, nothing of it is read.
    outbox: Option<Outbox>,
}

impl Member {
    /// Still part of the fleet (not let go of).
    pub fn active(&self) -> bool {
        self.outbox.is_some()
    }
}

/// A step's start barrier, as the coordinator placed it.
#[derive(Debug, Clone, Copy)]
pub struct Barrier {
    /// On the coordinator's monotonic clock.
    pub at: Instant,
    /// On its wall clock, Unix seconds.
    pub unix_s: f64,
}

/// A running fleet.
pub struct Fleet {
    inbound: mpsc::Receiver<Inbound>,
    /// Members by worker index.
    members: BTreeMap<u32, Member>,
    /// Worker index by connection.
    by_conn: HashMap<u64, u32>,
    locals: spawn::Locals,
    /// Members whose outbox filled up (they do not read their stream),
    /// let go of, with why: the run loop counts them lost.
    unreadable: Vec<(u32, String)>,
    server: tokio::task::JoinHandle<()>,
    /// Where the gRPC server listens.
    pub addr: SocketAddr,
    /// How the fleet was assembled.
    pub options: FleetOptions,
}

/// The address local workers dial to reach a server listening on `listen`.
pub fn local_dial(listen: SocketAddr) -> SocketAddr {
    if listen.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), listen.port())
    } else {
        listen
    }
}

impl Fleet {
    /// Start the server and spawn the local workers.
    pub async fn start(options: FleetOptions) -> Result<Self, FleetError> {
        let listener =
            TcpListener::bind(options.listen)
                .await
                .map_err(|source| FleetError::Listen {
                    addr: options.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(FleetError::LocalAddr)?;
        let (tx, inbound) = mpsc::channel(4096);
        let server = listen::serve(&options, listener, tx)?;
        let dial = local_dial(addr);
        let scheme = if options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let locals = spawn::start(&options, &format!("{scheme}://{dial}"))?;
        Ok(Self {
            inbound,
            members: BTreeMap::new(),
            by_conn: HashMap::new(),
            locals,
            unreadable: Vec::new(),
            server,
            addr,
            options,
        })
    }

    /// The joined workers, by index.
    pub fn members(&self) -> &BTreeMap<u32, Member> {
        &self.members
    }

    /// The next thing a member did, once the run has started: workers that
    /// try to join now are turned away, and every message marks its sender
    /// as heard from. `None` when the gRPC server stopped. Cancel-safe.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            match self.inbound.recv().await? {
                Inbound::Message { conn, msg } => {
                    let Some(&worker) = self.by_conn.get(&conn) else {
                        continue;
                    };
                    if let Some(m) = self.members.get_mut(&worker) {
                        m.last_seen = Instant::now();
                    }
                    if let Some(ev) = events::decode(worker, msg) {
                        return Some(ev);
                    }
                }
                Inbound::Left { conn, reason } => {
                    if let Some(worker) = self.by_conn.remove(&conn) {
                        return Some(Event::Left { worker, reason });
                    }
                }
                Inbound::Joined { outbox, .. } => {
                    // a fresh stream's outbox has room: the refusal never waits
                    let _ = outbox.try_send(Ok(message(CBody::Reject(v1::Reject {
                        reason: "the run has already started".into(),
                    }))));
                }
                Inbound::Refused { .. } => {}
            }
        }
    }

    /// Mark every member as heard from now (at a start barrier).
    pub fn mark_all_seen(&mut self) {
        let now = Instant::now();
        for m in self.members.values_mut() {
            m.last_seen = now;
        }
    }

    /// The members still in the fleet, by index.
    pub fn active(&self) -> impl Iterator<Item = (u32, &Member)> {
        self.members
            .iter()
            .filter(|(_, m)| m.active())
            .map(|(i, m)| (*i, m))
    }

    /// Let go of member `index` for the rest of the run: its stream is
    /// closed (a worker still running stops on its own), and nothing it
    /// sends is read any more.
    pub fn let_go(&mut self, index: u32) {
        if let Some(m) = self.members.get_mut(&index) {
            m.outbox = None;
            self.by_conn.remove(&m.conn);
        }
    }

    /// Members let go of since the last call because they stopped reading.
    pub fn take_unreadable(&mut self) -> Vec<(u32, String)> {
        std::mem::take(&mut self.unreadable)
    }

    /// Send every member of `plans` its plan for `step`, its pool in
    /// pieces after it. Each distinct pool is deflated once and its pieces
    /// shared by every member that gets the same entries (the whole pool of
    /// a steerable closed loop or of a mix), not compressed and held once
    /// per worker. A pool's pieces go to its members' outboxes as soon as
    /// they are made and are freed once every one of those streams sent
    /// them, so a striped step holds about one stripe's compressed copy at
    /// a time.
    pub fn assign(&mut self, step: u32, plans: &[(u32, Plan)]) {
        let mut sent = vec![false; plans.len()];
        for (i, (_, first)) in plans.iter().enumerate() {
            if sent[i] {
                continue;
            }
            let pool = DeflatedPool::with_piece_bytes(&first.pool, &first.shapes, piece_bytes());
            tracing::debug!(
                entries = first.pool.len(),
                bytes = pool.bytes(),
                pieces = pool.chunks(),
                "pool deflated"
            );
            for (j, (member, plan)) in plans.iter().enumerate().skip(i) {
                if j == i || (!sent[j] && same_pool(first, plan)) {
                    self.assign_one(*member, step, plan, &pool);
                    sent[j] = true;
                }
            }
        }
    }

    /// Send worker `index` its plan for `step`, then `pool` in pieces (the
    /// bytes shared, waiting in its outbox until its stream sends them).
    fn assign_one(&mut self, index: u32, step: u32, plan: &Plan, pool: &DeflatedPool) {
        self.send(
            index,
            CBody::Assign(v1::Assign {
                step,
                plan: Some(encode_plan(plan)),
                plan_format: PLAN_FORMAT,
                pool_chunks: pool.chunks(),
                pool_bytes: pool.bytes(),
            }),
        );
        let damage = damaged_piece(index);
        for mut piece in pool.messages(step) {
            if damage == Some(piece.seq) {
                let mut data = piece.data.to_vec();
                if let Some(b) = data.last_mut() {
                    *b ^= 0x20;
                }
                piece.data = data.into();
            }
            self.send(index, CBody::PoolChunk(piece));
        }
    }

    /// Start `step` on every member at one instant `delay` from now (the
    /// shared start barrier): named on the wall clock, so workers that
    /// receive Start at different moments still start together.
    pub fn start_step(&mut self, step: u32, delay: Duration) -> Barrier {
        let at = Instant::now() + delay;
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            + delay;
        self.broadcast(CBody::Start(v1::Start {
            step,
            delay_us: delay.as_micros() as u64,
            start_unix_ns: unix.as_nanos() as u64,
        }));
        Barrier {
            at,
            unix_s: unix.as_secs_f64(),
        }
    }

    /// Stop `step` on every member, cancelling what is in flight.
    pub fn stop_step(&mut self, step: u32, reason: String) {
        self.broadcast(CBody::Stop(v1::Stop {
            step,
            cancel_in_flight: true,
            reason,
        }));
    }

    /// Send worker `index` a change of the running step's load.
    pub fn steer(&mut self, index: u32, steer: &Steer) {
        self.send(index, CBody::Steer(encode_steer(steer)));
    }

    /// Tell worker `index` that `fleet_completed` requests of `step` ended
    /// fleet-wide, `mine_included` of them its own: its waiting request's
    /// turn under the fleet cap has come.
    pub fn admit_waiting(
        &mut self,
        index: u32,
        step: u32,
        fleet_completed: u64,
        mine_included: u64,
    ) {
        let admit = v1::CapAdmit {
            step,
            fleet_completed,
            mine_included,
        };
        self.send(index, CBody::CapAdmit(admit));
    }

    /// Send a message to one worker without waiting: the run loop never
    /// waits on one worker. A worker whose outbox is full does not read its
    /// stream: it is let go of and reported by [`Fleet::take_unreadable`].
    /// (A closed outbox means it is gone; the run loop notices that anyway.)
    fn send(&mut self, index: u32, body: CBody) {
        let Some(outbox) = self.members.get(&index).and_then(|m| m.outbox.as_ref()) else {
            return;
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = outbox.try_send(Ok(message(body))) {
            self.let_go(index);
            self.unreadable.push((
                index,
                format!(
                    "it stopped reading its stream ({} messages to it were waiting)",
                    server::OUTBOX_CAPACITY
                ),
            ));
        }
    }

    /// Send a message to every member still in the fleet.
    fn broadcast(&mut self, body: CBody) {
        let active: Vec<u32> = self.active().map(|(i, _)| i).collect();
        for i in active {
            self.send(i, body.clone());
        }
    }

    /// End the run: tell every worker, wait (briefly) until each has hung
    /// up, then reap local processes. Exiting while a worker still reads
    /// would break its stream before it sees the stop, and it would count
    /// itself lost (exit 3: a failed pod in a Kubernetes Job).
    pub async fn shutdown(mut self) {
        self.stop_step(u32::MAX, "the run is over".into());
        let deadline = Instant::now() + Duration::from_secs(5);
        // workers already silent for the heartbeat timeout were lost: no need to wait for them
        let silence = self.options.heartbeat_timeout;
        let mut open: HashSet<u64> = self
            .members
            .values()
            .filter(|m| {
                m.active() && self.by_conn.contains_key(&m.conn) && m.last_seen.elapsed() < silence
            })
            .map(|m| m.conn)
            .collect();
        while !open.is_empty() {
            tokio::select! {
                ev = self.inbound.recv() => match ev {
                    Some(Inbound::Left { conn, .. }) => {
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
        self.locals
            .reap(Instant::now() + Duration::from_secs(5))
            .await;
        self.members.clear();
        self.server.abort();
    }
}

/// Tests only: the most bytes of deflated pool one piece carries, so that
/// a small pool travels in many pieces (default: `POOL_CHUNK_BYTES`).
const PIECE_BYTES_ENV: &str = "CICADA_POOL_CHUNK_BYTES";

/// Tests only: `member:piece`: a byte of that piece of the pool is flipped
/// on its way to that member (after its CRC-32 was taken), standing for
/// damage on the way.
const DAMAGE_ENV: &str = "CICADA_TEST_DAMAGE_POOL";

fn piece_bytes() -> usize {
    std::env::var(PIECE_BYTES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(cicada_proto::convert::POOL_CHUNK_BYTES)
}

fn damaged_piece(member: u32) -> Option<u32> {
    let v = std::env::var(DAMAGE_ENV).ok()?;
    let (m, piece) = v.split_once(':')?;
    (m.parse::<u32>().ok()? == member).then(|| piece.parse().ok())?
}

/// Whether two plans carry the same pool (entries and shapes): cheap for
/// text prompts, whose shared `Arc`s compare by address first.
fn same_pool(a: &Plan, b: &Plan) -> bool {
    a.pool.len() == b.pool.len() && a.shapes == b.shapes && a.pool == b.pool
}

fn message(body: CBody) -> v1::CoordinatorMessage {
    v1::CoordinatorMessage { body: Some(body) }
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
            fleet.members().keys().copied().collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        for m in fleet.members().values() {
            assert_eq!(m.version, cicada_proto::VERSION);
            assert_eq!(m.threads, 1);
        }
        let tasks = std::mem::take(&mut fleet.locals.tasks);
        fleet.shutdown().await;
        for t in tasks {
            // a worker told the run is over ends cleanly, not as "lost"
            assert!(matches!(t.await, Ok(Ok(()))));
        }
    }

    /// The run loop never waits on one worker: a member that stops reading
    /// fills its outbox, and the next send lets go of it at once instead of
    /// waiting (before, `send` awaited room in the outbox, stalling every
    /// worker's heartbeats and admissions behind it).
    #[tokio::test]
    async fn a_member_that_stops_reading_is_let_go_without_waiting() {
        cicada_client::tls::install_crypto_provider();
        let options = FleetOptions {
            local_workers: 0,
            expect_workers: 1,
            listen: "127.0.0.1:0".parse().unwrap(),
            wait_workers: Duration::from_secs(1),
            local: LocalWorkers::InProcess,
            token: "t".into(),
            heartbeat_timeout: Duration::from_secs(10),
            tls: None,
        };
        let mut fleet = Fleet::start(options).await.unwrap();
        // a member whose stream nobody reads
        let (outbox, _unread) = mpsc::channel(server::OUTBOX_CAPACITY);
        fleet.members.insert(
            7,
            Member {
                host: "stuck".into(),
                threads: 1,
                version: cicada_proto::VERSION.into(),
                local: None,
                last_seen: Instant::now(),
                conn: 70,
                outbox: Some(outbox),
            },
        );
        fleet.by_conn.insert(70, 7);
        let sending = async {
            for i in 0..=server::OUTBOX_CAPACITY as u64 {
                fleet.admit_waiting(7, 0, i, 0);
            }
        };
        tokio::time::timeout(Duration::from_secs(5), sending)
            .await
            .expect("a send waited on a worker that does not read");
        let unreadable = fleet.take_unreadable();
        assert_eq!(unreadable.len(), 1);
        assert_eq!(unreadable[0].0, 7);
        assert!(unreadable[0].1.contains("stopped reading"));
        assert!(!fleet.members()[&7].active());
        assert_eq!(fleet.active().count(), 0);
        fleet.shutdown().await;
    }
}

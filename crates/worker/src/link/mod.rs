//! The worker's gRPC link to its coordinator: hello, steps, reports, heartbeats.

mod attach;

use std::sync::Arc;
use std::time::Duration;

use cicada_client::clock::Clock;
use cicada_proto::convert::{
    PoolReceiver, check_format, decode_plan, decode_steer, encode_histograms, encode_set,
};
use cicada_proto::v1::{self, coordinator_message::Body as CBody, worker_message::Body as WBody};
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::Streaming;

use crate::barrier::Basis;
use crate::clocksync::{self, ClockSync};
use crate::executor::{self, Step};
use crate::health::Health;
use crate::leave::{Leave, LeaveReason};
use attach::attach_retrying;

/// How a worker's life ended badly.
#[derive(Debug, Error)]
pub enum LinkError {
    #[error("cannot reach the coordinator at {url} within {waited:?}: {reason}")]
    Unreachable {
        url: String,
        waited: Duration,
        reason: String,
    },
    #[error("the coordinator refused this worker: {0}")]
    Rejected(String),
    #[error("lost the coordinator: {0}")]
    Lost(String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("cannot run the stage: {0}")]
    Step(String),
    #[error("left the run: {}", .0.what)]
    Left(LeaveReason),
}

/// Who this worker is.
#[derive(Debug, Clone)]
pub struct Identity {
    pub requested_index: Option<u32>,
    pub token: String,
    pub threads: usize,
}

/// TLS settings for an `https://` coordinator (PEM text, read by the caller).
#[derive(Debug, Clone, Default)]
pub struct Tls {
    /// CA to verify the coordinator; system roots when absent.
    pub ca_pem: Option<String>,
    /// Client certificate for mutual TLS.
    pub cert_pem: Option<String>,
    /// Client key for mutual TLS.
    pub key_pem: Option<String>,
    /// Name to verify instead of the URL's host.
    pub domain: Option<String>,
}

impl Tls {
    pub(crate) fn client_config(&self) -> tonic::transport::ClientTlsConfig {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut c = ClientTlsConfig::new();
        c = match &self.ca_pem {
            Some(ca) => c.ca_certificate(Certificate::from_pem(ca)),
            None => c.with_native_roots(),
        };
        if let (Some(cert), Some(key)) = (&self.cert_pem, &self.key_pem) {
            c = c.identity(Identity::from_pem(cert, key));
        }
        if let Some(d) = &self.domain {
            c = c.domain_name(d.clone());
        }
        c
    }
}

pub(crate) fn msg(body: WBody) -> v1::WorkerMessage {
    v1::WorkerMessage { body: Some(body) }
}

/// A running step: its stop switches and its task.
struct Running {
    /// The step's number and what it shares with the executor (in-flight
    /// count, the fleet cap's gate).
    number: u32,
    step: Arc<Step>,
    stop: CancellationToken,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    /// Stop dispatching (and, with `cancel`, abort what is in flight): the
    /// step then sends its last report and Done.
    fn halt(&self, cancel: bool) {
        self.stop.cancel();
        if let Some(gate) = &self.step.gate {
            gate.close();
        }
        if cancel {
            self.cancel.cancel();
        }
    }
}

/// An assigned step whose pool is still arriving (`PoolChunk`s).
struct Receiving {
    step: u32,
    format: u32,
    plan: Option<v1::Plan>,
    pool: PoolReceiver,
}

/// An assigned step waiting for its start, with its gate's messages.
struct Pending {
    step: Arc<Step>,
    gate: mpsc::UnboundedReceiver<executor::GateMessage>,
}

/// Serve one coordinator until it ends the run (Ok), is lost, or `leave`
/// is pulled (Err). Leaving finishes the running step first: its in-flight
/// requests are cancelled and counted, its last report and Done go out.
/// The link (this future, and the gRPC connection it dials) runs on the
/// caller's runtime; steps run on `load`, so liveness never waits for the load.
pub async fn serve(
    url: &str,
    who: Identity,
    tls: &Tls,
    dial_wait: Duration,
    leave: Leave,
    load: tokio::runtime::Handle,
) -> Result<(), LinkError> {
    let attached = tokio::select! {
        a = attach_retrying(url, &who, tls, dial_wait) => a?,
        () = leave.requested() => return Err(left(&leave)),
    };
    let (tx, mut inbound, welcome) = attached;
    let silence = Duration::from_millis(u64::from(welcome.heartbeat_timeout_ms.max(1000)));
    tracing::info!(
        index = welcome.worker_index,
        of = welcome.worker_count,
        "joined the coordinator"
    );
    let mut session = Session {
        load,
        threads: who.threads,
        tx,
        receiving: None,
        pending: None,
        running: None,
        leave,
        clock: ClockSync::default(),
        unready: None,
    };
    // measure the clocks at once: the fleet may take a while to assemble,
    // and the estimate is there for the first step's start
    session.clock.start_burst();
    let result = session.run(&mut inbound, silence).await;
    if let Some(r) = session.running.take() {
        // never leave load running without a coordinator
        r.stop.cancel();
        r.cancel.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(2), r.task).await;
    }
    // close our side and give queued messages (a final error, a last report)
    // time to reach the coordinator before the process exits
    drop(session);
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Ok(Some(_)) = inbound.message().await {}
    })
    .await;
    result
}

/// Why the worker left on its own, as an error.
fn left(leave: &Leave) -> LinkError {
    LinkError::Left(leave.reason().cloned().unwrap_or(LeaveReason {
        what: "asked to leave".into(),
        exit_code: 1,
    }))
}

/// A joined worker: the step it prepared and the one it runs.
struct Session {
    /// The runtime steps run on (not the link's).
    load: tokio::runtime::Handle,
    threads: usize,
    tx: mpsc::Sender<v1::WorkerMessage>,
    /// An assignment whose pool is on its way.
    receiving: Option<Receiving>,
    pending: Option<Pending>,
    running: Option<Running>,
    /// Pulled when this worker's host asks it to go.
    leave: Leave,
    /// This worker's clock against the coordinator's.
    clock: ClockSync,
    /// A prepared step's Ready, held until its clock burst settles.
    unready: Option<v1::Ready>,
}

impl Session {
    /// Follow the coordinator and heartbeat it until the run ends or the link breaks.
    async fn run(
        &mut self,
        inbound: &mut Streaming<v1::CoordinatorMessage>,
        silence: Duration,
    ) -> Result<(), LinkError> {
        let mut beat = tokio::time::interval(silence / 4);
        let mut beat_seq = 0u64;
        // the coordinator pings every member from its welcome on: silence this
        // long means it is gone, whatever its TCP connection still claims
        let mut heard = Instant::now();
        let mut leaving = false;
        let mut finishing = tokio::time::interval(Duration::from_millis(20));
        let mut probe_tick = tokio::time::interval(clocksync::PROBE_GAP);
        probe_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.leave.requested(), if !leaving => {
                    leaving = true;
                    match &self.running {
                        Some(r) if !r.task.is_finished() => r.halt(true),
                        _ => return Err(left(&self.leave)),
                    }
                }
                // leaving: out once the running step sent its last report and Done
                _ = finishing.tick(), if leaving => {
                    if self.running.as_ref().is_none_or(|r| r.task.is_finished()) {
                        return Err(left(&self.leave));
                    }
                }
                next = inbound.message() => {
                    let m = match next {
                        Err(s) => return Err(LinkError::Lost(format!("{}{}", s.message(), self.cut_short()))),
                        Ok(None) => return Err(LinkError::Lost(format!("the coordinator closed the stream{}", self.cut_short()))),
                        Ok(Some(m)) => m,
                    };
                    if let Some(end) = self.on_message(m).await {
                        return end;
                    }
                    // heard once acted on: preparing a step is not the
                    // coordinator's silence
                    heard = Instant::now();
                }
                _ = probe_tick.tick(), if self.clock.busy() || self.unready.is_some() => {
                    if !self.clock_tick().await {
                        return Err(LinkError::Lost("the outgoing stream closed".into()));
                    }
                }
                _ = beat.tick() => {
                    if heard.elapsed() > silence {
                        return Err(LinkError::Lost(format!("no word from the coordinator for {silence:?}")));
                    }
                    beat_seq += 1;
                    let beat = v1::Heartbeat { seq: beat_seq, in_flight: self.in_flight() };
                    if self.tx.send(msg(WBody::Heartbeat(beat))).await.is_err() {
                        return Err(LinkError::Lost("the outgoing stream closed".into()));
                    }
                }
            }
        }
    }

    /// The clock burst's next probe, or (once it settled) the Ready it held
    /// back. False when the link is closed.
    async fn clock_tick(&mut self) -> bool {
        let now = Instant::now();
        if self.clock.probing() {
            let (seq, worker_mono_ns) = self.clock.probe(now);
            let probe = v1::ClockProbe {
                seq,
                worker_mono_ns,
            };
            return self.tx.send(msg(WBody::ClockProbe(probe))).await.is_ok();
        }
        if !self.clock.settled(now) {
            return true;
        }
        let Some(mut ready) = self.unready.take() else {
            return true;
        };
        ready.clock = self
            .clock
            .map()
            .map(|m| estimate(m, clocksync::mono_ns(Instant::now())));
        self.tx.send(msg(WBody::Ready(ready))).await.is_ok()
    }

    /// Requests of the running step in flight now (0 between steps).
    fn in_flight(&self) -> u64 {
        self.running.as_ref().map_or(0, |r| r.step.in_flight())
    }

    /// Where an assignment's pool stood when the link broke ("" without one).
    fn cut_short(&self) -> String {
        self.receiving.as_ref().map_or_else(String::new, |r| {
            let (got, of) = r.pool.progress();
            let e = cicada_proto::convert::PlanError::Truncated { got, of };
            format!(" ({e})")
        })
    }

    /// Act on one message; `Some` when the run ends with it.
    async fn on_message(&mut self, m: v1::CoordinatorMessage) -> Option<Result<(), LinkError>> {
        if let Some(r) = &self.receiving
            && matches!(m.body, Some(CBody::Assign(_) | CBody::Start(_)))
        {
            let (got, of) = r.pool.progress();
            let e = cicada_proto::convert::PlanError::Truncated { got, of };
            return self.fail(format!("step {}: {e}", r.step)).await;
        }
        match m.body {
            Some(CBody::Assign(a)) => return self.assigned(a).await,
            Some(CBody::PoolChunk(c)) => return self.pool_piece(c).await,
            Some(CBody::Start(s)) => {
                let Some(pending) = self.pending.take() else {
                    return Some(Err(LinkError::Protocol(
                        "start without an assigned stage".into(),
                    )));
                };
                let (start, basis) = crate::barrier::start_now(
                    Duration::from_micros(s.delay_us),
                    s.start_unix_ns,
                    self.clock.map(),
                );
                let placed = WBody::StartPlaced(placed(basis, s.step));
                let _ = self.tx.send(msg(placed)).await;
                tokio::spawn(crate::uplink::forward(
                    pending.gate,
                    s.step,
                    self.tx.clone(),
                ));
                self.running = Some(start_step(
                    &self.load,
                    pending.step,
                    s.step,
                    Clock::new(start),
                    self.tx.clone(),
                    self.leave.clone(),
                ));
            }
            Some(CBody::Stop(s)) => match self.running.take() {
                Some(r) if !r.task.is_finished() => {
                    tracing::info!(reason = %s.reason, cancel = s.cancel_in_flight, "stopping the stage");
                    r.halt(s.cancel_in_flight);
                    self.running = Some(r);
                }
                _ => {
                    tracing::info!(reason = %s.reason, "the coordinator ended the run");
                    return Some(Ok(()));
                }
            },
            Some(CBody::Ping(p)) => {
                let beat = v1::Heartbeat {
                    seq: p.seq,
                    in_flight: self.in_flight(),
                };
                let _ = self.tx.send(msg(WBody::Heartbeat(beat))).await;
            }
            Some(CBody::CapAdmit(a)) => {
                if let Some(r) = &self.running
                    && r.number == a.step
                    && let Some(gate) = &r.step.gate
                {
                    gate.admitted(a.fleet_completed, a.mine_included);
                }
            }
            Some(CBody::ClockEcho(e)) => {
                let echo = clocksync::Echo {
                    seq: e.seq,
                    worker_mono_ns: e.worker_mono_ns,
                    recv_unix_ns: e.coord_recv_unix_ns,
                    send_unix_ns: e.coord_send_unix_ns,
                };
                self.clock
                    .echo(&echo, Instant::now(), clocksync::wall_now());
            }
            Some(CBody::Steer(s)) => self.steer(s),
            Some(CBody::Welcome(_)) | Some(CBody::Reject(_)) | None => {}
        }
        None
    }

    /// Apply the web UI's change to the running step (a change that cannot
    /// apply is logged; the coordinator checked it already).
    fn steer(&self, s: v1::Steer) {
        let steer = match decode_steer(s) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "a change of the load was not applied");
                return;
            }
        };
        match &self.running {
            Some(r) if r.number == steer.step => match r.step.steering.apply(&steer) {
                Ok(()) => tracing::info!(users = steer.users, at = ?steer.at, "the load changes"),
                Err(e) => tracing::warn!(error = %e, "a change of the load was not applied"),
            },
            _ => tracing::warn!(step = steer.step, "a change for a step that is not running"),
        }
    }

    /// An assignment: its pool follows in pieces.
    async fn assigned(&mut self, a: v1::Assign) -> Option<Result<(), LinkError>> {
        let receiving = check_format(a.plan_format)
            .and_then(|()| PoolReceiver::start(a.step, a.pool_chunks, a.pool_bytes));
        match receiving {
            Ok(pool) => {
                self.receiving = Some(Receiving {
                    step: a.step,
                    format: a.plan_format,
                    plan: a.plan,
                    pool,
                });
                None
            }
            Err(e) => self.fail(e.to_string()).await,
        }
    }

    /// A piece of the assigned pool; the step is prepared after the last.
    async fn pool_piece(&mut self, c: v1::PoolChunk) -> Option<Result<(), LinkError>> {
        let Some(r) = self.receiving.as_mut() else {
            return Some(Err(LinkError::Protocol(
                "a piece of a pool without an assignment".into(),
            )));
        };
        match r.pool.push(c) {
            Ok(false) => None,
            Ok(true) => match self.receiving.take() {
                Some(r) => self.prepare(r).await,
                None => None,
            },
            Err(e) => {
                let step = r.step;
                self.receiving = None;
                self.fail(format!("step {step}: {e}")).await
            }
        }
    }

    /// Tell the coordinator why this worker cannot run its step, and end.
    async fn fail(&mut self, message: String) -> Option<Result<(), LinkError>> {
        self.receiving = None;
        let error = v1::WorkerError {
            message: message.clone(),
            fatal: true,
        };
        let _ = self.tx.send(msg(WBody::Error(error))).await;
        Some(Err(LinkError::Step(message)))
    }

    /// Prepare an assigned step once its pool is in, off the link's
    /// runtime (the rest of the pool inflates, the plan is decoded, its
    /// client built), and say it is ready (or why it cannot run).
    async fn prepare(&mut self, r: Receiving) -> Option<Result<(), LinkError>> {
        let (uplink, gate) = mpsc::unbounded_channel();
        let (load, threads, step_no) = (self.load.clone(), self.threads, r.step);
        let made = tokio::task::spawn_blocking(move || {
            let pool = r.pool.finish().map_err(|e| e.to_string())?;
            let plan = r
                .plan
                .ok_or_else(|| "the assignment carries no plan".to_string())?;
            let plan = decode_plan(plan, r.format, pool).map_err(|e| e.to_string())?;
            // its client's connections and tasks belong to the load's runtime
            let _on_load = load.enter();
            Step::new(plan, threads + 1, Some(uplink))
                .map(|s| {
                    let planned = s.planned;
                    (s, planned)
                })
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("preparing the step failed: {e}")));
        match made {
            Ok((step, planned)) => {
                self.pending = Some(Pending {
                    step: Arc::new(step),
                    gate,
                });
                let ready = v1::Ready {
                    step: step_no,
                    planned_requests: planned,
                    routes: self
                        .pending
                        .as_ref()
                        .map(|p| p.step.routes())
                        .unwrap_or_default(),
                    clock: None,
                };
                // Ready goes out with a fresh clock estimate, once the burst settles
                self.clock.start_burst();
                self.unready = Some(ready);
                None
            }
            Err(message) => self.fail(message).await,
        }
    }
}

/// A clock map as Ready carries it, judged at worker monotonic `now_ns`.
fn estimate(m: &clocksync::ClockMap, now_ns: u64) -> v1::ClockEstimate {
    v1::ClockEstimate {
        offset_ns: m
            .offset_ns
            .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
        uncertainty_ns: m.uncertainty_ns(now_ns),
        min_rtt_ns: m.min_rtt_ns,
        samples: m.samples,
    }
}

/// How the start was placed, as StartPlaced carries it.
fn placed(basis: Basis, step: u32) -> v1::StartPlaced {
    let (basis, off_ns) = match basis {
        Basis::Offset { .. } => (v1::StartBasis::Offset, 0),
        Basis::WallClock { .. } => (v1::StartBasis::WallClock, 0),
        Basis::Delay { off_ms } => (v1::StartBasis::Delay, (off_ms * 1e6) as i64),
    };
    v1::StartPlaced {
        step,
        basis: basis as i32,
        off_ns,
    }
}

fn start_step(
    load: &tokio::runtime::Handle,
    step: Arc<Step>,
    step_no: u32,
    clock: Clock,
    tx: mpsc::Sender<v1::WorkerMessage>,
    leave: Leave,
) -> Running {
    let stop = CancellationToken::new();
    let cancel = CancellationToken::new();
    let (s2, c2, cancelled) = (stop.clone(), cancel.clone(), cancel.clone());
    let shared = step.clone();
    let task = load.spawn(async move {
        let interval = Duration::from_millis(step.plan.report_interval_ms.max(100));
        let health = Arc::new(Health::new());
        let ticking = CancellationToken::new();
        let ticker_task = {
            let (health, ticking) = (health.clone(), ticking.clone());
            tokio::spawn(async move { health.run_ticker(ticking).await })
        };
        let _stop_ticker = ticking.drop_guard();
        let mut exec = tokio::spawn(executor::run(step.clone(), clock, s2, c2));
        tokio::time::sleep_until(clock.start()).await;
        let mut ticker = tokio::time::interval_at(clock.start() + interval, interval);
        let mut seq = 0u64;
        let mut last_end = 0u64;
        let ended = loop {
            tokio::select! {
                _ = ticker.tick() => {
                    let report = build_report(&step, &health, step_no, seq, last_end, clock.now_us());
                    last_end = report.interval_end_us;
                    seq += 1;
                    if tx.send(msg(WBody::Report(report))).await.is_err() {
                        return;
                    }
                }
                r = &mut exec => break r.unwrap_or_default(),
            }
        };
        drop(_stop_ticker);
        let _ = ticker_task.await;
        let report = build_report(&step, &health, step_no, seq, last_end, clock.now_us());
        let _ = tx.send(msg(WBody::Report(report))).await;
        let _ = tx
            .send(msg(WBody::Done(v1::Done {
                step: step_no,
                sent: ended.sent,
                cancelled: cancelled.is_cancelled(),
                stopped_by: leave.reason().map(|r| r.what.clone()).unwrap_or_default(),
                not_sent_at_end: ended.not_sent_at_end,
            })))
            .await;
    });
    Running {
        number: step_no,
        step: shared,
        stop,
        cancel,
        task,
    }
}

fn build_report(
    step: &Step,
    health: &Health,
    step_no: u32,
    seq: u64,
    start_us: u64,
    end_us: u64,
) -> v1::Report {
    let h = health.take();
    let health = v1::Health {
        histograms: encode_histograms(&h.stalls),
        cpu_us: h.cpu_us,
        rss_bytes: h.rss_bytes,
        peak_rss_bytes: h.peak_rss_bytes,
    };
    let scopes = step
        .take_interval(end_us)
        .iter()
        .map(|(scope, set)| encode_set(*scope, set))
        .collect();
    v1::Report {
        step: step_no,
        seq,
        interval_start_us: start_us,
        interval_end_us: end_us,
        scopes,
        health: Some(health),
        in_flight: step.in_flight(),
        details_jsonl: step.recorder.take_details().into(),
    }
}

//! Running one stage over the fleet: assign, barrier, collect, detect loss.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::bail;
use cicada_proto::v1::{self, coordinator_message::Body as CBody, worker_message::Body as WBody};
use cicada_scenarios::plan::{PLAN_FORMAT, Plan};
use tokio::time::Instant;

use crate::fleet::Fleet;
use crate::merge::Aggregate;
use crate::progress::Progress;
use crate::server::FleetEvent;
use crate::signals::Signals;

/// Delay from Start to the shared start instant: long enough for every worker to receive it.
const START_DELAY: Duration = Duration::from_millis(250);
/// Longest a worker may take to prepare a stage.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long stopped workers get to report what they have.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// A worker that stopped reporting mid-stage.
#[derive(Debug, Clone, PartialEq)]
pub struct LostWorker {
    pub index: u32,
    pub host: String,
    /// Seconds after the start barrier when the loss was noticed.
    pub at_s: f64,
    pub reason: String,
    /// Requests the worker was to send in the stage (0 if open-ended).
    pub planned: u64,
    /// Requests it reported before it was lost (these stay counted).
    pub reported: u64,
}

/// How a stage ended.
#[derive(Debug, Default)]
pub struct StageEnd {
    pub lost: Vec<LostWorker>,
    /// Interrupted by a signal: results cover only what was collected.
    pub interrupted: Option<&'static str>,
    /// Requests planned over the fleet (0 if open-ended).
    pub planned: u64,
    /// Wall-clock time of the start barrier (Unix seconds).
    pub started_unix: f64,
    /// Every worker's share: planned and reported requests.
    pub workers: Vec<WorkerShare>,
    /// Seconds from the start barrier to the end of the stage.
    pub elapsed_s: f64,
}

/// One worker's part of a stage.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerShare {
    pub index: u32,
    pub host: String,
    /// Requests it was to send (0 if open-ended).
    pub planned: u64,
    /// Requests it reported (every outcome).
    pub reported: u64,
    /// It was lost before finishing.
    pub lost: bool,
    /// Runtime threads it runs (its share of the machine).
    pub threads: u32,
    /// The worker binary's version (from its Hello).
    pub version: String,
}

fn reported_sent(r: &v1::Report) -> u64 {
    r.scopes
        .iter()
        .flat_map(|s| s.outcomes.iter())
        .map(|o| o.count)
        .sum()
}

/// Run one stage: every member gets its plan (by index), then the barrier, then reports.
pub async fn run_stage(
    fleet: &mut Fleet,
    stage: u32,
    plans: &[Plan],
    agg: &mut Aggregate,
    signals: &mut Signals,
    progress: &mut Progress,
    on_start: &mut dyn FnMut(Instant),
) -> anyhow::Result<StageEnd> {
    let mut end = StageEnd::default();
    for (index, plan) in plans.iter().enumerate() {
        fleet
            .send(
                index as u32,
                CBody::Assign(v1::Assign {
                    step: stage,
                    plan: plan.encode().into(),
                    plan_format: PLAN_FORMAT,
                }),
            )
            .await;
    }

    // barrier part 1: everyone ready
    let mut planned: BTreeMap<u32, u64> = BTreeMap::new();
    let deadline = Instant::now() + READY_TIMEOUT;
    while planned.len() < fleet.members.len() {
        let ev = tokio::select! {
            ev = fleet.events.recv() => ev,
            () = tokio::time::sleep_until(deadline) => bail!("workers did not get ready within {READY_TIMEOUT:?}"),
            sig = signals.next() => bail!("{sig} before the run started; nothing was sent"),
        };
        match ev {
            Some(FleetEvent::Message { conn, msg }) => {
                let Some(&i) = fleet.by_conn.get(&conn) else {
                    continue;
                };
                match msg.body {
                    Some(WBody::Ready(r)) if r.step == stage => {
                        planned.insert(i, r.planned_requests);
                    }
                    Some(WBody::Error(e)) => {
                        bail!("worker {i} cannot run the stage: {}", e.message)
                    }
                    _ => {}
                }
            }
            Some(FleetEvent::Left { conn, reason }) => {
                if let Some(i) = fleet.by_conn.get(&conn) {
                    bail!("worker {i} left before the stage started: {reason}");
                }
            }
            Some(FleetEvent::Joined { outbox, .. }) => {
                let _ = outbox
                    .send(Ok(v1::CoordinatorMessage {
                        body: Some(CBody::Reject(v1::Reject {
                            reason: "the run has already started".into(),
                        })),
                    }))
                    .await;
            }
            Some(FleetEvent::Refused { .. }) => {}
            None => bail!("the gRPC server stopped"),
        }
    }
    end.planned = planned.values().sum();

    // barrier part 2: one start instant
    fleet
        .broadcast(CBody::Start(v1::Start {
            step: stage,
            delay_us: START_DELAY.as_micros() as u64,
        }))
        .await;
    let start = Instant::now() + START_DELAY;
    on_start(start);
    end.started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
        + START_DELAY.as_secs_f64();
    progress.begin(end.planned);
    agg.begin(end.started_unix);

    let all: BTreeSet<u32> = fleet.members.keys().copied().collect();
    let mut finished: BTreeSet<u32> = BTreeSet::new();
    let mut reported: BTreeMap<u32, u64> = BTreeMap::new();
    for m in fleet.members.values_mut() {
        m.last_seen = Instant::now();
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut ping_seq = 0u64;
    let mut stop_deadline: Option<Instant> = None;
    let silence = fleet.options.heartbeat_timeout;

    while finished.len() < all.len() {
        let lose = |end: &mut StageEnd,
                    agg: &mut Aggregate,
                    finished: &mut BTreeSet<u32>,
                    i: u32,
                    host: String,
                    reason: String,
                    reported: u64| {
            tracing::warn!(worker = i, %host, %reason, "lost a worker");
            end.lost.push(LostWorker {
                index: i,
                host,
                at_s: Instant::now()
                    .saturating_duration_since(start)
                    .as_secs_f64(),
                reason,
                planned: planned.get(&i).copied().unwrap_or(0),
                reported,
            });
            agg.retire(i);
            finished.insert(i);
        };
        tokio::select! {
            ev = fleet.events.recv() => match ev {
                Some(FleetEvent::Message { conn, msg }) => {
                    let Some(&i) = fleet.by_conn.get(&conn) else { continue };
                    if let Some(m) = fleet.members.get_mut(&i) {
                        m.last_seen = Instant::now();
                    }
                    match msg.body {
                        Some(WBody::Report(r)) if r.step == stage => {
                            *reported.entry(i).or_default() += reported_sent(&r);
                            if let Err(e) = agg.add(i, &r) {
                                tracing::error!(worker = i, error = %e, "discarding a report that cannot be decoded");
                            }
                        }
                        Some(WBody::Done(d)) if d.step == stage && !finished.contains(&i) => {
                            finished.insert(i);
                            agg.retire(i);
                        }
                        Some(WBody::Error(e)) if e.fatal && !finished.contains(&i) => {
                            let host = fleet.members.get(&i).map(|m| m.hello.hostname.clone()).unwrap_or_default();
                            let n = reported.get(&i).copied().unwrap_or(0);
                            lose(&mut end, agg, &mut finished, i, host, format!("worker error: {}", e.message), n);
                        }
                        _ => {}
                    }
                }
                Some(FleetEvent::Left { conn, reason }) => {
                    if let Some(i) = fleet.by_conn.remove(&conn)
                        && !finished.contains(&i)
                    {
                        let host = fleet.members.get(&i).map(|m| m.hello.hostname.clone()).unwrap_or_default();
                        let n = reported.get(&i).copied().unwrap_or(0);
                        lose(&mut end, agg, &mut finished, i, host, reason, n);
                    }
                }
                Some(FleetEvent::Joined { outbox, .. }) => {
                    let _ = outbox
                        .send(Ok(v1::CoordinatorMessage {
                            body: Some(CBody::Reject(v1::Reject { reason: "the run has already started".into() })),
                        }))
                        .await;
                }
                Some(FleetEvent::Refused { .. }) => {}
                None => bail!("the gRPC server stopped"),
            },
            _ = tick.tick() => {
                ping_seq += 1;
                fleet.broadcast(CBody::Ping(v1::Ping { seq: ping_seq })).await;
                let now = Instant::now();
                let silent: Vec<(u32, String)> = fleet
                    .members
                    .iter()
                    .filter(|(i, m)| !finished.contains(i) && now.saturating_duration_since(m.last_seen) > silence)
                    .map(|(i, m)| (*i, m.hello.hostname.clone()))
                    .collect();
                for (i, host) in silent {
                    let n = reported.get(&i).copied().unwrap_or(0);
                    lose(&mut end, agg, &mut finished, i, host, format!("no heartbeat for {silence:?}"), n);
                }
                if let Some(d) = stop_deadline
                    && now >= d
                {
                    let late: Vec<u32> = all.difference(&finished).copied().collect();
                    for i in late {
                        let host = fleet.members.get(&i).map(|m| m.hello.hostname.clone()).unwrap_or_default();
                        let n = reported.get(&i).copied().unwrap_or(0);
                        lose(&mut end, agg, &mut finished, i, host, "did not stop in time".into(), n);
                    }
                }
                progress.tick(agg, start);
            }
            sig = signals.next() => {
                tracing::warn!("{sig}: stopping the workers and writing the results collected so far");
                end.interrupted = Some(sig);
                fleet.broadcast(CBody::Stop(v1::Stop { step: stage, cancel_in_flight: true, reason: format!("coordinator received {sig}") })).await;
                stop_deadline = Some(Instant::now() + STOP_GRACE);
            }
        }
    }
    agg.flush(true);
    progress.finish(agg, start);
    end.elapsed_s = Instant::now()
        .saturating_duration_since(start)
        .as_secs_f64();
    end.workers = fleet
        .members
        .iter()
        .map(|(i, m)| WorkerShare {
            index: *i,
            host: m.hello.hostname.clone(),
            planned: planned.get(i).copied().unwrap_or(0),
            reported: reported.get(i).copied().unwrap_or(0),
            lost: end.lost.iter().any(|l| l.index == *i),
            threads: m.hello.cpus.max(1),
            version: m.hello.version.clone(),
        })
        .collect();
    Ok(end)
}

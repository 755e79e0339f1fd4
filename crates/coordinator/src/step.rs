//! Running one step of the run (the run itself, or one value of a `[sweep]`)
//! over the fleet: assign the plans, wait until every worker is ready, start
//! them at one barrier, then collect their reports until each is done or lost.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::bail;
use cicada_scenarios::plan::Plan;
use tokio::time::Instant;

use crate::cap::{Admit, FleetCap};
use crate::error::RunError;
use crate::fleet::{Event, Fleet};
use crate::merge::Aggregate;
use crate::progress::Progress;
use crate::signals::Signals;

/// Delay from Start to the shared start instant: long enough for every worker to receive it.
const START_DELAY: Duration = Duration::from_millis(250);
/// Longest a worker may take to prepare a step.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long stopped workers get to report what they have.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// A worker that stopped reporting mid-step.
#[derive(Debug, Clone, PartialEq)]
pub struct LostWorker {
    pub index: u32,
    pub host: String,
    /// Seconds after the start barrier when the loss was noticed.
    pub at_s: f64,
    pub reason: String,
    /// Requests the worker was to send in the step (0 if open-ended).
    pub planned: u64,
    /// Requests it reported before it was lost (these stay counted).
    pub reported: u64,
}

/// How a step ended.
#[derive(Debug, Default)]
pub struct StepEnd {
    pub lost: Vec<LostWorker>,
    /// Interrupted by a signal: results cover only what was collected.
    pub interrupted: Option<&'static str>,
    /// Requests planned over the fleet (0 if open-ended).
    pub planned: u64,
    /// Wall-clock time of the start barrier (Unix seconds).
    pub started_unix: f64,
    /// Every worker's share: planned and reported requests.
    pub workers: Vec<WorkerShare>,
    /// Seconds from the start barrier to the end of the step.
    pub elapsed_s: f64,
}

/// One worker's part of a step.
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

/// What a step runs and where its figures go.
pub struct Step<'a> {
    /// The step's number (0 without a sweep).
    pub number: u32,
    /// One plan per worker index.
    pub plans: &'a [Plan],
    /// The merge of the step's reports.
    pub agg: &'a mut Aggregate,
    /// The live progress.
    pub progress: &'a mut Progress,
    /// Called at the start barrier with its instant.
    pub on_start: &'a mut dyn FnMut(Instant),
}

/// Run one step: every member gets its plan (by index), then the barrier, then reports.
pub async fn run_step(
    fleet: &mut Fleet,
    signals: &mut Signals,
    step: Step<'_>,
) -> anyhow::Result<StepEnd> {
    for (index, plan) in step.plans.iter().enumerate() {
        fleet.assign(index as u32, step.number, plan).await;
    }
    let planned = wait_ready(fleet, signals, step.number).await?;
    let mut end = StepEnd {
        planned: planned.values().sum(),
        ..StepEnd::default()
    };
    // the barrier: one start instant for every worker
    let barrier = fleet.start_step(step.number, START_DELAY).await;
    let start = barrier.at;
    (step.on_start)(start);
    end.started_unix = barrier.unix_s;
    step.progress.begin(end.planned);
    step.agg.begin(end.started_unix);
    fleet.mark_all_seen();
    let mut collect = Collect {
        step: step.number,
        start,
        all: fleet.members().keys().copied().collect(),
        planned,
        finished: BTreeSet::new(),
        reported: BTreeMap::new(),
        stop_deadline: None,
        cap: fleet_cap(step.plans),
        admits: Vec::new(),
        end,
    };
    collect.run(fleet, signals, step.agg, step.progress).await?;
    Ok(collect.finish(fleet, step.agg, step.progress))
}

/// The fleet-wide cap the step's workers share, when more than one does.
fn fleet_cap(plans: &[Plan]) -> Option<FleetCap> {
    plans
        .iter()
        .find_map(|p| p.fleet_cap().filter(|(_, shared)| *shared))
        .map(|(cap, _)| FleetCap::new(cap))
}

/// Wait until every member is ready for `step`; returns the requests each plans.
async fn wait_ready(
    fleet: &mut Fleet,
    signals: &mut Signals,
    step: u32,
) -> anyhow::Result<BTreeMap<u32, u64>> {
    let mut planned: BTreeMap<u32, u64> = BTreeMap::new();
    let deadline = Instant::now() + READY_TIMEOUT;
    while planned.len() < fleet.members().len() {
        let ev = tokio::select! {
            ev = fleet.next() => ev,
            () = tokio::time::sleep_until(deadline) => bail!("workers did not get ready within {READY_TIMEOUT:?}"),
            signal = signals.next() => return Err(RunError::Interrupted {
                signal,
                message: format!("{signal} before the step started: stopped before any request of it was sent"),
            }.into()),
        };
        match ev {
            Some(Event::Ready {
                worker,
                step: s,
                planned: n,
            }) if s == step => {
                planned.insert(worker, n);
            }
            Some(Event::Failed {
                worker, message, ..
            }) => {
                bail!("worker {worker} cannot run the stage: {message}")
            }
            Some(Event::Left { worker, reason }) => {
                bail!("worker {worker} left before the stage started: {reason}");
            }
            Some(_) => {}
            None => bail!("the gRPC server stopped"),
        }
    }
    Ok(planned)
}

/// Collecting a started step's reports: who finished, what each reported,
/// and who was lost.
struct Collect {
    step: u32,
    start: Instant,
    all: BTreeSet<u32>,
    planned: BTreeMap<u32, u64>,
    finished: BTreeSet<u32>,
    reported: BTreeMap<u32, u64>,
    /// Set once the workers were told to stop: who has not finished by then is lost.
    stop_deadline: Option<Instant>,
    /// The fleet-wide `max_concurrency`, when workers share it.
    cap: Option<FleetCap>,
    /// Waiting workers whose turn came, to be told.
    admits: Vec<Admit>,
    end: StepEnd,
}

impl Collect {
    /// Until every worker is done or lost: reports, heartbeats, signals.
    async fn run(
        &mut self,
        fleet: &mut Fleet,
        signals: &mut Signals,
        agg: &mut Aggregate,
        progress: &mut Progress,
    ) -> anyhow::Result<()> {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        while self.finished.len() < self.all.len() {
            tokio::select! {
                ev = fleet.next() => match ev {
                    Some(ev) => self.on_event(fleet, agg, ev),
                    None => bail!("the gRPC server stopped"),
                },
                _ = tick.tick() => {
                    self.on_tick(fleet, agg);
                    progress.tick(agg, self.start);
                }
                sig = signals.next() => {
                    tracing::warn!("{sig}: stopping the workers and writing the results collected so far");
                    self.end.interrupted = Some(sig);
                    fleet.stop_step(self.step, format!("coordinator received {sig}")).await;
                    self.stop_deadline = Some(Instant::now() + STOP_GRACE);
                }
            }
            for a in self.admits.drain(..) {
                fleet
                    .admit_waiting(a.worker, self.step, a.fleet_completed, a.mine_included)
                    .await;
            }
        }
        self.pending_signal(signals).await;
        Ok(())
    }

    /// A signal that arrived as the last worker finished still stops the
    /// run: when every process got SIGTERM at once, the workers may finish
    /// their stop (and say so) before this loop polled the coordinator's own.
    async fn pending_signal(&mut self, signals: &mut Signals) {
        if self.end.interrupted.is_some() {
            return;
        }
        let pending = tokio::select! {
            biased;
            sig = signals.next() => Some(sig),
            () = std::future::ready(()) => None,
        };
        if let Some(sig) = pending {
            tracing::warn!("{sig}: the workers had stopped already; writing the results");
            self.end.interrupted = Some(sig);
        }
    }

    fn on_event(&mut self, fleet: &Fleet, agg: &mut Aggregate, ev: Event) {
        match ev {
            Event::Report { worker, report } if report.step == self.step => {
                *self.reported.entry(worker).or_default() += report.sent;
                if let Err(e) = agg.add(worker, *report) {
                    tracing::error!(worker, error = %e, "discarding a report that cannot be decoded");
                }
            }
            Event::Done { worker, step }
                if step == self.step && !self.finished.contains(&worker) =>
            {
                self.finished.insert(worker);
                agg.retire(worker);
            }
            Event::Failed {
                worker,
                message,
                fatal: true,
            } if !self.finished.contains(&worker) => {
                self.lose(fleet, agg, worker, format!("worker error: {message}"));
            }
            Event::Left { worker, reason } if !self.finished.contains(&worker) => {
                self.lose(fleet, agg, worker, reason);
            }
            Event::CapProgress {
                worker,
                step,
                completed,
                sent,
            } if step == self.step => {
                if let Some(cap) = &mut self.cap {
                    self.admits.extend(cap.progress(worker, completed, sent));
                }
            }
            Event::Heartbeat { worker, in_flight } => agg.heartbeat(worker, in_flight),
            Event::CapWaiting {
                worker,
                step,
                index,
            } if step == self.step => {
                if let Some(cap) = &mut self.cap {
                    self.admits.extend(cap.waiting(worker, index));
                }
            }
            _ => {}
        }
    }

    /// Once a second: workers silent too long, or not stopped in time, are lost.
    fn on_tick(&mut self, fleet: &Fleet, agg: &mut Aggregate) {
        let now = Instant::now();
        let silence = fleet.options.heartbeat_timeout;
        let silent: Vec<u32> = fleet
            .members()
            .iter()
            .filter(|(i, m)| {
                !self.finished.contains(i) && now.saturating_duration_since(m.last_seen) > silence
            })
            .map(|(i, _)| *i)
            .collect();
        for i in silent {
            self.lose(fleet, agg, i, format!("no heartbeat for {silence:?}"));
        }
        if let Some(d) = self.stop_deadline
            && now >= d
        {
            let late: Vec<u32> = self.all.difference(&self.finished).copied().collect();
            for i in late {
                self.lose(fleet, agg, i, "did not stop in time".into());
            }
        }
    }

    fn lose(&mut self, fleet: &Fleet, agg: &mut Aggregate, worker: u32, reason: String) {
        let host = fleet
            .members()
            .get(&worker)
            .map(|m| m.host.clone())
            .unwrap_or_default();
        tracing::warn!(worker, %host, %reason, "lost a worker");
        self.end.lost.push(LostWorker {
            index: worker,
            host,
            at_s: Instant::now()
                .saturating_duration_since(self.start)
                .as_secs_f64(),
            reason,
            planned: self.planned.get(&worker).copied().unwrap_or(0),
            reported: self.reported.get(&worker).copied().unwrap_or(0),
        });
        agg.retire(worker);
        self.finished.insert(worker);
        // its requests in flight will never end: their slots go to the rest
        if let Some(cap) = &mut self.cap {
            self.admits.extend(cap.lost(worker));
        }
    }

    /// The step's end: last intervals flushed, every worker's share.
    fn finish(mut self, fleet: &Fleet, agg: &mut Aggregate, progress: &mut Progress) -> StepEnd {
        agg.flush(true);
        progress.finish(agg, self.start);
        self.end.elapsed_s = Instant::now()
            .saturating_duration_since(self.start)
            .as_secs_f64();
        self.end.workers = fleet
            .members()
            .iter()
            .map(|(i, m)| WorkerShare {
                index: *i,
                host: m.host.clone(),
                planned: self.planned.get(i).copied().unwrap_or(0),
                reported: self.reported.get(i).copied().unwrap_or(0),
                lost: self.end.lost.iter().any(|l| l.index == *i),
                threads: m.threads,
                version: m.version.clone(),
            })
            .collect();
        self.end
    }
}

//! Collecting a step's events: who is ready, who finished, what each
//! reported (checked before it is merged), and who was lost.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cicada_metrics::Metric;
use cicada_results::sink::{Report, Sink};
use cicada_results::{StartBasis, WorkerClock};
use tokio::time::Instant;

use super::{Applied, Helm, LostWorker, STOP_GRACE, SaturationWatch, StepEnd, WorkerShare};
use crate::audit::Audit;
use crate::cap::{Admit, FleetCap};
use crate::error::StepError;
use cicada_results::saturation::{self, Saturated};

use crate::fleet::{Event, Fleet, WorkerReport};
use crate::merge::Aggregate;
use crate::signals::Signals;
use cicada_web::Control;

/// A worker that ended its share before it was done, and why.
#[derive(Debug)]
struct EarlyEnd {
    worker: u32,
    reason: String,
}

/// One step's events, as they come.
pub(super) struct Collect {
    pub(super) step: u32,
    /// The start barrier, once placed.
    start: Option<Instant>,
    /// Every member the step was assigned to.
    all: BTreeSet<u32>,
    /// Members that said they are ready.
    ready: BTreeSet<u32>,
    /// Members done or lost.
    finished: BTreeSet<u32>,
    /// The coordinator's plan per member, and what each has accounted for.
    audit: Audit,
    /// Set once the workers were told to stop: who has not finished by then is lost.
    stop_deadline: Option<Instant>,
    /// The fleet-wide `max_concurrency`, when workers share it.
    cap: Option<FleetCap>,
    /// Waiting workers whose turn came, to be told.
    admits: Vec<Admit>,
    /// Workers that ended their share early (lost unless the run was interrupted).
    early: Vec<EarlyEnd>,
    /// Each worker's clock as it measured it for this step, and how it placed the start.
    clocks: BTreeMap<u32, WorkerClock>,
    bases: BTreeMap<u32, StartBasis>,
    /// Over-saturation judged as the intervals come (open loops).
    pub(super) saturation: Option<SaturationWatch>,
    pub(super) end: StepEnd,
}

impl Collect {
    /// Collecting a step planned as `planned` (requests and sessions per
    /// member).
    pub(super) fn new(
        step: u32,
        planned: &BTreeMap<u32, (u64, u64)>,
        cap: Option<FleetCap>,
    ) -> Self {
        let mut audit = Audit::new(planned.iter().map(|(w, (p, _))| (*w, *p)));
        for (w, (_, sessions)) in planned {
            audit.plan_sessions(*w, *sessions);
        }
        Collect {
            step,
            start: None,
            all: planned.keys().copied().collect(),
            ready: BTreeSet::new(),
            finished: BTreeSet::new(),
            audit,
            stop_deadline: None,
            cap,
            admits: Vec::new(),
            early: Vec::new(),
            clocks: BTreeMap::new(),
            bases: BTreeMap::new(),
            saturation: None,
            end: StepEnd {
                planned: planned.values().map(|(p, _)| p).sum(),
                ..StepEnd::default()
            },
        }
    }

    /// Some member neither ready nor lost.
    pub(super) fn waiting_for_ready(&self) -> bool {
        self.all
            .iter()
            .any(|w| !self.ready.contains(w) && !self.finished.contains(w))
    }

    /// Every member was lost.
    pub(super) fn all_lost(&self) -> bool {
        self.all.iter().all(|w| self.finished.contains(w))
    }

    /// Member `worker` is ready, saying it planned `claimed` requests, with
    /// its clock as it measured it (checked already).
    pub(super) fn ready(
        &mut self,
        fleet: &mut Fleet,
        agg: &mut Aggregate,
        worker: u32,
        claimed: u64,
        clock: Option<WorkerClock>,
    ) {
        if !self.all.contains(&worker) || self.finished.contains(&worker) {
            return;
        }
        match self.audit.check_ready(worker, claimed) {
            Ok(()) => {
                self.ready.insert(worker);
                if let Some(c) = clock {
                    self.clocks.insert(worker, c);
                }
            }
            Err(refusal) => self.lose(fleet, agg, worker, refusal.to_string()),
        }
    }

    /// After a change of the load: if it changed an open loop's rate, no
    /// worker's share has a count any more; if it changed the cap, the
    /// fleet's cap switches at its instant.
    fn steered(&mut self, applied: Applied) {
        if applied.open_ended {
            self.audit.open_ended();
            if let Some(cap) = &mut self.cap {
                cap.open_ended();
            }
        }
        if let (Some((at, c)), Some(cap)) = (applied.cap, &mut self.cap) {
            cap.change(at, c);
        }
    }

    /// The cap's changes due by now, in effect: the waiting requests a larger one lets go.
    fn switch_cap(&mut self, start: Instant) {
        if let Some(cap) = &mut self.cap {
            let now = Instant::now().saturating_duration_since(start);
            self.admits.extend(cap.switch_due(now));
        }
    }

    /// Time since the step's barrier.
    fn elapsed(&self) -> Duration {
        self.start.map_or(Duration::ZERO, |s| {
            Instant::now().saturating_duration_since(s)
        })
    }

    /// The barrier was placed at `at`.
    pub(super) fn started(&mut self, at: Instant) {
        self.start = Some(at);
    }

    /// Until every worker is done or lost: reports, heartbeats, signals.
    pub(super) async fn run(
        &mut self,
        fleet: &mut Fleet,
        signals: &mut Signals,
        agg: &mut Aggregate,
        out: &mut dyn Sink,
        mut helm: Option<&mut Helm<'_>>,
    ) -> Result<(), StepError> {
        let start = self.start.unwrap_or_else(Instant::now);
        if let Some(h) = helm.as_deref() {
            h.clocks(self.clocks.iter().map(|(w, c)| (*w, c.offset_ms)));
        }
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        while self.finished.len() < self.all.len() {
            let switch = self.cap.as_ref().and_then(FleetCap::next_switch);
            tokio::select! {
                () = at_offset(start, switch) => self.switch_cap(start),
                ev = fleet.next() => match ev {
                    Some(ev) => self.on_event(fleet, agg, out, ev),
                    None => return Err(StepError::ServerStopped),
                },
                _ = tick.tick() => {
                    self.on_tick(fleet, agg);
                    agg.hand_over(out);
                    self.judge_saturation(fleet, agg);
                    let total = agg.total();
                    out.tick(&agg.tick(self.elapsed(), &total));
                }
                ask = next_control(&mut helm) => match (ask, helm.as_deref_mut()) {
                    (Control::Change(a), Some(h)) => {
                        let applied = h.apply(a, fleet, start);
                        out.load_changed(applied.open_ended);
                        self.steered(applied);
                    }
                    (Control::Reset(a), Some(h)) => h.reset(a, agg, start),
                    _ => {}
                },
                sig = signals.next() => {
                    tracing::warn!("{sig}: stopping the workers and writing the results collected so far");
                    self.end.interrupted = Some(sig);
                    fleet.stop_step(self.step, format!("coordinator received {sig}"));
                    self.stop_deadline = Some(Instant::now() + STOP_GRACE);
                }
            }
            for a in std::mem::take(&mut self.admits) {
                fleet.admit_waiting(a.worker, self.step, a.fleet_completed, a.mine_included);
            }
            self.lose_unreadable(fleet, agg);
            agg.hand_over(out);
            self.judge_abort(fleet, agg);
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

    fn on_event(&mut self, fleet: &mut Fleet, agg: &mut Aggregate, out: &mut dyn Sink, ev: Event) {
        match ev {
            Event::Report { worker, report } if report.step == self.step => {
                self.report(fleet, (agg, out), worker, *report);
            }
            Event::Done {
                worker,
                step,
                stopped_by,
                not_sent_at_end,
            } if step == self.step && !self.finished.contains(&worker) => {
                self.done(fleet, agg, worker, stopped_by, not_sent_at_end);
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
            } if step == self.step && !self.finished.contains(&worker) => {
                let now = self.elapsed();
                let verdict = self
                    .cap
                    .as_mut()
                    .map(|c| c.progress(worker, completed, sent, now));
                self.on_cap(fleet, agg, worker, verdict);
            }
            Event::Heartbeat { worker, in_flight } => agg.heartbeat(worker, in_flight),
            Event::StartPlaced {
                worker,
                step,
                basis,
            } if step == self.step && !self.finished.contains(&worker) => match basis {
                Ok(b) => {
                    self.bases.insert(worker, b);
                }
                Err(why) => {
                    let why = format!("its start basis failed a check: {why}");
                    self.lose(fleet, agg, worker, why);
                }
            },
            Event::CapWaiting {
                worker,
                step,
                index,
            } if step == self.step && !self.finished.contains(&worker) => {
                let verdict = self.cap.as_mut().map(|c| c.waiting(worker, index));
                self.on_cap(fleet, agg, worker, verdict);
            }
            _ => {}
        }
    }

    /// Merge a report that passes the checks; a worker whose report fails
    /// one is lost (its earlier reports stay counted).
    fn report(
        &mut self,
        fleet: &mut Fleet,
        (agg, out): (&mut Aggregate, &mut dyn Sink),
        worker: u32,
        r: WorkerReport,
    ) {
        if self.finished.contains(&worker) {
            return;
        }
        let elapsed_us = self.start.map_or(0, |s| {
            Instant::now().saturating_duration_since(s).as_micros() as u64
        });
        match self.audit.check(worker, &r, elapsed_us) {
            Ok(()) => {
                let (details, stall_max_us) = match &r.measured {
                    Ok(m) => (
                        m.details_jsonl.clone(),
                        m.health
                            .as_ref()
                            .map(|h| h.stalls.histogram(Metric::RuntimeStall).max()),
                    ),
                    Err(_) => (bytes::Bytes::new(), None),
                };
                match agg.add(worker, r) {
                    Ok(()) => out.report(&Report {
                        worker,
                        details: &details,
                        stall_max_us,
                    }),
                    // checked already: a report that decoded cannot fail to merge
                    Err(e) => {
                        tracing::error!(worker, error = %e, "a checked report did not merge")
                    }
                }
            }
            Err(refusal) => {
                let why = format!("a report failed a check: {refusal}");
                self.lose(fleet, agg, worker, why);
            }
        }
    }

    /// The worker finished the step. Short of its planned share (said so,
    /// or left on a signal of its own host), it ended early: its share is
    /// lost unless the whole run was stopped. Requests it says came due
    /// before the time limit and were not sent by then are part of its
    /// share, ended as planned (counted, not lost), if they fit it.
    fn done(
        &mut self,
        fleet: &mut Fleet,
        agg: &mut Aggregate,
        worker: u32,
        stopped_by: Option<String>,
        not_sent_at_end: u64,
    ) {
        if let Err(refusal) = self.audit.ended_at_limit(worker, not_sent_at_end) {
            let why = format!("its Done failed a check: {refusal}");
            self.lose(fleet, agg, worker, why);
            return;
        }
        self.finished.insert(worker);
        agg.retire(worker);
        if let Some(cap) = &mut self.cap {
            self.admits.extend(cap.gone(worker));
        }
        let planned = self.audit.planned(worker);
        let accounted = self.audit.reported(worker) + self.audit.not_sent_at_end(worker);
        let short = planned > 0 && accounted < planned;
        if short || stopped_by.is_some() {
            let reason = match stopped_by {
                Some(by) => format!("ended its share early: stopped by {by}"),
                None => "ended its share early".to_string(),
            };
            self.early.push(EarlyEnd { worker, reason });
        }
    }

    /// A cap message's verdict: admits to pass on, or a refusal that loses the worker.
    fn on_cap(
        &mut self,
        fleet: &mut Fleet,
        agg: &mut Aggregate,
        worker: u32,
        verdict: Option<Result<Vec<Admit>, crate::cap::CapViolation>>,
    ) {
        match verdict {
            Some(Ok(admits)) => self.admits.extend(admits),
            Some(Err(v)) => self.lose(
                fleet,
                agg,
                worker,
                format!("a cap message failed a check: {v}"),
            ),
            // no shared cap in this step: such messages mean nothing
            None => {}
        }
    }

    /// Once a second: workers silent too long, or not stopped in time, are lost.
    fn on_tick(&mut self, fleet: &mut Fleet, agg: &mut Aggregate) {
        let now = Instant::now();
        let silence = fleet.options.heartbeat_timeout;
        let silent: Vec<u32> = fleet
            .active()
            .filter(|(i, m)| {
                self.all.contains(i)
                    && !self.finished.contains(i)
                    && now.saturating_duration_since(m.last_seen) > silence
            })
            .map(|(i, _)| i)
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

    /// Once the latest intervals show the server saturated: say so, and
    /// stop the step if the scenario asks (what it sent so far stays counted).
    fn judge_saturation(&mut self, fleet: &mut Fleet, agg: &Aggregate) {
        let Some(w) = &self.saturation else {
            return;
        };
        if self.end.saturated.is_some() || self.stopped_early() {
            return;
        }
        let Some(reason) = saturation::judge(&agg.rows, w.target, w.from_us, w.interval_s, &w.spec)
        else {
            return;
        };
        let stopped = w.spec.stop;
        if stopped {
            tracing::warn!(%reason, "stopping the step early; the results so far are kept");
            fleet.stop_step(self.step, format!("coordinator stopped the step: {reason}"));
            self.stop_deadline = Some(Instant::now() + STOP_GRACE);
        } else {
            tracing::warn!(%reason, "the server cannot keep up");
        }
        self.end.saturated = Some(Saturated {
            reason,
            at_s: self.since_start(),
            stopped,
        });
    }

    /// Once an `[abort]` threshold trips on the merged intervals: stop the
    /// step as saturation's stop does (what it sent so far stays counted).
    fn judge_abort(&mut self, fleet: &mut Fleet, agg: &mut Aggregate) {
        let Some(mut tripped) = agg.take_aborted() else {
            return;
        };
        if self.stopped_early() {
            return;
        }
        tripped.at_s = self.since_start();
        let reason = tripped.reason();
        tracing::warn!(%reason, "an abort threshold tripped: stopping the step; the results so far are kept");
        fleet.stop_step(self.step, format!("coordinator stopped the step: {reason}"));
        self.stop_deadline = Some(Instant::now() + STOP_GRACE);
        self.end.aborted = Some(tripped);
    }

    /// The step was told to stop before its end: a signal, a saturated
    /// server (with `stop`) or an abort threshold.
    fn stopped_early(&self) -> bool {
        self.end.interrupted.is_some()
            || self.end.aborted.is_some()
            || self.end.saturated.as_ref().is_some_and(|s| s.stopped)
    }

    /// Members the fleet let go of for not reading their stream are lost.
    pub(super) fn lose_unreadable(&mut self, fleet: &mut Fleet, agg: &mut Aggregate) {
        for (worker, why) in fleet.take_unreadable() {
            if self.all.contains(&worker) && !self.finished.contains(&worker) {
                self.lose(fleet, agg, worker, why);
            }
        }
    }

    /// Lose `worker`: the fleet lets go of it, its reports so far stay
    /// counted, everything it held in the cap counts as ended.
    pub(super) fn lose(
        &mut self,
        fleet: &mut Fleet,
        agg: &mut Aggregate,
        worker: u32,
        reason: String,
    ) {
        if self.finished.contains(&worker) {
            return;
        }
        let host = fleet
            .members()
            .get(&worker)
            .map(|m| m.host.clone())
            .unwrap_or_default();
        let at_s = self.since_start();
        self.lost(worker, host, at_s, reason);
        fleet.let_go(worker);
        agg.retire(worker);
        self.finished.insert(worker);
        if let Some(cap) = &mut self.cap {
            self.admits.extend(cap.gone(worker));
        }
    }

    /// Book `worker` as lost `at_s` into the step, with what it was to do
    /// and what it reported.
    fn lost(&mut self, worker: u32, host: String, at_s: f64, reason: String) {
        tracing::warn!(worker, %host, %reason, "lost a worker");
        let (planned_sessions, started_sessions) = self.audit.sessions(worker);
        self.end.lost.push(LostWorker {
            index: worker,
            host,
            at_s,
            reason,
            planned: self.audit.planned(worker),
            reported: self.audit.reported(worker),
            planned_sessions,
            started_sessions,
        });
    }

    /// Seconds since the start barrier (0 before it).
    fn since_start(&self) -> f64 {
        self.start.map_or(0.0, |s| {
            Instant::now().saturating_duration_since(s).as_secs_f64()
        })
    }

    /// The step's end: last intervals flushed, early ends judged, every
    /// worker's share.
    pub(super) fn finish(
        mut self,
        fleet: &mut Fleet,
        agg: &mut Aggregate,
        out: &mut dyn Sink,
    ) -> StepEnd {
        agg.flush(true);
        agg.hand_over(out);
        let total = agg.total();
        out.merge_closed(&agg.tick(self.elapsed(), &total));
        self.end.elapsed_s = self.since_start();
        if !self.stopped_early() {
            for e in std::mem::take(&mut self.early) {
                let host = fleet
                    .members()
                    .get(&e.worker)
                    .map(|m| m.host.clone())
                    .unwrap_or_default();
                self.lost(e.worker, host, self.end.elapsed_s, e.reason);
                // its stripe of the next step would go unserved
                fleet.let_go(e.worker);
            }
        }
        self.end.workers = fleet
            .members()
            .iter()
            .filter(|(i, _)| self.all.contains(i))
            .map(|(i, m)| WorkerShare {
                index: *i,
                host: m.host.clone(),
                planned: self.audit.planned(*i),
                reported: self.audit.reported(*i),
                not_sent_at_end: self.audit.not_sent_at_end(*i),
                lost: self.end.lost.iter().any(|l| l.index == *i),
                threads: m.threads,
                version: m.version.clone(),
                clock: self.clocks.get(i).copied(),
                start_basis: self.bases.get(i).copied(),
            })
            .collect();
        self.end
    }
}

/// The next change or reset from the web UI (never, without it).
async fn next_control(helm: &mut Option<&mut Helm<'_>>) -> Control {
    match helm {
        Some(h) => h.next().await,
        None => std::future::pending().await,
    }
}

/// Ready `offset` after the barrier at `start` (never, without an offset).
async fn at_offset(start: Instant, offset: Option<Duration>) {
    match offset {
        Some(d) => tokio::time::sleep_until(start + d).await,
        None => std::future::pending().await,
    }
}

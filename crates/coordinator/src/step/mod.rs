//! Running one step of the run (the run itself, or one value of a `[sweep]`)
//! over the fleet: assign the plans, wait until every worker is ready, start
//! them at one barrier, then collect their reports until each is done or lost.
//!
//! One rule for loss, wherever it happens: a worker that goes silent, breaks
//! its stream, fails a check, stops reading, leaves before the start, or ends
//! its share early is **lost**: the fleet lets go of it for the rest of the
//! run, what it reported stays counted, everything it held in the fleet cap
//! counts as ended (`cap`), the survivors run on, and the result is degraded
//! with the lost share stated. The next step of a sweep is planned over the
//! survivors.

mod collect;
mod helm;

use std::collections::BTreeMap;
use std::time::Duration;

use cicada_plan::{Drive, Plan};
use tokio::time::Instant;

use crate::cap::{FleetCap, Share};
use crate::error::{RunError, StepError};
use crate::fleet::{Event, Fleet};
use crate::merge::Aggregate;
use crate::signals::Signals;
use cicada_results::abort::Aborted;
use cicada_results::saturation::Saturated;
use cicada_results::sink::{Barrier, Sink};
pub use cicada_results::{LostWorker, WorkerShare};
use cicada_scenarios::scenario::SaturationSpec;

use collect::Collect;
pub use helm::{Applied, Change, Helm};

/// Delay from Start to the shared start instant: long enough for every worker to receive it.
const START_DELAY: Duration = Duration::from_millis(250);
/// Longest a worker may take to prepare a step.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long stopped workers get to report what they have.
const STOP_GRACE: Duration = Duration::from_secs(3);

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
    /// Targets the workers reach through a proxy, as they said.
    pub proxy_routes: std::collections::BTreeSet<String>,
    /// The server was found saturated (and the step stopped, if asked).
    pub saturated: Option<Saturated>,
    /// An `[abort]` threshold stopped the step.
    pub aborted: Option<Aborted>,
}

/// What over-saturation is judged against in an open loop's step.
#[derive(Debug, Clone)]
pub struct SaturationWatch {
    /// The step's peak target rate, req/s.
    pub target: f64,
    /// Where measuring starts, µs after the barrier (the warm-up's end).
    pub from_us: u64,
    /// The report interval, s.
    pub interval_s: f64,
    pub spec: SaturationSpec,
}

/// What a step runs and where its figures go.
pub struct Step<'a, 'h> {
    /// The step's number (0 without a sweep).
    pub number: u32,
    /// One plan per member of the fleet, by member index; each plan's pool
    /// is let go of once the plan is sent (the coordinator keeps the run's
    /// one pool, not a copy per worker for the whole step).
    pub plans: &'a mut [(u32, Plan)],
    /// The merge of the step's reports.
    pub agg: &'a mut Aggregate,
    /// The run's outputs, handed what the merge finalises.
    pub out: &'a mut dyn Sink,
    /// Called at the start barrier with its instant.
    pub on_start: &'a mut dyn FnMut(Instant),
    /// The web UI's changes of the load, when it is served.
    pub helm: Option<&'a mut Helm<'h>>,
    /// Judge over-saturation as the intervals come (open loops).
    pub saturation: Option<SaturationWatch>,
}

/// Run one step: every member gets its plan, then the barrier, then reports.
pub async fn run_step(
    fleet: &mut Fleet,
    signals: &mut Signals,
    step: Step<'_, '_>,
) -> Result<StepEnd, RunError> {
    // what the plans' pools are read for (a conversation's turns), before
    // the pools go
    let planned: BTreeMap<u32, (u64, u64)> = step
        .plans
        .iter()
        .map(|(m, p)| (*m, (p.planned_requests(), p.planned_sessions())))
        .collect();
    let cap = fleet_cap(step.plans);
    fleet.assign(step.number, step.plans);
    for (_, plan) in step.plans.iter_mut() {
        plan.pool = Vec::new();
    }
    let mut collect = Collect::new(step.number, &planned, cap);
    collect.saturation = step.saturation;
    collect.wait_ready(fleet, signals, step.agg).await?;
    // the barrier: one start instant for every worker
    let barrier = fleet.start_step(step.number, START_DELAY);
    collect.started(barrier.at);
    (step.on_start)(barrier.at);
    collect.end.started_unix = barrier.unix_s;
    step.out.barrier(&Barrier {
        planned: collect.end.planned,
        started_unix: collect.end.started_unix,
    });
    fleet.mark_all_seen();
    collect
        .run(fleet, signals, step.agg, step.out, step.helm)
        .await?;
    Ok(collect.finish(fleet, step.agg, step.out))
}

/// The fleet-wide cap the step's workers share, when more than one does,
/// with each member's part of the global order.
fn fleet_cap(plans: &[(u32, Plan)]) -> Option<FleetCap> {
    let (cap, _) = plans
        .iter()
        .find_map(|(_, p)| p.fleet_cap().filter(|(_, shared)| *shared))?;
    let shares = plans
        .iter()
        .filter_map(|(member, p)| match &p.drive {
            Drive::Open {
                stripe: Some(st), ..
            } => {
                // the cap admits arrivals: a session holds one slot for its life
                let planned = p.planned_arrivals();
                let share = Share {
                    first: u64::from(st.index),
                    every: u64::from(st.count),
                    planned: (planned > 0).then_some(planned),
                };
                Some((*member, share))
            }
            _ => None,
        })
        .collect();
    Some(FleetCap::new(cap, shares))
}

impl Collect {
    /// Wait until every member is ready for the step. A member that leaves
    /// (or says it planned other than the coordinator did) is lost before
    /// the start; one that cannot run the step stops the run.
    async fn wait_ready(
        &mut self,
        fleet: &mut Fleet,
        signals: &mut Signals,
        agg: &mut Aggregate,
    ) -> Result<(), RunError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while self.waiting_for_ready() {
            let ev = tokio::select! {
                ev = fleet.next() => ev,
                () = tokio::time::sleep_until(deadline) => return Err(StepError::NotReady(READY_TIMEOUT).into()),
                signal = signals.next() => return Err(RunError::Interrupted {
                    signal,
                    message: format!("{signal} before the step started: stopped before any request of it was sent"),
                }),
            };
            match ev {
                Some(Event::Ready {
                    worker,
                    step,
                    planned,
                    routes,
                    clock,
                }) if step == self.step => {
                    self.end.proxy_routes.extend(routes);
                    match clock.transpose() {
                        Ok(clock) => self.ready(fleet, agg, worker, planned, clock),
                        Err(why) => {
                            let why = format!("its clock estimate failed a check: {why}");
                            self.lose(fleet, agg, worker, why);
                        }
                    }
                }
                Some(Event::Failed {
                    worker, message, ..
                }) => {
                    return Err(StepError::WorkerFailed { worker, message }.into());
                }
                Some(Event::Left { worker, reason }) => {
                    self.lose(
                        fleet,
                        agg,
                        worker,
                        format!("left before the start: {reason}"),
                    );
                }
                Some(_) => {}
                None => return Err(StepError::ServerStopped.into()),
            }
            self.lose_unreadable(fleet, agg);
        }
        if self.all_lost() {
            return Err(StepError::AllLostBeforeStart.into());
        }
        Ok(())
    }
}

//! The web UI's Edit during a step: each change asked for (`SteerAsk`)
//! is checked, placed a moment ahead of now on the step's clock (so every
//! worker receives it before it is due), sent to every worker with the
//! users it runs from then on (user `u` on the worker at position
//! `u mod N`, as planned) or the open loop's new rate (each worker derives
//! the same global schedule a `[[stages]]` boundary there would give, and
//! keeps its stripe of it) and/or its new fleet cap (every side switches at
//! the instant), and kept as a stage boundary: the step's windows
//! split there, and its results get one per window. A reset
//! (`POST /stats/reset`) starts the step's figures again.

use std::time::Duration;

use cicada_plan::schedule::ScheduleSpec;
use cicada_plan::{self as plan, Drive, Plan, StageWindow, Steer};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::fleet::Fleet;
use crate::merge::Aggregate;
use cicada_web::state::SteeredLoad;
use cicada_web::{Control, Edit, Feed, Refusal, ResetAsk, SteerAsk};

/// How far ahead of now a change takes effect, at least (every worker hears
/// of it first); it is placed on the next 100 ms edge after that.
const LEAD: Duration = Duration::from_millis(500);

/// A change that was applied: the window it starts and the load in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Index of the window it starts.
    pub window: usize,
    /// Users across the fleet in it (a closed loop's change).
    pub users: Option<u32>,
    /// Spawn rate of the users it added.
    pub spawn_rate: Option<f64>,
    /// An open loop's mean rate in it, requests/s (infinite: unpaced).
    pub rate: Option<f64>,
    /// An open loop's fleet-wide cap in it, when the change set one.
    pub max_concurrency: Option<u32>,
}

/// What an applied change means for the step's bookkeeping.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Applied {
    /// An open loop's rate changed: no worker's share has a count any more.
    pub open_ended: bool,
    /// The fleet cap changes to this at this instant after the barrier.
    pub cap: Option<(Duration, u32)>,
}

/// What kind of load the step runs, for what a change may ask.
enum Kind {
    /// Users can change.
    Closed,
    /// The rate can change: the schedule as the changes left it, and the fleet cap.
    Open {
        schedule: Box<ScheduleSpec>,
        cap: Option<u32>,
    },
    /// Nothing can change, for this reason.
    Fixed(&'static str),
}

/// One step's steering: where changes come from and what they did.
pub struct Helm<'a> {
    asks: &'a mut mpsc::Receiver<Control>,
    feed: Option<&'a Feed>,
    step: u32,
    /// Member index and its position among the plans (its users are `u mod N == position`).
    positions: Vec<(u32, u32)>,
    /// What may change.
    kind: Kind,
    run_end: Option<Duration>,
    /// The step's windows as the changes left them.
    pub windows: Vec<StageWindow>,
    /// The changes made, in order.
    pub changes: Vec<Change>,
}

impl<'a> Helm<'a> {
    /// Steering for the step planned as `plans`.
    pub fn new(
        asks: &'a mut mpsc::Receiver<Control>,
        feed: Option<&'a Feed>,
        step: u32,
        plans: &[(u32, Plan)],
    ) -> Self {
        let first = plans.first().map(|(_, p)| p);
        let kind = first.map_or(Kind::Fixed("no step runs"), |p| kind_of(p, plans));
        Self {
            asks,
            feed,
            step,
            positions: plans
                .iter()
                .enumerate()
                .map(|(i, (m, _))| (*m, i as u32))
                .collect(),
            kind,
            run_end: first.and_then(Plan::duration),
            windows: first.map(|p| p.stages.clone()).unwrap_or_default(),
            changes: Vec::new(),
        }
    }

    /// The next change or reset asked for (pending for ever once nobody can ask).
    pub async fn next(&mut self) -> Control {
        match self.asks.recv().await {
            Some(a) => a,
            None => std::future::pending().await,
        }
    }

    /// The workers' clock offsets (ms) as measured for the step, for the workers tab.
    pub fn clocks(&self, offsets: impl IntoIterator<Item = (u32, f64)>) {
        if let Some(feed) = self.feed {
            feed.clocks(offsets);
        }
    }

    /// Locust's reset of the step whose barrier was at `start`: its figures
    /// start again at the next interval boundary.
    pub fn reset(&mut self, ask: ResetAsk, agg: &mut Aggregate, start: Instant) {
        let from_us = agg.reset(Instant::now().saturating_duration_since(start));
        let from = Duration::from_micros(from_us);
        if let Some(feed) = self.feed {
            feed.reset(from);
        }
        tracing::info!(from = ?from, "the figures start again (POST /stats/reset)");
        ask.answer(Ok(format!(
            "the figures start again from {:.1} s into the step",
            from.as_secs_f64()
        )));
    }

    /// Apply `ask` to the step whose barrier was at `start`, or say why
    /// not (nothing applied).
    pub fn apply(&mut self, ask: SteerAsk, fleet: &mut Fleet, start: Instant) -> Applied {
        // on a concurrency slice's edge, so the stages on either side split
        // the in-flight time exactly (and the answer names the instant exactly)
        let ahead = Instant::now().saturating_duration_since(start) + LEAD;
        let slice = cicada_metrics::SLICE_US;
        let at = Duration::from_micros((ahead.as_micros() as u64 / slice + 1) * slice);
        if self.run_end.is_some_and(|end| at >= end) {
            ask.answer(Err("the run ends before a change could take effect".into()));
            return Applied::default();
        }
        let name = format!("edit-{}", self.changes.len() + 1);
        let checked = match (&mut self.kind, ask.edit) {
            (Kind::Fixed(why), _) => Err(Refusal(why.to_string())),
            (Kind::Closed, Edit::Users { users, spawn_rate }) => Ok(Change {
                window: 0,
                users: Some(users),
                spawn_rate,
                rate: None,
                max_concurrency: None,
            }),
            (Kind::Closed, Edit::Open { .. }) => {
                Err("rate: this run is a closed loop; change its user_count".into())
            }
            (Kind::Open { .. }, Edit::Users { .. }) => {
                Err("user_count: this run is an open loop; change its rate".into())
            }
            (
                Kind::Open { schedule, cap },
                Edit::Open {
                    rate,
                    max_concurrency,
                },
            ) => open_change(schedule, cap, at, rate, max_concurrency),
        };
        let mut change = match checked {
            Ok(c) => c,
            Err(why) => {
                ask.answer(Err(why));
                return Applied::default();
            }
        };
        self.send(fleet, at, &name, &change);
        plan::steer_windows(&mut self.windows, at, &name, self.run_end);
        change.window = self.windows.len() - 1;
        if let Some(feed) = self.feed {
            let load = SteeredLoad {
                users: change.users,
                spawn_rate: change.spawn_rate,
                rate: change.rate,
                max_concurrency: change.max_concurrency,
            };
            feed.steered(at, &name, load);
        }
        tracing::info!(users = ?change.users, rate = ?change.rate, max_concurrency = ?change.max_concurrency, at = ?at, "the load changes ({name})");
        ask.answer(Ok(format!(
            "{} from {:.3} s into the step (stage {name})",
            change.in_words(),
            at.as_secs_f64()
        )));
        let applied = Applied {
            open_ended: change.rate.is_some(),
            cap: change.max_concurrency.map(|c| (at, c)),
        };
        self.changes.push(change);
        applied
    }

    /// Tell every active worker of `change` from `at`.
    fn send(&self, fleet: &mut Fleet, at: Duration, name: &str, change: &Change) {
        let workers = self.positions.len().max(1) as u32;
        let active: Vec<u32> = fleet.active().map(|(i, _)| i).collect();
        let users = change.users.unwrap_or(0);
        for (member, position) in &self.positions {
            if !active.contains(member) {
                continue;
            }
            let steer = Steer {
                step: self.step,
                at,
                name: name.to_string(),
                users,
                spawn_rate: change.spawn_rate,
                mine: (0..users).filter(|u| u % workers == *position).collect(),
                rate: change.rate,
                max_concurrency: change.max_concurrency,
            };
            fleet.steer(*member, &steer);
        }
    }
}

/// What a step planned as `plans` (`first` among them) lets change.
fn kind_of(first: &Plan, plans: &[(u32, Plan)]) -> Kind {
    match (&first.drive, first.conversations.is_some()) {
        (Drive::Closed(cl), false) if cl.requests.is_none() => Kind::Closed,
        (Drive::Closed(_), false) => {
            Kind::Fixed("a count-bound closed loop cannot change while it runs (set load.duration)")
        }
        (_, true) => Kind::Fixed("conversations cannot change while they run"),
        (Drive::Open { schedule, .. }, false) if schedule.requests.is_some() => Kind::Fixed(
            "a count-bound open loop cannot change its rate while it runs (set load.duration)",
        ),
        (Drive::Open { schedule, .. }, false) => Kind::Open {
            schedule: Box::new(schedule.clone()),
            cap: plans
                .iter()
                .filter_map(|(_, p)| match &p.drive {
                    Drive::Open { fleet_slots, .. } => *fleet_slots,
                    Drive::Closed(_) => None,
                })
                .max(),
        },
    }
}

/// An open loop's change of rate and/or fleet cap at `at`, checked as
/// every worker will apply it (`schedule` and `cap` become the changed ones).
fn open_change(
    schedule: &mut ScheduleSpec,
    cap: &mut Option<u32>,
    at: Duration,
    rate: Option<f64>,
    max_concurrency: Option<u32>,
) -> Result<Change, Refusal> {
    if max_concurrency.is_some() && cap.is_none() {
        return Err(
            "max_concurrency: this run started without a cap, and a cap can only \
                    change while it runs, not be added (set load.max_concurrency)"
                .into(),
        );
    }
    // the page's form posts both: a figure the same as the running one is no change
    let max_concurrency = max_concurrency.filter(|c| Some(*c) != *cap);
    let rate = rate.filter(|r| Some(*r) != rate_at(schedule, at));
    if rate.is_none() && max_concurrency.is_none() {
        return Err(
            "rate: a change of an open loop needs a new rate or a new max_concurrency".into(),
        );
    }
    if rate.is_some_and(f64::is_infinite) && cap.is_none() {
        return Err("rate: inf needs max_concurrency (otherwise it is an unbounded burst)".into());
    }
    let next = match rate {
        Some(rate) => Some(schedule.steered(at, rate).ok_or_else(|| {
            if schedule.ramp.is_some() || schedule.arrivals_us.is_some() {
                "rate: a ramped or replayed schedule cannot change its rate while it runs"
            } else {
                "rate: the rate is inf now (every request due at once), so it cannot change"
            }
        })?),
        None => None,
    };
    if let Some(next) = next {
        *schedule = next;
    }
    if max_concurrency.is_some() {
        *cap = max_concurrency;
    }
    Ok(Change {
        window: 0,
        users: None,
        spawn_rate: None,
        rate,
        max_concurrency,
    })
}

/// The rate `schedule` runs at `at`, requests/s (infinite: unpaced; `None`:
/// a ramp or a replay, which has no one rate).
fn rate_at(schedule: &ScheduleSpec, at: Duration) -> Option<f64> {
    if schedule.ramp.is_some() || schedule.arrivals_us.is_some() {
        return None;
    }
    let stage = schedule.stages.iter().find(|st| at < st.end);
    match stage.or(schedule.stages.last()) {
        Some(st) => Some(st.rate),
        None => Some(schedule.rate.per_second().unwrap_or(f64::INFINITY)),
    }
}

impl Change {
    /// The load from the change on, as its answer says it.
    fn in_words(&self) -> String {
        let rate = match self.rate {
            Some(r) if r.is_finite() => Some(format!("{r} requests/s")),
            Some(_) => Some("an unpaced rate".to_string()),
            None => None,
        };
        let cap = self
            .max_concurrency
            .map(|c| format!("at most {c} in flight"));
        match (self.users, rate, cap) {
            (Some(u), _, _) => format!("{u} users"),
            (None, Some(r), Some(c)) => format!("{r}, {c}"),
            (None, Some(r), None) => r,
            (None, None, Some(c)) => c,
            (None, None, None) => "no change".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_plan::units::Rate;

    fn spec(rate: Rate) -> ScheduleSpec {
        ScheduleSpec {
            seed: 1,
            rate,
            burstiness: 1.0,
            requests: None,
            duration: Some(Duration::from_secs(60)),
            pool_size: 4,
            ramp: None,
            stages: Vec::new(),
            arrivals_us: None,
        }
    }

    #[test]
    fn the_form_reposting_the_running_rate_changes_only_the_cap() {
        let at = Duration::from_secs(10);
        // an unpaced run held by its cap: the page posts rate=inf with the new cap
        let mut s = spec(Rate::Infinite);
        let mut cap = Some(4);
        let c = open_change(&mut s, &mut cap, at, Some(f64::INFINITY), Some(9)).unwrap();
        assert_eq!((c.rate, c.max_concurrency, cap), (None, Some(9), Some(9)));
        assert_eq!(c.in_words(), "at most 9 in flight");
        assert!(open_change(&mut s, &mut cap, at, Some(f64::INFINITY), Some(9)).is_err());
        // a paced one: the rate too, once
        let mut s = spec(Rate::Finite(20.0));
        let c = open_change(&mut s, &mut cap, at, Some(50.0), Some(9)).unwrap();
        assert_eq!((c.rate, c.max_concurrency), (Some(50.0), None));
        let later = Duration::from_secs(20);
        assert_eq!(rate_at(&s, later), Some(50.0));
        let c = open_change(&mut s, &mut cap, later, Some(50.0), Some(3)).unwrap();
        assert_eq!(c.in_words(), "at most 3 in flight");
        // a cap is not added to a run without one
        let why = open_change(&mut s, &mut None, later, None, Some(3)).unwrap_err();
        assert!(why.0.contains("started without a cap"), "{why}");
    }
}

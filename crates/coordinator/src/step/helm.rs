//! The web UI's Edit during a step: each change asked for (`SteerAsk`)
//! is checked, placed a moment ahead of now on the step's clock (so every
//! worker receives it before it is due), sent to every worker with the
//! users it runs from then on (user `u` on the worker at position
//! `u mod N`, as planned) or the open loop's new rate (each worker derives
//! the same global schedule a `[[stages]]` boundary there would give, and
//! keeps its stripe of it), and kept as a stage boundary: the step's windows
//! split there, and its results get one per window. A reset
//! (`POST /stats/reset`) starts the step's figures again.

use std::time::Duration;

use cicada_scenarios::plan::{self, Drive, Plan, StageWindow, Steer};
use cicada_scenarios::schedule::ScheduleSpec;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::fleet::Fleet;
use crate::merge::Aggregate;
use crate::web::state::SteeredLoad;
use crate::web::{Control, Edit, Feed, ResetAsk, SteerAsk};

/// How far ahead of now a change takes effect: every worker hears of it first.
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
    /// not; true when it changed an open loop's rate (whose shares are open-ended from then on).
    pub fn apply(&mut self, ask: SteerAsk, fleet: &mut Fleet, start: Instant) -> bool {
        // a whole millisecond, so the answer names the instant exactly
        let ahead = Instant::now().saturating_duration_since(start) + LEAD;
        let at = Duration::from_millis(ahead.as_millis() as u64 + 1);
        if self.run_end.is_some_and(|end| at >= end) {
            ask.answer(Err("the run ends before a change could take effect".into()));
            return false;
        }
        let name = format!("edit-{}", self.changes.len() + 1);
        let checked = match (&mut self.kind, ask.edit) {
            (Kind::Fixed(why), _) => Err(why.to_string()),
            (Kind::Closed, Edit::Users { users, spawn_rate }) => Ok(Change {
                window: 0,
                users: Some(users),
                spawn_rate,
                rate: None,
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
            ) => open_change(schedule, *cap, at, rate, max_concurrency),
        };
        let mut change = match checked {
            Ok(c) => c,
            Err(why) => {
                ask.answer(Err(why));
                return false;
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
            };
            feed.steered(at, &name, load);
        }
        tracing::info!(users = ?change.users, rate = ?change.rate, at = ?at, "the load changes ({name})");
        let load = match (change.users, change.rate) {
            (Some(u), _) => format!("{u} users"),
            (None, Some(r)) if r.is_finite() => format!("{r} requests/s"),
            _ => "an unpaced rate".to_string(),
        };
        ask.answer(Ok(format!(
            "{load} from {:.3} s into the step (stage {name})",
            at.as_secs_f64()
        )));
        let open = change.rate.is_some();
        self.changes.push(change);
        open
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
                max_concurrency: None,
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

/// An open loop's change of rate at `at`, checked as every worker will
/// apply it (`schedule` becomes the changed one).
fn open_change(
    schedule: &mut ScheduleSpec,
    cap: Option<u32>,
    at: Duration,
    rate: Option<f64>,
    max_concurrency: Option<u32>,
) -> Result<Change, String> {
    if let Some(c) = max_concurrency.filter(|c| Some(*c) != cap) {
        return Err(format!(
            "max_concurrency: the cap ({}) cannot change while the run goes; \
             asked for {c}",
            cap.map_or("none".to_string(), |c| c.to_string())
        ));
    }
    let Some(rate) = rate else {
        return Err("rate: a change of an open loop needs it".into());
    };
    if rate.is_infinite() && cap.is_none() {
        return Err("rate: inf needs max_concurrency (otherwise it is an unbounded burst)".into());
    }
    let Some(next) = schedule.steered(at, rate) else {
        let why = if schedule.ramp.is_some() || schedule.arrivals_us.is_some() {
            "rate: a ramped or replayed schedule cannot change its rate while it runs"
        } else {
            "rate: the rate is inf now (every request due at once), so it cannot change"
        };
        return Err(why.into());
    };
    *schedule = next;
    Ok(Change {
        window: 0,
        users: None,
        spawn_rate: None,
        rate: Some(rate),
    })
}

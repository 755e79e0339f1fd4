//! The web UI's Edit during a step: each change asked for (`SteerAsk`)
//! is checked, placed a moment ahead of now on the step's clock (so every
//! worker receives it before it is due), sent to every worker with the
//! users it runs from then on (user `u` on the worker at position
//! `u mod N`, as planned), and kept as a stage boundary: the step's windows
//! split there, and its results get one per window. A reset
//! (`POST /stats/reset`) starts the step's figures again.

use std::time::Duration;

use cicada_scenarios::plan::{self, Drive, Plan, StageWindow, Steer};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::fleet::Fleet;
use crate::merge::Aggregate;
use crate::web::{Control, Feed, ResetAsk, SteerAsk};

/// How far ahead of now a change takes effect: every worker hears of it first.
const LEAD: Duration = Duration::from_millis(500);

/// A change that was applied: the window it starts and the load in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Index of the window it starts.
    pub window: usize,
    /// Users across the fleet in it.
    pub users: u32,
    /// Spawn rate of the users it added.
    pub spawn_rate: Option<f64>,
}

/// One step's steering: where changes come from and what they did.
pub struct Helm<'a> {
    asks: &'a mut mpsc::Receiver<Control>,
    feed: Option<&'a Feed>,
    step: u32,
    /// Member index and its position among the plans (its users are `u mod N == position`).
    positions: Vec<(u32, u32)>,
    /// Why the step cannot change, if it cannot.
    fixed: Option<&'static str>,
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
        let fixed = match first.map(|p| (&p.drive, p.conversations.is_some())) {
            Some((Drive::Closed(cl), false)) if cl.requests.is_none() => None,
            Some((Drive::Closed(_), false)) => {
                Some("a count-bound closed loop cannot change while it runs (set load.duration)")
            }
            Some((Drive::Closed(_), true)) => Some("conversations cannot change while they run"),
            _ => Some(
                "only a closed loop's users can change while it runs (an open loop's rate cannot yet)",
            ),
        };
        Self {
            asks,
            feed,
            step,
            positions: plans
                .iter()
                .enumerate()
                .map(|(i, (m, _))| (*m, i as u32))
                .collect(),
            fixed,
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

    /// Apply `ask` to the step whose barrier was at `start`, or say why not.
    pub fn apply(&mut self, ask: SteerAsk, fleet: &mut Fleet, start: Instant) {
        if let Some(why) = self.fixed {
            return ask.answer(Err(why.to_string()));
        }
        let at = Instant::now().saturating_duration_since(start) + LEAD;
        if self.run_end.is_some_and(|end| at >= end) {
            return ask.answer(Err("the run ends before a change could take effect".into()));
        }
        let name = format!("edit-{}", self.changes.len() + 1);
        let workers = self.positions.len().max(1) as u32;
        let active: Vec<u32> = fleet.active().map(|(i, _)| i).collect();
        for (member, position) in &self.positions {
            if !active.contains(member) {
                continue;
            }
            let steer = Steer {
                step: self.step,
                at,
                name: name.clone(),
                users: ask.users,
                spawn_rate: ask.spawn_rate,
                mine: (0..ask.users)
                    .filter(|u| u % workers == *position)
                    .collect(),
            };
            fleet.steer(*member, &steer);
        }
        plan::steer_windows(&mut self.windows, at, &name, self.run_end);
        self.changes.push(Change {
            window: self.windows.len() - 1,
            users: ask.users,
            spawn_rate: ask.spawn_rate,
        });
        if let Some(feed) = self.feed {
            feed.steered(at, &name, ask.users, ask.spawn_rate);
        }
        tracing::info!(users = ask.users, at = ?at, "the load changes ({name})");
        let message = format!(
            "{} users from {:.1} s into the step (stage {name})",
            ask.users,
            at.as_secs_f64()
        );
        ask.answer(Ok(message));
    }
}

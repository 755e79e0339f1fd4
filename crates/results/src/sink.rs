//! The end of a run's pipeline: what the merge produces, handed as typed
//! events to every output in turn (the console, the result files, live
//! `/metrics`, the web board), as ripgrep's searcher hands matches to a
//! `Sink`. The merge keeps only merged numbers; outputs keep their own state.
//!
//! Events come in this order, per step: [`Sink::step_began`],
//! [`Sink::barrier`], then [`Sink::report`], [`Sink::interval`],
//! [`Sink::tick`] and [`Sink::load_changed`] as they happen,
//! [`Sink::merge_closed`], [`Sink::step_finished`]; once at the end,
//! [`Sink::run_finished`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use cicada_metrics::{MetricSet, Scope};

use crate::RunResult;
use crate::client_health::WorkerUsage;
use crate::error::WriteError;
use crate::interval::IntervalRow;
use crate::stages::Search;

/// A step is about to start.
#[derive(Debug, Clone, Copy)]
pub struct StepBegan<'a> {
    /// The step's result with nothing measured yet (its number, name,
    /// scenario and the run's context).
    pub result: &'a RunResult,
    /// The run is a sweep of steps.
    pub sweep: bool,
    /// The fleet's members (index, host).
    pub workers: &'a [(u32, String)],
    /// Time-bound steps: how long sending lasts.
    pub duration: Option<Duration>,
}

/// The step's start barrier passed.
#[derive(Debug, Clone, Copy)]
pub struct Barrier {
    /// Requests planned over the fleet (0: open-ended).
    pub planned: u64,
    /// Its wall-clock time, Unix seconds.
    pub started_unix: f64,
}

/// A worker's report was merged.
#[derive(Debug, Clone, Copy)]
pub struct Report<'a> {
    pub worker: u32,
    /// Per-request lines it carried (JSONL; empty without `save_detailed`).
    pub details: &'a [u8],
    /// Its longest runtime stall in the report, µs (none: no health in it).
    pub stall_max_us: Option<u64>,
}

/// An interval is final: every live worker reported past it.
#[derive(Debug, Clone, Copy)]
pub struct IntervalMerged<'a> {
    /// Its figures, in display units.
    pub row: &'a IntervalRow,
    /// The fleet's merged measurements of it (no warm-up).
    pub set: &'a MetricSet,
}

/// Shares of the merge so far, by scope (target, model, stage, warm-up).
pub trait Shares {
    /// Every scope matching `keep`, merged.
    fn merged(&self, keep: &dyn Fn(&Scope) -> bool) -> MetricSet;
}

/// The step so far, about once a second (and once more when its merge closes).
#[derive(Clone, Copy)]
pub struct Tick<'a> {
    /// Since the start barrier.
    pub elapsed: Duration,
    /// Everything measured in the step so far (every target, no warm-up).
    pub total: &'a MetricSet,
    /// The finished intervals, in order.
    pub rows: &'a [IntervalRow],
    /// Requests in flight now, by each worker's latest report or heartbeat.
    pub in_flight: u64,
    /// The same, per live worker.
    pub in_flight_by_worker: &'a BTreeMap<u32, u64>,
    /// Each worker's own resource use, cumulative.
    pub usage: &'a BTreeMap<u32, WorkerUsage>,
    /// The workers' runtime stalls, cumulative.
    pub health: &'a MetricSet,
    /// Any other share of the merge.
    pub shares: &'a dyn Shares,
}

impl std::fmt::Debug for Tick<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tick")
            .field("elapsed", &self.elapsed)
            .field("rows", &self.rows.len())
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

/// A step is finished and its results are built.
#[derive(Debug, Clone, Copy)]
pub struct StepFinished<'a> {
    /// The step's results: the whole step first, then its `[[stages]]` windows.
    pub results: &'a [RunResult],
    /// Earlier steps' whole results.
    pub earlier: &'a [RunResult],
    /// Earlier `[[stages]]` windows (a run without sweep has only its own).
    pub earlier_stages: &'a [RunResult],
    pub sweep: bool,
    pub search: Option<Search>,
}

/// The run is over (its last step finished or was cut short).
#[derive(Debug, Clone, Copy)]
pub struct RunFinished<'a> {
    /// Every step's whole result.
    pub steps: &'a [RunResult],
    /// Every `[[stages]]` window's result.
    pub stages: &'a [RunResult],
    pub sweep: bool,
    pub search: Option<Search>,
}

/// An output of the run. Every event has a default that ignores it.
pub trait Sink: Send {
    /// A step is about to start.
    fn step_began(&mut self, _step: &StepBegan<'_>) {}
    /// The step's start barrier passed.
    fn barrier(&mut self, _barrier: &Barrier) {}
    /// A worker's report was merged.
    fn report(&mut self, _report: &Report<'_>) {}
    /// An interval is final.
    fn interval(&mut self, _interval: &IntervalMerged<'_>) {}
    /// About once a second while the step runs.
    fn tick(&mut self, _tick: &Tick<'_>) {}
    /// The step's load was changed from the web UI; `open_ended` when no
    /// worker's share has a count any more (an open loop's new rate).
    fn load_changed(&mut self, _open_ended: bool) {}
    /// Every worker is done or lost: the step's merge is closed.
    fn merge_closed(&mut self, _tick: &Tick<'_>) {}
    /// The step's results are built; an output that writes files adds them
    /// to `written` (outputs later in line may name them).
    fn step_finished(
        &mut self,
        _step: &StepFinished<'_>,
        _written: &mut Vec<PathBuf>,
    ) -> Result<(), WriteError> {
        Ok(())
    }
    /// The run is over.
    fn run_finished(&mut self, _run: &RunFinished<'_>) {}
}

/// Every output of a run, in the order they hear each event.
#[derive(Default)]
pub struct Sinks {
    sinks: Vec<Box<dyn Sink>>,
}

impl std::fmt::Debug for Sinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sinks")
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl Sinks {
    /// No outputs yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `sink` after the others.
    pub fn push(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push(sink);
    }

    /// Add `sink` before the others.
    pub fn push_front(&mut self, sink: Box<dyn Sink>) {
        self.sinks.insert(0, sink);
    }
}

impl Sink for Sinks {
    fn step_began(&mut self, step: &StepBegan<'_>) {
        self.sinks.iter_mut().for_each(|s| s.step_began(step));
    }
    fn barrier(&mut self, barrier: &Barrier) {
        self.sinks.iter_mut().for_each(|s| s.barrier(barrier));
    }
    fn report(&mut self, report: &Report<'_>) {
        self.sinks.iter_mut().for_each(|s| s.report(report));
    }
    fn interval(&mut self, interval: &IntervalMerged<'_>) {
        self.sinks.iter_mut().for_each(|s| s.interval(interval));
    }
    fn tick(&mut self, tick: &Tick<'_>) {
        self.sinks.iter_mut().for_each(|s| s.tick(tick));
    }
    fn load_changed(&mut self, open_ended: bool) {
        self.sinks
            .iter_mut()
            .for_each(|s| s.load_changed(open_ended));
    }
    fn merge_closed(&mut self, tick: &Tick<'_>) {
        self.sinks.iter_mut().for_each(|s| s.merge_closed(tick));
    }
    /// Stops at the first output that fails (later ones hear nothing).
    fn step_finished(
        &mut self,
        step: &StepFinished<'_>,
        written: &mut Vec<PathBuf>,
    ) -> Result<(), WriteError> {
        for s in &mut self.sinks {
            s.step_finished(step, written)?;
        }
        Ok(())
    }
    fn run_finished(&mut self, run: &RunFinished<'_>) {
        self.sinks.iter_mut().for_each(|s| s.run_finished(run));
    }
}

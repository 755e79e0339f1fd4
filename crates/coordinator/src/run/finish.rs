//! A finished step turned into results: the whole step's, then one per
//! `[[stages]]` window, from the step's merged aggregate, how it ended and
//! what the servers said.

use cicada_metrics::Scope;
use cicada_plan::StageWindow;
use cicada_plan::units::Span;
use cicada_results::interval::IntervalRow;
use cicada_results::server::{ServerView, StepServerViews};
use cicada_results::write::RunContext;
use cicada_results::{RunResult, client_health};
use cicada_scenarios::{Scenario, sharding};
use std::time::Duration;

use crate::merge::Aggregate;
use crate::step::{Change, StepEnd};

/// A finished step, as the run loop knows it.
#[derive(Debug)]
pub struct FinishedStep<'a> {
    /// The step's number (0 without a sweep).
    pub number: u32,
    /// Its name in results ("" without a sweep).
    pub name: String,
    /// The scenario with the step's load applied.
    pub scenario: &'a Scenario,
    /// Its `[[stages]]` windows (empty without stages), as the web UI's
    /// changes split them.
    pub windows: &'a [StageWindow],
    /// The web UI's changes: which windows they started, with what load.
    pub changes: &'a [Change],
    /// How it ended.
    pub end: StepEnd,
    /// Where measuring started, µs after the barrier (the warm-up's end).
    pub warmup_end_us: u64,
    /// The servers' own view, scraped around the step and at each window's
    /// boundaries; it goes with the whole step and each window.
    pub server: StepServerViews,
}

/// What a step's results are measured from: its merge and how it ended.
struct Measure<'a> {
    agg: &'a Aggregate,
    end: &'a StepEnd,
    targets: u32,
    models: u32,
    workloads: u32,
}

impl Measure<'_> {
    /// `place`'s result with its measurements: the scopes `keep` takes,
    /// measured from `window_start_us`, with its interval `rows` and the
    /// servers' view of it.
    fn result(
        &self,
        place: RunResult,
        keep: &dyn Fn(&Scope) -> bool,
        window_start_us: u64,
        rows: Vec<IntervalRow>,
        server: &ServerView,
    ) -> RunResult {
        let (agg, end) = (self.agg, self.end);
        RunResult {
            total: agg.merged(|s| !s.warmup && keep(s)),
            per_target: (0..self.targets)
                .map(|t| agg.merged(|s| !s.warmup && s.target == t && keep(s)))
                .collect(),
            per_model: (0..self.models)
                .map(|m| agg.merged(|s| !s.warmup && s.model == m && keep(s)))
                .collect(),
            per_workload: (0..self.workloads)
                .map(|w| agg.merged(|s| !s.warmup && s.workload == w && keep(s)))
                .collect(),
            warmup: agg.warmup(),
            window_start_us,
            rows,
            lost: end.lost.clone(),
            worker_shares: end.workers.clone(),
            interrupted: end.interrupted,
            proxy_routes: end.proxy_routes.iter().cloned().collect(),
            planned: end.planned,
            started_unix: end.started_unix,
            server: server.clone(),
            ..place
        }
    }
}

/// Results of one step: the whole step first, then one per `[[stages]]` window.
pub fn step_results(
    ctx: &RunContext,
    step: FinishedStep<'_>,
    agg: &mut Aggregate,
) -> Vec<RunResult> {
    let FinishedStep {
        number,
        name,
        scenario,
        windows,
        changes,
        end,
        warmup_end_us,
        server,
    } = step;
    let rows = std::mem::take(&mut agg.rows);
    let steady = agg.take_steady();
    // a reset from the web UI moves where measuring starts
    let warmup_end_us = warmup_end_us.max(agg.measured_from_us());
    let m = Measure {
        agg,
        end: &end,
        targets: ctx.target.urls.len().max(1) as u32,
        models: ctx.target.models.len() as u32,
        workloads: scenario.workloads.len() as u32,
    };
    let place = RunResult::new(ctx, number, name, scenario.clone());
    let mut whole = m.result(place, &|_| true, warmup_end_us, rows, &server.whole);
    whole.client = Some(client_health::assess(
        &agg.health,
        &agg.usage,
        &end.workers,
        &whole.total,
        end.elapsed_s,
        uncapped_open_loop(scenario),
    ));
    whole.steady = steady;
    whole.saturated = end.saturated.clone();
    whole.aborted = end.aborted.clone();
    // after the client's verdict, which judges an uncapped burst's dispatch
    whole.hide_meaningless();
    let mut out = vec![whole];
    let mut load_now = (None, None);
    for (p, w) in windows.iter().enumerate() {
        let start = (w.start.as_micros() as u64).max(warmup_end_us);
        let stage = p as u32;
        let own = window_scenario(scenario, p, w, changes, &mut load_now);
        let place = RunResult::new(ctx, stage + 1, w.name.clone(), own);
        let view = server.windows.get(p).cloned().unwrap_or_default();
        let keep = |s: &Scope| s.stage == stage;
        let mut r = m.result(place, &keep, start, Vec::new(), &view);
        r.hide_meaningless();
        out.push(r);
    }
    out
}

/// An open loop with no cap and no conversations: its lateness is all the
/// client's doing.
fn uncapped_open_loop(scenario: &Scenario) -> bool {
    !sharding::is_closed_loop(scenario)
        && scenario.load.max_concurrency.is_none()
        && !scenario.runs_sessions()
}

/// Window `p`'s scenario: the step's, with the window's own load, as a
/// change from the web UI set it (an open loop's rate and cap hold, in
/// `load_now`, until a later change sets them) or its `[[stages]]` entry.
fn window_scenario(
    scenario: &Scenario,
    p: usize,
    w: &StageWindow,
    changes: &[Change],
    load_now: &mut (Option<f64>, Option<u32>),
) -> Scenario {
    let mut own = scenario.clone();
    let load = &mut own.load;
    if let Some(c) = changes.iter().find(|c| c.window == p) {
        let span = w.end.checked_sub(w.start).filter(|_| w.end < Duration::MAX);
        let (rate_now, cap_now) = load_now;
        (*rate_now, *cap_now) = (c.rate.or(*rate_now), c.max_concurrency.or(*cap_now));
        load.users = c.users.or(load.users);
        load.spawn_rate = c.spawn_rate.or(load.spawn_rate);
        if let Some(rate) = *rate_now {
            load.request_rate = cicada_plan::units::Rate::from_f64(rate);
        }
        load.max_concurrency = cap_now.or(load.max_concurrency);
        load.duration = span.map(Span);
    } else if let Some(spec) = scenario.stages.get(p) {
        if let Some(rate) = spec.request_rate {
            load.request_rate = rate;
        }
        load.users = spec.users.or(load.users);
        load.duration = Some(spec.duration);
    }
    own
}

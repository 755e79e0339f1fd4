//! A finished step turned into results: the whole step's, then one per
//! `[[stages]]` window, from the step's merged aggregate, how it ended and
//! what the servers said.

use cicada_metrics::Scope;
use cicada_plan::StageWindow;
use cicada_plan::units::Span;
use cicada_results::server::{ServerView, StepServerViews};
use cicada_results::write::{RunContext, scenario_hash};
use cicada_results::{RunResult, client_health};
use cicada_scenarios::scenario::DatasetKind;
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

/// A step's result before anything is measured: the web UI fills it in
/// from the merge as the step goes.
pub fn provisional(ctx: &RunContext, number: u32, name: &str, scenario: &Scenario) -> RunResult {
    RunResult {
        scenario: scenario.clone(),
        scenario_origin: ctx.scenario_origin.clone(),
        scenario_hash: scenario_hash(scenario),
        stage: number,
        stage_name: name.to_string(),
        target: ctx.target.clone(),
        workers: ctx.workers,
        total: Default::default(),
        per_target: Vec::new(),
        per_model: Vec::new(),
        warmup: Default::default(),
        window_start_us: 0,
        rows: Vec::new(),
        lost: Vec::new(),
        worker_shares: Vec::new(),
        interrupted: None,
        proxy_routes: Vec::new(),
        planned: 0,
        started_unix: 0.0,
        dataset: ctx.dataset.clone(),
        server: ServerView::default(),
        client: None,
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
    // a reset from the web UI moves where measuring starts
    let warmup_end_us = warmup_end_us.max(agg.measured_from_us());
    let targets = ctx.target.urls.len().max(1) as u32;
    let models = ctx.target.models.len() as u32;
    let make =
        |number: u32, name: String, keep: &dyn Fn(&Scope) -> bool, window: u64, rows: Vec<_>| {
            RunResult {
                scenario: scenario.clone(),
                scenario_origin: ctx.scenario_origin.clone(),
                scenario_hash: scenario_hash(scenario),
                stage: number,
                stage_name: name,
                target: ctx.target.clone(),
                workers: ctx.workers,
                total: agg.merged(|s| !s.warmup && keep(s)),
                per_target: (0..targets)
                    .map(|t| agg.merged(|s| !s.warmup && s.target == t && keep(s)))
                    .collect(),
                per_model: (0..models)
                    .map(|m| agg.merged(|s| !s.warmup && s.model == m && keep(s)))
                    .collect(),
                warmup: agg.warmup(),
                window_start_us: window,
                rows,
                lost: end.lost.clone(),
                worker_shares: end.workers.clone(),
                interrupted: end.interrupted,
                proxy_routes: end.proxy_routes.iter().cloned().collect(),
                planned: end.planned,
                started_unix: end.started_unix,
                dataset: ctx.dataset.clone(),
                server: ServerView::default(),
                client: None,
            }
        };
    let mut whole = make(number, name, &|_| true, warmup_end_us, rows);
    whole.server = server.whole.clone();
    let uncapped_open_loop = !sharding::is_closed_loop(scenario)
        && scenario.load.max_concurrency.is_none()
        && scenario.dataset.kind() != DatasetKind::Conversations;
    whole.client = Some(client_health::assess(
        &agg.health,
        &agg.usage,
        &end.workers,
        &whole.total,
        end.elapsed_s,
        uncapped_open_loop,
    ));
    // after the client's verdict, which judges an uncapped burst's dispatch
    whole.hide_meaningless();
    let mut out = vec![whole];
    let (mut rate_now, mut cap_now) = (None, None);
    for (p, w) in windows.iter().enumerate() {
        let start = (w.start.as_micros() as u64).max(warmup_end_us);
        let stage = p as u32;
        let mut r = make(
            p as u32 + 1,
            w.name.clone(),
            &|s: &Scope| s.stage == stage,
            start,
            Vec::new(),
        );
        // a window's result describes the window's own load
        let span = w.end.checked_sub(w.start).filter(|_| w.end < Duration::MAX);
        if let Some(c) = changes.iter().find(|c| c.window == p) {
            // an open loop's rate and cap hold until a later change sets them
            (rate_now, cap_now) = (c.rate.or(rate_now), c.max_concurrency.or(cap_now));
            r.scenario.load.users = c.users.or(r.scenario.load.users);
            r.scenario.load.spawn_rate = c.spawn_rate.or(r.scenario.load.spawn_rate);
            if let Some(rate) = rate_now {
                r.scenario.load.request_rate = cicada_plan::units::Rate::from_f64(rate);
            }
            r.scenario.load.max_concurrency = cap_now.or(r.scenario.load.max_concurrency);
            r.scenario.load.duration = span.map(Span);
            r.scenario_hash = scenario_hash(&r.scenario);
        } else if let Some(spec) = scenario.stages.get(p) {
            if let Some(rate) = spec.request_rate {
                r.scenario.load.request_rate = rate;
            }
            r.scenario.load.users = spec.users.or(r.scenario.load.users);
            r.scenario.load.duration = Some(spec.duration);
            r.scenario_hash = scenario_hash(&r.scenario);
        }
        if let Some(view) = server.windows.get(p) {
            r.server = view.clone();
        }
        r.hide_meaningless();
        out.push(r);
    }
    out
}

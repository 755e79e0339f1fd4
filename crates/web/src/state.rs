//! What the web UI shows, kept for the whole run: the run's state, the
//! step running (a provisional result refreshed on every tick from the
//! exact merge), the steps already finished, every interval as a chart
//! point since the run began (not a rolling window), and the workers' own
//! figures. The run's outputs write it through a [`BoardSink`], the run
//! loop and the web UI's changes through a [`Feed`]; the server reads it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cicada_metrics::{Metric, MetricSet};
use cicada_results::interval::IntervalRow;
use cicada_results::server::ServerView;
use cicada_results::sink::{Barrier, Report, Sink, StepBegan, StepFinished, Tick};
use cicada_results::{RunResult, client_health};
use cicada_scenarios::{Scenario, sharding};
use tokio::sync::watch;
use tokio::time::Instant;

use super::load::{self, Load, Steering};

/// Where the run is, in Locust's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Waiting for `POST /swarm` (`--web-wait`).
    Ready,
    /// Preparing or sending load.
    Running,
    /// Stop was asked; results are being written.
    Stopping,
    /// Ended; the results are written.
    Stopped,
}

impl RunState {
    /// Locust's name for the state.
    pub fn word(self) -> &'static str {
        match self {
            RunState::Ready => "ready",
            RunState::Running => "running",
            RunState::Stopping => "stopping",
            RunState::Stopped => "stopped",
        }
    }
}

/// One interval of the run, as the charts draw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Seconds since the run's first start barrier, at the interval's end.
    pub t: f64,
    /// The step it belongs to (0 without a sweep).
    pub step: u32,
    /// Successful requests per second.
    pub rps: f64,
    /// Failed requests per second.
    pub fail_s: f64,
    /// Output tokens per second.
    pub tok_s: f64,
    /// Requests in flight at its end.
    pub in_flight: u64,
    /// (metric, p50, p99) in ms of the interval's requests.
    pub latency: Vec<(Metric, f64, f64)>,
}

impl Point {
    fn of(offset_s: f64, step: u32, row: &IntervalRow) -> Self {
        let len = row.length_s.max(f64::MIN_POSITIVE);
        Self {
            t: offset_s + row.start_s + row.length_s,
            step,
            rps: row.ok as f64 / len,
            fail_s: row.failed as f64 / len,
            tok_s: row.output_tokens as f64 / len,
            in_flight: row.in_flight,
            latency: row
                .metrics
                .iter()
                .map(|(m, _, _, p50, _, p99, _)| (*m, *p50, *p99))
                .collect(),
        }
    }
}

/// A stage boundary the charts mark: a change from the page, at `t`
/// seconds since the run's first barrier.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// When, on the charts' time axis.
    pub t: f64,
    /// The stage that starts there.
    pub name: String,
}

/// A worker, as the workers tab shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerView {
    /// Its member index.
    pub index: u32,
    /// The host it said it runs on.
    pub host: String,
    /// Still in the fleet.
    pub active: bool,
    /// Requests in flight by its latest report or heartbeat.
    pub in_flight: u64,
    /// CPU seconds it used in the current step.
    pub cpu_s: f64,
    /// Its peak resident memory, bytes.
    pub rss_bytes: u64,
    /// Its longest runtime stall in the current step, ms.
    pub worst_stall_ms: Option<f64>,
    /// Coordinator clock minus its clock, ms, as it measured at the step's start.
    pub clock_offset_ms: Option<f64>,
    /// Seconds since its latest report.
    pub report_age_s: Option<f64>,
}

/// Everything the UI shows.
#[derive(Debug)]
pub struct Board {
    /// Where the run is.
    pub state: RunState,
    /// The scenario as the command line describes it (the start form's defaults).
    pub scenario: Scenario,
    /// The step running, as far as it got.
    pub current: Option<RunResult>,
    /// Finished steps' whole results.
    pub finished: Vec<RunResult>,
    /// Finished `[[stages]]` windows.
    pub stages: Vec<RunResult>,
    /// The steps are a sweep.
    pub sweep: bool,
    /// Every interval since the run began.
    pub history: Vec<Point>,
    /// Stage boundaries to mark on the charts.
    pub marks: Vec<Mark>,
    /// The changes from the page during the step running (or the last one).
    pub steering: Steering,
    /// Seconds from the run's first barrier to the current step's.
    step_offset_s: f64,
    run_started: Option<Instant>,
    step_started: Option<Instant>,
    /// Requests in flight now.
    pub in_flight: u64,
    /// Seconds since the current step's barrier.
    pub elapsed_s: f64,
    /// The workers.
    pub workers: BTreeMap<u32, WorkerView>,
}

/// The writing side: the run loop and the progress ticker hold one each.
#[derive(Debug, Clone)]
pub struct Feed {
    board: Arc<Mutex<Board>>,
}

impl Feed {
    /// A board for `scenario`, in `state`.
    pub fn new(scenario: Scenario, state: RunState) -> Self {
        Self {
            board: Arc::new(Mutex::new(Board {
                state,
                scenario,
                current: None,
                finished: Vec::new(),
                stages: Vec::new(),
                sweep: false,
                history: Vec::new(),
                marks: Vec::new(),
                steering: Steering::default(),
                step_offset_s: 0.0,
                run_started: None,
                step_started: None,
                in_flight: 0,
                elapsed_s: 0.0,
                workers: BTreeMap::new(),
            })),
        }
    }

    /// The board, for reading or writing (a poisoned lock still holds figures).
    pub fn lock(&self) -> MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Set the run's state.
    pub fn set_state(&self, state: RunState) {
        self.lock().state = state;
    }

    /// The run's scenario changed (the start form was sent).
    pub fn set_scenario(&self, scenario: Scenario) {
        self.lock().scenario = scenario;
    }

    /// A step is about to start: `provisional` is its result with nothing
    /// measured yet; `workers` its members and hosts.
    pub fn step_began(&self, provisional: RunResult, sweep: bool, workers: &[(u32, String)]) {
        {
            let mut b = self.lock();
            b.state = RunState::Running;
            b.sweep = sweep;
            b.current = Some(provisional);
            b.steering = Steering::default();
        }
        self.roster(workers);
    }

    /// The fleet's members (index, host); the others are gone.
    pub fn roster(&self, workers: &[(u32, String)]) {
        let mut b = self.lock();
        for w in b.workers.values_mut() {
            w.active = false;
        }
        for (index, host) in workers {
            let w = b.workers.entry(*index).or_default();
            w.index = *index;
            w.host = host.clone();
            w.active = true;
        }
    }

    /// The step's start barrier passed.
    pub fn barrier(&self, started_unix: f64) {
        let mut b = self.lock();
        let now = Instant::now();
        let first_step = b.run_started.is_none();
        let run_started = *b.run_started.get_or_insert(now);
        b.step_offset_s = now.saturating_duration_since(run_started).as_secs_f64();
        b.step_started = Some(now);
        if let Some(cur) = b.current.as_mut() {
            cur.started_unix = started_unix;
        }
        let marks = b.step_marks(first_step);
        b.marks.extend(marks);
    }

    /// The load changed: from `at` after the step's barrier the fleet runs
    /// `users` users (at `spawn_rate`), or an open loop at `rate` and/or
    /// under a new cap (stage `name`). The scenario keeps its start values
    /// (`cicada.scenario`); the load in force is `cicada.load`.
    pub fn steered(&self, at: std::time::Duration, name: &str, load: SteeredLoad) {
        let mut b = self.lock();
        b.steering.apply(at, name, Load::from(load));
        let t = b.step_offset_s + at.as_secs_f64();
        b.marks.push(Mark {
            t,
            name: name.to_string(),
        });
    }

    /// Each worker's clock offset (ms) as measured for the step.
    pub fn clocks(&self, offsets: impl IntoIterator<Item = (u32, f64)>) {
        let mut b = self.lock();
        for (worker, ms) in offsets {
            b.workers.entry(worker).or_default().clock_offset_ms = Some(ms);
        }
    }

    /// `POST /stats/reset`: the step's figures start again `from` after its barrier.
    pub fn reset(&self, from: std::time::Duration) {
        let mut b = self.lock();
        let t = b.step_offset_s + from.as_secs_f64();
        b.marks.push(Mark {
            t,
            name: "reset".into(),
        });
        if let Some(cur) = b.current.as_mut() {
            cur.window_start_us = cur.window_start_us.max(from.as_micros() as u64);
        }
    }

    /// About once a second: the step's figures so far from the merge, and
    /// when each worker's latest report arrived and its longest stall (µs).
    fn tick(&self, tick: &Tick<'_>, reports: &WorkerReports) {
        let (targets, models, workloads) = self.lock().current.as_ref().map_or((0, 0, 0), |c| {
            (
                c.target.urls.len().max(1) as u32,
                c.target.models.len() as u32,
                c.scenario.workloads.len() as u32,
            )
        });
        // the merges happen outside the lock
        let per_target: Vec<MetricSet> = (0..targets)
            .map(|t| tick.shares.merged(&|s| !s.warmup && s.target == t))
            .collect();
        let per_model: Vec<MetricSet> = (0..models)
            .map(|m| tick.shares.merged(&|s| !s.warmup && s.model == m))
            .collect();
        let per_workload: Vec<MetricSet> = (0..workloads)
            .map(|w| tick.shares.merged(&|s| !s.warmup && s.workload == w))
            .collect();
        let mut b = self.lock();
        b.in_flight = tick.in_flight;
        b.elapsed_s = b.step_started.map_or(0.0, |s| {
            Instant::now().saturating_duration_since(s).as_secs_f64()
        });
        for (worker, usage) in tick.usage {
            let w = b.workers.entry(*worker).or_default();
            w.cpu_s = usage.cpu_us as f64 / 1e6;
            w.rss_bytes = usage.peak_rss_bytes;
        }
        for (worker, n) in tick.in_flight_by_worker {
            b.workers.entry(*worker).or_default().in_flight = *n;
        }
        for (worker, at) in &reports.last {
            let w = b.workers.entry(*worker).or_default();
            w.report_age_s = Some(at.elapsed().as_secs_f64());
        }
        for (worker, us) in &reports.worst_stall_us {
            b.workers.entry(*worker).or_default().worst_stall_ms = Some(*us as f64 / 1e3);
        }
        let Some(mut cur) = b.current.take() else {
            return;
        };
        cur.client = Some(client_health::assess(
            tick.health,
            tick.usage,
            &[],
            tick.total,
            b.elapsed_s,
            uncapped_open_loop(&cur.scenario),
        ));
        cur.total = tick.total.clone();
        cur.per_target = per_target;
        cur.per_model = per_model;
        cur.per_workload = per_workload;
        let new = tick.rows.get(cur.rows.len()..).unwrap_or_default();
        b.add_points(cur.stage, new);
        cur.rows.extend(new.iter().cloned());
        b.current = Some(cur);
    }

    /// Follow the target's `/metrics` figures of step `step` while it runs
    /// (renewed at every scrape; the task ends with the step's scraping).
    pub fn follow_server(&self, step: u32, mut live: watch::Receiver<Option<ServerView>>) {
        let feed = self.clone();
        tokio::spawn(async move {
            while live.changed().await.is_ok() {
                let view = live.borrow_and_update().clone();
                let mut b = feed.lock();
                if let (Some(view), Some(cur)) = (view, b.current.as_mut())
                    && cur.stage == step
                {
                    cur.server = view;
                }
            }
        });
    }

    /// The step ended: `results` is its whole result, then its windows.
    pub fn step_finished(&self, results: &[RunResult]) {
        let mut b = self.lock();
        let Some(whole) = results.first() else {
            return;
        };
        let had = b.current.take().map_or(0, |c| c.rows.len());
        b.add_points(whole.stage, whole.rows.get(had..).unwrap_or_default());
        b.in_flight = 0;
        for w in b.workers.values_mut() {
            w.in_flight = 0;
        }
        b.finished.push(whole.clone());
        b.stages.extend(results[1..].iter().cloned());
    }
}

/// What the workers' reports said of them in the step running (the workers tab).
#[derive(Debug, Default)]
struct WorkerReports {
    /// When each worker's latest report arrived.
    last: BTreeMap<u32, std::time::Instant>,
    /// Each worker's longest runtime stall, µs.
    worst_stall_us: BTreeMap<u32, u64>,
}

/// The board as one of the run's outputs.
#[derive(Debug)]
pub struct BoardSink {
    feed: Feed,
    reports: WorkerReports,
}

impl BoardSink {
    /// Write `feed`'s board as the run goes.
    pub fn new(feed: Feed) -> Self {
        Self {
            feed,
            reports: WorkerReports::default(),
        }
    }
}

impl Sink for BoardSink {
    fn step_began(&mut self, step: &StepBegan<'_>) {
        self.reports = WorkerReports::default();
        self.feed
            .step_began(step.result.clone(), step.sweep, step.workers);
    }

    fn barrier(&mut self, barrier: &Barrier) {
        self.feed.barrier(barrier.started_unix);
    }

    fn report(&mut self, report: &Report<'_>) {
        self.reports
            .last
            .insert(report.worker, std::time::Instant::now());
        if let Some(stall) = report.stall_max_us {
            let worst = self
                .reports
                .worst_stall_us
                .entry(report.worker)
                .or_default();
            *worst = (*worst).max(stall);
        }
    }

    fn tick(&mut self, tick: &Tick<'_>) {
        self.feed.tick(tick, &self.reports);
    }

    fn step_finished(
        &mut self,
        step: &StepFinished<'_>,
        _written: &mut Vec<std::path::PathBuf>,
    ) -> Result<(), cicada_results::error::WriteError> {
        self.feed.step_finished(step.results);
        Ok(())
    }
}

/// An open loop with no cap, whose lateness is all the client's doing (as
/// the step's end judges it).
fn uncapped_open_loop(s: &Scenario) -> bool {
    !sharding::is_closed_loop(s) && s.load.max_concurrency.is_none() && !s.runs_sessions()
}

impl Board {
    /// The marks a step's start brings: a sweep's step (past the first),
    /// then each of its `[[stages]]` windows, on the charts' time axis.
    fn step_marks(&self, first_step: bool) -> Vec<Mark> {
        let Some(cur) = self.current.as_ref() else {
            return Vec::new();
        };
        let mut marks = Vec::new();
        if self.sweep && !first_step {
            let name = if cur.stage_name.is_empty() {
                format!("step-{}", cur.stage)
            } else {
                cur.stage_name.clone()
            };
            marks.push(Mark {
                t: self.step_offset_s,
                name,
            });
        }
        marks.extend(
            sharding::stage_windows(&cur.scenario)
                .into_iter()
                .map(|w| Mark {
                    t: self.step_offset_s + w.start.as_secs_f64(),
                    name: w.name,
                }),
        );
        marks
    }

    fn add_points(&mut self, step: u32, rows: &[IntervalRow]) {
        let offset = self.step_offset_s;
        self.history
            .extend(rows.iter().map(|r| Point::of(offset, step, r)));
    }

    /// The load in force now and its stage's name: the step's scenario, its
    /// `[[stages]]` window, the changes from the page.
    pub fn load_now(&self) -> (Load, String) {
        let s = self.latest().map_or(&self.scenario, |r| &r.scenario);
        let elapsed = std::time::Duration::from_secs_f64(self.elapsed_s.max(0.0));
        load::now(s, elapsed, &self.steering)
    }

    /// Workers in the fleet now.
    pub fn active_workers(&self) -> usize {
        self.workers.values().filter(|w| w.active).count()
    }

    /// The result the figures come from: the step running, else the last one finished.
    pub fn latest(&self) -> Option<&RunResult> {
        self.current.as_ref().or(self.finished.last())
    }
}

/// The load a change set, as the page shows it (`None`: unchanged).
#[derive(Debug, Clone, Copy, Default)]
pub struct SteeredLoad {
    /// Users of a closed loop.
    pub users: Option<u32>,
    /// Their spawn rate.
    pub spawn_rate: Option<f64>,
    /// An open loop's rate, requests/s (infinite: unpaced).
    pub rate: Option<f64>,
    /// An open loop's fleet-wide cap in it (a change of the cap).
    pub max_concurrency: Option<u32>,
}

impl From<SteeredLoad> for Load {
    fn from(s: SteeredLoad) -> Self {
        Load {
            users: s.users,
            spawn_rate: s.spawn_rate,
            rate: s.rate.map(cicada_plan::units::Rate::from_f64),
            max_concurrency: s.max_concurrency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_keep_the_whole_run_across_steps() {
        let feed = Feed::new(Scenario::default(), RunState::Ready);
        let row = |i: u64| IntervalRow {
            index: i,
            start_s: i as f64,
            length_s: 1.0,
            ended: 4,
            ok: 3,
            failed: 1,
            output_tokens: 30,
            input_tokens: 0,
            in_flight: 2,
            metrics: vec![(Metric::Ttft, 3, 5.0, 4.0, 6.0, 9.0, 9.5)],
        };
        let mut b = feed.lock();
        b.add_points(1, &[row(0), row(1)]);
        b.step_offset_s = 10.0;
        b.add_points(2, &[row(0)]);
        let t: Vec<f64> = b.history.iter().map(|p| p.t).collect();
        assert_eq!(t, [1.0, 2.0, 11.0]);
        assert_eq!(b.history[2].step, 2);
        assert_eq!(b.history[0].rps, 3.0);
        assert_eq!(b.history[0].tok_s, 30.0);
        assert_eq!(b.history[0].latency, [(Metric::Ttft, 4.0, 9.0)]);
    }
}

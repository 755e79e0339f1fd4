//! Results: what one finished step (or `[[stages]]` window) measured, and
//! everything that turns it into output: the [`sink::Sink`] every output
//! implements, the console ([`console::Console`]), the result files
//! ([`files::Files`]: `result.json`, `summary.csv`, the streamed files,
//! `report.html`), the run gates, the run's last-line verdict (which gate
//! failed; the binary turns it into an exit code) and the client's health
//! verdict. `cicada report` and `cicada compare` (crate `cicada-report`)
//! read the files back through [`document`], the result model.
//!
//! The coordinator builds a [`RunResult`] per finished step (from its merged
//! aggregate, the fleet's shares and the servers' view) and hands it, with
//! the events before it, to its outputs; nothing in this crate runs a fleet
//! or talks to a server.

pub mod abort;
pub mod client_health;
mod clocks;
pub mod console;
pub mod csv;
pub mod document;
pub mod error;
pub mod files;
pub mod gates;
pub mod hlog;
pub mod hooks;
pub mod html;
pub mod interval;
pub mod json;
mod reasoning;
/// A result with every field set, for tests here and in the readers' crates.
#[cfg(any(test, feature = "sample"))]
pub mod sample;
pub mod saturation;
pub mod server;
pub mod sink;
pub mod stages;
pub mod steady;
pub mod streams;
pub mod svg;
pub mod timeseries;
pub mod verdict;
pub mod write;

use cicada_metrics::{LatencyHistogram, Metric, MetricSet, Summary};
use cicada_plan::ResolvedTarget;
use cicada_scenarios::Scenario;
use cicada_scenarios::dataset::DatasetReport;

use crate::interval::IntervalRow;
use crate::server::ServerView;
use client_health::ClientHealth;
use write::RunContext;

/// The cicada version every result file names (the workspace's one version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Percentiles computed for every metric in files, beside the console's own choice.
pub const FILE_PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

/// Metrics a scenario's results leave out: those measured from the intended
/// send time when the load intended none (an open loop at `request_rate =
/// "inf"`), where they would show the wait for a concurrency slot as lateness.
pub fn hidden_metrics(s: &Scenario) -> &'static [Metric] {
    if cicada_scenarios::sharding::has_intended_send_times(s) {
        &[]
    } else {
        &Metric::FROM_SCHEDULE
    }
}

/// Empty the histograms of `hidden` metrics in `set`, so no writer shows them.
pub fn hide(set: &mut MetricSet, hidden: &[Metric]) {
    for m in hidden {
        set.set_histogram(*m, LatencyHistogram::default());
    }
}

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
    /// Sessions it was to start in the step (0: none, or open-ended).
    pub planned_sessions: u64,
    /// Sessions its reports said it started before it was lost.
    pub started_sessions: u64,
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
    /// Requests of its share due before the time limit that it had not
    /// sent when the limit came (it was behind its schedule); never sent late.
    pub not_sent_at_end: u64,
    /// It was lost before finishing.
    pub lost: bool,
    /// Runtime threads it runs (its share of the machine).
    pub threads: u32,
    /// The worker binary's version (from its Hello).
    pub version: String,
    /// Its clock against the coordinator's, as it measured (none: no estimate).
    pub clock: Option<WorkerClock>,
    /// How it placed the step's start instant (none: it never said).
    pub start_basis: Option<StartBasis>,
}

/// A worker's clock against the coordinator's, measured over the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerClock {
    /// Coordinator wall clock minus the worker's, ms (positive: the worker's is behind).
    pub offset_ms: f64,
    /// The offset is within +- this, ms.
    pub uncertainty_ms: f64,
    /// The smallest round trip of the exchanges, ms.
    pub min_rtt_ms: f64,
    /// Exchanges that passed the filter.
    pub samples: u32,
}

/// Where |offset| is worth a warning, ms: the hosts' clocks are not synced
/// (chrony or ntpd keep LAN hosts within a few ms), and anything timed on
/// one host's wall clock against another's is off by this much.
pub const CLOCK_OFFSET_WARN_MS: f64 = 100.0;
/// Where a start's uncertainty is worth a line, ms.
pub const CLOCK_UNCERTAINTY_NOTE_MS: f64 = 5.0;

/// How a worker placed a step's start instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StartBasis {
    /// The coordinator's instant mapped through the measured offset.
    Offset,
    /// The coordinator's instant read on the worker's own wall clock: the
    /// measured offset was within its uncertainty of zero, or not measured.
    WallClock,
    /// The delay from Start's receipt: the instant could not be placed, this
    /// far off (ms, positive: the worker's clock runs behind).
    Delay { off_ms: f64 },
}

impl StartBasis {
    /// Its name in results (`start_basis`).
    pub fn name(&self) -> &'static str {
        match self {
            StartBasis::Offset => "offset",
            StartBasis::WallClock => "wall_clock",
            StartBasis::Delay { .. } => "delay",
        }
    }
}

/// Everything known about one finished step, or one `[[stages]]` window of it.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub scenario: Scenario,
    pub scenario_origin: String,
    pub scenario_hash: String,
    /// What the outputs call its stage: the sweep step, or the `[[stages]]`
    /// window (from 1); 0 for a run without either (`result-stage<n>.json`,
    /// the `stage` key and column).
    pub stage: u32,
    /// Human name of the step or window ("" for a run without a sweep).
    pub stage_name: String,
    pub target: ResolvedTarget,
    pub workers: u32,
    pub total: MetricSet,
    pub per_target: Vec<MetricSet>,
    /// Each model's share, in `target.models` order (empty with one model).
    pub per_model: Vec<MetricSet>,
    /// Each workload's share, in `[[workloads]]` order (empty without workloads).
    pub per_workload: Vec<MetricSet>,
    /// Warm-up requests (never part of `total`).
    pub warmup: MetricSet,
    /// Where durations start, µs after the barrier (warm-up end or step start).
    pub window_start_us: u64,
    pub rows: Vec<IntervalRow>,
    pub lost: Vec<LostWorker>,
    /// Every worker's planned and reported requests.
    pub worker_shares: Vec<WorkerShare>,
    pub interrupted: Option<&'static str>,
    /// Targets reached through a proxy: the proxy sits inside every latency.
    pub proxy_routes: Vec<String>,
    pub planned: u64,
    pub started_unix: f64,
    pub dataset: DatasetReport,
    /// What the servers' Prometheus metrics said about the run.
    pub server: ServerView,
    /// The workers' own health and whether the client was the limit (whole steps only).
    pub client: Option<ClientHealth>,
    /// The server hooks run around the step, in order (whole steps only).
    pub hooks: Vec<hooks::HookCall>,
    /// The steady-state window and its figures (whole steps whose load has a plateau).
    pub steady: Option<steady::SteadyState>,
    /// The server was found saturated (an open loop's whole step).
    pub saturated: Option<saturation::Saturated>,
    /// An `[abort]` threshold stopped the step (whole steps only).
    pub aborted: Option<abort::Aborted>,
    /// The sweep points not run because this step stopped the sweep.
    pub skipped: Vec<String>,
}

impl RunResult {
    /// The result of step (or window) `stage` called `stage_name`, running
    /// `scenario`, before anything is measured: the one place a result is
    /// built; measurements are filled in from the merge.
    pub fn new(ctx: &RunContext, stage: u32, stage_name: String, scenario: Scenario) -> Self {
        RunResult {
            scenario_hash: write::scenario_hash(&scenario),
            scenario,
            scenario_origin: ctx.scenario_origin.clone(),
            stage,
            stage_name,
            target: ctx.target.clone(),
            workers: ctx.workers,
            total: MetricSet::default(),
            per_target: Vec::new(),
            per_model: Vec::new(),
            per_workload: Vec::new(),
            warmup: MetricSet::default(),
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
            hooks: Vec::new(),
            steady: None,
            saturated: None,
            aborted: None,
            skipped: Vec::new(),
        }
    }

    /// Leave out what [`hidden_metrics`] says the scenario cannot mean,
    /// from the whole result and every target.
    pub fn hide_meaningless(&mut self) {
        let hidden = hidden_metrics(&self.scenario);
        let shares = self
            .per_target
            .iter_mut()
            .chain(&mut self.per_model)
            .chain(&mut self.per_workload);
        for set in std::iter::once(&mut self.total).chain(shares) {
            hide(set, hidden);
        }
        if let Some(w) = self.steady.as_mut().and_then(|s| s.window.as_mut()) {
            hide(&mut w.set, hidden);
        }
    }

    /// The run spoke a pooling API (embeddings): nothing was generated, and
    /// the reports show items and input throughput instead.
    pub fn pools(&self) -> bool {
        let sc = &self.scenario;
        sc.target.backend.pools(sc.mock.api)
    }

    /// Sessions lost workers were to start and never reported starting:
    /// in flight with no turn reported yet, or never begun.
    pub fn lost_planned_sessions(&self) -> u64 {
        self.lost
            .iter()
            .map(|l| l.planned_sessions.saturating_sub(l.started_sessions))
            .sum()
    }

    /// Requests due before the time limit that no worker had sent by then.
    pub fn not_sent_at_end(&self) -> u64 {
        self.worker_shares.iter().map(|w| w.not_sent_at_end).sum()
    }

    /// Whether the requests asked the server to ignore end-of-sequence.
    pub fn ignore_eos_sent(&self) -> bool {
        cicada_scenarios::sharding::resolve_sampling(&self.scenario).ignore_eos
            && self.scenario.target.backend != cicada_scenarios::scenario::Backend::Tgi
    }

    /// Percentiles to compute: the files' fixed set plus what the console asks for.
    pub fn percentiles(&self) -> Vec<f64> {
        let mut p: Vec<f64> = FILE_PERCENTILES.to_vec();
        for q in &self.scenario.output.metric_percentiles {
            if !p.iter().any(|x| (x - q).abs() < 1e-9) {
                p.push(*q);
            }
        }
        p.sort_by(f64::total_cmp);
        p
    }

    /// Run-level figures.
    pub fn summary(&self) -> Summary {
        Summary::of(
            &self.total,
            self.scenario.any_slo_set(),
            &self.percentiles(),
            self.window_start_us,
        )
    }

    /// Figures of one target's share. Throughputs divide by the whole run's
    /// duration (and the achieved rate by the run's sending time), so the
    /// targets' figures add up to the run's.
    pub fn target_summary(&self, set: &MetricSet) -> Summary {
        let mut view = set.clone();
        view.span = self.total.span;
        Summary::of(
            &view,
            self.scenario.any_slo_set(),
            &self.percentiles(),
            self.window_start_us,
        )
    }

    /// Figures of workload `i`'s share, as [`RunResult::target_summary`]
    /// has a target's (so the workloads' add up to the run's), its goodput
    /// judged against its own SLO (shown when that SLO has a bound).
    pub fn workload_summary(&self, i: usize, set: &MetricSet) -> Summary {
        let mut view = set.clone();
        view.span = self.total.span;
        let slo_set = self
            .scenario
            .workload_scenario(i)
            .is_some_and(|w| w.slo.is_set());
        Summary::of(&view, slo_set, &self.percentiles(), self.window_start_us)
    }

    /// Each workload's name with its measurements, in `[[workloads]]` order
    /// (nothing without workloads).
    pub fn workloads(&self) -> impl Iterator<Item = (&str, &MetricSet)> {
        self.scenario
            .workloads
            .iter()
            .map(|w| w.name.as_str())
            .chain(std::iter::repeat("unknown"))
            .zip(&self.per_workload)
    }

    /// Each target's URL with its measurements, in `target.urls` order.
    pub fn targets(&self) -> impl Iterator<Item = (&str, &MetricSet)> {
        self.target
            .urls
            .iter()
            .map(String::as_str)
            .chain(std::iter::repeat("unknown"))
            .zip(&self.per_target)
    }

    /// Each model's name with its measurements, in `target.models` order
    /// (nothing when every request named one model).
    pub fn models(&self) -> impl Iterator<Item = (&str, &MetricSet)> {
        self.target
            .models
            .iter()
            .map(|m| m.name.as_str())
            .chain(std::iter::repeat("unknown"))
            .zip(&self.per_model)
    }

    /// Some workers were lost: the result covers only part of the load.
    pub fn degraded(&self) -> bool {
        !self.lost.is_empty()
    }

    /// A signal cut the run short.
    pub fn partial(&self) -> bool {
        self.interrupted.is_some()
    }
}

/// `99` -> "99", `99.9` -> "99.9" (vLLM's key spelling).
pub fn percentile_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as u64)
    } else {
        format!("{p}")
    }
}

/// RFC 3339 UTC time of a Unix timestamp.
pub fn rfc3339(unix: f64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(unix.max(0.0));
    humantime::format_rfc3339_seconds(t).to_string()
}

/// vLLM's `%Y%m%d-%H%M%S` form of a Unix timestamp.
pub fn compact_date(unix: f64) -> String {
    let iso = rfc3339(unix);
    let digits: String = iso.chars().filter(char::is_ascii_digit).collect();
    if digits.len() >= 14 {
        format!("{}-{}", &digits[..8], &digits[8..14])
    } else {
        digits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_dates() {
        assert_eq!(percentile_word(99.0), "99");
        assert_eq!(percentile_word(99.9), "99.9");
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(compact_date(86_400.0 + 3661.0), "19700102-010101");
    }
}

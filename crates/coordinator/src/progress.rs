//! Live progress while a step runs: an indicatif bar on a terminal, one log
//! line per interval when headless (no TTY, or `--headless`), nothing with
//! `--quiet`; and, with `--metrics-addr`, the Prometheus exposition.

use std::io::IsTerminal as _;
use std::time::Duration;

use cicada_metrics::{Counter, Metric, MetricSet};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::time::Instant;

use crate::live::{LiveMetrics, LiveView, render};
use crate::merge::Aggregate;
use crate::web::Feed;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// Nothing.
    Quiet,
    /// One line per interval on stderr (logs, CI, `kubectl logs`).
    Headless,
    /// A progress bar redrawn in place (stderr is a terminal).
    Bar,
}

impl Display {
    /// `--quiet` wins; then `--headless` or a stderr that is not a terminal give lines.
    pub fn choose(quiet: bool, headless: bool) -> Self {
        if quiet {
            Display::Quiet
        } else if headless || !std::io::stderr().is_terminal() {
            Display::Headless
        } else {
            Display::Bar
        }
    }
}

/// What the current step is, set before it starts.
#[derive(Debug, Clone, Default)]
struct StepInfo {
    number: u32,
    workers: u32,
    /// Time-bound stages: how long sending lasts.
    duration: Option<Duration>,
    planned: u64,
}

/// Follows the fleet's progress as the run goes.
pub struct Progress {
    display: Display,
    bar: Option<ProgressBar>,
    step: StepInfo,
    last_rows: usize,
    live: Option<LiveMetrics>,
    scenario: String,
    /// Measurements of the stages already finished (for run-wide live figures).
    finished: MetricSet,
    /// The web UI's board, refreshed on every tick.
    web: Option<Feed>,
}

/// The figures a progress line or bar shows.
struct Figures {
    ended: u64,
    ok: u64,
    failed: u64,
    in_flight: u64,
    req_s: f64,
    tok_s: f64,
    /// TTFT p50 and p99 so far; `None` before the first sample (no figure).
    ttft_ms: Option<(f64, f64)>,
}

impl Figures {
    fn of(agg: &Aggregate, total: &MetricSet) -> Self {
        let (req_s, tok_s) = agg.rows.last().map_or((0.0, 0.0), |r| {
            let len = r.length_s.max(f64::MIN_POSITIVE);
            (r.ok as f64 / len, r.output_tokens as f64 / len)
        });
        let ttft = total.histogram(Metric::Ttft);
        Self {
            ended: total.outcomes.sent(),
            ok: total.outcomes.ok(),
            failed: total.outcomes.failed(),
            in_flight: agg.in_flight(),
            req_s,
            tok_s,
            ttft_ms: (!ttft.is_empty()).then(|| {
                (
                    ttft.quantile(0.5) as f64 / 1e3,
                    ttft.quantile(0.99) as f64 / 1e3,
                )
            }),
        }
    }

    /// The part shared by the bar's message and the log line; TTFT reads
    /// `n/a` until a first token has arrived (no samples, no figure).
    fn rates(&self) -> String {
        let ttft = match self.ttft_ms {
            Some((p50, p99)) => format!("TTFT p50 {p50:.1} ms p99 {p99:.1} ms"),
            None => "TTFT n/a".to_string(),
        };
        format!(
            "{:.1} req/s  {:.0} out tok/s  in-flight {}  failed {}  {ttft}",
            self.req_s, self.tok_s, self.in_flight, self.failed
        )
    }
}

impl Progress {
    /// A progress follower; `live` also publishes the Prometheus exposition.
    pub fn new(display: Display, live: Option<LiveMetrics>, scenario: &str) -> Self {
        Self {
            display,
            bar: None,
            step: StepInfo::default(),
            last_rows: 0,
            live,
            scenario: scenario.to_string(),
            finished: MetricSet::default(),
            web: None,
        }
    }

    /// Also refresh the web UI's board on every tick.
    pub fn with_web(mut self, web: Option<Feed>) -> Self {
        self.web = web;
        self
    }

    /// Describe the next step: its number, the fleet size and, when time-bound, its length.
    pub fn step(&mut self, number: u32, workers: u32, duration: Option<Duration>) {
        self.step = StepInfo {
            number,
            workers,
            duration,
            planned: 0,
        };
    }

    /// The step's barrier passed at `started_unix`; `planned` requests (0 = open-ended).
    pub fn begin(&mut self, planned: u64, started_unix: f64) {
        if let Some(web) = &self.web {
            web.barrier(started_unix);
        }
        self.step.planned = planned;
        self.last_rows = 0;
        if self.display == Display::Bar {
            self.bar = Some(self.new_bar());
        }
    }

    /// The step's load was changed from the web UI; `open_ended` when the
    /// change made every worker's share open-ended (an open loop's new
    /// rate), so the planned total no longer says when the step ends and
    /// progress stops counting towards it.
    pub fn steered(&mut self, open_ended: bool) {
        if !open_ended || self.step.planned == 0 {
            return;
        }
        self.step.planned = 0;
        if let Some(bar) = &self.bar {
            self.shape(bar);
        }
    }

    fn new_bar(&self) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        self.shape(&bar);
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }

    /// The bar's length and template for the step: towards the planned
    /// requests, else the step's duration, else open-ended.
    fn shape(&self, bar: &ProgressBar) {
        let (len, template) = match (self.step.planned, self.step.duration) {
            (n, _) if n > 0 => (
                Some(n),
                "{spinner} [{elapsed_precise}] [{bar:30}] {pos}/{len} {wide_msg}",
            ),
            (_, Some(d)) => (
                Some(d.as_millis() as u64),
                "{spinner} {prefix} [{bar:30}] {wide_msg}",
            ),
            _ => (None, "{spinner} [{elapsed_precise}] {prefix} {wide_msg}"),
        };
        match len {
            Some(n) => bar.set_length(n),
            None => bar.unset_length(),
        }
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
    }

    /// What a headless line's `done N` is out of: the planned requests, the
    /// step's duration, or nothing (open-ended).
    fn out_of(&self) -> String {
        match (self.step.planned, self.step.duration) {
            (n, _) if n > 0 => format!("/{n}"),
            (_, Some(d)) => format!(" (of {})", clock(d)),
            _ => String::new(),
        }
    }

    /// Called about once a second: redraw the bar, print a line for newly
    /// finished intervals, refresh the live exposition.
    pub fn tick(&mut self, agg: &Aggregate, start: Instant) {
        if self.display == Display::Quiet && self.live.is_none() && self.web.is_none() {
            return;
        }
        let total = agg.total();
        if let Some(web) = &self.web {
            web.tick(agg, &total);
        }
        let f = Figures::of(agg, &total);
        let elapsed = Instant::now().saturating_duration_since(start);
        self.publish(agg, &total, elapsed);
        let new_rows = agg.rows.len() != self.last_rows;
        self.last_rows = agg.rows.len();
        match self.display {
            Display::Quiet => {}
            Display::Bar => {
                if let Some(bar) = &self.bar {
                    match (self.step.planned, self.step.duration) {
                        (n, _) if n > 0 => bar.set_position(f.ended.min(n)),
                        (_, Some(d)) => {
                            bar.set_position(elapsed.min(d).as_millis() as u64);
                            bar.set_prefix(format!("{}/{}", clock(elapsed), clock(d)));
                        }
                        _ => bar.set_prefix(format!("{} done", f.ended)),
                    }
                    bar.set_message(format!("ok {}  {}", f.ok, f.rates()));
                }
            }
            Display::Headless => {
                if !new_rows {
                    return;
                }
                let of = self.out_of();
                eprintln!(
                    "[{:7.1}s] done {}{of}  ok {}  {}",
                    elapsed.as_secs_f64(),
                    f.ended,
                    f.ok,
                    f.rates()
                );
            }
        }
    }

    /// Render and publish the Prometheus exposition (run-wide figures).
    fn publish(&self, agg: &Aggregate, step_total: &MetricSet, elapsed: Duration) {
        let Some(live) = &self.live else { return };
        let mut run = self.finished.clone();
        // sets decoded from reports share one layout; merging cannot fail
        let _ = run.merge(step_total);
        live.publish(render(&LiveView {
            scenario: &self.scenario,
            run: &run,
            step: self.step.number,
            planned: self.step.planned,
            elapsed_s: elapsed.as_secs_f64(),
            workers: self.step.workers,
            in_flight: agg.in_flight(),
            last_interval: agg.rows.last(),
        }));
    }

    /// The step ended: clear the bar, say what it did, fold it into the run's figures.
    pub fn finish(&mut self, agg: &Aggregate, start: Instant) {
        let total = agg.total();
        let elapsed = Instant::now().saturating_duration_since(start);
        self.publish(agg, &total, elapsed);
        let _ = self.finished.merge(&total);
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if self.display == Display::Quiet {
            return;
        }
        eprintln!(
            "[{:7.1}s] stage finished: {} requests ({} ok, {} failed), {} output tokens",
            elapsed.as_secs_f64(),
            total.outcomes.sent(),
            total.outcomes.ok(),
            total.outcomes.failed(),
            total.counter(Counter::OutputTokens)
        );
    }
}

/// `83.4 s` -> `1:23`, `3725 s` -> `1:02:05`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_read_like_clocks() {
        assert_eq!(clock(Duration::from_secs_f64(83.4)), "1:23");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
        assert_eq!(clock(Duration::ZERO), "0:00");
    }

    #[test]
    fn ttft_has_no_figure_before_its_first_sample() {
        let agg = Aggregate::new(1.0, 0..1);
        let mut total = MetricSet::default();
        total.outcomes.add(cicada_metrics::Outcome::Timeout, None);
        let line = Figures::of(&agg, &total).rates();
        assert!(line.ends_with("failed 1  TTFT n/a"), "{line}");
        assert!(!line.contains("0.0 ms"), "{line}");
        total.histogram_mut(Metric::Ttft).record(2_000);
        total.histogram_mut(Metric::Ttft).record(9_000);
        let line = Figures::of(&agg, &total).rates();
        assert!(line.contains("TTFT p50 2.0 ms p99 9.0 ms"), "{line}");
    }

    #[test]
    fn a_change_of_rate_drops_the_planned_total() {
        let mut p = Progress::new(Display::Quiet, None, "s");
        p.step(1, 2, None);
        p.begin(100, 0.0);
        assert_eq!(p.out_of(), "/100");
        p.steered(false);
        assert_eq!(p.out_of(), "/100", "a change of users keeps the count");
        p.steered(true);
        assert_eq!(p.out_of(), "", "an open loop's new rate has no planned end");
        p.step(2, 2, Some(Duration::from_secs(90)));
        p.begin(100, 0.0);
        p.steered(true);
        assert_eq!(
            p.out_of(),
            " (of 1:30)",
            "a time-bound step still ends on time"
        );
    }

    #[test]
    fn quiet_wins_and_headless_is_forced_by_flag() {
        assert_eq!(Display::choose(true, true), Display::Quiet);
        assert_eq!(Display::choose(false, true), Display::Headless);
    }
}

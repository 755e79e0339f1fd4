//! Live progress while a step runs, one of the run's outputs: an indicatif
//! bar on a terminal, one log line per interval when headless (no TTY, or
//! `--headless`), nothing with `--quiet`.

use std::io::IsTerminal as _;
use std::time::Duration;

use cicada_metrics::{Counter, Metric};
use cicada_results::sink::{Barrier, Sink, StepBegan, Tick};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
    fn of(tick: &Tick<'_>) -> Self {
        let total = tick.total;
        let (req_s, tok_s) = tick.rows.last().map_or((0.0, 0.0), |r| {
            let len = r.length_s.max(f64::MIN_POSITIVE);
            (r.ok as f64 / len, r.output_tokens as f64 / len)
        });
        let ttft = total.histogram(Metric::Ttft);
        Self {
            ended: total.outcomes.sent(),
            ok: total.outcomes.ok(),
            failed: total.outcomes.failed(),
            in_flight: tick.in_flight,
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
    /// A progress follower.
    pub fn new(display: Display) -> Self {
        Self {
            display,
            bar: None,
            step: StepInfo::default(),
            last_rows: 0,
        }
    }

    /// Describe the next step: when time-bound, its length.
    fn step(&mut self, duration: Option<Duration>) {
        self.step = StepInfo {
            duration,
            planned: 0,
        };
    }

    /// The step's barrier passed; `planned` requests (0 = open-ended).
    fn begin(&mut self, planned: u64) {
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
    fn steered(&mut self, open_ended: bool) {
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
    /// finished intervals.
    fn tick(&mut self, tick: &Tick<'_>) {
        if self.display == Display::Quiet {
            return;
        }
        let f = Figures::of(tick);
        let elapsed = tick.elapsed;
        let new_rows = tick.rows.len() != self.last_rows;
        self.last_rows = tick.rows.len();
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

    /// The step ended: clear the bar, say what it did.
    fn finish(&mut self, tick: &Tick<'_>) {
        let total = tick.total;
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if self.display == Display::Quiet {
            return;
        }
        eprintln!(
            "[{:7.1}s] stage finished: {} requests ({} ok, {} failed), {} output tokens",
            tick.elapsed.as_secs_f64(),
            total.outcomes.sent(),
            total.outcomes.ok(),
            total.outcomes.failed(),
            total.counter(Counter::OutputTokens)
        );
    }
}

impl Sink for Progress {
    fn step_began(&mut self, step: &StepBegan<'_>) {
        self.step(step.duration);
    }

    fn barrier(&mut self, barrier: &Barrier) {
        self.begin(barrier.planned);
    }

    fn tick(&mut self, tick: &Tick<'_>) {
        Progress::tick(self, tick);
    }

    fn load_changed(&mut self, open_ended: bool) {
        self.steered(open_ended);
    }

    fn merge_closed(&mut self, tick: &Tick<'_>) {
        self.finish(tick);
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
        let agg = crate::merge::Aggregate::new(1.0, 0..1);
        let mut total = cicada_metrics::MetricSet::default();
        total.outcomes.add(cicada_metrics::Outcome::Timeout, None);
        let line = Figures::of(&agg.tick(Duration::ZERO, &total)).rates();
        assert!(line.ends_with("failed 1  TTFT n/a"), "{line}");
        assert!(!line.contains("0.0 ms"), "{line}");
        total.histogram_mut(Metric::Ttft).record(2_000);
        total.histogram_mut(Metric::Ttft).record(9_000);
        let line = Figures::of(&agg.tick(Duration::ZERO, &total)).rates();
        assert!(line.contains("TTFT p50 2.0 ms p99 9.0 ms"), "{line}");
    }

    #[test]
    fn a_change_of_rate_drops_the_planned_total() {
        let mut p = Progress::new(Display::Quiet);
        p.step(None);
        p.begin(100);
        assert_eq!(p.out_of(), "/100");
        p.steered(false);
        assert_eq!(p.out_of(), "/100", "a change of users keeps the count");
        p.steered(true);
        assert_eq!(p.out_of(), "", "an open loop's new rate has no planned end");
        p.step(Some(Duration::from_secs(90)));
        p.begin(100);
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

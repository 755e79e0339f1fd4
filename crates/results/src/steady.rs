//! The steady-state window: the intervals in which the load was at its
//! plateau, found from the merged interval rows as they are finalised, and
//! the exact merge of those intervals' measurements (histograms add, so the
//! window's percentiles are those of its own samples, never averages of
//! the intervals' percentiles).

use cicada_metrics::{MetricSet, Summary};
use cicada_scenarios::Scenario;
use cicada_scenarios::sharding::is_closed_loop;

use crate::interval::IntervalRow;

/// What "at the plateau" means for a step's load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Plateau {
    /// Closed loops (and bursts under a cap): the requests in flight at an
    /// interval's start and end are both at least `fraction` of `cap`.
    InFlight { cap: u32, fraction: f64 },
    /// Open loops: the interval's achieved rate (requests ended per
    /// second) is within `band` (a share) of `target` req/s.
    Rate { target: f64, band: f64 },
}

impl Plateau {
    /// The rule in words, for the console and `result.json`.
    pub fn criterion(&self) -> String {
        match self {
            Plateau::InFlight { cap, fraction } => format!(
                "in flight >= {:.3} ({fraction} x {cap}) at both ends of each interval",
                f64::from(*cap) * fraction
            ),
            Plateau::Rate { target, band } => format!(
                "achieved rate within {target:.3} req/s +/- {:.0} %",
                band * 100.0
            ),
        }
    }

    /// Whether an interval, with `before` requests in flight at its start, was at the plateau.
    fn holds(&self, row: &IntervalRow, before: u64) -> bool {
        match *self {
            Plateau::InFlight { cap, fraction } => {
                let least = f64::from(cap) * fraction;
                before as f64 >= least && row.in_flight as f64 >= least
            }
            Plateau::Rate { target, band } => {
                let rate = row.ended as f64 / row.length_s;
                (rate - target).abs() <= band * target
            }
        }
    }
}

/// The plateau of a step's load, by the scenario's `[steady_state]`
/// thresholds: a closed loop's peak users (or its cap, if lower); an open
/// loop's peak rate (of `request_rate`, the ramp's ends, the stages); a
/// burst's cap. None when the load has no plateau to find (an uncapped
/// burst).
pub fn plateau(s: &Scenario) -> Option<Plateau> {
    let spec = &s.steady_state;
    let in_flight = |cap: u32| Plateau::InFlight {
        cap,
        fraction: spec.in_flight_fraction,
    };
    if is_closed_loop(s) {
        let peak = s
            .stages
            .iter()
            .filter_map(|st| st.users)
            .chain(s.load.users)
            .max()?;
        return Some(in_flight(
            s.load.max_concurrency.map_or(peak, |c| c.min(peak)),
        ));
    }
    let ramp = s.load.ramp.iter().flat_map(|r| [r.start_rps, r.end_rps]);
    let rates = s
        .stages
        .iter()
        .filter_map(|st| st.request_rate.and_then(|r| r.per_second()))
        .chain(ramp)
        .chain(s.load.request_rate.per_second())
        .filter(|r| r.is_finite() && *r > 0.0);
    match rates.max_by(f64::total_cmp) {
        Some(target) => Some(Plateau::Rate {
            target,
            band: spec.rate_band,
        }),
        None => s.load.max_concurrency.map(in_flight),
    }
}

/// Consecutive intervals, merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SteadyWindow {
    /// Start of its first interval, µs after the step's barrier.
    pub start_us: u64,
    /// End of its last interval, µs after the barrier.
    pub end_us: u64,
    /// Report intervals in it.
    pub intervals: u64,
    /// Everything measured in those intervals (no warm-up).
    pub set: MetricSet,
}

impl SteadyWindow {
    fn of(row: &IntervalRow, set: &MetricSet) -> Self {
        Self {
            start_us: (row.start_s * 1e6).round() as u64,
            end_us: ((row.start_s + row.length_s) * 1e6).round() as u64,
            intervals: 1,
            set: set.clone(),
        }
    }

    /// Add the interval right after it.
    fn extend(&mut self, other: &SteadyWindow) {
        // sets merged by the aggregate share one layout: merging cannot fail
        let _ = self.set.merge(&other.set);
        self.end_us = other.end_us;
        self.intervals += other.intervals;
    }

    /// Seconds it lasts.
    pub fn duration_s(&self) -> f64 {
        self.end_us.saturating_sub(self.start_us) as f64 / 1e6
    }

    /// Its figures: throughputs over its own length, distributions of its
    /// own samples.
    pub fn summary(&self, slo_set: bool, percentiles: &[f64]) -> Summary {
        let mut view = self.set.clone();
        view.span.last_end_us = Some(self.end_us);
        view.span.last_send_us = None;
        Summary::of(&view, slo_set, percentiles, self.start_us)
    }
}

/// A step's steady state: the rule and the window it found, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    pub plateau: Plateau,
    /// From the first interval at the plateau to the last (none: the load
    /// never reached it).
    pub window: Option<SteadyWindow>,
}

/// Finds the steady-state window as intervals are finalised, keeping two
/// merged sets whatever the run's length: the window so far (first to
/// last interval at the plateau) and the intervals since its last one
/// (added if another interval at the plateau follows, else dropped).
#[derive(Debug)]
pub struct SteadyWatch {
    plateau: Plateau,
    /// Intervals starting before this (µs after the barrier: the warm-up's
    /// end) are never part of the window.
    from_us: u64,
    length_s: f64,
    before: u64,
    window: Option<SteadyWindow>,
    since: Option<SteadyWindow>,
}

impl SteadyWatch {
    /// Watching for `plateau` in intervals of `length_s` from `from_us` on.
    pub fn new(plateau: Plateau, from_us: u64, length_s: f64) -> Self {
        Self {
            plateau,
            from_us,
            length_s,
            before: 0,
            window: None,
            since: None,
        }
    }

    /// The next finalised interval, with its measurements; `counted` is
    /// false for intervals the figures leave out (before a reset).
    pub fn interval(&mut self, row: &IntervalRow, set: &MetricSet, counted: bool) {
        let before = std::mem::replace(&mut self.before, row.in_flight);
        let measured = counted && (row.start_s * 1e6).round() as u64 >= self.from_us;
        // a short interval (the step's last) says too little about a rate
        let whole = row.length_s >= self.length_s * 0.99;
        let at_plateau = measured && whole && self.plateau.holds(row, before);
        let this = SteadyWindow::of(row, set);
        match (&mut self.window, at_plateau) {
            (None, true) => self.window = Some(this),
            (None, false) => {}
            (Some(w), true) => {
                if let Some(gap) = self.since.take() {
                    w.extend(&gap);
                }
                w.extend(&this);
            }
            (Some(_), false) => match &mut self.since {
                Some(gap) => gap.extend(&this),
                None => self.since = Some(this),
            },
        }
        if !counted {
            // before a reset: the window starts again after it
            self.restart();
        }
    }

    /// Forget the window so far (the web UI's reset of the figures).
    pub fn restart(&mut self) {
        self.window = None;
        self.since = None;
    }

    /// The steady state found.
    pub fn finish(self) -> SteadyState {
        SteadyState {
            plateau: self.plateau,
            window: self.window,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{Metric, Outcome};

    fn interval(i: u64, ok: u64, ttft_us: u64, in_flight: u64) -> (IntervalRow, MetricSet) {
        let mut set = MetricSet::default();
        for _ in 0..ok {
            set.count_outcome(Outcome::Ok, None);
            set.histogram_mut(Metric::Ttft).record(ttft_us);
        }
        let row = IntervalRow::of(i, i as f64, 1.0, &set, in_flight);
        (row, set)
    }

    /// Ramp up, plateau with one dip, ramp down: the window runs from the
    /// first interval at the plateau to the last, the dip inside it, and
    /// its percentiles are those of its own samples.
    #[test]
    fn the_window_spans_the_plateau_and_merges_its_intervals() {
        let plateau = Plateau::InFlight {
            cap: 10,
            fraction: 0.9,
        };
        let mut w = SteadyWatch::new(plateau, 0, 1.0);
        let shape = [
            (2, 5),
            (6, 10),
            (10, 10),
            (10, 10),
            (9, 8),
            (10, 10),
            (10, 10),
            (3, 2),
            (1, 0),
        ];
        for (i, (ok, in_flight)) in shape.iter().enumerate() {
            let ttft = if (2..7).contains(&i) { 1_000 } else { 50_000 };
            let (row, set) = interval(i as u64, *ok, ttft, *in_flight);
            w.interval(&row, &set, true);
        }
        let s = w.finish();
        let win = s.window.expect("a window");
        // interval 1 ends at 10 but started at 5; interval 4 dips to 8 (kept
        // inside); interval 6 is the last with both ends at 10
        assert_eq!((win.start_us, win.end_us), (2_000_000, 7_000_000));
        assert_eq!(win.intervals, 5);
        assert_eq!(win.set.outcomes.ok(), 10 + 10 + 9 + 10 + 10);
        assert_eq!(win.set.histogram(Metric::Ttft).quantile(0.99), 1_000);
    }

    #[test]
    fn an_open_loop_plateau_is_its_rate_and_warmup_is_left_out() {
        let plateau = Plateau::Rate {
            target: 10.0,
            band: 0.1,
        };
        let mut w = SteadyWatch::new(plateau, 1_000_000, 1.0);
        for (i, ok) in [10, 10, 5, 10, 11, 9, 4].iter().enumerate() {
            let (row, set) = interval(i as u64, *ok, 1_000, 0);
            w.interval(&row, &set, true);
        }
        let win = w.finish().window.expect("a window");
        assert_eq!((win.start_us, win.end_us), (1_000_000, 6_000_000));
        assert_eq!(win.set.outcomes.ok(), 10 + 5 + 10 + 11 + 9);
        let s = win.summary(false, &[99.0]);
        assert!((s.request_throughput - 45.0 / 5.0).abs() < 1e-9);
    }
}

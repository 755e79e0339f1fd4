//! Abort thresholds (`[abort]`, k6's `abortOnFail`): judged on the merged
//! interval measurements as they are finalised, over a sliding window of the
//! latest report intervals, once the arming delay has passed. Judged by the
//! coordinator from the fleet's merge, so the verdict is the same for any
//! number of workers; the window's percentiles come from its merged
//! histograms, never from averaged interval percentiles.

use std::collections::VecDeque;

use cicada_metrics::MetricSet;
use cicada_scenarios::scenario::AbortSpec;

use crate::interval::IntervalRow;

/// A step stopped by an abort threshold: which, what was seen, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Aborted {
    /// The `[abort]` key that tripped (`error_rate`, `p99_ttft_ms`, ...).
    pub condition: String,
    /// The value over the window (a share, or ms).
    pub observed: f64,
    /// The bound it went above.
    pub bound: f64,
    /// The window's start and end, seconds after the step's start barrier.
    pub window_s: (f64, f64),
    /// Requests that ended in the window (any outcome).
    pub requests: u64,
    /// Seconds after the barrier when the coordinator stopped the step.
    pub at_s: f64,
}

impl Aborted {
    /// The reason in words, for the console and `result.json`.
    pub fn reason(&self) -> String {
        let (start, end) = self.window_s;
        let (seen, bound) = if self.condition == "error_rate" {
            (
                format!("{:.1} %", self.observed * 100.0),
                format!("{:.1} %", self.bound * 100.0),
            )
        } else {
            (
                format!("{:.1} ms", self.observed),
                format!("{} ms", self.bound),
            )
        };
        format!(
            "abort.{}: {seen} over {start:.1}-{end:.1} s ({} requests) is above the bound {bound}",
            self.condition, self.requests
        )
    }
}

/// One finalised interval kept in the window.
#[derive(Debug)]
struct Slot {
    start_s: f64,
    end_s: f64,
    set: MetricSet,
}

/// Judges a step's thresholds as its intervals are finalised.
#[derive(Debug)]
pub struct AbortWatch {
    spec: AbortSpec,
    /// Intervals in the sliding window.
    window: usize,
    /// No judgement on an interval ending before this, s after the barrier.
    armed_from_s: f64,
    /// Where measuring starts (the warm-up's end), s after the barrier.
    measured_from_s: f64,
    recent: VecDeque<Slot>,
    tripped: Option<Aborted>,
    /// The trip was taken: nothing more is judged.
    told: bool,
}

impl AbortWatch {
    /// A watch for `spec` in a step whose warm-up ends `warmup_end_us`
    /// after the barrier; none when no threshold is set.
    pub fn new(spec: &AbortSpec, warmup_end_us: u64, interval_s: f64) -> Option<Self> {
        if !spec.armed() {
            return None;
        }
        let interval_s = interval_s.max(1e-3);
        let window = ((spec.window_s / interval_s) - 1e-9).ceil().max(1.0) as usize;
        let measured_from_s = warmup_end_us as f64 / 1e6;
        Some(Self {
            spec: spec.clone(),
            window,
            armed_from_s: spec.after_s.max(measured_from_s),
            measured_from_s,
            recent: VecDeque::new(),
            tripped: None,
            told: false,
        })
    }

    /// A finalised interval: slide the window, judge it once armed.
    pub fn interval(&mut self, row: &IntervalRow, set: &MetricSet) {
        if self.tripped.is_some() || self.told {
            return;
        }
        let end_s = row.start_s + row.length_s;
        // warm-up intervals hold no measured request (their scope is apart)
        if row.start_s + 1e-9 < self.measured_from_s {
            return;
        }
        self.recent.push_back(Slot {
            start_s: row.start_s,
            end_s,
            set: set.clone(),
        });
        while self.recent.len() > self.window {
            self.recent.pop_front();
        }
        if end_s + 1e-9 >= self.armed_from_s {
            self.tripped = self.judge();
        }
    }

    /// The first threshold the window is above, if any.
    fn judge(&self) -> Option<Aborted> {
        let mut merged = MetricSet::default();
        for s in &self.recent {
            // sets merged by the aggregate share one layout: merging cannot fail
            let _ = merged.merge(&s.set);
        }
        let requests = merged.outcomes.sent();
        let trip = |condition: &str, observed: f64, bound: f64| {
            (observed > bound).then(|| Aborted {
                condition: condition.to_string(),
                observed,
                bound,
                window_s: (
                    self.recent.front().map_or(0.0, |s| s.start_s),
                    self.recent.back().map_or(0.0, |s| s.end_s),
                ),
                requests,
                at_s: 0.0,
            })
        };
        let errors = self.spec.error_rate.filter(|_| requests > 0).and_then(|b| {
            let rate = merged.outcomes.failed() as f64 / requests as f64;
            trip("error_rate", rate, b)
        });
        errors.or_else(|| {
            self.spec.latency_bounds().find_map(|(key, metric, bound)| {
                let h = merged.histogram(metric);
                if h.count() == 0 {
                    return None;
                }
                let p99 = h.quantile(0.99) as f64 * metric.unit().display_scale();
                trip(key, p99, bound)
            })
        })
    }

    /// The threshold that tripped, once (then none).
    pub fn take(&mut self) -> Option<Aborted> {
        let tripped = self.tripped.take();
        // once tripped, later intervals are not judged again
        self.told |= tripped.is_some();
        tripped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{Metric, Outcome};

    /// Interval `i` (1 s long) with `ok` successes at `ttft_ms` and `failed` failures.
    fn interval(i: u64, ok: u64, failed: u64, ttft_ms: u64) -> (IntervalRow, MetricSet) {
        let mut set = MetricSet::default();
        for _ in 0..ok {
            set.count_outcome(Outcome::Ok, None);
            set.histogram_mut(Metric::Ttft).record(ttft_ms * 1000);
        }
        for _ in 0..failed {
            set.count_outcome(Outcome::Http(500), None);
        }
        (IntervalRow::of(i, i as f64, 1.0, &set, 0), set)
    }

    fn spec() -> AbortSpec {
        AbortSpec {
            error_rate: Some(0.2),
            p99_ttft_ms: Some(500.0),
            window_s: 3.0,
            after_s: 4.0,
            ..AbortSpec::default()
        }
    }

    #[test]
    fn nothing_trips_before_the_arming_delay() {
        let mut w = AbortWatch::new(&spec(), 0, 1.0).unwrap();
        for i in 0..3 {
            let (row, set) = interval(i, 10, 10, 900);
            w.interval(&row, &set);
            assert_eq!(w.take(), None, "interval {i} ends before 4 s");
        }
        let (row, set) = interval(3, 10, 10, 900);
        w.interval(&row, &set);
        let a = w.take().expect("armed at 4 s");
        assert_eq!(a.condition, "error_rate", "errors are judged first");
        assert!((a.observed - 0.5).abs() < 1e-9);
        assert_eq!(a.window_s, (1.0, 4.0), "the latest 3 intervals");
        assert_eq!(a.requests, 60);
        assert!(
            a.reason().contains("50.0 % over 1.0-4.0 s"),
            "{}",
            a.reason()
        );
        assert_eq!(w.take(), None, "once");
    }

    #[test]
    fn the_window_slides_and_judges_its_merged_p99() {
        let mut w = AbortWatch::new(&spec(), 0, 1.0).unwrap();
        // slow at first, then fast: by 4 s the slow interval has slid out
        for (i, ttft) in [(0, 900), (1, 100), (2, 100), (3, 100)] {
            let (row, set) = interval(i, 100, 0, ttft);
            w.interval(&row, &set);
        }
        assert_eq!(w.take(), None);
        // one slow interval of three: 1/3 of the window's samples, above its p99
        let (row, set) = interval(4, 100, 0, 800);
        w.interval(&row, &set);
        let a = w.take().expect("p99 above 500 ms");
        assert_eq!(a.condition, "p99_ttft_ms");
        assert!((a.observed - 800.0).abs() < 8.0, "{}", a.observed);
        // the error rate's bound is "above": exactly at it does not trip
        let mut at = AbortWatch::new(&spec(), 0, 1.0).unwrap();
        for i in 0..5 {
            let (row, set) = interval(i, 8, 2, 10);
            at.interval(&row, &set);
        }
        assert_eq!(at.take(), None);
    }

    #[test]
    fn the_warm_up_is_never_judged() {
        let s = AbortSpec {
            after_s: 0.0,
            ..spec()
        };
        let mut w = AbortWatch::new(&s, 2_000_000, 1.0).unwrap();
        for i in 0..2 {
            // what a warm-up interval holds in the merge: nothing measured
            let (row, set) = interval(i, 0, 0, 0);
            w.interval(&row, &set);
        }
        assert_eq!(w.take(), None);
        let (row, set) = interval(2, 1, 3, 10);
        w.interval(&row, &set);
        assert_eq!(w.take().unwrap().window_s, (2.0, 3.0));
        assert!(AbortWatch::new(&AbortSpec::default(), 0, 1.0).is_none());
    }
}

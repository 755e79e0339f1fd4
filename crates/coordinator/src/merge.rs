//! Merging worker reports: cumulative per target, and per interval for the
//! time series (flushed to compact rows once every live worker has moved on,
//! so memory does not grow with run length). The merge keeps only merged
//! numbers; what it finalises is handed to the run's outputs by the step
//! (`step::collect`), never from here.

use std::collections::{BTreeMap, BTreeSet};

use cicada_metrics::{MetricSet, MetricsError, Scope};

use cicada_results::abort::{AbortWatch, Aborted};
use cicada_results::client_health::WorkerUsage;
use cicada_results::interval::IntervalRow;
use cicada_results::sink::{IntervalMerged, Shares, Sink, Tick};
use cicada_results::steady::{SteadyState, SteadyWatch};

use crate::fleet::WorkerReport;

/// An interval not every live worker has reported past.
#[derive(Debug, Default)]
struct OpenInterval {
    /// What the workers reported for it, by scope.
    scopes: BTreeMap<Scope, MetricSet>,
    /// Requests in flight at its end, summed over the reports.
    in_flight: u64,
    /// Latest interval end reported, µs since the barrier.
    end_us: u64,
}

/// Everything merged so far for one step.
#[derive(Debug)]
pub struct Aggregate {
    interval_s: f64,
    /// Cumulative measurements per scope (target, stage, warm-up) of the
    /// flushed intervals; `merged` adds the open ones.
    flushed: BTreeMap<Scope, MetricSet>,
    /// Worker health (runtime stalls), cumulative.
    pub health: MetricSet,
    /// Each worker's own resource use.
    pub usage: BTreeMap<u32, WorkerUsage>,
    /// Intervals some live worker has not reported past yet.
    open: BTreeMap<u64, OpenInterval>,
    /// Highest report seq seen per worker.
    progress: BTreeMap<u32, u64>,
    live: BTreeSet<u32>,
    /// Finished intervals in order.
    pub rows: Vec<IntervalRow>,
    last_in_flight: BTreeMap<u32, u64>,
    /// The measurements of the last rows, finalised since the outputs
    /// were last handed them (`hand_over`).
    fresh: Vec<MetricSet>,
    /// The first interval measured since the web UI's reset (0: all of them).
    reset_from: u64,
    /// Finds the steady-state window as intervals are finalised, when the
    /// step's load has a plateau.
    steady: Option<SteadyWatch>,
    /// Judges the `[abort]` thresholds as intervals are finalised.
    abort: Option<AbortWatch>,
}

impl Shares for Aggregate {
    fn merged(&self, keep: &dyn Fn(&Scope) -> bool) -> MetricSet {
        Aggregate::merged(self, keep)
    }
}

impl Aggregate {
    /// An empty aggregate for the given workers.
    pub fn new(interval_s: f64, workers: impl IntoIterator<Item = u32>) -> Self {
        Self {
            interval_s,
            flushed: BTreeMap::new(),
            health: MetricSet::default(),
            usage: BTreeMap::new(),
            open: BTreeMap::new(),
            progress: BTreeMap::new(),
            live: workers.into_iter().collect(),
            rows: Vec::new(),
            last_in_flight: BTreeMap::new(),
            fresh: Vec::new(),
            reset_from: 0,
            steady: None,
            abort: None,
        }
    }

    /// Look for the steady-state window in the intervals to come.
    pub fn watch_steady(&mut self, watch: SteadyWatch) {
        self.steady = Some(watch);
    }

    /// Judge abort thresholds on the intervals to come.
    pub fn watch_abort(&mut self, watch: AbortWatch) {
        self.abort = Some(watch);
    }

    /// The abort threshold an interval tripped, once.
    pub fn take_aborted(&mut self) -> Option<Aborted> {
        self.abort.as_mut().and_then(AbortWatch::take)
    }

    /// The steady state found (once the step's intervals are all flushed).
    pub fn take_steady(&mut self) -> Option<SteadyState> {
        self.steady.take().map(SteadyWatch::finish)
    }

    /// Merge one worker's report (or say why its measurements could not be read).
    pub fn add(&mut self, worker: u32, report: WorkerReport) -> Result<(), MetricsError> {
        let measured = report.measured?;
        // once, into the interval's slot by scope: the cumulative sets take
        // the interval when it is flushed (merging every report into both
        // was half the coordinator's cost per report)
        let slot = self.open.entry(report.seq).or_default();
        for (scope, set) in &measured.scopes {
            slot.scopes.entry(*scope).or_default().merge(set)?;
        }
        if let Some(h) = &measured.health {
            self.health.merge(&h.stalls)?;
            let u = self.usage.entry(worker).or_default();
            u.cpu_us += h.cpu_us;
            u.peak_rss_bytes = u.peak_rss_bytes.max(h.peak_rss_bytes).max(h.rss_bytes);
        }
        slot.in_flight += report.in_flight;
        slot.end_us = slot.end_us.max(report.interval_end_us);
        self.last_in_flight.insert(worker, report.in_flight);
        let p = self.progress.entry(worker).or_insert(0);
        *p = (*p).max(report.seq + 1);
        self.flush(false);
        Ok(())
    }

    /// A worker's heartbeat said it has `in_flight` requests now: fresher
    /// than its last report's count (reports may be many seconds apart).
    pub fn heartbeat(&mut self, worker: u32, in_flight: u64) {
        if self.live.contains(&worker) {
            self.last_in_flight.insert(worker, in_flight);
        }
    }

    /// A worker will send no more reports (done or lost).
    pub fn retire(&mut self, worker: u32) {
        self.live.remove(&worker);
        self.last_in_flight.remove(&worker);
        self.flush(false);
    }

    /// Requests in flight now, by each worker's latest report or heartbeat.
    pub fn in_flight(&self) -> u64 {
        self.last_in_flight.values().sum()
    }

    /// Turn finished intervals into rows; `all` flushes everything (end of step).
    pub fn flush(&mut self, all: bool) {
        let done_below = if all {
            u64::MAX
        } else {
            self.live
                .iter()
                .map(|w| self.progress.get(w).copied().unwrap_or(0))
                .min()
                .unwrap_or(u64::MAX)
        };
        while let Some((&seq, _)) = self.open.first_key_value() {
            if seq >= done_below {
                break;
            }
            if let Some((seq, slot)) = self.open.pop_first() {
                let (in_flight, end_us) = (slot.in_flight, slot.end_us);
                let mut set = MetricSet::default();
                for (scope, part) in slot.scopes {
                    // reports decoded alike share one layout: merging cannot fail
                    if !scope.warmup {
                        let _ = set.merge(&part);
                    }
                    if seq < self.reset_from {
                        // before a reset: in the time series, not the figures
                        continue;
                    }
                    match self.flushed.entry(scope) {
                        std::collections::btree_map::Entry::Vacant(e) => {
                            e.insert(part);
                        }
                        std::collections::btree_map::Entry::Occupied(mut e) => {
                            let _ = e.get_mut().merge(&part);
                        }
                    }
                }
                let start_s = seq as f64 * self.interval_s;
                // the last interval of a step ends early: rates use its real length
                let length_s = match end_us as f64 / 1e6 - start_s {
                    l if end_us > 0 && l > 0.0 => l.min(self.interval_s),
                    _ => self.interval_s,
                };
                let row = IntervalRow::of(seq, start_s, length_s, &set, in_flight);
                if let Some(w) = &mut self.steady {
                    w.interval(&row, &set, seq >= self.reset_from);
                }
                if let Some(w) = &mut self.abort {
                    w.interval(&row, &set);
                }
                self.rows.push(row);
                self.fresh.push(set);
            }
        }
    }

    /// Hand `out` each interval finalised since the last hand-over, in order.
    pub fn hand_over(&mut self, out: &mut dyn Sink) {
        let fresh = std::mem::take(&mut self.fresh);
        let first = self.rows.len() - fresh.len();
        for (row, set) in self.rows[first..].iter().zip(&fresh) {
            out.interval(&IntervalMerged { row, set });
        }
    }

    /// The step so far, `elapsed` after its barrier; `total` is [`Self::total`].
    pub fn tick<'a>(&'a self, elapsed: std::time::Duration, total: &'a MetricSet) -> Tick<'a> {
        Tick {
            elapsed,
            total,
            rows: &self.rows,
            in_flight: self.in_flight(),
            in_flight_by_worker: &self.last_in_flight,
            usage: &self.usage,
            health: &self.health,
            shares: self,
        }
    }

    /// Every scope matching `keep`, merged: flushed intervals and open ones.
    pub fn merged(&self, keep: impl Fn(&Scope) -> bool) -> MetricSet {
        let mut total = MetricSet::default();
        let open = self
            .open
            .range(self.reset_from..)
            .flat_map(|(_, slot)| slot.scopes.iter());
        for (_, set) in self.flushed.iter().chain(open).filter(|(s, _)| keep(s)) {
            // sets decoded from reports share one layout; merging cannot fail
            let _ = total.merge(set);
        }
        total
    }

    /// Locust's reset (`POST /stats/reset`), `elapsed` after the barrier:
    /// the figures start again from the next interval boundary, whose
    /// offset (µs after the barrier) is returned. Every interval merged
    /// so far ended before it; later ones before it are left out as they
    /// come (the time series keeps them all).
    pub fn reset(&mut self, elapsed: std::time::Duration) -> u64 {
        let interval_s = self.interval_s.max(1e-3);
        self.reset_from = (elapsed.as_secs_f64() / interval_s).floor() as u64 + 1;
        self.flushed.clear();
        if let Some(w) = &mut self.steady {
            w.restart();
        }
        self.measured_from_us()
    }

    /// Where the figures start, µs after the barrier (0 without a reset).
    pub fn measured_from_us(&self) -> u64 {
        (self.reset_from as f64 * self.interval_s * 1e6).round() as u64
    }

    /// Everything measured (all targets and steps, without warm-up).
    pub fn total(&self) -> MetricSet {
        self.merged(|s| !s.warmup)
    }

    /// Warm-up requests, kept apart.
    pub fn warmup(&self) -> MetricSet {
        self.merged(|s| s.warmup)
    }
}

/// Worker reports, from their wire bytes, decoded and merged exactly as a
/// run merges them: what `cicada selftest --fleet` times to show the merge's
/// own cost per report.
#[derive(Debug)]
pub struct ReportMerge {
    agg: Aggregate,
}

/// Why a report could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("the report does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error(transparent)]
    Merge(#[from] MetricsError),
}

impl ReportMerge {
    /// An empty merge for `workers` workers reporting every `interval_s` seconds.
    pub fn new(interval_s: f64, workers: u32) -> Self {
        Self {
            agg: Aggregate::new(interval_s, 0..workers),
        }
    }

    /// Decode worker `worker`'s report from its protobuf bytes and merge it.
    pub fn add_encoded(&mut self, worker: u32, bytes: &[u8]) -> Result<(), MergeError> {
        let report = crate::fleet::decode_report(bytes)?;
        self.agg.add(worker, report)?;
        // no outputs: what was finalised is dropped, as a run without files would
        self.agg.hand_over(&mut cicada_results::sink::Sinks::new());
        Ok(())
    }

    /// Everything merged so far (every target, without warm-up).
    pub fn total(&self) -> MetricSet {
        self.agg.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Measured;
    use cicada_metrics::Metric;
    use cicada_metrics::Outcome;

    fn report(seq: u64, ok: u64) -> WorkerReport {
        let mut set = MetricSet::default();
        for _ in 0..ok {
            set.count_outcome(Outcome::Ok, None);
            set.histogram_mut(Metric::Ttft).record(1000);
        }
        WorkerReport {
            step: 0,
            seq,
            sent: ok,
            in_flight: 2,
            interval_end_us: (seq + 1) * 1_000_000 - u64::from(seq == 1) * 600_000,
            measured: Ok(Measured {
                scopes: vec![(Scope::default(), set)],
                ..Measured::default()
            }),
        }
    }

    /// Totals count every report received, flushed into an interval or not;
    /// warm-up stays out of the interval rows and the measured total.
    #[test]
    fn totals_include_open_intervals_and_keep_warmup_apart() {
        let mut a = Aggregate::new(1.0, [0, 1]);
        a.add(0, report(0, 3)).unwrap();
        let mut warm = report(1, 4);
        if let Ok(m) = warm.measured.as_mut() {
            m.scopes[0].0.warmup = true;
        }
        a.add(0, warm).unwrap();
        assert!(a.rows.is_empty(), "worker 1 has not reported");
        assert_eq!(a.total().outcomes.ok(), 3);
        assert_eq!(a.warmup().outcomes.ok(), 4);
        a.add(1, report(0, 2)).unwrap();
        assert_eq!(a.rows.len(), 1);
        assert_eq!(a.rows[0].ok, 5);
        assert_eq!(a.warmup().outcomes.ok(), 4, "open, still counted");
        a.add(1, report(1, 5)).unwrap();
        assert_eq!(a.rows.len(), 2);
        assert_eq!(a.total().outcomes.ok(), 10);
        a.flush(true);
        assert_eq!(a.rows.len(), 2);
        assert_eq!(a.rows[1].ok, 5, "interval 1 without its warm-up");
        assert_eq!(a.total().outcomes.ok(), 10);
        assert_eq!(a.warmup().outcomes.ok(), 4);
        assert_eq!(a.total().histogram(Metric::Ttft).count(), 10);
    }

    #[test]
    fn intervals_flush_when_every_live_worker_moved_on() {
        let mut a = Aggregate::new(1.0, [0, 1]);
        a.add(0, report(0, 3)).unwrap();
        a.add(0, report(1, 1)).unwrap();
        assert!(a.rows.is_empty(), "worker 1 has not reported interval 0");
        a.add(1, report(0, 2)).unwrap();
        assert_eq!(a.rows.len(), 1);
        assert_eq!(a.rows[0].ok, 5);
        assert_eq!(a.rows[0].in_flight, 4);
        a.retire(1);
        a.retire(0);
        a.flush(true);
        assert_eq!(a.rows.len(), 2);
        assert_eq!(a.total().outcomes.ok(), 6);
        assert_eq!(a.rows[1].metric(Metric::Ttft).unwrap().0, 1);
        assert_eq!(a.rows[0].length_s, 1.0);
        assert!(
            (a.rows[1].length_s - 0.4).abs() < 1e-9,
            "the last interval ended early"
        );
        assert_eq!(a.rows[1].start_s, 1.0);
    }

    /// A reset leaves out every interval before the next boundary, flushed
    /// or open, from the figures (not from the time series).
    #[test]
    fn a_reset_starts_the_figures_at_the_next_interval() {
        let mut a = Aggregate::new(1.0, [0, 1]);
        for w in [0, 1] {
            a.add(w, report(0, 3)).unwrap();
        }
        a.add(0, report(1, 4)).unwrap();
        assert_eq!(a.total().outcomes.ok(), 10);
        let from = a.reset(std::time::Duration::from_millis(1_500));
        assert_eq!(from, 2_000_000);
        assert_eq!(
            a.total().outcomes.ok(),
            0,
            "intervals 0 and 1 are before it"
        );
        a.add(1, report(1, 5)).unwrap();
        a.add(0, report(2, 7)).unwrap();
        a.add(1, report(2, 1)).unwrap();
        a.flush(true);
        assert_eq!(a.total().outcomes.ok(), 8, "interval 2 only");
        assert_eq!(a.rows.len(), 3, "the time series keeps every interval");
    }
}

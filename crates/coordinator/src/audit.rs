//! Reports are checked, not trusted. The coordinator's own plan is the truth
//! for what each worker was asked to do; a report is merged only if it is
//! the worker's next one (a repeated report is never counted twice), its
//! requests stay within the worker's planned share, and every figure in it
//! is one a real run could produce: latencies no longer than the step has
//! run, sample counts no larger than its requests, sums that fit its
//! buckets, counters that fit its requests. A worker whose report fails is
//! dropped as lost (what it reported before stays counted), so nothing
//! implausible reaches a published figure and the result says who and why.

use std::collections::BTreeMap;

use cicada_metrics::{Counter, Metric, MetricSet, SLICE_US};

use crate::fleet::{Health, WorkerReport};

/// Slack on "no longer than the step has run": the worker's start instant
/// and the coordinator's may differ by a network delay or a clock fallback.
const SLACK_US: u64 = 30_000_000;
/// Most tokens (or events, or bytes of a count) one request can account for.
const PER_REQUEST: u64 = 1 << 32;
/// Most requests one worker can have in flight (docs/guide/scenario.md: 100,000 per worker).
const MAX_IN_FLIGHT: u64 = 10_000_000;

/// Counters that count requests (at most one per request of the report).
const REQUEST_COUNTERS: [Counter; 18] = [
    Counter::Goodput,
    Counter::TokensFromUsage,
    Counter::TokensFromTokenizer,
    Counter::TokensFromEvents,
    Counter::TokenCountMismatch,
    Counter::ShortOutputs,
    Counter::RequestsHttp2,
    Counter::RequestsReused,
    Counter::TtftBelowServerPrompt,
    Counter::ServerInputRequests,
    Counter::ReasoningRequests,
    Counter::ReasoningTokensFromUsage,
    Counter::ReasoningTokensFromTokenizer,
    Counter::ReasoningTokensFromEvents,
    Counter::ReasoningWithoutAnswer,
    Counter::SessionsStarted,
    Counter::SessionsCompleted,
    Counter::SessionTurns,
];

/// Metrics measured on the worker's own clock, within the step: never
/// longer than the step has run. (The server's own timings are the
/// server's claim, and `output_tps_per_request` is a rate.)
const CLOCKED: [Metric; 22] = [
    Metric::Ttft,
    Metric::Tpot,
    Metric::Itl,
    Metric::Icl,
    Metric::E2el,
    Metric::TtftCo,
    Metric::E2elCo,
    Metric::ScheduleLag,
    Metric::TokenLatency,
    Metric::Ttfa,
    Metric::ReasoningTime,
    Metric::AnswerTpot,
    Metric::AnswerItl,
    Metric::TtftFirstTurn,
    Metric::TtftLaterTurns,
    Metric::TtftTurn2,
    Metric::TtftTurn3,
    Metric::TtftTurn4,
    Metric::TtftTurn5To8,
    Metric::TtftTurn9To16,
    Metric::TtftTurn17Up,
    Metric::SessionDuration,
];

/// Why a report was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    #[error("report {seq} came again (it was merged once already)")]
    Repeated { seq: u64 },
    #[error("report {seq} came out of order (expected {expected})")]
    OutOfOrder { seq: u64, expected: u64 },
    #[error("it reported {reported} requests of its {planned} planned")]
    BeyondPlan { reported: u64, planned: u64 },
    #[error("it said it planned {claimed} requests; the coordinator planned {planned}")]
    PlanMismatch { claimed: u64, planned: u64 },
    #[error(
        "it said {not_sent} requests were due but not sent at the time limit; {rest} of its share were unreported"
    )]
    NotSentBeyondShare { not_sent: u64, rest: u64 },
    #[error("the report cannot be decoded: {0}")]
    Undecodable(String),
    #[error("{what} is {value}, beyond any real run's {bound}")]
    Implausible {
        what: String,
        value: u64,
        bound: u64,
    },
}

fn implausible(what: impl Into<String>, value: u64, bound: u64) -> Refusal {
    Refusal::Implausible {
        what: what.into(),
        value,
        bound,
    }
}

/// `value <= bound`, or the refusal naming `what`.
fn at_most(what: impl FnOnce() -> String, value: u64, bound: u64) -> Result<(), Refusal> {
    if value <= bound {
        Ok(())
    } else {
        Err(implausible(what(), value, bound))
    }
}

/// One worker's account in a step.
#[derive(Debug, Default)]
struct Account {
    /// Requests the coordinator planned for it (`None`: open-ended).
    planned: Option<u64>,
    /// The report seq it must send next.
    next_seq: u64,
    /// Requests its merged reports account for (every outcome).
    reported: u64,
    /// Requests it said were due before the time limit and not sent by then.
    not_sent_at_end: u64,
    /// Sessions the coordinator planned for it (0: none, or open-ended).
    planned_sessions: u64,
    /// Sessions its merged reports say it started.
    sessions_started: u64,
}

/// Every worker's account in one step.
#[derive(Debug, Default)]
pub struct Audit {
    accounts: BTreeMap<u32, Account>,
}

impl Audit {
    /// Accounts for workers with the requests the coordinator planned each
    /// (0: open-ended).
    pub fn new(planned: impl IntoIterator<Item = (u32, u64)>) -> Self {
        let accounts = planned
            .into_iter()
            .map(|(w, p)| {
                let account = Account {
                    planned: (p > 0).then_some(p),
                    ..Account::default()
                };
                (w, account)
            })
            .collect();
        Audit { accounts }
    }

    /// The load changed while it ran (an open loop's rate): every share is
    /// open-ended from now on.
    pub fn open_ended(&mut self) {
        for a in self.accounts.values_mut() {
            a.planned = None;
        }
    }

    /// `worker` is to start `sessions` sessions (a count-bound session run).
    pub fn plan_sessions(&mut self, worker: u32, sessions: u64) {
        self.accounts.entry(worker).or_default().planned_sessions = sessions;
    }

    /// Sessions the coordinator planned for `worker`, and those its merged
    /// reports say it started.
    pub fn sessions(&self, worker: u32) -> (u64, u64) {
        self.accounts
            .get(&worker)
            .map_or((0, 0), |a| (a.planned_sessions, a.sessions_started))
    }

    /// Requests the coordinator planned for `worker` (0: open-ended).
    pub fn planned(&self, worker: u32) -> u64 {
        self.accounts
            .get(&worker)
            .and_then(|a| a.planned)
            .unwrap_or(0)
    }

    /// Requests `worker`'s merged reports account for.
    pub fn reported(&self, worker: u32) -> u64 {
        self.accounts.get(&worker).map_or(0, |a| a.reported)
    }

    /// Requests `worker` said were due before the time limit and not sent.
    pub fn not_sent_at_end(&self, worker: u32) -> u64 {
        self.accounts.get(&worker).map_or(0, |a| a.not_sent_at_end)
    }

    /// The worker ended its share at the time limit with `not_sent` of its
    /// due requests not sent: they must fit the part of its planned share
    /// its reports do not account for (an open-ended share has no limit to
    /// be behind, so it says none).
    pub fn ended_at_limit(&mut self, worker: u32, not_sent: u64) -> Result<(), Refusal> {
        if not_sent == 0 {
            return Ok(());
        }
        let account = self.accounts.entry(worker).or_default();
        let rest = account
            .planned
            .map_or(0, |p| p.saturating_sub(account.reported));
        if not_sent > rest {
            return Err(Refusal::NotSentBeyondShare { not_sent, rest });
        }
        account.not_sent_at_end = not_sent;
        Ok(())
    }

    /// What the worker said it planned, against the coordinator's plan.
    pub fn check_ready(&self, worker: u32, claimed: u64) -> Result<(), Refusal> {
        let planned = self.planned(worker);
        if claimed == planned {
            Ok(())
        } else {
            Err(Refusal::PlanMismatch { claimed, planned })
        }
    }

    /// Check `report` from `worker`, `elapsed_us` after the step's start;
    /// on success its requests are booked and it may be merged.
    pub fn check(
        &mut self,
        worker: u32,
        report: &WorkerReport,
        elapsed_us: u64,
    ) -> Result<(), Refusal> {
        let account = self.accounts.entry(worker).or_default();
        if report.seq < account.next_seq {
            return Err(Refusal::Repeated { seq: report.seq });
        }
        if report.seq > account.next_seq {
            return Err(Refusal::OutOfOrder {
                seq: report.seq,
                expected: account.next_seq,
            });
        }
        let reported = account.reported.saturating_add(report.sent);
        if let Some(planned) = account.planned
            && reported > planned
        {
            return Err(Refusal::BeyondPlan { reported, planned });
        }
        let bound_us = elapsed_us.saturating_add(SLACK_US);
        at_most(
            || "the interval's end (µs after the start)".into(),
            report.interval_end_us,
            bound_us,
        )?;
        at_most(
            || "requests in flight".into(),
            report.in_flight,
            MAX_IN_FLIGHT,
        )?;
        let measured = report
            .measured
            .as_ref()
            .map_err(|e| Refusal::Undecodable(e.to_string()))?;
        for (_, set) in &measured.scopes {
            check_set(set, bound_us)?;
        }
        if let Some(h) = &measured.health {
            check_health(h, bound_us)?;
        }
        account.next_seq += 1;
        account.reported = reported;
        account.sessions_started += measured
            .scopes
            .iter()
            .map(|(_, set)| set.counter(Counter::SessionsStarted))
            .sum::<u64>();
        Ok(())
    }
}

/// One scope's measurements fit its requests and the time the step ran.
fn check_set(set: &MetricSet, bound_us: u64) -> Result<(), Refusal> {
    let requests = set.outcomes.sent();
    let ok = set.outcomes.ok();
    for c in Counter::ALL {
        let bound = if REQUEST_COUNTERS.contains(&c) {
            requests
        } else {
            requests.saturating_mul(PER_REQUEST)
        };
        at_most(|| format!("counter {c}"), set.counter(c), bound)?;
    }
    for (m, h) in set.non_empty() {
        let per_request = !matches!(
            m,
            Metric::Itl | Metric::Icl | Metric::RuntimeStall | Metric::AnswerItl
        );
        let most = if per_request {
            requests
        } else {
            requests.saturating_mul(PER_REQUEST)
        };
        at_most(|| format!("{m} samples"), h.count(), most)?;
        if CLOCKED.contains(&m) || m == Metric::RuntimeStall {
            at_most(|| format!("{m} (µs)"), h.max(), bound_us)?;
        }
        check_sums(m, h)?;
    }
    let end = set.span.last_end_us.unwrap_or(0);
    at_most(|| "the last request's end (µs)".into(), end, bound_us)?;
    let mut completed = 0u64;
    for (second, b) in set.seconds.iter() {
        at_most(
            || "a per-second bucket (s)".into(),
            second,
            bound_us / 1_000_000 + 1,
        )?;
        at_most(
            || "requests active in one second".into(),
            b.active_requests,
            ok,
        )?;
        at_most(
            || "output tokens in one second".into(),
            b.output_tokens,
            ok.saturating_mul(PER_REQUEST),
        )?;
        completed = completed.saturating_add(b.completed);
    }
    at_most(
        || "requests completed per second, summed".into(),
        completed,
        requests,
    )?;
    for (slice, request_us) in set.concurrency.iter() {
        at_most(
            || "a concurrency slice (µs)".into(),
            slice.saturating_mul(SLICE_US),
            bound_us,
        )?;
        at_most(
            || "request-µs in one concurrency slice".into(),
            request_us,
            SLICE_US.saturating_mul(MAX_IN_FLIGHT),
        )?;
    }
    Ok(())
}

/// A histogram's exact sums agree with its buckets: the mean lies between
/// the smallest and the largest sample, the mean square under the largest
/// sample's square. A sample may lie up to a unit beside its bucket's value
/// (a gap split over its tokens is bucketed as its share rounded, and summed
/// exactly), so the bounds allow that.
fn check_sums(m: Metric, h: &cicada_metrics::LatencyHistogram) -> Result<(), Refusal> {
    let n = h.count();
    let lo = n.saturating_mul(h.min().saturating_sub(1));
    let hi = n.saturating_mul(h.max().saturating_add(1));
    if h.sum() < lo || h.sum() > hi {
        return Err(implausible(format!("{m}'s sum"), h.sum(), hi));
    }
    let top = u128::from(h.max()) + 1;
    let most_sq = u128::from(n).saturating_mul(top.saturating_mul(top));
    let sq = h.sum_sq();
    if sq > most_sq {
        let clip = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
        return Err(implausible(
            format!("{m}'s sum of squares"),
            clip(sq),
            clip(most_sq),
        ));
    }
    Ok(())
}

/// The worker's view of itself is one a process could have.
fn check_health(h: &Health, bound_us: u64) -> Result<(), Refusal> {
    for (m, hist) in h.stalls.non_empty() {
        at_most(|| format!("{m} (µs)"), hist.max(), bound_us)?;
        check_sums(m, hist)?;
    }
    // a process on at most 4,096 cores
    at_most(
        || "CPU time (µs)".into(),
        h.cpu_us,
        bound_us.saturating_mul(4096),
    )?;
    at_most(|| "resident memory (bytes)".into(), h.rss_bytes, 1 << 50)?;
    at_most(
        || "peak resident memory (bytes)".into(),
        h.peak_rss_bytes,
        1 << 50,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Measured;
    use cicada_metrics::{Outcome, Scope};

    fn report(seq: u64, ok: u64, ttft_us: u64) -> WorkerReport {
        let mut set = MetricSet::default();
        for _ in 0..ok {
            set.count_outcome(Outcome::Ok, None);
            set.histogram_mut(Metric::Ttft).record(ttft_us);
            set.counters.add(Counter::OutputTokens, 100);
            set.counters.add(Counter::Goodput, 1);
            set.span.include(1_000, 1_000 + ttft_us);
        }
        WorkerReport {
            step: 0,
            seq,
            sent: ok,
            in_flight: 2,
            interval_end_us: (seq + 1) * 1_000_000,
            measured: Ok(Measured {
                scopes: vec![(Scope::default(), set)],
                ..Measured::default()
            }),
        }
    }

    #[test]
    fn honest_reports_pass_and_book_their_requests() {
        let mut a = Audit::new([(0, 10), (1, 0)]);
        a.check(0, &report(0, 4, 50_000), 1_000_000).unwrap();
        a.check(0, &report(1, 6, 50_000), 2_000_000).unwrap();
        assert_eq!(a.reported(0), 10);
        // open-ended: no bound on the count
        a.check(1, &report(0, 1_000, 50_000), 1_000_000).unwrap();
        assert!(a.check_ready(0, 10).is_ok());
        assert_eq!(
            a.check_ready(1, 5),
            Err(Refusal::PlanMismatch {
                claimed: 5,
                planned: 0
            })
        );
    }

    #[test]
    fn requests_not_sent_at_the_limit_must_fit_the_unreported_share() {
        let mut a = Audit::new([(0, 10), (1, 10), (2, 0)]);
        a.check(0, &report(0, 6, 50_000), 1_000_000).unwrap();
        a.check(1, &report(0, 6, 50_000), 1_000_000).unwrap();
        a.ended_at_limit(0, 4).unwrap();
        assert_eq!(a.not_sent_at_end(0), 4);
        assert_eq!(
            a.ended_at_limit(1, 5),
            Err(Refusal::NotSentBeyondShare {
                not_sent: 5,
                rest: 4
            })
        );
        assert_eq!(a.not_sent_at_end(1), 0);
        // an open-ended share has nothing due to be behind on
        assert!(a.ended_at_limit(2, 1).is_err());
        assert!(a.ended_at_limit(2, 0).is_ok());
    }

    /// A reasoning request's answer ITL has one sample per answer token,
    /// many per request; its TTFA one, within the step; at most one
    /// reasoning request per request.
    #[test]
    fn reasoning_figures_are_bounded_like_their_kin() {
        let mut a = Audit::new([(0, 0)]);
        let mut r = report(0, 2, 1_000);
        if let Ok(m) = r.measured.as_mut() {
            let set = &mut m.scopes[0].1;
            set.histogram_mut(Metric::AnswerItl).record_n(5_000, 500);
            set.histogram_mut(Metric::Ttfa).record(90_000);
            set.counters.add(Counter::ReasoningRequests, 2);
            set.counters.add(Counter::ReasoningTokens, 900);
        }
        a.check(0, &r, 4_000_000).unwrap();
        let mut r = report(1, 2, 1_000);
        if let Ok(m) = r.measured.as_mut() {
            m.scopes[0].1.counters.add(Counter::ReasoningRequests, 3);
        }
        assert!(matches!(
            a.check(0, &r, 4_000_000),
            Err(Refusal::Implausible { .. })
        ));
        let mut r = report(1, 2, 1_000);
        if let Ok(m) = r.measured.as_mut() {
            m.scopes[0]
                .1
                .histogram_mut(Metric::Ttfa)
                .record(100_000_000);
        }
        assert!(matches!(
            a.check(0, &r, 4_000_000),
            Err(Refusal::Implausible { .. })
        ));
    }

    #[test]
    fn a_repeated_or_skipped_report_is_refused_and_counts_once() {
        let mut a = Audit::new([(0, 100)]);
        a.check(0, &report(0, 4, 50_000), 1_000_000).unwrap();
        assert_eq!(
            a.check(0, &report(0, 4, 50_000), 1_000_000),
            Err(Refusal::Repeated { seq: 0 })
        );
        assert_eq!(
            a.check(0, &report(2, 4, 50_000), 1_000_000),
            Err(Refusal::OutOfOrder {
                seq: 2,
                expected: 1
            })
        );
        assert_eq!(a.reported(0), 4);
    }

    #[test]
    fn forged_figures_are_refused() {
        let mut a = Audit::new([(0, 400)]);
        // more requests than its stripe planned
        assert!(matches!(
            a.check(0, &report(0, 401, 1_000), 1_000_000),
            Err(Refusal::BeyondPlan { .. })
        ));
        // a TTFT of 10^18 µs four seconds into the step
        assert!(matches!(
            a.check(0, &report(0, 1, 1_000_000_000_000_000_000), 4_000_000),
            Err(Refusal::Implausible { .. })
        ));
        // a counter at u64::MAX
        let mut r = report(0, 1, 1_000);
        if let Ok(m) = r.measured.as_mut() {
            m.scopes[0].1.counters.add(Counter::OutputTokens, u64::MAX);
        }
        assert!(matches!(
            a.check(0, &r, 4_000_000),
            Err(Refusal::Implausible { .. })
        ));
        // a sum that no samples in those buckets can have (a forged mean)
        let mut r = report(0, 1, 1_000);
        if let Ok(m) = r.measured.as_mut() {
            let h = m.scopes[0].1.histogram(Metric::Ttft).clone();
            let forged = cicada_metrics::LatencyHistogram::decode(
                &h.encode(),
                1_000_000_000_000,
                h.sum_sq(),
            )
            .unwrap();
            m.scopes[0].1.set_histogram(Metric::Ttft, forged);
        }
        assert!(matches!(
            a.check(0, &r, 4_000_000),
            Err(Refusal::Implausible { .. })
        ));
        // a sum of squares no samples in those buckets can have (a forged
        // spread), up to one past 2^64
        for sq in [1u128 << 80, u128::MAX] {
            let mut r = report(0, 1, 1_000);
            if let Ok(m) = r.measured.as_mut() {
                let h = m.scopes[0].1.histogram(Metric::Ttft).clone();
                let forged =
                    cicada_metrics::LatencyHistogram::decode(&h.encode(), h.sum(), sq).unwrap();
                m.scopes[0].1.set_histogram(Metric::Ttft, forged);
            }
            assert!(matches!(
                a.check(0, &r, 4_000_000),
                Err(Refusal::Implausible { .. })
            ));
        }
        // more goodput requests than requests
        let mut r = report(0, 1, 1_000);
        if let Ok(m) = r.measured.as_mut() {
            m.scopes[0].1.counters.add(Counter::Goodput, 5);
        }
        assert!(a.check(0, &r, 4_000_000).is_err());
        // none of these was booked
        assert_eq!(a.reported(0), 0);
        a.check(0, &report(0, 1, 1_000), 4_000_000).unwrap();
        assert_eq!(a.reported(0), 1);
    }
}

//! The run's verdict on its last line. When most of a run's requests failed,
//! its latency and throughput figures describe the few that succeeded; the
//! run says so plainly where a reader (or `tail -n 1`) looks last, and,
//! unless `output.max_failure_ratio` sets another limit, exits 4.

use std::fmt;

use cicada_metrics::{Outcome, Outcomes};

use super::RunResult;

/// A run in which more than half of the requests failed (docs/guide/results.md, "Exit codes").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MostlyFailed {
    /// Requests judged: every request sent, less those the run cancelled
    /// itself (a signal, `cooldown = "cancel"`), which say nothing of the server.
    pub judged: u64,
    /// Judged requests that failed.
    pub failed: u64,
    /// Requests left out as cancelled.
    pub cancelled: u64,
    /// Each failure class and its count, the largest first.
    pub classes: Vec<(Outcome, u64)>,
    /// No `output.max_failure_ratio` was set: this verdict gives exit code 4.
    pub sets_exit_code: bool,
}

/// The verdict over every step of a run (warm-up excluded): `Some` when more
/// than half of the judged requests failed, none succeeding included.
pub fn mostly_failed<'a>(steps: impl IntoIterator<Item = &'a RunResult>) -> Option<MostlyFailed> {
    let mut all = Outcomes::default();
    let mut gated = false;
    for r in steps {
        all.merge(&r.total.outcomes);
        gated |= r.scenario.output.max_failure_ratio.is_some();
    }
    let cancelled = all.count(Outcome::Cancelled);
    let judged = all.sent() - cancelled;
    let failed = all.failed() - cancelled;
    if judged == 0 || failed * 2 <= judged {
        return None;
    }
    let mut classes: Vec<(Outcome, u64)> = all
        .failures()
        .filter(|(o, _)| *o != Outcome::Cancelled)
        .map(|(o, c)| (o, c.count))
        .collect();
    classes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Some(MostlyFailed {
        judged,
        failed,
        cancelled,
        classes,
        sets_exit_code: !gated,
    })
}

impl fmt::Display for MostlyFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.failed == self.judged {
            write!(f, "RUN FAILED: all {} requests failed", self.judged)?;
        } else {
            write!(
                f,
                "RUN MOSTLY FAILED: {} of {} requests failed",
                self.failed, self.judged
            )?;
        }
        let classes: Vec<String> = self
            .classes
            .iter()
            .map(|(o, n)| format!("{o}: {n}"))
            .collect();
        write!(f, " ({})", classes.join(", "))?;
        if self.cancelled > 0 {
            write!(
                f,
                ", not counting {} cancelled when the run stopped",
                self.cancelled
            )?;
        }
        if self.sets_exit_code {
            write!(
                f,
                "; exit code 4 (more than half failed; output.max_failure_ratio sets another limit)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::result;
    use cicada_scenarios::Scenario;

    #[test]
    fn more_than_half_failed_is_said_with_every_class() {
        let mut r = result(Scenario::default(), 16, 16, 380);
        r.total.outcomes.add_n(Outcome::Connect, 4, Some("refused"));
        let v = mostly_failed([&r]).unwrap();
        assert_eq!(
            v.to_string(),
            "RUN MOSTLY FAILED: 384 of 400 requests failed (http_500: 380, connect: 4); \
             exit code 4 (more than half failed; output.max_failure_ratio sets another limit)"
        );
        // half or fewer: nothing to say
        assert_eq!(mostly_failed([&result(Scenario::default(), 5, 5, 5)]), None);
        assert_eq!(mostly_failed([&result(Scenario::default(), 0, 0, 0)]), None);
        // summed over the steps of a sweep
        let (a, b) = (
            result(Scenario::default(), 9, 9, 1),
            result(Scenario::default(), 1, 1, 9),
        );
        assert_eq!(mostly_failed([&a, &b]), None);
    }

    #[test]
    fn none_succeeding_cancelled_left_out_and_an_explicit_limit() {
        let mut s = Scenario::default();
        s.output.max_failure_ratio = Some(1.0);
        let mut r = result(s, 0, 0, 10);
        r.total.outcomes.add_n(Outcome::Cancelled, 30, None);
        let v = mostly_failed([&r]).unwrap();
        assert!(!v.sets_exit_code);
        assert_eq!(
            v.to_string(),
            "RUN FAILED: all 10 requests failed (http_500: 10), not counting 30 cancelled when the run stopped"
        );
        // cancelled requests alone are no verdict on the server
        let mut r = result(Scenario::default(), 10, 10, 0);
        r.total.outcomes.add_n(Outcome::Cancelled, 30, None);
        assert_eq!(mostly_failed([&r]), None);
    }
}

//! Run gates for CI: a run "fails" when too many requests failed
//! (`output.max_failure_ratio`; without it, more than half of the run's),
//! or too few met the SLO (`slo.min_attainment`), and `cicada run` then
//! exits with a code of its own.

use std::fmt;

use cicada_metrics::Counter;
use serde::Serialize;

use super::RunResult;

/// Which gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateKind {
    /// Failed / sent must not exceed `output.max_failure_ratio`.
    MaxFailureRatio,
    /// Requests meeting every `[slo]` bound / sent must reach `slo.min_attainment`.
    MinSloAttainment,
}

impl GateKind {
    /// The scenario key that sets the gate.
    pub fn key(self) -> &'static str {
        match self {
            GateKind::MaxFailureRatio => "output.max_failure_ratio",
            GateKind::MinSloAttainment => "slo.min_attainment",
        }
    }

    /// Name in `result.json` (`cicada.gates`).
    pub fn name(self) -> &'static str {
        match self {
            GateKind::MaxFailureRatio => "max_failure_ratio",
            GateKind::MinSloAttainment => "min_slo_attainment",
        }
    }
}

/// One gate's verdict on one result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gate {
    pub kind: GateKind,
    /// The configured limit.
    pub limit: f64,
    /// The measured ratio (0..1).
    pub value: f64,
    pub passed: bool,
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |v: f64| format!("{:.2} %", v * 100.0);
        match (self.kind, self.passed) {
            (GateKind::MaxFailureRatio, true) => write!(
                f,
                "failure ratio {} is within {} {}",
                pct(self.value),
                self.kind.key(),
                pct(self.limit)
            ),
            (GateKind::MaxFailureRatio, false) => write!(
                f,
                "failure ratio {} exceeds {} {}",
                pct(self.value),
                self.kind.key(),
                pct(self.limit)
            ),
            (GateKind::MinSloAttainment, true) => write!(
                f,
                "SLO attainment {} reaches {} {}",
                pct(self.value),
                self.kind.key(),
                pct(self.limit)
            ),
            (GateKind::MinSloAttainment, false) => write!(
                f,
                "SLO attainment {} is below {} {}",
                pct(self.value),
                self.kind.key(),
                pct(self.limit)
            ),
        }
    }
}

/// Every configured gate's verdict on a result (empty when none is set).
///
/// Failure ratio = failed / sent (0 when nothing was sent); attainment =
/// successful requests meeting every `[slo]` bound / sent (0 when nothing was
/// sent, so an empty run never passes an SLO gate).
pub fn evaluate(r: &RunResult) -> Vec<Gate> {
    let sent = r.total.outcomes.sent();
    let ratio = |n: u64| {
        if sent == 0 {
            0.0
        } else {
            n as f64 / sent as f64
        }
    };
    let mut out = Vec::new();
    if let Some(limit) = r.scenario.output.max_failure_ratio {
        let value = ratio(r.total.outcomes.failed());
        out.push(Gate {
            kind: GateKind::MaxFailureRatio,
            limit,
            value,
            passed: value <= limit,
        });
    }
    if let Some(limit) = r.scenario.slo.min_attainment {
        let value = ratio(r.total.counter(Counter::Goodput));
        out.push(Gate {
            kind: GateKind::MinSloAttainment,
            limit,
            value,
            passed: value >= limit,
        });
    }
    out
}

/// The gate that fails a run whose results are `results` (its steps), which
/// the binary turns into its exit code: the failure-ratio gate if any result failed that gate, or, with no
/// `output.max_failure_ratio` set, if more than half of the run's requests
/// failed ([`super::verdict`]); else the SLO gate; else None.
pub fn failed_gate<'a, I>(results: I) -> Option<GateKind>
where
    I: IntoIterator<Item = &'a RunResult>,
    I::IntoIter: Clone,
{
    let results = results.into_iter();
    let mut failed: Vec<GateKind> = results
        .clone()
        .flat_map(evaluate)
        .filter(|g| !g.passed)
        .map(|g| g.kind)
        .collect();
    if super::verdict::mostly_failed(results).is_some_and(|v| v.sets_exit_code) {
        failed.push(GateKind::MaxFailureRatio);
    }
    [GateKind::MaxFailureRatio, GateKind::MinSloAttainment]
        .into_iter()
        .find(|k| failed.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::result;
    use cicada_scenarios::Scenario;

    #[test]
    fn gates_pass_and_fail_at_their_limits() {
        let mut s = Scenario::default();
        assert!(evaluate(&result(s.clone(), 9, 9, 1)).is_empty());
        assert_eq!(failed_gate([&result(s.clone(), 9, 9, 1)]), None);
        s.output.max_failure_ratio = Some(0.1);
        s.slo.ttft_ms = Some(100.0);
        s.slo.min_attainment = Some(0.8);
        let at_limits = result(s.clone(), 9, 8, 1);
        let g = evaluate(&at_limits);
        assert!(g.iter().all(|g| g.passed), "{g:?}");
        assert_eq!(failed_gate([&at_limits]), None);
        let too_many_failures = result(s.clone(), 8, 8, 2);
        assert_eq!(
            failed_gate([&too_many_failures]),
            Some(GateKind::MaxFailureRatio)
        );
        let g = evaluate(&too_many_failures);
        assert!(
            g[0].to_string()
                .contains("exceeds output.max_failure_ratio")
        );
        let slo_missed = result(s.clone(), 10, 7, 0);
        assert_eq!(
            failed_gate([&at_limits, &slo_missed]),
            Some(GateKind::MinSloAttainment)
        );
        assert!(
            evaluate(&slo_missed)[1]
                .to_string()
                .contains("below slo.min_attainment")
        );
        // the failure gate's code wins when both fail
        let both = result(s.clone(), 1, 0, 9);
        assert_eq!(
            failed_gate([&slo_missed, &both]),
            Some(GateKind::MaxFailureRatio)
        );
        // nothing sent: no failures, but no attainment either
        let empty = result(s, 0, 0, 0);
        let g = evaluate(&empty);
        assert!(g[0].passed && !g[1].passed, "{g:?}");
    }

    #[test]
    fn a_mostly_failed_run_exits_4_unless_a_failure_limit_is_set() {
        let mut s = Scenario::default();
        assert_eq!(failed_gate([&result(s.clone(), 5, 5, 5)]), None);
        assert_eq!(
            failed_gate([&result(s.clone(), 4, 4, 6)]),
            Some(GateKind::MaxFailureRatio)
        );
        // over the whole run: a failing step among good ones is not enough
        let good = result(s.clone(), 10, 10, 0);
        assert_eq!(failed_gate([&good, &result(s.clone(), 1, 1, 9)]), None);
        // before the SLO gate's code, as an explicit failure gate would be
        s.slo.ttft_ms = Some(100.0);
        s.slo.min_attainment = Some(0.9);
        assert_eq!(
            failed_gate([&result(s.clone(), 1, 0, 9)]),
            Some(GateKind::MaxFailureRatio)
        );
        // an explicit limit replaces the default one
        s.slo = Default::default();
        s.output.max_failure_ratio = Some(1.0);
        assert_eq!(failed_gate([&result(s, 0, 0, 10)]), None);
    }
}

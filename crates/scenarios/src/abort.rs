//! `[abort]`: thresholds that stop a step mid-run (k6's `abortOnFail`),
//! judged by the coordinator over a sliding window of merged report
//! intervals once an arming delay has passed.

use cicada_metrics::Metric;
use serde::{Deserialize, Serialize};

/// Abort thresholds (see `docs/METRICS.md`); none set: nothing is judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AbortSpec {
    /// Stop when the share of requests ended in the window that failed is above this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
    /// Stop when the window's p99 TTFT is above this many ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ttft_ms: Option<f64>,
    /// Stop when the window's p99 inter-token latency is above this many ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_itl_ms: Option<f64>,
    /// Stop when the window's p99 end-to-end latency is above this many ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_e2el_ms: Option<f64>,
    /// Length of the sliding window, seconds (rounded up to whole report intervals).
    pub window_s: f64,
    /// Arming delay: nothing is judged before this many seconds after the
    /// step's start (past the warm-up, which is never judged).
    pub after_s: f64,
}

impl Default for AbortSpec {
    fn default() -> Self {
        Self {
            error_rate: None,
            p99_ttft_ms: None,
            p99_itl_ms: None,
            p99_e2el_ms: None,
            window_s: 10.0,
            after_s: 10.0,
        }
    }
}

impl AbortSpec {
    /// Nothing set: left out of a resolved scenario.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// Some threshold is set: the coordinator judges the step.
    pub fn armed(&self) -> bool {
        self.bounds().next().is_some()
    }

    /// The latency bounds set, as (key, the metric whose p99 it bounds,
    /// bound in ms): the one place a key is tied to its metric.
    pub fn latency_bounds(&self) -> impl Iterator<Item = (&'static str, Metric, f64)> {
        [
            ("p99_ttft_ms", Metric::Ttft, self.p99_ttft_ms),
            ("p99_itl_ms", Metric::Itl, self.p99_itl_ms),
            ("p99_e2el_ms", Metric::E2el, self.p99_e2el_ms),
        ]
        .into_iter()
        .filter_map(|(k, m, b)| b.map(|b| (k, m, b)))
    }

    /// Every threshold set, as (key, bound).
    fn bounds(&self) -> impl Iterator<Item = (&'static str, f64)> {
        self.error_rate
            .map(|b| ("error_rate", b))
            .into_iter()
            .chain(self.latency_bounds().map(|(k, _, b)| (k, b)))
    }

    /// Its problems as (dotted key, message).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut bad = |key: &str, msg: String| out.push((format!("abort.{key}"), msg));
        if let Some(r) = self.error_rate
            && !(r > 0.0 && r <= 1.0)
        {
            bad(
                "error_rate",
                format!("{r}: a share of the requests, above 0 and at most 1 (e.g. 0.05)"),
            );
        }
        for (key, _, b) in self.latency_bounds() {
            if !(b.is_finite() && b > 0.0) {
                bad(key, format!("{b}: a bound in ms, above 0 (e.g. 2000)"));
            }
        }
        if !(self.window_s.is_finite() && self.window_s > 0.0) {
            bad(
                "window_s",
                format!("{}: a window in seconds, above 0 (e.g. 10)", self.window_s),
            );
        }
        if !(self.after_s.is_finite() && self.after_s >= 0.0) {
            bad(
                "after_s",
                format!("{}: a delay in seconds, 0 or more (e.g. 10)", self.after_s),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_thresholds_are_named() {
        assert!(AbortSpec::default().problems().is_empty());
        assert!(!AbortSpec::default().armed());
        let bad = AbortSpec {
            error_rate: Some(0.0),
            p99_ttft_ms: Some(-1.0),
            p99_itl_ms: Some(5.0),
            p99_e2el_ms: None,
            window_s: -10.0,
            after_s: f64::NAN,
        };
        assert!(bad.armed());
        let keys: Vec<String> = bad.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "abort.error_rate",
                "abort.p99_ttft_ms",
                "abort.window_s",
                "abort.after_s"
            ]
        );
        let whole = AbortSpec {
            error_rate: Some(1.0),
            ..AbortSpec::default()
        };
        assert!(whole.problems().is_empty(), "1 is a share");
    }
}

use serde::{Deserialize, Serialize};

/// Service-level objectives a request must meet to count towards goodput.
///
/// Each bound is optional; a request meets the SLO when it succeeded and every
/// given bound holds. Bounds are in milliseconds, like `vllm bench serve --goodput`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    /// Time to first token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Time per output token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// End-to-end latency, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el_ms: Option<f64>,
    /// Largest per-token inter-token latency within the request, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<f64>,
    /// Time to first answer token, ms: a request that reasoned is judged on
    /// its TTFA (and fails without an answer), one that did not on its TTFT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfa_ms: Option<f64>,
    /// Run gate: the least share of sent requests that must meet every bound
    /// (0..1]; below it `cicada run` exits non-zero. Not a per-request bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_attainment: Option<f64>,
}

impl Slo {
    /// True when at least one bound is set (goodput is only reported then).
    pub fn is_set(&self) -> bool {
        self.ttft_ms.is_some()
            || self.tpot_ms.is_some()
            || self.e2el_ms.is_some()
            || self.itl_ms.is_some()
            || self.ttfa_ms.is_some()
    }

    /// Whether a request's time to first answer token (µs; `None` when it
    /// reasoned and never answered) meets the TTFA bound.
    pub fn answer_met(&self, ttfa_us: Option<u64>) -> bool {
        match (self.ttfa_ms, ttfa_us) {
            (None, _) => true,
            (Some(ms), Some(us)) => us as f64 <= ms * 1000.0,
            (Some(_), None) => false,
        }
    }

    /// Whether a successful request with these latencies (µs) meets every bound.
    ///
    /// `tpot_us` is `None` for single-token outputs (which then pass the TPOT
    /// bound, as in vLLM); `max_itl_us` is `None` when there was no token gap.
    pub fn met(
        &self,
        ttft_us: u64,
        tpot_us: Option<u64>,
        e2el_us: u64,
        max_itl_us: Option<u64>,
    ) -> bool {
        let within = |bound: Option<f64>, value_us: Option<u64>| match (bound, value_us) {
            (Some(ms), Some(us)) => us as f64 <= ms * 1000.0,
            _ => true,
        };
        within(self.ttft_ms, Some(ttft_us))
            && within(self.tpot_ms, tpot_us)
            && within(self.e2el_ms, Some(e2el_us))
            && within(self.itl_ms, max_itl_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_given_bound_must_hold() {
        let slo = Slo {
            ttft_ms: Some(500.0),
            tpot_ms: Some(50.0),
            ..Slo::default()
        };
        assert!(slo.is_set());
        assert!(slo.met(500_000, Some(50_000), 9_999_999, None));
        assert!(!slo.met(500_001, Some(10_000), 1, None));
        assert!(!slo.met(1, Some(50_001), 1, None));
        assert!(slo.met(1, None, 1, Some(1_000_000)));
        assert!(!Slo::default().is_set());
    }

    #[test]
    fn the_answer_bound_fails_a_request_that_never_answered() {
        let slo = Slo {
            ttfa_ms: Some(2.0),
            ..Slo::default()
        };
        assert!(slo.is_set());
        assert!(slo.answer_met(Some(2_000)));
        assert!(!slo.answer_met(Some(2_001)));
        assert!(!slo.answer_met(None), "thought and never answered");
        assert!(Slo::default().answer_met(None), "no bound, nothing to fail");
    }
}

//! `[steady_state]`: when an interval counts as the load's plateau, so the
//! figures over the plateau can be reported beside the whole step's.

use serde::{Deserialize, Serialize};

/// Thresholds of the steady-state window (see `docs/METRICS.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SteadySpec {
    /// Closed loops and capped bursts: an interval is at the plateau when
    /// the requests in flight at its start and at its end are both at least
    /// this share of the step's peak users (or cap).
    pub in_flight_fraction: f64,
    /// Open loops: an interval is at the plateau when its achieved rate
    /// (requests ended per second) is within this share of the step's peak
    /// target rate.
    pub rate_band: f64,
}

impl Default for SteadySpec {
    fn default() -> Self {
        Self {
            in_flight_fraction: 0.9,
            rate_band: 0.1,
        }
    }
}

impl SteadySpec {
    /// Nothing set: left out of a resolved scenario.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// Its problems as (dotted key, message).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if !(self.in_flight_fraction > 0.0 && self.in_flight_fraction <= 1.0) {
            out.push((
                "steady_state.in_flight_fraction".to_string(),
                format!(
                    "{}: a share of the cap, above 0 and at most 1 (e.g. 0.9)",
                    self.in_flight_fraction
                ),
            ));
        }
        if !(self.rate_band > 0.0 && self.rate_band < 1.0) {
            out.push((
                "steady_state.rate_band".to_string(),
                format!(
                    "{}: a share of the target rate, strictly between 0 and 1 (e.g. 0.1 = ±10 %)",
                    self.rate_band
                ),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_thresholds_are_named() {
        assert!(SteadySpec::default().problems().is_empty());
        let bad = SteadySpec {
            in_flight_fraction: 0.0,
            rate_band: 1.5,
        };
        let keys: Vec<String> = bad.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            ["steady_state.in_flight_fraction", "steady_state.rate_band"]
        );
    }
}

//! `[saturation]`: when an open loop's server counts as unable to keep up
//! (its queue growing), and whether the step then stops early.

use serde::{Deserialize, Serialize};

/// Over-saturation detection and the early stop (see `docs/METRICS.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SaturationSpec {
    /// Stop the step once it is saturated, keeping every result so far; a
    /// sweep then skips its higher points.
    pub stop: bool,
    /// Report intervals judged at once (the latest ones); also how many
    /// must have passed, after the warm-up, before any judgement.
    pub intervals: u32,
    /// Least t statistic of the rising slope of mean TTFT or schedule lag
    /// over those intervals for the trend to count.
    pub min_t: f64,
    /// Saturated only if the achieved rate over those intervals is below
    /// the target rate by more than this share.
    pub rate_shortfall: f64,
}

impl Default for SaturationSpec {
    fn default() -> Self {
        Self {
            stop: false,
            intervals: 5,
            min_t: 3.0,
            rate_shortfall: 0.1,
        }
    }
}

impl SaturationSpec {
    /// Nothing set: left out of a resolved scenario.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// Its problems as (dotted key, message).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.intervals < 3 {
            out.push((
                "saturation.intervals".to_string(),
                format!("{}: a slope needs at least 3 intervals", self.intervals),
            ));
        }
        if !(self.min_t.is_finite() && self.min_t > 0.0) {
            out.push((
                "saturation.min_t".to_string(),
                format!("{}: a t statistic above 0 (e.g. 3)", self.min_t),
            ));
        }
        if !(self.rate_shortfall >= 0.0 && self.rate_shortfall < 1.0) {
            out.push((
                "saturation.rate_shortfall".to_string(),
                format!(
                    "{}: a share of the target rate, 0 or more and below 1 (e.g. 0.1)",
                    self.rate_shortfall
                ),
            ));
        }
        out
    }
}

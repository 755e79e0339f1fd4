//! `[run]`: how many times the whole scenario runs (`--num-runs`), with
//! which seeds, and how the runs' spread is judged.

use serde::{Deserialize, Serialize};

/// Repeated runs of one scenario, summarised with confidence intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSpec {
    /// How many independent runs (`--num-runs`); each writes its own
    /// results under `run-<i>/` of the output directory when more than one.
    pub repeats: u32,
    /// Run `i` (from 1) uses `seed + i − 1` and `mock.seed + i − 1`; false
    /// keeps the same seeds every run (`--same-seed`).
    pub vary_seed: bool,
    /// Confidence level of the intervals in the summary, in (0, 1).
    pub level: f64,
    /// Warn when a figure's coefficient of variation across runs exceeds this.
    pub cv_warn: f64,
}

impl Default for RunSpec {
    fn default() -> Self {
        Self {
            repeats: 1,
            vary_seed: true,
            level: 0.95,
            cv_warn: 0.10,
        }
    }
}

impl RunSpec {
    /// Nothing set: left out of a resolved scenario.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// Run `i`'s (from 1) seeds from the scenario's `seed` and `mock.seed`.
    pub fn seeds(&self, i: u32, seed: u64, mock_seed: u64) -> (u64, u64) {
        let step = if self.vary_seed {
            u64::from(i.saturating_sub(1))
        } else {
            0
        };
        (seed.wrapping_add(step), mock_seed.wrapping_add(step))
    }

    /// Its problems as (dotted key, message).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.repeats == 0 {
            out.push((
                "run.repeats".to_string(),
                "0 runs: a scenario runs at least once (1 = no repeats)".to_string(),
            ));
        }
        if !(self.level > 0.0 && self.level < 1.0) {
            out.push((
                "run.level".to_string(),
                format!(
                    "{}: a confidence level lies strictly between 0 and 1 (e.g. 0.95)",
                    self.level
                ),
            ));
        }
        if !(self.cv_warn.is_finite() && self.cv_warn >= 0.0) {
            out.push((
                "run.cv_warn".to_string(),
                format!(
                    "{}: a coefficient of variation is 0 or more (0.1 = 10 %)",
                    self.cv_warn
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
    fn seeds_step_per_run_unless_fixed() {
        let mut r = RunSpec::default();
        assert_eq!(r.seeds(1, 7, 3), (7, 3));
        assert_eq!(r.seeds(4, 7, 3), (10, 6));
        r.vary_seed = false;
        assert_eq!(r.seeds(4, 7, 3), (7, 3));
    }

    #[test]
    fn zero_runs_and_levels_outside_zero_one_are_problems() {
        let r = RunSpec {
            repeats: 0,
            level: 1.0,
            cv_warn: -1.0,
            ..RunSpec::default()
        };
        let keys: Vec<String> = r.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["run.repeats", "run.level", "run.cv_warn"]);
        assert!(RunSpec::default().problems().is_empty());
    }
}

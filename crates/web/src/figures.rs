//! How the JSON writes figures: latencies in ms, two decimals.

use cicada_metrics::LatencyHistogram;

/// Quantile `q` of `h` in ms (0 when empty).
pub(super) fn ms(h: &LatencyHistogram, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.quantile(q) as f64 / 1e3
    }
}

/// `v` to two decimals, as the JSON shows figures.
pub(super) fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

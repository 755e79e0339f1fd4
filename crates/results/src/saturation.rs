//! Over-saturation: an open loop's server that cannot keep up, judged from
//! the merged interval rows as they come: its queue growing (mean TTFT or
//! schedule lag rising with a significant slope) while the achieved rate
//! stays below the target.

use cicada_metrics::Metric;
use cicada_scenarios::scenario::SaturationSpec;

use crate::interval::IntervalRow;

/// A step whose server was found saturated, and whether it was stopped then.
#[derive(Debug, Clone, PartialEq)]
pub struct Saturated {
    /// Why, with the figures that decided it.
    pub reason: String,
    /// Seconds after the step's start barrier when it was decided.
    pub at_s: f64,
    /// The step was stopped there (`saturation.stop`), keeping every result so far.
    pub stopped: bool,
}

/// Metrics whose rising mean shows a growing queue: at the server (TTFT)
/// or, under a concurrency cap, at the client (schedule lag).
const QUEUE_METRICS: [Metric; 2] = [Metric::Ttft, Metric::ScheduleLag];

/// Whether the latest `spec.intervals` whole intervals starting at or after
/// `from_us` show saturation against `target` req/s; the reason if so.
pub fn judge(
    rows: &[IntervalRow],
    target: f64,
    from_us: u64,
    interval_s: f64,
    spec: &SaturationSpec,
) -> Option<String> {
    let n = spec.intervals as usize;
    let measured: Vec<&IntervalRow> = rows
        .iter()
        .filter(|r| (r.start_s * 1e6).round() as u64 >= from_us && r.length_s >= interval_s * 0.99)
        .collect();
    let last = measured.get(measured.len().checked_sub(n)?..)?;
    let ended: u64 = last.iter().map(|r| r.ended).sum();
    let length: f64 = last.iter().map(|r| r.length_s).sum();
    let rate = ended as f64 / length;
    if rate >= (1.0 - spec.rate_shortfall) * target {
        return None;
    }
    QUEUE_METRICS.iter().find_map(|m| {
        let points: Vec<(f64, f64)> = last
            .iter()
            .filter_map(|r| r.metric(*m).map(|(_, mean, ..)| (r.start_s, mean)))
            .collect();
        let (slope, t) = trend(&points)?;
        (slope > 0.0 && t >= spec.min_t).then(|| {
            format!(
                "saturated: mean {} rose {slope:.1} ms per second over the last {n} intervals \
                 (t = {t:.1}) while the achieved rate, {rate:.2} req/s, was below the target \
                 {target:.2} req/s by more than {:.0} %",
                m.name(),
                spec.rate_shortfall * 100.0
            )
        })
    })
}

/// Least-squares slope of `points` and its t statistic (infinite for a
/// perfect line); none for fewer than 3 points or no spread in x.
fn trend(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let k = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / k;
    let my = points.iter().map(|p| p.1).sum::<f64>() / k;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let residual: f64 = points
        .iter()
        .map(|p| (p.1 - my - slope * (p.0 - mx)).powi(2))
        .sum();
    let se = (residual / (k - 2.0) / sxx).sqrt();
    let t = if se > 0.0 {
        slope / se
    } else {
        f64::INFINITY * slope.signum()
    };
    Some((slope, t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_metrics::{MetricSet, Outcome};

    fn row(i: u64, ended: u64, ttft_us: u64) -> IntervalRow {
        let mut set = MetricSet::default();
        for _ in 0..ended {
            set.count_outcome(Outcome::Ok, None);
            set.histogram_mut(Metric::Ttft).record(ttft_us);
        }
        IntervalRow::of(i, i as f64, 1.0, &set, 0)
    }

    #[test]
    fn a_rising_ttft_below_the_rate_is_saturation() {
        let spec = SaturationSpec::default();
        let rising: Vec<IntervalRow> = (0..6)
            .map(|i| row(i, 20, 100_000 * (i + 1) + 7_000 * (i % 2)))
            .collect();
        let why = judge(&rising, 40.0, 0, 1.0, &spec).expect("saturated");
        assert!(why.contains("mean ttft rose"), "{why}");
        // the same trend at the target rate is a slow server, not saturation
        let kept_up: Vec<IntervalRow> = (0..6).map(|i| row(i, 40, 100_000 * (i + 1))).collect();
        assert_eq!(judge(&kept_up, 40.0, 0, 1.0, &spec), None);
        // TTFT noisy and barely rising below the rate: no significant trend
        let noisy = [90_000, 100_000, 140_000, 90_000, 130_000, 110_000];
        let flat: Vec<IntervalRow> = (0..6).map(|i| row(i, 20, noisy[i as usize])).collect();
        assert_eq!(judge(&flat, 40.0, 0, 1.0, &spec), None);
        // too few intervals after the warm-up to judge
        assert_eq!(judge(&rising, 40.0, 2_000_000, 1.0, &spec), None);
    }
}

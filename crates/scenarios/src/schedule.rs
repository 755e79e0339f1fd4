//! Arrival schedules: one seeded global sequence of send times, striped over workers.
//!
//! Request `i` has offset `a_i` from the start barrier and uses pool entry
//! `i mod pool_size`. Worker `w` of `n` sends exactly the requests with
//! `i ≡ w (mod n)`, so the server sees the same global process for any `n`.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

use crate::units::Rate;

/// RNG stream reserved for arrival gaps.
const STREAM: u64 = 2;

/// Everything that determines the global arrival sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    /// Seed of the arrival process.
    pub seed: u64,
    /// Mean rate.
    pub rate: Rate,
    /// Gamma shape of the gaps (1 = Poisson; infinite = evenly spaced).
    pub burstiness: f64,
    /// Number of requests, for count-bound runs.
    pub requests: Option<u64>,
    /// Run length, for time-bound runs.
    pub duration: Option<Duration>,
    /// Pool entries the requests cycle through.
    pub pool_size: u64,
    /// Explicit send offsets, µs, one per request in order (trace replay);
    /// when given they replace the rate and burstiness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals_us: Option<Vec<u64>>,
}

/// One request of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Global request index.
    pub index: u64,
    /// Intended send time after the start barrier.
    pub offset: Duration,
    /// Pool entry to send.
    pub pool_id: u64,
}

enum Gaps {
    None,
    Fixed(f64),
    Gamma(Gamma<f64>),
}

impl Gaps {
    fn new(rate: Rate, burstiness: f64) -> Self {
        match rate.per_second() {
            None => Gaps::None,
            Some(r) if burstiness.is_infinite() => Gaps::Fixed(1.0 / r),
            Some(r) => match Gamma::new(burstiness, 1.0 / (r * burstiness)) {
                Ok(g) => Gaps::Gamma(g),
                // validation guarantees rate > 0 and burstiness > 0
                Err(_) => Gaps::Fixed(1.0 / r),
            },
        }
    }

    fn next(&self, rng: &mut ChaCha8Rng) -> f64 {
        match self {
            Gaps::None => 0.0,
            Gaps::Fixed(g) => *g,
            Gaps::Gamma(g) => g.sample(rng),
        }
    }
}

fn rng(seed: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(STREAM);
    r
}

impl ScheduleSpec {
    /// The global sequence of every request, in index order.
    ///
    /// Gaps are gamma-distributed with shape `burstiness` and mean `1/rate`;
    /// the first request waits one gap, as in `vllm bench serve`. Count-bound
    /// runs are rescaled so the last request is due at exactly `N / rate`
    /// (vLLM does the same), removing the random drift of the total.
    ///
    /// With explicit `arrivals_us` (a replayed trace) request `i` is due at
    /// `arrivals_us[i]` and uses pool entry `i`.
    pub fn global(&self) -> ScheduleIter {
        if let Some(arrivals) = &self.arrivals_us {
            let n = self
                .requests
                .map_or(arrivals.len() as u64, |r| r.min(arrivals.len() as u64));
            return ScheduleIter {
                rng: rng(self.seed),
                gaps: Gaps::None,
                scale: 1.0,
                elapsed: 0.0,
                index: 0,
                requests: Some(n),
                duration: self.duration.map(|d| d.as_secs_f64()),
                pool_size: self.pool_size.max(1),
                arrivals: arrivals.clone(),
            };
        }
        let gaps = Gaps::new(self.rate, self.burstiness);
        let scale = match (self.requests, self.rate.per_second(), &gaps) {
            (Some(n), Some(rate), Gaps::Gamma(_)) if n > 0 => {
                let mut r = rng(self.seed);
                let total: f64 = (0..n).map(|_| gaps.next(&mut r)).sum();
                if total > 0.0 {
                    (n as f64 / rate) / total
                } else {
                    1.0
                }
            }
            _ => 1.0,
        };
        ScheduleIter {
            rng: rng(self.seed),
            gaps,
            scale,
            elapsed: 0.0,
            index: 0,
            requests: self.requests,
            duration: self.duration.map(|d| d.as_secs_f64()),
            pool_size: self.pool_size.max(1),
            arrivals: Vec::new(),
        }
    }

    /// The requests worker `worker` of `workers` sends.
    pub fn stripe(&self, worker: u32, workers: u32) -> impl Iterator<Item = Slot> + use<> {
        let (w, n) = (u64::from(worker), u64::from(workers.max(1)));
        self.global().filter(move |s| s.index % n == w)
    }
}

/// Iterator over the global schedule.
pub struct ScheduleIter {
    rng: ChaCha8Rng,
    gaps: Gaps,
    scale: f64,
    elapsed: f64,
    index: u64,
    requests: Option<u64>,
    duration: Option<f64>,
    pool_size: u64,
    /// Explicit offsets in µs (empty = drawn gaps).
    arrivals: Vec<u64>,
}

impl Iterator for ScheduleIter {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        if let Some(n) = self.requests
            && self.index >= n
        {
            return None;
        }
        let at = if self.arrivals.is_empty() {
            self.elapsed += self.gaps.next(&mut self.rng);
            self.elapsed * self.scale
        } else {
            let us = *self.arrivals.get(usize::try_from(self.index).ok()?)?;
            us as f64 / 1e6
        };
        // An unbounded rate with only a duration never stops here: the executor
        // stops dispatching when the duration has elapsed on the clock.
        if let Some(d) = self.duration
            && at >= d
        {
            return None;
        }
        let offset = match self.arrivals.get(self.index as usize) {
            Some(us) => Duration::from_micros(*us),
            None => Duration::from_secs_f64(at),
        };
        let slot = Slot {
            index: self.index,
            offset,
            pool_id: self.index % self.pool_size,
        };
        self.index += 1;
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rate: Rate, burstiness: f64, n: Option<u64>, d: Option<Duration>) -> ScheduleSpec {
        ScheduleSpec {
            seed: 9,
            rate,
            burstiness,
            requests: n,
            duration: d,
            pool_size: 10,
            arrivals_us: None,
        }
    }

    #[test]
    fn explicit_arrivals_are_replayed_and_striped() {
        let arrivals: Vec<u64> = (0..40).map(|i| i * i * 1000).collect();
        let s = ScheduleSpec {
            arrivals_us: Some(arrivals.clone()),
            pool_size: 40,
            requests: Some(40),
            ..spec(Rate::Finite(1.0), 1.0, Some(40), None)
        };
        let all: Vec<Slot> = s.global().collect();
        assert_eq!(all.len(), 40);
        for (i, slot) in all.iter().enumerate() {
            assert_eq!(slot.offset, Duration::from_micros(arrivals[i]));
            assert_eq!(slot.pool_id, i as u64);
        }
        let w1: Vec<u64> = s.stripe(1, 4).map(|x| x.index).collect();
        assert_eq!(w1, (0..10).map(|k| 4 * k + 1).collect::<Vec<u64>>());
        let cut = ScheduleSpec {
            requests: None,
            duration: Some(Duration::from_millis(100)),
            ..s.clone()
        };
        assert_eq!(cut.global().count(), 10, "offsets below 100 ms: i*i < 100");
    }

    #[test]
    fn stripes_partition_the_global_sequence() {
        let s = spec(Rate::Finite(50.0), 1.0, Some(1000), None);
        let global: Vec<Slot> = s.global().collect();
        assert_eq!(global.len(), 1000);
        for n in [1u32, 3, 8] {
            let mut merged: Vec<Slot> = (0..n).flat_map(|w| s.stripe(w, n)).collect();
            merged.sort_by_key(|x| x.index);
            assert_eq!(merged, global, "n={n}");
        }
    }

    #[test]
    fn count_bound_runs_end_at_n_over_rate() {
        let s = spec(Rate::Finite(20.0), 1.0, Some(400), None);
        let last = s.global().last().unwrap();
        assert!(
            (last.offset.as_secs_f64() - 20.0).abs() < 1e-6,
            "{:?}",
            last.offset
        );
        let offsets: Vec<f64> = s.global().map(|x| x.offset.as_secs_f64()).collect();
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        assert!(offsets[0] > 0.0, "the first request waits one gap");
    }

    #[test]
    fn poisson_gaps_have_unit_cv_and_gamma_shape_scales_it() {
        for (b, cv_expected) in [(1.0, 1.0), (4.0, 0.5), (0.25, 2.0)] {
            let s = spec(Rate::Finite(100.0), b, None, Some(Duration::from_secs(400)));
            let offs: Vec<f64> = s.global().map(|x| x.offset.as_secs_f64()).collect();
            let gaps: Vec<f64> = offs.windows(2).map(|w| w[1] - w[0]).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            let cv = var.sqrt() / mean;
            assert!((mean - 0.01).abs() < 0.0005, "b={b} mean={mean}");
            assert!(
                (cv - cv_expected).abs() < 0.05 * cv_expected,
                "b={b} cv={cv}"
            );
        }
    }

    #[test]
    fn infinite_rate_is_all_at_zero_and_pool_cycles() {
        let s = spec(Rate::Infinite, 1.0, Some(25), None);
        let all: Vec<Slot> = s.global().collect();
        assert_eq!(all.len(), 25);
        assert!(all.iter().all(|x| x.offset.is_zero()));
        assert_eq!(all[13].pool_id, 3);
    }

    #[test]
    fn duration_bound_runs_stop_at_the_duration() {
        let s = spec(Rate::Finite(10.0), 1.0, None, Some(Duration::from_secs(5)));
        let all: Vec<Slot> = s.global().collect();
        assert!(all.iter().all(|x| x.offset < Duration::from_secs(5)));
        assert!((30..=70).contains(&all.len()), "{}", all.len());
        let evenly = spec(
            Rate::Finite(10.0),
            f64::INFINITY,
            None,
            Some(Duration::from_secs(5)),
        );
        assert!((49..=50).contains(&evenly.global().count()));
    }
}

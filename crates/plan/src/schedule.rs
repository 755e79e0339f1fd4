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

use crate::shape::Ramp;
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
    #[serde(with = "crate::units::f64_or_inf")]
    pub burstiness: f64,
    /// Number of requests, for count-bound runs.
    pub requests: Option<u64>,
    /// Run length, for time-bound runs.
    pub duration: Option<Duration>,
    /// Pool entries the requests cycle through.
    pub pool_size: u64,
    /// Rate ramp over the run (no rescaling, as in vLLM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<Ramp>,
    /// Consecutive open-loop stages; the run ends with the last one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<RateStage>,
    /// Explicit send offsets, µs, one per request in order (trace replay);
    /// when given they replace the rate and burstiness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals_us: Option<Vec<u64>>,
}

/// One open-loop stage: its end (after the barrier), rate and gamma shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateStage {
    pub end: Duration,
    pub rate: f64,
    #[serde(with = "crate::units::f64_or_inf")]
    pub burstiness: f64,
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
    /// Stage of `[[stages]]` the request belongs to (0 without stages).
    pub stage: u32,
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

/// One gap at a rate that changes along the run (ramps and stages).
fn varying_gap(rate: f64, burstiness: f64, rng: &mut ChaCha8Rng) -> f64 {
    Gaps::new(Rate::Finite(rate), burstiness).next(rng)
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
                burstiness: self.burstiness,
                ramp: None,
                stages: Vec::new(),
                lambda: 0.0,
                arrivals: arrivals.clone(),
            };
        }
        let gaps = Gaps::new(self.rate, self.burstiness);
        let scale = match (self.requests, self.rate.per_second(), &gaps) {
            (Some(n), Some(rate), Gaps::Gamma(_))
                if n > 0 && self.ramp.is_none() && self.stages.is_empty() =>
            {
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
            burstiness: self.burstiness,
            ramp: self.ramp,
            stages: self.stages.clone(),
            lambda: 0.0,
            arrivals: Vec::new(),
        }
    }

    /// Stage of `[[stages]]` that contains `offset` (0 without stages).
    pub fn stage_at(&self, offset: Duration) -> u32 {
        stage_at(&self.stages, offset.as_secs_f64())
    }

    /// The schedule after its rate changes to `rate` (requests/s; infinite:
    /// all due at once) from `at` on, exactly as a `[[stages]]` boundary
    /// there would have it: the same seeded draws, so every request before
    /// `at` keeps its index and time, and those after follow the new rate
    /// with the same burstiness, striped over workers as before. `None` when
    /// the schedule cannot change so: a replayed trace, a ramp, a count-bound
    /// run, or an unbounded rate at `at` (it never reaches a later instant).
    pub fn steered(&self, at: Duration, rate: f64) -> Option<ScheduleSpec> {
        if self.ramp.is_some() || self.arrivals_us.is_some() || self.requests.is_some() {
            return None;
        }
        let end = self.duration.or(self.stages.last().map(|s| s.end))?;
        let mut stages = if self.stages.is_empty() {
            vec![RateStage {
                end,
                rate: self.rate.per_second()?,
                burstiness: self.burstiness,
            }]
        } else {
            self.stages.clone()
        };
        // as `plan::steer_windows`: the stages begun before `at` stay, the one holding it ends there
        let mut start = Duration::ZERO;
        stages.retain(|s| {
            let keep = start < at || start.is_zero();
            start = s.end;
            keep
        });
        let last = stages.last_mut()?;
        if !last.rate.is_finite() {
            return None;
        }
        last.end = last.end.min(at);
        let burstiness = last.burstiness;
        stages.push(RateStage {
            end,
            rate,
            burstiness,
        });
        Some(ScheduleSpec {
            stages,
            ..self.clone()
        })
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
    burstiness: f64,
    ramp: Option<Ramp>,
    stages: Vec<RateStage>,
    /// Expected arrivals so far (time-bound ramps).
    lambda: f64,
    /// Explicit offsets in µs (empty = drawn gaps).
    arrivals: Vec<u64>,
}

fn stage_at(stages: &[RateStage], at_s: f64) -> u32 {
    stages
        .iter()
        .position(|s| at_s < s.end.as_secs_f64())
        .unwrap_or(stages.len().saturating_sub(1)) as u32
}

impl ScheduleIter {
    /// The next gap: constant process, ramp, or the stage the run is in.
    fn gap(&mut self) -> Option<f64> {
        if !self.stages.is_empty() {
            let stage = self.stages[stage_at(&self.stages, self.elapsed) as usize];
            if self.elapsed >= stage.end.as_secs_f64() {
                return None;
            }
            return Some(varying_gap(stage.rate, stage.burstiness, &mut self.rng));
        }
        if let Some(ramp) = self.ramp {
            if let (None, Some(d)) = (self.requests, self.duration) {
                // time-bound: unit-mean gaps in Λ-time, mapped back through the ramp
                self.lambda += varying_gap(1.0, self.burstiness, &mut self.rng);
                let at = ramp.time_at_integral(self.lambda, d);
                return Some((at - self.elapsed).max(0.0));
            }
            // count-bound, as vLLM: request i gets a gap at the rate of progress i/(N−1)
            let n = self.requests.unwrap_or(1);
            let progress = self.index as f64 / (n.saturating_sub(1).max(1)) as f64;
            let rate = ramp
                .rate_at(progress)
                .max(ramp.end_rps.max(ramp.start_rps) * 1e-3);
            return Some(varying_gap(rate, self.burstiness, &mut self.rng));
        }
        Some(self.gaps.next(&mut self.rng))
    }
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
            self.elapsed += self.gap()?;
            self.elapsed * self.scale
        } else {
            let us = *self.arrivals.get(usize::try_from(self.index).ok()?)?;
            us as f64 / 1e6
        };
        if let Some(last) = self.stages.last()
            && at >= last.end.as_secs_f64()
        {
            return None;
        }
        // An unbounded rate with only a duration never stops here: the executor
        // stops dispatching when the duration has elapsed on the clock.
        if let Some(d) = self.duration
            && at >= d
        {
            return None;
        }
        let slot = Slot {
            index: self.index,
            offset: match self.arrivals.get(self.index as usize) {
                Some(us) => Duration::from_micros(*us),
                None => Duration::from_secs_f64(at),
            },
            pool_id: self.index % self.pool_size,
            stage: stage_at(&self.stages, at),
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
            ramp: None,
            stages: Vec::new(),
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
    fn linear_ramp_raises_the_rate_across_the_run() {
        use crate::shape::{Ramp, RampStrategy};
        let mut s = spec(Rate::Infinite, 1.0, Some(4000), None);
        s.ramp = Some(Ramp {
            strategy: RampStrategy::Linear,
            start_rps: 10.0,
            end_rps: 100.0,
        });
        let offs: Vec<f64> = s.global().map(|x| x.offset.as_secs_f64()).collect();
        let gap = |a: usize, b: usize| (offs[b] - offs[a]) / (b - a) as f64;
        // mean gap near the start ~1/12 s, near the end ~1/99 s
        assert!((gap(0, 200) - 1.0 / 12.25).abs() < 0.015, "{}", gap(0, 200));
        assert!(
            (gap(3800, 3999) - 1.0 / 98.0).abs() < 0.003,
            "{}",
            gap(3800, 3999)
        );
        let mut d = spec(Rate::Infinite, 1.0, None, Some(Duration::from_secs(20)));
        d.ramp = Some(Ramp {
            strategy: RampStrategy::Linear,
            start_rps: 0.0,
            end_rps: 50.0,
        });
        let n = d.global().count();
        // integral of a 0 -> 50 req/s linear ramp over 20 s is 500
        assert!((430..=570).contains(&n), "{n}");
    }

    #[test]
    fn stages_change_rate_and_tag_each_request() {
        let mut s = spec(Rate::Infinite, 1.0, None, None);
        s.stages = vec![
            RateStage {
                end: Duration::from_secs(10),
                rate: 20.0,
                burstiness: 1.0,
            },
            RateStage {
                end: Duration::from_secs(20),
                rate: 80.0,
                burstiness: 1.0,
            },
        ];
        let all: Vec<Slot> = s.global().collect();
        let first = all.iter().filter(|x| x.stage == 0).count();
        let second = all.iter().filter(|x| x.stage == 1).count();
        assert!((150..=250).contains(&first), "{first}");
        assert!((700..=900).contains(&second), "{second}");
        assert!(all.iter().all(|x| x.offset < Duration::from_secs(20)));
        assert!(
            all.iter()
                .filter(|x| x.stage == 0)
                .all(|x| x.offset < Duration::from_secs(10))
        );
        assert_eq!(s.stage_at(Duration::from_secs(15)), 1);
        for n in [3u32, 8] {
            let mut merged: Vec<Slot> = (0..n).flat_map(|w| s.stripe(w, n)).collect();
            merged.sort_by_key(|x| x.index);
            assert_eq!(merged, all);
        }
    }

    #[test]
    fn a_steered_rate_keeps_the_past_and_follows_the_new_rate() {
        let d = Duration::from_secs(40);
        let s = spec(Rate::Finite(20.0), 1.0, None, Some(d));
        let at = Duration::from_secs(10);
        let t = s.steered(at, 80.0).unwrap();
        let (old, new): (Vec<Slot>, Vec<Slot>) = (s.global().collect(), t.global().collect());
        let before = |v: &[Slot]| {
            v.iter()
                .filter(|x| x.offset < at)
                .map(|x| (x.index, x.offset))
                .collect::<Vec<_>>()
        };
        assert_eq!(before(&old), before(&new), "the past is kept");
        let after = new.iter().filter(|x| x.offset >= at).count();
        assert!((2100..=2700).contains(&after), "{after} in 30 s at 80/s");
        assert!(new.iter().all(|x| x.offset < d));
        // the same requests for any worker count
        for n in [1u32, 2, 3] {
            let mut merged: Vec<Slot> = (0..n).flat_map(|w| t.stripe(w, n)).collect();
            merged.sort_by_key(|x| x.index);
            assert_eq!(merged, new, "n={n}");
        }
        // a second change keeps the first's stage and replaces what follows
        let u = t.steered(Duration::from_secs(20), 5.0).unwrap();
        let rates: Vec<(u64, f64)> = u.stages.iter().map(|x| (x.end.as_secs(), x.rate)).collect();
        assert_eq!(rates, [(10, 20.0), (20, 80.0), (40, 5.0)]);
        assert!(
            spec(Rate::Infinite, 1.0, None, Some(d))
                .steered(at, 5.0)
                .is_none()
        );
        assert!(
            spec(Rate::Finite(5.0), 1.0, Some(100), None)
                .steered(at, 5.0)
                .is_none()
        );
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

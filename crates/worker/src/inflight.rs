//! Requests in flight, integrated over time into 100 ms slices as they change,
//! so the fleet's concurrency can be merged exactly (see `cicada_metrics::Concurrency`).
//! Warm-up requests are integrated apart, so they never count in the measured
//! window's concurrency, whatever kind of warm-up marked them.

use std::sync::Mutex;

use cicada_metrics::Concurrency;

#[derive(Debug, Default)]
struct Tracker {
    current: u64,
    last_us: u64,
    acc: Concurrency,
}

impl Tracker {
    fn accrue(&mut self, now_us: u64) {
        if now_us > self.last_us {
            self.acc.add_span(self.current, self.last_us, now_us);
            self.last_us = now_us;
        }
    }
}

/// Measured and warm-up requests, apart.
#[derive(Debug, Default)]
struct Trackers {
    measured: Tracker,
    warmup: Tracker,
}

/// One target's in-flight count and its time-integral.
#[derive(Debug, Default)]
pub struct InFlight(Mutex<Trackers>);

/// The integrals of one interval: measured requests, then warm-up requests.
pub struct Taken {
    /// Requests outside the warm-up.
    pub measured: Concurrency,
    /// Warm-up requests.
    pub warmup: Concurrency,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, Trackers> {
        match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A request started (`up`) or ended at `now_us` (µs since the barrier);
    /// `warmup` says which integral it belongs to.
    pub fn change(&self, now_us: u64, up: bool, warmup: bool) {
        let mut g = self.lock();
        let t = if warmup {
            &mut g.warmup
        } else {
            &mut g.measured
        };
        t.accrue(now_us);
        if up {
            t.current += 1;
        } else {
            t.current = t.current.saturating_sub(1);
        }
    }

    /// Requests in flight now, warm-up included (what a replica is carrying).
    pub fn current(&self) -> u64 {
        let g = self.lock();
        g.measured.current + g.warmup.current
    }

    /// The integrals up to `now_us` not yet taken.
    pub fn take(&self, now_us: u64) -> Taken {
        let mut g = self.lock();
        g.measured.accrue(now_us);
        g.warmup.accrue(now_us);
        Taken {
            measured: std::mem::take(&mut g.measured.acc),
            warmup: std::mem::take(&mut g.warmup.acc),
        }
    }
}

/// One [`InFlight`] per (target, model) pair: concurrency is reported per
/// model as per replica, and replica routing reads a target's sum.
#[derive(Debug)]
pub struct ScopeTrackers {
    models: usize,
    all: Vec<InFlight>,
}

impl ScopeTrackers {
    /// Trackers for `targets` replicas and `models` models (each at least 1).
    pub fn new(targets: usize, models: usize) -> Self {
        let (targets, models) = (targets.max(1), models.max(1));
        Self {
            models,
            all: (0..targets * models).map(|_| InFlight::default()).collect(),
        }
    }

    /// Replicas tracked.
    pub fn targets(&self) -> usize {
        self.all.len() / self.models
    }

    /// The tracker of `target` and `model`.
    pub fn get(&self, target: usize, model: usize) -> &InFlight {
        let i = (target * self.models + model.min(self.models - 1)).min(self.all.len() - 1);
        &self.all[i]
    }

    /// Requests in flight to `target`, every model's.
    pub fn load(&self, target: usize) -> u64 {
        let start = target * self.models;
        self.all
            .get(start..start + self.models)
            .map_or(0, |t| t.iter().map(InFlight::current).sum())
    }

    /// Every tracker with its (target, model).
    pub fn iter(&self) -> impl Iterator<Item = ((usize, usize), &InFlight)> {
        self.all
            .iter()
            .enumerate()
            .map(|(i, t)| ((i / self.models, i % self.models), t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_of_overlapping_requests() {
        let f = InFlight::default();
        f.change(0, true, false);
        f.change(50_000, true, false);
        let first = f.take(100_000).measured;
        f.change(150_000, false, false);
        // slice 0: 1 request for 50 ms + 2 for 50 ms
        assert_eq!(first.iter().collect::<Vec<_>>(), vec![(0, 150_000)]);
        f.change(200_000, false, false);
        let second = f.take(300_000).measured;
        assert_eq!(second.iter().collect::<Vec<_>>(), vec![(1, 150_000)]);
        let mut all = first.clone();
        all.merge(&second);
        assert_eq!(all.peak(), 1.5);
    }

    #[test]
    fn warmup_requests_are_integrated_apart() {
        let f = InFlight::default();
        f.change(0, true, true);
        f.change(0, true, false);
        assert_eq!(f.current(), 2);
        f.change(100_000, false, true);
        f.change(100_000, false, false);
        let t = f.take(100_000);
        assert_eq!(t.measured.iter().collect::<Vec<_>>(), vec![(0, 100_000)]);
        assert_eq!(t.warmup.iter().collect::<Vec<_>>(), vec![(0, 100_000)]);
    }
}

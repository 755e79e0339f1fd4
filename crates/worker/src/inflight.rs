//! Requests in flight, integrated over time into 100 ms slices as they change,
//! so the fleet's concurrency can be merged exactly (see `cicada_metrics::Concurrency`).

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

/// One target's in-flight count and its time-integral.
#[derive(Debug, Default)]
pub struct InFlight(Mutex<Tracker>);

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, Tracker> {
        match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A request started (`up`) or ended at `now_us` (µs since the barrier).
    pub fn change(&self, now_us: u64, up: bool) {
        let mut t = self.lock();
        t.accrue(now_us);
        if up {
            t.current += 1;
        } else {
            t.current = t.current.saturating_sub(1);
        }
    }

    /// Requests in flight now.
    pub fn current(&self) -> u64 {
        self.lock().current
    }

    /// The integral up to `now_us` not yet taken.
    pub fn take(&self, now_us: u64) -> Concurrency {
        let mut t = self.lock();
        t.accrue(now_us);
        std::mem::take(&mut t.acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_of_overlapping_requests() {
        let f = InFlight::default();
        f.change(0, true);
        f.change(50_000, true);
        let first = f.take(100_000);
        f.change(150_000, false);
        // slice 0: 1 request for 50 ms + 2 for 50 ms
        assert_eq!(first.iter().collect::<Vec<_>>(), vec![(0, 150_000)]);
        f.change(200_000, false);
        let second = f.take(300_000);
        assert_eq!(second.iter().collect::<Vec<_>>(), vec![(1, 150_000)]);
        let mut all = first.clone();
        all.merge(&second);
        assert_eq!(all.peak(), 1.5);
    }
}

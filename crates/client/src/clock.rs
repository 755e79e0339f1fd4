use tokio::time::Instant;

/// The stage's time base: microseconds since the start barrier, on this host's
/// monotonic clock (hosts never need to agree on time).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock whose zero is `start`.
    pub fn new(start: Instant) -> Self {
        Self { start }
    }

    /// The start barrier.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Microseconds since the barrier (0 before it).
    pub fn now_us(&self) -> u64 {
        self.us(Instant::now())
    }

    /// Microseconds from the barrier to `t` (0 before it).
    pub fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_micros() as u64
    }
}

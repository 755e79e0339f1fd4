//! Where a step's start barrier falls on this worker's monotonic clock.
//!
//! The coordinator sends Start to its workers one after another, so they
//! receive it at different moments (about 0.8 ms apart each on a busy
//! 2-core machine, more over a slow link). A delay counted from receipt
//! would carry that spread into every worker's schedule. Start therefore
//! names the instant on the coordinator's wall clock; a worker whose clock
//! agrees with it waits for that instant, and every such worker starts
//! together (exactly so on one host, within the clocks' sync across hosts).
//! A worker whose clock cannot agree (the instant is already past, or
//! further away than the whole delay) falls back to the delay from receipt.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// How a worker placed its start instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Basis {
    /// The coordinator's wall-clock instant, this far ahead on receipt.
    WallClock { ahead: Duration },
    /// The delay from receipt: this host's clock is off the coordinator's by
    /// more than the delay can explain (`off_ms`: the wall-clock instant's
    /// distance from the delay's, positive when the clock runs behind).
    Delay { off_ms: f64 },
}

/// The start instant for a Start that said `delay` and `start_unix_ns`
/// (0: none), received at `now` (monotonic) and `now_unix` (wall clock).
pub fn start_instant(
    delay: Duration,
    start_unix_ns: u64,
    now: Instant,
    now_unix: Duration,
) -> (Instant, Basis) {
    if start_unix_ns == 0 {
        return (now + delay, Basis::Delay { off_ms: 0.0 });
    }
    let ahead_ns = i128::from(start_unix_ns) - now_unix.as_nanos() as i128;
    // in transit for t, a Start from an agreeing clock is delay - t ahead:
    // never more than the delay, never behind
    if (0..=delay.as_nanos() as i128).contains(&ahead_ns) {
        let ahead = Duration::from_nanos(ahead_ns as u64);
        return (now + ahead, Basis::WallClock { ahead });
    }
    let off_ms = (ahead_ns - delay.as_nanos() as i128) as f64 / 1e6;
    (now + delay, Basis::Delay { off_ms })
}

/// [`start_instant`] on this host's clocks now, with the choice logged.
pub fn start_now(delay: Duration, start_unix_ns: u64) -> Instant {
    let now = Instant::now();
    let now_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let (at, basis) = start_instant(delay, start_unix_ns, now, now_unix);
    match basis {
        Basis::WallClock { ahead } => {
            tracing::debug!(
                ahead_ms = ahead.as_secs_f64() * 1e3,
                "start barrier at the coordinator's instant"
            );
        }
        Basis::Delay { off_ms } if start_unix_ns != 0 => {
            tracing::warn!(
                off_ms,
                "this host's clock disagrees with the coordinator's: starting {} ms after Start \
                 arrived instead of at the shared instant (sync the clocks, e.g. with chrony, \
                 for a simultaneous start)",
                delay.as_millis()
            );
        }
        Basis::Delay { .. } => {}
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_millis(250);
    const UNIX: Duration = Duration::from_secs(1_800_000_000);

    fn ns(d: Duration) -> u64 {
        d.as_nanos() as u64
    }

    #[test]
    fn workers_that_received_start_at_different_moments_start_together() {
        let t0 = Instant::now();
        let deadline = ns(UNIX + DELAY);
        // one received it at once, one 0.8 ms later, one 40 ms later
        let starts: Vec<Instant> = [0u64, 800, 40_000]
            .iter()
            .map(|late_us| {
                let late = Duration::from_micros(*late_us);
                start_instant(DELAY, deadline, t0 + late, UNIX + late).0
            })
            .collect();
        assert!(starts.iter().all(|s| *s == t0 + DELAY), "{starts:?}");
    }

    #[test]
    fn a_clock_the_delay_cannot_explain_falls_back_to_the_delay() {
        let t0 = Instant::now();
        // this clock is 2 s behind: the instant looks 2.25 s away
        let behind = start_instant(DELAY, ns(UNIX + DELAY), t0, UNIX - Duration::from_secs(2));
        assert_eq!(behind.0, t0 + DELAY);
        assert!(matches!(behind.1, Basis::Delay { off_ms } if (off_ms - 2000.0).abs() < 1e-6));
        // this clock is 1 s ahead: the instant looks past
        let ahead = start_instant(DELAY, ns(UNIX + DELAY), t0, UNIX + Duration::from_secs(1));
        assert_eq!(ahead.0, t0 + DELAY);
        assert!(matches!(ahead.1, Basis::Delay { off_ms } if off_ms < -999.0));
        // an old coordinator sends no instant
        assert_eq!(
            start_instant(DELAY, 0, t0, UNIX),
            (t0 + DELAY, Basis::Delay { off_ms: 0.0 })
        );
    }
}

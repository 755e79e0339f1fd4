//! Where a step's start barrier falls on this worker's monotonic clock.
//!
//! The coordinator sends Start to its workers one after another, so they
//! receive it at different moments (about 0.8 ms apart each on a busy
//! 2-core machine, more over a slow link). A delay counted from receipt
//! would carry that spread into every worker's schedule. Start therefore
//! names the instant on the coordinator's wall clock, and each worker maps
//! it onto its own monotonic clock with the offset it measured
//! ([`crate::clocksync`]): every worker starts together, within the
//! uncertainty of its measurement, whatever its own wall clock says.
//!
//! A measured offset within its own uncertainty of zero cannot tell the
//! clocks apart: the worker then reads the instant on its own wall clock,
//! which is exact on the coordinator's host and as good as chrony keeps it
//! elsewhere (a link slow one way only biases the measurement by up to half
//! the round trip; it never moves a synced wall clock). A worker with no
//! measurement reads its wall clock too, when that agrees; one whose instant
//! cannot be right (already past, or further away than the whole delay)
//! falls back to the delay from receipt.

use std::time::Duration;

use tokio::time::Instant;

use crate::clocksync::{self, ClockMap};

/// How a worker placed its start instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Basis {
    /// The coordinator's instant mapped through the measured offset, within
    /// `uncertainty_ms` (`offset_ms`: coordinator minus worker wall clock).
    Offset { offset_ms: f64, uncertainty_ms: f64 },
    /// The coordinator's wall-clock instant read on this host's wall clock,
    /// this far ahead on receipt: the measured offset could not be told from
    /// zero, or there was no measurement.
    WallClock { ahead: Duration },
    /// The delay from receipt: the instant could not be placed (`off_ms`:
    /// its distance from the delay's, positive when this clock runs behind).
    Delay { off_ms: f64 },
}

/// The start instant for a Start that said `delay` and `start_unix_ns`
/// (0: none), received at `now` (monotonic) and `now_unix` (wall clock, ns),
/// with this worker's clock map if it has a fresh one.
pub fn start_instant(
    delay: Duration,
    start_unix_ns: u64,
    now: Instant,
    now_unix: i128,
    clock: Option<&ClockMap>,
) -> (Instant, Basis) {
    if start_unix_ns == 0 {
        return (now + delay, Basis::Delay { off_ms: 0.0 });
    }
    let delay_ns = delay.as_nanos() as i128;
    let now_mono = clocksync::mono_ns(now);
    let measured = clock.filter(|m| m.fresh(now_mono));
    // an offset the measurement cannot tell from zero: the wall clock, below
    let apart = measured.filter(|m| m.offset_ns.abs() > i128::from(m.uncertainty_ns(now_mono)));
    if let Some(map) = apart {
        let u = i128::from(map.uncertainty_ns(now_mono));
        let ahead_ns = map.mono_of(start_unix_ns) - i128::from(now_mono);
        // in transit for t, the instant is delay - t ahead, give or take u
        if (-u..=delay_ns + u).contains(&ahead_ns) {
            let at = clocksync::mono_instant(map.mono_of(start_unix_ns)).max(now);
            let basis = Basis::Offset {
                offset_ms: map.offset_ns as f64 / 1e6,
                uncertainty_ms: u as f64 / 1e6,
            };
            return (at, basis);
        }
        let off_ms = (ahead_ns - delay_ns) as f64 / 1e6;
        return (now + delay, Basis::Delay { off_ms });
    }
    let ahead_ns = i128::from(start_unix_ns) - now_unix;
    if (0..=delay_ns).contains(&ahead_ns) {
        let ahead = Duration::from_nanos(ahead_ns as u64);
        return (now + ahead, Basis::WallClock { ahead });
    }
    let off_ms = (ahead_ns - delay_ns) as f64 / 1e6;
    (now + delay, Basis::Delay { off_ms })
}

/// [`start_instant`] on this host's clocks now, with the choice logged.
pub fn start_now(
    delay: Duration,
    start_unix_ns: u64,
    clock: Option<&ClockMap>,
) -> (Instant, Basis) {
    let now = Instant::now();
    let (at, basis) = start_instant(delay, start_unix_ns, now, clocksync::wall_now(), clock);
    match basis {
        Basis::Offset {
            offset_ms,
            uncertainty_ms,
        } => {
            tracing::debug!(
                offset_ms,
                uncertainty_ms,
                "start barrier at the coordinator's instant, through the measured offset"
            );
        }
        Basis::WallClock { ahead } => {
            tracing::debug!(
                ahead_ms = ahead.as_secs_f64() * 1e3,
                "start barrier at the coordinator's instant on this host's wall clock"
            );
        }
        Basis::Delay { off_ms } if start_unix_ns != 0 => {
            tracing::warn!(
                off_ms,
                "the coordinator's start instant cannot be placed on this host's clock: \
                 starting {} ms after Start arrived instead of at the shared instant",
                delay.as_millis()
            );
        }
        Basis::Delay { .. } => {}
    }
    (at, basis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clocksync::{Sample, best};

    const DELAY: Duration = Duration::from_millis(250);
    const UNIX: i128 = 1_800_000_000_000_000_000;
    const MS: i128 = 1_000_000;

    /// Now, with the probes' origin fixed before it.
    fn now() -> Instant {
        clocksync::mono_ns(Instant::now());
        Instant::now()
    }

    fn ns(d: Duration) -> i128 {
        d.as_nanos() as i128
    }

    /// A map for a worker whose monotonic `now` reads `UNIX` on the
    /// coordinator's wall clock, measured over a `rtt_ns` round trip.
    fn map_at(now: Instant, rtt_ns: u64) -> ClockMap {
        let m = clocksync::mono_ns(now);
        let c2 = (UNIX + i128::from(rtt_ns / 2)) as u64;
        best(&[Sample {
            m1: m,
            m4: m + rtt_ns,
            c2,
            c3: c2,
            wall_minus_mono: 0,
        }])
        .unwrap()
    }

    #[test]
    fn workers_that_received_start_at_different_moments_start_together() {
        let t0 = now();
        let deadline = (UNIX + ns(DELAY)) as u64;
        // one received it at once, one 0.8 ms later, one 40 ms later
        let starts: Vec<Instant> = [0u64, 800, 40_000]
            .iter()
            .map(|late_us| {
                let late = Duration::from_micros(*late_us);
                start_instant(DELAY, deadline, t0 + late, UNIX + ns(late), None).0
            })
            .collect();
        assert!(starts.iter().all(|s| *s == t0 + DELAY), "{starts:?}");
    }

    #[test]
    fn the_measured_offset_places_the_start_whatever_the_wall_clock_says() {
        let t0 = now();
        let map = map_at(t0, 200_000);
        let deadline = (UNIX + ns(DELAY)) as u64;
        // this host's wall clock is 1.5 s ahead, or 120 ms behind: no matter
        for wall in [UNIX + 1500 * MS, UNIX - 120 * MS] {
            for late_us in [0u64, 800, 40_000] {
                let late = Duration::from_micros(late_us);
                let (at, basis) =
                    start_instant(DELAY, deadline, t0 + late, wall + ns(late), Some(&map));
                assert_eq!(at, t0 + DELAY, "late {late_us} µs, wall {wall}");
                assert!(
                    matches!(basis, Basis::Offset { uncertainty_ms, .. } if uncertainty_ms < 0.2),
                    "{basis:?}"
                );
            }
        }
    }

    #[test]
    fn an_offset_within_its_uncertainty_of_zero_leaves_the_start_to_the_wall_clock() {
        // one host, its link to the coordinator 80 ms slow one way only: the
        // exchange reads the clocks 40 ms apart, give or take 40 ms
        let t0 = now();
        let m = clocksync::mono_ns(t0);
        let wall_minus_mono = UNIX - i128::from(m);
        let c2 = UNIX as u64;
        let map = best(&[Sample {
            m1: m,
            m4: m + 80_000_000,
            c2,
            c3: c2,
            wall_minus_mono,
        }])
        .unwrap();
        assert!(map.offset_ns.abs() <= i128::from(map.uncertainty_ns(m)));
        let deadline = (UNIX + ns(DELAY)) as u64;
        let (at, basis) = start_instant(DELAY, deadline, t0, UNIX, Some(&map));
        assert_eq!(at, t0 + DELAY);
        assert_eq!(basis, Basis::WallClock { ahead: DELAY });
    }

    #[test]
    fn an_instant_the_map_cannot_explain_falls_back_to_the_delay() {
        let t0 = now();
        let map = map_at(t0, 200_000);
        // an instant 2 s away on a link measured at 0.2 ms: not a real Start
        let far = (UNIX + 2000 * MS) as u64;
        let (at, basis) = start_instant(DELAY, far, t0, UNIX, Some(&map));
        assert_eq!(at, t0 + DELAY);
        assert!(matches!(basis, Basis::Delay { off_ms } if (off_ms - 1750.0).abs() < 0.5));
        // a little past, within the uncertainty: start at once
        let just_past = (UNIX - 50_000) as u64;
        let (at, basis) = start_instant(DELAY, just_past, t0, UNIX, Some(&map));
        assert_eq!(at, t0);
        assert!(matches!(basis, Basis::Offset { .. }));
        // a stale map is not used: the wall clock decides
        let stale = t0 + clocksync::MAX_AGE + Duration::from_secs(1);
        let later = UNIX + ns(clocksync::MAX_AGE) + 1000 * MS;
        let (_, basis) = start_instant(DELAY, (later + 100 * MS) as u64, stale, later, Some(&map));
        assert!(matches!(basis, Basis::WallClock { .. }), "{basis:?}");
    }

    #[test]
    fn without_a_map_a_clock_the_delay_cannot_explain_falls_back_to_the_delay() {
        let t0 = now();
        let deadline = (UNIX + ns(DELAY)) as u64;
        // this clock is 2 s behind: the instant looks 2.25 s away
        let behind = start_instant(DELAY, deadline, t0, UNIX - 2000 * MS, None);
        assert_eq!(behind.0, t0 + DELAY);
        assert!(matches!(behind.1, Basis::Delay { off_ms } if (off_ms - 2000.0).abs() < 1e-6));
        // this clock is 1 s ahead: the instant looks past
        let ahead = start_instant(DELAY, deadline, t0, UNIX + 1000 * MS, None);
        assert_eq!(ahead.0, t0 + DELAY);
        assert!(matches!(ahead.1, Basis::Delay { off_ms } if off_ms < -999.0));
        // no instant given
        assert_eq!(
            start_instant(DELAY, 0, t0, UNIX, None),
            (t0 + DELAY, Basis::Delay { off_ms: 0.0 })
        );
    }
}

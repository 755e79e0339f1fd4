//! This worker's clock against the coordinator's, measured over the link.
//!
//! Hosts' clocks disagree (by milliseconds with NTP, by seconds without), and
//! the start instant is named on the coordinator's wall clock. So the worker
//! measures: NTP-style exchanges (a probe stamped on
//! this worker's monotonic clock, echoed at once by the coordinator's reader
//! task with its wall-clock receive and send times), in bursts of
//! [`BURST`] probes [`PROBE_GAP`] apart, after the welcome and while each step
//! is prepared. Of a burst, the exchange with the smallest round trip wins
//! (NTP's clock filter: the fastest exchange queued least, so its asymmetry,
//! the only error the exchange cannot see, is smallest). It gives a map from
//! the coordinator's wall clock onto this worker's monotonic clock, exact
//! within half that round trip; [`crate::barrier`] places the start with it,
//! so this host's own wall clock plays no part in the start.
//!
//! [`wall_now`] is this worker's one wall-clock read for cross-host purposes;
//! tests shift it (`--clock-skew-ms`) to stand for a host whose clock is off.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Probes per burst.
pub const BURST: u32 = 16;
/// Between two probes of a burst: never back to back, so none queues behind another.
pub const PROBE_GAP: Duration = Duration::from_millis(5);
/// How long after its last probe a burst waits for late echoes.
pub const ECHO_WAIT: Duration = Duration::from_millis(250);
/// Round trips longer than this say nothing useful and are dropped.
pub const MAX_RTT: Duration = Duration::from_millis(100);
/// Drift allowed between two crystals (ordinary ones stay within 100 ppm).
pub const DRIFT_PPM: f64 = 100.0;
/// Added to every uncertainty: the clocks' own read resolution and jitter.
pub const FLOOR_NS: u64 = 1_000;
/// A map older than this is not used to place a start (its drift allowance
/// has grown past what a fresh burst gives).
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// Nanoseconds by which [`wall_now`] is shifted (tests only).
static SKEW_NS: AtomicI64 = AtomicI64::new(0);

/// Shift this worker's wall clock by `ms` (the hidden `--clock-skew-ms`):
/// a test's stand-in for a host whose clock is off. Kernel packet stamps keep
/// the raw clock, as they do on a skewed host where they and `clock_gettime`
/// are off alike (a stamp's age is read against the raw clock too).
pub fn set_skew_ms(ms: i64) {
    SKEW_NS.store(ms.saturating_mul(1_000_000), Ordering::Relaxed);
}

/// This worker's wall clock, ns since the Unix epoch (shifted by the test skew).
pub fn wall_now() -> i128 {
    let raw = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as i128;
    raw + i128::from(SKEW_NS.load(Ordering::Relaxed))
}

/// The origin of the monotonic time probes carry: fixed at its first use,
/// when this worker starts measuring (instants before it read as 0).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `t` as ns since the probes' origin.
pub fn mono_ns(t: Instant) -> u64 {
    t.saturating_duration_since(epoch()).as_nanos() as u64
}

/// The instant `ns` after the probes' origin.
pub fn mono_instant(ns: i128) -> Instant {
    epoch() + Duration::from_nanos(ns.clamp(0, i128::from(u64::MAX)) as u64)
}

/// One exchange, all in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Worker monotonic at send (m1) and at the echo's receipt (m4).
    pub m1: u64,
    pub m4: u64,
    /// Coordinator wall clock at receipt (c2) and at the echo's send (c3).
    pub c2: u64,
    pub c3: u64,
    /// This worker's wall minus monotonic clock at m4 (through [`wall_now`]).
    pub wall_minus_mono: i128,
}

impl Sample {
    /// Round trip less the coordinator's turnaround: `(m4 - m1) - (c3 - c2)`.
    pub fn rtt(&self) -> i128 {
        (i128::from(self.m4) - i128::from(self.m1)) - (i128::from(self.c3) - i128::from(self.c2))
    }

    /// Coordinator wall minus worker monotonic: `((c2 - m1) + (c3 - m4)) / 2`.
    pub fn phi(&self) -> i128 {
        ((i128::from(self.c2) - i128::from(self.m1)) + (i128::from(self.c3) - i128::from(self.m4)))
            / 2
    }
}

/// The coordinator's wall clock mapped onto this worker's monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockMap {
    /// Coordinator wall minus worker monotonic, ns.
    pub phi: i128,
    /// Coordinator wall minus worker wall, ns (positive: this clock is behind).
    pub offset_ns: i128,
    /// The winning round trip, ns.
    pub min_rtt_ns: u64,
    /// Worker monotonic ns of the winning sample (where drift is counted from).
    pub at_mono_ns: u64,
    /// Samples that passed the filter.
    pub samples: u32,
}

impl ClockMap {
    /// Where the coordinator's wall-clock instant `unix_ns` falls on this
    /// worker's monotonic clock, ns since the probes' origin.
    pub fn mono_of(&self, unix_ns: u64) -> i128 {
        i128::from(unix_ns) - self.phi
    }

    /// The map's error bound at worker monotonic `now_ns`: half the winning
    /// round trip, drift since that sample, and the floor.
    pub fn uncertainty_ns(&self, now_ns: u64) -> u64 {
        let age = now_ns.saturating_sub(self.at_mono_ns);
        self.min_rtt_ns / 2 + (age as f64 * DRIFT_PPM / 1e6) as u64 + FLOOR_NS
    }

    /// Still young enough to place a start at worker monotonic `now_ns`.
    pub fn fresh(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.at_mono_ns) <= MAX_AGE.as_nanos() as u64
    }
}

/// The coordinator's echo of a probe (the link's ClockEcho, in ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Echo {
    /// The probe's sequence number and send stamp, as it went out.
    pub seq: u64,
    pub worker_mono_ns: u64,
    /// The coordinator's wall clock at the probe's receipt and the echo's send.
    pub recv_unix_ns: u64,
    pub send_unix_ns: u64,
}

/// The min-RTT filter over one burst's samples: negative and over-long round
/// trips dropped, the shortest of the rest kept. `None` when none is left.
pub fn best(samples: &[Sample]) -> Option<ClockMap> {
    let max = MAX_RTT.as_nanos() as i128;
    let kept: Vec<&Sample> = samples
        .iter()
        .filter(|s| (0..=max).contains(&s.rtt()))
        .collect();
    let win = kept.iter().min_by_key(|s| s.rtt())?;
    let phi = win.phi();
    Some(ClockMap {
        phi,
        offset_ns: phi - win.wall_minus_mono,
        min_rtt_ns: win.rtt() as u64,
        at_mono_ns: win.m4,
        samples: kept.len() as u32,
    })
}

/// One worker's clock measurement: bursts of probes and their echoes.
#[derive(Debug, Default)]
pub struct ClockSync {
    /// Probes of the current burst sent so far.
    sent: u32,
    /// Monotonic send stamp of each probe of the burst, by seq - burst_first,
    /// and whether its echo came.
    stamps: Vec<(u64, bool)>,
    /// The current burst's first sequence number (echoes of older ones are stale).
    burst_first: u64,
    next_seq: u64,
    /// When the current burst's last probe went out.
    last_probe: Option<Instant>,
    /// The current burst's echoes, as samples.
    samples: Vec<Sample>,
    /// The newest burst's result.
    map: Option<ClockMap>,
    /// A burst is under way.
    active: bool,
}

impl ClockSync {
    /// Begin a burst (a burst under way starts over).
    pub fn start_burst(&mut self) {
        epoch();
        self.sent = 0;
        self.stamps.clear();
        self.burst_first = self.next_seq;
        self.samples.clear();
        self.last_probe = None;
        self.active = true;
    }

    /// A burst is under way (probing, or waiting for its echoes).
    pub fn busy(&self) -> bool {
        self.active
    }

    /// A burst still has probes to send.
    pub fn probing(&self) -> bool {
        self.active && self.sent < BURST
    }

    /// The next probe of the burst, stamped `now`: its sequence number and
    /// its monotonic send stamp, ns.
    pub fn probe(&mut self, now: Instant) -> (u64, u64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.sent += 1;
        self.last_probe = Some(now);
        let worker_mono_ns = mono_ns(now);
        self.stamps.push((worker_mono_ns, false));
        (seq, worker_mono_ns)
    }

    /// An echo that came back at `now`, with this host's wall clock read then.
    pub fn echo(&mut self, e: &Echo, now: Instant, wall_ns: i128) {
        // only this burst's probes, each once, with the stamp this worker sent
        let slot = e
            .seq
            .checked_sub(self.burst_first)
            .and_then(|i| self.stamps.get_mut(usize::try_from(i).ok()?));
        let Some((m1, seen)) = slot.filter(|_| self.active) else {
            return;
        };
        if *seen || *m1 != e.worker_mono_ns {
            return;
        }
        *seen = true;
        let m1 = *m1;
        let m4 = mono_ns(now);
        self.samples.push(Sample {
            m1,
            m4,
            c2: e.recv_unix_ns,
            c3: e.send_unix_ns,
            wall_minus_mono: wall_ns - i128::from(m4),
        });
    }

    /// The burst is over at `now`: every echo came back, or the last probe
    /// is [`ECHO_WAIT`] old. Its result (if any) replaces the map.
    pub fn settled(&mut self, now: Instant) -> bool {
        if !self.active {
            return true;
        }
        let all_back = self.sent == BURST && self.samples.len() as u32 == BURST;
        let waited = self.sent == BURST
            && self
                .last_probe
                .is_some_and(|t| now.saturating_duration_since(t) >= ECHO_WAIT);
        if !(all_back || waited) {
            return false;
        }
        self.active = false;
        match best(&self.samples) {
            Some(map) => self.map = Some(map),
            None => tracing::warn!(
                "no clock echo came back from the coordinator: the start instant is read on \
                 this host's wall clock"
            ),
        }
        true
    }

    /// The newest map, if any burst gave one.
    pub fn map(&self) -> Option<&ClockMap> {
        self.map.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// An exchange with a worker clock `phi` ns behind the coordinator's
    /// wall clock (monotonic), out and back delays `up` and `down`.
    fn exchange(phi: i128, m1: u64, up: u64, turn: u64, down: u64) -> Sample {
        let c2 = (i128::from(m1 + up) + phi) as u64;
        Sample {
            m1,
            m4: m1 + up + turn + down,
            c2,
            c3: c2 + turn,
            wall_minus_mono: 0,
        }
    }

    #[test]
    fn the_fastest_exchange_wins_and_its_error_is_within_the_uncertainty() {
        let mut rng = StdRng::seed_from_u64(7);
        let phi: i128 = 1_700_000_000_000_000_000;
        for _ in 0..200 {
            let samples: Vec<Sample> = (0..BURST as u64)
                .map(|i| {
                    // asymmetric queueing: up to 3 ms one way, 0.2 ms the other
                    let (up, down) = (
                        rng.random_range(50_000..3_000_000),
                        rng.random_range(50_000..200_000),
                    );
                    let (up, down) = if rng.random_bool(0.5) {
                        (up, down)
                    } else {
                        (down, up)
                    };
                    exchange(
                        phi,
                        i * 5_000_000,
                        up,
                        rng.random_range(1_000..50_000),
                        down,
                    )
                })
                .collect();
            let map = best(&samples).unwrap();
            let fastest = samples.iter().map(Sample::rtt).min().unwrap();
            assert_eq!(i128::from(map.min_rtt_ns), fastest);
            let err = (map.phi - phi).unsigned_abs();
            let u = map.uncertainty_ns(map.at_mono_ns);
            assert!(err <= u128::from(u), "error {err} ns beyond {u} ns");
            assert_eq!(map.samples, BURST);
        }
    }

    #[test]
    fn impossible_and_over_long_round_trips_are_dropped() {
        let phi = 5_000_000_000;
        // a negative round trip (a forged or garbled echo) would look fastest
        let mut bad = exchange(phi + 40_000_000, 0, 10_000, 1_000, 10_000);
        bad.c3 = bad.c2 + 10_000_000;
        assert!(bad.rtt() < 0);
        let slow = exchange(phi + 90_000_000, 10_000_000, 150_000_000, 1_000, 10_000);
        let good = exchange(phi, 20_000_000, 300_000, 1_000, 200_000);
        let map = best(&[bad, slow, good]).unwrap();
        assert_eq!((map.phi, map.samples), (phi + 50_000, 1));
        assert!(best(&[bad, slow]).is_none());
    }

    #[test]
    fn the_offset_is_coordinator_wall_minus_worker_wall() {
        // this worker's wall clock reads 1.5 s ahead of the coordinator's
        let wall_minus_mono: i128 = 1_000_000_000_000_000_000;
        let coord_minus_mono = wall_minus_mono - 1_500_000_000;
        let mut s = exchange(coord_minus_mono, 1_000, 100_000, 1_000, 100_000);
        s.wall_minus_mono = wall_minus_mono;
        let map = best(&[s]).unwrap();
        assert_eq!(map.offset_ns, -1_500_000_000);
    }

    #[test]
    fn uncertainty_grows_with_age_and_an_old_map_is_stale() {
        let map = best(&[exchange(0, 0, 1_000_000, 0, 1_000_000)]).unwrap();
        assert_eq!(map.uncertainty_ns(map.at_mono_ns), 1_000_000 + FLOOR_NS);
        // 10 s later: 100 ppm of it more
        let later = map.at_mono_ns + 10_000_000_000;
        assert_eq!(map.uncertainty_ns(later), 2_000_000 + FLOOR_NS);
        assert!(map.fresh(later));
        assert!(!map.fresh(map.at_mono_ns + MAX_AGE.as_nanos() as u64 + 1));
    }

    #[test]
    fn a_burst_takes_only_its_own_echoes_and_settles() {
        let mut sync = ClockSync::default();
        sync.start_burst();
        // (the origin is fixed now, before t0)
        let t0 = Instant::now();
        let mut probes = Vec::new();
        while sync.probing() {
            probes.push(sync.probe(t0));
        }
        assert_eq!(probes.len(), BURST as usize);
        assert!(!sync.settled(t0));
        // an echo of no probe of ours, and one repeated
        let echo = |&(seq, worker_mono_ns): &(u64, u64)| Echo {
            seq,
            worker_mono_ns,
            recv_unix_ns: 10,
            send_unix_ns: 10,
        };
        sync.echo(
            &Echo {
                seq: 999,
                ..echo(&probes[0])
            },
            t0,
            0,
        );
        sync.echo(&echo(&probes[0]), t0, 0);
        sync.echo(&echo(&probes[0]), t0, 0);
        assert!(!sync.settled(t0));
        assert!(sync.map().is_none());
        assert!(sync.settled(t0 + ECHO_WAIT));
        assert_eq!(sync.map().unwrap().samples, 1);
    }
}

//! The workers' clocks, at the wire edge: probes answered at once by the
//! stream's reader task (see [`echo`]), and what workers say they measured
//! checked before it becomes a [`WorkerClock`] or a [`StartBasis`]: a figure
//! no real exchange could give refuses it, and the worker is lost like one
//! whose report fails a check.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cicada_proto::v1;
use cicada_results::{StartBasis, WorkerClock};

/// Longest round trip a worker keeps (its filter drops longer ones).
const MAX_RTT: Duration = Duration::from_millis(100);
/// Largest uncertainty an estimate can have: half the longest round trip
/// plus the drift a map may gather before it is measured again, with room.
const MAX_UNCERTAINTY: Duration = Duration::from_secs(1);
/// Most exchanges one estimate can rest on.
const MAX_SAMPLES: u32 = 1024;
/// Largest offset taken as a real clock's (a host without a battery-backed
/// clock can be decades off, never centuries), ns.
const MAX_OFFSET_NS: i64 = 200 * 365 * 86_400 * 1_000_000_000;

/// This host's wall clock, ns since the Unix epoch.
pub(super) fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64
}

/// The echo of `probe`, received at `recv_ns` and sent now.
pub(super) fn echo(probe: &v1::ClockProbe, recv_ns: u64) -> v1::CoordinatorMessage {
    v1::CoordinatorMessage {
        body: Some(v1::coordinator_message::Body::ClockEcho(v1::ClockEcho {
            seq: probe.seq,
            worker_mono_ns: probe.worker_mono_ns,
            coord_recv_unix_ns: recv_ns,
            coord_send_unix_ns: unix_ns(),
        })),
    }
}

/// What is wrong with a worker's clock estimate or start placement (the
/// coordinator drops the worker from timing comparisons and says so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ClockError(pub String);

/// A worker's estimate, checked.
pub(super) fn estimate(e: &v1::ClockEstimate) -> Result<WorkerClock, ClockError> {
    let ms = |ns: u64| ns as f64 / 1e6;
    if e.offset_ns.unsigned_abs() > MAX_OFFSET_NS as u64 {
        return Err(ClockError(format!(
            "a clock offset of {} ns is beyond any real clock's",
            e.offset_ns
        )));
    }
    if e.min_rtt_ns > MAX_RTT.as_nanos() as u64 {
        return Err(ClockError(format!(
            "a clock round trip of {} ms is beyond the {} ms the filter keeps",
            ms(e.min_rtt_ns),
            MAX_RTT.as_millis()
        )));
    }
    if e.uncertainty_ns < e.min_rtt_ns / 2 || e.uncertainty_ns > MAX_UNCERTAINTY.as_nanos() as u64 {
        return Err(ClockError(format!(
            "a clock uncertainty of {} ms does not fit a {} ms round trip",
            ms(e.uncertainty_ns),
            ms(e.min_rtt_ns)
        )));
    }
    if e.samples == 0 || e.samples > MAX_SAMPLES {
        return Err(ClockError(format!(
            "a clock estimate from {} exchanges (1 to {MAX_SAMPLES})",
            e.samples
        )));
    }
    Ok(WorkerClock {
        offset_ms: e.offset_ns as f64 / 1e6,
        uncertainty_ms: ms(e.uncertainty_ns),
        min_rtt_ms: ms(e.min_rtt_ns),
        samples: e.samples,
    })
}

/// How a worker said it placed its start, checked.
pub(super) fn basis(p: &v1::StartPlaced) -> Result<StartBasis, ClockError> {
    if p.off_ns.unsigned_abs() > MAX_OFFSET_NS as u64 {
        return Err(ClockError(format!(
            "a start {} ns off is beyond any real clock's",
            p.off_ns
        )));
    }
    match v1::StartBasis::try_from(p.basis) {
        Ok(v1::StartBasis::Offset) if p.off_ns == 0 => Ok(StartBasis::Offset),
        Ok(v1::StartBasis::WallClock) if p.off_ns == 0 => Ok(StartBasis::WallClock),
        Ok(v1::StartBasis::Delay) => Ok(StartBasis::Delay {
            off_ms: p.off_ns as f64 / 1e6,
        }),
        _ => Err(ClockError(format!(
            "an unknown start basis ({}, {} ns off)",
            p.basis, p.off_ns
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real() -> v1::ClockEstimate {
        v1::ClockEstimate {
            offset_ns: -1_500_000_000,
            uncertainty_ns: 200_000,
            min_rtt_ns: 300_000,
            samples: 16,
        }
    }

    #[test]
    fn a_real_estimate_passes_and_impossible_ones_are_refused() {
        let c = estimate(&real()).unwrap();
        assert_eq!(
            (c.offset_ms, c.uncertainty_ms, c.min_rtt_ms),
            (-1500.0, 0.2, 0.3)
        );
        let forged = [
            v1::ClockEstimate {
                offset_ns: i64::MIN,
                ..real()
            },
            v1::ClockEstimate {
                min_rtt_ns: u64::MAX,
                ..real()
            },
            // tighter than half its own round trip
            v1::ClockEstimate {
                uncertainty_ns: 1,
                ..real()
            },
            v1::ClockEstimate {
                uncertainty_ns: u64::MAX,
                ..real()
            },
            v1::ClockEstimate {
                samples: 0,
                ..real()
            },
            v1::ClockEstimate {
                samples: u32::MAX,
                ..real()
            },
        ];
        for f in forged {
            assert!(estimate(&f).is_err(), "{f:?}");
        }
    }

    #[test]
    fn only_known_bases_pass() {
        let placed = |basis: v1::StartBasis, off_ns| v1::StartPlaced {
            step: 0,
            basis: basis as i32,
            off_ns,
        };
        assert_eq!(
            basis(&placed(v1::StartBasis::Offset, 0)),
            Ok(StartBasis::Offset)
        );
        assert_eq!(
            basis(&placed(v1::StartBasis::Delay, 2_000_000)),
            Ok(StartBasis::Delay { off_ms: 2.0 })
        );
        assert!(basis(&placed(v1::StartBasis::Unspecified, 0)).is_err());
        assert!(basis(&placed(v1::StartBasis::Offset, 5)).is_err());
        assert!(basis(&placed(v1::StartBasis::Delay, i64::MAX)).is_err());
        assert!(
            basis(&v1::StartPlaced {
                step: 0,
                basis: 77,
                off_ns: 0
            })
            .is_err()
        );
    }
}

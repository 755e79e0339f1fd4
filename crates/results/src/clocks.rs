//! The console's word on the workers' clocks: a line for a worker whose
//! start could not be placed as precisely as usual, a warning for one whose
//! clock is far off the coordinator's. Silent when the clocks are fine.

use std::fmt::Write as _;

use crate::client_health::WorkerHealth;
use crate::{CLOCK_OFFSET_WARN_MS, CLOCK_UNCERTAINTY_NOTE_MS, StartBasis};

/// The clock lines for `workers` (none when every clock is fine).
pub fn clock_lines(out: &mut String, workers: &[WorkerHealth]) {
    for w in workers {
        // the wall clock is a fallback only when no offset was measured (a
        // measured one within its uncertainty of zero leaves the start to it)
        let fallback = match w.start_basis {
            Some(StartBasis::Delay { .. }) => true,
            Some(StartBasis::WallClock) => w.clock.is_none(),
            Some(StartBasis::Offset) | None => false,
        };
        let vague = w
            .clock
            .is_some_and(|c| c.uncertainty_ms > CLOCK_UNCERTAINTY_NOTE_MS);
        if fallback || vague {
            let measured = match w.clock {
                Some(c) => format!(
                    "offset {:+.3} ms ± {:.3} ms (min RTT {:.3} ms)",
                    c.offset_ms, c.uncertainty_ms, c.min_rtt_ms
                ),
                None => "offset not measured".to_string(),
            };
            let _ = writeln!(
                out,
                "clock: worker {}: {measured}, start: {}",
                w.index,
                basis(w)
            );
        }
        if let Some(c) = w.clock
            && c.offset_ms.abs() > CLOCK_OFFSET_WARN_MS
        {
            let side = if c.offset_ms > 0.0 {
                "behind"
            } else {
                "ahead of"
            };
            let _ = writeln!(
                out,
                "warning: worker {}'s clock is {:.1} ms {side} the coordinator's (± {:.3} ms); \
                 the start used the measured offset, but sync the hosts' clocks (chrony, ntpd) \
                 before comparing their logs",
                w.index,
                c.offset_ms.abs(),
                c.uncertainty_ms
            );
        }
    }
}

/// How the worker placed its start, in words.
fn basis(w: &WorkerHealth) -> String {
    match w.start_basis {
        Some(StartBasis::Offset) => "through the measured offset".into(),
        Some(StartBasis::WallClock) => "on its own wall clock".into(),
        Some(StartBasis::Delay { off_ms }) => {
            format!("the delay from receipt (the coordinator's instant was {off_ms:+.1} ms off)")
        }
        None => "not said".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkerClock;

    fn worker(offset_ms: f64, uncertainty_ms: f64, basis: StartBasis) -> WorkerHealth {
        WorkerHealth {
            index: 3,
            threads: 1,
            cpu_us: 0,
            cpu_utilization: 0.0,
            peak_rss_bytes: 0,
            clock: Some(WorkerClock {
                offset_ms,
                uncertainty_ms,
                min_rtt_ms: 2.0 * uncertainty_ms,
                samples: 16,
            }),
            start_basis: Some(basis),
        }
    }

    #[test]
    fn fine_clocks_say_nothing_and_off_ones_are_named() {
        let mut out = String::new();
        clock_lines(&mut out, &[worker(0.4, 0.1, StartBasis::Offset)]);
        assert_eq!(out, "");
        clock_lines(&mut out, &[worker(-1500.0, 0.1, StartBasis::Offset)]);
        assert_eq!(
            out,
            "warning: worker 3's clock is 1500.0 ms ahead of the coordinator's (± 0.100 ms); \
             the start used the measured offset, but sync the hosts' clocks (chrony, ntpd) \
             before comparing their logs\n"
        );
        out.clear();
        clock_lines(
            &mut out,
            &[worker(2.0, 7.5, StartBasis::Delay { off_ms: 300.0 })],
        );
        assert_eq!(
            out,
            "clock: worker 3: offset +2.000 ms ± 7.500 ms (min RTT 15.000 ms), start: the delay \
             from receipt (the coordinator's instant was +300.0 ms off)\n"
        );
    }
}

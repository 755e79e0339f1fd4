//! Precise dispatch for open-loop schedules.
//!
//! tokio's timer wheel has millisecond ticks: a sleep ends up to 1 ms late,
//! which at a few hundred requests per second visibly distorts the arrival
//! process (a 5 ms mean gap gets ~0.5 ms of extra jitter per send). A
//! dedicated thread sleeps with the OS timer instead (tens of microseconds)
//! and hands each due request to the runtime through a bounded channel, so a
//! busy runtime never delays the schedule itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cicada_plan::schedule::{ScheduleSpec, Slot};
use tokio::sync::mpsc;

/// Longest single OS sleep, so a stop request is noticed promptly.
const MAX_NAP: Duration = Duration::from_millis(20);

/// Slots queued ahead of the runtime (bounded: a rate of "inf" must not queue a whole run).
const QUEUE: usize = 256;

/// Stops the dispatcher thread when dropped.
pub(super) struct Dispatcher {
    pub slots: mpsc::Receiver<Slot>,
    stop: Arc<AtomicBool>,
    /// Offset (µs) from which its slots are not sent: the web UI changed the rate there.
    cut: Arc<AtomicU64>,
}

impl Dispatcher {
    /// Release no slot due at or after `at` (another schedule takes over
    /// there); the thread ends within a nap once its next slot is that late.
    pub fn cut(&self, at: Duration) {
        self.cut.fetch_min(at.as_micros() as u64, Ordering::Relaxed);
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Start a thread that releases `index mod count == stripe` slots of
/// `schedule` due from `from` on at `start + offset`; it ends with the
/// schedule, at `end`, at its cut, or when dropped.
pub(super) fn start(
    schedule: ScheduleSpec,
    stripe: (u32, u32),
    start: Instant,
    end: Option<Duration>,
    from: Duration,
) -> Dispatcher {
    let (tx, rx) = mpsc::channel(QUEUE);
    let stop = Arc::new(AtomicBool::new(false));
    let cut = Arc::new(AtomicU64::new(u64::MAX));
    let (flag, cut_at) = (stop.clone(), cut.clone());
    let spawned = std::thread::Builder::new()
        .name("cicada-dispatch".into())
        .spawn(move || {
            let slots = schedule.stripe(stripe.0, stripe.1);
            for slot in slots.skip_while(|s| s.offset < from) {
                if end.is_some_and(|e| slot.offset >= e) {
                    break;
                }
                let due = start + slot.offset;
                let past_cut =
                    |s: &Slot| s.offset.as_micros() as u64 >= cut_at.load(Ordering::Relaxed);
                loop {
                    if flag.load(Ordering::Relaxed) || past_cut(&slot) {
                        return;
                    }
                    let now = Instant::now();
                    if now >= due {
                        break;
                    }
                    std::thread::sleep((due - now).min(MAX_NAP));
                }
                if end.is_some_and(|e| start.elapsed() >= e) {
                    break;
                }
                if tx.blocking_send(slot).is_err() {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the dispatcher thread; no requests will be sent");
    }
    Dispatcher {
        slots: rx,
        stop,
        cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_plan::units::Rate;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slots_are_released_on_time_in_order() {
        let schedule = ScheduleSpec {
            seed: 1,
            rate: Rate::Finite(500.0),
            burstiness: 1.0,
            requests: Some(200),
            duration: None,
            pool_size: 10,
            ramp: None,
            stages: Vec::new(),
            arrivals_us: None,
        };
        let start = Instant::now() + Duration::from_millis(20);
        let mut d = self::start(schedule.clone(), (1, 2), start, None, Duration::ZERO);
        let mut got = Vec::new();
        while let Some(slot) = d.slots.recv().await {
            let late = Instant::now().saturating_duration_since(start + slot.offset);
            got.push((slot.index, late));
        }
        let expected: Vec<u64> = schedule.stripe(1, 2).map(|s| s.index).collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), expected);
        // the point is no millisecond-tick rounding (that alone puts the
        // median past 0.5 ms); judged by the median, as the mean moved 0.14
        // to 2.2 ms with other work on the machine while the median held at
        // 0.14-0.17 ms
        let mut late: Vec<f64> = got.iter().map(|g| g.1.as_secs_f64()).collect();
        late.sort_by(f64::total_cmp);
        let median = late[late.len() / 2];
        assert!(median < 0.0005, "median lateness {median} s");
    }
}

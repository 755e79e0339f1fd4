//! Token deadlines finer than tokio's timer.
//!
//! tokio's timer wheel ticks every millisecond and rounds each sleep up to the
//! next tick, so a 10 ms gap is served as 10 to 11 ms and the mock's ITL p99
//! sits a millisecond or two above the truth. A stream therefore sleeps on
//! tokio until [`COARSE_MARGIN`] before its deadline and hands the last stretch
//! to this timer: one thread per mock that keeps the pending deadlines in a
//! heap and wakes each task at its instant (tens of microseconds late, with
//! the thread's timer slack set to 1 µs).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::Waker;
use std::time::{Duration, Instant};

/// How long before a deadline a stream leaves tokio's timer for this one.
pub(crate) const COARSE_MARGIN: Duration = Duration::from_millis(2);

struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct Pending {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    shutdown: bool,
}

#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    changed: Condvar,
}

/// The timer thread; it stops when this is dropped.
pub(crate) struct PreciseTimer {
    shared: Arc<Shared>,
}

impl PreciseTimer {
    /// Start the timer thread.
    pub fn start() -> std::io::Result<PreciseTimer> {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        std::thread::Builder::new()
            .name("mock-timer".into())
            .spawn(move || run(&theirs))?;
        Ok(PreciseTimer { shared })
    }

    /// Wake `waker` at `at` (at once if it has passed); false when the timer
    /// is busy this instant and the caller should fall back to tokio's timer.
    ///
    /// Never blocks: a runtime thread waiting on a lock held by a preempted
    /// timer thread would stall every stream on it for a scheduler time slice.
    pub fn wake_at(&self, at: Instant, waker: &Waker) -> bool {
        let mut p = match self.shared.pending.try_lock() {
            Ok(p) => p,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        let earliest = p.heap.peek().is_none_or(|Reverse(e)| at < e.at);
        p.seq += 1;
        let seq = p.seq;
        p.heap.push(Reverse(Entry {
            at,
            seq,
            waker: waker.clone(),
        }));
        drop(p);
        if earliest {
            self.shared.changed.notify_one();
        }
        true
    }
}

impl Drop for PreciseTimer {
    fn drop(&mut self) {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .shutdown = true;
        self.shared.changed.notify_one();
    }
}

fn run(shared: &Shared) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong);
    }
    let mut due: Vec<Waker> = Vec::new();
    let mut p = shared
        .pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    loop {
        if p.shutdown {
            return;
        }
        let now = Instant::now();
        while p.heap.peek().is_some_and(|Reverse(e)| e.at <= now) {
            if let Some(Reverse(e)) = p.heap.pop() {
                due.push(e.waker);
            }
        }
        if !due.is_empty() {
            drop(p);
            for w in due.drain(..) {
                w.wake();
            }
            p = shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            continue;
        }
        p = match p.heap.peek().map(|Reverse(e)| e.at) {
            None => shared
                .changed
                .wait(p)
                .unwrap_or_else(PoisonError::into_inner),
            Some(at) => {
                shared
                    .changed
                    .wait_timeout(p, at.saturating_duration_since(now))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn wakes_each_deadline_once_and_in_order_of_time() {
        let timer = PreciseTimer::start().unwrap();
        let counts: Vec<Arc<Count>> = (0..3)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect();
        let now = Instant::now();
        // registered out of order: 30 ms, 10 ms, already past
        for (i, at) in [
            now + Duration::from_millis(30),
            now + Duration::from_millis(10),
            now - Duration::from_millis(1),
        ]
        .into_iter()
        .enumerate()
        {
            // the timer thread holds the lock only briefly: retry until it is free
            while !timer.wake_at(at, &Waker::from(counts[i].clone())) {
                std::thread::yield_now();
            }
        }
        let seen = |i: usize| counts[i].0.load(Ordering::SeqCst);
        let wait_for = |i: usize| {
            let limit = Instant::now() + Duration::from_secs(10);
            while seen(i) == 0 && Instant::now() < limit {
                std::thread::sleep(Duration::from_micros(200));
            }
            Instant::now()
        };
        wait_for(2);
        let at1 = wait_for(1);
        assert!(at1 >= now + Duration::from_millis(10));
        let at0 = wait_for(0);
        assert!(at0 >= now + Duration::from_millis(30));
        assert_eq!((seen(0), seen(1), seen(2)), (1, 1, 1));
    }
}

//! Token deadlines on a precise timer.
//!
//! tokio's timer wheel ticks every millisecond and rounds each sleep up to the
//! next tick, so a stream served on it is 0.5 to 1 ms late on average before
//! any load: that lateness is the server's error, and at a few thousand
//! streams it hid the client's. Here every pending deadline sits in one heap,
//! and a Linux `timerfd` (an hrtimer, no timer slack) is armed at the earliest
//! one. The timerfd is registered with the runtime's own reactor, so its
//! expiry wakes a parked runtime at once and a busy one at its next I/O poll;
//! a driver task then wakes every stream whose deadline has come. No thread is
//! added, no lock is held across an await, and nothing blocks the runtime.
//!
//! Expiries are at least [`GRAIN`] apart, so thousands of streams whose
//! deadlines fall microseconds apart share one wake-up instead of paying a
//! system call each; that bounds what the grain adds to a deadline's lateness.
//!
//! Where no timerfd can be had (not Linux, or the call fails), streams fall
//! back to tokio's timer and say so once in the log.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cicada_sys::timer::TimerFd;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Shortest time between two expiries of the timer.
pub(crate) const GRAIN: Duration = Duration::from_micros(50);

/// One stream waiting for its deadline.
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

/// Deadlines not yet reached, and when the timerfd is armed to fire.
struct Pending {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    armed: Option<Instant>,
    last_fire: Instant,
}

struct Inner {
    timer: tokio::io::unix::AsyncFd<TimerFd>,
    pending: Mutex<Pending>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Arm the timer for `at` (no earlier than [`GRAIN`] after the last
    /// expiry) unless it already fires sooner.
    fn arm_for(&self, p: &mut Pending, at: Instant) {
        let at = at.max(p.last_fire + GRAIN);
        if p.armed.is_some_and(|a| a <= at) {
            return;
        }
        match self.timer.get_ref().arm(at.into_std()) {
            Ok(()) => p.armed = Some(at),
            Err(e) => tracing::warn!(error = %e, "cannot arm the mock's token timer"),
        }
    }
}

/// The mock's token timer; cheap to clone.
#[derive(Clone)]
pub(crate) struct PreciseClock {
    inner: Option<Arc<Inner>>,
}

/// Stops the timer's driver task when dropped.
pub(crate) struct ClockDriver(Option<JoinHandle<()>>);

impl Drop for ClockDriver {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

impl PreciseClock {
    /// Start the timer on the current runtime (tokio's timer alone when no
    /// timerfd can be had).
    pub fn start() -> (PreciseClock, ClockDriver) {
        let timer = TimerFd::new().and_then(|t| {
            // SAFETY: the TimerFd owns its descriptor, keeps it open until it
            // is dropped with the AsyncFd, and always returns that same one.
            unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(t, tokio::io::Interest::READABLE)
            }
            .map_err(std::io::Error::from)
        });
        let timer = match timer {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "no precise timer; token deadlines use tokio's 1 ms timer");
                return (PreciseClock { inner: None }, ClockDriver(None));
            }
        };
        let inner = Arc::new(Inner {
            timer,
            pending: Mutex::new(Pending {
                heap: BinaryHeap::new(),
                seq: 0,
                armed: None,
                last_fire: Instant::now(),
            }),
        });
        let task = tokio::spawn(drive(inner.clone()));
        (PreciseClock { inner: Some(inner) }, ClockDriver(Some(task)))
    }

    /// A clock on tokio's timer alone (tests that have no runtime yet).
    #[cfg(test)]
    pub fn coarse() -> PreciseClock {
        PreciseClock { inner: None }
    }

    /// Whether deadlines are met by the precise timer.
    pub fn is_precise(&self) -> bool {
        self.inner.is_some()
    }

    /// Wake `waker` at `at`. Returns false when there is no precise timer
    /// (the caller sleeps on tokio's timer instead).
    pub fn wake_at(&self, at: Instant, waker: &Waker) -> bool {
        let Some(inner) = &self.inner else {
            return false;
        };
        let mut p = inner.lock();
        p.seq += 1;
        let seq = p.seq;
        p.heap.push(Reverse(Entry {
            at,
            seq,
            waker: waker.clone(),
        }));
        inner.arm_for(&mut p, at);
        true
    }

    /// A future that completes at `at`.
    pub fn sleep_until(&self, at: Instant) -> Until {
        Until {
            clock: self.clone(),
            wait: Wait::default(),
            at,
            coarse: None,
        }
    }
}

/// Wake every stream whose deadline has come, each time the timer fires.
async fn drive(inner: Arc<Inner>) {
    let mut due: Vec<Waker> = Vec::new();
    loop {
        match inner.timer.readable().await {
            Ok(mut ready) => {
                // reading the expiry count re-arms readiness; WouldBlock is a spurious wake
                if let Err(e) = ready.get_inner().read_expiries()
                    && e.kind() != std::io::ErrorKind::WouldBlock
                {
                    tracing::warn!(error = %e, "reading the mock's token timer");
                }
                ready.clear_ready();
            }
            Err(e) => {
                tracing::error!(error = %e, "the mock's token timer failed; streams fall back to tokio's timer");
                return;
            }
        }
        {
            let mut p = inner.lock();
            let now = Instant::now();
            p.armed = None;
            p.last_fire = now;
            while p.heap.peek().is_some_and(|Reverse(e)| e.at <= now) {
                if let Some(Reverse(e)) = p.heap.pop() {
                    due.push(e.waker);
                }
            }
            if let Some(next) = p.heap.peek().map(|Reverse(e)| e.at) {
                inner.arm_for(&mut p, next);
            }
        }
        for w in due.drain(..) {
            w.wake();
        }
    }
}

/// A stream's registration with the clock: the deadline and waker it handed
/// over, so a task polled again before its deadline is not queued twice.
#[derive(Default)]
pub(crate) struct Wait {
    registered: Option<(Instant, Waker)>,
}

impl Wait {
    /// Ready once `at` has passed; otherwise registered with `clock` (or
    /// `coarse`, tokio's timer, when the clock has no precise timer).
    pub fn poll_until(
        &mut self,
        clock: &PreciseClock,
        coarse: &mut Pin<Box<tokio::time::Sleep>>,
        at: Instant,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        if Instant::now() >= at {
            self.registered = None;
            return Poll::Ready(());
        }
        if !clock.is_precise() {
            coarse.as_mut().reset(at);
            return coarse.as_mut().poll(cx);
        }
        let same = self
            .registered
            .as_ref()
            .is_some_and(|(d, w)| *d == at && w.will_wake(cx.waker()));
        if !same && clock.wake_at(at, cx.waker()) {
            self.registered = Some((at, cx.waker().clone()));
        }
        Poll::Pending
    }
}

/// [`PreciseClock::sleep_until`]'s future.
pub(crate) struct Until {
    clock: PreciseClock,
    wait: Wait,
    at: Instant,
    coarse: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Future for Until {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let at = this.at;
        let coarse = this
            .coarse
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        this.wait.poll_until(&this.clock, coarse, at, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn sleeps_end_at_their_deadline_in_order() {
        let (clock, _driver) = PreciseClock::start();
        assert!(clock.is_precise());
        let start = Instant::now();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // registered out of order: 30, 10, 20 ms, and one already past
        for (i, ms) in [30u64, 10, 20, 0].into_iter().enumerate() {
            let (clock, order) = (clock.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let at = start + Duration::from_millis(ms);
                clock.sleep_until(at).await;
                let woke = Instant::now();
                order.lock().unwrap().push(i);
                woke.saturating_duration_since(at)
            }));
        }
        let mut late = Vec::new();
        for t in tasks {
            late.push(t.await.unwrap());
        }
        assert_eq!(*order.lock().unwrap(), vec![3, 1, 2, 0]);
        for (i, l) in late.iter().enumerate() {
            // never early (checked by the future), and not a whole tokio tick late
            // on an idle runtime unless the machine preempted us
            assert!(
                *l < Duration::from_millis(200),
                "sleep {i} ended {l:?} late"
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_task_polled_again_is_registered_once() {
        let (clock, _driver) = PreciseClock::start();
        let at = Instant::now() + Duration::from_millis(5);
        let waker = futures_noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut wait = Wait::default();
        let mut coarse = Box::pin(tokio::time::sleep_until(at));
        for _ in 0..3 {
            assert!(
                wait.poll_until(&clock, &mut coarse, at, &mut cx)
                    .is_pending()
            );
        }
        let inner = clock.inner.as_ref().unwrap();
        assert_eq!(inner.lock().heap.len(), 1);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(wait.poll_until(&clock, &mut coarse, at, &mut cx).is_ready());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn without_a_timerfd_tokio_keeps_time() {
        let clock = PreciseClock::coarse();
        let at = Instant::now() + Duration::from_millis(3);
        clock.sleep_until(at).await;
        assert!(Instant::now() >= at);
    }

    fn futures_noop_waker() -> Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        Waker::from(Arc::new(Noop))
    }
}

//! Closed loop, Locust style: each user sends a request, waits for it to end,
//! thinks, and sends the next. Users start at the spawn rate and join or leave
//! at step boundaries; a leaving user finishes its request first. The web
//! UI's changes (`steering`) add segments while the loop runs: a user runs
//! its windows of each segment in turn, a segment giving way to the next at
//! the change's instant.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cicada_plan::schedule::Slot;
use cicada_plan::shape::Cooldown;
use cicada_plan::{ClosedLoop, Drive};
use rand::Rng;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::request::send_one;
use super::{Course, Step};
use cicada_client::clock::Clock;

type CourseRx = watch::Receiver<Arc<Course>>;

/// Run this worker's users; returns requests dispatched.
pub(super) async fn run(
    step: Arc<Step>,
    clock: Clock,
    stop: CancellationToken,
    cancel: CancellationToken,
) -> u64 {
    let Drive::Closed(cl) = &step.plan.drive else {
        return 0;
    };
    let (duration, steerable) = (cl.duration, cl.requests.is_none());
    let tracker = TaskTracker::new();
    let sent = Arc::new(AtomicU64::new(0));
    let mut course = step.steering.subscribe();
    let mut started = BTreeSet::new();
    loop {
        let users = course.borrow_and_update().users();
        for user in users.difference(&started).copied() {
            let (step, stop, cancel, sent) =
                (step.clone(), stop.clone(), cancel.clone(), sent.clone());
            let course = course.clone();
            tracker.spawn(async move {
                let n = run_user(&step, user, clock, &stop, &cancel, course).await;
                sent.fetch_add(n, Ordering::Relaxed);
            });
        }
        started = users;
        // a count-bound loop never changes; a time-bound one may until its end
        let Some(d) = duration.filter(|_| steerable) else {
            break;
        };
        tokio::select! {
            r = course.changed() => if r.is_err() { break },
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(clock.start() + d) => break,
        }
    }
    tracker.close();
    if let (Some(d), Cooldown::Cancel) = (duration, step.plan.cooldown) {
        tokio::select! {
            () = tracker.wait() => {}
            () = tokio::time::sleep_until(clock.start() + d) => cancel.cancel(),
        }
    }
    tracker.wait().await;
    sent.load(Ordering::Relaxed)
}

/// Sleep until `at` after the barrier, waking early when the course
/// changes; false if the run was stopped first.
async fn nap(clock: Clock, at: Duration, stop: &CancellationToken, course: &mut CourseRx) -> bool {
    tokio::select! {
        () = tokio::time::sleep_until(clock.start() + at) => true,
        () = stop.cancelled() => false,
        r = course.changed() => {
            if r.is_err() {
                // nobody changes the course any more: just sleep
                tokio::select! {
                    () = tokio::time::sleep_until(clock.start() + at) => {}
                    () = stop.cancelled() => return false,
                }
            }
            true
        }
    }
}

/// One user through every segment of the course, until the run ends.
async fn run_user(
    step: &Arc<Step>,
    id: u32,
    clock: Clock,
    stop: &CancellationToken,
    cancel: &CancellationToken,
    mut course: CourseRx,
) -> u64 {
    let end = step.plan.duration();
    let mut sent = 0u64;
    let mut seg = 0usize;
    loop {
        let now = course.borrow_and_update().clone();
        match now.segments.get(seg) {
            Some((_, cl)) => {
                if cl.users.contains(&id) {
                    let user = User {
                        step,
                        id,
                        clock,
                        stop,
                        cancel,
                        seg,
                    };
                    sent += user.run_segment(cl, &mut course).await;
                }
                seg += 1;
            }
            // no later change yet: wait for one until the run ends
            None => match end {
                Some(d) if !stop.is_cancelled() => {
                    let ended = Duration::from_micros(clock.now_us()) >= d;
                    if ended || !nap(clock, d, stop, &mut course).await {
                        return sent;
                    }
                }
                _ => return sent,
            },
        }
        if stop.is_cancelled() {
            return sent;
        }
    }
}

/// One user in one segment of the course.
struct User<'a> {
    step: &'a Arc<Step>,
    id: u32,
    clock: Clock,
    stop: &'a CancellationToken,
    cancel: &'a CancellationToken,
    seg: usize,
}

impl User<'_> {
    /// Run this user's windows of segment `cl` until they end or a later
    /// change cuts the segment; returns requests sent.
    async fn run_segment(&self, cl: &ClosedLoop, course: &mut CourseRx) -> u64 {
        let mut rng = cl.think_rng(self.id);
        let (mut k, mut sent) = (0u64, 0u64);
        for (from, until) in cl.windows(self.id) {
            // when this user meant to send next: the window's start, then the
            // end of its previous request plus its think time (its `t_sched`,
            // so a user that wakes late shows it as schedule lag)
            let mut due = from;
            loop {
                let index = cl.index(self.id, k);
                if cl.requests.is_some_and(|n| index >= n) {
                    return sent;
                }
                let cut = course.borrow_and_update().cut(self.seg);
                let until = match (until, cut) {
                    (Some(u), Some(c)) => Some(u.min(c)),
                    (u, c) => u.or(c),
                };
                if self.stop.is_cancelled() {
                    return sent;
                }
                if until.is_some_and(|u| due >= u) {
                    break;
                }
                // compared as instants: before the barrier the clock's offset
                // reads 0, and a first request due at 0 must still wait for it
                if tokio::time::Instant::now() < self.clock.start() + due {
                    if !nap(self.clock, due, self.stop, course).await {
                        return sent;
                    }
                    continue;
                }
                let now = Duration::from_micros(self.clock.now_us());
                if until.is_some_and(|u| now >= u) {
                    break;
                }
                let slot = Slot {
                    index,
                    offset: due,
                    pool_id: index % cl.pool_size.max(1),
                    stage: self.step.steering.stage_of(now),
                };
                let ended =
                    send_one(self.step.clone(), slot, self.clock, self.cancel.clone()).await;
                k += 1;
                sent += 1;
                let think = cl.think.sample(rng.random::<f64>());
                let ended = ended.unwrap_or_else(|| self.clock.now_us());
                due = Duration::from_micros(ended) + think;
            }
        }
        sent
    }
}

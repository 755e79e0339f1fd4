//! Closed loop, Locust style: each user sends a request, waits for it to end,
//! thinks, and sends the next. Users start at the spawn rate and join or leave
//! at step boundaries; a leaving user finishes its request first.

use std::sync::Arc;
use std::time::Duration;

use cicada_scenarios::plan::{ClosedLoop, Drive};
use cicada_scenarios::schedule::Slot;
use cicada_scenarios::shape::Cooldown;
use rand::Rng;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Step;
use super::request::send_one;
use cicada_client::clock::Clock;

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
    let tracker = TaskTracker::new();
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for &user in &cl.users {
        let (step, stop, cancel, sent) = (step.clone(), stop.clone(), cancel.clone(), sent.clone());
        tracker.spawn(async move {
            let n = run_user(&step, user, clock, &stop, &cancel).await;
            sent.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        });
    }
    tracker.close();
    if let (Some(d), Cooldown::Cancel) = (cl.duration, step.plan.cooldown) {
        tokio::select! {
            () = tracker.wait() => {}
            () = tokio::time::sleep_until(clock.start() + d) => cancel.cancel(),
        }
    }
    tracker.wait().await;
    sent.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sleep until `at` after the barrier; false if the run was stopped first.
async fn sleep_until(clock: Clock, at: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep_until(clock.start() + at) => true,
        () = stop.cancelled() => false,
    }
}

async fn run_user(
    step: &Arc<Step>,
    user: u32,
    clock: Clock,
    stop: &CancellationToken,
    cancel: &CancellationToken,
) -> u64 {
    let Drive::Closed(cl) = &step.plan.drive else {
        return 0;
    };
    let cl: &ClosedLoop = cl;
    let mut rng = cl.think_rng(user);
    let mut k = 0u64;
    let mut sent = 0u64;
    for (from, until) in cl.windows(user) {
        if !sleep_until(clock, from, stop).await {
            return sent;
        }
        // when this user meant to send next: the window's start, then the end
        // of its previous request plus its think time (its `t_sched`, so a
        // user that wakes late shows it as schedule lag)
        let mut due = from;
        loop {
            let index = cl.index(user, k);
            if cl.requests.is_some_and(|n| index >= n) {
                return sent;
            }
            let now = Duration::from_micros(clock.now_us());
            if until.is_some_and(|u| now >= u || due >= u) || stop.is_cancelled() {
                break;
            }
            let slot = Slot {
                index,
                offset: due,
                pool_id: index % cl.pool_size.max(1),
                stage: step.plan.stage_of(now),
            };
            let ended = send_one(step.clone(), slot, clock, cancel.clone()).await;
            k += 1;
            sent += 1;
            let think = cl.think.sample(rng.random::<f64>());
            let ended = ended.unwrap_or_else(|| clock.now_us());
            due = Duration::from_micros(ended) + think;
            if !think.is_zero() && !sleep_until(clock, due, stop).await {
                return sent;
            }
        }
    }
    sent
}

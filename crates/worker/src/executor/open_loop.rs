//! Open loop: requests leave at their scheduled times whatever the server does;
//! a concurrency cap, if any, queues them (the wait shows up as schedule lag).

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Stage;
use super::request::send_one;
use crate::clock::Clock;

/// Run this worker's stripe. `stop` ends dispatching (in-flight requests finish);
/// `cancel` also aborts in-flight requests, which are counted as cancelled.
/// Returns the number of requests dispatched.
pub async fn run_open_loop(
    stage: Arc<Stage>,
    clock: Clock,
    stop: CancellationToken,
    cancel: CancellationToken,
) -> u64 {
    let Some(stripe) = stage.plan.stripe else {
        return 0;
    };
    let slots = stage
        .plan
        .slots
        .map(|s| Arc::new(Semaphore::new(s as usize)));
    let duration = stage.plan.schedule.duration;
    let tracker = TaskTracker::new();
    let mut dispatched = 0u64;
    for slot in stage.plan.schedule.stripe(stripe.index, stripe.count) {
        if stop.is_cancelled() {
            break;
        }
        let due = clock.start() + slot.offset;
        if due > tokio::time::Instant::now() {
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = stop.cancelled() => break,
            }
        }
        let permit = match &slots {
            Some(sem) => tokio::select! {
                p = sem.clone().acquire_owned() => match p {
                    Ok(p) => Some(p),
                    Err(_) => break,
                },
                () = stop.cancelled() => break,
            },
            None => None,
        };
        if let Some(d) = duration
            && clock.now_us() >= d.as_micros() as u64
        {
            break;
        }
        let (stage, cancel) = (stage.clone(), cancel.clone());
        tracker.spawn(async move {
            send_one(stage, slot, clock, cancel).await;
            drop(permit);
        });
        dispatched += 1;
    }
    tracker.close();
    tracker.wait().await;
    dispatched
}

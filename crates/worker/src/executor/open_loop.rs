//! Open loop: requests leave at their scheduled times whatever the server does;
//! a concurrency cap, if any, queues them (the wait shows up as schedule lag).
//! The cap is the fleet's: requests are admitted in the order of their global
//! index, as with one semaphore over every worker (see `gate`).

use std::sync::Arc;

use cicada_scenarios::plan::Drive;
use cicada_scenarios::shape::Cooldown;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Step;
use super::dispatch;
use super::request::send_one;
use cicada_client::clock::Clock;

/// Run this worker's stripe of the schedule; returns requests dispatched.
pub(super) async fn run(
    step: Arc<Step>,
    clock: Clock,
    stop: CancellationToken,
    cancel: CancellationToken,
) -> u64 {
    let Drive::Open {
        stripe: Some(stripe),
        schedule,
        ..
    } = &step.plan.drive
    else {
        return 0;
    };
    let duration = schedule.duration;
    let end_of_run = async move {
        match duration {
            Some(d) => tokio::time::sleep_until(clock.start() + d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(end_of_run);
    let mut dispatcher = dispatch::start(
        schedule.clone(),
        (stripe.index, stripe.count),
        clock.start().into_std(),
        duration,
    );
    let tracker = TaskTracker::new();
    let mut dispatched = 0u64;
    loop {
        let slot = tokio::select! {
            s = dispatcher.slots.recv() => match s {
                Some(s) => s,
                None => break,
            },
            () = stop.cancelled() => break,
        };
        if let Some(gate) = &step.gate {
            let admitted = tokio::select! {
                ok = gate.admit(slot.index) => ok,
                () = stop.cancelled() => false,
                () = &mut end_of_run => false,
            };
            if !admitted {
                break;
            }
        }
        if let Some(d) = duration
            && clock.now_us() >= d.as_micros() as u64
        {
            if let Some(gate) = &step.gate {
                gate.finished();
            }
            break;
        }
        let (step, cancel) = (step.clone(), cancel.clone());
        tracker.spawn(async move {
            let _ = send_one(step.clone(), slot, clock, cancel).await;
            if let Some(gate) = &step.gate {
                gate.finished();
            }
        });
        dispatched += 1;
    }
    drop(dispatcher);
    tracker.close();
    if let (Some(d), Cooldown::Cancel) = (duration, step.plan.cooldown) {
        // duration-bound run with cool-down "cancel": abort what is still in flight at the end
        tokio::select! {
            () = tracker.wait() => {}
            () = tokio::time::sleep_until(clock.start() + d) => cancel.cancel(),
        }
    }
    tracker.wait().await;
    dispatched
}

//! Open loop: requests leave at their scheduled times whatever the server does;
//! a concurrency cap, if any, queues them (the wait shows up as schedule lag).
//! The cap is the fleet's: requests are admitted in the order of their global
//! index, as with one semaphore over every worker (see `gate`). A change of
//! rate from the web UI cuts the running schedule at its instant and lets
//! the changed one take over there (see `steering`); a change of the cap
//! switches the gate at its instant.
//!
//! In a mixed run an arrival that picks a session workload starts one
//! session instead of a request: it holds its slot of the cap (if any) from
//! its first turn to its end, as a Locust user runs its task sequence.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cicada_plan::Drive;
use cicada_plan::schedule::Slot;
use cicada_plan::shape::Cooldown;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conversation::{Start, run_session};
use super::dispatch;
use super::request::send_one;
use super::{Ended, Step};
use cicada_client::clock::Clock;

/// Run this worker's stripe of the schedule. At a time limit, requests due
/// before it that have not left yet (the worker fell behind its schedule:
/// starved of CPU, or waiting for the fleet cap) are not sent late: they are
/// counted as not sent, and the share ends as planned.
pub(super) async fn run(
    step: Arc<Step>,
    clock: Clock,
    stop: CancellationToken,
    cancel: CancellationToken,
) -> Ended {
    let Drive::Open {
        stripe: Some(stripe),
        schedule,
        ..
    } = &step.plan.drive
    else {
        return Ended::default();
    };
    let duration = schedule.duration;
    let end_of_run = async move {
        match duration {
            Some(d) => tokio::time::sleep_until(clock.start() + d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(end_of_run);
    let stripe = (stripe.index, stripe.count);
    let begin = clock.start().into_std();
    let mut dispatcher = dispatch::start(schedule.clone(), stripe, begin, duration, Duration::ZERO);
    // the changed schedules, each waiting for the one before it to reach its cut
    let mut next: VecDeque<dispatch::Dispatcher> = VecDeque::new();
    let mut course = step.steering.subscribe();
    let mut taken = course.borrow_and_update().schedules.len();
    let mut caps_taken = 0;
    let tracker = TaskTracker::new();
    let mut dispatched = 0u64;
    // a mixed run's sessions: how many arrivals started one, their turns sent
    let (mut sessions, turns) = (0u64, Arc::new(AtomicU64::new(0)));
    loop {
        let mut slot = tokio::select! {
            s = dispatcher.slots.recv() => match s {
                Some(s) => s,
                // at its cut: the changed schedule takes over
                None => match next.pop_front() {
                    Some(d) => {
                        dispatcher = d;
                        continue;
                    }
                    None => break,
                },
            },
            Ok(()) = course.changed() => {
                let now = course.borrow_and_update().clone();
                for (at, changed) in now.schedules.iter().skip(taken) {
                    next.back().unwrap_or(&dispatcher).cut(*at);
                    let d = dispatch::start((**changed).clone(), stripe, begin, duration, *at);
                    next.push_back(d);
                }
                taken = now.schedules.len();
                for &(at, cap) in now.caps.iter().skip(caps_taken) {
                    switch_cap_at(&step, clock, at, cap);
                }
                caps_taken = now.caps.len();
                continue;
            }
            () = stop.cancelled() => break,
        };
        if taken > 1 || caps_taken > 0 {
            // the changes' windows name the stage
            slot.stage = step.steering.stage_of(slot.offset);
        }
        if let Some(gate) = &step.gate {
            let admitted = tokio::select! {
                ok = gate.admit(slot.index) => ok,
                () = stop.cancelled() => false,
                () = &mut end_of_run => false,
            };
            if !admitted {
                break;
            }
            if caps_taken > 0 {
                // the cap decides when a request goes: one that waited for
                // it past a change belongs to the stage that let it go
                let sent = Duration::from_micros(clock.now_us()).max(slot.offset);
                slot.stage = step.steering.stage_of(sent);
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
        let begun = Begin {
            clock,
            stop: &stop,
            cancel: &cancel,
            turns: &turns,
        };
        sessions += u64::from(spawn_arrival(&step, &tracker, slot, begun));
        dispatched += 1;
    }
    drop(dispatcher);
    drop(next);
    // a changed rate leaves the share open-ended: it has no plan to be behind
    let planned = if taken <= 1 { step.planned } else { 0 };
    let not_sent_at_end = drain(&step, tracker, clock, &stop, &cancel, planned, dispatched).await;
    Ended {
        sent: dispatched - sessions + turns.load(Ordering::Relaxed),
        not_sent_at_end,
    }
}

/// What an arrival is started with besides its step and slot.
struct Begin<'a> {
    clock: Clock,
    stop: &'a CancellationToken,
    cancel: &'a CancellationToken,
    /// Where a session counts the turns it sent.
    turns: &'a Arc<AtomicU64>,
}

/// Start arrival `slot` on `tracker`: one request, or (when it picked a
/// mixed run's session workload) one session; either gives its cap slot
/// back when it ends. Returns whether it started a session.
fn spawn_arrival(step: &Arc<Step>, tracker: &TaskTracker, slot: Slot, b: Begin<'_>) -> bool {
    if let Some(settings) = step.sessions_of(&slot).cloned() {
        let start = Start {
            step: step.clone(),
            slot,
            settings,
            clock: b.clock,
            stop: b.stop.clone(),
            cancel: b.cancel.clone(),
            sent: b.turns.clone(),
        };
        // boxed as a request is (below)
        tracker.spawn(Box::pin(async move {
            let step = start.step.clone();
            run_session(start).await;
            if let Some(gate) = &step.gate {
                gate.finished();
            }
        }));
        return true;
    }
    let (step, cancel, clock) = (step.clone(), b.cancel.clone(), b.clock);
    // Boxed: the request's future is kilobytes, and tokio moves a task's
    // future by value (into its cell, then at each stage change); a box
    // makes those moves a pointer's. Unboxed, memcpy was 74 % of the
    // worker's instructions at a fixed rate (callgrind, docs/PERFORMANCE.md).
    tracker.spawn(Box::pin(async move {
        let _ = send_one(step.clone(), slot, clock, cancel).await;
        if let Some(gate) = &step.gate {
            gate.finished();
        }
    }));
    false
}

/// Let the requests in flight end (or cancel them at the time limit, as the
/// cool-down says); the planned requests not sent when the time limit came.
async fn drain(
    step: &Step,
    tracker: TaskTracker,
    clock: Clock,
    stop: &CancellationToken,
    cancel: &CancellationToken,
    planned: u64,
    dispatched: u64,
) -> u64 {
    let duration = step.plan.duration();
    tracker.close();
    if let (Some(d), Cooldown::Cancel) = (duration, step.plan.cooldown) {
        // duration-bound run with cool-down "cancel": abort what is still in flight at the end
        tokio::select! {
            () = tracker.wait() => {}
            () = tokio::time::sleep_until(clock.start() + d) => cancel.cancel(),
        }
    }
    tracker.wait().await;
    // the schedule ended (every due slot went out) or its time limit came
    // first; a stop from the coordinator or a signal is not a time limit
    if duration.is_some() && !stop.is_cancelled() {
        planned.saturating_sub(dispatched)
    } else {
        0
    }
}

/// Switch the gate to `cap` at `at` after the barrier (the coordinator
/// switches its side at the same instant on its clock).
fn switch_cap_at(step: &Arc<Step>, clock: Clock, at: Duration, cap: u32) {
    let step = step.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(clock.start() + at).await;
        if let Some(gate) = &step.gate {
            gate.set_cap(cap);
        }
    });
}

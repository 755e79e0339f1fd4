//! What one worker receives: the resolved target and sampling, what drives its
//! load (its stripe of the schedule, or its users), `[[stages]]` windows, and the pool
//! entries it needs. It travels as typed protobuf (`proto/plan.proto`); the
//! conversion lives at the wire's edge (`cicada-proto`).

use std::time::Duration;

use cicada_metrics::Slo;
use cicada_request::{OutputShape, ResolvedSampling};
use serde::{Deserialize, Serialize};

use crate::closed_loop::ClosedLoop;
use crate::pool::PoolEntry;
use crate::schedule::ScheduleSpec;
use crate::sessions::ConversationSettings;
use crate::shape::{Cooldown, Warmup};
use crate::target::ResolvedTarget;
use crate::workloads::{WorkloadPart, entry_of};

/// Longest schedule counted to plan a time-bound run.
const COUNT_LIMIT: usize = 5_000_000;

/// Which requests of the global schedule a worker sends: `index mod count == index_in`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stripe {
    pub index: u32,
    pub count: u32,
}

/// Everything one worker needs for one step of the run (the run itself,
/// or one value of a `[sweep]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub run_id: String,
    /// The step (0 without a sweep, else from 1); `stage` on the wire.
    #[serde(rename = "stage")]
    pub step: u32,
    pub worker_index: u32,
    pub worker_count: u32,
    pub target: ResolvedTarget,
    pub sampling: ResolvedSampling,
    pub slo: Slo,
    /// What drives the load: a schedule (open loop) or users (closed loop).
    pub drive: Drive,
    /// Windows of `[[stages]]`, for per-stage results (empty: one implicit
    /// stage); `stages` on the wire.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "phases")]
    pub stages: Vec<StageWindow>,
    /// Requests before measuring starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Warmup>,
    /// In-flight requests at the end of a duration-bound run: finish or cancel.
    #[serde(default)]
    pub cooldown: Cooldown,
    /// Pool entries this worker uses.
    pub pool: Vec<PoolEntry>,
    /// The tools / response formats its entries point into (`PoolEntry::shape`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<OutputShape>,
    pub report_interval_ms: u64,
    /// `tokenizer.json` text, when workers count or verify output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Verify usage against the tokenizer on every n-th request (0 = never).
    #[serde(default)]
    pub verify_every: u32,
    /// Set when every scheduled request starts a multi-turn conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<ConversationSettings>,
    /// Send every request's record with the reports (`output.save_detailed`).
    #[serde(default)]
    pub details: bool,
    /// Mixed traffic: each workload's resolved part; request `i` picks one
    /// (`workloads::entry_of`). Empty: one workload, the plan's own target,
    /// sampling, SLO and pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadPart>,
}

/// One window of `[[stages]]` in time after the barrier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageWindow {
    pub name: String,
    pub start: Duration,
    pub end: Duration,
}

/// Index of the window of `windows` that holds `offset` (0 without windows).
pub fn stage_of(windows: &[StageWindow], offset: Duration) -> u32 {
    windows
        .iter()
        .position(|p| offset < p.end)
        .unwrap_or(windows.len().saturating_sub(1)) as u32
}

/// The windows after a change of the load at `at` named `name`: the
/// windows before `at` stay (the one holding it ends there; the ones after
/// it never run), and a new one runs from `at` until `run_end` (the end of
/// a time-bound run, else for ever). Without windows, the run until `at`
/// becomes the first, `start`. Coordinator and workers both apply it, so
/// they agree on every window's index.
pub fn steer_windows(
    windows: &mut Vec<StageWindow>,
    at: Duration,
    name: &str,
    run_end: Option<Duration>,
) {
    if windows.is_empty() {
        windows.push(StageWindow {
            name: "start".into(),
            start: Duration::ZERO,
            end: at,
        });
    }
    windows.retain(|w| w.start < at || w.start.is_zero());
    if let Some(last) = windows.last_mut() {
        last.end = last.end.min(at);
    }
    windows.push(StageWindow {
        name: name.to_string(),
        start: at,
        end: run_end.unwrap_or(Duration::MAX),
    });
}

/// What drives a worker's load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Drive {
    /// Open loop: the worker's stripe of the global schedule.
    Open {
        /// `None` when this worker has nothing to send (more workers than concurrency).
        stripe: Option<Stripe>,
        schedule: ScheduleSpec,
        /// Requests this worker may have in flight (its share of
        /// `max_concurrency`): what conversations use, whose turns have no
        /// global order.
        slots: Option<u32>,
        /// `max_concurrency` over the whole fleet: single requests are
        /// admitted in the order of their global index against it, as with
        /// one semaphore (the worker's gate, the coordinator's cap).
        #[serde(default)]
        fleet_slots: Option<u32>,
    },
    /// Closed loop: this worker's users.
    Closed(ClosedLoop),
}

impl Plan {
    /// Stage of `[[stages]]` whose window holds `offset` (0 without stages).
    pub fn stage_of(&self, offset: Duration) -> u32 {
        stage_of(&self.stages, offset)
    }

    /// The scenario's seed, for per-request choices (such as a random replica)
    /// that must not depend on the worker count.
    pub fn seed(&self) -> u64 {
        match &self.drive {
            Drive::Open { schedule, .. } => schedule.seed,
            Drive::Closed(c) => c.seed,
        }
    }

    /// How long the run lasts, when it is time-bound.
    pub fn duration(&self) -> Option<Duration> {
        match &self.drive {
            Drive::Open { schedule, .. } => schedule.duration,
            Drive::Closed(c) => c.duration,
        }
    }

    /// The fleet-wide cap this worker's single requests are admitted against,
    /// and whether other workers share it (`None`: no cap, or conversations,
    /// which split the cap per worker).
    pub fn fleet_cap(&self) -> Option<(u32, bool)> {
        match &self.drive {
            Drive::Open {
                stripe: Some(st),
                fleet_slots: Some(c),
                ..
            } if self.conversations.is_none() => Some((*c, st.count > 1)),
            _ => None,
        }
    }

    /// Whether request `index`, due at `offset`, is a warm-up request.
    pub fn is_warmup(&self, index: u64, offset: Duration) -> bool {
        self.warmup.is_some_and(|w| w.covers(index, offset))
    }

    /// Whether any arrival of this plan starts a session: a session
    /// workload's plan, or a mix with a session workload.
    pub fn has_sessions(&self) -> bool {
        self.conversations.is_some() || self.workloads.iter().any(|w| w.sessions.is_some())
    }

    /// Sessions this worker will start, when it runs sessions and the run
    /// is count-bound (0 otherwise): what a lost worker's share is counted
    /// against, so a session it never reported is never silently dropped.
    /// In a mix, its arrivals that pick a session workload.
    pub fn planned_sessions(&self) -> u64 {
        match &self.drive {
            Drive::Open {
                stripe: Some(st),
                schedule,
                ..
            } if self.has_sessions() && schedule.duration.is_none() => {
                let Some(n) = schedule.requests else {
                    return 0;
                };
                if self.workloads.is_empty() {
                    return stripe_share(n, st.index, st.count);
                }
                schedule
                    .stripe(st.index, st.count)
                    .filter(|slot| {
                        entry_of(&self.workloads, slot.index, self.seed())
                            .is_some_and(|(w, _)| self.workloads[w].sessions.is_some())
                    })
                    .count() as u64
            }
            _ => 0,
        }
    }

    /// Requests this worker will send, when the run is count-bound (0 when
    /// open-ended): its arrivals, each session's counted as the requests its
    /// turns and sub-agents send.
    pub fn planned_requests(&self) -> u64 {
        match &self.drive {
            Drive::Open {
                stripe: Some(st),
                schedule,
                ..
            } if self.has_sessions() => {
                if schedule.requests.is_none() || schedule.duration.is_some() {
                    return 0;
                }
                // the pool share keeps the pool's id order
                let requests_of = |id: u64| {
                    self.pool
                        .binary_search_by_key(&id, |e| e.id)
                        .ok()
                        .and_then(|i| self.pool[i].conversation.as_ref())
                        .map_or(1, |c| c.requests())
                };
                schedule
                    .stripe(st.index, st.count)
                    .map(
                        |slot| match entry_of(&self.workloads, slot.index, self.seed()) {
                            Some((w, id)) if self.workloads[w].sessions.is_some() => {
                                requests_of(id)
                            }
                            Some(_) => 1,
                            None => requests_of(slot.pool_id),
                        },
                    )
                    .sum()
            }
            _ => self.planned_arrivals(),
        }
    }

    /// Arrivals of the schedule (or closed-loop requests) this worker
    /// starts, when the run is count-bound (0 when open-ended): a request or
    /// a session each, as the fleet cap admits them.
    pub fn planned_arrivals(&self) -> u64 {
        match &self.drive {
            Drive::Open { stripe: None, .. } => 0,
            Drive::Open {
                stripe: Some(s),
                schedule,
                ..
            } => match (schedule.requests, schedule.duration) {
                (Some(n), _) => stripe_share(n, s.index, s.count),
                // time-bound: the schedule is deterministic, so count it
                // (unless it is unbounded or too long to be worth counting)
                (None, Some(_))
                    if schedule.rate.per_second().is_some() || schedule.arrivals_us.is_some() =>
                {
                    let counted = schedule.global().take(COUNT_LIMIT).count();
                    if counted == COUNT_LIMIT {
                        0
                    } else {
                        schedule.stripe(s.index, s.count).count() as u64
                    }
                }
                _ => 0,
            },
            Drive::Closed(c) => c.planned_requests(),
        }
    }
}

/// Of `n` global slots dealt round-robin, the ones stripe `index` of
/// `count` gets.
fn stripe_share(n: u64, index: u32, count: u32) -> u64 {
    let (count, index) = (u64::from(count.max(1)), u64::from(index));
    n / count + u64::from(n % count > index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: u64) -> Duration {
        Duration::from_secs(x)
    }

    #[test]
    fn a_change_splits_the_windows_where_it_happens() {
        let mut w = Vec::new();
        steer_windows(&mut w, s(10), "edit-1", Some(s(60)));
        let spans: Vec<_> = w
            .iter()
            .map(|w| (w.name.as_str(), w.start, w.end))
            .collect();
        assert_eq!(spans, [("start", s(0), s(10)), ("edit-1", s(10), s(60))]);
        assert_eq!((stage_of(&w, s(9)), stage_of(&w, s(10))), (0, 1));
        // a change inside a [[stages]] window ends it; the later ones never run
        let win = |n: &str, a, b| StageWindow {
            name: n.into(),
            start: s(a),
            end: s(b),
        };
        let mut w = vec![win("a", 0, 10), win("b", 10, 20), win("c", 20, 30)];
        steer_windows(&mut w, s(15), "edit-1", Some(s(30)));
        let names: Vec<_> = w.iter().map(|w| (w.name.as_str(), w.end)).collect();
        assert_eq!(names, [("a", s(10)), ("b", s(15)), ("edit-1", s(30))]);
        steer_windows(&mut w, s(0), "edit-2", None);
        assert_eq!(w.last().map(|w| w.end), Some(Duration::MAX));
    }
}

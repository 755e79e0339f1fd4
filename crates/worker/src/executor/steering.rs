//! The web UI's Edit as the worker runs it: the step's course, the
//! plan's closed loop followed by each change of users the coordinator
//! sent, each a segment from its instant on (or, for an open loop, the
//! plan's schedule followed by each change of rate, each the whole
//! schedule as a `[[stages]]` boundary at that instant would make it), and
//! the `[[stages]]` windows the changes split (their indices name the stage
//! each record belongs to), and each change of an open loop's fleet cap
//! from its instant on. Users and the dispatcher read the course as it
//! changes (a `watch`), so a change reaches a user that is waiting, thinking
//! or between requests, and the dispatcher before the instant it names.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cicada_plan::schedule::ScheduleSpec;
use cicada_plan::{self as plan, ClosedLoop, Drive, Plan, StageWindow, Steer};
use tokio::sync::watch;

/// Why a change cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum SteerRefused {
    /// Only a closed loop's users can change.
    #[error("only a closed loop (users) can be changed while it runs")]
    NotClosed,
    /// Only an open loop's rate can change (and not every open loop's).
    #[error("this step's request rate cannot change while it runs")]
    NotOpen,
    /// Only a cap the step started with can change.
    #[error("max_concurrency: this step has no fleet cap to change")]
    Cap,
    /// A count-bound loop's indices would outgrow its count.
    #[error("a count-bound closed loop cannot be changed while it runs")]
    CountBound,
    /// Changes come in order.
    #[error("a change at {at:?} comes before the last one, at {last:?}")]
    OutOfOrder { at: Duration, last: Duration },
}

/// The step's load as it stands: its segments and its windows.
#[derive(Debug, Clone, Default)]
pub struct Course {
    /// (from, loop): the plan's closed loop from 0, then each change's.
    pub segments: Vec<(Duration, Arc<ClosedLoop>)>,
    /// (from, schedule): an open loop's schedule from 0, then each change's.
    pub schedules: Vec<(Duration, Arc<ScheduleSpec>)>,
    /// (from, cap): each change of an open loop's fleet cap, in order.
    pub caps: Vec<(Duration, u32)>,
    /// The windows records are scoped by.
    pub windows: Vec<StageWindow>,
}

impl Course {
    /// When segment `i` gives way to the next (`None`: it has not).
    pub fn cut(&self, i: usize) -> Option<Duration> {
        self.segments.get(i + 1).map(|(at, _)| *at)
    }

    /// Every user this worker runs in some segment.
    pub fn users(&self) -> BTreeSet<u32> {
        self.segments
            .iter()
            .flat_map(|(_, cl)| cl.users.iter().copied())
            .collect()
    }
}

/// The course of one step, changed by the coordinator, read by the users.
#[derive(Debug)]
pub struct Steering {
    course: watch::Sender<Arc<Course>>,
    run_end: Option<Duration>,
    /// Whether the step has a fleet cap that a change may set.
    capped: bool,
}

impl Steering {
    /// The course the plan sets.
    pub fn new(plan: &Plan) -> Self {
        let (mut segments, mut schedules) = (Vec::new(), Vec::new());
        match &plan.drive {
            Drive::Closed(cl) => segments.push((Duration::ZERO, Arc::new(cl.clone()))),
            Drive::Open { schedule, .. } if plan.conversations.is_none() => {
                schedules.push((Duration::ZERO, Arc::new(schedule.clone())));
            }
            Drive::Open { .. } => {}
        }
        let course = Course {
            segments,
            schedules,
            caps: Vec::new(),
            windows: plan.stages.clone(),
        };
        Self {
            course: watch::Sender::new(Arc::new(course)),
            run_end: plan.duration(),
            // a worker with no stripe has nothing to admit, but takes the change
            capped: matches!(
                plan.drive,
                Drive::Open {
                    fleet_slots: Some(_),
                    ..
                }
            ),
        }
    }

    /// Follow the course as it changes.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Course>> {
        self.course.subscribe()
    }

    /// Index of the window holding `offset`.
    pub fn stage_of(&self, offset: Duration) -> u32 {
        plan::stage_of(&self.course.borrow().windows, offset)
    }

    /// Apply a change: a new segment (or schedule) from `steer.at`, a window boundary there.
    pub fn apply(&self, steer: &Steer) -> Result<(), SteerRefused> {
        if steer.is_open() {
            return self.apply_open(steer);
        }
        let now = self.course.borrow().clone();
        let Some((last_at, last)) = now.segments.last() else {
            return Err(SteerRefused::NotClosed);
        };
        if last.requests.is_some() {
            return Err(SteerRefused::CountBound);
        }
        if steer.at < *last_at {
            return Err(SteerRefused::OutOfOrder {
                at: steer.at,
                last: *last_at,
            });
        }
        let before = last.users_at(steer.at);
        let mut next = Course::clone(&now);
        let seg = last.steered(steer, before, next.segments.len() as u32);
        next.segments.push((steer.at, Arc::new(seg)));
        plan::steer_windows(&mut next.windows, steer.at, &steer.name, self.run_end);
        self.course.send_replace(Arc::new(next));
        Ok(())
    }

    /// An open loop's change of rate (the schedule a `[[stages]]` boundary
    /// at `steer.at` would make, from then on) and/or of its fleet cap.
    fn apply_open(&self, steer: &Steer) -> Result<(), SteerRefused> {
        if steer.max_concurrency.is_some() && !self.capped {
            return Err(SteerRefused::Cap);
        }
        let now = self.course.borrow().clone();
        let Some((last_at, last)) = now.schedules.last() else {
            return Err(SteerRefused::NotOpen);
        };
        let latest = now
            .caps
            .last()
            .map_or(*last_at, |(at, _)| *at)
            .max(*last_at);
        if steer.at < latest {
            return Err(SteerRefused::OutOfOrder {
                at: steer.at,
                last: latest,
            });
        }
        let mut next = Course::clone(&now);
        if let Some(rate) = steer.rate {
            let changed = last.steered(steer.at, rate).ok_or(SteerRefused::NotOpen)?;
            next.schedules.push((steer.at, Arc::new(changed)));
        }
        if let Some(cap) = steer.max_concurrency {
            next.caps.push((steer.at, cap));
        }
        plan::steer_windows(&mut next.windows, steer.at, &steer.name, self.run_end);
        self.course.send_replace(Arc::new(next));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cicada_plan::UserStage;
    use cicada_plan::shape::ThinkTime;
    use cicada_plan::units::Rate;

    fn closed(requests: Option<u64>) -> ClosedLoop {
        ClosedLoop {
            seed: 1,
            stride: 2,
            users: vec![0, 1],
            requests,
            duration: Some(Duration::from_secs(60)),
            stages: vec![UserStage {
                start: Duration::ZERO,
                end: None,
                users: 2,
                spawn_rate: None,
            }],
            think: ThinkTime::None,
            pool_size: 4,
            index_base: 0,
        }
    }

    fn steering(cl: ClosedLoop) -> Steering {
        let course = Course {
            segments: vec![(Duration::ZERO, Arc::new(cl))],
            ..Course::default()
        };
        Steering {
            course: watch::Sender::new(Arc::new(course)),
            run_end: Some(Duration::from_secs(60)),
            capped: false,
        }
    }

    fn steer(at: u64, users: u32) -> Steer {
        Steer {
            step: 0,
            at: Duration::from_secs(at),
            name: format!("edit at {at}"),
            users,
            spawn_rate: None,
            mine: (0..users).collect(),
            rate: None,
            max_concurrency: None,
        }
    }

    #[test]
    fn an_open_loops_rate_and_cap_change_in_order() {
        let spec = ScheduleSpec {
            seed: 1,
            rate: Rate::Finite(10.0),
            burstiness: 1.0,
            requests: None,
            duration: Some(Duration::from_secs(60)),
            pool_size: 4,
            ramp: None,
            stages: Vec::new(),
            arrivals_us: None,
        };
        let course = Course {
            schedules: vec![(Duration::ZERO, Arc::new(spec))],
            ..Course::default()
        };
        let mut s = Steering {
            course: watch::Sender::new(Arc::new(course)),
            run_end: Some(Duration::from_secs(60)),
            capped: false,
        };
        let open = |at, rate, max_concurrency| Steer {
            rate,
            max_concurrency,
            mine: Vec::new(),
            ..steer(at, 0)
        };
        s.apply(&open(10, Some(30.0), None)).unwrap();
        let c = s.subscribe().borrow().clone();
        assert_eq!(c.schedules.len(), 2);
        assert_eq!(c.schedules[1].0, Duration::from_secs(10));
        assert_eq!(c.schedules[1].1.stages.last().map(|st| st.rate), Some(30.0));
        assert_eq!(s.stage_of(Duration::from_secs(9)), 0);
        assert_eq!(s.stage_of(Duration::from_secs(10)), 1);
        assert!(matches!(
            s.apply(&open(5, Some(3.0), None)),
            Err(SteerRefused::OutOfOrder { .. })
        ));
        assert!(matches!(
            s.apply(&open(20, Some(3.0), Some(4))),
            Err(SteerRefused::Cap)
        ));
        // with a cap to change: the cap alone, then rate and cap at once
        s.capped = true;
        s.apply(&open(20, None, Some(4))).unwrap();
        s.apply(&open(30, Some(3.0), Some(9))).unwrap();
        let c = s.subscribe().borrow().clone();
        assert_eq!(
            c.caps,
            [(Duration::from_secs(20), 4), (Duration::from_secs(30), 9)]
        );
        assert_eq!(c.schedules.len(), 3, "the cap alone leaves the schedule");
        assert_eq!(s.stage_of(Duration::from_secs(25)), 2);
        assert_eq!(s.stage_of(Duration::from_secs(30)), 3);
        assert!(matches!(
            s.apply(&open(25, None, Some(2))),
            Err(SteerRefused::OutOfOrder { .. })
        ));
        assert!(matches!(
            steering(closed(None)).apply(&open(10, Some(3.0), None)),
            Err(SteerRefused::NotOpen)
        ));
    }

    #[test]
    fn changes_add_segments_and_split_the_windows_in_order() {
        let s = steering(closed(None));
        let mut seen = s.subscribe();
        assert_eq!(s.stage_of(Duration::from_secs(30)), 0);
        s.apply(&steer(10, 5)).unwrap();
        assert!(seen.has_changed().unwrap());
        let c = seen.borrow_and_update().clone();
        assert_eq!(c.cut(0), Some(Duration::from_secs(10)));
        assert_eq!(c.users(), (0..5).collect());
        assert_eq!(s.stage_of(Duration::from_secs(9)), 0);
        assert_eq!(s.stage_of(Duration::from_secs(10)), 1);
        assert!(matches!(
            s.apply(&steer(5, 1)),
            Err(SteerRefused::OutOfOrder { .. })
        ));
        assert!(matches!(
            steering(closed(Some(100))).apply(&steer(10, 5)),
            Err(SteerRefused::CountBound)
        ));
    }
}

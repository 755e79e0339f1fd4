//! Closed loop, Locust style: each user sends its next request when the last
//! one ends (after its think time). User `u` lives on worker `u mod N`; its
//! k-th request is global request `u + k·U` (U = the most users of any stage),
//! so the fleet sends the same requests for any worker count.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::shape::ThinkTime;

/// RNG streams from here on are per user (think time).
const USER_STREAM_BASE: u64 = 1_000;

/// Users active from `start` (until `end`, if any); new users join at `spawn_rate` per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UserStage {
    pub start: Duration,
    pub end: Option<Duration>,
    pub users: u32,
    pub spawn_rate: Option<f64>,
}

/// A worker's share of a closed-loop run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClosedLoop {
    pub seed: u64,
    /// Users across the fleet in the busiest stage; request indices stride by it.
    pub stride: u32,
    /// Global ids of the users this worker runs.
    pub users: Vec<u32>,
    /// Requests in the whole run, for count-bound runs.
    pub requests: Option<u64>,
    /// Run length, for time-bound runs.
    pub duration: Option<Duration>,
    /// `stages` on the wire.
    #[serde(rename = "phases")]
    pub stages: Vec<UserStage>,
    pub think: ThinkTime,
    pub pool_size: u64,
    /// Where this loop's request indices start (0 as planned; a steered
    /// segment's own range otherwise). Not on the wire.
    #[serde(skip)]
    pub index_base: u64,
}

impl ClosedLoop {
    /// When `user` is active: (from, until) after the barrier; `None` = until the run ends.
    pub fn windows(&self, user: u32) -> Vec<(Duration, Option<Duration>)> {
        let mut out: Vec<(Duration, Option<Duration>)> = Vec::new();
        let mut before = 0u32;
        for p in &self.stages {
            if user < p.users {
                let delay = match p.spawn_rate {
                    Some(rate) if user >= before => {
                        Duration::from_secs_f64(f64::from(user - before) / rate)
                    }
                    _ => Duration::ZERO,
                };
                let start = p.start + delay;
                if p.end.is_none_or(|e| start < e) {
                    match out.last_mut() {
                        Some(last) if delay.is_zero() && last.1 == Some(p.start) => last.1 = p.end,
                        _ => out.push((start, p.end)),
                    }
                }
            }
            before = p.users;
        }
        if let Some(d) = self.duration {
            out.retain(|(s, _)| *s < d);
            for w in &mut out {
                w.1 = Some(w.1.map_or(d, |e| e.min(d)));
            }
        }
        out
    }

    /// Global index of `user`'s `k`-th request.
    pub fn index(&self, user: u32, k: u64) -> u64 {
        self.index_base + u64::from(user) + k * u64::from(self.stride.max(1))
    }

    /// Requests this worker's users send in a count-bound run (0 when open-ended).
    pub fn planned_requests(&self) -> u64 {
        let Some(n) = self.requests else { return 0 };
        let stride = u64::from(self.stride.max(1));
        self.users
            .iter()
            .map(|u| u64::from(*u))
            .filter(|u| *u < n)
            .map(|u| (n - u - 1) / stride + 1)
            .sum()
    }

    /// The think-time random stream of one user.
    pub fn think_rng(&self, user: u32) -> ChaCha8Rng {
        let mut r = ChaCha8Rng::seed_from_u64(self.seed);
        r.set_stream(USER_STREAM_BASE + u64::from(user));
        r
    }
}

/// Each steered segment's request indices start at `segment << SEGMENT_SHIFT`,
/// so they never meet the plan's own or another segment's.
pub const SEGMENT_SHIFT: u32 = 40;

/// A change of the load while the run goes (the web UI's Edit), as a
/// stage boundary would make it: from `at` after the barrier a closed loop's
/// fleet runs `users` users, new ones joining at `spawn_rate` per second; an
/// open loop's requests arrive at `rate` and `max_concurrency` caps them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Steer {
    /// The step it changes.
    pub step: u32,
    /// When it takes effect, after the step's barrier (the same instant on every worker).
    pub at: Duration,
    /// The stage it starts, as results name it.
    pub name: String,
    /// Users across the fleet from `at`.
    pub users: u32,
    /// New users per second (`None`: all at once).
    pub spawn_rate: Option<f64>,
    /// Global ids of the users this worker runs from `at` (`u mod N`, as planned).
    pub mine: Vec<u32>,
    /// An open loop's new mean rate, requests/s (infinite: as fast as the cap lets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// An open loop's new fleet-wide cap on requests in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
}

impl Steer {
    /// Whether it changes an open loop (its rate or cap) rather than users.
    pub fn is_open(&self) -> bool {
        self.rate.is_some() || self.max_concurrency.is_some()
    }
}

impl ClosedLoop {
    /// The loop from `steer.at` on, when `before` users were running: one
    /// stage of `steer.users` users (those beyond `before` join at the spawn
    /// rate), its own request indices (segment `segment`), until the run ends.
    pub fn steered(&self, steer: &Steer, before: u32, segment: u32) -> ClosedLoop {
        let stages = vec![
            // empty: it only says how many users were running already
            UserStage {
                start: steer.at,
                end: Some(steer.at),
                users: before,
                spawn_rate: None,
            },
            UserStage {
                start: steer.at,
                end: None,
                users: steer.users,
                spawn_rate: steer.spawn_rate,
            },
        ];
        ClosedLoop {
            stride: steer.users.max(1),
            users: steer.mine.clone(),
            stages,
            index_base: u64::from(segment) << SEGMENT_SHIFT,
            ..self.clone()
        }
    }

    /// Users across the fleet at `offset` after the barrier, as planned.
    pub fn users_at(&self, offset: Duration) -> u32 {
        self.stages
            .iter()
            .rev()
            .find(|p| p.start <= offset)
            .map_or(0, |p| p.users)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cl(stages: Vec<UserStage>, duration: Option<Duration>) -> ClosedLoop {
        ClosedLoop {
            seed: 1,
            stride: stages.iter().map(|p| p.users).max().unwrap_or(1),
            users: vec![0, 1, 2, 3],
            requests: None,
            duration,
            stages,
            think: ThinkTime::None,
            pool_size: 10,
            index_base: 0,
        }
    }

    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    #[test]
    fn spawn_rate_staggers_starts_and_stages_add_and_remove_users() {
        let c = cl(
            vec![
                UserStage {
                    start: s(0.0),
                    end: Some(s(10.0)),
                    users: 2,
                    spawn_rate: Some(1.0),
                },
                UserStage {
                    start: s(10.0),
                    end: Some(s(20.0)),
                    users: 4,
                    spawn_rate: Some(2.0),
                },
                UserStage {
                    start: s(20.0),
                    end: Some(s(30.0)),
                    users: 1,
                    spawn_rate: None,
                },
            ],
            None,
        );
        assert_eq!(c.windows(0), vec![(s(0.0), Some(s(30.0)))]);
        assert_eq!(c.windows(1), vec![(s(1.0), Some(s(20.0)))]);
        assert_eq!(c.windows(2), vec![(s(10.0), Some(s(20.0)))]);
        assert_eq!(c.windows(3), vec![(s(10.5), Some(s(20.0)))]);
    }

    #[test]
    fn count_bound_indices_partition_the_run() {
        let mut c = cl(
            vec![UserStage {
                start: s(0.0),
                end: None,
                users: 4,
                spawn_rate: None,
            }],
            None,
        );
        c.requests = Some(10);
        // users 0..4 send indices u, u+4, u+8 < 10
        assert_eq!(c.planned_requests(), 3 + 3 + 2 + 2);
        assert_eq!(c.index(2, 2), 10);
        c.duration = Some(s(5.0));
        assert_eq!(c.windows(0), vec![(s(0.0), Some(s(5.0)))]);
    }

    #[test]
    fn a_change_keeps_running_users_and_spawns_the_new_ones() {
        let c = cl(
            vec![UserStage {
                start: s(0.0),
                end: None,
                users: 2,
                spawn_rate: None,
            }],
            Some(s(60.0)),
        );
        let steer = Steer {
            step: 0,
            at: s(10.0),
            name: "edit-1".into(),
            users: 4,
            spawn_rate: Some(2.0),
            mine: vec![0, 1, 2, 3],
            rate: None,
            max_concurrency: None,
        };
        let seg = c.steered(&steer, c.users_at(s(10.0)), 1);
        // users 0 and 1 were running: they go on at once; 2 and 3 join at 2/s
        assert_eq!(seg.windows(1), [(s(10.0), Some(s(60.0)))]);
        assert_eq!(seg.windows(2), [(s(10.0), Some(s(60.0)))]);
        assert_eq!(seg.windows(3), [(s(10.5), Some(s(60.0)))]);
        assert!(seg.windows(4).is_empty());
        assert_eq!(seg.users_at(s(10.0)), 4);
        // its requests never meet the plan's
        assert_eq!(seg.index(0, 0), 1 << SEGMENT_SHIFT);
        assert_eq!(seg.index(3, 2), (1 << SEGMENT_SHIFT) + 3 + 2 * 4);
    }
}

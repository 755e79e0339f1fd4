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
        u64::from(user) + k * u64::from(self.stride.max(1))
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
}

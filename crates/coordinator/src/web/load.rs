//! The load the fleet runs now, as the header and the Edit form show it:
//! the step's scenario, overridden by the `[[stages]]` window in force, then
//! by the changes made from the page during the step (a change ends the
//! window it falls in and drops the later ones, so its values hold from then
//! on).

use std::time::Duration;

use cicada_plan as plan;
use cicada_plan::units::Rate;
use cicada_scenarios::{Scenario, sharding};
use serde_json::{Value, json};

/// A load's settings (`None`: not set).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Load {
    /// Users of a closed loop.
    pub users: Option<u32>,
    /// Their spawn rate, users/s.
    pub spawn_rate: Option<f64>,
    /// An open loop's rate.
    pub rate: Option<Rate>,
    /// An open loop's fleet-wide cap.
    pub max_concurrency: Option<u32>,
}

/// The changes made from the page during the step running.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Steering {
    /// When the latest takes effect, after the step's barrier.
    pub at: Option<Duration>,
    /// Its stage's name.
    pub name: String,
    /// What the changes set, each field as the latest change that set it.
    pub load: Load,
}

impl Steering {
    /// A change from `at` after the step's barrier, starting stage `name`,
    /// of the fields `change` sets.
    pub fn apply(&mut self, at: Duration, name: &str, change: Load) {
        self.at = Some(at);
        self.name = name.to_string();
        let l = &mut self.load;
        l.users = change.users.or(l.users);
        l.spawn_rate = change.spawn_rate.or(l.spawn_rate);
        l.rate = change.rate.or(l.rate);
        l.max_concurrency = change.max_concurrency.or(l.max_concurrency);
    }
}

/// The load in force `elapsed` after the barrier of a step of `s`, with
/// `steering` made during it, and the name of its stage (empty without
/// stages or changes).
pub fn now(s: &Scenario, elapsed: Duration, steering: &Steering) -> (Load, String) {
    let l = &s.load;
    let mut load = Load {
        users: l.users,
        spawn_rate: l.spawn_rate,
        rate: (!sharding::is_closed_loop(s)).then_some(l.request_rate),
        max_concurrency: l.max_concurrency,
    };
    // the stage in force, or the one the latest change cut short
    let when = steering.at.map_or(elapsed, |at| at.min(elapsed));
    let windows = sharding::stage_windows(s);
    let mut stage = String::new();
    if !windows.is_empty() {
        let i = plan::stage_of(&windows, when) as usize;
        if let (Some(w), Some(st)) = (windows.get(i), s.stages.get(i)) {
            stage = w.name.clone();
            load.users = st.users.or(load.users);
            load.spawn_rate = st.spawn_rate.or(load.spawn_rate);
            load.rate = st.request_rate.or(load.rate);
        }
    }
    if steering.at.is_some() {
        let c = &steering.load;
        load.users = c.users.or(load.users);
        load.spawn_rate = c.spawn_rate.or(load.spawn_rate);
        load.rate = c.rate.or(load.rate);
        load.max_concurrency = c.max_concurrency.or(load.max_concurrency);
        stage = steering.name.clone();
    }
    (load, stage)
}

/// The `load` block of `/stats/requests`: the load in force and its stage.
pub fn block(load: &Load, stage: &str) -> Value {
    json!({
        "users": load.users,
        "spawn_rate": load.spawn_rate,
        "rate": load.rate.map(|r| r.to_string()),
        "max_concurrency": load.max_concurrency,
        "stage": stage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staged(stages: Value) -> Scenario {
        Scenario {
            stages: serde_json::from_value(stages).expect("stages"),
            ..Scenario::default()
        }
    }

    #[test]
    fn the_stage_in_force_sets_users_until_a_change_does() {
        let s = staged(json!([
            {"duration": "10s", "users": 8},
            {"name": "high", "duration": "10s", "users": 16, "spawn_rate": 4.0}
        ]));
        let mut steering = Steering::default();
        let at = |secs| now(&s, Duration::from_secs(secs), &steering);
        assert_eq!(at(3).0.users, Some(8));
        assert_eq!(at(3).1, "stage-1");
        assert_eq!(at(12).0.users, Some(16));
        assert_eq!(at(12).0.spawn_rate, Some(4.0));
        assert_eq!(at(12).1, "high");
        let change = Load {
            users: Some(3),
            ..Load::default()
        };
        steering.apply(Duration::from_secs(14), "edit-1", change);
        let (load, stage) = now(&s, Duration::from_secs(15), &steering);
        assert_eq!((load.users, load.spawn_rate), (Some(3), Some(4.0)));
        assert_eq!(stage, "edit-1");
    }

    #[test]
    fn an_open_loop_shows_its_rate_by_stage_then_by_change() {
        let mut s = staged(json!([
            {"duration": "5s", "request_rate": 2.0},
            {"duration": "5s", "request_rate": "inf"}
        ]));
        s.load.max_concurrency = Some(4);
        let mut steering = Steering::default();
        let (load, _) = now(&s, Duration::from_secs(1), &steering);
        assert_eq!(load.rate, Some(Rate::Finite(2.0)));
        assert_eq!(load.users, None);
        assert_eq!(load.max_concurrency, Some(4));
        let (load, _) = now(&s, Duration::from_secs(6), &steering);
        assert_eq!(block(&load, "")["rate"], "inf");
        let change = Load {
            rate: Some(Rate::Finite(7.5)),
            ..Load::default()
        };
        steering.apply(Duration::from_secs(7), "edit-1", change);
        let (load, _) = now(&s, Duration::from_secs(8), &steering);
        assert_eq!(load.rate, Some(Rate::Finite(7.5)));
        assert_eq!(load.max_concurrency, Some(4));
    }
}

//! Validation of load shapes: users vs rates, warm-up, ramps, stages and sweeps.

use crate::shape::SweepMode;
use cicada_plan::shape::{RampStrategy, ThinkTime, Warmup};
use cicada_plan::units::Rate;

/// Most concurrent streams (users or in-flight requests) one run may ask for:
/// each is a connection and a task, and one worker holds about ten thousand.
pub const MAX_STREAMS: u32 = 1_000_000;

/// Every concurrency the scenario asks for, by key: users and
/// `max_concurrency` in the load, its stages and its sweep.
fn asked_streams(s: &crate::Scenario) -> Vec<(String, u32)> {
    let mut asked: Vec<(String, u32)> = Vec::new();
    asked.extend(s.load.users.map(|u| ("load.users".to_string(), u)));
    asked.extend(
        s.load
            .max_concurrency
            .map(|c| ("load.max_concurrency".to_string(), c)),
    );
    for (i, st) in s.stages.iter().enumerate() {
        asked.extend(st.users.map(|u| (format!("stages[{i}].users"), u)));
    }
    if let Some(sw) = &s.sweep {
        for (key, list) in [
            ("max_concurrency", &sw.max_concurrency),
            ("users", &sw.users),
        ] {
            for (i, v) in list.iter().enumerate() {
                asked.push((format!("sweep.{key}[{i}]"), *v));
            }
        }
    }
    asked
}

/// The most concurrent streams any stage of the scenario asks for (`None`:
/// an open loop without `max_concurrency`, bounded only by the server).
pub fn peak_streams(s: &crate::Scenario) -> Option<u32> {
    asked_streams(s).into_iter().map(|(_, v)| v).max()
}

/// Concurrency values above [`MAX_STREAMS`], as (dotted key, message).
fn stream_problems(s: &crate::Scenario) -> Vec<(String, String)> {
    asked_streams(s)
        .into_iter()
        .filter(|(_, v)| *v > MAX_STREAMS)
        .map(|(key, v)| {
            (
                key,
                format!(
                    "{v} concurrent streams is more than cicada runs at once (at most {MAX_STREAMS}; each is a connection, and one worker holds about 10,000)"
                ),
            )
        })
        .collect()
}

/// Problems with the load shape as (dotted key, message).
pub(crate) fn problems(s: &crate::Scenario) -> Vec<(String, String)> {
    let l = &s.load;
    let closed = l.users.is_some() || s.stages.iter().any(|st| st.users.is_some());
    let mut out = stream_problems(s);
    out.extend(users_problems(s, closed));
    out.extend(warmup_problems(s, closed));
    out.extend(ramp_problems(s, closed));
    out.extend(stages_problems(s));
    out.extend(sweep_problems(s, closed));
    out
}

/// Closed-loop users against rates, spawn rate and think time.
fn users_problems(s: &crate::Scenario, closed: bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: String, msg: String| out.push((key, msg));
    let l = &s.load;
    if l.users == Some(0) {
        bad("load.users".into(), "must be at least 1".into());
    }
    if l.users.is_some() && l.request_rate != Rate::Infinite {
        bad(
            "load.users".into(),
            "users (closed loop) and request_rate (open loop) exclude each other".into(),
        );
    }
    if let Some(r) = l.spawn_rate
        && !(r.is_finite() && r > 0.0)
    {
        bad(
            "load.spawn_rate".into(),
            format!("must be a positive number of users per second, got {r}"),
        );
    }
    if l.spawn_rate.is_some() && !closed {
        bad(
            "load.spawn_rate".into(),
            "applies to closed-loop runs (load.users or stages with users)".into(),
        );
    }
    if l.think_time != ThinkTime::None && !closed {
        bad(
            "load.think_time".into(),
            "applies to closed-loop runs (load.users or stages with users)".into(),
        );
    }
    out
}

/// A warm-up that leaves something to measure, in the run's own terms.
fn warmup_problems(s: &crate::Scenario, closed: bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: String, msg: String| out.push((key, msg));
    let l = &s.load;
    match l.warmup {
        Some(Warmup::Requests(0)) => bad(
            "load.warmup".into(),
            "warm-up requests must be at least 1".into(),
        ),
        Some(Warmup::Requests(n)) => {
            if closed {
                bad(
                    "load.warmup".into(),
                    "closed-loop runs take a warm-up duration, e.g. warmup = \"30s\"".into(),
                );
            }
            if let Some(total) = l.num_prompts
                && n >= total
            {
                bad(
                    "load.warmup".into(),
                    format!("warm-up of {n} requests leaves nothing of num_prompts = {total}"),
                );
            }
        }
        Some(Warmup::Duration(d)) if d.get().is_zero() => {
            bad("load.warmup".into(), "must be greater than zero".into());
        }
        _ => {}
    }
    out
}

/// A rate ramp: open loop, a range to ramp over, and a length.
fn ramp_problems(s: &crate::Scenario, closed: bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: String, msg: String| out.push((key, msg));
    let l = &s.load;
    if let Some(r) = &l.ramp {
        if l.request_rate != Rate::Infinite {
            bad(
                "load.ramp".into(),
                "a ramp sets the rate; remove load.request_rate".into(),
            );
        }
        if closed {
            bad(
                "load.ramp".into(),
                "ramps apply to open-loop runs; use [[stages]] with users".into(),
            );
        }
        if !(r.start_rps >= 0.0
            && r.end_rps > 0.0
            && r.start_rps.is_finite()
            && r.end_rps.is_finite())
        {
            bad(
                "load.ramp".into(),
                "start_rps must be ≥ 0 and end_rps > 0".into(),
            );
        }
        if r.strategy == RampStrategy::Exponential && r.start_rps <= 0.0 {
            bad(
                "load.ramp.start_rps".into(),
                "an exponential ramp needs start_rps > 0".into(),
            );
        }
        if l.num_prompts.is_none() && l.duration.is_none() {
            bad(
                "load.ramp".into(),
                "a ramp needs num_prompts or duration to ramp over".into(),
            );
        }
    }
    out
}

/// `[[stages]]`: each with its length and one kind of load, alone.
fn stages_problems(s: &crate::Scenario) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: String, msg: String| out.push((key, msg));
    let l = &s.load;
    if !s.stages.is_empty() {
        if l.num_prompts.is_some() || l.duration.is_some() {
            bad(
                "stages".into(),
                "stages set their own durations; remove load.num_prompts and load.duration".into(),
            );
        }
        let open = s
            .stages
            .iter()
            .filter(|st| st.request_rate.is_some())
            .count();
        let users = s.stages.iter().filter(|st| st.users.is_some()).count();
        if open > 0 && users > 0 {
            bad(
                "stages".into(),
                "every stage needs the same kind of load: all request_rate or all users".into(),
            );
        }
        if l.ramp.is_some() {
            bad(
                "load.ramp".into(),
                "ramps and stages exclude each other".into(),
            );
        }
        if s.sweep.is_some() {
            bad(
                "sweep".into(),
                "sweeps and stages exclude each other".into(),
            );
        }
        for (i, st) in s.stages.iter().enumerate() {
            let key = |k: &str| format!("stages[{i}].{k}");
            if st.duration.get().is_zero() {
                bad(key("duration"), "must be greater than zero".into());
            }
            match (st.request_rate, st.users) {
                (None, None) => bad(format!("stages[{i}]"), "give request_rate or users".into()),
                (Some(_), Some(_)) => {
                    bad(key("users"), "give request_rate or users, not both".into())
                }
                (Some(Rate::Infinite), None) => bad(
                    key("request_rate"),
                    "a stage needs a finite rate (use users for a fixed concurrency)".into(),
                ),
                (Some(Rate::Finite(r)), None) if !(r.is_finite() && r > 0.0) => {
                    bad(key("request_rate"), format!("must be positive, got {r}"))
                }
                _ => {}
            }
            if let Some(b) = st.burstiness
                && (b.is_nan() || b <= 0.0)
            {
                bad(
                    key("burstiness"),
                    format!("must be greater than 0, got {b}"),
                );
            }
            if let Some(r) = st.spawn_rate
                && !(r.is_finite() && r > 0.0)
            {
                bad(key("spawn_rate"), format!("must be positive, got {r}"));
            }
        }
    }
    out
}

/// `[sweep]`: one list (or a mode), each value in range, and what a mode needs.
fn sweep_problems(s: &crate::Scenario, closed: bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut bad = |key: String, msg: String| out.push((key, msg));
    let l = &s.load;
    if let Some(sw) = &s.sweep {
        let lists = sw.lists();
        match sw.mode {
            SweepMode::List => {
                if lists.len() != 1 {
                    bad(
                        "sweep".into(),
                        "give exactly one list: max_concurrency, request_rate or users (or mode = \"auto\" / \"slo\")".into(),
                    );
                }
                if !sw.users.is_empty() && l.request_rate != Rate::Infinite {
                    bad(
                        "sweep.users".into(),
                        "a users sweep is closed loop; remove load.request_rate".into(),
                    );
                }
                if !sw.request_rate.is_empty() && closed {
                    bad(
                        "sweep.request_rate".into(),
                        "a rate sweep is open loop; remove load.users".into(),
                    );
                }
                for (i, r) in sw.request_rate.iter().enumerate() {
                    if let Rate::Finite(v) = r
                        && !(v.is_finite() && *v > 0.0)
                    {
                        bad(
                            format!("sweep.request_rate[{i}]"),
                            format!("must be positive or \"inf\", got {v}"),
                        );
                    }
                }
                for (key, list) in [
                    ("max_concurrency", &sw.max_concurrency),
                    ("users", &sw.users),
                ] {
                    for (i, v) in list.iter().enumerate() {
                        if *v == 0 {
                            bad(format!("sweep.{key}[{i}]"), "must be at least 1".into());
                        }
                    }
                }
            }
            SweepMode::Auto | SweepMode::Slo => {
                if let Some((key, _)) = lists.first() {
                    bad(
                        format!("sweep.{key}"),
                        "lists apply to mode = \"list\"".into(),
                    );
                }
                if closed {
                    bad(
                        "sweep.mode".into(),
                        "rate sweeps are open loop; remove load.users".into(),
                    );
                }
                if sw.mode == SweepMode::Auto && sw.points.is_some_and(|p| p < 3) {
                    bad(
                        "sweep.points".into(),
                        "an auto sweep needs at least 3 points".into(),
                    );
                }
            }
        }
        if sw.mode == SweepMode::Slo {
            if !s.slo.is_set() {
                bad(
                    "sweep.mode".into(),
                    "the SLO capacity search needs an [slo] section".into(),
                );
            }
            match sw.resolution {
                None => bad(
                    "sweep.resolution".into(),
                    "the SLO search needs a resolution in req/s, e.g. 0.5".into(),
                ),
                Some(r) if !(r.is_finite() && r > 0.0) => bad(
                    "sweep.resolution".into(),
                    format!("must be positive, got {r}"),
                ),
                _ => {}
            }
            if let Some(f) = sw.fraction
                && !(f > 0.0 && f <= 1.0)
            {
                bad(
                    "sweep.fraction".into(),
                    format!("must be within (0, 1], got {f}"),
                );
            }
            if let (Some(lo), Some(hi)) = (sw.min_rate, sw.max_rate)
                && lo >= hi
            {
                bad(
                    "sweep.max_rate".into(),
                    "must be above sweep.min_rate".into(),
                );
            }
        }
    }
    out
}

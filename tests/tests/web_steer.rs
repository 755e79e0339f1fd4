//! Issue 27, steering: while a closed-loop run goes, `POST /swarm` (the
//! page's Edit) changes its users fleet-wide; while an open loop goes, its
//! rate. Real `cicada` and `worker` binaries against a standalone mock,
//! whose own count of open streams (or log of arrivals) is the ground
//! truth: it moves from the old load to the new one, and the results show
//! the change as a stage boundary, for 1 and 2 workers.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use cicada_plan::schedule::ScheduleSpec;
use cicada_plan::units::Rate;
use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

/// A closed loop of `users` users against `mock_url`, each request ~300 ms
/// (so a user almost always has one open at the mock), no think time.
fn scenario(mock_url: &str, users: u32) -> String {
    let tables = format!(
        r#"[dataset]
kind = "random"
input_len = 8
output_len = 20
[sampling]
ignore_eos = true
[load]
users = {users}
duration = "120s"
"#
    );
    mock_chat_scenario("web-steer", 27, mock_url, &tables)
}

/// Start at 3 users, change to 7 from the web API, stop; the mock saw 3
/// then 7, and the results have a stage for each.
fn steer_with(workers: &str) {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "100", "--itl-ms", "10"]);
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 3));
    let out = dir.path().join("out");
    let (child, base) = start_web_run(&sc, &out, workers, &[]);
    mock.wait_for_streams(3, "before the change");
    assert!(mock.open_streams(10) <= 3, "3 users, never more streams");

    // an open loop's fields cannot change a running closed loop
    let (code, body) = post_form(&format!("{base}/swarm"), "rate=5").expect("an answer");
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("closed loop"), "{body}");
    let (code, body) =
        post_form(&format!("{base}/swarm"), "user_count=7&spawn_rate=20").expect("an answer");
    assert_eq!(code, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["success"], true, "{answer}");
    mock.wait_for_streams(7, "after the change");
    assert!(mock.open_streams(10) <= 7, "7 users, never more streams");
    let stats = get_json(&format!("{base}/stats/requests"));
    assert_eq!(stats["user_count"], 7, "{stats:#}");
    // the workers tab: each worker's last report is fresh, its stalls known
    for w in stats["workers"].as_array().expect("workers") {
        let age = w["cicada"]["report_age_s"].as_f64().expect("a report age");
        assert!(age < 30.0, "reports every second: {w}");
        assert!(w["cicada"]["worst_stall_ms"].is_number(), "{w}");
    }
    let hist = get_json(&format!("{base}/stats/history"));
    assert_eq!(hist["marks"][0]["name"], "edit-1", "{hist:#}");

    let run = stop_from_page(&base, child, LIMIT);
    let before = read_json(&out.join("result-stage1.json"));
    let after = read_json(&out.join("result-stage2.json"));
    let whole = read_json(&out.join("result.json"));
    assert_eq!(before["cicada"]["stage"], 1, "{before:#}");
    assert_eq!(after["cicada"]["stage"], 2, "{after:#}");
    assert_eq!(
        stage_names(&out),
        ["start", "edit-1", "all"],
        "each stage, then the whole run"
    );
    assert_eq!(before["cicada"]["scenario"]["load"]["users"], 3);
    assert_eq!(after["cicada"]["scenario"]["load"]["users"], 7);
    let (b, a) = (
        before["completed"].as_u64().unwrap_or(0),
        after["completed"].as_u64().unwrap_or(0),
    );
    assert!(b > 0 && a > 0, "both stages measured: {b} and {a}");
    assert_eq!(whole["completed"].as_u64(), Some(a + b), "stages add up");
    let mean = after["cicada"]["mean_concurrent_requests"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        mean > 4.0 && mean <= 7.05,
        "the second stage ran about 7 at once: {mean}"
    );
    assert!(run.stdout.contains("= Stages ="), "{}", run.stdout);
}

#[test]
fn a_change_of_users_reaches_the_server_on_one_worker() {
    steer_with("1");
}

#[test]
fn a_change_of_users_reaches_the_server_on_two_workers() {
    steer_with("2");
}

/// `POST /stats/reset` (Locust's reset): the figures start again from the
/// next interval; the result says where its window starts, and counts
/// only what ended after it (the mock saw more).
#[test]
fn a_reset_starts_a_new_measured_window() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "100", "--itl-ms", "10"]);
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 3));
    let out = dir.path().join("out");
    let (child, base) = start_web_run(&sc, &out, "1", &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.stats()["completed"].as_u64() < Some(30) {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, body) = post_form(&format!("{base}/stats/reset"), "").expect("an answer");
    assert_eq!(code, 200, "{body}");
    let before_reset = mock.stats()["completed"].as_u64().unwrap_or(0);
    std::thread::sleep(Duration::from_secs(3));
    stop_from_page(&base, child, LIMIT);
    let result = read_json(&out.join("result.json"));
    let from = result["cicada"]["window_start_s"].as_f64().unwrap_or(0.0);
    assert!(from >= 1.0, "the window starts at the reset: {from} s");
    let counted = result["completed"].as_u64().unwrap_or(0);
    let seen = mock.stats()["completed"].as_u64().unwrap_or(0);
    assert!(counted > 0, "requests after the reset count");
    assert!(
        counted <= seen - before_reset + 3,
        "only requests that ended after the reset count: {counted} of {seen} ({before_reset} before it)"
    );
}

/// An open loop at `rate` requests/s against `mock_url`, Poisson arrivals,
/// short answers (~20 ms), for 60 s unless stopped.
fn open_scenario(mock_url: &str, rate: u32, cap: Option<u32>) -> String {
    let cap = cap.map_or(String::new(), |c| format!("max_concurrency = {c}"));
    let tables = format!(
        r#"[dataset]
kind = "random"
input_len = 8
output_len = 8
[sampling]
ignore_eos = true
[load]
request_rate = {rate}
duration = "60s"
{cap}
"#
    );
    mock_chat_scenario("web-steer-open", 27, mock_url, &tables)
}

fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Requests/s the mock saw arrive between `from` and `to` (Unix µs).
fn arrival_rate(log: &[Value], from: u64, to: u64) -> f64 {
    let n = log
        .iter()
        .filter_map(|r| r["unix_us"].as_u64())
        .filter(|t| (from..to).contains(t))
        .count();
    n as f64 * 1e6 / (to - from) as f64
}

/// The instant a change's answer names ("... from 5.123 s into the step ...").
fn change_instant(message: &str) -> Duration {
    let secs = message
        .split(" from ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no instant in `{message}`"));
    Duration::from_millis((secs * 1000.0).round() as u64)
}

/// One open-loop run changed from 20/s to 60/s: what each side saw.
struct OpenRun {
    /// The change's instant after the barrier.
    at: Duration,
    /// The mock's log.
    log: Vec<Value>,
    /// `requests.jsonl`'s lines.
    records: Vec<Value>,
    out: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// Start at 20 requests/s, change to 60/s from the web API after ~4 s,
/// stop ~7 s later; the mock's arrival rate before and after the change is
/// the one asked for, judged over 4 s windows clear of the change.
fn steer_open(workers: &str) -> OpenRun {
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let sc = write(dir.path(), "s.toml", &open_scenario(&mock.url, 20, None));
    let out = dir.path().join("out");
    let (mut child, base) = start_web_run(&sc, &out, workers, &["--save-detailed"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.stats()["completed"].as_u64() < Some(5) {
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!(
                "the run never got going\n{}",
                wait_with_limit(child, LIMIT).stderr
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(5));
    // users mean nothing to an open loop
    let (code, body) = post_form(&format!("{base}/swarm"), "user_count=5").expect("an answer");
    assert_eq!(code, 409, "{body}");
    // a cap can change, but not be added to a run that started without one
    let (code, body) = post_form(&format!("{base}/swarm"), "max_concurrency=4").expect("an answer");
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("started without a cap"), "{body}");
    let asked = unix_us();
    let (code, body) = post_form(&format!("{base}/swarm"), "rate=60").expect("an answer");
    assert_eq!(code, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["success"], true, "{answer}");
    // the change was placed 0.5 s after the coordinator took it, before this answer
    let answered = unix_us();
    let at = change_instant(answer["message"].as_str().unwrap_or(""));
    std::thread::sleep(Duration::from_secs(7));
    let hist = get_json(&format!("{base}/stats/history"));
    assert_eq!(hist["marks"][0]["name"], "edit-1", "{hist:#}");
    stop_from_page(&base, child, LIMIT);
    let log = mock.requests();
    // the change is due 0.5 s after it was asked and at most 0.5 s after
    // the answer; the first request after it may still come at the old
    // rate's gap: judge 1 s clear of it
    let before = arrival_rate(&log, asked - 4_000_000, asked);
    let after = arrival_rate(&log, answered + 1_500_000, answered + 5_500_000);
    assert!(
        (12.0..=28.0).contains(&before),
        "{workers} workers: {before:.1}/s before the change, 20 asked"
    );
    assert!(
        (45.0..=75.0).contains(&after),
        "{workers} workers: {after:.1}/s after the change, 60 asked"
    );
    let text = std::fs::read_to_string(out.join("requests.jsonl")).expect("requests.jsonl");
    let records = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    OpenRun {
        at,
        log,
        records,
        out,
        _dir: dir,
    }
}

/// The global schedule a `[[stages]]` boundary at `at` to 60/s gives the
/// scenario: request index -> offset, µs.
fn expected_schedule(at: Duration, until: Duration) -> BTreeMap<u64, u64> {
    let plan = ScheduleSpec {
        seed: 27,
        rate: Rate::Finite(20.0),
        burstiness: 1.0,
        requests: None,
        duration: Some(Duration::from_secs(60)),
        pool_size: 1,
        ramp: None,
        stages: Vec::new(),
        arrivals_us: None,
    };
    let steered = plan
        .steered(at, 60.0)
        .expect("a time-bound Poisson schedule can change");
    steered
        .global()
        .take_while(|s| s.offset < until)
        .map(|s| (s.index, s.offset.as_micros() as u64))
        .collect()
}

/// Each request sent was the schedule's (index and time), the stage it
/// belongs to is the change's from its instant on, and none is missing.
fn check_schedule(run: &OpenRun, workers: &str) {
    let sent: BTreeMap<u64, (u64, u64)> = run
        .records
        .iter()
        .filter_map(|r| {
            let (i, t, phase) = (
                r["index"].as_u64()?,
                r["scheduled_us"].as_u64()?,
                r["phase"].as_u64()?,
            );
            Some((i, (t, phase)))
        })
        .collect();
    let indices = run.records.iter().filter(|r| r["index"].is_u64()).count();
    assert_eq!(
        indices,
        sent.len(),
        "{workers} workers: a request was sent twice"
    );
    let last = sent.values().map(|(t, _)| *t).max().unwrap_or(0);
    // what was due up to a second before the stop all went out
    let until = Duration::from_micros(last.saturating_sub(1_000_000));
    let at_us = run.at.as_micros() as u64;
    let expected = expected_schedule(run.at, until);
    assert!(
        expected.values().any(|t| *t >= at_us + 2_000_000),
        "the run went on after the change"
    );
    for (index, due) in &expected {
        let (t, phase) = sent.get(index).unwrap_or_else(|| {
            panic!("{workers} workers: request {index} (due {due} µs) was not sent")
        });
        assert_eq!(
            t, due,
            "{workers} workers: request {index} was due elsewhere"
        );
        assert_eq!(
            *phase,
            u64::from(*t >= at_us),
            "{workers} workers: request {index}'s stage"
        );
    }
}

/// The change to 60/s as a stage boundary in the results.
fn check_results(out: &Path) {
    let before = read_json(&out.join("result-stage1.json"));
    let after = read_json(&out.join("result-stage2.json"));
    let whole = read_json(&out.join("result.json"));
    assert_eq!(
        stage_names(out),
        ["start", "edit-1", "all"],
        "each stage, then the whole run"
    );
    assert_eq!(
        before["cicada"]["scenario"]["load"]["request_rate"], 20.0,
        "{before:#}"
    );
    assert_eq!(
        after["cicada"]["scenario"]["load"]["request_rate"], 60.0,
        "{after:#}"
    );
    let (b, a) = (
        before["completed"].as_u64().unwrap_or(0),
        after["completed"].as_u64().unwrap_or(0),
    );
    assert!(b > 40 && a > 200, "both stages measured: {b} and {a}");
    assert_eq!(whole["completed"].as_u64(), Some(a + b), "stages add up");
}

/// The request id of a logged request: its global index.
fn index_of(logged: &Value) -> Option<u64> {
    logged["request_id"]
        .as_str()?
        .rsplit('-')
        .next()?
        .parse()
        .ok()
}

/// An open loop's rate changes from the web API on 1 and 2 workers: the
/// mock sees the old rate, then the new; the requests after the change are
/// the `[[stages]]` schedule's at that instant whatever the worker count,
/// and carry the same prompts; the results have a stage on each side.
#[test]
fn a_change_of_rate_reaches_the_server_with_the_same_assignment_on_one_and_two_workers() {
    let _g = serial();
    let one = steer_open("1");
    let two = steer_open("2");
    for (run, workers) in [(&one, "1"), (&two, "2")] {
        check_schedule(run, workers);
        check_results(&run.out);
    }
    let prompts = |log: &[Value]| -> BTreeMap<u64, u64> {
        log.iter()
            .filter_map(|r| Some((index_of(r)?, r["prompt_fingerprint"].as_u64()?)))
            .collect()
    };
    let (p1, p2) = (prompts(&one.log), prompts(&two.log));
    let after = |run: &OpenRun| {
        let at = run.at.as_micros() as u64;
        run.records
            .iter()
            .filter(|r| r["scheduled_us"].as_u64().is_some_and(|t| t >= at))
            .filter_map(|r| r["index"].as_u64())
            .collect::<Vec<u64>>()
    };
    let common: Vec<u64> = after(&one)
        .into_iter()
        .filter(|i| p2.contains_key(i))
        .collect();
    assert!(
        common.len() > 100,
        "both runs sent requests after the change: {}",
        common.len()
    );
    for i in common {
        assert_eq!(
            p1.get(&i),
            p2.get(&i),
            "request {i} carried another prompt on 2 workers"
        );
    }
}

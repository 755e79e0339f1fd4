//! `max_concurrency` is one cap for the whole fleet: over N workers a run
//! takes the time it takes on one, keeps the same mean concurrency, and the
//! server never sees more than the cap. Before the cap was shared, each
//! worker had its own ⌊C/N⌋ or ⌈C/N⌉ slots over its own stripe: a worker
//! that drew longer answers finished last, alone, with free slots elsewhere.

use std::path::Path;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(240);

/// Requests with output lengths drawn from 8 to 1,024 tokens, all due at
/// once, under a cap of `cap`.
fn scenario(mock_url: &str, cap: u32, requests: u32) -> String {
    let tables = format!(
        r#"[dataset]
kind = "random"
input_len = 8
output_len = 516
range_ratio = 0.984
[sampling]
ignore_eos = true
[load]
num_prompts = {requests}
request_rate = "inf"
max_concurrency = {cap}
"#
    );
    mock_chat_scenario("fleet-cap", 11, mock_url, &tables)
}

/// One run on a fresh mock: result.json and the most requests the mock had
/// in flight at once.
fn run(dir: &Path, cap: u32, requests: u32, workers: u32, itl_ms: &str) -> (Value, u64) {
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", itl_ms]);
    let text = scenario(&mock.url, cap, requests);
    let name = format!("c{cap}-w{workers}");
    let (r, j) = run_scenario(dir, &name, &text, &workers.to_string(), &[], LIMIT);
    assert_ok(&r);
    assert_eq!(j["completed"].as_u64(), Some(u64::from(requests)), "{r:?}");
    let seen = mock.stats()["max_in_flight"].as_u64().unwrap();
    (j, seen)
}

/// A run's duration (s) and mean requests in flight.
fn figures(j: &Value) -> (f64, f64) {
    let duration = j["duration"].as_f64().unwrap();
    let mean = j["cicada"]["mean_concurrent_requests"].as_f64().unwrap();
    (duration, mean)
}

fn compare(cap: u32, requests: u32, workers: u32, itl_ms: &str) {
    let dir = scratch();
    let (one, seen_one) = run(dir.path(), cap, requests, 1, itl_ms);
    let (many, seen_many) = run(dir.path(), cap, requests, workers, itl_ms);
    let (d1, c1) = figures(&one);
    let (dn, cn) = figures(&many);
    eprintln!(
        "C={cap}: 1 worker {d1:.3} s at {c1:.2} in flight; {workers} workers {dn:.3} s at {cn:.2}"
    );
    assert!(seen_one <= u64::from(cap), "the server saw {seen_one}");
    assert!(seen_many <= u64::from(cap), "the server saw {seen_many}");
    assert!(
        (dn - d1).abs() <= 0.03 * d1,
        "C={cap}: {workers} workers took {dn:.3} s, one worker {d1:.3} s"
    );
    assert!(
        (cn - c1).abs() <= 0.03 * c1,
        "C={cap}: mean concurrency {cn:.2} over {workers} workers, {c1:.2} on one"
    );
    // the cap was used, not just respected (the last long answers run alone)
    assert!(c1 >= 0.7 * f64::from(cap), "mean concurrency {c1:.2}");
}

#[test]
fn a_cap_of_10_over_4_workers_runs_as_on_one() {
    let _g = serial();
    compare(10, 80, 4, "2");
}

#[test]
fn a_cap_of_64_over_8_workers_runs_as_on_one() {
    let _g = serial();
    compare(64, 256, 8, "4");
}

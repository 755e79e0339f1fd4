//! Issue 22: bounded memory whatever the server sends. The real `cicada` and
//! `worker` run against a scripted hostile server (`support/hostile.rs`);
//! every case checks the outcome class, that every request is accounted for
//! (sent = every class summed = what the server received), and that the
//! worker's peak RSS stayed under 100 MB.

use std::path::Path;
use std::time::Duration;

use cicada_tests::hostile::{Hostile, HostileServer};
use cicada_tests::*;

/// The most resident memory a worker may reach in any case here.
const MAX_WORKER_RSS: u64 = 100_000_000;
const MB: u64 = 1_000_000;

fn scenario(url: &str, requests: u32, extra_target: &str, extra_output: &str) -> String {
    format!(
        r#"
name = "hostile"
[target]
backend = "openai-chat"
base_url = "{url}"
model = "hostile"
ready_timeout = "0s"
server_metrics = false
timeout = "300s"
{extra_target}
[dataset]
kind = "random"
input_len = 8
output_len = 8
[load]
num_prompts = {requests}
max_concurrency = {requests}
[output]
html = false
# these servers fail every request on purpose: the run itself succeeds
max_failure_ratio = 1.0
{extra_output}
"#
    )
}

/// Run `requests` requests against `server` with one worker; check that
/// the run finished and every request is accounted for. Returns the run
/// and its result.json.
fn run(
    dir: &Path,
    name: &str,
    server: &HostileServer,
    requests: u32,
    extra: (&str, &str),
) -> (Run, serde_json::Value) {
    let text = scenario(&server.url, requests, extra.0, extra.1);
    let started = std::time::Instant::now();
    let (run, j) = run_scenario(dir, name, &text, "1", &[], Duration::from_secs(300));
    assert_ok(&run);
    let sent = j["cicada"]["sent"].as_u64().unwrap();
    let classes: u64 = j["cicada"]["outcomes"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["count"].as_u64().unwrap())
        .sum();
    assert_eq!(sent, u64::from(requests), "{}", j["cicada"]["outcomes"]);
    assert_eq!(classes, sent, "{}", j["cicada"]["outcomes"]);
    assert_eq!(server.requests(), sent, "the server saw every request once");
    let rss = peak_rss(&j);
    eprintln!(
        "{name}: worker peak RSS {:.1} MB, run took {:.1} s, outcomes {}",
        rss as f64 / MB as f64,
        started.elapsed().as_secs_f64(),
        j["cicada"]["outcomes"]
    );
    assert!(
        rss < MAX_WORKER_RSS,
        "{name}: worker peak RSS {:.1} MB (limit {} MB)",
        rss as f64 / MB as f64,
        MAX_WORKER_RSS / MB
    );
    (run, j)
}

/// The worker's peak resident memory as it reported it.
fn peak_rss(j: &serde_json::Value) -> u64 {
    j["cicada"]["client"]["peak_rss_bytes"]
        .as_u64()
        .expect("cicada.client.peak_rss_bytes")
}

/// Every request ended in `class`; returns the class's first error text.
fn all_in_class(j: &serde_json::Value, class: &str, n: u64) -> String {
    let outcomes = &j["cicada"]["outcomes"];
    assert_eq!(outcomes[class]["count"].as_u64(), Some(n), "{outcomes}");
    outcomes[class]["first_error"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// One 200 MB SSE line on each of 4 streams: the line is cut off at the
/// event size cap and the request fails as `response_too_large`.
#[test]
fn a_huge_sse_line_fails_the_request_in_bounded_memory() {
    let _g = serial();
    let dir = scratch();
    let server = HostileServer::start(Hostile::HugeLine {
        bytes: 200 * 1024 * 1024,
    });
    let (_, j) = run(dir.path(), "huge-line", &server, 4, ("", ""));
    let error = all_in_class(&j, "response_too_large", 4);
    assert!(error.contains("target.max_event_size"), "{error}");
    // the client stopped reading soon after the cap: far from 4 x 200 MB
    assert!(
        server.bytes_sent() < 4 * 64 * 1024 * 1024,
        "the server got {} bytes out",
        server.bytes_sent()
    );
}

/// A smaller cap set in the scenario applies (and the resolved scenario shows it).
#[test]
fn the_event_size_cap_is_a_scenario_key() {
    let _g = serial();
    let dir = scratch();
    let server = HostileServer::start(Hostile::HugeLine {
        bytes: 2 * 1024 * 1024,
    });
    let (_, j) = run(
        dir.path(),
        "small-cap",
        &server,
        2,
        ("max_event_size = \"1MiB\"", ""),
    );
    let error = all_in_class(&j, "response_too_large", 2);
    assert!(error.contains("1MiB"), "{error}");
    assert_eq!(
        j["cicada"]["scenario"]["target"]["max_event_size"].as_str(),
        Some("1MiB")
    );
}

/// About 1 GB of valid one-character events into one request whose usage
/// says 8 tokens: the request's memory does not grow with its events, the
/// detailed record is capped, and the run says the events far exceeded the
/// usage count.
#[test]
fn a_flood_of_events_into_one_request_keeps_memory_bounded() {
    let _g = serial();
    let dir = scratch();
    let server = HostileServer::start(Hostile::Flood {
        bytes: 1024 * 1024 * 1024,
        usage_tokens: 8,
    });
    let (flood, j) = run(
        dir.path(),
        "flood",
        &server,
        1,
        ("", "save_detailed = true"),
    );
    all_in_class(&j, "ok", 1);
    let counters = &j["cicada"]["counters"];
    let events = counters["content_events"].as_u64().unwrap();
    assert_eq!(events, server.content_events_sent(), "{counters}");
    assert!(events > 6_000_000, "{counters}");
    assert_eq!(
        counters["events_over_usage"].as_u64(),
        Some(1),
        "{counters}"
    );
    assert_eq!(j["total_output_tokens"].as_u64(), Some(8));
    assert!(
        flood
            .stdout
            .contains("1 requests got more than 4 content events per output token"),
        "no warning on the console:\n{}",
        flood.stdout
    );
    // the per-event detail is capped, and the record says so
    let lines = std::fs::read_to_string(dir.path().join("out-flood/requests.jsonl")).unwrap();
    let line = lines.lines().next().unwrap();
    assert!(line.len() < 4 * 1024 * 1024, "a {} byte line", line.len());
    let rec: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(rec["content_events"].as_u64(), Some(events));
    assert!(rec["events_cap"].as_u64().is_some(), "no cap stated");
    let kept: u64 = rec["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["events"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(kept, events, "the kept entries stand for every event");
}

/// 5,000 header lines: the server answered, badly; not a connect failure.
#[test]
fn a_response_head_with_thousands_of_headers_is_refused() {
    let _g = serial();
    let dir = scratch();
    let server = HostileServer::start(Hostile::ManyHeaders { count: 5_000 });
    let (_, j) = run(dir.path(), "many-headers", &server, 4, ("", ""));
    let error = all_in_class(&j, "response_too_large", 4);
    assert!(error.contains("header"), "{error}");
}

/// One header line of 1 MB: refused at the head size limit, not a connect failure.
#[test]
fn a_megabyte_header_line_is_refused() {
    let _g = serial();
    let dir = scratch();
    let server = HostileServer::start(Hostile::LongHeader { bytes: 1024 * 1024 });
    let (_, j) = run(dir.path(), "long-header", &server, 4, ("", ""));
    let error = all_in_class(&j, "response_too_large", 4);
    assert!(error.contains("head"), "{error}");
}

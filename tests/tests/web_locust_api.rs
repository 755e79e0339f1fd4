//! Issue 35, item 1: Locust's HTTP API as Locust speaks it. A script
//! written for Locust drives a real `cicada web` fleet (two local workers)
//! against a standalone mock whose own counts are the ground truth, with
//! exactly the requests such a script sends, taken from Locust's `web.py`
//! (2.46.7 and 2.47.0) and its own tests (`locust/test/test_web.py`): a
//! form-encoded `POST /swarm` with `user_count`, `spawn_rate` and `host`,
//! `GET /stats/requests` polling, `GET /stats/reset`, `GET /stop` (Locust
//! up to 2.46 serves both as GET only; 2.47 as POST only: cicada takes
//! both), and every download of Locust's page, each answered in Locust's
//! shape, with Locust's field names.

use std::time::{Duration, Instant};

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

/// Locust's `/stats/requests` keys (`web.py`, `request_stats`).
const TOP_KEYS: [&str; 12] = [
    "stats",
    "errors",
    "current_rps",
    "current_fail_per_sec",
    "total_rps",
    "total_fail_per_sec",
    "fail_ratio",
    "current_response_time_percentiles",
    "workers",
    "worker_count",
    "state",
    "user_count",
];

/// Locust's `StatsEntry.to_dict()` keys, with `PERCENTILES_TO_STATISTICS`.
const ROW_KEYS: [&str; 15] = [
    "method",
    "name",
    "num_requests",
    "num_failures",
    "min_response_time",
    "max_response_time",
    "current_rps",
    "current_fail_per_sec",
    "avg_response_time",
    "median_response_time",
    "total_rps",
    "total_fail_per_sec",
    "response_time_percentile_0.95",
    "response_time_percentile_0.99",
    "avg_content_length",
];

/// Locust's `StatsCSV` columns.
const REQUESTS_CSV: &str = "Type,Name,Request Count,Failure Count,Median Response Time,\
Average Response Time,Min Response Time,Max Response Time,Average Content Size,Requests/s,\
Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%";
const FAILURES_CSV: &str = "Method,Name,Error,Occurrences,First Seen,Last Seen";
const EXCEPTIONS_CSV: &str = "Count,Message,Traceback,Nodes";

/// A closed loop of 2 users at first, each request ~300 ms at the mock.
fn scenario(mock_url: &str) -> String {
    let tables = r#"[dataset]
kind = "random"
input_len = 8
output_len = 20
[sampling]
ignore_eos = true
[load]
users = 2
duration = "150s"
"#;
    mock_chat_scenario("locust-script", 35, mock_url, tables)
}

fn get(url: &str) -> Answer {
    request("GET", url, &[], "").unwrap_or_else(|| panic!("GET {url}: no answer"))
}

/// `requests.post(url, data=form)`: what Locust's tests and users' scripts send.
fn post_data(url: &str, form: &str) -> Answer {
    let kind = [("content-type", "application/x-www-form-urlencoded")];
    request("POST", url, &kind, form).unwrap_or_else(|| panic!("POST {url}: no answer"))
}

/// Poll `GET /stats/requests` (as Locust's page does, every 2 s; here
/// faster) until `ok` holds; the last answer.
fn poll(base: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        if let Some(a) = request("GET", &format!("{base}/stats/requests"), &[], "")
            && a.status == 200
        {
            last = a.json();
            if ok(&last) {
                return last;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("/stats/requests never showed {what}; last:\n{last:#}");
}

/// The `Aggregated` row, last as Locust puts it.
fn total(stats: &Value) -> &Value {
    let rows = stats["stats"].as_array().expect("a stats list");
    let last = rows.last().expect("at least the Aggregated row");
    assert_eq!(last["name"], "Aggregated", "{stats:#}");
    last
}

fn requests_of(stats: &Value) -> u64 {
    total(stats)["num_requests"].as_u64().unwrap_or(0)
}

/// Every key Locust's `/stats/requests` has, in every row and worker too.
fn assert_locust_shape(s: &Value) {
    for key in TOP_KEYS {
        assert!(s.get(key).is_some(), "no `{key}` in {s:#}");
    }
    for row in s["stats"].as_array().unwrap() {
        for key in ROW_KEYS {
            assert!(row.get(key).is_some(), "no `{key}` in row {row}");
        }
    }
    let pct = &s["current_response_time_percentiles"];
    for key in [
        "response_time_percentile_0.5",
        "response_time_percentile_0.95",
    ] {
        assert!(pct.get(key).is_some(), "no `{key}` in {pct}");
    }
    for w in s["workers"].as_array().unwrap() {
        for key in ["id", "state", "user_count", "cpu_usage", "memory_usage"] {
            assert!(w.get(key).is_some(), "no `{key}` in worker {w}");
        }
    }
}

/// The downloads and side routes of Locust's page, each in Locust's shape.
fn assert_locust_routes(base: &str) {
    let csv = get(&format!("{base}/stats/requests/csv"));
    assert_eq!(csv.status, 200);
    assert!(csv.content_type.starts_with("text/csv"), "{csv:?}");
    assert!(csv.disposition.starts_with("attachment"), "{csv:?}");
    assert_eq!(csv.body.lines().next(), Some(REQUESTS_CSV));
    let last = csv.body.lines().last().unwrap_or_default();
    assert!(last.starts_with(",Aggregated,"), "{}", csv.body);
    let fails = get(&format!("{base}/stats/failures/csv"));
    assert_eq!(
        (fails.status, fails.body.lines().next()),
        (200, Some(FAILURES_CSV))
    );
    let exc = get(&format!("{base}/exceptions/csv"));
    assert_eq!(
        (exc.status, exc.body.as_str()),
        (200, "Count,Message,Traceback,Nodes\n")
    );
    assert_eq!(exc.body.trim(), EXCEPTIONS_CSV);
    let exceptions = get(&format!("{base}/exceptions"));
    assert_eq!(exceptions.status, 200);
    assert_eq!(exceptions.json(), serde_json::json!({"exceptions": []}));
    let tasks = get(&format!("{base}/tasks"));
    assert_eq!(tasks.status, 200);
    let tasks = tasks.json();
    let class = &tasks["per_class"]["locust-script"];
    assert_eq!(class["ratio"], 1.0, "{tasks:#}");
    assert_eq!(class["tasks"]["cicada-mock"]["ratio"], 1.0, "{tasks:#}");
    assert_eq!(tasks["total"], tasks["per_class"]);
    let logs = get(&format!("{base}/logs")).json();
    assert!(
        logs["master"].is_array() && logs["workers"].is_object(),
        "{logs}"
    );
    let history = get(&format!("{base}/stats/requests_full_history/csv"));
    assert_eq!(history.status, 404, "as Locust without --csv-full-history");
    let report = get(&format!("{base}/stats/report?theme=light"));
    assert_eq!(report.status, 200);
    assert!(report.content_type.starts_with("text/html"), "{report:?}");
    assert!(report.disposition.is_empty());
    let download = get(&format!("{base}/stats/report?download=1"));
    assert!(
        download.disposition.starts_with("attachment"),
        "{download:?}"
    );
}

/// Start 3 users with `POST /swarm`, change them to 6, reset the figures
/// with `GET /stats/reset` and stop with `GET /stop`: the mock sees 3,
/// then 6 streams, then none; the figures restart at the reset; the
/// results are written, stopped by `GET /stop`. A GET to `/stop` from
/// another site (an `<img>` on some page) is refused and changes nothing.
#[test]
fn a_locust_script_drives_a_cicada_run() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "100", "--itl-ms", "10"]);
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url));
    let out = dir.path().join("out");
    let (child, base) = start_web_wait(&sc, &out, "2", &["--quiet"]);
    let fleet = Guarded(Some(child));

    // Locust's start form waits for its workers
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let a = request("GET", &format!("{base}/worker-count"), &[], "");
        if a.as_ref()
            .is_some_and(|a| a.status == 200 && a.json()["worker_count"] == 2)
        {
            break;
        }
        assert!(Instant::now() < deadline, "never 2 workers: {a:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
    let ready = poll(&base, "ready", |s| s["state"] == "ready");
    assert_locust_shape(&ready);
    assert_eq!(ready["user_count"], 0, "no user runs before the start");
    assert_eq!(requests_of(&ready), 0);
    let page = get(&format!("{base}/"));
    assert_eq!(page.status, 200);
    assert!(page.content_type.starts_with("text/html"));

    // start: `requests.post(base + "/swarm", data={...})`
    let form = format!("user_count=3&spawn_rate=10&host={}", mock.url);
    let started = post_data(&format!("{base}/swarm"), &form);
    assert_eq!(started.status, 200, "{}", started.body);
    let started = started.json();
    assert_eq!(started["success"], true, "{started}");
    assert_eq!(started["message"], "Swarming started");
    assert_eq!(started["host"], mock.url.as_str());
    mock.wait_for_streams(3, "the 3 users the form started");
    let running = poll(&base, "3 users sending", |s| {
        s["state"] == "running" && s["user_count"] == 3 && requests_of(s) > 0
    });
    assert_locust_shape(&running);
    assert_eq!(running["worker_count"], 2);
    assert_locust_routes(&base);

    // Locust's Edit: `POST /swarm` again while it runs
    let edit = post_data(&format!("{base}/swarm"), "user_count=6&spawn_rate=10");
    assert_eq!(edit.status, 200, "{}", edit.body);
    assert_eq!(edit.json()["success"], true, "{}", edit.body);
    mock.wait_for_streams(6, "after the edit to 6 users");
    assert!(mock.open_streams(10) <= 6, "6 users, never more streams");
    poll(&base, "6 users", |s| s["user_count"] == 6);

    // another site's GET (an <img src>, a link, an older browser's Referer)
    for refused in [
        [("sec-fetch-site", "cross-site")],
        [("referer", "http://evil.example/page.html")],
    ] {
        let a = request("GET", &format!("{base}/stop"), &refused, "").unwrap();
        assert_eq!(a.status, 403, "{refused:?}: {}", a.body);
        let a = request("GET", &format!("{base}/stats/reset"), &refused, "").unwrap();
        assert_eq!(a.status, 403, "{refused:?}: {}", a.body);
    }
    let wrong = request("PUT", &format!("{base}/stop"), &[], "").unwrap();
    assert_eq!((wrong.status, wrong.allow.as_str()), (405, "GET, POST"));

    // reset: `requests.get(base + "/stats/reset")`
    let before = requests_of(&poll(&base, "150 requests", |s| requests_of(s) >= 150));
    let reset = get(&format!("{base}/stats/reset"));
    assert_eq!(reset.status, 200, "{}", reset.body);
    let after = poll(&base, "the figures started again", |s| {
        s["state"] == "running" && requests_of(s) < before / 2
    });
    let served = mock.stats()["completed"].as_u64().unwrap_or(0);
    assert!(
        served > before && requests_of(&after) < served,
        "the mock served {served}: the reset window counts fewer ({after:#})"
    );
    assert_eq!(mock.open_streams(5), 6, "the reset left the load alone");

    // stop: `requests.get(base + "/stop")`
    let stop = get(&format!("{base}/stop"));
    assert_eq!(stop.status, 200, "{}", stop.body);
    assert_eq!(
        stop.json(),
        serde_json::json!({"success": true, "message": "Test stopped"})
    );
    let stopped = poll(&base, "stopped", |s| s["state"] == "stopped");
    assert_eq!(stopped["user_count"], 0);
    mock.wait_for_streams(0, "after GET /stop");
    let result = read_json(&out.join("result.json"));
    assert_eq!(
        result["cicada"]["interrupted_by"], "GET /stop",
        "{result:#}"
    );
    let served = mock.stats()["completed"].as_u64().unwrap_or(0);
    let completed = result["completed"].as_u64().unwrap_or(0);
    assert!(
        completed > 0 && completed <= served,
        "{completed} completed of the {served} the mock served"
    );
    assert_eq!(stage_names(&out), ["start", "edit-1", "all"]);

    // `cicada web` keeps its results up until Ctrl-C
    assert_eq!(get(&format!("{base}/stats/requests/csv")).status, 200);
    let run = fleet.interrupt(LIMIT);
    assert_eq!(run.code, Some(130), "{}", run.stderr);
}

//! Issue 27, steering: while a closed-loop run goes, `POST /swarm` (the
//! page's Edit) changes its users fleet-wide. Real `cicada` and `worker`
//! binaries against a standalone mock, whose own count of open streams is
//! the ground truth: it moves from the old user count to the new one, and
//! the results show the change as a stage boundary, for 1 and 2 workers.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

/// A closed loop of `users` users against `mock_url`, each request ~300 ms
/// (so a user almost always has one open at the mock), no think time.
fn scenario(mock_url: &str, users: u32) -> String {
    format!(
        r#"
name = "web-steer"
seed = 27
[target]
backend = "openai-chat"
base_url = "{mock_url}"
model = "cicada-mock"
[dataset]
kind = "random"
input_len = 8
output_len = 20
[sampling]
ignore_eos = true
[load]
users = {users}
duration = "120s"
"#
    )
}

/// `POST url` with a form body; (status, body), `None` when nothing answers.
fn post_form(url: &str, body: &str) -> Option<(u16, String)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime");
    rt.block_on(async {
        let resp = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_string())
            .send()
            .await
            .ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.text().await.ok()?))
    })
}

/// The most streams the mock had open over `samples` looks 100 ms apart.
fn open_streams(mock: &Mock, samples: u32) -> u64 {
    (0..samples)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            mock.stats()["in_flight"].as_u64().unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

/// Wait until the mock's open streams peak at exactly `n` over a second.
fn wait_for_streams(mock: &Mock, n: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = 0;
    while Instant::now() < deadline {
        seen = open_streams(mock, 10);
        if seen == n {
            return;
        }
    }
    panic!("{what}: the mock never had {n} streams open (last peak {seen})");
}

fn spawn_run(sc: &Path, out: &Path, workers: &str, addr: &str) -> Child {
    Command::new(cicada())
        .args(["run", sc.to_str().unwrap(), "--workers", workers])
        .args(["--output-dir", out.to_str().unwrap(), "--web", addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting cicada")
}

/// Start at 3 users, change to 7 from the web API, stop; the mock saw 3
/// then 7, and the results have a stage for each.
fn steer_with(workers: &str) {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "100", "--itl-ms", "10"]);
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 3));
    let out = dir.path().join("out");
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let child = spawn_run(&sc, &out, workers, &addr);
    wait_for_streams(&mock, 3, "before the change");
    assert!(open_streams(&mock, 10) <= 3, "3 users, never more streams");

    // an open loop's fields cannot change a running closed loop
    let (code, body) = post_form(&format!("{base}/swarm"), "rate=5").expect("an answer");
    assert_eq!(code, 400, "{body}");
    let (code, body) =
        post_form(&format!("{base}/swarm"), "user_count=7&spawn_rate=20").expect("an answer");
    assert_eq!(code, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["success"], true, "{answer}");
    wait_for_streams(&mock, 7, "after the change");
    assert!(open_streams(&mock, 10) <= 7, "7 users, never more streams");
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

    let (code, body) = post_form(&format!("{base}/stop"), "").expect("an answer");
    assert_eq!(code, 200, "{body}");
    let run = wait_with_limit(child, LIMIT);
    assert_eq!(
        run.code,
        Some(130),
        "stopped as Ctrl-C stops\n{}",
        run.stderr
    );
    let before = read_json(&out.join("result-stage1.json"));
    let after = read_json(&out.join("result-stage2.json"));
    let whole = read_json(&out.join("result.json"));
    assert_eq!(before["cicada"]["stage"], 1, "{before:#}");
    assert_eq!(after["cicada"]["stage"], 2, "{after:#}");
    let (header, rows) = read_csv(&out.join("summary.csv"));
    let name = header
        .iter()
        .position(|h| h == "stage_name")
        .expect("a stage_name column");
    let names: Vec<&str> = rows.iter().map(|r| r[name].as_str()).collect();
    assert_eq!(
        names,
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
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let child = spawn_run(&sc, &out, "1", &addr);
    let deadline = Instant::now() + Duration::from_secs(60);
    while mock.stats()["completed"].as_u64() < Some(30) {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, body) = post_form(&format!("{base}/stats/reset"), "").expect("an answer");
    assert_eq!(code, 200, "{body}");
    let before_reset = mock.stats()["completed"].as_u64().unwrap_or(0);
    std::thread::sleep(Duration::from_secs(3));
    let (code, body) = post_form(&format!("{base}/stop"), "").expect("an answer");
    assert_eq!(code, 200, "{body}");
    let run = wait_with_limit(child, LIMIT);
    assert_eq!(run.code, Some(130), "{}", run.stderr);
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

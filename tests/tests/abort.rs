//! Issue 38 item 4: abort thresholds (`[abort]`, k6's `abortOnFail`) judged
//! by the coordinator over a sliding window of the merged intervals, and a
//! sweep that skips its higher points once a step stopped early (aborted or
//! saturated), naming them.

use std::path::Path;
use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(240);
/// `cicada run`'s exit code when an abort threshold stopped a step.
const EXIT_ABORTED: i32 = 8;

/// An open loop against `mock_url` at `load`, with `extra` sections.
fn scenario(mock_url: &str, load: &str, extra: &str) -> String {
    format!(
        r#"
name = "abort"
seed = 38
[target]
backend = "openai-chat"
base_url = "{mock_url}"
model = "cicada-mock"
[dataset]
input_len = 8
output_len = 4
[load]
{load}
[output]
save_detailed = true
{extra}
"#
    )
}

/// The mock's TTFT is 20 ms + 50 ms per request in flight: at 40 req/s its
/// queue grows without bound, so TTFT passes 1 s within a few seconds.
fn saturating_mock() -> Mock {
    Mock::start(&[
        "--ttft-ms",
        "20",
        "--itl-ms",
        "1",
        "--ttft-per-inflight-ms",
        "50",
    ])
}

fn run(sc: &Path, out: &Path, workers: &str) -> Run {
    coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            workers,
            "--output-dir",
            out.to_str().unwrap(),
        ],
        LIMIT,
    )
}

/// Every request sent is counted and written: sent = ok + failed, one
/// requests.jsonl line each, no worker lost for its unsent share.
fn assert_all_counted(j: &serde_json::Value, out: &Path) {
    let sent = j["cicada"]["sent"].as_u64().unwrap();
    let (ok, failed) = (
        j["completed"].as_u64().unwrap(),
        j["failed"].as_u64().unwrap(),
    );
    assert_eq!(sent, ok + failed);
    let lines = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(lines, sent, "one requests.jsonl line per request sent");
    assert!(
        !j["cicada"]["degraded"].as_bool().unwrap(),
        "no worker lost"
    );
    assert!(!j["cicada"]["partial"].as_bool().unwrap());
}

/// p99 TTFT over the window passes its bound soon after the arming delay:
/// the step stops there (not before it is armed), exits 8, says which
/// condition, the value, the bound and when in the console and result.json.
#[test]
fn a_p99_ttft_bound_stops_the_step_once_armed() {
    let _g = serial();
    let mock = saturating_mock();
    let dir = scratch();
    let text = scenario(
        &mock.url,
        "request_rate = 40\nduration = \"40s\"",
        "[abort]\np99_ttft_ms = 1000\nwindow_s = 3\nafter_s = 5\n",
    );
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let r = run(&sc, &out, "2");
    assert_eq!(r.code, Some(EXIT_ABORTED), "stderr:\n{}", r.stderr);
    let j = read_json(&out.join("result.json"));
    let a = &j["cicada"]["abort"];
    assert_eq!(a["condition"], "p99_ttft_ms", "{}", j["cicada"]);
    assert_eq!(a["bound"].as_f64(), Some(1000.0));
    assert!(a["observed"].as_f64().unwrap() > 1000.0, "{a}");
    let (start, end) = (
        a["window_start_s"].as_f64().unwrap(),
        a["window_end_s"].as_f64().unwrap(),
    );
    assert!(end >= 5.0 - 1e-6, "judged before it was armed: {a}");
    assert!((end - start - 3.0).abs() < 1e-6, "a 3 s window: {a}");
    assert!(a["window_requests"].as_u64().unwrap() > 0);
    let at = a["at_s"].as_f64().unwrap();
    assert!((5.0..20.0).contains(&at), "stopped at {at} s of 40");
    assert!(j["duration"].as_f64().unwrap() < 25.0);
    let reason = a["reason"].as_str().unwrap();
    assert!(reason.starts_with("abort.p99_ttft_ms: "), "{reason}");
    assert!(r.stdout.contains("Aborted:"), "{}", r.stdout);
    assert!(r.stdout.contains(reason), "the console gives the reason");
    assert_all_counted(&j, &out);
}

/// The error rate over the window above its bound stops the step; the
/// verdict comes from the merged intervals, so one worker or three alike.
#[test]
fn an_error_rate_bound_stops_the_step_for_any_worker_count() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1", "--fault-http-500", "0.3"]);
    let dir = scratch();
    let text = scenario(
        &mock.url,
        "request_rate = 30\nduration = \"30s\"",
        "[abort]\nerror_rate = 0.1\np99_ttft_ms = 60000\nwindow_s = 2\nafter_s = 3\n",
    );
    let sc = write(dir.path(), "s.toml", &text);
    for workers in ["1", "3"] {
        let out = dir.path().join(format!("out-{workers}"));
        let r = run(&sc, &out, workers);
        assert_eq!(r.code, Some(EXIT_ABORTED), "stderr:\n{}", r.stderr);
        let j = read_json(&out.join("result.json"));
        let a = &j["cicada"]["abort"];
        assert_eq!(a["condition"], "error_rate", "{workers} workers: {a}");
        let seen = a["observed"].as_f64().unwrap();
        assert!((0.15..0.5).contains(&seen), "30 % injected, saw {seen}");
        assert!(a["window_end_s"].as_f64().unwrap() >= 3.0 - 1e-6);
        assert!(a["at_s"].as_f64().unwrap() < 15.0, "{a}");
        assert!(j["duration"].as_f64().unwrap() < 20.0, "stopped early");
        assert!(r.stdout.contains("Aborted:"));
        assert_all_counted(&j, &out);
    }
}

/// A rate sweep 5 → 40 → 60 req/s: the first point runs its length within
/// every bound, the second trips p99 TTFT and stops, the third is skipped
/// and named in the console's sweep table and the stopping step's file.
#[test]
fn a_sweep_skips_its_higher_points_once_a_step_is_aborted() {
    let _g = serial();
    let mock = saturating_mock();
    let dir = scratch();
    let text = scenario(
        &mock.url,
        "request_rate = 5\nduration = \"8s\"",
        "[abort]\np99_ttft_ms = 1000\nwindow_s = 3\nafter_s = 3\n\
         [sweep]\nrequest_rate = [5, 40, 60]\n",
    );
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let r = run(&sc, &out, "2");
    assert_eq!(r.code, Some(EXIT_ABORTED), "stderr:\n{}", r.stderr);
    let first = read_json(&out.join("result-stage1.json"));
    assert!(
        first["cicada"].get("abort").is_none(),
        "{}",
        first["cicada"]
    );
    assert!(first["cicada"].get("sweep_skipped").is_none());
    let second = read_json(&out.join("result-stage2.json"));
    assert_eq!(second["cicada"]["abort"]["condition"], "p99_ttft_ms");
    assert_eq!(
        second["cicada"]["sweep_skipped"],
        serde_json::json!(["rate=60"])
    );
    assert!(!out.join("result-stage3.json").exists(), "rate=60 ran");
    assert!(
        r.stdout
            .contains("skipped after stage 2 (abort.p99_ttft_ms tripped): rate=60"),
        "{}",
        r.stdout
    );
}

/// The same for a saturated step with `[saturation] stop = true`: the first
/// point already saturates and stops, the rest are skipped and named (the
/// exit code stays 0: saturation is a finding, not a failed threshold).
#[test]
fn a_sweep_skips_its_higher_points_once_a_step_is_saturated() {
    let _g = serial();
    let mock = saturating_mock();
    let dir = scratch();
    let text = scenario(
        &mock.url,
        "request_rate = 40\nduration = \"40s\"",
        "[saturation]\nstop = true\n[sweep]\nrequest_rate = [40, 60, 80]\n",
    );
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let r = run(&sc, &out, "2");
    assert_ok(&r);
    let first = read_json(&out.join("result-stage1.json"));
    assert_eq!(first["cicada"]["saturation"]["stopped"], true);
    assert_eq!(
        first["cicada"]["sweep_skipped"],
        serde_json::json!(["rate=60", "rate=80"])
    );
    assert!(!out.join("result-stage2.json").exists());
    assert!(
        r.stdout
            .contains("skipped after stage 1 (saturated): rate=60, rate=80"),
        "{}",
        r.stdout
    );
}

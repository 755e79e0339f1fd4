//! Issue 27, steering an open loop's cap: while an open loop that is held
//! by `max_concurrency` runs, `POST /swarm max_concurrency=C` (the page's
//! Edit) changes the fleet-wide cap at one instant. Real `cicada` and
//! `worker` binaries against a standalone mock, whose own count of open
//! streams is the ground truth: it moves from the old cap to the new one,
//! up and then down, no worker is lost for sending under a cap the other
//! side had not switched to yet, and each change is a stage in the results.
//! The page's server-side block shows the mock's `/metrics` while the step
//! runs, not only once it ends.

use std::path::Path;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(180);

/// Requests arrive far faster than `cap` answers of ~0.5 s can end, so the
/// cap alone sets how many are open at the mock.
fn scenario(mock_url: &str, cap: u32) -> String {
    let tables = format!(
        r#"[dataset]
kind = "random"
input_len = 8
output_len = 8
[sampling]
ignore_eos = true
[load]
request_rate = 100
max_concurrency = {cap}
duration = "90s"
"#
    );
    mock_chat_scenario("web-cap", 27, mock_url, &tables)
}

/// A change of the cap from the page's API; its answer's message.
fn change_cap(base: &str, cap: u32) -> String {
    let (code, body) =
        post_form(&format!("{base}/swarm"), &format!("max_concurrency={cap}")).expect("an answer");
    assert_eq!(code, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["success"], true, "{answer}");
    answer["message"].as_str().unwrap_or_default().to_string()
}

/// Each stage's result: its cap as the results say it, how many were in
/// flight on average, and its length (s).
fn stage(out: &Path, n: u32) -> (Value, f64, f64) {
    let r = read_json(&out.join(format!("result-stage{n}.json")));
    let mean = r["cicada"]["mean_concurrent_requests"]
        .as_f64()
        .unwrap_or(0.0);
    let length = r["duration"].as_f64().unwrap_or(0.0);
    let cap = r["cicada"]["scenario"]["load"]["max_concurrency"].clone();
    (cap, mean, length)
}

fn steer_cap(workers: &str) {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "400", "--itl-ms", "10"]);
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 4));
    let out = dir.path().join("out");
    let (child, base) = start_web_run(&sc, &out, workers, &[]);
    mock.wait_for_streams(4, "before the change");
    assert!(mock.open_streams(10) <= 4, "a cap of 4, never more streams");
    // the step runs on: the server-side block is the mock's /metrics so far
    let stats = get_json(&format!("{base}/stats/requests"));
    let rows = stats["cicada"]["server"]["rows"].as_array().cloned();
    let finished = rows
        .unwrap_or_default()
        .iter()
        .find(|r| r[0] == "requests_finished")
        .and_then(|r| r[1].as_str()?.parse::<f64>().ok());
    assert!(
        finished.is_some_and(|n| n > 0.0),
        "the server's finished requests while the step runs: {:#}",
        stats["cicada"]["server"]
    );

    // users mean nothing to an open loop; a cap of 0 is no cap
    let (code, body) = post_form(&format!("{base}/swarm"), "user_count=5").expect("an answer");
    assert_eq!(code, 409, "{body}");
    let (code, body) = post_form(&format!("{base}/swarm"), "max_concurrency=0").expect("an answer");
    assert_eq!(code, 400, "{body}");

    let up = change_cap(&base, 9);
    assert!(up.contains("at most 9 in flight"), "{up}");
    mock.wait_for_streams(9, "after the cap rose to 9");
    assert!(mock.open_streams(10) <= 9, "a cap of 9, never more streams");
    let stats = get_json(&format!("{base}/stats/requests"));
    // the header and the Edit form read the load in force
    let load = &stats["cicada"]["load"];
    assert_eq!(load["max_concurrency"], 9, "{load:#}");
    assert_eq!(load["stage"], "edit-1", "{load:#}");

    change_cap(&base, 3);
    // the nine in flight drain (about half a second), then three at most
    mock.wait_for_streams(3, "after the cap fell to 3");
    assert!(mock.open_streams(10) <= 3, "a cap of 3, never more streams");
    let hist = get_json(&format!("{base}/stats/history"));
    let marks: Vec<&str> = hist["marks"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(marks, ["edit-1", "edit-2"], "{hist:#}");
    // long enough a last stage that its drain from 9 is a small part of it
    std::thread::sleep(Duration::from_secs(3));

    let run = stop_from_page(&base, child, LIMIT);
    let whole = read_json(&out.join("result.json"));
    assert_eq!(
        whole["cicada"]["lost_workers"].as_array().map(Vec::len),
        Some(0),
        "no worker lost at a switch of the cap\n{}",
        run.stderr
    );
    assert_eq!(stage_names(&out), ["start", "edit-1", "edit-2", "all"]);
    let (cap1, mean1, _) = stage(&out, 1);
    let (cap2, mean2, _) = stage(&out, 2);
    let (cap3, mean3, length3) = stage(&out, 3);
    assert_eq!((cap1, cap2, cap3), (4.into(), 9.into(), 3.into()));
    // the first stage fills up from nothing
    assert!(mean1 <= 4.05, "stage 1 held at most 4: {mean1}");
    assert!(mean2 > 6.0 && mean2 <= 9.05, "stage 2 ran about 9: {mean2}");
    // the last one starts with the 9 in flight (answers of ~0.5 s) draining
    // to 3: at most 6 more for a second of it
    let drained = 3.0 + 6.0 / length3.max(1.0);
    assert!(
        mean3 > 2.0 && mean3 <= drained,
        "stage 3 ran about 3: {mean3} over {length3:.1} s"
    );
}

/// One worker: the gate alone switches.
#[test]
fn a_change_of_the_cap_reaches_the_server_on_one_worker() {
    steer_cap("1");
}

/// Two workers: each worker's gate and the coordinator's fleet cap switch
/// at the same instant on their own clocks.
#[test]
fn a_change_of_the_cap_reaches_the_server_on_two_workers() {
    steer_cap("2");
}

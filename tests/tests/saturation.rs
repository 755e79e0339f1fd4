//! Issue 38 item 4: over-saturation found from the merged interval rows,
//! and the early stop, against the mock made to slow down as its queue
//! grows (`--ttft-per-inflight-ms`: each request in flight adds to TTFT).

use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(240);

fn scenario(mock_url: &str, saturation: &str) -> String {
    format!(
        r#"
name = "saturation"
seed = 38
[target]
backend = "openai-chat"
base_url = "{mock_url}"
model = "cicada-mock"
[dataset]
input_len = 8
output_len = 4
[load]
request_rate = 40
duration = "40s"
[output]
save_detailed = true
{saturation}
"#
    )
}

/// The mock's TTFT is 20 ms + 50 ms per request in flight: at 40 req/s
/// (λ·50 ms = 2 > 1) its queue grows without bound and it completes at most
/// ~20 req/s. With `[saturation] stop = true` the step stops well before its
/// 40 s, says why in the console and result.json, and every request sent is
/// counted: the mock received them all, requests.jsonl has each one.
#[test]
fn a_saturated_step_stops_early_with_its_reason_and_every_request_counted() {
    let _g = serial();
    let mock = Mock::start(&[
        "--ttft-ms",
        "20",
        "--itl-ms",
        "1",
        "--ttft-per-inflight-ms",
        "50",
    ]);
    let dir = scratch();
    let sc = write(
        dir.path(),
        "s.toml",
        &scenario(&mock.url, "[saturation]\nstop = true\n"),
    );
    let out = dir.path().join("out");
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_ok(&r);
    let j = read_json(&out.join("result.json"));
    let sat = &j["cicada"]["saturation"];
    assert_eq!(sat["stopped"], true, "{}", j["cicada"]);
    let reason = sat["reason"].as_str().unwrap();
    assert!(reason.starts_with("saturated: mean ttft rose"), "{reason}");
    let at = sat["at_s"].as_f64().unwrap();
    assert!((5.0..25.0).contains(&at), "stopped at {at} s of 40");
    assert!(j["duration"].as_f64().unwrap() < 30.0);
    assert!(r.stdout.contains("Saturation:"), "{}", r.stdout);
    assert!(r.stdout.contains("stopped early at"));
    assert!(r.stdout.contains(reason), "the console gives the reason");
    // every request counted: sent = ok + failed (those in flight at the stop
    // cancelled), one requests.jsonl line each, and the mock got them all
    let sent = j["cicada"]["sent"].as_u64().unwrap();
    let (ok, failed) = (
        j["completed"].as_u64().unwrap(),
        j["failed"].as_u64().unwrap(),
    );
    assert_eq!(sent, ok + failed);
    assert!(
        j["cicada"]["outcomes"]["cancelled"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    let lines = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(lines, sent);
    let received = mock.stats()["requests"].as_u64().unwrap();
    assert!(
        received <= sent && received + 4 >= sent,
        "mock received {received}, cicada sent {sent}"
    );
    assert!(
        !j["cicada"]["degraded"].as_bool().unwrap(),
        "no worker lost"
    );
}

/// Without `stop`, the saturation is found and reported, and the step runs
/// its whole length (a short one here).
#[test]
fn saturation_is_reported_without_stopping_unless_asked() {
    let _g = serial();
    let mock = Mock::start(&[
        "--ttft-ms",
        "20",
        "--itl-ms",
        "1",
        "--ttft-per-inflight-ms",
        "50",
    ]);
    let dir = scratch();
    let text = scenario(&mock.url, "").replace("duration = \"40s\"", "duration = \"9s\"");
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    assert_ok(&r);
    let j = read_json(&out.join("result.json"));
    let sat = &j["cicada"]["saturation"];
    assert_eq!(sat["stopped"], false, "{}", j["cicada"]);
    assert!(j["cicada"]["outcomes"].get("cancelled").is_none());
}

//! Issue 38 item 3: the steady-state window, found from the merged interval
//! rows, against the mock with a load whose plateau is known from the
//! scenario.

use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(180);

/// Users 2 for 3 s, 8 for 4 s, 2 for 3 s: the plateau is 3 s to 7 s. The
/// window lies inside it, its request count is the `requests.jsonl` lines
/// that ended in it (up to the report ticks' lateness at its edges), and
/// its figures are its own.
#[test]
fn the_window_lies_within_the_plateau_and_counts_its_requests() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "2"]);
    let dir = scratch();
    let text = format!(
        r#"
name = "steady"
seed = 38
[target]
backend = "openai-chat"
base_url = "{}"
model = "cicada-mock"
[dataset]
input_len = 8
output_len = 10
[output]
save_detailed = true
[[stages]]
duration = "3s"
users = 2
[[stages]]
name = "peak"
duration = "4s"
users = 8
[[stages]]
duration = "3s"
users = 2
"#,
        mock.url
    );
    let sc = write(dir.path(), "s.toml", &text);
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
    let st = &j["cicada"]["steady_state"];
    assert_eq!(st["found"], true, "{st}");
    let (start, end) = (
        st["start_s"].as_f64().unwrap(),
        st["end_s"].as_f64().unwrap(),
    );
    assert!(
        start >= 3.0 - 1e-6 && end <= 7.0 + 1e-6,
        "window {start}..{end} s, plateau 3..7 s"
    );
    assert!(
        end - start >= 2.0 - 1e-6,
        "window {start}..{end} s too short"
    );
    assert_eq!(st["intervals"].as_f64(), Some((end - start).round()));
    assert!(st["criterion"].as_str().unwrap().contains("7.200"), "{st}");
    // every request of the window, by the end stamps in requests.jsonl: a
    // report tick fires a little late, so a request ending just past a
    // boundary may belong to the interval before it
    let ended: Vec<f64> = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| v["ended_us"].as_u64().unwrap() as f64 / 1e6)
        .collect();
    let slack = 0.1;
    let within = |a: f64, b: f64| ended.iter().filter(|e| **e >= a && **e < b).count() as u64;
    let (lo, hi) = (within(start + slack, end), within(start, end + slack));
    let n = st["requests"].as_u64().unwrap();
    assert!(
        (lo..=hi).contains(&n),
        "window counted {n}, requests.jsonl has {lo}..={hi} in {start}..{end} s"
    );
    assert!(n > 0 && n < j["completed"].as_u64().unwrap());
    assert_eq!(st["completed"].as_u64(), Some(n), "the mock fails nothing");
    // 8 users back to back on a ~40 ms request: near 8 / 0.04 req/s over the
    // window; the whole run, with its 2-user stages, is far below
    let rate = st["request_throughput"].as_f64().unwrap();
    let whole = j["request_throughput"].as_f64().unwrap();
    assert!(
        (rate - n as f64 / (end - start)).abs() < 1e-6,
        "throughput over the window's own length"
    );
    assert!(rate > 1.5 * whole, "window {rate} req/s, whole {whole}");
    assert!(st["metrics"]["ttft"]["p99"].as_f64().unwrap() >= 20.0);
    assert!(
        r.stdout.contains("Steady-state window (s):"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Requests in the window:"));
}

/// An uncapped burst has no plateau: no steady-state object.
#[test]
fn an_uncapped_burst_has_no_steady_state() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1"]);
    let dir = scratch();
    let text = format!(
        r#"
[target]
backend = "openai-chat"
base_url = "{}"
model = "cicada-mock"
[dataset]
input_len = 8
output_len = 4
[load]
num_prompts = 20
"#,
        mock.url
    );
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
    assert!(j["cicada"].get("steady_state").is_none(), "{}", j["cicada"]);
}

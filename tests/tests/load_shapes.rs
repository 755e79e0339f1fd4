//! Issue: load shapes, exact sharding and sweeps.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(180);

fn scenario(mock_url: &str, body: &str) -> String {
    format!(
        r#"
name = "shapes"
seed = 21
[target]
backend = "openai-chat"
base_url = "{mock_url}"
model = "cicada-mock"
{body}
"#
    )
}

fn run(dir: &Path, text: &str, workers: &str) -> (Run, std::path::PathBuf) {
    let sc = write(dir, "s.toml", text);
    let out = dir.join(format!("out-{workers}"));
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            workers,
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    (r, out)
}

/// Arrivals the mock saw, as (global request index, µs after the first arrival, prompt fingerprint).
fn arrivals(mock: &Mock) -> Vec<(u64, f64, u64)> {
    let log = mock.requests();
    let first = log
        .iter()
        .map(|r| r["unix_us"].as_u64().unwrap())
        .min()
        .unwrap();
    let mut out: Vec<(u64, f64, u64)> = log
        .iter()
        .map(|r| {
            let id = r["request_id"].as_str().unwrap();
            let index: u64 = id.rsplit('-').next().unwrap().parse().unwrap();
            (
                (index),
                (r["unix_us"].as_u64().unwrap() - first) as f64,
                r["prompt_fingerprint"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort_by_key(|a| a.0);
    out
}

/// For a fixed seed the (send offset, prompt) pairs are the same for 1, 3 and 8 workers.
#[test]
fn one_three_and_eight_workers_send_the_same_schedule() {
    let _g = serial();
    let body = r#"
[dataset]
input_len = 12
output_len = 4
range_ratio = 0.5
[load]
num_prompts = 240
request_rate = 120
"#;
    let mut runs = Vec::new();
    for workers in ["1", "3", "8"] {
        let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
        let dir = scratch();
        let (r, _) = run(dir.path(), &scenario(&mock.url, body), workers);
        assert_ok(&r);
        runs.push(arrivals(&mock));
    }
    for other in &runs[1..] {
        assert_eq!(other.len(), 240);
        let mut deviations = Vec::new();
        for (a, b) in runs[0].iter().zip(other) {
            assert_eq!(a.0, b.0);
            assert_eq!(a.2, b.2, "request {} carried a different prompt", a.0);
            deviations.push((a.1 - b.1).abs());
        }
        // one schedule: requests arrive at the same offsets, give or take the
        // dispatch precision (the median) and a busy machine's hiccups (the max)
        deviations.sort_by(f64::total_cmp);
        let median = deviations[deviations.len() / 2];
        let max = deviations[deviations.len() - 1];
        assert!(median <= 2_000.0, "median offset deviation {median} µs");
        assert!(max <= 250_000.0, "largest offset deviation {max} µs");
    }
}

fn gaps_cv(offsets: &[f64]) -> (f64, f64) {
    let gaps: Vec<f64> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
    (mean, var.sqrt() / mean)
}

/// Poisson at 200/s for 10 s: achieved rate within 3 %, inter-arrival CV within 10 % of 1;
/// with burstiness 4 the CV is within 10 % of 1/√4.
#[test]
fn poisson_and_gamma_arrivals_have_the_right_rate_and_spread() {
    let _g = serial();
    for (burstiness, cv_truth) in [(1.0, 1.0), (4.0, 0.5)] {
        let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0", "--output-tokens", "1"]);
        let dir = scratch();
        let body = format!(
            r#"
[dataset]
input_len = 4
output_len = 1
[load]
duration = "10s"
request_rate = 200
burstiness = {burstiness}
"#
        );
        let (r, out) = run(dir.path(), &scenario(&mock.url, &body), "2");
        assert_ok(&r);
        let offsets: Vec<f64> = {
            let mut o: Vec<f64> = arrivals(&mock).iter().map(|a| a.1 / 1e6).collect();
            o.sort_by(f64::total_cmp);
            o
        };
        let (mean_gap, cv) = gaps_cv(&offsets);
        let achieved = 1.0 / mean_gap;
        assert!(
            (achieved - 200.0).abs() <= 6.0,
            "b={burstiness}: achieved {achieved:.1} req/s"
        );
        assert!(
            (cv - cv_truth).abs() <= 0.1 * cv_truth,
            "b={burstiness}: CV {cv:.3}, truth {cv_truth}"
        );
        let j = read_json(&out.join("result.json"));
        let reported = j["cicada"]["achieved_request_rate"].as_f64().unwrap();
        assert!(
            (reported - 200.0).abs() <= 6.0,
            "reported achieved rate {reported}"
        );
    }
}

/// Locust-style users: in-flight never exceeds the user count, and with zero think
/// time it stays at the user count in steady state.
#[test]
fn users_hold_their_count() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "2"]);
    let dir = scratch();
    let body = r#"
[dataset]
input_len = 8
output_len = 10
[load]
users = 12
duration = "4s"
warmup = "1s"
"#;
    let (r, out) = run(dir.path(), &scenario(&mock.url, body), "3");
    assert_ok(&r);
    let stats = mock.stats();
    assert!(
        stats["max_in_flight"].as_u64().unwrap() <= 12,
        "mock saw {}",
        stats["max_in_flight"]
    );
    let j = read_json(&out.join("result.json"));
    // vLLM's per-second figure counts every request active within a second
    // (a user's back-to-back requests count twice); the 100 ms peak cannot pass 12
    let peak = j["cicada"]["peak_concurrent_requests_100ms"]
        .as_f64()
        .unwrap();
    let mean = j["cicada"]["mean_concurrent_requests"].as_f64().unwrap();
    assert!(peak <= 12.0 + 1e-9, "peak {peak}");
    assert!(
        mean >= 11.0,
        "mean in flight {mean} (users 12, zero think time)"
    );
    assert!(
        j["cicada"]["warmup"]["sent"].as_u64().unwrap() > 0,
        "warm-up requests are reported apart"
    );
    assert!(r.stdout.contains("Warm-up requests (excluded):"));
}

/// A sweep over max_concurrency = [1, 4, 16] gives three rows and three result files.
#[test]
fn concurrency_sweep_writes_a_row_and_a_file_per_stage() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "10", "--itl-ms", "1"]);
    let dir = scratch();
    let body = r#"
[dataset]
input_len = 8
output_len = 8
[load]
num_prompts = 48
[sweep]
max_concurrency = [1, 4, 16]
pause = "200ms"
"#;
    let (r, out) = run(dir.path(), &scenario(&mock.url, body), "2");
    assert_ok(&r);
    let (header, rows) = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 3);
    let name = header.iter().position(|h| h == "stage_name").unwrap();
    let conc = header.iter().position(|h| h == "max_concurrency").unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r[name].as_str()).collect();
    assert_eq!(
        names,
        [
            "max_concurrency=1",
            "max_concurrency=4",
            "max_concurrency=16"
        ]
    );
    assert_eq!(
        rows.iter().map(|r| r[conc].as_str()).collect::<Vec<_>>(),
        ["1", "4", "16"]
    );
    for k in 1..=3 {
        let j = read_json(&out.join(format!("result-stage{k}.json")));
        assert_eq!(j["completed"].as_u64(), Some(48));
    }
    assert!(!out.join("result.json").exists());
    assert!(r.stdout.contains("= Sweep ="), "{}", r.stdout);
    // more concurrency, more throughput
    let thr: Vec<f64> = (1..=3)
        .map(|k| {
            read_json(&out.join(format!("result-stage{k}.json")))["request_throughput"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert!(thr[0] < thr[1] && thr[1] < thr[2], "{thr:?}");
}

/// `[[stages]]` change the load without a pause and report each stage.
#[test]
fn stages_are_reported_one_by_one() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1"]);
    let dir = scratch();
    let body = r#"
[dataset]
input_len = 8
output_len = 4
[[stages]]
name = "low"
duration = "2s"
request_rate = 25
[[stages]]
name = "high"
duration = "2s"
request_rate = 100
"#;
    let (r, out) = run(dir.path(), &scenario(&mock.url, body), "2");
    assert_ok(&r);
    let low = read_json(&out.join("result-stage1.json"));
    let high = read_json(&out.join("result-stage2.json"));
    let whole = read_json(&out.join("result.json"));
    let (l, h) = (
        low["completed"].as_u64().unwrap(),
        high["completed"].as_u64().unwrap(),
    );
    assert!((30..=75).contains(&l), "low stage sent {l}");
    assert!((150..=260).contains(&h), "high stage sent {h}");
    assert_eq!(whole["completed"].as_u64(), Some(l + h));
    assert_eq!(low["request_rate"].as_f64(), Some(25.0));
    // the server's own view per window: scraped at the boundary, so the
    // windows tile the run and their counts add up to the whole's exactly
    let finished = |j: &serde_json::Value| {
        j["cicada"]["server"]["requests_finished"]
            .as_f64()
            .unwrap_or_else(|| panic!("no server figures in {}", j["cicada"]["server"]))
    };
    assert_eq!(finished(&whole), (l + h) as f64);
    assert_eq!(finished(&low) + finished(&high), finished(&whole));
    assert!(
        finished(&high) > 2.0 * finished(&low),
        "low {} high {}",
        finished(&low),
        finished(&high)
    );
    let (_, rows) = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 3, "two stages and the whole run");
    assert!(r.stdout.contains("= Stages ="));
}

/// Cool-down: in-flight requests at the end of a duration-bound run are
/// cancelled and counted (cancel), or finish and count (finish).
#[test]
fn cooldown_cancels_or_finishes_in_flight_requests() {
    let _g = serial();
    let mut by_mode = BTreeMap::new();
    for mode in ["cancel", "finish"] {
        let mock = Mock::start(&["--ttft-ms", "10", "--itl-ms", "40"]);
        let dir = scratch();
        let body = format!(
            r#"
[dataset]
input_len = 8
output_len = 40
[load]
duration = "2s"
request_rate = 20
cooldown = "{mode}"
"#
        );
        let (r, out) = run(dir.path(), &scenario(&mock.url, &body), "2");
        assert_ok(&r);
        let j = read_json(&out.join("result.json"));
        by_mode.insert(mode, j);
    }
    let cancelled = by_mode["cancel"]["cicada"]["outcomes"]["cancelled"]["count"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        cancelled >= 10,
        "requests 1.6 s long at 20/s: ~32 in flight at the end, {cancelled} cancelled"
    );
    assert!(
        by_mode["finish"]["cicada"]["outcomes"]
            .get("cancelled")
            .is_none()
    );
    assert_eq!(by_mode["finish"]["failed"].as_u64(), Some(0));
}

/// The SLO capacity search finds the knee of a mock whose TTFT rises with load.
#[test]
fn slo_search_finds_the_knee() {
    let _g = serial();
    // TTFT = 10 ms + 4 ms per request in flight; one output token, so E2EL = TTFT.
    // The SLO (TTFT ≤ 50 ms) holds while ≤ 10 requests are in flight at arrival.
    // With evenly spaced arrivals, in flight L = λ·E and E = 10 + 4L (ms), so the
    // knee is where L = 10: λ = 10 / 0.050 s = 200 req/s.
    let mock = Mock::start(&[
        "--ttft-ms",
        "10",
        "--ttft-per-inflight-ms",
        "4",
        "--itl-ms",
        "0",
        "--output-tokens",
        "1",
    ]);
    let dir = scratch();
    let body = r#"
[dataset]
input_len = 4
output_len = 1
[load]
num_prompts = 300
burstiness = "inf"
[slo]
ttft_ms = 50
[sweep]
mode = "slo"
min_rate = 50
max_rate = 400
resolution = 12.5
fraction = 0.9
"#
    .replace("burstiness = \"inf\"", "burstiness = inf");
    let (r, out) = run(dir.path(), &scenario(&mock.url, &body), "2");
    assert_ok(&r);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("SLO capacity:"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    let found: f64 = line
        .trim_start_matches("SLO capacity: ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{line}"));
    assert!(
        (found - 200.0).abs() <= 12.5 + 20.0,
        "found {found} req/s, knee 200 req/s: {line}"
    );
    let (_, rows) = read_csv(&out.join("summary.csv"));
    assert!(rows.len() >= 4, "the search probed several rates");
}

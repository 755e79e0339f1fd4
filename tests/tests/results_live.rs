//! Issue: results people can read while a run goes and act on after it —
//! live metrics, progress lines and the exit codes that gate CI (the files a
//! run writes: `results`). Real `cicada`, `worker` and the embedded mock
//! over loopback.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cicada_tests::mock_run::{run_in, scenario};
use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(180);

fn coord_cmd(args: &[&str]) -> Run {
    coord_run(args, LIMIT)
}

/// Exit codes gate CI: 4 when the failure ratio passes its limit, 5 when SLO
/// attainment falls short, 0 when both hold; `cicada.gates` records why.
#[test]
fn exit_codes_gate_on_failure_ratio_and_slo_attainment() {
    let _g = serial();
    let dir = scratch();
    let failing = scenario(
        "gates",
        4,
        "[load]\nnum_prompts = 40\nrequest_rate = \"inf\"\n[mock.faults]\nhttp_500 = 0.3\n",
    );
    let out = dir.path().join("ratio");
    let r = run_in(
        dir.path(),
        "s.toml",
        &failing,
        &out,
        &["--max-failure-ratio", "0.05"],
    );
    assert_eq!(r.code, Some(4), "{}", r.stderr);
    assert!(
        r.stderr.contains("gate FAILED: failure ratio"),
        "{}",
        r.stderr
    );
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["cicada"]["gates"]["max_failure_ratio"]["passed"], false);
    assert_eq!(j["cicada"]["gates"]["max_failure_ratio"]["limit"], 0.05);

    let slow = scenario(
        "gates",
        4,
        "[load]\nnum_prompts = 20\nrequest_rate = \"inf\"\n[slo]\nttft_ms = 1\nmin_attainment = 0.9\n",
    );
    let out = dir.path().join("slo");
    let r = run_in(dir.path(), "s.toml", &slow, &out, &[]);
    assert_eq!(r.code, Some(5), "{}", r.stderr);
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["cicada"]["gates"]["min_slo_attainment"]["passed"], false);

    let fine = scenario(
        "gates",
        4,
        "[load]\nnum_prompts = 20\n[slo]\nttft_ms = 5000\n",
    );
    let out = dir.path().join("fine");
    let r = run_in(
        dir.path(),
        "s.toml",
        &fine,
        &out,
        &["--max-failure-ratio", "0", "--min-slo-attainment", "0.9"],
    );
    assert_ok(&r);
    assert!(
        r.stderr.contains("gate passed: SLO attainment 100.00 %"),
        "{}",
        r.stderr
    );

    let r = run_in(
        dir.path(),
        "s.toml",
        &fine,
        &out,
        &["--max-failure-ratio", "2"],
    );
    assert_eq!(
        r.code,
        Some(2),
        "an impossible ratio is bad input: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains("output.max_failure_ratio"),
        "{}",
        r.stderr
    );
}

/// `cicada run` on `sc` with 2 workers and `--metrics-addr` on a free port;
/// the process and its metrics URL.
fn run_with_live_metrics(sc: &Path, out: &Path) -> (std::process::Child, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(cicada())
        .args(["run", sc.to_str().unwrap(), "--workers", "2", "--quiet"])
        .args([
            "--output-dir",
            out.to_str().unwrap(),
            "--metrics-addr",
            &addr,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, format!("http://{addr}/metrics"))
}

/// `--metrics-addr` serves Prometheus text while the run goes: counters grow
/// and TTFT quantiles appear before the run ends.
#[test]
fn live_metrics_are_served_while_the_run_goes() {
    let _g = serial();
    let dir = scratch();
    let text = scenario("live", 6, "[load]\nduration = \"5s\"\nrequest_rate = 20\n");
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let (child, url) = run_with_live_metrics(&sc, &out);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = None;
    while Instant::now() < deadline && !out.join("result.json").exists() {
        std::thread::sleep(Duration::from_millis(300));
        let Some(resp) = try_get_text(&url) else {
            continue;
        };
        if resp.0 == 200
            && resp.1.contains("cicada_requests_total{outcome=\"ok\"}")
            && !resp.1.contains("cicada_requests_total{outcome=\"ok\"} 0\n")
            && resp.1.contains("cicada_interval_ttft_seconds")
        {
            seen = Some(resp.1);
            break;
        }
    }
    let run = wait_with_limit(child, LIMIT);
    assert_ok(&run);
    let text = seen.expect("/metrics showed completed requests during the run");
    assert!(
        text.contains("# TYPE cicada_ttft_seconds summary"),
        "{text}"
    );
    assert!(text.contains("cicada_workers 2"), "{text}");
    let ttft_p50: f64 = text
        .lines()
        .find(|l| l.starts_with("cicada_ttft_seconds{quantile=\"0.5\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("a TTFT median");
    assert!((0.015..0.2).contains(&ttft_p50), "TTFT p50 {ttft_p50} s");
}

/// The live in-flight count follows the workers' heartbeats, not only their
/// reports: with reports 30 s apart, six users whose requests each last
/// seconds show as 6 in flight while they run.
#[test]
fn live_in_flight_follows_heartbeats_between_reports() {
    let _g = serial();
    let dir = scratch();
    let text = r#"
name = "beats"
seed = 3
[target]
backend = "mock"
[mock]
ttft_ms = 20
itl_ms = 5
[dataset]
kind = "random"
input_len = 16
output_len = 800
[load]
users = 6
duration = "3s"
report_interval = "30s"
"#;
    let sc = write(dir.path(), "s.toml", text);
    let out = dir.path().join("out");
    let (child, url) = run_with_live_metrics(&sc, &out);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline && !out.join("result.json").exists() {
        std::thread::sleep(Duration::from_millis(200));
        let Some((200, body)) = try_get_text(&url) else {
            continue;
        };
        if let Some(v) = body
            .lines()
            .find_map(|l| l.strip_prefix("cicada_requests_in_flight "))
        {
            seen.push(v.to_string());
        }
    }
    let run = wait_with_limit(child, LIMIT);
    assert_ok(&run);
    assert!(
        seen.iter().any(|v| v == "6"),
        "cicada_requests_in_flight never showed the 6 users' requests: {seen:?}"
    );
}

/// Without a terminal, progress is one line per interval (and `--headless`
/// asks for the same explicitly).
#[test]
fn headless_progress_is_one_line_per_interval() {
    let _g = serial();
    let dir = scratch();
    let text = scenario(
        "progress",
        7,
        "[load]\nnum_prompts = 60\nrequest_rate = 20\n",
    );
    let sc = write(dir.path(), "s.toml", &text);
    let out: PathBuf = dir.path().join("out");
    let r = coord_cmd(&[
        "run",
        sc.to_str().unwrap(),
        "--workers",
        "2",
        "--headless",
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert_ok(&r);
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with('[') && l.contains("req/s"))
        .collect();
    assert!(
        lines.len() >= 2,
        "a 3 s run gives a line a second:\n{}",
        r.stderr
    );
    assert!(
        lines
            .iter()
            .all(|l| l.contains("/60") && l.contains("TTFT p50")),
        "{lines:?}"
    );
    assert!(
        r.stderr.contains("stage finished: 60 requests"),
        "{}",
        r.stderr
    );
}

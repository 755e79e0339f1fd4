//! Issue: distributed run end to end (`cicada run --workers N` over gRPC).

use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

fn scenario(mock_url: &str, extra: &str) -> String {
    let tables = format!(
        r#"[dataset]
kind = "random"
input_len = 64
output_len = 16
range_ratio = 0.5
[load]
num_prompts = 96
request_rate = 200
max_concurrency = 24
{extra}
"#
    );
    mock_chat_scenario("e2e", 7, mock_url, &tables)
}

/// Same seed and num_prompts: 1 and 4 workers send the same requests and report the same totals.
#[test]
fn one_and_four_workers_send_the_same_requests() {
    let _g = serial();
    let mut totals = Vec::new();
    let mut prompts = Vec::new();
    for workers in ["1", "4"] {
        let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1"]);
        let dir = scratch();
        let sc = write(dir.path(), "s.toml", &scenario(&mock.url, ""));
        let out = dir.path().join("out");
        let run = coord_run(
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
        assert_ok(&run);
        assert!(
            run.stdout
                .contains("============ Serving Benchmark Result ============")
        );
        let j = read_json(&out.join("result.json"));
        totals.push((
            j["completed"].as_u64().unwrap(),
            j["total_input_tokens"].as_u64().unwrap(),
            j["total_output_tokens"].as_u64().unwrap(),
        ));
        assert_eq!(
            j["cicada"]["workers"].as_u64().unwrap(),
            workers.parse::<u64>().unwrap()
        );
        let mut fps: Vec<(u64, u64)> = mock
            .requests()
            .iter()
            .map(|r| {
                (
                    r["prompt_fingerprint"].as_u64().unwrap(),
                    r["max_tokens"].as_u64().unwrap(),
                )
            })
            .collect();
        fps.sort_unstable();
        prompts.push(fps);
    }
    assert_eq!(
        totals[0], totals[1],
        "(completed, input, output) for 1 vs 4 workers"
    );
    assert_eq!(totals[0].0, 96);
    assert_eq!(prompts[0], prompts[1], "the mock saw different prompts");
}

/// TTFT 50 ms, 10 ms gap, 64 prompts at concurrency 16: mean TTFT and ITL within 2 ms of the truth.
#[test]
fn ttft_and_itl_match_the_mock_within_two_ms() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "50", "--itl-ms", "10"]);
    let dir = scratch();
    let sc = write(
        dir.path(),
        "s.toml",
        &scenario(&mock.url, "")
            .replace("num_prompts = 96", "num_prompts = 64")
            .replace(
                "request_rate = 200\nmax_concurrency = 24",
                "request_rate = \"inf\"\nmax_concurrency = 16",
            ),
    );
    let out = dir.path().join("out");
    let run = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    assert_ok(&run);
    let j = read_json(&out.join("result.json"));
    let stats = mock.stats();
    // what the mock itself was late by is the server's error, not the client's
    let server_first_late_ms = stats["lateness"]["first_event_mean_us"].as_f64().unwrap() / 1e3;
    let server_late_ms = stats["lateness"]["mean_us"].as_f64().unwrap() / 1e3;
    let ttft = j["mean_ttft_ms"].as_f64().unwrap();
    let itl = j["mean_itl_ms"].as_f64().unwrap();
    assert_eq!(j["completed"].as_u64(), Some(64));
    assert!(
        (ttft - 50.0).abs() <= 2.0 + server_first_late_ms,
        "mean TTFT {ttft} ms vs truth 50 ms (mock late by {server_first_late_ms} ms)"
    );
    assert!(
        (itl - 10.0).abs() <= 2.0 + server_late_ms,
        "mean ITL {itl} ms vs truth 10 ms"
    );
    // vLLM's per-second figure counts every request active within a second
    // (it may pass the cap); the 100 ms peak may not
    let peak = j["cicada"]["peak_concurrent_requests_100ms"]
        .as_f64()
        .unwrap();
    assert!(peak <= 16.0 + 1e-9, "{peak}");
}

/// A target that refuses connections, with the readiness check off
/// (`ready_timeout = "0s"`): every request is a counted `connect` failure.
#[test]
fn unreachable_target_is_counted_not_fatal() {
    let _g = serial();
    // bind and drop to get a port nobody listens on
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = scratch();
    let sc = write(
        dir.path(),
        "s.toml",
        &scenario(&format!("http://127.0.0.1:{port}"), "").replace(
            "model = \"cicada-mock\"",
            "model = \"cicada-mock\"\nready_timeout = \"0s\"",
        ),
    );
    let out = dir.path().join("out");
    let run = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    // counted and reported; no request succeeded, so the run exits 4 and says why last
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["completed"].as_u64(), Some(0));
    assert_eq!(j["failed"].as_u64(), Some(96));
    assert_eq!(
        j["cicada"]["outcomes"]["connect"]["count"].as_u64(),
        Some(96)
    );
    assert!(run.stdout.contains("connect:"), "{}", run.stdout);
    assert!(
        run.stdout
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("RUN FAILED: all 96 requests failed (connect: 96)")),
        "{}",
        run.stdout
    );
}

/// A target answering 500: counted as http_500 with the server's error text.
#[test]
fn server_errors_are_counted_by_class() {
    let _g = serial();
    let mock = Mock::start(&["--fault-http-500", "1.0"]);
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, ""));
    let out = dir.path().join("out");
    let run = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "3",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    // every request failed: exit 4 by default (docs/guide/results.md, "Exit codes")
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["failed"].as_u64(), Some(96));
    let c = &j["cicada"]["outcomes"]["http_500"];
    assert_eq!(c["count"].as_u64(), Some(96));
    assert!(
        c["first_error"]
            .as_str()
            .unwrap()
            .contains("mock injected server error")
    );
    assert!(
        j["mean_ttft_ms"].is_null(),
        "failures never enter latency histograms, so TTFT has no samples and is absent: {}",
        j["mean_ttft_ms"]
    );
    let (header, rows) = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 1);
    let col = header.iter().position(|h| h == "failed_http_5xx").unwrap();
    assert_eq!(rows[0][col], "96");
}

/// The start barrier is an instant on the wall clock, not a delay from
/// whenever Start arrives: worker 1 dials through a relay that holds every
/// coordinator-to-worker byte 80 ms, yet both workers' first requests leave
/// at the same instant (read on the mock's clock, which both share).
#[test]
fn workers_start_at_one_instant_however_late_start_reaches_them() {
    use std::process::{Command, Stdio};
    let _g = serial();
    const HELD: Duration = Duration::from_millis(80);
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let text = scenario(&mock.url, "")
        .replace("num_prompts = 96", "num_prompts = 60")
        .replace(
            "request_rate = 200",
            "request_rate = 40\nburstiness = \"inf\"",
        )
        .replace("max_concurrency = 24\n", "");
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let listen = format!("127.0.0.1:{}", free_port());
    let token = ("CICADA_TOKEN", "barrier-test-token");
    let coordinator = Command::new(cicada())
        .args(["run", sc.to_str().unwrap(), "--expect-workers", "2"])
        .args(["--listen", &listen, "--save-detailed", "--quiet"])
        .arg("--output-dir")
        .arg(&out)
        .env(token.0, token.1)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting coord");
    let slow = cicada_tests::relay::SlowDownlink::start(listen.parse().unwrap(), HELD);
    let workers: Vec<_> = [listen.clone(), slow.addr.to_string()]
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            worker_command()
                .args(["--coordinator", &format!("http://{addr}")])
                .args(["--index", &i.to_string()])
                .env(token.0, token.1)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("starting a worker")
        })
        .collect();
    let run = wait_with_limit(coordinator, LIMIT);
    for w in workers {
        let w = wait_with_limit(w, LIMIT);
        assert_eq!(w.code, Some(0), "worker: {}", w.stderr);
    }
    assert_ok(&run);
    let raw = timing::raw_arrivals(&mock.requests(), &out.join("requests.jsonl"));
    assert_eq!(raw.len(), 60);
    let at = timing::barrier_offsets(&raw);
    let apart_ms = (at[&1] - at[&0]) / 1000.0;
    eprintln!(
        "barrier on the mock's clock, by worker (µs): {at:?}; worker 1 later by {apart_ms:.3} ms"
    );
    // the same instant, give or take the loopback path's jitter on a busy machine
    assert!(
        apart_ms.abs() < 20.0,
        "worker 1, whose Start came {HELD:?} late, started {apart_ms:.3} ms after worker 0"
    );
}

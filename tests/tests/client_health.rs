//! Issue: the load generator must say so when it, not the server, is the limit.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cicada_tests::*;

/// A process that keeps one core busy until dropped.
struct BusyNeighbour(Child);

impl BusyNeighbour {
    fn on_core(core: usize) -> Self {
        let child = Command::new("taskset")
            .args(["-c", &core.to_string(), "sh", "-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("taskset (util-linux) is needed to pin the busy neighbour");
        BusyNeighbour(child)
    }
}

impl Drop for BusyNeighbour {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scenario(url: &str, users: u32) -> String {
    format!(
        r#"
name = "client-health"
[target]
backend = "openai-chat"
base_url = "{url}"
model = "cicada-mock"
ready_timeout = "0s"
[dataset]
input_len = 8
output_len = 64
[load]
users = {users}
duration = "6s"
"#
    )
}

/// Run `cicada run` pinned (with its worker) to `core`.
fn pinned_run(core: usize, scenario: &std::path::Path, out: &std::path::Path) -> Run {
    let child = Command::new("taskset")
        .args(["-c", &core.to_string()])
        .arg(cicada())
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--workers",
            "1",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting coord");
    wait_with_limit(child, Duration::from_secs(120))
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Many streams on half a core (a busy neighbour shares it): the run is flagged
/// `client_bound`, loudly, with the reason.
#[test]
fn an_overloaded_worker_is_flagged_client_bound() {
    let _g = serial();
    assert!(
        cores() >= 2,
        "this test needs two cores: one for the mock, one for the client"
    );
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let _neighbour = BusyNeighbour::on_core(1);
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 768));
    let out = dir.path().join("out");
    let run = pinned_run(1, &sc, &out);
    assert_ok(&run);
    let j = read_json(&out.join("result.json"));
    let client = &j["cicada"]["client"];
    assert_eq!(client["client_bound"], true, "client: {client}");
    assert!(!client["reasons"].as_array().unwrap().is_empty());
    assert!(run.stdout.contains("CLIENT-BOUND:"), "{}", run.stdout);
}

/// A light load on an idle core is not flagged, and the client's own figures are reported.
#[test]
fn a_comfortable_worker_is_not_flagged() {
    let _g = serial();
    assert!(cores() >= 2, "this test needs two cores");
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "10"]);
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 8));
    let out = dir.path().join("out");
    let run = pinned_run(1, &sc, &out);
    assert_ok(&run);
    let j = read_json(&out.join("result.json"));
    let client = &j["cicada"]["client"];
    assert_eq!(client["client_bound"], false, "client: {client}");
    assert!(client["cpu_us"].as_u64().unwrap() > 0);
    assert!(client["peak_rss_bytes"].as_u64().unwrap() > 1_000_000);
    assert!(client["cpu_us_per_output_token"].as_f64().unwrap() > 0.0);
    assert_eq!(
        client["workers"][0]["threads"].as_u64(),
        Some(1),
        "pinned to one core"
    );
    assert!(run.stdout.contains("Worker CPU time (s):"));
}

/// `cicada selftest` runs the mock and a worker on their own cores and prints a
/// row per level; the JSON carries the same figures. Only correctness is
/// checked here (streams held, figures present and sane), never speed.
#[test]
fn selftest_prints_a_row_per_level_and_writes_json() {
    let _g = serial();
    assert!(
        cores() >= 2,
        "selftest pins the mock and the worker to cores 0 and 1"
    );
    let dir = scratch();
    let json = dir.path().join("figures.json");
    let run = coord_run(
        &[
            "selftest",
            "--levels",
            "1,16",
            "--seconds",
            "2",
            "--output-tokens",
            "16",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert_ok(&run);
    assert!(run.stdout.contains("cpu µs/tok"), "{}", run.stdout);
    let level_rows = |floor: bool| {
        run.stdout
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .next()
                    .is_some_and(|w| w == "1" || w == "16")
                    && l.contains('|') == floor
            })
            .count()
    };
    assert_eq!(level_rows(false), 2, "{}", run.stdout);
    // and the same levels once more beside the floor client
    assert!(
        run.stdout.contains("against the floor client"),
        "{}",
        run.stdout
    );
    assert_eq!(level_rows(true), 2, "{}", run.stdout);
    let levels = read_json(&json);
    let levels = levels.as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for (l, streams) in levels.iter().zip([1u64, 16]) {
        assert_eq!(l["streams"], streams);
        // the mock's own count: the client really opened every stream
        assert_eq!(l["held"], streams, "{l}");
        assert!(l["tokens_per_s"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["cpu_us_per_token"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["peak_rss_mb"].as_f64().unwrap() > 1.0, "{l}");
        // generous: the error columns are the client's error against the mock's truth
        assert!(
            l["mean_ttft_error_ms"].as_f64().unwrap().abs() < 25.0,
            "{l}"
        );
        assert!(l["mean_itl_error_ms"].as_f64().unwrap().abs() < 5.0, "{l}");
        assert!(l["mock_p99_late_ms"].as_f64().unwrap() >= 0.0, "{l}");
        let floor = &l["floor"];
        assert_eq!(
            floor["held"], streams,
            "the floor client held every stream: {l}"
        );
        assert!(floor["cpu_us_per_token"].as_f64().unwrap() > 0.0, "{l}");
        assert!(floor["p99_itl_ms"].as_f64().unwrap() > 0.0, "{l}");
        assert!(floor["cpu_ratio"].as_f64().unwrap() > 0.0, "{l}");
        // the first wave reached the mock after its start, for both clients
        // (one stream has no wave to measure)
        for burst in [&l["burst_ms"], &floor["burst_ms"]] {
            if streams == 1 {
                assert!(burst.is_null(), "{l}");
            } else {
                assert!(burst.as_f64().unwrap() > 0.0, "{l}");
            }
        }
    }
}

/// `cicada selftest --http-rate` with a tiny duration: a row per fixed rate
/// and one for the closed loop, every figure well formed (never a speed),
/// the same in the JSON. oha and wrk are left out here only through
/// `--no-load-tools`, which the output says; without the flag and without
/// the tools installed, it fails naming the script that installs them.
#[test]
fn selftest_http_rate_prints_well_formed_figures() {
    let _g = serial();
    assert!(
        cores() >= 2,
        "the mock and the client get cores of their own"
    );
    let dir = scratch();
    let json = dir.path().join("rate.json");
    let run = coord_run(
        &[
            "selftest",
            "--http-rate",
            "--rates",
            "100,300",
            "--connections",
            "4",
            "--seconds",
            "1",
            "--no-load-tools",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert_ok(&run);
    let out = &run.stdout;
    assert!(
        out.contains("--no-load-tools: oha and wrk were not run"),
        "{out}"
    );
    // rows: "<rate> | <achieved> - - | <cpu> - - | <lat err> - | <late> -"
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() > 2 && w[1] == "|" && w[0].parse::<u32>().is_ok())
        .collect();
    assert_eq!(rows.len(), 3, "two rates and the closed loop: {out}");
    for (row, first) in rows.iter().zip(["100", "300", "4"]) {
        assert_eq!(row[0], first, "{out}");
        let figures: Vec<f64> = row[1..]
            .iter()
            .filter(|w| **w != "|" && **w != "-")
            .map(|w| w.parse().unwrap_or_else(|_| panic!("{w:?} in {out}")))
            .collect();
        assert!(figures.iter().all(|f| f.is_finite()), "{out}");
        assert!(figures[0] > 0.0 && figures[1] > 0.0, "rate and CPU: {out}");
    }
    let j = read_json(&json);
    assert!(j["tools_skipped"].is_string(), "{j}");
    for (r, rate) in j["rates"].as_array().unwrap().iter().zip([100, 300]) {
        assert_eq!(r["rate"], rate, "{j}");
        let c = &r["cicada"];
        assert!(c["achieved_rps"].as_f64().unwrap() > 0.0, "{j}");
        assert!(c["cpu_us_per_request"].as_f64().unwrap() > 0.0, "{j}");
        // the client's mean latency against the mock's configured 1 ms: generous
        assert!(c["mean_latency_ms"].as_f64().unwrap() >= 1.0, "{j}");
        assert!(c["latency_error_ms"].as_f64().unwrap() < 100.0, "{j}");
        assert!(r["oha"].is_null(), "{j}");
    }
    let closed = &j["closed"];
    assert_eq!(closed["connections"], 4, "{j}");
    assert!(closed["cicada"]["rps"].as_f64().unwrap() > 0.0, "{j}");
    assert!(closed["wrk"].is_null(), "{j}");
    // no silent skip: without the flag, missing tools are an error
    let missing = dir.path().join("no-tools");
    let run = coord_run(
        &[
            "selftest",
            "--http-rate",
            "--seconds",
            "1",
            "--load-tools",
            missing.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stderr.contains("scripts/load-tools.sh"), "{run:?}");
}

//! Issue 23: clocks across hosts. Three remote workers on network-namespace
//! hosts whose wall clocks are off the coordinator's: two by more than the
//! whole start delay (250 ms), one ahead and one behind, one by less (where
//! reading its own wall clock would start it that far off, silently) (`--clock-skew-ms`: hosts
//! of one kernel share a clock, so the skew is injected into the worker's
//! one wall-clock read). Each measures its offset over the link; the result
//! reports it within its uncertainty of the truth, both start through it, and
//! both start at the coordinator's instant: judged on the mock's clock (the
//! coordinator's, unskewed) from when the mock saw each worker's requests
//! against when the worker says it sent them.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use cicada_tests::fleet::worker_command_on;
use cicada_tests::netns::Lan;
use cicada_tests::*;
use serde_json::Value;

const TOKEN: &str = "clock-token-7c2a";
/// Injected skews (worker wall clock minus the true one), ms, by worker.
/// Two beyond the delay, one ahead and one behind; one inside it, where a
/// worker reading its own wall clock would start that far off, silently.
const SKEWS_MS: [i64; 3] = [1500, -800, 120];
/// Slack beyond the reported uncertainty, ms: the path from a worker's send
/// to the mock's stamp (a veth hop and the mock's pickup), which only ever
/// makes the barrier look later, and clock read jitter.
const SLACK_MS: f64 = 3.0;

fn worker_on(lan: &Lan, host: usize, port: u16, dir: &Path) -> Child {
    worker_command_on(lan, host, port, dir, TOKEN)
        .env("CICADA_CLOCK_SKEW_MS", SKEWS_MS[host].to_string())
        .spawn()
        .expect("starting a worker in its namespace")
}

/// Where each worker's start barrier fell on the mock's wall clock, µs since
/// the epoch: the earliest of (mock arrival − the worker's `sent_us`) over
/// its requests (every one of them is the barrier plus a path delay ≥ 0).
fn barriers_on_the_mock(mock_log: &[Value], requests_jsonl: &Path) -> BTreeMap<u64, f64> {
    let arrived: BTreeMap<u64, f64> = mock_log
        .iter()
        .map(|r| {
            let index = r["request_id"]
                .as_str()
                .and_then(|id| id.rsplit('-').next())
                .and_then(|i| i.parse().ok())
                .unwrap();
            (index, r["unix_us"].as_f64().unwrap())
        })
        .collect();
    let text = std::fs::read_to_string(requests_jsonl).unwrap();
    let mut out: BTreeMap<u64, f64> = BTreeMap::new();
    for line in text.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let index = r["index"].as_u64().unwrap();
        let at = arrived[&index] - r["sent_us"].as_f64().unwrap();
        let w = out.entry(r["worker"].as_u64().unwrap()).or_insert(at);
        *w = w.min(at);
    }
    out
}

/// A worker's exit code once the run is over (`None`: killed after 20 s).
fn exit_or_kill(child: &mut Child) -> Option<i32> {
    for _ in 0..1000 {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn workers_with_skewed_clocks_measure_the_offset_and_start_together() {
    let _g = serial();
    let lan = Lan::new(3);
    let mock = Mock::start_on("0.0.0.0:0", &[]);
    let port = mock.url.rsplit(':').next().unwrap();
    let base = format!("http://{}:{port}", lan.router);
    let dir = scratch();
    let sc = write(
        dir.path(),
        "s.toml",
        &format!(
            r#"
name = "clocks"
seed = 5
[target]
backend = "openai-chat"
base_url = "{base}"
model = "cicada-mock"
ready_timeout = "0s"
[dataset]
input_len = 8
output_len = 4
[load]
num_prompts = 60
request_rate = 100
"#
        ),
    );
    let out = dir.path().join("out");
    let (mut coordinator, coord_port) = start_coord_for_remote(
        dir.path(),
        &sc,
        3,
        "0.0.0.0",
        &[
            "--output-dir",
            out.to_str().unwrap(),
            "--save-detailed",
            "--headless",
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    let mut workers: Vec<Child> = (0..3)
        .map(|h| worker_on(&lan, h, coord_port, dir.path()))
        .collect();
    let code = wait_exit(&mut coordinator, Duration::from_secs(120));
    let (stdout, stderr) = coord_output(dir.path());
    let worker_codes: Vec<Option<i32>> = workers.iter_mut().map(exit_or_kill).collect();
    let logs = || {
        let worker_logs: Vec<String> = (0..3)
            .map(|h| std::fs::read_to_string(dir.path().join(format!("worker{h}.err"))).unwrap())
            .collect();
        format!("stdout:\n{stdout}\nstderr:\n{stderr}\nworkers:\n{worker_logs:#?}")
    };
    assert_eq!(code, Some(0), "{}", logs());
    assert_eq!(worker_codes, [Some(0); 3], "{}", logs());
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["failed"], 0, "{}", logs());
    assert_eq!(j["completed"], 60, "{}", logs());

    let started_us = j["cicada"]["started_unix"].as_f64().unwrap() * 1e6;
    let barriers = barriers_on_the_mock(&mock.requests(), &out.join("requests.jsonl"));
    let entries = j["cicada"]["client"]["workers"].as_array().unwrap();
    assert_eq!(entries.len(), 3, "{}", j["cicada"]["client"]);
    let mut uncertainty = BTreeMap::new();
    for e in entries {
        let w = e["worker"].as_u64().unwrap();
        let offset = e["clock_offset_ms"].as_f64().unwrap();
        let u = e["clock_uncertainty_ms"].as_f64().unwrap();
        let rtt = e["clock_min_rtt_ms"].as_f64().unwrap();
        // offset = coordinator minus worker: a worker ahead reads negative
        let truth = -SKEWS_MS[w as usize] as f64;
        eprintln!(
            "worker {w}: offset {offset:.3} ms ± {u:.3} (min RTT {rtt:.3} ms), injected {truth} ms"
        );
        assert!(u < 5.0 && rtt < 10.0, "worker {w}: a LAN's exchange: {e}");
        assert!(
            (offset - truth).abs() <= u + 0.5,
            "worker {w}: offset {offset} ms, truth {truth} ms, uncertainty {u} ms"
        );
        assert_eq!(e["start_basis"], "offset", "worker {w}: {e}");
        // its barrier on the coordinator's clock: at the coordinator's instant
        let late_ms = (barriers[&w] - started_us) / 1e3;
        eprintln!("worker {w}: barrier {late_ms:+.3} ms from the coordinator's instant");
        assert!(
            late_ms >= -(u + 0.5) && late_ms <= u + SLACK_MS,
            "worker {w} started {late_ms:.3} ms off the coordinator's instant (± {u:.3} ms)"
        );
        uncertainty.insert(w, u);
    }
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        let apart_ms = (barriers[&b] - barriers[&a]).abs() / 1e3;
        assert!(
            apart_ms <= uncertainty[&a] + uncertainty[&b] + SLACK_MS,
            "workers {a} and {b} started {apart_ms:.3} ms apart"
        );
    }
    // offsets this far off are worth a word
    assert!(
        stdout.contains("warning: worker 0's clock is 1500")
            && stdout.contains("warning: worker 1's clock is 800")
            && stdout.contains("warning: worker 2's clock is 120"),
        "{stdout}"
    );
}

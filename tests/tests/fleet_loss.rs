//! Issue: a fleet that trusts nothing — a lost worker never hangs the run.
//! Remote workers on network-namespace hosts; one is SIGKILLed (or gets its
//! own SIGTERM) mid-run under each load shape: open loop with a fleet-wide
//! cap, closed loop, `[[stages]]`, a sweep. The survivors finish the load the
//! cap allows, the result is degraded with the lost share stated, every
//! request a survivor sent is counted, and coord exits 3.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use cicada_tests::fleet::{port_of, worker_on};
use cicada_tests::netns::Lan;
use cicada_tests::*;
use serde_json::Value;

const TOKEN: &str = "loss-token-5d1e";

fn scenario(dir: &Path, base_url: &str, rest: &str) -> PathBuf {
    // a `rest` with its own dataset replaces the default one
    let dataset = if rest.contains("[dataset]") {
        ""
    } else {
        "[dataset]\ninput_len = 8\noutput_len = 20"
    };
    write(
        dir,
        "s.toml",
        &format!(
            r#"
name = "loss"
seed = 11
[target]
backend = "openai-chat"
base_url = "{base_url}"
model = "cicada-mock"
ready_timeout = "0s"
{dataset}
{rest}
"#
        ),
    )
}

/// Requests the mock received, by the worker that sent them (`index mod n`).
fn seen_by_worker(mock: &Mock, n: u64) -> Vec<u64> {
    let mut counts = vec![0; n as usize];
    for r in mock.requests() {
        let index: u64 = r["request_id"]
            .as_str()
            .and_then(|id| id.rsplit('-').next())
            .and_then(|i| i.parse().ok())
            .unwrap();
        counts[(index % n) as usize] += 1;
    }
    counts
}

/// A fleet of two remote workers on LAN hosts and a coordinator waiting for
/// them; the test stops one of them.
struct Fleet {
    _lan: Lan,
    mock: Mock,
    dir: tempfile::TempDir,
    coordinator: Child,
    workers: Vec<Child>,
}

impl Fleet {
    fn start(rest: &str, mock_args: &[&str]) -> Fleet {
        let lan = Lan::new(2);
        let mock = Mock::start_on("0.0.0.0:0", mock_args);
        let base = format!("http://{}:{}", lan.router, port_of(&mock.url));
        let dir = scratch();
        let sc = scenario(dir.path(), &base, rest);
        let out = dir.path().join("out");
        let (coordinator, port) = start_coord_for_remote(
            dir.path(),
            &sc,
            2,
            "0.0.0.0",
            &[
                "--heartbeat-timeout",
                "3s",
                "--output-dir",
                out.to_str().unwrap(),
                "--headless",
            ],
            &[("CICADA_TOKEN", TOKEN)],
        );
        let workers = (0..2)
            .map(|h| worker_on(&lan, h, port, dir.path(), TOKEN))
            .collect();
        Fleet {
            _lan: lan,
            mock,
            dir,
            coordinator,
            workers,
        }
    }

    /// coord's exit code (a hang fails the test after `limit`) and output.
    fn finish(&mut self, limit: Duration) -> (Option<i32>, String) {
        let code = wait_exit(&mut self.coordinator, limit);
        let (stdout, stderr) = coord_output(self.dir.path());
        (code, format!("stdout:\n{stdout}\nstderr:\n{stderr}"))
    }

    fn result(&self, name: &str) -> Value {
        read_json(&self.dir.path().join("out").join(name))
    }
}

/// The lost workers' indices in a result.
fn lost(j: &Value) -> Vec<u64> {
    j["cicada"]["lost_workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["worker"].as_u64().unwrap())
        .collect()
}

/// A worker's share in a result: (planned, reported).
fn share(j: &Value, worker: u64) -> (u64, u64) {
    let s = j["cicada"]["worker_shares"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["worker"] == worker)
        .unwrap_or_else(|| {
            panic!(
                "no share of worker {worker}: {}",
                j["cicada"]["worker_shares"]
            )
        });
    (
        s["planned_requests"].as_u64().unwrap(),
        s["reported_requests"].as_u64().unwrap(),
    )
}

/// The hang of issue 28: under `max_concurrency` the survivor waited for
/// completions the killed worker would never report, and the run never
/// ended. Now it runs its whole stripe, and the run ends degraded.
#[test]
fn a_worker_killed_under_a_fleet_cap_never_hangs_the_run() {
    let _g = serial();
    let mut f = Fleet::start(
        "[load]\nnum_prompts = 600\nmax_concurrency = 8",
        &["--ttft-ms", "10", "--itl-ms", "5"],
    );
    wait_requests(&f.mock, 100, Duration::from_secs(60));
    f.workers[1].kill().unwrap();
    let killed = Instant::now();
    // the survivor's ~250 remaining requests take about 4 s at the cap
    let (code, out) = f.finish(Duration::from_secs(90));
    assert_eq!(code, Some(3), "{out}");
    eprintln!("ended {:?} after the kill", killed.elapsed());
    let j = f.result("result.json");
    assert_eq!(lost(&j), [1], "{out}");
    let seen = seen_by_worker(&f.mock, 2);
    let (planned, reported) = share(&j, 0);
    assert_eq!(
        (planned, reported),
        (300, 300),
        "the survivor ran its whole stripe"
    );
    assert_eq!(seen[0], 300);
    let (_, lost_reported) = share(&j, 1);
    assert!(lost_reported <= seen[1]);
    assert_eq!(j["cicada"]["sent"], reported + lost_reported);
    assert_eq!(
        j["cicada"]["lost_planned_requests"].as_u64().unwrap(),
        300 - lost_reported
    );
    assert!(out.contains("DEGRADED: worker 1"), "{out}");
    assert_eq!(
        wait_exit(&mut f.workers[0], Duration::from_secs(20)),
        Some(0)
    );
}

/// Closed-loop users: the killed worker's users are gone, the rest run to
/// the end of the duration.
#[test]
fn a_worker_killed_in_a_closed_loop_degrades_the_run() {
    let _g = serial();
    let mut f = Fleet::start(
        "[load]\nusers = 8\nduration = \"6s\"",
        &["--ttft-ms", "10", "--itl-ms", "5"],
    );
    wait_requests(&f.mock, 40, Duration::from_secs(60));
    f.workers[0].kill().unwrap();
    let (code, out) = f.finish(Duration::from_secs(60));
    assert_eq!(code, Some(3), "{out}");
    let j = f.result("result.json");
    assert_eq!(lost(&j), [0], "{out}");
    // user u lives on worker u mod 2, and its requests carry u's index stride
    let (_, reported) = share(&j, 1);
    assert!(reported > 0);
    assert_eq!(j["cicada"]["degraded"], true);
}

/// `[[stages]]`: a worker killed in the first stage; the second stage still
/// runs on the survivor and every window gets its result.
#[test]
fn a_worker_killed_during_stages_leaves_the_later_stages_to_the_survivor() {
    let _g = serial();
    let mut f = Fleet::start(
        "[[stages]]\nduration = \"3s\"\nrequest_rate = 40\n[[stages]]\nduration = \"3s\"\nrequest_rate = 40\n[load]\nmax_concurrency = 8",
        &["--ttft-ms", "10", "--itl-ms", "5"],
    );
    wait_requests(&f.mock, 30, Duration::from_secs(60));
    f.workers[1].kill().unwrap();
    let (code, out) = f.finish(Duration::from_secs(60));
    assert_eq!(code, Some(3), "{out}");
    let j = f.result("result.json");
    assert_eq!(lost(&j), [1], "{out}");
    let second = f.result("result-stage2.json");
    assert!(
        second["completed"].as_u64().unwrap() > 0,
        "the second stage ran: {}",
        second["cicada"]["outcomes"]
    );
    // every request the survivor sent, in both windows, is counted
    let seen = seen_by_worker(&f.mock, 2);
    assert_eq!(share(&j, 0).1, seen[0]);
}

/// A sweep: the worker killed in the first step is gone; the second step is
/// planned over the survivor alone and runs the whole load.
#[test]
fn a_sweep_goes_on_over_the_survivors() {
    let _g = serial();
    let mut f = Fleet::start(
        "[load]\nnum_prompts = 200\n[sweep]\nmax_concurrency = [4, 8]",
        &["--ttft-ms", "10", "--itl-ms", "5"],
    );
    wait_requests(&f.mock, 40, Duration::from_secs(60));
    f.workers[1].kill().unwrap();
    let (code, out) = f.finish(Duration::from_secs(120));
    assert_eq!(code, Some(3), "{out}");
    let first = f.result("result-stage1.json");
    assert_eq!(lost(&first), [1], "{out}");
    let second = f.result("result-stage2.json");
    assert!(
        lost(&second).is_empty(),
        "{}",
        second["cicada"]["lost_workers"]
    );
    assert_eq!(second["completed"], 200, "{}", second["cicada"]["outcomes"]);
    assert_eq!(share(&second, 0), (200, 200));
}

/// A worker whose own host sends it SIGTERM (a pod deleted, a node
/// drained) while the coordinator runs on: it finishes its step as a stop
/// would, reports every request it sent, and says why it ended early; the
/// coordinator releases its share of the cap and finishes degraded.
#[test]
fn a_worker_stopped_on_its_own_host_reports_and_the_run_ends_degraded() {
    let _g = serial();
    let mut f = Fleet::start(
        "[load]\nnum_prompts = 400\nmax_concurrency = 8",
        &["--ttft-ms", "10", "--itl-ms", "5"],
    );
    wait_requests(&f.mock, 60, Duration::from_secs(60));
    // the worker runs under `ip netns exec`, which execs it: same pid
    signal(&f.workers[1], libc::SIGTERM);
    assert_eq!(
        wait_exit(&mut f.workers[1], Duration::from_secs(20)),
        Some(143)
    );
    let (code, out) = f.finish(Duration::from_secs(90));
    assert_eq!(code, Some(3), "{out}");
    let j = f.result("result.json");
    assert_eq!(lost(&j), [1], "{out}");
    let reason = j["cicada"]["lost_workers"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("SIGTERM on its host"), "{reason}");
    let seen = seen_by_worker(&f.mock, 2);
    assert_eq!(
        share(&j, 1).1,
        seen[1],
        "every request it sent was reported"
    );
    assert_eq!(share(&j, 0), (200, 200));
}

/// Agent sessions (sub-agents, tool waits) on two workers, one killed while
/// its sessions wait for a tool: its sessions are counted as started and
/// cut, never dropped, and the survivor's all complete.
#[test]
fn a_worker_killed_mid_session_leaves_its_sessions_cut() {
    let _g = serial();
    let mut f = Fleet::start(
        r#"[dataset]
kind = "agentic"
turns = 3
input_len = 8
per_turn_input_len = 4
output_len = 5
fan_out_chance = 1.0
fan_out = 2
sub_agent_turns = 1
tool_chance = 1.0
tool_delay = "1s"
tool_output_len = 4
[load]
num_prompts = 8
request_rate = "inf"
max_concurrency = 8"#,
        &["--ttft-ms", "10", "--itl-ms", "5"],
    );
    // every session's first turn and its two sub-agents, then a report
    // interval: worker 0 has reported its sessions' start and is in a tool wait
    wait_requests(&f.mock, 24, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(1500));
    f.workers[0].kill().unwrap();
    let (code, out) = f.finish(Duration::from_secs(90));
    assert_eq!(code, Some(3), "{out}");
    let j = f.result("result.json");
    assert_eq!(lost(&j), [0], "{out}");
    // session s runs on worker s mod 2: the survivor's four complete
    let survivor_sessions = f
        .mock
        .requests()
        .iter()
        .filter(|r| {
            let id = r["request_id"].as_str().unwrap();
            id.contains("-t0-") && id.ends_with("-w1")
        })
        .count() as u64;
    assert_eq!(survivor_sessions, 4);
    let c = &j["cicada"]["counters"];
    assert_eq!(c["sessions_started"].as_u64(), Some(8), "{c}");
    assert_eq!(c["sessions_completed"].as_u64(), Some(4), "{c}");
    assert_eq!(
        j["cicada"]["metrics"]["session_duration"]["count"].as_u64(),
        Some(4)
    );
    assert!(out.contains("Sessions cut:"), "{out}");
    // it had reported starting each of its sessions: none is unreported
    let l = &j["cicada"]["lost_workers"][0];
    assert_eq!(
        (
            l["planned_sessions"].as_u64(),
            l["started_sessions"].as_u64()
        ),
        (Some(4), Some(4)),
        "{l}"
    );
    assert!(j["cicada"].get("lost_planned_sessions").is_none(), "{out}");
    assert!(!out.contains("Sessions lost unreported:"), "{out}");
}

/// A worker killed while its sessions' first turns are at the server has
/// reported none of them: they are counted against its planned sessions
/// as lost unreported, never dropped.
#[test]
fn sessions_a_lost_worker_never_reported_are_counted_against_its_plan() {
    let _g = serial();
    let mut f = Fleet::start(
        r#"[dataset]
kind = "multi_turn"
turns = 2
input_len = 8
per_turn_input_len = 4
output_len = 5
[load]
num_prompts = 8
request_rate = "inf"
max_concurrency = 8"#,
        &["--ttft-ms", "3000", "--itl-ms", "5"],
    );
    // every session's first turn is at the server, none answered
    wait_requests(&f.mock, 8, Duration::from_secs(60));
    f.workers[0].kill().unwrap();
    let (code, out) = f.finish(Duration::from_secs(90));
    assert_eq!(code, Some(3), "{out}");
    let j = f.result("result.json");
    assert_eq!(lost(&j), [0], "{out}");
    let c = &j["cicada"]["counters"];
    // the survivor's four sessions
    assert_eq!(c["sessions_started"].as_u64(), Some(4), "{c}");
    assert_eq!(c["sessions_completed"].as_u64(), Some(4), "{c}");
    let l = &j["cicada"]["lost_workers"][0];
    assert_eq!(
        (
            l["planned_sessions"].as_u64(),
            l["started_sessions"].as_u64()
        ),
        (Some(4), Some(0)),
        "{l}"
    );
    assert_eq!(j["cicada"]["lost_planned_sessions"].as_u64(), Some(4));
    assert!(out.contains("Sessions lost unreported:"), "{out}");
    assert!(
        out.contains("and started 0 of its 4 planned sessions"),
        "{out}"
    );
}

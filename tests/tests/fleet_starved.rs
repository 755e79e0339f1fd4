//! A worker starved of CPU falls behind its open-loop schedule. When a
//! duration-bound run's time limit comes, the requests it had not sent yet
//! are not sent late, and they do not make the worker "lost": its share
//! ended at its time limit, as planned. They are counted and said
//! (`not_sent_at_end`), per worker and for the run, and every request it did
//! send is counted.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const TOKEN: &str = "starved-token-77a2";

fn scenario(dir: &Path, base_url: &str, load: &str) -> std::path::PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
name = "starved"
seed = 9
[target]
backend = "openai-chat"
base_url = "{base_url}"
model = "cicada-mock"
ready_timeout = "0s"
stream = false
[dataset]
input_len = 8
output_len = 1
[load]
{load}
"#
        ),
    )
}

/// A worker frozen (SIGSTOP) from early in a 2 s run at 1,000 req/s until
/// after its end: the most starved a worker can be. Thawed past the limit,
/// it sends none of the requests that came due while it was frozen, ends its
/// share, and the run is whole: exit 0, no worker lost, and the worker's
/// planned share is exactly what it reported plus what it did not send.
#[test]
fn a_worker_behind_its_schedule_at_the_time_limit_is_not_lost_and_says_what_it_did_not_send() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0", "--output-tokens", "1"]);
    let dir = scratch();
    let sc = scenario(
        dir.path(),
        &mock.url,
        "duration = \"2s\"\nrequest_rate = 1000",
    );
    let out = dir.path().join("out");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        1,
        "127.0.0.1",
        &["--output-dir", out.to_str().unwrap(), "--quiet"],
        &[("CICADA_TOKEN", TOKEN)],
    );
    let mut worker = worker_command()
        .args(["--coordinator", &format!("http://127.0.0.1:{port}")])
        .env("CICADA_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("worker.err")).unwrap())
        .spawn()
        .expect("starting a worker");
    // frozen once it got going, until well past the 2 s limit
    wait_requests(&mock, 100, Duration::from_secs(60));
    signal(&worker, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(3_000));
    signal(&worker, libc::SIGCONT);
    let code = wait_exit(&mut coordinator, Duration::from_secs(60));
    let _ = wait_exit(&mut worker, Duration::from_secs(30));
    let (stdout, stderr) = coord_output(dir.path());
    let werr = std::fs::read_to_string(dir.path().join("worker.err")).unwrap_or_default();
    let why = format!("stdout:\n{stdout}\nstderr:\n{stderr}\nworker:\n{werr}");
    assert_eq!(code, Some(0), "{why}");
    assert!(!stderr.contains("lost a worker"), "{why}");
    let r = read_json(&out.join("result.json"));
    let c = &r["cicada"];
    assert_eq!(c["degraded"], Value::Bool(false), "{why}");
    assert_eq!(c["lost_workers"], serde_json::json!([]), "{why}");
    let share = &c["worker_shares"][0];
    let planned = share["planned_requests"].as_u64().unwrap();
    let reported = share["reported_requests"].as_u64().unwrap();
    let not_sent = share["not_sent_at_end"].as_u64().unwrap();
    // 2 s at 1,000 req/s: about 2,000 planned; frozen from ~0.1 s to past 2 s
    assert!(planned > 1_500, "{planned} planned; {why}");
    assert!(not_sent > 500, "{not_sent} not sent; {why}");
    assert_eq!(reported + not_sent, planned, "{why}");
    assert_eq!(c["not_sent_at_end"].as_u64(), Some(not_sent), "{why}");
    // what it reported is what the server received: nothing was sent late
    assert_eq!(mock.stats()["requests"].as_u64(), Some(reported), "{why}");
    assert!(
        stdout.contains(&format!(
            "{not_sent} requests due before the time limit were not sent"
        )),
        "{why}"
    );
}

/// A busy loop pinned to a core; killed when dropped.
struct Spinner(std::process::Child);

impl Spinner {
    fn on(core: usize) -> Spinner {
        let child = std::process::Command::new("taskset")
            .args(["-c", &core.to_string(), "sh", "-c", "while :; do :; done"])
            .spawn()
            .expect("starting a busy loop with taskset");
        Spinner(child)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A one-thread worker pinned to a core it shares with a busy loop, asked
/// for 20,000 req/s: its load runtime has a backlog of ready tasks the
/// whole run. Its link to the coordinator (heartbeats, pings) runs apart
/// from that load, so under a 2 s heartbeat timeout it is never lost for
/// silence, and never gives up on a silent coordinator either; the requests
/// it could not send in time are counted, not lost.
#[test]
fn a_worker_swamped_by_its_own_load_still_heartbeats() {
    let _g = serial();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let core = cores - 1;
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0", "--output-tokens", "1"]);
    let dir = scratch();
    let sc = scenario(
        dir.path(),
        &mock.url,
        "duration = \"6s\"\nrequest_rate = 20000",
    );
    let out = dir.path().join("out");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        1,
        "127.0.0.1",
        &[
            "--heartbeat-timeout",
            "2s",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    let _spin = Spinner::on(core);
    let mut worker = std::process::Command::new("taskset")
        .args(["-c", &core.to_string()])
        .arg(cicada())
        .args(["worker", "--threads", "1"])
        .args(["--coordinator", &format!("http://127.0.0.1:{port}")])
        .env("CICADA_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("worker.err")).unwrap())
        .spawn()
        .expect("starting a pinned worker");
    let code = wait_exit(&mut coordinator, Duration::from_secs(120));
    let wcode = wait_exit(&mut worker, Duration::from_secs(30));
    let (stdout, stderr) = coord_output(dir.path());
    let werr = std::fs::read_to_string(dir.path().join("worker.err")).unwrap_or_default();
    let why = format!("stdout:\n{stdout}\nstderr:\n{stderr}\nworker:\n{werr}");
    assert!(!stderr.contains("no heartbeat"), "{why}");
    assert!(!werr.contains("no word from the coordinator"), "{why}");
    assert_eq!(code, Some(0), "{why}");
    assert_eq!(wcode, Some(0), "{why}");
    let c = read_json(&out.join("result.json"))["cicada"].clone();
    assert_eq!(c["degraded"], Value::Bool(false), "{why}");
    let share = &c["worker_shares"][0];
    let planned = share["planned_requests"].as_u64().unwrap();
    let reported = share["reported_requests"].as_u64().unwrap();
    let not_sent = share["not_sent_at_end"].as_u64().unwrap();
    assert!(reported > 0, "{why}");
    assert_eq!(reported + not_sent, planned, "{why}");
}

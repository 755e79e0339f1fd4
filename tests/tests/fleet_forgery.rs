//! Issue 28, reports are checked, not trusted: a worker holding the token
//! (the test's hostile gRPC client, beside an honest `cicada worker` process) sends
//! each kind of forged or broken message the issue lists. Each is refused or
//! flagged: the hostile worker is lost with the check named, the run is
//! degraded (exit 3), it ends (a fleet-wide cap is never held by the liar),
//! and no published figure moves: what the honest worker sent is counted
//! exactly, a repeated report counts once, and no forged value reaches
//! result.json.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use cicada_proto::v1;
use cicada_proto::v1::coordinator_message::Body as CBody;
use cicada_proto::v1::worker_message::Body as WBody;
use cicada_tests::fleet::runtime;
use cicada_tests::hostile_worker::{self as hostile, Answer, HostileWorker};
use cicada_tests::*;
use serde_json::Value;

const TOKEN: &str = "forgery-token-7c0a";
/// Requests of the run: 60 over two workers, at most 8 in flight fleet-wide.
const PROMPTS: u64 = 60;

/// What the hostile worker does once it has its plan.
#[derive(Debug, Clone, Copy)]
enum Forgery {
    /// Ready with 0 planned requests (the coordinator planned 30).
    ReadyWithNothingPlanned,
    /// Ready as planned, then Done at once having sent nothing.
    DoneWithoutSending,
    /// A report with more requests than its stripe planned.
    MoreThanPlanned,
    /// A TTFT of 10^18 µs.
    HugeLatency,
    /// A plausible report, then the same report again.
    RepeatedReport,
    /// An output-token counter at u64::MAX.
    CounterAtMax,
    /// Cap progress of 2^62 completed requests.
    CapProgressBeyondAdmitted,
}

fn scenario(dir: &Path, base_url: &str) -> std::path::PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
name = "forgery"
seed = 4
[target]
backend = "openai-chat"
base_url = "{base_url}"
model = "cicada-mock"
ready_timeout = "0s"
[dataset]
input_len = 8
output_len = 10
[load]
num_prompts = {PROMPTS}
max_concurrency = 8
"#
        ),
    )
}

fn honest_worker(dir: &Path, url: &str) -> Child {
    worker_command()
        .args(["--coordinator", url, "--index", "0"])
        .env("CICADA_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(File::create(dir.join("honest.err")).unwrap())
        .spawn()
        .expect("starting the honest worker")
}

/// The forgery's messages after Start (or instead of Ready).
fn messages(f: Forgery, step: u32, planned: u64) -> Vec<WBody> {
    let scope = |ok: u64, latency: u64| hostile::ok_scope(ok, latency);
    match f {
        Forgery::ReadyWithNothingPlanned | Forgery::DoneWithoutSending => Vec::new(),
        Forgery::MoreThanPlanned => vec![hostile::report(
            step,
            0,
            500_000,
            vec![scope(planned + 1_000_000, 20_000)],
        )],
        Forgery::HugeLatency => vec![hostile::report(
            step,
            0,
            500_000,
            vec![scope(1, 1_000_000_000_000_000_000)],
        )],
        Forgery::RepeatedReport => {
            let r = hostile::report(step, 0, 500_000, vec![scope(1, 20_000)]);
            vec![r.clone(), r]
        }
        Forgery::CounterAtMax => {
            let mut s = scope(1, 20_000);
            s.counters.push(hostile::counter("output_tokens", u64::MAX));
            vec![hostile::report(step, 0, 500_000, vec![s])]
        }
        Forgery::CapProgressBeyondAdmitted => {
            vec![hostile::cap_progress(step, 1 << 62, 1 << 62)]
        }
    }
}

/// Play the hostile worker through one step, then stay attached until the
/// coordinator lets go of it (or stops the run).
async fn play(url: String, f: Forgery) {
    let hello = v1::Hello {
        requested_index: Some(1),
        ..hostile::hello(TOKEN)
    };
    let (w, answer) = HostileWorker::join(&url, hello).await;
    assert!(matches!(answer, Answer::Welcome(_)), "{answer:?}");
    let mut w = w.unwrap();
    let limit = Duration::from_secs(60);
    let Some(CBody::Assign(assign)) = w.next_command(limit).await else {
        panic!("no assign")
    };
    let planned = w.plan_of(&assign).await.planned_requests();
    let ready = match f {
        Forgery::ReadyWithNothingPlanned => hostile::ready(assign.step, 0),
        _ => hostile::ready(assign.step, planned),
    };
    assert!(w.send(ready).await);
    if !matches!(f, Forgery::ReadyWithNothingPlanned) {
        let Some(CBody::Start(_)) = w.next_command(limit).await else {
            panic!("no start")
        };
        for m in messages(f, assign.step, planned) {
            let _ = w.send(m).await;
        }
        if matches!(f, Forgery::DoneWithoutSending) {
            let _ = w.send(hostile::done(assign.step, 0)).await;
        }
    }
    // keep heartbeating until the coordinator ends the stream: a silent
    // worker would be lost for its silence, not for its forgery
    let mut seq = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        seq += 1;
        if !w.send(hostile::heartbeat(seq, 0)).await {
            break;
        }
        match tokio::time::timeout(Duration::from_millis(500), w.recv()).await {
            Ok(Ok(Some(CBody::Stop(_)))) | Ok(Ok(None)) | Ok(Err(_)) => break,
            _ => {}
        }
    }
}

/// Requests the mock received from worker 0 (the honest one: even indices).
fn honest_seen(mock: &Mock) -> u64 {
    mock.requests()
        .iter()
        .filter_map(|r| {
            r["request_id"]
                .as_str()?
                .rsplit('-')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .filter(|i| i % 2 == 0)
        .count() as u64
}

/// One run with the forgery `f`; checks what every forgery must leave.
fn run(f: Forgery, reason: &str) -> Value {
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url);
    let out = dir.path().join("out");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        2,
        "127.0.0.1",
        &[
            "--output-dir",
            out.to_str().unwrap(),
            "--heartbeat-timeout",
            "20s",
            "--quiet",
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    wait_listening(dir.path(), &mut coordinator);
    let url = format!("http://127.0.0.1:{port}");
    let rt = runtime();
    let hostile = rt.spawn(play(url.clone(), f));
    let mut honest = honest_worker(dir.path(), &url);
    // far below the 20 s heartbeat timeout: the check, not silence, ends it
    let code = wait_exit(&mut coordinator, Duration::from_secs(60));
    let (stdout, stderr) = coord_output(dir.path());
    let what = format!("{f:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(code, Some(3), "{what}");
    rt.block_on(hostile).unwrap();
    assert_eq!(
        wait_exit(&mut honest, Duration::from_secs(20)),
        Some(0),
        "{what}"
    );
    let j = read_json(&out.join("result.json"));
    let c = &j["cicada"];
    assert_eq!(c["degraded"], true, "{what}");
    let lost = c["lost_workers"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{what}");
    assert_eq!(lost[0]["worker"], 1, "{what}");
    let why = lost[0]["reason"].as_str().unwrap();
    assert!(why.contains(reason), "{f:?}: {why}");
    // the coordinator's plan, not the worker's word
    assert_eq!(lost[0]["planned_requests"], PROMPTS / 2, "{what}");
    assert_eq!(c["planned_requests"], PROMPTS, "{what}");
    // the honest worker ran its whole stripe, and all of it is counted
    let honest = c["worker_shares"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["worker"] == 0)
        .unwrap();
    assert_eq!(honest["reported_requests"], PROMPTS / 2, "{what}");
    assert_eq!(honest_seen(&mock), PROMPTS / 2);
    let hostile_counted = lost[0]["reported_requests"].as_u64().unwrap();
    assert_eq!(c["sent"].as_u64().unwrap(), PROMPTS / 2 + hostile_counted);
    // nothing implausible reached a figure
    assert!(
        j["mean_ttft_ms"].as_f64().unwrap() < 5_000.0,
        "{}",
        j["mean_ttft_ms"]
    );
    assert!(j["total_output_tokens"].as_u64().unwrap() < 1_000_000);
    assert!(j["completed"].as_u64().unwrap() <= PROMPTS);
    j
}

#[test]
fn a_worker_that_says_it_planned_nothing_is_lost_before_the_start() {
    let _g = serial();
    let j = run(
        Forgery::ReadyWithNothingPlanned,
        "the coordinator planned 30",
    );
    assert_eq!(j["cicada"]["lost_workers"][0]["at_s"], 0.0);
}

#[test]
fn a_worker_done_without_sending_its_share_is_lost_and_the_cap_goes_on() {
    let _g = serial();
    run(Forgery::DoneWithoutSending, "ended its share early");
}

#[test]
fn a_report_beyond_the_stripe_is_refused() {
    let _g = serial();
    run(Forgery::MoreThanPlanned, "of its 30 planned");
}

#[test]
fn a_latency_longer_than_the_run_is_refused() {
    let _g = serial();
    run(Forgery::HugeLatency, "ttft (µs)");
}

#[test]
fn a_repeated_report_counts_once() {
    let _g = serial();
    let j = run(Forgery::RepeatedReport, "report 0 came again");
    // its first copy was plausible and stays counted; the second is not
    assert_eq!(j["cicada"]["lost_workers"][0]["reported_requests"], 1);
}

#[test]
fn a_counter_at_u64_max_is_refused() {
    let _g = serial();
    run(Forgery::CounterAtMax, "counter output_tokens");
}

#[test]
fn cap_progress_beyond_what_was_admitted_is_refused() {
    let _g = serial();
    run(
        Forgery::CapProgressBeyondAdmitted,
        "a cap message failed a check",
    );
}

//! A busy machine stalls processes for seconds at a time. A stall shorter
//! than the heartbeat timeout costs no worker; a frozen coordinator is left
//! by its workers after that timeout, saying so; and a local worker that dies
//! before the run starts ends the run at once instead of leaving it waiting
//! for a worker that will never come.

use std::path::Path;
use std::time::Duration;

use cicada_tests::*;

fn scenario(dir: &Path, base_url: &str, load: &str) -> std::path::PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
name = "stalls"
seed = 5
[target]
backend = "openai"
base_url = "{base_url}"
ready_timeout = "0s"
[dataset]
input_len = 8
output_len = 8
[load]
{load}
"#
        ),
    )
}

/// The coordinator frozen for 12 s mid-run (SIGSTOP, SIGCONT), under a 20 s
/// heartbeat timeout: both workers are still there afterwards and every
/// planned request is reported (a transport keep-alive of a few seconds
/// would have cut both off).
#[test]
fn a_coordinator_stalled_for_less_than_the_heartbeat_timeout_loses_no_worker() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3", "--itl-ms", "5"]);
    let dir = scratch();
    let sc = scenario(
        dir.path(),
        &mock.url,
        "num_prompts = 240\nrequest_rate = 20",
    );
    let out = dir.path().join("out");
    let mut coordinator = start_coord(
        dir.path(),
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--heartbeat-timeout",
            "20s",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    );
    wait_requests(&mock, 20, Duration::from_secs(60));
    signal(&coordinator, libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(12));
    signal(&coordinator, libc::SIGCONT);
    let code = wait_exit(&mut coordinator, Duration::from_secs(120));
    let (stdout, stderr) = coord_output(dir.path());
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(!stdout.contains("DEGRADED"), "{stdout}");
    let j = read_json(&out.join("result.json"));
    assert_eq!(
        j["cicada"]["lost_workers"].as_array().map(Vec::len),
        Some(0),
        "{j}"
    );
    assert_eq!(j["completed"].as_u64(), Some(240), "{stdout}");
}

/// The coordinator frozen for good: its workers leave after the heartbeat
/// timeout (3 s here), saying they heard nothing, long before the
/// transport's keep-alive would have cut them off.
#[test]
fn a_frozen_coordinator_is_left_after_the_heartbeat_timeout() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3", "--itl-ms", "5"]);
    let dir = scratch();
    let sc = scenario(
        dir.path(),
        &mock.url,
        "duration = \"60s\"\nrequest_rate = 20",
    );
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        1,
        "127.0.0.1",
        &[
            "--heartbeat-timeout",
            "3s",
            "--output-dir",
            dir.path().join("out").to_str().unwrap(),
            "--quiet",
        ],
        &[("CICADA_TOKEN", "stall-token")],
    );
    let mut worker = worker_command()
        .args(["--coordinator", &format!("http://127.0.0.1:{port}")])
        .env("CICADA_TOKEN", "stall-token")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("worker.err")).unwrap())
        .spawn()
        .expect("starting a worker");
    wait_requests(&mock, 20, Duration::from_secs(60));
    signal(&coordinator, libc::SIGSTOP);
    let code = wait_exit(&mut worker, Duration::from_secs(15));
    signal(&coordinator, libc::SIGCONT);
    let _ = coordinator.kill();
    let _ = coordinator.wait();
    let err = std::fs::read_to_string(dir.path().join("worker.err")).unwrap_or_default();
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("no word from the coordinator for 3s"), "{err}");
}

/// Two local workers, one of which dies before joining (its binary exits
/// with status 7): the run ends within seconds naming that exit, instead of
/// waiting out `--wait-workers` (5 minutes) for a worker that cannot come.
#[test]
fn a_local_worker_dead_before_the_start_ends_the_run_at_once() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "3", "--itl-ms", "5"]);
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url, "num_prompts = 20\nrequest_rate = 20");
    let bin = write(
        dir.path(),
        "worker.sh",
        &format!(
            "#!/bin/sh\ncase \"$*\" in *\"--index 1\"*) sleep 1; exit 7;; esac\nexec {} \"$@\"\n",
            cicada().display()
        ),
    );
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--worker-bin",
            bin.to_str().unwrap(),
            "--output-dir",
            dir.path().join("out").to_str().unwrap(),
            "--quiet",
        ],
        Duration::from_secs(60),
    );
    assert_ne!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("a local worker exited before the run started")
            && run.stderr.contains("exit status: 7"),
        "{}",
        run.stderr
    );
    assert_eq!(mock.stats()["requests"].as_u64(), Some(0));
}

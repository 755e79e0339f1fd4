//! Issue: many machines, faults and hostile input. Remote workers on
//! network-namespace hosts, lost workers, a lost coordinator, signals, auth, TLS.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cicada_tests::fleet::{port_of, worker_on};
use cicada_tests::netns::Lan;
use cicada_tests::*;

const TOKEN: &str = "fleet-token-canary-8f3a1c";

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn scenario(dir: &Path, base_url: &str, load: &str) -> PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
name = "fleet"
seed = 5
[target]
backend = "openai-chat"
base_url = "{base_url}"
model = "cicada-mock"
ready_timeout = "0s"
[dataset]
input_len = 8
output_len = 20
[load]
{load}
"#
        ),
    )
}

/// Request index → worker: the request id is `cicada-<run>-<index>` and worker
/// `w` of `n` sends the indices `i ≡ w (mod n)`.
fn requests_by_worker(mock: &Mock, workers: u64) -> Vec<u64> {
    let mut counts = vec![0; workers as usize];
    for r in mock.requests() {
        let index: u64 = r["request_id"]
            .as_str()
            .unwrap()
            .rsplit('-')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        counts[(index % workers) as usize] += 1;
    }
    counts
}

/// The test LAN works: each host reaches a TCP listener on the router, and a
/// cut host no longer does.
#[test]
fn lan_hosts_reach_the_router_until_cut() {
    let _g = serial();
    let lan = Lan::new(2);
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = |h: usize| {
        lan.command(h, Path::new("bash"))
            .args([
                "-c",
                &format!("timeout 2 bash -c 'echo > /dev/tcp/{}/{port}'", lan.router),
            ])
            .status()
            .expect("bash")
            .success()
    };
    assert!(connect(0), "host 0 cannot reach the router");
    assert!(connect(1), "host 1 cannot reach the router");
    lan.cut(1);
    assert!(!connect(1), "a cut host still reaches the router");
    assert!(connect(0));
}

/// Four workers on four hosts. One is SIGKILLed and another's link is cut
/// mid-run: the run finishes with the other two, the result is degraded and
/// names both, every request a survivor sent is counted, and the coordinator
/// exits with its "degraded" code. The cut-off worker stops and exits non-zero.
#[test]
fn a_killed_and_a_cut_off_worker_degrade_the_run_but_lose_nothing_else() {
    let _g = serial();
    let lan = Lan::new(4);
    let mock = Mock::start_on("0.0.0.0:0", &["--ttft-ms", "10", "--itl-ms", "5"]);
    let base = format!("http://{}:{}", lan.router, port_of(&mock.url));
    let dir = scratch();
    let sc = scenario(dir.path(), &base, "duration = \"8s\"\nrequest_rate = 40");
    let out = dir.path().join("out");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        4,
        "0.0.0.0",
        &[
            "--heartbeat-timeout",
            "3s",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    let mut workers: Vec<Child> = (0..4)
        .map(|h| worker_on(&lan, h, port, dir.path(), TOKEN))
        .collect();
    wait_requests(&mock, 60, Duration::from_secs(60));
    workers[1].kill().unwrap();
    lan.cut(2);
    let code = wait_exit(&mut coordinator, Duration::from_secs(60));
    let (stdout, stderr) = coord_output(dir.path());
    assert_eq!(
        code,
        Some(3),
        "coord exit code\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // the cut-off worker hears nothing for the heartbeat timeout, stops and exits non-zero
    let cut_code = wait_exit(&mut workers[2], Duration::from_secs(30));
    assert_eq!(
        cut_code,
        Some(3),
        "{}",
        std::fs::read_to_string(dir.path().join("worker2.err")).unwrap()
    );
    for w in [0, 3] {
        assert_eq!(wait_exit(&mut workers[w], Duration::from_secs(20)), Some(0));
    }

    let j = read_json(&out.join("result.json"));
    let c = &j["cicada"];
    eprintln!("lost workers: {}", c["lost_workers"]);
    eprintln!("worker shares: {}", c["worker_shares"]);
    assert_eq!(c["degraded"], true);
    let lost: Vec<u64> = c["lost_workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["worker"].as_u64().unwrap())
        .collect();
    assert_eq!(
        lost.iter()
            .copied()
            .collect::<std::collections::BTreeSet<u64>>(),
        [1, 2].into()
    );
    assert!(stdout.contains("DEGRADED: worker 1"), "{stdout}");
    assert!(stdout.contains("DEGRADED: worker 2"), "{stdout}");
    // survivors: every request the mock received from them was counted
    let seen = requests_by_worker(&mock, 4);
    for share in c["worker_shares"].as_array().unwrap() {
        let w = share["worker"].as_u64().unwrap() as usize;
        if share["lost"] == false {
            assert_eq!(
                share["reported_requests"].as_u64().unwrap(),
                seen[w],
                "worker {w}"
            );
        } else {
            assert!(share["reported_requests"].as_u64().unwrap() <= seen[w]);
        }
    }
    let sent = c["sent"].as_u64().unwrap();
    let outcomes: u64 = c["outcomes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v["count"].as_u64().unwrap())
        .sum();
    assert_eq!(sent, outcomes);
}

/// SIGKILL the coordinator: every worker stops sending at once and exits non-zero.
#[test]
fn a_killed_coordinator_stops_every_worker() {
    let _g = serial();
    let lan = Lan::new(3);
    let mock = Mock::start_on("0.0.0.0:0", &["--ttft-ms", "10", "--itl-ms", "5"]);
    let base = format!("http://{}:{}", lan.router, port_of(&mock.url));
    let dir = scratch();
    let sc = scenario(dir.path(), &base, "duration = \"60s\"\nrequest_rate = 60");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        3,
        "0.0.0.0",
        &[
            "--heartbeat-timeout",
            "3s",
            "--output-dir",
            dir.path().join("out").to_str().unwrap(),
            "--quiet",
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    let mut workers: Vec<Child> = (0..3)
        .map(|h| worker_on(&lan, h, port, dir.path(), TOKEN))
        .collect();
    wait_requests(&mock, 60, Duration::from_secs(60));
    coordinator.kill().unwrap();
    let killed_at = unix_us();
    let _ = coordinator.wait();
    for (i, w) in workers.iter_mut().enumerate() {
        let code = wait_exit(w, Duration::from_secs(10));
        assert_eq!(code, Some(3), "worker {i}");
    }
    let last = mock
        .requests()
        .iter()
        .map(|r| r["unix_us"].as_u64().unwrap())
        .max()
        .unwrap();
    // the bound is the heartbeat timeout (3 s); a broken connection is noticed at once
    assert!(
        last <= killed_at + 3_000_000,
        "a request started {} ms after the coordinator died",
        (last.saturating_sub(killed_at)) / 1000
    );
}

/// SIGTERM mid-run: the coordinator stops the workers and writes parsable
/// partial results within 5 s.
#[test]
fn sigterm_writes_partial_results() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "10", "--itl-ms", "20"]);
    let dir = scratch();
    let sc = scenario(
        dir.path(),
        &mock.url,
        "duration = \"60s\"\nrequest_rate = 30",
    );
    let out = dir.path().join("out");
    let mut coordinator = start_coord(
        dir.path(),
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    );
    wait_requests(&mock, 30, Duration::from_secs(60));
    let sent_at = Instant::now();
    // SAFETY: plain FFI call to send a signal to our own child process
    let rc = unsafe { libc::kill(coordinator.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let code = wait_exit(&mut coordinator, Duration::from_secs(10));
    assert!(
        sent_at.elapsed() < Duration::from_secs(5),
        "took {:?}",
        sent_at.elapsed()
    );
    assert_eq!(code, Some(143));
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["cicada"]["partial"], true);
    assert_eq!(j["cicada"]["interrupted_by"], "SIGTERM");
    assert!(j["completed"].as_u64().unwrap() > 0);
    let (header, rows) = read_csv(&out.join("summary.csv"));
    assert_eq!(rows.len(), 1);
    let partial = header.iter().position(|h| h == "partial").unwrap();
    assert_eq!(rows[0][partial], "true");
    let (stdout, _) = coord_output(dir.path());
    assert!(
        stdout.contains("PARTIAL: interrupted by SIGTERM"),
        "{stdout}"
    );
}

/// SIGTERM while the coordinator waits for remote workers that never come:
/// it stops at once (exit 130) and says what it was doing, instead of
/// waiting out `--wait-workers` and blaming the workers.
#[test]
fn sigterm_while_waiting_for_workers_stops_at_once() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url, "num_prompts = 20");
    let (mut coordinator, _) = start_coord_for_remote(
        dir.path(),
        &sc,
        2,
        "127.0.0.1",
        &[
            "--wait-workers",
            "120s",
            "--output-dir",
            dir.path().join("out").to_str().unwrap(),
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    // bounded: the coordinator prints this before it starts waiting
    let deadline = Instant::now() + Duration::from_secs(60);
    while !coord_output(dir.path())
        .1
        .contains("waiting for 2 remote worker(s)")
    {
        assert!(Instant::now() < deadline, "{:?}", coord_output(dir.path()));
        assert!(
            coordinator.try_wait().unwrap().is_none(),
            "{:?}",
            coord_output(dir.path())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let sent_at = Instant::now();
    signal(&coordinator, libc::SIGTERM);
    let code = wait_exit(&mut coordinator, Duration::from_secs(60));
    let (_, stderr) = coord_output(dir.path());
    assert_eq!(code, Some(143), "{stderr}");
    assert!(
        sent_at.elapsed() < Duration::from_secs(10),
        "took {:?}: {stderr}",
        sent_at.elapsed()
    );
    assert!(
        stderr.contains("SIGTERM while waiting for workers (0 of 2 joined)"),
        "{stderr}"
    );
    assert!(!stderr.contains("workers joined within"), "{stderr}");
    assert_eq!(mock.stats()["requests"], 0);
}

/// A worker with the wrong token is refused and never gets the plan; the
/// token itself appears in no output or file.
#[test]
fn a_wrong_token_is_refused_and_the_token_never_leaks() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url, "num_prompts = 20");
    let out = dir.path().join("out");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        1,
        "127.0.0.1",
        &["--output-dir", out.to_str().unwrap(), "--quiet"],
        &[("CICADA_TOKEN", TOKEN), ("CICADA_LOG", "trace")],
    );
    let intruder = worker_command()
        .args(["--coordinator", &format!("http://127.0.0.1:{port}")])
        .env("CICADA_TOKEN", "not-the-token")
        .output()
        .unwrap();
    assert_eq!(
        intruder.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&intruder.stderr)
    );
    assert!(String::from_utf8_lossy(&intruder.stderr).contains("authentication failed"));
    assert_eq!(
        mock.stats()["requests"].as_u64(),
        Some(0),
        "the refused worker sent load"
    );
    let good = worker_command()
        .args(["--coordinator", &format!("http://127.0.0.1:{port}")])
        .env("CICADA_TOKEN", TOKEN)
        .env("CICADA_LOG", "trace")
        .output()
        .unwrap();
    assert_eq!(good.status.code(), Some(0));
    assert_eq!(
        wait_exit(&mut coordinator, Duration::from_secs(60)),
        Some(0)
    );
    let (stdout, stderr) = coord_output(dir.path());
    assert!(
        stderr.contains("authentication failed"),
        "the refusal is logged"
    );
    let mut texts = vec![
        stdout,
        stderr,
        String::from_utf8_lossy(&good.stderr).into_owned(),
    ];
    for f in std::fs::read_dir(&out).unwrap() {
        texts.push(std::fs::read_to_string(f.unwrap().path()).unwrap());
    }
    for t in &texts {
        assert!(!t.contains(TOKEN), "the worker token leaked");
    }
}

/// A worker of another version is refused with both versions named.
#[test]
fn a_version_mismatch_is_refused_naming_both_versions() {
    use cicada_proto::v1::{
        self, coordinator_client::CoordinatorClient, coordinator_message::Body,
        worker_message::Body as W,
    };
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url, "num_prompts = 5");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        1,
        "127.0.0.1",
        &["--wait-workers", "3s", "--quiet"],
        &[("CICADA_TOKEN", TOKEN)],
    );
    std::thread::sleep(Duration::from_millis(500));
    let reason = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let mut client = CoordinatorClient::connect(format!("http://127.0.0.1:{port}"))
            .await
            .unwrap();
        let hello = v1::WorkerMessage {
            body: Some(W::Hello(v1::Hello {
                version: "0.0.0-elsewhere".into(),
                auth_token: TOKEN.into(),
                ..v1::Hello::default()
            })),
        };
        let mut inbound = client
            .attach(tokio_stream::iter(vec![hello]))
            .await
            .unwrap()
            .into_inner();
        match inbound.message().await.unwrap() {
            Some(v1::CoordinatorMessage {
                body: Some(Body::Reject(r)),
            }) => r.reason,
            other => panic!("expected a rejection, got {other:?}"),
        }
    });
    assert!(reason.contains("0.0.0-elsewhere"), "{reason}");
    assert!(reason.contains(env!("CARGO_PKG_VERSION")), "{reason}");
    // nobody valid joined: the coordinator gives up with a clear error
    let code = wait_exit(&mut coordinator, Duration::from_secs(30));
    assert_ne!(code, Some(0));
    let (_, stderr) = coord_output(dir.path());
    assert!(stderr.contains("only 0 of 1 workers joined"), "{stderr}");
}

struct Pki {
    ca: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let client_key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(vec!["worker".to_string()])
        .unwrap()
        .signed_by(&client_key, &ca)
        .unwrap();
    Pki {
        ca: ca.pem(),
        server_cert: server.pem(),
        server_key: server_key.serialize_pem(),
        client_cert: client.pem(),
        client_key: client_key.serialize_pem(),
    }
}

/// Mutual TLS on the worker port: a worker with a client certificate from the
/// CA runs the stage; one without a certificate cannot even attach.
#[test]
fn mutual_tls_admits_only_workers_with_a_certificate() {
    let _g = serial();
    let p = pki();
    let dir = scratch();
    let f = |name: &str, text: &str| write(dir.path(), name, text).to_str().unwrap().to_string();
    let (ca, cert, key, ccert, ckey) = (
        f("ca.pem", &p.ca),
        f("server.pem", &p.server_cert),
        f("server.key", &p.server_key),
        f("client.pem", &p.client_cert),
        f("client.key", &p.client_key),
    );
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let sc = scenario(dir.path(), &mock.url, "num_prompts = 12");
    let out = dir.path().join("out");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        1,
        "127.0.0.1",
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &ca,
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    let url = format!("https://localhost:{port}");
    let anonymous = worker_command()
        .args([
            "--coordinator",
            &url,
            "--tls-ca",
            &ca,
            "--dial-timeout",
            "3s",
        ])
        .env("CICADA_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_ne!(
        anonymous.status.code(),
        Some(0),
        "a worker without a client certificate got in"
    );
    assert_eq!(mock.stats()["requests"].as_u64(), Some(0));
    let good = worker_command()
        .args([
            "--coordinator",
            &url,
            "--tls-ca",
            &ca,
            "--tls-cert",
            &ccert,
            "--tls-key",
            &ckey,
        ])
        .env("CICADA_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(
        good.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert_eq!(
        wait_exit(&mut coordinator, Duration::from_secs(60)),
        Some(0)
    );
    assert_eq!(
        read_json(&out.join("result.json"))["completed"].as_u64(),
        Some(12)
    );
}

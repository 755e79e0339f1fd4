//! Issue: backends and targets, how cicada reaches one: readiness, the test
//! request, TLS, keep-alive and an API key that never leaks (every API,
//! replicas and `/metrics`: `backends`). Real `cicada`, `worker` and the mock
//! over loopback.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cicada_tests::target_run::{run_text, scenario};
use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

/// A target that is down waits up to ready_timeout, then stops the run with
/// a clear error; one that comes up in time is waited for.
#[test]
fn readiness_waits_for_the_server() {
    let _g = serial();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = scratch();
    let target = format!("backend = \"openai-chat\"\nbase_url = \"{url}\"\nready_timeout = \"2s\"");
    let (r, _) = run_text(dir.path(), &scenario(&target, ""), "1", &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("is not ready"), "{}", r.stderr);
    assert!(r.stderr.contains("ready_timeout"), "{}", r.stderr);

    let target =
        format!("backend = \"openai-chat\"\nbase_url = \"{url}\"\nready_timeout = \"60s\"");
    let sc = write(dir.path(), "late.toml", &scenario(&target, ""));
    let out = dir.path().join("late");
    let child = Command::new(cicada())
        .args([
            "run",
            sc.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let mock = Mock::start_on(
        &format!("127.0.0.1:{port}"),
        &["--ttft-ms", "2", "--itl-ms", "1"],
    );
    let r = wait_with_limit(child, LIMIT);
    assert_ok(&r);
    assert_eq!(
        read_json(&out.join("result.json"))["completed"].as_u64(),
        Some(24)
    );
    assert_eq!(mock.stats()["probes"].as_u64(), Some(1));
}

/// A test request the server refuses (wrong model) stops the run at once.
#[test]
fn a_failing_test_request_stops_the_run() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2"]);
    let dir = scratch();
    let target = format!(
        "backend = \"triton\"\nbase_url = \"{}\"\nmodel = \"no-such-model\"",
        mock.url
    );
    let (r, _) = run_text(dir.path(), &scenario(&target, ""), "1", &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("test request"), "{}", r.stderr);
    assert!(r.stderr.contains("http_400"), "{}", r.stderr);
    assert_eq!(mock.stats()["requests"].as_u64(), Some(0));
}

/// HTTPS: a custom CA is trusted, insecure mode accepts anything, and an
/// unknown self-signed certificate is refused with a clear error.
#[test]
fn tls_with_a_custom_ca_or_insecure() {
    let _g = serial();
    let dir = scratch();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_path = write(dir.path(), "cert.pem", &cert.cert.pem());
    let key_path = write(dir.path(), "key.pem", &cert.signing_key.serialize_pem());
    let mock = Mock::start(&[
        "--ttft-ms",
        "2",
        "--itl-ms",
        "1",
        "--tls-cert",
        cert_path.to_str().unwrap(),
        "--tls-key",
        key_path.to_str().unwrap(),
    ]);
    assert!(mock.url.starts_with("https://localhost:"), "{}", mock.url);
    for extra in [
        format!("tls_ca = \"{}\"", cert_path.display()),
        "tls_insecure = true".to_string(),
    ] {
        let target = format!(
            "backend = \"openai-chat\"\nbase_url = \"{}\"\n{extra}",
            mock.url
        );
        let (r, j) = run_text(dir.path(), &scenario(&target, ""), "2", &[]);
        assert_ok(&r);
        assert_eq!(j["completed"].as_u64(), Some(24), "{extra}");
    }
    // an unknown certificate fails at once, not after ready_timeout
    let target = format!(
        "backend = \"openai-chat\"\nbase_url = \"{}\"\nready_timeout = \"10m\"",
        mock.url
    );
    let started = std::time::Instant::now();
    let (r, _) = run_text(dir.path(), &scenario(&target, ""), "1", &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.to_lowercase().contains("certificate"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("tls_ca"), "{}", r.stderr);
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// Keep-alive reuses connections; without it every request opens its own.
#[test]
fn keep_alive_or_a_fresh_connection_per_request() {
    let _g = serial();
    for keep_alive in [true, false] {
        let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
        let dir = scratch();
        let target = format!(
            "backend = \"openai-chat\"\nbase_url = \"{}\"\nmodel = \"cicada-mock\"\nkeep_alive = {keep_alive}\nready_timeout = \"0s\"\nserver_metrics = false",
            mock.url
        );
        let text = scenario(&target, "").replace("num_prompts = 24", "num_prompts = 120");
        let (r, j) = run_text(dir.path(), &text, "1", &[]);
        assert_ok(&r);
        assert_eq!(j["completed"].as_u64(), Some(120));
        let conns = mock.stats()["connections"].as_u64().unwrap();
        let reused = j["cicada"]["counters"]["requests_reused_connection"]
            .as_u64()
            .unwrap_or(0);
        if keep_alive {
            // nothing is reused before the pool has seen the server keep a
            // connection open for its settle window (20 ms): at 6 in flight
            // and ~10 ms a request, the first rounds open their own (25 of 40
            // requests once on a busy CI machine), so the run is long enough
            // for reuse to dominate whatever the machine's speed
            assert!(
                conns <= 60,
                "keep-alive opened {conns} connections for 120 requests"
            );
            assert!(
                reused >= 60,
                "only {reused} of 120 requests rode a reused connection"
            );
        } else {
            assert!(
                conns >= 120,
                "without keep-alive only {conns} connections for 120 requests"
            );
        }
    }
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The API key reaches the server (it refuses requests without it) but never
/// appears in stdout, stderr (logs at trace level, workers included) or any
/// file cicada writes; a wrong key fails the readiness check without showing it.
#[test]
fn a_canary_api_key_never_leaks() {
    let _g = serial();
    let canary = format!("sk-canary-{}", std::process::id() * 7919);
    let mock = Mock::start_env(
        &["--ttft-ms", "2", "--itl-ms", "1"],
        &[("CICADA_MOCK_API_KEY", canary.as_str())],
    );
    let dir = scratch();
    let run_dir = dir.path().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let target = format!(
        "backend = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"CICADA_CANARY_KEY\"\n[target.headers]\nX-Api-Key-Copy = \"{canary}\"",
        mock.url
    );
    let text = scenario(&target, "");
    let sc = write(dir.path(), "s.toml", &text);
    let env = [
        ("CICADA_CANARY_KEY", canary.as_str()),
        ("CICADA_LOG", "trace"),
    ];
    let r = coord_run_env(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            run_dir.to_str().unwrap(),
        ],
        &env,
        LIMIT,
    );
    assert_ok(&r);
    let j = read_json(&run_dir.join("result.json"));
    assert_eq!(
        j["completed"].as_u64(),
        Some(24),
        "the key must have been sent"
    );
    assert!(!r.stdout.contains(&canary), "stdout leaks the key");
    assert!(!r.stderr.contains(&canary), "stderr leaks the key");
    assert!(
        r.stderr.contains("TRACE") || r.stderr.contains("DEBUG"),
        "logs were on"
    );
    let files = files_under(&run_dir);
    assert!(files.len() >= 2, "{files:?}");
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&canary),
            "{} leaks the key",
            f.display()
        );
    }
    let wrong = [
        ("CICADA_CANARY_KEY", "sk-wrong-key"),
        ("CICADA_LOG", "warn"),
    ];
    let r = coord_run_env(
        &[
            "run",
            sc.to_str().unwrap(),
            "--output-dir",
            run_dir.to_str().unwrap(),
            "--quiet",
        ],
        &wrong,
        LIMIT,
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("401"), "{}", r.stderr);
    assert!(!r.stderr.contains("sk-wrong-key") && !r.stderr.contains(&canary));
}

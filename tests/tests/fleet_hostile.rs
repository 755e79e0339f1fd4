//! Issue 28, a fleet that trusts nothing: what a stranger or a hostile
//! worker can make the coordinator spend (memory, log, connections) before
//! it proved the token, what worker text can do to its log and results, and
//! TLS for local workers beside remote ones.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cicada_proto::v1::coordinator_message::Body as CBody;
use cicada_tests::fleet::runtime;
use cicada_tests::hostile_worker::{self as hostile, Answer, HostileWorker};
use cicada_tests::*;

const TOKEN: &str = "hostile-token-canary-51d2";

fn scenario(dir: &Path, base_url: &str, load: &str) -> PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
name = "hostile"
seed = 3
[target]
backend = "openai-chat"
base_url = "{base_url}"
model = "cicada-mock"
ready_timeout = "0s"
[dataset]
input_len = 8
output_len = 10
[load]
{load}
"#
        ),
    )
}

fn err_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("coord.err"))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// A `cicada worker` process dialling `url` with `args`, its stderr in `dir/<name>.err`.
fn worker_process(dir: &Path, name: &str, url: &str, token: &str, args: &[&str]) -> Child {
    worker_command()
        .args(["--coordinator", url])
        .args(args)
        .env("CICADA_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(File::create(dir.join(format!("{name}.err"))).unwrap())
        .spawn()
        .expect("starting a worker")
}

/// The highest resident set (VmHWM, kB) process `pid` reaches, sampled until it exits.
struct PeakRss {
    kb: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakRss {
    fn watch(pid: u32) -> Self {
        let (kb, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (k, s) = (kb.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Some(hwm) = vm_hwm_kb(pid) else { return };
                k.fetch_max(hwm, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Self {
            kb,
            stop,
            thread: Some(thread),
        }
    }

    fn peak_mb(&mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.kb.load(Ordering::Relaxed) as f64 / 1024.0
    }
}

fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Two strangers each stream a 200 MB Hello (one with a wrong token, one
/// with none) while an honest worker joins: the coordinator refuses both
/// after a few KB, stays small, logs a line each, and the run completes.
#[test]
fn huge_hellos_from_strangers_cost_the_coordinator_little() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let sc = scenario(
        dir.path(),
        &mock.url,
        "duration = \"3s\"\nrequest_rate = 20",
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
    wait_listening(dir.path(), &mut coordinator);
    let mut peak = PeakRss::watch(coordinator.id());
    let log_before = err_len(dir.path());
    let url = format!("http://127.0.0.1:{port}");
    let rt = runtime();
    const HUGE: usize = 200 * 1024 * 1024;
    let limit = Duration::from_secs(120);
    let strangers = rt.spawn({
        let url = url.clone();
        async move {
            tokio::join!(
                hostile::raw_hello(&url, "not-the-token", HUGE, b'A', limit),
                hostile::raw_hello(&url, "", HUGE, b'B', limit),
            )
        }
    });
    let mut honest = worker_process(dir.path(), "honest", &url, TOKEN, &[]);
    let (a, b) = rt.block_on(strangers).unwrap();
    eprintln!("stranger A: {a:?}\nstranger B: {b:?}");
    let code = wait_exit(&mut coordinator, Duration::from_secs(180));
    let peak_mb = peak.peak_mb();
    let log_growth = err_len(dir.path()) - log_before;
    eprintln!(
        "coordinator VmHWM {peak_mb:.1} MB, log grew {log_growth} bytes; this test process VmHWM {:.1} MB",
        vm_hwm_kb(std::process::id()).unwrap_or(0) as f64 / 1024.0
    );
    let (stdout, _) = coord_output(dir.path());
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(wait_exit(&mut honest, Duration::from_secs(30)), Some(0));
    assert!(
        read_json(&out.join("result.json"))["completed"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(peak_mb < 100.0, "the coordinator peaked at {peak_mb:.1} MB");
    assert!(
        log_growth < 1024 * 1024,
        "the coordinator's log grew by {log_growth} bytes"
    );
    for s in [&a, &b] {
        // refused after its first frames: the rest was never read
        assert!(s.sent < 16 * 1024 * 1024, "{s:?}");
    }
}

const FORGED: &str = "evil\nINFO worker joined FAKE\r\x1b[2K\x1b[31mred\u{202e}txt.exe";

/// Worker text with newlines, ANSI codes and bidi overrides (host names,
/// versions, error messages) reaches the log, the console and result.json
/// escaped, one line per refusal, never as a line of its own.
#[test]
fn worker_text_cannot_forge_log_lines_or_results() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let sc = scenario(
        dir.path(),
        &mock.url,
        "duration = \"3s\"\nrequest_rate = 20",
    );
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
            "5s",
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    wait_listening(dir.path(), &mut coordinator);
    let url = format!("http://127.0.0.1:{port}");
    let rt = runtime();
    let forged_hello = |token: &str| cicada_proto::v1::Hello {
        hostname: FORGED.into(),
        ..hostile::hello(token)
    };
    // refused twice: a wrong token, then a forged version
    let (_, wrong_token) = rt.block_on(HostileWorker::join(&url, forged_hello("nope")));
    assert!(matches!(wrong_token, Answer::Reject(_)), "{wrong_token:?}");
    let bad_version = cicada_proto::v1::Hello {
        version: format!("9.9.9{FORGED}"),
        ..forged_hello(TOKEN)
    };
    let (_, mismatch) = rt.block_on(HostileWorker::join(&url, bad_version));
    assert!(matches!(mismatch, Answer::Reject(_)), "{mismatch:?}");
    // admitted: it gets ready, then fails the step with a forged error
    let (w, welcome) = rt.block_on(HostileWorker::join(&url, forged_hello(TOKEN)));
    assert!(matches!(welcome, Answer::Welcome(_)), "{welcome:?}");
    let mut w = w.unwrap();
    let mut honest = worker_process(dir.path(), "honest", &url, TOKEN, &[]);
    // moved in: the stream ends when the block does
    rt.block_on(async move {
        let limit = Duration::from_secs(60);
        let Some(CBody::Assign(assign)) = w.next_command(limit).await else {
            panic!("no assign")
        };
        let ready = w.ready_for(&assign).await;
        assert!(w.send(ready).await);
        let Some(CBody::Start(_)) = w.next_command(limit).await else {
            panic!("no start")
        };
        assert!(w.send(hostile::error(&format!("boom{FORGED}"), true)).await);
        // stay attached until the coordinator stops the run
        while let Some(c) = w.next_command(limit).await {
            if matches!(c, CBody::Stop(_)) {
                break;
            }
        }
    });
    let code = wait_exit(&mut coordinator, Duration::from_secs(120));
    assert_eq!(wait_exit(&mut honest, Duration::from_secs(30)), Some(0));
    let (stdout, stderr) = coord_output(dir.path());
    eprintln!("--- stderr\n{stderr}\n--- stdout\n{stdout}");
    assert_eq!(code, Some(3), "a lost worker degrades the run");
    for (name, text) in [("stderr", &stderr), ("stdout", &stdout)] {
        for bad in ['\x1b', '\r', '\u{202e}'] {
            assert!(!text.contains(bad), "{name} holds {bad:?}");
        }
        for line in text.lines().filter(|l| l.contains("FAKE")) {
            // the forged text stays inside the line that quotes it
            assert!(line.contains("evil\\n"), "{name}: forged line {line:?}");
            assert!(!line.trim_start().starts_with("INFO worker joined FAKE"));
        }
    }
    let refusals = stderr
        .lines()
        .filter(|l| l.contains("refused a worker"))
        .count();
    assert_eq!(refusals, 2, "one log line per refusal\n{stderr}");
    let raw = std::fs::read_to_string(out.join("result.json")).unwrap();
    let j: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let lost = &j["cicada"]["lost_workers"][0];
    let host = lost["host"].as_str().unwrap();
    assert!(
        host.starts_with("evil\\nINFO worker joined FAKE\\r"),
        "{host}"
    );
    assert!(
        lost["reason"].as_str().unwrap().contains("boomevil\\n"),
        "{lost}"
    );
    strings_are_clean(&j["cicada"]["lost_workers"]);
    strings_are_clean(&j["cicada"]["worker_shares"]);
}

/// No string anywhere in `v` holds a control or bidi-override character.
fn strings_are_clean(v: &serde_json::Value) {
    match v {
        serde_json::Value::String(s) => assert!(
            !s.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{s:?}"
        ),
        serde_json::Value::Array(a) => a.iter().for_each(strings_are_clean),
        serde_json::Value::Object(o) => o.values().for_each(strings_are_clean),
        _ => {}
    }
}

/// Connections that have not proved the token: at most 64 at once. 64
/// strangers attach and say nothing; a 65th connection is refused at once,
/// while the 64 still wait for their hello; once they time out, an honest
/// worker joins and the run completes.
#[test]
fn connections_beyond_the_unauthenticated_bound_are_refused_at_once() {
    const BOUND: usize = 64;
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url, "num_prompts = 10");
    let out = dir.path().join("out");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        1,
        "127.0.0.1",
        &["--output-dir", out.to_str().unwrap(), "--quiet"],
        &[("CICADA_TOKEN", TOKEN)],
    );
    wait_listening(dir.path(), &mut coordinator);
    let url = format!("http://127.0.0.1:{port}");
    let rt = runtime();
    let silent: Vec<_> = rt.block_on(async {
        let mut silent = Vec::new();
        for _ in 0..BOUND {
            // connected one after another: the coordinator accepts them in this order
            let channel = hostile::endpoint(&url, None, None).connect().await.unwrap();
            silent.push(tokio::spawn(async move {
                use cicada_proto::v1::coordinator_client::CoordinatorClient;
                let (_tx, rx) = tokio::sync::mpsc::channel(1);
                let started = Instant::now();
                let r = CoordinatorClient::new(channel)
                    .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
                    .await;
                let mut inbound = match r {
                    Ok(resp) => resp.into_inner(),
                    Err(s) => return (started.elapsed(), s.to_string()),
                };
                let end = inbound.message().await;
                (started.elapsed(), format!("{end:?}"))
            }));
        }
        silent
    });
    let started = Instant::now();
    let refused = rt.block_on(HostileWorker::attach(&url, None));
    let waited = started.elapsed();
    let still_waiting = silent.iter().filter(|t| !t.is_finished()).count();
    assert!(refused.is_err(), "connection {} was served", BOUND + 1);
    assert_eq!(
        still_waiting,
        BOUND,
        "connection {} was refused only after {waited:?}, when some of the first {BOUND} had ended",
        BOUND + 1
    );
    let mut honest = worker_process(dir.path(), "honest", &url, TOKEN, &[]);
    assert_eq!(
        wait_exit(&mut coordinator, Duration::from_secs(120)),
        Some(0),
        "{:?}",
        coord_output(dir.path())
    );
    assert_eq!(wait_exit(&mut honest, Duration::from_secs(30)), Some(0));
    for t in silent {
        let (after, end) = rt.block_on(t).unwrap();
        assert!(after >= Duration::from_secs(5), "{after:?} {end}");
    }
    let (_, stderr) = coord_output(dir.path());
    assert!(
        stderr.contains("connections have not authenticated"),
        "{stderr}"
    );
    assert_eq!(
        read_json(&out.join("result.json"))["completed"].as_u64(),
        Some(10)
    );
}

/// A certificate authority and what it signs, as PEM.
struct Pki {
    ca: String,
    leaf: String,
    leaf_key: String,
}

/// A CA and a leaf it signs for `dns` names and `ips`.
fn ca_signed(dns: &[&str], ips: &[&str]) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap();
    for ip in ips {
        params
            .subject_alt_names
            .push(SanType::IpAddress(ip.parse().unwrap()));
    }
    let leaf = params.signed_by(&key, &ca).unwrap();
    Pki {
        ca: ca.pem(),
        leaf: leaf.pem(),
        leaf_key: key.serialize_pem(),
    }
}

/// TLS with a CA-signed certificate (the leaf alone in --tls-cert, its CA in
/// --tls-ca): one local worker and one remote worker given the CA both join,
/// and the run completes.
#[test]
fn tls_with_a_ca_signed_certificate_serves_local_and_remote_workers() {
    let _g = serial();
    let p = ca_signed(&["localhost"], &["127.0.0.1"]);
    let dir = scratch();
    let f = |name: &str, text: &str| write(dir.path(), name, text).to_str().unwrap().to_string();
    let (ca, cert, key) = (
        f("ca.pem", &p.ca),
        f("leaf.pem", &p.leaf),
        f("leaf.key", &p.leaf_key),
    );
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let sc = scenario(dir.path(), &mock.url, "num_prompts = 12");
    let out = dir.path().join("out");
    let (mut coordinator, port) = start_coord_for_remote(
        dir.path(),
        &sc,
        2,
        "127.0.0.1",
        &[
            "--workers",
            "1",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-ca",
            &ca,
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[("CICADA_TOKEN", TOKEN)],
    );
    let mut remote = worker_process(
        dir.path(),
        "remote",
        &format!("https://localhost:{port}"),
        TOKEN,
        &["--tls-ca", &ca],
    );
    let code = wait_exit(&mut coordinator, Duration::from_secs(120));
    let (_, stderr) = coord_output(dir.path());
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(wait_exit(&mut remote, Duration::from_secs(30)), Some(0));
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["completed"].as_u64(), Some(12));
    assert_eq!(j["cicada"]["worker_shares"].as_array().unwrap().len(), 2);
}

/// Local workers verify the coordinator by what --tls-cert holds when no
/// --tls-ca is given: a self-signed certificate naming only `localhost`,
/// and a CA-signed leaf naming only a DNS name, with its CA in the chain
/// file. A CA-signed leaf alone, without --tls-ca, is refused up front with
/// what to do.
#[test]
fn local_workers_trust_the_certificate_file_or_are_refused_up_front() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url, "num_prompts = 8");
    let f = |name: &str, text: &str| write(dir.path(), name, text).to_str().unwrap().to_string();
    let run = |cert: &str, key: &str, out: &str| {
        coord_run(
            &[
                "run",
                sc.to_str().unwrap(),
                "--workers",
                "2",
                "--tls-cert",
                cert,
                "--tls-key",
                key,
                "--output-dir",
                &dir.path().join(out).to_string_lossy(),
                "--quiet",
            ],
            Duration::from_secs(120),
        )
    };
    let own = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let r = run(
        &f("self.pem", &own.cert.pem()),
        &f("self.key", &own.signing_key.serialize_pem()),
        "out-self",
    );
    assert_ok(&r);
    let p = ca_signed(&["coordinator.test"], &[]);
    let key = f("leaf.key", &p.leaf_key);
    let r = run(
        &f("chain.pem", &format!("{}{}", p.leaf, p.ca)),
        &key,
        "out-chain",
    );
    assert_ok(&r);
    let r = run(&f("leaf.pem", &p.leaf), &key, "out-leaf");
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--tls-ca"), "{}", r.stderr);
}

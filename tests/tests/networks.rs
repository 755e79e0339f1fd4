//! Issue 23, every network users have: names that resolve to several
//! addresses, HTTP/2, proxies and gateways, checked against real processes.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use cicada_tests::netns::Lan;
use cicada_tests::*;

/// `coord mock` inside `host`'s namespace, listening on 127.0.0.1 only
/// (llama-server's default); returns it and its port.
fn mock_in(lan: &Lan, host: usize, args: &[&str]) -> (Child, u16) {
    let mut child = lan
        .command(host, &cicada())
        .args(["mock", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the mock in its namespace");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("mock stdout"))
        .read_line(&mut line)
        .expect("the mock's banner");
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected mock banner: {line:?}"));
    (child, port)
}

fn scenario(dir: &Path, base_url: &str, rest: &str) -> std::path::PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
name = "networks"
seed = 7
[target]
backend = "openai-chat"
base_url = "{base_url}"
model = "cicada-mock"
{rest}
[dataset]
input_len = 8
output_len = 8
[load]
num_prompts = 200
max_concurrency = 16
"#
        ),
    )
}

/// `localhost` resolving to `::1` first and `127.0.0.1` second (Debian's
/// and Fedora's hosts file) in front of a server on 127.0.0.1 only: the
/// refused `::1` is passed over and remembered, no request fails. (Taking
/// the addresses round robin failed one connection in two.)
#[test]
fn a_name_with_a_refused_address_costs_no_request() {
    let _g = serial();
    let lan = Lan::new(1);
    lan.hosts_file(0, &[]);
    let (mut mock, port) = mock_in(&lan, 0, &["--ttft-ms", "5", "--itl-ms", "1"]);
    let dir = scratch();
    // a fresh connection per request: every request resolves and connects
    let sc = scenario(
        dir.path(),
        &format!("http://localhost:{port}"),
        "keep_alive = false",
    );
    let out = dir.path().join("out");
    let child = lan
        .command(0, &cicada())
        .args(["run", sc.to_str().unwrap(), "--workers", "1", "--quiet"])
        .arg("--output-dir")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("coord in the namespace");
    let run = wait_with_limit(child, Duration::from_secs(120));
    let _ = mock.kill();
    let _ = mock.wait();
    assert_ok(&run);
    let j = read_json(&out.join("result.json"));
    assert_eq!(j["completed"], 200, "{}", j["cicada"]["outcomes"]);
    assert_eq!(j["failed"], 0, "{}", j["cicada"]["outcomes"]);
}

/// A name resolving to two live addresses (a headless Kubernetes Service's
/// pods), `target.addresses = "spread"`: new connections take the live
/// addresses in turn, and the result counts requests per address, summing
/// to every request; with "first" every connection goes to the first.
#[test]
fn spreading_over_a_names_addresses_counts_each() {
    let _g = serial();
    let lan = Lan::new(1);
    let (a, b) = (
        std::net::Ipv4Addr::new(127, 0, 0, 1),
        std::net::Ipv4Addr::new(127, 0, 0, 2),
    );
    lan.hosts_file(0, &[("pods", a), ("pods", b)]);
    let mut mock = lan
        .command(0, &cicada())
        .args([
            "mock",
            "--listen",
            "0.0.0.0:0",
            "--ttft-ms",
            "5",
            "--itl-ms",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the mock in its namespace");
    let mut line = String::new();
    BufReader::new(mock.stdout.take().expect("mock stdout"))
        .read_line(&mut line)
        .expect("the mock's banner");
    let port: u16 = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected mock banner: {line:?}"));
    let run = |choice: &str| {
        let dir = scratch();
        let sc = scenario(
            dir.path(),
            &format!("http://pods:{port}"),
            &format!("keep_alive = false\naddresses = \"{choice}\""),
        );
        let out = dir.path().join("out");
        let child = lan
            .command(0, &cicada())
            .args(["run", sc.to_str().unwrap(), "--workers", "2", "--quiet"])
            .arg("--output-dir")
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cicada in the namespace");
        let r = wait_with_limit(child, Duration::from_secs(120));
        assert_ok(&r);
        let j = read_json(&out.join("result.json"));
        assert_eq!(j["completed"], 200, "{choice}: {}", j["cicada"]["outcomes"]);
        j
    };
    let j = run("spread");
    let counts = &j["cicada"]["targets"][0]["addresses"];
    let n = |ip: std::net::Ipv4Addr| counts[format!("{ip}:{port}")].as_u64().unwrap_or(0);
    assert_eq!(n(a) + n(b), 200, "{counts}");
    assert!(n(a) >= 50 && n(b) >= 50, "spread unevenly: {counts}");
    // "first" puts every connection on one address: no per-address split
    let j = run("first");
    assert!(
        j["cicada"]["targets"][0].get("addresses").is_none(),
        "{}",
        j["cicada"]["targets"][0]
    );
    let _ = mock.kill();
    let _ = mock.wait();
}

/// A proxy run: `coord run` with two workers against `base_url` with the
/// given environment (`HTTP_PROXY` and friends); returns the run and its
/// result.
fn proxied_run(
    base_url: &str,
    target_extra: &str,
    env: &[(&str, &str)],
) -> (Run, serde_json::Value) {
    let dir = scratch();
    let text = format!(
        r#"
name = "proxied"
seed = 7
[target]
backend = "openai-chat"
base_url = "{base_url}"
model = "cicada-mock"
ready_timeout = "0s"
{target_extra}
[dataset]
input_len = 8
output_len = 8
[load]
num_prompts = 60
max_concurrency = 6
[output]
max_failure_ratio = 1.0
"#
    );
    let sc = write(dir.path(), "s.toml", &text);
    let out = dir.path().join("out");
    let r = coord_run_env(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
        ],
        env,
        Duration::from_secs(120),
    );
    let result = out.join("result.json");
    let j = if result.exists() {
        read_json(&result)
    } else {
        serde_json::Value::Null
    };
    (r, j)
}

/// `HTTP_PROXY` in the workers' environment, as `vllm bench serve`
/// (aiohttp, `trust_env=True`) and curl honour it: every request of an
/// http target is relayed in absolute form, and the console and the result
/// say so (the proxy sits inside every latency).
#[test]
fn http_targets_go_through_the_proxy_the_environment_names() {
    use cicada_tests::gateways::{Tinyproxy, TinyproxyOptions};
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let proxy = Tinyproxy::start(TinyproxyOptions::default());
    let (r, j) = proxied_run(&mock.url, "", &[("HTTP_PROXY", &proxy.url)]);
    assert_ok(&r);
    assert_eq!(j["completed"], 60, "{}", j["cicada"]["outcomes"]);
    assert_eq!(proxy.requests("POST"), 60, "{}", proxy.log());
    assert_eq!(mock.stats()["requests"], 60);
    let route = format!("via {} (HTTP_PROXY, absolute-form)", proxy.url);
    assert!(r.stdout.contains(&route), "{}", r.stdout);
    let routes = j["cicada"]["proxy_routes"].as_array().unwrap();
    assert!(routes.iter().all(|x| x.as_str().unwrap().contains(&route)));

    // NO_PROXY exempts the host: nothing more through the proxy
    let (r, j) = proxied_run(
        &mock.url,
        "",
        &[("HTTP_PROXY", &proxy.url), ("NO_PROXY", "127.0.0.1")],
    );
    assert_ok(&r);
    assert_eq!(j["completed"], 60);
    assert_eq!(proxy.requests("POST"), 60, "no more relayed");
    assert!(j["cicada"].get("proxy_routes").is_none());
}

/// An https target behind a proxy: one CONNECT tunnel per connection, TLS
/// and HTTP/2 (ALPN) inside it, to nginx in front of the mock.
#[test]
fn https_targets_tunnel_through_the_proxy() {
    use cicada_tests::gateways::{Nginx, NginxOptions, Tinyproxy, TinyproxyOptions};
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let nginx = Nginx::start(&mock.url, NginxOptions::default());
    let proxy = Tinyproxy::start(TinyproxyOptions::default());
    let ca = format!("tls_ca = \"{}\"", nginx.ca_pem.display());
    let (r, j) = proxied_run(&nginx.https_url, &ca, &[("HTTPS_PROXY", &proxy.url)]);
    assert_ok(&r);
    assert_eq!(j["completed"], 60, "{}", j["cicada"]["outcomes"]);
    assert_eq!(j["cicada"]["counters"]["requests_http2"], 60);
    let tunnels = proxy.requests("CONNECT");
    assert!(
        (1..=4).contains(&tunnels),
        "{tunnels} tunnels for two workers' HTTP/2 connections\n{}",
        proxy.log()
    );
    assert!(r.stdout.contains("(HTTPS_PROXY, CONNECT)"), "{}", r.stdout);
}

/// A proxy that wants credentials: without them every request is the
/// proxy's 407; with them in the proxy URL (`target.proxy`, which the
/// result shows without the password) every request goes through.
#[test]
fn a_proxy_that_wants_credentials_gets_them_from_the_proxy_url() {
    use cicada_tests::gateways::{Tinyproxy, TinyproxyOptions};
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let proxy = Tinyproxy::start(TinyproxyOptions {
        basic_auth: Some(("bench".into(), "s3cret-canary".into())),
    });
    let (_, j) = proxied_run(&mock.url, "", &[("HTTP_PROXY", &proxy.url)]);
    assert_eq!(j["completed"], 0, "{}", j["cicada"]["outcomes"]);
    assert_eq!(j["cicada"]["outcomes"]["http_407"]["count"], 60);
    let set = format!("proxy = \"{}\"", proxy.url_with_credentials());
    let (r, j) = proxied_run(&mock.url, &set, &[]);
    assert_ok(&r);
    assert_eq!(j["completed"], 60, "{}", j["cicada"]["outcomes"]);
    let text = serde_json::to_string(&j).unwrap();
    assert!(
        !text.contains("s3cret-canary"),
        "the password reached result.json"
    );
    assert!(!r.stdout.contains("s3cret-canary") && !r.stderr.contains("s3cret-canary"));
}

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

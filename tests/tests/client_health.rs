//! Issue: the load generator must say so when it, not the server, is the limit.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cicada_tests::*;

/// A process that keeps one core busy until dropped.
struct BusyNeighbour(Child);

impl BusyNeighbour {
    fn on_core(core: usize) -> Self {
        let child = Command::new("taskset")
            .args(["-c", &core.to_string(), "sh", "-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("taskset (util-linux) is needed to pin the busy neighbour");
        BusyNeighbour(child)
    }
}

impl Drop for BusyNeighbour {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scenario(url: &str, users: u32) -> String {
    format!(
        r#"
name = "client-health"
[target]
backend = "openai-chat"
base_url = "{url}"
model = "cicada-mock"
ready_timeout = "0s"
[dataset]
input_len = 8
output_len = 64
[load]
users = {users}
duration = "6s"
"#
    )
}

/// Run `coord run` pinned (with its worker) to `core`.
fn pinned_run(core: usize, scenario: &std::path::Path, out: &std::path::Path) -> Run {
    let child = Command::new("taskset")
        .args(["-c", &core.to_string()])
        .arg(coord())
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--workers",
            "1",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting coord");
    wait_with_limit(child, Duration::from_secs(120))
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Many streams on half a core (a busy neighbour shares it): the run is flagged
/// `client_bound`, loudly, with the reason.
#[test]
fn an_overloaded_worker_is_flagged_client_bound() {
    let _g = serial();
    assert!(
        cores() >= 2,
        "this test needs two cores: one for the mock, one for the client"
    );
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let _neighbour = BusyNeighbour::on_core(1);
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 768));
    let out = dir.path().join("out");
    let run = pinned_run(1, &sc, &out);
    assert_ok(&run);
    let j = read_json(&out.join("result.json"));
    let client = &j["cicada"]["client"];
    assert_eq!(client["client_bound"], true, "client: {client}");
    assert!(!client["reasons"].as_array().unwrap().is_empty());
    assert!(run.stdout.contains("CLIENT-BOUND:"), "{}", run.stdout);
}

/// A light load on an idle core is not flagged, and the client's own figures are reported.
#[test]
fn a_comfortable_worker_is_not_flagged() {
    let _g = serial();
    assert!(cores() >= 2, "this test needs two cores");
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "10"]);
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 8));
    let out = dir.path().join("out");
    let run = pinned_run(1, &sc, &out);
    assert_ok(&run);
    let j = read_json(&out.join("result.json"));
    let client = &j["cicada"]["client"];
    assert_eq!(client["client_bound"], false, "client: {client}");
    assert!(client["cpu_us"].as_u64().unwrap() > 0);
    assert!(client["peak_rss_bytes"].as_u64().unwrap() > 1_000_000);
    assert!(client["cpu_us_per_output_token"].as_f64().unwrap() > 0.0);
    assert_eq!(
        client["workers"][0]["threads"].as_u64(),
        Some(1),
        "pinned to one core"
    );
    assert!(run.stdout.contains("Worker CPU time (s):"));
}

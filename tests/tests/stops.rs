//! Issue: nothing lost. Every way a run is stopped keeps what was measured:
//! a `^C` typed in the terminal (SIGINT to the whole foreground process
//! group), SIGINT or SIGTERM to coord's process group (`timeout`, a shell's
//! job control), SIGTERM to every process at once (a container or pod being
//! stopped). Each ends with the requests in flight cancelled and counted,
//! every worker's last report merged, no worker lost, exit 130 or 143, and a
//! result whose `sent` equals what the server received.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cicada_tests::pty::Terminal;
use cicada_tests::*;

/// 64 requests of 200 tokens at 20 ms a token, 16 at a time: each takes
/// four seconds, so a stop two seconds in finds all 16 in flight.
fn scenario(dir: &Path, base_url: &str) -> std::path::PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
name = "stops"
seed = 9
[target]
backend = "openai-chat"
base_url = "{base_url}"
model = "cicada-mock"
ready_timeout = "0s"
[dataset]
input_len = 8
output_len = 200
[load]
num_prompts = 64
max_concurrency = 16
"#
        ),
    )
}

fn slow_mock() -> Mock {
    Mock::start(&["--ttft-ms", "20", "--itl-ms", "20"])
}

/// `cicada run` with two local workers, its output in `dir`.
fn coord_command(dir: &Path, sc: &Path) -> Command {
    let out = dir.join("out");
    let mut c = Command::new(cicada());
    c.args([
        "run",
        sc.to_str().unwrap(),
        "--workers",
        "2",
        "--output-dir",
    ])
    .arg(&out);
    c
}

/// Wait until the mock holds `n` streams.
fn wait_in_flight(mock: &Mock, n: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while mock.stats()["in_flight"].as_u64().unwrap_or(0) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never got going"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What every stop must leave: exit `code`, a partial result naming
/// `signal`, no worker lost, and `sent` equal to what the mock received,
/// the streams in flight counted as cancelled.
fn assert_kept(dir: &Path, mock: &Mock, code: i32, expected: i32, signal: &str, output: &str) {
    assert_eq!(code, expected, "exit code; output:\n{output}");
    let j = read_json(&dir.join("out/result.json"));
    let c = &j["cicada"];
    assert_eq!(c["partial"], true, "{output}");
    assert_eq!(c["interrupted_by"], signal);
    assert_eq!(
        c["degraded"], false,
        "lost: {}\n{output}",
        c["lost_workers"]
    );
    assert_eq!(c["lost_workers"].as_array().map_or(0, Vec::len), 0);
    assert!(!output.contains("DEGRADED"), "{output}");
    let seen = mock.stats()["requests"].as_u64().unwrap();
    assert_eq!(
        c["sent"].as_u64().unwrap(),
        seen,
        "the result's sent against the server's count\n{output}"
    );
    let cancelled = c["outcomes"]["cancelled"]["count"].as_u64().unwrap_or(0);
    assert!(
        cancelled >= 16,
        "in-flight requests counted as cancelled: {cancelled}\n{output}"
    );
}

/// A `^C` typed into the terminal coord runs in.
#[test]
fn ctrl_c_in_a_terminal_keeps_every_request_the_server_saw() {
    let _g = serial();
    let mock = slow_mock();
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url);
    let mut term = Terminal::spawn(coord_command(dir.path(), &sc));
    wait_in_flight(&mock, 16);
    std::thread::sleep(Duration::from_millis(500));
    term.ctrl_c();
    let code = term.wait(Duration::from_secs(30));
    assert_kept(dir.path(), &mock, code, 130, "SIGINT", &term.output());
}

/// Start coord as the leader of its own process group, output to files.
fn coord_in_group(dir: &Path, sc: &Path) -> std::process::Child {
    let mut c = coord_command(dir, sc);
    c.process_group(0)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("coord.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("coord.err")).unwrap());
    c.spawn().expect("starting coord")
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: plain FFI call sending a signal to processes of this test
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// A stop by a signal sent to coord's whole process group.
fn group_signal(sig: i32, expected: i32, name: &str) {
    let _g = serial();
    let mock = slow_mock();
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url);
    let mut coordinator = coord_in_group(dir.path(), &sc);
    wait_in_flight(&mock, 16);
    std::thread::sleep(Duration::from_millis(500));
    kill(-(coordinator.id() as i32), sig);
    let code = wait_exit(&mut coordinator, Duration::from_secs(30)).unwrap_or(-1);
    let (stdout, stderr) = coord_output(dir.path());
    assert_kept(
        dir.path(),
        &mock,
        code,
        expected,
        name,
        &format!("{stdout}\n{stderr}"),
    );
}

#[test]
fn sigint_to_the_process_group_keeps_every_request() {
    group_signal(libc::SIGINT, 130, "SIGINT");
}

/// What `timeout 60 coord run ...` sends.
#[test]
fn sigterm_to_the_process_group_keeps_every_request() {
    group_signal(libc::SIGTERM, 143, "SIGTERM");
}

/// The children of `pid` (its local workers).
fn children(pid: u32) -> Vec<i32> {
    let text =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let mut out: Vec<i32> = text
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    // children of coord's other threads (tokio spawns them from any)
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let f = t.path().join("children");
            for p in std::fs::read_to_string(f)
                .unwrap_or_default()
                .split_whitespace()
            {
                if let Ok(p) = p.parse::<i32>()
                    && !out.contains(&p)
                {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// SIGTERM to coord and every worker at the same moment, as a container
/// runtime stopping a pod does: each worker finishes and reports its step
/// on its own, and the coordinator keeps it all.
#[test]
fn sigterm_to_every_process_at_once_keeps_every_request() {
    let _g = serial();
    let mock = slow_mock();
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url);
    let mut coordinator = coord_in_group(dir.path(), &sc);
    wait_in_flight(&mock, 16);
    std::thread::sleep(Duration::from_millis(500));
    let workers = children(coordinator.id());
    assert_eq!(workers.len(), 2, "coord's children: {workers:?}");
    for w in &workers {
        kill(*w, libc::SIGTERM);
    }
    kill(coordinator.id() as i32, libc::SIGTERM);
    let code = wait_exit(&mut coordinator, Duration::from_secs(30)).unwrap_or(-1);
    let (stdout, stderr) = coord_output(dir.path());
    assert_kept(
        dir.path(),
        &mock,
        code,
        143,
        "SIGTERM",
        &format!("{stdout}\n{stderr}"),
    );
}

/// A second `^C` stops at once, even while the first stop still waits for a
/// worker (here one frozen with SIGSTOP, which the first stop would wait
/// out for its grace period), and ends the local workers with coord.
#[test]
fn a_second_ctrl_c_exits_at_once() {
    let _g = serial();
    let mock = slow_mock();
    let dir = scratch();
    let sc = scenario(dir.path(), &mock.url);
    let mut term = Terminal::spawn(coord_command(dir.path(), &sc));
    wait_in_flight(&mock, 16);
    let workers = children(term.child.id());
    assert_eq!(workers.len(), 2, "coord's children: {workers:?}");
    kill(workers[0], libc::SIGSTOP);
    term.ctrl_c();
    std::thread::sleep(Duration::from_millis(300));
    let second = std::time::Instant::now();
    term.ctrl_c();
    let code = term.wait(Duration::from_secs(30));
    let took = second.elapsed();
    let output = term.output();
    assert_eq!(code, 130, "{output}");
    // the local workers went with it (their own process groups are spared
    // the terminal's signal; coord ends them)
    std::thread::sleep(Duration::from_millis(200));
    for w in &workers {
        let alive =
            std::fs::read_to_string(format!("/proc/{w}/stat")).is_ok_and(|s| !s.contains(") Z "));
        assert!(!alive, "worker {w} outlived a second ^C");
    }
    assert!(output.contains("second SIGINT: exiting now"), "{output}");
    assert!(
        took < Duration::from_secs(2),
        "took {took:?} after the second ^C\n{output}"
    );
}

/// A Ctrl-C (SIGINT to the process group) while a long dataset is still
/// being built stops `cicada run` at once, saying so, instead of when the
/// build it no longer needs would have ended (minutes here; hours for
/// 100,000 long prompts).
#[test]
fn a_signal_while_the_dataset_is_built_stops_at_once() {
    let _g = serial();
    let mock = slow_mock();
    let dir = scratch();
    let tokenizer = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/data/tokenizer.json"
    );
    let sc = write(
        dir.path(),
        "s.toml",
        &format!(
            r#"
name = "stops-while-building"
seed = 9
[target]
backend = "openai"
base_url = "{}"
model = "cicada-mock"
ready_timeout = "0s"
[tokenizer]
source = "{tokenizer}"
[dataset]
input_len = 8192
output_len = 8
[load]
num_prompts = 4000
max_concurrency = 4
"#,
            mock.url
        ),
    );
    let mut coordinator = coord_in_group(dir.path(), &sc);
    // well inside the build: it takes minutes for 4,000 prompts of 8,192 tokens
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        coordinator.try_wait().unwrap().is_none(),
        "the run ended before the signal: {:?}",
        coord_output(dir.path())
    );
    kill(-(coordinator.id() as i32), libc::SIGINT);
    let code = wait_exit(&mut coordinator, Duration::from_secs(15));
    let (stdout, stderr) = coord_output(dir.path());
    assert_eq!(code, Some(130), "{stdout}\n{stderr}");
    assert!(stderr.contains("while preparing the run"), "{stderr}");
    assert_eq!(mock.stats()["requests"].as_u64(), Some(0), "{stderr}");
}

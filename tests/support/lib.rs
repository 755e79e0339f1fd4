//! Helpers for end-to-end tests: locate the real binaries, start the mock as a
//! process, run `cicada` with a deadline, read what it wrote.

pub mod background;
pub mod browser;
pub mod fleet;
pub mod gateways;
pub mod hostile;
pub mod hostile_worker;
pub mod mock_run;
pub mod netns;
pub mod pooling;
pub mod pty;
pub mod raw;
pub mod relay;
pub mod scripted;
pub mod servers;
pub mod sglang_router;
pub mod shape;
pub mod target_run;
pub mod timing;
pub mod triton;
pub mod tty;
pub mod web;

pub use web::{
    Answer, Guarded, mock_chat_scenario, request, stage_names, start_web_run, start_web_wait,
    stop_from_page,
};

pub use background::{
    coord_output, signal, start_coord, start_coord_for_remote, wait_exit, wait_listening,
    wait_requests,
};

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// Directory holding the built `cicada` binary and the old names' aliases
/// (`coord`, `worker`).
pub fn bin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // target/<profile>/deps/<test> -> target/<profile>
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary lives in target/<profile>/deps")
            .to_path_buf();
        let sources = newest_source(&repo_root());
        if ["cicada", "coord", "worker"]
            .iter()
            .any(|bin| stale(&dir.join(bin), sources))
        {
            // `cargo test -p cicada-tests` alone does not build other packages'
            // binaries, and one built earlier may predate the code it tests.
            // Judged by the sources, not by this test binary's age: `cargo test
            // --workspace` links test binaries after the binaries, and a second
            // `cargo build` with other packages selected resolves other features
            // (rebuilding TLS and gRPC crates for minutes on a 2-core machine)
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            // with the bench harness (`cicada selftest`), as `.ci/run` builds it
            cmd.args(["build", "-p", "cicada", "-p", "cicada-alias", "--bins"]);
            cmd.args(["--features", "cicada/bench"]);
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("running cargo build for the binaries");
            assert!(status.success(), "building cicada and its aliases failed");
            // a binary whose own sources did not change is left as it was
            // (the aliases link no worker code): it is current all the same,
            // and judged stale again it would cost the next test this build
            let now = SystemTime::now();
            for bin in ["cicada", "coord", "worker"] {
                if let Ok(f) = std::fs::File::options().write(true).open(dir.join(bin)) {
                    let _ = f.set_modified(now);
                }
            }
        }
        dir
    })
    .clone()
}

/// A binary is stale when missing or older than the newest source it is built from.
fn stale(bin: &Path, newest_source: Option<SystemTime>) -> bool {
    let built = std::fs::metadata(bin).and_then(|m| m.modified()).ok();
    match (built, newest_source) {
        (Some(b), Some(s)) => b < s,
        _ => true,
    }
}

/// When the binaries' code last changed: the newest modification time of the
/// workspace's manifests, lock file, `.proto` files and every crate's
/// manifest, build script and sources (not its tests).
fn newest_source(root: &Path) -> Option<SystemTime> {
    fn walk(dir: &Path, newest: &mut Option<SystemTime>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, newest);
            } else if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
                *newest = (*newest).max(Some(m));
            }
        }
    }
    let mut newest = None;
    for file in ["Cargo.toml", "Cargo.lock"] {
        if let Ok(m) = std::fs::metadata(root.join(file)).and_then(|m| m.modified()) {
            newest = newest.max(Some(m));
        }
    }
    walk(&root.join("proto"), &mut newest);
    for krate in std::fs::read_dir(root.join("crates"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for part in ["Cargo.toml", "build.rs", "src"] {
            let p = krate.path().join(part);
            if p.is_dir() {
                walk(&p, &mut newest);
            } else if let Ok(m) = std::fs::metadata(&p).and_then(|m| m.modified()) {
                newest = newest.max(Some(m));
            }
        }
    }
    newest
}

/// Path of the `cicada` binary.
pub fn cicada() -> PathBuf {
    bin_dir().join("cicada")
}

/// `cicada worker`, ready for its arguments.
pub fn worker_command() -> Command {
    let mut c = Command::new(cicada());
    c.arg("worker");
    c
}

/// A port nothing listens on now, on every interface (namespace hosts reach
/// the router address too).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the repository root")
        .to_path_buf()
}

/// Serialise timing-sensitive tests inside one test binary (nextest runs the
/// package's tests one at a time through its test group as well).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime")
        .block_on(f)
}

/// GET a URL and parse JSON.
pub fn get_json(url: &str) -> serde_json::Value {
    block_on(async {
        reqwest::get(url)
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: not JSON: {e}"))
    })
}

/// `POST url` with a form body (the web UI's controls); (status, body),
/// `None` when nothing answers.
pub fn post_form(url: &str, body: &str) -> Option<(u16, String)> {
    block_on(async {
        let resp = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_string())
            .send()
            .await
            .ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.text().await.ok()?))
    })
}

/// GET a URL and return its status and body text.
pub fn get_text(url: &str) -> (u16, String) {
    block_on(async {
        let resp = reqwest::get(url)
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        (status, text)
    })
}

/// GET a URL; None when it cannot be reached (yet).
pub fn try_get_text(url: &str) -> Option<(u16, String)> {
    block_on(async {
        let resp = reqwest::get(url).await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.text().await.ok()?))
    })
}

/// A `cicada mock` process.
pub struct Mock {
    child: Child,
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
}

impl Mock {
    /// Start `cicada mock --listen 127.0.0.1:0 <args>` and wait until it serves.
    pub fn start(args: &[&str]) -> Mock {
        Self::start_on("127.0.0.1:0", args)
    }

    /// Start the mock on a given address.
    pub fn start_on(listen: &str, args: &[&str]) -> Mock {
        Self::spawn(listen, args, &[])
    }

    /// Start the mock with extra environment variables (e.g. its API key).
    pub fn start_env(args: &[&str], env: &[(&str, &str)]) -> Mock {
        Self::spawn("127.0.0.1:0", args, env)
    }

    fn spawn(listen: &str, args: &[&str], env: &[(&str, &str)]) -> Mock {
        let mut cmd = Command::new(cicada());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .args(["mock", "--listen", listen])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting coord mock");
        let stdout = child.stdout.take().expect("mock stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the mock's first line");
        let url = line
            .trim()
            .rsplit(' ')
            .next()
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .unwrap_or_else(|| panic!("unexpected mock banner: {line:?}"))
            .to_string();
        Mock { child, url }
    }

    /// `/mock/stats`.
    pub fn stats(&self) -> serde_json::Value {
        get_json(&format!("{}/mock/stats", self.url))
    }

    /// `/mock/requests`.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        match get_json(&format!("{}/mock/requests", self.url)) {
            serde_json::Value::Array(a) => a,
            other => panic!("requests is not an array: {other}"),
        }
    }

    /// The most streams the mock had open over `samples` looks 100 ms apart.
    pub fn open_streams(&self, samples: u32) -> u64 {
        (0..samples)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(100));
                self.stats()["in_flight"].as_u64().unwrap_or(0)
            })
            .max()
            .unwrap_or(0)
    }

    /// Wait (up to a minute) until the mock's open streams peak at exactly
    /// `n` over a second: what a steered fleet's change looks like from the server.
    pub fn wait_for_streams(&self, n: u64, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = 0;
        while Instant::now() < deadline {
            seen = self.open_streams(10);
            if seen == n {
                return;
            }
        }
        panic!("{what}: the mock never had {n} streams open (last peak {seen})");
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a finished `cicada` run printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Run `cicada <args>`, killing it if it outlives `limit` (a hang is a failure, not a wait).
pub fn coord_run(args: &[&str], limit: Duration) -> Run {
    coord_run_env(args, &[], limit)
}

/// `cicada run` on scenario `text`, written as `dir/<name>.toml` with its
/// results in `dir/out-<name>`, with `workers` local workers and `extra`
/// flags; returns the run and its result.json (`Null` when none was written).
pub fn run_scenario(
    dir: &Path,
    name: &str,
    text: &str,
    workers: &str,
    extra: &[&str],
    limit: Duration,
) -> (Run, serde_json::Value) {
    run_scenario_env(dir, name, text, workers, extra, &[], limit)
}

/// Like [`run_scenario`], with extra environment variables.
pub fn run_scenario_env(
    dir: &Path,
    name: &str,
    text: &str,
    workers: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> (Run, serde_json::Value) {
    let sc = write(dir, &format!("{name}.toml"), text);
    let out = dir.join(format!("out-{name}"));
    let mut args = vec![
        "run",
        sc.to_str().unwrap(),
        "--workers",
        workers,
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let r = coord_run_env(&args, env, limit);
    let result = out.join("result.json");
    let j = if result.exists() {
        read_json(&result)
    } else {
        serde_json::Value::Null
    };
    (r, j)
}

/// Like [`cicada_run`], with extra environment variables.
pub fn coord_run_env(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    let mut cmd = Command::new(cicada());
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("starting coord");
    wait_with_limit(child, limit)
}

/// Wait for a child, killing it after `limit`.
pub fn wait_with_limit(mut child: Child, limit: Duration) -> Run {
    // drain both pipes while waiting: a chatty child would block on a full pipe
    fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let finished = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = |h: std::thread::JoinHandle<Vec<u8>>| {
        String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
    };
    let run = Run {
        code: finished.and_then(|s| s.code()),
        stdout: text(out),
        stderr: text(err),
    };
    if finished.is_none() {
        panic!(
            "process did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
    }
    run
}

/// A scratch directory for one test.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cicada-test-")
        .tempdir()
        .expect("temp dir")
}

/// Write a scenario file.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("writing a test file");
    p
}

/// Read and parse a JSON file.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Read a CSV file into its header and records.
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = r
        .headers()
        .expect("csv header")
        .iter()
        .map(str::to_string)
        .collect();
    let rows = r
        .records()
        .map(|rec| {
            rec.expect("csv record")
                .iter()
                .map(str::to_string)
                .collect()
        })
        .collect();
    (header, rows)
}

/// Assert a run succeeded, showing its output if not.
pub fn assert_ok(run: &Run) {
    assert_eq!(
        run.code,
        Some(0),
        "coord failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
}

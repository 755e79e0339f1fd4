//! `cicada run` as a background process the test acts on while it runs
//! (signals, kills, freezes), its output in files: a pipe nobody reads
//! could block it.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::{Mock, cicada};

/// Start `cicada` with `args` and `env`, stdout and stderr into
/// `dir/coord.out` and `dir/coord.err`.
pub fn start_coord(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut c = Command::new(cicada());
    c.args(args)
        .stdout(File::create(dir.join("coord.out")).unwrap())
        .stderr(File::create(dir.join("coord.err")).unwrap());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().expect("starting coord")
}

/// What a [`start_coord`] process printed so far: (stdout, stderr).
pub fn coord_output(dir: &Path) -> (String, String) {
    (
        std::fs::read_to_string(dir.join("coord.out")).unwrap_or_default(),
        std::fs::read_to_string(dir.join("coord.err")).unwrap_or_default(),
    )
}

/// The child's exit code once it exits; killed and a panic after `limit`.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Send `signal` to `child` (SIGSTOP freezes it, SIGCONT thaws it).
pub fn signal(child: &Child, signal: i32) {
    // SAFETY: plain FFI call to send a signal to our own child process
    let rc = unsafe { libc::kill(child.id() as i32, signal) };
    assert_eq!(rc, 0, "kill({}, {signal})", child.id());
}

/// Wait until the mock has seen `n` requests; a panic after `limit`.
pub fn wait_requests(mock: &Mock, n: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    while mock.stats()["requests"].as_u64().unwrap_or(0) < n {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `cicada run scenario` (and `extra` arguments) waiting for `workers`
/// remote workers on a free port of `ip`, as [`start_coord`]; returns it and
/// the port the workers dial.
pub fn start_coord_for_remote(
    dir: &Path,
    scenario: &Path,
    workers: u32,
    ip: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Child, u16) {
    let port = crate::free_port();
    let (workers, listen) = (workers.to_string(), format!("{ip}:{port}"));
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "--expect-workers",
        &workers,
        "--listen",
        &listen,
    ];
    args.extend_from_slice(extra);
    (start_coord(dir, &args, env), port)
}

/// Waits until the coordinator says it listens for remote workers, so a test
/// dials only a port that is open; fails if it exits first or takes a minute.
pub fn wait_listening(dir: &Path, coordinator: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !coord_output(dir).1.contains("remote worker(s)") {
        assert!(Instant::now() < deadline, "{:?}", coord_output(dir));
        assert!(
            coordinator.try_wait().unwrap().is_none(),
            "{:?}",
            coord_output(dir)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

//! `cicada worker` command-line behaviour that needs no coordinator.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_worker_without_a_coordinator_gives_up_with_exit_3() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_cicada"))
        .arg("worker")
        .args([
            "--coordinator",
            &format!("http://127.0.0.1:{port}"),
            "--dial-timeout",
            "1s",
        ])
        .output()
        .expect("running worker");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the coordinator"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_malformed_coordinator_address_is_an_error_not_a_panic() {
    let out = Command::new(env!("CARGO_BIN_EXE_cicada"))
        .arg("worker")
        .args(["--coordinator", "not a url", "--dial-timeout", "1s"])
        .output()
        .expect("running worker");
    assert_ne!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

//! SGLang's router (the SGLang Model Gateway, `smg` from PyPI's
//! `sglang-router`, installed by `scripts/sglang-router.sh`) in front of a
//! real server, for the tests of cicada's `sglang` and `sglang-chat`
//! backends: SGLang's engine needs a GPU (or a CPU kernel build no registry
//! ships), its router does not. Its Prometheus metrics are on a port of
//! their own.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::free_port;
use crate::servers::{SERVER_CORE, confine, install, log_tail, stop_group, wait_healthy};

/// A running router with one worker.
pub struct SglangRouter {
    child: Child,
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// Base URL of its metrics endpoint (`/metrics` under it).
    pub metrics_url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl SglangRouter {
    /// Start the router on the servers' core with `worker` (a base URL) as
    /// its only worker, and wait until it answers `/health`.
    pub fn start(worker: &str) -> SglangRouter {
        let dir = install("sglang-router.sh");
        let scratch = crate::scratch();
        let log = scratch.path().join("smg.log");
        let (port, metrics) = (free_port(), free_port());
        let mut cmd = Command::new(dir.join("venv/bin/smg"));
        cmd.arg("launch")
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--worker-urls", worker])
            .args(["--prometheus-host", "127.0.0.1"])
            .args(["--prometheus-port", &metrics.to_string()])
            .args(["--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("router log"))
            .stderr(Stdio::from(
                std::fs::File::options()
                    .append(true)
                    .open(&log)
                    .expect("router log"),
            ));
        confine(&mut cmd, Some(SERVER_CORE));
        let mut child = cmd.spawn().expect("starting smg");
        let url = format!("http://127.0.0.1:{port}");
        wait_healthy(
            &mut child,
            &format!("{url}/health"),
            &log,
            Duration::from_secs(60),
        );
        SglangRouter {
            child,
            url,
            metrics_url: format!("http://127.0.0.1:{metrics}"),
            log,
            _dir: scratch,
        }
    }

    /// The tail of the router's log (for failure messages).
    pub fn log(&self) -> String {
        log_tail(&self.log)
    }
}

impl Drop for SglangRouter {
    fn drop(&mut self) {
        stop_group(&mut self.child, Duration::from_secs(5));
    }
}

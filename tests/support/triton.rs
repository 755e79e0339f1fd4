//! A real NVIDIA Triton Inference Server for the end-to-end tests: the
//! `tritonserver` of PyPI's `nvidia-pytriton` wheel, installed by
//! `scripts/triton-server.sh`, serving the tests' own tiny Python model
//! (`tests/support/triton/tiny`: the interface of Triton's vLLM backend, a
//! deterministic word generator) over its HTTP frontend's generate
//! extension, with Prometheus metrics on a port of its own. gRPC is off.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::free_port;
use crate::servers::{SERVER_CORE, confine, install, log_tail, read_env, stop_group, wait_healthy};

/// The model's name in the repository.
pub const MODEL: &str = "tiny";

/// A running `tritonserver` with the tiny model.
pub struct TritonServer {
    child: Child,
    /// Base URL of the HTTP frontend, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// Base URL of the metrics endpoint (`/metrics` under it).
    pub metrics_url: String,
    /// The model's word-level tokenizer (`tokenizer.json`).
    pub tokenizer: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// Copy the model repository `from` into `to`, filling in the config's
/// tokenizer path and per-token delay.
fn write_repository(from: &Path, to: &Path, tokenizer: &Path, delay_ms: u32) {
    let model = to.join(MODEL);
    std::fs::create_dir_all(model.join("1")).expect("model repository");
    let config = std::fs::read_to_string(from.join("config.pbtxt"))
        .expect("config.pbtxt")
        .replace("@TOKENIZER@", &tokenizer.display().to_string())
        .replace("@TOKEN_DELAY_MS@", &delay_ms.to_string());
    std::fs::write(model.join("config.pbtxt"), config).expect("config.pbtxt");
    std::fs::copy(from.join("1/model.py"), model.join("1/model.py")).expect("model.py");
}

impl TritonServer {
    /// Start tritonserver on one core with the tiny model, which sleeps
    /// `delay_ms` before each token it sends.
    pub fn start(delay_ms: u32) -> TritonServer {
        let dir = install("triton-server.sh");
        let env = read_env(&dir.join("env.sh"));
        let var = |k: &str| {
            env.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| PathBuf::from(v))
                .unwrap_or_else(|| panic!("{}: no {k}", dir.join("env.sh").display()))
        };
        let tokenizer = var("TRITON_TINY_TOKENIZER");
        let scratch = crate::scratch();
        let repo = scratch.path().join("models");
        let source = crate::repo_root().join("tests/support/triton/tiny");
        write_repository(&source, &repo, &tokenizer, delay_ms);
        let log = scratch.path().join("tritonserver.log");
        let (port, metrics) = (free_port(), free_port());
        let mut cmd = Command::new(var("TRITON_SERVER"));
        cmd.arg("--model-repository")
            .arg(&repo)
            .arg("--backend-directory")
            .arg(var("TRITON_BACKENDS"))
            .args(["--http-address", "127.0.0.1"])
            .args(["--http-port", &port.to_string()])
            .args(["--allow-grpc", "false"])
            .args(["--metrics-address", "127.0.0.1"])
            .args(["--metrics-port", &metrics.to_string()])
            .args(["--allow-gpu-metrics", "false"])
            .args(["--exit-timeout-secs", "2"])
            .envs(env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("server log"))
            .stderr(Stdio::from(
                std::fs::File::options()
                    .append(true)
                    .open(&log)
                    .expect("server log"),
            ));
        confine(&mut cmd, Some(SERVER_CORE));
        let mut child = cmd.spawn().expect("starting tritonserver");
        let url = format!("http://127.0.0.1:{port}");
        wait_healthy(
            &mut child,
            &format!("{url}/v2/health/ready"),
            &log,
            Duration::from_secs(120),
        );
        TritonServer {
            child,
            url,
            metrics_url: format!("http://127.0.0.1:{metrics}"),
            tokenizer,
            log,
            _dir: scratch,
        }
    }

    /// The tail of the server's log (for failure messages).
    pub fn log(&self) -> String {
        log_tail(&self.log)
    }

    /// The model's record of each request it answered, in order: the JSON of
    /// its `cicada-tiny {...}` log lines.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                l.strip_prefix("cicada-tiny {")
                    .map(|rest| format!("{{{rest}"))
            })
            .map(|json| serde_json::from_str(&json).expect("a cicada-tiny record"))
            .collect()
    }
}

impl Drop for TritonServer {
    fn drop(&mut self) {
        stop_group(&mut self.child, Duration::from_secs(5));
    }
}

//! The settings of `cicada run`, `mock` and `validate` as plain values (the
//! binary reads the flags and fills these in), and the scenario they
//! describe (`scenario`).

pub mod scenario;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cicada_mock::MockConfig;

/// `cicada run`.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// The scenario file (TOML); without one, the vllm bench serve flags describe the run.
    pub scenario: Option<PathBuf>,
    /// Local worker processes to start (default 1, or 0 with --expect-workers).
    pub workers: Option<u32>,
    /// Workers that must join before the run starts, local ones included;
    /// remote workers dial --listen with `cicada worker --coordinator http://HOST:PORT`.
    pub expect_workers: Option<u32>,
    /// File holding the shared worker token (default: the CICADA_TOKEN
    /// environment variable; a random one for local-only fleets).
    pub token_file: Option<PathBuf>,
    /// Serve the worker port over TLS with this certificate (PEM).
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) for --tls-cert.
    pub tls_key: Option<PathBuf>,
    /// Require workers to present a client certificate signed by this CA (mutual TLS).
    pub tls_client_ca: Option<PathBuf>,
    /// The CA (PEM) that signed --tls-cert, for local workers to verify the
    /// coordinator (default: the certificates in --tls-cert).
    pub tls_ca: Option<PathBuf>,
    /// Directory for result files (overrides output.dir).
    pub output_dir: Option<PathBuf>,
    /// Override any scenario key: --set load.request_rate=10 (repeatable).
    pub sets: Vec<String>,
    /// Address of the coordinator's gRPC server.
    pub listen: SocketAddr,
    /// The cicada executable local workers run as `<it> worker` (default:
    /// this one).
    pub worker_bin: Option<PathBuf>,
    /// How long to wait for every worker to join.
    pub wait_workers: Duration,
    /// Silence after which a worker counts as lost.
    pub heartbeat_timeout: Duration,
    /// No live progress at all.
    pub quiet: bool,
    /// One progress line per interval instead of a progress bar (the default
    /// when stderr is not a terminal).
    pub headless: bool,
    /// Serve the fleet's live counters and latency quantiles in Prometheus
    /// text format at http://ADDR/metrics while the run goes.
    pub metrics_addr: Option<SocketAddr>,
    /// Serve Locust's web UI and API while the run goes (default address
    /// 127.0.0.1:8089; any address outside 127.0.0.0/8 and ::1 needs a token).
    pub web: Option<SocketAddr>,
    /// Start idle (implies --web), with the fleet attached, until the page's
    /// start form (or `POST /swarm`) starts the run; stay up after it until
    /// Ctrl-C.
    pub web_wait: bool,
    /// File holding the web UI's token (default: the CICADA_WEB_TOKEN
    /// environment variable); every request must carry it.
    pub web_token_file: Option<PathBuf>,
    /// Serve Locust's own built web UI at / instead of cicada's page (which
    /// stays at /cicada): the webui/dist directory of a locust wheel, as
    /// scripts/locust-webui.sh unpacks it.
    pub web_ui: Option<PathBuf>,
    /// Exit with code 4 when more than this share of requests fail
    /// (output.max_failure_ratio; unset: when more than half of the run's fail).
    pub max_failure_ratio: Option<f64>,
    /// Exit with code 5 when fewer than this share of requests meet every
    /// [slo] bound (slo.min_attainment).
    pub min_slo_attainment: Option<f64>,
    /// SLOs for goodput in vLLM's form: --goodput ttft:500 tpot:50 (ms; ttft, tpot, e2el, itl, ttfa).
    pub goodput: Vec<String>,
    pub vllm: cicada_scenarios::vllm::VllmFlags,
}

/// `cicada mock`.
#[derive(Debug)]
pub struct MockArgs {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key).
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key for --tls-cert.
    pub tls_key: Option<PathBuf>,
    pub config: MockConfig,
}

/// `cicada validate`.
#[derive(Debug)]
pub struct ValidateArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// Overrides to apply before validating.
    pub sets: Vec<String>,
}

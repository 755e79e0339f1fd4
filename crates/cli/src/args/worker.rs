//! `cicada worker`'s flags, turned into the worker's plain settings.

use std::path::PathBuf;
use std::time::Duration;

/// Command-line arguments of `cicada worker`.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    /// Coordinator address, e.g. http://10.0.0.1:7000 (HOST:PORT alone means http://HOST:PORT)
    #[arg(long, env = "CICADA_COORDINATOR", value_parser = cicada_worker::coordinator_url)]
    pub coordinator: String,
    /// Environment variable holding the shared worker token.
    #[arg(long, default_value = "CICADA_TOKEN")]
    pub token_env: String,
    /// File holding the shared worker token (instead of the environment).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// This worker's index, when a scheduler assigns one (defaults to
    /// JOB_COMPLETION_INDEX or SLURM_PROCID when set, else the coordinator decides).
    #[arg(long)]
    pub index: Option<u32>,
    /// Runtime threads (default: every CPU this process may use).
    #[arg(long)]
    pub threads: Option<usize>,
    /// How long to keep dialling a coordinator that is not up yet.
    #[arg(long, default_value = "2m", value_parser = cicada_plan::units::parse_duration)]
    pub dial_timeout: Duration,
    /// CA certificate (PEM) to verify an https coordinator (default: system roots).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Server name to verify (default: the host in --coordinator).
    #[arg(long)]
    pub tls_domain: Option<String>,
    /// Tests only: shift this worker's wall clock by this many ms, standing
    /// for a host whose clock is off (hosts of a test share one kernel clock).
    #[arg(
        long,
        hide = true,
        hide_env = true,
        env = "CICADA_CLOCK_SKEW_MS",
        allow_hyphen_values = true
    )]
    pub clock_skew_ms: Option<i64>,
}

impl From<WorkerArgs> for cicada_worker::WorkerArgs {
    fn from(a: WorkerArgs) -> Self {
        let WorkerArgs {
            coordinator,
            token_env,
            token_file,
            index,
            threads,
            dial_timeout,
            tls_ca,
            tls_cert,
            tls_key,
            tls_domain,
            clock_skew_ms,
        } = a;
        Self {
            coordinator,
            token_env,
            token_file,
            index,
            threads,
            dial_timeout,
            tls_ca,
            tls_cert,
            tls_key,
            tls_domain,
            clock_skew_ms,
        }
    }
}

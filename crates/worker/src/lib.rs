//! HOW cicada drives load and measures it: one worker's side of a run.
//!
//! - [`link`](serve): the gRPC link to the coordinator: Hello, then per step
//!   Assign -> Ready -> Start -> Report* -> Done, heartbeats both ways.
//! - `executor`: turns a plan into requests on the wire: open loop (a
//!   dispatcher thread releases the stripe's slots on time), closed loop
//!   (Locust-style users), conversations; each request goes through
//!   `cicada-client` and becomes a `RequestRecord`.
//! - `recorder`: per-thread shards of mergeable histograms and counters,
//!   taken once per report interval; `details`: per-request JSON lines.
//! - `health`: the worker watching itself (runtime stalls, CPU, memory).
//!
//! The only way in is [`serve`] (`cicada worker`, through [`main`], or
//! [`spawn_in_process`] for a worker that runs as a task of another process).

mod barrier;
mod clocksync;
mod details;
mod executor;
mod health;
mod inflight;
mod leave;
mod link;
mod recorder;
mod uplink;

pub use leave::{Leave, LeaveReason, watch_signals};
pub use link::{Identity, LinkError, Tls, serve};

use std::path::PathBuf;
use std::time::Duration;

/// Command-line arguments of `cicada worker`.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    /// Coordinator address, e.g. http://10.0.0.1:7000 (HOST:PORT alone means http://HOST:PORT)
    #[arg(long, env = "CICADA_COORDINATOR", value_parser = coordinator_url)]
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

impl WorkerArgs {
    /// The TLS settings for the link, read from the files named on the command line.
    pub fn tls(&self) -> std::io::Result<Tls> {
        let read = |p: &Option<PathBuf>| -> std::io::Result<Option<String>> {
            p.as_ref()
                .map(|p| {
                    std::fs::read_to_string(p)
                        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))
                })
                .transpose()
        };
        Ok(Tls {
            ca_pem: read(&self.tls_ca)?,
            cert_pem: read(&self.tls_cert)?,
            key_pem: read(&self.tls_key)?,
            domain: self.tls_domain.clone(),
        })
    }
}

/// Run a worker as a task of this process, dialling `url` like the `worker`
/// binary does: a fleet without a process boundary, for tests and
/// single-process runs. Its load runs on the caller's runtime.
pub fn spawn_in_process(
    url: String,
    who: Identity,
    dial_wait: Duration,
) -> tokio::task::JoinHandle<Result<(), LinkError>> {
    let load = tokio::runtime::Handle::current();
    tokio::spawn(
        async move { serve(&url, who, &Tls::default(), dial_wait, Leave::new(), load).await },
    )
}

/// `--coordinator` as a URL: `HOST:PORT` alone is plain http, as the
/// coordinator's own `--listen HOST:PORT` is; another scheme is refused at
/// once rather than after the dial timeout.
fn coordinator_url(given: &str) -> Result<String, String> {
    let given = given.trim();
    let url = if given.contains("://") {
        given.to_string()
    } else {
        format!("http://{given}")
    };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("{given}: give http://HOST:PORT or https://HOST:PORT"))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{given}: no host; give http://HOST:PORT"));
    }
    Ok(url)
}

/// The index a scheduler assigned through the environment, if any.
pub fn index_from_environment() -> Option<u32> {
    ["JOB_COMPLETION_INDEX", "SLURM_PROCID"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse().ok())
}

/// Read the shared token from a file or an environment variable (empty if neither).
pub fn read_token(args: &WorkerArgs) -> std::io::Result<String> {
    if let Some(path) = &args.token_file {
        return Ok(std::fs::read_to_string(path)?.trim().to_string());
    }
    Ok(std::env::var(&args.token_env).unwrap_or_default())
}

/// `cicada worker`: join the coordinator and run this worker's share until
/// the run ends or a signal says leave; returns the process exit code.
///
/// Two runtimes: the load (requests, the dispatcher's hand-over, reports)
/// on `--threads` threads, and the link to the coordinator (the gRPC
/// connection, heartbeats, pings, stops) on a thread of its own, so a load
/// loop that keeps every load thread busy, with a backlog of ready tasks,
/// cannot delay a heartbeat past the coordinator's timeout.
pub fn main(args: WorkerArgs) -> i32 {
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let tls = match args.tls() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("worker: cannot read a TLS file: {e}");
            return 2;
        }
    };
    let token = match read_token(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("worker: cannot read the token: {e}");
            return 2;
        }
    };
    let runtimes = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("cicada-load")
        .enable_all()
        .build()
        .and_then(|load| {
            let link = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            Ok((load, link))
        });
    let (load, link) = match runtimes {
        Ok(rts) => rts,
        Err(e) => {
            eprintln!("worker: cannot start the runtime: {e}");
            return 1;
        }
    };
    if let Some(ms) = args.clock_skew_ms {
        clocksync::set_skew_ms(ms);
    }
    let who = Identity {
        requested_index: args.index.or_else(index_from_environment),
        token,
        threads,
    };
    let on_load = load.handle().clone();
    let result = link.block_on(async {
        // SIGINT/SIGTERM (a Ctrl-C, a pod deletion): finish, report, leave
        let leave = Leave::new();
        tokio::spawn(watch_signals(leave.clone()));
        serve(
            &args.coordinator,
            who,
            &tls,
            args.dial_timeout,
            leave,
            on_load,
        )
        .await
    });
    drop(link);
    // whatever the load left (a request past its step) is not waited for
    load.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("worker: {e}");
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::coordinator_url;

    #[test]
    fn a_coordinator_without_a_scheme_is_plain_http() {
        assert_eq!(
            coordinator_url("10.0.0.1:7000").unwrap(),
            "http://10.0.0.1:7000"
        );
        assert_eq!(
            coordinator_url(" https://coord:7000 ").unwrap(),
            "https://coord:7000"
        );
        assert_eq!(
            coordinator_url("http://[::1]:7000").unwrap(),
            "http://[::1]:7000"
        );
        assert!(coordinator_url("grpc://coord:7000").is_err());
        assert!(coordinator_url("http://").is_err());
        assert!(coordinator_url("").is_err());
    }
}

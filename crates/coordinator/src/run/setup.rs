//! Everything `cicada run` settles before its fleet runs: the scenario the
//! command line describes, how many workers and where, the shared token and
//! TLS, the tokenizer and live metrics; then the fleet itself, joined.

use std::path::PathBuf;

use cicada_scenarios::Scenario;
use cicada_scenarios::tokenizer::Tokenizer;
use rand::Rng;

use crate::cli::RunArgs;
use crate::error::{FleetError, RunError};
use crate::fleet::tls::TlsFiles;
use crate::fleet::{Fleet, FleetOptions, LocalWorkers, ServerTls, TOKEN_ENV};
use crate::live::LiveMetrics;
use crate::signals::Signals;
use cicada_web::{Feed, RunState, WEB_TOKEN_ENV, Web};

/// What the command line settles before anything runs.
pub(super) struct Setup {
    pub scenario: Scenario,
    /// Where the scenario came from (a file, or "command line").
    pub origin: String,
    /// Workers in the fleet, local ones included.
    pub workers: u32,
    /// Local worker processes.
    pub local_workers: u32,
    /// Some workers dial in from elsewhere.
    pub remote: bool,
    pub tokenizer: Option<Tokenizer>,
    pub live: Option<LiveMetrics>,
    /// The web UI (`--web`).
    pub web: Option<Web>,
    /// The shared worker token.
    token: String,
    /// TLS for the worker port.
    tls: Option<ServerTls>,
}

/// Read the scenario and flags, and check the fleet can hold the run.
pub(super) async fn prepare(args: &RunArgs) -> Result<Setup, RunError> {
    let loaded = crate::cli::scenario::of_run(args)?;
    let mut scenario = loaded.scenario;
    if let Some(dir) = &args.output_dir {
        scenario.output.dir = dir.clone();
    }
    let local_workers = args
        .workers
        .unwrap_or(if args.expect_workers.is_some() { 0 } else { 1 });
    let workers = args.expect_workers.unwrap_or(local_workers);
    if workers == 0 {
        return Err(RunError::BadInput(
            "no workers: give --workers N (local) and/or --expect-workers N (total)".into(),
        ));
    }
    if workers < local_workers {
        return Err(RunError::BadInput(format!(
            "--expect-workers {workers} is fewer than the {local_workers} local --workers"
        )));
    }
    check_streams_per_worker(&scenario, workers)?;
    let remote = workers > local_workers;
    let token = worker_token(args, remote)?;
    let tls = server_tls(args, local_workers > 0)?;
    let tokenizer = match &scenario.tokenizer {
        Some(spec) => {
            Some(Tokenizer::load(&spec.source).map_err(|e| RunError::BadInput(e.to_string()))?)
        }
        None => None,
    };
    let live = match args.metrics_addr {
        Some(addr) => {
            let live = LiveMetrics::serve(addr)
                .await
                .map_err(|e| RunError::BadInput(e.to_string()))?;
            eprintln!("cicada: live metrics at http://{}/metrics", live.addr());
            Some(live)
        }
        None => None,
    };
    let web = web_ui(args, &scenario).await?;
    Ok(Setup {
        scenario,
        origin: loaded.origin,
        workers,
        local_workers,
        remote,
        tokenizer,
        live,
        web,
        token,
        tls,
    })
}

/// Default address of the web UI (Locust's port).
const WEB_DEFAULT: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8089);

/// The web UI, when `--web` or `--web-wait` asks for it.
async fn web_ui(args: &RunArgs, scenario: &Scenario) -> Result<Option<Web>, RunError> {
    let addr = match (args.web, args.web_wait) {
        (Some(a), _) => a,
        (None, true) => WEB_DEFAULT,
        (None, false) if args.web_token_file.is_some() => {
            return Err(RunError::BadInput(
                "--web-token-file needs --web (or --web-wait)".into(),
            ));
        }
        (None, false) if args.web_ui.is_some() => {
            return Err(RunError::BadInput(
                "--web-ui needs --web (or --web-wait)".into(),
            ));
        }
        (None, false) => return Ok(None),
    };
    let token = match &args.web_token_file {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
            RunError::BadInput(format!("--web-token-file {}: {e}", path.display()))
        })?),
        None => std::env::var(WEB_TOKEN_ENV).ok(),
    };
    let state = if args.web_wait {
        RunState::Ready
    } else {
        RunState::Running
    };
    let feed = Feed::new(scenario.clone(), state);
    let web = Web::serve(addr, token, feed, args.web_ui.as_deref())
        .await
        .map_err(|e| RunError::BadInput(e.to_string()))?;
    eprintln!("cicada: web UI at {}", web.url());
    Ok(Some(web))
}

impl Setup {
    /// Where the embedded mock listens: every interface when remote workers must reach it.
    pub(super) fn mock_ip(&self) -> std::net::IpAddr {
        if self.remote {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv4Addr::LOCALHOST.into()
        }
    }

    /// Start the fleet and wait until every worker joined; a signal while
    /// waiting stops the run at once (nothing was sent, nothing to write).
    pub(super) async fn fleet(
        &self,
        args: &RunArgs,
        signals: &mut Signals,
    ) -> Result<Fleet, RunError> {
        let options = FleetOptions {
            local_workers: self.local_workers,
            expect_workers: self.workers,
            listen: args.listen,
            wait_workers: args.wait_workers,
            local: LocalWorkers::Processes(worker_bin(args)?),
            token: self.token.clone(),
            heartbeat_timeout: args.heartbeat_timeout,
            tls: self.tls.clone(),
        };
        let mut fleet = Fleet::start(options).await?;
        if self.remote {
            eprintln!(
                "cicada: waiting for {} remote worker(s) on {} (cicada worker --coordinator {}://HOST:{})",
                self.workers - self.local_workers,
                fleet.addr,
                if fleet.options.tls.is_some() {
                    "https"
                } else {
                    "http"
                },
                fleet.addr.port()
            );
        }
        tracing::info!(addr = %fleet.addr, workers = self.workers, "waiting for workers");
        let joined = tokio::select! {
            r = fleet.join() => r.map_err(RunError::from),
            signal = signals.next() => Err(RunError::Interrupted { signal, message: String::new() }),
        };
        if let Err(e) = joined {
            let e = match e {
                RunError::Interrupted { signal, .. } => RunError::Interrupted {
                    signal,
                    message: format!(
                        "{signal} while waiting for workers ({} of {} joined): stopped before any request was sent; no results to write",
                        fleet.members().len(),
                        self.workers
                    ),
                },
                e => e,
            };
            fleet.shutdown().await;
            return Err(e);
        }
        Ok(fleet)
    }
}

pub(super) fn random_hex(bytes: usize) -> String {
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

/// The executable local workers run as `<it> worker`: `--worker-bin`, else
/// this very `cicada`.
fn worker_bin(args: &RunArgs) -> Result<PathBuf, FleetError> {
    if let Some(p) = &args.worker_bin {
        return Ok(p.clone());
    }
    std::env::current_exe().map_err(FleetError::WorkerBin)
}

/// The shared worker token: `--token-file`, else `CICADA_TOKEN`, else (local
/// fleets only) a random one handed to the local workers.
fn worker_token(args: &RunArgs, remote: bool) -> Result<String, RunError> {
    if let Some(path) = &args.token_file {
        let t = std::fs::read_to_string(path)
            .map_err(|e| RunError::BadInput(format!("--token-file {}: {e}", path.display())))?;
        let t = t.trim().to_string();
        if t.is_empty() {
            return Err(RunError::BadInput(format!(
                "--token-file {}: the file is empty",
                path.display()
            )));
        }
        return Ok(t);
    }
    match std::env::var(TOKEN_ENV) {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ if remote => Err(RunError::BadInput(format!(
            "remote workers need a shared token: set {} (coordinator and workers) or pass --token-file",
            TOKEN_ENV
        ))),
        _ => Ok(random_hex(16)),
    }
}

/// TLS for the worker port from the `--tls-*` files; with `local` workers,
/// checked as they will check it.
fn server_tls(args: &RunArgs, local: bool) -> Result<Option<ServerTls>, RunError> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let files = TlsFiles {
        cert,
        key,
        client_ca: args.tls_client_ca.as_deref(),
        ca: args.tls_ca.as_deref(),
    };
    let dial = local.then(|| crate::fleet::local_dial(args.listen).ip());
    ServerTls::load(files, dial)
        .map(Some)
        .map_err(|e| RunError::BadInput(e.to_string()))
}

/// Most concurrent streams one worker is given: each is a connection and a
/// task (about 30 KB); `cicada selftest` measures 10,000 on one core.
const MAX_STREAMS_PER_WORKER: u32 = 100_000;

/// Refuse a run that would give one worker more streams than it can hold.
pub(super) fn check_streams_per_worker(s: &Scenario, workers: u32) -> Result<(), RunError> {
    let Some(peak) = cicada_scenarios::peak_streams(s) else {
        return Ok(());
    };
    let per_worker = peak.div_ceil(workers.max(1));
    if per_worker <= MAX_STREAMS_PER_WORKER {
        return Ok(());
    }
    Err(RunError::BadInput(format!(
        "{peak} concurrent streams over {workers} worker(s) is {per_worker} per worker; \
         one worker holds at most {MAX_STREAMS_PER_WORKER}: use --workers {} or more",
        peak.div_ceil(MAX_STREAMS_PER_WORKER)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_never_given_more_streams_than_it_holds() {
        let mut s = Scenario::default();
        s.load.users = Some(250_000);
        let e = check_streams_per_worker(&s, 2).unwrap_err().to_string();
        assert!(e.contains("--workers 3 or more"), "{e}");
        assert!(check_streams_per_worker(&s, 3).is_ok());
        s.load.users = None;
        assert!(
            check_streams_per_worker(&s, 1).is_ok(),
            "open loop: no bound known"
        );
    }
}

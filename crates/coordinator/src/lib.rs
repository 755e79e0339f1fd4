//! RUN FLEETS: the settings of `cicada run` (and `validate`, `mock`), the
//! gRPC server workers attach to, local worker spawning, step barriers,
//! exact merging of worker reports and live progress. What a finished step
//! becomes is `cicada-results`' job; the server under test is
//! `cicada-probe`'s; the worker is reached only by spawning `cicada worker`.
//!
//! The house, read top-down (each module imports only modules below it; the
//! `house` test in `tests/` checks there is no circle):
//!
//! - `run`: `cicada run` itself: settle the command line (`run::setup`), join
//!   the fleet, run one step per `[sweep]` value, build each finished step's
//!   results once (`run::finish`) and hand every event to the run's outputs
//!   (`cicada_results::sink::Sinks`: files, console, progress, live, web).
//! - `cli`: the arguments, and the scenario they describe (`--set`, gate
//!   flags, `vllm bench serve`'s flags).
//! - `step`: one step over the fleet: assign, wait until ready, barrier,
//!   collect events until every worker is done or lost, handing what the
//!   merge finalises to the outputs.
//! - `progress`, `live`: outputs of a running step (bar or log lines, and
//!   the Prometheus exposition of `--metrics-addr`, served by
//!   `cicada-serve`'s loop like the web UI).
//! - the web UI (`--web`) is the `cicada-web` crate: the run keeps its
//!   board (an output, `BoardSink`) and answers what the page asks.
//! - `merge`: worker reports merged exactly, cumulative and per interval
//!   (`ReportMerge`: the same merge from a report's bytes, for the bench).
//! - `fleet`: the only wire edge: the gRPC service, local workers, and the
//!   decoding of worker messages into domain events and `MetricSet`s.
//! - `cap`: the fleet-wide `max_concurrency` (sums the workers' progress,
//!   admits waiting workers in global request order; a gone worker's
//!   requests count as ended).
//! - `audit`: reports checked against the coordinator's own plan before
//!   they are merged.
//! - `pool`, `sweep`, `signals`, `error`: leaves (request pool, sweep
//!   values, SIGINT/SIGTERM, how a command ends).

mod audit;
mod cap;
pub mod cli;
mod dry_run;
mod error;
mod fleet;
mod live;
mod merge;
mod pool;
mod progress;
mod run;
mod signals;
mod step;
mod sweep;

use cicada_mock::{MockServer, TlsFiles};

use crate::cli::{MockArgs, RunArgs, ValidateArgs};

pub use dry_run::{DryRun, Sample, Spread, WorkerShare};
pub use error::{FleetError, RunEnd, RunError, StepError};
pub use merge::{MergeError, ReportMerge};
pub use run::repeat::{Repeated, RunDone, Runs};

/// `cicada run`: run the scenario over a fleet; how it ended.
pub async fn run(args: RunArgs) -> Result<RunEnd, RunError> {
    run::run(args).await
}

/// `cicada run` as `[run] repeats` / `--num-runs` asks: once, or N
/// independent runs under `run-<i>/` for the binary to summarise.
pub async fn run_repeated(args: RunArgs) -> Result<Runs, RunError> {
    run::repeat::run(args).await
}

/// `cicada run --dry-run`: the run's pool and plans built as a run builds
/// them, described; nothing is sent.
pub async fn dry_run(args: RunArgs) -> Result<DryRun, RunError> {
    dry_run::dry_run(&args).await
}

/// `cicada validate`: check a scenario file; the line saying it is good.
pub fn validate(args: &ValidateArgs) -> Result<String, RunError> {
    let l = cli::scenario::load(&args.scenario, &args.sets)?;
    Ok(format!("{}: ok ({})", l.origin, l.scenario.name))
}

fn read_tls(args: &MockArgs) -> Result<Option<TlsFiles>, RunError> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| RunError::BadInput(format!("{}: {e}", p.display())))
    };
    Ok(Some(TlsFiles {
        cert_pem: read(cert)?,
        key_pem: read(key)?,
    }))
}

/// `cicada mock`: serve the built-in mock until a signal.
pub async fn mock(args: MockArgs) -> Result<(), RunError> {
    let tls = read_tls(&args)?;
    let server = MockServer::start_with(args.config, args.listen, tls)
        .await
        .map_err(|e| RunError::BadInput(e.to_string()))?;
    println!("cicada mock serving on {}", server.url());
    let mut signals = signals::Signals::install();
    let sig = signals.next().await;
    eprintln!("mock: {sig}, stopping");
    Ok(())
}

//! How a command ends: what can go wrong ([`RunError`]) and how a run that
//! went through ended ([`RunEnd`]); the binary turns each into an exit code
//! (docs/guide/results.md, "Exit codes").

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cicada_probe::ResolveError;
use cicada_probe::hooks::HookError;
use cicada_results::error::WriteError;
use cicada_results::gates::GateKind;
use cicada_scenarios::ScenarioError;

/// How a run that got to its end ended, worst first: what CI gates on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// A signal (`"SIGINT"`, `"SIGTERM"`) stopped it; partial results were written.
    Stopped(&'static str),
    /// An `[abort]` threshold stopped a step; the results so far were written.
    Aborted,
    /// Workers were lost; the result is degraded.
    Degraded,
    /// A run gate failed (or most requests did).
    GateFailed(GateKind),
    /// Every step ran and every gate passed.
    Passed,
}

/// What stopped a command before it could end on its own.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad scenario or inputs: the message says what and where.
    #[error("{0}")]
    BadInput(String),
    /// A signal stopped the run before it had anything to write.
    #[error("{message}")]
    Interrupted {
        signal: &'static str,
        message: String,
    },
    /// The target could not be resolved, or was not ready.
    #[error(transparent)]
    Target(#[from] ResolveError),
    /// The fleet could not be started or assembled.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// A step could not run.
    #[error(transparent)]
    Step(#[from] StepError),
    /// A server hook (`[hooks]`) failed: the run stopped there, with the
    /// results of the steps before it written.
    #[error(transparent)]
    Hook(#[from] HookError),
    /// A result file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The thread building the request pool ended without a pool.
    #[error("building the request pool failed: {0}")]
    Pool(tokio::task::JoinError),
    /// The web UI stopped while the run waited for its start form.
    #[error("the web UI stopped")]
    WebStopped,
}

/// Why the fleet could not be started or assembled.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The worker port could not be bound.
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The bound worker port could not be read back.
    #[error("reading the listening address")]
    LocalAddr(#[source] std::io::Error),
    /// The worker port's TLS settings were refused.
    #[error("configuring TLS for the worker port")]
    Tls(#[source] tonic::transport::Error),
    /// Local workers were to use TLS, but no trust for them was settled.
    #[error("TLS for local workers was not settled")]
    TlsNotSettled,
    /// This executable's path is unknown (local workers run it).
    #[error("locating the cicada executable")]
    WorkerBin(#[source] std::io::Error),
    /// A local worker process could not be started.
    #[error("cannot start the worker {}", bin.display())]
    Spawn {
        bin: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not every expected worker joined in time; `notes` says which local
    /// workers exited and which were refused.
    #[error("only {joined} of {expected} workers joined within {waited:?}{notes}")]
    Incomplete {
        joined: usize,
        expected: u32,
        waited: Duration,
        notes: String,
    },
    /// A local worker of an all-local fleet exited before the run started.
    #[error("a local worker exited before the run started: {0}")]
    LocalExited(String),
    /// The gRPC server workers talk to stopped.
    #[error("the gRPC server stopped")]
    ServerStopped,
}

/// Why a step could not run.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// Every worker was lost before this step could be planned.
    #[error("every worker was lost: no worker is left for the next step")]
    NoWorkerLeft,
    /// Workers did not say they were ready in time.
    #[error("workers did not get ready within {0:?}")]
    NotReady(Duration),
    /// A worker cannot run the step's plan.
    #[error("worker {worker} cannot run the stage: {message}")]
    WorkerFailed { worker: u32, message: String },
    /// Every worker was lost before the step's start.
    #[error("every worker was lost before the step started")]
    AllLostBeforeStart,
    /// The gRPC server workers talk to stopped.
    #[error("the gRPC server stopped")]
    ServerStopped,
}

impl From<ScenarioError> for RunError {
    fn from(e: ScenarioError) -> Self {
        RunError::BadInput(e.to_string())
    }
}

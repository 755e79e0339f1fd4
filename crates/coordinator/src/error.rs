//! How a command ends: what can go wrong ([`RunError`]) and how a run that
//! went through ended ([`RunEnd`]); the binary turns each into an exit code
//! (docs/guide/results.md, "Exit codes").

use cicada_results::gates::GateKind;
use cicada_scenarios::ScenarioError;

/// How a run that got to its end ended, worst first: what CI gates on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// A signal (`"SIGINT"`, `"SIGTERM"`) stopped it; partial results were written.
    Stopped(&'static str),
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
    /// Anything else.
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

impl From<ScenarioError> for RunError {
    fn from(e: ScenarioError) -> Self {
        RunError::BadInput(e.to_string())
    }
}

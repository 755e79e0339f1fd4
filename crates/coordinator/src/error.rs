//! What can go wrong in a command, and the exit code each outcome gives, so
//! that CI pipelines can gate on a run (docs/guide/results.md, "Exit codes").

use cicada_scenarios::ScenarioError;

pub use cicada_results::exit::{EXIT_BAD_INPUT, EXIT_DEGRADED, exit_code_of};

/// Errors with their exit codes.
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

impl RunError {
    /// The process exit code for this error, printing it to stderr.
    pub fn report(&self) -> i32 {
        match self {
            RunError::BadInput(msg) => {
                eprintln!("error: {msg}");
                EXIT_BAD_INPUT
            }
            RunError::Interrupted { signal, message } => {
                eprintln!("cicada: {message}");
                exit_code_of(signal)
            }
            RunError::Failed(e) => {
                eprintln!("error: {e:#}");
                1
            }
        }
    }
}

impl From<ScenarioError> for RunError {
    fn from(e: ScenarioError) -> Self {
        RunError::BadInput(e.to_string())
    }
}

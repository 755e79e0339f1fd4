//! What can go wrong in a command, and the exit code each outcome gives, so
//! that CI pipelines can gate on a run (README, "Exit codes").

use cicada_scenarios::ScenarioError;

/// Exit code: the scenario or its inputs are invalid.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code: workers were lost; the result is degraded.
pub const EXIT_DEGRADED: i32 = 3;
/// Exit code: more requests failed than `output.max_failure_ratio` allows.
pub const EXIT_FAILURE_RATIO: i32 = 4;
/// Exit code: fewer requests met the SLO than `slo.min_attainment` asks.
pub const EXIT_SLO_GATE: i32 = 5;
/// Exit code: interrupted by a signal; partial results were written.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Errors with their exit codes.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad scenario or inputs: the message says what and where.
    #[error("{0}")]
    BadInput(String),
    /// A signal stopped the run before it had anything to write.
    #[error("{0}")]
    Interrupted(String),
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
            RunError::Interrupted(msg) => {
                eprintln!("coord: {msg}");
                EXIT_INTERRUPTED
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

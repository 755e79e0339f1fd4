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
/// Exit code after SIGINT: 128 + its number, as shells report it; partial
/// results were written.
pub const EXIT_SIGINT: i32 = 130;
/// Exit code after SIGTERM (128 + 15).
pub const EXIT_SIGTERM: i32 = 143;

/// The exit code of a run stopped by the signal named `signal`.
pub fn exit_code_of(signal: &str) -> i32 {
    if signal == "SIGTERM" {
        EXIT_SIGTERM
    } else {
        EXIT_SIGINT
    }
}

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
                eprintln!("coord: {message}");
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

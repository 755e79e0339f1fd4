//! The exit code each way a command can end, so that CI pipelines can gate
//! on a run (docs/guide/results.md, "Exit codes"). The libraries say how a
//! command ended (typed errors, [`RunEnd`]); only this module turns that
//! into a number, and prints the error that explains it.

use cicada_coordinator::{RunEnd, RunError};
use cicada_results::gates::GateKind;
use cicada_worker::{LinkError, WorkerError};

/// Exit code: the scenario or its inputs are invalid.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code: workers were lost; the result is degraded.
pub const EXIT_DEGRADED: i32 = 3;
/// Exit code: more requests failed than `output.max_failure_ratio` allows.
pub const EXIT_FAILURE_RATIO: i32 = 4;
/// Exit code: fewer requests met the SLO than `slo.min_attainment` asks.
pub const EXIT_SLO_GATE: i32 = 5;
/// Exit code of `cicada compare`: a `--fail-if` threshold was crossed.
pub const EXIT_COMPARE_GATE: i32 = 6;
/// Exit code: a server hook (`[hooks]`: prefix-cache reset, profiler start
/// or stop) failed; the run stopped there, the steps before it written.
pub const EXIT_HOOK_FAILED: i32 = 7;
/// Exit code: an `[abort]` threshold stopped a step mid-run (k6 exits 99
/// for its `abortOnFail`; cicada keeps its codes small and distinct).
pub const EXIT_ABORTED: i32 = 8;
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

/// `cicada run` and `web`: how the run ended, or why it could not.
pub fn of_run(outcome: Result<RunEnd, RunError>) -> i32 {
    match outcome {
        Ok(RunEnd::Passed) => 0,
        Ok(RunEnd::Stopped(signal)) => exit_code_of(signal),
        Ok(RunEnd::Aborted) => EXIT_ABORTED,
        Ok(RunEnd::Degraded) => EXIT_DEGRADED,
        Ok(RunEnd::GateFailed(GateKind::MaxFailureRatio)) => EXIT_FAILURE_RATIO,
        Ok(RunEnd::GateFailed(GateKind::MinSloAttainment)) => EXIT_SLO_GATE,
        Err(e) => of_error(&e),
    }
}

/// A command's error on stderr; its exit code.
pub fn of_error(e: &RunError) -> i32 {
    match e {
        RunError::BadInput(msg) => {
            eprintln!("error: {msg}");
            EXIT_BAD_INPUT
        }
        RunError::Interrupted { signal, message } => {
            eprintln!("cicada: {message}");
            exit_code_of(signal)
        }
        RunError::Hook(_) => {
            eprintln!("error: {}", with_causes(e));
            EXIT_HOOK_FAILED
        }
        // the target, the fleet, a step, a result file, the pool's thread,
        // the web UI: the error and its causes
        e => {
            eprintln!("error: {}", with_causes(e));
            1
        }
    }
}

/// `e` and each error that caused it, outermost first: `what: why: why`.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// `cicada worker`: 0 when the run ended, else why the worker left.
pub fn of_worker(outcome: Result<(), WorkerError>) -> i32 {
    let Err(e) = outcome else {
        return 0;
    };
    eprintln!("worker: {e}");
    match e {
        WorkerError::Tls(_) | WorkerError::Token(_) => EXIT_BAD_INPUT,
        WorkerError::Runtime(_) => 1,
        WorkerError::Link(link) => match link {
            LinkError::Unreachable { .. } | LinkError::Lost(_) => 3,
            LinkError::Rejected(_) => 4,
            LinkError::Protocol(_) => 5,
            LinkError::Step(_) => 6,
            LinkError::Left(r) => r.exit_code,
        },
    }
}

/// `cicada report`: 0, or 2 for unusable files or arguments.
pub fn of_report(outcome: Result<(), cicada_report::cli::ReportError>) -> i32 {
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_BAD_INPUT
        }
    }
}

/// `cicada compare`: 0, 6 when a `--fail-if` threshold was crossed, or 2
/// for unusable files, thresholds or arguments.
pub fn of_compare(
    outcome: Result<cicada_report::compare::CompareEnd, cicada_report::compare::CompareError>,
) -> i32 {
    use cicada_report::compare::CompareEnd;
    match outcome {
        Ok(CompareEnd::Passed) => 0,
        Ok(CompareEnd::GateFailed) => EXIT_COMPARE_GATE,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_BAD_INPUT
        }
    }
}

/// `cicada selftest`: 0, or 1 with the error when a level fails.
#[cfg(feature = "bench")]
pub fn of_selftest(outcome: anyhow::Result<()>) -> i32 {
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

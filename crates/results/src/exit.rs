//! The exit code each way a command can end, so that CI pipelines can gate
//! on a run (docs/guide/results.md, "Exit codes"); the results' gates and verdicts set
//! some of them.

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

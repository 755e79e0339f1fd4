//! Issue 22: what a run writes for whoever reads it. Log lines carry colour
//! only on a terminal and never with `NO_COLOR`, so a log file or a pipe
//! holds no escape codes; and a run whose requests mostly failed says so on
//! its last line.

use std::time::Duration;

use cicada_tests::tty::coord_run_on_tty;
use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);
const ESC: &str = "\x1b[";

/// A small run against the embedded mock, `extra` appended to the scenario.
fn scenario(dir: &std::path::Path, extra: &str) -> String {
    format!(
        r#"
name = "output"
seed = 3
[target]
backend = "mock"
[mock]
ttft_ms = 2
itl_ms = 1
[dataset]
kind = "random"
input_len = 8
output_len = 4
[load]
num_prompts = 40
max_concurrency = 8
[output]
dir = "{}"
html = false
{extra}
"#,
        dir.join("out").display()
    )
}

/// Both binaries log (info), so both binaries' lines are checked.
fn assert_both_logged(stderr: &str) {
    assert!(stderr.contains("cicada_coordinator"), "{stderr}");
    assert!(stderr.contains("cicada_worker"), "{stderr}");
}

#[test]
fn logs_written_to_a_pipe_carry_no_escape_codes() {
    let _g = serial();
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(dir.path(), ""));
    let run = coord_run_env(
        &["run", sc.to_str().unwrap(), "--workers", "1"],
        &[("CICADA_LOG", "info")],
        LIMIT,
    );
    assert_ok(&run);
    assert_both_logged(&run.stderr);
    assert!(
        !run.stderr.contains(ESC),
        "escape codes in a piped stderr:\n{}",
        run.stderr.escape_debug()
    );
}

#[test]
fn a_terminal_gets_colour_unless_no_color_is_set() {
    let _g = serial();
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(dir.path(), ""));
    let args = ["run", sc.to_str().unwrap(), "--workers", "1", "--headless"];
    // (NO_COLOR value or unset, colour expected): an empty value does not
    // disable colour (https://no-color.org)
    for (no_color, coloured) in [(None, true), (Some("1"), false), (Some(""), true)] {
        let mut env = vec![("CICADA_LOG", "info")];
        if let Some(v) = no_color {
            env.push(("NO_COLOR", v));
        }
        let run = coord_run_on_tty(&args, &env, LIMIT);
        assert_ok(&run);
        assert_both_logged(&run.stderr);
        assert_eq!(
            run.stderr.contains(ESC),
            coloured,
            "NO_COLOR={no_color:?}:\n{}",
            run.stderr.escape_debug()
        );
        if coloured {
            // the worker's lines too, not only the coordinator's
            let worker = run
                .stderr
                .lines()
                .find(|l| l.contains("cicada_worker"))
                .unwrap_or_default();
            assert!(worker.contains(ESC), "{}", worker.escape_debug());
        }
    }
}

/// Run the scenario with `extra` and flags; returns the run and result.json.
fn run_mock(extra: &str, flags: &[&str]) -> (Run, serde_json::Value) {
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(dir.path(), extra));
    let mut args = vec!["run", sc.to_str().unwrap(), "--workers", "2", "--quiet"];
    args.extend_from_slice(flags);
    let run = coord_run(&args, LIMIT);
    let j = read_json(&dir.path().join("out").join("result.json"));
    (run, j)
}

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or_default()
}

#[test]
fn a_run_whose_requests_mostly_failed_says_so_on_its_last_line() {
    let _g = serial();
    let faults = "[mock.faults]\nhttp_500 = 0.96\n";
    let (run, j) = run_mock(faults, &[]);
    let (failed, sent) = (j["failed"].as_u64().unwrap(), 40);
    assert_eq!(j["completed"].as_u64().unwrap() + failed, sent);
    assert!(failed * 2 > sent, "the mock failed only {failed} of {sent}");
    // 0.96 of 40 may fail them all
    let said = if failed == sent {
        format!("RUN FAILED: all {sent} requests failed (http_500: {sent})")
    } else {
        format!("RUN MOSTLY FAILED: {failed} of {sent} requests failed (http_500: {failed})")
    };
    assert_eq!(
        last_line(&run.stdout),
        format!(
            "{said}; exit code 4 (more than half failed; output.max_failure_ratio sets another limit)"
        ),
        "{}",
        run.stdout
    );
    assert_eq!(run.code, Some(4), "{}", run.stderr);

    // an explicit limit decides the exit code; the last line still says it
    let (run, j) = run_mock(faults, &["--max-failure-ratio", "1"]);
    assert_ok(&run);
    let failed = j["failed"].as_u64().unwrap();
    assert!(
        last_line(&run.stdout).starts_with("RUN ")
            && last_line(&run.stdout).contains(&format!("(http_500: {failed})"))
            && !last_line(&run.stdout).contains("exit code"),
        "{}",
        run.stdout
    );

    // a few failures: the result block ends the output, exit 0
    let (run, j) = run_mock("[mock.faults]\nhttp_500 = 0.1\n", &[]);
    assert_ok(&run);
    assert!(j["failed"].as_u64().unwrap() < 20);
    assert!(!run.stdout.contains("RUN "), "{}", run.stdout);
    assert!(
        last_line(&run.stdout).starts_with("====="),
        "{}",
        run.stdout
    );
}

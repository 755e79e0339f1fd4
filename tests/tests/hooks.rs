//! Server hooks (`[hooks]`, `--reset-prefix-cache`, `--profile`; issue 38
//! item 5) against `cicada mock` processes, which log every hook call with
//! what they had served when it came (`GET /mock/hooks`): each hook is
//! called once per server (not per worker) around every step of a sweep
//! and every run of `--num-runs`, in order, with the run's API key; a
//! reset empties the mock's prefix cache (its `/metrics` hits stay flat on
//! the next identical run); a failing hook stops the run with exit code 7
//! and an error naming the hook, the URL and the status, the steps before
//! it written.

use std::path::Path;
use std::time::Duration;

use cicada_tests::{Mock, Run, assert_ok, coord_run, coord_run_env, read_json, scratch, write};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);
/// The exit code of a failed server hook (crates/cli/src/exit.rs).
const EXIT_HOOK_FAILED: i32 = 7;
const KEY: &str = "hook-test-key";

/// `GET /mock/hooks`.
fn hooks(mock: &Mock) -> Vec<Value> {
    match cicada_tests::get_json(&format!("{}/mock/hooks", mock.url)) {
        Value::Array(a) => a,
        other => panic!("/mock/hooks is not an array: {other}"),
    }
}

/// A scenario against `urls`, `prompts` requests per step.
fn scenario(urls: &[&str], prompts: u32, more: &str) -> String {
    let urls: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    format!(
        r#"
name = "hooks"
[target]
backend = "openai"
urls = [{}]
model = "cicada-mock"
api_key_env = "CICADA_HOOKS_KEY"
[dataset]
kind = "random"
input_len = 40
output_len = 2
[load]
num_prompts = {prompts}
max_concurrency = 2
{more}
"#,
        urls.join(", ")
    )
}

/// `cicada run <dir>/<name>.toml --output-dir <dir>/out-<name> <extra>` with the API key set.
fn run(dir: &Path, name: &str, text: &str, extra: &[&str]) -> Run {
    let sc = write(dir, &format!("{name}.toml"), text);
    let out = dir.join(format!("out-{name}"));
    let mut args = vec![
        "run",
        sc.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    coord_run_env(&args, &[("CICADA_HOOKS_KEY", KEY)], LIMIT)
}

fn routes(log: &[Value]) -> Vec<&str> {
    log.iter().map(|h| h["route"].as_str().unwrap()).collect()
}

/// Two servers, two workers, a two-point sweep, two runs: every step gets
/// exactly one reset and one profile start before it and one stop after
/// it on each server, in that order, with nothing in flight; the requests
/// the step sent fall between its start and its stop; each step's
/// result.json lists its six calls and the console shows each.
#[test]
fn hooks_run_once_per_server_around_every_step_of_a_sweep_and_every_run() {
    let dir = scratch();
    let a = Mock::start_env(
        &["--ttft-ms", "5", "--itl-ms", "1"],
        &[("CICADA_MOCK_API_KEY", KEY)],
    );
    let b = Mock::start_env(
        &["--ttft-ms", "5", "--itl-ms", "1"],
        &[("CICADA_MOCK_API_KEY", KEY)],
    );
    let text = scenario(&[&a.url, &b.url], 8, "[sweep]\nmax_concurrency = [1, 2]");
    let r = run(
        dir.path(),
        "sweep",
        &text,
        &[
            "--workers",
            "2",
            "--num-runs",
            "2",
            "--reset-prefix-cache",
            "vllm",
            "--profile",
        ],
    );
    assert_ok(&r);
    let (runs, steps, per_step) = (2, 2, 8u64);
    let mut sent_by_step = vec![0u64; runs * steps];
    for mock in [&a, &b] {
        let log = hooks(mock);
        let want: Vec<&str> = (0..runs * steps)
            .flat_map(|_| ["/reset_prefix_cache", "/start_profile", "/stop_profile"])
            .collect();
        assert_eq!(routes(&log), want, "{}: {log:?}", mock.url);
        for (k, step) in log.chunks(3).enumerate() {
            for h in step {
                assert_eq!(h["status"], 200, "{h}");
                assert_eq!(h["authorized"], true, "the run's API key: {h}");
                assert_eq!(h["in_flight"], 0, "nothing in flight at a hook: {h}");
            }
            let (reset, start, stop) = (&step[0], &step[1], &step[2]);
            assert_eq!(reset["requests"], start["requests"], "{step:?}");
            let sent = stop["requests"].as_u64().unwrap() - start["requests"].as_u64().unwrap();
            assert_eq!(stop["completed"], stop["requests"], "{step:?}");
            sent_by_step[k] += sent;
        }
    }
    assert_eq!(
        sent_by_step,
        vec![per_step; runs * steps],
        "each step's requests all fall between its hooks"
    );
    let out = dir.path().join("out-sweep");
    for run in 1..=runs {
        for stage in 1..=steps {
            let file = out.join(format!("run-{run}/result-stage{stage}.json"));
            let j = read_json(&file);
            let calls = j["cicada"]["hooks"]
                .as_array()
                .unwrap_or_else(|| panic!("{file:?}"));
            let names: Vec<(&str, &str)> = calls
                .iter()
                .map(|c| (c["name"].as_str().unwrap(), c["when"].as_str().unwrap()))
                .collect();
            let before = [("reset_prefix_cache", "before"); 2]
                .into_iter()
                .chain([("start_profile", "before"); 2])
                .chain([("stop_profile", "after"); 2]);
            assert_eq!(names, before.collect::<Vec<_>>(), "{file:?}");
            for c in calls {
                assert_eq!(c["status"], 200, "{c}");
                assert_eq!(c["ok"], true, "{c}");
                assert!(c["duration_ms"].as_f64().unwrap() >= 0.0, "{c}");
                assert!(c["at_unix"].as_f64().unwrap() > 1.7e9, "{c}");
            }
            let urls: Vec<&str> = calls.iter().map(|c| c["url"].as_str().unwrap()).collect();
            assert_eq!(urls[0], format!("{}/reset_prefix_cache", a.url));
            assert_eq!(urls[1], format!("{}/reset_prefix_cache", b.url));
            assert_eq!(urls[5], format!("{}/stop_profile", b.url));
        }
    }
    let lines = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("cicada: server hook "))
        .count();
    assert_eq!(lines, runs * steps * 6, "{}", r.stderr);
}

/// The mock's prefix cache as vLLM's: the same prompts twice hit the cache
/// the second time, unless `reset_prefix_cache = true` empties it between
/// (`cicada.server.prefix_cache_hits`, the step's change of the mock's
/// `vllm:prefix_cache_hits_total`).
#[test]
fn a_reset_between_identical_runs_leaves_the_second_without_cache_hits() {
    let dir = scratch();
    let mock = Mock::start_env(
        &["--ttft-ms", "2", "--itl-ms", "1"],
        &[("CICADA_MOCK_API_KEY", KEY)],
    );
    let hits = |name: &str, more: &str| {
        let text =
            scenario(&[&mock.url], 6, more).replace("backend = \"openai\"", "backend = \"vllm\"");
        assert_ok(&run(dir.path(), name, &text, &["--set", "seed=3"]));
        let j = read_json(&dir.path().join(format!("out-{name}/result.json")));
        j["cicada"]["server"]["prefix_cache_hits"]
            .as_f64()
            .unwrap_or_else(|| panic!("{name}: no prefix_cache_hits in {}", j["cicada"]["server"]))
    };
    // the readiness probe sends the first prompt before the run: its blocks
    // hit once in a run without a reset
    let first = hits("first", "");
    let again = hits("again", "");
    assert!(
        again > first,
        "the same prompts again hit the cache: {again} after {first}"
    );
    let reset = hits("reset", "[hooks]\nreset_prefix_cache = true");
    assert_eq!(reset, 0.0, "after the reset (after the probe too), no hits");
    assert_eq!(routes(&hooks(&mock)), ["/reset_prefix_cache"]);
}

/// A hook route the server does not serve (404) before the first step:
/// exit 7, the error names the hook, its URL and the status, and nothing
/// was sent or written.
#[test]
fn a_hook_the_server_does_not_serve_stops_the_run_before_any_request() {
    let dir = scratch();
    let mock = Mock::start_env(&[], &[("CICADA_MOCK_API_KEY", KEY)]);
    let text = scenario(
        &[&mock.url],
        4,
        "[hooks]\nreset_prefix_cache = \"/no/such/route\"",
    );
    let r = run(dir.path(), "missing", &text, &[]);
    assert_eq!(r.code, Some(EXIT_HOOK_FAILED), "{}", r.stderr);
    let want = format!(
        "error: server hook reset_prefix_cache failed at {}/no/such/route: HTTP 404",
        mock.url
    );
    assert!(r.stderr.contains(&want), "want {want:?} in:\n{}", r.stderr);
    assert_eq!(mock.stats()["requests"], 0, "nothing was measured");
    assert!(!dir.path().join("out-missing/result.json").exists());
}

/// Hooks that fail with a 500 later in a sweep: a failed reset before step
/// 2 leaves step 1 written and stops before step 2 sends anything; a failed
/// profiler stop after step 1 keeps step 1 (its result lists the failed
/// call) and stops there.
#[test]
fn a_hook_that_fails_mid_sweep_keeps_the_steps_before_it() {
    let dir = scratch();
    for (name, ok_calls, failed, when) in [
        ("reset", "3", "reset_prefix_cache", "before"),
        ("stop", "2", "stop_profile", "after"),
    ] {
        let mock = Mock::start_env(
            &[
                "--ttft-ms",
                "2",
                "--itl-ms",
                "1",
                "--hook-status",
                "500",
                "--hook-ok-calls",
                ok_calls,
            ],
            &[("CICADA_MOCK_API_KEY", KEY)],
        );
        let more = "[hooks]\nreset_prefix_cache = \"vllm\"\nprofile = true\n[sweep]\nmax_concurrency = [1, 2]";
        let text = scenario(&[&mock.url], 4, more);
        let r = run(dir.path(), name, &text, &[]);
        assert_eq!(r.code, Some(EXIT_HOOK_FAILED), "{name}: {}", r.stderr);
        let route = if failed == "stop_profile" {
            "/stop_profile"
        } else {
            "/reset_prefix_cache"
        };
        let want = format!(
            "error: server hook {failed} failed at {}{route}: HTTP 500",
            mock.url
        );
        assert!(
            r.stderr.contains(&want),
            "{name}: want {want:?} in:\n{}",
            r.stderr
        );
        assert!(
            r.stderr.contains("on purpose (hook_status)"),
            "the body is quoted: {}",
            r.stderr
        );
        let out = dir.path().join(format!("out-{name}"));
        let first = read_json(&out.join("result-stage1.json"));
        assert_eq!(first["completed"], 4, "{name}: step 1 ran whole");
        assert!(
            !out.join("result-stage2.json").exists(),
            "{name}: no step 2"
        );
        assert_eq!(mock.stats()["requests"], 4, "{name}: step 2 sent nothing");
        let calls = first["cicada"]["hooks"].as_array().unwrap();
        let last = calls.last().unwrap();
        if when == "after" {
            assert_eq!(last["name"], "stop_profile", "{name}: {calls:?}");
            assert_eq!(last["status"], 500);
            assert_eq!(last["ok"], false);
            assert!(
                last["error"].as_str().unwrap().contains("hook_status"),
                "{last}"
            );
        } else {
            assert!(calls.iter().all(|c| c["ok"] == true), "{name}: {calls:?}");
        }
    }
}

/// `reset_prefix_cache = true` needs a backend that names an engine;
/// misspelled values are refused; both name the file, line and key.
#[test]
fn bad_hook_settings_name_the_file_line_and_key() {
    let dir = scratch();
    let text = "[target]\nbackend = \"openai-chat\"\nbase_url = \"http://127.0.0.1:9\"\n[hooks]\nreset_prefix_cache = true\n";
    let sc = write(dir.path(), "engine.toml", text);
    let r = coord_run(&["validate", sc.to_str().unwrap()], LIMIT);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "engine.toml:5: `hooks.reset_prefix_cache`: true takes the route from target.backend"
        ),
        "{}",
        r.stderr
    );
    let sc = write(
        dir.path(),
        "typo.toml",
        "[target]\nbackend = \"mock\"\n[hooks]\nreset_prefix_cache = \"vlm\"\n",
    );
    let r = coord_run(&["validate", sc.to_str().unwrap()], LIMIT);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("typo.toml:4") && r.stderr.contains("`hooks.reset_prefix_cache`"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("\"vllm\", \"sglang\" or a path"),
        "{}",
        r.stderr
    );
    let r = coord_run(
        &[
            "validate",
            sc.to_str().unwrap(),
            "--set",
            "hooks.reset_prefix_cache=sglang",
            "--set",
            "hooks.timeout=0s",
        ],
        LIMIT,
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("`hooks.timeout`"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("reset_prefix_cache"),
        "the --set replaced the typo: {}",
        r.stderr
    );
}

//! Issue 22: readiness honours `target.ready_timeout` at every step. A
//! server that accepts connections and never answers (on its health route,
//! its model list or the test request) stops the run after the readiness
//! timeout, not after `target.timeout`; a redirect stops it at once, naming
//! the status and where it points.

use std::time::{Duration, Instant};

use cicada_tests::scripted::{Reply, Scripted};
use cicada_tests::*;

/// A run that hangs is a failure; no case here may come near this.
const LIMIT: Duration = Duration::from_secs(90);
/// The bound the issue sets for a 3 s readiness timeout.
const GIVE_UP_WITHIN: Duration = Duration::from_secs(15);

const MODELS: &str = r#"{"object":"list","data":[{"id":"scripted-model","object":"model"}]}"#;

fn scenario(url: &str, ready_timeout: &str) -> String {
    format!(
        r#"
name = "readiness"
seed = 1
[target]
backend = "openai-chat"
base_url = "{url}"
ready_timeout = "{ready_timeout}"
[dataset]
kind = "random"
input_len = 8
output_len = 4
[load]
num_prompts = 4
"#
    )
}

/// Run `cicada run` against `server`; returns the run and its wall time.
fn run_against(server: &Scripted, ready_timeout: &str) -> (Run, Duration) {
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", &scenario(&server.url, ready_timeout));
    let out = dir.path().join("out");
    // builds the binaries when stale: not part of the time measured
    let _ = cicada();
    let started = Instant::now();
    let run = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "1",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        LIMIT,
    );
    (run, started.elapsed())
}

/// Health and model list answer; `post` decides the test request's fate.
fn serving_until_the_test_request(post: Reply) -> Scripted {
    Scripted::start(move |method, path| match (method, path) {
        ("GET", "/health") => Reply::json("{}"),
        ("GET", "/v1/models") => Reply::json(MODELS),
        _ => post.clone(),
    })
}

#[test]
fn a_silent_server_is_given_up_on_after_the_readiness_timeout() {
    let _g = serial();
    let cases: [(&str, Scripted, &str); 3] = [
        (
            "silent on every route",
            Scripted::start(|_, _| Reply::Silent),
            "is not ready",
        ),
        (
            "silent on the model list",
            Scripted::start(|_, path| match path {
                "/health" => Reply::json("{}"),
                _ => Reply::Silent,
            }),
            "cannot discover the model id",
        ),
        (
            "silent on the test request",
            serving_until_the_test_request(Reply::Silent),
            "the test request",
        ),
    ];
    for (what, server, step) in cases {
        let (run, took) = run_against(&server, "3s");
        assert_eq!(run.code, Some(1), "{what}: {}", run.stderr);
        assert!(
            took < GIVE_UP_WITHIN,
            "{what}: gave up after {took:?}\n{}",
            run.stderr
        );
        assert!(
            took >= Duration::from_millis(2900),
            "{what}: gave up before the readiness timeout, after {took:?}\n{}",
            run.stderr
        );
        assert!(run.stderr.contains(step), "{what}: {}", run.stderr);
        assert!(
            run.stderr.contains("target.ready_timeout = 3s"),
            "{what}: {}",
            run.stderr
        );
        assert!(
            run.stderr
                .contains("no answer before the readiness deadline"),
            "{what}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_redirect_stops_the_readiness_check_at_once_naming_its_location() {
    let _g = serial();
    let cases: [(&str, Scripted, &str, &str); 3] = [
        (
            "health route moved permanently",
            Scripted::start(|_, _| Reply::redirect(301, "https://elsewhere.invalid:8443/health")),
            "HTTP 301",
            "Location: https://elsewhere.invalid:8443/health",
        ),
        (
            "model list redirected",
            Scripted::start(|_, path| match path {
                "/health" => Reply::json("{}"),
                _ => Reply::redirect(308, "/api/v1/models"),
            }),
            "HTTP 308",
            "Location: /api/v1/models",
        ),
        (
            "test request redirected",
            serving_until_the_test_request(Reply::redirect(307, "/v1/chat/completions/")),
            "HTTP 307",
            "Location: /v1/chat/completions/",
        ),
    ];
    for (what, server, status, location) in cases {
        // a long readiness timeout: only failing at once keeps this short
        let (run, took) = run_against(&server, "60s");
        assert_eq!(run.code, Some(1), "{what}: {}", run.stderr);
        assert!(
            took < GIVE_UP_WITHIN,
            "{what}: took {took:?}, the redirect was retried\n{}",
            run.stderr
        );
        assert!(run.stderr.contains(status), "{what}: {}", run.stderr);
        assert!(run.stderr.contains(location), "{what}: {}", run.stderr);
        // the Location comes from the one answer: the redirected request
        // (a test request's prompt, too) is never sent twice
        let last = server.seen().last().cloned().unwrap_or_default();
        let redirected = server.seen().iter().filter(|r| **r == last).count();
        assert_eq!(redirected, 1, "{what}: {:?}", server.seen());
    }
}

//! cicada's `triton` backend against a real NVIDIA Triton Inference Server
//! (`tritonserver` 2.51 from PyPI's `nvidia-pytriton`, installed by
//! `scripts/triton-server.sh`; CPU only) serving the tests' own tiny Python
//! model with the interface of Triton's vLLM backend: Triton's generate
//! extension maps cicada's JSON to the model's tensors and parameters and
//! frames its responses (SSE for `generate_stream`, one JSON for `generate`).
//! Streamed and not, with the model discovered from Triton's repository index:
//! every request answered, the request count equal to Triton's own
//! `/metrics`, and the prompt and output tokens equal to the model's record of
//! each request (the words it read and wrote), `sampling_parameters` and
//! `exclude_input_in_output` as the model received them. An error the model
//! raises mid-stream (after the HTTP 200 went out) or before a whole answer,
//! and Triton's own error for a whole answer sent in pieces (an HTTP 200
//! with an `{"error"}` body), fail the request with that message.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_triton`.

use std::path::Path;
use std::time::Duration;

use cicada_tests::triton::TritonServer;
use cicada_tests::*;
use serde_json::Value;

const PROMPTS: u64 = 64;
const INPUT: u64 = 24;
const OUTPUT: u64 = 16;
const CONCURRENCY: u32 = 8;

/// A Prometheus sample's value by its full name with labels, 0 when absent
/// (Triton lists a model's counters once it served it).
fn prom(page: &str, series: &str) -> u64 {
    page.lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0, |v| v as u64)
}

/// Requests Triton itself counts as answered for the tiny model.
fn served(server: &TritonServer) -> u64 {
    let (status, page) = get_text(&format!("{}/metrics", server.metrics_url));
    assert_eq!(status, 200, "{page}");
    prom(
        &page,
        r#"nv_inference_request_success{model="tiny",version="1"}"#,
    )
}

/// One run of the tiny model, streamed or not, its model discovered; returns result.json.
fn run(server: &TritonServer, stream: bool, out: &Path) -> Value {
    let (n, i, o, c) = (
        PROMPTS.to_string(),
        INPUT.to_string(),
        OUTPUT.to_string(),
        CONCURRENCY.to_string(),
    );
    let s = format!("target.stream={stream}");
    let r = coord_run(
        &[
            "run",
            "--backend",
            "triton",
            "--base-url",
            &server.url,
            "--tokenizer",
            server.tokenizer.to_str().unwrap(),
            "--dataset-name",
            "random",
            "--random-input-len",
            &i,
            "--random-output-len",
            &o,
            "--num-prompts",
            &n,
            "--max-concurrency",
            &c,
            "--set",
            &s,
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        Duration::from_secs(300),
    );
    assert_eq!(
        r.code,
        Some(0),
        "stream={stream}\nstdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        server.log()
    );
    read_json(&out.join("result.json"))
}

#[test]
fn every_request_completes_streamed_and_not_by_the_servers_own_counts() {
    let _g = serial();
    let server = TritonServer::start(2);
    let mut seen = 0;
    for stream in [true, false] {
        let what = format!("triton stream={stream}");
        let before = served(&server);
        let out = scratch();
        let j = run(&server, stream, out.path());
        let outcomes = &j["cicada"]["outcomes"];
        assert_eq!(j["completed"], PROMPTS, "{what}: {outcomes}");
        assert_eq!(j["failed"], 0, "{what}: {outcomes}");
        assert_eq!(
            j["model_id"], "tiny",
            "{what}: discovered from the repository index"
        );
        // Triton's count: the run's requests and the readiness probe
        assert_eq!(served(&server) - before, PROMPTS + 1, "{what}");
        // the model's record of each: the probe first, then the run's
        let records = server.requests();
        let run = &records[seen + 1..];
        seen = records.len();
        assert_eq!(run.len() as u64, PROMPTS, "{what}: {}", server.log());
        for r in run {
            assert_eq!(r["stream"], stream, "{what}: {r}");
            assert_eq!(r["exclude_input_in_output"], true, "{what}: {r}");
            assert_eq!(
                r["sampling_parameters"]["max_tokens"], OUTPUT,
                "{what}: {r}"
            );
            assert_eq!(r["sampling_parameters"]["ignore_eos"], true, "{what}: {r}");
            // fields that are no input reach the model as request parameters
            assert_eq!(r["parameters"]["min_length"], OUTPUT, "{what}: {r}");
        }
        let sum = |key: &str| run.iter().map(|r| r[key].as_u64().unwrap()).sum::<u64>();
        // no usage from Triton: the tokenizer counts what came back, and the
        // prompt as built, both equal to the model's own counts
        assert_eq!(j["total_output_tokens"], sum("output_tokens"), "{what}");
        assert_eq!(j["total_output_tokens"], PROMPTS * OUTPUT, "{what}");
        assert_eq!(j["cicada"]["token_sources"]["tokenizer"], PROMPTS, "{what}");
        assert_eq!(j["total_input_tokens"], sum("prompt_tokens"), "{what}");
        assert_eq!(j["total_input_tokens"], PROMPTS * INPUT, "{what}");
        assert_eq!(
            j["cicada"]["counters"]["short_outputs"]
                .as_u64()
                .unwrap_or(0),
            0
        );
        if stream {
            // one SSE event per token the model sent
            assert_eq!(
                j["cicada"]["counters"]["content_events"],
                PROMPTS * OUTPUT,
                "{what}"
            );
            assert!(j["mean_ttft_ms"].as_f64().unwrap() > 0.0, "{what}");
            assert!(j["mean_itl_ms"].as_f64().unwrap() > 0.0, "{what}");
        }
    }
}

/// A run of 12 requests that all fail: `extra_body` (fields the model
/// takes as request parameters) makes the model misbehave. Returns the
/// outcome they failed with and its first error.
fn failing_run(server: &TritonServer, stream: bool, extra_body: &str) -> (String, String) {
    let what = format!("triton stream={stream} {extra_body}");
    let dir = scratch();
    let text = format!(
        r#"
[target]
backend = "triton"
base_url = "{url}"
model = "tiny"
stream = {stream}
ready_timeout = "0s"
[tokenizer]
source = "{tok}"
[dataset]
kind = "random"
input_len = 8
output_len = 8
[sampling]
extra_body = {extra_body}
[load]
num_prompts = 12
max_concurrency = 4
"#,
        url = server.url,
        tok = server.tokenizer.display()
    );
    let (r, j) = run_scenario(
        dir.path(),
        "fail",
        &text,
        "1",
        &[],
        Duration::from_secs(300),
    );
    assert!(
        j.is_object(),
        "{what}: no result\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    let outcomes = &j["cicada"]["outcomes"];
    assert_eq!(j["completed"], 0, "{what}: {outcomes}");
    assert_eq!(j["failed"], 12, "{what}: {outcomes}");
    let (kind, outcome) = outcomes
        .as_object()
        .and_then(|o| o.iter().find(|(k, _)| k.as_str() != "ok"))
        .unwrap_or_else(|| panic!("{what}: {outcomes}"));
    assert_eq!(outcome["count"], 12, "{what}: {outcomes}");
    let message = outcome["first_error"].as_str().unwrap_or_default();
    (kind.clone(), message.to_string())
}

/// A model error: mid-stream, after Triton sent its HTTP 200 and some
/// tokens, it comes as an SSE event `{"error": ...}`; before a whole answer,
/// as an HTTP 400 with the same JSON. Either way the request fails with the
/// model's message.
#[test]
fn a_model_error_fails_the_request_with_tritons_message() {
    let _g = serial();
    let server = TritonServer::start(1);
    let (kind, message) = failing_run(&server, true, "{ fail_after = 3 }");
    assert_eq!(kind, "server_error_event", "in band: {message}");
    assert!(
        message.contains("cicada-tiny: failed after 3 tokens"),
        "{message}"
    );
    let (kind, message) = failing_run(&server, false, "{ fail_after = 3 }");
    assert_eq!(kind, "http_400", "{message}");
    assert!(
        message.contains("cicada-tiny: failed after 3 tokens"),
        "{message}"
    );
}

/// A model that answers a whole request (`stream` false, `/generate`) in
/// several responses: Triton answers HTTP 200 with an `{"error": ...}`
/// body of its own, and every request fails with its message.
#[test]
fn a_whole_answer_in_pieces_fails_with_tritons_own_error() {
    let _g = serial();
    let server = TritonServer::start(1);
    let (kind, message) = failing_run(&server, false, "{ split_whole = true }");
    assert_eq!(kind, "server_error_event", "{message}");
    assert!(message.contains("exactly 1 response"), "{message}");
}

//! Tool calls and JSON-schema answers under load against a real vLLM server
//! that enforces them with its structured outputs (xgrammar), through cicada's
//! `openai-chat`: not one request fails, every tool call's arguments and every
//! answer parse against their schema (no `invalid_output`), and the output
//! tokens are the server's own count (its `/metrics`). The same schema sent
//! only to cicada's check (the server not told) is broken by the free-running
//! tiny model, and every such answer is caught as `invalid_output`.
//!
//! The server: vLLM 0.32's CPU build with the tiny random-weight model of
//! `scripts/vllm-server.sh` (a byte-level tokenizer, so a grammar-forced
//! answer decodes to exactly the JSON the grammar allowed). vLLM takes
//! `tool_choice` naming a function or `"required"` only with
//! `--enable-auto-tool-choice` and a `--tool-call-parser` (the parser must
//! accept the tokenizer: `pythonic` does); it then forces the arguments with
//! the function's parameters schema. `disable_any_whitespace` keeps the random
//! model from padding JSON with whitespace until `max_tokens` runs out.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_vllm_structured`.

use std::time::Duration;

use cicada_tests::servers::VllmServer;
use cicada_tests::*;
use serde_json::Value;

/// The server's flags: tool choice on, xgrammar without free whitespace.
const FLAGS: &[&str] = &[
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "pythonic",
    "--structured-outputs-config",
    r#"{"backend": "xgrammar", "disable_any_whitespace": true}"#,
];

const LIMIT: Duration = Duration::from_secs(900);

/// A function whose arguments are bounded, so a forced call ends well within
/// `max_tokens`.
const TOOLS: &str = "tools = [{ type = \"function\", function = { name = \"get_weather\", parameters = { type = \"object\", required = [\"city\", \"days\"], additionalProperties = false, properties = { city = { type = \"string\", minLength = 2, maxLength = 12 }, days = { type = \"integer\", minimum = 1, maximum = 9 } } } } }]\n";

/// A response format whose answers are bounded likewise.
const FORMAT: &str = "response_format = { type = \"json_schema\", json_schema = { name = \"city\", schema = { type = \"object\", required = [\"city\", \"n\"], additionalProperties = false, properties = { city = { type = \"string\", maxLength = 8 }, n = { type = \"integer\", minimum = 0, maximum = 999 } } } } }\n";

fn server() -> &'static VllmServer {
    VllmServer::shared_with(FLAGS)
}

/// A scenario of `n` random prompts with `[structured]` holding `structured`.
fn scenario(n: u64, stream: bool, output_len: u32, structured: &str) -> String {
    let v = server();
    format!(
        r#"
seed = 5
[target]
backend = "openai-chat"
base_url = "{url}"
model = "{model}"
stream = {stream}
[tokenizer]
source = "{tok}"
[dataset]
kind = "random"
input_len = 12
output_len = {output_len}
[load]
num_prompts = {n}
max_concurrency = 4
[sampling]
ignore_eos = false
[structured]
{structured}
[output]
max_failure_ratio = 1.0
"#,
        url = v.url,
        model = v.name,
        tok = v.model.display(),
    )
}

fn outcome(j: &Value, class: &str) -> u64 {
    j["cicada"]["outcomes"][class]["count"]
        .as_u64()
        .unwrap_or(0)
}

/// Nothing failed, nothing broke its shape, and the output tokens are the
/// server's usage and its own `/metrics` count of generated tokens.
fn check_all_valid(j: &Value, n: u64, what: &str) {
    let outcomes = &j["cicada"]["outcomes"];
    assert_eq!(j["completed"], n, "{what}: {outcomes}");
    assert_eq!(j["failed"], 0, "{what}: {outcomes}");
    assert_eq!(outcome(j, "invalid_output"), 0, "{what}: {outcomes}");
    assert_eq!(j["cicada"]["token_sources"]["usage"], n, "{what}");
    let out = j["total_output_tokens"].as_u64().unwrap_or(0);
    // a forced call or answer is a few dozen tokens, never nothing
    assert!(out >= n * 8, "{what}: {out} output tokens");
    let srv = &j["cicada"]["server"];
    assert_eq!(srv["source"], "vllm", "{what}: {srv}");
    assert_eq!(
        srv["requests_finished"].as_f64(),
        Some(n as f64),
        "{what}: {srv}"
    );
    assert_eq!(
        srv["generation_tokens"].as_f64(),
        Some(out as f64),
        "{what}: the server's own count of generated tokens: {srv}"
    );
}

/// Runs of `n` requests with `choice`, streamed and whole, each checked.
fn forced_calls(choice: &str, how: &str, output_len: u32) {
    let dir = scratch();
    let mut seen = Vec::new();
    for stream in [true, false] {
        let n = if stream { 16 } else { 8 };
        let name = format!("tools-{how}-{stream}");
        let text = scenario(n, stream, output_len, &format!("{choice}{TOOLS}"));
        let (r, j) = run_scenario(dir.path(), &name, &text, "2", &[], LIMIT);
        assert_ok(&r);
        check_all_valid(&j, n, &name);
        seen.push(format!(
            "{name}: {} output tokens",
            j["total_output_tokens"]
        ));
    }
    eprintln!("{}", seen.join("\n"));
}

/// `tool_choice` naming the function, streamed and whole: every request
/// ends in a call whose arguments follow the parameters.
#[test]
fn a_named_tool_choice_gives_calls_that_parse_against_their_parameters() {
    let _g = serial();
    let named = "tool_choice = { type = \"function\", function = { name = \"get_weather\" } }\n";
    forced_calls(named, "named", 96);
}

/// `tool_choice = "required"`: vLLM forces a JSON array of one or more
/// calls, so the random model may chain several; `max_tokens` leaves room
/// for dozens (a call is under 50 tokens), so none is cut short.
#[test]
fn a_required_tool_choice_gives_calls_that_parse_against_their_parameters() {
    let _g = serial();
    forced_calls("tool_choice = \"required\"\n", "required", 1500);
}

/// A JSON schema vLLM enforces holds for every answer; the same schema sent
/// only to cicada's check (`check_only`) is broken by every free answer, and
/// each is caught: as `invalid_output`, or as `empty` when the answer has
/// no content at all.
#[test]
fn a_json_schema_it_enforces_holds_and_one_it_was_not_told_is_caught() {
    let _g = serial();
    let dir = scratch();
    const N: u64 = 16;
    for check_only in [false, true] {
        let name = format!("schema-{check_only}");
        let text = scenario(N, true, 64, &format!("check_only = {check_only}\n{FORMAT}"));
        let (r, j) = run_scenario(dir.path(), &name, &text, "2", &[], LIMIT);
        assert_ok(&r);
        let outcomes = &j["cicada"]["outcomes"];
        if check_only {
            // a free answer the random model ends at once carries no
            // content: caught as `empty`, which cicada checks first
            let caught = outcome(&j, "invalid_output") + outcome(&j, "empty");
            assert_eq!(caught, N, "{outcomes}");
            assert!(outcome(&j, "invalid_output") > 0, "{outcomes}");
            assert_eq!(j["failed"], N, "{outcomes}");
        } else {
            check_all_valid(&j, N, &name);
        }
    }
}

//! Issue 25: the Responses (`openai-responses`) and Messages
//! (`anthropic-messages`) backends through real `coord` and `worker`
//! processes against `cicada mock --api <api>`: streamed and not, counts from
//! the server's usage, the limit in each API's field, Anthropic's key header,
//! a conversation's system message where Anthropic wants it, and the sampling
//! keys their routes cannot carry refused before anything is sent.

use std::path::Path;
use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);
const PROMPTS: u64 = 24;
const OUTPUT: u64 = 8;

fn scenario(target: &str, dataset: &str, body: &str) -> String {
    format!(
        "name = \"apis\"\nseed = 5\n[target]\n{target}\n[dataset]\n{dataset}\n[load]\nnum_prompts = {PROMPTS}\nrequest_rate = \"inf\"\nmax_concurrency = 6\n{body}\n"
    )
}

const RANDOM: &str = "kind = \"random\"\ninput_len = 12\noutput_len = 8";

/// `cicada run` on a scenario text with two workers; the run and result.json.
fn run(dir: &Path, text: &str, env: &[(&str, &str)]) -> (Run, serde_json::Value) {
    let sc = write(dir, "s.toml", text);
    let out = dir.join("out");
    let r = coord_run_env(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "2",
            "--output-dir",
            out.to_str().unwrap(),
            "--quiet",
        ],
        env,
        LIMIT,
    );
    let j = if out.join("result.json").exists() {
        read_json(&out.join("result.json"))
    } else {
        serde_json::Value::Null
    };
    (r, j)
}

#[test]
fn responses_and_messages_complete_every_request_streamed_and_not() {
    let _g = serial();
    for (backend, route) in [
        ("openai-responses", "/v1/responses"),
        ("anthropic-messages", "/v1/messages"),
    ] {
        for stream in [true, false] {
            let what = format!("{backend} stream={stream}");
            let key = "sk-apis-test";
            let mock = Mock::start_env(
                &["--ttft-ms", "3", "--itl-ms", "1", "--api", backend],
                &[("CICADA_MOCK_API_KEY", key)],
            );
            let dir = scratch();
            let target = format!(
                "backend = \"{backend}\"\nbase_url = \"{}\"\nstream = {stream}\napi_key_env = \"CICADA_APIS_KEY\"",
                mock.url
            );
            let (r, j) = run(
                dir.path(),
                &scenario(&target, RANDOM, ""),
                &[("CICADA_APIS_KEY", key)],
            );
            assert_ok(&r);
            assert_eq!(
                j["completed"].as_u64(),
                Some(PROMPTS),
                "{what}\n{}",
                r.stdout
            );
            assert_eq!(j["failed"].as_u64(), Some(0), "{what}");
            assert_eq!(
                j["total_output_tokens"].as_u64(),
                Some(PROMPTS * OUTPUT),
                "{what}"
            );
            assert_eq!(j["cicada"]["token_source"], "usage", "{what}");
            // the model id came from the server's /v1/models
            assert_eq!(j["model_id"], "cicada-mock", "{what}");
            // the prompt tokens are the server's count: the mock's ground truth
            let stats = mock.stats();
            assert_eq!(
                j["total_input_tokens"], stats["prompt_tokens"],
                "{what}: {stats}"
            );
            let m = &j["cicada"]["metrics"];
            assert_eq!(m["e2el"]["count"].as_u64(), Some(PROMPTS), "{what}");
            if stream {
                assert_eq!(m["ttft"]["count"].as_u64(), Some(PROMPTS), "{what}");
                assert!(j["mean_ttft_ms"].as_f64().unwrap() >= 3.0, "{what}");
                // one event per token: 7 gaps per request
                assert_eq!(
                    m["itl"]["count"].as_u64(),
                    Some(PROMPTS * (OUTPUT - 1)),
                    "{what}"
                );
            } else {
                assert!(m.get("ttft").is_none(), "{what}: {m}");
            }
            let log = mock.requests();
            assert_eq!(log.len() as u64, PROMPTS, "{what}");
            for q in &log {
                assert_eq!(q["path"], route, "{what}");
                assert_eq!(q["stream"], stream, "{what}");
                // max_output_tokens / max_tokens, each API's spelling, read by the mock
                assert_eq!(q["max_tokens"].as_u64(), Some(OUTPUT), "{what}: {q}");
            }
        }
    }
}

#[test]
fn a_conversation_reaches_messages_with_its_system_prompt_apart() {
    let _g = serial();
    let mock = Mock::start(&[
        "--ttft-ms",
        "2",
        "--itl-ms",
        "1",
        "--api",
        "anthropic-messages",
    ]);
    let dir = scratch();
    let line = r#"{"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "name three rivers"}]}"#;
    let jsonl = write(dir.path(), "chat.jsonl", &format!("{line}\n{line}\n"));
    let target = format!(
        "backend = \"anthropic-messages\"\nbase_url = \"{}\"",
        mock.url
    );
    let dataset = format!(
        "kind = \"jsonl\"\npath = \"{}\"\noutput_len = 4",
        jsonl.display()
    );
    let (r, j) = run(dir.path(), &scenario(&target, &dataset, ""), &[]);
    assert_ok(&r);
    assert_eq!(j["completed"].as_u64(), Some(PROMPTS));
    // the mock counts Anthropic's `system` as part of the prompt: 3 + 3 words
    assert_eq!(j["total_input_tokens"].as_u64(), Some(PROMPTS * 6));
    for q in mock.requests() {
        let roles: Vec<&str> = q["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user"], "{q}");
    }
}

#[test]
fn keys_their_routes_cannot_carry_fail_validation_naming_backend_and_key() {
    let _g = serial();
    for (backend, sampling, key) in [
        (
            "anthropic-messages",
            "ignore_eos = true",
            "sampling.ignore_eos",
        ),
        (
            "anthropic-messages",
            "min_tokens = 3",
            "sampling.min_tokens",
        ),
        ("openai-responses", "min_tokens = 3", "sampling.min_tokens"),
    ] {
        let mock = Mock::start(&["--api", backend]);
        let dir = scratch();
        let target = format!("backend = \"{backend}\"\nbase_url = \"{}\"", mock.url);
        let (r, j) = run(
            dir.path(),
            &scenario(&target, RANDOM, &format!("[sampling]\n{sampling}")),
            &[],
        );
        assert_eq!(r.code, Some(2), "{backend} {sampling}\n{}", r.stderr);
        assert!(j.is_null(), "{backend}: nothing ran");
        assert!(
            r.stderr.contains(key) && r.stderr.contains(&format!("\"{backend}\"")),
            "{backend} {sampling}: {}",
            r.stderr
        );
        assert_eq!(mock.stats()["requests"].as_u64(), Some(0), "{backend}");
    }
}

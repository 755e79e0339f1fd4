//! cicada against a real llama.cpp `llama-server` that reasons: a chat
//! template llama.cpp recognises as reasoning-capable (`<think>` blocks,
//! Qwen3's shape), `--reasoning-format deepseek`, and a GBNF grammar on each
//! request forcing the tiny random model's output into
//! `<think>thinking</think>answer`. The server streams the thinking as
//! `reasoning_content` deltas and the answer as `content`; cicada's time to
//! first answer token and reasoning token count are checked against the
//! server's own stream.
//!
//! Run alone: `cargo test -p cicada-tests --test real_llamacpp_reasoning`.

use std::time::Duration;

use cicada_tests::raw::{events, post};
use cicada_tests::servers::LlamaServer;
use cicada_tests::*;
use serde_json::Value;

/// Qwen3's chat template reduced to what llama.cpp's template analysis needs
/// to find the reasoning markers.
const TEMPLATE: &str = r#"{%- for message in messages %}
{%- if message.role == "assistant" %}
{%- set reasoning_content = '' %}
{%- if message.reasoning_content is string %}{%- set reasoning_content = message.reasoning_content %}{%- endif %}
{{- '<|im_start|>assistant\n' }}
{%- if reasoning_content %}{{- '<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' }}{%- endif %}
{{- message.content + '<|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}
"#;

/// Thinking, then an answer, each of lowercase letters and spaces.
const GRAMMAR: &str = r#"root ::= "<think>" [a-z ]{8,40} "</think>" [a-z ]{4,40}"#;
const PROMPT: &str = "Think first, then answer.";
const REQUESTS: u64 = 6;

/// What the server's own stream says of one answer: reasoning deltas, the
/// tokens they carried by the server's running count (`timings.predicted_n`
/// at the last reasoning delta less its value before the first), and the
/// output tokens.
#[derive(Debug, PartialEq)]
struct Truth {
    reasoning_deltas: u64,
    reasoning_tokens: u64,
    output_tokens: u64,
}

fn truth(stream: &[Value]) -> Truth {
    let (mut deltas, mut before, mut last_reasoning, mut seen_answer) = (0, 0, 0, false);
    let mut output = 0;
    for e in stream {
        let predicted = e["timings"]["predicted_n"].as_u64();
        let delta = &e["choices"][0]["delta"];
        let reasoning = delta["reasoning_content"]
            .as_str()
            .is_some_and(|t| !t.is_empty());
        let answer = delta["content"].as_str().is_some_and(|t| !t.is_empty());
        if reasoning {
            assert!(!seen_answer, "thinking after the answer began: {e}");
            deltas += 1;
            last_reasoning = predicted.unwrap();
        } else if deltas == 0
            && let Some(p) = predicted
        {
            before = p;
        }
        seen_answer |= answer;
        if let Some(c) = e["usage"]["completion_tokens"].as_u64() {
            output = c;
        }
    }
    assert!(
        seen_answer && deltas > 0,
        "not thinking then answering: {stream:?}"
    );
    Truth {
        reasoning_deltas: deltas,
        reasoning_tokens: last_reasoning - before,
        output_tokens: output,
    }
}

/// The same greedy request every time: the server's raw stream is the
/// truth; cicada's run sends it again and again and must report, per
/// request, the first answer delta as its time to first answer token and
/// the server's count of reasoning tokens; the fleet-wide figures add up.
#[test]
fn time_to_first_answer_and_reasoning_tokens_match_the_servers_stream() {
    let _g = serial();
    let dir = scratch();
    let template = write(dir.path(), "think.jinja", TEMPLATE);
    let server = LlamaServer::start_with(
        1,
        512,
        &[
            "--chat-template-file",
            template.to_str().unwrap(),
            "--reasoning-format",
            "deepseek",
        ],
    );
    let body = serde_json::json!({
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 64, "stream": true, "temperature": 0.0,
        "stream_options": {"include_usage": true},
        "timings_per_token": true, "grammar": GRAMMAR,
    });
    let (status, text) = post(&format!("{}/v1/chat/completions", server.url), &body);
    assert_eq!(status, 200, "{text}");
    let t = truth(&events(&text));
    // greedy: the same stream again
    let (_, again) = post(&format!("{}/v1/chat/completions", server.url), &body);
    assert_eq!(
        truth(&events(&again)),
        t,
        "the server is not deterministic here"
    );

    let line = serde_json::json!({"messages": [{"role": "user", "content": PROMPT}]});
    let data = write(dir.path(), "p.jsonl", &format!("{line}\n"));
    let grammar = serde_json::to_string(GRAMMAR).unwrap();
    let scenario = write(
        dir.path(),
        "s.toml",
        &format!(
            r#"
[target]
backend = "openai-chat"
base_url = "{url}"
[dataset]
kind = "jsonl"
path = "{data}"
output_len = 64
[load]
num_prompts = {REQUESTS}
max_concurrency = 1
[sampling]
temperature = 0.0
ignore_eos = false
extra_body = {{ grammar = {grammar}, timings_per_token = true }}
[output]
dir = "{out}"
save_detailed = true
"#,
            url = server.url,
            data = data.display(),
            out = dir.path().join("out").display(),
        ),
    );
    let r = coord_run(
        &["run", scenario.to_str().unwrap()],
        Duration::from_secs(300),
    );
    assert_ok(&r);
    let j = read_json(&dir.path().join("out/result.json"));
    assert_eq!(j["completed"], REQUESTS, "{}", j["cicada"]["outcomes"]);
    // output tokens include the thinking, as the server counts them
    assert_eq!(j["total_output_tokens"], REQUESTS * t.output_tokens);
    let c = &j["cicada"]["counters"];
    assert_eq!(c["reasoning_requests"], REQUESTS);
    assert_eq!(c["reasoning_tokens"], REQUESTS * t.reasoning_tokens);
    // llama-server reports no reasoning count: the events' running counts give it
    assert_eq!(c["reasoning_token_source_events"], REQUESTS);
    let m = &j["cicada"]["metrics"];
    assert_eq!(m["ttfa"]["count"], REQUESTS);
    assert!(
        m["ttfa"]["mean"].as_f64() > m["ttft"]["mean"].as_f64(),
        "{m}"
    );
    assert!(
        r.stdout.contains("Reasoning (answer apart from thinking)"),
        "{}",
        r.stdout
    );
    let lines = std::fs::read_to_string(dir.path().join("out/requests.jsonl")).unwrap();
    for l in lines.lines() {
        let l: Value = serde_json::from_str(l).unwrap();
        let reasoning = &l["reasoning"];
        assert_eq!(reasoning["events"], t.reasoning_deltas, "{l}");
        assert_eq!(reasoning["tokens"], t.reasoning_tokens, "{l}");
        assert_eq!(reasoning["token_source"], "events", "{l}");
        // the first answer event is the content event right after the
        // last reasoning delta, and TTFA is its arrival after the send
        let events = l["events"].as_array().unwrap();
        let first_answer = &events[t.reasoning_deltas as usize];
        assert_eq!(
            reasoning["answer"][0]["at_us"], first_answer["at_us"],
            "{l}"
        );
        let sent = l["sent_us"].as_u64().unwrap();
        let at = first_answer["at_us"].as_u64().unwrap();
        let ttfa_ms = l["ttfa_ms"].as_f64().unwrap();
        assert!((ttfa_ms * 1e3 - (at - sent) as f64).abs() < 1.0, "{l}");
        assert!(ttfa_ms > l["ttft_ms"].as_f64().unwrap(), "{l}");
        let last_reasoning = reasoning["last_us"].as_u64().unwrap();
        assert_eq!(
            Some(last_reasoning),
            events[t.reasoning_deltas as usize - 1]["at_us"].as_u64(),
            "{l}"
        );
    }
}

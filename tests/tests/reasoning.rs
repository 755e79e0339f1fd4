//! Issue 25, reasoning measured apart: a reasoning model's answer latency,
//! thinking time and tokens, checked through the real `coord` and `worker`
//! binaries against the built-in mock's configured timing and counts.

use std::path::Path;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);
const REQUESTS: u64 = 32;
/// The mock's timing: first token after TTFT, then one token per ITL.
const TTFT_MS: f64 = 40.0;
const ITL_MS: f64 = 5.0;
/// Output tokens per request, and how many of them are thinking.
const OUTPUT: u64 = 40;
const THINKING: u64 = 16;

fn scenario(mock_url: &str, slo: &str) -> String {
    scenario_on(mock_url, "openai-chat", true, slo)
}

fn scenario_on(mock_url: &str, backend: &str, stream: bool, slo: &str) -> String {
    format!(
        r#"
name = "reasoning"
seed = 5
[target]
backend = "{backend}"
base_url = "{mock_url}"
model = "cicada-mock"
stream = {stream}
[dataset]
input_len = 16
output_len = {OUTPUT}
[load]
num_prompts = {REQUESTS}
request_rate = "inf"
max_concurrency = 8
[output]
save_detailed = true
{slo}
"#
    )
}

fn run(dir: &Path, text: &str) -> (Value, Vec<Value>) {
    let sc = write(dir, "s.toml", text);
    let out = dir.join("out");
    let args = [
        "run",
        sc.to_str().unwrap(),
        "--workers",
        "2",
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ];
    let r = coord_run(&args, LIMIT);
    assert_ok(&r);
    let lines = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let lines = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (read_json(&out.join("result.json")), lines)
}

/// `got` is no earlier than `truth` (the mock never sends early) and no
/// later than the mock's own measured lateness plus 5 % (at least 2 ms).
fn at_or_after(got: f64, truth: f64, late_ms: f64, what: &str) {
    let slack = (truth * 0.05).max(2.0);
    assert!(
        got >= truth - 0.5 && got <= truth + late_ms + slack,
        "{what}: got {got:.3} ms, truth {truth:.3} ms (+{late_ms:.3} ms late, ±{slack:.3})"
    );
}

/// Sixteen thinking tokens before a 24-token answer: TTFT keeps vLLM's
/// meaning (the first thinking token), TTFA is the 17th token, thinking
/// lasts 16 gaps, and the answer's ITL and TPOT are the mock's ITL. The
/// server's reasoning count is read from usage; output tokens include it.
/// Every request's own line agrees: TTFA is its first answer event.
#[test]
fn the_answer_is_timed_apart_from_the_thinking() {
    let _g = serial();
    let mock = Mock::start(&[
        "--ttft-ms",
        "40",
        "--itl-ms",
        "5",
        "--reasoning-tokens",
        "16",
    ]);
    let dir = scratch();
    // a TTFA bound between TTFT and the answer's truth: no request meets it
    let (j, lines) = run(dir.path(), &scenario(&mock.url, "[slo]\nttfa_ms = 100"));
    let late = mock.stats()["lateness"].clone();
    let first_late_ms = late["first_event_mean_us"].as_f64().unwrap() / 1e3;
    let mean_late_ms = late["mean_us"].as_f64().unwrap() / 1e3;
    assert_eq!(j["completed"].as_u64(), Some(REQUESTS));
    let m = &j["cicada"]["metrics"];
    let mean = |k: &str| m[k]["mean"].as_f64().unwrap_or_else(|| panic!("{k}: {m}"));
    let ttfa_truth = TTFT_MS + THINKING as f64 * ITL_MS;
    at_or_after(mean("ttft"), TTFT_MS, first_late_ms, "mean TTFT");
    at_or_after(mean("ttfa"), ttfa_truth, mean_late_ms, "mean TTFA");
    let thinking_ms = THINKING as f64 * ITL_MS;
    let r = mean("reasoning_time");
    assert!(
        (r - thinking_ms).abs() <= thinking_ms * 0.05 + mean_late_ms + 2.0,
        "reasoning time {r:.3} ms, truth {thinking_ms} ms"
    );
    for k in ["answer_itl", "answer_tpot"] {
        let v = mean(k);
        assert!(
            (v - ITL_MS).abs() <= 1.0,
            "{k}: {v:.3} ms, truth {ITL_MS} ms"
        );
    }
    // one answer ITL sample per answer token after the first
    let answer = OUTPUT - THINKING;
    assert_eq!(
        m["answer_itl"]["count"].as_u64(),
        Some(REQUESTS * (answer - 1))
    );
    let c = &j["cicada"]["counters"];
    assert_eq!(c["reasoning_requests"].as_u64(), Some(REQUESTS));
    assert_eq!(c["reasoning_tokens"].as_u64(), Some(REQUESTS * THINKING));
    assert_eq!(c["reasoning_token_source_usage"].as_u64(), Some(REQUESTS));
    assert_eq!(j["total_output_tokens"].as_u64(), Some(REQUESTS * OUTPUT));
    // vLLM's key keeps vLLM's meaning: the first token of any kind
    at_or_after(
        j["mean_ttft_ms"].as_f64().unwrap(),
        TTFT_MS,
        first_late_ms,
        "mean_ttft_ms",
    );
    // the answer bound fails every request; goodput says so
    assert_eq!(j["request_goodput"].as_f64(), Some(0.0));
    assert_eq!(lines.len() as u64, REQUESTS);
    for l in &lines {
        let reasoning = &l["reasoning"];
        assert_eq!(reasoning["tokens"].as_u64(), Some(THINKING), "{l}");
        assert_eq!(reasoning["events"].as_u64(), Some(THINKING), "{l}");
        let first_answer = reasoning["answer"][0]["at_us"].as_u64().unwrap();
        let sent = l["sent_us"].as_u64().unwrap();
        let ttfa_ms = l["ttfa_ms"].as_f64().unwrap();
        assert!(
            (ttfa_ms * 1e3 - (first_answer - sent) as f64).abs() < 1.0,
            "{l}"
        );
        // the answer begins after the last thinking event, at the 17th content event
        let events = l["events"].as_array().unwrap();
        assert_eq!(
            events[THINKING as usize]["at_us"].as_u64(),
            Some(first_answer),
            "{l}"
        );
        assert!(reasoning["last_us"].as_u64().unwrap() < first_answer, "{l}");
        assert!(ttfa_ms >= ttfa_truth - 0.5, "{l}");
    }
}

/// vLLM 0.32's `reasoning` field without a usage count: the reasoning
/// tokens are counted from the reasoning events (source `events`); a TTFA
/// bound the answers meet counts every request as good.
#[test]
fn the_newer_reasoning_field_is_read_and_counted_from_events() {
    let _g = serial();
    let mock = Mock::start(&[
        "--ttft-ms",
        "40",
        "--itl-ms",
        "5",
        "--reasoning-tokens",
        "16",
        "--reasoning-field",
        "reasoning",
        "--usage",
        "false",
    ]);
    let dir = scratch();
    let (j, _) = run(dir.path(), &scenario(&mock.url, "[slo]\nttfa_ms = 60000"));
    let c = &j["cicada"]["counters"];
    assert_eq!(c["reasoning_requests"].as_u64(), Some(REQUESTS));
    assert_eq!(c["reasoning_tokens"].as_u64(), Some(REQUESTS * THINKING));
    assert_eq!(c["reasoning_token_source_events"].as_u64(), Some(REQUESTS));
    assert_eq!(
        j["cicada"]["metrics"]["ttfa"]["count"].as_u64(),
        Some(REQUESTS)
    );
    let goodput = j["request_goodput"].as_f64().unwrap();
    let throughput = j["request_throughput"].as_f64().unwrap();
    assert!(
        (goodput - throughput).abs() < 1e-9,
        "{goodput} vs {throughput}"
    );
}

/// A model that does not reason reports none of the reasoning figures:
/// absent, not zero, in result.json and in every request's line.
#[test]
fn without_reasoning_the_figures_are_absent() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1"]);
    let dir = scratch();
    let (j, lines) = run(dir.path(), &scenario(&mock.url, ""));
    let m = j["cicada"]["metrics"].as_object().unwrap();
    for k in ["ttfa", "reasoning_time", "answer_tpot", "answer_itl"] {
        assert!(!m.contains_key(k), "{k} present without reasoning");
    }
    let c = j["cicada"]["counters"].as_object().unwrap();
    assert!(!c.keys().any(|k| k.starts_with("reasoning")), "{c:?}");
    for l in &lines {
        for k in ["reasoning", "ttfa_ms", "reasoning_ms", "answer_tpot_ms"] {
            assert!(l.get(k).is_none(), "{k} in {l}");
        }
    }
}

/// Responses and Messages think in an item or block of their own before the
/// answer: streamed, TTFA is the first answer token and the thinking is
/// counted, from Responses' usage and from Messages' events (Anthropic's
/// usage has no thinking count); whole, the answer's thinking is still
/// counted and output tokens include it.
#[test]
fn responses_and_messages_time_the_answer_apart_from_the_thinking() {
    let _g = serial();
    let mock = Mock::start(&[
        "--ttft-ms",
        "40",
        "--itl-ms",
        "5",
        "--reasoning-tokens",
        "16",
    ]);
    let ttfa_truth = TTFT_MS + THINKING as f64 * ITL_MS;
    for (backend, source) in [
        ("openai-responses", "usage"),
        ("anthropic-messages", "events"),
    ] {
        let dir = scratch();
        let text = scenario_on(&mock.url, backend, true, "");
        let (j, lines) = run(dir.path(), &text);
        let late = mock.stats()["lateness"].clone();
        let mean_late_ms = late["mean_us"].as_f64().unwrap() / 1e3;
        let what = format!("{backend} streamed");
        let c = all_reasoned(&j, &what);
        assert_eq!(
            c["reasoning_tokens"].as_u64(),
            Some(REQUESTS * THINKING),
            "{what}: {c}"
        );
        let key = format!("reasoning_token_source_{source}");
        assert_eq!(c[key.as_str()].as_u64(), Some(REQUESTS), "{what}: {c}");
        let ttfa = j["cicada"]["metrics"]["ttfa"]["mean"].as_f64().unwrap();
        at_or_after(
            ttfa,
            ttfa_truth,
            mean_late_ms,
            &format!("{what}: mean TTFA"),
        );
        for l in &lines {
            assert_eq!(
                l["reasoning"]["events"].as_u64(),
                Some(THINKING),
                "{what}: {l}"
            );
        }
        let dir = scratch();
        let (j, _) = run(dir.path(), &scenario_on(&mock.url, backend, false, ""));
        all_reasoned(&j, &format!("{backend} whole"));
    }
}

/// Every request completed at its full length (thinking included) and
/// reasoned; the counters, for more checks.
fn all_reasoned<'a>(j: &'a Value, what: &str) -> &'a Value {
    assert_eq!(j["completed"].as_u64(), Some(REQUESTS), "{what}");
    assert_eq!(
        j["total_output_tokens"].as_u64(),
        Some(REQUESTS * OUTPUT),
        "{what}"
    );
    let c = &j["cicada"]["counters"];
    assert_eq!(
        c["reasoning_requests"].as_u64(),
        Some(REQUESTS),
        "{what}: {c}"
    );
    c
}

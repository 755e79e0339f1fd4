//! Synthetic multi-turn sessions against a real `llama-server` with its
//! prompt cache (issue 37, item 1): each turn carries the whole history, so
//! the server serves a later turn's prompt from the slot that holds the
//! session (`timings.cache_n`, recorded per request as `cached_tokens`). The
//! cached tokens rise with the turn index and are what the workload
//! predicts: turn k (k ≥ 2) finds the previous turn's whole prompt in the
//! cache (the server's own count of it, `server_input_tokens`), less at most
//! 2 tokens at the seam, and at most that prompt and the previous answer
//! (measured over two runs: 58 to 64 cached at turn 2, 86 to 93 at turn 3,
//! 113 to 123 at turn 4, each the previous prompt plus 0 to 5 of its 6
//! answer tokens);
//! turn 1 finds at most what another session or the readiness request left
//! in the slot. With `--no-cache-prompt` no turn finds any.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_llamacpp_multi_turn`.

use std::collections::BTreeMap;
use std::time::Duration;

use cicada_tests::servers::LlamaServer;
use cicada_tests::*;
use serde_json::Value;

/// Slots: as many as sessions in flight, so each session keeps its slot.
const SLOTS: u32 = 2;
const SESSIONS: u64 = 4;
const TURNS: usize = 4;
/// Tokens at the seam between the cached prefix and a turn that the server
/// may evaluate again (measured: 0 with llama-server 0.3.36's tiny model).
const SEAM: u64 = 2;

/// A turn as `requests.jsonl` records it: (cached, the server's prompt
/// tokens, output tokens).
type Turn = (u64, u64, u64);

/// Each session's turns in the order they were sent.
fn sessions(out: &std::path::Path) -> BTreeMap<u64, Vec<Turn>> {
    let lines = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let mut by: BTreeMap<u64, Vec<(u64, Turn)>> = BTreeMap::new();
    for l in lines.lines() {
        let r: Value = serde_json::from_str(l).unwrap();
        assert_eq!(r["outcome"], "ok", "{r}");
        by.entry(r["index"].as_u64().unwrap()).or_default().push((
            r["sent_us"].as_u64().unwrap(),
            (
                r["cached_tokens"].as_u64().unwrap_or(0),
                r["server_input_tokens"].as_u64().unwrap(),
                r["output_tokens"].as_u64().unwrap(),
            ),
        ));
    }
    by.into_iter()
        .map(|(s, mut t)| {
            t.sort_unstable();
            (s, t.into_iter().map(|(_, turn)| turn).collect())
        })
        .collect()
}

fn run(server: &LlamaServer) -> (BTreeMap<u64, Vec<Turn>>, Value) {
    let dir = scratch();
    let text = format!(
        r#"seed = 3
[target]
backend = "llamacpp-chat"
base_url = "{}"
session_header = "X-Session-ID"
[tokenizer]
source = "{}"
[dataset]
kind = "multi_turn"
turns = {TURNS}
input_len = 48
per_turn_input_len = 12
output_len = 6
[load]
num_prompts = {SESSIONS}
request_rate = "inf"
max_concurrency = {SLOTS}
[output]
save_detailed = true
"#,
        server.url,
        server.tokenizer.display()
    );
    let (r, j) = run_scenario(dir.path(), "mt", &text, "1", &[], Duration::from_secs(600));
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        server.log()
    );
    (sessions(&dir.path().join("out-mt")), j)
}

#[test]
fn cached_tokens_rise_with_the_turn_as_the_workload_predicts() {
    let _g = serial();
    let server = LlamaServer::start(SLOTS, 1024);
    let (seen, j) = run(&server);
    assert_eq!(seen.len() as u64, SESSIONS, "{seen:?}");
    assert_eq!(j["completed"].as_u64(), Some(SESSIONS * TURNS as u64));
    eprintln!("per session (cached, server prompt, output): {seen:?}");
    for (s, turns) in &seen {
        assert_eq!(turns.len(), TURNS, "session {s}");
        for k in 1..TURNS {
            let (cached, prompt, _) = turns[k];
            let (_, before, answered) = turns[k - 1];
            // the previous turn's whole prompt is still in the slot, and at
            // most that prompt and its answer can be
            assert!(
                cached + SEAM >= before && cached <= before + answered,
                "session {s} turn {}: {cached} cached, the previous prompt {before} + answer {answered}: {turns:?}",
                k + 1
            );
            assert!(cached < prompt, "session {s}: {turns:?}");
            assert!(cached > turns[k - 1].0, "session {s}: not rising {turns:?}");
        }
    }
}

#[test]
fn without_the_prompt_cache_no_turn_is_served_from_it() {
    let _g = serial();
    let server = LlamaServer::start_with(SLOTS, 1024, &["--no-cache-prompt"]);
    let (seen, _) = run(&server);
    assert_eq!(seen.len() as u64, SESSIONS, "{seen:?}");
    eprintln!("per session (cached, server prompt, output): {seen:?}");
    for (s, turns) in &seen {
        assert!(
            turns.iter().all(|t| t.0 == 0),
            "session {s}: cached tokens without a cache {turns:?}"
        );
    }
}

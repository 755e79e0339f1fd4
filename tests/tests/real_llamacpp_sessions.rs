//! Synthetic multi-turn and agent sessions against a real `llama-server`
//! with its prompt cache (issue 37, items 1 and 2).
//!
//! Multi-turn: each turn carries the whole history, so
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
//! Agent sessions, one at a time on one slot: every request of a session
//! extends the session's first prompt (sub-agents start from the main
//! agent's history, tool results and answers join it), and the slot last
//! held a request of the same session, so each later request finds at
//! least that first prompt in the cache (less `SEAM`), and the cached
//! tokens rise with the turn index (`session_turn` in `requests.jsonl`).
//! Sub-agents fanned out at once queue for the one slot. With
//! `--no-cache-prompt`, none.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_llamacpp_sessions`.

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
/// tokens, output tokens, its turn index).
type Turn = (u64, u64, u64, u64);

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
                r["session_turn"].as_u64().expect("a session's turn index"),
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

/// `TURNS` turns of a growing history.
const MULTI_TURN: &str = r#"kind = "multi_turn"
turns = 4
input_len = 48
per_turn_input_len = 12
output_len = 6"#;

/// A session of 3 main-agent turns, fanning out into 2 sub-agents of 2
/// turns each with the seed's draws, with tool waits.
const AGENTIC: &str = r#"kind = "agentic"
turns = 3
input_len = 64
per_turn_input_len = 16
output_len = 6
fan_out_chance = 0.7
fan_out = 2
depth = 1
sub_agent_turns = 2
tool_chance = 0.5
tool_delay = "10ms"
tool_delay_max = "40ms"
tool_output_len = 24"#;

/// Run `dataset` (a `[dataset]` body) with `sessions` sessions, at most
/// `slots` in flight.
fn run(
    server: &LlamaServer,
    dataset: &str,
    sessions_n: u64,
    slots: u32,
) -> (BTreeMap<u64, Vec<Turn>>, Value) {
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
{dataset}
[load]
num_prompts = {sessions_n}
request_rate = "inf"
max_concurrency = {slots}
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
    let (seen, j) = run(&server, MULTI_TURN, SESSIONS, SLOTS);
    assert_eq!(seen.len() as u64, SESSIONS, "{seen:?}");
    assert_eq!(j["completed"].as_u64(), Some(SESSIONS * TURNS as u64));
    eprintln!("per session (cached, server prompt, output): {seen:?}");
    for (s, turns) in &seen {
        assert_eq!(turns.len(), TURNS, "session {s}");
        for k in 1..TURNS {
            let (cached, prompt, _, turn) = turns[k];
            let (_, before, answered, _) = turns[k - 1];
            assert_eq!(turn, k as u64 + 1, "session {s}: {turns:?}");
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
    for (dataset, slots) in [(MULTI_TURN, SLOTS), (AGENTIC, 1)] {
        let (seen, _) = run(&server, dataset, SESSIONS, slots);
        assert_eq!(seen.len() as u64, SESSIONS, "{seen:?}");
        eprintln!("per session (cached, server prompt, output, turn): {seen:?}");
        for (s, turns) in &seen {
            assert!(
                turns.iter().all(|t| t.0 == 0),
                "session {s}: cached tokens without a cache {turns:?}"
            );
        }
    }
}

#[test]
fn agent_sessions_find_their_first_prompt_in_the_slot_and_more_each_turn() {
    let _g = serial();
    let server = LlamaServer::start(1, 2048);
    let (seen, j) = run(&server, AGENTIC, SESSIONS, 1);
    assert_eq!(seen.len() as u64, SESSIONS, "{seen:?}");
    assert_eq!(
        j["cicada"]["counters"]["sessions_completed"].as_u64(),
        Some(SESSIONS)
    );
    eprintln!("per session (cached, server prompt, output, turn): {seen:?}");
    // 3 main-agent turns each: more requests are sub-agents'
    assert!(seen.values().any(|t| t.len() > 3), "the seed fanned out");
    let mut by_turn: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (s, turns) in &seen {
        let (_, first, _, turn) = turns[0];
        assert_eq!(turn, 1, "session {s} starts with its first turn: {turns:?}");
        for &(cached, prompt, _, turn) in &turns[1..] {
            assert!(
                cached + SEAM >= first && cached < prompt,
                "session {s} turn {turn}: {cached} cached, its first prompt {first}: {turns:?}"
            );
            let e = by_turn.entry(turn).or_default();
            e.0 += cached;
            e.1 += 1;
        }
    }
    eprintln!("cached tokens by turn (sum, requests): {by_turn:?}");
    let means: Vec<f64> = by_turn
        .values()
        .map(|(sum, n)| *sum as f64 / *n as f64)
        .collect();
    assert!(means.len() >= 2, "{by_turn:?}");
    assert!(
        means.windows(2).all(|w| w[1] > w[0]),
        "mean cached tokens rise with the turn: {by_turn:?}"
    );
}

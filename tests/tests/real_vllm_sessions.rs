//! Synthetic multi-turn and agent sessions against the real vLLM 0.32 (CPU
//! build, tiny model; `scripts/vllm-server.sh`) with its prefix cache
//! (issue 37): each turn carries the session's history, so vLLM serves the
//! part it computed for an earlier turn from its cache. vLLM reports the
//! cached tokens per request (`usage.prompt_tokens_details.cached_tokens`,
//! with `--enable-prompt-tokens-details`; `cached_tokens` in
//! `requests.jsonl`) and in total on `/metrics`
//! (`vllm:prefix_cache_hits_total`); the test reads both and checks they
//! agree.
//!
//! What the workload predicts, with vLLM's CPU block of 128 tokens (it
//! caches whole blocks only, and always computes a prompt's last token):
//! a session's first turn finds nothing (its prompt is its own random
//! text; the chat template's few shared tokens fill no block). A later
//! turn (`session_turn` k ≥ 2) extends the prompt and answer of the request
//! before it on its path, one of the session's requests at turn k − 1, so
//! its cached tokens are at least that prompt rounded down to a block
//! (less `SEAM` tokens where the template re-tokenizes the answer) and
//! below its own prompt. For a multi-turn session the request before is
//! the previous turn itself, and the cache also holds at most its prompt
//! and answer. Cached tokens therefore rise with the turn index. With
//! `--no-enable-prefix-caching` no request finds any, and `/metrics`
//! counts none.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_vllm_sessions`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use cicada_tests::servers::VllmServer;
use cicada_tests::*;
use serde_json::Value;

/// vLLM's CPU KV-cache block, tokens: the prefix cache's unit.
const BLOCK: u64 = 128;
/// Tokens at the seam between a cached turn and the next that the chat
/// template may encode differently (the answer re-tokenized).
const SEAM: u64 = 2;
const ON: &[&str] = &["--enable-prefix-caching", "--enable-prompt-tokens-details"];
const OFF: &[&str] = &[
    "--no-enable-prefix-caching",
    "--enable-prompt-tokens-details",
];

fn cached_server() -> &'static VllmServer {
    VllmServer::shared_with(ON)
}

/// One request of a session as `requests.jsonl` records it.
#[derive(Debug, Clone, Copy)]
struct Turn {
    turn: u64,
    cached: u64,
    prompt: u64,
    answer: u64,
}

/// Each session's requests, in send order.
fn sessions(out: &Path) -> BTreeMap<u64, Vec<Turn>> {
    let lines = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let mut by: BTreeMap<u64, Vec<(u64, u64, Turn)>> = BTreeMap::new();
    for l in lines.lines() {
        let r: Value = serde_json::from_str(l).unwrap();
        assert_eq!(r["outcome"], "ok", "{r}");
        by.entry(r["index"].as_u64().unwrap()).or_default().push((
            r["sent_us"].as_u64().unwrap(),
            r["session_node"]
                .as_u64()
                .expect("a session's request names its node"),
            Turn {
                turn: r["session_turn"].as_u64().expect("and its turn"),
                cached: r["cached_tokens"].as_u64().unwrap_or(0),
                prompt: r["server_input_tokens"].as_u64().unwrap(),
                answer: r["output_tokens"].as_u64().unwrap(),
            },
        ));
    }
    by.into_iter()
        .map(|(s, mut t)| {
            t.sort_unstable_by_key(|(at, node, _)| (*at, *node));
            (s, t.into_iter().map(|(_, _, turn)| turn).collect())
        })
        .collect()
}

/// `vllm:prefix_cache_hits_total` now, from the server's own `/metrics`
/// (0 where the server does not export it: no prefix cache).
fn hits_total(server: &VllmServer) -> u64 {
    let (status, text) = get_text(&format!("{}/metrics", server.url));
    assert_eq!(status, 200);
    text.lines()
        .filter(|l| l.starts_with("vllm:prefix_cache_hits_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Run `dataset` (a TOML `[dataset]` body) against `server`: each session's
/// requests, result.json, and the hits `/metrics` counted meanwhile.
fn run(
    server: &VllmServer,
    name: &str,
    dataset: &str,
    sessions_n: u64,
) -> (BTreeMap<u64, Vec<Turn>>, Value, u64) {
    let dir = scratch();
    let text = format!(
        r#"seed = 11
[target]
backend = "vllm-chat"
base_url = "{url}"
model = "{model}"
session_header = "X-Session-ID"
# no readiness request: it would put a session's first prompt in the cache
ready_timeout = "0s"
[tokenizer]
source = "{tok}"
[sampling]
ignore_eos = true
[dataset]
{dataset}
[load]
num_prompts = {sessions_n}
request_rate = "inf"
max_concurrency = 2
[output]
save_detailed = true
"#,
        url = server.url,
        model = server.name,
        tok = server.model.display(),
    );
    let before = hits_total(server);
    let (r, j) = run_scenario(dir.path(), name, &text, "1", &[], Duration::from_secs(900));
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}\nserver log:\n{}",
        r.stdout,
        r.stderr,
        server.log_tail()
    );
    let hits = hits_total(server) - before;
    (sessions(&dir.path().join(format!("out-{name}"))), j, hits)
}

const MULTI_TURN: &str = r#"kind = "multi_turn"
turns = 4
input_len = 300
per_turn_input_len = 150
output_len = 8"#;

const AGENTIC: &str = r#"kind = "agentic"
turns = 3
input_len = 300
per_turn_input_len = 60
output_len = 8
fan_out_chance = 0.7
fan_out = 2
depth = 1
sub_agent_turns = 2
tool_chance = 0.5
tool_delay = "10ms"
tool_delay_max = "40ms"
tool_output_len = 64"#;

fn block_floor(n: u64) -> u64 {
    n / BLOCK * BLOCK
}

/// The checks every session run shares: requests.jsonl's cached tokens
/// add up to what `/metrics` counted, a first turn finds nothing, a later
/// one at least the smallest prompt of the turn before it (to a block) and
/// less than its own prompt, and the mean cached tokens rise with the turn.
fn check_predicted(seen: &BTreeMap<u64, Vec<Turn>>, hits: u64) {
    let cached: u64 = seen.values().flatten().map(|t| t.cached).sum();
    assert_eq!(
        cached, hits,
        "requests.jsonl's cached tokens against vllm:prefix_cache_hits_total"
    );
    let mut by_turn: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (s, turns) in seen {
        for t in turns {
            assert_eq!(t.cached % BLOCK, 0, "session {s}: whole blocks {turns:?}");
            let e = by_turn.entry(t.turn).or_default();
            e.0 += t.cached;
            e.1 += 1;
            if t.turn == 1 {
                assert_eq!(t.cached, 0, "session {s}: a first turn found {t:?}");
                continue;
            }
            let before = turns.iter().filter(|b| b.turn == t.turn - 1);
            let least = before.map(|b| b.prompt).min().expect("a turn before");
            assert!(
                t.cached >= block_floor(least.saturating_sub(SEAM)) && t.cached < t.prompt,
                "session {s} turn {}: {} cached; the turn before's smallest prompt {least}: {turns:?}",
                t.turn,
                t.cached
            );
        }
    }
    eprintln!("cached tokens by turn (sum, requests): {by_turn:?}");
    let means: Vec<f64> = by_turn
        .values()
        .map(|(sum, n)| *sum as f64 / *n as f64)
        .collect();
    assert!(means.len() >= 3, "{by_turn:?}");
    assert!(
        means.windows(2).all(|w| w[1] > w[0]),
        "mean cached tokens rise with the turn: {by_turn:?}"
    );
}

#[test]
fn multi_turn_sessions_hit_the_prefix_cache_as_the_workload_predicts() {
    let _g = serial();
    let (seen, j, hits) = run(cached_server(), "mt", MULTI_TURN, 4);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(j["completed"].as_u64(), Some(16));
    eprintln!("per session: {seen:?}");
    check_predicted(&seen, hits);
    // a multi-turn session's turn before is the previous one: the cache
    // holds at most its prompt and answer (to the block they fill)
    for (s, turns) in &seen {
        assert_eq!(turns.len(), 4, "session {s}");
        for k in 1..turns.len() {
            let (t, b) = (turns[k], turns[k - 1]);
            assert_eq!(t.turn, k as u64 + 1, "session {s}: {turns:?}");
            assert!(
                t.cached <= block_floor(b.prompt + b.answer + SEAM),
                "session {s} turn {}: {} cached, the previous prompt {} + answer {}",
                t.turn,
                t.cached,
                b.prompt,
                b.answer
            );
        }
    }
}

#[test]
fn agent_sessions_hit_the_prefix_cache_along_their_branches() {
    let _g = serial();
    let (seen, j, hits) = run(cached_server(), "agents", AGENTIC, 4);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(
        j["cicada"]["counters"]["sessions_completed"].as_u64(),
        Some(4)
    );
    eprintln!("per session: {seen:?}");
    // 3 main-agent turns each: more requests are sub-agents'
    assert!(
        seen.values().any(|turns| turns.len() > 3),
        "the seed fanned out: {seen:?}"
    );
    check_predicted(&seen, hits);
}

#[test]
fn without_the_prefix_cache_no_session_turn_is_served_from_it() {
    let _g = serial();
    // a server of its own, alive until the test binary ends
    let server = VllmServer::started_with(OFF);
    for (name, dataset) in [("mt", MULTI_TURN), ("agents", AGENTIC)] {
        let (seen, _, hits) = run(&server, name, dataset, 2);
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(hits, 0, "{name}: /metrics counted hits without a cache");
        for (s, turns) in &seen {
            assert!(
                turns.iter().all(|t| t.cached == 0),
                "{name} session {s}: cached tokens without a cache {turns:?}"
            );
        }
    }
}

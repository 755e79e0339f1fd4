//! Checks for datasets, shared by the `dataset` fuzz target and the
//! workspace test that replays its corpus.
//!
//! The input is the body of `[dataset]`, parsed through the whole scenario
//! path (which validates the dataset config) and, when valid and small
//! enough, built into a request pool. File-backed kinds fail here on their
//! (missing) files, which must be a located one-line error; their file
//! formats get their own checks (see docs/guide/testing.md, "Fuzzing").

use cicada_scenarios::dataset::{build_pool, pool_len};
use cicada_scenarios::scenario::{Dataset, DatasetKind};
use cicada_scenarios::{ScenarioError, parse};

/// Words a pool may hold before the check skips building it (keeps runs fast;
/// sizes are not capped by validation, see the fuzzing notes).
const MAX_WORDS: f64 = 200_000.0;

/// `[dataset]` body -> validated config -> pool: located errors or a pool
/// with exactly the asked-for entries, never a panic.
pub fn check(data: &[u8]) {
    let body = String::from_utf8_lossy(data);
    let text = format!("[target]\nbackend = \"mock\"\n[load]\nnum_prompts = 3\n[dataset]\n{body}");
    let scenario = match parse(&text, "fuzz.toml", &[]) {
        Ok(s) => s,
        Err(ScenarioError::Syntax { line, .. }) => {
            assert!(line >= 1 && line <= text.split('\n').count());
            return;
        }
        Err(ScenarioError::Invalid { problems }) => {
            assert!(!problems.is_empty());
            return;
        }
        Err(other) => panic!("unexpected error kind: {other:?}"),
    };
    let d = &scenario.dataset;
    let n = pool_len(&scenario);
    let len = |v: Option<u32>| f64::from(v.unwrap_or(0));
    // (shared prefix, longest prompt or answer, range ratio included)
    let (prefix, longest) = match d {
        Dataset::Random(r) => (
            r.prefix_len,
            r.input_len
                .longest(r.range_ratio)
                .max(r.output_len.longest(r.range_ratio)),
        ),
        Dataset::Sonnet(s) => (s.prefix_len, len(Some(s.input_len.max(s.output_len)))),
        Dataset::Prefix(p) => (p.prefix_len, p.output_len.longest(0.0)),
        Dataset::Sharegpt(s) => (0, len(s.output_len)),
        Dataset::Jsonl(j) => (0, len(j.output_len)),
        Dataset::Conversations(c) => (0, len(c.output_len)),
        // every turn's message and answer, over the most turns
        Dataset::MultiTurn(m) => {
            let per_turn = m.per_turn_input_len.as_ref().unwrap_or(&m.input_len);
            let turn =
                m.input_len.longest(0.0).max(per_turn.longest(0.0)) + m.output_len.longest(0.0);
            (0, turn * f64::from(m.turn_range().1.max(m.turn_range().0)))
        }
        // every node's message, answer and tool result, over the most
        // nodes a session may have (fan-outs stop at 10,000 nodes)
        Dataset::Agentic(a) => {
            let per_turn = a.per_turn_input_len.as_ref().unwrap_or(&a.input_len);
            let node = a.input_len.longest(0.0).max(per_turn.longest(0.0))
                + a.output_len.longest(0.0)
                + a.tool_output_len.longest(0.0);
            let branching = a.fan_out.longest(0.0) * a.sub_agent_turns.longest(0.0);
            let turns = f64::from(a.turn_range().1.max(a.turn_range().0));
            let nodes =
                (0..=a.depth.min(8)).fold(0.0, |sum, k| sum + turns * branching.powi(k as i32));
            (0, node * nodes.min(2.0 * 10_000.0))
        }
        Dataset::Trace(_) | Dataset::AgentTrace(_) => (0, 0.0),
        Dataset::RandomMm(r) => (
            r.prefix_len,
            r.input_len
                .longest(r.range_ratio)
                .max(r.output_len.longest(r.range_ratio)),
        ),
        // clips carry no text to count
        Dataset::Audio(_) => return,
    };
    let words = (len(Some(prefix)) + longest) * n as f64;
    if words > MAX_WORDS {
        return;
    }
    match build_pool(&scenario, None) {
        Ok(pool) => {
            assert_eq!(pool.entries.len() as u64, n);
            for (i, e) in pool.entries.iter().enumerate() {
                assert_eq!(e.id, i as u64);
                assert!(e.input_tokens >= 1);
                assert!(e.output_tokens.is_none_or(|t| t >= 1));
            }
        }
        Err(e) => {
            assert_ne!(d.kind(), DatasetKind::Random, "random cannot fail: {e}");
            assert!(!e.to_string().contains('\n'), "one line: {e}");
        }
    }
}

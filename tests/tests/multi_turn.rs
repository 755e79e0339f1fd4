//! Synthetic multi-turn sessions (issue 37, items 1 and 3): each session's
//! turns, lengths and pauses are drawn by the coordinator from the seed and
//! the session's index, so 1, 2 and 4 workers send the mock the same
//! sessions, each turn in order with the whole history, every request of a
//! session naming it in its session header; with several replicas a session
//! stays on one unless the scenario spreads its turns; bad settings name
//! file, line and key and send nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

/// 24 sessions of 1 to 5 turns, drawn lengths, drawn pauses, 6 in flight.
const SESSIONS: &str = r#"session_header = "x-session-id"
[dataset]
kind = "multi_turn"
min_turns = 1
max_turns = 5
input_len = 30
per_turn_input_len = { dist = "uniform", min = 2, max = 12 }
output_len = { dist = "uniform", min = 1, max = 9 }
think_time = "1ms"
think_time_max = "20ms"
[load]
num_prompts = 24
request_rate = "inf"
max_concurrency = 6
"#;

/// A session's turn as the mock saw it: (turn index, prompt tokens,
/// max_tokens, the roles of its messages, its user messages' fingerprints).
type SeenTurn = (u64, u64, u64, String, Vec<u64>);

/// Every session the mock saw, by global index, its turns in arrival order;
/// checks that each request names its session (the header and the request
/// id agree) and that turns arrived in order.
fn sessions_seen(mock: &Mock) -> BTreeMap<u64, Vec<SeenTurn>> {
    let mut log = mock.requests();
    log.sort_by_key(|r| r["seq"].as_u64().unwrap());
    let mut out: BTreeMap<u64, Vec<SeenTurn>> = BTreeMap::new();
    for r in &log {
        // cicada-<run>-c<session>-t<turn>-w<worker>
        let id = r["request_id"].as_str().unwrap();
        let parts: Vec<&str> = id.rsplitn(4, '-').collect();
        let session: u64 = parts[2].strip_prefix('c').unwrap().parse().unwrap();
        let turn: u64 = parts[1].strip_prefix('t').unwrap().parse().unwrap();
        let run = parts[3].strip_prefix("cicada-").unwrap();
        assert_eq!(
            r["session"].as_str(),
            Some(format!("{run}-s{session}").as_str()),
            "{r}"
        );
        let messages = r["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        let users = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["fingerprint"].as_u64().unwrap())
            .collect();
        out.entry(session).or_default().push((
            turn,
            r["prompt_tokens"].as_u64().unwrap(),
            r["max_tokens"].as_u64().unwrap(),
            roles.join(","),
            users,
        ));
    }
    out
}

#[test]
fn one_two_and_four_workers_send_the_same_sessions() {
    let _g = serial();
    let mut runs = Vec::new();
    for workers in ["1", "2", "4"] {
        let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
        let dir = scratch();
        let text = mock_chat_scenario("mt", 5, &mock.url, SESSIONS);
        let (run, result) = run_scenario(dir.path(), "s", &text, workers, &[], LIMIT);
        assert_ok(&run);
        let seen = sessions_seen(&mock);
        assert_eq!(seen.len(), 24, "{workers} workers: sessions {seen:?}");
        let turns: usize = seen.values().map(Vec::len).sum();
        assert_eq!(
            result["completed"].as_u64(),
            Some(turns as u64),
            "{workers} workers"
        );
        // the sessions' figures are the mock's
        let c = &result["cicada"]["counters"];
        assert_eq!(c["sessions_started"].as_u64(), Some(24), "{c}");
        assert_eq!(c["sessions_completed"].as_u64(), Some(24), "{c}");
        assert_eq!(c["session_turns"].as_u64(), Some(turns as u64), "{c}");
        let m = &result["cicada"]["metrics"];
        assert_eq!(m["ttft_first_turn"]["count"].as_u64(), Some(24), "{m}");
        assert_eq!(
            m["ttft_later_turns"]["count"].as_u64(),
            Some(turns as u64 - 24),
            "{m}"
        );
        for (s, t) in &seen {
            // turns arrive in order, each with the whole history: user and
            // assistant messages alternate and grow by two a turn
            for (k, turn) in t.iter().enumerate() {
                assert_eq!(turn.0, k as u64, "session {s}: {t:?}");
                let want = vec!["user"; k + 1].join(",assistant,");
                assert_eq!(turn.3, want, "session {s} turn {k}");
                if k > 0 {
                    assert_eq!(turn.4[..k], t[k - 1].4[..], "session {s}: history");
                }
            }
            // the first turn is input_len, each later one adds 2..=12 plus the answer
            assert_eq!(t[0].1, 30, "session {s}");
        }
        runs.push((workers, seen));
    }
    let (_, one) = &runs[0];
    for (workers, seen) in &runs[1..] {
        assert_eq!(
            seen.keys().collect::<Vec<_>>(),
            one.keys().collect::<Vec<_>>()
        );
        for (s, turns) in one {
            // the same turns, lengths asked and user messages; the prompt
            // lengths hold the mock's own answers, which are the asked lengths
            assert_eq!(&seen[s], turns, "{workers} workers: session {s}");
        }
    }
    // the turn counts are drawn, not one value
    let counts: BTreeSet<usize> = one.values().map(Vec::len).collect();
    assert!(counts.len() >= 3, "turn counts {counts:?}");
    assert!(counts.iter().all(|c| (1..=5).contains(c)), "{counts:?}");
}

/// Two replicas (two mocks), round robin: a session's turns stay on the
/// replica of its first turn; `sticky_sessions = false` spreads them.
#[test]
fn a_session_stays_on_one_replica_unless_told_otherwise() {
    let _g = serial();
    for sticky in [true, false] {
        let a = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
        let b = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
        let dir = scratch();
        let text = format!(
            r#"seed = 2
[target]
backend = "openai-chat"
urls = ["{}", "{}"]
model = "cicada-mock"
routing = "round_robin"
session_header = "x-dynamo-session-id"
sticky_sessions = {sticky}
[dataset]
kind = "multi_turn"
turns = 4
input_len = 8
per_turn_input_len = 3
output_len = 2
[load]
num_prompts = 10
request_rate = "inf"
max_concurrency = 4
"#,
            a.url, b.url
        );
        let (run, _) = run_scenario(dir.path(), "s", &text, "2", &[], LIMIT);
        assert_ok(&run);
        let on = |m: &Mock| -> BTreeMap<String, usize> {
            let mut by: BTreeMap<String, usize> = BTreeMap::new();
            for r in m.requests() {
                *by.entry(r["session"].as_str().unwrap().to_string())
                    .or_default() += 1;
            }
            by
        };
        let (on_a, on_b) = (on(&a), on(&b));
        let both: Vec<&String> = on_a.keys().filter(|s| on_b.contains_key(*s)).collect();
        assert_eq!(
            on_a.len() + on_b.len() - both.len(),
            10,
            "{on_a:?} {on_b:?}"
        );
        if sticky {
            assert!(both.is_empty(), "sessions on both replicas: {both:?}");
            assert!(on_a.values().chain(on_b.values()).all(|n| *n == 4));
        } else {
            // round robin by turn: every session alternates
            assert_eq!(both.len(), 10, "{on_a:?} {on_b:?}");
        }
    }
}

#[test]
fn bad_session_settings_name_file_line_and_key_and_send_nothing() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let dir = scratch();
    let cases = [
        (
            SESSIONS.replace("min_turns = 1", "min_turns = 7"),
            ":11: `dataset.max_turns`: the fewest turns (7) exceed the most (5)",
        ),
        (
            SESSIONS.replace("max_turns = 5", "max_turns = 0"),
            ":11: `dataset.max_turns`: must be at least 1",
        ),
        (
            SESSIONS.replace("max_turns = 5", "max_turns = 1000000000"),
            ":11: `dataset.max_turns`: at most 10000 turns a session, got 1000000000",
        ),
        (
            SESSIONS.replace("think_time = \"1ms\"", "think_time = -1"),
            ":15: `dataset.think_time`:",
        ),
        (
            SESSIONS.replace("\"20ms\"", "\"0ms\""),
            ":16: `dataset.think_time_max`: must be at least think_time (1ms)",
        ),
        (
            SESSIONS.replace("\"x-session-id\"", "\"x session\""),
            ":7: `target.session_header`: \"x session\" is not an HTTP header name",
        ),
    ];
    for (i, (tables, expect)) in cases.iter().enumerate() {
        let text = mock_chat_scenario("bad", 1, &mock.url, tables);
        let (run, result) = run_scenario(dir.path(), &format!("bad{i}"), &text, "2", &[], LIMIT);
        assert_ne!(run.code, Some(0), "{expect}: the run did not fail");
        assert!(result.is_null(), "{expect}: a result was written");
        let file = dir.path().join(format!("bad{i}.toml"));
        let want = format!("{}{expect}", file.display());
        assert!(run.stderr.contains(&want), "want {want}\n{}", run.stderr);
    }
    assert_eq!(
        mock.stats()["requests"].as_u64(),
        Some(0),
        "a request was sent"
    );
}

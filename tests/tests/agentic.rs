//! Agentic sessions (issue 37, item 2): a session is a tree. Its turns fan
//! out into sub-agents sent at once, each from the main agent's history so
//! far, and wait for tools (a delay, no request). Drawn by the coordinator
//! from the seed and the session's index, so 1, 2 and 4 workers send the
//! mock the same requests; a bad trace or bad knobs name file, line and
//! field and send nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(120);

/// 12 sessions of 3 main turns, sub-agents of sub-agents, tool waits.
const SESSIONS: &str = r#"session_header = "x-session-id"
[dataset]
kind = "agentic"
turns = 3
input_len = 30
per_turn_input_len = { dist = "uniform", min = 2, max = 9 }
output_len = { dist = "uniform", min = 1, max = 6 }
fan_out_chance = 0.6
fan_out = { dist = "uniform", min = 1, max = 3 }
depth = 2
sub_agent_turns = { dist = "uniform", min = 1, max = 2 }
tool_chance = 0.7
tool_delay = "30ms"
tool_output_len = 5
[load]
num_prompts = 12
request_rate = "inf"
max_concurrency = 4
"#;

/// A request as the mock saw it: (prompt tokens, max_tokens, the roles
/// of its messages, its user messages' fingerprints, arrival µs).
type Seen = (u64, u64, String, Vec<u64>, u64);

/// Every session the mock saw, by global index, its requests by node.
fn sessions_seen(mock: &Mock) -> BTreeMap<u64, BTreeMap<u64, Seen>> {
    let mut out: BTreeMap<u64, BTreeMap<u64, Seen>> = BTreeMap::new();
    for r in mock.requests() {
        // cicada-<run>-c<session>-t<node>-w<worker>
        let id = r["request_id"].as_str().unwrap();
        let parts: Vec<&str> = id.rsplitn(4, '-').collect();
        let session: u64 = parts[2].strip_prefix('c').unwrap().parse().unwrap();
        let node: u64 = parts[1].strip_prefix('t').unwrap().parse().unwrap();
        let run = parts[3].strip_prefix("cicada-").unwrap();
        if let Some(header) = r["session"].as_str() {
            assert_eq!(header, format!("{run}-s{session}"));
        }
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
        let seen = (
            r["prompt_tokens"].as_u64().unwrap(),
            r["max_tokens"].as_u64().unwrap(),
            roles.join(","),
            users,
            r["offset_us"].as_u64().unwrap(),
        );
        let old = out.entry(session).or_default().insert(node, seen);
        assert!(old.is_none(), "session {session} node {node} sent twice");
    }
    out
}

#[test]
fn one_two_and_four_workers_send_the_same_agent_sessions() {
    let _g = serial();
    let mut runs = Vec::new();
    for workers in ["1", "2", "4"] {
        let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
        let dir = scratch();
        let text = mock_chat_scenario("agentic", 5, &mock.url, SESSIONS);
        let (run, result) = run_scenario(dir.path(), "s", &text, workers, &[], LIMIT);
        assert_ok(&run);
        let seen = sessions_seen(&mock);
        assert_eq!(seen.len(), 12, "{workers} workers");
        let requests: usize = seen.values().map(BTreeMap::len).sum();
        assert_eq!(result["completed"].as_u64(), Some(requests as u64));
        let c = &result["cicada"]["counters"];
        assert_eq!(c["sessions_started"].as_u64(), Some(12), "{c}");
        assert_eq!(c["sessions_completed"].as_u64(), Some(12), "{c}");
        assert_eq!(c["session_turns"].as_u64(), Some(requests as u64), "{c}");
        let m = &result["cicada"]["metrics"];
        for k in [
            "session_duration",
            "session_tool_time",
            "session_server_time",
        ] {
            assert_eq!(m[k]["count"].as_u64(), Some(12), "{k}: {m}");
        }
        // requests per session, summed, are the requests
        let per = &m["session_requests"];
        assert_eq!(per["count"].as_u64(), Some(12), "{per}");
        let mean = per["mean"].as_f64().unwrap();
        assert!(
            (mean * 12.0 - requests as f64).abs() < 1e-6,
            "{per} {requests}"
        );
        // some session waited for a tool: at least its 30 ms
        assert!(
            m["session_tool_time"]["max"].as_f64().unwrap() >= 30.0,
            "{m}"
        );
        runs.push((workers, seen));
    }
    let (_, one) = &runs[0];
    for (workers, seen) in &runs[1..] {
        for (s, nodes) in one {
            // the same nodes, prompts, lengths asked, roles, first and own
            // messages (not the arrival times, nor the mock's answers, which
            // join a parent's history as user messages)
            type Kept = (u64, u64, u64, String, u64, u64);
            let strip = |n: &BTreeMap<u64, Seen>| -> Vec<Kept> {
                n.iter()
                    .map(|(k, v)| {
                        let (first, own) = (v.3[0], v.3[v.3.len() - 1]);
                        (*k, v.0, v.1, v.2.clone(), first, own)
                    })
                    .collect()
            };
            assert_eq!(
                strip(&seen[s]),
                strip(nodes),
                "{workers} workers: session {s}"
            );
        }
    }
    // the sessions are trees: sub-agents started from a shared prefix (two
    // requests of a session with one history and their own last message)
    // ran at once, and a session holds more requests than main turns
    let mut siblings = 0;
    for nodes in one.values() {
        let v: Vec<&Seen> = nodes.values().collect();
        for (i, a) in v.iter().enumerate() {
            for b in &v[i + 1..] {
                let n = a.3.len();
                if n > 1 && a.2 == b.2 && b.3.len() == n && a.3[..n - 1] == b.3[..n - 1] {
                    siblings += 1;
                }
            }
        }
    }
    assert!(siblings > 0, "no sub-agents forked from a shared prefix");
    assert!(one.values().any(|n| n.len() > 3), "no session fanned out");
}

/// A trace of two sessions in cicada's format.
const TRACE: &str = r#"{"session": "a", "id": 1, "kind": "llm", "input_len": 6, "output_len": 3}
{"session": "a", "id": 2, "parent": 1, "kind": "llm", "fork": true, "input_len": 3, "output_len": 2}
{"session": "a", "id": 3, "parent": 1, "kind": "llm", "fork": true, "input_len": 4, "output_len": 2}
{"session": "a", "id": 4, "parent": 1, "kind": "tool", "delay_ms": 40, "output_len": 5}
{"session": "a", "id": 5, "parent": 4, "kind": "llm", "input_len": 2, "output_len": 1}
{"session": "b", "id": 1, "kind": "llm", "input_len": 8, "output_len": 2}
"#;

fn trace_scenario(path: &std::path::Path) -> String {
    format!(
        r#"[dataset]
kind = "agent_trace"
path = "{}"
[load]
num_prompts = 2
request_rate = "inf"
max_concurrency = 2
"#,
        path.display()
    )
}

#[test]
fn a_trace_replays_its_tree() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let dir = scratch();
    let trace = write(dir.path(), "t.jsonl", TRACE);
    let text = mock_chat_scenario("trace", 1, &mock.url, &trace_scenario(&trace));
    let (run, result) = run_scenario(dir.path(), "s", &text, "2", &[], LIMIT);
    assert_ok(&run);
    let seen = sessions_seen(&mock);
    // session a: node 1, its sub-agents 2 and 3 at once, then (after the
    // tool, node 4) node 5 with both answers and the tool's result
    let a = &seen[&0];
    assert_eq!(a.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 4]);
    assert_eq!(a[&1].2, "user,assistant,user");
    assert_eq!(a[&1].2, a[&2].2);
    assert_eq!(
        a[&0].3[..],
        a[&1].3[..1],
        "the sub-agent starts from node 1's history"
    );
    // node 5: user 1, answer 1, the two sub-agents' answers, the tool, user 5
    assert_eq!(a[&4].2, "user,assistant,user,user,user,user");
    assert!(a[&4].4 >= a[&0].4 + 40_000, "the tool waited 40 ms");
    assert_eq!(seen[&1].len(), 1);
    let c = &result["cicada"]["counters"];
    assert_eq!(c["sessions_completed"].as_u64(), Some(2), "{c}");
}

#[test]
fn bad_agent_input_names_file_line_and_field_and_sends_nothing() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let dir = scratch();
    let traces = [
        (
            TRACE.replace(r#""id": 5, "parent": 4"#, r#""id": 5, "parent": 9"#),
            ":5: `parent`: session \"a\" has no node \"9\"",
        ),
        (
            TRACE.replace(
                r#""id": 1, "kind": "llm", "input_len": 6"#,
                r#""id": 1, "parent": 2, "kind": "llm", "input_len": 6"#,
            ),
            ":1: `parent`: session \"a\" has a cycle: 1 → 2 → 1",
        ),
        (
            TRACE.replace(r#""delay_ms": 40"#, r#""delay_ms": -40"#),
            ":4: `delay_ms`: must be ≥ 0, got -40",
        ),
        (
            TRACE.replace(r#""input_len": 8"#, r#""input_len": 0"#),
            ":6: `input_len`: must be at least 1, got 0",
        ),
    ];
    let mut cases: Vec<(String, String, String)> = Vec::new();
    for (i, (t, want)) in traces.iter().enumerate() {
        let p = write(dir.path(), &format!("bad{i}.jsonl"), t);
        let text = mock_chat_scenario("bad", 1, &mock.url, &trace_scenario(&p));
        cases.push((text, p.display().to_string(), want.to_string()));
    }
    // the generator's knobs: a weighted choice whose weights sum to zero, a
    // length bound below 1
    let knobs = [
        (
            SESSIONS.replace(
                "fan_out = { dist = \"uniform\", min = 1, max = 3 }",
                "fan_out = { mix = [{ weight = 0, dist = \"constant\", value = 2 }, { weight = 0, dist = \"constant\", value = 3 }] }",
            ),
            ":15: `dataset.fan_out.mix`: the weights sum to zero",
        ),
        (
            SESSIONS.replace("min = 1, max = 2", "min = 0, max = 2"),
            ":17: `dataset.sub_agent_turns.min`: must be at least 1, got 0",
        ),
    ];
    for (i, (t, want)) in knobs.iter().enumerate() {
        let text = mock_chat_scenario("bad", 1, &mock.url, t);
        let file = dir.path().join(format!("knobs{i}.toml"));
        cases.push((text, file.display().to_string(), want.to_string()));
    }
    for (i, (text, file, want)) in cases.iter().enumerate() {
        let name = if file.ends_with(".toml") {
            std::path::Path::new(file)
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .to_string()
        } else {
            format!("case{i}")
        };
        let (run, result) = run_scenario(dir.path(), &name, text, "2", &[], LIMIT);
        assert_ne!(run.code, Some(0), "{want}: the run did not fail");
        assert!(result.is_null(), "{want}: a result was written");
        let full = format!("{file}{want}");
        assert!(run.stderr.contains(&full), "want {full}\n{}", run.stderr);
    }
    assert_eq!(
        mock.stats()["requests"].as_u64(),
        Some(0),
        "a request was sent"
    );
}

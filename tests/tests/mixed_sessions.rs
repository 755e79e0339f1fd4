//! Mixed traffic with sessions (issue 37, item 5 with items 1 and 2): in a
//! `[[workloads]]` mix an arrival that picks a session workload (`agentic`,
//! `multi_turn`) starts one session instead of a request. The mock's request
//! log is the ground truth: each session's turns name it in the session
//! header and carry its growing history, plain requests carry neither; the
//! arrivals split by weight; 1, 2 and 4 workers send the same requests; the
//! per-workload figures (requests and sessions) add up to the run's; a
//! session holds its slot of `max_concurrency` for its whole life; bad
//! session workloads name file, line and key and send nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);
const ARRIVALS: u64 = 150;

/// 60 % plain chat, 20 % agent sessions (sub-agents, tool waits), 20 %
/// multi-turn chats, `arrivals` of them, at most `cap` in flight.
fn scenario(mock_url: &str, arrivals: u64, cap: u32) -> String {
    let tables = format!(
        r#"session_header = "x-session-id"
[dataset]
kind = "random"
input_len = 8
output_len = 4
[load]
num_prompts = {arrivals}
request_rate = "inf"
max_concurrency = {cap}

[[workloads]]
name = "chat"
weight = 6

[[workloads]]
name = "agents"
weight = 2
[workloads.dataset]
kind = "agentic"
turns = 3
input_len = 30
per_turn_input_len = {{ dist = "uniform", min = 2, max = 9 }}
output_len = {{ dist = "uniform", min = 1, max = 6 }}
fan_out_chance = 0.6
fan_out = {{ dist = "uniform", min = 1, max = 3 }}
depth = 1
sub_agent_turns = {{ dist = "uniform", min = 1, max = 2 }}
tool_chance = 0.5
tool_delay = "5ms"
tool_output_len = 5

[[workloads]]
name = "talk"
weight = 2
[workloads.dataset]
kind = "multi_turn"
min_turns = 2
max_turns = 4
input_len = 20
per_turn_input_len = 3
output_len = 2
think_time = "1ms"
"#
    );
    mock_chat_scenario("mixs", 11, mock_url, &tables)
}

/// One request as the mock saw it: (prompt tokens, max_tokens, the roles of
/// its messages, its user messages' fingerprints).
type Seen = (u64, u64, String, Vec<u64>);

/// The mock's log split by arrival: plain requests by global index, and
/// sessions by the index of the arrival that started them, each request
/// of a session by its node, in the order the mock received them.
#[derive(Default)]
struct Log {
    plain: BTreeMap<u64, Seen>,
    sessions: BTreeMap<u64, BTreeMap<u64, Seen>>,
    /// The arrival each request belongs to, in the mock's order.
    order: Vec<u64>,
}

fn log_of(mock: &Mock) -> Log {
    let mut log = mock.requests();
    log.sort_by_key(|r| r["seq"].as_u64().unwrap());
    let mut out = Log::default();
    for r in &log {
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
        );
        let id = r["request_id"].as_str().unwrap();
        let parts: Vec<&str> = id.rsplitn(4, '-').collect();
        let turn = parts[0]
            .strip_prefix('w')
            .is_some_and(|w| w.parse::<u32>().is_ok())
            && parts[1].starts_with('t');
        match parts[2].strip_prefix('c').filter(|_| turn) {
            // a session's turn: cicada-<run>-c<session>-t<node>-w<worker>,
            // naming its session in the header
            Some(session) => {
                let session: u64 = session.parse().unwrap();
                let node: u64 = parts[1].strip_prefix('t').unwrap().parse().unwrap();
                let run = parts[3].strip_prefix("cicada-").unwrap();
                assert_eq!(
                    r["session"].as_str(),
                    Some(format!("{run}-s{session}").as_str()),
                    "{r}"
                );
                let old = out.sessions.entry(session).or_default().insert(node, seen);
                assert!(old.is_none(), "session {session} node {node} sent twice");
                out.order.push(session);
            }
            // a plain request: cicada-<run>-<index>, one message, no session
            None => {
                let index: u64 = id.rsplit('-').next().unwrap().parse().unwrap();
                assert!(
                    r["session"].is_null(),
                    "a plain request named a session: {r}"
                );
                assert_eq!(seen.2, "user", "a plain request carries no history: {r}");
                assert!(out.plain.insert(index, seen).is_none());
                out.order.push(index);
            }
        }
    }
    out
}

/// The workload of a session, by its first request's prompt (each
/// dataset's first message has its own length).
fn workload_of(nodes: &BTreeMap<u64, Seen>) -> &'static str {
    match nodes[&0].0 {
        30 => "agents",
        20 => "talk",
        n => panic!("a session of no workload's shape: first prompt {n} tokens"),
    }
}

/// Each session's turns carry its growing history: a multi-turn chat's
/// turn `k` holds every earlier user message and answer; an agent
/// session's requests all start from its first message.
fn check_histories(log: &Log) {
    for (s, nodes) in &log.sessions {
        let first = &nodes[&0];
        match workload_of(nodes) {
            "talk" => {
                assert!((2..=4).contains(&nodes.len()), "session {s}: {nodes:?}");
                for (k, (node, turn)) in nodes.iter().enumerate() {
                    assert_eq!(*node, k as u64, "session {s}");
                    let want = vec!["user"; k + 1].join(",assistant,");
                    assert_eq!(turn.2, want, "session {s} turn {k}");
                    if k > 0 {
                        let before = &nodes[&(k as u64 - 1)];
                        assert_eq!(turn.3[..k], before.3[..], "session {s}: history");
                        assert!(turn.0 > before.0, "session {s}: the prompt grows");
                    }
                }
            }
            _ => {
                assert!(nodes.len() >= 3, "session {s}: {nodes:?}");
                for (node, r) in nodes.iter().skip(1) {
                    assert_eq!(r.3[0], first.3[0], "session {s} node {node}: its prefix");
                    assert!(
                        r.2.len() > first.2.len(),
                        "session {s} node {node}: history"
                    );
                }
            }
        }
    }
}

/// Arrivals per workload, and requests per workload, as the mock saw them.
fn split(log: &Log) -> (BTreeMap<&'static str, u64>, BTreeMap<&'static str, u64>) {
    let (mut arrivals, mut requests) = (BTreeMap::new(), BTreeMap::new());
    arrivals.insert("chat", log.plain.len() as u64);
    requests.insert("chat", log.plain.len() as u64);
    for nodes in log.sessions.values() {
        let w = workload_of(nodes);
        *arrivals.entry(w).or_default() += 1;
        *requests.entry(w).or_default() += nodes.len() as u64;
    }
    (arrivals, requests)
}

/// What must be the same for any worker count: every plain request, and
/// each session's nodes with their prompts, asked lengths, roles, first
/// and own messages (not the mock's answers, whose text follows its
/// arrival order and joins an agent's history as a user message).
type Kept = (
    BTreeMap<u64, Seen>,
    BTreeMap<u64, Vec<(u64, u64, u64, String, u64, u64)>>,
);

fn kept(log: &Log) -> Kept {
    let sessions = log
        .sessions
        .iter()
        .map(|(s, nodes)| {
            let nodes = nodes
                .iter()
                .map(|(k, v)| (*k, v.0, v.1, v.2.clone(), v.3[0], v.3[v.3.len() - 1]))
                .collect();
            (*s, nodes)
        })
        .collect();
    (log.plain.clone(), sessions)
}

/// result.json's and summary.csv's per-workload figures are the mock's
/// counts and add up to the run's.
fn check_figures(log: &Log, result: &Value, csv: &(Vec<String>, Vec<Vec<String>>), stdout: &str) {
    let (arrivals, requests) = split(log);
    let w: BTreeMap<String, Value> = result["cicada"]["workloads"]
        .as_array()
        .expect("cicada.workloads")
        .iter()
        .map(|w| (w["name"].as_str().unwrap().to_string(), w.clone()))
        .collect();
    for (name, n) in &requests {
        assert_eq!(
            w[*name]["sent"].as_u64(),
            Some(*n),
            "{name}: the mock's count"
        );
        assert_eq!(w[*name]["completed"].as_u64(), Some(*n), "{name}");
    }
    let total = |key: &str| -> u64 { w.values().map(|x| x[key].as_u64().unwrap()).sum() };
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
    ] {
        assert_eq!(
            Some(total(key)),
            result[key].as_u64(),
            "{key} sums to the total"
        );
    }
    assert_eq!(Some(total("sent")), result["cicada"]["sent"].as_u64());
    // each session workload's sessions: started, all completed, none cut;
    // the plain workload has none
    assert!(w["chat"]["sessions"].is_null(), "{}", w["chat"]);
    let c = &result["cicada"]["counters"];
    let mut started = 0;
    for name in ["agents", "talk"] {
        let s = &w[name]["sessions"];
        assert_eq!(s["started"].as_u64(), Some(arrivals[name]), "{name}: {s}");
        assert_eq!(s["completed"].as_u64(), Some(arrivals[name]), "{name}: {s}");
        assert_eq!(s["cut"].as_u64(), Some(0), "{name}: {s}");
        assert_eq!(s["turns"].as_u64(), Some(requests[name]), "{name}: {s}");
        started += arrivals[name];
    }
    assert_eq!(c["sessions_started"].as_u64(), Some(started), "{c}");
    assert_eq!(c["sessions_completed"].as_u64(), Some(started), "{c}");
    assert_eq!(
        c["session_turns"].as_u64(),
        Some(requests["agents"] + requests["talk"]),
        "{c}"
    );
    let (header, rows) = csv;
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r[col("target")].as_str()).collect();
    assert_eq!(
        labels,
        ["all", "workload:chat", "workload:agents", "workload:talk"]
    );
    for c in [col("completed"), col("total_input_tokens")] {
        let n = |r: &Vec<String>| r[c].parse::<u64>().unwrap();
        let sum: u64 = rows[1..].iter().map(n).sum();
        assert_eq!(sum, n(&rows[0]), "summary.csv column {}", header[c]);
    }
    let agents = stdout.split("----agents----").nth(1).expect(stdout);
    let line = format!("{:<40} {}", "Sessions started:", arrivals["agents"]);
    assert!(agents.contains(&line), "want {line:?} in\n{agents}");
}

#[test]
fn sessions_mix_with_plain_requests_the_same_for_any_worker_count() {
    let _g = serial();
    let mut runs = Vec::new();
    for workers in ["1", "2", "4"] {
        let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
        let dir = scratch();
        let text = scenario(&mock.url, ARRIVALS, 8);
        let (run, result) = run_scenario(dir.path(), "s", &text, workers, &[], LIMIT);
        assert_ok(&run);
        let log = log_of(&mock);
        // every arrival is one plain request or one session, none twice
        let plain: BTreeSet<u64> = log.plain.keys().copied().collect();
        let sessions: BTreeSet<u64> = log.sessions.keys().copied().collect();
        assert!(plain.is_disjoint(&sessions), "{workers} workers");
        let all: Vec<u64> = plain.union(&sessions).copied().collect();
        assert_eq!(all, (0..ARRIVALS).collect::<Vec<_>>(), "{workers} workers");
        check_histories(&log);
        let csv = read_csv(&dir.path().join("out-s").join("summary.csv"));
        check_figures(&log, &result, &csv, &run.stdout);
        runs.push((workers, log));
    }
    // the arrivals split by weight: binomial, 5 standard deviations
    let (arrivals, _) = split(&runs[0].1);
    let n = ARRIVALS as f64;
    for (name, p) in [("chat", 0.6), ("agents", 0.2), ("talk", 0.2)] {
        let k = arrivals[name] as f64;
        let bound = 5.0 * (n * p * (1.0 - p)).sqrt();
        assert!(
            (k - n * p).abs() <= bound,
            "{name}: {k} of {n}, expected {} ± {bound:.1}",
            n * p
        );
    }
    let one = kept(&runs[0].1);
    for (workers, log) in &runs[1..] {
        assert!(
            kept(log) == one,
            "{workers} workers sent other requests than 1"
        );
    }
}

#[test]
fn a_session_holds_its_slot_of_the_cap_for_its_whole_life() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let dir = scratch();
    let text = scenario(&mock.url, 30, 1);
    let (run, _) = run_scenario(dir.path(), "cap", &text, "2", &[], LIMIT);
    assert_ok(&run);
    let log = log_of(&mock);
    assert!(!log.sessions.is_empty() && !log.plain.is_empty());
    // one slot for the fleet: arrivals run one at a time in their global
    // order, a session's every request before the next arrival's first
    let mut runs = log.order.clone();
    runs.dedup();
    assert_eq!(runs, (0..30).collect::<Vec<_>>(), "{:?}", log.order);
}

#[test]
fn bad_session_workloads_name_file_line_and_key_and_send_nothing() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let dir = scratch();
    let good = scenario(&mock.url, 20, 4);
    let cases = [
        (
            good.replace(
                "kind = \"multi_turn\"",
                "kind = \"trace\"\npath = \"t.jsonl\"",
            )
            .replace("min_turns = 2\nmax_turns = 4\n", "")
            .replace(
                "per_turn_input_len = 3\noutput_len = 2\nthink_time = \"1ms\"\n",
                "",
            )
            .replace("input_len = 20\n", ""),
            ":42: `workloads[2].dataset.kind`: kind \"trace\" cannot be mixed with other workloads",
        ),
        (
            good.replace("fan_out_chance = 0.6", "fan_out_chance = 1.5"),
            ":30: `workloads[1].dataset.fan_out_chance`:",
        ),
        (
            good.replace("max_turns = 4", "max_turns = 1"),
            ":44: `workloads[2].dataset.max_turns`",
        ),
        (
            good.replace("request_rate = \"inf\"", "users = 3"),
            ":25: `workloads[1].dataset.kind`: the agentic workload's sessions start at the run's arrivals",
        ),
    ];
    for (i, (text, expect)) in cases.iter().enumerate() {
        let name = format!("bad{i}");
        let (run, result) = run_scenario(dir.path(), &name, text, "2", &[], LIMIT);
        assert_ne!(run.code, Some(0), "{expect}: the run did not fail");
        assert!(result.is_null(), "{expect}: a result was written");
        let file = dir.path().join(format!("{name}.toml"));
        let want = format!("{}{expect}", file.display());
        assert!(run.stderr.contains(&want), "want {want}\n{}", run.stderr);
    }
    assert_eq!(
        mock.stats()["requests"].as_u64(),
        Some(0),
        "a request was sent"
    );
}

//! The `agent_trace` workload: agent sessions read from a trace, in
//! cicada's own JSONL (one node per line, below) or as a Weka trace
//! (`weka.rs`). Both become the same session trees the `agentic`
//! generator draws.
//!
//! cicada's format: each line is one node of a session,
//! `{"session": S, "id": N, "parent": P, "kind": "llm"|"tool", ...}`.
//! `parent` is the node this one comes after (absent or null: the session's
//! first node, exactly one a session, an `llm` node). A node with `fork:
//! true` starts a sub-agent from its parent's history (its siblings run at
//! once); a node without continues its parent's branch, at most one per
//! parent, and waits for every sub-agent forked at that parent: their last
//! answers join the history first. An `llm` node sends `text`, or
//! `input_len` words (tokens), asking `output_len` tokens, `delay_ms` after
//! the step before it; a `tool` node sends nothing: it waits `delay_ms`,
//! then its result (`text` or `output_len` words) joins the history.
//! Sessions keep their order in the file; the first `n` are used.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;

use super::agent_tree::{Message, Tree, TurnSpec, turns};
use super::agentic::Texts;
use super::conversations::entry;
use super::exact::Vocab;
use super::jsonl::{for_each_line, line_error, parse_line};
use super::multi_turn::tokenizer_error as vocab_error;
use super::{Build, DatasetError, DatasetReport, PoolEntry};
use super::{tokenizer_error, weka};
use crate::scenario::{AgentTraceFormat, AgentTraceSpec};

/// RNG stream of a trace session's generated texts.
const STREAM: u64 = 15;

/// One line of cicada's agent trace format, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeIn {
    session: serde_json::Value,
    id: serde_json::Value,
    #[serde(default)]
    parent: serde_json::Value,
    kind: String,
    #[serde(default)]
    fork: bool,
    #[serde(default)]
    fresh: bool,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    input_len: Option<i64>,
    #[serde(default)]
    output_len: Option<i64>,
    #[serde(default)]
    delay_ms: Option<f64>,
}

/// A node checked on its own.
#[derive(Debug, Clone)]
struct Node {
    line: u64,
    id: String,
    parent: Option<String>,
    tool: bool,
    fork: bool,
    fresh: bool,
    message: Message,
    output_len: Option<u32>,
    delay_ms: Option<u64>,
}

/// What is wrong with a node, naming its field.
#[derive(Debug, thiserror::Error)]
#[error("`{field}`: {message}")]
struct Bad {
    field: &'static str,
    message: String,
}

fn bad(field: &'static str, message: impl Into<String>) -> Bad {
    Bad {
        field,
        message: message.into(),
    }
}

/// A JSON string or integer as an id; `None` for anything else.
fn id_of(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// A length field: at least 1.
fn length(field: &'static str, v: Option<i64>) -> Result<Option<u32>, Bad> {
    match v {
        None => Ok(None),
        Some(n) if n < 1 => Err(bad(field, format!("must be at least 1, got {n}"))),
        Some(n) => u32::try_from(n)
            .map(Some)
            .map_err(|_| bad(field, format!("must be at most {}, got {n}", u32::MAX))),
    }
}

/// Check one line on its own: (session, node) or what is wrong, naming the field.
fn node(n: NodeIn, line: u64) -> Result<(String, Node), Bad> {
    let session =
        id_of(&n.session).ok_or_else(|| bad("session", "must be a string or an integer"))?;
    let id = id_of(&n.id).ok_or_else(|| bad("id", "must be a string or an integer"))?;
    let parent = match &n.parent {
        serde_json::Value::Null => None,
        v => Some(id_of(v).ok_or_else(|| bad("parent", "must be a string, an integer or null"))?),
    };
    let tool = match n.kind.as_str() {
        "llm" => false,
        "tool" => true,
        k => {
            return Err(bad(
                "kind",
                format!("must be \"llm\" or \"tool\", got {k:?}"),
            ));
        }
    };
    let delay_ms = match n.delay_ms {
        None => None,
        Some(d) if !(d.is_finite() && d >= 0.0) => {
            return Err(bad("delay_ms", format!("must be ≥ 0, got {d}")));
        }
        Some(d) => Some(d.round() as u64),
    };
    if tool && delay_ms.is_none() {
        return Err(bad(
            "delay_ms",
            "required for a tool node (how long the tool runs)",
        ));
    }
    let input_len = length("input_len", n.input_len)?;
    let output_len = length("output_len", n.output_len)?;
    let message = match (n.text, input_len, tool, output_len) {
        (Some(_), Some(_), _, _) => return Err(bad("input_len", "give either text or input_len")),
        (Some(t), None, _, _) => Message::Text(t),
        (None, Some(l), false, _) => Message::Len(l),
        (None, None, false, _) => {
            return Err(bad("input_len", "an llm node needs text or input_len"));
        }
        (None, _, true, Some(l)) => Message::Len(l),
        (None, _, true, None) => {
            return Err(bad(
                "output_len",
                "a tool node needs text or output_len (its result)",
            ));
        }
    };
    Ok((
        session,
        Node {
            line,
            id,
            parent,
            tool,
            fork: n.fork,
            fresh: n.fresh,
            message,
            output_len: if tool { None } else { output_len },
            delay_ms,
        },
    ))
}

/// One session's nodes, in file order.
struct SessionNodes {
    name: String,
    nodes: Vec<Node>,
}

/// Link a session's nodes into its tree, or the line and field at fault.
fn tree(s: &SessionNodes) -> Result<Tree, (u64, String)> {
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (i, n) in s.nodes.iter().enumerate() {
        if let Some(&j) = by_id.get(n.id.as_str()) {
            let msg = format!(
                "`id`: session {:?} has node {:?} twice (line {})",
                s.name, n.id, s.nodes[j].line
            );
            return Err((n.line, msg));
        }
        by_id.insert(&n.id, i);
    }
    let mut root = None;
    // (continuation, forks) of each node
    let mut next: Vec<(Option<usize>, Vec<usize>)> = vec![(None, Vec::new()); s.nodes.len()];
    for (i, n) in s.nodes.iter().enumerate() {
        let Some(p) = &n.parent else {
            if let Some(r) = root {
                let first: &Node = &s.nodes[r];
                let msg = format!(
                    "`parent`: session {:?} has a first node already (line {}): give this one a parent",
                    s.name, first.line
                );
                return Err((n.line, msg));
            }
            if n.tool || n.fork {
                let msg = "`kind`: a session starts with an llm node that is not a fork";
                return Err((n.line, msg.into()));
            }
            root = Some(i);
            continue;
        };
        let Some(&pi) = by_id.get(p.as_str()) else {
            let msg = format!("`parent`: session {:?} has no node {p:?}", s.name);
            return Err((n.line, msg));
        };
        if n.fork {
            if n.tool {
                let msg = "`kind`: a sub-agent (fork) starts with an llm node";
                return Err((n.line, msg.into()));
            }
            next[pi].1.push(i);
        } else if let Some(other) = next[pi].0 {
            let msg = format!(
                "`fork`: node {p:?} is continued already (line {}); mark sub-agents \"fork\": true",
                s.nodes[other].line
            );
            return Err((n.line, msg));
        } else {
            next[pi].0 = Some(i);
        }
    }
    let Some(root) = root else {
        // every node has a parent: they form a cycle
        let n = &s.nodes[0];
        return Err((n.line, cycle(s, &by_id, 0)));
    };
    let mut seen = vec![false; s.nodes.len()];
    let turns = chain(s, &next, root, &mut seen);
    if let Some(i) = seen.iter().position(|v| !v) {
        return Err((s.nodes[i].line, cycle(s, &by_id, i)));
    }
    Ok(Tree { turns })
}

/// The message for a node that never reaches the session's first node.
fn cycle(s: &SessionNodes, by_id: &HashMap<&str, usize>, from: usize) -> String {
    let mut path = vec![from];
    let mut at = from;
    while let Some(p) = s.nodes[at].parent.as_deref().and_then(|p| by_id.get(p)) {
        if let Some(k) = path.iter().position(|x| x == p) {
            let ids: Vec<&str> = path[k..]
                .iter()
                .chain(std::iter::once(p))
                .map(|i| s.nodes[*i].id.as_str())
                .collect();
            return format!(
                "`parent`: session {:?} has a cycle: {}",
                s.name,
                ids.join(" → ")
            );
        }
        path.push(*p);
        at = *p;
    }
    format!(
        "`parent`: node {:?} never reaches its session's first node",
        s.nodes[from].id
    )
}

/// The branch starting at node `i`: it and its continuations.
fn chain(
    s: &SessionNodes,
    next: &[(Option<usize>, Vec<usize>)],
    mut i: usize,
    seen: &mut [bool],
) -> Vec<TurnSpec> {
    let mut out = Vec::new();
    loop {
        if seen[i] {
            break;
        }
        seen[i] = true;
        let n = &s.nodes[i];
        let forks = next[i]
            .1
            .iter()
            .map(|f| (s.nodes[*f].fresh, chain(s, next, *f, seen)))
            .collect();
        out.push(TurnSpec {
            message: n.message.clone(),
            output_len: n.output_len,
            think_ms: if n.tool { None } else { n.delay_ms },
            tool_ms: if n.tool { n.delay_ms } else { None },
            forks,
        });
        match next[i].0 {
            Some(c) => i = c,
            None => break,
        }
    }
    out
}

/// Read cicada's format: the first `n` sessions in file order, each checked.
fn read_cicada(
    path: &Path,
    n: u64,
    progress: &dyn super::Progress,
) -> Result<(Vec<Tree>, u64), DatasetError> {
    let mut sessions: Vec<SessionNodes> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let read = for_each_line(path, progress, |line, text| {
        let raw: NodeIn = parse_line(path, line, text)?;
        let (session, node) = node(raw, line).map_err(|m| line_error(path, line, m.to_string()))?;
        let i = *index.entry(session.clone()).or_insert_with(|| {
            sessions.push(SessionNodes {
                name: session,
                nodes: Vec::new(),
            });
            sessions.len() - 1
        });
        sessions[i].nodes.push(node);
        Ok(())
    })?;
    // every session is checked, even past the `n` used: a bad trace runs nothing
    let mut trees = Vec::with_capacity(sessions.len());
    for s in &sessions {
        trees.push(tree(s).map_err(|(line, m)| line_error(path, line, m))?);
    }
    trees.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    Ok((trees, read))
}

/// The pool: one session per entry.
pub(crate) fn build(
    b: &Build<'_, AgentTraceSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let path = b.d.path.as_path();
    let mut report = b.report();
    let (trees, read) = match b.d.format {
        AgentTraceFormat::Cicada => read_cicada(path, b.n, b.progress)?,
        AgentTraceFormat::Weka => weka::read(path, b.n, &mut report)?,
    };
    report.read = read;
    report.kept = trees.len() as u64;
    let vocab = match b.tokenizer {
        Some(t) => Some(Vocab::new(t).map_err(vocab_error)?),
        None => None,
    };
    let mut entries = Vec::with_capacity(trees.len());
    for (id, t) in trees.into_iter().enumerate() {
        let id = id as u64;
        let mut texts = Texts::new(b.seed, id, STREAM, vocab.as_ref());
        let turns =
            turns(t.turns, &mut texts, b.tokenizer).map_err(|e| tokenizer_error(path, e))?;
        report.inexact += texts.inexact;
        entries.push(entry(id, None, 0, turns));
    }
    Ok((entries, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::Scratch;

    fn run(path: &Path, n: u64) -> Result<Vec<PoolEntry>, String> {
        let d = AgentTraceSpec {
            path: path.to_path_buf(),
            format: AgentTraceFormat::Cicada,
            think_time: Default::default(),
        };
        let b = Build {
            d: &d,
            seed: 1,
            n,
            tokenizer: None,
            progress: &Silent,
        };
        build(&b).map(|(e, _)| e).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"{"session": "a", "id": 1, "kind": "llm", "input_len": 6, "output_len": 3}
{"session": "a", "id": 2, "parent": 1, "kind": "llm", "fork": true, "text": "look up x", "output_len": 2}
{"session": "a", "id": 3, "parent": 1, "kind": "llm", "fork": true, "input_len": 4, "output_len": 2}
{"session": "a", "id": 4, "parent": 1, "kind": "tool", "delay_ms": 25, "output_len": 5}
{"session": "a", "id": 5, "parent": 4, "kind": "llm", "input_len": 2, "output_len": 1, "delay_ms": 10}
{"session": "a", "id": 6, "parent": 2, "kind": "llm", "input_len": 3, "output_len": 1}
{"session": 7, "id": "x", "kind": "llm", "input_len": 1}
"#;

    #[test]
    fn nodes_become_a_tree_of_turns() {
        let dir = Scratch::new("agent-trace");
        let p = dir.file("t.jsonl", GOOD);
        let e = run(&p, 10).unwrap();
        assert_eq!(e.len(), 2);
        let c = e[0].conversation.as_ref().unwrap();
        assert_eq!(c.turns.len(), 3, "1, the tool 4, then 5");
        assert_eq!(c.requests(), 5);
        let first = &c.turns[0];
        assert_eq!((first.input_tokens, first.output_tokens), (6, Some(3)));
        assert_eq!(first.forks.len(), 2);
        assert_eq!(first.forks[0].turns.len(), 2, "2 then its continuation 6");
        assert_eq!(&*first.forks[0].turns[0].user, "look up x");
        assert_eq!(first.forks[0].turns[0].input_tokens, 3);
        assert_eq!((c.turns[1].tool_ms, c.turns[1].input_tokens), (Some(25), 5));
        assert_eq!(c.turns[2].think_ms, Some(10));
        assert_eq!(run(&p, 1).unwrap().len(), 1);
    }

    #[test]
    fn a_bad_trace_names_its_line_and_field() {
        let dir = Scratch::new("agent-trace-bad");
        let cases = [
            (
                GOOD.replace(r#""id": 5, "parent": 4"#, r#""id": 5, "parent": 9"#),
                ":5: `parent`: session \"a\" has no node \"9\"",
            ),
            (
                GOOD.replace(r#""id": 1, "kind""#, r#""id": 1, "parent": 6, "kind""#),
                ":1: `parent`: session \"a\" has a cycle: 1 → 6 → 2 → 1",
            ),
            (
                GOOD.replace(r#""delay_ms": 25"#, r#""delay_ms": -25"#),
                ":4: `delay_ms`: must be ≥ 0, got -25",
            ),
            (
                GOOD.replace(r#""input_len": 4"#, r#""input_len": 0"#),
                ":3: `input_len`: must be at least 1, got 0",
            ),
            (
                GOOD.replace(
                    r#""output_len": 1, "delay_ms""#,
                    r#""output_len": 0, "delay_ms""#,
                ),
                ":5: `output_len`: must be at least 1, got 0",
            ),
            (
                GOOD.replace(
                    r#""parent": 4, "kind": "llm""#,
                    r#""parent": 1, "kind": "llm""#,
                ),
                ":5: `fork`: node \"1\" is continued already (line 4)",
            ),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let p = dir.file(&format!("bad{i}.jsonl"), text);
            let e = run(&p, 1).unwrap_err();
            assert!(
                e.contains(&format!("bad{i}.jsonl{want}")),
                "want {want}\ngot {e}"
            );
        }
    }
}

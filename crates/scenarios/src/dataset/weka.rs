//! Weka KV-cache-tester agent traces (github.com/callanjfox/kv-cache-tester),
//! as AIPerf reads them (ai-dynamo/aiperf,
//! `src/aiperf/dataset/graph/adapters/weka/trace_models.py`): one JSON
//! object per file, `{"id", "requests": [...]}`, each request a model call
//! (`"type": "n"` or `"s"`, with `in` and `out` token counts and
//! `think_time` seconds) or a sub-agent (`"type": "subagent"`, with its own
//! `requests`, nested). A sub-agent forks from the parent's call before it
//! (AIPerf's SPAWN) with a context of its own, and the parent's next call
//! waits for it (SPAWN_JOIN); adjacent sub-agents run at once. `in` counts
//! the whole context, so a call's new message is `in` less the previous
//! call's `in + out` on its branch (at least 1). Hash ids, timestamps and
//! models are read and not used.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::DatasetError;
use super::DatasetReport;
use super::agent_tree::{Message, Tree, TurnSpec};

/// One trace file.
#[derive(Debug, Deserialize)]
struct Trace {
    requests: Vec<Request>,
}

/// One entry of a trace's (or a sub-agent's) `requests`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Request {
    /// A non-streaming call.
    #[serde(rename = "n")]
    Normal(Call),
    /// A streaming call (replayed alike: the scenario says whether to stream).
    #[serde(rename = "s")]
    Streaming(Call),
    /// A sub-agent and its own calls.
    #[serde(rename = "subagent")]
    Subagent { requests: Vec<Request> },
}

/// A model call.
#[derive(Debug, Deserialize)]
struct Call {
    #[serde(rename = "in")]
    input: u32,
    #[serde(rename = "out")]
    output: u32,
    #[serde(default)]
    think_time: Option<f64>,
}

/// The trace files under `path` (itself, or a directory's `*.json` by name).
fn files(path: &Path) -> Result<Vec<PathBuf>, DatasetError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let read = |e: std::io::Error| DatasetError::Read {
        path: path.display().to_string(),
        source: e,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).map_err(read)? {
        let p = entry.map_err(read)?.path();
        if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Read the first `n` traces: one session each.
pub(super) fn read(
    path: &Path,
    n: u64,
    report: &mut DatasetReport,
) -> Result<(Vec<Tree>, u64), DatasetError> {
    let files = files(path)?;
    let mut trees = Vec::new();
    for file in files.iter().take(usize::try_from(n).unwrap_or(usize::MAX)) {
        let text = std::fs::read_to_string(file).map_err(|source| DatasetError::Read {
            path: file.display().to_string(),
            source,
        })?;
        let mut de = serde_json::Deserializer::from_str(&text);
        let trace: Trace = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let line = e.inner().line() as u64;
            DatasetError::Line {
                path: file.display().to_string(),
                line,
                message: format!("`{}`: {}", e.path(), e.inner()),
            }
        })?;
        let turns = branch(&trace.requests, report);
        if turns.is_empty() {
            report.drop_for("no model call");
        } else {
            trees.push(Tree { turns });
        }
    }
    Ok((trees, files.len() as u64))
}

/// A branch's turns: its calls in order, each sub-agent forked from the
/// call before it.
fn branch(requests: &[Request], report: &mut DatasetReport) -> Vec<TurnSpec> {
    let mut out: Vec<TurnSpec> = Vec::new();
    let mut context: u32 = 0;
    for r in requests {
        match r {
            Request::Normal(c) | Request::Streaming(c) => {
                let new = c.input.saturating_sub(context).max(1);
                context = c.input.saturating_add(c.output);
                out.push(TurnSpec {
                    message: Message::Len(new),
                    output_len: Some(c.output.max(1)),
                    think_ms: c
                        .think_time
                        .filter(|t| t.is_finite() && *t >= 0.0)
                        .map(|t| (t * 1000.0).round() as u64),
                    tool_ms: None,
                    forks: Vec::new(),
                });
            }
            Request::Subagent { requests } => {
                let sub = branch(requests, report);
                match out.last_mut() {
                    Some(parent) if !sub.is_empty() => parent.forks.push((true, sub)),
                    // AIPerf drops a sub-agent with no call before it, too
                    _ => report.drop_for("sub-agent without a call before it"),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::testutil::Scratch;
    use crate::scenario::DatasetKind;

    #[test]
    fn calls_become_turns_and_subagents_fork_from_the_call_before() {
        let dir = Scratch::new("weka");
        dir.file(
            "trace_0001.json",
            r#"{"id": "t1", "models": ["m"], "block_size": 64, "hash_id_scope": "local",
               "requests": [
                 {"t": 0, "type": "s", "model": "m", "in": 100, "out": 10, "hash_ids": [1, 2]},
                 {"t": 1, "type": "subagent", "agent_id": "a1", "subagent_type": "Explore", "status": "completed", "models": ["m"],
                  "requests": [{"t": 1.5, "type": "n", "model": "m", "in": 30, "out": 5}]},
                 {"t": 2, "type": "subagent", "agent_id": "a2", "subagent_type": "Explore", "status": "completed", "models": ["m"],
                  "requests": [{"t": 2.5, "type": "n", "model": "m", "in": 40, "out": 6},
                               {"t": 3, "type": "n", "model": "m", "in": 50, "out": 7, "think_time": 0.25}]},
                 {"t": 9, "type": "s", "model": "m", "in": 180, "out": 20, "think_time": 1.5}
               ]}"#,
        );
        let mut report = DatasetReport::new(DatasetKind::AgentTrace, None);
        let (trees, files) = read(&dir.0, 10, &mut report).unwrap();
        assert_eq!((trees.len(), files), (1, 1));
        let t = &trees[0].turns;
        assert_eq!(t.len(), 2);
        assert!(matches!(t[0].message, Message::Len(100)));
        assert_eq!(t[0].output_len, Some(10));
        // both sub-agents fork from the first call, each with its own context
        assert_eq!(t[0].forks.len(), 2);
        assert!(t[0].forks.iter().all(|(fresh, _)| *fresh));
        let second = &t[0].forks[1].1;
        assert!(
            matches!(second[1].message, Message::Len(4)),
            "50 - (40 + 6)"
        );
        assert_eq!(second[1].think_ms, Some(250));
        // the next call's new message: 180 - (100 + 10)
        assert!(matches!(t[1].message, Message::Len(70)));
        assert_eq!(t[1].think_ms, Some(1500));
        // a bad field names the file and the field
        let bad = dir.file(
            "bad.json",
            r#"{"requests": [{"type": "n", "in": -3, "out": 1}]}"#,
        );
        let e = read(&bad, 10, &mut report).err().unwrap().to_string();
        assert!(e.contains("bad.json:1: `requests[0]"), "{e}");
    }
}

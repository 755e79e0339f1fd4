//! The `jsonl` workload: one request per line, either
//! `{"prompt": "...", "output_tokens": N}`, `{"messages": [...]}` for chat,
//! or `{"query": "...", "documents": [...]}` for a rerank backend.
//! `output_tokens` is optional; `dataset.output_len` fixes every request's
//! length instead (like vLLM's `--custom-output-len`). A line may carry its
//! own `tools`, `tool_choice` and `response_format` (OpenAI chat's spelling),
//! which replace `[structured]`'s for that request. Lines are shuffled by
//! the seed (unless `shuffle = false`) and the first `n` kept; prompts are
//! sent as written (no chat template). Also the line reader for the other
//! JSONL workloads.

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

use super::json_array::Counting;
use super::select::{Smallest, order_key};
use super::shapes::ShapeTable;
use super::{
    Build, ChatMessage, DatasetError, DatasetReport, PoolEntry, Prompt, count_prompt, open,
    parallel, tokenizer_error,
};
use crate::scenario::JsonlSpec;

/// Call `f(line_number, line)` for every non-blank line (1-based numbers),
/// showing progress in bytes; returns the number of non-blank lines.
pub(crate) fn for_each_line(
    path: &Path,
    progress: &dyn super::Progress,
    mut f: impl FnMut(u64, &str) -> Result<(), DatasetError>,
) -> Result<u64, DatasetError> {
    let file = open(path)?;
    let total = file.metadata().map_or(0, |m| m.len());
    progress.start(
        &format!("reading {}", super::json_array::file_name(path)),
        total,
        "bytes",
    );
    let mut reader = BufReader::with_capacity(
        1 << 20,
        Counting {
            inner: file,
            progress,
        },
    );
    let mut line = String::new();
    let (mut number, mut records) = (0u64, 0u64);
    loop {
        line.clear();
        number += 1;
        let n = reader.read_line(&mut line).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                DatasetError::Line {
                    path: path.display().to_string(),
                    line: number,
                    message: "the line is not valid UTF-8".to_string(),
                }
            } else {
                DatasetError::Read {
                    path: path.display().to_string(),
                    source: e,
                }
            }
        })?;
        if n == 0 {
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        records += 1;
        f(number, &line)?;
    }
    progress.finish();
    Ok(records)
}

/// Parse one JSON line, naming the file and line on error.
pub(crate) fn parse_line<T: serde::de::DeserializeOwned>(
    path: &Path,
    number: u64,
    line: &str,
) -> Result<T, DatasetError> {
    serde_json::from_str(line).map_err(|e| line_error(path, number, e.to_string()))
}

pub(crate) fn line_error(path: &Path, line: u64, message: String) -> DatasetError {
    DatasetError::Line {
        path: path.display().to_string(),
        line,
        message,
    }
}

/// A chat message as datasets write it: content as a string or as parts.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageIn {
    pub role: String,
    pub content: Content,
}

/// Message content: a string, or a list of parts whose text parts are joined.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
pub(crate) struct Part {
    #[serde(default)]
    text: Option<String>,
}

impl Content {
    /// The text of the content.
    pub fn into_text(self) -> String {
        match self {
            Content::Text(t) => t,
            Content::Parts(parts) => parts.into_iter().filter_map(|p| p.text).collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Line {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<MessageIn>>,
    #[serde(default)]
    output_tokens: Option<u32>,
    #[serde(default)]
    tools: Option<serde_json::Value>,
    #[serde(default)]
    tool_choice: Option<serde_json::Value>,
    #[serde(default)]
    response_format: Option<serde_json::Value>,
    /// A rerank line's query (with `documents`).
    #[serde(default)]
    query: Option<String>,
    /// A rerank line's documents (with `query`).
    #[serde(default)]
    documents: Option<Vec<String>>,
}

struct Kept {
    prompt: Prompt,
    output: Option<u32>,
    /// Index of the line's own shape in the builder's table.
    shape: Option<u32>,
}

/// What the `jsonl` workload builds: the entries and the shapes they point into.
pub(crate) struct Built {
    pub entries: Vec<PoolEntry>,
    pub report: DatasetReport,
    pub shapes: Vec<cicada_request::OutputShape>,
}

/// The line's own tools / response format, interned (each new one compiled
/// once, so a bad schema names its line).
fn line_shape(
    path: &Path,
    number: u64,
    l: &mut Line,
    table: &mut ShapeTable,
) -> Result<Option<u32>, DatasetError> {
    if l.tools.is_none() && l.tool_choice.is_none() && l.response_format.is_none() {
        return Ok(None);
    }
    let bad = |e: cicada_request::ShapeError| line_error(path, number, e.to_string());
    let shape = cicada_request::OutputShape::read(
        l.tools.take().as_ref(),
        l.tool_choice.take().as_ref(),
        l.response_format.take().as_ref(),
    )
    .map_err(bad)?;
    if shape.is_empty() {
        return Ok(None);
    }
    let (i, new) = table.intern_new(shape.clone());
    if new {
        cicada_request::Structured::new(shape).map_err(bad)?;
    }
    Ok(Some(i))
}

/// A rerank line's prompt, when the line is one (`query` and `documents`
/// with neither `prompt` nor `messages`).
fn rerank_prompt(path: &Path, number: u64, l: &mut Line) -> Result<Option<Prompt>, DatasetError> {
    let (query, documents) = match (l.query.take(), l.documents.take()) {
        (None, None) => return Ok(None),
        (Some(q), Some(d)) => (q, d),
        _ => {
            return Err(line_error(
                path,
                number,
                "a rerank line gives both \"query\" and \"documents\"".into(),
            ));
        }
    };
    if l.prompt.is_some() || l.messages.is_some() {
        return Err(line_error(
            path,
            number,
            "give either \"query\" and \"documents\" or a prompt, not both".into(),
        ));
    }
    if documents.is_empty() {
        return Err(line_error(path, number, "\"documents\" is empty".into()));
    }
    Ok(Some(Prompt::Rerank { query, documents }))
}

fn to_prompt(
    path: &Path,
    number: u64,
    mut l: Line,
    shape: Option<u32>,
) -> Result<Kept, DatasetError> {
    if let Some(prompt) = rerank_prompt(path, number, &mut l)? {
        return Ok(Kept {
            prompt,
            output: None,
            shape,
        });
    }
    let prompt = match (l.prompt, l.messages) {
        (Some(p), None) => Prompt::Text(p.into()),
        (None, Some(m)) if !m.is_empty() => Prompt::Chat(
            m.into_iter()
                .map(|m| ChatMessage {
                    role: m.role.into(),
                    content: m.content.into_text().into(),
                })
                .collect(),
        ),
        (None, Some(_)) => {
            return Err(line_error(path, number, "\"messages\" is empty".into()));
        }
        (Some(_), Some(_)) => {
            return Err(line_error(
                path,
                number,
                "give either \"prompt\" or \"messages\", not both".into(),
            ));
        }
        (None, None) => {
            return Err(line_error(
                path,
                number,
                "missing field \"prompt\" (or \"messages\" for chat)".into(),
            ));
        }
    };
    if l.output_tokens == Some(0) {
        return Err(line_error(
            path,
            number,
            "\"output_tokens\" must be at least 1".into(),
        ));
    }
    Ok(Kept {
        prompt,
        output: l.output_tokens,
        shape,
    })
}

/// A line's input tokens: its prompt's, or for a rerank line the query's
/// beside each document's.
fn count_kept(
    tokenizer: Option<&crate::tokenizer::Tokenizer>,
    prompt: &Prompt,
) -> Result<u32, crate::tokenizer::TokenizerError> {
    match prompt {
        Prompt::Rerank { query, documents } => {
            let q = count_prompt(tokenizer, query)?;
            let docs = documents
                .iter()
                .map(|d| count_prompt(tokenizer, d))
                .collect::<Result<Vec<u32>, _>>()?;
            Ok(super::rerank::pair_tokens(q, docs))
        }
        other => count_prompt(tokenizer, &other.text()),
    }
}

/// The pool: the first `n` lines in seeded shuffled order.
pub(crate) fn build(b: &Build<'_, JsonlSpec>) -> Result<Built, DatasetError> {
    let path = b.d.path.as_path();
    let shuffle = b.d.shuffle;
    let mut sel: Smallest<Kept> = Smallest::new(b.n);
    let mut report = b.report();
    let mut index = 0u64;
    let mut table = ShapeTable::default();
    report.read = for_each_line(path, b.progress, |number, line| {
        let mut rec: Line = parse_line(path, number, line)?;
        let shape = line_shape(path, number, &mut rec, &mut table)?;
        let kept = to_prompt(path, number, rec, shape)?;
        if sel.offer(order_key(shuffle, b.seed, index), kept) {
            report.unused += 1;
        }
        index += 1;
        Ok(())
    })?;
    let kept = sel.into_sorted();
    let counts = parallel::try_map(&kept, |k| count_kept(b.tokenizer, &k.prompt))
        .map_err(|e| tokenizer_error(path, e))?;
    report.kept = kept.len() as u64;
    let fixed = b.d.output_len;
    let entries = kept
        .into_iter()
        .zip(counts)
        .enumerate()
        .map(|(id, (k, input_tokens))| PoolEntry {
            id: id as u64,
            prompt: k.prompt,
            input_tokens,
            output_tokens: fixed.or(k.output),
            conversation: None,
            shape: k.shape,
            media: super::Media::default(),
        })
        .collect();
    Ok(Built {
        entries,
        report,
        shapes: table.into_shapes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::{Scratch, tokenizer};
    use crate::scenario::JsonlSpec;

    fn run(
        path: &Path,
        n: u64,
        shuffle: bool,
        fixed: Option<u32>,
    ) -> Result<Vec<PoolEntry>, String> {
        let d = JsonlSpec {
            path: path.to_path_buf(),
            shuffle,
            output_len: fixed,
        };
        let b = Build {
            d: &d,
            seed: 1,
            n,
            tokenizer: None,
            progress: &Silent,
        };
        build(&b).map(|j| j.entries).map_err(|e| e.to_string())
    }

    #[test]
    fn prompts_and_chats_with_their_output_lengths() {
        let dir = Scratch::new("jsonl");
        let path = dir.file(
            "p.jsonl",
            "{\"prompt\": \"What is the capital of India?\", \"output_tokens\": 10}\n\n\
             {\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hello there\"}]}]}\n\
             {\"prompt\": \"third one\", \"id\": 7}\n",
        );
        let e = run(&path, 10, false, None).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            e[0].prompt,
            Prompt::Text("What is the capital of India?".into())
        );
        assert_eq!((e[0].input_tokens, e[0].output_tokens), (6, Some(10)));
        match &e[1].prompt {
            Prompt::Chat(m) => {
                assert_eq!(&*m[0].role, "system");
                assert_eq!(&*m[1].content, "hello there");
            }
            other => panic!("chat expected: {other:?}"),
        }
        assert_eq!(e[1].output_tokens, None);
        assert_eq!(e[2].prompt, Prompt::Text("third one".into()));
        let fixed = run(&path, 10, true, Some(5)).unwrap();
        assert!(fixed.iter().all(|e| e.output_tokens == Some(5)));
        assert_eq!(run(&path, 2, true, None).unwrap().len(), 2);
        // with a tokenizer the count includes the tokenizer's special tokens
        let tok = tokenizer();
        let d = JsonlSpec {
            path: path.clone(),
            shuffle: true,
            output_len: None,
        };
        let b = Build {
            d: &d,
            seed: 1,
            n: 10,
            tokenizer: Some(&tok),
            progress: &Silent,
        };
        let Built {
            entries, report, ..
        } = build(&b).unwrap();
        assert_eq!(report.counted_with, "trained-bpe");
        for e in entries {
            assert_eq!(
                e.input_tokens as usize,
                tok.count_with_special(&e.prompt.text()).unwrap()
            );
        }
    }

    /// A rerank line is a query and its documents; the query counts once per document.
    #[test]
    fn rerank_lines_are_a_query_and_documents() {
        let dir = Scratch::new("jsonl-rerank");
        let path = dir.file(
            "r.jsonl",
            "{\"query\": \"what is a cat\", \"documents\": [\"a small pet\", \"a big truck on a road\"]}\n",
        );
        let e = run(&path, 10, false, None).unwrap();
        assert_eq!(
            e[0].prompt,
            Prompt::Rerank {
                query: "what is a cat".into(),
                documents: vec!["a small pet".into(), "a big truck on a road".into()],
            }
        );
        assert_eq!(e[0].input_tokens, 4 + 3 + 4 + 6);
        assert_eq!(e[0].output_tokens, None);
    }

    #[test]
    fn malformed_lines_are_named() {
        let dir = Scratch::new("jsonl-bad");
        let cases = [
            ("{\"prompt\": \"a\"}\n{\"prompt\": \"b\"\n", ":2: ", "EOF"),
            (
                "{\"prompt\": \"a\"}\n\n{\"output_tokens\": 3}\n",
                ":3: ",
                "missing field \"prompt\"",
            ),
            (
                "{\"prompt\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n",
                ":1: ",
                "not both",
            ),
            ("{\"prompt\": 5}\n", ":1: ", "invalid type"),
            (
                "{\"prompt\": \"a\", \"output_tokens\": -1}\n",
                ":1: ",
                "invalid value",
            ),
            (
                "{\"prompt\": \"a\", \"output_tokens\": 0}\n",
                ":1: ",
                "at least 1",
            ),
            ("{\"messages\": []}\n", ":1: ", "empty"),
            (
                "{\"query\": \"q\"}\n",
                ":1: ",
                "both \"query\" and \"documents\"",
            ),
            ("{\"query\": \"q\", \"documents\": []}\n", ":1: ", "empty"),
            (
                "{\"query\": \"q\", \"documents\": [\"d\"], \"prompt\": \"p\"}\n",
                ":1: ",
                "not both",
            ),
            (
                "{\"messages\": [{\"content\": \"x\"}]}\n",
                ":1: ",
                "missing field `role`",
            ),
        ];
        for (i, (text, at, what)) in cases.iter().enumerate() {
            let p = dir.file(&format!("bad{i}.jsonl"), text);
            let e = run(&p, 10, true, None).unwrap_err();
            assert!(e.starts_with(&format!("{}{at}", p.display())), "{e}");
            assert!(e.contains(what), "{e}");
        }
        let mut bytes = b"{\"prompt\": \"ok\"}\n{\"prompt\": \"".to_vec();
        bytes.extend([0xff, 0xfe, b'"', b'}', b'\n']);
        let p = dir.0.join("utf8.jsonl");
        std::fs::write(&p, bytes).unwrap();
        assert!(
            run(&p, 10, true, None)
                .unwrap_err()
                .contains(":2: the line is not valid UTF-8")
        );
        assert!(
            run(&dir.file("empty.jsonl", "\n"), 10, true, None)
                .unwrap()
                .is_empty()
        );
    }
}

//! The `conversations` workload: multi-turn sessions. Each conversation's
//! user turns are sent one after another, each with every earlier message and
//! the model's real previous answers in `messages`; the dataset's own answers
//! only set how many tokens each turn asks for (unless `output_len` fixes it).
//!
//! The file is JSONL, one conversation per line, as
//! `{"messages": [{"role": "system"|"user"|"assistant", "content": ...}]}` or
//! ShareGPT's `{"conversations": [{"from": "human"|"gpt", "value": ...}]}`; a
//! file starting with `[` is read as a JSON array of such records (the ShareGPT
//! file itself). A leading system message is kept; consecutive user messages
//! form one turn. Conversations are shuffled by the seed and the first `n` kept.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use super::jsonl::{MessageIn, for_each_line, parse_line};
use super::select::{Smallest, order_key};
use super::{
    Build, ChatMessage, Conversation, DatasetError, DatasetReport, PoolEntry, Prompt, Turn,
    count_piece, json_array, open, parallel, tokenizer_error,
};
use crate::scenario::ConversationsSpec;

#[derive(Debug, Deserialize)]
struct Record {
    #[serde(default)]
    messages: Option<Vec<MessageIn>>,
    #[serde(default)]
    conversations: Option<Vec<ShareTurn>>,
}

#[derive(Debug, Deserialize)]
struct ShareTurn {
    from: String,
    value: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    System,
    User,
    Assistant,
}

fn role(name: &str) -> Option<Role> {
    match name.to_ascii_lowercase().as_str() {
        "system" => Some(Role::System),
        "user" | "human" => Some(Role::User),
        "assistant" | "gpt" | "chatgpt" | "bard" | "bing" | "model" => Some(Role::Assistant),
        _ => None,
    }
}

/// A conversation as text, before counting.
struct Session {
    system: Option<String>,
    /// (user message, the dataset's answer)
    turns: Vec<(String, Option<String>)>,
}

/// A record that is neither a chat nor a ShareGPT conversation: the whole
/// dataset is refused, naming the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Malformed {
    /// Both spellings at once.
    #[error("give either \"messages\" or \"conversations\", not both")]
    Both,
    /// Neither spelling.
    #[error("missing field \"messages\" (or ShareGPT's \"conversations\")")]
    Neither,
}

/// Shape a record into a session, or the reason it is dropped.
fn session(
    rec: Record,
    max_turns: Option<u32>,
) -> Result<Result<Session, &'static str>, Malformed> {
    let messages: Vec<(String, String)> = match (rec.messages, rec.conversations) {
        (Some(m), None) => m
            .into_iter()
            .map(|m| (m.role, m.content.into_text()))
            .collect(),
        (None, Some(c)) => c.into_iter().map(|t| (t.from, t.value)).collect(),
        (Some(_), Some(_)) => {
            return Err(Malformed::Both);
        }
        (None, None) => {
            return Err(Malformed::Neither);
        }
    };
    let mut s = Session {
        system: None,
        turns: Vec::new(),
    };
    for (k, (name, text)) in messages.into_iter().enumerate() {
        match role(&name) {
            None => return Ok(Err("unknown role")),
            Some(Role::System) if k == 0 => s.system = Some(text),
            Some(Role::System) => return Ok(Err("system message after the start")),
            Some(Role::User) => match s.turns.last_mut() {
                Some((user, None)) => {
                    user.push('\n');
                    user.push_str(&text);
                }
                _ => s.turns.push((text, None)),
            },
            Some(Role::Assistant) => {
                if let Some((_, answer @ None)) = s.turns.last_mut() {
                    *answer = Some(text);
                }
            }
        }
    }
    if let Some(m) = max_turns {
        s.turns.truncate(m as usize);
    }
    if s.turns.is_empty() {
        return Ok(Err("no user turn"));
    }
    Ok(Ok(s))
}

fn starts_with_bracket(path: &Path) -> Result<bool, DatasetError> {
    let mut head = [0u8; 256];
    let mut f = open(path)?;
    let n = f.read(&mut head).map_err(|source| DatasetError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(head[..n]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'['))
}

/// The pool: the first `n` conversations in seeded shuffled order.
pub(crate) fn build(
    b: &Build<'_, ConversationsSpec>,
) -> Result<(Vec<PoolEntry>, DatasetReport), DatasetError> {
    let path = b.d.path.as_path();
    let shuffle = b.d.shuffle;
    let max_turns = b.d.max_turns;
    let mut sel: Smallest<Session> = Smallest::new(b.n);
    let mut report = b.report();
    let mut offer =
        |index: u64, rec: Record, report: &mut DatasetReport| -> Result<(), Malformed> {
            match session(rec, max_turns)? {
                Err(reason) => report.drop_for(reason),
                Ok(s) => {
                    if sel.offer(order_key(shuffle, b.seed, index), s) {
                        report.unused += 1;
                    }
                }
            }
            Ok(())
        };
    if starts_with_bracket(path)? {
        report.read =
            json_array::for_each::<Record, _>(path, b.progress, "conversations", |i, rec| {
                offer(i, rec, &mut report).map_err(|m| DatasetError::Record {
                    path: path.display().to_string(),
                    record: i,
                    message: m.to_string(),
                })
            })?;
    } else {
        let mut index = 0;
        report.read = for_each_line(path, b.progress, |number, line| {
            let rec: Record = parse_line(path, number, line)?;
            offer(index, rec, &mut report)
                .map_err(|m| super::jsonl::line_error(path, number, m.to_string()))?;
            index += 1;
            Ok(())
        })?;
    }
    let sessions = sel.into_sorted();
    report.kept = sessions.len() as u64;
    let fixed = b.d.output_len;
    let tok = b.tokenizer;
    let conversations = parallel::try_map(&sessions, |s| {
        let system_tokens = match &s.system {
            Some(t) => count_piece(tok, t)?,
            None => 0,
        };
        let turns = s
            .turns
            .iter()
            .map(|(user, answer)| {
                Ok(Turn::chat(
                    user.clone(),
                    count_piece(tok, user)?,
                    match (fixed, answer) {
                        (Some(f), _) => Some(f),
                        (None, Some(a)) => Some(count_piece(tok, a)?.max(1)),
                        (None, None) => None,
                    },
                ))
            })
            .collect::<Result<Vec<Turn>, _>>()?;
        Ok(Conversation {
            system: s.system.as_deref().map(Into::into),
            system_tokens,
            turns,
        })
    })
    .map_err(|e| tokenizer_error(path, e))?;
    let entries = conversations
        .into_iter()
        .enumerate()
        .map(|(id, c)| entry(id as u64, c.system, c.system_tokens, c.turns))
        .collect();
    Ok((entries, report))
}

/// A session's pool entry: its first turn is the entry's prompt.
pub(super) fn entry(
    id: u64,
    system: Option<std::sync::Arc<str>>,
    system_tokens: u32,
    turns: Vec<Turn>,
) -> PoolEntry {
    let first = &turns[0];
    let mut messages: Vec<ChatMessage> = system
        .iter()
        .map(|s| ChatMessage::new("system", s.clone()))
        .collect();
    messages.push(ChatMessage::new("user", first.user.clone()));
    PoolEntry {
        id,
        prompt: Prompt::Chat(messages),
        input_tokens: system_tokens + first.input_tokens,
        output_tokens: first.output_tokens,
        conversation: Some(Conversation {
            system,
            system_tokens,
            turns,
        }),
        shape: None,
        media: super::Media::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::Scratch;
    use crate::scenario::ConversationsSpec;

    /// Output length and turns of the settings (unshuffled, no think time).
    type Limits = (Option<u32>, Option<u32>);

    fn run(path: &Path, n: u64, limits: Limits) -> Result<(Vec<PoolEntry>, DatasetReport), String> {
        let d = ConversationsSpec {
            path: path.to_path_buf(),
            output_len: limits.0,
            shuffle: false,
            think_time: Default::default(),
            max_turns: limits.1,
        };
        let b = Build {
            d: &d,
            seed: 1,
            n,
            tokenizer: None,
            progress: &Silent,
        };
        build(&b).map_err(|e| e.to_string())
    }

    #[test]
    fn both_formats_become_sessions_of_user_turns() {
        let dir = Scratch::new("conv");
        let jsonl = dir.file(
            "c.jsonl",
            r#"{"messages": [{"role": "system", "content": "be kind"}, {"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello you two three"}, {"role": "user", "content": "more"}, {"role": "user", "content": "please"}]}
{"conversations": [{"from": "human", "value": "a b"}, {"from": "gpt", "value": "c d e"}, {"from": "human", "value": "f"}, {"from": "gpt", "value": "g h"}]}
{"messages": [{"role": "assistant", "content": "only an answer"}]}
{"messages": [{"role": "narrator", "content": "x"}]}
"#,
        );
        let (e, r) = run(&jsonl, 10, (None, None)).unwrap();
        assert_eq!((r.read, r.kept, r.filtered), (4, 2, 2));
        assert_eq!(r.filter_reasons["no user turn"], 1);
        assert_eq!(r.filter_reasons["unknown role"], 1);
        let c = e[0].conversation.as_ref().unwrap();
        assert_eq!(c.system.as_deref(), Some("be kind"));
        assert_eq!(c.system_tokens, 2);
        assert_eq!(c.turns.len(), 2);
        assert_eq!(
            (c.turns[0].input_tokens, c.turns[0].output_tokens),
            (2, Some(4))
        );
        assert_eq!(&*c.turns[1].user, "more\nplease");
        assert_eq!(c.turns[1].output_tokens, None);
        match &e[0].prompt {
            Prompt::Chat(m) => assert_eq!(m.len(), 2),
            other => panic!("chat expected: {other:?}"),
        }
        assert_eq!(e[0].input_tokens, 4);
        let c = e[1].conversation.as_ref().unwrap();
        let outs: Vec<Option<u32>> = c.turns.iter().map(|t| t.output_tokens).collect();
        assert_eq!(outs, [Some(3), Some(2)]);
        let (e, _) = run(&jsonl, 10, (Some(9), Some(1))).unwrap();
        for x in &e {
            let c = x.conversation.as_ref().unwrap();
            assert_eq!(c.turns.len(), 1);
            assert_eq!(c.turns[0].output_tokens, Some(9));
        }
        // a JSON array (the ShareGPT file) works the same
        let array = dir.file(
            "c.json",
            r#"  [{"id": "1", "conversations": [{"from": "human", "value": "a b"}, {"from": "gpt", "value": "c"}]}]"#,
        );
        let (e, _) = run(&array, 10, (None, None)).unwrap();
        assert_eq!(&*e[0].conversation.as_ref().unwrap().turns[0].user, "a b");
    }

    #[test]
    fn malformed_conversations_are_named() {
        let dir = Scratch::new("conv-bad");
        let p = dir.file(
            "c.jsonl",
            "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n{\"turns\": []}\n",
        );
        let e = run(&p, 10, (None, None)).unwrap_err();
        assert!(e.contains("c.jsonl:2: missing field \"messages\""), "{e}");
        let p = dir.file("c.json", r#"[{"conversations": [{"from": "human"}]}]"#);
        let e = run(&p, 10, (None, None)).unwrap_err();
        assert!(
            e.contains("c.json: record [0]") && e.contains("missing field `value`"),
            "{e}"
        );
        let p = dir.file("both.json", r#"[{"conversations": [], "messages": []}]"#);
        let e = run(&p, 10, (None, None)).unwrap_err();
        assert!(e.contains("record [0]: give either"), "{e}");
    }
}

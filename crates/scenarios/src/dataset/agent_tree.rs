//! An agent session's tree before its texts, as the trace readers
//! (`agent_trace`, `weka`) build it, and its turns once their texts are made.

use super::agentic::Texts;
use super::{Branch, Turn, count_piece};
use crate::tokenizer::TokenizerError;

/// A node's message: its text, or a length to fill with words.
#[derive(Debug, Clone)]
pub(super) enum Message {
    Text(String),
    Len(u32),
}

/// A session as a tree of turns with placeholder messages.
pub(super) struct Tree {
    pub(super) turns: Vec<TurnSpec>,
}

/// A turn before its text: what it sends and its sub-agents.
pub(super) struct TurnSpec {
    pub(super) message: Message,
    pub(super) output_len: Option<u32>,
    pub(super) think_ms: Option<u64>,
    pub(super) tool_ms: Option<u64>,
    pub(super) forks: Vec<(bool, Vec<TurnSpec>)>,
}

/// The turns of a branch with their texts.
pub(super) fn turns(
    specs: Vec<TurnSpec>,
    texts: &mut Texts<'_>,
    tok: Option<&crate::tokenizer::Tokenizer>,
) -> Result<Vec<Turn>, TokenizerError> {
    let mut out = Vec::with_capacity(specs.len());
    for t in specs {
        let (user, tokens) = match t.message {
            Message::Text(s) => {
                let n = count_piece(tok, &s)?;
                (s, n)
            }
            Message::Len(n) => texts.message(n)?,
        };
        let mut forks = Vec::with_capacity(t.forks.len());
        for (fresh, b) in t.forks {
            forks.push(Branch {
                turns: turns(b, texts, tok)?,
                fresh,
            });
        }
        out.push(Turn {
            think_ms: t.think_ms,
            tool_ms: t.tool_ms,
            forks,
            ..Turn::chat(user, tokens, t.output_len)
        });
    }
    Ok(out)
}

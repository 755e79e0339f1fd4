//! What a request asks: plain text or a conversation.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A chat message as sent in a `messages` array. Its texts are shared
/// (`Arc<str>`): a session's history, the request that carries it and the
/// body written from it point at the same bytes, never a copy per turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Arc<str>,
    pub content: Arc<str>,
}

impl ChatMessage {
    /// A message of `role` saying `content` (shared, not copied).
    pub fn new(role: impl Into<Arc<str>>, content: impl Into<Arc<str>>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// The prompt of one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prompt {
    /// Plain text (sent as `prompt`, or as one user message to chat APIs),
    /// shared: every request and body built from it points at these bytes.
    Text(Arc<str>),
    /// A ready-made conversation (sent as `messages`, or joined for text APIs).
    Chat(Vec<ChatMessage>),
    /// Several texts pooled in one request (an embeddings `input` list).
    Batch(Vec<String>),
    /// A query and the documents a reranker scores against it.
    Rerank {
        query: String,
        documents: Vec<String>,
    },
    /// Token ids sent as they are (a completions `prompt: [ids]`): the
    /// server skips tokenization and counts exactly these.
    Tokens(Vec<u32>),
}

impl Prompt {
    /// All text of the prompt, a conversation's messages one a line: what a
    /// text-only API is sent, and what fingerprints and counts read.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Prompt::Text(t) => Cow::Borrowed(&**t),
            Prompt::Chat(msgs) => {
                let mut out = String::new();
                for m in msgs {
                    out.push_str(&m.content);
                    out.push('\n');
                }
                Cow::Owned(out)
            }
            Prompt::Batch(texts) => Cow::Owned(texts.join("\n")),
            Prompt::Rerank { query, documents } => {
                let mut out = query.clone();
                for d in documents {
                    out.push('\n');
                    out.push_str(d);
                }
                Cow::Owned(out)
            }
            Prompt::Tokens(ids) => {
                use std::fmt::Write as _;
                let mut out = String::with_capacity(ids.len() * 7);
                for (i, id) in ids.iter().enumerate() {
                    let sep = if i > 0 { " " } else { "" };
                    // writing into a String cannot fail
                    let _ = write!(out, "{sep}{id}");
                }
                Cow::Owned(out)
            }
        }
    }

    /// Bytes of text it holds (what a body built from it at least weighs;
    /// token ids count their JSON spelling, about seven bytes each).
    pub fn text_bytes(&self) -> usize {
        match self {
            Prompt::Text(t) => t.len(),
            Prompt::Chat(msgs) => msgs.iter().map(|m| m.content.len()).sum(),
            Prompt::Batch(texts) => texts.iter().map(String::len).sum(),
            Prompt::Rerank { query, documents } => {
                query.len() + documents.iter().map(String::len).sum::<usize>()
            }
            Prompt::Tokens(ids) => ids.len() * 7,
        }
    }

    /// Items a pooling server answers for: the texts of a batch, the
    /// documents of a rerank; 0 for a prompt that is generated from.
    pub fn items(&self) -> u32 {
        match self {
            Prompt::Batch(texts) => u32::try_from(texts.len()).unwrap_or(u32::MAX),
            Prompt::Rerank { documents, .. } => u32::try_from(documents.len()).unwrap_or(u32::MAX),
            Prompt::Text(_) | Prompt::Chat(_) | Prompt::Tokens(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A conversation's text is its messages one a line; its bytes, theirs.
    #[test]
    fn a_conversation_reads_one_message_a_line() {
        let chat = Prompt::Chat(vec![
            ChatMessage::new("system", "be brief"),
            ChatMessage::new("user", "hi"),
        ]);
        assert_eq!(chat.text(), "be brief\nhi\n");
        assert_eq!(chat.text_bytes(), 10);
        let text = Prompt::Text("hi there".into());
        assert!(matches!(text.text(), Cow::Borrowed("hi there")));
        assert_eq!(text.text_bytes(), 8);
        let ids = Prompt::Tokens(vec![7, 80, 9]);
        assert_eq!(ids.text(), "7 80 9");
        assert_eq!(ids.items(), 0);
    }

    /// The scenario file's and plan's spelling: `{"chat": [...]}`, `{"text": ...}`.
    #[test]
    fn prompts_keep_their_serde_spelling() {
        let chat = Prompt::Chat(vec![ChatMessage::new("user", "hi")]);
        let json = serde_json::to_string(&chat).unwrap();
        assert_eq!(json, r#"{"chat":[{"role":"user","content":"hi"}]}"#);
        assert_eq!(serde_json::from_str::<Prompt>(&json).unwrap(), chat);
        assert_eq!(
            serde_json::to_string(&Prompt::Text("x".into())).unwrap(),
            r#"{"text":"x"}"#
        );
        assert_eq!(
            serde_json::to_string(&Prompt::Tokens(vec![1, 2])).unwrap(),
            r#"{"tokens":[1,2]}"#
        );
    }
}

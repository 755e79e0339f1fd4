//! The pool as this worker sends it: each plan entry's prompt moved (never
//! copied or converted: it is the client's type too) into its question, with
//! the compiled shape it asks for (shared, never copied).

use std::collections::HashMap;
use std::sync::Arc;

use cicada_client::backend::{Ask, media};
use cicada_metrics::MediaSent;
use cicada_plan::pool::{ChatMessage, Conversation, PoolEntry, Prompt};
use cicada_request::Structured;

use super::StepError;

/// One pool entry, ready to be sent.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Position in the pool (the schedule's `pool_id`).
    pub id: u64,
    /// What the request asks: its prompt and output limit.
    pub ask: Ask,
    /// Prompt length in tokens, for the record.
    pub input_tokens: u32,
    /// The whole session, for the `conversations` workload.
    pub conversation: Option<Conversation>,
    /// The images, audio and pooling items it sends, counted for its record.
    pub media: MediaSent,
}

impl Entry {
    /// The entry, its shape (an index into `shapes`) resolved and its media
    /// counted (`sizes` keeps each synthetic image size's encoded length,
    /// measured once).
    pub fn new(
        e: PoolEntry,
        shapes: &[Arc<Structured>],
        sizes: &mut HashMap<(u32, u32), u64>,
    ) -> Result<Self, StepError> {
        let structured = match e.shape {
            None => None,
            Some(i) => Some(shapes.get(i as usize).cloned().ok_or(StepError::NoShape {
                id: e.id,
                shape: i,
                count: shapes.len(),
            })?),
        };
        let prompt = match &e.conversation {
            // a session's first turn, as its turns send it: the texts of
            // its conversation, not a second copy of them
            Some(conv) => shared_first_turn(conv),
            None => e.prompt,
        };
        Ok(Self {
            media: MediaSent {
                items: prompt.items(),
                ..media::sent(&e.media, sizes)
            },
            id: e.id,
            ask: Ask {
                prompt,
                media: e.media,
                output_tokens: e.output_tokens,
                structured,
            },
            input_tokens: e.input_tokens,
            conversation: e.conversation,
        })
    }
}

/// A session's first request (its system message and first user turn),
/// sharing the conversation's texts.
fn shared_first_turn(conv: &Conversation) -> Prompt {
    let mut messages: Vec<ChatMessage> = conv
        .system
        .iter()
        .map(|s| ChatMessage::new("system", s.clone()))
        .collect();
    if let Some(first) = conv.turns.first() {
        messages.push(ChatMessage::new("user", first.user.clone()));
    }
    Prompt::Chat(messages)
}

#[cfg(test)]
mod tests {
    use cicada_plan::pool::Turn;

    use super::*;

    /// A session's pool entry holds its first turn's text once: the
    /// entry's prompt points at the conversation's own text.
    #[test]
    fn a_sessions_first_turn_is_not_held_twice() {
        let conv = Conversation {
            system: Some("be brief".into()),
            system_tokens: 2,
            turns: vec![
                Turn::chat("first turn", 2, Some(4)),
                Turn::chat("next", 1, None),
            ],
        };
        let e = PoolEntry {
            id: 3,
            prompt: Prompt::Chat(vec![
                ChatMessage::new("system", "be brief"),
                ChatMessage::new("user", "first turn"),
            ]),
            input_tokens: 4,
            output_tokens: Some(4),
            conversation: Some(conv),
            shape: None,
            media: Default::default(),
        };
        let before = e.prompt.clone();
        let entry = Entry::new(e, &[], &mut HashMap::new()).unwrap();
        assert_eq!(entry.ask.prompt, before);
        let Prompt::Chat(msgs) = &entry.ask.prompt else {
            panic!("a session's prompt is a conversation");
        };
        let conv = entry.conversation.as_ref().unwrap();
        assert!(Arc::ptr_eq(&msgs[1].content, &conv.turns[0].user));
        assert!(Arc::ptr_eq(&msgs[0].content, conv.system.as_ref().unwrap()));
    }
}

//! The pool as this worker sends it: each plan entry's prompt moved (never
//! copied or converted: it is the client's type too) into its question.

use cicada_client::backend::Ask;
use cicada_scenarios::dataset::{Conversation, PoolEntry};

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
}

impl From<PoolEntry> for Entry {
    fn from(e: PoolEntry) -> Self {
        Self {
            id: e.id,
            ask: Ask {
                prompt: e.prompt,
                output_tokens: e.output_tokens,
            },
            input_tokens: e.input_tokens,
            conversation: e.conversation,
        }
    }
}

//! The pool as this worker sends it: each plan entry's prompt moved (never
//! copied or converted: it is the client's type too) into its question.

use std::collections::HashMap;

use cicada_client::backend::{Ask, media};
use cicada_metrics::MediaSent;
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
    /// The images and audio it sends, counted for its record.
    pub media: MediaSent,
}

impl Entry {
    /// The entry, its media counted (`sizes` keeps each synthetic image
    /// size's encoded length, measured once).
    pub fn new(e: PoolEntry, sizes: &mut HashMap<(u32, u32), u64>) -> Self {
        Self {
            media: media::sent(&e.media, sizes),
            id: e.id,
            ask: Ask {
                prompt: e.prompt,
                media: e.media,
                output_tokens: e.output_tokens,
            },
            input_tokens: e.input_tokens,
            conversation: e.conversation,
        }
    }
}

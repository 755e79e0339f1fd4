//! The pool as this worker sends it: each plan entry's prompt moved (never
//! copied or converted: it is the client's type too) into its question, with
//! the compiled shape it asks for (shared, never copied).

use std::collections::HashMap;
use std::sync::Arc;

use cicada_client::backend::{Ask, media};
use cicada_metrics::MediaSent;
use cicada_plan::pool::{Conversation, PoolEntry};
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
        Ok(Self {
            media: MediaSent {
                items: e.prompt.items(),
                ..media::sent(&e.media, sizes)
            },
            id: e.id,
            ask: Ask {
                prompt: e.prompt,
                media: e.media,
                output_tokens: e.output_tokens,
                structured,
            },
            input_tokens: e.input_tokens,
            conversation: e.conversation,
        })
    }
}

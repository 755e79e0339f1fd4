//! The pool as this worker sends it: each plan entry's prompt moved (never
//! copied or converted: it is the client's type too) into its question, with
//! the compiled shape it asks for (shared, never copied).

use std::sync::Arc;

use cicada_client::backend::Ask;
use cicada_request::Structured;
use cicada_scenarios::dataset::{Conversation, PoolEntry};

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
}

impl Entry {
    /// The entry, its shape (an index into `shapes`) resolved.
    pub fn new(e: PoolEntry, shapes: &[Arc<Structured>]) -> Result<Self, StepError> {
        let structured = match e.shape {
            None => None,
            Some(i) => Some(shapes.get(i as usize).cloned().ok_or(StepError::NoShape {
                id: e.id,
                shape: i,
                count: shapes.len(),
            })?),
        };
        Ok(Self {
            id: e.id,
            ask: Ask {
                prompt: e.prompt,
                output_tokens: e.output_tokens,
                structured,
            },
            input_tokens: e.input_tokens,
            conversation: e.conversation,
        })
    }
}

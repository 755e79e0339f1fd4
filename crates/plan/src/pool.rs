//! The request pool's entries as a plan carries them: what each sends and
//! its known lengths. The scenario's datasets build them (`cicada-scenarios`);
//! each worker gets the entries its stripe uses.

use serde::{Deserialize, Serialize};

/// What a pool entry sends.
pub use cicada_request::{Audio, ChatMessage, Image, Media, MediaFile, OutputShape, Prompt};

/// One user turn of a multi-turn conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The user's message.
    pub user: String,
    /// Tokens of the user's message alone.
    pub input_tokens: u32,
    /// Output tokens to ask for this turn, when known.
    pub output_tokens: Option<u32>,
    /// Pause before this turn (after the previous answer), ms, when the
    /// workload drew one for it; else the plan's think time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ms: Option<u64>,
}

/// A multi-turn session: each turn is sent with every earlier message and the
/// model's real answers, on one worker, one turn at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// A leading system message.
    pub system: Option<String>,
    /// Tokens of the system message.
    pub system_tokens: u32,
    /// The user turns, in order (never empty).
    pub turns: Vec<Turn>,
}

/// One prompt of the pool with its known lengths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolEntry {
    /// Position in the pool (request `i` uses entry `i mod pool size`).
    pub id: u64,
    /// What to send (for a conversation: its first turn).
    pub prompt: Prompt,
    /// Prompt length in tokens (the tokenizer's count, or words without one).
    pub input_tokens: u32,
    /// Output tokens to ask for, when the workload fixes it.
    pub output_tokens: Option<u32>,
    /// The whole session, for the `conversations` workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
    /// Index of its tools / response format in the pool's (and plan's) `shapes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<u32>,
    /// Images and audio sent with the prompt.
    #[serde(default, skip_serializing_if = "Media::is_empty")]
    pub media: Media,
}

//! Datasets: turning a scenario's `[dataset]` into the request pool.
//!
//! The coordinator builds the pool once, deterministically from the seed, and
//! ships each worker the entries its stripe of the schedule uses.

mod random;
mod words;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::scenario::{DatasetKind, Scenario};

/// Why a dataset could not be built.
#[derive(Debug, Error)]
pub enum DatasetError {
    /// The dataset file could not be read.
    #[error("{path}: cannot read the dataset: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A record is malformed.
    #[error("{path}: record {record}: {message}")]
    Record {
        path: String,
        record: u64,
        message: String,
    },
    /// Nothing was left to send.
    #[error("{origin}: the dataset yields no requests: {reason}")]
    Empty { origin: String, reason: String },
}

/// A chat message as sent in a `messages` array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// The prompt of one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prompt {
    /// Plain text (sent as `prompt`, or as one user message to chat APIs).
    Text(String),
    /// A ready-made conversation.
    Chat(Vec<ChatMessage>),
}

impl Prompt {
    /// All text of the prompt, for fingerprints and counting.
    pub fn text(&self) -> String {
        match self {
            Prompt::Text(t) => t.clone(),
            Prompt::Chat(msgs) => {
                let mut out = String::new();
                for m in msgs {
                    out.push_str(&m.content);
                    out.push('\n');
                }
                out
            }
        }
    }
}

/// One prompt of the pool with its known lengths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolEntry {
    /// Position in the pool (request `i` uses entry `i mod pool size`).
    pub id: u64,
    /// What to send.
    pub prompt: Prompt,
    /// Prompt length in tokens (the tokenizer's count, or words without one).
    pub input_tokens: u32,
    /// Output tokens to ask for, when the workload fixes it.
    pub output_tokens: Option<u32>,
}

/// Counts describing how the pool was built.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetReport {
    /// Records read from the source.
    pub read: u64,
    /// Records dropped by filters.
    pub filtered: u64,
    /// Records kept in the pool.
    pub kept: u64,
    /// How lengths were counted ("words" without a tokenizer).
    pub counted_with: String,
}

/// The request pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    pub entries: Vec<PoolEntry>,
    pub report: DatasetReport,
}

/// Entries the scenario's run needs: `num_prompts`, or the pool size for duration runs.
pub fn pool_len(s: &Scenario) -> u64 {
    match (s.load.num_prompts, s.load.duration) {
        (Some(n), _) => n,
        (None, Some(_)) => s.load.pool_size,
        (None, None) => crate::scenario::DEFAULT_NUM_PROMPTS,
    }
}

/// Build the request pool for a scenario.
pub fn build_pool(s: &Scenario) -> Result<Pool, DatasetError> {
    let n = pool_len(s);
    let pool = match s.dataset.kind {
        DatasetKind::Random => random::build(&s.dataset, s.seed, n),
    };
    if pool.entries.is_empty() {
        return Err(DatasetError::Empty {
            origin: s.dataset.kind.name().to_string(),
            reason: "no entries were produced".to_string(),
        });
    }
    Ok(pool)
}

//! The request pool's entries as a plan carries them: what each sends and
//! its known lengths. The scenario's datasets build them (`cicada-scenarios`);
//! each worker gets the entries its stripe uses.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What a pool entry sends.
pub use cicada_request::{Audio, ChatMessage, Image, Media, MediaFile, OutputShape, Prompt};

/// One user turn of a multi-turn conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The user's message (shared: the session's history holds this text,
    /// not a copy of it).
    pub user: Arc<str>,
    /// Tokens of the user's message alone.
    pub input_tokens: u32,
    /// Output tokens to ask for this turn, when known.
    pub output_tokens: Option<u32>,
    /// Pause before this turn (after the previous answer), ms, when the
    /// workload drew one for it; else the plan's think time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ms: Option<u64>,
    /// Set on a tool wait of an agentic session: no request is sent; after
    /// this many ms `user` (the tool's result, `input_tokens` long) joins
    /// the history and the branch goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_ms: Option<u64>,
    /// Sub-agents this turn fans out into once answered: each branch runs
    /// in parallel from the history so far (a shared prefix); the next turn
    /// of this branch waits for all of them and carries their last answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forks: Vec<Branch>,
}

impl Turn {
    /// A plain turn of a multi-turn session: a request, no fan-out.
    pub fn chat(user: impl Into<Arc<str>>, input_tokens: u32, output_tokens: Option<u32>) -> Turn {
        Turn {
            user: user.into(),
            input_tokens,
            output_tokens,
            think_ms: None,
            tool_ms: None,
            forks: Vec::new(),
        }
    }

    /// Requests this turn and its sub-agents send (a tool wait sends none).
    pub fn requests(&self) -> u64 {
        u64::from(self.tool_ms.is_none()) + self.forks.iter().map(Branch::requests).sum::<u64>()
    }

    /// Steps (requests and tool waits) of this turn and its sub-agents:
    /// the turn's nodes are numbered in this order, the turn first.
    pub fn nodes(&self) -> u64 {
        1 + self.forks.iter().map(Branch::nodes).sum::<u64>()
    }
}

/// One sub-agent of an agentic session: its turns, one after another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Branch {
    /// The sub-agent's turns in order (never empty; the first is a request).
    pub turns: Vec<Turn>,
    /// The sub-agent starts from an empty history (its own context), not
    /// from its parent's (a trace's sub-agent with a context of its own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh: bool,
}

impl Branch {
    /// Requests the branch sends, its sub-agents' included.
    pub fn requests(&self) -> u64 {
        self.turns.iter().map(Turn::requests).sum()
    }

    /// Steps of the branch, its sub-agents' included.
    pub fn nodes(&self) -> u64 {
        self.turns.iter().map(Turn::nodes).sum()
    }
}

/// A multi-turn session: each turn is sent with every earlier message and the
/// model's real answers, on one worker, one turn at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// A leading system message (shared by the session's turns).
    pub system: Option<Arc<str>>,
    /// Tokens of the system message.
    pub system_tokens: u32,
    /// The user turns, in order (never empty).
    pub turns: Vec<Turn>,
}

impl Conversation {
    /// Requests the session sends: its turns and every sub-agent's.
    pub fn requests(&self) -> u64 {
        self.turns.iter().map(Turn::requests).sum()
    }
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

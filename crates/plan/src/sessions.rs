//! How a worker runs sessions: a session workload's settings, for a
//! scenario of that kind alone (`Plan::conversations`) or one workload of a
//! mix (`WorkloadPart::sessions`).

use serde::{Deserialize, Serialize};

/// How a worker runs a session workload (`conversations`, `multi_turn`,
/// `agentic`, `agent_trace`): each arrival starts the conversation of its
/// pool entry, whose turns then follow one another on this worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationSettings {
    /// Pause between an answer and the next turn, ms (a turn's own
    /// `think_ms` wins).
    pub think_time_ms: u64,
    /// A session holds one of the worker's slots from its first turn to its
    /// end (the concurrency unit is the session, not the turn).
    #[serde(default)]
    pub session_slots: bool,
    /// Header naming the session, sent with each of its turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_header: Option<String>,
    /// Each turn picks its replica as a request of its own, instead of the
    /// session staying on the replica of its first turn.
    #[serde(default)]
    pub spread_turns: bool,
}

//! What one request asks of a serving API: the prompt (`cicada-request`'s,
//! moved in, never copied) and its output limit.

use cicada_request::Prompt;

/// One request's question: the prompt, and the output tokens it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub prompt: Prompt,
    /// `max_tokens` (or the API's name for it), when the workload fixes it.
    pub output_tokens: Option<u32>,
}

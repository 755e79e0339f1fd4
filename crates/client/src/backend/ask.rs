//! What one request asks of a serving API: the prompt (`cicada-request`'s,
//! moved in, never copied), what it sends beside the text, and its output limit.

use cicada_request::{Media, Prompt};

/// One request's question: the prompt, and the output tokens it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub prompt: Prompt,
    /// Images and audio sent with the prompt.
    pub media: Media,
    /// `max_tokens` (or the API's name for it), when the workload fixes it.
    pub output_tokens: Option<u32>,
}

//! What one request asks of a serving API: the prompt (`cicada-request`'s,
//! moved in, never copied), what it sends beside the text, its output limit,
//! and the shape its output must take (shared by every request that asks the
//! same).

use std::sync::Arc;

use cicada_request::{Media, Prompt, Structured};

/// One request's question: the prompt, its images and audio, the output
/// tokens it asks for, and the tools / response format it offers or asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub prompt: Prompt,
    /// Images and audio sent with the prompt.
    pub media: Media,
    /// `max_tokens` (or the API's name for it), when the workload fixes it.
    pub output_tokens: Option<u32>,
    /// Tools, tool choice and response format, with their compiled check.
    pub structured: Option<Arc<Structured>>,
}

//! What one request asks of a serving API: the prompt (`cicada-request`'s,
//! moved in, never copied), its output limit, and the shape its output must
//! take (shared by every request that asks the same).

use std::sync::Arc;

use cicada_request::{Prompt, Structured};

/// One request's question: the prompt, the output tokens it asks for, and
/// the tools / response format it offers or asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub prompt: Prompt,
    /// `max_tokens` (or the API's name for it), when the workload fixes it.
    pub output_tokens: Option<u32>,
    /// Tools, tool choice and response format, with their compiled check.
    pub structured: Option<Arc<Structured>>,
}
